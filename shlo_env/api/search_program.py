"""One program search for every front end: `search_program(program, options, cache=...)`.

`optimize` (and `shlo_env.jit` through it), `shlo-env optimize` and `shlo-env bench` all call it.
In order:

1. the persistent cache's entry for (program, options) (`shlo_env.api.cache`) is looked up; a
   hit is checked against the original on a seeded random input set (`check_cached`) and
   returned without searching;
2. with no entry, one stored by other jax/jaxlib/shlo_env versions is checked the same way and
   timed again against the original (seconds, not the minutes of a search); kept when it still
   wins;
3. otherwise the program search runs (`shlo_env.search.program_search.optimize_program`), the
   front end may confirm a winner (`optimize` checks its callable in its own process) and the
   result is stored;
4. every way ends with one line in the `shlo_env.search` log and, when asked, a dump folder
   (`shlo_env.api.dump`).

Every way returns a `ProgramResult`. The cache stores its record (`ProgramResult.to_record`) and
a hit is rebuilt from it (`from_record`): the result of a hit is the result of a search.
How the check of a hit runs the two programs is the front end's (`Replay`): by default both are
compiled in this process; `optimize` runs the callable it returns instead.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from shlo_env import logs
from shlo_env.api import cache as search_cache
from shlo_env.api import dump
from shlo_env.api.progress import SearchWatch
from shlo_env.execute import runtime
from shlo_env.execute.worker import shared as shared_worker
from shlo_env.ir.hashing import dag_hash
from shlo_env.ir.program import Program, parse_module
from shlo_env.measure.noise_thresholds import accepts
from shlo_env.measure.numerics import SENSITIVITY_ULPS, Numerics
from shlo_env.measure.timing_policy import TimingPolicy
from shlo_env.measure.verify import all_finite, escalate, finite_redraw
from shlo_env.search.program_search import optimize_program
from shlo_env.search.result import ProgramResult

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from shlo_env.execute.runners import Runner
    from shlo_env.search.options import SearchOptions

search_log = logs.get("search")
cache_log = logs.get("cache")

CACHE_CHECK_SEED = 20_240_601  # the seeded random input set a cache hit is checked on

# what `search_program` says of the cache (`optimize`'s `report.cache`, the file CLI's record)
HIT, STORED, REVALIDATED, UNCACHED = "hit", "stored", "revalidated", ""


class Replay(Protocol):
    """How the original and a cached winner run beside each other: for the check of a hit
    (outputs on flat input arrays) and for timing an entry of other versions again."""

    what: str  # the original, as the check's error names it ("the original's", "jax.jit's")

    def run_original(self, flat: Sequence[Any]) -> list: ...

    def run_chosen(self, flat: Sequence[Any]) -> list: ...

    def samples(self, timing: TimingPolicy) -> tuple[list[float], list[float]]:
        """Wall times of the original's and the chosen's runs, interleaved."""
        ...


class CompiledReplay:
    """The default `Replay`: both programs compiled in this process (`runtime.compile`), timed
    side by side on the program's example arguments, else on the seeded check set."""

    what = "the original's"

    def __init__(self, original: Program, chosen: Program, actions: Sequence[str] = ()):
        self.original = original
        self._original, self._chosen = runtime.compile(original), runtime.compile(chosen, actions)

    def run_original(self, flat: Sequence[Any]) -> list:
        return runtime.execute(self._original, flat)

    def run_chosen(self, flat: Sequence[Any]) -> list:
        return runtime.execute(self._chosen, flat)

    def samples(self, timing: TimingPolicy) -> tuple[list[float], list[float]]:
        p = self.original
        inputs = list(p.example_args) if p.example_args is not None else runtime.random_inputs(
            p.in_specs, CACHE_CHECK_SEED)
        base, chosen = runtime.compare([self._original, self._chosen], inputs, timing)
        return base.samples, chosen.samples


ReplayFactory = Callable[[Program, Program, Sequence[str]], Replay]


def search_program(program: Program, options: SearchOptions, *, cache: search_cache.SearchCache | None = None,
                   worker: Runner | None = None, warm_worker: bool = False,
                   device_lock: AbstractContextManager | None = None, progress: bool = False,
                   replay: ReplayFactory = CompiledReplay,
                   confirm: Callable[[ProgramResult], None] | None = None,
                   dump_to: str | Path | None = None) -> tuple[ProgramResult, str]:
    """The result of searching `program` with `options`, from the cache when it holds it; and
    what the cache did (`HIT`, `REVALIDATED`, `STORED`, or `UNCACHED`).

    Args:
      cache: the store to look up and write (None: neither).
      worker: a runner for the search (not closed); `warm_worker=True` lends the process's warm
        one (`shlo_env.execute.worker.shared`) for the search alone; default a fresh one.
      device_lock: held around every timing request of the search.
      progress: draw the live progress line on stderr.
      replay: how a cached winner and the original run for the check of a hit (`Replay`).
      confirm: the front end's last check of a winner the search found, before it is stored:
        it may turn `res` back to the original (`optimize`'s in-process check).
      dump_to: the dump folder (default `$SHLO_ENV_DUMP_DIR/NAME-HASH` when that is set).
    """
    start = time.perf_counter()
    name = str(options.name or program.name)
    options = options.with_(name=name)
    key = search_cache.search_key(program, options) if cache is not None else None
    found = _look_up(cache, key, program, options, replay) if cache is not None and key is not None else None
    candidates: list[dict] = []
    if found is not None:
        res, status = found
        res.total_s = time.perf_counter() - start
    else:
        watch = SearchWatch(bool(progress), name, budget_s=options.budget_s)  # the tqdm line, logs, candidates
        lend = shared_worker(options.timeout_s) if warm_worker and worker is None else contextlib.nullcontext(worker)
        try:
            with lend as runner:
                res = optimize_program(program, options.effective(), worker=runner, device_lock=device_lock,
                                       progress=watch)
        finally:
            watch.close()
        candidates = watch.candidates()
        if res.status == "ok" and not res.returned_original and confirm is not None:
            confirm(res)
        status = UNCACHED
        # only a search whose original ran is stored: a failure may be this process's
        if cache is not None and key is not None and res.status == "ok" and store_search(
                cache, cache_entry(key, res), name):
            status = STORED
    _finished(res, program, status, candidates, dump_to)
    return res, status


# --- the cache ------------------------------------------------------------------------------------

def _look_up(store: search_cache.SearchCache, key: dict, program: Program, options: SearchOptions,
             replay: ReplayFactory) -> tuple[ProgramResult, str] | None:
    """The entry of `key`, checked; else one of other versions, checked and timed again (and
    stored under `key`); else None: search."""
    entry = store.get(key)
    if entry is not None:
        try:
            res, _ = cached_result(program, entry, options, replay)
        except Exception as e:  # noqa: BLE001 - a bad entry means: search again
            _ignore(entry, e)
            return None
        return res, HIT
    stale = store.find_stale(key)
    renewed = _revalidated(program, stale, options, replay) if stale is not None else None
    if renewed is None:
        return None
    store_search(store, cache_entry(key, renewed), renewed.name)  # under this version's key
    return renewed, REVALIDATED


def _ignore(entry: search_cache.Entry, e: Exception) -> None:
    warnings.warn(f"shlo_env cache: ignoring the cached search of {entry.name} ({type(e).__name__}: {e}); "
                  f"searching again", search_cache.CacheWarning, stacklevel=5)


def cached_result(program: Program, entry: search_cache.Entry, options: SearchOptions,
                  replay: ReplayFactory = CompiledReplay) -> tuple[ProgramResult, Replay | None]:
    """The stored search as a result for `program`, after the check of its winner against the
    original (`check_cached`); with the `Replay` that ran them (None when the entry kept the
    original: nothing to check). Raises when the entry is bad or the check fails."""
    name = str(options.name or program.name)
    res = ProgramResult.from_record({"strategy": "", **stored_record(entry.report), "name": name})
    res.actions = entry.actions  # typed, as the entry holds them
    res.status, res.error = "ok", ""
    res.original_hash = dag_hash(program)
    # counts of this run: a hit evaluates nothing
    res.candidates_evaluated, res.cache_hits, res.search_s = 0, 0, 0.0
    res.failures, res.untimed = {}, {}
    if entry.program is None:
        res.returned_original, res.program, res.best_hash = True, program, res.original_hash
        return res, None
    chosen = dataclasses.replace(program, module=parse_module(entry.program, what="cached program"),
                                 applied=tuple(res.applied), name=name)
    if dag_hash(chosen) != entry.optimized_hash:
        raise ValueError("the stored program does not match its hash")
    runs = replay(program, chosen, entry.disabled_passes)
    check_cached(program, entry.numerics, runs.run_original, runs.run_chosen, runs.what)
    res.returned_original, res.program, res.best_hash = False, chosen, entry.optimized_hash
    return res, runs


def stored_record(report: dict) -> dict:
    """The `ProgramResult` record an entry holds. Entries `optimize` wrote before its cache held
    results stored its report's fields: those are read into the result's."""
    if "baseline_s" not in report:
        return dict(report)
    record = {k: v for k, v in report.items()
              if k not in ("baseline_s", "optimized_s", "median_ratio", "verification", "optimized_hash",
                           "pass_actions", "cache")}
    record["baseline"] = _finite_timing(report.get("baseline_s"))
    best = _finite_timing(report.get("optimized_s"))
    if best:
        best["median_ratio"] = report.get("median_ratio", math.nan)
    record["best"] = best
    text = report.get("verification")
    record["verification"] = {"summary": text} if isinstance(text, str) and text else {}
    return record


def _finite_timing(seconds: Any) -> dict:
    if not isinstance(seconds, (int, float)) or math.isnan(seconds):
        return {}
    return {"full": float(seconds), "async": None, "compute": None, "runs": None}


def timed(samples: Sequence[float]) -> dict:
    """A result's `baseline` / `best` dict from one program's wall times."""
    return {"full": runtime.typical(samples), "async": None, "compute": None, "runs": len(samples)}


def _revalidated(program: Program, stale: search_cache.Entry, options: SearchOptions,
                 replay: ReplayFactory) -> ProgramResult | None:
    """A search stored by other jax/jaxlib/shlo_env versions (`SearchCache.find_stale`), checked
    as a hit is and timed again here against the original: kept when it still wins by the
    screening rule (seconds), else None (the caller searches: minutes). An entry that kept the
    original is searched again: the new versions may offer something."""
    if stale.program is None:
        return None
    try:
        res, runs = cached_result(program, stale, options, replay)
        assert runs is not None  # the entry holds a program
        s_original, s_chosen = runs.samples(options.timing)
    except Exception as e:  # noqa: BLE001 - a bad entry means: search again
        _ignore(stale, e)
        return None
    baseline, best = timed(s_original), timed(s_chosen)
    ratio, median = best["full"] / baseline["full"], runtime.median_ratio(s_original, s_chosen)
    versions = {k: stale.key.get(k) for k in search_cache.VERSION_FIELDS}
    if not accepts(ratio, median, 1.0 - options.min_gain):
        cache_log.info("%s: the entry of %s no longer wins here (ratio %.3f, median %.3f): searching again",
                       res.name, versions, ratio, median)
        return None
    res.baseline, res.best, res.ratio, res.final_timings = baseline, {**best, "median_ratio": median}, ratio, 1
    cache_log.info("%s: the entry of %s re-verified and re-timed here: ratio %.3f", res.name, versions, ratio)
    return res


def cache_entry(key: dict, res: ProgramResult) -> search_cache.Entry:
    """The cache entry of a finished search: its chosen program (None when it kept the
    original), with the result's record."""
    chosen = None if res.returned_original else res.program
    return search_cache.Entry(
        key=key, name=res.name, program=None if chosen is None else chosen.text(),
        actions=() if chosen is None else res.actions, numerics=res.numerics,
        optimized_hash="" if chosen is None else dag_hash(chosen), report=res.to_record())


def store_search(store: search_cache.SearchCache, entry: search_cache.Entry, name: str) -> bool:
    """Put `entry` in `store`; False (with a CacheWarning) when the disk refuses it: a read-only
    or full disk costs the cache, not the result."""
    try:
        store.put(entry)
    except OSError as e:
        warnings.warn(f"shlo_env cache: cannot store the search of {name} in {store.directory} ({e})",
                      search_cache.CacheWarning, stacklevel=4)
        return False
    return True


def check_cached(program: Program, numerics: str, run_original: Callable, run_chosen: Callable,
                 what: str = "the original's") -> None:
    """The cheap check of a cache hit: the chosen program's outputs (`run_chosen(flat inputs)`)
    against the original's on the seeded random input set `CACHE_CHECK_SEED` (redrawn where the
    original overflows, as the search's verifier does), within the `numerics` tier the entry
    was verified in (the float64 reference only when the plain comparison does not settle it).
    Raises ValueError when they differ."""
    flat = runtime.random_inputs(program.in_specs, CACHE_CHECK_SEED)
    want = run_original(flat)
    if not all_finite(want):  # the search's verifier redraws such sets too (shlo_env.measure.verify)
        redrawn = finite_redraw(program.in_specs, CACHE_CHECK_SEED, lambda _draw, a: run_original(a))
        if redrawn is not None:
            flat, want, _ = redrawn
    got = run_chosen(flat)

    widened: dict = {}  # float64 outputs of the original, computed once, when the ladder asks

    def refs():
        if "ref" not in widened:
            widened["ref"] = runtime.reference_outputs(program, flat)
        return None if widened["ref"] is None else [widened["ref"]]

    def sensitivities():  # the original's own sensitivity, as the search's verification allows
        sens = None if widened.get("ref") is None else runtime.reference_outputs(
            program, flat, perturb_ulps=SENSITIVITY_ULPS)
        return None if sens is None else [sens]

    cmp = escalate([got], [want], Numerics.parse(numerics), refs, sensitivities, reference_free_first=True)
    if not cmp.ok:
        raise ValueError(f"outputs differ from {what}: {cmp.detail}")


# --- the log line and the dump ----------------------------------------------------------------------

def headline(res: ProgramResult) -> str:
    """The outcome in one line (the `shlo_env.search` log's)."""
    if res.status != "ok":
        outcome = f"error: {res.error}"
    elif res.returned_original:
        outcome = "returned the original unchanged"
    else:
        outcome = f"{res.speedup:.2f}x faster than the original"
    return f"optimize({res.name}) with {res.strategy}: {outcome}"


def _finished(res: ProgramResult, program: Program, status: str, candidates: list[dict],
              dump_to: str | Path | None) -> None:
    """Log the outcome and write the dump folder when one is asked for."""
    search_log.info("%s", headline(res))
    base = dump.root()
    folder = Path(dump_to) if dump_to is not None else (
        None if base is None else dump.folder_for(base, res.name, dag_hash(program)))
    if folder is None:
        return
    winner = None if res.returned_original or res.program is None else res.program
    try:
        dump.write(folder, original_text=program.text(), winner_text=None if winner is None else winner.text(),
                   report={**res.to_record(), "cache": status}, candidates=candidates)
    except OSError as e:  # a dump that cannot be written costs the dump, not the result
        warnings.warn(f"shlo_env: cannot write the dump of {res.name} under {folder} ({e})", stacklevel=4)


__all__ = ["CACHE_CHECK_SEED", "CompiledReplay", "HIT", "REVALIDATED", "Replay", "STORED", "UNCACHED",
           "cache_entry", "cached_result", "check_cached", "headline", "search_program", "store_search",
           "stored_record", "timed"]
