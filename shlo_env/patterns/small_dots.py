"""Small dots as elementwise work: a `dot_general` too small for a matrix kernel becomes a
broadcast multiply and a sum, which XLA fuses with its neighbours.

On CPU every `dot_general` is its own kernel call (XNNPACK or Eigen) with a fixed overhead of
microseconds, so the 8x8 and 4x8 products of a Kalman filter step or the 64x4 · 4 policy of a
CartPole scan cost far more in calls than in arithmetic, once per loop iteration. As
multiply + reduce they join the surrounding loop fusions. Offered only below `MAX_MACS`
multiply-adds (bigger products belong in a GEMM), and only for float dots whose operands and
result share one element type.

REASSOCIATE: the sum over the contracted dims runs in the reduction's order, not the dot
kernel's.
"""

from __future__ import annotations

import math

from shlo_env.builder import shape
from shlo_env.numerics import Numerics
from shlo_env.patterns.base import Match, Pattern, register
from shlo_env.patterns.matching import dot_dims, static_shape
from shlo_env.tensor_types import element_type_of, is_float

#: The largest dot (multiply-adds) offered as multiply + reduce.
MAX_MACS = 4096


@register
class SmallDotToReduce(Pattern):
    """dot_general(a, b) with at most MAX_MACS multiply-adds -> reduce_sum(broadcast(a) * broadcast(b))
    over the contracted dims (no matrix-kernel call; fuses with its neighbours)."""

    root = "stablehlo.dot_general"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        lhs, rhs = op.operands
        ls, rs, out = static_shape(lhs), static_shape(rhs), static_shape(op.result)
        if ls is None or rs is None or out is None:
            return None
        elem = element_type_of(op.result)
        if not is_float(elem) or element_type_of(lhs) != elem or element_type_of(rhs) != elem:
            return None
        d = dot_dims(op)
        if math.prod(out) * math.prod(ls[c] for c in d.lhs_contract) > MAX_MACS:
            return None
        return Match(lhs=lhs, rhs=rhs, lb=d.lhs_batch, rb=d.rhs_batch, lc=d.lhs_contract, rc=d.rhs_contract)

    def rewrite(self, b, m):
        ls, rs = shape(m.lhs), shape(m.rhs)
        lfree = [i for i in range(len(ls)) if i not in m.lb and i not in m.lc]
        rfree = [i for i in range(len(rs)) if i not in m.rb and i not in m.rc]
        nb, nl, nr, nc = len(m.lb), len(lfree), len(rfree), len(m.lc)
        # both operands as (batch, lhs free, rhs free, contracted), broadcast where absent
        full = ([ls[i] for i in m.lb] + [ls[i] for i in lfree] + [rs[i] for i in rfree]
                + [ls[i] for i in m.lc])
        lhs = b.transpose(m.lhs, list(m.lb) + lfree + list(m.lc))
        lhs = b.broadcast_in_dim(lhs, full, list(range(nb + nl)) + list(range(nb + nl + nr, nb + nl + nr + nc)))
        rhs = b.transpose(m.rhs, list(m.rb) + rfree + list(m.rc))
        rhs = b.broadcast_in_dim(rhs, full, list(range(nb)) + list(range(nb + nl, nb + nl + nr + nc)))
        return b.reduce_sum(b.mul(lhs, rhs), list(range(nb + nl + nr, len(full))))
