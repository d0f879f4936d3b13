"""Targeted property tests of the slice / concatenate / pad rewrites (shlo_env/patterns/slicing.py)."""

import jax.numpy as jnp
import pytest
from hypothesis import strategies as st
from jax import lax

from pattern_programs import DIM, programs, shape_text, shapes, text_programs
from shlo_env.patterns import slicing as S
from shlo_env.testing import check_pattern

BIG = st.integers(3, 6)


@st.composite
def _window(draw, n):
    lo = draw(st.integers(0, n - 1))
    hi = draw(st.integers(lo + 1, n))
    return lo, hi, draw(st.integers(1, 2))


def _slice_of_concat(draw):
    n1, n2, m = draw(DIM), draw(DIM), draw(DIM)
    lo, hi, _ = draw(_window(n2))
    return (lambda a, b: jnp.concatenate([a, b], axis=0)[n1 + lo:n1 + hi] * 2.0), [(n1, m), (n2, m)]


def _slice_of_slice(draw):
    n, m = draw(BIG), draw(DIM)
    lo, hi, st1 = draw(_window(n))
    k = len(range(lo, hi, st1))
    lo2, hi2, st2 = draw(_window(k))
    return (lambda x: lax.slice(lax.slice(x, (lo, 0), (hi, m), (st1, 1)), (lo2, 0), (hi2, m), (st2, 1))), [(n, m)]


def _adjacent(draw):
    n, m = draw(BIG), draw(DIM)
    a = draw(st.integers(0, n - 2))
    b = draw(st.integers(a + 1, n - 1))
    c = draw(st.integers(b + 1, n))
    return (lambda x: jnp.concatenate([x[a:b], x[b:c]], axis=0) + 1.0), [(n, m)]


def _flatten(draw):
    m = draw(DIM)
    return (lambda a, b, c: jnp.concatenate([a, jnp.concatenate([b, c], axis=1)], axis=1)), \
        [(m, draw(DIM)), (m, draw(DIM)), (m, draw(DIM))]


def _pad_identity(draw):
    s = draw(shapes(1, 3))
    return (lambda x: lax.pad(x, 0.0, [(0, 0, 0)] * len(s)) * 3.0), [s]


def _slice_of_pad(draw):
    n, m = draw(BIG), draw(DIM)
    lo, hi = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    a, b, stride = draw(_window(n))
    return (lambda x: lax.slice(lax.pad(x, 0.0, [(lo, hi, 0), (1, 0, 0)]), (lo + a, 1), (lo + b, m + 1), (stride, 1))), \
        [(n, m)]


def _slice_of_elementwise(draw):
    n, m = draw(BIG), draw(DIM)
    a, b, stride = draw(_window(n))
    if draw(st.booleans()):
        return (lambda x, y: lax.clamp(-0.5, x * y, 0.5)[a:b:stride]), [(n, m), (n, m)]
    return (lambda x, y: jnp.tanh(x * y + 0.5)[a:b:stride]), [(n, m), (n, m)]


def _slice_of_broadcast(draw):
    s = draw(shapes(1, 2))
    n = draw(BIG)
    a, b, stride = draw(_window(n))
    if draw(st.booleans()):
        return (lambda x: jnp.broadcast_to(x, (n,) + s)[a:b:stride]), [s]
    return (lambda x: jnp.broadcast_to(x, (n, s[0]) if len(s) == 1 else (n,) + s)[a:b]), [(1,) + s[1:]]


def _slice_of_layer(draw):
    """A layer's output sliced on its batch or token dim: a dense layer (its input reshaped from
    heads), a GELU-like product, a layer norm's mean, or an attention (scores, softmax, values),
    maybe transposed; sometimes an intermediate is also returned (then it must stay whole)."""
    b, t, h, k = draw(DIM), draw(BIG), draw(DIM), draw(DIM)
    axis = draw(st.sampled_from([0, 1]))
    lo, hi, stride = draw(_window(b if axis == 0 else t))
    kind = draw(st.sampled_from(["dense", "attention"]))
    transpose, leak = draw(st.booleans()), draw(st.integers(0, 3)) == 0

    def layer(x, w):
        x = x.reshape(b, t, h * k)
        if kind == "dense":
            y = lax.dot_general(x, w, (((2,), (0,)), ((), ()))) + 0.5
            y = y * jnp.tanh(y)
            inner = jnp.mean(y, axis=-1, keepdims=True)
            y = (y - inner) * 2.0
        else:
            scores = lax.dot_general(x, x, (((2,), (2,)), ((0,), (0,))))  # (b, t, t)
            inner = jnp.exp(scores - jnp.max(scores, axis=-1, keepdims=True))
            p = inner / jnp.sum(inner, axis=-1, keepdims=True)
            y = lax.dot_general(p, x, (((2,), (1,)), ((0,), (0,))))  # (b, t, h*k)
        if transpose:
            y = jnp.transpose(y, (1, 0, 2))
        index = [slice(None)] * 3
        index[axis if not transpose else 1 - axis] = slice(lo, hi, stride)
        out = y[tuple(index)]
        return (out, inner) if leak else out

    return layer, [(b, t, h, k), (h * k, draw(DIM))]


CASES = {
    S.SliceOfConcat: programs(_slice_of_concat),
    S.SliceOfSlice: programs(_slice_of_slice),
    S.ConcatOfAdjacentSlices: programs(_adjacent),
    S.ConcatFlatten: programs(_flatten),
    S.PadIdentity: programs(_pad_identity),
    S.SliceOfPad: programs(_slice_of_pad),
    S.SliceOfElementwise: programs(_slice_of_elementwise),
    S.SliceOfBroadcast: programs(_slice_of_broadcast),
    S.SliceThroughCone: programs(_slice_of_layer),
    S.SliceFull: shapes(2, 2).flatmap(lambda shp: text_programs(
        "func.func @main(%x: tensor<{s}f32>) -> tensor<{s}f32> {{\n"
        '  %0 = "stablehlo.slice"(%x) {{start_indices = array<i64: 0, 0>, limit_indices = array<i64: {lim}>,'
        " strides = array<i64: 1, 1>}} : (tensor<{s}f32>) -> tensor<{s}f32>\n"
        "  %1 = stablehlo.exponential %0 : tensor<{s}f32>\n"
        "  return %1 : tensor<{s}f32>\n}}",
        s=st.just(shape_text(shp)), lim=st.just(", ".join(map(str, shp))))),
}


@pytest.mark.parametrize("pattern", list(CASES), ids=lambda p: p.name)
def test_pattern(pattern):
    res = check_pattern(pattern, CASES[pattern], max_examples=50)
    assert res.num_alternatives >= 25, f"{pattern.name} fired on only {res.num_alternatives} of 50 programs"
