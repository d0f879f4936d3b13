"""The bench's reports: Table 2 (per dataset and strategy), the rewrites returned, Markdown,
CSV and a PNG of the ratio distributions."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import sys
from pathlib import Path

from shlo_env.bench.datasets import short_label
from shlo_env.search.result import counted


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


def _geomean(xs) -> float:
    xs = [x for x in xs if x is not None and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan


DEFAULT_THRESHOLDS = (0.94, 1.06)  # the HloEnv paper's, when there is no profile at all


def row_thresholds(r: dict, profile: dict | None) -> tuple[float, float]:
    """(faster, slower) of one measurement: those stored with it (the noise profile's at the
    program's runtime), else the profile's pooled ones."""
    if r.get("faster_threshold") is not None and r.get("slower_threshold") is not None:
        return r["faster_threshold"], r["slower_threshold"]
    return (profile["faster"], profile["slower"]) if profile else DEFAULT_THRESHOLDS


def verdict(r: dict, profile: dict | None) -> str:
    faster, slower = row_thresholds(r, profile)
    return "faster" if r["ratio"] < faster else "slower" if r["ratio"] > slower else "within noise"


def summarize(rows: list[dict], profile: dict | None) -> list[dict]:
    """Table 2 per (dataset, strategy): ratios vs jax.jit, % faster/slower/identical, roofline."""
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["dataset"], r["strategy"]), []).append(r)
    out = []
    for (ds, strategy), rs in groups.items():
        ok = [r for r in rs if r["status"] == "ok" and r["ratio"] is not None]
        ratios = [r["ratio"] for r in ok]
        faster_n = sum(r["ratio"] < row_thresholds(r, profile)[0] for r in ok)
        slower_n = sum(r["ratio"] > row_thresholds(r, profile)[1] for r in ok)
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
            "faster_pct": 100.0 * faster_n / n if n else math.nan,
            "slower_pct": 100.0 * slower_n / n if n else math.nan,
            "identical_pct": 100.0 * sum(bool(r["identical"]) for r in ok) / n if n else math.nan,
            "faster_n": faster_n, "slower_n": slower_n,
            "identical_n": sum(bool(r["identical"]) for r in ok),
            "roofline_geomean": _geomean(t_floor), "roofline_n": len(t_floor),
            "best_program": best["name"] if best else "",
            # the pooled profile thresholds (each row is classified by its own, `row_thresholds`)
            "faster_threshold": profile["faster"] if profile else DEFAULT_THRESHOLDS[0],
            "slower_threshold": profile["slower"] if profile else DEFAULT_THRESHOLDS[1],
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


IMPROVED_HEADER = ("dataset", "program", "strategy", "jax.jit ms", "returned ms", "ratio", "search", "confirm",
                   "faster <", "verdict", "rewrites")


PROGRAM_HEADER = ("dataset", "program", "strategy", "ratio", "candidates", "per minute", "search s", "wall s",
                  "outcome")


def candidates_per_minute(r: dict) -> tuple[int, float]:
    """Candidates a search evaluated (whole programs, plus regions for the regional strategy)
    and how many a minute of its search time."""
    info = json.loads(r.get("strategy_info") or "{}")
    n = int(r.get("candidates") or 0) + int(info.get("region_candidates", 0))
    if "per_minute" in info:
        return n, float(info["per_minute"])
    search_s = r.get("search_s") or 0.0
    return n, 60.0 * n / search_s if search_s > 0 else math.nan


def _actions(r: dict) -> list[str]:
    """The rewrites a measurement returned, then its XLA actions (a disabled pass or an option)."""
    return json.loads(r["applied"] or "[]") + [f"-{p}" for p in json.loads(r["disabled_passes"] or "[]")]


def program_rows(rows: list[dict], width: int | None = None) -> list[tuple]:
    """One row per measurement: its ratio, candidates (a minute), search and wall seconds, and
    the rewrites returned or why the original was kept."""
    out = []
    for r in rows:
        if r["status"] != "ok":
            continue
        n, per_min = candidates_per_minute(r)
        if r["returned_original"]:
            reason = r["reason"] or ""
            outcome = reason if width is None or len(reason) <= width else reason[:width - 3] + "..."
        else:
            outcome = _clip(", ".join(counted(_actions(r))), width)
        out.append((short_label(r["dataset"]), r["name"], r["strategy_used"] or r["strategy"], _f(r["ratio"]), n,
                    _f(per_min, "{:.0f}"), _f(r["search_s"], "{:.1f}"), _f(r["total_s"], "{:.1f}"), outcome or "-"))
    return out


def improved_rows(rows: list[dict], profile: dict | None, width: int | None = None) -> list[tuple]:
    """One row per program where a rewrite was returned, with its own faster threshold and
    verdict (`row_thresholds`); the rewrites column cut at `width`."""
    out = []
    for r in rows:
        if r["status"] == "ok" and r["ratio"] is not None and not r["returned_original"]:
            applied = _actions(r)
            out.append((short_label(r["dataset"]), r["name"], r["strategy_used"] or r["strategy"],
                        _f((r["baseline_full"] or math.nan) * 1e3, "{:.4f}"), _f((r["best_full"] or math.nan) * 1e3, "{:.4f}"),
                        _f(r["ratio"]), _f(r["search_ratio"]), _f(r["confirm_ratio"]),
                        _f(row_thresholds(r, profile)[0]), verdict(r, profile),
                        _clip(", ".join(counted(applied)), width) or "-"))
    return out


# --- reports --------------------------------------------------------------------------------------

#: The program search's phases (`search.program_search.PHASES`), a column each in the CSV.
PHASE_COLUMNS = ("probe", "originals", "noise", "augment", "profile", "search", "acceptance", "reference", "final",
                 "cost")
CSV_COLUMNS = ("dataset", "uri", "name", "strategy", "strategy_used", "status", "ratio", "search_ratio",
               "confirm_ratio", "final_timings", "baseline_full_ms", "best_full_ms", "baseline_async_ms", "best_async_ms",
               "baseline_compute_ms", "best_compute_ms", "identical", "returned_original", "applied",
               "disabled_passes", "decisions", "numerics", "noise", "threshold", "faster_threshold",
               "slower_threshold", "flops_best", "bytes_best", "roofline_floor_ms", "t_over_floor",
               "candidates", "cache_hits", "untimed", "decision_space", "search_s", "total_s", "peak_rss_mb",
               "candidate_s", "candidate_share", "search_ended") + tuple(f"phase_{p}_s" for p in PHASE_COLUMNS) + (
               "program_hash", "best_hash",
               "error", "reason", "env_id", "machine", "jax", "jaxlib", "finished_at")


def _ms(x):
    return None if x is None else x * 1e3


def _json(value, empty):
    """A database row's JSON text column, or the value itself in a result's record."""
    if isinstance(value, str):
        return json.loads(value)
    return empty if value is None else value


def csv_row(r: dict) -> dict:
    out = {k: r.get(k) for k in CSV_COLUMNS if k in r}
    for k in ("baseline_full", "best_full", "baseline_async", "best_async", "baseline_compute", "best_compute"):
        out[f"{k}_ms"] = _ms(r.get(k))
    out["roofline_floor_ms"] = _ms(r.get("roofline_floor_s"))
    out["t_over_floor"] = (r["best_full"] / r["roofline_floor_s"]
                           if r.get("best_full") and r.get("roofline_floor_s") else None)
    phases = {p["name"]: p for p in _json(r.get("phases"), [])}
    for name in PHASE_COLUMNS:  # seconds each phase spent; the budget's split is the schedule's
        out[f"phase_{name}_s"] = phases[name]["spent_s"] if name in phases else None
    out["search_ended"] = phases.get("search", {}).get("ended", "")  # ran out of candidates, not of time
    budget = _json(r.get("config"), {}).get("budget_s")
    out["candidate_share"] = (r["candidate_s"] / budget if r.get("candidate_s") is not None and budget else None)
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
                     f"{_f(prof['load_avg'], '{:.2f}')}): pooled faster < {prof['faster']:.3f}, slower > {prof['slower']:.3f}; "
                     f"each program is judged by the thresholds at its runtime (CSV: faster_threshold)")
    if peaks[0] and peaks[1]:
        lines.append(f"roofline peaks: {peaks[0] / 1e9:.1f} GFLOP/s, {peaks[1] / 1e9:.1f} GB/s ({peaks[2]})")
    else:
        lines.append(f"roofline: no peak rates ({peaks[2]})")
    loads = [r for r in (os.getloadavg() if hasattr(os, "getloadavg") else ())][:1]
    lines.append(f"{result.total} measurements: {result.resumed} from the database, {result.ran} run now in "
                 f"{result.seconds:.0f} s" + (f"; load average now {loads[0]:.2f}" if loads else ""))
    return lines


def markdown_report(result: SweepResult, configs: dict, paths: dict) -> str:
    md = ["# shlo-env bench", ""]
    md += [f"- {x}" for x in header_lines(result)]
    cfg: dict = next(iter(configs.values()), {})
    md += [f"- budget {cfg.get('budget_s')} s per program, seed {cfg.get('seed')}, {cfg.get('num_random')} random "
           f"input sets + example args, max {cfg.get('max_steps')} steps, min gain {cfg.get('min_gain')}",
           "", "## Runtime ratio against jax.jit (HloEnv Table 2 form)", "",
           format_table(TABLE_HEADER, table_rows(result.summary)), "",
           "Ratio = T(returned program) / T(original compiled by XLA, i.e. jax.jit), measured side by side "
           "in one worker (10th percentile of >= 10 interleaved runs), in a final measurement independent of the "
           "search; 1.000 exactly when the original is returned. % faster / % slower: ratio below / above "
           "the noise-profile thresholds at the program's runtime (the self-timings of the profile programs "
           "nearest in runtime; the same threshold the search accepted with). % identical: the returned program has the original's DAG hash. "
           "T/roofline: geomean of the returned program's time over flops/peak + bytes/bandwidth "
           "(XLA cost analysis; a while body is counted once, so loops look far from the floor).", ""]
    imp = improved_rows(result.rows, result.profile, width=240)
    if imp:
        md += ["## Programs where a rewrite was returned", "",
               format_table(IMPROVED_HEADER, imp), ""]
    md += ["## Every program", "",
           "Candidates: whole-program evaluations, plus region candidates for the regional strategy; per "
           "minute of search time. Wall: the whole search of that program, budget included.", "",
           format_table(PROGRAM_HEADER, program_rows(result.rows, width=120)), ""]
    untimed = [r for r in result.rows if r["status"] == "ok" and r.get("untimed")]
    if untimed:
        md += ["## Verified candidates left untimed", "",
               "Candidates that passed verification but got no timing (budget: the search's hard deadline "
               "came during their verification or timing; not asked: the strategy only verified them).", "",
               format_table(("dataset", "program", "untimed (why: how many)", "outcome"),
                            [(short_label(r["dataset"]), r["name"], ", ".join(
                                f"{k}: {v}" for k, v in sorted(json.loads(r["untimed"]).items())),
                              (r["reason"] or "")[:120]) for r in untimed]), ""]
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
        ax.axvline(profile["faster"], color="tab:green", ls="--", lw=1, label=f"pooled faster < {profile['faster']:.3f}")
        ax.axvline(profile["slower"], color="tab:red", ls="--", lw=1, label=f"pooled slower > {profile['slower']:.3f}")
        ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
        hi = max(max(max(v) for v in groups.values()), profile["slower"])
        ax.set_xlim(right=hi * 1.15)
    ax.set_xlabel("runtime ratio vs jax.jit (log scale; < 1 is faster)")
    ax.set_title("shlo-env bench: ratio distribution per dataset / strategy")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None
