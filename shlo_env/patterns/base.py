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

from shlo_env.numerics import Numerics
from shlo_env.tensor_types import UnsupportedType, dtype_of, is_float, is_integer, shape_of

__all__ = [
    "Pattern", "Match", "Numerics", "register", "all_patterns", "default_patterns", "get",
    "producer", "single_use", "static_shape", "splat_value", "constant_value", "commuted",
    "dot_dims", "DotDims", "is_float", "is_integer", "shape_of", "dtype_of", "i64s", "users",
]


class Match(dict):
    """Captures of a match; `m.x` reads `m["x"]`. `roots` (optional) lists the replaced values."""

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
    if not isinstance(value, ir.OpResult):
        return None
    op = value.owner
    if names and op.operation.name not in names:
        return None
    return op


def users(value: ir.Value) -> list[ir.Operation]:
    return [u.owner for u in value.uses]


def single_use(value: ir.Value) -> bool:
    uses = iter(value.uses)
    return next(uses, None) is not None and next(uses, None) is None


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
    out = [static_shape(v) for v in values]
    return None if any(s is None for s in out) else out


def same_type(*values: ir.Value) -> bool:
    return all(v.type == values[0].type for v in values[1:])


def result_elem(value: ir.Value) -> ir.Type:
    return ir.RankedTensorType(value.type).element_type


def positions(seq: Sequence[int]) -> dict[int, int]:
    return {v: i for i, v in enumerate(seq)}
