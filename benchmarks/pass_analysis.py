"""XLA pass analysis in the form of the HloEnv paper's Table 1.

For each of about 20 optimization passes of XLA's pipeline (`shlo_env.search.passes`): over a
set of programs, the share whose optimized executable changes when that one pass is disabled,
the share that gets faster (ratio < 0.94) and slower (ratio > 1.06), the share whose outputs
or compile fail with the pass disabled, and the average runtime ratio over the programs it
changes. Ratio = T(pass disabled) / T(default), timed side by side (A, B, A, B, ...) in a
worker process after the outputs were verified against the default compile (REASSOCIATE tier:
passes may reorder float math). A program whose optimized HLO does not change has ratio 1 by
construction (the same executable) and is not timed.

    python benchmarks/pass_analysis.py [--budget 500] [--corpus N] [--passes NAME ...] [--json out.json]

Programs: the example suite, then (when `shlo_env.corpus` is present) corpus programs from the
smallest up, while the time budget lasts; the table says how many were covered. Runs on CPU
within 10 minutes by default (`--budget 500` seconds for the measurements).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

from shlo_env.bench import examples
from shlo_env.execute import runtime
from shlo_env.ir.program import lower
from shlo_env.search import Evaluator
from shlo_env.search.passes import candidate_passes, describe
from shlo_env.execute.worker import CandidateError, Worker
from shlo_env.measure.timing_policy import TimingPolicy

FASTER, SLOWER = 0.94, 1.06  # the paper's thresholds


def programs(corpus_limit: int | None):
    """(name, Program) pairs: the example suite, then corpus programs by size (lazily loaded)."""
    for ex in examples.suite():
        yield f"example/{ex.name}", lambda ex=ex: lower(ex.fn, *ex.args(), name=ex.name)
    if corpus_limit == 0:
        return
    try:
        from shlo_env import corpus
        entries = corpus.entries("corpus")
    except Exception as e:  # noqa: BLE001 - the corpus is optional
        print(f"(no corpus: {e})", file=sys.stderr)
        return
    entries = sorted(entries, key=lambda e: e.metadata.get("ops_total", e.metadata.get("ops", 0)))
    for e in entries[:corpus_limit]:
        yield e.uri, lambda e=e: corpus.load(e.uri)


def analyze(budget_s: float = 500.0, passes=None, corpus_limit: int | None = None, runs: int = 10,
            verbose: bool = True) -> dict:
    passes = list(passes or candidate_passes())
    t0 = time.perf_counter()
    deadline = t0 + budget_s
    results: dict[str, dict[str, dict]] = {}  # program -> pass -> {changed, ratio, error}
    skipped = []
    with Worker(timeout_s=120) as worker:
        for name, load in programs(corpus_limit):
            if time.perf_counter() > deadline:
                skipped.append(name)
                continue
            try:
                program = load()
            except Exception as e:  # noqa: BLE001
                print(f"  {name}: cannot load ({e})", file=sys.stderr)
                continue
            row: dict[str, dict] = {}
            ev = Evaluator(program, worker=worker, num_random=1, timing=TimingPolicy(runs=runs, min_seconds=0.1),
                           hard_deadline=deadline + 60)
            try:
                base = ev.optimized_hlo(program)
            except CandidateError as e:
                print(f"  {name}: the default compile fails ({e})", file=sys.stderr)
                continue
            t_prog = time.perf_counter()
            for p in passes:
                if time.perf_counter() > deadline:
                    break
                try:
                    changed = ev.optimized_hlo(program, (p,)) != base
                except CandidateError as e:
                    row[p] = {"changed": True, "ratio": math.nan, "error": f"{e.kind}: {e.message[:80]}"}
                    continue
                if not changed:
                    row[p] = {"changed": False, "ratio": 1.0, "error": ""}
                    continue
                e = ev.evaluate(program, passes=(p,))
                row[p] = {"changed": True, "ratio": e.ratio if e.ok else math.nan,
                          "error": "" if e.ok else e.error[:80]}
            if len(row) < len(passes):
                skipped.append(name)
                continue  # cut off by the budget: leave it out rather than count it half
            results[name] = row
            if verbose:
                marks = "".join("." if not r["changed"] else ("E" if r["error"] else
                                ("+" if r["ratio"] < FASTER else "-" if r["ratio"] > SLOWER else "c"))
                                for r in row.values())
                print(f"  {name:45s} {marks}  ({time.perf_counter() - t_prog:.1f} s)", file=sys.stderr, flush=True)
    return {"passes": passes, "results": results, "skipped": skipped, "seconds": time.perf_counter() - t0}


def table(data: dict) -> tuple[list[str], list[list[str]]]:
    results = data["results"]
    n = len(results)
    header = ["pass", "what it does", "changed", "improved (<0.94)", "degraded (>1.06)", "failed",
              "avg ratio (changed)", "geomean (changed)"]
    rows = []
    for p in data["passes"]:
        cells = [r[p] for r in results.values() if p in r]
        changed = [c for c in cells if c["changed"]]
        ok = [c["ratio"] for c in changed if not c["error"] and not math.isnan(c["ratio"])]
        improved = sum(r < FASTER for r in ok)
        degraded = sum(r > SLOWER for r in ok)
        failed = sum(bool(c["error"]) for c in changed)
        pct = lambda k: f"{100.0 * k / n:5.1f}%" if n else "-"  # noqa: E731
        avg = f"{sum(ok) / len(ok):.3f}" if ok else "-"
        geo = f"{math.exp(sum(math.log(r) for r in ok) / len(ok)):.3f}" if ok else "-"
        rows.append([p, describe(p), pct(len(changed)), pct(improved), pct(degraded), pct(failed), avg, geo])
    return header, rows


def format_table(header, rows) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(header), sep] + [line(r) for r in rows])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=500.0, help="seconds for the measurements (default 500)")
    ap.add_argument("--corpus", type=int, default=None, help="at most this many corpus programs (default: "
                    "as many as the budget allows; 0: none)")
    ap.add_argument("--passes", nargs="*", default=None, help="pass names (default: the platform's candidates)")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--json", default=None, help="also write the raw results here")
    args = ap.parse_args(argv)
    load0 = os.getloadavg()
    print(f"pass analysis on {runtime.platform()} ({os.cpu_count()} CPUs, load average "
          f"{load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}); budget {args.budget:.0f} s", file=sys.stderr)
    data = analyze(args.budget, args.passes, args.corpus, args.runs)
    load1 = os.getloadavg()
    header, rows = table(data)
    n = len(data["results"])
    n_ex = sum(k.startswith("example/") for k in data["results"])
    print(f"\nXLA pass analysis (HloEnv Table 1 form): {n} programs ({n_ex} examples, {n - n_ex} corpus), "
          f"{len(data['passes'])} passes, platform {runtime.platform()}, {data['seconds']:.0f} s; "
          f"load average {load0[0]:.2f} at start, {load1[0]:.2f} at end on {os.cpu_count()} CPUs")
    print("changed = the optimized HLO differs with the pass disabled; ratios timed side by side only "
          "for changed programs (unchanged: ratio 1 by construction); failed = wrong outputs or compile/run error\n")
    print(format_table(header, rows))
    if data["skipped"]:
        print(f"\nnot covered within the budget: {len(data['skipped'])} programs ({', '.join(data['skipped'][:5])}"
              + (", ..." if len(data["skipped"]) > 5 else "") + ")")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(data, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
