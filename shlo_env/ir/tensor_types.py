"""MLIR tensor types <-> numpy dtypes and shapes.

The lowest module of the package: it imports nothing of ours (`ir` builds on it).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from jaxlib.mlir import ir

_NAME_TO_DTYPE: dict[str, np.dtype] = {
    "f64": np.dtype(np.float64),
    "f32": np.dtype(np.float32),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "i1": np.dtype(np.bool_),
    "i8": np.dtype(np.int8),
    "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "ui8": np.dtype(np.uint8),
    "ui16": np.dtype(np.uint16),
    "ui32": np.dtype(np.uint32),
    "ui64": np.dtype(np.uint64),
    "complex<f32>": np.dtype(np.complex64),
    "complex<f64>": np.dtype(np.complex128),
    "f8E4M3FN": np.dtype(ml_dtypes.float8_e4m3fn),
    "f8E5M2": np.dtype(ml_dtypes.float8_e5m2),
}
_DTYPE_TO_NAME = {v: k for k, v in _NAME_TO_DTYPE.items()}


class UnsupportedType(ValueError):
    """A type the runtime cannot feed or read (dynamic shapes, tokens, unknown dtypes)."""


def element_type_of(value_or_type: ir.Value | ir.Type) -> ir.Type:
    """The element type of a ranked tensor value or type; a bare element type is its own."""
    t = value_or_type.type if isinstance(value_or_type, ir.Value) else value_or_type
    return ir.RankedTensorType(t).element_type if isinstance(t, ir.RankedTensorType) else t


def dtype_of(t: ir.Type) -> np.dtype:
    """numpy dtype of a ranked tensor type (or of a bare element type)."""
    name = str(element_type_of(t))
    if name not in _NAME_TO_DTYPE:
        raise UnsupportedType(f"element type {name} has no numpy equivalent")
    return _NAME_TO_DTYPE[name]


def element_type(dtype) -> ir.Type:
    """MLIR element type for a numpy dtype (needs an active context)."""
    dtype = np.dtype(dtype)
    if dtype not in _DTYPE_TO_NAME:
        raise UnsupportedType(f"dtype {dtype} has no StableHLO element type here")
    return ir.Type.parse(_DTYPE_TO_NAME[dtype])


def shape_of(t: ir.Type) -> tuple[int, ...]:
    """Static shape of a ranked tensor type; raises UnsupportedType on dynamic dims."""
    if not isinstance(t, ir.RankedTensorType):
        raise UnsupportedType(f"{t} is not a ranked tensor")
    rt = ir.RankedTensorType(t)
    if not rt.has_static_shape:
        raise UnsupportedType(f"{t} has a dynamic shape; only static shapes are supported")
    return tuple(rt.shape)


def tensor_type(shape, elem: ir.Type) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(list(shape), elem)


_FLOAT_NAMES = {"f64", "f32", "f16", "bf16", "f8E4M3FN", "f8E5M2"}


def _elem_name(t: ir.Type) -> str:
    return str(element_type_of(t))


def is_float(t: ir.Type) -> bool:
    """Real floating point (not complex)."""
    return _elem_name(t) in _FLOAT_NAMES


def is_integer(t: ir.Type) -> bool:
    """Integers and booleans: every rewrite on them is exact."""
    name = _elem_name(t)
    return name.startswith("i") or name.startswith("ui")


def num_elements(t: ir.Type) -> int:
    return int(np.prod(shape_of(t), dtype=np.int64))


def nbytes(t: ir.Type) -> int:
    return num_elements(t) * dtype_of(t).itemsize
