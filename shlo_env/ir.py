"""Facts about MLIR ops and values that every other module reads the same way.

The bottom layer of the package: element types and attribute values of any element type.
jaxlib's Python bindings cannot hand out a dense attribute of complex numbers as an object (reading one raises, and `NamedAttribute.attr`
aborts the process), so attributes are read here as text and complex constants parsed from it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np
from jaxlib.mlir import ir

from shlo_env.tensor_types import dtype_of, shape_of

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
