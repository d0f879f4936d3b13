"""Sums of zero-padded pieces as one concatenate (the gradient of slices of a stacked weight).

The reverse mode of `w[l]` for a stacked `w` (layers, ...) is `pad(g_l)`: the layer's gradient
zero-padded to the whole stack. Summed over the layers, jax emits `add(add(pad(g_0), pad(g_1)),
...)`: L-1 dense adds over the whole (layers, ...) array, L full-size padded copies, for a
result that is the L pieces laid side by side. On the llama decode step of Enzyme-JAX's suite
(`benchmarks/peer_programs.py`, reverse mode) these are 246 pads and their adds; Enzyme-JAX's
pad patterns remove them (docs/experiments/2026-11-29-vs-enzyme.md), XLA does not.

`SumOfDisjointPads`: an add tree (intermediate adds used once) whose leaves are three or more
zero pads (no interior padding, no negative edge padding) that pad alike in every dim but one,
where the pieces occupy disjoint ranges -> the pieces concatenated in order along that dim, zeros between
them where they leave a gap, padded once. EXACT: every element of the sum is one piece's
element plus zeros (x + 0 is x; a -0 piece element becomes +0 in the original, which the tiers
count as equal).

It never costs: L-1 whole-array adds and L whole-array pads become one concatenate of the
pieces and one pad (plus a zero broadcast per gap), never more ops and no arithmetic. So it is
`sweep_first`: the search takes it at every site as its first whole-program candidate
(`shlo_env.search.first_sweep`); in the search's ordinary order a 7k-op program's budget ran
out before it was reached. Two pieces are left alone: XLA fuses the one add of two pads into a
single loop, which is what the concatenate compiles to; measured alone it moved nothing
(1.004-1.008), and on science/realnvp_flow_train (seven such pairs, the reverse mode of a
split) it was 1.10 of the original. Six pieces: 0.31-0.87 (docs/experiments/2026-11-29-vs-enzyme.md).
"""

from __future__ import annotations

from shlo_env.ir.tensor_types import shape_of
from shlo_env.patterns.base import Match, Numerics, Pattern, register
from shlo_env.patterns.matching import i64s, producer, single_use, splat_value, users

#: The most pads one match gathers (a bound on the walk of an add tree).
MAX_LEAVES = 64
#: The fewest: with two, XLA's fused add of two pads is already the concatenate's loop.
MIN_PIECES = 3


def _zero_pad(value):
    """(piece, low, high) of a value made by a pad of zeros without interior or negative
    padding, else None."""
    pad = producer(value, "stablehlo.pad")
    if pad is None:
        return None
    low, high, interior = i64s(pad, "edge_padding_low"), i64s(pad, "edge_padding_high"), i64s(pad, "interior_padding")
    if any(interior) or min(low + high, default=0) < 0:
        return None
    if splat_value(pad.operands[1]) != 0:
        return None
    return pad.operands[0], low, high


def _leaves(op) -> list | None:
    """The operands of the add tree rooted at `op` (adds used only inside the tree), or None
    past MAX_LEAVES."""
    out, stack = [], list(op.operands)[::-1]
    while stack:
        v = stack.pop()
        inner = producer(v, "stablehlo.add")
        if inner is not None and single_use(v):
            stack.extend(list(inner.operands)[::-1])
        else:
            out.append(v)
        if len(out) + len(stack) > MAX_LEAVES:
            return None
    return out


def _layout(op):
    """(dim, [(start, piece)] sorted, low, high, size) when the tree at `op` is a sum of
    disjoint zero pads, else None."""
    leaves = _leaves(op)
    if not leaves or len(leaves) < MIN_PIECES:
        return None
    pads = [_zero_pad(v) for v in leaves]
    if any(p is None for p in pads):
        return None
    first_low, first_high = pads[0][1], pads[0][2]
    rank = len(first_low)
    varying = [d for d in range(rank) if any(p[1][d] != first_low[d] or p[2][d] != first_high[d] for p in pads)]
    if len(varying) > 1:
        return None
    dim = varying[0] if varying else None
    if dim is None:  # every pad the same: the pieces overlap entirely
        return None
    placed = sorted(((p[1][dim], p[0]) for p in pads), key=lambda t: t[0])
    end = -1
    for start, piece in placed:
        if start < end:
            return None  # overlapping pieces: a real sum
        end = start + shape_of(piece.type)[dim]
    size = shape_of(op.result.type)[dim]
    return dim, placed, first_low, first_high, size


@register
class SumOfDisjointPads(Pattern):
    """add(pad(a, 0), pad(b, 0), pad(c, 0), ...) -> pad(concat(a, [zeros], b, c, ...), 0) when three or more zero
    pads put their pieces side by side in one dim (a stacked weight's gradient; the search takes it everywhere
    first: `sweep_first`)."""

    root = "stablehlo.add"
    operand_from = ("stablehlo.pad", "stablehlo.add")
    numerics = Numerics.EXACT
    sweep_first = True

    def match(self, op):
        layout = _layout(op)
        if layout is None:
            return None
        # Offer the whole tree once, at its top: skip an add whose only user is an add whose
        # tree is also such a sum.
        if single_use(op.result):
            (user,) = users(op.result)
            if user.operation.name == "stablehlo.add" and _layout(user) is not None:
                return None
        dim, placed, low, high, size = layout
        return Match(pieces=[p for _, p in placed], starts=[s for s, _ in placed], dim=dim, low=low, high=high,
                     size=size, zero=_zero_pad_value(op))

    def rewrite(self, b, m):
        parts, at = [], m.starts[0]
        for start, piece in zip(m.starts, m.pieces):
            if start > at:  # zeros where no piece lies
                gap = list(shape_of(piece.type))
                gap[m.dim] = start - at
                parts.append(b.broadcast_in_dim(m.zero, gap, []))
            parts.append(piece)
            at = start + shape_of(piece.type)[m.dim]
        body = b.concat(parts, m.dim)
        low, high = list(m.low), list(m.high)
        low[m.dim] = m.starts[0]
        high[m.dim] = m.size - at
        return b.pad(body, m.zero, low, high, [0] * len(low))


def _zero_pad_value(op):
    """The padding value (a rank-0 zero) of the tree's first pad: reused for the new pad."""
    v = op.operands[0]
    while producer(v, "stablehlo.pad") is None:
        v = producer(v, "stablehlo.add").operands[0]
    return producer(v, "stablehlo.pad").operands[1]
