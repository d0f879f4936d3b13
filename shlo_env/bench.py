"""`shlo-env bench`: sweep datasets of programs, store every measurement, print the paper's Table 2.

    shlo-env bench                                   # the quick suite: examples + corpus, short budget
    shlo-env bench --dataset inst-10-20 --limit 200 --strategy pick-first beam --budget 10
    shlo-env bench --dataset path/to/my_mlir_dir --executor ray --workers 4
    shlo-env bench --noise-profile                   # re-measure this machine's noise first

For every program of every dataset and every strategy, `shlo_env.search.runner.optimize_program` runs
(noise, search with verification of every candidate, confirmation, a final independent
measurement) on an executor (`shlo_env.executors`: local processes by default, or Ray), and the
result goes to the results database (`shlo_env.results_db`, default `./results/shlo_env.sqlite`)
in one transaction. A sweep that is interrupted (Ctrl-C, `kill -9`, a reboot) resumes when run
again with the same options: finished measurements are read from the database, not redone.

The table, per dataset and strategy, in the form of the HloEnv paper's Table 2: the runtime
ratio of the returned program against the original compiled by XLA (= `jax.jit`), measured side
by side: average, max, min, geomean; % faster and % slower by the machine's noise-profile
thresholds (`shlo_env.noise`); % identical to XLA's input (the returned program has the
original's DAG hash); and the roofline column (`shlo_env.roofline`): the returned program's time
over the `cost_analysis` floor, geomean. Reports: Markdown, CSV (per program and summary) and
a PNG of the ratio distributions (matplotlib, an optional extra) in `--out`.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import os
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

QUICK_SUITE = ("examples", "corpus")
QUICK_BUDGET_S = 8.0
DEFAULT_STRATEGY = "auto"
QUICK_NOISE = dict(programs=10, repeats=6)  # measured before a sweep when the DB has no profile
FULL_NOISE = dict(programs=10, repeats=20)  # `--noise-profile`, `shlo-env noise`


# --- programs -------------------------------------------------------------------------------------

@dataclasses.dataclass
class Item:
    dataset: str  # "examples", "corpus", "inst-10-20", "inst-20-40", or a directory path
    uri: str
    name: str
    program: object  # Program
    info: dict  # the programs-table row (hash, name, ops, specs, metadata)

    @property
    def hash(self) -> str:
        return self.info["hash"]


def dataset_label(dataset: str) -> str:
    from shlo_env import corpus

    if dataset == "examples" or dataset in corpus.datasets():
        return dataset
    return os.path.abspath(dataset)


def short_label(dataset: str) -> str:
    return os.path.basename(dataset.rstrip("/")) + "/" if os.path.isabs(dataset) else dataset


def _sample(items: list, limit: int | None, seed: int) -> list:
    if limit is None or limit >= len(items):
        return list(items)
    keep = set(random.Random(seed).sample(range(len(items)), limit))
    return [x for i, x in enumerate(items) if i in keep]


def _info(program, name: str, metadata: dict) -> dict:
    from shlo_env.hashing import dag_hash

    spec = lambda s: {"shape": list(s.shape), "dtype": str(s.dtype)}  # noqa: E731
    return {"hash": dag_hash(program), "name": name, "ops": program.num_ops(),
            "num_inputs": len(program.in_specs), "num_outputs": len(program.out_specs),
            "in_specs": [spec(s) for s in program.in_specs], "out_specs": [spec(s) for s in program.out_specs],
            "metadata": metadata}


def load_items(dataset: str, limit: int | None = None, seed: int = 0, examples_only: Sequence[str] | None = None,
               progress: bool = False, log=sys.stderr) -> list[Item]:
    """The programs of a dataset (a seeded sample of `limit` of them), loaded and hashed."""
    from shlo_env import corpus, examples, runtime
    from shlo_env.import_ import lower

    label = dataset_label(dataset)
    out: list[Item] = []
    if dataset == "examples":
        for ex in _sample(examples.suite(examples_only), limit, seed):
            p = lower(ex.fn, *ex.args(seed), name=ex.name)
            out.append(Item(label, f"examples/{ex.name}", ex.name, p,
                            _info(p, ex.name, {"description": ex.description, "library": "shlo_env.examples"})))
        return out
    entries = _sample(corpus.entries(dataset), limit, seed)
    skipped = []
    if runtime.platform() != "cpu":  # LAPACK custom calls exist only on CPU
        skipped = [e.name for e in entries if e.metadata.get("custom_calls")]
        entries = [e for e in entries if not e.metadata.get("custom_calls")]
    if skipped:
        print(f"{short_label(label)}: skipping {len(skipped)} CPU-only programs (LAPACK custom calls): "
              f"{', '.join(skipped)}", file=log)
    it = entries
    if progress and len(entries) > 50:
        from tqdm import tqdm

        it = tqdm(entries, desc=f"loading {short_label(label)}", unit="program", file=log, leave=False)
    for e in it:
        try:
            p = corpus.load(e.uri)
        except Exception as err:  # noqa: BLE001 - e.g. a file of the user's that does not parse
            print(f"skipping {e.uri}: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
                  file=log)
            continue
        out.append(Item(label, e.uri, e.name, p, _info(p, e.name, dict(e.metadata))))
    return out


# --- the sweep ------------------------------------------------------------------------------------

@dataclasses.dataclass
class SweepResult:
    rows: list[dict]  # the measurements the table is made of (this sweep's selection)
    summary: list[dict]
    profile: dict | None
    env: dict
    peaks: tuple
    total: int  # measurements asked for
    resumed: int  # already in the database
    ran: int  # measured now
    seconds: float
    reports: dict = dataclasses.field(default_factory=dict)
    sweep_id: int | None = None


def measurement_config(strategy: str, opts: dict, patterns: Sequence[str]) -> dict:
    """What a measurement depends on besides the program and the environment (its key)."""
    return {"strategy": strategy, "budget_s": opts["budget_s"], "seed": opts["seed"],
            "num_random": opts["num_random"], "max_steps": opts["max_steps"], "min_gain": opts["min_gain"],
            "passes": list(opts.get("passes") or []), "patterns": sorted(patterns),
            "strategy_options": opts.get("strategy_options") or {}}


def sweep(datasets: Sequence[str] = QUICK_SUITE, strategies: Sequence[str] = (DEFAULT_STRATEGY,), *,
          budget_s: float = QUICK_BUDGET_S, limit: int | None = None, seed: int = 0, workers: int | None = None,
          executor: str = "local", ray_address: str | None = None, db_path: str | os.PathLike | None = None,
          out: str | os.PathLike | None = None, retry_errors: bool = False, noise_profile: bool = False,
          noise_repeats: int | None = None, max_steps: int = 6, num_random: int = 3, min_gain: float = 0.03,
          passes: bool | Sequence[str] = False, xla_options: bool | str | Sequence[str] = False,
          patterns: Sequence[str] | None = None, timeout_s: float | None = None, peak_flops: float | None = None, peak_bandwidth: float | None = None,
          examples_only: Sequence[str] | None = None, progress: bool = True, plot: bool = True,
          log=sys.stderr) -> SweepResult:
    """Run (or resume) a sweep and write its reports; see the module docstring."""
    from shlo_env import noise, roofline
    from shlo_env.executors import DeviceLock, Task, make_executor
    from shlo_env.patterns.base import resolve as resolve_patterns
    from shlo_env.results_db import DEFAULT_PATH, ResultsDB, config_key, environment, measurement_row
    from shlo_env import xla_options as option_actions
    from shlo_env.search import passes as pass_actions
    from shlo_env.search import strategies as known_strategies

    t0 = time.perf_counter()
    datasets = list(dict.fromkeys(datasets))
    strategies = list(dict.fromkeys(strategies))
    for s in strategies:
        if s != "auto" and s not in known_strategies():
            raise SystemExit(f"unknown strategy {s!r}; choose from auto, {', '.join(known_strategies())}")
    items: list[Item] = []  # first: a bad dataset fails before anything is measured
    for ds in datasets:
        items += load_items(ds, limit, seed, examples_only, progress, log)
    env = environment()
    db = ResultsDB(db_path or DEFAULT_PATH)
    try:
        env_id = db.ensure_environment(env)
        # peak rates for the roofline column (measured once per environment on CPU)
        row = db.environment_row(env_id) or {}
        stored = (row.get("peak_flops"), row.get("peak_bandwidth"), row.get("peak_source"))
        with DeviceLock():
            flops, bw, source = roofline.peak_rates(env["platform"], env["device_kind"], flops=peak_flops,
                                                    bandwidth=peak_bandwidth, stored=stored)
        if flops and bw and (flops, bw) != stored[:2] and source != "configured":
            db.set_peak_rates(env_id, flops, bw, source)
        peaks = (flops, bw, source)

        # the noise profile: the latest of this environment, or a new one
        profile = None if noise_profile else db.noise_profile(env_id)
        if profile is None:
            spec = dict(FULL_NOISE if noise_profile else QUICK_NOISE)
            if noise_repeats:
                spec["repeats"] = noise_repeats
            print(f"measuring this machine's noise profile ({spec['programs']} programs x {spec['repeats']} "
                  f"self-timings){'' if noise_profile else '; shlo-env noise measures a longer one'}", file=log)
            measured = noise.measure(noise.profile_programs(spec["programs"], seed), repeats=spec["repeats"],
                                     device_lock=DeviceLock(), progress=progress)
            db.add_noise_profile(env_id, measured)
            profile = db.noise_profile(env_id)
        print(f"noise profile {profile['id']}: faster < {profile['faster']:.3f}, slower > {profile['slower']:.3f} "
              f"({profile['samples']} self-timings, {profile['created'][:19]})", file=log)

        # the programs and the measurements asked for
        pattern_names = [type(p).__name__ if not getattr(p, "name", None) else p.name
                         for p in resolve_patterns(patterns)]
        opts = dict(budget_s=float(budget_s), seed=seed, num_random=num_random, max_steps=max_steps,
                    min_gain=min_gain, patterns=patterns,
                    # XLA option actions are `name=value` tokens in the same action tuple as passes
                    passes=list(pass_actions.resolve(passes)) + list(option_actions.resolve(xla_options)),
                    timeout_s=timeout_s, threshold=profile["faster"])
        configs = {s: measurement_config(s, opts, pattern_names) for s in strategies}
        keys = {s: config_key(c) for s, c in configs.items()}
        wanted = [(it, s) for it in items for s in strategies]
        done = db.done_keys(env_id, set(keys.values()), include_errors=not retry_errors)
        todo = [(it, s) for it, s in wanted if (it.dataset, it.uri, it.hash, s, keys[s]) not in done]
        resumed = len(wanted) - len(todo)
        print(f"shlo-env bench: {len(items)} programs ({', '.join(short_label(dataset_label(d)) for d in datasets)}) "
              f"x {len(strategies)} strateg{'y' if len(strategies) == 1 else 'ies'} ({', '.join(strategies)}), "
              f"budget {budget_s:g} s each, executor {executor}" + (f" x{workers}" if workers else "") + "; "
              + (f"{resumed} already in {db.path}, {len(todo)} to run" if resumed else f"{len(todo)} to run"),
              file=log)

        sweep_id = None
        if todo:
            sweep_id = db.start_sweep(env_id, {"datasets": [dataset_label(d) for d in datasets],
                                               "strategies": list(strategies), "limit": limit, "workers": workers,
                                               "executor": executor, **{k: v for k, v in opts.items()}},
                                      " ".join(sys.argv))
            _run(db, todo, opts, configs, keys, env, profile, peaks, executor, workers, ray_address,
                 timeout_s, sweep_id, retry_errors, progress, log, Task, make_executor, measurement_row)

        # the table: every measurement of this selection, old and new
        want = {(it.dataset, it.uri, it.hash, s, keys[s]) for it, s in wanted}
        rows = [r for r in db.measurements(env_id=env_id, config_keys=set(keys.values()))
                if (r["dataset"], r["uri"], r["program_hash"], r["strategy"], r["config_key"]) in want]
        order = {(it.dataset, it.uri, s): i for i, (it, s) in enumerate(wanted)}
        rows.sort(key=lambda r: order.get((r["dataset"], r["uri"], r["strategy"]), 1 << 30))
        summary = summarize(rows, profile)
        result = SweepResult(rows, summary, profile, env, peaks, len(wanted), resumed, len(todo),
                             time.perf_counter() - t0, sweep_id=sweep_id)
        if out is not False:
            result.reports = write_reports(Path(out or "results"), result, configs, plot=plot, log=log)
        return result
    finally:
        db.close()


def _run(db, todo, opts, configs, keys, env, profile, peaks, executor, workers, ray_address, timeout_s,
         sweep_id, retry_errors, progress, log, Task, make_executor, measurement_row) -> None:
    from tqdm import tqdm

    tasks, by_index = [], {}
    task_opts = {k: v for k, v in opts.items()}
    for i, (it, s) in enumerate(todo):
        tasks.append(Task(i, it.dataset, it.uri, it.name, it.hash, s, it.program, task_opts))
        by_index[i] = (it, s)
    ex = make_executor(executor, workers, address=ray_address, timeout_s=timeout_s)
    bar = tqdm(total=len(tasks), desc="bench", unit="program", file=log, disable=not progress,
               dynamic_ncols=True, mininterval=0.5 if getattr(log, "isatty", lambda: False)() else 10.0)
    faster = errors = 0
    status = "interrupted"
    try:
        for rec in ex.run(tasks):
            it, s = by_index[rec["_index"]]
            row = measurement_row(rec, dataset=it.dataset, uri=it.uri, strategy=s, config=configs[s],
                                  cfg_key=keys[s], env=env, profile=profile, peaks=peaks, executor=ex.name,
                                  sweep_id=sweep_id, started_at=rec["_started_at"],
                                  finished_at=rec["_finished_at"], worker=rec.get("_worker", ""))
            db.add_measurement(row, program=it.info, replace=retry_errors)
            if row["status"] != "ok":
                errors += 1
            elif row["ratio"] is not None and row["ratio"] < profile["faster"]:
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


# --- the table ------------------------------------------------------------------------------------

def _geomean(xs) -> float:
    xs = [x for x in xs if x is not None and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan


def summarize(rows: list[dict], profile: dict | None) -> list[dict]:
    """Table 2 per (dataset, strategy): ratios vs jax.jit, % faster/slower/identical, roofline."""
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["dataset"], r["strategy"]), []).append(r)
    out = []
    for (ds, strategy), rs in groups.items():
        ok = [r for r in rs if r["status"] == "ok" and r["ratio"] is not None]
        ratios = [r["ratio"] for r in ok]
        faster_t = profile["faster"] if profile else 0.94
        slower_t = profile["slower"] if profile else 1.06
        t_floor = [r["best_full"] / r["roofline_floor_s"] for r in ok
                   if r["roofline_floor_s"] and r["best_full"]]
        n = len(ok)
        best = min(ok, key=lambda r: r["ratio"]) if ok else None
        out.append({
            "dataset": ds, "strategy": strategy, "programs": len(rs), "measured": n,
            "errors": len(rs) - n,
            "avg_ratio": sum(ratios) / n if n else math.nan,
            "max_ratio": max(ratios) if n else math.nan,
            "min_ratio": min(ratios) if n else math.nan,
            "geomean_ratio": _geomean(ratios),
            "faster_pct": 100.0 * sum(x < faster_t for x in ratios) / n if n else math.nan,
            "slower_pct": 100.0 * sum(x > slower_t for x in ratios) / n if n else math.nan,
            "identical_pct": 100.0 * sum(bool(r["identical"]) for r in ok) / n if n else math.nan,
            "faster_n": sum(x < faster_t for x in ratios), "slower_n": sum(x > slower_t for x in ratios),
            "identical_n": sum(bool(r["identical"]) for r in ok),
            "roofline_geomean": _geomean(t_floor), "roofline_n": len(t_floor),
            "best_program": best["name"] if best else "", "faster_threshold": faster_t,
            "slower_threshold": slower_t,
            "strategies_used": sorted({r["strategy_used"] for r in ok if r["strategy_used"]}),
        })
    return out


def _f(x, fmt="{:.3f}") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else fmt.format(x)


TABLE_HEADER = ("dataset", "strategy", "programs", "avg ratio", "max ratio", "min ratio", "geomean",
                "% faster", "% slower", "% identical", "T/roofline", "errors")


def table_rows(summary: list[dict]) -> list[tuple]:
    rows = []
    for s in summary:
        strat = s["strategy"]
        if strat == "auto" and s["strategies_used"]:
            strat = f"auto ({'/'.join(s['strategies_used'])})"
        rows.append((short_label(s["dataset"]), strat, str(s["measured"]), _f(s["avg_ratio"]),
                     _f(s["max_ratio"]), _f(s["min_ratio"]), _f(s["geomean_ratio"]),
                     _f(s["faster_pct"], "{:.1f}"), _f(s["slower_pct"], "{:.1f}"), _f(s["identical_pct"], "{:.1f}"),
                     _f(s["roofline_geomean"], "{:.1f}x"), str(s["errors"])))
    return rows


def format_table(header, rows) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(header), sep] + [line(r) for r in rows])


def _clip(text: str, width: int | None) -> str:
    if width is None or len(text) <= width:
        return text
    return text[: width - 4].rsplit(", ", 1)[0] + ", ..."


def improved_rows(rows: list[dict], faster: float, width: int | None = None) -> list[tuple]:
    """One row per program where a rewrite was returned; the rewrites column cut at `width`."""
    out = []
    for r in rows:
        if r["status"] == "ok" and r["ratio"] is not None and not r["returned_original"]:
            applied = json.loads(r["applied"] or "[]") + [f"-{p}" for p in json.loads(r["disabled_passes"] or "[]")]
            out.append((short_label(r["dataset"]), r["name"], r["strategy_used"] or r["strategy"],
                        _f((r["baseline_full"] or math.nan) * 1e3, "{:.4f}"), _f((r["best_full"] or math.nan) * 1e3, "{:.4f}"),
                        _f(r["ratio"]), _f(r["search_ratio"]), _f(r["confirm_ratio"]),
                        "faster" if r["ratio"] < faster else "within noise",
                        _clip(", ".join(_compress(applied)), width) or "-"))
    return out


def _compress(names: list[str]) -> list[str]:
    """["a", "a", "b"] -> ["a x2", "b"] (order of first use)."""
    counts: dict[str, int] = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    return [f"{n} x{c}" if c > 1 else n for n, c in counts.items()]


# --- reports --------------------------------------------------------------------------------------

CSV_COLUMNS = ("dataset", "uri", "name", "strategy", "strategy_used", "status", "ratio", "search_ratio",
               "confirm_ratio", "baseline_full_ms", "best_full_ms", "baseline_async_ms", "best_async_ms",
               "baseline_compute_ms", "best_compute_ms", "identical", "returned_original", "applied",
               "disabled_passes", "decisions", "numerics", "noise", "threshold", "faster_threshold",
               "slower_threshold", "flops_best", "bytes_best", "roofline_floor_ms", "t_over_floor",
               "candidates", "cache_hits", "decision_space", "search_s", "total_s", "program_hash", "best_hash",
               "error", "reason", "env_id", "machine", "jax", "jaxlib", "finished_at")


def _ms(x):
    return None if x is None else x * 1e3


def csv_row(r: dict) -> dict:
    out = {k: r.get(k) for k in CSV_COLUMNS if k in r}
    for k in ("baseline_full", "best_full", "baseline_async", "best_async", "baseline_compute", "best_compute"):
        out[f"{k}_ms"] = _ms(r.get(k))
    out["roofline_floor_ms"] = _ms(r.get("roofline_floor_s"))
    out["t_over_floor"] = (r["best_full"] / r["roofline_floor_s"]
                           if r.get("best_full") and r.get("roofline_floor_s") else None)
    return out


def write_reports(out: Path, result: SweepResult, configs: dict, *, plot: bool = True, stem: str = "bench",
                  log=sys.stderr) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    p = out / f"{stem}.csv"
    with p.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in result.rows:
            w.writerow(csv_row(r))
    paths["csv"] = p
    p = out / f"{stem}_summary.csv"
    with p.open("w", newline="") as f:
        cols = [k for k in result.summary[0] if k != "strategies_used"] if result.summary else ["dataset"]
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for s in result.summary:
            w.writerow(s)
    paths["summary_csv"] = p
    if plot:
        png = out / f"{stem}.png"
        msg = plot_ratios(result.rows, result.profile, png)
        if msg:
            print(msg, file=log)
        else:
            paths["png"] = png
    p = out / f"{stem}.md"
    p.write_text(markdown_report(result, configs, paths))
    paths["md"] = p
    return paths


def header_lines(result: SweepResult) -> list[str]:
    env, prof, peaks = result.env, result.profile, result.peaks
    lines = [f"machine: {env['hostname']}: {env['device_kind']} / {env['cpu_model']}, {env['cpu_count']} cores; "
             f"jax {env['jax']}, jaxlib {env['jaxlib']}, shlo_env {env['shlo_env']} (environment {env['env_id']})"]
    if prof:
        lines.append(f"noise profile {prof['id']} ({prof['created'][:19]}, {prof['samples']} self-timings, load "
                     f"{_f(prof['load_avg'], '{:.2f}')}): faster < {prof['faster']:.3f}, slower > {prof['slower']:.3f}")
    if peaks[0] and peaks[1]:
        lines.append(f"roofline peaks: {peaks[0] / 1e9:.1f} GFLOP/s, {peaks[1] / 1e9:.1f} GB/s ({peaks[2]})")
    else:
        lines.append(f"roofline: no peak rates ({peaks[2]})")
    loads = [r for r in (os.getloadavg() if hasattr(os, "getloadavg") else ())][:1]
    lines.append(f"{result.total} measurements: {result.resumed} from the database, {result.ran} run now in "
                 f"{result.seconds:.0f} s" + (f"; load average now {loads[0]:.2f}" if loads else ""))
    return lines


def markdown_report(result: SweepResult, configs: dict, paths: dict) -> str:
    faster = result.profile["faster"] if result.profile else 0.94
    md = ["# shlo-env bench", ""]
    md += [f"- {x}" for x in header_lines(result)]
    cfg = next(iter(configs.values()), {})
    md += [f"- budget {cfg.get('budget_s')} s per program, seed {cfg.get('seed')}, {cfg.get('num_random')} random "
           f"input sets + example args, max {cfg.get('max_steps')} steps, min gain {cfg.get('min_gain')}",
           "", "## Runtime ratio against jax.jit (HloEnv Table 2 form)", "",
           format_table(TABLE_HEADER, table_rows(result.summary)), "",
           "Ratio = T(returned program) / T(original compiled by XLA, i.e. jax.jit), measured side by side "
           "in one worker (10th percentile of >= 10 interleaved runs), in a final measurement independent of the "
           "search; 1.000 exactly when the original is returned. % faster / % slower: ratio below / above "
           "the noise-profile thresholds. % identical: the returned program has the original's DAG hash. "
           "T/roofline: geomean of the returned program's time over flops/peak + bytes/bandwidth "
           "(XLA cost analysis; a while body is counted once, so loops look far from the floor).", ""]
    imp = improved_rows(result.rows, faster, width=240)
    if imp:
        md += ["## Programs where a rewrite was returned", "",
               format_table(("dataset", "program", "strategy", "jax.jit ms", "returned ms", "ratio",
                             "search", "confirm", "verdict", "rewrites"), imp), ""]
    errs = [r for r in result.rows if r["status"] != "ok"]
    if errs:
        md += ["## Errors", "", format_table(("dataset", "program", "strategy", "error"),
                                            [(short_label(r["dataset"]), r["name"], r["strategy"],
                                              (r["error"] or "")[:160]) for r in errs]), ""]
    md += ["## Files", ""] + [f"- {k}: `{v}`" for k, v in paths.items()] + [""]
    return "\n".join(md)


def plot_ratios(rows: list[dict], profile: dict | None, path: Path) -> str | None:
    """A PNG of the ratio distribution per dataset and strategy; a message if matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ("no plot: matplotlib is not installed (pip install 'shlo_env[plot]' or pip install matplotlib); "
                "the Markdown and CSV reports are written")
    import numpy as np

    groups: dict = {}
    for r in rows:
        if r["status"] == "ok" and r["ratio"]:
            groups.setdefault(f"{short_label(r['dataset'])} / {r['strategy']}", []).append(r["ratio"])
    if not groups:
        return "no plot: no measurement"
    labels = list(groups)
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.7 * len(labels)))
    rng = np.random.default_rng(0)
    for i, lab in enumerate(labels):
        xs = np.asarray(groups[lab])
        ax.scatter(xs, i + rng.uniform(-0.22, 0.22, len(xs)), s=14, alpha=0.6, color="tab:blue", lw=0)
    horizontal = {"orientation": "horizontal"} if tuple(int(x) for x in matplotlib.__version__.split(".")[:2]) \
        >= (3, 10) else {"vert": False}
    ax.boxplot([groups[lab] for lab in labels], positions=range(len(labels)), widths=0.6, showfliers=False,
               medianprops={"color": "black"}, **horizontal)
    ax.set_yticks(range(len(labels)), [f"{lab} (n={len(groups[lab])})" for lab in labels])
    ax.set_xscale("log")
    ax.axvline(1.0, color="gray", lw=1)
    if profile:
        ax.axvline(profile["faster"], color="tab:green", ls="--", lw=1, label=f"faster < {profile['faster']:.3f}")
        ax.axvline(profile["slower"], color="tab:red", ls="--", lw=1, label=f"slower > {profile['slower']:.3f}")
        ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
        hi = max(max(max(v) for v in groups.values()), profile["slower"])
        ax.set_xlim(right=hi * 1.15)
    ax.set_xlabel("runtime ratio vs jax.jit (log scale; < 1 is faster)")
    ax.set_title("shlo-env bench: ratio distribution per dataset / strategy")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


# --- CLI ------------------------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = ("With no --dataset, the quick suite: the example suite and the corpus, "
                     f"{QUICK_BUDGET_S:g} s per program.")
    parser.add_argument("--dataset", nargs="+", default=None, metavar="NAME_OR_DIR",
                        help="examples, corpus, inst-10-20, inst-20-40, or a directory of .mlir/.mlirbc files "
                             "(several allowed; default: the quick suite, examples corpus)")
    parser.add_argument("--limit", type=int, default=None, help="at most N programs per dataset (a seeded sample)")
    parser.add_argument("--strategy", nargs="+", default=[DEFAULT_STRATEGY], metavar="NAME",
                        help="search strategies (several allowed): auto or a name from shlo_env.search "
                             "(pick-first, exhaustive, random, beam, mcts, cost-model); default auto")
    parser.add_argument("--budget", type=float, default=None,
                        help=f"seconds per program and strategy (default {QUICK_BUDGET_S:g})")
    parser.add_argument("--workers", type=int, default=None,
                        help="parallel workers: local processes (default 1) or Ray actors (default one per "
                             "CPU of the Ray cluster); timings are serialized per device either way")
    parser.add_argument("--executor", choices=("local", "ray"), default="local",
                        help="local worker processes (default) or a Ray cluster")
    parser.add_argument("--ray-address", default=None,
                        help="Ray cluster to join ('auto', 'ray://host:10001'); default: start a local Ray")
    parser.add_argument("--db", default=None, help="results database (default ./results/shlo_env.sqlite)")
    parser.add_argument("--out", default="results", help="directory for the reports (default ./results)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--noise-profile", action="store_true",
                        help="measure this machine's noise profile again before the sweep")
    parser.add_argument("--noise-repeats", type=int, default=None, help="self-timings per profile program")
    parser.add_argument("--retry-errors", action="store_true", help="run failed measurements again")
    parser.add_argument("--passes", action="store_true", help="let the search disable XLA passes (macro actions)")
    parser.add_argument("--xla-options", nargs="?", const=True, default=False, metavar="approx",
                        help="let the search set XLA compile options (shlo_env.xla_options); "
                             "'--xla-options approx' adds fast math (APPROX tier)")
    parser.add_argument("--max-steps", type=int, default=6)
    parser.add_argument("--num-random", type=int, default=3, help="random input sets for verification")
    parser.add_argument("--min-gain", type=float, default=0.03)
    parser.add_argument("--timeout", type=float, default=None, help="seconds per compile/run in the worker")
    parser.add_argument("--peak-flops", type=float, default=None, help="device peak flops/s for the roofline")
    parser.add_argument("--peak-bandwidth", type=float, default=None, help="device peak bytes/s for the roofline")
    parser.add_argument("--examples", nargs="*", default=None, metavar="NAME",
                        help="with the examples dataset: only these examples")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--no-plot", action="store_true", help="no PNG")


def run(args: argparse.Namespace) -> int:
    datasets = args.dataset or (["examples"] if args.examples else list(QUICK_SUITE))
    try:
        res = sweep(datasets, args.strategy, budget_s=args.budget or QUICK_BUDGET_S, limit=args.limit,
                    seed=args.seed, workers=args.workers, executor=args.executor, ray_address=args.ray_address,
                    db_path=args.db, out=args.out, retry_errors=args.retry_errors, noise_profile=args.noise_profile,
                    noise_repeats=args.noise_repeats, max_steps=args.max_steps, num_random=args.num_random,
                    min_gain=args.min_gain, passes=args.passes, xla_options=args.xla_options, timeout_s=args.timeout, peak_flops=args.peak_flops,
                    peak_bandwidth=args.peak_bandwidth, examples_only=args.examples,
                    progress=not args.no_progress, plot=not args.no_plot)
    except KeyboardInterrupt:
        return 130
    except (LookupError, ValueError, OSError) as e:  # a bad dataset, path or option: say it plainly
        print(f"shlo-env bench: {e}", file=sys.stderr)
        return 2
    print()
    print(format_table(TABLE_HEADER, table_rows(res.summary)))
    print()
    for line in header_lines(res):
        print(line)
    faster = res.profile["faster"] if res.profile else 0.94
    imp = improved_rows(res.rows, faster, width=72)
    if imp:
        print(f"\nrewrites returned ({len(imp)}):")
        print(format_table(("dataset", "program", "strategy", "jax.jit ms", "returned ms", "ratio", "search",
                            "confirm", "verdict", "rewrites"), imp))
    if res.reports:
        print("\nreports: " + ", ".join(str(p) for p in res.reports.values()))
    return 0
