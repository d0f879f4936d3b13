"""Does a candidate's region ratio predict its whole-program ratio, and how many more candidates
a minute does judging on the region allow? (issue 31, item 3)

    python benchmarks/region_vs_whole.py [--programs optax_lamb,linen_cnn_train] [--sites 8]
    python benchmarks/region_vs_whole.py --dataset zoo --limit 4     # any `shlo-env bench` dataset

Per program: augment, profile `region.baseline` once, bound every site (`region.site_bounds`),
keep the sites above the negligible share, and take `--sites` of them (half the highest bounds,
half a seeded random draw of the rest), each with its first alternative: single-site candidates.
Then each candidate is judged twice, both in one `Worker`:

- region: cut (`region.cut_regions`), inputs from the original at the region's boundary (one
  compile of the whole program with the boundaries as extra outputs, shared by the program's
  regions), region-before against region-after side by side (`region.REGION_TIMING`);
  predicted whole ratio = 1 - share x (1 - region ratio);
- whole: `driver.apply` of that one choice, compiled and timed side by side with the original
  (`timing.SEARCH`, the search's policy).

Neither side verifies (the search does that for both alike). Prints one row per candidate,
the rank correlations (Spearman, Kendall) of predicted against measured over all candidates,
and candidates per minute of each kind (the profile and augment, paid once per program, are
listed apart).
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import random
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
from scipy import stats

from shlo_env import corpus
from shlo_env.rewrite import driver
from shlo_env.rewrite import region_cut
from shlo_env.measure import region_inputs, region_timing
from shlo_env.execute import runtime  # noqa: E402
from shlo_env.measure.kernel_profile import profile_program  # noqa: E402
from shlo_env.measure.timing_policy import SEARCH, TimingPolicy  # noqa: E402
from shlo_env.execute.worker import Worker  # noqa: E402

#: the reference whole ratio: the median of `--repeats` longer timings than the search's
REFERENCE = TimingPolicy(min_seconds=0.5)
DEFAULT_PROGRAMS = "optax_lamb,pinn_burgers_train,linen_bn_dropout_train,linen_cnn_train,linen_transformer_lm"


def _programs(args) -> list[tuple[str, object]]:
    if args.dataset == "corpus":
        return [(name, corpus.load(f"corpus/{name}")) for name in args.programs.split(",") if name]
    from shlo_env.bench.datasets import load_items

    return [(item.name, item.program) for item in load_items(args.dataset, args.limit, args.seed)]


def _pick_sites(bounds: dict[int, float], n: int, seed: int) -> list[int]:
    kept = region_cut.skip_negligible(bounds)
    top = kept[: (n + 1) // 2]
    rest = kept[len(top):]
    return top + random.Random(seed).sample(rest, min(len(rest), n - len(top)))


def run_program(name: str, program, worker: Worker, n_sites: int, seed: int, repeats: int = 4) -> tuple[list[dict], dict]:
    t0 = time.perf_counter()
    aug = driver.augment(program)
    t_aug = time.perf_counter() - t0
    t0 = time.perf_counter()
    prof = profile_program(region_cut.baseline(aug), runs=5, patterns=())
    t_prof = time.perf_counter() - t0
    bounds = region_cut.site_bounds(prof, aug)
    sites = _pick_sites(bounds, n_sites, seed)
    info = {"program": name, "ops": program.num_ops(), "sites": len(bounds),
            "above_negligible": len(region_cut.skip_negligible(bounds)), "augment_s": t_aug, "profile_s": t_prof}
    if not sites:
        return [], info | {"region_s": 0.0, "boundary_s": 0.0, "whole_s": 0.0, "base_s": 0.0, "n": 0, "fallbacks": 0}

    # region side: the boundary values are computed once per program (one whole compile)
    t0 = time.perf_counter()
    regions = region_cut.cut_regions(aug, sites, prof)
    t_cut = time.perf_counter() - t0
    t0 = time.perf_counter()
    inputs = region_inputs.boundary_inputs(worker, aug, regions)
    t_boundary = time.perf_counter() - t0
    t0 = time.perf_counter()
    cands = [region_cut.Candidate(r, {s: 1}) for r, s in zip(regions, sites)]
    results = region_timing.evaluate_regions(worker, cands, inputs=inputs)
    t_region = t_cut + time.perf_counter() - t0

    # whole side: the original is compiled once per program
    t0 = time.perf_counter()
    worker.set_inputs("whole", runtime.random_inputs(program.in_specs, seed))
    base = driver.strip(aug).text()
    worker.run(base, "whole")
    t_base = time.perf_counter() - t0
    rows = []
    t_whole = 0.0
    for s, r, res in zip(sites, regions, results):
        whole = math.nan
        again: list[float] = []
        paired: list[float] = []  # median per-call ratios of the same reference timings
        t0 = time.perf_counter()
        try:
            text = driver.apply(aug, {s: 1}).text()
            worker.run(text, "whole")
            tb, ta = worker.time([base, text], "whole", SEARCH)
            whole = ta.full / tb.full
            t_whole += time.perf_counter() - t0
            for _ in range(repeats - 1):  # a steadier reference, not counted as a search's cost
                tb, ta = worker.time([base, text], "whole", REFERENCE)
                again.append(ta.full / tb.full)
                paired.append(runtime.median_ratio(tb.samples, ta.samples))
        except Exception as e:  # noqa: BLE001 - a candidate that fails is a row, not a crash
            print(f"{name} site {s}: whole failed: {e}", file=sys.stderr)
        rows.append({"program": name, "site": s, "pattern": r.labels[s][1], "bound": bounds[s],
                     "region_ops": r.before().num_ops(), "whole": r.whole, "reason": r.reason, "in_body": r.in_body, "share": r.share,
                     "region_ratio": res.ratio, "predicted": res.predicted,
                     "predicted_t": res.predicted_from_time(prof.wall_s) if not res.error else math.nan,
                     "once": whole, "wholes": [whole] + again,
                     "measured": float(np.median(again)) if again else whole,
                     "measured_paired": float(np.median(paired)) if paired else math.nan,
                     "predicted_paired": (1 - r.share * (1 - res.median_ratio)) if r.share is not None else math.nan,
                     "region_ms": res.before_s * 1e3, "compile_s": res.compile_s, "error": res.error})
    return rows, info | {"region_s": t_region, "boundary_s": t_boundary, "whole_s": t_whole, "base_s": t_base,
                         "n": len(sites), "fallbacks": sum(r.whole for r in regions)}


def _fmt(x, spec=".3f") -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def _rank(rows: list[dict], pred: str, meas: str = "measured") -> str:
    ok = [r for r in rows if r[pred] is not None and not math.isnan(r[pred]) and not math.isnan(r[meas])]
    if len(ok) < 3:
        return f"— (n={len(ok)})"
    rho, p_rho = stats.spearmanr([r[pred] for r in ok], [r[meas] for r in ok])
    tau, p_tau = stats.kendalltau([r[pred] for r in ok], [r[meas] for r in ok])
    return f"Spearman {rho:.2f} (p={p_rho:.2f}), Kendall {tau:.2f} (p={p_tau:.2f}), n={len(ok)}"


def _per_min(n: float, seconds: float) -> str:
    return _fmt(60 * n / seconds, ".0f") if seconds else "—"


def report(rows: list[dict], infos: list[dict], load: str, repeats: int) -> str:
    out = [f"load at start: {load}", "",
           "| program | site | pattern | bound | region ops | share | region ratio | predicted (share) | "
           f"predicted (time) | whole, search timing | whole, median of {repeats - 1} |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ops = f"{r['region_ops']} (whole: {r['reason']})" if r["whole"] else \
            f"{r['region_ops']}{' (loop body)' if r['in_body'] else ''}"
        out.append(f"| {r['program']} | {r['site']} | {r['pattern']} | {r['bound']:.1%} | {ops} | "
                   f"{_fmt(r['share'], '.1%')} | {_fmt(r['region_ratio'])} | {_fmt(r['predicted'])} | "
                   f"{_fmt(r['predicted_t'])} | {_fmt(r['once'])} | {_fmt(r['measured'])} |")
    cut = [r for r in rows if not r["whole"]]
    out += ["", f"Rank correlation with the whole ratio (median of {repeats - 1} timings):", "",
            f"- predicted (share), all candidates: {_rank(rows, 'predicted')}",
            f"- predicted (share), cut regions only: {_rank(cut, 'predicted')}",
            f"- predicted (time), all candidates: {_rank(rows, 'predicted_t')}",
            f"- region ratio alone, cut regions only: {_rank(cut, 'region_ratio')}",
            f"- predicted (share) from paired median ratios on both sides: "
            f"{_rank(rows, 'predicted_paired', 'measured_paired')}",
            f"- for scale, the search's own whole timing: {_rank(rows, 'once')}",
            f"- for scale, whole against whole where the region fell back to the whole program: "
            f"{_rank([r for r in rows if r['whole']], 'region_ratio')}"]
    big = [r for r in rows if r["predicted"] is not None and not math.isnan(r["measured"])
           and (abs(r["measured"] - 1) > 0.03 or abs(r["predicted"] - 1) > 0.03)]
    agree = sum((r["predicted"] < 1) == (r["measured"] < 1) for r in big)
    out.append(f"- same side of 1 where either moved more than 3 %: {agree} of {len(big)}")
    out += ["", "| program | ops | sites (≥ 0.5 %) | candidates (whole fallbacks) | augment s | profile s | "
            "region: boundary s, candidates s | region per min (with boundary) | whole: original s, candidates s | "
            "whole per min (with original) |", "|---|---|---|---|---|---|---|---|---|---|"]
    tot: dict[str, float] = collections.defaultdict(float)
    for i in infos:
        for k in ("n", "region_s", "boundary_s", "whole_s", "base_s"):
            tot[k] += i[k]
        out.append(f"| {i['program']} | {i['ops']} | {i['above_negligible']} of {i['sites']} | {i['n']} "
                   f"({i['fallbacks']}) | {i['augment_s']:.1f} | {i['profile_s']:.1f} | {i['boundary_s']:.1f}, "
                   f"{i['region_s']:.1f} | {_per_min(i['n'], i['region_s'])} "
                   f"({_per_min(i['n'], i['region_s'] + i['boundary_s'])}) | {i['base_s']:.1f}, {i['whole_s']:.1f} | "
                   f"{_per_min(i['n'], i['whole_s'])} ({_per_min(i['n'], i['whole_s'] + i['base_s'])}) |")
    out.append(f"| all | | | {tot['n']:.0f} | | | {tot['boundary_s']:.1f}, {tot['region_s']:.1f} | "
               f"{_per_min(tot['n'], tot['region_s'])} ({_per_min(tot['n'], tot['region_s'] + tot['boundary_s'])}) | "
               f"{tot['base_s']:.1f}, {tot['whole_s']:.1f} | {_per_min(tot['n'], tot['whole_s'])} "
               f"({_per_min(tot['n'], tot['whole_s'] + tot['base_s'])}) |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="corpus", help="corpus (with --programs) or any `shlo-env bench` dataset")
    ap.add_argument("--programs", default=DEFAULT_PROGRAMS, help="corpus program names, comma-separated")
    ap.add_argument("--limit", type=int, default=None, help="programs of a non-corpus dataset (seeded sample)")
    ap.add_argument("--sites", type=int, default=8, help="single-site candidates per program")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=4, help="whole timings per candidate: the search's, "
                    "then the reference ones")
    args = ap.parse_args(argv)
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    rows, infos = [], []
    with Worker() as worker:
        for name, program in _programs(args):
            print(f"{name} ...", file=sys.stderr, flush=True)
            try:
                r, info = run_program(name, program, worker, args.sites, args.seed, args.repeats)
            except Exception as e:  # noqa: BLE001 - one program's failure must not stop the others
                print(f"{name}: {type(e).__name__}: {e}", file=sys.stderr)
                continue
            rows += r
            infos.append(info)
    print(report(rows, infos, load, args.repeats))
    print(f"load at end: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
