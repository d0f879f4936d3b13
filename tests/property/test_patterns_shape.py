"""Targeted property tests of the shape rewrites (shlo_env/patterns/shape.py)."""

import math

import jax.numpy as jnp
import pytest
from hypothesis import strategies as st
from jax import lax

from pattern_programs import DIM, programs, shape_text, shapes, text_programs
from shlo_env.patterns import shape as S
from shlo_env.testing import check_pattern

ELEMENTWISE = [
    lambda a, b: a + b,
    lambda a, b: jnp.maximum(a, b) * 2.0,
    lambda a, b: jnp.tanh(a) - b,
    lambda a, b: jnp.where(a > b, a, b),
    lambda a, b: (a * 0.5).astype(jnp.float16).astype(jnp.float32),
    lambda a, b: lax.select(jnp.sum(a) > 0, a, a * 0.5 + b),  # a rank-0 predicate
    lambda a, b: lax.clamp(-0.5, a, 0.5) + b,  # rank-0 bounds
]


@st.composite
def _perm(draw, min_rank=2):
    s = draw(shapes(min_rank, 3))
    return s, draw(st.permutations(range(len(s))))


def _transpose_transpose(draw):
    s, p = draw(_perm())
    q = draw(st.permutations(range(len(s))))
    return (lambda x: jnp.sin(lax.transpose(lax.transpose(x, p), q))), [s]


def _reshape_reshape(draw):
    s = draw(shapes(1, 3))
    return (lambda x: x.reshape(-1).reshape(s[::-1]) + 1.0), [s]


def _identity_text(op_attr):
    return text_programs(
        "func.func @main(%x: tensor<{s}f32>) -> tensor<{s}f32> {{\n"
        "  %0 = " + op_attr + " : (tensor<{s}f32>) -> tensor<{s}f32>\n"
        "  %1 = stablehlo.tanh %0 : tensor<{s}f32>\n"
        "  return %1 : tensor<{s}f32>\n}}",
        s=shapes(2, 2).map(shape_text))


def _broadcast_broadcast(draw):
    s = draw(shapes(1, 2))
    n, k = draw(DIM), draw(DIM)
    return (lambda x: jnp.broadcast_to(jnp.broadcast_to(x, (n,) + s), (k, n) + s) * 3.0), [s]


@st.composite
def _size_one_transpose(draw):
    rank = draw(st.integers(2, 4))
    p = draw(st.permutations(range(rank)))
    s, last = [1] * rank, -1
    for i in p:
        if i > last and draw(st.booleans()):
            s[i] = draw(st.integers(2, 3))
            last = i
    return tuple(s), p


def _transpose_to_reshape(draw):
    s, p = draw(_size_one_transpose().filter(lambda sp: sp[1] != list(range(len(sp[1])))))
    return (lambda x: lax.transpose(x, p) * 2.0), [s]


def _ew_through_transpose(draw):
    s, p = draw(_perm())
    f = draw(st.sampled_from(ELEMENTWISE))
    if draw(st.booleans()):
        return (lambda a, b: f(lax.transpose(a, p), lax.transpose(b, p))), [s, s]
    return (lambda a, b: f(lax.transpose(a, p), 1.5) + b), [s, tuple(s[i] for i in p)]


def _transpose_of_ew(draw):
    s, p = draw(_perm())
    f = draw(st.sampled_from(ELEMENTWISE))
    return (lambda a, b: lax.transpose(f(a, b), p)), [s, s]


def _ew_through_reshape(draw):
    s = draw(shapes(1, 3))
    t = draw(st.sampled_from([(math.prod(s),), s[::-1], (1,) + s]))
    f = draw(st.sampled_from(ELEMENTWISE))
    if draw(st.booleans()):
        return (lambda a, b: f(a.reshape(t), b.reshape(t))), [s, s]
    return (lambda a, b: f(a.reshape(t), 0.25) * b), [s, t]


def _reshape_of_ew(draw):
    s = draw(shapes(1, 3))
    t = draw(st.sampled_from([(math.prod(s),), s[::-1], (1,) + s]))
    f = draw(st.sampled_from(ELEMENTWISE))
    return (lambda a, b: f(a, b).reshape(t)), [s, s]


def _ew_through_broadcast(draw):
    s = draw(shapes(1, 2))
    n = draw(DIM)
    f = draw(st.sampled_from(ELEMENTWISE))
    return (lambda a, b: f(jnp.broadcast_to(a, (n,) + s), jnp.broadcast_to(b, (n,) + s))), [s, s]


def _broadcast_of_ew(draw):
    s = draw(shapes(1, 2))
    n = draw(st.integers(2, 4))
    f = draw(st.sampled_from(ELEMENTWISE))
    return (lambda a, b: jnp.broadcast_to(f(a, b), (n,) + s) + 1.0), [s, s]


CASES = {
    S.TransposeOfTranspose: programs(_transpose_transpose),
    S.ReshapeOfReshape: programs(_reshape_reshape),
    S.TransposeIdentity: _identity_text('"stablehlo.transpose"(%x) {{permutation = array<i64: 0, 1>}}'),
    S.ReshapeIdentity: _identity_text('"stablehlo.reshape"(%x)'),
    S.BroadcastIdentity: _identity_text('"stablehlo.broadcast_in_dim"(%x) {{broadcast_dimensions = array<i64: 0, 1>}}'),
    S.BroadcastOfBroadcast: programs(_broadcast_broadcast),
    S.TransposeToReshape: programs(_transpose_to_reshape),
    S.ElementwiseThroughTranspose: programs(_ew_through_transpose),
    S.TransposeOfElementwise: programs(_transpose_of_ew),
    S.ElementwiseThroughReshape: programs(_ew_through_reshape),
    S.ReshapeOfElementwise: programs(_reshape_of_ew),
    S.ElementwiseThroughBroadcast: programs(_ew_through_broadcast),
    S.BroadcastOfElementwise: programs(_broadcast_of_ew),
}


@pytest.mark.parametrize("pattern", list(CASES), ids=lambda p: p.name)
def test_pattern(pattern):
    check_pattern(pattern, CASES[pattern], max_examples=50)
