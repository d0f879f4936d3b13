"""Run (or resume) a sweep: every program of every dataset with every strategy, each
measurement stored in the results database as it arrives (see `shlo_env.bench`)."""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from shlo_env.bench.datasets import Item, dataset_label, load_items, short_label
from shlo_env.bench.options import DEFAULT_STRATEGY, QUICK_SUITE, BenchError, SweepOptions
from shlo_env.bench.report import SweepResult, summarize, write_reports
from shlo_env.search.options import SearchOptions
from shlo_env.measure.timing_policy import FINAL_TIMINGS

if TYPE_CHECKING:
    from shlo_env.bench.executors import Task

# measured before a sweep when the DB has no profile; programs of >= 0.1 ms (the corpus and the
# zoo, whose per-runtime thresholds the bench's verdicts use) get more self-timings
# long programs get 18 self-timings: 6 medians of three for a rewrite's final ratio (FINAL_TIMINGS)
QUICK_NOISE = dict(programs=12, repeats=6, long_repeats=18)
FULL_NOISE = dict(programs=12, repeats=21)  # `--noise-profile`, `shlo-env noise`


def measurement_config(options: SearchOptions) -> dict:
    """What a measurement depends on besides the program and the environment (its key): the
    search's result-changing options (`SearchOptions.result_key`). The noise model a sweep passes
    as `threshold` is only recorded (its profile id is in each row), so it is not in the key."""
    return options.with_(threshold=None).result_key()


def sweep(datasets: Sequence[str] = QUICK_SUITE, strategies: Sequence[str] = (DEFAULT_STRATEGY,),
          options: SweepOptions | None = None, *, log: TextIO = sys.stderr) -> SweepResult:
    """Run (or resume) a sweep and write its reports; see `shlo_env.bench`. Raises BenchError
    for an unknown strategy, before anything is measured."""
    o = options or SweepOptions()
    from shlo_env.bench import noise_profile as noise
    from shlo_env.measure import roofline
    from shlo_env.bench.executors import DeviceLock
    from shlo_env.measure.results_db import DEFAULT_PATH, ResultsDB, config_key, environment
    from shlo_env.search import strategies as known_strategies

    t0 = time.perf_counter()
    datasets = list(dict.fromkeys(datasets))
    strategies = list(dict.fromkeys(strategies))
    for s in strategies:
        if s != "auto" and s not in known_strategies():
            raise BenchError(f"unknown strategy {s!r}; choose from auto, {', '.join(known_strategies())}")
    items: list[Item] = []  # first: a bad dataset fails before anything is measured
    for ds in datasets:
        items += load_items(ds, o.limit, o.seed, o.examples_only, o.progress, log)
    env = environment()
    db = ResultsDB(o.db_path or DEFAULT_PATH)
    try:
        env_id = db.ensure_environment(env)
        # peak rates for the roofline column (measured once per environment on CPU)
        row = db.environment_row(env_id) or {}
        stored = (row.get("peak_flops"), row.get("peak_bandwidth"), row.get("peak_source"))
        with DeviceLock():
            flops, bw, source = roofline.peak_rates(env["platform"], env["device_kind"], flops=o.peak_flops,
                                                    bandwidth=o.peak_bandwidth, stored=stored)
        if flops and bw and (flops, bw) != stored[:2] and source != "configured":
            db.set_peak_rates(env_id, flops, bw, source)
        peaks = (flops, bw, source)

        # the programs and the measurements asked for (their keys do not depend on the noise model)
        configs = {s: measurement_config(o.search_options(strategy=s)) for s in strategies}
        keys = {s: config_key(c) for s, c in configs.items()}
        wanted = [(it, s) for it in items for s in strategies]
        done = db.done_keys(env_id, set(keys.values()), include_errors=not o.retry_errors)
        todo = [(it, s) for it, s in wanted if (it.dataset, it.uri, it.hash, s, keys[s]) not in done]
        resumed = len(wanted) - len(todo)

        profile = _noise_profile(db, env_id, o, bool(todo), log)
        model = noise.NoiseModel.from_profile(profile)
        print(f"noise profile {profile['id']}: pooled faster < {profile['faster']:.3f}, slower > "
              f"{profile['slower']:.3f} ({profile['samples']} self-timings, {profile['created'][:19]}); each "
              f"program gets the thresholds of the profile programs nearest its runtime "
              f"(1 ms: faster < {model.faster_at(1e-3):.3f}; a rewrite's final ratio, the median of "
              f"{FINAL_TIMINGS} timings, at 10 ms: faster < {model.faster_at(1e-2, FINAL_TIMINGS):.3f})", file=log)
        search = o.search_options(threshold=model)
        print(f"shlo-env bench: {len(items)} programs ({', '.join(short_label(dataset_label(d)) for d in datasets)}) "
              f"x {len(strategies)} strateg{'y' if len(strategies) == 1 else 'ies'} ({', '.join(strategies)}), "
              f"budget {o.budget_s:g} s each, executor {o.executor}" + (f" x{o.workers}" if o.workers else "") + "; "
              + (f"{resumed} already in {db.path}, {len(todo)} to run" if resumed else f"{len(todo)} to run"),
              file=log)

        sweep_id = None
        if todo:
            sweep_id = db.start_sweep(env_id, {"datasets": [dataset_label(d) for d in datasets],
                                               "strategies": list(strategies), "limit": o.limit, "workers": o.workers,
                                               "executor": o.executor, **measurement_config(search)},
                                      " ".join(sys.argv))
            _run(db, todo, o, _Plan(search, configs, keys, env, profile, peaks), sweep_id, log)

        # the table: every measurement of this selection, old and new
        want = {(it.dataset, it.uri, it.hash, s, keys[s]) for it, s in wanted}
        rows = [r for r in db.measurements(env_id=env_id, config_keys=set(keys.values()))
                if (r["dataset"], r["uri"], r["program_hash"], r["strategy"], r["config_key"]) in want]
        order = {(it.dataset, it.uri, s): i for i, (it, s) in enumerate(wanted)}
        rows.sort(key=lambda r: order.get((r["dataset"], r["uri"], r["strategy"]), 1 << 30))
        summary = summarize(rows, profile)
        result = SweepResult(rows, summary, profile, env, peaks, len(wanted), resumed, len(todo),
                             time.perf_counter() - t0, sweep_id=sweep_id)
        if o.out is not False:
            result.reports = write_reports(Path(o.out or "results"), result, configs, plot=o.plot, log=log)
        return result
    finally:
        db.close()


def _noise_profile(db, env_id: str, o: SweepOptions, measuring: bool, log: TextIO) -> dict:
    """The noise profile a sweep judges by: the latest of this environment, or, when there is
    none, when `o.noise_profile` asks, or when the latest is older than `o.noise_max_age_h` and
    the sweep has something to measure, a new one (a machine's noise changes within minutes:
    docs/bench.md, "The noise profile")."""
    from shlo_env.bench import noise_profile as noise
    from shlo_env.bench.executors import DeviceLock

    profile = None if o.noise_profile else db.noise_profile(env_id)
    why = ""
    if profile is not None and measuring and _age_h(profile["created"]) > o.noise_max_age_h:
        why = f"the latest ({profile['created'][:16]}) is older than {o.noise_max_age_h:g} h; "
        profile = None
    if profile is None:
        spec = dict(FULL_NOISE if o.noise_profile else QUICK_NOISE)
        if o.noise_repeats:
            spec["repeats"] = o.noise_repeats
        more = f", {spec['long_repeats']} for those of >= 0.1 ms" if spec.get("long_repeats") else ""
        print(f"{why}measuring this machine's noise profile ({spec['programs']} programs x {spec['repeats']} "
              f"self-timings{more}){'' if o.noise_profile else '; shlo-env noise measures a longer one'}", file=log)
        measured = noise.measure(noise.profile_programs(spec["programs"], o.seed), repeats=spec["repeats"],
                                 long_repeats=spec.get("long_repeats"), device_lock=DeviceLock(),
                                 progress=o.progress)
        db.add_noise_profile(env_id, measured)
        profile = db.noise_profile(env_id)
        assert profile is not None  # just stored
    return profile


def _age_h(created: str) -> float:
    """Hours since an ISO time stamp (the results database's); infinite when it does not parse."""
    import datetime

    try:
        then = datetime.datetime.fromisoformat(created)
    except (TypeError, ValueError):
        return math.inf
    if then.tzinfo is None:
        then = then.replace(tzinfo=datetime.timezone.utc)
    return (datetime.datetime.now(datetime.timezone.utc) - then).total_seconds() / 3600


@dataclasses.dataclass(frozen=True)
class _Plan:
    """What every measurement of one sweep shares besides its options."""

    search: SearchOptions  # every task's search (`_optimize_one` sets the strategy and the name)
    configs: dict[str, dict]  # strategy -> its measurement config
    keys: dict[str, str]  # strategy -> its config key
    env: dict
    profile: dict
    peaks: tuple


def _optimize_one(task: Task, worker, device_lock) -> dict:
    """The sweep's one call to the program search every front end makes (`search_program`,
    without the persistent cache: a sweep measures; its results database keeps the results),
    run by an executor in any process: the result record for one (program, strategy)."""
    from shlo_env.api import search_program as front_end

    options = task.options.with_(strategy=task.strategy, name=task.name)
    res, _ = front_end.search_program(task.program, options, cache=None, worker=worker, device_lock=device_lock)
    return res.to_record()


def _run(db, todo: list[tuple[Item, str]], o: SweepOptions, plan: _Plan, sweep_id: int, log: TextIO) -> None:
    """Measure `todo` on the executor, storing each result in `db` as it arrives."""
    from tqdm import tqdm

    from shlo_env.bench.executors import Task, make_executor
    from shlo_env.measure.results_db import measurement_row

    tasks, by_index = [], {}
    configs, keys, profile = plan.configs, plan.keys, plan.profile
    for i, (it, s) in enumerate(todo):
        tasks.append(Task(i, it.dataset, it.uri, it.name, it.hash, s, it.program, plan.search, _optimize_one))
        by_index[i] = (it, s)
    ex = make_executor(o.executor, o.workers, address=o.ray_address, timeout_s=o.timeout_s)
    bar = tqdm(total=len(tasks), desc="bench", unit="program", file=log, disable=not o.progress,
               dynamic_ncols=True, mininterval=0.5 if getattr(log, "isatty", lambda: False)() else 10.0)
    faster = errors = 0
    status = "interrupted"
    try:
        for rec in ex.run(tasks):
            it, s = by_index[rec["_index"]]
            row = measurement_row(rec, dataset=it.dataset, uri=it.uri, strategy=s, config=configs[s],
                                  cfg_key=keys[s], env=plan.env, profile=profile, peaks=plan.peaks, executor=ex.name,
                                  sweep_id=sweep_id, started_at=rec["_started_at"],
                                  finished_at=rec["_finished_at"], worker=rec.get("_worker", ""))
            db.add_measurement(row, program=it.info, replace=o.retry_errors)
            if row["status"] != "ok":
                errors += 1
            elif row["ratio"] is not None and row["ratio"] < row["faster_threshold"]:
                faster += 1
            bar.set_postfix_str(f"{it.name[:28]} {row['ratio'] if row['ratio'] is not None else float('nan'):.3f}"
                                f" | {faster} faster" + (f", {errors} errors" if errors else ""), refresh=False)
            bar.update(1)
        status = "done"
    finally:
        bar.close()
        db.finish_sweep(sweep_id, status)
        if status != "done":
            print(f"sweep interrupted; run the same command again to resume (finished measurements are in "
                  f"{db.path})", file=log)

