"""The noise profile of a machine (HloEnv paper, Appendix D.3) and `shlo-env noise`.

About twelve programs spanning the runtime range and the bench's datasets (sub-graphs of a few
microseconds, corpus programs up to about ten milliseconds, and three zoo models) are each timed
against themselves many times, with exactly the procedure the search uses for a candidate (one
worker request: 3 warm-ups, then A, B, A, B ... for at least 10 rounds and 0.2 s). Every repeat gives one ratio T(B)/T(A) of a program
against itself: the distribution of these ratios is what a candidate's ratio looks like when
the rewrite changed nothing. The thresholds are

    d = the `quantile` (default 0.95) of |log ratio| over the samples
    faster = exp(-d), slower = exp(d)

so a program counts as faster (slower) only when its ratio is below (above) what 95% of
self-comparisons give (a quantile rather than the extreme, which with a few hundred samples is
one stray measurement taken while another process ran). The paper found 0.94 / 1.06 on its
machines.

A returned rewrite's final ratio is the median of three side-by-side timings
(`timing.FINAL_TIMINGS`): it is judged by the same quantile over medians of three consecutive
self-timings (`NoiseModel.thresholds(runtime, timings=3)`), a band about half as wide, since one
stray timing in three no longer sets it.

Noise depends on the runtime: a 5 µs sub-graph's self-ratios spread far wider than a 10 ms
program's, so one pooled quantile lets the noisiest programs set the threshold of all.
`NoiseModel` keeps each profile program's (runtime, ratios) and gives a program of runtime T the
thresholds of the samples of the profile programs nearest to T in log runtime, taking programs
until at least `MIN_SAMPLES` self-timings are in (the pooled thresholds when the profile has no
per-program samples). Profiles are stored in the results database per environment, with their
per-program samples (so a profile stored before the model existed gives the same model);
`shlo-env bench` uses the latest one (and measures a quick one first when there is none, or when
the latest is older than its `--noise-max-age`).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time

import numpy as np

from shlo_env.ir.program import Program
from shlo_env.measure.noise_thresholds import MIN_SAMPLES, NoiseModel, accepts, medians, thresholds
from shlo_env.measure.timing_policy import FINAL_TIMINGS, SEARCH, TimingPolicy, default_timeout


def profile_programs(count: int = 12, seed: int = 0) -> list[tuple[str, Program]]:
    """`count` programs spanning the runtime range and the bench's datasets: about a third
    sub-graphs (microseconds), a quarter zoo programs (third-party models, at evenly spaced
    inner quantiles of their recorded runtime: their noise differs from the corpus's at the
    same runtime), the rest corpus programs at evenly spaced quantiles of their recorded runtime."""
    from shlo_env import corpus
    from shlo_env.execute import runtime

    rng = random.Random(seed)
    # a small profile (a test's) keeps to sub-graphs and corpus programs
    n_sub, n_zoo = max(1, count // 3), count // 4 if count >= 8 else 0
    picks: list[str] = []
    sub = corpus.entries("inst-10-20")
    picks += [e.uri for e in rng.sample(sub, (n_sub + 1) // 2)]
    sub = corpus.entries("inst-20-40")
    picks += [e.uri for e in rng.sample(sub, n_sub // 2)]
    cpu = runtime.platform() == "cpu"

    def by_runtime(dataset: str) -> list:
        return sorted((e for e in corpus.entries(dataset) if cpu or not e.metadata.get("custom_calls")),
                      key=lambda e: e.metadata.get("runtime_ms", 0.0))

    progs = by_runtime("corpus")
    n_corpus = max(1, count - len(picks) - n_zoo)
    if n_corpus >= len(progs):
        idx = list(range(len(progs)))
    else:
        idx = sorted({round(i * (len(progs) - 1) / max(1, n_corpus - 1)) for i in range(n_corpus)})
    picks += [progs[i].uri for i in idx]
    if n_zoo:  # the inner quantiles (i / (n_zoo + 1)): the slowest zoo programs take seconds a timing
        zoo = by_runtime(corpus.ZOO)
        picks += list(dict.fromkeys(zoo[round(i * (len(zoo) - 1) / (n_zoo + 1))].uri for i in range(1, n_zoo + 1)))
    return [(uri, corpus.load(uri)) for uri in picks]


LONG_S = 1e-4  # programs at least this slow may get `long_repeats` self-timings


def measure(programs: list[tuple[str, Program]], *, repeats: int = 20, quantile: float = 0.95,
            worker=None, device_lock=None, timing: TimingPolicy = SEARCH, progress: bool = True,
            timeout_s: float | None = None, long_repeats: int | None = None) -> dict:
    """Time each program against itself `repeats` times (`long_repeats` times, when larger, if
    its first self-timing took >= `LONG_S`: the corpus range, where the bench's per-runtime
    thresholds need the samples); return the profile (see module doc).
    Each repeat is one timing request under `timing` (the search's policy by default: what a
    candidate's ratio is measured with); a worker started here gets `timeout_s` (default
    `timing.default_timeout()`)."""
    from shlo_env.execute import runtime
    from shlo_env.measure.results_db import load_avg
    from shlo_env.execute.runners import LockedWorker
    from shlo_env.execute.worker import CandidateError, Worker

    own = worker is None
    worker = worker or Worker(timeout_s or default_timeout())
    w = LockedWorker(worker, device_lock) if device_lock is not None else worker
    details: list[dict] = []
    all_ratios: list[float] = []
    load_start = load_avg()
    bar = None
    if progress and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=len(programs) * max(repeats, long_repeats or 0), desc="noise profile", unit="timing", file=sys.stderr,
                   leave=False, dynamic_ncols=True)
    t0 = time.perf_counter()
    try:
        for label, program in programs:
            text = program.text()
            w.set_inputs("noise", runtime.random_inputs(program.in_specs, 0))
            ratios: list[float] = []
            best = math.inf
            try:
                while len(ratios) < (max(repeats, long_repeats or 0) if best >= LONG_S else repeats):
                    a, b = w.time([text, text], "noise", timing)
                    ratios.append(b.full / a.full)
                    best = min(best, a.full, b.full)
                    if bar is not None:
                        bar.update(1)
            except CandidateError as e:
                details.append({"program": label, "error": str(e)})
                continue
            r = np.asarray(ratios)
            details.append({"program": label, "runtime_s": best, "n": len(r),
                            "min": float(r.min()), "median": float(np.median(r)), "max": float(r.max()),
                            "p01": float(np.quantile(r, 0.01)), "p99": float(np.quantile(r, 0.99)),
                            "ratios": [float(x) for x in r]})
            all_ratios += ratios
    finally:
        if bar is not None:
            bar.close()
        if own:
            worker.close()
    if not all_ratios:
        raise RuntimeError("no program of the noise profile could be timed")
    faster, slower = thresholds(all_ratios, quantile)
    loads = [x for x in (load_start, load_avg()) if x is not None]
    return {"faster": faster, "slower": slower, "method": f"quantile {quantile} of |log ratio| (self-timing)",
            "programs": sum("error" not in d for d in details), "repeats": repeats, "samples": len(all_ratios),
            "load_avg": max(loads) if loads else None, "seconds": time.perf_counter() - t0,
            "quantile": quantile, "details": details}


def format_profile(profile: dict) -> str:
    from shlo_env.bench.report import format_table

    model = NoiseModel.from_profile(profile)
    rows = []
    for d in profile["details"] or []:
        if "error" in d:
            rows.append((d["program"], "-", "-", "-", "-", "-", d["error"][:60], "-"))
            continue
        faster, slower = model.thresholds(d["runtime_s"])
        faster3, slower3 = model.thresholds(d["runtime_s"], FINAL_TIMINGS)
        rows.append((d["program"], f"{d['runtime_s'] * 1e3:.4f}", str(d["n"]), f"{d['min']:.3f}",
                     f"{d['median']:.3f}", f"{d['max']:.3f}", f"{faster:.3f} / {slower:.3f}",
                     f"{faster3:.3f} / {slower3:.3f}"))
    head = ("program", "T ms", "repeats", "min ratio", "median", "max ratio", "thresholds at T",
            f"median of {FINAL_TIMINGS}")
    load = profile.get("load_avg")
    return (format_table(head, rows) + f"\n\npooled thresholds: faster < {profile['faster']:.3f}, slower > "
            f"{profile['slower']:.3f} ({profile['samples']} self-timings, {profile['method']}"
            + (f"; load average {load:.2f}" if load is not None else "") + ")\n"
            f"a program of runtime T gets the thresholds of the >= {model.min_samples} self-timings of the "
            f"profile programs nearest T (column 'thresholds at T'; the bench uses these), and for a "
            f"rewrite's final ratio, the median of {FINAL_TIMINGS} timings, those of as many medians of "
            f"{FINAL_TIMINGS} self-timings")


# --- `shlo-env noise` -------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--programs", type=int, default=12,
                        help="programs spanning the runtime range and the datasets (default 12)")
    parser.add_argument("--repeats", type=int, default=21,
                        help="self-timings per program (default 21: 7 medians of three for a rewrite's final ratio)")
    parser.add_argument("--quantile", type=float, default=0.95,
                        help="quantile of |log ratio| that sets the thresholds (default 0.95)")
    parser.add_argument("--db", default=None, help="results database (default ./results/shlo_env.sqlite)")
    parser.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace) -> int:
    from shlo_env.bench.executors import DeviceLock
    from shlo_env.measure.results_db import DEFAULT_PATH, ResultsDB, environment

    env = environment()
    programs = profile_programs(args.programs, args.seed)
    print(f"shlo-env noise: {len(programs)} programs x {args.repeats} self-timings on {env['device_kind']} "
          f"({env['cpu_model']})", file=sys.stderr)
    profile = measure(programs, repeats=args.repeats, quantile=args.quantile, device_lock=DeviceLock())
    with ResultsDB(args.db or DEFAULT_PATH) as db:
        db.ensure_environment(env)
        pid = db.add_noise_profile(env["env_id"], profile)
    print(format_profile(profile))
    print(f"stored as noise profile {pid} in {args.db or DEFAULT_PATH} (environment {env['env_id']})")
    return 0


__all__ = ["MIN_SAMPLES", "NoiseModel", "accepts", "measure", "medians", "profile_programs", "thresholds", "format_profile"]
