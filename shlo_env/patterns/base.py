"""The Pattern API, the registry, and every matching helper patterns share.

A pattern is a small class:

    @register
    class MulByOne(Pattern):
        '''x * 1 -> x'''
        root = "stablehlo.multiply"
        numerics = Numerics.EXACT

        def match(self, op):
            x, one = commuted(op)            # tries both operand orders
            if splat_value(one) == 1:
                return Match(x=x)

        def rewrite(self, b, m):
            return m.x

`match(op)` is pure (never mutates IR) and returns a `Match` or None. Every `ir.Value` in the
match becomes an input of the alternatives region, so `rewrite(b, m)` receives the same `Match`
with those values replaced by region arguments, builds the replacement with the `Builder` `b`,
and returns the new value(s): one per root. Roots default to the results of `op`; a multi-root
pattern sets `Match(roots=[...], ...)`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import numpy as np
from jaxlib.mlir import ir

from shlo_env.ir import attribute_items, complex_constant, element_type_of, is_complex, is_pure
from shlo_env.patterns import match_cache as mc
from shlo_env.numerics import Numerics
from shlo_env.tensor_types import UnsupportedType, dtype_of, is_float, is_integer, shape_of

__all__ = [
    "Pattern", "Match", "Numerics", "register", "all_patterns", "default_patterns", "get",
    "producer", "single_use", "static_shape", "splat_value", "constant_value", "commuted",
    "dot_dims", "DotDims", "is_float", "is_integer", "shape_of", "dtype_of", "i64s", "users",
    # added with the pattern library (issue 6)
    "ELEMENTWISE", "UNARY_ELEMENTWISE", "BINARY_ELEMENTWISE", "COMMUTATIVE", "DATA_MOVEMENT",
    "is_elementwise", "concat_dim", "slice_params", "permutation", "broadcast_dims", "comparison",
    "Scalar", "scalar_operand", "operand_kinds", "operands_through", "depends_on", "ancestors_since", "related_ops", "attr_strings", "captured_values", "callee",
    "static_trip_count", "LoopInfo", "body_size", "FlatBody", "is_pure", "reduce_body",
    # layout motion (issue 10)
    "sink_match", "sink_operands", "hoist_match", "hoist_operands",
]


class Match(dict):
    """Captures of a match; `m.x` reads `m["x"]`. `roots` (optional) lists the replaced values.
    `numerics` (optional) loosens the pattern's tier for this match only (e.g. a merge that is
    exact unless XLA could contract a multiply into the add it separates)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class Pattern:
    """Base class of every rewrite. Subclasses set `root` and `numerics` and define match/rewrite."""

    root: ClassVar[str | tuple[str, ...]] = ()
    numerics: ClassVar[Numerics] = Numerics.EXACT
    name: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()

    @classmethod
    def roots(cls) -> tuple[str, ...]:
        """Op names this pattern is tried on (a class with OPERATION_NAME works too)."""
        r = cls.root
        items = r if isinstance(r, tuple) else (r,)
        return tuple(getattr(x, "OPERATION_NAME", x) for x in items)

    def match(self, op) -> Match | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def rewrite(self, b, m: Match):  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def summary(self) -> str:
        doc = (type(self).__doc__ or "").strip()
        return doc.splitlines()[0] if doc else self.name

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} ({self.numerics.name.lower()})>"


# --- registry -------------------------------------------------------------------------------

_REGISTRY: dict[str, Pattern] = {}


def register(cls: type[Pattern]) -> type[Pattern]:
    """Class decorator adding a built-in pattern to the registry."""
    instance = cls()
    if instance.name in _REGISTRY:
        raise ValueError(f"pattern name {instance.name!r} registered twice")
    _REGISTRY[instance.name] = instance
    return cls


def _load_builtins() -> None:
    import shlo_env.patterns  # noqa: F401  (importing the package registers every family)


def all_patterns() -> list[Pattern]:
    """Every built-in pattern, APPROX ones included."""
    _load_builtins()
    return list(_REGISTRY.values())


def default_patterns() -> list[Pattern]:
    """What `optimize` uses by default: every pattern that preserves values (EXACT, REASSOCIATE)."""
    return [p for p in all_patterns() if p.numerics <= Numerics.REASSOCIATE]


def get(name: str) -> Pattern:
    _load_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no pattern named {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None


def resolve(patterns) -> list[Pattern]:
    """Accept None (defaults), names, Pattern classes or instances."""
    if patterns is None:
        return default_patterns()
    out = []
    for p in patterns:
        if isinstance(p, str):
            out.append(get(p))
        elif isinstance(p, type) and issubclass(p, Pattern):
            out.append(p())
        elif isinstance(p, Pattern):
            out.append(p)
        else:
            raise TypeError(f"not a pattern: {p!r}")
    return out


# --- matching helpers -----------------------------------------------------------------------

def producer(value: ir.Value, *names: str):
    """The op (as an OpView) defining `value`, or None for block arguments / other op names."""
    return mc.producer(value, names)


def users(value: ir.Value) -> list:
    """The op (as an OpView) of each use of `value`."""
    return [mc.view(u) for u in mc.users(value)]


def single_use(value: ir.Value) -> bool:
    return mc.num_uses(value) == 1


def static_shape(value: ir.Value) -> tuple[int, ...] | None:
    try:
        return shape_of(value.type)
    except UnsupportedType:
        return None


def i64s(op, name: str) -> list[int]:
    """A DenseI64ArrayAttr attribute of `op` as a list."""
    return list(ir.DenseI64ArrayAttr(op.operation.attributes[name]))


_LOOK_THROUGH = ("stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.convert")


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


def is_splat(value: ir.Value, x: float) -> bool:
    v = splat_value(value)
    return v is not None and (v == x or (isinstance(x, float) and math.isnan(x) and math.isnan(v)))


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
    from jaxlib.mlir.dialects import stablehlo

    d = stablehlo.DotDimensionNumbers(op.operation.attributes["dot_dimension_numbers"])
    return DotDims(d.lhs_batching_dimensions, d.rhs_batching_dimensions,
                   d.lhs_contracting_dimensions, d.rhs_contracting_dimensions)


def matmul_operands(value: ir.Value):
    """(a, b, op) when `value` is a plain matrix product a·b (rank-2 x rank-2 or x vector).

    Plain: no batch dims, a's last dim contracted with b's first, operand and result dtypes equal.
    """
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


def shapes(*values: ir.Value) -> list[tuple[int, ...]] | None:
    out = []
    for v in values:
        s = static_shape(v)
        if s is None:
            return None
        out.append(s)
    return out


def same_type(*values: ir.Value) -> bool:
    return all(v.type == values[0].type for v in values[1:])


result_elem = element_type_of  # the element type of a value (older name)


def positions(seq: Sequence[int]) -> dict[int, int]:
    return {v: i for i, v in enumerate(seq)}


# --- op families ------------------------------------------------------------------------------

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


def name_of(op) -> str:
    return mc.name(op.operation)


def is_elementwise(op) -> bool:
    """An op computing each output element from the same-index elements of its operands."""
    op = op.operation
    return mc.name(op) in ELEMENTWISE and len(mc.results(op)) == 1 and not len(op.regions)


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
    from jaxlib.mlir.dialects import stablehlo

    return stablehlo.ComparisonDirectionAttr(op.operation.attributes["comparison_direction"]).value


def is_identity_perm(perm: Sequence[int]) -> bool:
    return list(perm) == list(range(len(perm)))


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
        from shlo_env.tensor_types import tensor_type

        if self["value"] is not None:
            return b.broadcast_in_dim(self["value"], shape, [])
        return b.constant(self["splat"], tensor_type(shape, self["elem"]))


def scalar_operand(value: ir.Value) -> Scalar | None:
    """A `Scalar` when `value` is a splat constant or a broadcast of a rank-0 tensor.

    Only splat constants whose value survives a Python round trip are accepted (NaN payloads,
    for instance, do not).
    """
    op = producer(value, "stablehlo.broadcast_in_dim")
    if op is not None and static_shape(op.operands[0]) == ():
        return Scalar.of(op.operands[0], None, element_type_of(value))
    if producer(value, "stablehlo.constant") is not None:
        v = splat_value(value)
        if v is not None and not (isinstance(v, float) and math.isnan(v)):
            return Scalar.of(None, v, element_type_of(value))
    return None


def operand_kinds(op) -> list:
    """How each operand of elementwise `op` follows a change of its shape: a `Scalar` (re-create
    it at the new shape), "same" (a rank-0 operand of a select/clamp: keep it), or "x" (a
    full-shape tensor: move it the way the result moves)."""
    out_rank = len(static_shape(op.result) or ())
    kinds: list = []
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
    kinds: list = []
    prods: list = []
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
    if not is_elementwise(op):
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


def attr_strings(op: ir.Operation) -> dict[str, str]:
    """`op`'s attributes as {name: printed value}: comparable across ops, complex constants included."""
    return dict(mc.memo(op.operation, "attr_strings", lambda: dict(attribute_items(op))))


def related_ops(op, up: int = 2, down: int = 3, budget: int = 64, *, name: str | None = None):
    """Ops of `op`'s block that share an ancestor with `op` (within `up` producer hops, the
    block's arguments counting as one common ancestor), reached within `down` user hops;
    only those named `name` if given (the search visits as many ops either way).

    A bounded search (no scan of the whole block), so matching stays linear in program size.
    """
    indexed = mc.find(op.operation)
    if indexed is not None:
        return indexed[0].related_ops(indexed[1], up, down, budget, name)
    block = op.operation.block
    frontier, ancestors = list(op.operands), []
    seen_vals: set = set()
    for hop in range(up):
        nxt: list = []
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
                u = use.owner.operation if hasattr(use.owner, "operation") else use.owner
                if u in visited or u.block != block:
                    continue
                visited.add(u)
                found.append(u)
                if len(visited) > budget:
                    return found if name is None else [u for u in found if u.name == name]
                nxt.extend(u.results)
        level = nxt
    return found if name is None else [u for u in found if u.name == name]


def depends_on(value: ir.Value, op, limit: int = 256) -> bool:
    """Whether `value` is computed (transitively, within one block) from a result of `op`.

    Conservative: gives True when the search passes `limit` ops.
    """
    cone = ancestors_since([value], op, limit)
    return cone is None or op.operation in cone


def ancestors_since(values, first, limit: int = 256) -> set | None:
    """The ops of `first`'s block, not before `first`, that `values` are computed from
    (transitively, through nested regions' operands), or None past `limit` ops.

    One walk answers "does this read any of these ops?" for many ops at once, where
    `depends_on` would walk once per pair (quadratic when a pattern gathers N partners).
    """
    target = first.operation if hasattr(first, "operation") else first
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


# --- regions, calls and loops -----------------------------------------------------------------

def _walk(op: ir.Operation):
    for region in op.regions:
        for blk in region.blocks:
            for view in blk.operations:
                inner = view.operation
                yield inner
                yield from _walk(inner)


def nested_ops(op) -> list[ir.Operation]:
    """Every op inside `op`'s regions (any depth)."""
    return list(_walk(op.operation if hasattr(op, "operation") else op))


def captured_values(op) -> list[ir.Value]:
    """Values used inside `op`'s regions but defined outside `op`, in first-use order.

    These are what a rewrite that rebuilds `op` must receive through its Match.
    """
    op = op.operation if hasattr(op, "operation") else op
    inside: set = set()
    for region in op.regions:
        for blk in region.blocks:
            inside.update(blk.arguments)
    for inner in _walk(op):
        inside.update(inner.results)
        for region in inner.regions:
            for blk in region.blocks:
                inside.update(blk.arguments)
    out, seen = [], set()
    for inner in _walk(op):
        for v in inner.operands:
            if v not in inside and v not in seen:
                seen.add(v)
                out.append(v)
    return out


def callee(call) -> ir.Operation | None:
    """The `func.func` a `func.call` calls, looked up in the enclosing module."""
    call = call.operation if hasattr(call, "operation") else call
    name = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
    op = call
    while op is not None and op.name != "builtin.module":
        parent = op.parent
        op = parent.operation if parent is not None else None
    if op is None:
        return None
    for f in op.regions[0].blocks[0].operations:
        f = f.operation
        if f.name == "func.func" and ir.StringAttr(f.attributes["sym_name"]).value == name:
            return f
    return None


def terminator(block: ir.Block) -> ir.Operation:
    ops = list(block.operations)
    return ops[-1].operation


class LoopInfo:
    """A `stablehlo.while` counting `i` from `start` to `limit` by `step`: `trips` iterations."""

    __slots__ = ("counter", "start", "limit", "step", "trips")

    def __init__(self, counter, start, limit, step, trips):
        self.counter, self.start, self.limit, self.step, self.trips = counter, start, limit, step, trips


def _int_constant(value: ir.Value):
    v = splat_value(value)
    if isinstance(v, bool) or not isinstance(v, int):
        return None
    return v


def static_trip_count(op) -> LoopInfo | None:
    """The trip count of a while loop `for i in range(start, limit, step)`, if it is static.

    The condition must be `i < limit` (signed compare, `limit` a constant captured or in the
    condition), `i` starts from a constant and the body only adds a positive constant step.
    """
    op = op.operation if hasattr(op, "operation") else op
    if op.name != "stablehlo.while":
        return None
    cond, body = op.regions[0].blocks[0], op.regions[1].blocks[0]
    cond_ops = [o.operation for o in cond.operations]
    if len(cond_ops) < 2 or cond_ops[-1].name != "stablehlo.return":
        return None
    pred = cond_ops[-1].operands[0]
    cmp = producer(pred, "stablehlo.compare")
    if cmp is None or comparison(cmp) != "LT":
        return None
    if any(o.name not in ("stablehlo.compare", "stablehlo.constant", "stablehlo.return") for o in cond_ops):
        return None
    i, lim = cmp.operands
    if not isinstance(i, ir.BlockArgument) or i.owner != cond or static_shape(i) != ():
        return None
    if not is_integer(i.type):
        return None
    limit = _int_constant(lim)
    start = _int_constant(op.operands[i.arg_number])
    if limit is None or start is None:
        return None
    ret = terminator(body)
    nxt = producer(ret.operands[i.arg_number], "stablehlo.add")
    if nxt is None:
        return None
    barg = body.arguments[i.arg_number]
    step = None
    for x, c in commuted(nxt):
        if x == barg:
            step = _int_constant(c)
    if step is None or step <= 0:
        return None
    trips = max(0, -(-(limit - start) // step))
    return LoopInfo(i.arg_number, start, limit, step, trips)


def body_size(op) -> int:
    """Ops in a loop body, counting the ops of called functions."""
    op = op.operation if hasattr(op, "operation") else op
    n = 0
    for inner in _walk(op):
        n += 1
        if inner.name == "func.call":
            f = callee(inner)
            if f is not None:
                n += body_size(f)
    return n


def reduce_body(op) -> str | None:
    """The combining op of a single-input `stablehlo.reduce` whose body is `return f(a, b)`."""
    op = op.operation if hasattr(op, "operation") else op
    if op.name != "stablehlo.reduce" or len(op.operands) != 2:
        return None
    blk = op.regions[0].blocks[0]
    body = [o.operation for o in blk.operations]
    if len(body) != 2 or len(body[0].operands) != 2 or body[1].operands[0] != body[0].results[0]:
        return None
    if set(body[0].operands) != set(blk.arguments) or body[0].name not in BINARY_ELEMENTWISE:
        return None
    if body[0].name not in COMMUTATIVE:
        return None
    return body[0].name


class FlatBody:
    """A detached copy of a loop body (or any single-block region) with `func.call`s inlined.

    JAX lowers loop bodies as calls to private functions; patterns analyse and rebuild loops
    from this flat copy. Use as a context manager (the copy is erased on exit):

        with FlatBody(while_op) as body:
            for op in body.ops: ...
    """

    def __init__(self, op, region: int = 1):
        from shlo_env.builder import Builder

        op = op.operation if hasattr(op, "operation") else op
        src = op.regions[region].blocks[0]
        scratch = ir.Operation.create("shlo_env.scratch", regions=1)
        self.scratch: ir.Operation | None = scratch
        self.block = scratch.regions[0].blocks.append(*[a.type for a in src.arguments])
        b = Builder.at_end(self.block)
        outs = b.inline(src, list(self.block.arguments))
        b.op("stablehlo.return", outs, [])
        mc.forget_users()  # the copy uses values captured from the program

    @property
    def args(self) -> list[ir.Value]:
        return list(self.block.arguments)

    @property
    def ops(self) -> list[ir.Operation]:
        """The body's ops without the terminator."""
        return [o.operation for o in self.block.operations][:-1]

    @property
    def results(self) -> list[ir.Value]:
        return list(terminator(self.block).operands)

    def close(self) -> None:
        if self.scratch is not None:
            self.scratch.erase()
            self.scratch = None
            mc.forget_users()

    def __enter__(self) -> "FlatBody":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
