"""Fusion-boundary rewrites: what decides XLA's fusion, chosen at the StableHLO level.

XLA fuses producers into consumers by fixed heuristics. These patterns let a search choose:
materialize a value (an `optimization_barrier` is a fusion boundary on GPU; on CPU XLA removes
barriers before fusion), recompute a cheap producer once per consumer, or run independent
same-kind ops as one wider op on concatenated operands. All are exact under StableHLO's
semantics (the same elementwise operations on the same values); a merge that separates an add
from its multiply is REASSOCIATE, since XLA would have contracted them into an FMA. On XLA CPU a transcendental
(exp, ...) can differ by an ulp between vector widths, so a merged or duplicated exp compiled by
XLA may not match the original compiled by XLA bit for bit: XLA's approximation, not the rewrite.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from shlo_env.ir.ops import as_operation, is_pure
from shlo_env.measure.numerics import Numerics
from shlo_env.patterns import match_cache as mc
from shlo_env.patterns.base import Match, Pattern, register
from shlo_env.patterns.matching import (
    ELEMENTWISE, attr_strings, captured_values, depends_on, is_elementwise, related_ops, scalar_operand,
    static_shape,
)
from shlo_env.ir.tensor_types import is_integer, shape_of

#: Ops worth materializing once rather than recomputing in every consumer's fusion.
_EXPENSIVE = tuple(sorted("stablehlo." + n for n in """
    exponential exponential_minus_one log log_plus_one logistic tanh sine cosine tan sqrt rsqrt cbrt
    power atan2 divide remainder dot_general reduce
""".split()))
_CHEAP = frozenset(ELEMENTWISE | {"stablehlo.broadcast_in_dim", "stablehlo.convert", "stablehlo.iota",
                                  "stablehlo.reshape"})


def _distinct_users(value: ir.Value) -> list[ir.Operation]:
    out: list[ir.Operation] = []
    for u in mc.users(value):
        if u not in out:
            out.append(u)
    return out


@register
class InsertOptimizationBarrier(Pattern):
    """y = f(x) with several consumers -> y = optimization_barrier(f(x)) for an expensive f
    (transcendental, divide, dot, reduce): materialize y once instead of letting the fusion
    heuristic recompute f in each consumer (a fusion boundary on GPU)."""

    root = _EXPENSIVE

    def match(self, op):
        results = mc.results(op.operation)
        if len(results) != 1 or mc.num_uses(results[0]) < 2 or not static_shape(results[0]):
            return None
        if len(_distinct_users(op.result)) < 2:
            return None
        if any(u.name == "stablehlo.optimization_barrier" for u in _distinct_users(op.result)):
            return None
        return Match(y=op.result)

    def rewrite(self, b, m):
        return b.optimization_barrier([m.y])[0]


@register
class RemoveOptimizationBarrier(Pattern):
    """optimization_barrier(x, y, ...) -> x, y, ...: let XLA fuse across it."""

    root = "stablehlo.optimization_barrier"

    def match(self, op):
        return Match(xs=list(op.operands))

    def rewrite(self, b, m):
        return m.xs


@register
class DuplicateProducer(Pattern):
    """p = f(x) used by c1 and c2 -> c1(f(x)), c2(f(x)): a cheap producer recomputed once per
    consumer, so each consumer can fuse its own copy."""

    root = tuple(sorted(_CHEAP))

    def match(self, op):
        results = mc.results(op.operation)
        if len(results) != 1 or mc.num_uses(results[0]) < 2 or not is_pure(op) or len(op.regions):
            return None  # (a use count is cheaper to read than the distinct users below)
        p = results[0]
        consumers = _distinct_users(p)
        if not 2 <= len(consumers) <= 4:
            return None
        for c in consumers:
            if (len(c.results) != 1 or c.block != op.operation.block or not is_pure(c)
                    or c.name.endswith("return") or c.name == "stablehlo.while" or captured_values(c)):
                return None
        for c in consumers:  # one consumer feeding another would make the rewrite a cycle
            if any(depends_on(v, d) for d in consumers if d != c for v in c.operands):
                return None
        return Match(roots=[c.results[0] for c in consumers], p=op, p_inputs=list(op.operands),
                     consumers=[c.opview for c in consumers],
                     args=[[None if v == p else v for v in c.operands] for c in consumers])

    def rewrite(self, b, m):
        out = []
        for c, args in zip(m.consumers, m.args):
            copy = b.like(m.p, m.p_inputs)
            out.append(b.clone(c, [copy if v is None else v for v in args]))
        return out


def _merge_partner(op):
    """The nearest later op of the same kind, types and attributes, independent of `op`."""
    op = op.operation
    name, types = mc.name(op), _types(op)
    candidates = [o for o in related_ops(op, name=name, after=True) if _types(o) == types]
    if candidates:
        attrs = attr_strings(op)
        candidates = [o for o in candidates if attr_strings(o) == attrs]
    while candidates:
        best = candidates[0]
        for c in candidates[1:]:
            if mc.is_before(c, best):
                best = c
        if not any(depends_on(v, op) for v in mc.operands(best)):
            return best
        candidates.remove(best)
    return None


def _types(op) -> tuple:
    """(operand types, result types) of `op`."""
    return mc.memo(op, "types", lambda: (tuple(v.type for v in mc.operands(op)), tuple(r.type for r in mc.results(op))))


_ADDS = ("stablehlo.add", "stablehlo.subtract")


def _contractible(op) -> bool:
    """Could XLA fuse a multiply and an add around `op` into one FMA? Then merging `op` with
    another op (a concatenate between them) changes the rounding: not bitwise exact."""
    op = as_operation(op)
    if is_integer(op.results[0].type):
        return False
    if op.name in _ADDS:  # chlo ops (square, erf, lgamma, ...) expand into multiplies and adds
        return any(isinstance(v, ir.OpResult) and (v.owner.name == "stablehlo.multiply"
                                                   or v.owner.name.startswith("chlo."))
                   for v in op.operands)
    if op.name == "stablehlo.multiply":
        return any(u.name in _ADDS for u in _distinct_users(op.results[0]))
    return False


@register
class HorizontalMerge(Pattern):
    """f(a1, b1), f(a2, b2) independent -> y = f([a1; a2], [b1; b2]), sliced back apart:
    one wider op (one kernel) instead of two. EXACT, except where f is a float add next to a
    multiply (or a multiply feeding an add): XLA would contract those into an FMA, the merge
    stops it, so such a match is REASSOCIATE (checked against the float64 reference)."""

    root = tuple(sorted(ELEMENTWISE))

    def match(self, op):
        if not is_elementwise(op):
            return None
        s = static_shape(op.result)
        if not s:
            return None
        other = _merge_partner(op)
        if other is None:
            return None
        kinds = []
        for u, v in zip(op.operands, other.operands):
            su, sv = scalar_operand(u), scalar_operand(v)
            if static_shape(u) == () or static_shape(v) == ():
                if u != v:
                    return None  # different rank-0 operands (select/clamp) cannot be concatenated
                kinds.append("same")  # one rank-0 operand (clamp bounds) serves both halves
            elif su is not None and sv is not None and u == v:
                kinds.append(su)  # one scalar for both halves
            else:
                kinds.append("x")
        tier = Numerics.REASSOCIATE if _contractible(op) or _contractible(other) else Numerics.EXACT
        return Match(roots=[op.result, other.results[0]], f=op, first=list(op.operands),
                     second=list(other.operands), kinds=kinds, n=s[0], numerics=tier)

    def rewrite(self, b, m):
        wide = [m.n * 2] + list(shape_of(m.f.result.type))[1:]
        operands = [b.concat([u, v], 0) if k == "x" else u if k == "same" else k.at(b, wide)
                    for k, u, v in zip(m.kinds, m.first, m.second)]
        y = b.like(m.f, operands, wide)
        return [b.slice_dim(y, 0, 0, m.n), b.slice_dim(y, 0, m.n, 2 * m.n)]
