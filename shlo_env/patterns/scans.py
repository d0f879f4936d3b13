"""Prefix scans: a cumulative sum (max, min) lowered as a `reduce_window` becomes a
parallel scan.

`jnp.cumsum(x, axis)` (and `lax.cummax`, `cummin`, `cumprod`) lower on CPU and GPU to a
`reduce_window` whose window covers the whole axis, padded by n - 1 on one side: every output
element reduces its own window, n·(n+1)/2 operations along an axis of n, which XLA runs as
written. `reduce_window_prefix_to_scan` computes the same prefix with the work-efficient
parallel scan JAX's `lax.associative_scan` uses (strided slices, the combining op, and an
interleave: about 2n operations in 2·log2(n) steps). On the corpus's causal linear attention
(`attn_linear_causal`, a 256-long cumsum of outer products) the cumsum is most of the program.

REASSOCIATE: the scan combines the elements in another order (a tree instead of one window per
output), so float sums round differently. Products (`cumprod`) are not offered: a reordered
float product can overflow to inf and meet an underflowed 0 (NaN) where the original is 0
(see `_IDENTITY`).
"""

from __future__ import annotations

import math

import numpy as np
from jaxlib.mlir import ir

from shlo_env.ir.builder import shape
from shlo_env.ir.ops import block_ops
from shlo_env.measure.numerics import Numerics
from shlo_env.patterns.base import Match, Pattern, register
from shlo_env.patterns.matching import COMMUTATIVE, i64s, splat_value, static_shape
from shlo_env.ir.tensor_types import is_float

#: The combining ops a prefix scan is offered for, with their identity (the padding value
#: `jnp.cumsum` & co. use); a float identity only for float element types.
#: Not multiply (`cumprod`): the tree multiplies blocks x[i..j] = prefix(j) / prefix(i - 1),
#: which are unbounded where a prefix is tiny, so it overflows where the sequential product
#: underflowed (1e-30 * 1e-30 * 3e38 * 3e38 in float32: 0 one by one, 0 * inf = NaN by the
#: tree) or the other way round, whatever the inputs' range. A block sum is a difference of
#: two prefixes, at most twice the largest in magnitude: a sum overflows only where the
#: original's own partial sums come within a factor 2 of the largest finite value, and sums
#: of infinities and NaNs do not depend on the order. max and min are exact in any order.
_IDENTITY = {"stablehlo.add": 0, "stablehlo.maximum": -math.inf, "stablehlo.minimum": math.inf}


def _combiner(op) -> str | None:
    """The op name of a reduce_window body `return f(a, b)` with f commutative, else None."""
    blk = op.regions[0].blocks[0]
    body = block_ops(blk)
    if len(body) != 2 or body[0].name not in COMMUTATIVE or len(body[0].operands) != 2:
        return None
    if set(body[0].operands) != set(blk.arguments) or body[1].operands[0] != body[0].results[0]:
        return None
    return body[0].name


def _ints(op, name: str, rank: int, default: int) -> list[int]:
    return i64s(op, name) if name in op.attributes else [default] * rank


def _prefix_axis(op) -> tuple[int, bool] | None:
    """(axis, reverse) when `op` is a prefix reduction along one axis: window n on that axis
    padded by n - 1 before it (after it for a reverse scan), every other window dim 1 and no
    other padding, strides and dilations 1. Else None."""
    shape = static_shape(op.operands[0])
    if shape is None:
        return None
    rank = len(shape)
    window = i64s(op, "window_dimensions")
    if _ints(op, "window_strides", rank, 1) != [1] * rank:
        return None
    if _ints(op, "base_dilations", rank, 1) != [1] * rank or _ints(op, "window_dilations", rank, 1) != [1] * rank:
        return None
    pad = (np.array(ir.DenseIntElementsAttr(op.attributes["padding"])).reshape(rank, 2).tolist()
           if "padding" in op.attributes else [[0, 0]] * rank)
    axes = [d for d in range(rank) if window[d] != 1 or pad[d] != [0, 0]]
    if len(axes) != 1:
        return None
    d = axes[0]
    n = shape[d]
    if n < 2 or window[d] != n or pad[d] not in ([n - 1, 0], [0, n - 1]):
        return None
    return d, pad[d] == [0, n - 1]


@register
class ReduceWindowPrefixToScan(Pattern):
    """reduce_window(x, window n along an axis of n, padded n - 1 before) (cumsum, cummax,
    cummin; not cumprod) -> the same prefix by a parallel scan (2·log2 n strided steps, ~2n ops
    instead of n²/2)."""

    root = "stablehlo.reduce_window"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        if len(op.operands) != 2 or len(op.results) != 1:
            return None
        name = _combiner(op)
        if name not in _IDENTITY:
            return None
        found = _prefix_axis(op)
        if found is None:
            return None
        identity = _IDENTITY[name]
        x, init = op.operands
        if not is_float(x.type) and name != "stablehlo.add":
            return None  # integer max/min/product identities: not offered
        if splat_value(init) != identity:
            return None
        axis, reverse = found
        return Match(x=x, axis=axis, reverse=reverse, combine=name)

    def rewrite(self, b, m):
        def reverse(v):
            return b.op("stablehlo.reverse", [v], [v.type], {"dimensions": ir.DenseI64ArrayAttr.get([m.axis])}).result

        x = reverse(m.x) if m.reverse else m.x
        out = prefix_scan(b, x, m.axis, lambda p, q: b.elementwise(m.combine, p, q))
        return reverse(out) if m.reverse else out


def _slice_axis(b, x, axis: int, start: int, limit: int, stride: int = 1):
    dims = shape(x)
    lo, hi, st = [0] * len(dims), list(dims), [1] * len(dims)
    lo[axis], hi[axis], st[axis] = start, limit, stride
    return b.slice(x, lo, hi, st)


def _interleave(b, even, odd, axis: int):
    """even[0], odd[0], even[1], odd[1], ... along `axis` (even as long as odd or one longer):
    both stacked on a new axis after `axis`, then merged by a reshape (no arithmetic)."""
    e, o = shape(even), shape(odd)
    longer = e[axis] > o[axis]
    if longer:  # pad odd with a copy of its last element, sliced off again below
        odd = b.concat([odd, _slice_axis(b, odd, axis, o[axis] - 1, o[axis])], axis)
    stacked = [e[:axis + 1] + (1,) + e[axis + 1:]] * 2
    both = b.concat([b.reshape(even, stacked[0]), b.reshape(odd, stacked[1])], axis + 1)
    merged = e[:axis] + (2 * e[axis],) + e[axis + 1:]
    out = b.reshape(both, merged)
    return _slice_axis(b, out, axis, 0, 2 * e[axis] - 1) if longer else out


def prefix_scan(b, x, axis: int, combine):
    """Inclusive prefix of `x` along `axis` under the associative `combine(p, q)`: the
    recursive odd/even scan of `lax.associative_scan` (the odd positions' prefixes are the
    scan of pairwise combined neighbours, the even ones add one element to them)."""
    n = shape(x)[axis]
    if n < 2:
        return x
    pairs = combine(_slice_axis(b, x, axis, 0, n - 1, 2), _slice_axis(b, x, axis, 1, n, 2))
    odd = prefix_scan(b, pairs, axis, combine)  # prefixes ending at 1, 3, 5, ...
    first = _slice_axis(b, x, axis, 0, 1)
    if n == 2:
        return _interleave(b, first, odd, axis)
    rest = _slice_axis(b, x, axis, 2, n, 2)  # x[2], x[4], ...
    before = _slice_axis(b, odd, axis, 0, shape(rest)[axis])
    even = b.concat([first, combine(before, rest)], axis)  # prefixes ending at 0, 2, 4, ...
    return _interleave(b, even, odd, axis)
