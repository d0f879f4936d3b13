"""The helpers patterns match with: what defines a value and who reads it, constants and
splats, attributes as Python values, op families, scalar operands, data-movement motion
(`sink_match`/`hoist_match`), dependences between ops, and values regions capture.

Every helper only reads IR. Facts about any op (`is_pure`, `callee`, `walk`) are in
`shlo_env.ir.ops`, types and shapes (`shape_of`, `is_float`, ...) in `shlo_env.ir.tensor_types`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from shlo_env.ir.ops import as_operation, attribute_items, block_ops, complex_constant, is_complex, walk
from shlo_env.patterns import match_cache as mc
from shlo_env.patterns.base import Match
from shlo_env.ir.tensor_types import (
    UnsupportedType, dtype_of, element_type_of, is_float, shape_of, tensor_type,
)

__all__ = [
    # values and their ops
    "producer", "producer_names", "users", "single_use", "static_shape",
    # constants
    "constant_value", "splat_value", "SPLAT_SOURCES", "commuted",
    # attributes
    "i64s", "attr_int", "concat_dim", "slice_params", "permutation", "broadcast_dims", "comparison",
    "is_identity_perm", "DotDims", "dot_dims", "matmul_operands", "matmul_flops",
    # op families
    "UNARY_ELEMENTWISE", "BINARY_ELEMENTWISE", "ELEMENTWISE", "COMMUTATIVE", "DATA_MOVEMENT",
    "is_elementwise", "reduce_body",
    # scalar operands and data-movement motion
    "Scalar", "scalar_operand", "operand_kinds", "operands_through",
    "sink_match", "sink_operands", "hoist_match", "hoist_operands",
    # dependences and regions
    "attr_strings", "related_ops", "depends_on", "ancestors_since", "operand_ancestors_since", "IndependentOps",
    "captured_values",
]


# --- values and constants ---------------------------------------------------------------------

def producer(value: ir.Value, *names: str):
    """The op (as an OpView) defining `value`, or None for block arguments / other op names."""
    return mc.producer(value, names)


def producer_names(op) -> tuple[str | None, ...]:
    """The name of the op defining each operand of `op` (None for a block argument): a cheap
    first test, remembered per op, for patterns that need an operand made by some op."""
    op = as_operation(op)
    return mc.memo(op, "producer_names", lambda: tuple(
        None if p is None else p.operation.name for p in (mc.producer(v, ()) for v in mc.operands(op))))


def users(value: ir.Value) -> list:
    """The op (as an OpView) of each use of `value`."""
    return [mc.view(u) for u in mc.users(value)]


def single_use(value: ir.Value) -> bool:
    return mc.num_uses(value) == 1


def static_shape(value: ir.Value) -> tuple[int, ...] | None:
    """The static shape of a ranked tensor value, else None (remembered while augment indexes)."""
    return mc.value_memo(value, "static_shape", lambda: _static_shape(value))


def _static_shape(value: ir.Value) -> tuple[int, ...] | None:
    try:
        return shape_of(value.type)
    except UnsupportedType:
        return None


def i64s(op, name: str) -> list[int]:
    """A DenseI64ArrayAttr attribute of `op` as a list (a new one each call)."""
    op = op.operation
    return list(mc.memo(op, ("i64s", name), lambda: _i64_tuple(op.attributes[name])))


def _i64_tuple(attr: ir.Attribute) -> tuple[int, ...]:
    array = ir.DenseI64ArrayAttr(attr)
    return tuple([array[i] for i in range(len(array))])  # (indexing is 4x faster than iterating)


_LOOK_THROUGH = ("stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.convert")
#: The ops that can define a value with a `splat_value`: the `operand_from` of patterns that
#: need a splat operand.
SPLAT_SOURCES = frozenset(("stablehlo.constant",) + _LOOK_THROUGH)


def constant_value(value: ir.Value) -> np.ndarray | None:
    """The value of a `stablehlo.constant` (dense, any size), else None."""
    op = producer(value, "stablehlo.constant")
    if op is None:
        return None
    if is_complex(value):
        return complex_constant(op)
    attr = op.operation.attributes["value"]
    try:
        dtype = dtype_of(value.type)
        dense = ir.DenseElementsAttr(attr)
        if dense.is_splat:
            return np.full(shape_of(value.type), _scalar(dense.get_splat_value()), dtype=dtype)
        return np.array(dense).astype(dtype).reshape(shape_of(value.type))
    except (ValueError, TypeError, UnsupportedType):
        return None


def _scalar(attr: ir.Attribute):
    if isinstance(attr, ir.FloatAttr):
        return ir.FloatAttr(attr).value
    if isinstance(attr, ir.IntegerAttr):
        return ir.IntegerAttr(attr).value
    if isinstance(attr, ir.BoolAttr):
        return ir.BoolAttr(attr).value
    raise TypeError(attr)


def splat_value(value: ir.Value) -> float | int | None:
    """The scalar a value is filled with, looking through broadcasts, reshapes and converts."""
    op = producer(value)
    if op is None:
        return None
    return mc.memo(op.operation, "splat_value", lambda: _splat_value(value))  # a fact of the producer


def _splat_value(value: ir.Value) -> float | int | None:
    while True:
        op = producer(value)
        if op is None:
            return None
        name = op.operation.name
        if name == "stablehlo.constant":
            if is_complex(value):
                arr = complex_constant(op)
                return arr.flat[0].item() if arr is not None and arr.size and np.all(arr == arr.flat[0]) else None
            attr = op.operation.attributes["value"]
            if not isinstance(attr, ir.DenseElementsAttr):
                return None
            dense = ir.DenseElementsAttr(attr)
            if dense.is_splat:
                try:
                    return _scalar(dense.get_splat_value())
                except TypeError:
                    return None
            arr = constant_value(value)
            if arr is not None and arr.size and np.all(arr == arr.flat[0]):
                return arr.flat[0].item()
            return None
        if name in _LOOK_THROUGH:
            if name == "stablehlo.convert" and not is_float(op.operands[0].type):
                return None  # int->float converts of splats are exact, but keep it simple
            value = op.operands[0]
            continue
        return None


def commuted(op) -> Iterator[tuple[ir.Value, ir.Value]]:
    """Both operand orders of a binary op: `for x, y in commuted(op): ...`."""
    a, b = op.operands[0], op.operands[1]
    yield a, b
    yield b, a


class DotDims:
    """dot_general dimension numbers as plain lists."""

    __slots__ = ("lhs_batch", "rhs_batch", "lhs_contract", "rhs_contract")

    def __init__(self, lhs_batch, rhs_batch, lhs_contract, rhs_contract):
        self.lhs_batch, self.rhs_batch = list(lhs_batch), list(rhs_batch)
        self.lhs_contract, self.rhs_contract = list(lhs_contract), list(rhs_contract)

    @property
    def contract(self):
        return (self.lhs_contract, self.rhs_contract)

    @property
    def batch(self):
        return (self.lhs_batch, self.rhs_batch)


def dot_dims(op) -> DotDims:
    d = stablehlo.DotDimensionNumbers(op.operation.attributes["dot_dimension_numbers"])
    return DotDims(d.lhs_batching_dimensions, d.rhs_batching_dimensions,
                   d.lhs_contracting_dimensions, d.rhs_contracting_dimensions)


def matmul_operands(value: ir.Value):
    """(a, b, op) when `value` is a plain matrix product a·b (rank-2 x rank-2 or x vector).

    Plain: no batch dims, a's last dim contracted with b's first, operand and result dtypes equal.
    (Remembered per value while augment indexes: the dot patterns ask it of the same values.)
    """
    return mc.value_memo(value, "matmul_operands", lambda: _matmul_operands(value))


def _matmul_operands(value: ir.Value):
    op = producer(value, "stablehlo.dot_general")
    if op is None:
        return None
    a, b = op.operands
    sa, sb = static_shape(a), static_shape(b)
    if sa is None or sb is None or len(sa) != 2 or len(sb) not in (1, 2):
        return None
    d = dot_dims(op)
    if d.lhs_batch or d.lhs_contract != [1] or d.rhs_contract != [0]:
        return None
    if not (a.type == b.type or ir.RankedTensorType(a.type).element_type == ir.RankedTensorType(b.type).element_type):
        return None
    if ir.RankedTensorType(value.type).element_type != ir.RankedTensorType(a.type).element_type:
        return None
    return a, b, op


def matmul_flops(m: int, k: int, n: int) -> int:
    return 2 * m * k * n


# --- op families and attributes --------------------------------------------------------------

UNARY_ELEMENTWISE = frozenset("stablehlo." + n for n in """
    abs negate exponential exponential_minus_one log log_plus_one logistic tanh sine cosine tan
    sqrt rsqrt cbrt floor ceil round_nearest_afz round_nearest_even sign not is_finite convert
    popcnt count_leading_zeros
""".split())
BINARY_ELEMENTWISE = frozenset("stablehlo." + n for n in """
    add subtract multiply divide maximum minimum power remainder atan2 and or xor
    shift_left shift_right_arithmetic shift_right_logical compare
""".split())
ELEMENTWISE = UNARY_ELEMENTWISE | BINARY_ELEMENTWISE | {"stablehlo.select", "stablehlo.clamp"}
COMMUTATIVE = frozenset("stablehlo." + n for n in "add multiply maximum minimum and or xor".split())
#: Ops that only move or copy data (no arithmetic): a convert commutes with each of them.
DATA_MOVEMENT = frozenset("stablehlo." + n for n in "transpose reshape broadcast_in_dim slice reverse".split())


def is_elementwise(op) -> bool:
    """An op computing each output element from the same-index elements of its operands."""
    op = as_operation(op)
    return mc.name(op) in ELEMENTWISE and mc.memo(
        op, "elementwise", lambda: len(mc.results(op)) == 1 and not len(op.regions))


def reduce_body(op) -> str | None:
    """The combining op of a single-input `stablehlo.reduce` whose body is `return f(a, b)`."""
    op = as_operation(op)
    return mc.memo(op, "reduce_body", lambda: _reduce_body(op))


def _reduce_body(op: ir.Operation) -> str | None:
    if op.name != "stablehlo.reduce" or len(op.operands) != 2:
        return None
    blk = op.regions[0].blocks[0]
    body = block_ops(blk)
    if len(body) != 2 or len(body[0].operands) != 2 or body[1].operands[0] != body[0].results[0]:
        return None
    if set(body[0].operands) != set(blk.arguments) or body[0].name not in BINARY_ELEMENTWISE:
        return None
    if body[0].name not in COMMUTATIVE:
        return None
    return body[0].name


def attr_int(op, name: str) -> int:
    return ir.IntegerAttr(op.operation.attributes[name]).value


def concat_dim(op) -> int:
    return attr_int(op, "dimension")


def slice_params(op) -> tuple[list[int], list[int], list[int]]:
    """(start, limit, strides) of a `stablehlo.slice`."""
    return i64s(op, "start_indices"), i64s(op, "limit_indices"), i64s(op, "strides")


def permutation(op) -> list[int]:
    return i64s(op, "permutation")


def broadcast_dims(op) -> list[int]:
    return i64s(op, "broadcast_dimensions")


def comparison(op) -> str:
    """'EQ', 'LT', ... of a `stablehlo.compare`."""
    return stablehlo.ComparisonDirectionAttr(op.operation.attributes["comparison_direction"]).value


def is_identity_perm(perm: Sequence[int]) -> bool:
    return list(perm) == list(range(len(perm)))


# --- scalar operands and data-movement motion ------------------------------------------------

class Scalar(Match):
    """An operand that is one scalar everywhere: re-creatable at any shape.

    Either `value` (a rank-0 tensor broadcast with no dims) or `splat` (a constant's fill value).
    A dict (like Match), so the driver remaps its `value` into the rewrite's region.
    """

    @classmethod
    def of(cls, value: ir.Value | None, splat, elem: ir.Type) -> "Scalar":
        return cls(value=value, splat=splat, elem=elem)

    def at(self, b, shape: Sequence[int]) -> ir.Value:
        """The scalar as a tensor of `shape` built with the builder `b`."""
        if self["value"] is not None:
            return b.broadcast_in_dim(self["value"], shape, [])
        return b.constant(self["splat"], tensor_type(shape, self["elem"]))


def scalar_operand(value: ir.Value) -> Scalar | None:
    """A `Scalar` when `value` is a splat constant or a broadcast of a rank-0 tensor.

    Only splat constants whose value survives a Python round trip are accepted (NaN payloads,
    for instance, do not).
    """
    op = producer(value, "stablehlo.broadcast_in_dim", "stablehlo.constant")
    if op is None:
        return None
    if mc.name(op.operation) == "stablehlo.broadcast_in_dim":
        if static_shape(op.operands[0]) == ():
            return Scalar.of(op.operands[0], None, element_type_of(value))
    else:
        v = splat_value(value)
        if v is not None and not (isinstance(v, float) and math.isnan(v)):
            return Scalar.of(None, v, element_type_of(value))
    return None


def operand_kinds(op) -> list:
    """How each operand of elementwise `op` follows a change of its shape: a `Scalar` (re-create
    it at the new shape), "same" (a rank-0 operand of a select/clamp: keep it), or "x" (a
    full-shape tensor: move it the way the result moves)."""
    out_rank = len(static_shape(op.result) or ())
    kinds: list[Scalar | str] = []
    for v in op.operands:
        if out_rank and static_shape(v) == ():
            kinds.append("same")
            continue
        s = scalar_operand(v)
        kinds.append(s if s is not None else "x")
    return kinds


def operands_through(op, through: str):
    """For an elementwise `op`, split its operands into those produced by a `through` op and
    scalars. Returns (kinds, producers) with kinds[i] = 'x' (a `through` producer, its op in
    producers[i]) or a `Scalar`; None when an operand is neither or no operand is a `through`."""
    kinds: list[Scalar | str] = []
    prods = []
    for v in op.operands:
        p = producer(v, through)
        if p is not None:
            kinds.append("x")
            prods.append(p)
            continue
        s = scalar_operand(v)
        if s is None:
            return None
        kinds.append(s)
        prods.append(None)
    if "x" not in kinds:
        return None
    return kinds, prods


# f(move(a), move(b), scalar) <-> move(f(a, b, scalar)) for an elementwise f and a data movement
# `move` (transpose with one permutation, reshape from one shape, broadcast with one mapping):
# the shared matching of the movers in patterns/layout.py and patterns/shape.py. Operands that
# are one scalar everywhere are re-created at the new shape.

def sink_match(op, through: str, key):
    """Operands of elementwise `op` all produced by the same kind of `through` op (equal `key`,
    same input shape) or scalars: the Match for moving `through` below `op`, else None."""
    if not is_elementwise(op) or through not in producer_names(op):
        return None
    split = operands_through(op, through)
    if split is None:
        return None
    kinds, prods = split
    movers = [p for p in prods if p is not None]
    k0, s0 = key(movers[0]), shape_of(movers[0].operands[0].type)
    if any(key(p) != k0 or shape_of(p.operands[0].type) != s0 for p in movers[1:]):
        return None
    inputs = [p.operands[0] if p is not None else None for p in prods]
    return Match(op=op, kinds=kinds, inputs=inputs, inner_shape=s0, key=k0,
                 outer_shape=shape_of(op.result.type))


def sink_operands(b, m: Match) -> list:
    """The operands of a sink_match's op at the inner shape."""
    return [x if k == "x" else k.at(b, m.inner_shape) for k, x in zip(m.kinds, m.inputs)]


def hoist_match(op, through: str):
    """move(f(a, b, ...)) where f is elementwise and only feeds this move: the Match for moving
    `move` above f, else None."""
    inner = producer(op.operands[0])
    if inner is None or not is_elementwise(inner) or not single_use(op.operands[0]):
        return None
    kinds = operand_kinds(inner)
    if "x" not in kinds:
        return None
    return Match(f=inner, kinds=kinds, inputs=[v if k in ("x", "same") else None for k, v in zip(kinds, inner.operands)],
                 move=op, outer_shape=shape_of(op.result.type))


def hoist_operands(b, m: Match, move) -> list:
    """The operands of a hoist_match's f, each full-shape one passed through `move(x)`."""
    return [move(x) if k == "x" else x if k == "same" else k.at(b, m.outer_shape) for k, x in zip(m.kinds, m.inputs)]


# --- dependences between ops ------------------------------------------------------------------

def attr_strings(op: ir.Operation) -> dict[str, str]:
    """`op`'s attributes as {name: printed value}: comparable across ops, complex constants included."""
    return dict(mc.memo(as_operation(op), "attr_strings", lambda: dict(attribute_items(op))))


def related_ops(op, up: int = 2, down: int = 3, budget: int = 64, *, name: str | None = None,
                after: bool = False):
    """Ops of `op`'s block that share an ancestor with `op` (within `up` producer hops, the
    block's arguments counting as one common ancestor), reached within `down` user hops;
    only those named `name` if given, and only those after `op` if `after` (the search visits
    as many ops either way).

    A bounded search (no scan of the whole block), so matching stays linear in program size.
    """
    indexed = mc.find(op.operation)
    if indexed is not None:
        return indexed[0].related_ops(indexed[1], up, down, budget, name, after)
    block = op.operation.block
    frontier, ancestors = list(op.operands), []
    seen_vals: set = set()
    for hop in range(up):
        nxt: list[ir.Value] = []
        for v in frontier:
            if v in seen_vals:
                continue
            seen_vals.add(v)
            ancestors.append(v)
            if isinstance(v, ir.OpResult):
                owner = v.owner.operation
                if owner.block == block:
                    nxt.extend(owner.operands)
            elif isinstance(v, ir.BlockArgument) and v.owner == block and hop == 0:
                # f(arg0), f(arg1): the arguments next to v (within `budget` positions; a model
                # with thousands of parameters must not make each match scan them all)
                args = block.arguments
                lo, hi = max(0, v.arg_number - budget // 2), min(len(args), v.arg_number + budget // 2 + 1)
                nxt.extend(a for a in (args[i] for i in range(lo, hi)) if a not in seen_vals)
        frontier = nxt
    ancestors.extend(v for v in frontier if v not in seen_vals)
    found, visited = [], {op.operation}
    level = ancestors
    for _ in range(down):
        nxt = []
        for v in level:
            for use in v.uses:
                u = as_operation(use.owner)
                if u in visited or u.block != block:
                    continue
                visited.add(u)
                found.append(u)
                if len(visited) > budget:
                    return _selected(op.operation, found, name, after)
                nxt.extend(u.results)
        level = nxt
    return _selected(op.operation, found, name, after)


def _selected(op: ir.Operation, found: list, name: str | None, after: bool) -> list:
    return [u for u in found if (name is None or u.name == name) and (not after or op.is_before_in_block(u))]


def depends_on(value: ir.Value, op, limit: int = 256) -> bool:
    """Whether `value` is computed (transitively, within one block) from a result of `op`.

    Conservative: gives True when the search passes `limit` ops.
    """
    indexed = mc.find(as_operation(op))
    if indexed is not None:
        return indexed[0].depends_on(value, indexed[1], limit)
    cone = ancestors_since([value], op, limit)
    return cone is None or op.operation in cone


def ancestors_since(values, first, limit: int = 256) -> AbstractSet | None:
    """The ops of `first`'s block, not before `first`, that `values` are computed from
    (transitively, through nested regions' operands), or None past `limit` ops. A set (while
    augment indexes the program, a `match_cache.OpSet`, which compares equal to one).

    One walk answers "does this read any of these ops?" for many ops at once, where
    `depends_on` would walk once per pair (quadratic when a pattern gathers N partners).
    """
    target = as_operation(first)
    indexed = mc.find(target)
    if indexed is not None:
        return indexed[0].ancestors_since(values, indexed[1], limit)
    seen: set = set()
    stack = list(values)
    while stack:
        v = stack.pop()
        if not isinstance(v, ir.OpResult):
            continue
        owner = v.owner.operation
        if owner in seen or owner.block != target.block or owner.is_before_in_block(target):
            continue
        seen.add(owner)
        if len(seen) > limit:
            return None
        stack.extend(owner.operands)
        for r in owner.regions:
            for blk in r.blocks:
                for inner in blk.operations:
                    stack.extend(inner.operation.operands)
    return seen


def operand_ancestors_since(op, first, limit: int = 256) -> AbstractSet | None:
    """`ancestors_since(op.operands, first, limit)`; while augment indexes the program, read
    from the index without making the operands' Python objects (batching asks it very often)."""
    indexed, other = mc.find(as_operation(first)), mc.find(as_operation(op))
    if indexed is not None and other is not None:
        return indexed[0].operand_ancestors_since(other[1], indexed[1], limit)
    return ancestors_since(as_operation(op).operands, first, limit)


class IndependentOps:
    """Ops of one block none of which reads another: what one op can compute at once (a batch,
    a stack). Each op comes with its cone, the ops since the first that it reads
    (`ancestors_since(its inputs, first)`): one walk per op, not one per pair."""

    def __init__(self, first, cone: AbstractSet):
        self.ops, self.cones = [as_operation(first)], [cone]

    def add(self, op, cone: AbstractSet | None) -> bool:
        """Take `op` unless its cone is unknown (too large), it reads a member, or a member reads it."""
        o = as_operation(op)
        if cone is None or any(m in cone for m in self.ops) or any(o in c for c in self.cones):
            return False
        self.ops.append(o)
        self.cones.append(cone)
        return True

    def __len__(self) -> int:
        return len(self.ops)


# --- regions -----------------------------------------------------------------------------------

def captured_values(op) -> list[ir.Value]:
    """Values used inside `op`'s regions but defined outside `op`, in first-use order.

    These are what a rewrite that rebuilds `op` must receive through its Match.
    """
    op = as_operation(op)
    if not len(op.regions):  # most ops: asked of every op a loop or fusion pattern looks at
        return []
    inside: set = set()
    for region in op.regions:
        for blk in region.blocks:
            inside.update(blk.arguments)
    for inner in walk(op):
        inside.update(inner.results)
        for region in inner.regions:
            for blk in region.blocks:
                inside.update(blk.arguments)
    out, seen = [], set()
    for inner in walk(op):
        for v in inner.operands:
            if v not in inside and v not in seen:
                seen.add(v)
                out.append(v)
    return out
