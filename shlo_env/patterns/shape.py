"""Shape rewrites: transposes, reshapes and broadcasts that compose or vanish, and elementwise
ops moved through broadcasts in both directions (all exact: data movement only). Transposes and
reshapes moved through other ops (layout motion) are in patterns/layout.py."""

from __future__ import annotations

from shlo_env.patterns.base import Match, Pattern, register
from shlo_env.patterns.matching import (
    ELEMENTWISE, broadcast_dims, hoist_match, hoist_operands, i64s, is_identity_perm, permutation,
    producer, sink_match, sink_operands,
)
from shlo_env.ir.tensor_types import shape_of


@register
class TransposeOfTranspose(Pattern):
    """transpose(transpose(x, p), q) -> transpose(x, p∘q), or x when that is the identity."""

    root = "stablehlo.transpose"
    operand_from = "stablehlo.transpose"

    def match(self, op):
        inner = producer(op.operands[0], "stablehlo.transpose")
        if inner is None:
            return None
        p, q = i64s(inner, "permutation"), i64s(op, "permutation")
        return Match(x=inner.operands[0], perm=[p[i] for i in q])

    def rewrite(self, b, m):
        return b.transpose(m.x, m.perm)


@register
class ReshapeOfReshape(Pattern):
    """reshape(reshape(x)) -> reshape(x), or x when the shapes agree."""

    root = "stablehlo.reshape"
    operand_from = "stablehlo.reshape"

    def match(self, op):
        inner = producer(op.operands[0], "stablehlo.reshape")
        if inner is not None:
            return Match(x=inner.operands[0], shape=shape_of(op.result.type))

    def rewrite(self, b, m):
        return b.reshape(m.x, m.shape)


@register
class TransposeIdentity(Pattern):
    """transpose(x, [0, 1, ..., n-1]) -> x."""

    root = "stablehlo.transpose"

    def match(self, op):
        if is_identity_perm(permutation(op)):
            return Match(x=op.operands[0])

    def rewrite(self, b, m):
        return m.x


@register
class ReshapeIdentity(Pattern):
    """reshape(x) -> x when the shape does not change."""

    root = "stablehlo.reshape"

    def match(self, op):
        if op.operands[0].type == op.result.type:
            return Match(x=op.operands[0])

    def rewrite(self, b, m):
        return m.x


@register
class BroadcastIdentity(Pattern):
    """broadcast_in_dim(x, dims=[0, ..., n-1]) -> x when the shape does not change."""

    root = "stablehlo.broadcast_in_dim"

    def match(self, op):
        x = op.operands[0]
        if x.type == op.result.type and is_identity_perm(broadcast_dims(op)):
            return Match(x=x)

    def rewrite(self, b, m):
        return m.x


@register
class BroadcastOfBroadcast(Pattern):
    """broadcast(broadcast(x, d1), d2) -> broadcast(x, d2∘d1): one broadcast."""

    root = "stablehlo.broadcast_in_dim"
    operand_from = "stablehlo.broadcast_in_dim"

    def match(self, op):
        inner = producer(op.operands[0], "stablehlo.broadcast_in_dim")
        if inner is None:
            return None
        d1, d2 = broadcast_dims(inner), broadcast_dims(op)
        return Match(x=inner.operands[0], dims=[d2[d] for d in d1], shape=shape_of(op.result.type))

    def rewrite(self, b, m):
        return b.broadcast_in_dim(m.x, m.shape, m.dims)


@register
class TransposeToReshape(Pattern):
    """transpose(x, p) -> reshape(x) when p moves only size-1 dims (same row-major order)."""

    root = "stablehlo.transpose"

    def match(self, op):
        perm = permutation(op)
        s = shape_of(op.operands[0].type)
        moved = [p for p in perm if s[p] != 1]
        if not is_identity_perm(perm) and moved == sorted(moved):
            return Match(x=op.operands[0], shape=shape_of(op.result.type))

    def rewrite(self, b, m):
        return b.reshape(m.x, m.shape)


# --- elementwise ops moved through broadcasts, in both directions --------------------------
#
# (Transposes and reshapes moved through elementwise ops are layout motion: patterns/layout.py.)

@register
class ElementwiseThroughBroadcast(Pattern):
    """f(broadcast(a), broadcast(b)) -> broadcast(f(a, b)): compute on the small tensor once."""

    root = tuple(sorted(ELEMENTWISE))
    operand_from = "stablehlo.broadcast_in_dim"

    def match(self, op):
        m = sink_match(op, "stablehlo.broadcast_in_dim", broadcast_dims)
        if m is not None and m.inner_shape != m.outer_shape:
            return m
        return None

    def rewrite(self, b, m):
        return b.broadcast_in_dim(b.like(m.op, sink_operands(b, m), m.inner_shape), m.outer_shape, m.key)


@register
class BroadcastOfElementwise(Pattern):
    """broadcast(f(a, b)) -> f(broadcast(a), broadcast(b)) (f used only there): lets f fuse
    into the consumer instead of being materialized."""

    root = "stablehlo.broadcast_in_dim"
    operand_from = ELEMENTWISE

    def match(self, op):
        m = hoist_match(op, "stablehlo.broadcast_in_dim")
        if m is not None and shape_of(op.operands[0].type) != m.outer_shape:
            return m
        return None

    def rewrite(self, b, m):
        dims = broadcast_dims(m.move)
        ops = hoist_operands(b, m, lambda x: b.broadcast_in_dim(x, m.outer_shape, dims))
        return b.like(m.f, ops, m.outer_shape)
