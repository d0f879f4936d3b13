"""Targeted property tests of the shape rewrites (shlo_env/patterns/shape.py)."""

import jax.numpy as jnp
import pytest
from hypothesis import strategies as st
from jax import lax

from pattern_programs import DIM, ELEMENTWISE, permuted_shapes, programs, shape_text, shapes, text_programs
from shlo_env.patterns import shape as S
from shlo_env.testing import check_pattern


def _transpose_transpose(draw):
    s, p = draw(permuted_shapes())
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
    S.ElementwiseThroughBroadcast: programs(_ew_through_broadcast),
    S.BroadcastOfElementwise: programs(_broadcast_of_ew),
}


@pytest.mark.parametrize("pattern", list(CASES), ids=lambda p: p.name)
def test_pattern(pattern):
    check_pattern(pattern, CASES[pattern], max_examples=50)
