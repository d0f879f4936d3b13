"""Arithmetic identities, exact only where IEEE 754 allows.

x + (+0) is not x when x = -0, and x * 0 is not 0 when x is NaN or Inf; those forms are not
offered as EXACT. XLA applies these identities itself, so they mostly matter to searches that
look at the graph, not to speed.
"""

from __future__ import annotations

import math

from shlo_env.patterns.base import Match, Numerics, Pattern, commuted, is_float, producer, register, splat_value


def _is_neg_zero(v) -> bool:
    return v == 0 and math.copysign(1.0, float(v)) < 0


@register
class AddZero(Pattern):
    """x + 0 -> x (integers), x + (-0.0) -> x (floats: x + (+0.0) turns -0 into +0)."""

    root = "stablehlo.add"

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

    def match(self, op):
        inner = producer(op.operands[0], "stablehlo.negate")
        if inner is not None:
            return Match(x=inner.operands[0])

    def rewrite(self, b, m):
        return m.x
