"""Does the search aim? `optimize_program` on corpus programs with the aiming off and on.

    python benchmarks/aim.py --programs kalman_filter_scan,hmc_logreg_leapfrog --budget 8 [--xla-options]
        [--out /tmp/aim.jsonl]

Variants, run one after the other on each program (their order alternates from program to
program, so a load trend does not favour one):

- `before`: `screen_options=False, hot_first=False`: the strategies as they were (no XLA
  option screen, single rewrites in program order, no hot MCTS seeds);
- `after`: the defaults (option screen when options are offered, hottest sites first).

With `--xla-options` both variants are offered XLA option actions (`shlo-env bench
--xla-options`); without it, only rewrites (the default bench). Each row: the final
independent ratio against jax.jit (1.000 exactly when the original is returned), what was
returned, the candidates evaluated, the strategy and the load average. Every run's record is
appended to `--out` as one JSON line, so runs split over several calls add up.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

from shlo_env import corpus
from shlo_env.search.program_search import SearchOptions, optimize_program

VARIANTS = {"before": {"screen_options": False, "hot_first": False}, "after": {}}


def run(names: list[str], budget: float, xla_options: bool, out: str | None) -> list[dict]:
    rows = []
    for i, name in enumerate(names):
        program = corpus.load(f"corpus/{name}")
        order = list(VARIANTS) if i % 2 == 0 else list(reversed(VARIANTS))
        for variant in order:
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            res = optimize_program(program, SearchOptions(budget_s=budget, xla_options=xla_options,
                                                          strategy_options=VARIANTS[variant], name=name))
            row = {"program": name, "variant": variant, "budget": budget, "xla_options": xla_options,
                   "ratio": res.ratio, "returned": ", ".join(list(res.applied) + list(res.action_tokens)),
                   "candidates": res.candidates_evaluated, "strategy": res.strategy, "threshold": res.threshold,
                   "noise": res.noise, "screen": res.strategy_info.get("option_screen"), "load": load,
                   "seconds": time.perf_counter() - t0, "reason": res.reason}
            rows.append(row)
            print(f"{name:26s} {variant:6s} ratio {res.ratio:.3f} cand {res.candidates_evaluated:3d} "
                  f"{res.strategy:10s} thr {res.threshold:.3f} load {load:4.1f} {row['seconds']:5.1f}s "
                  f"{row['returned'][:80]}", flush=True)
            if out:
                with open(out, "a") as f:
                    f.write(json.dumps(row, default=str) + "\n")
    return rows


def table(rows: list[dict]) -> str:
    """Per program, before and after side by side; geomeans and wins per variant."""
    by = {}
    for r in rows:
        by.setdefault((r["program"], r["budget"], r["xla_options"]), {})[r["variant"]] = r
    lines = ["| program | budget | options | before ratio | after ratio | before candidates | "
             "after candidates | after returned | load |", "|---|---:|---|---:|---:|---:|---:|---|---:|"]
    for (prog, budget, xo), v in by.items():
        b, a = v.get("before"), v.get("after")
        if not (a and b):
            continue
        lines.append(f"| {prog} | {budget:g} | {'yes' if xo else 'no'} | {b['ratio']:.3f} | {a['ratio']:.3f} | "
                     f"{b['candidates']} | {a['candidates']} | {a['returned'] or '(original)'} | "
                     f"{(a['load'] + b['load']) / 2:.1f} |")
    for variant in VARIANTS:
        rs = [r["ratio"] for r in rows if r["variant"] == variant and r["ratio"] > 0]
        if rs:
            geo = math.exp(sum(math.log(x) for x in rs) / len(rs))
            lines.append(f"\n{variant}: {len(rs)} runs, geomean {geo:.3f}, "
                         f"{sum(x < 1 for x in rs)} returned a faster program")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", default="", help="comma-separated corpus names")
    ap.add_argument("--budget", type=float, default=8.0)
    ap.add_argument("--xla-options", action="store_true")
    ap.add_argument("--out", default=None, help="append one JSON line per run here")
    ap.add_argument("--table", default=None, help="only print the table of an --out file")
    args = ap.parse_args(argv)
    if args.table:
        with open(args.table) as f:
            print(table([json.loads(line) for line in f if line.strip()]))
        return 0
    rows = run(args.programs.split(","), args.budget, args.xla_options, args.out)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
