"""Program-level search: `optimize_program(program, ...) -> ProgramResult`.

The part of `optimize()` that works on a `Program` (a StableHLO module with its specs), not on a
Python function: `optimize()`, the sweeps of `shlo-env bench` over stored programs, and the
strategy benchmarks all run this one function.

    from shlo_env.search.program_search import SearchOptions, optimize_program
    res = optimize_program(program, SearchOptions(strategy="beam", budget_s=30))
    res.ratio, res.applied, res.search_best.describe(), res.stats.hit_rate

The wall-clock budget is split by `shlo_env.measure.timing_policy.Budget` (the one place to change the split),
and each step is sized to the program (issue 31 item 2): wall time stays within the budget
whatever the op count or call time, and `ProgramResult.cuts` says what was cut short and why
(`phases`: seconds per step).

0. **probe**: the original is compiled and run once, within `Budget.hard`; its call time sizes
   the random input sets (`Budget.random_sets`) and, with the noise measurement's steady call
   time, the timing rounds (`Budget.pair_policy`: one side-by-side timing takes at most
   `pair_share` of the budget). A program that does not compile and run once in time is
   returned unchanged. The original is augmented once, matching for at most `augment_share`.
1. **noise**: the original is timed against itself (`Evaluator.measure_noise`, repeated within
   `Budget.noise` of the budget): its steady call time sizes the later steps, and the noise is
   reported. The search's screening threshold is `1 - min_gain`, or the machine's
   noise-profile threshold when that is stricter (`threshold=`).
2. **search**: a strategy from `shlo_env.search` (by name, or "auto" by decision-space size)
   runs on a `SearchContext` until `Budget.search` of the budget; every candidate is verified
   against the original (example + random input sets, within its numerics tier) before it is
   timed, so only verified programs can be chosen. No worker request runs past
   `Budget.hard` of the budget.
3. **acceptance**: the best candidate must be below the original on its one-shot timing (the
   screening threshold only steers the strategies), then the sequential paired test
   (`Evaluator.paired_test`: `shlo_env.measure.sequential_test`, alpha `ACCEPT_ALPHA`, minimum gain
   `min_gain`) against the original: interleaved pairs until a confidence bound on T(best)/T(original) clears 1 (accept) or shows it is not
   faster by `min_gain` (reject), or the time left before `Budget.hard` runs out
   (undecided). Undecided (a slow program, a small budget), the earlier rule decides: the
   screening timing and the test's own pairs both beyond twice the measured noise
   (`_beyond_noise_twice`). Otherwise the original is kept. The estimate and the bounds are
   reported (`acceptance`, `accept_ratio`, `accept_upper`).
   `confirm=False` skips the test: the screening timing alone decides (noise can pass it).
4. **final measurement** (`final_timing=True`): three more side-by-side timings of the
   returned program against the original (`FINAL_TIMINGS`), with full/async/compute times. The
   reported `ratio` is their median, so it is not biased by the selection above (the search
   keeps the minimum of many noisy ratios; the confirmation is conditioned on passing), and the
   bench judges it by the noise profile's medians of three self-timings. When the original is
   returned, `ratio` is exactly 1.0: it is the same program. A median that says an accepted
   rewrite is not faster returns the original instead (`_final_measurement`).

Every decision the strategy applies is recorded (`trajectory`: the state it was applied to and
the non-zero choices), and the decision vectors that lead from the original to the returned
program (`decisions`, one full vector per step).

`device_lock` (a context manager) is held around every timing request, so that several sweeps
sharing a device (local worker processes, Ray actors) never time at the same moment, while
their compiles and verification runs go on in parallel.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager

import numpy as np

from shlo_env.measure import memory
from shlo_env.execute import xla_options as option_actions
from shlo_env.rewrite.driver import AugmentStats, augment, list_alternatives
from shlo_env.ir.hashing import dag_hash
from shlo_env.ir.program import Program, ir_scope
from shlo_env.measure.noise_thresholds import NoiseModel, accepts
from shlo_env.measure.numerics import Numerics
from shlo_env.patterns.base import resolve as resolve_patterns
from shlo_env.search import passes as pass_actions, site_heat
from shlo_env.search.base import CHILD_AUGMENT_SHARE, Progress, SearchContext, Strategy, auto_strategy, get_strategy
from shlo_env.search.evaluator import Evaluator
from shlo_env.measure.paired_timing import seconds_to_look
from shlo_env.measure.sequential_test import Decision, SequentialRatioTest
from shlo_env.measure.verify import NOTHING_TO_COMPARE, memory_allowance
from shlo_env.execute.runners import CandidateError, Runner
from shlo_env.execute import runtime
from shlo_env.execute.runtime import Timing
from shlo_env.measure.timing_policy import FINAL_TIMINGS, QUICK, SEARCH, Budget, TimingPolicy, policy_seconds
from shlo_env.execute.worker import Worker

PROBE = TimingPolicy(runs=1, warmup=0)  # the original's first call: sizes the budget's steps
MAX_TRAJECTORY = 5_000  # decisions recorded per program (a long MCTS run is cut here)
ACCEPT_ALPHA = 0.01  # the paired acceptance test's chance of accepting a candidate that is not faster
#: A program whose compile takes this long also takes seconds for its float64 references: they
#: are computed on a thread while the patterns match and the profile runs (the worker is idle
#: then), not in the search's first verification (9 s of the haiku ResNet18 train step's 22).
PREFETCH_COMPILE_S = 1.0
ACCEPT_SHARE = 0.8  # of the time left before Budget.hard: the rest is the check's float64 reference
ACCEPT_MAX_SHARE = 0.3  # of the budget the search may leave for the paired test (a slow program)


@dataclasses.dataclass
class SearchSummary:
    """What a search did, in the words both `ProgramResult` and `optimize.Report` use (one
    declaration; `optimize.Report.from_result` copies these fields and nothing else)."""

    name: str
    strategy: str  # the strategy that ran ("auto" resolved)
    returned_original: bool = True
    reason: str = ""  # why the original was kept (or what went wrong)
    noise: float = math.nan  # |1 - ratio| of the original against itself (median of the repeats)
    threshold: float = math.nan  # the screening threshold: the best's one-shot ratio must be below it
    # the sequential paired test of the best candidate against the original (`shlo_env.measure.sequential_test`)
    acceptance: str = ""  # its decision: "accept", "reject", "undecided" ("" when it did not run)
    accept_ratio: float = math.nan  # its estimate of T(best) / T(original)
    accept_lower: float = math.nan  # its confidence bounds on that ratio (each one-sided, at the last look)
    accept_upper: float = math.nan  # accepted only when below 1
    accept_pairs: int = 0  # interleaved (original, best) rounds it timed
    accept_s: float = 0.0  # its wall clock
    applied: tuple[str, ...] = ()  # the rewrites of the returned program
    actions: tuple[option_actions.Action, ...] = ()  # XLA actions for it: DisablePass, SetOption
    numerics: str = "EXACT"  # the tier verification established
    candidates_evaluated: int = 0
    cache_hits: int = 0
    failures: dict = dataclasses.field(default_factory=dict)  # rejected candidates by FailureKind
    # candidates left without a timing, by why ("budget", "not asked"; `Evaluator.untimed`)
    untimed: dict = dataclasses.field(default_factory=dict)
    decision_space: int = 1  # decision vectors at the root (pass toggles included)
    strategy_info: dict = dataclasses.field(default_factory=dict)
    search_s: float = 0.0
    total_s: float = 0.0
    original_hash: str = ""
    # what the budget cut short, and why (fewer timing rounds or input sets for a slow program,
    # a confirmation or final measurement skipped): `Budget` sizes each step (issue 31 item 2)
    cuts: tuple[str, ...] = ()
    phases: dict = dataclasses.field(default_factory=dict)  # seconds per step, in order

    def describe_acceptance(self) -> str:
        """The paired test's outcome in words ("" when it did not run)."""
        if not self.acceptance:
            return ""
        return (f"paired test: {self.acceptance}, ratio {self.accept_ratio:.3f} (bounds {self.accept_lower:.3f}"
                f"..{self.accept_upper:.3f}) after {self.accept_pairs} pairs in {self.accept_s:.1f} s")

    @property
    def disabled_passes(self) -> tuple[str, ...]:
        """The XLA actions as text: pass names disabled, `name=value` options set."""
        return option_actions.tokens(self.actions)

    @disabled_passes.setter
    def disabled_passes(self, value) -> None:
        self.actions = option_actions.normalize(value)


@dataclasses.dataclass
class ProgramResult(SearchSummary):
    """What `optimize_program` did. Times in seconds (T: 10th percentile of the runs, see runtime); ratio = best / original."""

    requested_strategy: str = ""
    status: str = "ok"  # "ok", or "error" when the original itself could not be compiled/run
    error: str = ""
    best_hash: str = ""
    ratio: float = 1.0  # final independent measurement (1.0 exactly when the original is returned)
    final_timings: int = 0  # side-by-side timings behind `ratio` (their median; 0: the search's)
    search_ratio: float = math.nan  # the best candidate's ratio in the search
    confirm_ratio: float = math.nan  # the acceptance test's estimate (as `accept_ratio`)
    baseline: dict = dataclasses.field(default_factory=dict)  # original: {"full", "async", "compute", "runs"}
    best: dict = dataclasses.field(default_factory=dict)  # returned program, same keys
    decisions: list = dataclasses.field(default_factory=list)  # vectors from the original to the best
    # every decision vector the strategy applied, in order: [parent state key, [[dim, choice], ...]]
    # (sparse: only the non-zero choices; a vector can have hundreds of dimensions)
    trajectory: list = dataclasses.field(default_factory=list)
    verification: dict = dataclasses.field(default_factory=dict)
    timed: int = 0
    num_alternatives: int = 0
    cost_original: dict = dataclasses.field(default_factory=dict)  # XLA cost analysis (flops, bytes)
    cost_best: dict = dataclasses.field(default_factory=dict)
    # peak resident memory of this process plus its worker during the search (`shlo_env.measure.memory`)
    peak_rss_mb: float | None = None
    # Not persisted: what a caller needs to build on the result (optimize() checks the winner
    # once more in its own process on these inputs).
    program: Program | None = dataclasses.field(default=None, repr=False, compare=False)
    evaluation: object = dataclasses.field(default=None, repr=False, compare=False)
    check_inputs: list | None = dataclasses.field(default=None, repr=False, compare=False)
    check_reference: object = dataclasses.field(default=None, repr=False, compare=False)  # (ref, sensitivity)
    search_best: object = dataclasses.field(default=None, repr=False, compare=False)  # even if not kept
    stats: object = dataclasses.field(default=None, repr=False, compare=False)  # EvaluatorStats

    @property
    def identical(self) -> bool:
        """The returned program is the original (equal DAG hash, no XLA pass disabled)."""
        return self.best_hash == self.original_hash and not self.disabled_passes

    @property
    def speedup(self) -> float:
        return 1.0 / self.ratio if self.ratio > 0 else math.inf

    def record(self) -> dict:
        """The persisted fields (JSON-friendly)."""
        out = {}
        for f in dataclasses.fields(self):
            if f.name in ("program", "evaluation", "check_inputs", "check_reference", "search_best", "stats"):
                continue
            v = getattr(self, f.name)
            out[f.name] = list(v) if isinstance(v, tuple) else v
        del out["actions"]  # stored as text (the results database's column)
        out["disabled_passes"] = list(self.disabled_passes)
        out["identical"] = self.identical
        return out

    def __str__(self) -> str:
        if self.status != "ok":
            return f"{self.name}: error: {self.error}"
        what = ", ".join(list(self.applied) + [f"-{p}" for p in self.disabled_passes]) or "(original)"
        base = self.baseline.get("full", math.nan)
        how = f", the median of {self.final_timings} timings" if self.final_timings > 1 and not self.returned_original else ""
        return (f"{self.name} [{self.strategy}]: ratio {self.ratio:.3f}{how} ({what}); original "
                f"{base * 1e3:.3f} ms; threshold {self.threshold:.3f}"
                + (f"; {self.describe_acceptance()}" if self.acceptance else "")
                + (f"; {self.reason}" if self.reason else "")
                + (f"; cut short: {'; '.join(self.cuts)}" if self.cuts else ""))


class LockedWorker:
    """A `Runner` whose timing requests hold `lock` (compiles and verification runs do not):
    several searches sharing a device never time at the same moment."""

    def __init__(self, worker: Runner, lock: AbstractContextManager):
        self._worker = worker
        self._lock = lock
        self.timeout_s = worker.timeout_s

    @property
    def worker(self) -> Runner:
        """The runner whose timings this one locks."""
        return self._worker

    def like(self, worker: Runner) -> "LockedWorker":
        """`worker`, its timings holding this one's lock."""
        return LockedWorker(worker, self._lock)

    def turn(self) -> AbstractContextManager:
        """The wrapped runner's turn (`Worker.turn`), where it has one."""
        turn = getattr(self._worker, "turn", None)
        return turn() if turn is not None else contextlib.nullcontext()

    def set_inputs(self, key: str, arrays: Sequence[np.ndarray]) -> None:
        self._worker.set_inputs(key, arrays)

    def drop_inputs(self, keys: Sequence[str]) -> None:
        drop = getattr(self._worker, "drop_inputs", None)
        if drop is not None:
            drop(keys)

    def run(self, text: str, input_key: str, disabled_passes: Sequence[str] = (),
            timeout_s: float | None = None) -> list[np.ndarray]:
        return self._worker.run(text, input_key, disabled_passes, timeout_s)

    def reference(self, text: str, input_key: str, timeout_s: float | None = None,
                  perturb_ulps: float = 0.0) -> list[np.ndarray] | None:
        return self._worker.reference(text, input_key, timeout_s, perturb_ulps)

    def time(self, texts: Sequence[str], input_key: str, timing: TimingPolicy = QUICK,
             disabled_passes: Sequence[str] = (), timeout_s: float | None = None) -> list[Timing]:
        with self._lock:
            return self._worker.time(texts, input_key, timing, disabled_passes, timeout_s)

    def time_each(self, items: Sequence[tuple[str, Sequence[str]]], input_key: str,
                  timing: TimingPolicy = QUICK, timeout_s: float | None = None) -> list[Timing]:
        with self._lock:
            return self._worker.time_each(items, input_key, timing, timeout_s)

    def cost(self, text: str, disabled_passes: Sequence[str] = (), timeout_s: float | None = None) -> dict:
        return self._worker.cost(text, disabled_passes, timeout_s)

    def optimized_hlo(self, text: str, disabled_passes: Sequence[str] = (), timeout_s: float | None = None) -> str:
        return self._worker.optimized_hlo(text, disabled_passes, timeout_s)

    def close(self) -> None:
        self._worker.close()


class _RecordingContext(SearchContext):
    """A SearchContext that remembers every decision applied and how each state was first reached."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.trail: list = []
        self.parents: dict = {}

    def child(self, exp, decisions):
        state = super().child(exp, decisions)
        vec = [int(d) for d in decisions]
        if len(self.trail) < MAX_TRAJECTORY:
            self.trail.append([exp.state.key, [[i, c] for i, c in enumerate(vec) if c]])
        if state is not None and state.key != self.root.key and state.key not in self.parents:
            self.parents[state.key] = (exp.state.key, vec)
        return state

    def path_to(self, key: str) -> list:
        """The decision vectors from the root to the state `key` (first path found)."""
        path, seen = [], set()
        while key != self.root.key and key in self.parents and key not in seen:
            seen.add(key)
            key, vec = self.parents[key]
            path.append(vec)
        return path[::-1]


def _timing(t) -> dict:
    return {"full": t.full, "async": t.async_, "compute": t.compute, "runs": t.runs}


from shlo_env.search.options import SearchOptions  # noqa: E402 - declared once there (issue 29)


def optimize_program(program: Program, options: SearchOptions = SearchOptions(), *, worker: Runner | None = None,
                     device_lock: AbstractContextManager | None = None,
                     progress: bool | Progress = False) -> ProgramResult:
    """Search rewrites of `program` as `options` say; return the best verified program and how
    it was measured (see the module docstring for the steps).

    Args:
      options: what to search and how (`SearchOptions`).
      worker: a runner to reuse (it is not closed); default: a fresh `Worker` for this call.
      device_lock: a context manager held around every timing request.
      progress: show a live line on stderr (True), or report to this `Progress`.
    """
    o = options
    budget = o.budget()
    t0 = time.perf_counter()
    name = o.name or program.name
    res = ProgramResult(name=name, strategy=str(o.strategy), requested_strategy=str(o.strategy))
    res.original_hash = res.best_hash = dag_hash(program)
    own_worker = worker is None
    base_worker = worker if worker is not None else Worker(o.timeout_s)  # None: SHLO_ENV_TIMEOUT_S
    w: Runner = LockedWorker(base_worker, device_lock) if device_lock is not None else base_worker
    offered = pass_actions.resolve(o.passes) + option_actions.resolve(o.xla_options, ops=program.num_ops())
    pids = [None, getattr(base_worker, "pid", None)]  # this process and the worker's child
    for pid in pids:
        memory.reset_peak(pid)
    phases = res.phases
    cuts: list[str] = []
    mark = [t0]

    def phase(what: str) -> None:
        now = time.perf_counter()
        phases[what] = phases.get(what, 0.0) + now - mark[0]
        mark[0] = now

    try:
        # The original is compiled and run once first: its call time sizes every later step
        # (timing rounds, input sets, noise repeats) to the budget. A program that cannot be
        # compiled and run once within the budget is returned unchanged, not failed.
        try:
            call_s = _probe(w, program, o.seed, budget.hard_deadline(t0))
        except CandidateError as e:
            if time.perf_counter() >= budget.hard_deadline(t0) - 0.5:
                cuts.append(f"everything: the original's compile and first call did not end within "
                            f"{budget.hard * budget.total_s:.1f} s of the budget")
                res.reason = "the budget ran out compiling the original"
                return res
            res.status, res.error = "error", f"the original does not run in the worker: {e}"
            res.reason = res.error
            return res
        finally:
            phase("compile")
        timing, timing_cut = budget.pair_policy(o.timing, call_s)
        num_random, cut = budget.random_sets(o.num_random, call_s, int(program.example_args is not None))
        cuts += [cut] if cut else []
        pid = getattr(base_worker, "pid", None)

        def setup_s() -> float:
            """What a step costs besides its calls: the worker's start and the compiles again
            (as long as the probe took) once a request cut at the budget killed the worker."""
            return phases["compile"] if getattr(base_worker, "pid", None) != pid else 0.0
        with Evaluator(program, worker=w, num_random=num_random, seed=o.seed, timing=timing,
                       max_bytes=memory_allowance(o.budget_s)) as evaluator:
            evaluator.hard_deadline = budget.hard_deadline(t0)
            try:
                evaluator.inputs(0)  # the original's outputs on every set (they decide the sets)
                phase("originals")
                if not evaluator.verifier.informative:
                    res.reason = f"no search: {NOTHING_TO_COMPARE}"  # no comparison could fail
                    return res
                res.noise = evaluator.measure_noise(max_seconds=budget.noise_s)
                phase("noise")
                if isinstance(base_worker, Worker) and phases["compile"] >= PREFETCH_COMPILE_S:
                    evaluator.verifier.prefetch_references()  # while the patterns match
                # the first call (the probe) can be slower than later ones: the search's timing
                # is sized by the steady call time the noise measurement took
                if evaluator.baseline_s > 0:
                    call_s = evaluator.baseline_s
                    timing, timing_cut = budget.pair_policy(o.timing, call_s)
                    evaluator.timing = timing
            except CandidateError as e:
                if evaluator._budget_cut(e) is None:
                    res.status, res.error = "error", f"the original does not run in the worker: {e}"
                    res.reason = res.error
                    return res
                cuts.append(f"everything: the original's runs on the input sets and its timing against "
                            f"itself did not end within {budget.hard * budget.total_s:.1f} s of the budget")
                res.reason = "the budget ran out measuring the original"
                return res
            thr = 1.0 - o.min_gain  # a screen: the paired test decides (`_decide`)
            # an explicit ratio tightens the screen; a machine's noise profile (`NoiseModel`) does
            # not: the paired test deals with the noise, where a profile's threshold under load
            # (0.65 and below) would screen out every real gain
            external = None if isinstance(o.threshold, NoiseModel) else o.threshold
            if external is not None and not math.isnan(external):
                thr = min(thr, float(external))
            res.threshold = thr
            bar = progress if isinstance(progress, Progress) else Progress(bool(progress), label=name,
                                                                          budget_s=budget.total_s)
            cuts += [timing_cut] if timing_cut else []
            pair_s = policy_seconds(timing, call_s)
            # the search ends early enough to confirm and measure its winner within the budget
            search_deadline = min(budget.search_deadline(t0), budget.hard_deadline(t0) - max(
                budget.reserve_s(pair_s), _accept_reserve_s(call_s, budget.total_s)))
            ctx = _RecordingContext(program, resolve_patterns(o.patterns), evaluator,
                                    deadline=search_deadline, max_steps=o.max_steps,
                                    progress=bar, threshold=thr, passes=offered, seed=o.seed)
            site_order = ""
            if time.perf_counter() >= search_deadline:
                cuts.append(f"search: none, measuring the original took {time.perf_counter() - t0:.1f} s of "
                            f"the budget")
                _augment_root(ctx, time.perf_counter(), [])  # no matching: the root offers no rewrite
            else:
                _augment_root(ctx, min(search_deadline, time.perf_counter() + budget.augment_share * budget.total_s),
                              cuts)
                site_order = _measure_sites(ctx, evaluator.inputs(0), phases["compile"], call_s, budget.total_s,
                                            search_deadline - time.perf_counter(), cuts)
                phase("profile")
            root = ctx.expand(ctx.root)
            phase("expand")
            res.decision_space, res.num_alternatives = root.size, root.num_rewrites
            chosen = o.strategy if o.strategy != "auto" else auto_strategy(root)
            res.strategy = chosen if isinstance(chosen, str) else getattr(chosen, "name", str(chosen))
            if not isinstance(progress, Progress):
                bar.label = f"{res.strategy} {name}"
            searcher = get_strategy(chosen, **(o.strategy_options or {}))
            t_search = time.perf_counter()
            # no candidate's request runs into the time kept for confirming the winner: a re-time
            # with its request's set-up, or the paired test's reserve, whichever is longer
            evaluator.hard_deadline = budget.hard_deadline(t0) - max(policy_seconds(timing, call_s) + setup_s(),
                                                                     _accept_reserve_s(call_s, budget.total_s))
            try:
                best = searcher.search(ctx)
            finally:
                if not isinstance(progress, Progress):
                    bar.close(evaluator, ctx.best)
            res.search_s = time.perf_counter() - t_search
            phase("search")
            if ctx.caches.augments_cut:
                cuts.append(f"augment: matching stopped early in {ctx.caches.augments_cut} of the searched states "
                            f"(each may take {CHILD_AUGMENT_SHARE:.0%} of the search's time left)")
            res.strategy_info = _jsonable(dict(searcher.info))
            if site_order:
                res.strategy_info["site_order"] = site_order
            res.trajectory = ctx.trail
            stats = evaluator.stats
            res.candidates_evaluated, res.cache_hits, res.timed = stats.evaluated, stats.cache_hits, stats.timed
            res.failures = dict(stats.failures)
            res.untimed = evaluator.untimed()
            res.search_best, res.stats = best, stats
            res.search_ratio = best.ratio if best.ok and best.key != evaluator.original_key else math.nan

            # confirmation and the check's reference: only if they fit before the hard deadline
            # (the rest is the caller's: `optimize` builds and checks the callable in it)
            evaluator.hard_deadline = budget.hard_deadline(t0)
            res.total_s = time.perf_counter() - t0  # so far (the reason may cite it); set again at the end
            retime_s = policy_seconds(timing, max(call_s, best.time_s) if best.timed else call_s) + setup_s()
            left = budget.hard_deadline(t0) - time.perf_counter()
            if o.confirm and best.key != evaluator.original_key and best.ok and left < retime_s:
                accepted = _timed_twice_beyond_noise(res, best, o.min_gain)
                cuts.append(f"confirmation: {left:.1f} s left, a re-time takes {retime_s:.1f} s; the best "
                            + ("is taken on the search's two timings" if accepted else "candidate is not taken"))
            else:
                accepted = _decide(res, evaluator, best, root.size, thr, o.confirm, min_gain=o.min_gain,
                                   allowance_s=ACCEPT_SHARE * left - setup_s())
            phase("confirm")
            if accepted:
                res.returned_original = False
                res.program, res.evaluation = best.program, best
                res.best_hash, res.applied, res.actions = best.hash, tuple(best.applied), best.actions
                res.decisions = ctx.path_to(best.key)
                verified = best.verified
                assert verified is not None, "only verified candidates are accepted"
                res.numerics = verified.name
                c = best.comparison
                res.verification = {
                    "tier": verified.name, "claimed": best.numerics.name,
                    "input_sets": evaluator.num_input_sets,
                    "example_args": program.example_args is not None,
                    "max_error": c.max_error if c is not None else None,
                    "bound": c.bound if c is not None else None,
                    "float64_reference": verified >= Numerics.REASSOCIATE}
            else:
                _return_original(res, program)
            res.check_inputs = evaluator.inputs(0)
            if accepted and best.verified is not Numerics.EXACT:
                # float64 outputs of the original on set 0, and their sensitivity, for the caller's
                # in-process check; an EXACT winner is checked bitwise and needs none
                try:
                    res.check_reference = (evaluator.references()[0], evaluator.sensitivity(0))
                except CandidateError as e:
                    res.check_reference = (None, None)
                    if evaluator._budget_cut(e) is not None:
                        cuts.append("float64 reference for the in-process check: the hard deadline came first "
                                    "(the caller's check then keeps the original)")
                phase("reference")

            evaluator.hard_deadline = budget.deadline(t0)  # the final measurement: the whole budget
            if o.final_timing:
                final_s = policy_seconds(timing, call_s, 2 if accepted else 1) + setup_s()  # one timing at least
                if budget.left(t0) < final_s:
                    cuts.append(f"final measurement: {budget.left(t0):.1f} s left, it takes {final_s:.1f} s "
                                f"(the search's timings are reported)")
                else:
                    kept = _final_measurement(res, evaluator, w, best if accepted else None, program,
                                              max(0.5, budget.left(t0)))
                    accepted = accepted and kept
                phase("final")
            if not res.baseline:
                res.baseline = {"full": evaluator.baseline_s, "async": None, "compute": None, "runs": None}
            if accepted and not res.best:
                res.best = {"full": best.time_s, "async": None, "compute": None, "runs": None}
                res.ratio = best.ratio
            if o.cost:
                res.cost_original = _cost(evaluator, program, ())
                res.cost_best = res.cost_original if not accepted else _cost(evaluator, best.program, best.passes)
    finally:
        pids.append(getattr(base_worker, "pid", None))  # started during the search, or restarted
        res.peak_rss_mb = memory.peak_mb(sorted({p for p in pids if p is not None}) + [None])
        if own_worker:
            base_worker.close()
        res.total_s = time.perf_counter() - t0
        res.cuts = tuple(cuts)
    return res


def _accept_reserve_s(call_s: float, budget_s: float) -> float:
    """Seconds the search leaves before `Budget.hard` for the paired test of its winner: enough
    to reach the test's second look with one-round blocks (`paired_timing.seconds_to_look`),
    at most `ACCEPT_MAX_SHARE` of the budget."""
    return min(ACCEPT_MAX_SHARE * budget_s, seconds_to_look(2 * call_s, SequentialRatioTest(), 1))


def _measure_sites(ctx: SearchContext, inputs, compile_s: float, call_s: float, budget_s: float, left_s: float,
                   cuts: list[str]) -> str:
    """Order the original's sites by one profile of it (`site_heat.measured_weights`, into
    `ctx.caches.bounds`) when it fits the budget (`site_heat.affordable`); says how the sites
    are ordered. A profile that is not affordable or fails leaves the static weights."""
    augmented, alts = ctx.caches.augmented[ctx.root.hash]
    if not alts:
        return ""
    ok, why = site_heat.affordable(compile_s, call_s, budget_s, left_s)
    if not ok:
        cuts.append(f"site order: static estimate ({why})")
        return "static"
    try:
        bounds = site_heat.measured_weights(augmented, len(alts), inputs)
    except Exception as e:  # noqa: BLE001 - a profile that fails or does not map leaves the static order
        return f"static (the profile failed: {type(e).__name__}: {str(e)[:120]})"
    ctx.caches.bounds[ctx.root.hash] = bounds
    with ir_scope():
        kept = site_heat.measured_order(bounds, site_heat.site_weights(alts))
    return f"measured: {len(kept)} of {len(bounds)} sites above {site_heat.NEGLIGIBLE_SHARE:.1%} of the time"


def _augment_root(ctx: SearchContext, deadline: float, cuts: list[str]) -> None:
    """Augment the original once, matching until `deadline` (the expansion of the root then
    reads it from the shared caches); a cut is recorded with the share of ops matched."""
    if ctx.root.hash in ctx.caches.augmented:
        return
    stats = AugmentStats()
    augmented = augment(ctx.original, list(ctx.patterns), stats=stats, deadline=deadline)
    ctx.caches.augmented[ctx.root.hash] = (augmented, list_alternatives(augmented))
    ctx.caches.expansions += 1
    if stats.cut:
        cuts.append(f"augment: patterns matched on the first {stats.scanned} of {stats.ops} ops "
                    f"(its share of the budget ran out)")


def _probe(worker: Runner, program: Program, seed: int, deadline: float) -> float:
    """Compile the original and run it once (on input set 0's arrays) before `deadline`; its
    call time in seconds. The worker keeps the executable: the search's runs reuse it."""
    key = f"{dag_hash(program)}-probe"
    arrays = list(program.example_args) if program.example_args is not None else \
        runtime.random_inputs(program.in_specs, seed)
    worker.set_inputs(key, arrays)
    try:
        (t,) = worker.time([program.text()], key, PROBE, timeout_s=max(0.5, deadline - time.perf_counter()))
    finally:
        drop = getattr(worker, "drop_inputs", None)
        if drop is not None:
            drop([key])
    return float(t.full)


def _decide(res: ProgramResult, evaluator: Evaluator, best, space: int, thr: float, confirm: bool, *,
            min_gain: float = 0.01, allowance_s: float = 0.0) -> bool:
    """Accept the search's best only if verified, its one-shot timing is below the original's,
    and the sequential paired test against the original accepts it within `allowance_s`
    (the test's minimum gain `min_gain`); `confirm=False`: the screen (`thr`) alone decides."""
    if best.key == evaluator.original_key or not best.ok:
        regions = int(res.strategy_info.get("region_candidates", 0))
        judged = f"{regions} region candidates judged; " if regions else ""
        res.reason = ("no pattern matched" if space <= 1 else
                      "no candidate was verified faster than the original" if res.candidates_evaluated
                      else f"the search evaluated no whole-program candidate in its {res.search_s:.1f} s ({judged}"
                           f"after {res.total_s - res.search_s:.1f} s timing the original against itself "
                           f"and expanding it)")
        if res.untimed:
            res.reason += "; not timed: " + ", ".join(f"{n} candidate{'s' if n > 1 else ''} ({why})"
                                                      for why, n in sorted(res.untimed.items()))
        return False
    # The paired test decides, so any best that looked faster at all goes to it: a real 2 % gain
    # fails a 0.97 screen. Without the test (`confirm=False`) the screen alone decides.
    gate = 1.0 if confirm else thr
    if not accepts(best.ratio, best.median_ratio, gate):
        res.reason = (f"best candidate ratio {best.ratio:.3f} (median per call {best.median_ratio:.3f}) "
                      + (f"is within noise (threshold {thr:.3f})" if not confirm else
                         "is not below the original's"))
        return False
    if not confirm:
        return True
    if not allowance_s > 0:
        res.reason = "no time left for the paired test of the best candidate"
        return False
    try:
        test = evaluator.paired_test(best, allowance_s, SequentialRatioTest(alpha=ACCEPT_ALPHA, min_gain=min_gain))
    except CandidateError as e:  # out of time (a slow compile, a late search): what the search measured
        return _untimed_again(res, best, min_gain, e)
    res.acceptance, res.accept_pairs, res.accept_s = str(test.decision), test.pairs, test.seconds
    res.accept_ratio = res.confirm_ratio = test.ratio
    res.accept_lower, res.accept_upper = test.lower, test.upper
    if test.decision is Decision.UNDECIDED:
        return _beyond_noise_twice(res, evaluator, best, test, min_gain, allowance_s)
    if test.decision is not Decision.ACCEPT:
        res.reason = (f"the paired test did not accept the best candidate (one-shot ratio {best.ratio:.3f}): "
                      "it is not faster by the minimum gain (the original is kept)")
        return False
    return True


def _twice_the_noise(res: ProgramResult, min_gain: float) -> float:
    """The earlier rule's threshold: a ratio beyond twice the measured noise, and `min_gain`."""
    return 1.0 - max(min_gain, 2.0 * res.noise) if not math.isnan(res.noise) else 1.0 - min_gain


def _timed_twice_beyond_noise(res: ProgramResult, best, min_gain: float) -> bool:
    """With no time left for the paired test or a re-time (a search's last evaluation ran
    late), the earlier rule on what the search measured: a best it timed twice (`confirmed`,
    its ratio the slower of the two) with both ratios beyond twice the noise is taken (a 5x
    conv rewrite was lost this way); anything less keeps the original."""
    thr = _twice_the_noise(res, min_gain)
    if best.confirmed and accepts(best.ratio, best.median_ratio, thr):
        res.acceptance = "accept (beyond noise in the search's two timings; no time left for the paired test)"
        return True
    res.reason = (f"no time left to confirm the best candidate (ratio {best.ratio:.3f}, "
                  + ("timed once" if not best.confirmed else f"not beyond twice the noise: threshold {thr:.3f}")
                  + ")")
    return False


def _untimed_again(res: ProgramResult, best, min_gain: float, error: CandidateError) -> bool:
    """The best could not be timed again within the budget: `_timed_twice_beyond_noise` decides
    (a 4.7x conv rewrite of a 30 ms program was lost to a 1 s timeout of its paired test)."""
    if _timed_twice_beyond_noise(res, best, min_gain):
        return True
    res.reason = f"best candidate could not be timed again ({error}); {res.reason}"
    return False


def _beyond_noise_twice(res: ProgramResult, evaluator: Evaluator, best, test, min_gain: float,
                        allowance_s: float) -> bool:
    """Where the budget leaves the paired test undecided (a slow program, a small budget), the
    earlier rule decides: the screening timing and a second, independent one (the test's own
    pairs) both beyond twice the measured noise. It takes large gains the test had no time to
    prove and never a gain inside the noise; the report says which rule decided."""
    thr = _twice_the_noise(res, min_gain)
    again = test.time_b_s / test.time_a_s if test.time_a_s > 0 else math.nan
    if math.isnan(again):
        try:
            again, _ = evaluator.retime_ratios(best)
        except CandidateError as e:
            return _untimed_again(res, best, min_gain, e)
    res.confirm_ratio = again
    if accepts(best.ratio, best.median_ratio, thr) and again < thr:
        res.acceptance = "accept (beyond noise twice; the paired test was undecided)"
        return True
    res.reason = (f"the paired test was undecided in its {allowance_s:.1f} s and the best candidate is not "
                  f"beyond twice the noise in two timings ({best.ratio:.3f}, then {again:.3f}; threshold "
                  f"{thr:.3f}): the original is kept")
    return False


def _return_original(res: ProgramResult, program: Program) -> None:
    """`res` returns the original: no rewrite, no XLA action, nothing for the caller to check."""
    res.returned_original, res.program, res.evaluation = True, program, None
    res.best_hash, res.applied, res.actions, res.decisions = res.original_hash, (), (), []
    res.numerics, res.check_reference = "EXACT", None
    res.verification = {"tier": "EXACT", "input_sets": 0, "note": "the original itself"}


def _side_by_side(evaluator: Evaluator, worker, best, timeout_s: float | None):
    """One timing request of the original and `best` (with its XLA actions) on input set 0."""
    key = evaluator.verifier.keys[0]
    base = (evaluator.baseline_text, evaluator.disabled_passes)
    text = best.program.text()
    if best.actions:
        return worker.time_each([base, (text, evaluator.compile_tokens(best.actions))], key, evaluator.timing,
                                timeout_s=timeout_s)
    return worker.time([base[0], text], key, evaluator.timing, base[1], timeout_s=timeout_s)


def _final_measurement(res: ProgramResult, evaluator: Evaluator, worker, best, original: Program,
                       timeout_s: float | None = None) -> bool:
    """Time the returned program (side by side with the original when it is a rewrite), on
    the search's input set 0 (already in the worker: no second copy of a large model's inputs).
    A rewrite gets `FINAL_TIMINGS` side-by-side timings (fewer when the time left does not
    hold them) and the reported ratio is their median: the bench judges it against the noise
    profile's medians of as many self-timings (`NoiseModel.thresholds(timings=)`), which spread
    about half as wide as single ones. A median at 1 or above contradicts the paired test (the
    machine's state can change between them): the original is returned instead, with ratio
    1.0. Returns whether `best` is still the returned program."""
    try:
        if best is None:
            (t,) = worker.time([evaluator.baseline_text], evaluator.verifier.keys[0], evaluator.timing,
                               evaluator.disabled_passes, timeout_s=timeout_s)
            res.baseline = res.best = _timing(t)
            res.ratio, res.final_timings = 1.0, 1
            return False
        start = time.perf_counter()
        timings: list[tuple[float, Timing, Timing]] = []
        while len(timings) < FINAL_TIMINGS:
            t0 = time.perf_counter()
            left = None if timeout_s is None else timeout_s - (t0 - start)
            if timings and left is not None and left < (t0 - start) / len(timings):
                res.reason = (res.reason + "; " if res.reason else "") + (
                    f"the final measurement took {len(timings)} of {FINAL_TIMINGS} timings (no time left for more)")
                break
            try:
                tb, tc = _side_by_side(evaluator, worker, best, left)
            except CandidateError as e:
                if not timings:
                    raise
                res.reason = (res.reason + "; " if res.reason else "") + (
                    f"the final measurement took {len(timings)} of {FINAL_TIMINGS} timings (the next failed: {e})")
                break
            timings.append((tc.full / tb.full, tb, tc))
        ratios = [r for r, _, _ in timings]
        median = float(np.median(ratios))
        _, tb, tc = sorted(timings, key=lambda x: x[0])[(len(timings) - 1) // 2]
        res.baseline, res.best = _timing(tb), _timing(tc)
        res.ratio, res.final_timings = median, len(timings)
        if median < 1.0:
            return True
        how = (f"the paired test had accepted it at {res.accept_ratio:.3f}" if res.acceptance == "accept"
               else f"acceptance: {res.acceptance or 'the screening timing alone'}")
        _return_original(res, original)
        res.ratio = 1.0
        res.best = res.baseline
        res.reason = (f"the final timings measured the best candidate at {', '.join(f'{r:.3f}' for r in ratios)} "
                      f"(median {median:.3f}), not faster than the original ({how}): the original is kept")
        return False
    except CandidateError as e:
        res.reason = (res.reason + "; " if res.reason else "") + f"final measurement failed ({e})"
        return best is not None


def _cost(evaluator: Evaluator, program: Program, passes) -> dict:
    try:
        c = evaluator.cost(program, passes)
    except Exception as e:  # noqa: BLE001 - a missing cost is not an error of the search
        return {"error": f"{type(e).__name__}: {e}"}
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in c.items()}


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    try:
        return float(x)
    except (TypeError, ValueError):
        return str(x)


__all__ = ["LockedWorker", "ProgramResult", "SearchOptions", "SearchSummary", "optimize_program"]
