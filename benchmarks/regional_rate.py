"""Candidates evaluated per minute, region and whole, by the regional strategy against another
(default: what "auto" picks) on large zoo programs (issue 31: at least 100 a minute at 2k+ ops).

    python benchmarks/regional_rate.py [--programs NAME ...] [--min-ops 2000] [--limit 3]
                                       [--budget 60] [--strategies auto regional] [--json out.json]

Each (program, strategy) is one `optimize_program` call with a fresh worker. Candidates: the
evaluator's whole-program evaluations (verified, then timed) plus, for `regional`, the region
candidates it judged (controls not counted). Per minute: over the search phase's seconds.
The ratio is the runner's final side-by-side measurement (1.0 when the original is kept).
"""

from __future__ import annotations

import argparse
import json
import os
import time

from shlo_env import zoo
from shlo_env.search.program_search import SearchOptions, optimize_program


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", nargs="*", default=None)
    ap.add_argument("--min-ops", type=int, default=2000)
    ap.add_argument("--limit", type=int, default=3, help="this many programs (smallest first) when --programs is not given")
    ap.add_argument("--budget", type=float, default=60.0)
    ap.add_argument("--strategies", nargs="*", default=["auto", "regional"])
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    entries = {e.name: e for e in zoo.entries()}
    names = args.programs or [e.name for e in sorted(entries.values(), key=lambda e: e.metadata["ops"])
                              if e.metadata["ops"] >= args.min_ops][:args.limit]
    print(f"load at start: {os.getloadavg()}")
    print("| program | ops | strategy | region cands | whole cands | search s | per min | wall s | ratio | taken |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for name in names:
        program = zoo.load(name)
        for strat in args.strategies:
            t = time.perf_counter()
            res = optimize_program(program, SearchOptions(strategy=strat, budget_s=args.budget))
            wall = time.perf_counter() - t
            info = res.strategy_info or {}
            region_c = int(info.get("region_candidates", 0))
            whole_c = int(res.candidates_evaluated)
            per_min = 60 * (region_c + whole_c) / res.search_s if res.search_s else float("nan")
            taken = "original" if res.returned_original else ", ".join(res.applied)[:60]
            row = dict(program=name, ops=program.num_ops(), strategy=res.strategy, region=region_c, whole=whole_c,
                       search_s=res.search_s, per_min=per_min, wall_s=wall, ratio=res.ratio, taken=taken,
                       info={k: v for k, v in info.items() if k != "taken"}, load=os.getloadavg()[0])
            rows.append(row)
            print(f"| {name} | {row['ops']} | {res.strategy} | {region_c} | {whole_c} | {res.search_s:.1f} | "
                  f"{per_min:.1f} | {wall:.1f} | {res.ratio:.3f} | {taken} |", flush=True)
    print(f"load at end: {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1, default=str)


if __name__ == "__main__":
    main()
