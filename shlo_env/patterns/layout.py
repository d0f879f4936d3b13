"""Layout motion: where transposes and reshapes sit relative to the compute around them.

Every op a transpose can pass has one pattern per direction, so the search chooses the direction
per site ("down" = the transpose moves towards the outputs, "up" = towards the inputs):

| through | down | up |
|---|---|---|
| elementwise ops | `ElementwiseThroughTranspose` | `TransposeOfElementwise` |
| same, next to a dot | `ElementwiseThroughTransposeBesideDot` | `TransposeOfElementwiseBesideDot` |
| broadcasts | `BroadcastOfTranspose` | `TransposeOfBroadcast` |
| reductions | `ReduceOfTranspose` (patterns/reduce.py) | `TransposeOfReduce` |
| concatenates | `ConcatOfTransposes` | `TransposeOfConcat` |
| dot_general | `FoldTransposeIntoDotLhs/Rhs` (patterns/dot.py) | `TransposeOfDot` (patterns/dot.py) |

Reshapes: `ElementwiseThroughReshape` / `ReshapeOfElementwise`, and reshapes that only add or
drop size-1 dims folded into the broadcast or reduction they feed.

The EXACT movers never add or remove a transpose next to a dot_general (`beside_dot`): XLA
folds such a transpose into the dot, which changes the dot's kernel and rounding; those sites
belong to the REASSOCIATE dot patterns.

Each pair undoes the other, so a greedy loop can bounce between two states; `driver.run_loop`
stops at the first repeated state (DAG hash) and the searches key their states by hash, so
the bounce costs at most one step.
"""

from __future__ import annotations

from typing import ClassVar

from shlo_env.ir.ops import is_complex
from shlo_env.patterns.base import Match, Numerics, Pattern, register
from shlo_env.patterns.matching import (
    ELEMENTWISE, broadcast_dims, concat_dim, hoist_match, hoist_operands, i64s, permutation, producer,
    reduce_body, single_use, sink_match, sink_operands, users,
)
from shlo_env.ir.tensor_types import is_float, shape_of


def inverse(perm) -> list[int]:
    """The permutation undoing `perm`."""
    out = [0] * len(perm)
    for i, p in enumerate(perm):
        out[p] = i
    return out


def beside_dot(inner, outer) -> bool:
    """Whether moving a transpose would add or remove one next to a dot_general: one of the
    `inner` values (the transposes' operands, before or after the move) is a dot's result, or
    the `outer` value (what the moved transpose produces) feeds a dot. XLA folds such a transpose
    into the dot (another kernel, another summation order: measured on kalman_filter_scan), so
    the EXACT movers leave those sites to TransposeOfDot and FoldTransposeIntoDot* (REASSOCIATE)."""
    if any(v is not None and producer(v, "stablehlo.dot_general") is not None for v in inner):
        return True
    return any(u.name == "stablehlo.dot_general" for u in users(outer))


def _non_unit(shape) -> tuple[int, ...]:
    return tuple(n for n in shape if n != 1)


def _unit_reshape(r):
    """For a reshape that only adds or drops size-1 dims of an input without size-1 dims:
    {output dim: input dim} for the output's non-unit dims, else None."""
    src, dst = shape_of(r.operands[0].type), shape_of(r.result.type)
    if 1 in src or _non_unit(src) != _non_unit(dst):
        return None
    non_unit = [d for d, n in enumerate(dst) if n != 1]
    return dict(zip(non_unit, range(len(src))))


# --- elementwise ops --------------------------------------------------------------------------

@register
class ElementwiseThroughTranspose(Pattern):
    """f(transpose(a, p), transpose(b, p)) -> transpose(f(a, b), p): one transpose instead of several."""

    root = tuple(sorted(ELEMENTWISE))
    operand_from = "stablehlo.transpose"

    next_to_dot: ClassVar[bool] = False  # the sites it takes: away from dots (EXACT) or next to one

    def match(self, op):
        m = sink_match(op, "stablehlo.transpose", permutation)
        if m is not None and beside_dot(m.inputs, op.result) == self.next_to_dot:
            return m
        return None

    def rewrite(self, b, m):
        return b.transpose(b.like(m.op, sink_operands(b, m), m.inner_shape), m.key)


@register
class TransposeOfElementwise(Pattern):
    """transpose(f(a, b), p) -> f(transpose(a, p), transpose(b, p)) (f used only there)."""

    root = "stablehlo.transpose"
    operand_from = ELEMENTWISE

    next_to_dot: ClassVar[bool] = False

    def match(self, op):
        m = hoist_match(op, "stablehlo.transpose")
        if m is not None and beside_dot(m.inputs, op.result) == self.next_to_dot:
            return m
        return None

    def rewrite(self, b, m):
        p = permutation(m.move)
        return b.like(m.f, hoist_operands(b, m, lambda x: b.transpose(x, p)), m.outer_shape)


@register
class ElementwiseThroughTransposeBesideDot(ElementwiseThroughTranspose):
    """f(transpose(a, p), ...) -> transpose(f(a, ...), p) where a transpose is added or removed
    next to a dot_general (REASSOCIATE: XLA folds it into the dot, changing its rounding)."""

    numerics = Numerics.REASSOCIATE
    next_to_dot = True


@register
class TransposeOfElementwiseBesideDot(TransposeOfElementwise):
    """transpose(f(a, ...), p) -> f(transpose(a, p), ...) where a transpose is added or removed
    next to a dot_general (REASSOCIATE, as for the sinking direction)."""

    numerics = Numerics.REASSOCIATE
    next_to_dot = True


@register
class ElementwiseThroughReshape(Pattern):
    """f(reshape(a), reshape(b)) -> reshape(f(a, b)) when a and b have one shape."""

    root = tuple(sorted(ELEMENTWISE))
    operand_from = "stablehlo.reshape"

    def match(self, op):
        return sink_match(op, "stablehlo.reshape", lambda p: shape_of(p.result.type))

    def rewrite(self, b, m):
        return b.reshape(b.like(m.op, sink_operands(b, m), m.inner_shape), m.outer_shape)


@register
class ReshapeOfElementwise(Pattern):
    """reshape(f(a, b)) -> f(reshape(a), reshape(b)) (f used only there).

    EXACT when f computes integers or booleans; REASSOCIATE when it computes floats: XLA then
    runs f's arithmetic at the other shape, and its compiled code may round the multiply-adds
    around it another way (1 ulp in 33 of 128 elements of an Adam moment on
    linen_bn_dropout_train; tests/test_exact_fma.py)."""

    root = "stablehlo.reshape"
    operand_from = ELEMENTWISE

    def match(self, op):
        m = hoist_match(op, "stablehlo.reshape")
        if m is not None and (is_float(m.f.result.type) or is_complex(m.f.result)):
            m["numerics"] = Numerics.REASSOCIATE
        return m

    def rewrite(self, b, m):
        return b.like(m.f, hoist_operands(b, m, lambda x: b.reshape(x, m.outer_shape)), m.outer_shape)


# --- broadcasts -------------------------------------------------------------------------------

@register
class TransposeOfBroadcast(Pattern):
    """transpose(broadcast(x)) -> broadcast(transpose(x)): transpose the small tensor; the
    transpose vanishes when it only reorders broadcast dims."""

    root = "stablehlo.transpose"
    operand_from = "stablehlo.broadcast_in_dim"

    def match(self, op):
        bc = producer(op.operands[0], "stablehlo.broadcast_in_dim")
        if bc is None or beside_dot([bc.operands[0]], op.result):
            return None
        inv = inverse(permutation(op))
        to = [inv[d] for d in broadcast_dims(bc)]  # x dim i lands on result dim to[i]
        order = sorted(range(len(to)), key=to.__getitem__)
        return Match(x=bc.operands[0], order=order, dims=sorted(to), shape=shape_of(op.result.type))

    def rewrite(self, b, m):
        return b.broadcast_in_dim(b.transpose(m.x, m.order), m.shape, m.dims)


@register
class BroadcastOfTranspose(Pattern):
    """broadcast(transpose(x)) -> broadcast(x) then transpose, the permutation folded into the
    broadcast dims (the transpose vanishes when the folded dims stay in order)."""

    root = "stablehlo.broadcast_in_dim"
    operand_from = "stablehlo.transpose"

    def match(self, op):
        t = producer(op.operands[0], "stablehlo.transpose")
        if t is None or beside_dot([t.operands[0]], op.result):
            return None
        p, dims = permutation(t), broadcast_dims(op)
        to = [0] * len(p)  # x dim p[i] lands on result dim dims[i]
        for i, d in enumerate(dims):
            to[p[i]] = d
        shape = shape_of(op.result.type)
        slots = sorted(to)  # broadcast x in order onto these dims, then permute them into place
        q = list(range(len(shape)))
        for k, s in enumerate(slots):
            q[s] = to[k]
        return Match(x=t.operands[0], dims=slots, mid=[shape[j] for j in q], perm=inverse(q))

    def rewrite(self, b, m):
        return b.transpose(b.broadcast_in_dim(m.x, m.mid, m.dims), m.perm)


@register
class BroadcastOfUnitReshape(Pattern):
    """broadcast(reshape(x)) -> broadcast(x) when the reshape only adds size-1 dims (as keepdims
    reductions do before a broadcast back)."""

    root = "stablehlo.broadcast_in_dim"
    operand_from = "stablehlo.reshape"

    def match(self, op):
        r = producer(op.operands[0], "stablehlo.reshape")
        src = r is not None and _unit_reshape(r)
        if not src:
            return None
        dims = broadcast_dims(op)
        to = [None] * len(shape_of(r.operands[0].type))
        for out_dim, x_dim in src.items():
            to[x_dim] = dims[out_dim]
        if to != sorted(to):
            return None
        return Match(x=r.operands[0], dims=to, shape=shape_of(op.result.type))

    def rewrite(self, b, m):
        return b.broadcast_in_dim(m.x, m.shape, m.dims)


# --- reductions -------------------------------------------------------------------------------

@register
class TransposeOfReduce(Pattern):
    """transpose(reduce(x, dims), p) -> reduce(transpose(x, q), dims'): the result comes out in
    the transposed order (REASSOCIATE: XLA may sum in another order in the new layout)."""

    root = "stablehlo.transpose"
    operand_from = "stablehlo.reduce"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        r = producer(op.operands[0], "stablehlo.reduce")
        if r is None or reduce_body(r) is None or not single_use(op.operands[0]):
            return None
        dims = sorted(i64s(r, "dimensions"))
        rank = len(shape_of(r.operands[0].type))
        kept = [d for d in range(rank) if d not in dims]
        p = permutation(op)
        return Match(x=r.operands[0], init=r.operands[1], body=reduce_body(r),
                     perm=[kept[j] for j in p] + dims, dims=list(range(len(kept), rank)))

    def rewrite(self, b, m):
        return b.reduce(b.transpose(m.x, m.perm), m.init, m.dims, m.body)


@register
class ReduceOfUnitReshape(Pattern):
    """reduce(reshape(x), dims) -> reshape(reduce(x, dims')) when the reshape only adds size-1
    dims: reduce x in its own shape (REASSOCIATE, as for a transpose)."""

    root = "stablehlo.reduce"
    operand_from = "stablehlo.reshape"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        r = producer(op.operands[0], "stablehlo.reshape")
        src = r is not None and reduce_body(op) is not None and _unit_reshape(r)
        if not src:
            return None
        dims = sorted(src[d] for d in i64s(op, "dimensions") if d in src)
        return Match(x=r.operands[0], init=op.operands[1], body=reduce_body(op), dims=dims,
                     shape=shape_of(op.result.type))

    def rewrite(self, b, m):
        return b.reshape(b.reduce(m.x, m.init, m.dims, m.body), m.shape)


# --- concatenates -----------------------------------------------------------------------------

@register
class ConcatOfTransposes(Pattern):
    """concat(transpose(a, p), transpose(b, p)) -> transpose(concat(a, b), p): one transpose."""

    root = "stablehlo.concatenate"
    operand_from = "stablehlo.transpose"

    def match(self, op):
        ts = [producer(v, "stablehlo.transpose") for v in op.operands]
        if any(t is None for t in ts) or any(permutation(t) != permutation(ts[0]) for t in ts):
            return None
        if beside_dot([t.operands[0] for t in ts], op.result):
            return None
        p = permutation(ts[0])
        return Match(parts=[t.operands[0] for t in ts], dim=p[concat_dim(op)], perm=p)

    def rewrite(self, b, m):
        return b.transpose(b.concat(m.parts, m.dim), m.perm)


@register
class TransposeOfConcat(Pattern):
    """transpose(concat(a, b), p) -> concat(transpose(a, p), transpose(b, p)) (concat used only there)."""

    root = "stablehlo.transpose"
    operand_from = "stablehlo.concatenate"

    def match(self, op):
        cat = producer(op.operands[0], "stablehlo.concatenate")
        if cat is None or not single_use(op.operands[0]) or beside_dot(cat.operands, op.result):
            return None
        p = permutation(op)
        return Match(parts=list(cat.operands), perm=p, dim=inverse(p)[concat_dim(cat)])

    def rewrite(self, b, m):
        return b.concat([b.transpose(x, m.perm) for x in m.parts], m.dim)
