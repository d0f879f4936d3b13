"""Targeted property tests of the arithmetic identities (shlo_env/patterns/algebraic.py)."""

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import strategies as st
from jax import lax

from pattern_programs import binary, programs, shapes, unary
from shlo_env.patterns import algebraic as A
from shlo_env.testing import check_pattern

F32, I32 = np.float32, np.int32
FLOATS = [np.float32, np.float16]

CASES = {
    A.AddZero: [unary(lambda x: x + jnp.int32(0), I32), unary(lambda x: x + jnp.float32(-0.0))],
    A.SubZero: [unary(lambda x: x - 0.0, FLOATS)],
    A.MulOne: [unary(lambda x: x * 1.0, FLOATS), unary(lambda x: x * 1, I32)],
    A.DivOne: [unary(lambda x: x / 1.0)],
    A.NegNeg: [unary(lambda x: -(-x), [F32, I32])],
    A.MulZeroInt: [unary(lambda x: x * 0, [I32, np.int8])],
    A.SubSelfInt: [unary(lambda x: x - x, [I32, np.int16])],
    A.ConstantToRhs: [unary(lambda x: lax.mul(lax.full_like(x, 3.0), x)),
                      unary(lambda x: lax.max(lax.full_like(x, 0), x), I32)],
    A.MaxNegInf: [unary(lambda x: jnp.maximum(x, -jnp.inf), FLOATS)],
    A.MinPosInf: [unary(lambda x: jnp.minimum(jnp.inf, x), FLOATS)],
    A.MulNegOneToNeg: [unary(lambda x: x * -1.0, FLOATS)],
    A.AddSelfToMulTwo: [unary(lambda x: x + x, FLOATS)],
    A.MulTwoToAddSelf: [unary(lambda x: 2.0 * x, FLOATS)],
    A.DivToMulReciprocal: [unary(lambda x: x / 3.0), unary(lambda x: x / 10.0)],
    A.AbsOfAbs: [unary(lambda x: jnp.abs(jnp.abs(x)), [F32, I32])],
    A.AbsOfNeg: [unary(lambda x: jnp.abs(-x), [F32, I32, np.int8])],
    A.NotNot: [unary(lambda x: ~~x, [np.bool_, I32])],
    A.SubNegToAdd: [binary(lambda a, b: a - (-b), FLOATS)],
    A.AddNegToSub: [binary(lambda a, b: (-b) + a, [F32, I32])],
    A.MulNegNeg: [binary(lambda a, b: (-a) * (-b), [F32, I32])],
}


def _div_pow2(draw):
    c = draw(st.sampled_from([0.5, 0.25, 2.0, 4.0, 1024.0, -8.0, 2.0**-20]))
    dt = draw(st.sampled_from(FLOATS))
    return (lambda x: x / dt(c)), [draw(shapes())], [dt]


CASES[A.DivByPowerOfTwo] = [programs(_div_pow2)]


@pytest.mark.parametrize("pattern", list(CASES), ids=lambda p: p.name)
def test_pattern(pattern):
    for strategy in CASES[pattern]:
        check_pattern(pattern, strategy, max_examples=50 // len(CASES[pattern]) + 1)
