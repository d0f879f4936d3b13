"""The two controls of the sequential acceptance test (issue 31, item 6; docs/acceptance.md).

    python benchmarks/acceptance_controls.py                       # 20 programs, 10 tries each
    python benchmarks/acceptance_controls.py --programs 8 --tries 4 --json out.json   # reduced
    python benchmarks/acceptance_controls.py --dataset zoo --max-ms 30 --programs 8 --allowance 6

On real programs (corpus programs up to `--max-ms` and the examples), each in one worker:

(a) **A against itself**: A against a separately compiled copy of A (the same text plus a
    comment: another executable, the same program), `--tries` times with
    `shlo_env.measure.paired_timing.time_until_decided` and `--allowance` seconds each. Accepted
    ("faster") should be at most 1 % of tries.
(b) **A against A plus ~3 % of work**: B = A with an extra computation whose cost is calibrated
    by measurement to `--gain` of A's runtime (`with_extra_work`: a fused tanh-and-sum over an
    iota of `size` elements, seeded from one of A's outputs and added back into it times 1e-30,
    so that it runs after that output and cannot be removed). The test times (A + work) against
    A and should accept A (the faster) in at least 90 % of tries.

The old rule on the same pairs, for comparison: the search's threshold 1 - max(3 %, 2 x noise)
(noise: the median |1 - ratio| of 3 self-timings of A, measured once per program here, per
search there), on one side-by-side timing under the search's policy (the 10th-percentile ratio
and the median per-call ratio both below it: `noise_model.accepts`), and then a confirming
second timing (as `optimize_program` confirms its winner).

Timings on a shared machine are noisy: the load average is printed with every program.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys
import time

import numpy as np

from shlo_env import corpus
from shlo_env.bench import examples
from shlo_env.execute import runtime
from shlo_env.ir.program import Program, lower
from shlo_env.measure.noise_thresholds import accepts
from shlo_env.measure.paired_timing import time_until_decided
from shlo_env.measure.sequential_test import SequentialRatioTest, block_log_ratios, counterbalanced, wilcoxon_bounds
from shlo_env.measure.timing_policy import SEARCH, TimingPolicy
from shlo_env.execute.worker import CandidateError, Worker

KEY = "control"
FLOATS = ("f16", "bf16", "f32", "f64")


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


# --- the program with extra work --------------------------------------------------------------

def _split_types(types: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in types:
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return out + [cur.strip()] if cur.strip() else out


def _shape_elem(ty: str) -> tuple[list[int], str] | None:
    m = re.fullmatch(r"tensor<((?:\d+x)*)([a-z0-9]+)>", ty)
    if not m:
        return None
    return [int(d) for d in m.group(1).split("x") if d], m.group(2)


def with_extra_work(text: str, size: int) -> str:
    """`text` with a computation of about `size` tanh evaluations added, whose result goes back
    into the smallest float (else integer) output, so that XLA can neither remove it nor run it
    before that output is ready. Outputs change by at most ~1e-30 * size."""
    start = text.index("@main(")
    m = re.compile(r"^( +)return (.+?) : (.+)$", re.M).search(text, start)
    if m is None:
        raise ValueError("no return in main")
    indent, operands, types = m.group(1), [o.strip() for o in m.group(2).split(",")], _split_types(m.group(3))
    if len(operands) != len(types):
        raise ValueError(f"cannot parse the return: {m.group(0)[:200]}")
    parsed = [_shape_elem(t) for t in types]
    usable = [(elem not in FLOATS, math.prod(shape), i) for i, p in enumerate(parsed) if p
              for shape, elem in [p] if elem in FLOATS or re.fullmatch(r"[su]?i(8|16|32|64)", elem)]
    if not usable:
        raise ValueError("no float or integer output to attach the extra work to")
    k = min(usable)[2]
    shape, elem = parsed[k]  # type: ignore[misc]
    out, ty = operands[k], types[k]
    zero = "0.000000e+00" if elem in FLOATS else "0"
    s = f"tensor<{size}xf32>"
    lines = []
    if shape:
        dims = ", ".join(str(d) for d in range(len(shape)))
        lines += [f"%xw_z = stablehlo.constant dense<{zero}> : tensor<{elem}>",
                  f"%xw_r = stablehlo.reduce({out} init: %xw_z) applies stablehlo.add across dimensions = [{dims}]"
                  f" : ({ty}, tensor<{elem}>) -> tensor<{elem}>"]
        seed = "%xw_r"
    else:
        seed = out
    if elem != "f32":
        lines.append(f"%xw_s = stablehlo.convert {seed} : (tensor<{elem}>) -> tensor<f32>")
        seed = "%xw_s"
    lines += [f"%xw_i = stablehlo.iota dim = 0 : {s}",
              f"%xw_b = stablehlo.broadcast_in_dim {seed}, dims = [] : (tensor<f32>) -> {s}",
              f"%xw_v = stablehlo.add %xw_i, %xw_b : {s}",
              f"%xw_t = stablehlo.tanh %xw_v : {s}",
              "%xw_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>",
              f"%xw_e = stablehlo.reduce(%xw_t init: %xw_0) applies stablehlo.add across dimensions = [0]"
              f" : ({s}, tensor<f32>) -> tensor<f32>",
              "%xw_c = stablehlo.constant dense<1.000000e-30> : tensor<f32>",
              "%xw_m = stablehlo.multiply %xw_e, %xw_c : tensor<f32>"]
    extra = "%xw_m"
    if elem != "f32":
        lines.append(f"%xw_mc = stablehlo.convert %xw_m : (tensor<f32>) -> tensor<{elem}>")
        extra = "%xw_mc"
    lines += [f"%xw_mb = stablehlo.broadcast_in_dim {extra}, dims = [] : (tensor<{elem}>) -> {ty}",
              f"%xw_out = stablehlo.add {out}, %xw_mb : {ty}"]
    operands[k] = "%xw_out"
    ret = f"{indent}return {', '.join(operands)} : {m.group(3)}"
    return text[: m.start()] + "".join(f"{indent}{line}\n" for line in lines) + ret + text[m.end():]


def paired_ratio(worker, a: str, b: str, seconds: float) -> tuple[float, float, float]:
    """(lower, estimate, upper) of T(b)/T(a) from `seconds` of alternating side-by-side timing
    (95 % Wilcoxon bounds on counterbalanced blocks of 8 rounds): the calibration's measurement."""
    policy = TimingPolicy(runs=16, warmup=1, min_seconds=0.1, max_rounds=100000)
    z: list[float] = []
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds or len(z) < 6:
        ta, tb = worker.time([a, b], KEY, policy)
        sb, sa = worker.time([b, a], KEY, policy)
        z += list(counterbalanced(block_log_ratios(ta.samples, tb.samples, 8),
                                  block_log_ratios(sa.samples, sb.samples, 8)))
    lo, est, hi = wilcoxon_bounds(z, 0.025)
    return math.exp(lo), math.exp(est), math.exp(hi)


def calibrate(worker, text: str, run_s: float, gain: float, seconds: float) -> tuple[str, int, float, tuple]:
    """The program with extra work of about `gain` of its runtime: (text, size, measured ratio
    of (A + work) / A, its 95 % bounds). The work's cost is linear in its size (one fused loop);
    its slope is measured with the work ten times larger (about 10 x `gain` of the runtime)
    from the fastest of many interleaved runs of each program (a loaded machine delays runs,
    it never speeds one up, so minimums are steadier there than ratios), and scaled down. The
    ratio at the chosen size is then measured side by side (the control's truth, with bounds)."""
    policy = TimingPolicy(runs=20, warmup=2, min_seconds=seconds, max_rounds=100000)
    big = max(64, int(10 * gain * run_s / 2e-9))  # from a guess of 2 ns an element
    for _ in range(3):
        ta, tb = worker.time([text, with_extra_work(text, big)], KEY, policy)
        extra = (tb.minimum - ta.minimum) / ta.minimum
        if 5 * gain <= extra <= 20 * gain:
            break
        big = max(64, int(big * min(8.0, max(1 / 8, 10 * gain / max(extra, gain / 8)))))
    size = max(16, int(big * gain / max(extra, gain / 8)))
    b = with_extra_work(text, size)
    lo, est, hi = paired_ratio(worker, text, b, seconds)
    return b, size, est, (lo, hi)


# --- the old rule -----------------------------------------------------------------------------

def old_noise(worker, text: str) -> float:
    """What `Evaluator.measure_noise` gives: the median |1 - ratio| of 3 self-timings."""
    ratios = []
    for _ in range(3):
        a, b = worker.time([text, text], KEY, SEARCH)
        ratios.append(b.full / a.full)
    return float(np.median([abs(1 - r) for r in ratios]))


def old_accepts(worker, a: str, b: str, threshold: float) -> bool:
    """One side-by-side timing under the search's policy passing `noise_model.accepts`, then a
    confirming second one (its larger ratio below the threshold), as `optimize_program` does."""
    for _ in range(2):
        ta, tb = worker.time([a, b], KEY, SEARCH)
        if not accepts(tb.full / ta.full, runtime.median_ratio(ta.samples, tb.samples), threshold):
            return False
    return True


# --- the controls -------------------------------------------------------------------------------

def programs(count: int, max_ms: float, dataset: str = "corpus") -> list[tuple[str, Program]]:
    """About two thirds corpus programs (evenly spread over runtime up to `max_ms`) and a third
    examples (every third of the suite); for another dataset (`zoo`), its programs alone."""
    n_ex = min(len(examples.suite()), count // 3) if dataset == "corpus" else 0
    entries = sorted((e for e in corpus.entries(dataset) if e.metadata.get("runtime_ms", 1e9) <= max_ms),
                     key=lambda e: e.metadata["runtime_ms"])
    n_c = min(len(entries), count - n_ex)
    idx = sorted({round(i * (len(entries) - 1) / max(1, n_c - 1)) for i in range(n_c)})
    out = [(entries[i].uri, corpus.load(entries[i].uri)) for i in idx]
    for ex in examples.suite()[::3][:n_ex]:
        out.append((f"examples/{ex.name}", lower(ex.fn, *ex.args(0))))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", type=int, default=20)
    ap.add_argument("--tries", type=int, default=10, help="tries of each control per program")
    ap.add_argument("--allowance", type=float, default=3.0, help="seconds of timing a try may take")
    ap.add_argument("--gain", type=float, default=0.03, help="the extra work, a fraction of the runtime")
    ap.add_argument("--alpha", type=float, default=0.01)
    ap.add_argument("--min-gain", type=float, default=0.01)
    ap.add_argument("--max-ms", type=float, default=3.0, help="corpus programs up to this runtime")
    ap.add_argument("--dataset", default="corpus",
                    help="corpus (with a third examples) or zoo (its programs alone, up to --max-ms)")
    ap.add_argument("--calibrate-s", type=float, default=1.0, help="seconds of each calibration measurement")
    ap.add_argument("--no-old", action="store_true", help="skip the old rule")
    ap.add_argument("--json", default=None, help="write the per-program results here (after each program)")
    a = ap.parse_args()

    def test() -> SequentialRatioTest:
        return SequentialRatioTest(alpha=a.alpha, min_gain=a.min_gain)

    rows: list[dict] = []
    print(f"load {load()} at start; {a.programs} programs x {a.tries} tries, allowance {a.allowance} s, "
          f"gain {a.gain:.0%}, alpha {a.alpha}, min gain {a.min_gain:.0%}", flush=True)
    head = ("program", "T ms", "extra ratio (95%)", "tries' median", "AA acc", "AA rej", "AA s", "A+w acc", "A+w pairs", "A+w s",
            "old thr", "old AA", "old A+w", "load")
    print(" | ".join(head), flush=True)
    with Worker() as worker:
        for label, prog in programs(a.programs, a.max_ms, a.dataset):
            text = prog.text()
            copy = text + "\n// a separately compiled copy\n"
            row: dict = {"program": label, "load_start": load()}
            try:
                worker.set_inputs(KEY, runtime.random_inputs(prog.in_specs, 0))
                t_a = min(worker.time([text, copy], KEY, TimingPolicy(runs=5, warmup=2))[0].samples)
                extra, size, true_ratio, bounds = calibrate(worker, text, t_a, a.gain, a.calibrate_s)
                row.update(time_s=t_a, size=size, extra_ratio=true_ratio, extra_bounds=bounds)
                aa = [time_until_decided(worker, text, copy, KEY, a.allowance, test=test()) for _ in range(a.tries)]
                aw = [time_until_decided(worker, extra, text, KEY, a.allowance, test=test()) for _ in range(a.tries)]
                row.update(
                    aa=[r.decision.value for r in aa], aa_ratio=[r.ratio for r in aa],
                    aa_s=[r.seconds for r in aa], aw=[r.decision.value for r in aw], aw_ratio=[r.ratio for r in aw],
                    aw_upper=[r.upper for r in aw], aw_pairs=[r.pairs for r in aw], aw_s=[r.seconds for r in aw])
                if not a.no_old:
                    thr = 1.0 - max(0.03, 2.0 * old_noise(worker, text))
                    row.update(old_threshold=thr,
                               old_aa=[old_accepts(worker, text, copy, thr) for _ in range(a.tries)],
                               old_aw=[old_accepts(worker, extra, text, thr) for _ in range(a.tries)])
            except (CandidateError, ValueError) as e:
                row["error"] = str(e)[:200]
                print(f"{label}: {row['error']}", flush=True)
                rows.append(row)
                continue
            row["load_end"] = load()
            rows.append(row)
            n = a.tries
            print(" | ".join([
                label, f"{t_a * 1e3:.3f}", f"{true_ratio:.3f} ({bounds[0]:.3f}-{bounds[1]:.3f})",
                f"{1 / statistics.median(row['aw_ratio']):.3f}",
                f"{row['aa'].count('accept')}/{n}", f"{row['aa'].count('reject')}/{n}",
                f"{statistics.mean(row['aa_s']):.1f}", f"{row['aw'].count('accept')}/{n}",
                f"{statistics.median(row['aw_pairs']):.0f}", f"{statistics.mean(row['aw_s']):.1f}",
                f"{row.get('old_threshold', math.nan):.3f}",
                f"{sum(row.get('old_aa', []))}/{n}" if not a.no_old else "-",
                f"{sum(row.get('old_aw', []))}/{n}" if not a.no_old else "-", row["load_end"]]), flush=True)
            if a.json:
                with open(a.json, "w") as f:
                    json.dump({"args": vars(a), "rows": rows}, f, indent=1)
    ok = [r for r in rows if "error" not in r]
    tries = len(ok) * a.tries
    if not tries:
        print("no program could be timed", file=sys.stderr)
        return 1

    def count(key: str, what) -> int:
        return sum(sum(1 for d in r.get(key, []) if d == what) for r in ok)

    print(f"\ntotals over {len(ok)} programs, {tries} tries per control (load {load()} at end):")
    print(f"  sequential: A vs A accepted {count('aa', 'accept')}/{tries} "
          f"({count('aa', 'accept') / tries:.1%}), rejected {count('aa', 'reject')}, undecided "
          f"{count('aa', 'undecided')}; A+{a.gain:.0%} vs A accepted {count('aw', 'accept')}/{tries} "
          f"({count('aw', 'accept') / tries:.1%})")
    if not a.no_old:
        print(f"  old rule:   A vs A accepted {count('old_aa', True)}/{tries} ({count('old_aa', True) / tries:.1%}); "
              f"A+{a.gain:.0%} vs A accepted {count('old_aw', True)}/{tries} ({count('old_aw', True) / tries:.1%})")
    calibrated = [r["extra_ratio"] for r in ok]
    pooled = [1 / statistics.median(r["aw_ratio"]) for r in ok]
    print(f"  extra work: calibration's ratio median {statistics.median(calibrated):.3f} (range {min(calibrated):.3f}-"
          f"{max(calibrated):.3f}); the tries' median ratio per program, median {statistics.median(pooled):.3f} "
          f"(range {min(pooled):.3f}-{max(pooled):.3f})")
    near = [r for r, p in zip(ok, pooled) if 1 + 0.6 * a.gain <= p <= 1 + 1.5 * a.gain]
    if near:
        k = sum(r["aw"].count("accept") for r in near)
        print(f"  programs whose extra work measured {1 + 0.6 * a.gain:.3f}-{1 + 1.5 * a.gain:.3f} (tries' median): "
              f"{len(near)}; accepted {k}/{len(near) * a.tries} ({k / (len(near) * a.tries):.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
