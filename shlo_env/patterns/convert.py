"""Convert rewrites: drop conversions that change nothing, and narrow before moving data.

A conversion A -> B is *lossless* when every A value is exactly a B value (f16 -> f32,
i8 -> i32, i16 -> f32, bool -> anything, ...). Converts commute with pure data movement
(transpose, reshape, broadcast, slice, reverse), so where the convert sits is a free choice:
narrowing first moves fewer bytes.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from shlo_env.patterns.base import Match, Pattern, register
from shlo_env.patterns.matching import DATA_MOVEMENT, producer, single_use
from shlo_env.ir.tensor_types import dtype_of, element_type_of


def _finfo(dt):
    try:
        return np.finfo(dt)
    except ValueError:
        return ml_dtypes.finfo(dt)


def _kind(dt) -> str:
    if dt == np.bool_:
        return "b"
    if np.issubdtype(dt, np.integer):
        return "i"
    try:
        _finfo(dt)
        return "f"
    except (ValueError, TypeError):
        return "?"


def _int_bits(dt) -> tuple[int, bool]:
    """(magnitude bits, signed) of an integer dtype."""
    info = np.iinfo(dt)
    signed = info.min < 0
    return info.bits - (1 if signed else 0), signed


def lossless(src, dst) -> bool:
    """Whether converting dtype `src` to `dst` is exact for every value."""
    src, dst = np.dtype(src), np.dtype(dst)
    ks, kd = _kind(src), _kind(dst)
    if src == dst or ks == "b":
        return ks != "?" and kd != "?"
    if ks == "i" and kd == "i":
        (ms, ss), (md, sd) = _int_bits(src), _int_bits(dst)
        return md >= ms and (sd or not ss)
    if ks == "i" and kd == "f":
        return _finfo(dst).nmant + 1 >= _int_bits(src)[0]
    if ks == "f" and kd == "f":
        a, b = _finfo(src), _finfo(dst)
        return (b.nmant >= a.nmant and b.maxexp >= a.maxexp
                and b.minexp - b.nmant <= a.minexp - a.nmant)
    return False


def _dtypes(*values):
    try:
        return [dtype_of(v.type) for v in values]
    except Exception:  # noqa: BLE001 - complex, f8 variants we do not know
        return None


@register
class ConvertSameType(Pattern):
    """convert(x: T -> T) -> x."""

    root = "stablehlo.convert"

    def match(self, op):
        x = op.operands[0]
        if x.type == op.result.type:
            return Match(x=x)

    def rewrite(self, b, m):
        return m.x


@register
class ConvertRoundTrip(Pattern):
    """convert(convert(x: A -> B) -> A) -> x when A -> B is lossless (f16 -> f32 -> f16, i8 -> i32 -> i8)."""

    root = "stablehlo.convert"
    operand_from = "stablehlo.convert"

    def match(self, op):
        inner = producer(op.operands[0], "stablehlo.convert")
        if inner is None:
            return None
        x = inner.operands[0]
        dts = _dtypes(x, op.operands[0])
        if x.type == op.result.type and dts is not None and lossless(*dts):
            return Match(x=x)

    def rewrite(self, b, m):
        return m.x


@register
class ConvertSkipLossless(Pattern):
    """convert(convert(x: A -> B), B -> C) -> convert(x, A -> C) when A -> B is lossless and C is a
    float (or all three are integers): the lossless step changes no value."""

    root = "stablehlo.convert"
    operand_from = "stablehlo.convert"

    def match(self, op):
        inner = producer(op.operands[0], "stablehlo.convert")
        if inner is None:
            return None
        x = inner.operands[0]
        dts = _dtypes(x, op.operands[0], op.result)
        if dts is None or x.type == op.result.type or not lossless(dts[0], dts[1]):
            return None
        kinds = [_kind(d) for d in dts]
        if kinds[2] == "f" or all(k == "i" for k in kinds):
            return Match(x=x, elem=element_type_of(op.result))

    def rewrite(self, b, m):
        return b.convert(m.x, m.elem)


def _narrows(src, dst) -> bool:
    return np.dtype(dst).itemsize < np.dtype(src).itemsize


@register
class ConvertBeforeMovement(Pattern):
    """convert(move(x)) -> move(convert(x)) for a data movement `move` (transpose, reshape,
    broadcast, slice, reverse), offered when the convert narrows or `move` is a broadcast:
    fewer bytes are moved, or fewer elements converted."""

    root = "stablehlo.convert"
    operand_from = DATA_MOVEMENT

    def match(self, op):
        move = producer(op.operands[0])
        if move is None or move.operation.name not in DATA_MOVEMENT or not single_use(op.operands[0]):
            return None
        dts = _dtypes(op.operands[0], op.result)
        if dts is None or dts[0] == dts[1]:
            return None
        if _narrows(*dts) or move.operation.name == "stablehlo.broadcast_in_dim":
            return Match(x=move.operands[0], move=move, elem=element_type_of(op.result))

    def rewrite(self, b, m):
        return b.like(m.move, [b.convert(m.x, m.elem)], result_elem=m.elem)


@register
class ConvertAfterMovement(Pattern):
    """move(convert(x)) -> convert(move(x)) when the convert widens (move the narrow data), or
    `move` is a slice (convert only what is read)."""

    root = tuple(sorted(DATA_MOVEMENT))
    operand_from = "stablehlo.convert"

    def match(self, op):
        cvt = producer(op.operands[0], "stablehlo.convert")
        if cvt is None or not single_use(op.operands[0]) or len(op.operands) != 1:
            return None
        x = cvt.operands[0]
        dts = _dtypes(x, op.operands[0])
        if dts is None or dts[0] == dts[1]:
            return None
        if _narrows(dts[1], dts[0]) or op.operation.name == "stablehlo.slice":
            return Match(x=x, move=op, elem=element_type_of(op.result), src=element_type_of(x))

    def rewrite(self, b, m):
        return b.convert(b.like(m.move, [m.x], result_elem=m.src), m.elem)
