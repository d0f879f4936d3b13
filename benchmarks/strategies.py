"""Search strategies compared on the example suite: the ratio each finds against jax.jit.

    python benchmarks/strategies.py [--budget 30] [--strategies pick-first beam mcts cost-model random]
                                    [--examples NAME ...] [--corpus N] [--passes] [--json out.json]

For every program, each strategy searches on its own (a fresh worker process and a fresh
evaluation cache, `--budget` seconds). Its *result* is what `optimize` would keep: the best
verified state if it beat the noise threshold in the search and again on a confirming re-time,
else the original. The results are then timed again, all of them side by side in one worker
request together with the original twice (A, B, C, ..., A', interleaved, at least `--runs`
rounds and 1 s), three times: ratio = median of T(result) / T(original), where the original
is compiled exactly as jax.jit compiles it, and the median |1 - T(A')/T(A)| is the noise of
that measurement. Results that compile to the same executable share one measurement; a
strategy whose result is the original (or compiles to the original's executable) has ratio 1.

Acceptance (issue 3): beam and f-MCTS find a result at least as fast as pick-first on every
program, within noise: ratio(beam) <= ratio(pick-first) * (1 + tol), tol = max(noise, 0.06).
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import sys
import time

from shlo_env.bench import examples
from shlo_env.execute import runtime
from shlo_env.ir.program import lower
from shlo_env.search.program_search import SearchOptions, optimize_program
from shlo_env.execute.worker import Worker
from shlo_env.measure.timing_policy import TimingPolicy

DEFAULT = ["pick-first", "beam", "mcts", "cost-model", "random"]
Found = collections.namedtuple("Found", "program passes")  # what a strategy's search returned


def programs(names, corpus_limit):
    for ex in examples.suite(names):
        yield ex.name, lambda ex=ex: lower(ex.fn, *ex.args(), name=ex.name)
    if corpus_limit:
        from shlo_env import corpus

        entries = sorted(corpus.entries("corpus"), key=lambda e: e.metadata.get("ops_total", 0))
        for e in entries[:corpus_limit]:
            yield e.uri, lambda e=e: corpus.load(e.uri)


def final_timing(program, found: dict, runs: int, repeats: int = 3):
    """Time the original (twice) and every distinct found executable side by side in one
    request, `repeats` times; each ratio is the median over the repeats. States that compile
    to the same executable (XLA redid or undid the difference) share one measurement, and a
    strategy whose result is the original gets ratio 1 exactly: it returns jax.jit itself."""
    import xxhash

    with Worker(timeout_s=300) as w:
        w.set_inputs("t", runtime.random_inputs(program.in_specs, 0) if program.example_args is None
                     else list(program.example_args))
        groups: dict[str, list[str]] = {}  # executable fingerprint -> strategies
        texts: dict[str, tuple] = {}
        base_fp = xxhash.xxh3_64_hexdigest(w.optimized_hlo(program.text()).encode())
        for name, ev in found.items():
            chosen = ev.program or program  # the original's evaluation carries no program of its own
            fp = xxhash.xxh3_64_hexdigest(w.optimized_hlo(chosen.text(), ev.passes).encode())
            if fp == base_fp:
                fp = "original"
            groups.setdefault(fp, []).append(name)
            texts[fp] = (chosen.text(), ev.passes)
        order = [fp for fp in groups if fp != "original"]
        items = [(program.text(), ())] + [texts[fp] for fp in order] + [(program.text(), ())]
        ratios: dict[str, list[float]] = {fp: [] for fp in order}
        noises = []
        for _ in range(repeats):
            timings = w.time_each(items, "t", TimingPolicy(runs=runs, warmup=3, min_seconds=1.0))
            base = timings[0].full
            noises.append(abs(1.0 - timings[-1].full / base))
            for fp, t in zip(order, timings[1:-1]):
                ratios[fp].append(t.full / base)
    median = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
    out = {}
    for fp, names in groups.items():
        for name in names:
            out[name] = 1.0 if fp == "original" else median(ratios[fp])
    return out, median(noises), base, len(order)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=30.0, help="seconds per (program, strategy)")
    ap.add_argument("--strategies", nargs="*", default=DEFAULT)
    ap.add_argument("--examples", nargs="*", default=None)
    ap.add_argument("--corpus", type=int, default=0, help="also this many corpus programs (smallest first)")
    ap.add_argument("--passes", action="store_true", help="let the searches disable XLA passes too")
    ap.add_argument("--runs", type=int, default=30, help="rounds (at least) in each final side-by-side timing")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    load0 = os.getloadavg()
    print(f"strategies {', '.join(args.strategies)}; budget {args.budget:.0f} s each; platform {runtime.platform()}; "
          f"load average {load0[0]:.2f} on {os.cpu_count()} CPUs", file=sys.stderr)
    rows, raw = [], {}
    search_stats = {s: {"evaluated": 0, "hits": 0, "timed": 0, "reused": 0, "seconds": 0.0} for s in args.strategies}
    for name, load in programs(args.examples, args.corpus):
        program = load()
        found, per = {}, {}
        for s in args.strategies:
            r = optimize_program(program, SearchOptions(strategy=s, budget_s=args.budget, passes=args.passes,
                                                        seed=args.seed, final_timing=False, cost=False))
            if r.status != "ok":
                print(f"  {name} {s}: failed ({r.error})", file=sys.stderr)
                continue
            found[s] = Found(r.program, r.action_tokens)
            per[s] = r
            st = search_stats[s]
            st["evaluated"] += r.stats.evaluated
            st["hits"] += r.stats.cache_hits
            st["timed"] += r.stats.timed
            st["reused"] += r.stats.executable_hits
            st["seconds"] += r.total_s
            kept = "original" if r.returned_original else "kept    "
            best = r.search_best
            print(f"  {name:22s} {s:11s} search ratio {best.ratio:6.3f} (confirm {r.confirm_ratio:6.3f}, "
                  f"threshold {r.threshold:.3f}: {kept}) {best.describe()[:60]:60s} "
                  f"{r.stats.evaluated:3d} eval {r.stats.cache_hits:3d} hits ({r.stats.hit_rate:4.0%}) "
                  f"{r.total_s:5.1f} s", file=sys.stderr, flush=True)
        ratios, noise, base, executables = final_timing(program, found, args.runs)
        space = next(iter(per.values())).decision_space if per else 1
        tol = max(noise, 0.06)
        pf = ratios.get("pick-first")
        verdict = []
        for s in ("beam", "mcts"):
            if s in ratios and pf is not None:
                verdict.append("ok" if ratios[s] <= pf * (1 + tol) else "SLOWER")
        rows.append([name, space_text(space), f"{base * 1e3:.3f}"] + [f"{ratios[s]:.3f}" if s in ratios else "-" for s in args.strategies]
                    + [f"{noise:.3f}", "/".join(verdict)])
        raw[name] = {"space": space, "baseline_ms": base * 1e3, "noise": noise, "ratios": ratios,
                     "found": {s: ", ".join(list(per[s].applied) + [f"-{p}" for p in per[s].disabled_passes])
                               or "(original)" for s in per},
                     "best": {s: per[s].search_best.describe() for s in per},
                     "search": {s: {"search_ratio": per[s].search_best.ratio, "confirmed_ratio": per[s].confirm_ratio,
                                    "threshold": per[s].threshold, "evaluated": per[s].stats.evaluated,
                                    "cache_hits": per[s].stats.cache_hits, "hit_rate": per[s].stats.hit_rate,
                                    "timed": per[s].stats.timed, "reused": per[s].stats.executable_hits,
                                    "seconds": per[s].total_s, "info": per[s].strategy_info} for s in per}}
    header = ["program", "space", "jax.jit ms"] + args.strategies + ["noise", "beam/mcts vs pick-first"]
    load1 = os.getloadavg()
    print(f"\nratio = T(result) / T(original as jax.jit compiles it), all results timed side by side in one "
          f"worker request (>= {args.runs} rounds and 1 s, median of 3); 1.000 = jax.jit returned; lower is faster. Budget {args.budget:.0f} s per "
          f"search{', XLA passes as actions' if args.passes else ''}. Load average {load0[0]:.2f} at start, "
          f"{load1[0]:.2f} at end on {os.cpu_count()} CPUs; {time.perf_counter() - t0:.0f} s total.\n")
    print(format_table(header, rows))
    geo = {}
    for i, s in enumerate(args.strategies):
        vals = [float(r[3 + i]) for r in rows if r[3 + i] != "-"]
        geo[s] = math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else math.nan
    print("\ngeomean ratio: " + ", ".join(f"{s} {geo[s]:.3f}" for s in args.strategies))
    print("\nsearch effort (all programs):")
    print(format_table(["strategy", "states evaluated", "cache hits", "hit rate", "timed", "timings reused",
                        "search s"],
                       [[s, str(v["evaluated"]), str(v["hits"]),
                         f"{v['hits'] / max(1, v['hits'] + v['evaluated']):.0%}", str(v["timed"]), str(v["reused"]),
                         f"{v['seconds']:.0f}"] for s, v in search_stats.items()]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(raw, f, indent=1, default=str)
    return 0


def space_text(n: int) -> str:
    """A decision-space size for a table: exact up to a million, else like 1.5e29 (exact
    integers, which may be beyond a float's range)."""
    digits = str(n)
    return digits if n < 10**6 else f"{digits[0]}.{digits[1]}e{len(digits) - 1}"


def format_table(header, rows) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(header), sep] + [line(r) for r in rows])


if __name__ == "__main__":
    sys.exit(main())
