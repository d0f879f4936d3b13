"""Arithmetic identities, exact only where IEEE 754 allows.

x + (+0) is not x when x = -0, and x * 0 is not 0 when x is NaN or Inf; those forms are not
offered as EXACT. XLA applies these identities itself, so they mostly matter to searches that
look at the graph, not to speed.
"""

from __future__ import annotations

import math

import numpy as np
from jaxlib.mlir import ir

from shlo_env.patterns.base import Match, Numerics, Pattern, register
from shlo_env.patterns.matching import COMMUTATIVE, SPLAT_SOURCES, commuted, producer, splat_value, users
from shlo_env.ir.tensor_types import dtype_of, is_float, is_integer


def _is_neg_zero(v) -> bool:
    return v == 0 and math.copysign(1.0, float(v)) < 0


@register
class AddZero(Pattern):
    """x + 0 -> x for integers; for floats only x + (-0.0) -> x (x + (+0.0) turns -0 into +0)."""

    root = "stablehlo.add"
    operand_from = SPLAT_SOURCES

    def match(self, op):
        for x, zero in commuted(op):
            v = splat_value(zero)
            if v is None or v != 0:
                continue
            if not is_float(x.type) or _is_neg_zero(v):
                return Match(x=x)

    def rewrite(self, b, m):
        return m.x


@register
class SubZero(Pattern):
    """x - (+0) -> x (exact for every x, -0 and NaN included)."""

    root = "stablehlo.subtract"
    operand_from = SPLAT_SOURCES

    def match(self, op):
        x, zero = op.operands
        v = splat_value(zero)
        if v is not None and v == 0 and not _is_neg_zero(v):
            return Match(x=x)

    def rewrite(self, b, m):
        return m.x


@register
class MulOne(Pattern):
    """x * 1 -> x."""

    root = "stablehlo.multiply"
    operand_from = SPLAT_SOURCES

    def match(self, op):
        for x, one in commuted(op):
            if splat_value(one) == 1:
                return Match(x=x)

    def rewrite(self, b, m):
        return m.x


@register
class DivOne(Pattern):
    """x / 1 -> x."""

    root = "stablehlo.divide"
    operand_from = SPLAT_SOURCES

    def match(self, op):
        x, one = op.operands
        if splat_value(one) == 1:
            return Match(x=x)

    def rewrite(self, b, m):
        return m.x


@register
class NegNeg(Pattern):
    """-(-x) -> x."""

    root = "stablehlo.negate"
    operand_from = "stablehlo.negate"

    def match(self, op):
        inner = producer(op.operands[0], "stablehlo.negate")
        if inner is not None:
            return Match(x=inner.operands[0])

    def rewrite(self, b, m):
        return m.x


@register
class MulZeroInt(Pattern):
    """x * 0 -> 0 (integers only: on floats NaN * 0 and Inf * 0 are NaN, and -1 * 0 is -0)."""

    root = "stablehlo.multiply"
    operand_from = SPLAT_SOURCES

    def match(self, op):
        if not is_integer(op.result.type):
            return None
        for _, zero in commuted(op):
            if splat_value(zero) == 0:
                return Match(like=op.result.type)

    def rewrite(self, b, m):
        return b.zeros(m.like)


@register
class SubSelfInt(Pattern):
    """x - x -> 0 (integers only: on floats Inf - Inf and NaN - NaN are NaN)."""

    root = "stablehlo.subtract"

    def match(self, op):
        x, y = op.operands
        if x == y and is_integer(x.type):
            return Match(like=op.result.type)

    def rewrite(self, b, m):
        return b.zeros(m.like)


@register
class ConstantToRhs(Pattern):
    """c ⊕ x -> x ⊕ c for commutative ⊕ (add, multiply, max, min, and, or, xor): canonical order."""

    root = tuple(sorted(COMMUTATIVE))
    operand_from = SPLAT_SOURCES

    def match(self, op):
        c, x = op.operands
        if splat_value(c) is not None and splat_value(x) is None:
            return Match(x=x, c=c, op=op)

    def rewrite(self, b, m):
        return b.like(m.op, [m.x, m.c])


@register
class MaxNegInf(Pattern):
    """max(x, -inf) -> x (exact: max propagates NaN, and max(-0, -inf) is -0)."""

    root = "stablehlo.maximum"
    operand_from = SPLAT_SOURCES

    def match(self, op):
        for x, c in commuted(op):
            if splat_value(c) == -math.inf:
                return Match(x=x)

    def rewrite(self, b, m):
        return m.x


@register
class MinPosInf(Pattern):
    """min(x, +inf) -> x (exact: min propagates NaN, and min(+0, +inf) is +0)."""

    root = "stablehlo.minimum"
    operand_from = SPLAT_SOURCES

    def match(self, op):
        for x, c in commuted(op):
            if splat_value(c) == math.inf:
                return Match(x=x)

    def rewrite(self, b, m):
        return m.x


@register
class MulNegOneToNeg(Pattern):
    """x * -1 -> -x (exact: the product flips only the sign, zeros and infinities included)."""

    root = "stablehlo.multiply"
    operand_from = SPLAT_SOURCES

    def match(self, op):
        for x, c in commuted(op):
            if splat_value(c) == -1 and is_float(x.type):
                return Match(x=x)

    def rewrite(self, b, m):
        return b.neg(m.x)


def _doubling_contracts(op, x: ir.Value) -> bool:
    """Could XLA fuse the doubling `op` of `x` (x + x or x * 2, before or after the rewrite)
    with a multiply into one FMA? Where x is a product (or a chlo op, which expands into
    products), or the double feeds an add or a subtract. An FMA neither rounds nor overflows
    its product on its own: y * 2 + x is a finite -2.8e38 on XLA CPU where (y + y) + x is
    -inf (tests/test_exact_fma.py), so the two forms are not bitwise equal there."""
    p = producer(x)
    if p is not None and (p.operation.name == "stablehlo.multiply" or p.operation.name.startswith("chlo.")):
        return True
    return any(u.operation.name in ("stablehlo.add", "stablehlo.subtract") for u in users(op.result))


@register
class AddSelfToMulTwo(Pattern):
    """x + x -> x * 2 (exact: doubling is one rounding either way, overflow to Inf included;
    not where XLA could contract the doubling with a multiply into an FMA)."""

    root = "stablehlo.add"

    def match(self, op):
        x, y = op.operands
        if x == y and is_float(x.type) and not _doubling_contracts(op, x):
            return Match(x=x)

    def rewrite(self, b, m):
        return b.mul(m.x, b.constant(2, m.x.type))


@register
class MulTwoToAddSelf(Pattern):
    """x * 2 -> x + x (exact; an add is cheaper than a multiply on some targets; not where XLA
    could contract the doubling with a multiply into an FMA)."""

    root = "stablehlo.multiply"
    operand_from = SPLAT_SOURCES

    def match(self, op):
        for x, c in commuted(op):
            if splat_value(c) == 2 and is_float(x.type):
                return None if _doubling_contracts(op, x) else Match(x=x)

    def rewrite(self, b, m):
        return b.add(m.x, m.x)


def _power_of_two_reciprocal(v, value: ir.Value):
    """1/v when v = ±2^k and 1/v is a normal number of value's float type, else None."""
    if v is None or isinstance(v, bool) or not is_float(value.type) or v == 0 or not math.isfinite(v):
        return None
    mant, _ = math.frexp(abs(v))
    if mant != 0.5:
        return None
    r = 1.0 / v
    info = np.finfo(dtype_of(value.type)) if dtype_of(value.type).kind == "f" else None
    if info is None:
        import ml_dtypes
        info = ml_dtypes.finfo(dtype_of(value.type))
    if not (float(info.tiny) <= abs(r) <= float(info.max)) or not (float(info.tiny) <= abs(v) <= float(info.max)):
        return None
    return r


@register
class DivByPowerOfTwo(Pattern):
    """x / 2^k -> x * 2^-k (exact: both are one rounding of the same real number)."""

    root = "stablehlo.divide"
    operand_from = SPLAT_SOURCES

    def match(self, op):
        x, c = op.operands
        r = _power_of_two_reciprocal(splat_value(c), x)
        if r is not None:
            return Match(x=x, r=r)

    def rewrite(self, b, m):
        return b.mul(m.x, b.constant(m.r, m.x.type))


@register
class DivToMulReciprocal(Pattern):
    """x / c -> x * (1/c) for a constant c (APPROX: 1/c is rounded once more; opt-in)."""

    root = "stablehlo.divide"
    operand_from = SPLAT_SOURCES
    numerics = Numerics.APPROX

    def match(self, op):
        x, c = op.operands
        v = splat_value(c)
        if v is None or isinstance(v, bool) or not is_float(x.type) or v == 0 or not math.isfinite(v):
            return None
        if _power_of_two_reciprocal(v, x) is not None:
            return None  # exact: DivByPowerOfTwo offers it
        return Match(x=x, r=1.0 / v)

    def rewrite(self, b, m):
        return b.mul(m.x, b.constant(m.r, m.x.type))


@register
class AbsOfAbs(Pattern):
    """|(|x|)| -> |x|."""

    root = "stablehlo.abs"
    operand_from = "stablehlo.abs"

    def match(self, op):
        inner = producer(op.operands[0], "stablehlo.abs")
        if inner is not None:
            return Match(x=op.operands[0])

    def rewrite(self, b, m):
        return m.x


@register
class AbsOfNeg(Pattern):
    """|-x| -> |x| (floats; on integers -MIN wraps, but |-x| == |x| holds there too)."""

    root = "stablehlo.abs"
    operand_from = "stablehlo.negate"

    def match(self, op):
        inner = producer(op.operands[0], "stablehlo.negate")
        if inner is not None:
            return Match(x=inner.operands[0])

    def rewrite(self, b, m):
        return b.abs(m.x)


@register
class NotNot(Pattern):
    """not(not(x)) -> x (booleans and integers: bitwise not is an involution)."""

    root = "stablehlo.not"
    operand_from = "stablehlo.not"

    def match(self, op):
        inner = producer(op.operands[0], "stablehlo.not")
        if inner is not None:
            return Match(x=inner.operands[0])

    def rewrite(self, b, m):
        return m.x


@register
class SubNegToAdd(Pattern):
    """a - (-b) -> a + b (exact: IEEE subtraction is addition of the negation)."""

    root = "stablehlo.subtract"
    operand_from = "stablehlo.negate"

    def match(self, op):
        a, nb = op.operands
        neg = producer(nb, "stablehlo.negate")
        if neg is not None:
            return Match(a=a, b=neg.operands[0])

    def rewrite(self, b, m):
        return b.add(m.a, m.b)


@register
class AddNegToSub(Pattern):
    """a + (-b) -> a - b (exact)."""

    root = "stablehlo.add"
    operand_from = "stablehlo.negate"

    def match(self, op):
        for a, nb in commuted(op):
            neg = producer(nb, "stablehlo.negate")
            if neg is not None:
                return Match(a=a, b=neg.operands[0])

    def rewrite(self, b, m):
        return b.sub(m.a, m.b)


@register
class MulNegNeg(Pattern):
    """(-a) * (-b) -> a * b (exact: the signs cancel; only NaN's sign may differ)."""

    root = "stablehlo.multiply"
    operand_from = "stablehlo.negate"

    def match(self, op):
        na, nb = (producer(v, "stablehlo.negate") for v in op.operands)
        if na is not None and nb is not None:
            return Match(a=na.operands[0], b=nb.operands[0])

    def rewrite(self, b, m):
        return b.mul(m.a, m.b)
