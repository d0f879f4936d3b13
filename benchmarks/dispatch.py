"""Per-call dispatch cost: `shlo_env.jit` and the `optimize` callable against `jax.jit` (issue 30).

    python benchmarks/dispatch.py [--rounds 200] [--calls 200]

On `tanh(x @ w)` with x 8x16 (a function whose run is a few microseconds, so the time per call
is dispatch), five callables of the same arguments:

- `jax.jit`: `jax.jit(fn)`;
- `optimize (kept)`, `shlo_env.jit (kept)`: the search kept `jax.jit(fn)`;
- `optimize (module)`, `shlo_env.jit (module)`: the search's winner is an exported module
  (here the original module itself, so that no search has to find one).

No search runs: both outcomes are read from a persistent cache written here first, through the
public path a second process takes (`optimize(..., cache=DIR)` and `shlo_env.jit(cache=DIR)`
find the entry, check it against jax.jit, and build the callable).

The callables are timed interleaved: each round runs `--calls` calls of each, in a rotated
order (A, B, C, ... then B, C, ..., A), and waits for the last output. The table gives the
median time per call over the rounds and the median over rounds of the difference from
`jax.jit` in the same round (with the 10th-90th percentile of that difference), on two clocks:
wall time, and this process's CPU time (all its threads), which a busy shared machine disturbs
far less (the wait for a core is not counted). Target: every difference within 1 us.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

import shlo_env as se
from shlo_env.api import cache as search_cache
from shlo_env.ir.hashing import dag_hash
from shlo_env.api.optimize import DEFAULTS, Report


def fn(x, w):
    return jnp.tanh(x @ w)


def seed_cache(directory: str, program: se.Program, kept_seed: int) -> None:
    """Two entries for `program`: under DEFAULTS the original as a 'rewrite' (an exported
    module), under seed `kept_seed` 'jax.jit kept'."""
    store = search_cache.SearchCache(directory)
    report = dataclasses.asdict(Report(name="fn", strategy="none", returned_original=False, ratio=1.0))
    store.put(search_cache.Entry(key=search_cache.search_key(program, DEFAULTS), name="fn",
                                 program=program.text(), numerics="EXACT", optimized_hash=dag_hash(program),
                                 report=report))
    store.put(search_cache.Entry(key=search_cache.search_key(program, DEFAULTS.with_(seed=kept_seed)), name="fn",
                                 program=None, report={**report, "returned_original": True}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--calls", type=int, default=200, help="calls of one callable per round")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    x = jax.device_put(rng.standard_normal((8, 16)).astype(np.float32))
    w = jax.device_put(rng.standard_normal((16, 16)).astype(np.float32))
    directory = tempfile.mkdtemp(prefix="shlo_env_dispatch_")
    seed_cache(directory, se.lower(fn, x, w, name="fn"), kept_seed=1)

    opt_module = se.optimize(fn, x, w, cache=directory)
    opt_kept = se.optimize(fn, x, w, seed=1, cache=directory)
    jit_module = se.jit(fn, cache=directory, progress=False)
    jit_kept = se.jit(fn, seed=1, cache=directory, progress=False)
    callables = {"jax.jit": jax.jit(fn), "optimize (kept)": opt_kept, "optimize (module)": opt_module,
                 "shlo_env.jit (kept)": jit_kept, "shlo_env.jit (module)": jit_module}
    for name, c in callables.items():
        np.testing.assert_allclose(np.asarray(c(x, w)), np.asarray(fn(x, w)), rtol=1e-5, atol=1e-6, err_msg=name)
    assert opt_module.report.cache == "hit" and not opt_module.report.returned_original, opt_module.report
    assert opt_kept.report.cache == "hit" and opt_kept.report.returned_original, opt_kept.report
    assert jit_module.report(x, w).cache == "hit" and not jit_module.report(x, w).returned_original
    assert jit_kept.report(x, w).cache == "hit" and jit_kept.report(x, w).returned_original

    names = list(callables)
    clocks = {"wall": time.perf_counter, "process CPU": time.process_time}
    per_call: dict[str, dict[str, list[float]]] = {k: {n: [] for n in names} for k in clocks}
    load_before = os.getloadavg()
    for r in range(args.rounds + 5):  # 5 rounds of warm-up, not recorded
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            c = callables[n]
            w0, c0 = time.perf_counter(), time.process_time()
            for _ in range(args.calls):
                out = c(x, w)
            jax.block_until_ready(out)
            w1, c1 = time.perf_counter(), time.process_time()
            if r >= 5:
                per_call["wall"][n].append((w1 - w0) / args.calls * 1e6)
                per_call["process CPU"][n].append((c1 - c0) / args.calls * 1e6)

    load = os.getloadavg()
    print(f"{args.rounds} rounds x {args.calls} calls, interleaved; load average (1 min) {load_before[0]:.2f} "
          f"before, {load[0]:.2f} after, on {os.cpu_count()} CPUs; {jax.devices()[0].device_kind}")
    for clock in clocks:
        base = np.array(per_call[clock]["jax.jit"])
        print(f"\n{clock + ' time':<24}{'us/call':>9}{'- jax.jit':>11}{'p10':>8}{'p90':>8}")
        for n in names:
            times = np.array(per_call[clock][n])
            d = times - base
            print(f"{n:<24}{np.median(times):9.2f}{np.median(d):+11.2f}{np.percentile(d, 10):+8.2f}"
                  f"{np.percentile(d, 90):+8.2f}")


if __name__ == "__main__":
    main()
