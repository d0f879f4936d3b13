"""`optimize` against `jax.jit`, side by side in one process (A, B, A, B, ...).

    python benchmarks/optimize_vs_jit.py [--rounds 50]

The four checks of the core: a low-rank update (target >= 1.3x), a matmul chain (>= 5x),
column sums of a product (>= 10x), the same plus a chlo op (>= 10x), and a function no pattern improves (ratio within
0.95-1.05, never slower). Prints each speedup with its spread over repeated measurements.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

import shlo_env as se
from shlo_env.bench import examples
from shlo_env.api.optimize import time_callables
from shlo_env.measure.timing_policy import TimingPolicy

def column_sums_plus_square(X, W):
    """The README example plus a term jax lowers to a chlo op (chlo.square)."""
    return jnp.sum(X @ W, axis=0) + jnp.sum(jnp.square(W))


CASES = [
    ("low_rank_update", examples.low_rank_update, [(8, 2048), (2048, 2048), (2048, 8), (8, 2048)], 1.3),
    ("matmul_chain", examples.matmul_chain, [(1024, 1024), (1024, 1024), (1024, 1)], 5.0),
    ("column_sums", examples.column_sums_of_product, [(4096, 1024), (1024, 1024)], 10.0),
    ("column_sums + chlo", column_sums_plus_square, [(4096, 1024), (1024, 1024)], 10.0),
    ("mlp (nothing to gain)", examples.mlp, [(128, 256), (256, 512), (512,), (512, 256), (256,)], None),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="independent side-by-side measurements")
    ap.add_argument("--only", default="", help="run only the cases whose name contains this")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'program':<24}{'speedup':>10}{'min':>8}{'max':>8}{'target':>11}  applied")
    for name, fn, shapes, target in CASES:
        if args.only not in name:
            continue
        inputs = [jax.device_put(rng.standard_normal(s).astype(np.float32)) for s in shapes]
        opt = se.optimize(fn, *inputs, name=name)
        jitted = jax.jit(fn)
        ratios = []
        for _ in range(args.rounds):
            t_jit, t_opt = time_callables([jitted, opt], inputs, TimingPolicy(runs=20, warmup=3, min_seconds=0.5))
            ratios.append(t_jit / t_opt)
        med = float(np.median(ratios))
        tgt = f">={target}x" if target else "0.95-1.05"
        ok = med >= target if target else 0.95 <= med <= 1.05
        print(f"{name:<24}{med:>9.2f}x{min(ratios):>8.2f}{max(ratios):>8.2f}{tgt:>11}  "
              f"{', '.join(opt.report.applied) or '(jax.jit)'}  {'ok' if ok else 'MISSED'}")


if __name__ == "__main__":
    main()
