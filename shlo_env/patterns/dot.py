"""Dot / linear-algebra rewrites: choices XLA does not make itself.

Written for plain matrix products (rank-2 · rank-2 or rank-2 · vector, a's last dim contracted
with b's first, one dtype). `matmul_operands(v)` recognizes them.
"""

from __future__ import annotations

import math

from jaxlib.mlir import ir

from shlo_env.patterns import match_cache as mc
from shlo_env.patterns.base import Match, Numerics, Pattern, register
from shlo_env.patterns.matching import (
    DotDims, IndependentOps, ancestors_since, broadcast_dims, commuted, concat_dim, dot_dims, i64s, matmul_flops, matmul_operands,
    operand_ancestors_since, permutation, producer, scalar_operand, single_use, splat_value,
)
from shlo_env.ir.tensor_types import element_type_of, is_float, shape_of


def _mm_flops(a_shape, b_shape) -> int:
    m, k = a_shape
    n = b_shape[1] if len(b_shape) == 2 else 1
    return matmul_flops(m, k, n)


def _chain_flops(a, b, c):
    """Flops of (a·b)·c and of a·(b·c) for shapes a[m,k], b[k,n], c[n,p] (c may be a vector)."""
    m, k = a
    n = b[1]
    p = c[1] if len(c) == 2 else 1
    return matmul_flops(m, k, n) + matmul_flops(m, n, p), matmul_flops(k, n, p) + matmul_flops(m, k, p)


def _chain(op, inner_on: int):
    """(A, B, C, inner) for (A·B)·C (inner_on=0) or A·(B·C) (inner_on=1) of plain matmuls,
    with B a matrix; `inner` is the value of the inner product."""
    outer = matmul_operands(op.result)
    inner = outer and matmul_operands(outer[inner_on])
    if not inner:
        return None
    (a, b), c = (inner[:2], outer[1]) if inner_on == 0 else ((outer[0], inner[0]), inner[1])
    if len(shape_of(b.type)) != 2:
        return None
    return a, b, c, outer[inner_on]


def _shapes(*values):
    return [shape_of(v.type) for v in values]


@register
class ReassociateLeftToRight(Pattern):
    """(A·B)·C -> A·(B·C), offered when it needs fewer flops."""

    root = "stablehlo.dot_general"
    operand_from = "stablehlo.dot_general"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        chain = _chain(op, inner_on=0)
        if chain is None:
            return None
        a, b, c, ab = chain
        before, after = _chain_flops(*_shapes(a, b, c))
        if not single_use(ab):
            after += _mm_flops(*_shapes(a, b))  # A·B is still needed
        if after < before:
            return Match(a=a, b=b, c=c, like=op)

    def rewrite(self, b, m):
        return b.matmul(m.a, b.matmul(m.b, m.c, like=m.like), like=m.like)


@register
class ReassociateRightToLeft(Pattern):
    """A·(B·C) -> (A·B)·C, offered when it needs fewer flops."""

    root = "stablehlo.dot_general"
    operand_from = "stablehlo.dot_general"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        chain = _chain(op, inner_on=1)
        if chain is None:
            return None
        a, b, c, bc = chain
        left, right = _chain_flops(*_shapes(a, b, c))
        if not single_use(bc):
            left += _mm_flops(*_shapes(b, c))  # B·C is still needed
        if left < right:
            return Match(a=a, b=b, c=c, like=op)

    def rewrite(self, b, m):
        return b.matmul(b.matmul(m.a, m.b, like=m.like), m.c, like=m.like)


@register
class DistributeLeft(Pattern):
    """x·(W + V) -> x·W + x·V; when V = A·B, x·V is computed as (x·A)·B if that is cheaper."""

    root = "stablehlo.dot_general"
    operand_from = "stablehlo.add"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        mm = matmul_operands(op.result)
        if mm is None:
            return None
        x, s, _ = mm
        add = producer(s, "stablehlo.add")
        if add is None:
            return None
        w, v = add.operands
        return Match(x=x, w=w, v=v, v_factors=_low_rank_factors(x, v), w_factors=_low_rank_factors(x, w),
                     like=op)

    def rewrite(self, b, m):
        return b.add(_times(b, m.x, m.w, m.w_factors, m.like), _times(b, m.x, m.v, m.v_factors, m.like))


def _low_rank_factors(x, v):
    """(A, B) when v = A·B and (x·A)·B needs fewer flops than x·(A·B) given v is computed anyway."""
    inner = matmul_operands(v)
    if inner is None:
        return None
    a, b_, _ = inner
    if len(shape_of(b_.type)) != 2 or len(shape_of(x.type)) != 2:
        return None
    xs, as_, bs = shape_of(x.type), shape_of(a.type), shape_of(b_.type)
    via_v = matmul_flops(xs[0], xs[1], bs[1])
    if single_use(v):  # V = A·B is no longer needed once x·V is computed from the factors
        via_v += matmul_flops(as_[0], as_[1], bs[1])
    via_factors = matmul_flops(xs[0], as_[0], as_[1]) + matmul_flops(xs[0], as_[1], bs[1])
    if via_factors < via_v:
        return (a, b_)
    return None


def _times(b, x, v, factors, like):
    if factors is None:
        return b.matmul(x, v, like=like)
    a, b_ = factors
    return b.matmul(b.matmul(x, a, like=like), b_, like=like)


@register
class DistributeRight(Pattern):
    """(W + V)·x -> W·x + V·x."""

    root = "stablehlo.dot_general"
    operand_from = "stablehlo.add"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        mm = matmul_operands(op.result)
        if mm is None:
            return None
        s, x, _ = mm
        add = producer(s, "stablehlo.add")
        if add is None:
            return None
        w, v = add.operands
        return Match(x=x, w=w, v=v, like=op)

    def rewrite(self, b, m):
        return b.add(b.matmul(m.w, m.x, like=m.like), b.matmul(m.v, m.x, like=m.like))


@register
class FactorCommonLhs(Pattern):
    """x·W + x·V -> x·(W + V): one product instead of two."""

    root = "stablehlo.add"
    operand_from = "stablehlo.dot_general"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        p, q = op.operands
        mp, mq = matmul_operands(p), matmul_operands(q)
        if mp is None or mq is None or mp[0] != mq[0]:
            return None
        if mp[1].type != mq[1].type or not (single_use(p) and single_use(q)):
            return None
        return Match(x=mp[0], w=mp[1], v=mq[1], like=mp[2])

    def rewrite(self, b, m):
        return b.matmul(m.x, b.add(m.w, m.v), like=m.like)


@register
class FactorCommonRhs(Pattern):
    """W·x + V·x -> (W + V)·x."""

    root = "stablehlo.add"
    operand_from = "stablehlo.dot_general"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        p, q = op.operands
        mp, mq = matmul_operands(p), matmul_operands(q)
        if mp is None or mq is None or mp[1] != mq[1]:
            return None
        if mp[0].type != mq[0].type or not (single_use(p) and single_use(q)):
            return None
        return Match(x=mp[1], w=mp[0], v=mq[0], like=mp[2])

    def rewrite(self, b, m):
        return b.matmul(b.add(m.w, m.v), m.x, like=m.like)


def is_sum(op) -> bool:
    """A single-input `stablehlo.reduce` that adds, starting from zero."""
    if op.operation.name != "stablehlo.reduce" or len(op.operands) != 2:
        return False
    body = [o.operation for o in op.operation.regions[0].blocks[0].operations]
    if len(body) != 2 or body[0].name != "stablehlo.add":
        return False
    args = list(op.operation.regions[0].blocks[0].arguments)
    if set(body[0].operands) != set(args) or body[1].operands[0] != body[0].result:
        return False
    return splat_value(op.operands[1]) == 0


@register
class ReduceThroughDot(Pattern):
    """sum_i (X·W)[i, :] -> (sum_i X[i, :])·W, and likewise over columns (sum_j W[:, j])."""

    root = "stablehlo.reduce"
    operand_from = "stablehlo.dot_general"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        if not is_sum(op):
            return None
        mm = matmul_operands(op.operands[0])
        if mm is None or len(shape_of(mm[1].type)) != 2:
            return None
        dims = sorted(i64s(op, "dimensions"))
        if dims not in ([0], [1], [0, 1]):
            return None
        return Match(x=mm[0], w=mm[1], dims=dims, like=mm[2])

    def rewrite(self, b, m):
        if m.dims == [0]:
            return b.dot(b.reduce_sum(m.x, [0]), m.w, ((0,), (0,)), like=m.like)
        if m.dims == [1]:
            return b.dot(m.x, b.reduce_sum(m.w, [1]), ((1,), (0,)), like=m.like)
        return b.dot(b.reduce_sum(m.x, [0]), b.reduce_sum(m.w, [1]), ((0,), (0,)), like=m.like)


# --- dot_general canonical forms: broadcasts folded into the dimension numbers ------------
#
# Both patterns below describe a product as an einsum: each operand dim carries a label, some
# labels are summed, the rest are the output in a given order. `_einsum_dot` turns that into one
# dot_general (a label on both sides: batch or contracting; on one side: that side's free dim)
# plus the transpose (and, for size-1 labels neither side has, the reshape) to the output order.

#: Shorter contractions stay a fused multiply-and-sum loop: a dot call per output costs more.
MIN_CONTRACTION = 16


def _through_broadcast(v):
    """(x, where) with v = broadcast_in_dim(...(x)) (a chain) that only adds dims: x dim i is
    v dim where[i]. Else (v, identity)."""
    x, where = v, list(range(len(shape_of(v.type))))
    while (bc := producer(x, "stablehlo.broadcast_in_dim")) is not None:
        x, where = bc.operands[0], [where[d] for d in broadcast_dims(bc)]
    vs = shape_of(v.type)
    if all(n == vs[w] for n, w in zip(shape_of(x.type), where)):
        return x, where
    return v, list(range(len(vs)))


def _einsum_dot(lhs_labels, rhs_labels, summed, out_labels, sizes):
    """Match fields (dims, perm, shape) of the dot_general computing the einsum, or None when
    a summed label is missing on one side or a kept label of size > 1 on both."""
    d = DotDims([], [], [], [])
    for label in summed:
        if label not in lhs_labels or label not in rhs_labels:
            return None
        d.lhs_contract.append(lhs_labels.index(label))
        d.rhs_contract.append(rhs_labels.index(label))
    order = []  # the label of each result dim of the dot
    for label in out_labels:
        if label in lhs_labels and label in rhs_labels:
            d.lhs_batch.append(lhs_labels.index(label))
            d.rhs_batch.append(rhs_labels.index(label))
            order.append(label)
        elif label not in lhs_labels and label not in rhs_labels and sizes[label] != 1:
            return None
    order += [x for x in lhs_labels if x not in summed and x not in rhs_labels]
    order += [x for x in rhs_labels if x not in summed and x not in lhs_labels]
    present = [x for x in out_labels if x in order]
    return dict(dims=d, perm=[order.index(x) for x in present], shape=[sizes[x] for x in out_labels])


def _finish_einsum(b, lhs, rhs, m, like=None):
    return b.reshape(b.transpose(_redot(b, like, lhs, rhs, m.dims), m.perm), m.shape)


@register
class ReduceOfProductToDot(Pattern):
    """sum(a * b, dims) -> dot_general(a, b) contracting dims, when they hold 16 or more
    elements: broadcast operands enter unbroadcast, a dim only one side has becomes that side's
    free dim (the einsum form)."""

    root = "stablehlo.reduce"
    operand_from = "stablehlo.multiply"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        mul = producer(op.operands[0], "stablehlo.multiply")
        if mul is None or not is_sum(op) or not is_float(op.operands[0].type):
            return None
        if any(scalar_operand(v) is not None for v in mul.operands):
            return None  # sum(s * x) is ReduceSumOfScaled's
        shape = shape_of(mul.result.type)
        summed = sorted(i64s(op, "dimensions"))
        if math.prod(shape[i] for i in summed) < MIN_CONTRACTION:
            return None
        (a, wa), (b_, wb) = (_through_broadcast(v) for v in mul.operands)
        kept = [dim for dim in range(len(shape)) if dim not in summed]
        e = _einsum_dot(wa, wb, summed, kept, dict(enumerate(shape)))
        return e and Match(lhs=a, rhs=b_, **e)

    def rewrite(self, b, m):
        return _finish_einsum(b, m.lhs, m.rhs, m)


def _dot_labels(op):
    """Labels of a dot_general's operand dims ('b', i) batch, ('c', i) contracting, ('l'|'r', dim)
    free, the output labels in order, and the size of each label."""
    d = dot_dims(op)
    labels, sizes = [], {}
    for side, (batch, contract) in zip("lr", ([d.lhs_batch, d.lhs_contract], [d.rhs_batch, d.rhs_contract])):
        shape = shape_of(op.operands["lr".index(side)].type)
        names = [("b", batch.index(i)) if i in batch else ("c", contract.index(i)) if i in contract else (side, i)
                 for i in range(len(shape))]
        sizes.update(zip(names, shape))
        labels.append(names)
    summed = [("c", i) for i in range(len(d.lhs_contract))]
    out = [("b", i) for i in range(len(d.lhs_batch))]
    out += [x for x in labels[0] if x[0] == "l"] + [x for x in labels[1] if x[0] == "r"]
    return labels, summed, out, sizes


@register
class DotOfBroadcast(Pattern):
    """dot_general(broadcast(x), y) -> dot_general(x, y) with the broadcast folded into the
    dimension numbers: an added batch dim becomes a free dim of the other side, an added size-1
    dim comes back by a reshape of the (smaller) result."""

    root = "stablehlo.dot_general"
    operand_from = "stablehlo.broadcast_in_dim"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        if "algorithm" in op.operation.attributes or element_type_of(op.result) != element_type_of(op.operands[0]):
            return None
        sides = [_through_broadcast(v) for v in op.operands]
        if all(x == v for (x, _), v in zip(sides, op.operands)):
            return None
        (lhs_labels, rhs_labels), summed, out, sizes = _dot_labels(op)
        e = _einsum_dot([lhs_labels[i] for i in sides[0][1]], [rhs_labels[i] for i in sides[1][1]],
                        summed, out, sizes)
        return e and Match(lhs=sides[0][0], rhs=sides[1][0], like=op, **e)

    def rewrite(self, b, m):
        return _finish_einsum(b, m.lhs, m.rhs, m, like=m.like)


def _later_sibling_dots(op, value, position: int):
    """Plain matmuls after `op` in its block that use `value` as operand `position`, in use-list
    order, found lazily: the callers take the first that fits, and a weight shared by every
    layer of a stack has a user per layer (a list per call made augment quadratic)."""
    for user in mc.users(value):
        if user == op.operation or user.name != "stablehlo.dot_general" or user.block != op.operation.block:
            continue
        mm = matmul_operands(user.result)
        if mm is None or mm[position] != value or not op.operation.is_before_in_block(user):
            continue
        yield user


@register
class MergeDotsSharingLhs(Pattern):
    """x·W1, x·W2 -> x·[W1 W2] sliced back apart: one larger product instead of two."""

    root = "stablehlo.dot_general"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        mm = matmul_operands(op.result)
        if mm is None or len(shape_of(mm[1].type)) != 2:
            return None
        x, w1, _ = mm
        for other in _later_sibling_dots(op, x, 0):
            w2 = other.operands[1]
            if w2 != w1 and len(shape_of(w2.type)) == 2:
                return Match(roots=[op.result, other.result], x=x, w1=w1, w2=w2, like=op)
        return None

    def rewrite(self, b, m):
        n1 = shape_of(m.w1.type)[1]
        n2 = shape_of(m.w2.type)[1]
        y = b.matmul(m.x, b.concat([m.w1, m.w2], 1), like=m.like)
        return [b.slice_dim(y, 1, 0, n1), b.slice_dim(y, 1, n1, n1 + n2)]


@register
class MergeDotsSharingRhs(Pattern):
    """A1·W, A2·W -> [A1; A2]·W sliced back apart."""

    root = "stablehlo.dot_general"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        mm = matmul_operands(op.result)
        if mm is None:
            return None
        a1, w, _ = mm
        for other in _later_sibling_dots(op, w, 1):
            a2 = other.operands[0]
            if a2 != a1 and shape_of(a2.type)[1] == shape_of(a1.type)[1]:
                return Match(roots=[op.result, other.result], a1=a1, a2=a2, w=w, like=op)
        return None

    def rewrite(self, b, m):
        m1 = shape_of(m.a1.type)[0]
        m2 = shape_of(m.a2.type)[0]
        y = b.matmul(b.concat([m.a1, m.a2], 0), m.w, like=m.like)
        return [b.slice_dim(y, 0, 0, m1), b.slice_dim(y, 0, m1, m1 + m2)]


#: Most products stacked into one, and ops walked to tell whether one reads another (as batching).
MAX_STACK = 16
MAX_STACK_CONE = 32


def _row_product(op):
    """(rows, w, contract) when `op` is rows·W with W a rank-2 operand: rows a vector or a
    matrix contracting its last dim with W's dim `contract` (0, or 1 for rows·Wᵀ), no batch
    dims, one dtype throughout."""
    if "algorithm" in op.operation.attributes:
        return None
    rows, w = op.operands
    sr, sw = shape_of(rows.type), shape_of(w.type)
    if len(sw) != 2 or len(sr) not in (1, 2) or not all(n >= 0 for n in sr + sw):
        return None
    d = dot_dims(op)
    if d.lhs_batch or d.lhs_contract != [len(sr) - 1] or d.rhs_contract not in ([0], [1]):
        return None
    if not element_type_of(rows.type) == element_type_of(w.type) == element_type_of(op.result.type):
        return None
    return rows, w, d.rhs_contract[0]


def _products_on(op, w, contract: int, rows_type):
    """The other products rows·W in `op`'s block on the same W, rows of the same type."""
    for user in mc.users(w):
        if user == op.operation or user.name != "stablehlo.dot_general" or user.block != op.operation.block:
            continue
        other = _row_product(mc.view(user))
        if other is not None and other[1] == w and other[2] == contract and other[0].type == rows_type:
            yield user


@register
class StackDotsSharingRhs(Pattern):
    """v1·W, ..., vN·W -> [v1; ...; vN]·W sliced back apart, when no vi reads another's product: W
    is read once instead of N times.

    The input projections of an unrolled recurrent cell, one layer applied to several inputs; the
    rows are vectors or row blocks, W may enter transposed. `merge_dots_sharing_rhs` is the case
    of two row blocks.
    """

    root = "stablehlo.dot_general"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        mine = _row_product(op)
        if mine is None:
            return None
        rows, w, contract = mine
        members, cone = [op], ancestors_since(op.operands, op, MAX_STACK_CONE)
        if cone is None:
            return None
        group = IndependentOps(op, cone)
        later = []
        for user in _products_on(op, w, contract, rows.type):
            if not op.operation.is_before_in_block(user):
                # an earlier product that `op` does not read leads the stack `op` belongs to
                cone = operand_ancestors_since(op, user, MAX_STACK_CONE)
                if cone is not None and user not in cone:
                    return None
            else:
                later.append(user)
        for user in later:
            if group.add(user, operand_ancestors_since(user, op, MAX_STACK_CONE)):
                members.append(mc.view(user))
                if len(members) == MAX_STACK:
                    break
        if len(members) < (2 if len(shape_of(rows.type)) == 1 else 3):
            return None  # two row blocks: merge_dots_sharing_rhs
        return Match(roots=[m.result for m in members], rows=[m.operands[0] for m in members], w=w,
                     contract=contract, like=op)

    def rewrite(self, b, m):
        shape = shape_of(m.rows[0].type)
        k = shape[-1]
        block = [1, k] if len(shape) == 1 else list(shape)
        y = b.dot(b.concat([b.reshape(r, block) for r in m.rows], 0), m.w, ((1,), (m.contract,)), like=m.like)
        n = shape_of(y.type)[1]
        out = []
        for i in range(len(m.rows)):
            part = b.slice_dim(y, 0, i * block[0], (i + 1) * block[0])
            out.append(b.reshape(part, [n]) if len(shape) == 1 else part)
        return out


@register
class SplitDotOverConcat(Pattern):
    """x·[W1 W2 ...] -> [x·W1  x·W2 ...] and [A1; A2]·W -> [A1·W; A2·W]: the inverse of a merge."""

    root = "stablehlo.dot_general"
    operand_from = "stablehlo.concatenate"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        mm = matmul_operands(op.result)
        if mm is None:
            return None
        a, w, _ = mm
        cat = producer(w, "stablehlo.concatenate")
        if cat is not None and len(shape_of(w.type)) == 2 and _concat_dim(cat) == 1:
            return Match(x=a, parts=list(cat.operands), side="rhs", like=op)
        cat = producer(a, "stablehlo.concatenate")
        if cat is not None and _concat_dim(cat) == 0:
            return Match(x=w, parts=list(cat.operands), side="lhs", like=op)
        return None

    def rewrite(self, b, m):
        if m.side == "rhs":
            return b.concat([b.matmul(m.x, p, like=m.like) for p in m.parts], 1)
        return b.concat([b.matmul(p, m.x, like=m.like) for p in m.parts], 0)


def _concat_dim(op) -> int:
    from jaxlib.mlir import ir

    return ir.IntegerAttr(op.operation.attributes["dimension"]).value


@register
class SliceThroughDot(Pattern):
    """(A·B)[rows, cols] -> A[rows, :]·B[:, cols]: compute only the part of the product that is read."""

    root = "stablehlo.slice"
    operand_from = "stablehlo.dot_general"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        mm = matmul_operands(op.operands[0])
        if mm is None or len(shape_of(mm[1].type)) != 2:
            return None
        start, limit, strides = i64s(op, "start_indices"), i64s(op, "limit_indices"), i64s(op, "strides")
        return Match(a=mm[0], w=mm[1], start=start, limit=limit, strides=strides, like=mm[2])

    def rewrite(self, b, m):
        k = shape_of(m.a.type)[1]
        a = b.slice(m.a, [m.start[0], 0], [m.limit[0], k], [m.strides[0], 1])
        w = b.slice(m.w, [0, m.start[1]], [k, m.limit[1]], [1, m.strides[1]])
        return b.matmul(a, w, like=m.like)


# --- general dot_general rewrites (batch dims allowed) --------------------------------------

def _redot(b, like, lhs, rhs, d: DotDims):
    """dot_general(lhs, rhs) with dimension numbers `d` and `like`'s precision and result type."""
    return b.dot(lhs, rhs, (d.lhs_contract, d.rhs_contract), (d.lhs_batch, d.rhs_batch), like=like)


def _free(rank: int, *used) -> list[int]:
    taken = {x for u in used for x in u}
    return [i for i in range(rank) if i not in taken]


def _fold_transpose(op, side: int):
    """Match dot_general(transpose(a), b) (side 0) or dot_general(a, transpose(b)) (side 1)."""
    t = producer(op.operands[side], "stablehlo.transpose")
    if t is None or "algorithm" in op.operation.attributes:
        return None
    p = permutation(t)
    d = dot_dims(op)
    batch, contract = (d.lhs_batch, d.lhs_contract) if side == 0 else (d.rhs_batch, d.rhs_contract)
    rank = len(p)
    old_free = [p[i] for i in _free(rank, batch, contract)]  # source dims, in result order
    new_batch, new_contract = [p[i] for i in batch], [p[i] for i in contract]
    new_free = _free(rank, new_batch, new_contract)
    if side == 0:
        nd = DotDims(new_batch, d.rhs_batch, new_contract, d.rhs_contract)
    else:
        nd = DotDims(d.lhs_batch, new_batch, d.lhs_contract, new_contract)
    nb = len(d.lhs_batch)
    nl = len(_free(len(shape_of(op.operands[0].type)), d.lhs_batch, d.lhs_contract))
    nr = len(_free(len(shape_of(op.operands[1].type)), d.rhs_batch, d.rhs_contract))
    offset = nb if side == 0 else nb + nl
    out_perm = list(range(nb + nl + nr))
    for j, src in enumerate(old_free):
        out_perm[offset + j] = offset + new_free.index(src)
    operands = list(op.operands)
    operands[side] = t.operands[0]
    return Match(lhs=operands[0], rhs=operands[1], dims=nd, out_perm=out_perm, like=op)


@register
class FoldTransposeIntoDotLhs(Pattern):
    """dot_general(transpose(A), B) -> dot_general(A, B) with the permutation folded into the
    dimension numbers (REASSOCIATE: the backend may pick another kernel and summation order)."""

    root = "stablehlo.dot_general"
    operand_from = "stablehlo.transpose"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        return _fold_transpose(op, 0)

    def rewrite(self, b, m):
        return b.transpose(_redot(b, m.like, m.lhs, m.rhs, m.dims), m.out_perm)


@register
class FoldTransposeIntoDotRhs(Pattern):
    """dot_general(A, transpose(B)) -> dot_general(A, B) with the permutation folded into the
    dimension numbers (REASSOCIATE, as for the lhs)."""

    root = "stablehlo.dot_general"
    operand_from = "stablehlo.transpose"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        return _fold_transpose(op, 1)

    def rewrite(self, b, m):
        return b.transpose(_redot(b, m.like, m.lhs, m.rhs, m.dims), m.out_perm)


def _free_slots_in_order(rank: int, free: list[int], order: list[int]) -> list[int]:
    """A permutation of an operand's dims that puts its free dims (at their own slots) in `order`
    and leaves batch and contracting dims where they are."""
    perm = list(range(rank))
    for slot, d in zip(sorted(free), order):
        perm[slot] = d
    return perm


@register
class TransposeOfDot(Pattern):
    """transpose(A·B) -> one dot_general producing the transposed order, when the permutation
    keeps batch dims in front and each operand's free dims together: batch order goes into the
    dimension numbers, (AB)ᵀ = BᵀAᵀ swaps the operands, and free dims reordered within one
    operand become a transpose of that (usually smaller) operand."""

    root = "stablehlo.transpose"
    operand_from = "stablehlo.dot_general"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        dot = producer(op.operands[0], "stablehlo.dot_general")
        if dot is None or not single_use(op.operands[0]) or "algorithm" in dot.operation.attributes:
            return None
        d = dot_dims(dot)
        ranks = [len(shape_of(v.type)) for v in dot.operands]
        lfree, rfree = _free(ranks[0], d.lhs_batch, d.lhs_contract), _free(ranks[1], d.rhs_batch, d.rhs_contract)
        nb, nl = len(d.lhs_batch), len(lfree)
        p = permutation(op)
        if sorted(p[:nb]) != list(range(nb)):
            return None
        rest = p[nb:]
        lhs_pos, rhs_pos = set(range(nb, nb + nl)), set(range(nb + nl, len(p)))
        if set(rest[:nl]) == lhs_pos:
            swap, lorder, rorder = False, rest[:nl], rest[nl:]
        elif set(rest[:len(rfree)]) == rhs_pos:
            swap, rorder, lorder = True, rest[:len(rfree)], rest[len(rfree):]
        else:
            return None
        return Match(lhs=dot.operands[0], rhs=dot.operands[1], swap=swap, like=dot,
                     dims=DotDims([d.lhs_batch[j] for j in p[:nb]], [d.rhs_batch[j] for j in p[:nb]],
                                  d.lhs_contract, d.rhs_contract),
                     lhs_perm=_free_slots_in_order(ranks[0], lfree, [lfree[j - nb] for j in lorder]),
                     rhs_perm=_free_slots_in_order(ranks[1], rfree, [rfree[j - nb - nl] for j in rorder]))

    def rewrite(self, b, m):
        lhs, rhs, d = b.transpose(m.lhs, m.lhs_perm), b.transpose(m.rhs, m.rhs_perm), m.dims
        if not m.swap:
            return _redot(b, m.like, lhs, rhs, d)
        out = _redot(b, m.like, rhs, lhs, DotDims(d.rhs_batch, d.lhs_batch, d.rhs_contract, d.lhs_contract))
        attrs = out.owner.attributes
        if "precision_config" in attrs:
            pc = ir.ArrayAttr(attrs["precision_config"])
            attrs["precision_config"] = ir.ArrayAttr.get([pc[1], pc[0]])
        return out


@register
class DotOverContractingConcat(Pattern):
    """concat(A1, A2)·B -> A1·B[:k1] + A2·B[k1:] when the concatenated dim is contracted
    (also for a concatenated rhs): the sum of the partial products."""

    root = "stablehlo.dot_general"
    operand_from = "stablehlo.concatenate"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        d = dot_dims(op)
        for side in (0, 1):
            cat = producer(op.operands[side], "stablehlo.concatenate")
            if cat is None:
                continue
            contract = d.lhs_contract if side == 0 else d.rhs_contract
            other_contract = d.rhs_contract if side == 0 else d.lhs_contract
            dim = concat_dim(cat)
            if dim not in contract:
                continue
            sizes = [shape_of(v.type)[dim] for v in cat.operands]
            return Match(parts=list(cat.operands), other=op.operands[1 - side], side=side, sizes=sizes,
                         other_dim=other_contract[contract.index(dim)], dims=d, like=op)
        return None

    def rewrite(self, b, m):
        total, off = None, 0
        for part, size in zip(m.parts, m.sizes):
            piece = b.slice_dim(m.other, m.other_dim, off, off + size)
            off += size
            lhs, rhs = (part, piece) if m.side == 0 else (piece, part)
            y = _redot(b, m.like, lhs, rhs, m.dims)
            total = y if total is None else b.add(total, y)
        return total


#: Most terms of one sum gathered into one product.
MAX_SUM_TERMS = 32


def _plain_precision(op) -> bool:
    """No algorithm, and one precision for both operands (so the operands may swap sides)."""
    attrs = op.operation.attributes
    if "algorithm" in attrs:
        return False
    if "precision_config" not in attrs:
        return True
    pc = ir.ArrayAttr(attrs["precision_config"])
    return len(pc) == 2 and str(pc[0]) == str(pc[1])


def _product_term(value):
    """(lhs, rhs, lhs contract, rhs contract, dot) when `value` is a product used only here:
    a dot_general without batch dims, or the transpose of one that swaps its two operands'
    free dims ((A·B)ᵀ is B·A with the contractions swapped)."""
    if not single_use(value):
        return None
    t = producer(value, "stablehlo.transpose")
    dot = producer(t.operands[0] if t is not None else value, "stablehlo.dot_general")
    if dot is None or not _plain_precision(dot) or (t is not None and not single_use(t.operands[0])):
        return None
    d = dot_dims(dot)
    if d.lhs_batch:
        return None
    lhs, rhs = dot.operands
    if t is None:
        return lhs, rhs, tuple(d.lhs_contract), tuple(d.rhs_contract), dot
    nl = len(shape_of(lhs.type)) - len(d.lhs_contract)
    nr = len(shape_of(rhs.type)) - len(d.rhs_contract)
    if permutation(t) != list(range(nl, nl + nr)) + list(range(nl)):
        return None
    return rhs, lhs, tuple(d.rhs_contract), tuple(d.lhs_contract), dot


def _expands(lhs, rhs, product) -> bool:
    """The product has more elements than its operands together (an outer product, a short
    contraction): concatenating operands costs less than the adds of the products it saves
    (a sum of matrix-vector products would copy every matrix instead)."""
    size = lambda v: math.prod(shape_of(v.type))  # noqa: E731
    return size(lhs) + size(rhs) <= size(product)


def _sum_terms(value, terms: list, top: bool) -> None:
    """The terms of the sum `value` (through adds used only inside it), in order."""
    add = producer(value, "stablehlo.add")
    if add is not None and (top or single_use(value)) and len(terms) < MAX_SUM_TERMS:
        for v in add.operands:
            _sum_terms(v, terms, False)
    else:
        terms.append(value)


@register
class SumOfProductsAsOneProduct(Pattern):
    """A1·B1 + A2·B2 + ... + AN·BN -> [A1 ... AN]·[B1; ...; BN], when the N products have one
    shape: one product over the operands concatenated along the contracted dim (stacked on a
    new contracted dim when nothing is contracted: a sum of outer products).

    The weight gradient of a layer applied N times (an unrolled recurrence: its N outer
    products and N - 1 full-size adds) becomes one product; a product's transpose counts as
    the swapped product. Only products larger than their operands (concatenating operands
    must cost less than the adds it saves); other terms of the sum are added after.
    """

    root = "stablehlo.add"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        user = mc.users(op.result)
        if len(user) == 1 and user[0].name == "stablehlo.add" and user[0].block == op.operation.block:
            return None  # a term of a larger sum: that sum's root gathers it
        terms: list = []
        _sum_terms(op.result, terms, True)
        groups: dict = {}
        for v in terms:
            t = _product_term(v)
            if t is not None and v.type == op.result.type and _expands(t[0], t[1], v):
                key = (str(t[0].type), str(t[1].type), t[2], t[3])
                groups.setdefault(key, []).append((v, t))
        key, products = max(groups.items(), key=lambda kv: len(kv[1]), default=(None, []))
        if len(products) < 2:
            return None
        taken = {id(v) for v, _ in products}
        rest = [v for v in terms if id(v) not in taken]
        return Match(lhs=[t[0] for _, t in products], rhs=[t[1] for _, t in products], contract=(key[2], key[3]),
                     rest=rest, like=products[0][1][4])

    def rewrite(self, b, m):
        (lc, rc) = m.contract
        if lc:
            lhs, rhs = b.concat(m.lhs, lc[0]), b.concat(m.rhs, rc[0])
            y = b.dot(lhs, rhs, (lc, rc), like=m.like)
        else:
            stack = lambda xs: b.concat([b.reshape(x, [1] + list(shape_of(x.type))) for x in xs], 0)  # noqa: E731
            y = b.dot(stack(m.lhs), stack(m.rhs), ((0,), (0,)), like=m.like)
        for v in m.rest:
            y = b.add(y, v)
        return y


def _scaled(value):
    """(x, Scalar, op name) when value = x * s, s * x or x / s for a scalar s."""
    op = producer(value, "stablehlo.multiply", "stablehlo.divide")
    if op is None:
        return None
    pairs = commuted(op) if op.operation.name == "stablehlo.multiply" else [tuple(op.operands)]
    for x, s in pairs:
        sc = scalar_operand(s)
        if sc is not None and scalar_operand(x) is None:
            return x, sc, op.operation.name
    return None


@register
class ScalarOutOfDot(Pattern):
    """(s·A)·B -> s·(A·B) (also A·(s·B) and A/s): scale whichever side is smaller."""

    root = "stablehlo.dot_general"
    operand_from = ("stablehlo.multiply", "stablehlo.divide")
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        if element_type_of(op.result) != element_type_of(op.operands[0]):
            return None
        for side in (0, 1):
            sc = _scaled(op.operands[side])
            if sc is None:
                continue
            x, s, how = sc
            operands = list(op.operands)
            operands[side] = x
            return Match(lhs=operands[0], rhs=operands[1], s=s, how=how, dims=dot_dims(op), like=op,
                         shape=shape_of(op.result.type))
        return None

    def rewrite(self, b, m):
        y = _redot(b, m.like, m.lhs, m.rhs, m.dims)
        s = m.s.at(b, m.shape)
        return b.mul(y, s) if m.how == "stablehlo.multiply" else b.div(y, s)


@register
class ScalarIntoDot(Pattern):
    """s·(A·B) -> (s·A)·B or A·(s·B), whichever operand is smaller (also (A·B)/s)."""

    root = ("stablehlo.multiply", "stablehlo.divide")
    operand_from = "stablehlo.dot_general"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        sc = _scaled(op.result)
        if sc is None:
            return None
        y, s, how = sc
        dot = producer(y, "stablehlo.dot_general")
        if dot is None or not single_use(y) or element_type_of(y) != element_type_of(dot.operands[0]):
            return None
        sizes = [math.prod(shape_of(v.type)) for v in dot.operands]
        side = 0 if sizes[0] <= sizes[1] else 1
        if sizes[side] >= math.prod(shape_of(y.type)):
            return None  # scaling an operand is no cheaper than scaling the product
        return Match(lhs=dot.operands[0], rhs=dot.operands[1], s=s, how=how, side=side, dims=dot_dims(dot),
                     like=dot)

    def rewrite(self, b, m):
        operands = [m.lhs, m.rhs]
        x = operands[m.side]
        s = m.s.at(b, shape_of(x.type))
        operands[m.side] = b.mul(x, s) if m.how == "stablehlo.multiply" else b.div(x, s)
        return _redot(b, m.like, operands[0], operands[1], m.dims)
