"""Targeted property tests of the convert rewrites (shlo_env/patterns/convert.py)."""

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import strategies as st

from pattern_programs import DIM, programs, shape_text, shapes, text_programs
from shlo_env.patterns import convert as C
from shlo_env.patterns.convert import lossless
from shlo_env.testing import check_pattern

F16, F32, I8, I16, I32 = np.float16, np.float32, np.int8, np.int16, np.int32


def test_lossless_table():
    import ml_dtypes
    assert lossless(F16, F32) and lossless(ml_dtypes.bfloat16, F32) and lossless(I8, I32)
    assert lossless(I16, F32) and lossless(np.bool_, F16) and lossless(np.uint8, I16)
    assert not lossless(F32, F16) and not lossless(F16, ml_dtypes.bfloat16) and not lossless(I32, F32)
    assert not lossless(np.uint8, I8) and not lossless(F32, I32) and not lossless(I8, np.uint16)


def _round_trip(draw):
    s = draw(shapes(1, 3))
    src, mid = draw(st.sampled_from([(F16, F32), (I8, I32), (I16, F32), (I8, F16)]))
    return (lambda x: jnp.abs(x.astype(mid).astype(src))), [s], [src]


def _skip_lossless(draw):
    s = draw(shapes(1, 3))
    src, mid, dst = draw(st.sampled_from([(I8, F32, F16), (F16, F32, I32), (I8, I16, I32), (I16, I32, F16)]))
    if np.issubdtype(dst, np.integer) and not np.issubdtype(src, np.integer):
        src, mid, dst = I8, I16, I32
    return (lambda x: x.astype(mid).astype(dst) * 3), [s], [src]


def _before_movement(draw):
    s = draw(shapes(2, 3))
    n = draw(DIM)
    case = draw(st.integers(0, 3))
    if case == 0:
        return (lambda x: x.T.astype(F16)), [s]
    if case == 1:
        return (lambda x: x.reshape(-1).astype(F16)), [s]
    if case == 2:
        return (lambda x: jnp.broadcast_to(x, (n,) + s).astype(F16)), [s]
    return (lambda x: jnp.broadcast_to(x, (n,) + s).astype(F32)), [s], [F16]


def _after_movement(draw):
    s = draw(shapes(2, 3))
    case = draw(st.integers(0, 2))
    if case == 0:
        return (lambda x: x.astype(F32).T * 2), [s], [F16]
    if case == 1:
        return (lambda x: x.astype(I32).reshape(-1) + 1), [s], [I8]
    return (lambda x: x.astype(F16)[1:] + 1), [(s[0] + 1,) + s[1:]]


CASES = {
    C.ConvertSameType: shapes(1, 3).map(shape_text).flatmap(lambda s: text_programs(
        "func.func @main(%x: tensor<{s}f32>) -> tensor<{s}f32> {{\n"
        "  %0 = stablehlo.convert %x : (tensor<{s}f32>) -> tensor<{s}f32>\n"
        "  %1 = stablehlo.sine %0 : tensor<{s}f32>\n"
        "  return %1 : tensor<{s}f32>\n}}", s=st.just(s))),
    C.ConvertRoundTrip: programs(_round_trip),
    C.ConvertSkipLossless: programs(_skip_lossless),
    C.ConvertBeforeMovement: programs(_before_movement),
    C.ConvertAfterMovement: programs(_after_movement),
}


@pytest.mark.parametrize("pattern", list(CASES), ids=lambda p: p.name)
def test_pattern(pattern):
    res = check_pattern(pattern, CASES[pattern], max_examples=50)
    assert res.num_alternatives >= 25, f"{pattern.name} fired on only {res.num_alternatives} of 50 programs"
