"""Reduce rewrites: reductions that vanish, merge, or move through other ops.

A reduce is recognized by its body: `reduce_body(op)` names the one binary op that combines
two accumulators (add, max, ...). Merging or splitting float sums reorders additions, so those
rewrites are REASSOCIATE; max/min and integer reductions are order-independent.
"""

from __future__ import annotations

import math

from shlo_env.patterns.base import Match, Numerics, Pattern, register
from shlo_env.patterns.matching import (
    SPLAT_SOURCES, concat_dim, i64s, permutation, producer, reduce_body, scalar_operand, splat_value,
)
from shlo_env.ir.tensor_types import is_float, is_integer, shape_of

_IDEMPOTENT = ("stablehlo.maximum", "stablehlo.minimum", "stablehlo.and", "stablehlo.or")


def _is_neg_zero(v) -> bool:
    return v == 0 and math.copysign(1.0, float(v)) < 0


def _identity_init(body: str, init, x) -> bool:
    """Whether `init` is an exact identity of `body` on x's element type (so f(init, v) == v)."""
    if init is None:
        return False
    if is_integer(x.type):
        if body == "stablehlo.add" or body == "stablehlo.or" or body == "stablehlo.xor":
            return init == 0
        if body == "stablehlo.multiply":
            return init == 1
        return False
    if is_float(x.type):
        if body == "stablehlo.add":
            return _is_neg_zero(init)  # +0 + -0 is +0: only -0 is exact
        if body == "stablehlo.multiply":
            return init == 1
        if body == "stablehlo.maximum":
            return init == -math.inf
        if body == "stablehlo.minimum":
            return init == math.inf
    return False


@register
class ReduceEmptyDims(Pattern):
    """reduce(x, init, dims=[]) -> x when init is an exact identity of the body."""

    root = "stablehlo.reduce"
    operand_from = SPLAT_SOURCES

    def match(self, op):
        body = reduce_body(op)
        if body is None or i64s(op, "dimensions"):
            return None
        x = op.operands[0]
        if _identity_init(body, splat_value(op.operands[1]), x):
            return Match(x=x)

    def rewrite(self, b, m):
        return m.x


def _nested_reduce(op):
    """(x, merged dims, body, init) for reduce(reduce(x, d1), d2) with one body and init."""
    body = reduce_body(op)
    inner = producer(op.operands[0], "stablehlo.reduce")
    if body is None or inner is None or reduce_body(inner) != body:
        return None
    if splat_value(op.operands[1]) is None or splat_value(op.operands[1]) != splat_value(inner.operands[1]):
        return None
    x = inner.operands[0]
    d1 = i64s(inner, "dimensions")
    rest = [i for i in range(len(shape_of(x.type))) if i not in d1]
    dims = sorted(d1 + [rest[j] for j in i64s(op, "dimensions")])
    return x, dims, body, inner.operands[1]


@register
class ReduceOfReduce(Pattern):
    """reduce(reduce(x, d1), d2) -> reduce(x, d1 ∪ d2) for max/min/and/or, or integer sums and
    products with an identity init (order-independent, so exact)."""

    root = "stablehlo.reduce"
    operand_from = "stablehlo.reduce"

    def match(self, op):
        n = _nested_reduce(op)
        if n is None:
            return None
        x, dims, body, init = n
        if body in _IDEMPOTENT or (is_integer(x.type) and _identity_init(body, splat_value(init), x)):
            return Match(x=x, dims=dims, body=body, init=init)

    def rewrite(self, b, m):
        return b.reduce(m.x, m.init, m.dims, m.body)


@register
class ReduceOfReduceSum(Pattern):
    """sum(sum(x, d1), d2) -> sum(x, d1 ∪ d2) on floats (one reduction; summation order changes)."""

    root = "stablehlo.reduce"
    operand_from = "stablehlo.reduce"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        n = _nested_reduce(op)
        if n is None:
            return None
        x, dims, body, init = n
        if body == "stablehlo.add" and is_float(x.type) and splat_value(init) == 0:
            return Match(x=x, dims=dims, body=body, init=init)

    def rewrite(self, b, m):
        return b.reduce(m.x, m.init, m.dims, m.body)


@register
class ReduceOfTranspose(Pattern):
    """reduce(transpose(x, p), dims) -> transpose(reduce(x, p[dims])): reduce in x's own layout."""

    root = "stablehlo.reduce"
    operand_from = "stablehlo.transpose"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        body = reduce_body(op)
        t = producer(op.operands[0], "stablehlo.transpose")
        if body is None or t is None:
            return None
        p = permutation(t)
        dims = i64s(op, "dimensions")
        new_dims = sorted(p[d] for d in dims)
        old_rest = [p[i] for i in range(len(p)) if i not in dims]
        new_rest = [i for i in range(len(p)) if i not in new_dims]
        return Match(x=t.operands[0], init=op.operands[1], dims=new_dims, body=body,
                     perm=[new_rest.index(d) for d in old_rest])

    def rewrite(self, b, m):
        return b.transpose(b.reduce(m.x, m.init, m.dims, m.body), m.perm)


@register
class ReduceSumOfScaled(Pattern):
    """sum(s·x) -> s·sum(x) for a scalar s: one multiply per output instead of per input."""

    root = "stablehlo.reduce"
    operand_from = "stablehlo.multiply"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        if reduce_body(op) != "stablehlo.add" or splat_value(op.operands[1]) != 0:
            return None
        mul = producer(op.operands[0], "stablehlo.multiply")
        if mul is None:
            return None
        for i, v in enumerate(mul.operands):
            s = scalar_operand(v)
            x = mul.operands[1 - i]
            if s is not None and scalar_operand(x) is None:
                return Match(x=x, s=s, init=op.operands[1], dims=i64s(op, "dimensions"),
                             shape=shape_of(op.result.type))

    def rewrite(self, b, m):
        return b.mul(b.reduce(m.x, m.init, m.dims, "stablehlo.add"), m.s.at(b, m.shape))


@register
class ReduceOfConcat(Pattern):
    """reduce(concat(a, b), dims ∋ concat dim) -> f(reduce(a), reduce(b)) for f in add/max/min."""

    root = "stablehlo.reduce"
    operand_from = "stablehlo.concatenate"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        body = reduce_body(op)
        cat = producer(op.operands[0], "stablehlo.concatenate")
        if body not in ("stablehlo.add", "stablehlo.maximum", "stablehlo.minimum") or cat is None:
            return None
        dims = i64s(op, "dimensions")
        init = splat_value(op.operands[1])
        if concat_dim(cat) not in dims or init is None:
            return None
        if body == "stablehlo.add" and init != 0:
            return None
        return Match(parts=list(cat.operands), init=op.operands[1], dims=dims, body=body)

    def rewrite(self, b, m):
        total = None
        for part in m.parts:
            r = b.reduce(part, m.init, m.dims, m.body)
            total = r if total is None else b.elementwise(m.body, total, r)
        return total
