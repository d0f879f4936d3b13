"""Which decision sites sit where the time goes: a static, compile-free estimate, and, when
the budget affords one profile of the original, the measured bound of each site (the end of
this module).

A search with a small budget evaluates only a few candidates per state, so the order in which
it tries the single rewrites matters. This module gives every alternatives op (a *site*) a
weight: the estimated time of the ops its rewrite replaces or feeds from, so strategies can try
rewrites on hot ops (dots, convolutions, big reductions, anything inside a loop) first.

The estimate is a roofline-style cost per StableHLO op, read from the types alone (no compile,
no run, a few milliseconds per program):

    time(op) = flops(op) / PEAK_FLOPS + bytes(op) / PEAK_BYTES     (relative, not seconds)

with dot_general flops = 2 x result elements x contracted size, convolution flops =
2 x result elements x kernel window x input features per group, one flop per result element
for other compute ops (a reduce_window: result elements x window size, n²/2 for a cumsum
over n), and bytes = operands + results, plus a fixed `CALL_OVERHEAD` for ops that are a
library call of their own (dots, convolutions, custom calls). Ops in a `while` body count once
per iteration (the static trip count when the loop is a counted one, else `DEFAULT_TRIPS`).
Only the order matters: the measured per-kernel profile (`shlo_env.profile`) ranks the corpus's
categories the same way (dots first, then elementwise, reductions; see docs/hotspots.md), at the
cost of a compile and a profiled run, which a budget of a few seconds cannot spend.

A site's weight is the estimated time of the ops defining its root values plus the ops
producing their operands (one level up: a rewrite of `dot + bias` changes the fusion of the dot
it consumes), each counted once; a loop or conditional among them brings its whole body
(unrolling or hoisting changes all of it).
"""

from __future__ import annotations

import math
from typing import Any
from collections.abc import Sequence

from jaxlib.mlir import ir

from shlo_env.ir.program import ir_scope
from shlo_env.rewrite.driver import walk_ops
from shlo_env.rewrite.region_cut import NEGLIGIBLE_TIME_FRACTION  # measured sites below this are not tried
from shlo_env.ir.tensor_types import UnsupportedType, nbytes, num_elements

PEAK_FLOPS = 50e9  # nominal CPU rates: only their ratio (flops per byte) affects the order
PEAK_BYTES = 20e9
DEFAULT_TRIPS = 10  # iterations assumed for a loop whose trip count is not static
#: Ops that are a library call of their own on CPU (never fused), each with a fixed cost of
#: about this many seconds however small: the 8x8 products in a Kalman step cost their calls.
KERNEL_CALLS = frozenset({"stablehlo.dot_general", "stablehlo.dot", "stablehlo.convolution",
                          "stablehlo.custom_call"})
CALL_OVERHEAD = 2e-6

# Ops that cost (almost) nothing at run time: XLA turns them into bitcasts, folds or elides them.
FREE_OPS = frozenset({
    "stablehlo.constant", "stablehlo.reshape", "stablehlo.bitcast_convert", "stablehlo.tuple",
    "stablehlo.get_tuple_element", "stablehlo.return", "stablehlo.optimization_barrier",
    "stablehlo.while", "stablehlo.case", "stablehlo.if", "func.return", "func.call", "shlo_env.yield",
    "shlo_env.alternatives",
})


def _size(value_or_type) -> tuple[int, int]:
    """(elements, bytes) of a ranked static tensor, (0, 0) for anything else."""
    t = value_or_type.type if isinstance(value_or_type, ir.Value) else value_or_type
    try:
        return num_elements(t), nbytes(t)
    except (UnsupportedType, ValueError, TypeError):
        return 0, 0


def _contracted(op: ir.Operation) -> int:
    """Elements summed per output element of a dot_general or convolution (1 if unknown)."""
    from jaxlib.mlir.dialects import stablehlo

    try:
        if op.name == "stablehlo.dot_general":
            dims = stablehlo.DotDimensionNumbers(op.attributes["dot_dimension_numbers"])
            shape = ir.RankedTensorType(op.operands[0].type).shape
            return math.prod(shape[d] for d in dims.lhs_contracting_dimensions)
        if op.name == "stablehlo.dot":
            return ir.RankedTensorType(op.operands[0].type).shape[-1]
        if op.name == "stablehlo.convolution":
            kernel = ir.RankedTensorType(op.operands[1].type).shape
            out = ir.RankedTensorType(op.results[0].type).shape
            # kernel elements / output features = window x input features per group
            return max(1, math.prod(kernel) // max(1, out[-1] if len(out) else 1))
    except (KeyError, ValueError, IndexError, TypeError):
        pass
    return 1


def _window(op: ir.Operation) -> int:
    """Elements in one window of a reduce_window (1 if unreadable)."""
    try:
        return max(1, math.prod(ir.DenseI64ArrayAttr(op.attributes["window_dimensions"])))
    except (KeyError, ValueError, TypeError):
        return 1


def op_time(op: ir.Operation) -> float:
    """The relative estimated time of one execution of `op` (0 for free ops)."""
    if op.name in FREE_OPS:
        return 0.0
    out_elems, out_bytes = 0, 0
    for r in op.results:
        e, b = _size(r)
        out_elems, out_bytes = out_elems + e, out_bytes + b
    in_bytes = sum(_size(v)[1] for v in op.operands)
    flops = out_elems * (2 * _contracted(op) if op.name in (
        "stablehlo.dot_general", "stablehlo.dot", "stablehlo.convolution") else 1)
    if op.name == "stablehlo.reduce":
        flops = sum(_size(v)[0] for v in op.operands)
    elif op.name == "stablehlo.reduce_window":
        flops = out_elems * _window(op)  # each output reduces its own window (a cumsum: n²/2)
    call = CALL_OVERHEAD if op.name in KERNEL_CALLS else 0.0
    return call + flops / PEAK_FLOPS + (in_bytes + out_bytes) / PEAK_BYTES


def _trips(loop: ir.Operation) -> int:
    from shlo_env.patterns.loop_analysis import static_trip_count

    try:
        info = static_trip_count(loop)
    except Exception:  # noqa: BLE001 - an unreadable loop gets the default, never an error
        info = None
    return max(1, info.trips) if info is not None else DEFAULT_TRIPS


def multiplier(op: ir.Operation, trips: dict | None = None) -> float:
    """How many times `op` runs per program run: the product of its enclosing loops' trips."""
    m = 1.0
    parent = op.parent
    while parent is not None and parent.name not in ("func.func", "builtin.module"):
        if parent.name == "stablehlo.while":
            key = parent
            if trips is not None and key in trips:
                n = trips[key]
            else:
                n = _trips(parent)
                if trips is not None:
                    trips[key] = n
            m *= n
        parent = parent.parent
    return m


_REGION_BODIES = frozenset({"stablehlo.reduce", "stablehlo.reduce_window", "stablehlo.sort",
                            "stablehlo.scatter", "stablehlo.select_and_scatter", "stablehlo.map"})


def _blocks_time(blocks, trips: dict) -> float:
    total = 0.0
    for block in blocks:
        for op in walk_ops(block):
            if op.parent is not None and op.parent.name in _REGION_BODIES:
                continue  # scalar combiner bodies: counted in their op
            total += op_time(op) * multiplier(op, trips)
    return total


def program_time(body: ir.Block) -> float:
    """The estimated time of a whole block (loops counted per iteration): the normalizer."""
    return _blocks_time([body], {})


def _site_op_time(op: ir.Operation, trips: dict) -> float:
    """An op's time in a site; a loop or conditional brings the time of everything it runs
    (unrolling or hoisting acts on the whole body)."""
    t = op_time(op) * multiplier(op, trips)
    if op.name in ("stablehlo.while", "stablehlo.case", "stablehlo.if"):
        t += _blocks_time([b for r in op.regions for b in r.blocks], trips)
    return t


def _owner(value: ir.Value) -> ir.Operation | None:
    """The op defining `value` (None for a block argument)."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    return owner.operation


def site_weights(alts: Sequence) -> list[float]:
    """Per alternatives op (a `driver.list_alternatives` entry): the estimated time of the ops
    around its rewrite (see the module docstring). Same order as `alts`."""
    weights: list[float] = []
    trips: dict = {}
    for a in alts:
        op = a.op
        roots = list(op.operands)[:len(op.results)]
        touched: dict = {}
        for v in roots:
            owner = _owner(v)
            if owner is None:
                continue
            touched[owner] = None
            for x in owner.operands:
                up = _owner(x)
                if up is not None:
                    touched[up] = None
        weights.append(sum((_site_op_time(o, trips) for o in touched), 0.0))
    return weights


def hot_order(weights: Sequence[float]) -> list[int]:
    """Indices by decreasing weight; equal weights keep their program order."""
    return sorted(range(len(weights)), key=lambda i: -weights[i])


# --- measured weights: one profile of the original (issue 31, item 4) ----------------------------
# A rewrite can save at most the time of the XLA kernels holding the ops it touches
# (`region.site_bounds`). One profiled run set of the original gives every root site that
# bound, as a share of the run time: it orders the sites better than the static estimate
# above, and shows the sites not worth a candidate. It costs a compile in this process and
# `PROFILE_WARMUP + PROFILE_RUNS` traced calls, so it is taken only when the schedule allows
# (`Schedule.profile_allowed`); the static weights are the fallback, and the order among equal bounds.

PROFILE_RUNS = 5
PROFILE_WARMUP = 1
TRACE_OVERHEAD = 2.0  # a traced call takes up to this many untraced calls
#: ... and a traced call of a program whose loops run a number of times known only at run time,
#: up to this many: tracing costs each executed kernel microseconds, against tens of nanoseconds
#: untraced for a loop of scalar ops (an SDE solve of 10 ms: 410k kernel events, 8-10 s traced
#: and read back).
TRACED_CALLS = 1000


def profile_runs(program) -> int:
    """Traced calls a profile of `program` takes: one where it loops (one call runs the loop's
    kernels many times over, and tracing each iteration costs 30-300 calls: a Kalman filter's
    scan of 4 ms traced in 0.36 s a call), else `PROFILE_RUNS`."""
    with ir_scope():
        loops = any(op.name == "stablehlo.while" for op in walk_ops(program.body))
    return 1 if loops else PROFILE_RUNS


def profile_cost_s(compile_s: float, call_s: float) -> float:
    """Seconds one profile of a program takes: its compile and its traced calls."""
    return compile_s + (PROFILE_WARMUP + PROFILE_RUNS) * TRACE_OVERHEAD * call_s


def profile_original(augmented, inputs=None, *, runner: Any = None, input_key: str | None = None,
                     runs: int = PROFILE_RUNS, warmup: int = PROFILE_WARMUP, timeout_s: float | None = None) -> Any:
    """One profile of the augmented original's baseline (`region_cut.baseline`). Given a
    runner that profiles (a worker), it runs there on the input set `input_key`, stopped past
    `timeout_s`: tracing every iteration of a loop can take a thousand times the call (45 s for
    an ODE solve of 7 ms), and in this process nothing could stop it. Else in this process."""
    from shlo_env.rewrite import region_cut

    baseline = region_cut.baseline(augmented)
    if runner is not None and input_key is not None and hasattr(runner, "profile"):
        return runner.profile(baseline.text(), input_key, runs, warmup, timeout_s)
    from shlo_env.measure.kernel_profile import profile_program

    return profile_program(baseline, inputs, runs=runs, warmup=warmup, patterns=())


def measured_sites(augmented, num_sites: int, inputs=None,
                   **where: Any) -> tuple[list[float], Any, dict[int, list[int]]]:
    """Per site (alternatives index) of the augmented original `augmented`: the share of the
    profiled kernel time its rewrite can save (`region.site_bounds`); the profile (a strategy
    that judges regions reuses it); and per site the kernels it touches (`region.site_kernels`:
    what `report.explain()` cites). `where`: `profile_original`'s runner, input key and
    timeout. Raises what the profile or the mapping raises (`region.RegionError`: a profile
    that does not fit the program; `CandidateError`: the runner's timeout)."""
    from shlo_env.rewrite import region_cut

    prof = profile_original(augmented, inputs, **where)
    kernels = region_cut.site_kernels(prof, augmented)
    bounds = [float(sum(prof.kernels[k].share for k in kernels.get(i, ()))) for i in range(num_sites)]
    return bounds, prof, kernels


def measured_weights(augmented, num_sites: int, inputs=None, **where: Any) -> tuple[list[float], Any]:
    """`measured_sites` without the kernels: per site its measured bound, and the profile."""
    bounds, prof, _ = measured_sites(augmented, num_sites, inputs, **where)
    return bounds, prof


def measured_order(bounds: Sequence[float], static: Sequence[float],
                   min_time_fraction: float = NEGLIGIBLE_TIME_FRACTION) -> list[int]:
    """Indices by decreasing measured bound (the static weight breaks ties), leaving out those
    below `min_time_fraction` of the run time on both counts: the measured bound and the static
    estimate's share of all sites. Both must agree, because a site's matched ops can miss the
    kernel that holds its time: `examples/quadratic_form`'s reassociation (25x) measured 0.07 %."""
    total = sum(static) or 1.0
    keep = [i for i in range(len(bounds)) if bounds[i] >= min_time_fraction or static[i] / total >= min_time_fraction]
    return sorted(keep, key=lambda i: (-bounds[i], -static[i]))
