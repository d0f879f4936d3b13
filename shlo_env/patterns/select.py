"""select / compare rewrites (all exact)."""

from __future__ import annotations

from jaxlib.mlir.dialects import stablehlo

from shlo_env.patterns.base import Match, Pattern, register
from shlo_env.patterns.matching import SPLAT_SOURCES, comparison, producer, splat_value
from shlo_env.ir.tensor_types import dtype_of, is_integer


@register
class SelectSameBranches(Pattern):
    """select(p, x, x) -> x."""

    root = "stablehlo.select"

    def match(self, op):
        _, on_true, on_false = op.operands
        if on_true == on_false:
            return Match(x=on_true)

    def rewrite(self, b, m):
        return m.x


@register
class SelectConstantPredicate(Pattern):
    """select(true, a, b) -> a and select(false, a, b) -> b."""

    root = "stablehlo.select"
    operand_from = SPLAT_SOURCES

    def match(self, op):
        pred, on_true, on_false = op.operands
        v = splat_value(pred)
        if v is None:
            return None
        return Match(x=on_true if v else on_false)

    def rewrite(self, b, m):
        return m.x


@register
class SelectNotSwap(Pattern):
    """select(not p, a, b) -> select(p, b, a)."""

    root = "stablehlo.select"
    operand_from = "stablehlo.not"

    def match(self, op):
        pred, on_true, on_false = op.operands
        neg = producer(pred, "stablehlo.not")
        if neg is not None:
            return Match(p=neg.operands[0], a=on_true, b=on_false)

    def rewrite(self, b, m):
        return b.select(m.p, m.b, m.a)


_REFLEXIVE = {"EQ": True, "LE": True, "GE": True, "NE": False, "LT": False, "GT": False}


@register
class CompareSelfInt(Pattern):
    """x == x, x <= x, x >= x -> true and x != x, x < x, x > x -> false (integers only:
    on floats NaN compares unequal to itself)."""

    root = "stablehlo.compare"

    def match(self, op):
        x, y = op.operands
        if x == y and is_integer(x.type):
            return Match(value=_REFLEXIVE[comparison(op)], like=op.result.type)

    def rewrite(self, b, m):
        return b.constant(1 if m.value else 0, m.like)


def _ordered_like_max(cmp, value) -> bool:
    """The compare orders integers the way max/min do (signed for signed types, and so on)."""
    dt = dtype_of(value.type)
    if dt.kind not in "iu":
        return False
    attr = cmp.operation.attributes
    if "compare_type" not in attr:
        return True
    kind = str(stablehlo.ComparisonTypeAttr(attr["compare_type"]).value)
    return kind == ("SIGNED" if dt.kind == "i" else "UNSIGNED")


_GREATER = {"GT", "GE"}
_LESS = {"LT", "LE"}


@register
class SelectCompareToMinMax(Pattern):
    """select(a > b, a, b) -> max(a, b) and select(a < b, a, b) -> min(a, b) (integers only:
    on floats max propagates NaN where the select would not)."""

    root = "stablehlo.select"
    operand_from = "stablehlo.compare"

    def match(self, op):
        pred, on_true, on_false = op.operands
        cmp = producer(pred, "stablehlo.compare")
        if cmp is None or not is_integer(on_true.type) or not _ordered_like_max(cmp, on_true):
            return None
        a, b = cmp.operands
        d = comparison(cmp)
        if (a, b) == (on_true, on_false):
            kind = "max" if d in _GREATER else "min" if d in _LESS else None
        elif (b, a) == (on_true, on_false):
            kind = "min" if d in _GREATER else "max" if d in _LESS else None
        else:
            kind = None
        if kind is not None:
            return Match(a=on_true, b=on_false, kind=kind)

    def rewrite(self, b, m):
        return b.max(m.a, m.b) if m.kind == "max" else b.min(m.a, m.b)
