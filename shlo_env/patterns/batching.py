"""Horizontal batching: N independent computations of the same shape of work run as one.

An optimizer update over a parameter list (Adam over every weight), per-head or per-layer
projections: the same elementwise chain or the same dot, repeated on different operands, each
its own small kernel. These patterns gather the N copies' inputs into one operand (flattened
and concatenated, or stacked on a new batch dimension), compute once, and slice the N results
back out.

Tiers: the same operations on the same values, so bitwise under StableHLO's semantics; but
XLA compiles the batched op in another fusion, where a multiply may no longer be contracted
with its add into an FMA (or the reverse), a transcendental may run at another vector width,
and a batched dot may sum in another order. So both are REASSOCIATE, verified against a
float64 reference, not EXACT.
"""

from __future__ import annotations

import math

from jaxlib.mlir import ir

from shlo_env.ir.ops import attribute_items
from shlo_env.patterns import match_cache as mc
from shlo_env.patterns.base import Match, Numerics, Pattern, register
from shlo_env.patterns.matching import (
    ELEMENTWISE, IndependentOps, Scalar, ancestors_since, dot_dims, is_elementwise, operand_ancestors_since,
    producer, related_ops, scalar_operand, single_use, splat_value, static_shape,
)
from shlo_env.ir.tensor_types import element_type_of, tensor_type

#: Most copies batched into one op, and most ops of one chain.
MAX_BATCH = 32
MAX_CHAIN_OPS = 12


def _scalar_key(s: Scalar):
    """Equal for the same scalar: one rank-0 value, or constants of one value (each parameter's
    update broadcasts its own copy of the learning rate)."""
    v = s["splat"] if s["value"] is None else splat_value(s["value"])
    return ("splat", v, str(s["elem"])) if v is not None else ("value", s["value"])


def _attr_key(op) -> tuple:
    """`op`'s attributes as sorted (name, printed value) pairs (remembered per op)."""
    op = op.operation
    return mc.memo(op, "attr_key", lambda: tuple(sorted(attribute_items(op))))


def _elem_name(value: ir.Value) -> str:
    """The printed element type of `value` (remembered per type while augment indexes)."""
    t = value.type
    return mc.per_key("element type name", t, lambda: str(element_type_of(t)))


def _chain(value, leaves: list, budget: list) -> tuple:
    """The structure of the elementwise chain computing `value`: nested (op name, attributes,
    result type, operand structures) down to its leaves, which are appended to `leaves`
    (full-shape tensors as values, broadcast scalars as `Scalar`s). Producers are followed while
    they are elementwise, used only here and have no rank-0 operand."""
    s = scalar_operand(value)
    if s is not None:
        leaves.append(s)
        return ("scalar", _scalar_key(s))
    op = producer(value)
    if op is not None and budget[0] > 0 and is_elementwise(op) and single_use(value):
        operands = mc.operands(op.operation)
        if all(static_shape(v) for v in operands):
            budget[0] -= 1
            return (mc.name(op.operation), _attr_key(op), _elem_name(value),
                    tuple(_chain(v, leaves, budget) for v in operands))
    leaves.append(value)
    return ("leaf", _elem_name(value))


def _chain_of(op) -> tuple[tuple, list]:
    """(structure, leaves) of the chain ending at elementwise `op` (its root)."""
    op = op.operation
    structure, leaves = mc.memo(op, "chain", lambda: _read_chain(mc.view(op)))
    return structure, list(leaves)


def _read_chain(op):
    leaves: list = []
    budget = [MAX_CHAIN_OPS - 1]
    operands = tuple(_chain(v, leaves, budget) for v in op.operands)
    structure = (op.operation.name, _attr_key(op), _elem_name(op.result), operands)
    return structure, leaves


def _is_chain_root(op) -> bool:
    """An elementwise op of static shapes, not itself a link inside a longer chain."""
    return mc.memo(op.operation, "chain_root", lambda: (
        is_elementwise(op) and bool(static_shape(op.operation.results[0])) and _is_chain_top(mc.view(op.operation))
        and all(static_shape(v) for v in mc.operands(op.operation))))


def _is_chain_top(op) -> bool:
    """Not itself a link inside a longer chain (its only user is no elementwise op)."""
    if not single_use(op.result):
        return True
    user = mc.users(op.result)[0]
    return not (is_elementwise(user) and user.block == op.operation.block
                and all(static_shape(v) for v in mc.operands(user)))


#: Partners of one root examined at most, and ops walked to tell whether one reads another:
#: independent copies sit close together (a layer's projections, an optimizer's updates), and
#: each walk costs Python calls into MLIR, so these bounds keep augment linear in program size.
MAX_TRIES = MAX_BATCH
MAX_CONE = 32


def _leaf_values(leaves):
    return [v for v in leaves if not isinstance(v, Scalar)]


@register
class BatchElementwiseChains(Pattern):
    """N independent copies of one elementwise chain f on different tensors (an optimizer
    update per parameter) -> f once on the flattened, concatenated inputs, sliced and reshaped
    back into N results: one kernel instead of N."""

    root = tuple(sorted(ELEMENTWISE))
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        if not _is_chain_root(op):
            return None
        structure, leaves = _chain_of(op)
        if not any(not isinstance(v, Scalar) for v in leaves):
            return None
        members = [(op, leaves)]
        cone = ancestors_since(_leaf_values(leaves), op, MAX_CONE)
        if cone is None:
            return None
        group = IndependentOps(op, cone)
        tries = 0
        for other in related_ops(op, budget=256, name=mc.name(op.operation), after=True):
            if not _is_chain_root(other) or _chain_of(other)[0] != structure:
                continue
            other = mc.view(other)
            l2 = _chain_of(other)[1]
            tries += 1
            if tries > MAX_TRIES:
                break
            if group.add(other, ancestors_since(_leaf_values(l2), op, MAX_CONE)):
                members.append((other, l2))
                if len(members) == MAX_BATCH:
                    break
        if len(members) < 2:
            return None
        return Match(roots=[m.result for m, _ in members], structure=structure,
                     leaves=[ls for _, ls in members], shapes=[static_shape(m.result) for m, _ in members])

    def rewrite(self, b, m):
        sizes = [math.prod(s) for s in m.shapes]
        total = sum(sizes)
        inputs = []  # one flat operand per leaf position
        for pos, first in enumerate(m.leaves[0]):
            if isinstance(first, Scalar):
                inputs.append(first.at(b, [total]))
            else:
                inputs.append(b.concat([b.reshape(ls[pos], [n]) for ls, n in zip(m.leaves, sizes)], 0))
        flat = _build(b, m.structure, iter(inputs), total)
        out, offset = [], 0
        for shape, n in zip(m.shapes, sizes):
            out.append(b.reshape(b.slice_dim(flat, 0, offset, offset + n), shape))
            offset += n
        return out


def _build(b, structure, inputs, total: int):
    """Rebuild a chain `structure` on flat operands of length `total` (leaves taken in order)."""
    kind = structure[0]
    if kind in ("leaf", "scalar"):
        return next(inputs)
    name, attrs, elem, operands = structure
    args = [_build(b, s, inputs, total) for s in operands]
    result_type = tensor_type([total], ir.Type.parse(elem))
    return b.op(name, args, [result_type], {k: ir.Attribute.parse(v) for k, v in attrs}).result


def _dot_key(op):
    op = op.operation
    return mc.memo(op, "dot_key", lambda: _read_dot_key(mc.view(op)))


def _read_dot_key(op):
    d = dot_dims(op)
    return (tuple(map(tuple, d.batch + d.contract)), str(op.operands[0].type), str(op.operands[1].type),
            str(op.result.type), _attr_key(op))


@register
class BatchDots(Pattern):
    """N independent dot_generals with the same shapes and dimension numbers (per-head or
    per-layer projections) -> one dot_general with a new leading batch dimension on the
    stacked operands, sliced back into N results."""

    root = "stablehlo.dot_general"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        if not static_shape(op.result) or static_shape(op.operands[0]) is None or static_shape(op.operands[1]) is None:
            return None
        key = _dot_key(op)
        members = [op]
        cone = ancestors_since(op.operands, op, MAX_CONE)
        if cone is None:
            return None
        group = IndependentOps(op, cone)
        tries = 0
        for other in related_ops(op, budget=256, name="stablehlo.dot_general", after=True):
            if _dot_key(other) != key:
                continue
            tries += 1
            if tries > MAX_TRIES:
                break
            if group.add(other, operand_ancestors_since(other, op, MAX_CONE)):
                members.append(mc.view(other))
                if len(members) == MAX_BATCH:
                    break
        if len(members) < 2:
            return None
        return Match(roots=[m.result for m in members], dot=op, lhs=[m.operands[0] for m in members],
                     rhs=[m.operands[1] for m in members])

    def rewrite(self, b, m):
        n = len(m.lhs)
        d = dot_dims(m.dot)

        def stack(xs):
            shape = list(static_shape(xs[0]))
            return b.concat([b.reshape(x, [1] + shape) for x in xs], 0)

        shift = lambda dims: [x + 1 for x in dims]  # noqa: E731
        y = b.dot(stack(m.lhs), stack(m.rhs), (shift(d.lhs_contract), shift(d.rhs_contract)),
                  ([0] + shift(d.lhs_batch), [0] + shift(d.rhs_batch)), like=m.dot)
        shape = list(static_shape(y))
        return [b.reshape(b.slice_dim(y, 0, i, i + 1), shape[1:]) for i in range(n)]
