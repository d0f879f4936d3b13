"""Slice / concatenate rewrites."""

from __future__ import annotations

from jaxlib.mlir import ir

from shlo_env.patterns.base import Match, Pattern, i64s, producer, register, shape_of


def concat_dim(op) -> int:
    return ir.IntegerAttr(op.operation.attributes["dimension"]).value


@register
class SliceOfConcat(Pattern):
    """slice(concat(x1, ..., xn)) -> slice(xi) when the slice reads only xi."""

    root = "stablehlo.slice"

    def match(self, op):
        cat = producer(op.operands[0], "stablehlo.concatenate")
        if cat is None:
            return None
        dim = concat_dim(cat)
        start, limit, strides = i64s(op, "start_indices"), i64s(op, "limit_indices"), i64s(op, "strides")
        offset = 0
        for part in cat.operands:
            size = shape_of(part.type)[dim]
            if offset <= start[dim] and limit[dim] <= offset + size:
                start = list(start)
                limit = list(limit)
                start[dim] -= offset
                limit[dim] -= offset
                return Match(x=part, start=start, limit=limit, strides=strides)
            offset += size
        return None

    def rewrite(self, b, m):
        return b.slice(m.x, m.start, m.limit, m.strides)
