"""Slice / concatenate / pad rewrites: they only move data or compute less of it (exact, except
`slice_through_cone`, whose dots and reduces run on fewer rows: reassociate)."""

from __future__ import annotations

import functools
import math

from shlo_env.ir.tensor_types import element_type_of, shape_of, tensor_type
from shlo_env.measure.numerics import Numerics
from shlo_env.patterns import match_cache as mc
from shlo_env.patterns.base import Match, Pattern, register
from shlo_env.patterns.matching import (
    ELEMENTWISE, broadcast_dims, concat_dim, dot_dims, hoist_match, hoist_operands, i64s, permutation,
    producer, slice_params, static_shape,
)


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


# --- a slice through a whole cone of row-wise ops ---------------------------------------------

#: Elementwise chlo ops (JAX emits `chlo.square`, `chlo.erfc` in layer norms and GELUs).
_CHLO_ELEMENTWISE = frozenset("chlo." + n for n in """
    square erf erfc erf_inv lgamma digamma tan sinh cosh asin acos atan asinh acosh atanh is_inf
""".split())
#: The most ops one cone may hold (bounds the walk from each slice).
MAX_CONE_OPS = 400

Window = dict  # {dim: (start, limit, stride)} over the dims a slice does not take whole


def _operand_windows(op, window: Window) -> list[Window | None] | None:
    """For each operand of `op`, the window of it that computes `window` of its result (empty:
    the whole operand; None: no window of it does), or None when `op` is not a row-wise op this
    cone passes through."""
    name = mc.name(op)
    operands = mc.operands(op)
    out = static_shape(op.results[0])
    if out is None or len(op.results) != 1 or any(static_shape(v) is None for v in operands):
        return None
    if name in ELEMENTWISE or name in _CHLO_ELEMENTWISE:
        if len(op.regions):
            return None
        shapes = [shape_of(v.type) for v in operands]
        if not all(s in (out, ()) for s in shapes):
            return None
        return [dict(window) if s == out else {} for s in shapes]  # a scalar operand (select, clamp) stays
    if name == "stablehlo.broadcast_in_dim":
        xs = shape_of(operands[0].type)
        where = {d: i for i, d in enumerate(broadcast_dims(op))}
        return [{where[d]: w for d, w in window.items() if d in where and xs[where[d]] == out[d]}]
    if name == "stablehlo.reshape":
        return [_reshape_window(shape_of(operands[0].type), out, window)]
    if name == "stablehlo.transpose":
        perm = permutation(op)
        return [{perm[d]: w for d, w in window.items()}]
    if name == "stablehlo.reduce":
        if len(operands) != 2:
            return None
        reduced = set(i64s(op, "dimensions"))
        kept = [d for d in range(len(shape_of(operands[0].type))) if d not in reduced]
        return [{kept[d]: w for d, w in window.items()}, {}]
    if name == "stablehlo.dot_general":
        d = dot_dims(op)
        ranks = [len(shape_of(v.type)) for v in operands]
        lfree = [i for i in range(ranks[0]) if i not in d.lhs_batch and i not in d.lhs_contract]
        rfree = [i for i in range(ranks[1]) if i not in d.rhs_batch and i not in d.rhs_contract]
        nb = len(d.lhs_batch)
        lhs, rhs = {}, {}
        for dim, w in window.items():
            if dim < nb:
                lhs[d.lhs_batch[dim]], rhs[d.rhs_batch[dim]] = w, w
            elif dim < nb + len(lfree):
                lhs[lfree[dim - nb]] = w
            else:
                rhs[rfree[dim - nb - len(lfree)]] = w
        return [lhs, rhs]
    return None


def _reshape_window(before, after, window: Window) -> Window | None:
    """The window of a reshape's operand for `window` of its result: each windowed dim must be a
    dim of the operand too, with as many elements before it (then its rows are the same)."""
    out = {}
    for d, w in window.items():
        outer = math.prod(after[:d])
        match = [e for e in range(len(before)) if before[e] == after[d] and math.prod(before[:e]) == outer]
        if not match:
            return None
        out[match[0]] = w
    return out


def _cone(root, start: Window):
    """The ops computing the slice's operand that only it reads, each with the window of its
    result the slice needs: {op: window}, in no order. An op is in the cone when every user of
    its result is in the cone (or is the slice), and all of them need the same window."""
    need: dict = {}  # op -> window of its result
    conflict: set = set()
    block = root.operation.block
    todo = [(producer(root.operands[0]), start)]
    while todo and len(need) < MAX_CONE_OPS:
        view, window = todo.pop()
        if view is None or view.operation.block != block:  # not an op of an enclosing block: into a loop
            continue
        op = view.operation
        if op in need:
            if need[op] != window:
                conflict.add(op)
            continue
        windows = _operand_windows(op, window)
        if windows is None or None in windows:
            continue
        need[op] = window
        for v, w in zip(mc.operands(op), windows):
            if w:
                todo.append((producer(v), w))
            elif producer(v) is not None:
                conflict.add(producer(v).operation)  # read whole here (x·xᵀ): it stays whole
    cone = {op: w for op, w in need.items() if op not in conflict}
    members = set(cone) | {root.operation}
    changed = True
    while changed:  # a member read whole by any op outside the cone is computed whole: not a member
        changed = False
        for op in list(cone):
            if any(u not in members for u in mc.users(op.results[0])):
                del cone[op]
                members.discard(op)
                changed = True
    return cone


def _window_slice(b, x, window: Window):
    s = shape_of(x.type)
    start, limit, strides = [0] * len(s), list(s), [1] * len(s)
    for d, (lo, hi, st) in window.items():
        start[d], limit[d], strides[d] = lo, hi, st
    return b.slice(x, start, limit, strides)


def _window_shape(shape, window: Window) -> list[int]:
    return [-(-(window[d][1] - window[d][0]) // window[d][2]) if d in window else n for d, n in enumerate(shape)]


@register
class SliceThroughCone(Pattern):
    """x[window] -> the ops computing x, each on the window of its operands that the slice reads,
    when x is computed by a cone of row-wise ops (elementwise, broadcasts, transposes, reduces
    over other dims, dot_generals) holding a dot or a reduce that only the slice reads: the
    classifier's slice of a transformer's first token computes the last layer for that token."""

    root = "stablehlo.slice"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        shape = static_shape(op.operands[0])
        if shape is None:
            return None
        start, limit, strides = slice_params(op)
        window = {d: (lo, hi, st) for d, (lo, hi, st, n) in enumerate(zip(start, limit, strides, shape))
                  if (lo, hi, st) != (0, n, 1)}
        if not window:
            return None
        cone = _cone(op, window)
        if not any(mc.name(c) in ("stablehlo.dot_general", "stablehlo.reduce") for c in cone):
            return None
        ops = sorted(cone, key=functools.cmp_to_key(lambda a, b: -1 if mc.is_before(a, b) else 1))
        index = {c: i for i, c in enumerate(ops)}
        steps = []  # per cone op: (op, its window, leaf operands (None: a cone value), how each is read)
        for c in ops:
            operands = mc.operands(c)
            inside = [producer(v) is not None and producer(v).operation in index for v in operands]
            steps.append((c, cone[c], [None if i else v for v, i in zip(operands, inside)],
                          [(index[producer(v).operation], None) if i else (-1, w)
                           for v, w, i in zip(operands, _operand_windows(c, cone[c]), inside)]))
        return Match(steps=steps)

    def rewrite(self, b, m):
        built = []
        for op, window, leaves, reads in m.steps:
            operands = [built[step] if step >= 0 else _window_slice(b, v, w) if w else v
                        for v, (step, w) in zip(leaves, reads)]
            result = op.results[0]
            t = tensor_type(_window_shape(shape_of(result.type), window), element_type_of(result))
            built.append(b.clone(op, operands, [t]))
        return built[-1]
