"""strategy="learned" against beam search at the same budget: final ratio and candidates timed.

    python benchmarks/learned_vs_beam.py [--data data/learned-v7] [--split test] [--gain-below 0.97]
                                         [--start 0] [--limit 10] [--corpus 0] [--examples [NAME ...]]
                                         [--budget 10] [--control] [--json out.json]

Programs: the sub-graphs of one split of an exported dataset (by default the test split, which
the shipped model never trained or selected on; `--gain-below 0.97`: only those where the
dataset measured a rewrite faster than that, since on most sub-graphs neither strategy finds
anything), then `--corpus` corpus programs (smallest first), then the example suite
(`--examples` alone: all of it). For each program both strategies search on their own (`optimize_program`, fresh worker
and evaluation cache, `--budget` seconds each, the order alternating program by program; the
worker is started before the budget's clock, as `optimize()`'s warm worker is, unless
`--cold-worker`), and
their results are timed again side by side in one worker request with the original twice
(`benchmarks/strategies.py`'s final timing: median of 3, the original as jax.jit compiles it).
"timed" is the number of side-by-side timings the search ran (`EvaluatorStats.timed`; states
that compiled to an already-timed executable are not counted); "compiled" the compiles without
a run (cost analyses, executable features: the learned strategy's second stage). `--json` appends per-program
rows to that file, so a long comparison can run in short chunks (`--start`, `--limit`).

`--control` runs beam search in both slots (the first labelled "beam_again"), same seed and
budget: how often beam matches its own second run sets what "same or better" can mean on a
program whose search leaves it one or two timings.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from strategies import Found, final_timing, format_table, programs, space_text  # noqa: E402

import numpy as np  # noqa: E402

from shlo_env import corpus
from shlo_env.ir import program as import_  # noqa: E402
from shlo_env.learn import dataset  # noqa: E402
from shlo_env.search.program_search import SearchOptions, optimize_program  # noqa: E402
from shlo_env.execute.worker import Worker  # noqa: E402

_WARM_UP = import_.lower(lambda x: x + 1.0, np.ones((2,), np.float32))

PAIR = (("learned", "learned"), ("beam", "beam"))  # (label, strategy): the first is compared with the second
CONTROL = (("beam_again", "beam"), ("beam", "beam"))


def labels_of(pair) -> list[str]:
    return [label for label, _ in pair]


def split_uris(data: str, split: str, gain_below: float | None) -> list[str]:
    """The split's programs, in order; with `gain_below`, only those where the dataset measured
    a candidate faster than that ratio (where there is something to find)."""
    if split == "none":
        return []
    if gain_below is None:
        return [p["uri"] for p in json.loads((Path(data) / f"{split}.json").read_text())["programs"]]
    sp = dataset.load(data, split)
    return [sp.programs[i]["uri"] for i in range(len(sp))
            if np.min(dataset.label(sp.candidates(i)), initial=np.inf) < gain_below]


def program_list(data: str, split: str, corpus_limit: int, example_names,
                 gain_below: float | None = None) -> list[tuple]:
    """(name, loader) of every program compared, in order."""
    uris = split_uris(data, split, gain_below)
    out = [(uri, lambda uri=uri: corpus.load(uri)) for uri in uris]
    if corpus_limit:  # as benchmarks/strategies.py picks them: smallest first
        entries = sorted(corpus.entries("corpus"), key=lambda e: e.metadata.get("ops_total", 0))
        out += [(e.uri, lambda e=e: corpus.load(e.uri)) for e in entries[:corpus_limit]]
    if example_names is not None:
        out += [(n, ld) for n, ld in programs(example_names, 0)]
    return out


def started_worker(cold: bool) -> Worker:
    """A fresh worker; unless `cold`, already started (its interpreter and jax imported, about
    2 s on this machine) before the budget's clock starts, as `optimize()`'s warm worker is.
    Nothing it compiles for the warm-up is the program's, so neither strategy inherits a cache."""
    w = Worker()
    if not cold:
        w.cost(_WARM_UP.text())
    return w


def compare(uri: str, program, budget: float, runs: int, seed: int, flip: bool, cold: bool = False,
            pair=PAIR) -> dict:
    per, found = {}, {}
    for label, strategy in (pair[::-1] if flip else pair):
        with started_worker(cold) as w:
            r = optimize_program(program, SearchOptions(strategy=strategy, budget_s=budget, seed=seed,
                                                        final_timing=False, cost=False), worker=w)
        if r.status != "ok":
            print(f"  {uri} {label}: failed ({r.error})", file=sys.stderr)
            continue
        per[label], found[label] = r, Found(r.program, r.action_tokens)
    ratios, noise, base, _ = final_timing(program, found, runs) if found else ({}, math.nan, math.nan, 0)
    labels = labels_of(pair)
    return {"uri": uri, "space": next(iter(per.values())).decision_space if per else 0,
            "baseline_ms": base * 1e3, "noise": noise, "load": os.getloadavg()[0], "pair": labels,
            **{f"{s}_ratio": ratios.get(s, math.nan) for s in labels},
            **{f"{s}_timed": per[s].stats.timed if s in per else 0 for s in labels},
            **{f"{s}_compiled": per[s].stats.featured + per[s].stats.costed if s in per else 0 for s in labels},
            **{f"{s}_found": ", ".join(per[s].applied) or "(original)" if s in per else "-" for s in labels}}


def table(rows: list[dict]) -> str:
    a, b = rows[0].get("pair", labels_of(PAIR)) if rows else labels_of(PAIR)
    header = ["program", "space", "jax.jit ms", f"{a} ratio", f"{b} ratio", f"{a} timed", f"{b} timed",
              f"{a} compiled", "noise", "load"]
    body = [[r["uri"].split("/", 1)[-1], space_text(r["space"]), f"{r['baseline_ms']:.3f}",
             f"{r[f'{a}_ratio']:.3f}", f"{r[f'{b}_ratio']:.3f}", str(r[f"{a}_timed"]), str(r[f"{b}_timed"]),
             str(r.get(f"{a}_compiled", "-")), f"{r['noise']:.3f}", f"{r['load']:.1f}"] for r in rows]
    ok = [r for r in rows if math.isfinite(r[f"{a}_ratio"]) and math.isfinite(r[f"{b}_ratio"])]
    geo = {s: math.exp(sum(math.log(r[f"{s}_ratio"]) for r in ok) / len(ok)) if ok else math.nan for s in (a, b)}
    timed = {s: sum(r[f"{s}_timed"] for r in rows) for s in (a, b)}
    compiled = sum(r.get(f"{a}_compiled", 0) for r in rows)
    within = sum(r[f"{a}_ratio"] <= r[f"{b}_ratio"] * (1 + max(r["noise"], 0.03)) for r in ok)
    return (format_table(header, body) + f"\n\n{len(rows)} programs; geomean ratio {a} {geo[a]:.3f}, "
            f"{b} {geo[b]:.3f}; candidates timed {a} {timed[a]}, {b} {timed[b]} "
            f"({timed[a] / max(1, timed[b]):.0%}), {a} compiled without a run {compiled}; {a} same or better than {b} (within "
            f"max(noise, 3 %)) on {within} of {len(ok)}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="data/learned-v7")
    ap.add_argument("--split", default="test", help='the split whose sub-graphs are compared ("none": no sub-graphs)')
    ap.add_argument("--gain-below", type=float, default=None,
                    help="only the split's programs where the dataset measured a candidate below this ratio")
    ap.add_argument("--corpus", type=int, default=0, help="also this many corpus programs (smallest first)")
    ap.add_argument("--examples", nargs="*", default=None, help="also these examples (none named: all)")
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--budget", type=float, default=10.0, help="seconds per (program, strategy)")
    ap.add_argument("--runs", type=int, default=20, help="rounds (at least) in each final side-by-side timing")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cold-worker", action="store_true",
                    help="start each search's worker inside its budget (the runs before 2026-11-25 did)")
    ap.add_argument("--control", action="store_true",
                    help="beam search against a second run of itself (same seed and budget) instead of learned")
    ap.add_argument("--json", default=None, help="append rows here; the table covers every row in the file")
    ap.add_argument("--table-only", action="store_true", help="print the table of the rows in --json")
    args = ap.parse_args(argv)
    rows = json.loads(Path(args.json).read_text()) if args.json and Path(args.json).exists() else []
    pair = CONTROL if args.control else PAIR
    if any(r.get("pair", labels_of(PAIR)) != labels_of(pair) for r in rows):
        ap.error(f"{args.json} holds rows of the other comparison (--control or not): use another file")
    if not args.table_only:
        todo = program_list(args.data, args.split, args.corpus, args.examples, args.gain_below)
        end = len(todo) if args.limit is None else args.start + args.limit
        t0 = time.perf_counter()
        for i, (uri, load) in enumerate(todo[args.start:end], start=args.start):
            row = compare(uri, load(), args.budget, args.runs, args.seed, flip=i % 2 == 1, cold=args.cold_worker,
                          pair=pair)
            a, b = row["pair"]
            print(f"  {uri}: {a} {row[f'{a}_ratio']:.3f} ({row[f'{a}_timed']} timed, "
                  f"{row[f'{a}_compiled']} compiled), {b} "
                  f"{row[f'{b}_ratio']:.3f} ({row[f'{b}_timed']} timed), load {row['load']:.1f}", file=sys.stderr)
            rows = [r for r in rows if r["uri"] != uri] + [row]
            if args.json:
                Path(args.json).write_text(json.dumps(rows, indent=1))
        print(f"{time.perf_counter() - t0:.0f} s", file=sys.stderr)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
