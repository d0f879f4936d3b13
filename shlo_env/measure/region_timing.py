"""Judging regions: before and after compiled and timed side by side (`evaluate_regions`).

- **Evaluation** (`evaluate_regions`): region-before and region-after compiled and timed side by
  side on one runner, a region's control and alternatives in one interleaved run
  (`judge_group`); `RegionResult.predicted` = 1 - share x (1 - region ratio), where share is
  the region's kernels' share of the profile's summed kernel time. `evaluate_regions_on` fans
  the compiles out over a `shlo_env.bench.executors` executor; timings hold its device lock, so they
  never overlap on one device.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from shlo_env.execute import runtime
from shlo_env.execute.runners import CandidateError, Runner
from shlo_env.measure.region_inputs import random_inputs
from shlo_env.measure.timing_policy import TimingPolicy
from shlo_env.rewrite.region_cut import Candidate, RegionError

#: Region timings: milliseconds each, so more rounds than the whole program's quick policy.
REGION_TIMING = TimingPolicy(runs=20, warmup=3, min_seconds=0.05)

# --- evaluation --------------------------------------------------------------------------------

@dataclasses.dataclass
class RegionResult:
    """One candidate judged on its region: T(after) / T(before), side by side."""

    candidate: Candidate
    ratio: float = math.nan  # 10th percentiles of the interleaved runs
    median_ratio: float = math.nan  # median of the per-call ratios
    before_s: float = math.nan
    after_s: float = math.nan
    compile_s: float = math.nan  # compiling (and running once) both versions
    error: str = ""

    @property
    def share(self) -> float | None:
        return self.candidate.region.share

    @property
    def predicted(self) -> float | None:
        """The whole program's predicted ratio: 1 - share x (1 - region ratio)."""
        share = self.share
        if share is None or math.isnan(self.ratio):
            return None
        return 1.0 - share * (1.0 - self.ratio)

    def predicted_from_time(self, whole_s: float) -> float:
        """The whole program's predicted ratio from the seconds the region gains or loses:
        1 + (T(after) - T(before)) / `whole_s`. A region's fixed call overhead cancels in the
        difference (it dilutes `ratio`), but a standalone region runs hotter in cache than
        inside the program."""
        return 1.0 + (self.after_s - self.before_s) / whole_s


def _inputs_for(c: Candidate, given, i: int) -> list[np.ndarray]:
    return list(given[i]) if given is not None else random_inputs(c.region)


def _groups(candidates: Sequence[Candidate], inputs) -> list[list[int]]:
    """Indices of consecutive candidates of one region on the same inputs: judged together."""
    groups: list[list[int]] = []
    for i, c in enumerate(candidates):
        j = groups[-1][0] if groups else None
        if j is not None and c.region is candidates[j].region and (inputs is None or inputs[i] is inputs[j]):
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def judge_group(runner: Runner, inputs: Sequence[np.ndarray], before: str, afters: Sequence[str],
                timing: TimingPolicy = REGION_TIMING, device_lock: Any = None,
                deadline: float | None = None) -> list[dict]:
    """Compile region-before and each region-after on `runner`, then time them all in one
    interleaved run (before, after 1, ..., after k, before, ...), holding `device_lock` (if
    any) for the timing only. One dict per after: `compile_s` (its compile and first run, the
    before's included), and `before`/`after` as (seconds, samples), or `error`. A before that
    does not compile or run raises (`CandidateError`): nothing of the group can be judged.

    One run for the group, not one per candidate: each run's warm-up, minimum rounds and
    request cost once per region (most of a small region's judging besides its compiles)."""
    out = compile_group(runner, inputs, before, afters, deadline=deadline)
    with device_lock if device_lock is not None else contextlib.nullcontext():
        time_group(runner, before, afters, out, timing, deadline=deadline)
    return out


def _timeout(deadline: float | None) -> float | None:
    """A request's timeout: none without a deadline, else what is left of it (half a second at
    least; a request is not started past the deadline: `judge_groups`)."""
    return None if deadline is None else max(0.5, deadline - time.perf_counter())


def compile_group(runner: Runner, inputs: Sequence[np.ndarray], before: str, afters: Sequence[str],
                  key: str = "region", deadline: float | None = None) -> list[dict]:
    """`judge_group`'s first half: the input set (as `key`), then each text compiled and run
    once, each request cut at `deadline`."""
    runner.set_inputs(key, list(inputs))
    t0 = time.perf_counter()
    runner.run(before, key, timeout_s=_timeout(deadline))
    base_s = time.perf_counter() - t0
    out: list[dict] = []
    for text in afters:
        t = time.perf_counter()
        try:
            runner.run(text, key, timeout_s=_timeout(deadline))
            out.append({"compile_s": base_s + time.perf_counter() - t})
        except CandidateError as e:
            out.append({"error": f"{type(e).__name__}: {e}"})
    return out


def time_group(runner: Runner, before: str, afters: Sequence[str], out: list[dict],
               timing: TimingPolicy = REGION_TIMING, key: str = "region", deadline: float | None = None) -> None:
    """`judge_group`'s second half: the compiled texts timed in one interleaved run, into `out`."""
    ok = [k for k, rec in enumerate(out) if "error" not in rec]
    if ok:
        tb, *tas = runner.time([before] + [afters[k] for k in ok], key, timing, timeout_s=_timeout(deadline))
        for k, ta in zip(ok, tas):
            out[k].update(before=(tb.full, list(tb.samples)), after=(ta.full, list(ta.samples)))


#: Regions each runner compiles per round of `judge_groups` (a round's compiles end together).
#: One: rounds of four judged no more regions a second (two compiles side by side already take
#: about all the cores' time), and a search that must stop judging to assemble a winner waits
#: for its round to end (on the haiku ResNet18 train step, 8 s of 19 before its paying lead)
COMPILES_PER_ROUND = 1

Job = tuple[Sequence[np.ndarray], str, Sequence[str]]  # a region's (inputs, before, afters)
JUDGING_ERRORS = (CandidateError, RegionError, ValueError)  # what fails one group, not the judging


def judge_groups(runners: Sequence[Runner], jobs: Sequence[Job], timing: TimingPolicy = REGION_TIMING,
                 per_runner: int = COMPILES_PER_ROUND, deadline: float | None = None) -> list[list[dict]]:
    """`judge_group` for several regions' groups, compiled on several runners at once.

    In rounds of `per_runner` groups per runner: each runner (a separate process, so a core of
    its own) compiles its share of the round, the longest texts spread first so the shares end
    together; when every compile of the round has ended, each group is timed on the runner that
    compiled it, one after another (a timing shares the machine with nothing of ours). A
    helper's timing also holds the first runner's turn (`Worker.turn`): another thread's
    request to it, e.g. the float64 references computed ahead, never overlaps it. A group
    whose before fails gets an error record for each of its afters. One runner: `judge_group`
    on each group in turn. No request runs past `deadline` (a region with a long loop can take
    longer than the search has left); a group not started by then gets error records."""
    import concurrent.futures as cf

    if len(runners) == 1:
        return [_judged(runners[0], job, timing, deadline) for job in jobs]
    results: list[list[dict]] = []
    hold = getattr(runners[0], "turn", None)
    pool = cf.ThreadPoolExecutor(max_workers=len(runners), thread_name_prefix="region-compile")
    finished = False
    try:
        size = len(runners) * per_runner
        for i in range(0, len(jobs), size):
            chunk = list(jobs[i:i + size])
            if _past(deadline):
                results.extend(_failed(_LATE, len(afters)) for _, _, afters in chunk)
                continue
            owner = _spread(chunk, len(runners))
            futures = [pool.submit(_compile_share, runners[n], chunk, [k for k in owner if owner[k] == n], deadline)
                       for n in range(len(runners))]
            cf.wait(futures)  # every compile of the round has ended before any timing starts
            compiled = {k: out for f in futures for k, out in f.result().items()}
            for k, (_, before, afters) in enumerate(chunk):
                r, out = runners[owner[k]], compiled[k]
                try:
                    if isinstance(out, Exception):
                        raise out
                    with hold() if hold is not None and owner[k] else contextlib.nullcontext():
                        time_group(r, before, afters, out, timing, f"region.{k}", deadline)
                except JUDGING_ERRORS as e:
                    out = _failed(e, len(afters))
                results.append(out)
            for n, r in enumerate(runners):
                drop = getattr(r, "drop_inputs", None)
                if drop is not None:
                    drop([f"region.{k}" for k in owner if owner[k] == n])
        finished = True
    finally:
        # interrupted: a compile still in flight is left to its worker (closing it ends the thread)
        pool.shutdown(wait=finished, cancel_futures=True)
    return results


def _judged(runner: Runner, job: Job, timing: TimingPolicy, deadline: float | None = None) -> list[dict]:
    inputs, before, afters = job
    if _past(deadline):
        return _failed(_LATE, len(afters))
    try:
        return judge_group(runner, inputs, before, afters, timing, deadline=deadline)
    except JUDGING_ERRORS as e:
        return _failed(e, len(afters))


_LATE = RegionError("not judged: the search's deadline came first")


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.perf_counter() >= deadline


def _failed(e: Exception, n: int) -> list[dict]:
    """The records of a group's `n` afters when judging the group failed with `e`."""
    return [{"error": f"{type(e).__name__}: {e}"}] * n


def _spread(jobs: Sequence[Job], n: int) -> dict[int, int]:
    """Job index -> runner: the longest texts first, each to the least loaded runner so far."""
    size = [len(before) + sum(map(len, afters)) for _, before, afters in jobs]
    load = [0] * n
    owner = {}
    for k in sorted(range(len(jobs)), key=lambda k: -size[k]):
        owner[k] = load.index(min(load))
        load[owner[k]] += size[k]
    return owner


def _compile_share(runner: Runner, chunk: Sequence[Job], ks: Sequence[int],
                   deadline: float | None = None) -> dict[int, list[dict] | Exception]:
    """Compile the groups `ks` of `chunk` on `runner`, one after another (a thread's work)."""
    out: dict[int, list[dict] | Exception] = {}
    for k in ks:
        inputs, before, afters = chunk[k]
        try:
            out[k] = compile_group(runner, inputs, before, afters, f"region.{k}", deadline)
        except JUDGING_ERRORS as e:
            out[k] = e
    return out


def _fill(res: RegionResult, rec: dict) -> None:
    if "error" in rec:
        res.error = rec["error"]
        return
    res.compile_s = rec["compile_s"]
    (b, bs), (a, as_) = rec["before"], rec["after"]
    res.before_s, res.after_s = b, a
    res.ratio = a / b if b > 0 else math.nan
    res.median_ratio = runtime.median_ratio(bs, as_)


def _group_texts(candidates: Sequence[Candidate], group: list[int]) -> tuple[str, list[str]]:
    region = candidates[group[0]].region
    return region.before().text(), [candidates[i].region.after(candidates[i].choices).text() for i in group]


def evaluate_regions(runner: Runner, candidates: Sequence[Candidate],
                     inputs: Sequence[Sequence[np.ndarray]] | None = None,
                     timing: TimingPolicy = REGION_TIMING, helpers: Sequence[Runner] = (),
                     deadline: float | None = None) -> list[RegionResult]:
    """Compile and time region-before against region-after for each candidate on `runner`;
    the consecutive candidates of one region on the same inputs together (`judge_group`).
    With `helpers` (runners in other processes), that many more regions compile at once
    (`judge_groups`); timings stay one at a time.

    `inputs[i]` are candidate i's region inputs (e.g. from `boundary_inputs`); default random.
    A candidate that fails gets a result with `error` set and NaN ratios; so does one whose
    requests would run past `deadline` (a `time.perf_counter()` value)."""
    results = [RegionResult(c) for c in candidates]
    jobs, judged = [], []
    for group in _groups(candidates, inputs):
        try:
            before, afters = _group_texts(candidates, group)
            jobs.append((_inputs_for(candidates[group[0]], inputs, group[0]), before, afters))
            judged.append(group)
        except (RegionError, ValueError) as e:
            for i in group:
                _fill(results[i], {"error": f"{type(e).__name__}: {e}"})
    for group, recs in zip(judged, judge_groups([runner, *helpers], jobs, timing, deadline=deadline)):
        for i, rec in zip(group, recs):
            _fill(results[i], rec)
    return results


def _region_task(task, worker, device_lock) -> dict:
    """One region's group on an executor's worker: compiles in parallel with other workers,
    the timing under the device lock. Module-level: tasks pickle it by name."""
    opts = task.options
    recs = judge_group(worker, opts["inputs"], opts["before"], opts["afters"], opts["timing"], device_lock)
    return {"name": task.name, "status": "ok", "strategy": "region", "results": recs}


def evaluate_regions_on(executor, candidates: Sequence[Candidate],
                        inputs: Sequence[Sequence[np.ndarray]] | None = None,
                        timing: TimingPolicy = REGION_TIMING) -> list[RegionResult]:
    """`evaluate_regions` over a `shlo_env.bench.executors` executor (`LocalExecutor(workers=N)` or
    `RayExecutor`): one task per region's group; compiles run in parallel, timings one at a
    time under the device lock."""
    from shlo_env.bench.executors import Task

    results = [RegionResult(c) for c in candidates]
    groups = _groups(candidates, inputs)
    tasks = []
    for n, group in enumerate(groups):
        try:
            before, afters = _group_texts(candidates, group)
        except (RegionError, ValueError) as e:
            for i in group:
                results[i].error = f"{type(e).__name__}: {e}"
            continue
        c = candidates[group[0]]
        opts = {"before": before, "afters": afters, "inputs": _inputs_for(c, inputs, group[0]), "timing": timing}
        tasks.append(Task(n, "region", "", f"region.{n}", "", "region", c.region.program, opts, _region_task))
    for rec in executor.run(tasks):
        group = groups[rec["_index"]]
        recs = rec["results"] if rec.get("status") == "ok" else [{"error": rec.get("error", "failed")}] * len(group)
        for i, r in zip(group, recs):
            _fill(results[i], r)
    return results


__all__ = ["COMPILES_PER_ROUND", "REGION_TIMING", "RegionResult", "compile_group", "evaluate_regions",
           "evaluate_regions_on", "judge_group", "judge_groups", "time_group"]
