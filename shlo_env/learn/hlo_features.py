"""Features of a compiled executable, read from XLA's optimized HLO (canonical text).

The static graph the search rewrites is not what runs: XLA fuses it, picks layouts and library
kernels, and unrolls or keeps loops. Two rewrites with equal flops and bytes can compile to
different kernels, and that is where most measured differences come from. This module reads
the text `Evaluator.optimized_hlo` returns and sums, over the kernels the executable launches
(the instructions of the entry computation and of loop bodies, times the loop's known trip
count), how many there are of each kind, the bytes they read and write, and the work inside
fusions. `FEATURES` names the vector's entries.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

DTYPE_BYTES = {"pred": 1, "s4": 1, "u4": 1, "s8": 1, "u8": 1, "f8e4m3fn": 1, "f8e5m2": 1, "bf16": 2, "f16": 2,
               "s16": 2, "u16": 2, "f32": 4, "s32": 4, "u32": 4, "f64": 8, "s64": 8, "u64": 8, "c64": 8,
               "c128": 16, "token": 0}
FREE = {"parameter", "constant", "bitcast", "tuple", "get-tuple-element", "after-all", "partition-id",
        "replica-id", "opt-barrier", "add-dependency"}  # no kernel of their own
TRANSCENDENTAL = {"exponential", "exponential-minus-one", "log", "log-plus-one", "tanh", "logistic", "sine",
                  "cosine", "tan", "power", "rsqrt", "sqrt", "cbrt", "erf", "atan2"}
DATA_MOVEMENT = {"transpose", "copy", "concatenate", "pad", "slice", "dynamic-slice", "dynamic-update-slice",
                 "gather", "scatter", "reverse"}
KINDS = ("loop", "input", "output", "custom", "dot", "conv", "reduce", "reduce-window", "copy", "while",
         "sort", "other")
FEATURES = (("kernels", "bytes_in", "bytes_out", "max_buffer", "elementwise", "transcendental", "movement",
             "reduced", "window", "dot_flops", "unknown_trips", "roofline_us", "parallel_bytes", "strided_bytes",
             "narrow_dot_flops")
            + tuple(f"n_{k}" for k in KINDS) + tuple(f"bytes_{k}" for k in KINDS))
INDEX = {name: i for i, name in enumerate(FEATURES)}

_INSTR = re.compile(r"^(?:ROOT )?\S+ = (?P<shape>\(.*?\)|\S+) (?P<op>[a-z][\w\-]*)\((?P<rest>.*)$")
_ARRAY = re.compile(r"\b([a-z]\w*)\[([\d,]*)\]")
_LAYOUT = re.compile(r"\b([a-z]\w*)\[([\d,]*)\]\{([\d,]*)")
_PARTITIONED = re.compile(r'"outer_dimension_partitions":\["')
# The per-kernel roofline: flops/s, transcendentals/s, bytes/s and a launch cost (search.cost_model's CPU)
PEAK_FLOPS, PEAK_TRANSCENDENTALS, BANDWIDTH, LAUNCH_US = 5e10, 5e9, 2e10, 1.0
_TRIPS = re.compile(r'"known_trip_count":\{"n":"(\d+)"')
_KIND = re.compile(r"kind=k(\w+)")
_WINDOW = re.compile(r"window=\{size=([\dx]+)")
_CONTRACT = re.compile(r"lhs_contracting_dims=\{([\d,]*)\}")
NARROW = 32  # a dot whose output's minor dimension is below this fills few vector lanes of a GEMM tile


class HloParseError(ValueError):
    """The text is not XLA's canonical HLO as this module reads it."""


@dataclass
class Instr:
    op: str
    shape: str
    operands: str  # the operand list's text (shapes and names)
    attrs: str  # the rest of the line, and of the closing lines of nested computations
    bodies: list[list[Instr]] = field(default_factory=list)  # computations it calls, in order


def arrays(text: str) -> Iterator[tuple[str, tuple[int, ...]]]:
    for dtype, dims in _ARRAY.findall(text):
        if dtype in DTYPE_BYTES:
            yield dtype, tuple(int(d) for d in dims.split(",") if d)


def nbytes(text: str) -> int:
    return sum(DTYPE_BYTES[t] * math.prod(d) for t, d in arrays(text))


def strided_bytes(text: str) -> int:
    """Bytes of the arrays whose layout is not row-major (minor-to-major not descending)."""
    total = 0
    for dtype, dims, layout in _LAYOUT.findall(text):
        order = [int(x) for x in layout.split(",") if x]
        if dtype in DTYPE_BYTES and order != sorted(order, reverse=True):
            total += DTYPE_BYTES[dtype] * math.prod(int(d) for d in dims.split(",") if d)
    return total


def elements(shape: str) -> int:
    return sum(math.prod(d) for _, d in arrays(shape))


def _split_call(rest: str) -> tuple[str, str]:
    """The operand list (up to the call's closing paren) and what follows it."""
    depth = 1
    for i, ch in enumerate(rest):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            return rest[:i], rest[i + 1:]
    return rest, ""


def parse(text: str) -> list[Instr]:
    """The entry computation's instructions, each with the computations it calls."""
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith("ENTRY"))
    except StopIteration:
        raise HloParseError("no ENTRY computation in the HLO text") from None
    body, _ = _block(lines, start + 1, 2)
    return body


def _block(lines: list[str], i: int, indent: int) -> tuple[list[Instr], int]:
    """Instructions at `indent` from line i to the closing brace one level out; returns them and
    the index of the closing line."""
    out: list[Instr] = []
    pad = " " * indent
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            i += 1
            continue
        if not line.startswith(pad) or stripped.startswith("}"):
            return out, i
        m = _INSTR.match(stripped)
        if m is None:
            raise HloParseError(f"unreadable HLO line: {stripped[:120]}")
        operands, attrs = _split_call(m["rest"])
        ins = Instr(m["op"], m["shape"], operands, attrs)
        i += 1
        while attrs.rstrip().endswith("="):  # a nested computation follows: `calls=`, `body=`, ...
            if i >= len(lines) or lines[i].strip() != "{":
                raise HloParseError(f"expected a nested computation after: {stripped[:120]}")
            nested, i = _block(lines, i + 1, indent + 2)
            ins.bodies.append(nested)
            attrs = lines[i].strip()[1:]  # after the closing brace: `, body=` or `, backend_config=...`
            ins.attrs += attrs
            i += 1
            if attrs.rstrip().endswith("={"):  # a list of them: `branch_computations={ {...}, {...} }`
                i = _computation_list(lines, i, indent, ins)
                attrs = ins.attrs
        if attrs.rstrip().endswith("={"):
            i = _computation_list(lines, i, indent, ins)
        out.append(ins)
    return out, i


def _computation_list(lines: list[str], i: int, indent: int, ins: Instr) -> int:
    """Read `{ ... },` computations up to the list's closing brace into `ins.bodies`; returns
    the index after that brace (whose trailing attributes go to `ins.attrs`)."""
    while i < len(lines) and lines[i].strip() == "{":
        nested, i = _block(lines, i + 1, indent + 2)
        ins.bodies.append(nested)
        closing = lines[i].strip()
        i += 1
        if closing != "},":
            break
    if i >= len(lines) or not lines[i].strip().startswith("}"):
        raise HloParseError(f"unclosed list of computations after: {ins.op}")
    ins.attrs += lines[i].strip()[1:]
    return i + 1


def _kind(ins: Instr) -> str:
    if ins.op == "fusion":
        m = _KIND.search(ins.attrs)
        kind = m.group(1).lower() if m else "loop"
        return kind if kind in KINDS else "other"
    if ins.op in ("dot", "convolution"):
        return "dot" if ins.op == "dot" else "conv"
    if ins.op in ("reduce", "reduce-window", "copy", "while", "sort"):
        return ins.op
    if ins.op == "transpose":
        return "copy"
    return "other"


def minor_dim(shape: str) -> int:
    """The size of the first array's minor (contiguous) dimension in `shape`: its layout's first
    entry, or its last dimension when no layout is given; 0 for a scalar."""
    m = _LAYOUT.search(shape) or _ARRAY.search(shape)
    if m is None or not m.group(2):
        return 0
    dims = [int(d) for d in m.group(2).split(",")]
    order = [int(x) for x in m.group(3).split(",") if x] if m.re is _LAYOUT else []
    return dims[order[0]] if order else dims[-1]


def _dot_flops(ins: Instr) -> float:
    lhs = next(arrays(ins.operands), None)
    m = _CONTRACT.search(ins.attrs)
    if lhs is None or m is None:
        return 0.0
    contracted = math.prod(lhs[1][int(d)] for d in m.group(1).split(",") if d)
    return 2.0 * elements(ins.shape) * contracted


def _inner(body: list[Instr], f: np.ndarray, times: float) -> None:
    """Work inside a fusion: elements computed, moved, reduced, windowed, multiplied."""
    for ins in body:
        if ins.op in FREE or ins.op == "broadcast":
            continue
        n = elements(ins.shape) * times
        if ins.op in ("dot", "convolution"):
            f[INDEX["dot_flops"]] += _dot_flops(ins) * times
            if ins.op == "dot" and 1 < minor_dim(ins.shape) < NARROW:
                f[INDEX["narrow_dot_flops"]] += _dot_flops(ins) * times
        elif ins.op == "reduce":
            f[INDEX["reduced"]] += max((math.prod(d) for _, d in arrays(ins.operands)), default=0) * times
        elif ins.op == "reduce-window":
            m = _WINDOW.search(ins.attrs)
            f[INDEX["window"]] += n * (math.prod(int(x) for x in m.group(1).split("x")) if m else 1)
        elif ins.op in DATA_MOVEMENT:
            f[INDEX["movement"]] += n
        elif ins.op in TRANSCENDENTAL:
            f[INDEX["transcendental"]] += n
        else:
            f[INDEX["elementwise"]] += n


def _control(body: list[Instr], f: np.ndarray, times: float) -> None:
    for ins in body:
        if ins.op in FREE:
            continue
        kind = _kind(ins)
        moved = nbytes(ins.operands) + nbytes(ins.shape)
        if ins.op == "while":
            m = _TRIPS.search(ins.attrs)
            if m is None:
                f[INDEX["unknown_trips"]] += 1
            trips = float(m.group(1)) if m else 1.0
            for nested in ins.bodies:
                _control(nested, f, times * trips)
            f[INDEX["n_while"]] += times
            continue
        if ins.op in ("conditional", "call"):  # a conditional runs one branch: their mean
            for nested in ins.bodies:
                _control(nested, f, times / len(ins.bodies))
            continue
        f[INDEX["kernels"]] += times
        f[INDEX["bytes_in"]] += nbytes(ins.operands) * times
        f[INDEX["bytes_out"]] += nbytes(ins.shape) * times
        f[INDEX["max_buffer"]] = max(f[INDEX["max_buffer"]], nbytes(ins.shape))
        f[INDEX[f"n_{kind}"]] += times
        f[INDEX[f"bytes_{kind}"]] += moved * times
        f[INDEX["strided_bytes"]] += strided_bytes(ins.operands + " " + ins.shape) * times
        if _PARTITIONED.search(ins.attrs):
            f[INDEX["parallel_bytes"]] += moved * times
        work = np.zeros(len(FEATURES))
        _inner(ins.bodies[0] if ins.op == "fusion" and ins.bodies else [ins], work, 1.0)
        f += work * times
        flops = work[INDEX["elementwise"]] + work[INDEX["reduced"]] + work[INDEX["window"]] + work[INDEX["dot_flops"]]
        seconds = max(moved / BANDWIDTH, flops / PEAK_FLOPS, work[INDEX["transcendental"]] / PEAK_TRANSCENDENTALS)
        f[INDEX["roofline_us"]] += (seconds * 1e6 + LAUNCH_US) * times


def features(text: str) -> np.ndarray:
    """The feature vector (float64, `FEATURES` order) of one executable's optimized HLO."""
    f = np.zeros(len(FEATURES))
    _control(parse(text), f, 1.0)
    return f
