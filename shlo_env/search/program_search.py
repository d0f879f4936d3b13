"""Program-level search: `optimize_program(program, options) -> ProgramResult`, as named phases.

The part of `optimize()` that works on a `Program` (a StableHLO module with its specs), not on a
Python function: `optimize()`, `shlo_env.jit`, the file CLI, the sweeps of `shlo-env bench` and
the strategy benchmarks all run it.

    from shlo_env.search.program_search import SearchOptions, optimize_program
    res = optimize_program(program, SearchOptions(strategy="beam", budget_s=30))
    res.ratio, res.applied, res.search_best.describe(), res.stats.hit_rate
    print(res.describe_phases())      # per phase: seconds given, spent, and what was cut

A search is one `ProgramSearch` (the run object) taken through `PHASES`, in order; each phase
reads and writes the run and returns False when the result is decided (the original kept, or
an error). One `Schedule` (`shlo_env.search.schedule`) owns every deadline and share of the
budget and records each phase; no phase holds a budget fraction of its own.

1. **probe**: the original is compiled and run once; its call time sizes the timing rounds
   and the input sets. A program that does not compile and run once in time is returned.
   While the worker's process compiles it, this process matches the patterns (step 4's work,
   recorded as augment's, "beside the probe").
2. **originals**: the original's outputs on every input set (its example inputs, if any, and
   seeded random sets); a program whose outputs are NaN everywhere is not searched.
3. **noise**: the original timed against itself; its steady call time sizes the later steps.
4. **augment**: the patterns matched on the original once (hottest sites are not first: the
   matching stops at its deadline and keeps what it found); beside the probe when the runner
   is a worker process, here otherwise (an in-process runner's compile would share the IR).
5. **profile**: one profile of the original orders the sites by their share of the run time,
   when the schedule can afford it (else the static estimate orders them).
6. **search**: a strategy (by name, or "auto" by decision-space size) runs until the
   schedule's search deadline; every candidate is verified before it is timed.
7. **acceptance**: `shlo_env.search.acceptance` decides whether the best is returned.
8. **reference**: the original's float64 outputs for the caller's in-process check.
9. **final**: the returned program timed again, `FINAL_TIMINGS` times side by side.
10. **cost**: XLA's cost analysis of the original and the returned program, and what each
    rewrite contributed and where the original's time goes (`shlo_env.search.attribution`).

`device_lock` (a context manager) is held around every timing request, so that several sweeps
sharing a device never time at the same moment, while their compiles run in parallel.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from typing import Any
from contextlib import AbstractContextManager

from shlo_env.execute import runtime
from shlo_env.execute import xla_options as option_actions
from shlo_env.execute.background import BackgroundRequest
from shlo_env.execute.runners import CandidateError, FailureKind, LockedWorker, Runner
from shlo_env.execute.worker import Worker
from shlo_env.ir.hashing import dag_hash
from shlo_env.ir.program import Program, ir_scope
from shlo_env.measure import memory
from shlo_env.measure.noise_thresholds import NoiseModel
from shlo_env.measure.numerics import Numerics
from shlo_env.measure.paired_timing import seconds_to_look
from shlo_env.measure.sequential_test import SequentialRatioTest
from shlo_env.measure.timing_policy import TimingPolicy, policy_seconds
from shlo_env.measure.verify import NOTHING_TO_COMPARE
from shlo_env.patterns.base import resolve as resolve_patterns
from shlo_env.rewrite.driver import AugmentStats, augment, list_alternatives
from shlo_env import logs
from shlo_env.search import acceptance, attribution, passes as pass_actions, site_heat
from shlo_env.search.base import Progress, SearchContext, Strategy, auto_strategy, get_strategy
from shlo_env.search.evaluator import Evaluator
from shlo_env.search.options import SearchOptions
from shlo_env.search.result import ProgramResult, SearchSummary
from shlo_env.search.schedule import Schedule

PROBE = TimingPolicy(runs=1, warmup=0)  # the original's first call: sizes the budget's steps
MAX_TRAJECTORY = 5_000  # decisions recorded per program (a long MCTS run is cut here)


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


class ProgramSearch:
    """The run object: what the phases of one program search read and write."""

    def __init__(self, program: Program, options: SearchOptions, worker: Runner | None,
                 device_lock: AbstractContextManager | None, progress: bool | Progress):
        self.program, self.options, self.progress = program, options, progress
        self.schedule = Schedule(options.budget_s, num_ops=program.num_ops())
        name = options.name or program.name
        self.res = ProgramResult(name=name, strategy=str(options.strategy), requested_strategy=str(options.strategy))
        self.res.original_hash = self.res.best_hash = dag_hash(program)
        self.own_worker = worker is None
        self.base_worker = worker if worker is not None else Worker(options.timeout_s)  # None: SHLO_ENV_TIMEOUT_S
        self.worker: Runner = (LockedWorker(self.base_worker, device_lock) if device_lock is not None
                               else self.base_worker)
        self.offered = (pass_actions.resolve(options.passes)
                        + option_actions.resolve(options.xla_options, ops=program.num_ops()))
        self.pids = [None, getattr(self.base_worker, "pid", None)]  # this process and the worker's child
        for pid in self.pids:
            memory.reset_peak(pid)
        self.timing: TimingPolicy = options.timing
        self.probe_pid: int | None = None  # the worker's process when the probe ran (started by it)
        self.exits = contextlib.ExitStack()
        self.evaluator: Evaluator = None  # type: ignore[assignment]  # from the originals phase on
        self.ctx: _RecordingContext = None  # type: ignore[assignment]  # from the augment phase on
        self.augmented: Program = None  # type: ignore[assignment]  # the original augmented (beside the probe)
        self.root: Any = None  # the root's Expansion, from the profile phase on
        self.searcher: Strategy | None = None  # the strategy, chosen in the profile phase
        self.best: Any = None  # the strategy's best Evaluation, from the search phase on
        self.accepted = False
        self.final_below = 1.0  # the final median keeps the best below this (`acceptance.left_to_the_final`)
        self.site_order = ""

    @property
    def name(self) -> str:
        return self.res.name

    def setup_s(self) -> float:
        """What a request costs besides its calls once a request cut at the budget killed the
        worker: its start and the compiles again, as long as the probe took."""
        return self.schedule.restart_s() + self.schedule.call_s if self.worker_restarted() else 0.0

    def worker_restarted(self) -> bool:
        """The worker that ran the probe was killed since (a request cut at the budget)."""
        return getattr(self.base_worker, "pid", None) != self.probe_pid

    def accept_reserve_s(self) -> float:
        """Seconds kept before the hard deadline for the paired test's second look."""
        return self.schedule.accept_reserve_s(seconds_to_look(2 * self.schedule.call_s, SequentialRatioTest(), 1))

    def keep_original(self, reason: str) -> bool:
        self.res.reason = reason
        return False

    def fail(self, error: str) -> bool:
        self.res.status, self.res.error, self.res.reason = "error", error, error
        return False

    def original_failed(self, phase: str, e: CandidateError) -> bool:
        """The original's runs or timings failed: an error, or the budget's end."""
        if self.evaluator is None or self.evaluator._budget_cut(e) is None:
            return self.fail(f"the original does not run in the worker: {e}")
        s = self.schedule
        self.schedule.cut(phase, f"the original's runs did not end within {s.hard_deadline() - s.start:.1f} s "
                                 "of the budget")
        return self.keep_original("the budget ran out measuring the original")

    def finish(self) -> None:
        """Close what the run opened and write the schedule's records into the result."""
        res, s = self.res, self.schedule
        try:
            self.exits.close()
        finally:
            self.pids.append(getattr(self.base_worker, "pid", None))  # started or restarted meanwhile
            res.peak_rss_mb = memory.peak_mb(sorted({p for p in self.pids if p is not None}) + [None])
            if self.own_worker:
                self.base_worker.close()
            res.total_s = s.elapsed()
            order = {name: i for i, (name, _) in enumerate(PHASES)}  # augment ran beside the probe
            records = sorted(s.phases, key=lambda r: order.get(r.name, len(order)))
            res.cuts, res.phases = s.cuts(), [r.to_record() for r in records]
            res.candidate_s = s.candidate_s
            res.timing = self.timing


# --- the phases, in order ------------------------------------------------------------------------

def probe(run: ProgramSearch) -> bool:
    """Compile the original and run it once: its call time sizes every later step, and its
    compile time (the worker's start not counted) the profile's and a candidate's estimates.
    While a worker process compiles it, the patterns are matched here (`_augment_beside`)."""
    s = run.schedule
    text, arrays = run.program.text(), _probe_inputs(run.program, run.options.seed)
    if not isinstance(run.base_worker, Worker):
        outcome = _compile_and_call(run, text, arrays)
    else:
        try:
            run.base_worker.start()  # here, on the main thread, so that it dies with this process
        except CandidateError as e:
            return _probe_failed(run, e)
        waiting = _probe_beside(run, text, arrays)
        t = time.perf_counter()
        _augment_beside(run)
        augment_end = time.perf_counter()
        outcome = waiting()
        s.beside("augment", augment_end - t, "probe", max(0.0, augment_end - outcome[2]))
    call_s, probe_s, _end, error = outcome
    if error is not None:
        return _probe_failed(run, error)
    s.calibrate(probe_s=probe_s, call_s=call_s)
    run.probe_pid = getattr(run.base_worker, "pid", None)
    run.timing, _ = s.pair_policy(run.options.timing)
    return True


def _probe_failed(run: ProgramSearch, error: CandidateError) -> bool:
    """The original did not compile and run once: the budget's end, or an error."""
    s = run.schedule
    if time.perf_counter() >= s.hard_deadline() - 0.5:
        s.cut("probe", f"the original's compile and first call did not end within "
                       f"{s.hard_deadline() - s.start:.1f} s of the budget")
        return run.keep_original("the budget ran out compiling the original")
    return run.fail(f"the original does not run in the worker: {error}")


def originals(run: ProgramSearch) -> bool:
    """The original's outputs on every input set (they decide which random sets are kept)."""
    s, o, program = run.schedule, run.options, run.program
    num_random, cut = s.random_sets(o.num_random, int(program.example_args is not None))
    s.cut("originals", cut)
    run.evaluator = run.exits.enter_context(Evaluator(
        program, worker=run.worker, num_random=num_random, seed=o.seed, timing=run.timing,
        max_bytes=s.memory_bytes()))
    run.evaluator.hard_deadline = s.hard_deadline()
    try:
        run.evaluator.inputs(0)
    except CandidateError as e:
        return run.original_failed("originals", e)
    if not run.evaluator.verifier.informative:
        return run.keep_original(f"no search: {NOTHING_TO_COMPARE}")  # no comparison could fail
    return True


def noise(run: ProgramSearch) -> bool:
    """The original timed against itself: the noise, and the steady call time that sizes the
    timing rounds of everything after (the probe's first call can be slower)."""
    s, ev, res = run.schedule, run.evaluator, run.res
    given = s.noise_s()
    s.record("noise").given_s = given
    try:
        res.noise = ev.measure_noise(max_seconds=given)
    except CandidateError as e:
        return run.original_failed("noise", e)
    if ev.baseline_s > 0:
        s.call_s = ev.baseline_s
    run.timing, cut = s.pair_policy(run.options.timing)
    ev.timing = run.timing
    s.cut("noise", cut)
    res.threshold = _threshold(run.options)
    return True


def augment_original(run: ProgramSearch) -> bool:
    """The patterns matched on the original once, within the schedule's deadline (unless they
    were matched beside the probe)."""
    s, o = run.schedule, run.options
    deadline = s.search_deadline(s.pair_s, run.accept_reserve_s())
    bar = run.progress if isinstance(run.progress, Progress) else Progress(
        bool(run.progress), label=run.name, budget_s=s.total_s)
    run.ctx = _RecordingContext(run.program, resolve_patterns(o.patterns), run.evaluator, deadline=deadline,
                                max_steps=o.max_steps, progress=bar, threshold=run.res.threshold,
                                passes=run.offered, seed=o.seed)
    run.ctx.caches.compile_s = s.compile_s
    if run.augmented is None:
        if time.perf_counter() >= deadline:
            s.cut("augment", f"no matching: measuring the original took {s.elapsed():.1f} s of the budget")
            until = time.perf_counter()  # the root then offers no rewrite
        else:
            until = s.augment_deadline()
            s.record("augment").given_s = max(0.0, until - time.perf_counter())
        _augment(run, until)
    ctx = run.ctx
    if ctx.root.hash not in ctx.caches.augmented:
        ctx.caches.augmented[ctx.root.hash] = (run.augmented, list_alternatives(run.augmented))
        ctx.caches.expansions += 1
    return True


def profile(run: ProgramSearch) -> bool:
    """One profile of the original orders its sites by their share of the run time, unless
    the strategy that will search says it costs more than it buys (`Strategy.profile_skip`)."""
    if run.ctx.out_of_time():
        return True
    searcher = _searcher(run)
    skip = searcher.profile_skip(run.ctx)
    if skip:
        run.schedule.cut("profile", f"sites in static order (for the {run.res.strategy} strategy: {skip})")
        run.site_order = "static"
    else:
        # the strategy's own estimate, where it has one, is sized from the program: a train
        # step's profile took 12.5 s where the probe's compile and calls predicted 9 at most
        own = getattr(searcher, "profile_estimate_s", None)
        run.site_order = measure_sites(run.ctx, run.evaluator.inputs(0), run.schedule,
                                       at_least_s=own(run.ctx) if callable(own) else 0.0)
    return True


def _searcher(run: ProgramSearch) -> Strategy:
    """The strategy that searches (chosen once, from the original's alternatives when 'auto')."""
    if run.searcher is None:
        ctx, res, o = run.ctx, run.res, run.options
        run.root = root = ctx.expand(ctx.root)
        res.decision_space, res.num_alternatives = root.size, root.num_rewrites
        chosen = o.strategy if o.strategy != "auto" else auto_strategy(root)
        res.strategy = chosen if isinstance(chosen, str) else getattr(chosen, "name", str(chosen))
        run.searcher = get_strategy(chosen, **(o.strategy_options or {}))
    return run.searcher


#: The strategy that searches on from the best state when "auto"'s choice ran out of candidates
#: with time left (an exhaustive search of a small space, a regional search of a large program):
#: its walks go deeper than one step and it ends on its own once it finds no new state.
FOLLOW_UP = "mcts"


def _ran_out(run: ProgramSearch) -> bool:
    """The search returned with much of its time left, not at its deadline."""
    return run.schedule.ended_early(run.ctx.time_left()) and not run.ctx.out_of_time()


def _strategies(run: ProgramSearch, first: Strategy) -> Strategy | None:
    """Run the strategy, then, when "auto" chose it and it ran out of candidates, `FOLLOW_UP`
    from the best state so far (the original when none beat it); returns the follow-up, if any.
    A strategy named by the user is never followed up (strategies stay comparable)."""
    ctx = run.ctx
    run.best = first.search(ctx)
    if not (_ran_out(run) and run.options.strategy == "auto" and run.res.strategy != FOLLOW_UP):
        return None
    best = ctx.best
    if best.timed and best.key != run.evaluator.original_key:
        ctx.hand_over(best)
    follow = get_strategy(FOLLOW_UP, hot_first=getattr(first, "hot_first", True), first_sweep=False,
                          screen_options=getattr(first, "screen_options", True))
    run.best = follow.search(ctx)
    return follow


def search(run: ProgramSearch) -> bool:
    """The strategy, until the search deadline; candidates' requests stop before the time kept
    for confirming the winner (a re-time with its set-up, or the paired test's reserve)."""
    ctx, s, ev, res = run.ctx, run.schedule, run.evaluator, run.res
    s.record("search").given_s = max(0.0, ctx.deadline - time.perf_counter())
    searcher = _searcher(run)
    if not isinstance(run.progress, Progress):
        ctx.progress.label = f"{res.strategy} {run.name}"
    ev.hard_deadline = s.hard_deadline() - max(s.pair_s + run.setup_s(), run.accept_reserve_s())
    if isinstance(run.base_worker, Worker) and s.prefetch_references():
        # on a thread, beside the strategy's work on the IR (started before the profile, it
        # would hold the worker the profile waits for)
        ev.verifier.prefetch_references()
    # while nothing beats the original, the time kept for confirming a winner is the search's
    ctx.open_tail(s.open_search_deadline())
    t = time.perf_counter()
    try:
        follow = _strategies(run, searcher)
    finally:
        if not isinstance(run.progress, Progress):
            ctx.progress.close(ev, ctx.best)
    best = run.best
    res.search_s = time.perf_counter() - t
    if _ran_out(run):
        who = res.strategy + (f", then {FOLLOW_UP}," if follow is not None else "")
        s.record("search").ended = f"{who} had no candidate left to try, {ctx.time_left():.0f} s before its deadline"
    if ctx.caches.augments_cut:
        s.cut("search", f"matching stopped early in {ctx.caches.augments_cut} of the searched states")
    res.strategy_info = _jsonable(dict(searcher.info))
    if follow is not None:
        res.strategy_info["follow_up"] = _jsonable({"strategy": FOLLOW_UP, **follow.info})
    if run.site_order:
        res.strategy_info["site_order"] = run.site_order
    res.trajectory = ctx.trail
    stats = ev.stats
    res.candidates_evaluated, res.cache_hits, res.timed = stats.evaluated, stats.cache_hits, stats.timed
    res.failures, res.untimed = dict(stats.failures), ev.untimed()
    res.search_best, res.stats = best, stats
    res.search_ratio = best.ratio if best.ok and best.key != ev.original_key else math.nan
    s.candidate_s = stats.seconds + float(res.strategy_info.get("region_s") or 0.0)  # whole, then region
    return True


def accept(run: ProgramSearch) -> bool:
    """Whether the best is returned (`shlo_env.search.acceptance`), within the hard deadline."""
    s, ev, res, o, best = run.schedule, run.evaluator, run.res, run.options, run.best
    ev.hard_deadline = s.hard_deadline()
    res.total_s = s.elapsed()  # so far (the reason may cite it); set again at the end
    call_s = max(s.call_s, best.time_s) if best.timed else s.call_s
    retime_s = policy_seconds(run.timing, call_s) + run.setup_s()
    left = s.hard_deadline() - time.perf_counter()
    if o.confirm and best.key != ev.original_key and best.ok and left < retime_s:
        run.accepted = acceptance.timed_twice_beyond_noise(res, best, o.min_gain)
        below = None if run.accepted or not o.final_timing else acceptance.left_to_the_final(res, best, o.min_gain)
        if below is not None:
            run.accepted, run.final_below, res.reason = True, below, ""
        s.cut("acceptance", f"{left:.1f} s left, a re-time takes {retime_s:.1f} s; the best "
                            + ("is taken on the search's two timings" if run.accepted and below is None else
                               "goes to the final timings" if run.accepted else "candidate is not taken"))
    else:
        allowance = s.accept_allowance(run.setup_s())
        s.record("acceptance").given_s = max(0.0, allowance)
        run.accepted = acceptance.decide(res, ev, best, run.root.size, res.threshold, o.confirm,
                                         min_gain=o.min_gain, allowance_s=allowance)
    if run.accepted:
        _take_best(run)
    else:
        acceptance.return_original(res, run.program)
    res.check_inputs = ev.inputs(0)
    return True


def reference(run: ProgramSearch) -> bool:
    """Float64 outputs of the original on set 0, and their sensitivity, for the caller's
    in-process check of a winner that is not EXACT (an EXACT one is checked bitwise)."""
    if not run.accepted or run.best.verified is Numerics.EXACT:
        return True
    ev, ref, sens = run.evaluator, None, None
    try:
        ref = ev.references()[0]
        sens = ev.sensitivity(0)  # a second widened run: the one a late winner most often misses
    except CandidateError as e:
        if ev._budget_cut(e) is not None:
            run.schedule.cut("reference", "the hard deadline came first: the caller's check compares "
                             + ("without the original's sensitivity" if ref is not None else "within the "
                                "tier's tolerance alone"))
    run.res.check_reference = (ref, sens)
    return True


def final(run: ProgramSearch) -> bool:
    """The returned program timed again, within what is left of the whole budget."""
    s, ev, res, best = run.schedule, run.evaluator, run.res, run.best
    ev.hard_deadline = s.deadline()
    if run.options.final_timing:
        final_s = policy_seconds(run.timing, s.call_s, 2 if run.accepted else 1) + run.setup_s()
        s.record("final").given_s = s.left()
        if s.left() < final_s:
            s.cut("final", f"{s.left():.1f} s left, it takes {final_s:.1f} s (the search's timings are reported)")
            if run.accepted and run.final_below < 1.0:  # the best had these timings for its second
                run.accepted = False
                acceptance.return_original(res, run.program)
                res.reason = f"no time left for the final timings that were to confirm the best ({res.acceptance})"
        else:
            kept = acceptance.final_measurement(res, ev, run.worker, best if run.accepted else None, run.program,
                                                max(0.5, s.left()), below=run.final_below)
            run.accepted = run.accepted and kept
    if run.accepted and not res.best:
        # the search's own pair: its two times and its ratio come from one side-by-side timing
        pair_base = best.baseline_s if math.isfinite(best.baseline_s) else ev.baseline_s
        res.baseline = {"full": pair_base, "async": None, "compute": None, "runs": None}
        res.best = {"full": best.time_s, "async": None, "compute": None, "runs": None}
        res.ratio = best.ratio
    if not res.baseline:
        res.baseline = {"full": ev.baseline_s, "async": None, "compute": None, "runs": None}
    return True


def cost(run: ProgramSearch) -> bool:
    """XLA's cost analysis (flops, bytes) of the original and the returned program, and what
    each rewrite taken contributed and where the original's time goes, as the search measured
    them (`shlo_env.search.attribution`: read from its caches, nothing timed again)."""
    res = run.res
    if run.options.cost and time.perf_counter() >= run.schedule.deadline():
        # its compiles would be cut at once, and each cut restarts the worker: seconds past the budget
        run.schedule.cut("cost", "the budget was spent: no cost analysis")
    elif run.options.cost:
        res.cost_original = _cost(run.evaluator, run.program, ())
        res.cost_best = (res.cost_original if not run.accepted
                         else _cost(run.evaluator, run.best.program, run.best.passes))
    try:
        attribution.attribute(run)
    except Exception as e:  # noqa: BLE001 - the explanation must not cost the result
        logs.get("search").info("%s: no attribution of the rewrites: %s: %s", run.name, type(e).__name__, e)
    return True


Phase = Callable[[ProgramSearch], bool]
PHASES: tuple[tuple[str, Phase], ...] = (
    ("probe", probe), ("originals", originals), ("noise", noise), ("augment", augment_original),
    ("profile", profile), ("search", search), ("acceptance", accept), ("reference", reference),
    ("final", final), ("cost", cost))


def optimize_program(program: Program, options: SearchOptions = SearchOptions(), *, worker: Runner | None = None,
                     device_lock: AbstractContextManager | None = None,
                     progress: bool | Progress = False) -> ProgramResult:
    """Search rewrites of `program` as `options` say; return the best verified program and how
    it was measured (see the module docstring for the phases).

    Args:
      options: what to search and how (`SearchOptions`).
      worker: a runner to reuse (it is not closed); default: a fresh `Worker` for this call.
      device_lock: a context manager held around every timing request.
      progress: show a live line on stderr (True), or report to this `Progress`.
    """
    run = ProgramSearch(program, options, worker, device_lock, progress)
    try:
        for name, phase in PHASES:
            with run.schedule.phase(name):
                if not phase(run):
                    break
    finally:
        run.finish()
    return run.res


# --- helpers of the phases -----------------------------------------------------------------------

def _threshold(o: SearchOptions) -> float:
    """The search's screen: `1 - min_gain`, or an explicit ratio when that is stricter. A
    machine's noise profile (`NoiseModel`) does not tighten it: the paired test deals with the
    noise, where a profile's threshold under load (0.65 and below) would screen out every gain."""
    thr = 1.0 - o.min_gain
    external = None if isinstance(o.threshold, NoiseModel) else o.threshold
    if external is not None and not math.isnan(external):
        thr = min(thr, float(external))
    return thr


def _take_best(run: ProgramSearch) -> None:
    """The result returns the search's best: its program, rewrites, actions and verification."""
    res, best, ev = run.res, run.best, run.evaluator
    res.returned_original = False
    res.program, res.evaluation = best.program, best
    res.best_hash, res.applied, res.actions = best.hash, tuple(best.applied), best.actions
    res.decisions = run.ctx.path_to(best.key)
    verified = best.verified
    assert verified is not None, "only verified candidates are accepted"
    res.numerics = verified.name
    c = best.comparison
    res.verification = {
        "tier": verified.name, "claimed": best.numerics.name, "input_sets": ev.num_input_sets,
        "example_args": run.program.example_args is not None,
        "max_error": c.max_error if c is not None else None, "bound": c.bound if c is not None else None,
        "float64_reference": verified >= Numerics.REASSOCIATE}


def measure_sites(ctx: SearchContext, inputs, schedule: Schedule, at_least_s: float = 0.0) -> str:
    """Order the original's sites by one profile of it (`site_heat.measured_sites`, into
    `ctx.caches.bounds`) when the schedule affords it (its cost estimated from the probe, or
    `at_least_s`); says how the sites are ordered. A profile that is not affordable or fails
    leaves the static weights."""
    augmented, alts = ctx.caches.augmented[ctx.root.hash]
    if not alts:
        return ""
    cost_s = max(site_heat.profile_cost_s(schedule.compile_s, schedule.call_s), at_least_s)
    ok, why = schedule.profile_allowed(cost_s)
    ctx.caches.profile_cost_s = cost_s
    if not ok:
        schedule.cut("profile", f"sites in static order ({why})")
        return "static"
    allowed = schedule.profile_timeout_s(cost_s)
    schedule.record("profile").given_s = allowed
    ev = ctx.evaluator
    try:
        bounds, prof, kernels = site_heat.measured_sites(augmented, len(alts), inputs, runner=ev.worker,
                                                         input_key=ev.verifier.keys[0], timeout_s=allowed,
                                                         runs=site_heat.profile_runs(ctx.original))
    except Exception as e:  # noqa: BLE001 - a profile that fails, runs long or does not map: static order
        if isinstance(e, CandidateError) and e.kind is FailureKind.TIMEOUT:
            schedule.cut("profile", f"stopped at {allowed:.1f} s (tracing took longer than its estimate)")
        return f"static (the profile failed: {type(e).__name__}: {str(e)[:120]})"
    ctx.caches.bounds[ctx.root.hash] = bounds
    ctx.caches.profiles[ctx.root.hash] = prof
    ctx.caches.site_kernels[ctx.root.hash] = kernels
    with ir_scope():
        kept = site_heat.measured_order(bounds, site_heat.site_weights(alts))
    return f"measured: {len(kept)} of {len(bounds)} sites above {site_heat.NEGLIGIBLE_TIME_FRACTION:.1%} of the time"


def _augment(run: ProgramSearch, deadline: float) -> None:
    """Match the patterns on the original until `deadline` (`run.augmented`; the root's
    expansion then reads it); a cut is recorded with the share of ops matched."""
    stats = AugmentStats()
    run.augmented = augment(run.program, resolve_patterns(run.options.patterns), stats=stats, deadline=deadline)
    if stats.scanned < stats.ops:
        run.schedule.cut("augment", f"patterns matched on the first {stats.scanned} of {stats.ops} ops")
    if stats.unrecorded:
        run.schedule.cut("augment", f"{stats.unrecorded} matched sites left unrecorded (the deadline came first)")


def _augment_beside(run: ProgramSearch) -> None:
    """Augment while the worker compiles the original: its share of the budget from now (the
    probe's calibration is not needed to bound it)."""
    until = run.schedule.augment_deadline()
    run.schedule.record("augment").given_s = max(0.0, until - time.perf_counter())
    _augment(run, until)


ProbeOutcome = tuple[float, float, float, Any]  # call s, probe s, when it ended, the error or None


def _compile_and_call(run: ProgramSearch, text: str, arrays: list) -> ProbeOutcome:
    """The probe's request (on whichever thread calls it): wait for the worker's start (not
    timed), then compile the original and call it once."""
    s = run.schedule
    try:
        ready = getattr(run.base_worker, "ready", None)
        if ready is not None:
            ready(max(0.5, s.hard_deadline() - time.perf_counter()))
        t = time.perf_counter()
        call_s = _probe(run.worker, run.res.original_hash, text, arrays, s.hard_deadline())
        end = time.perf_counter()
        return call_s, end - t, end, None
    except CandidateError as e:
        return math.nan, math.nan, time.perf_counter(), e


def _probe_beside(run: ProgramSearch, text: str, arrays: list) -> Callable[[], ProbeOutcome]:
    """Start the probe on a thread; the returned function waits for its outcome."""
    return BackgroundRequest(lambda: _compile_and_call(run, text, arrays), "shlo_env-probe").result


def _probe_inputs(program: Program, seed: int) -> list:
    """Input set 0's arrays: the example inputs, or the first seeded random set."""
    return list(program.example_args) if program.example_args is not None else \
        runtime.random_inputs(program.in_specs, seed)


def _probe(worker: Runner, original_hash: str, text: str, arrays: list, deadline: float) -> float:
    """Compile the original (`text`) and run it once on `arrays` before `deadline`; its call
    time in seconds. The worker keeps the executable: the search's runs reuse it."""
    key = f"{original_hash}-probe"
    worker.set_inputs(key, arrays)
    try:
        (t,) = worker.time([text], key, PROBE, timeout_s=max(0.5, deadline - time.perf_counter()))
    finally:
        drop = getattr(worker, "drop_inputs", None)
        if drop is not None:
            drop([key])
    return float(t.full)


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


__all__ = ["PHASES", "ProgramResult", "ProgramSearch", "SearchOptions", "SearchSummary", "optimize_program"]
