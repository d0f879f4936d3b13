"""Where a search candidate's time goes, and candidates per second, on a sample of the corpus.

    python benchmarks/candidate_time.py [--programs a,b,c] [--budget 20] [--strategy beam] [--modes fresh,warm]

Runs `optimize_program` on each program with a worker wrapped in a stopwatch that sorts every
worker request by what it is for: verifying a candidate (the first run of a new text includes
its compile), the float64 reference (compile + run of the widened original), the noise
measurement (the original against itself), timing candidates side by side, and fingerprints
(optimized HLO, to reuse timings of identical executables). The rest of the search time is
spent in this process (augment, apply, DAG hash). Each program runs with a fresh worker (the
worker start and the original's compile inside the budget, as optimize() did before it kept a
warm worker), with the warm worker, and with the warm worker a second time. Prints a markdown
table and candidates per second per mode.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time

import numpy as np

from shlo_env import corpus
from shlo_env.ir.program import lower
from shlo_env.search.program_search import SearchOptions, optimize_program
from shlo_env.execute.worker import Worker, shared

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


MODES = {
    "fresh": "a fresh worker per call (optimize() before the warm worker)",
    "warm": "the process's warm worker (shlo_env.execute.worker.shared, what optimize() uses), first call on the program",
    "warm again": "the warm worker, a second call on the same program (original compile and float64 reference reused)",
}


def _one(program, name: str, budget_s: float, strategy: str, worker: Worker, mode: str) -> dict:
    w = StopwatchWorker(worker)
    t0 = time.perf_counter()
    res = optimize_program(program, SearchOptions(strategy=strategy, budget_s=budget_s, final_timing=False,
                                                  cost=False), worker=w)
    total = time.perf_counter() - t0
    worker_s = sum(w.seconds.values())
    print(f"{name} [{mode}]: {res.candidates_evaluated} candidates in {total:.1f}s (load "
          f"{os.getloadavg()[0]:.2f})", file=sys.stderr)
    return {"program": name, "mode": mode, "total_s": total, "search_s": res.search_s,
            "candidates": res.candidates_evaluated, "seconds": dict(w.seconds),
            "calls": dict(w.calls), "in_process_s": max(0.0, total - worker_s)}


def measure(names: list[str], budget_s: float, strategy: str, modes=tuple(MODES)) -> list[dict]:
    """Per program, the modes one after the other (so load drifts hit them alike). The warm
    worker is started before the first program, as an earlier optimize() call would have."""
    rows = []
    with shared() as warm:  # start it (interpreter, jax import), outside any budget
        warm.cost(lower(lambda x: x + 1, np.zeros(4, np.float32)).text())
    for name in names:
        program = corpus.load(f"corpus/{name}")
        for mode in modes:
            if mode == "fresh":
                with Worker() as fresh:
                    rows.append(_one(program, name, budget_s, strategy, fresh, mode))
            else:
                with shared() as warm:
                    rows.append(_one(program, name, budget_s, strategy, warm, mode))
    return rows


def table(rows: list[dict]) -> str:
    head = ("| program | worker | candidates | cand/s | " + " | ".join(KINDS)
            + " | in-process (augment/apply/hash) |")
    lines = [head, "|---|---|---:|---:|" + "---:|" * (len(KINDS) + 1)]
    for r in rows:
        total = r["total_s"] or 1.0
        cells = [f"{r['seconds'].get(k, 0.0) / total:.0%} ({r['calls'].get(k, 0)})" for k in KINDS]
        lines.append(f"| {r['program']} | {r['mode']} | {r['candidates']} | {r['candidates'] / total:.2f} | "
                     + " | ".join(cells) + f" | {r['in_process_s'] / total:.0%} |")
    lines.append("")
    for mode in dict.fromkeys(r["mode"] for r in rows):
        rs = [r for r in rows if r["mode"] == mode]
        n, t = sum(r["candidates"] for r in rs), sum(r["total_s"] for r in rs)
        lines.append(f"- {mode} ({MODES[mode]}): {n} candidates in {t:.0f} s, {n / t:.2f} candidates/s")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", default=DEFAULT_PROGRAMS)
    ap.add_argument("--budget", type=float, default=20.0)
    ap.add_argument("--strategy", default="auto")
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of: {', '.join(MODES)}")
    args = ap.parse_args(argv)
    rows = measure(args.programs.split(","), args.budget, args.strategy, tuple(args.modes.split(",")))
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
