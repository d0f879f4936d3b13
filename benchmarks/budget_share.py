"""Where a search's budget goes: seconds per phase and the share spent on candidates.

    python benchmarks/budget_share.py --dataset zoo --budgets 30,60 [--limit N] [--min-ops 1000]
    python benchmarks/budget_share.py --dataset lm --budgets 30     # the plain-JAX LM train step

For each program and budget, `optimize_program` runs once (the strategy "auto", a warm worker
shared across programs as `optimize` and the bench use) and the table gives the seconds of each
phase (`ProgramResult.phases`, from the one `Schedule`), the seconds spent evaluating candidates
(whole programs verified and timed, and regions judged) as a share of the budget, and the number
of candidates. The summary counts the programs that spent at least `--target` of the budget on
candidates among those whose original compiles and runs once in 10 % of the budget (the probe),
and names those below it whose search ran out of candidates rather than time (marked "ended
early": the search phase's `ended`, more than `schedule.ENDED_EARLY` of the budget left).
Check the load average first: phases stretch under load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from shlo_env.bench.datasets import load_items
from shlo_env.execute.worker import Worker
from shlo_env.search.program_search import PHASES, SearchOptions, optimize_program

COLUMNS = [name for name, _ in PHASES if name not in ("reference", "cost")]


def lm_items():
    """The plain-JAX 6-layer LM train step of `benchmarks/budget_keeping.py` (about 2.3k ops)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from budget_keeping import PROGRAMS  # noqa: PLC0415 - a sibling benchmark's program builder

    from shlo_env.ir.program import lower

    fn, args = PROGRAMS["lm_small"]()
    return [("lm_small", lower(fn, *args, name="lm_small"))]


def rows(dataset: str, limit: int | None, min_ops: int):
    if dataset == "lm":
        return lm_items()
    items = load_items(dataset, limit=None)
    items = [it for it in items if it.program.num_ops() >= min_ops]
    if limit is not None:
        items = items[:limit]
    return [(it.name, it.program) for it in items]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="zoo", help="zoo, corpus, science, examples, or lm")
    ap.add_argument("--budgets", default="30,60")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--min-ops", type=int, default=0)
    ap.add_argument("--strategy", default="auto")
    ap.add_argument("--target", type=float, default=0.6, help="share of the budget on candidates")
    a = ap.parse_args()
    budgets = [float(b) for b in a.budgets.split(",")]
    programs = rows(a.dataset, a.limit, a.min_ops)
    print(f"# {a.dataset}: {len(programs)} programs, budgets {a.budgets}, load {os.getloadavg()}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print("| program | ops | budget | " + " | ".join(COLUMNS) + " | candidates s | share | count | ratio |")
    print("|---|---:|---:|" + "---:|" * len(COLUMNS) + "---:|---:|---:|---:|")
    shares: dict[float, list[float]] = {b: [] for b in budgets}
    ended: dict[float, list[str]] = {b: [] for b in budgets}
    with Worker() as worker:
        for name, program in programs:
            for budget in budgets:
                res = optimize_program(program, SearchOptions(strategy=a.strategy, budget_s=budget), worker=worker)
                spent = {p["name"]: p["spent_s"] for p in res.phases}
                share = res.candidate_s / budget
                count = res.candidates_evaluated + int(res.strategy_info.get("region_candidates") or 0)
                eligible = spent.get("probe", budget) <= 0.1 * budget and res.status == "ok"
                early = next((p.get("ended", "") for p in res.phases if p["name"] == "search"), "")
                if eligible:
                    shares[budget].append(share)
                    if early and share < a.target:
                        ended[budget].append(name)
                cells = " | ".join(f"{spent.get(c, 0.0):.1f}" for c in COLUMNS)
                mark = ("" if eligible else " (slow probe)") + (" (ended early)" if early else "")
                print(f"| {name}{mark} | {program.num_ops()} | {budget:.0f} | {cells} | "
                      f"{res.candidate_s:.1f} | {share:.0%} | {count} | {res.ratio:.3f} |",
                      flush=True)
    print(f"\nload {os.getloadavg()}")
    for budget, values in shares.items():
        if values:
            hit = sum(v >= a.target for v in values)
            print(f"budget {budget:.0f}: {hit} of {len(values)} programs spent >= {a.target:.0%} on candidates; "
                  f"median share {statistics.median(values):.0%}, lowest {min(values):.0%}"
                  + (f"; below it and out of candidates: {', '.join(ended[budget])}" if ended[budget] else ""))


if __name__ == "__main__":
    main()
