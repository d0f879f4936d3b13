"""Regional search: judge each candidate on the region it changes, assemble the local winners
on the whole program (issue 31, items 3-4).

On a 2k-op program a whole-program compile and timing per candidate allows about ten
candidates a minute. A rewrite only changes the kernels holding the ops it touches, so this
strategy judges each (site, alternative) first on that region alone (`shlo_env.rewrite.region_cut`: cut
out as a small module, before and after timed side by side in milliseconds), and spends whole
program evaluations only on what won there:

1. **Where the time is.** One profile of the original (`region.baseline` of the augmented
   root), when its estimated cost fits `Schedule.region_profile_s` of the time left, gives each site's
   bound (`region.site_bounds`: the share of the kernels it touches); sites are taken by
   decreasing bound and those under `min_time_fraction` are skipped. Without one the sites are cut
   without kernels (fusible neighbours), ordered by the runner's measured bounds when it
   profiled the original to order its sites (`SearchContext.hot_order`: the cold ones left
   out), else by site heat (`SearchContext.heat`).
2. **Region judging**, `batch` sites per round: every alternative of each site, plus one
   region-before-against-itself control per region (its own noise), on the evaluator's worker,
   or fanned out over `executor` (`region.evaluate_regions_on`) when one is given, the
   alternatives and the control of one region timed in one interleaved run. A local winner
   beats the region's noise on both its 10th-percentile and its median ratio. Regions of more
   than `max_ops` ops compile slowly, and the fallback's sites (step 4) cost a whole
   evaluation each: their sites wait until every other one is judged, and a large region is
   judged then only if the rounds so far (seconds per region op) say it costs less than a
   whole evaluation; the sweeps judge the others' rewrites. No round starts in the sweeps' time.
3. **Assembly.** The round's winners, largest predicted whole-program saving first
   (share x (1 - region ratio)), are added greedily to the current state: each combination is
   verified and timed on the whole program (`ctx.evaluate`) and kept when it passes the
   acceptance rule (`ctx.improves`) against the current state. A winner big enough to see
   leads with its rewrite: the first time a rewrite wins, it is tried at every site of the
   program that no region judged losing (a whole evaluation costs the same for one site or
   twenty, and on the zoo the gains were in rewrites taken at many sites); if that is not
   kept, the rewrite's region wins did not carry over to the whole program, and neither this
   winner nor a later one of the same rewrite is tried (on keras_transformer_train the singles
   and groups of `reduce_of_product_to_dot` after its failed lead took 2-3 whole evaluations a
   run, 0.95-1.01, none a real gain). A winner predicted to save less than the rule can
   see (`1 - ctx.threshold`) is not worth a whole evaluation alone: such winners are pooled
   across rounds and tried together once their savings add up to it.
4. **Fallback.** A site whose region cannot be cut (inside a loop or conditional body, side
   effects, a failed cut or region run) is judged on the whole program instead: its singles
   are evaluated like any whole candidate, and one that passes the acceptance rule joins the
   winners. These sites come last (step 2), and stop where the sweeps' time begins.
5. **Sweeps.** When every site is judged, or when only `Schedule.sweeps_s` of the time after the
   profile is left (judging and assembly stop there), each rewrite taken at all its sites at
   once (`SearchContext.sweeps`; not those a winner led) is added to the current state and
   judged on the whole program like a winner: a gain spread
   thinly over many sites (2-4 % from one elementwise rewrite at 19 sites of a ResNet, 9 % from
   one at 32 sites of a BERT train step) is inside each region's noise, not the whole's. Those
   whose region results summed over the judged sites (share x (1 - region ratio), winners or
   not) predict a saving go first, best first; then those not judged (hottest first); those
   predicted to lose last.

Final acceptance stays the runner's, on the whole program; the strategy returns `ctx.best`.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from shlo_env.rewrite import region_cut
from shlo_env.measure import region_inputs, region_timing
from shlo_env.rewrite.region_cut import Candidate, Region, RegionError
from shlo_env.measure.region_timing import RegionResult
from shlo_env.execute.runners import CandidateError
from shlo_env.search.base import Expansion, SearchContext, State, Strategy, register_strategy, sweep_label
from shlo_env.measure.timing_policy import policy_seconds
from shlo_env.search.evaluator import Evaluation
from shlo_env.search import site_heat
from shlo_env.search.schedule import Schedule
from shlo_env.ir.program import ir_scope
from shlo_env.patterns.loop_analysis import has_dynamic_loop

#: Estimated seconds to compile one StableHLO op in-process (the profile's compile), measured
#: under load on the 2-core dev machine (4,531 ops: about 20 s).
COMPILE_S_PER_OP = 0.005


class Winner(NamedTuple):
    """A (site, choice) that won locally, with its predicted whole-program saving."""

    saving: float  # predicted: share x (1 - region ratio); measured 1 - ratio for a fallback
    site: int
    choice: int
    label: str
    ratio: float  # region ratio (whole ratio for a fallback)


@register_strategy
class Regional(Strategy):
    name = "regional"

    def __init__(self, batch: int = 8, min_time_fraction: float = region_cut.NEGLIGIBLE_TIME_FRACTION, local_gain: float = 0.02,
                 profile: bool | None = None, boundary: bool = False,
                 executor: Any = None, max_ops: int = 150,
                 compile_helpers: int | None = None, **aim):
        """`profile`: None (when affordable), True (always), False (never). `boundary`: region
        inputs from one compile of the original with the boundaries as outputs (exact values)
        instead of random ones (no whole compile). `executor`: a `shlo_env.bench.executors`
        executor to fan region compiles out over (default: the evaluator's worker). Regions
        of more than `max_ops` ops, constants not counted (slow to compile), wait until every
        smaller one is judged.
        `compile_helpers`: worker processes besides the evaluator's that compile regions at the
        same time as it (timings stay one at a time, with no compile running); None: one on a
        CPU machine of two or more cores when the evaluator's runner is a worker process."""
        super().__init__(**aim)
        if batch < 1:
            raise ValueError(f"batch must be at least 1, got {batch}")
        if not 0 <= local_gain < 1:
            raise ValueError(f"local_gain must be in [0, 1), got {local_gain}")
        self.batch = batch
        self.min_time_fraction = min_time_fraction
        self.local_gain = local_gain
        self.profile = profile
        self.boundary = boundary
        self.executor = executor
        self.max_ops = max_ops
        if compile_helpers is not None and compile_helpers < 0:
            raise ValueError(f"compile_helpers must be at least 0, got {compile_helpers}")
        self.compile_helpers = compile_helpers
        self.helpers: list[Any] = []  # runners that compile regions beside the evaluator's
        self._dynamic_loop: dict[str, bool] = {}  # per original (hash): a loop of run-time trip count
        self.helper_workers: list[Any] = []  # their processes (closed when the judging ends)

    # --- the search ---------------------------------------------------------------------------

    def search(self, ctx: SearchContext) -> Evaluation:
        t0 = time.perf_counter()
        start = self.begin(ctx)
        counts = dict(region_candidates=0, region_controls=0, region_failed=0, fallback_sites=0,
                      whole_candidates=0, winners=0, assembled=0, sites_judged=0, left_to_sweeps=0)
        self.info.update(counts, profile="none", fallback_reasons={})
        self._reset()
        if ctx.run.swept is not None and ctx.run.swept.evaluate_s > 0:
            # the first sweep's whole-program evaluation: `_fits` starts none that cannot end
            self.whole_s.append(ctx.run.swept.evaluate_s)
        evaluated0 = ctx.evaluator.stats.evaluated
        exp = ctx.expand(start)
        if exp.num_rewrites == 0 or exp.augmented is None:
            return ctx.best
        aug = exp.augmented
        with self._timer("profile"):
            prof = self._profile(ctx, aug, exp.state.hash)
        with self._timer("order"):
            sites, bounds = self._order(ctx, exp, aug, prof)
        self.info["sites"] = len(sites)
        state, ratio = start, self.start_ratio(ctx, start)
        vec = [0] * len(exp.dims)
        self.reserve = self._sweeps_reserve(ctx)  # the sweeps' (step 5)
        self.helpers = self._start_helpers(ctx)
        try:
            for todo, defer in ((sites, True), (self.deferred, False)):
                for i in range(0, len(todo), self.batch):
                    if ctx.out_of_time() or self._whole_time_left(ctx) < self.reserve:
                        break
                    chunk = todo[i:i + self.batch]
                    winners = self._judge(ctx, exp, aug, chunk, bounds, prof, counts, defer)
                    with self._timer("assemble"):
                        state, ratio, vec = self._assemble(ctx, exp, winners, state, ratio, vec, counts)
        finally:
            self._close_helpers()
        if not ctx.out_of_time():
            with self._timer("sweeps"):
                state, ratio, vec = self._sweep(ctx, exp, state, ratio, vec, counts)
        counts["deferred"] = len(self.deferred)
        counts["pool_left"] = len(self.pool)
        counts["whole_candidates"] = ctx.evaluator.stats.evaluated - evaluated0
        elapsed = time.perf_counter() - t0
        self.info.update(counts, search_s=round(elapsed, 2), spent_s={k: round(v, 2) for k, v in self.spent.items()},
                         region_s=round(self.region_cost[0], 3),
                         per_minute=round(60 * (counts["region_candidates"] + counts["whole_candidates"])
                                          / max(elapsed, 1e-9), 1))
        return ctx.best

    @property
    def evidence(self) -> dict[str, float]:
        """Pattern -> predicted saving summed over its judged sites."""
        return {label: sum(at.values()) for label, at in self.evidence_at.items()}

    def _reset(self) -> None:
        """What one search accumulates, empty."""
        self.spent: dict[str, float] = {}  # seconds per step (profile, order, cut, regions, whole)
        self.whole_s: list[float] = []  # seconds per whole-program evaluation in the assembly and sweeps
        self.cutter: region_cut.RegionCutter | None = None  # one graph of the program for every batch
        self.deferred: list[int] = []  # sites whose region is large: judged last
        self.deferred_ops: dict[int, int] = {}  # deferred site -> ops of its region counted (0: not oversize)
        self.region_cost = [0.0, 0]  # seconds and region ops of the judging rounds so far
        self.pool: list[Winner] = []  # winners each too small to try alone (`_assemble`)
        self.evidence_at: dict[str, dict[int, float]] = {}  # pattern -> site -> predicted saving there
        self.doubtful: set[int] = set()  # sites whose regions predicted a saving a refuted lead did not give
        self.losing: set[tuple[int, int]] = set()  # (site, choice) whose region lost beyond its noise
        self.led: set[str] = set()  # rewrites a winner led at all their sites (`_lead`)
        self.refuted: set[str] = set()  # of those, the ones whose lead was not kept
        self.reserve = 0.0  # seconds kept for the sweeps (step 5), set once the profile is taken

    @contextlib.contextmanager
    def _timer(self, step: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self.spent[step] = self.spent.get(step, 0.0) + time.perf_counter() - t

    def _start_helpers(self, ctx: SearchContext) -> list[Any]:
        """The compile helpers (see `__init__`), started now: their jax import overlaps the cut."""
        from shlo_env.execute import runtime
        from shlo_env.execute.runners import LockedWorker
        from shlo_env.execute.worker import Worker

        runner = ctx.evaluator.worker
        base = runner.worker if isinstance(runner, LockedWorker) else runner
        n = self.compile_helpers
        if n is None:
            cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
            n = int(isinstance(base, Worker) and cores >= 2 and runtime.platform() == "cpu")
        if self.executor is not None or n == 0:
            return []
        self.helper_workers = [Worker(getattr(base, "timeout_s", None)).start() for _ in range(n)]
        self.info["compile_helpers"] = n
        return [runner.like(w) if isinstance(runner, LockedWorker) else w for w in self.helper_workers]

    def _close_helpers(self) -> None:
        for w in self.helper_workers:
            w.close()
        self.helpers, self.helper_workers = [], []

    # --- 1. where the time is -----------------------------------------------------------------

    def profile_estimate_s(self, ctx: SearchContext) -> float:
        """One profile's seconds, sized from the program: its ops' compile, a few calls and,
        where a loop's trip count is known only at run time, the traced call's worst case
        (the trip counts it would take are not known before the call)."""
        call_s = ctx.evaluator.baseline_s if ctx.evaluator.baseline_s > 0 else 0.0
        key = ctx.root.hash
        if key not in self._dynamic_loop:
            with ir_scope():
                self._dynamic_loop[key] = has_dynamic_loop(ctx.original.module.operation)
        traced = site_heat.TRACED_CALLS * call_s if self._dynamic_loop[key] else 0.0
        return COMPILE_S_PER_OP * ctx.original.num_ops() + 6 * call_s + traced

    def profile_skip(self, ctx: SearchContext) -> str:
        """A large program's profile costs what judging a dozen regions does (a BERT train step:
        11-12 s of a 60 s budget), and its kernels are not used to cut regions there: the sites
        are judged in static order instead, as before the program search profiled."""
        if self.profile is not None:
            return "" if self.profile else "the regional strategy takes no profile"
        estimate, allowed = self.profile_estimate_s(ctx), Schedule.region_profile_s(ctx.time_left())
        return f"about {estimate:.1f} s, {allowed:.1f} s allowed" if estimate > allowed else ""

    def _profile(self, ctx: SearchContext, aug, program_hash: str) -> Any:
        """One profile of the original's baseline (the one the program search took, if any), or
        None: not affordable, or it failed; then the sites are cut without kernels, ordered by
        the program search's profile when it took one (`_order`)."""
        if self.profile is False:
            return None
        # Sized from the program, even when the program search's profile is at hand: on a
        # large program, regions cut along the profile's kernels (a fusion holds many ops) are
        # large and slow to compile, and fewer sites are judged (a BERT train step: 18 sites,
        # none won, against 24 sites and 3 winners cut without kernels).
        estimate = self.profile_estimate_s(ctx)
        self.info["profile_estimate_s"] = round(estimate, 2)
        skip = self.profile_skip(ctx)
        if skip:
            self.info["profile"] = f"skipped: {skip}"
            return None
        taken = getattr(ctx.caches, "profiles", {}).get(program_hash)
        if taken is not None:
            try:
                region_cut.check_profile(aug, taken)
            except RegionError:
                taken = None
            else:
                self.info["profile"] = "ok (the program search's)"
                return taken
        t = time.perf_counter()
        ev = ctx.evaluator
        try:
            # one traced call: tracing every iteration of a loop costs seconds a call (an SDE
            # solve: 8 s traced against 11 ms untraced), and one call's kernels order the sites
            prof = site_heat.profile_original(aug, ev.inputs(0), runner=ev.worker, input_key=ev.verifier.keys[0],
                                              runs=1, warmup=1, timeout_s=max(estimate, Schedule.region_profile_s(
                                                  ctx.time_left())))
            region_cut.check_profile(aug, prof)
        except (RuntimeError, RegionError, ValueError, CandidateError) as e:
            self.info["profile"] = f"failed: {type(e).__name__}: {e}"[:200]
            return None
        self.info["profile"] = "ok"
        self.info["profile_s"] = round(time.perf_counter() - t, 2)
        ctx.caches.profiles.setdefault(program_hash, prof)  # for the report's hot kernels
        return prof

    def _order(self, ctx: SearchContext, exp: Expansion, aug, prof) -> tuple[list[int], dict[int, float]]:
        """Sites to judge, best bound first, and each site's bound (a time share)."""
        if prof is not None:
            bounds = region_cut.site_bounds(prof, aug)
            return region_cut.skip_negligible(bounds, self.min_time_fraction), bounds
        measured = ctx.measured(exp)  # the runner's profile, when it took one: kernel shares
        if measured is not None:
            self.info["order"] = "measured (the runner's profile)"
            bounds = {i: measured[i] for i in range(exp.num_rewrites)}
            return [i for i in ctx.hot_order(exp) if i < exp.num_rewrites], bounds
        heat = ctx.heat(exp)
        total = sum(heat[:exp.num_rewrites]) or 1.0
        bounds = {i: heat[i] / total for i in range(exp.num_rewrites)}
        return region_cut.order_sites(bounds), bounds

    # --- 2. region judging --------------------------------------------------------------------

    def _judge(self, ctx: SearchContext, exp: Expansion, aug, sites: Sequence[int], bounds: dict[int, float],
               prof, counts: dict, defer: bool = False) -> list[Winner]:
        """The local winners among `sites` (fallback sites judged on the whole program);
        with `defer`, sites whose region is over `max_ops` are put off (`self.deferred`), and
        without it (the deferred sites' turn) those worth a region are cut (`_worth_a_region`)."""
        if not defer:
            sites = self._worth_a_region(ctx, sites, counts)
        with self._timer("cut"):
            if self.cutter is None or self.cutter.program is not aug or self.cutter.profile is not prof:
                self.cutter = region_cut.RegionCutter(aug, prof)
            # a site in a loop body is judged on the whole program whatever its region: not cut
            # (building a body's graph took 0.1-2 s a site in an ODE solver's nested loops)
            in_body = [s for s in sites if self.cutter.in_body(s)]
            regions = self.cutter.cut([s for s in sites if s not in in_body], self.max_ops if defer else None)
        winners: list[Winner] = []
        if defer:
            self.deferred += in_body
            self.deferred_ops.update({s: 0 for s in in_body})
        else:
            for s in in_body:
                if ctx.out_of_time():
                    break
                self._note_fallback("site inside a loop or conditional body", counts)
                with self._timer("fallback"):
                    winners += self._whole_singles(ctx, exp, s, counts)
        if defer:
            # a region over `max_ops` compiles slowly, and a site judged on the whole program
            # costs a whole evaluation per alternative (13 of them took 19 s of a BERT train
            # step's 37, none a gain): both wait until every cheaper site is judged
            now: list[Region] = []
            for r in regions:
                if r.oversize or r.whole or r.in_body:
                    self.deferred.append(r.sites[0])
                    self.deferred_ops[r.sites[0]] = len(r.ops) if r.oversize else 0
                else:
                    now.append(r)
            regions = now
        cut = [r for r in regions if not (r.whole or r.in_body)]
        for r in regions:
            if r.whole or r.in_body:
                # a region cut from a loop body is one iteration alone: its ratio does not say
                # what the loop around it does, so the site is judged on the whole program
                self._note_fallback(r.reason if r.whole else "site inside a loop or conditional body", counts)
                with self._timer("fallback"):
                    winners += self._whole_singles(ctx, exp, r.sites[0], counts)
        if not cut or ctx.out_of_time():
            return winners
        # boundary inputs come from one compile for the whole batch; random ones are drawn per
        # step, for the regions judged (a batch's convolution regions took 2 s of a 16 s search
        # on the haiku ResNet18 train step, drawn for a step that time then did not allow)
        inputs = None
        if self.boundary:
            with self._timer("inputs"):
                inputs = self._inputs(ctx, aug, cut)
        # regions judged at once: a round of compiles on every worker (`region.judge_groups`)
        step = (1 + len(self.helpers)) * region_timing.COMPILES_PER_ROUND if self.helpers else 1
        for k in range(0, len(cut), step):
            if ctx.out_of_time() or self._whole_time_left(ctx) < self.reserve or (
                    self._assemblable(ctx, winners) and self._whole_time_left(ctx) < self.reserve + self._whole_estimate(ctx)):
                break  # the sweeps' time has come, or what is left before it must assemble the winners
            # each region against itself first: its own noise, then every alternative of its site
            with self._timer("inputs"):
                xs = inputs[k:k + step] if inputs is not None else self._inputs(ctx, aug, cut[k:k + step])
            todo = [(r, [Candidate(r, {})] + r.candidates(), x) for r, x in zip(cut[k:k + step], xs)]
            t = time.perf_counter()
            with self._timer("regions"):
                results_of = self._evaluate(ctx, [c for _, cands, _ in todo for c in cands],
                                            [x for _, cands, x in todo for _ in cands])
            self.region_cost[0] += time.perf_counter() - t
            self.region_cost[1] += sum(len(r.ops) for r, _, _ in todo)
            for r, cands, _ in todo:
                results, results_of = results_of[:len(cands)], results_of[len(cands):]
                counts["region_controls"] += 1
                counts["region_candidates"] += len(cands) - 1
                counts["sites_judged"] += 1
                control, rest = results[0], results[1:]
                if control.error or any(res.error for res in rest):
                    counts["region_failed"] += 1
                    errors = self.info.setdefault("region_errors", [])
                    if len(errors) < 3:  # what the report can say of why
                        errors.append(next(e for e in [control.error] + [res.error for res in rest] if e)[:200])
                    self._note_fallback("the region did not run", counts)
                    winners += self._whole_singles(ctx, exp, r.sites[0], counts)
                    continue
                self._weigh(r, control, rest, bounds)
                _note_ratios(ctx, exp, rest)
                winners += self._local_winners(r, control, rest, bounds)
        counts["winners"] += len(winners)
        return winners

    def _worth_a_region(self, ctx: SearchContext, sites: Sequence[int], counts: dict) -> list[int]:
        """The deferred `sites` whose region is expected to cost less to judge than one whole
        evaluation (the regions judged so far give seconds per op); the others are left to the
        sweeps, which judge their rewrite at every site on the whole program for one evaluation.
        On keras_transformer_train six regions of 300-500 ops took 15.6 s (a whole evaluation:
        2.2 s) and ran into the sweeps' time. Before any region was judged, a region costs what
        compiling its ops twice (before and one after) at the whole program's rate does: on
        Enzyme-JAX's nasrnn gradient every site's region was over `max_ops`, all of them were
        cut at 1.3k of the program's 1.3k ops, and 8 sites took 34 s of a 45 s search."""
        if not any(self.deferred_ops.get(s, 0) for s in sites):
            return list(sites)  # no region counted (fallback sites): nothing to weigh
        whole = self._whole_estimate(ctx)
        seconds, ops = self.region_cost
        if not ops:
            seconds, ops = 2 * whole, max(1, ctx.original.num_ops())
        keep = [s for s in sites if seconds / ops * self.deferred_ops.get(s, 0) <= whole]
        if len(keep) < len(sites):
            counts["left_to_sweeps"] += len(sites) - len(keep)
        return keep

    def _whole_estimate(self, ctx: SearchContext) -> float:
        """Seconds one whole-program evaluation takes: the mean of the assembly's so far, else
        of the evaluator's (the option screen's, a fallback's), else a guess from the program's
        size (a compile, verification and a timing)."""
        if self.whole_s:
            return sum(self.whole_s) / len(self.whole_s)
        stats = ctx.evaluator.stats
        if stats.evaluated:
            return stats.seconds / stats.evaluated
        compile_s = getattr(ctx.caches, "compile_s", 0.0)  # the probe's, measured
        if compile_s > 0:
            ev = ctx.evaluator
            call_s = getattr(ev, "baseline_s", math.nan)
            twice = 2.0 * compile_s  # the candidate's compile, then its runs and timing
            if not call_s > 0:
                return twice
            # or its compile, its runs on every input set and one timing beside the original,
            # where those are longer (a rewritten program compiles slower as often as faster)
            return max(twice, compile_s + ev.num_input_sets * call_s + policy_seconds(ev.timing, call_s))
        return COMPILE_S_PER_OP * ctx.original.num_ops()

    def _inputs(self, ctx: SearchContext, aug, regions: list[Region]) -> list:
        if self.boundary:
            try:
                return region_inputs.boundary_inputs(ctx.evaluator.worker, aug, regions)
            except (CandidateError, RegionError) as e:
                self.info["boundary"] = f"failed ({type(e).__name__}); random inputs"
        return [region_inputs.random_inputs(r, ctx.seed) for r in regions]

    def _evaluate(self, ctx: SearchContext, cands: list[Candidate], inputs: list) -> list[RegionResult]:
        if self.executor is not None:
            return region_timing.evaluate_regions_on(self.executor, cands, inputs)
        return region_timing.evaluate_regions(ctx.evaluator.worker, cands, inputs, helpers=self.helpers,
                                              deadline=ctx.request_deadline())

    def noise_margin(self, control: RegionResult) -> float:
        """How far below 1 a region ratio must be to beat this region's own noise: twice the
        control's distance from 1 (either statistic), at least `local_gain`."""
        spread = max(abs(1 - control.ratio), abs(1 - control.median_ratio))
        return max(self.local_gain, 2 * spread) if not math.isnan(spread) else math.inf

    def _local_winners(self, r: Region, control: RegionResult, results: list[RegionResult],
                       bounds: dict[int, float]) -> list[Winner]:
        """The best alternative of the region's site, if it beats the region's noise."""
        margin = self.noise_margin(control)
        share = _share(r, bounds)
        best: Winner | None = None
        for res in results:
            if not (res.ratio < 1 - margin and res.median_ratio < 1 - margin):
                continue
            (site, choice), = res.candidate.choices.items()
            w = Winner(share * (1 - res.ratio), site, choice, r.labels[site][choice], res.ratio)
            if best is None or w.saving > best.saving:
                best = w
        return [best] if best is not None else []

    def _weigh(self, r: Region, control: RegionResult, results: list[RegionResult], bounds: dict[int, float]) -> None:
        """Add each alternative's predicted saving to its pattern's evidence (winner or not);
        note those that lost beyond the region's noise (`self.losing`: left out of a lead)."""
        share = _share(r, bounds)
        margin = self.noise_margin(control)
        for res in results:
            (site, choice), = res.candidate.choices.items()
            if math.isfinite(res.ratio):
                label = r.labels[site][choice]
                at = self.evidence_at.setdefault(label, {})
                at[site] = at.get(site, 0.0) + share * (1 - res.ratio)
                if res.ratio > 1 + margin and res.median_ratio > 1 + margin:
                    self.losing.add((site, choice))

    def _note_fallback(self, reason: str, counts: dict) -> None:
        counts["fallback_sites"] += 1
        key = reason.split(":")[0][:60]
        self.info["fallback_reasons"][key] = self.info["fallback_reasons"].get(key, 0) + 1

    def _whole_singles(self, ctx: SearchContext, exp: Expansion, site: int, counts: dict) -> list[Winner]:
        """Fallback: each alternative of `site` alone, on the whole program (not into the time
        kept for the sweeps: a sweep takes the same rewrite at this site and all others)."""
        best: Winner | None = None
        for choice in range(1, exp.dims[site].num_choices):
            if ctx.out_of_time() or self._whole_time_left(ctx) < self.reserve:
                break
            vec = [0] * len(exp.dims)
            vec[site] = choice
            child = ctx.child(exp, vec)
            if child is None:
                continue
            ev = ctx.evaluate(child)
            if ctx.improves(ev) and (best is None or 1 - ev.ratio > best.saving):
                best = Winner(1 - ev.ratio, site, choice, exp.dims[site].labels[choice], ev.ratio)
        return [best] if best is not None else []

    # --- 3. assembly --------------------------------------------------------------------------

    def _assemble(self, ctx: SearchContext, exp: Expansion, winners: list[Winner], state: State, ratio: float,
                  vec: list[int], counts: dict) -> tuple[State, float, list[int]]:
        """Add the winners to the current state, largest predicted saving first; keep each
        whole-program combination that passes the acceptance rule against the current one.
        A winner predicted to save less than the rule can see (`_detectable`) is not tried
        alone: it waits in `self.pool`, and the pool is tried at once when its savings add up
        to that. Not into the time kept for the sweeps (`self.reserve`), except a lead: that is
        the sweep of a rewrite that won on a region, the best evidence any sweep has."""
        trials, self.pool = self._trials(ctx, winners)
        for group in trials:
            if ctx.out_of_time() or not self._fits(ctx):
                break
            one = group[0]
            lead = self._lead(exp, one, vec) if len(group) == 1 else None
            if lead is None and self._whole_time_left(ctx) < self.reserve:
                continue  # the sweeps' time: a lead is a sweep, with the best evidence of any
            if lead is not None:
                self.led.add(one.label)
                before = state
                state, ratio, vec = self._try(ctx, exp, lead, state, ratio, vec, counts, "assembled",
                                              f"{one.label} led by @{one.site} ({_added(vec, lead)} sites, saving "
                                              f"{one.saving:.2%} at the winner, region {one.ratio:.3f}")
                if state is before:
                    self.refuted.add(one.label)  # its region wins do not carry to the whole program
                    # nor, likely, do other rewrites' at the regions that predicted it (whole loops
                    # on a BERT train step: two unrollings predicted 5-9 %, whole 0.99-1.06)
                    self.doubtful.update(s for s, e in self.evidence_at.get(one.label, {}).items() if e > 0)
                continue
            trial = list(vec)
            for w in group:
                trial[w.site] = w.choice
            what = (f"{one.label}@{one.site} (saving {one.saving:.2%}, region {one.ratio:.3f}" if len(group) == 1
                    else f"{len(group)} winners together (saving {sum(w.saving for w in group):.2%}")
            state, ratio, vec = self._try(ctx, exp, trial, state, ratio, vec, counts, "assembled", what)
        return state, ratio, vec

    def _lead(self, exp: Expansion, w: Winner, vec: list[int]) -> list[int] | None:
        """The trial of `w`'s rewrite at every site offering it that no region judged losing,
        added to `vec`; None when that is `w` alone, or when the rewrite has led before."""
        if w.label in self.led:
            return None
        trial = list(vec)
        for i, d in enumerate(exp.dims[:exp.num_rewrites]):
            if not trial[i] and w.label in d.labels[1:]:
                k = d.labels.index(w.label, 1)
                if (i, k) not in self.losing:
                    trial[i] = k
        trial[w.site] = w.choice
        return trial if _added(vec, trial) > 1 else None

    def _fits(self, ctx: SearchContext) -> bool:
        """Whether a whole-program evaluation can end before the search's deadline: the time
        left is at least the fastest one so far (before the first, the estimate). One that
        cannot is cut at the deadline and its worker restarted, and the runner's confirmation
        then pays that restart again."""
        need = min(self.whole_s) if self.whole_s else self._whole_estimate(ctx)
        left = self._whole_time_left(ctx)
        if left >= need:
            return True
        self.info["stopped"] = f"{left:.1f} s left, a whole-program evaluation takes {need:.1f} s or more"
        return False

    @staticmethod
    def _whole_time_left(ctx: SearchContext) -> float:
        """Seconds a whole-program evaluation may take: to the search's deadline, and no later
        than the evaluator's hard deadline (its requests are cut there)."""
        hard = getattr(ctx.evaluator, "hard_deadline", None)
        left = ctx.time_left()
        return left if hard is None else min(left, hard - time.perf_counter())

    def _sweeps_reserve(self, ctx: SearchContext) -> float:
        """Seconds the judging leaves for the sweeps (`Schedule.sweeps_reserve_s`): none where
        a sweep would leave the regions next to nothing (they take the time, and a winner still
        gets its whole-program trial)."""
        return Schedule.sweeps_reserve_s(ctx.time_left(), self._whole_time_left(ctx), self._whole_estimate(ctx))

    def _detectable(self, ctx: SearchContext) -> float:
        """The smallest whole-program gain the acceptance rule takes (`ctx.threshold`): a
        predicted saving under it is, alone, one a whole-program timing cannot tell from noise
        (on the zoo's train steps, 15 single winners predicted at 0.04-2.7 % gave whole ratios
        0.96-1.09)."""
        return max(0.0, 1.0 - ctx.threshold)

    def _trials(self, ctx: SearchContext, winners: list[Winner]) -> tuple[list[list[Winner]], list[Winner]]:
        """The whole-program trials `winners` make with the pool (each big one alone, largest
        first; then the pool at once if its savings reach `_detectable`), and the pool after."""
        gain = self._detectable(ctx)
        winners = [w for w in winners if w.label not in self.refuted]
        pool = [w for w in self.pool if w.label not in self.refuted] + [w for w in winners if w.saving < gain]
        trials = [[w] for w in sorted(winners, key=lambda w: -w.saving) if w.saving >= gain]
        if pool and sum(w.saving for w in pool) >= gain:
            return trials + [pool], []
        return trials, pool

    def _assemblable(self, ctx: SearchContext, winners: list[Winner]) -> bool:
        """Whether `winners` would start a whole-program evaluation (`_assemble`)."""
        return bool(self._trials(ctx, winners)[0])

    def _sweep(self, ctx: SearchContext, exp: Expansion, state: State, ratio: float, vec: list[int],
               counts: dict) -> tuple[State, float, list[int]]:
        """Each rewrite at all its sites (where the current vector has not chosen), added to
        the current state and kept when it passes the acceptance rule (step 5)."""
        counts.setdefault("sweeps", 0)
        gain = self._detectable(ctx)
        for sweep in sorted(ctx.sweeps(exp, self.hot_first), key=lambda v: self.sweep_rank(sweep_label(exp, v), gain)):
            if ctx.out_of_time() or not self._fits(ctx):
                break
            if sweep_label(exp, sweep) in self.led:
                continue  # tried at its sites (those not judged losing) when a winner led it
            trial = [c or t for c, t in zip(vec, sweep)]
            if trial == vec:
                continue
            i = next(i for i, c in enumerate(sweep) if c)
            state, ratio, vec = self._try(ctx, exp, trial, state, ratio, vec, counts, "sweeps",
                                          f"sweep {exp.dims[i].labels[sweep[i]]} ({sum(map(bool, sweep))} sites")
        return state, ratio, vec

    def sweep_rank(self, label: str, gain: float = 0.0) -> tuple[int, float]:
        """Sweeps predicted to save at least `gain` first (most first), then those not judged,
        then those predicted to save less (most first), then the others (a stable sort keeps
        `SearchContext.sweeps`' order within a group). A saving under `gain` (`_detectable`) is
        one the whole-program timing cannot see: on the haiku ResNet18 train step, two sweeps
        whose regions' noise predicted about 0.01 % (whole 1.016, 1.017) took the time of an
        unjudged one measured at 0.75. Evidence from a doubtful site (one whose
        region predicted a refuted lead) does not count: a rewrite judged only there counts as
        not judged."""
        trusted = [v for s, v in self.evidence_at.get(label, {}).items() if s not in self.doubtful]
        e = sum(trusted) if trusted else None
        if e is None:
            return (1, 0.0)
        return (0, -e) if e > 0 and e >= gain else (2, -e) if e > 0 else (3, 0.0)

    def _try(self, ctx: SearchContext, exp: Expansion, trial: list[int], state: State, ratio: float,
             vec: list[int], counts: dict, count: str, what: str) -> tuple[State, float, list[int]]:
        """Verify and time `trial` on the whole program; the new (state, ratio, vector) if it
        passes the acceptance rule against the current state, else the current ones."""
        child = ctx.child(exp, trial)
        if child is None or child.key == state.key:
            return state, ratio, vec
        t = time.perf_counter()
        ev = ctx.evaluate(child)
        self.whole_s.append(time.perf_counter() - t)
        counts[count] += 1
        outcome = f"whole {ev.ratio:.3f}" if ev.timed else (ev.error or f"untimed: {ev.untimed}")[:120]
        self.info.setdefault("tried", []).append(f"{what}, {outcome})")
        if ctx.improves(ev, ratio):
            self.info.setdefault("taken", []).append(f"{what}, {outcome})")
            return child, ev.ratio, trial
        return state, ratio, vec


def _note_ratios(ctx: SearchContext, exp: Expansion, results: list[RegionResult]) -> None:
    """Keep each alternative's region ratio in the search's caches: what `report.explain()`
    cites for a rewrite taken, and for the patterns at a hot kernel (a context without
    caches, a test's, keeps none)."""
    ratios = getattr(getattr(ctx, "caches", None), "region_ratios", None)
    if ratios is None:
        return
    for res in results:
        (site, choice), = res.candidate.choices.items()
        ratios[(exp.state.hash, site, choice)] = res.ratio


def _added(vec: Sequence[int], trial: Sequence[int]) -> int:
    """How many sites `trial` rewrites that `vec` leaves as they are."""
    return sum(1 for c, t in zip(vec, trial) if t and not c)


def _share(r: Region, bounds: dict[int, float]) -> float:
    """The region's share of the runtime: its profiled kernels', else its site's bound."""
    return r.share if r.share is not None else bounds.get(r.sites[0], 0.0)
