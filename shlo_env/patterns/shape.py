"""Shape rewrites: transposes, reshapes and broadcasts that compose or vanish, and elementwise
ops moved through them in both directions (all exact: data movement only)."""

from __future__ import annotations

from shlo_env.patterns.base import (
    ELEMENTWISE, Match, Pattern, broadcast_dims, i64s, is_elementwise, is_identity_perm, operand_kinds,
    operands_through, permutation, producer, register, shape_of, single_use,
)


@register
class TransposeOfTranspose(Pattern):
    """transpose(transpose(x, p), q) -> transpose(x, p∘q), or x when that is the identity."""

    root = "stablehlo.transpose"

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


# --- elementwise ops moved through data movement, in both directions ----------------------
#
# f(move(a), move(b), scalar) <-> move(f(a, b, scalar)) for an elementwise f and a data
# movement `move` (transpose with one permutation, reshape from one shape, broadcast with one
# mapping). Operands that are one scalar everywhere are re-created at the new shape.

def _sink_match(op, through: str, key):
    """Operands of elementwise `op` all produced by the same kind of `through` op (equal `key`,
    same input shape) or scalars: returns the Match for sinking, or None."""
    if not is_elementwise(op):
        return None
    split = operands_through(op, through)
    if split is None:
        return None
    kinds, prods = split
    movers = [p for p in prods if p is not None]
    k0, s0 = key(movers[0]), shape_of(movers[0].operands[0].type)
    if any(key(p) != k0 or shape_of(p.operands[0].type) != s0 for p in movers[1:]):
        return None
    inputs = [p.operands[0] if p is not None else None for p in prods]
    return Match(op=op, kinds=kinds, inputs=inputs, inner_shape=s0, key=k0,
                 outer_shape=shape_of(op.result.type))


def _sink_operands(b, m):
    return [x if k == "x" else k.at(b, m.inner_shape) for k, x in zip(m.kinds, m.inputs)]


def _hoist_match(op, through: str):
    """move(f(a, b, ...)) where f is elementwise and only feeds this move: Match for hoisting."""
    inner = producer(op.operands[0])
    if inner is None or not is_elementwise(inner) or not single_use(op.operands[0]):
        return None
    kinds = operand_kinds(inner)
    if "x" not in kinds:
        return None
    return Match(f=inner, kinds=kinds, inputs=[v if k in ("x", "same") else None for k, v in zip(kinds, inner.operands)],
                 move=op, outer_shape=shape_of(op.result.type))


@register
class ElementwiseThroughTranspose(Pattern):
    """f(transpose(a, p), transpose(b, p)) -> transpose(f(a, b), p): one transpose instead of several."""

    root = tuple(sorted(ELEMENTWISE))

    def match(self, op):
        return _sink_match(op, "stablehlo.transpose", permutation)

    def rewrite(self, b, m):
        return b.transpose(b.like(m.op, _sink_operands(b, m), m.inner_shape), m.key)


@register
class TransposeOfElementwise(Pattern):
    """transpose(f(a, b), p) -> f(transpose(a, p), transpose(b, p)) (f used only there)."""

    root = "stablehlo.transpose"

    def match(self, op):
        return _hoist_match(op, "stablehlo.transpose")

    def rewrite(self, b, m):
        p = permutation(m.move)
        ops = [b.transpose(x, p) if k == "x" else x if k == "same" else k.at(b, m.outer_shape)
               for k, x in zip(m.kinds, m.inputs)]
        return b.like(m.f, ops, m.outer_shape)


@register
class ElementwiseThroughReshape(Pattern):
    """f(reshape(a), reshape(b)) -> reshape(f(a, b)) when a and b have one shape."""

    root = tuple(sorted(ELEMENTWISE))

    def match(self, op):
        return _sink_match(op, "stablehlo.reshape", lambda p: shape_of(p.result.type))

    def rewrite(self, b, m):
        return b.reshape(b.like(m.op, _sink_operands(b, m), m.inner_shape), m.outer_shape)


@register
class ReshapeOfElementwise(Pattern):
    """reshape(f(a, b)) -> f(reshape(a), reshape(b)) (f used only there)."""

    root = "stablehlo.reshape"

    def match(self, op):
        return _hoist_match(op, "stablehlo.reshape")

    def rewrite(self, b, m):
        ops = [b.reshape(x, m.outer_shape) if k == "x" else x if k == "same" else k.at(b, m.outer_shape)
               for k, x in zip(m.kinds, m.inputs)]
        return b.like(m.f, ops, m.outer_shape)


@register
class ElementwiseThroughBroadcast(Pattern):
    """f(broadcast(a), broadcast(b)) -> broadcast(f(a, b)): compute on the small tensor once."""

    root = tuple(sorted(ELEMENTWISE))

    def match(self, op):
        m = _sink_match(op, "stablehlo.broadcast_in_dim", broadcast_dims)
        if m is not None and m.inner_shape != m.outer_shape:
            return m
        return None

    def rewrite(self, b, m):
        return b.broadcast_in_dim(b.like(m.op, _sink_operands(b, m), m.inner_shape), m.outer_shape, m.key)


@register
class BroadcastOfElementwise(Pattern):
    """broadcast(f(a, b)) -> f(broadcast(a), broadcast(b)) (f used only there): lets f fuse
    into the consumer instead of being materialized."""

    root = "stablehlo.broadcast_in_dim"

    def match(self, op):
        m = _hoist_match(op, "stablehlo.broadcast_in_dim")
        if m is not None and shape_of(op.operands[0].type) != m.outer_shape:
            return m
        return None

    def rewrite(self, b, m):
        dims = broadcast_dims(m.move)
        ops = [b.broadcast_in_dim(x, m.outer_shape, dims) if k == "x" else x if k == "same" else k.at(b, m.outer_shape)
               for k, x in zip(m.kinds, m.inputs)]
        return b.like(m.f, ops, m.outer_shape)
