"""Small contractions as elementwise work: a `dot_general` too small for a matrix kernel, or a
reduce over a few elements per output, becomes plain elementwise ops that XLA fuses with their
neighbours.

On CPU every `dot_general` is its own kernel call (XNNPACK or Eigen) with a fixed overhead of
microseconds, so the 8x8 and 4x8 products of a Kalman filter step or the 64x4 · 4 policy of a
CartPole scan cost far more in calls than in arithmetic, once per loop iteration. As
multiply + reduce they join the surrounding loop fusions (`small_dot_to_reduce`: dots in a
loop body, below `MAX_MACS` multiply-adds, float dots whose operands and result share one
element type).
A reduce over a tiny dim (the 3 coordinates of the pairwise distances in an N-body or
Lennard-Jones step, a 256x256x3 array) runs as a reduction kernel over a minor dim of 3;
as 3 slices and 2 adds it is one vectorized elementwise fusion with the subtraction and the
square that produce it (`small_reduce_to_elementwise`).

REASSOCIATE: the sums run in another order than the dot kernel's or the reduction's.
"""

from __future__ import annotations

import itertools
import math

from shlo_env.ir.builder import shape
from shlo_env.measure.numerics import Numerics
from shlo_env.patterns.base import Match, Pattern, register
from shlo_env.patterns.matching import dot_dims, i64s, reduce_body, static_shape
from shlo_env.ir.tensor_types import element_type_of, is_float

#: The largest dot (multiply-adds) offered as multiply + reduce.
MAX_MACS = 4096


def _in_loop(op) -> bool:
    """Whether `op` sits in a `stablehlo.while` body (of this function): where a dot's call
    overhead is paid once per iteration. Outside loops a small dot costs one call, not worth a
    site of its own at every small product of a program."""
    parent = op.operation.parent
    while parent is not None and parent.name != "func.func":
        if parent.name == "stablehlo.while":
            return True
        parent = parent.parent
    return False


@register
class SmallDotToReduce(Pattern):
    """dot_general(a, b) in a loop body, with at most MAX_MACS multiply-adds -> reduce_sum(broadcast(a) *
    broadcast(b)) over the contracted dims (no matrix-kernel call per iteration; fuses with its neighbours)."""

    root = "stablehlo.dot_general"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        if not _in_loop(op):
            return None
        m = _dot_match(op)
        if m is None or not m.lc or math.prod(shape(op.result)) * math.prod(shape(m.lhs)[c] for c in m.lc) > MAX_MACS:
            return None
        return m

    def rewrite(self, b, m):
        product = _broadcast_product(b, m)
        nc = len(m.lc)
        return b.reduce_sum(product, list(range(len(shape(product)) - nc, len(shape(product)))))


def _broadcast_product(b, m):
    """The elementwise product of a dot's operands broadcast to (batch, lhs free, rhs free,
    contracted): the dot's result before its sum over the contracted dims."""
    ls, rs = shape(m.lhs), shape(m.rhs)
    lfree = [i for i in range(len(ls)) if i not in m.lb and i not in m.lc]
    rfree = [i for i in range(len(rs)) if i not in m.rb and i not in m.rc]
    nb, nl, nr, nc = len(m.lb), len(lfree), len(rfree), len(m.lc)
    full = [ls[i] for i in m.lb] + [ls[i] for i in lfree] + [rs[i] for i in rfree] + [ls[i] for i in m.lc]
    lhs = b.transpose(m.lhs, list(m.lb) + lfree + list(m.lc))
    lhs = b.broadcast_in_dim(lhs, full, list(range(nb + nl)) + list(range(nb + nl + nr, nb + nl + nr + nc)))
    rhs = b.transpose(m.rhs, list(m.rb) + rfree + list(m.rc))
    rhs = b.broadcast_in_dim(rhs, full, list(range(nb)) + list(range(nb + nl, nb + nl + nr + nc)))
    return b.mul(lhs, rhs)


def _dot_match(op):
    """A Match of a float dot_general with static shapes whose operands and result share one
    element type (lhs, rhs and its dimension numbers), or None."""
    lhs, rhs = op.operands
    if any(static_shape(v) is None for v in (lhs, rhs, op.result)) or "algorithm" in op.operation.attributes:
        return None
    elem = element_type_of(op.result)
    if not is_float(elem) or element_type_of(lhs) != elem or element_type_of(rhs) != elem:
        return None
    d = dot_dims(op)
    return Match(lhs=lhs, rhs=rhs, lb=d.lhs_batch, rb=d.rhs_batch, lc=d.lhs_contract, rc=d.rhs_contract)


@register
class DotWithoutContractionToMultiply(Pattern):
    """dot_general(a, b) with no contracted dims -> broadcast(a) * broadcast(b), one product per
    element (a per-head mask or an outer product that the CPU backend runs as a batch of 1x1
    matrix products becomes one elementwise loop that fuses with its neighbours)."""

    root = "stablehlo.dot_general"
    numerics = Numerics.REASSOCIATE  # a GPU dot of f32 may round its operands (TF32); the multiply does not

    def match(self, op):
        m = _dot_match(op)
        return m if m is not None and not m.lc else None

    def rewrite(self, b, m):
        return _broadcast_product(b, m)


#: The most elements one output of a reduce may combine to be offered as explicit adds.
MAX_UNROLLED_REDUCE = 8


@register
class SmallReduceToElementwise(Pattern):
    """reduce(x, dims) with at most MAX_UNROLLED_REDUCE elements per output (the 3 coordinates of a
    pairwise distance) -> combine(combine(init, x[.., 0, ..]), x[.., 1, ..]) ...: elementwise ops on
    slices that fuse with their producers instead of a reduction over a tiny (often minor) dim."""

    root = "stablehlo.reduce"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        if len(op.operands) != 2:
            return None
        name = reduce_body(op)
        if name is None:
            return None
        shape = static_shape(op.operands[0])
        if shape is None or not shape:
            return None
        dims = i64s(op, "dimensions")
        if not 2 <= math.prod(shape[d] for d in dims) <= MAX_UNROLLED_REDUCE:
            return None
        return Match(x=op.operands[0], init=op.operands[1], dims=dims, combine=name)

    def rewrite(self, b, m):
        full = shape(m.x)
        out = [n for d, n in enumerate(full) if d not in m.dims]
        acc = b.broadcast_in_dim(m.init, out, [])
        for index in itertools.product(*[range(full[d]) for d in m.dims]):
            lo, hi = [0] * len(full), list(full)
            for d, i in zip(m.dims, index):
                lo[d], hi[d] = i, i + 1
            acc = b.elementwise(m.combine, acc, b.reshape(b.slice(m.x, lo, hi), out))
        return acc
