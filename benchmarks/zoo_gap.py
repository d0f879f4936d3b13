"""Where the big gap is (issue 31, item 8): each zoo program's measured time over its roofline
floor, and for the most dot-heavy ones the per-kernel breakdown with each dot kernel's own
T/roofline.

    python benchmarks/zoo_gap.py [--programs NAME ...] [--top-programs 3 | --kernels-of NAME ...]
        [--top-kernels 8] [--dataset zoo] [--out FILE.md] [--json FILE]

T/roofline of a program: the original's measured time (`runtime.measure`, 10th percentile) over
`shlo_env.measure.roofline.floor_s` of XLA's cost analysis at this machine's measured peaks (or
SHLO_ENV_PEAK_FLOPS / SHLO_ENV_PEAK_BANDWIDTH). That floor charges every byte XLA counts at the
bandwidth of a 256 MiB array (DRAM); the zoo's working sets mostly fit in cache, so it can pass
the measured time (T/roofline < 1). T/flop floor (time over flops at the peak matmul rate alone)
is the one to read for dot- and convolution-bound programs. The dot share is XLA's flops in dot and
convolution ops over all flops, counted on the StableHLO (2 x result elements x contracted
size; for a convolution every output element counts its whole window, padding included, where
XLA counts only the valid positions, so a padded convolution's share can pass 100 %), which ranks
programs by how much of their work is matrix multiplication.

Per kernel (`shlo_env.profile`: the measured time of each executed XLA thunk, mapped to the
StableHLO ops it came from): the dot/convolution flops of the ops it holds, its achieved
GFLOP/s, and its own T/roofline, where the kernel's floor counts its dots' flops at peak plus the
bytes of their operands and results at peak bandwidth (a lower bound on its traffic: the
elementwise inputs fused around a dot are not counted).

`--small-conv-check NAME` tries the action the profiles point to (see
docs/experiments/2026-11-26-zoo-gap.md): it rebuilds zoo program NAME from its builder (needs
`shlo_env[zoo]`) with every 3x3 stride-1 convolution on a map of at most 2x2 computed as im2col +
one dot, checks the outputs agree and times both side by side.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

from shlo_env import corpus
from shlo_env.measure import roofline
from shlo_env.execute import runtime
from shlo_env.rewrite.driver import walk_ops
from shlo_env.ir.program import Program
from shlo_env.measure.kernel_profile import profile_program


def _shape(t) -> list[int]:
    from jaxlib.mlir import ir

    return list(ir.RankedTensorType(t).shape)


def _bytes(t) -> int:
    from jaxlib.mlir import ir

    rt = ir.RankedTensorType(t)
    width = getattr(rt.element_type, "width", 32)
    return math.prod(rt.shape) * max(width, 8) // 8


def op_work(program: Program) -> list[tuple[float, float, str]]:
    """(flops, bytes of operands and result, description) per op in `walk_ops` order; zero flops
    for ops other than dot_general and convolution."""
    out: list[tuple[float, float, str]] = []
    for op in walk_ops(program.body):
        name = op.name
        if name not in ("stablehlo.dot_general", "stablehlo.convolution") or len(op.operands) < 2:
            out.append((0.0, 0.0, ""))
            continue
        lhs, rhs, res = _shape(op.operands[0].type), _shape(op.operands[1].type), _shape(op.results[0].type)
        nbytes = float(_bytes(op.operands[0].type) + _bytes(op.operands[1].type) + _bytes(op.results[0].type))
        if name == "stablehlo.dot_general":
            text = str(op.attributes["dot_dimension_numbers"])
            contract = _dims(text, "lhs_contracting_dimensions")
            k = math.prod(lhs[d] for d in contract) if contract else 1
            out.append((2.0 * math.prod(res) * k, nbytes, f"dot {lhs}x{rhs}->{res}"))
        else:  # each output element: kernel elements per output feature, multiply-add
            spec = str(op.attributes["dimension_numbers"])  # e.g. [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]
            kernel = spec[spec.index("x[") + 2: spec.index("]->")].replace(" ", "").split(",")
            out_features = rhs[kernel.index("o")] if "o" in kernel else (rhs[-1] if rhs else 1)
            flops = 2.0 * math.prod(res) * math.prod(rhs) / max(out_features, 1)
            out.append((flops, nbytes, f"conv {lhs}*{rhs}->{res}"))
    return out


def _dims(text: str, key: str) -> list[int]:
    """The list after `key = [` in a dot_dimension_numbers attribute's text."""
    i = text.find(key)
    if i < 0:
        return []
    body = text[text.index("[", i) + 1: text.index("]", i)]
    return [int(x) for x in body.split(",") if x.strip()]


def peak_rates(repeats: int) -> tuple[float, float, str]:
    """This machine's peaks: SHLO_ENV_PEAK_FLOPS / SHLO_ENV_PEAK_BANDWIDTH if set, else the best of
    `repeats` measurements of `roofline.measure_cpu_peaks` (matmuls of several sizes)."""
    flops, bandwidth, source = roofline.peak_rates(runtime.platform(), "", measure=False)
    if flops and bandwidth:
        return flops, bandwidth, source
    f, b = roofline.measure_cpu_peaks(repeats=repeats)
    return (flops or f, bandwidth or b,
            f"measured, best of {repeats} at each of 256^2/512^2/2048^2 f32 matmuls; 256 MiB sum/elementwise")


def program_gap(program: Program, peaks: tuple[float, float]) -> dict:
    """T/roofline of the whole program and its dot share of flops."""
    exe = runtime.compile(program)
    inputs = runtime.input_sets(program, 1)[0]
    t = runtime.measure(exe, inputs).full
    cost = runtime.cost_analysis(exe)
    floor = roofline.floor_s(cost, *peaks)
    work = op_work(program)
    dot_flops = sum(f for f, _, _ in work)
    return {"ms": t * 1e3, "floor_ms": floor * 1e3 if floor else None,
            "t_over_floor": t / floor if floor else None, "xla_flops": cost.get("flops"),
            "xla_bytes": cost.get("bytes"), "dot_flops": dot_flops,
            "dot_share": dot_flops / cost["flops"] if cost.get("flops") else None,
            "gflops_achieved": (cost.get("flops") or 0) / t / 1e9}


def kernel_table(program: Program, peaks: tuple[float, float], top: int) -> str:
    """Markdown rows of the `top` kernels by time, with their dots' flops and T/roofline."""
    prof = profile_program(program, runs=10, patterns=())
    work = op_work(program)
    flops_peak, bw_peak = peaks
    lines = [prof.table(top=0).splitlines()[0], "",
             "| share | ms/run | kernel | category | dots in it | dot GFLOP | GFLOP/s | T/roofline (its dots) | "
             "stablehlo ops |", "|---:|---:|---|---|---|---:|---:|---:|---|"]
    for k in prof.kernels[:top]:
        f = sum(work[i][0] for i in k.ops if i < len(work))
        b = sum(work[i][1] for i in k.ops if i < len(work))
        dots = "; ".join(sorted({work[i][2] for i in k.ops if i < len(work) and work[i][2]}))[:90]
        floor = f / flops_peak + b / bw_peak if f else 0.0
        kinds = ", ".join(f"{n.removeprefix('stablehlo.')}x{c}" for n, c in
                          sorted(k.op_kinds.items(), key=lambda kv: -kv[1])[:4])
        lines.append(f"| {k.share:.1%} | {k.time_s * 1e3:.3f} | {k.name[:28]} | {k.category} | {dots or '-'} | "
                     f"{f / 1e9:.4f} | {f / k.time_s / 1e9 if f and k.time_s else 0:.1f} | "
                     f"{k.time_s / floor if floor else float('nan'):.1f} | {kinds} |")
    cats = ", ".join(f"{c} {s:.0%}" for c, s in prof.by_category().items() if s >= 0.01)
    lines += ["", f"By category: {cats}."]
    return "\n".join(lines)


# --- the action the profiles point to: small-map convolutions as im2col + one dot ----------------

def im2col_conv(lax_conv):
    """A stand-in for `lax.conv_general_dilated` that computes a 3x3, stride-1, SAME (or pad 1),
    NHWC/HWIO convolution whose input map is at most 2x2 as pad + 9 shifted slices concatenated +
    one dot (what a rewrite pattern would do on the StableHLO); anything else goes to `lax_conv`."""
    import jax.numpy as jnp
    from jax import lax

    def conv(lhs, rhs, window_strides, padding, lhs_dilation=None, rhs_dilation=None,
             dimension_numbers=None, feature_group_count=1, **kw):
        dn = lax.conv_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers)
        pad_one = padding == "SAME" or (not isinstance(padding, str)
                                        and tuple(map(tuple, padding)) == ((1, 1), (1, 1)))
        if (dn.lhs_spec == (0, 3, 1, 2) and dn.rhs_spec == (3, 2, 0, 1) and dn.out_spec == (0, 3, 1, 2)
                and tuple(window_strides) == (1, 1) and feature_group_count == 1 and tuple(rhs.shape[:2]) == (3, 3)
                and lhs.shape[1] <= 2 and lhs.shape[2] <= 2 and pad_one
                and all(d == 1 for d in (*(lhs_dilation or ()), *(rhs_dilation or ())))):
            n, h, w, c = lhs.shape
            xp = jnp.pad(lhs, ((0, 0), (1, 1), (1, 1), (0, 0)))
            cols = jnp.concatenate([xp[:, i:i + h, j:j + w, :] for i in range(3) for j in range(3)], axis=-1)
            return jnp.einsum("nhwk,ko->nhwo", cols, rhs.reshape(9 * c, rhs.shape[-1]))
        return lax_conv(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                        feature_group_count, **kw)

    return conv


def small_conv_check(name: str, rounds: int = 3) -> list[str]:
    """Rebuild zoo program `name` from its builder (needs shlo_env[zoo]) with and without
    `im2col_conv`, check the outputs agree and time the two side by side (`rounds` rounds)."""
    import numpy as np
    from jax import lax

    from shlo_env.ir.program import lower
    from shlo_env.measure.timing_policy import TimingPolicy
    from shlo_env.zoo.programs import registry

    spec = registry()[name]
    fn, args, _ = spec.build()
    base = lower(fn, *args, name=name)
    original = lax.conv_general_dilated
    lax.conv_general_dilated = im2col_conv(original)
    try:
        fn2, args2, _ = spec.build()
        cand = lower(fn2, *args2, name=f"{name}_im2col")
    finally:
        lax.conv_general_dilated = original
    # The initialized weights (finite outputs), zero-initialized arrays redrawn so outputs are not 0.
    rng = np.random.default_rng(0)
    inputs = [0.05 * rng.standard_normal(x.shape).astype(x.dtype) if (x.dtype.kind == "f" and not x.any()) else x
              for x in base.example_args or ()]
    ea, eb = runtime.compile(base), runtime.compile(cand)
    oa, ob = runtime.execute(ea, inputs), runtime.execute(eb, inputs)
    diff = max(float(np.max(np.abs(np.asarray(x) - np.asarray(y)))) for x, y in zip(oa, ob))
    scale = max(float(np.max(np.abs(np.asarray(x)))) for x in oa)
    out = [f"{name}: convolutions {base.text().count('stablehlo.convolution')} -> "
           f"{cand.text().count('stablehlo.convolution')}; outputs agree to {diff:.2e} (largest |output| {scale:.3g})"]
    for _ in range(rounds):
        ta, tb = runtime.compare([ea, eb], inputs, TimingPolicy(runs=10, min_seconds=1.0))
        out.append(f"original {ta.full * 1e3:.1f} ms, im2col {tb.full * 1e3:.1f} ms, median pair ratio "
                   f"{runtime.median_ratio(ta.samples, tb.samples):.3f} (load {os.getloadavg()[0]:.1f})")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="zoo")
    ap.add_argument("--programs", nargs="*", help="programs to measure (default: all)")
    ap.add_argument("--top-programs", type=int, default=3, help="per-kernel tables for this many dot-heaviest")
    ap.add_argument("--kernels-of", nargs="*", default=None, help="per-kernel tables for these programs instead")
    ap.add_argument("--json", help="write each program's numbers (flops, bytes, floor, ...) here")
    ap.add_argument("--top-kernels", type=int, default=8)
    ap.add_argument("--peak-repeats", type=int, default=20, help="peak measurements per size, the best kept (default 20)")
    ap.add_argument("--out", help="also write the Markdown here")
    ap.add_argument("--small-conv-check", metavar="NAME", help="only: rebuild zoo program NAME with its "
                    "small-map convolutions as im2col + dot, and time it against the original")
    args = ap.parse_args(argv)
    if args.small_conv_check:
        print("\n".join(small_conv_check(args.small_conv_check)))
        return 0
    entries = corpus.entries(args.dataset)
    if args.programs:
        missing = sorted(set(args.programs) - {e.name for e in entries})
        if missing:
            ap.error(f"unknown programs {missing} in {args.dataset}")
        entries = [e for e in entries if e.name in args.programs]
    flops, bandwidth, source = peak_rates(args.peak_repeats)
    peaks = (flops, bandwidth)
    rows, gaps = [], {}
    for e in entries:
        g = program_gap(corpus.load(e.uri), peaks)
        gaps[e.name] = g
        g["t_over_flop_floor"] = flops / 1e9 / g["gflops_achieved"] if g["gflops_achieved"] else None
        rows.append(f"| {e.name} | {e.metadata['kind']} | {e.metadata['ops']} | {g['ms']:.2f} | "
                    f"{g['floor_ms']:.3f} | {g['t_over_floor']:.1f} | {g['t_over_flop_floor'] or 0:.1f} | "
                    f"{g['dot_share']:.0%} | {g['gflops_achieved']:.1f} |")
        print(rows[-1], file=sys.stderr, flush=True)
    load = os.getloadavg()[0]
    out = [f"Peaks: {flops / 1e9:.1f} GFLOP/s, {bandwidth / 1e9:.1f} GB/s ({source}); load average {load:.1f}.", "",
           "| program | kind | ops | ms | floor ms | T/roofline | T/flop floor | dot share of flops | GFLOP/s achieved |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|", *rows, ""]
    heavy = sorted(gaps, key=lambda n: -(gaps[n]["dot_share"] or 0) * (gaps[n]["xla_flops"] or 0))
    for name in (args.kernels_of if args.kernels_of is not None else heavy[: args.top_programs]):
        program = corpus.load(f"{args.dataset}/{name}")
        out += [f"### {name}", "", kernel_table(program, peaks, args.top_kernels), ""]
    text = "\n".join(out)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    if args.json:
        Path(args.json).write_text(json.dumps({"peaks": [flops, bandwidth, source], "load": load, "programs": gaps},
                                              indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
