"""Evaluating candidate programs: verify against the original (`shlo_env.measure.verify`), then time
side by side.

One `Evaluator` serves a whole search. A state is a program plus the XLA passes disabled when
compiling it (usually none); its cache key is (DAG hash, disabled passes), so a state reached
twice (by two strategies, or two paths of one) is compiled, verified and timed once. All
compiling and running happens in a `Worker` child process: a candidate that crashes XLA or
hangs costs that candidate only.

The baseline is always the original compiled as jax.jit compiles it (no pass disabled): a
state's `ratio` is T(state) / T(original), measured side by side (A, B, A, B, ...).
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from shlo_env.execute import runtime, xla_options
from shlo_env.execute.background import run_beside
from shlo_env.ir.hashing import dag_hash
from shlo_env.ir.program import Program
from shlo_env.measure.numerics import Comparison, Numerics
from shlo_env.measure.paired_timing import PairedTiming, time_until_decided
from shlo_env.execute.runners import CandidateError, FailureKind, Runner
from shlo_env.search.passes import state_key
from shlo_env.measure.sequential_test import SequentialRatioTest
from shlo_env.execute.xla_options import Action, normalize
from shlo_env.measure.timing_policy import SEARCH, TimingPolicy
from shlo_env.measure.verify import Verifier


class Status(enum.Enum):
    """Where one state's evaluation stands. Only the first two hold for every state; a state
    moves down the list (or to REJECTED) as the search asks for more."""

    REJECTED = "rejected"  # not usable: `failure` says why (mismatch, compile, crash, timeout, budget, ...)
    VERIFIED = "verified"  # verified within its tier, no timing: `untimed` says why ("budget", "not asked")
    TIMED = "timed"  # verified, then timed side by side with the original once
    CONFIRMED = "confirmed"  # timed a second time; its ratio is the slower of the two measurements


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One side-by-side timing of a state against the original (A, B, A, B, ...)."""

    ratio: float  # T(candidate) / T(original), 10th percentiles of the interleaved runs
    median_ratio: float = math.nan  # median per-call ratio of the same runs (NaN: unknown)
    time_s: float = math.nan
    baseline_s: float = math.nan
    reused_from: str = ""  # key of the state this timing was taken from (the same executable)


class Keyed:
    """What a (DAG hash, XLA actions) pair is called: its cache key and its actions as tokens
    (`State` and `Evaluation` both are such a pair)."""

    hash: str
    actions: tuple[Action, ...]

    @property
    def key(self) -> str:
        """The cache key: (DAG hash, XLA actions)."""
        return state_key(self.hash, self.actions)

    @property
    def passes(self) -> tuple[str, ...]:
        """The XLA actions as tokens (pass names, `name=value` options)."""
        return xla_options.tokens(self.actions)


@dataclasses.dataclass
class Evaluation(Keyed):
    """What is known about one state: its `status` (with the `failure` kind when rejected),
    the tier verification established, and its timing when it has one. `ratio` and the other
    timing properties are NaN (unknown) unless `timed`; test `timed` first."""

    hash: str
    program: Program
    status: Status
    actions: tuple[Action, ...] = ()  # XLA actions (passes disabled, options set) compiling this state
    failure: FailureKind | None = None
    detail: str = ""  # rejected: what failed; verified but not timed: why ("budget: ...", "not asked: ...")
    tier: Numerics | None = None  # the tier verification established (EXACT: bitwise equal)
    measurement: Measurement | None = None
    comparison: Comparison | None = None
    cost: dict | None = None

    @property
    def applied(self) -> tuple[str, ...]:
        return self.program.applied

    @property
    def numerics(self) -> Numerics:
        """The tier the state claims: its rewrites' loosest tier (XLA actions may reorder
        float math, so at least REASSOCIATE then). `tier` is what was established."""
        tier = Numerics(self.program.numerics)
        return max(tier, Numerics.REASSOCIATE, xla_options.numerics(self.actions)) if self.actions else tier

    # --- the status, read -------------------------------------------------------------------

    @property
    def ok(self) -> bool:
        """Not rejected: verified (and perhaps timed)."""
        return self.status is not Status.REJECTED

    @property
    def timed(self) -> bool:
        """Verified and timed: the only evaluations a strategy may compare by `ratio`."""
        return self.status in (Status.TIMED, Status.CONFIRMED)

    @property
    def confirmed(self) -> bool:
        return self.status is Status.CONFIRMED

    @property
    def verified(self) -> Numerics | None:
        """The tier established (None unless verification passed)."""
        return self.tier

    @property
    def error(self) -> str:
        """"kind: message" of a rejected state ("" otherwise)."""
        return f"{self.failure}: {self.detail}" if self.status is Status.REJECTED else ""

    @property
    def untimed(self) -> str:
        """Why a verified state has no timing (yet) ("" otherwise)."""
        return self.detail if self.status is Status.VERIFIED else ""

    @property
    def ratio(self) -> float:
        return self.measurement.ratio if self.timed and self.measurement is not None else math.nan

    @property
    def median_ratio(self) -> float:
        return self.measurement.median_ratio if self.timed and self.measurement is not None else math.nan

    @property
    def time_s(self) -> float:
        return self.measurement.time_s if self.timed and self.measurement is not None else math.nan

    @property
    def baseline_s(self) -> float:
        return self.measurement.baseline_s if self.timed and self.measurement is not None else math.nan

    @property
    def same_executable_as(self) -> str:
        """Key of the state whose timing this one reused (same executable), or ""."""
        return self.measurement.reused_from if self.measurement is not None else ""

    @property
    def speedup(self) -> float:
        return 1.0 / self.ratio if self.ratio > 0 else float("inf")

    # --- the status, written (by the evaluator only) ----------------------------------------

    def reject(self, kind: FailureKind, message: str) -> None:
        self.status, self.failure, self.detail = Status.REJECTED, kind, message

    def verified_untimed(self, why: str) -> None:
        self.status, self.failure, self.detail = Status.VERIFIED, None, why

    def timed_as(self, measurement: Measurement, confirmed: bool = False) -> None:
        self.measurement, self.failure, self.detail = measurement, None, ""
        self.status = Status.CONFIRMED if confirmed else Status.TIMED

    def describe(self) -> str:
        what = list(self.applied) + [f"-{p}" for p in self.passes]
        return ", ".join(what) if what else "(original)"


@dataclasses.dataclass
class EvaluatorStats:
    evaluated: int = 0  # distinct states verified (each compiled once)
    cache_hits: int = 0  # requests answered from the cache
    verified: int = 0
    mismatches: int = 0
    failures: dict = dataclasses.field(default_factory=dict)
    timed: int = 0  # side-by-side timings of candidates (retimes not counted)
    executable_hits: int = 0  # timings reused: the state compiled to an executable already timed
    retimed: int = 0
    costed: int = 0  # cost analyses (a compile, no run)
    featured: int = 0  # executables read for their features (a compile, no run)
    seconds: float = 0.0  # wall seconds of the requests that were not cache hits (verify and time)
    # how many times each state key was verified / timed: every count is 1 (tests check it)
    verifications: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    timings: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    @property
    def requests(self) -> int:
        return self.evaluated + self.cache_hits

    @property
    def hit_rate(self) -> float:
        return self.cache_hits / self.requests if self.requests else 0.0

    def summary(self) -> str:
        fails = ", ".join(f"{k} {v}" for k, v in sorted(self.failures.items()))
        return (f"{self.evaluated} states evaluated, {self.timed} timed, {self.cache_hits} cache hits "
                f"({self.hit_rate:.0%}), {self.executable_hits} timings reused (same executable)"
                + (f", rejected: {fails}" if fails else ""))


class Evaluator:
    """Verify-then-time evaluation with a (DAG hash, disabled passes) cache.

    Verification runs the candidate on the original's example inputs (if any) plus
    `num_random` seeded random input sets and compares its compiled outputs with the
    original's. Bitwise equal on every set: verified EXACT. Otherwise the REASSOCIATE
    criterion (error against a float64 reference, see `shlo_env.measure.numerics`) decides, also for
    rewrites that are exact in StableHLO semantics (their property tests check that, bitwise,
    on the reference interpreter): XLA itself reassociates float math differently in
    different programs (constant folding, vector widths of transcendentals). APPROX is used
    only for states that claim it. The verified tier is path-independent, so the cache can be
    keyed by state alone.
    Only verified candidates are timed, interleaved with the original (A, B, A, B, ...).

    `disabled_passes` (XLA actions, typed or tokens) apply to every compile, the baseline's
    included (a different baseline); per-state actions are given to `evaluate(program, passes=...)`.
    Many rewrites are ones XLA redoes or undoes by itself, so distinct states often compile
    to the same executable. With `reuse_executables` (default) a verified state's timing is
    taken from an already timed state whose optimized HLO (XLA's canonical fingerprint text)
    is the same, instead of being measured again: fewer timings, and no "winner" that is only
    a lucky measurement of an executable already measured. Verification is never skipped.

    `hard_deadline` (a `time.perf_counter()` value) bounds how long any one worker request may
    take: a request still running then is abandoned (the worker is restarted) and its state
    is not cached, so a budget is honored even when one compile is slow.

    `max_bytes` bounds the verification data (`Schedule.memory_bytes`: fewer random
    input sets for a large program). `close()` frees the input sets and the original's
    references, here and in the worker.
    """

    def __init__(self, original: Program, *, worker: Runner | None = None, num_random: int = 3,
                 seed: int = 0, timing: TimingPolicy = SEARCH,
                 disabled_passes: Sequence[str | Action] = (), hard_deadline: float | None = None,
                 reuse_executables: bool = True, max_bytes: int | None = None):
        from shlo_env.execute.worker import Worker

        self.original = original
        self.worker: Runner = worker if worker is not None else Worker()  # SHLO_ENV_TIMEOUT_S
        self._own_worker = worker is None
        # a worker process (alone or behind a lock) takes a verification from another thread
        # while this one works on the IR (`evaluate(beside=...)`); an in-process runner does not
        self.checks_beside = isinstance(getattr(self.worker, "worker", self.worker), Worker)
        self.timing = timing
        self.base_actions = normalize(disabled_passes)
        self.disabled_passes = xla_options.tokens(self.base_actions)  # the worker's form
        self.hard_deadline = hard_deadline
        self.stats = EvaluatorStats()
        self.cache: dict[str, Evaluation] = {}
        self._abandoned: set[str] = set()  # state keys whose verification the hard deadline cut
        self._fresh_s: list[float] = []  # seconds each new state's verification and timing took
        self.costs: dict[str, dict] = {}
        self.exe_features: dict[str, Any] = {}  # state key -> hlo_features vector (or None)
        self.reuse_executables = reuse_executables
        self.executables: dict[str, Evaluation] = {}  # fingerprint of optimized HLO -> timed state
        self._original_fingerprint_done = False
        self.baseline_text = original.text()
        self.verifier = Verifier(original, self.worker, num_random=num_random, seed=seed,
                                 disabled_passes=self.disabled_passes, timeout=self._timeout, max_bytes=max_bytes)
        self.baseline_s = float("nan")
        self.noise = float("nan")
        # The baseline: exact by definition, and its ratio 1.0 needs no second timing.
        base = Evaluation(dag_hash(original), original, Status.CONFIRMED, tier=Numerics.EXACT,
                          measurement=Measurement(1.0, 1.0))
        self.original_key = base.key
        self.cache[base.key] = base

    # --- setup ----------------------------------------------------------------------------

    @property
    def num_input_sets(self) -> int:
        return self.verifier.num_input_sets

    @property
    def _keys(self) -> list[str]:
        """The worker's names of the verifier's input sets (reading them decides the sets)."""
        return self.verifier.keys

    def inputs(self, i: int = 0) -> list[np.ndarray]:
        """Input set i (set 0 is the example args when the program has them)."""
        return self.verifier.sets[i]

    def _timeout(self) -> float | None:
        """Seconds a worker request may take: the worker's own limit, cut at the hard deadline."""
        if self.hard_deadline is None:
            return None
        left = self.hard_deadline - time.perf_counter()
        return max(0.5, min(self.worker.timeout_s or left, left))

    def compile_tokens(self, passes: Sequence[str | Action] = ()) -> tuple[str, ...]:
        """The worker's tokens of the baseline's actions plus a state's."""
        return xla_options.tokens(normalize(self.base_actions + tuple(passes)))

    def originals(self) -> list[list[np.ndarray]]:
        """The original's outputs on each input set (see `shlo_env.measure.verify.Verifier`)."""
        return self.verifier.originals()

    def references(self) -> list:
        """float64 outputs of the original on each input set (None where it cannot be widened)."""
        return self.verifier.references()

    def sensitivity(self, i: int):
        """float64 outputs of the original on input set i moved by a few ulps."""
        return self.verifier.sensitivity(i)

    def measure_noise(self, repeats: int = 3, max_seconds: float | None = None) -> float:
        """Time the original against itself `repeats` times; the median of |1 - ratio| is the
        noise on this machine (the median, so that one load spike from another process does
        not set the threshold for the whole search; a lucky candidate is caught by the
        confirming re-time and the final in-process check instead). Stops repeating once
        `max_seconds` would pass during the next one (a slow program gets one, not three)."""
        ratios: list[float] = []
        start = time.perf_counter()
        for _ in range(repeats):
            spent = time.perf_counter() - start
            if ratios and max_seconds is not None and spent * (1 + 1 / len(ratios)) > max_seconds:
                break
            a, b = self.worker.time([self.baseline_text, self.baseline_text], self._keys[0], self.timing,
                                    self.disabled_passes, timeout_s=self._timeout())
            ratios.append(b.full / a.full)
            self.baseline_s = min(a.full, b.full) if np.isnan(self.baseline_s) else min(self.baseline_s, a.full, b.full)
        self.noise = float(np.median([abs(1.0 - r) for r in ratios]))
        return self.noise

    # --- evaluation -----------------------------------------------------------------------

    def key(self, program: Program, passes=(), hash: str | None = None) -> str:  # noqa: A002
        return state_key(hash or dag_hash(program), passes)

    def lookup(self, program: Program, passes=(), hash: str | None = None) -> Evaluation | None:  # noqa: A002
        """The cached evaluation of a state, if any (no work, no statistics)."""
        return self.cache.get(self.key(program, passes, hash))

    def evaluate(self, program: Program, *, passes=(), time_it: bool = True,
                 hash: str | None = None, beside: Callable[[], object] | None = None) -> Evaluation:  # noqa: A002
        """Verify (and time) the state (program, disabled passes), at most once per state.

        `beside`: work on the IR to do here while the worker verifies the state (matching the
        patterns on it, say); run only when a verification runs, and before the timing, which
        needs a quiet machine. Its seconds past the verification's end are not the candidate's."""
        actions = normalize(passes)
        h = hash or dag_hash(program)
        key = state_key(h, actions)
        cached = self.cache.get(key)
        if cached is not None and cached.ok and cached.tier is not None \
                and cached.tier > max(Numerics(program.numerics), Numerics.REASSOCIATE):
            # Verified only within APPROX (reached before by an APPROX path): this path may not.
            self.stats.cache_hits += 1
            return dataclasses.replace(cached, program=program, status=Status.REJECTED, failure=FailureKind.MISMATCH,
                                       detail=f"within {cached.tier.name} only")
        if cached is not None and (not time_it or cached.timed or not cached.ok):
            self.stats.cache_hits += 1
            return cached
        t0 = time.perf_counter()
        if cached is None and self.hard_deadline is not None and not self.room_for_one():
            # not started: cut at the hard deadline it would be, and the worker killed with it
            ev = Evaluation(h, program, Status.REJECTED, actions)
            ev.reject(FailureKind.BUDGET, f"a new candidate takes about {self.candidate_s():.1f} s, "
                                          f"{self.hard_deadline - t0:.1f} s are left")
            self._abandoned.add(key)
            return ev
        fresh = cached is None
        waited = 0.0  # on `beside`, after the verification ended
        if cached is None:
            self.stats.evaluated += 1
            cached, waited = self._verify(h, program, actions, beside)
            if cached.failure is FailureKind.BUDGET:
                self._abandoned.add(key)
                self.stats.seconds += time.perf_counter() - t0 - waited
                return cached  # abandoned during verification: not the candidate's fault, not cached
            self.cache[key] = cached
        if cached.ok and time_it and not cached.timed:
            self._time(cached)  # verified still when the budget cut it: timing can be retried later
        elif cached.ok and not cached.timed and not time_it and not cached.untimed:
            cached.verified_untimed("not asked: verified only (the strategy did not ask for a timing)")
        self.stats.seconds += time.perf_counter() - t0 - waited
        if fresh and cached.ok and cached.timed:
            self._fresh_s.append(time.perf_counter() - t0 - waited)
        return cached

    def candidate_s(self) -> float:
        """What a new candidate's verification and timing took lately (the median of the last
        five; 0 before two were timed)."""
        recent = self._fresh_s[-5:]
        return float(np.median(recent)) if len(recent) >= 2 else 0.0

    def room_for_one(self) -> bool:
        """Whether a new candidate can end before the hard deadline, as long as they lately took."""
        return self.hard_deadline is None or time.perf_counter() + self.candidate_s() < self.hard_deadline

    def untimed(self) -> dict[str, int]:
        """How many states got no timing, by why: "budget" (the hard deadline came during their
        verification or their timing), "not asked" (verified only: no strategy asked for a
        timing). States verified since, or timed since, are not counted."""
        out: collections.Counter = collections.Counter()
        out["budget"] += len(self._abandoned - self.cache.keys())
        for ev in self.cache.values():
            if ev.status is Status.VERIFIED and ev.untimed:
                out[ev.untimed.split(":", 1)[0]] += 1
        return {k: n for k, n in out.items() if n}

    def verify_only(self, program: Program, passes=()) -> Evaluation:
        return self.evaluate(program, passes=passes, time_it=False)

    def _fail(self, ev: Evaluation, kind: FailureKind, message: str) -> Evaluation:
        ev.reject(kind, message)
        self.stats.failures[kind.value] = self.stats.failures.get(kind.value, 0) + 1
        return ev

    def _budget_cut(self, e: CandidateError) -> str | None:
        """Why, when the search's hard deadline (not the candidate) ended the request; else None."""
        if e.kind is FailureKind.TIMEOUT and self.hard_deadline is not None \
                and time.perf_counter() >= self.hard_deadline - 0.1:
            return f"budget: the search's hard deadline came during the request ({e.message})"
        return None

    def _verify(self, h: str, program: Program, actions: tuple[Action, ...],
                beside: Callable[[], object] | None = None) -> tuple[Evaluation, float]:
        """The state verified, and the seconds `beside` ran on after the check had ended.
        With a worker process the check runs on a thread while `beside` runs here
        (`execute.background`); an in-process runner runs the two in turn."""
        ev = Evaluation(h, program, Status.REJECTED, actions)
        self.stats.verifications[ev.key] += 1
        text, tokens = program.text(), self.compile_tokens(actions)

        def check() -> Comparison:
            return self.verifier.check(text, tokens, ev.numerics)
        waited = 0.0
        if beside is not None and self.checks_beside:
            request, waited = run_beside(check, beside, "shlo_env-verify")
            check = request.result
        try:
            cmp = check()
            if beside is not None and not self.checks_beside:
                beside()
        except CandidateError as e:
            cut = self._budget_cut(e)
            if cut is not None:  # not counted: not the candidate's fault
                ev.reject(FailureKind.BUDGET, cut.partition(": ")[2])
                return ev, waited
            return self._fail(ev, e.kind, e.message), waited
        ev.comparison = cmp
        if not cmp.ok:
            self.stats.mismatches += 1
            return self._fail(ev, FailureKind.MISMATCH, cmp.detail), waited
        ev.tier = cmp.tier
        ev.verified_untimed("")
        self.stats.verified += 1
        return ev, waited

    def _side_by_side(self, ev: Evaluation):
        """(baseline timing, candidate timing), interleaved in one worker request."""
        text = ev.program.text()
        if not ev.actions:
            return self.worker.time([self.baseline_text, text], self._keys[0], self.timing,
                                    self.disabled_passes, timeout_s=self._timeout())
        return self.worker.time_each([(self.baseline_text, self.disabled_passes), (text, self.compile_tokens(ev.actions))],
                                     self._keys[0], self.timing, timeout_s=self._timeout())

    def fingerprint(self, program: Program, passes: Sequence[str | Action] = ()) -> str | None:
        """xxh3 of XLA's optimized HLO (canonical text) of a state; None if unavailable. Two
        states with one fingerprint are one executable: the same program to the machine."""
        import xxhash

        try:
            hlo = self.optimized_hlo(program, passes)
        except CandidateError:
            return None
        # XLA options change code generation, not the HLO: the same text is another executable.
        options = ",".join(p for p in self.compile_tokens(passes) if xla_options.is_option(p))
        return xxhash.xxh3_64_hexdigest((hlo + "|" + options).encode())

    def _time(self, ev: Evaluation) -> None:
        fingerprint = None
        if self.reuse_executables:
            if not self._original_fingerprint_done:
                self._original_fingerprint_done = True
                fp = self.fingerprint(self.original, ())
                if fp is not None:
                    self.executables[fp] = self.cache[self.original_key]
            fingerprint = self.fingerprint(ev.program, ev.passes)
            same = self.executables.get(fingerprint) if fingerprint is not None else None
            if same is not None and same.timed and same.measurement is not None:
                self.stats.executable_hits += 1
                ev.timed_as(dataclasses.replace(same.measurement, reused_from=same.key))
                return
        self.stats.timings[ev.key] += 1
        try:
            base, cand = self._side_by_side(ev)
        except CandidateError as e:
            cut = self._budget_cut(e)
            if cut is not None:
                ev.verified_untimed(cut)  # verified still; the timing can be retried later
            else:
                self._fail(ev, e.kind, e.message)
            return
        self.stats.timed += 1
        ev.timed_as(Measurement(cand.full / base.full, runtime.median_ratio(base.samples, cand.samples),
                                cand.full, base.full))
        self.baseline_s = base.full if np.isnan(self.baseline_s) else min(self.baseline_s, base.full)
        if fingerprint is not None:
            self.executables[fingerprint] = ev

    def confirm(self, ev: Evaluation) -> None:
        """Time a timed state a second time and keep the slower ratio (a lucky first measurement
        is the usual false winner of a search over many candidates). Once per executable: a
        state that reused another's timing takes that state's confirmation."""
        src = self.cache.get(ev.same_executable_as, ev) if ev.same_executable_as else ev
        if not src.confirmed and src.timed and src.measurement is not None:
            try:
                again = self.retime(src)
            except CandidateError as e:
                if self._budget_cut(e) is None:  # the deadline leaves it as it was
                    self._fail(src, e.kind, e.message)
                    if ev is not src:
                        ev.reject(e.kind, e.message)
                return
            src.timed_as(dataclasses.replace(src.measurement, ratio=max(src.measurement.ratio, again)),
                         confirmed=True)
        if ev is not src:
            if not src.ok:
                ev.reject(src.failure or FailureKind.RUN, src.detail)
            elif src.timed and src.measurement is not None:
                ev.timed_as(dataclasses.replace(src.measurement, reused_from=src.key), confirmed=src.confirmed)

    def retime_ratios(self, ev: Evaluation) -> tuple[float, float]:
        """A second, independent side-by-side measurement (guards against a lucky first one):
        its 10th-percentile and median per-call ratios."""
        self.stats.retimed += 1
        base, cand = self._side_by_side(ev)
        return cand.full / base.full, runtime.median_ratio(base.samples, cand.samples)

    def paired_test(self, ev: Evaluation, allowance_s: float,
                    test: SequentialRatioTest | None = None) -> PairedTiming:
        """The acceptance test of a timed state against the original: interleaved (A, B) pairs
        on input set 0 until the sequential test (`shlo_env.measure.sequential_test`, default alpha 1 %,
        min gain 1 %) decides or `allowance_s` has passed (`shlo_env.measure.paired_timing`); a
        `PairedTiming`. Not cached: each call is a fresh, independent test."""
        self.stats.retimed += 1
        passes_b = self.compile_tokens(ev.actions) if ev.actions else self.disabled_passes
        return time_until_decided(self.worker, self.baseline_text, ev.program.text(), self._keys[0], allowance_s,
                                  test=test, passes_a=self.disabled_passes, passes_b=passes_b,
                                  timeout_s=self._timeout())

    def retime(self, ev: Evaluation) -> float:
        """`retime_ratios`, the larger of the two (it clears a threshold only when both do; an
        unknown median, NaN, is left out as `noise_model.accepts` leaves it out)."""
        ratio, median = self.retime_ratios(ev)
        return ratio if math.isnan(median) else max(ratio, median)

    def cost(self, program: Program, passes=(), hash: str | None = None) -> dict:  # noqa: A002
        """XLA's cost analysis (flops, bytes) of a state: one compile, no run, no timing.
        Cached by state key; a program XLA rejects gets NaNs and an 'error'."""
        actions = normalize(passes)
        key = state_key(hash or dag_hash(program), actions)
        if key in self.costs:
            return self.costs[key]
        self.stats.costed += 1
        try:
            c = self.worker.cost(program.text(), self.compile_tokens(actions), timeout_s=self._timeout())
        except CandidateError as e:
            c = {"flops": float("nan"), "bytes": float("nan"), "error": str(e)}
        self.costs[key] = c
        ev = self.cache.get(key)
        if ev is not None:
            ev.cost = c
        return c

    def executable_features(self, program: Program, passes=(), hash: str | None = None):  # noqa: A002
        """`learn.hlo_features` of the state's executable (one compile, no run); None when XLA
        rejects the program or its HLO cannot be read. Cached by state key."""
        from shlo_env.learn import hlo_features

        key = state_key(hash or dag_hash(program), normalize(passes))
        if key not in self.exe_features:
            self.stats.featured += 1
            try:
                self.exe_features[key] = hlo_features.features(self.optimized_hlo(program, passes))
            except (CandidateError, hlo_features.HloParseError):
                self.exe_features[key] = None
        return self.exe_features[key]

    def optimized_hlo(self, program: Program, passes=()) -> str:
        """XLA's optimized HLO of a state (canonical text): did disabling a pass change anything?"""
        return self.worker.optimized_hlo(program.text(), self.compile_tokens(normalize(passes)), timeout_s=self._timeout())

    def close(self) -> None:
        """End of the search: free what it held (input sets and references, here and in the
        worker, which may serve the next search), and close the worker if this evaluator
        started it. The evaluations stay readable."""
        self.verifier.release()
        if self._own_worker:
            self.worker.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def now() -> float:
    return time.perf_counter()
