"""Where a search candidate's time goes, and candidates per second, on a sample of the corpus.

    python benchmarks/candidate_time.py [--programs a,b,c] [--budget 20] [--strategy beam]

Runs `optimize_program` on each program with a worker wrapped in a stopwatch that sorts every
worker request by what it is for: verifying a candidate (the first run of a new text includes
its compile), the float64 reference (compile + run of the widened original), the noise
measurement (the original against itself), timing candidates side by side, and fingerprints
(optimized HLO, to reuse timings of identical executables). The rest of the search time is
spent in this process (augment, apply, DAG hash). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time

from shlo_env import corpus
from shlo_env.search.runner import SearchOptions, optimize_program
from shlo_env.worker import Worker

DEFAULT_PROGRAMS = "linen_mlp_train,nnx_gru_train,attn_rope_causal_mha,optax_adamw_schedule,kalman_filter_scan"
KINDS = ("worker start + original compile + noise", "verify: compile+run", "verify: run", "float64 reference",
         "timing", "fingerprint", "other")


class StopwatchWorker:
    """A Worker whose requests are timed and sorted by purpose (see the module docstring)."""

    def __init__(self, worker: Worker):
        self._w = worker
        self.seconds: collections.Counter = collections.Counter()
        self.calls: collections.Counter = collections.Counter()
        self._seen: set = set()

    def __getattr__(self, name):
        return getattr(self._w, name)

    def _timed(self, kind, fn, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self.seconds[kind] += time.perf_counter() - t0
            self.calls[kind] += 1

    def run(self, text, input_key, disabled_passes=(), timeout_s=None):
        key = (text, tuple(disabled_passes))
        kind = "verify: run" if key in self._seen else "verify: compile+run"
        self._seen.add(key)
        return self._timed(kind, self._w.run, text, input_key, disabled_passes, timeout_s=timeout_s)

    def reference(self, *args, **kwargs):
        return self._timed("float64 reference", self._w.reference, *args, **kwargs)

    def time(self, texts, *args, **kwargs):
        kind = "worker start + original compile + noise" if len(set(texts)) == 1 else "timing"
        return self._timed(kind, self._w.time, texts, *args, **kwargs)

    def time_each(self, *args, **kwargs):
        return self._timed("timing", self._w.time_each, *args, **kwargs)

    def optimized_hlo(self, *args, **kwargs):
        return self._timed("fingerprint", self._w.optimized_hlo, *args, **kwargs)

    def cost(self, *args, **kwargs):
        return self._timed("other", self._w.cost, *args, **kwargs)


def measure(names: list[str], budget_s: float, strategy: str) -> list[dict]:
    rows = []
    for name in names:
        program = corpus.load(f"corpus/{name}")
        with Worker() as base:
            w = StopwatchWorker(base)
            t0 = time.perf_counter()
            res = optimize_program(program, SearchOptions(strategy=strategy, budget_s=budget_s, final_timing=False,
                                                          cost=False), worker=w)
            total = time.perf_counter() - t0
        worker_s = sum(w.seconds.values())
        rows.append({"program": name, "total_s": total, "search_s": res.search_s,
                     "candidates": res.candidates_evaluated, "seconds": dict(w.seconds),
                     "calls": dict(w.calls), "in_process_s": max(0.0, total - worker_s)})
        print(f"{name}: {res.candidates_evaluated} candidates in {total:.1f}s", file=sys.stderr)
    return rows


def table(rows: list[dict]) -> str:
    head = "| program | candidates | cand/s | " + " | ".join(KINDS) + " | in-process (augment/apply/hash) |"
    lines = [head, "|---|---:|---:|" + "---:|" * (len(KINDS) + 1)]
    for r in rows:
        total = r["total_s"] or 1.0
        cells = [f"{r['seconds'].get(k, 0.0) / total:.0%} ({r['calls'].get(k, 0)})" for k in KINDS]
        lines.append(f"| {r['program']} | {r['candidates']} | {r['candidates'] / total:.2f} | " + " | ".join(cells)
                     + f" | {r['in_process_s'] / total:.0%} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", default=DEFAULT_PROGRAMS)
    ap.add_argument("--budget", type=float, default=20.0)
    ap.add_argument("--strategy", default="auto")
    args = ap.parse_args(argv)
    rows = measure(args.programs.split(","), args.budget, args.strategy)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
