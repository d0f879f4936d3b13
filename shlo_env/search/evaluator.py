"""Evaluating candidate programs: verify against the original, then time side by side.

One `Evaluator` serves a whole search. Every state is keyed by its DAG hash, so a state reached
twice (by two strategies, or two paths of one) is compiled, verified and timed once. All
compiling and running happens in a `Worker` child process: a candidate that crashes XLA or
hangs costs that candidate only.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from shlo_env import runtime
from shlo_env.hashing import dag_hash
from shlo_env.import_ import Program
from shlo_env.numerics import Comparison, Numerics, compare_outputs
from shlo_env.worker import CandidateError, Worker


@dataclasses.dataclass
class Evaluation:
    """What is known about one program state. `ratio` = T(candidate) / T(original), side by side."""

    hash: str
    program: Program
    ok: bool
    ratio: float = float("inf")
    time_s: float = float("nan")
    baseline_s: float = float("nan")
    error: str = ""
    comparison: Comparison | None = None
    cost: dict | None = None

    @property
    def applied(self) -> tuple[str, ...]:
        return self.program.applied

    @property
    def speedup(self) -> float:
        return 1.0 / self.ratio if self.ratio > 0 else float("inf")


@dataclasses.dataclass
class EvaluatorStats:
    evaluated: int = 0
    cache_hits: int = 0
    verified: int = 0
    mismatches: int = 0
    failures: dict = dataclasses.field(default_factory=dict)
    timed: int = 0

    @property
    def hit_rate(self) -> float:
        total = self.evaluated + self.cache_hits
        return self.cache_hits / total if total else 0.0


class Evaluator:
    """Verify-then-time evaluation with a DAG-hash cache.

    Verification runs the candidate on the original's example inputs (if any) plus
    `num_random` seeded random input sets and compares with the original within the
    candidate's numerics tier (REASSOCIATE against a float64 reference). Only verified
    candidates are timed, interleaved with the original (A, B, A, B, ...).
    """

    def __init__(self, original: Program, *, worker: Worker | None = None, num_random: int = 3,
                 seed: int = 0, runs: int = 10, warmup: int = 3, min_seconds: float = 0.2,
                 disabled_passes: tuple[str, ...] = ()):
        self.original = original
        self.worker = worker or Worker()
        self._own_worker = worker is None
        self.runs, self.warmup, self.min_seconds = runs, warmup, min_seconds
        self.disabled_passes = tuple(disabled_passes)
        self.stats = EvaluatorStats()
        self.cache: dict[str, Evaluation] = {}
        self.baseline_text = original.text()
        self._sets = runtime.input_sets(original, num_random, seed)
        self._keys = [f"set{i}" for i in range(len(self._sets))]
        for key, arrays in zip(self._keys, self._sets):
            self.worker.set_inputs(key, arrays)
        self._originals: list[list[np.ndarray]] | None = None
        self._references: list | None = None
        self.baseline_s = float("nan")
        self.noise = float("nan")
        base = Evaluation(dag_hash(original), original, ok=True, ratio=1.0)
        self.cache[base.hash] = base

    # --- setup ----------------------------------------------------------------------------

    @property
    def num_input_sets(self) -> int:
        return len(self._sets)

    def inputs(self, i: int = 0) -> list[np.ndarray]:
        """Input set i (set 0 is the example args when the program has them)."""
        return self._sets[i]

    def originals(self) -> list[list[np.ndarray]]:
        if self._originals is None:
            self._originals = [self.worker.run(self.baseline_text, k, self.disabled_passes) for k in self._keys]
        return self._originals

    def references(self) -> list:
        if self._references is None:
            self._references = [self.worker.reference(self.baseline_text, k) for k in self._keys]
        return self._references

    def measure_noise(self, repeats: int = 2) -> float:
        """Time the original against itself; the spread of the ratio is the noise on this machine."""
        ratios = []
        for _ in range(repeats):
            a, b = self.worker.time([self.baseline_text, self.baseline_text], self._keys[0], self.runs,
                                    self.warmup, self.min_seconds, self.disabled_passes)
            ratios.append(b.full / a.full)
            self.baseline_s = min(a.full, b.full) if np.isnan(self.baseline_s) else min(self.baseline_s, a.full, b.full)
        self.noise = float(max(abs(1.0 - r) for r in ratios))
        return self.noise

    # --- evaluation -----------------------------------------------------------------------

    def evaluate(self, program: Program, *, time_it: bool = True) -> Evaluation:
        h = dag_hash(program)
        cached = self.cache.get(h)
        if cached is not None and (not time_it or not np.isinf(cached.ratio) or not cached.ok):
            self.stats.cache_hits += 1
            return cached
        if cached is None:
            self.stats.evaluated += 1
            cached = self._verify(h, program)
            self.cache[h] = cached
        if cached.ok and time_it and np.isinf(cached.ratio):
            self._time(cached)
        return cached

    def verify_only(self, program: Program) -> Evaluation:
        return self.evaluate(program, time_it=False)

    def _fail(self, ev: Evaluation, kind: str, message: str) -> Evaluation:
        ev.ok = False
        ev.error = f"{kind}: {message}"
        self.stats.failures[kind] = self.stats.failures.get(kind, 0) + 1
        return ev

    def _verify(self, h: str, program: Program) -> Evaluation:
        ev = Evaluation(h, program, ok=False)
        text = program.text()
        tier = Numerics(program.numerics)
        try:
            originals = self.originals()
            references = self.references() if tier >= Numerics.REASSOCIATE else [None] * len(self._keys)
            worst: Comparison | None = None
            for key, original, ref in zip(self._keys, originals, references):
                got = self.worker.run(text, key, self.disabled_passes)
                cmp = compare_outputs(got, original, tier, ref)
                if not cmp.ok:
                    self.stats.mismatches += 1
                    ev.comparison = cmp
                    return self._fail(ev, "mismatch", cmp.detail)
                if worst is None or cmp.max_error >= worst.max_error:
                    worst = cmp
            ev.comparison = worst
        except CandidateError as e:
            return self._fail(ev, e.kind, e.message)
        ev.ok = True
        self.stats.verified += 1
        return ev

    def _time(self, ev: Evaluation) -> None:
        try:
            base, cand = self.worker.time([self.baseline_text, ev.program.text()], self._keys[0], self.runs,
                                          self.warmup, self.min_seconds, self.disabled_passes)
        except CandidateError as e:
            self._fail(ev, e.kind, e.message)
            return
        self.stats.timed += 1
        ev.ratio = cand.full / base.full
        ev.time_s, ev.baseline_s = cand.full, base.full
        self.baseline_s = base.full if np.isnan(self.baseline_s) else min(self.baseline_s, base.full)

    def retime(self, ev: Evaluation) -> float:
        """A second, independent side-by-side measurement (guards against a lucky first one)."""
        base, cand = self.worker.time([self.baseline_text, ev.program.text()], self._keys[0], self.runs,
                                      self.warmup, self.min_seconds, self.disabled_passes)
        return cand.full / base.full

    def cost(self, program: Program) -> dict:
        """XLA's cost analysis (flops, bytes) of a program: no timing needed."""
        ev = self.cache.get(dag_hash(program))
        if ev is not None and ev.cost is not None:
            return ev.cost
        try:
            c = self.worker.cost(program.text(), self.disabled_passes)
        except CandidateError as e:
            c = {"flops": float("nan"), "bytes": float("nan"), "error": str(e)}
        if ev is not None:
            ev.cost = c
        return c

    def close(self) -> None:
        if self._own_worker:
            self.worker.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def now() -> float:
    return time.perf_counter()
