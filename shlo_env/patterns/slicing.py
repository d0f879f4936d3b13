"""Slice / concatenate / pad rewrites (all exact: they only move data or compute less of it)."""

from __future__ import annotations

from shlo_env.patterns.base import Match, Pattern, register
from shlo_env.patterns.matching import (
    ELEMENTWISE, broadcast_dims, concat_dim, hoist_match, hoist_operands, i64s, producer,
    slice_params,
)
from shlo_env.ir.tensor_types import shape_of


@register
class SliceOfConcat(Pattern):
    """slice(concat(x1, ..., xn)) -> slice(xi) when the slice reads only xi."""

    root = "stablehlo.slice"
    operand_from = "stablehlo.concatenate"

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


@register
class SliceFull(Pattern):
    """x[0:n, 0:m] -> x: a slice that reads everything."""

    root = "stablehlo.slice"

    def match(self, op):
        x = op.operands[0]
        start, limit, strides = slice_params(op)
        if x.type == op.result.type and set(start) <= {0} and set(strides) <= {1}:
            return Match(x=x)

    def rewrite(self, b, m):
        return m.x


@register
class SliceOfSlice(Pattern):
    """x[a:b:s][c:d:t] -> x[a+c·s : a+d·s : s·t]: one slice."""

    root = "stablehlo.slice"
    operand_from = "stablehlo.slice"

    def match(self, op):
        inner = producer(op.operands[0], "stablehlo.slice")
        if inner is None:
            return None
        s1, _, t1 = slice_params(inner)
        s2, l2, t2 = slice_params(op)
        start = [a + c * s for a, c, s in zip(s1, s2, t1)]
        limit = [a + (d - 1) * s + 1 if d > c else a + c * s for a, c, d, s in zip(s1, s2, l2, t1)]
        strides = [s * t for s, t in zip(t1, t2)]
        return Match(x=inner.operands[0], start=start, limit=limit, strides=strides)

    def rewrite(self, b, m):
        return b.slice(m.x, m.start, m.limit, m.strides)


@register
class ConcatOfAdjacentSlices(Pattern):
    """concat(x[a:b], x[b:c]) -> x[a:c] along the concatenated dim (other dims sliced alike)."""

    root = "stablehlo.concatenate"
    operand_from = "stablehlo.slice"

    def match(self, op):
        dim = concat_dim(op)
        parts = [producer(v, "stablehlo.slice") for v in op.operands]
        if len(parts) < 2 or any(p is None for p in parts):
            return None
        x = parts[0].operands[0]
        params = [slice_params(p) for p in parts]
        if any(p.operands[0] != x for p in parts) or any(set(t) != {1} for _, _, t in params):
            return None
        for (s1, l1, _), (s2, l2, _) in zip(params, params[1:]):
            others = [i for i in range(len(s1)) if i != dim]
            if l1[dim] != s2[dim] or any(s1[i] != s2[i] or l1[i] != l2[i] for i in others):
                return None
        start, limit = list(params[0][0]), list(params[0][1])
        limit[dim] = params[-1][1][dim]
        return Match(x=x, start=start, limit=limit)

    def rewrite(self, b, m):
        return b.slice(m.x, m.start, m.limit)


@register
class ConcatFlatten(Pattern):
    """concat(a, concat(b, c), d) -> concat(a, b, c, d) along one dim."""

    root = "stablehlo.concatenate"
    operand_from = "stablehlo.concatenate"

    def match(self, op):
        dim = concat_dim(op)
        flat, nested = [], False
        for v in op.operands:
            inner = producer(v, "stablehlo.concatenate")
            if inner is not None and concat_dim(inner) == dim:
                flat.extend(inner.operands)
                nested = True
            else:
                flat.append(v)
        if nested:
            return Match(parts=flat, dim=dim)

    def rewrite(self, b, m):
        return b.concat(m.parts, m.dim)


def _pad_params(op):
    return i64s(op, "edge_padding_low"), i64s(op, "edge_padding_high"), i64s(op, "interior_padding")


@register
class PadIdentity(Pattern):
    """pad(x, v, low=0, high=0, interior=0) -> x."""

    root = "stablehlo.pad"

    def match(self, op):
        if all(set(p) <= {0} for p in _pad_params(op)):
            return Match(x=op.operands[0])

    def rewrite(self, b, m):
        return m.x


@register
class SliceOfPad(Pattern):
    """pad(x)[window] -> x[window'] when the window reads only x's elements (no padding)."""

    root = "stablehlo.slice"
    operand_from = "stablehlo.pad"

    def match(self, op):
        pad = producer(op.operands[0], "stablehlo.pad")
        if pad is None:
            return None
        low, _, interior = _pad_params(pad)
        start, limit, strides = slice_params(op)
        n = shape_of(pad.operands[0].type)
        if any(i != 0 for i in interior):
            return None
        new_start = [s - lo for s, lo in zip(start, low)]
        new_limit = [li - lo for li, lo in zip(limit, low)]
        if any(s < 0 for s in new_start) or any(li > d for li, d in zip(new_limit, n)):
            return None
        return Match(x=pad.operands[0], start=new_start, limit=new_limit, strides=strides)

    def rewrite(self, b, m):
        return b.slice(m.x, m.start, m.limit, m.strides)


@register
class SliceOfElementwise(Pattern):
    """f(a, b)[window] -> f(a[window], b[window]) (f used only there): compute only what is read."""

    root = "stablehlo.slice"
    operand_from = ELEMENTWISE

    def match(self, op):
        m = hoist_match(op, "stablehlo.slice")
        if m is not None:
            m["start"], m["limit"], m["strides"] = slice_params(op)
        return m

    def rewrite(self, b, m):
        return b.like(m.f, hoist_operands(b, m, lambda x: b.slice(x, m.start, m.limit, m.strides)), m.outer_shape)


@register
class SliceOfBroadcast(Pattern):
    """broadcast(x)[window] -> broadcast(x[window']) : slice the small operand, not the big result."""

    root = "stablehlo.slice"
    operand_from = "stablehlo.broadcast_in_dim"

    def match(self, op):
        bc = producer(op.operands[0], "stablehlo.broadcast_in_dim")
        if bc is None:
            return None
        x = bc.operands[0]
        dims = broadcast_dims(bc)
        xs = shape_of(x.type)
        start, limit, strides = slice_params(op)
        in_start, in_limit, in_strides = [], [], []
        for i, d in enumerate(dims):
            if xs[i] == 1 and shape_of(bc.result.type)[d] != 1:
                in_start.append(0); in_limit.append(1); in_strides.append(1)  # noqa: E702
            else:
                in_start.append(start[d]); in_limit.append(limit[d]); in_strides.append(strides[d])  # noqa: E702
        return Match(x=x, start=in_start, limit=in_limit, strides=in_strides, dims=dims,
                     shape=shape_of(op.result.type))

    def rewrite(self, b, m):
        return b.broadcast_in_dim(b.slice(m.x, m.start, m.limit, m.strides), m.shape, m.dims)
