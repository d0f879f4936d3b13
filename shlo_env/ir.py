"""Facts about MLIR ops and values that every other module reads the same way.

The bottom layer of the package: which ops have side effects (`is_pure`, the one definition
every module uses), element types, and attribute values of any element type. jaxlib's Python
bindings cannot hand out a dense attribute of complex numbers as an object (reading one raises,
and `NamedAttribute.attr` aborts the process), so attributes are read here as text and complex
constants parsed from it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import numpy as np
from jaxlib.mlir import ir

from shlo_env.tensor_types import dtype_of, shape_of

# --- side effects ------------------------------------------------------------------------------

# Ops that do more than compute their results: they talk to other devices or the host, draw
# from hidden random state, order other effects, or run code we cannot see. They must stay even
# when their results are unused, and must not be moved, duplicated or merged.
# `stablehlo.rng_bit_generator` is not here: its state is an operand and the new state a result,
# so it is a deterministic function of its operands (XLA treats it so too).
EFFECTFUL_OPS = frozenset({
    "stablehlo.custom_call",  # opaque: may write memory, call the host, ...
    "stablehlo.rng",  # draws from the backend's hidden generator state
    "stablehlo.send", "stablehlo.recv", "stablehlo.infeed", "stablehlo.outfeed",
    "stablehlo.after_all", "stablehlo.create_token",
    "stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.all_to_all", "stablehlo.reduce_scatter",
    "stablehlo.collective_permute", "stablehlo.collective_broadcast",
    "func.call",  # unknown body unless the caller resolves the callee (see is_pure)
})

# Block terminators: control flow, never moved or dropped on their own.
TERMINATORS = frozenset({"func.return", "stablehlo.return", "shlo_env.yield"})

# The alternatives op is a choice between computations: as pure as its regions (region 0 is the
# original), like any op with regions.


def is_effectful_op(op: ir.Operation) -> bool:
    """Does `op` itself (not counting nested regions) have side effects or control flow?"""
    return op.name in EFFECTFUL_OPS or op.name in TERMINATORS


def is_pure(op, callee: Callable[[ir.Operation], ir.Operation | None] | None = None) -> bool:
    """No side effects anywhere in `op` or its regions: it may be moved, duplicated or dropped.

    `callee(call_op)` may resolve a `func.call` to its function; a call is then as pure as the
    callee's body (recursion counts as impure). Without it, every call is assumed impure.
    """
    return _pure(op.operation if hasattr(op, "operation") else op, callee, set())


def _pure(op: ir.Operation, callee, calling: set) -> bool:
    if op.name == "func.call" and callee is not None:
        fn = callee(op)
        if fn is None or fn in calling or not fn.regions[0].blocks:
            return False
        calling.add(fn)
        try:
            body = [o.operation for o in fn.regions[0].blocks[0].operations][:-1]  # not its return
            return all(_pure(o, callee, calling) for o in body)
        finally:
            calling.discard(fn)
    if is_effectful_op(op):
        return False
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                inner = inner.operation
                if inner.name in TERMINATORS:
                    continue  # a nested region's own terminator is part of its op
                if not _pure(inner, callee, calling):
                    return False
    return True


# --- element types ----------------------------------------------------------------------------

def element_type_of(value_or_type) -> ir.Type:
    """The element type of a ranked tensor value or type."""
    t = value_or_type.type if isinstance(value_or_type, ir.Value) else value_or_type
    return ir.RankedTensorType(t).element_type


def is_complex(value_or_type) -> bool:
    t = value_or_type.type if isinstance(value_or_type, ir.Value) else value_or_type
    elem = ir.RankedTensorType(t).element_type if isinstance(t, ir.RankedTensorType) else t
    return isinstance(elem, ir.ComplexType)


# --- attributes --------------------------------------------------------------------------------

def attribute_items(op) -> Iterator[tuple[str, str]]:
    """(name, printed value) of each attribute of `op`, for attributes of any element type."""
    attributes = (op.operation if hasattr(op, "operation") else op).attributes
    for i in range(len(attributes)):
        named = attributes[i]
        name = named.name
        # str(NamedAttribute) is "NamedAttribute(name=<value>)"; it prints without downcasting.
        yield name, str(named)[len("NamedAttribute(") + len(name) + 1:-1]


def attribute_text(op, name: str) -> str | None:
    for key, text in attribute_items(op):
        if key == name:
            return text
    return None


_NUMBER = re.compile(r"0x[0-9A-Fa-f]+|[-+]?(?:inf|nan|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)")


def complex_constant(op) -> np.ndarray | None:
    """The value of a `stablehlo.constant` of complex numbers, parsed from its printed form."""
    op = op.operation if hasattr(op, "operation") else op
    result_type = op.results[0].type
    dtype, shape = dtype_of(result_type), shape_of(result_type)
    text = attribute_text(op, "value")
    if text is None or not text.startswith("dense<"):
        return None
    body = text[len("dense<"):text.rindex(">")] if " : " not in text else text[len("dense<"):text.rindex("> : ")]
    part = np.float32 if dtype == np.complex64 else np.float64  # the type of each half
    if body.startswith('"0x'):  # large constants print as their raw little-endian bytes
        raw = np.frombuffer(bytes.fromhex(body[3:-1]), dtype=dtype)
        return np.broadcast_to(raw, shape).copy() if raw.size == 1 else raw.reshape(shape).copy()
    parts = [_float_token(t, part) for t in _NUMBER.findall(body)]
    values = np.empty(len(parts) // 2, dtype)
    values.real, values.imag = parts[0::2], parts[1::2]  # not re + 1j*im: that loses -0.0
    if values.size == 1:
        return np.full(shape, values[0], dtype)
    return values.reshape(shape)


def _float_token(token: str, part) -> float:
    if token.startswith("0x"):  # NaN payloads and other non-round-trippable values print as bits
        bits = np.array(int(token, 16), np.uint32 if part == np.float32 else np.uint64)
        return bits.view(part).item()
    return float(token)


def dense_literal(values, t: ir.Type) -> str:
    """A `dense<"0x..."> : type` literal (raw little-endian bytes: exact for every value) of
    `values` cast to `t`'s element type; a scalar is splatted."""
    arr = np.asarray(values).astype(dtype_of(t))
    if arr.ndim:
        arr = arr.reshape(shape_of(t))
    return f'dense<"0x{np.ascontiguousarray(arr).tobytes().hex().upper()}"> : {t}'
