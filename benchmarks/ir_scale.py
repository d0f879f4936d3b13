"""How fast the IR machinery is on a large module: augment, apply + prune, print, parse.

    python benchmarks/ir_scale.py [--shape transformer|shared|shared_weights] [--layers N]

Lowers a stack of transformer blocks (unrolled; 110 layers = 10,561 ops), a stack where one
value feeds two dots so multi-root matches fire (`--shape shared`, 200 layers = 18,801 ops), or
a stack whose layers all read the same weights (`--shape shared_weights`, issue 30's model: 200
layers = 12,401 ops; the merging patterns pair dots many layers apart), and times each step: the best of 3 wall-clock times, with the CPU time (`time.process_time`) of that
run, which a busy shared machine disturbs less, and the load average before the run.
Targets for a 10,000-op module on a 2-core CPU machine: augment <= 2 s, apply + prune <= 1 s.
Every step is linear in the op count (tests/test_match_cache.py counts augment's work).
"""

from __future__ import annotations

import argparse
import functools
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

import shlo_env as se


def block(x, p):
    h = (x - x.mean(-1, keepdims=True)) * jax.lax.rsqrt(x.var(-1, keepdims=True) + 1e-5) * p["g"]
    q, k, v = h @ p["wq"], h @ p["wk"], h @ p["wv"]
    att = jax.nn.softmax(q @ k.T / np.float32(np.sqrt(q.shape[-1])), axis=-1)
    x = x + (att @ v) @ p["wo"]
    return x + jax.nn.gelu(x @ p["w1"]) @ p["w2"]


def shared_block(x, p):
    """A transformer block where one value feeds two dots (`q @ q.T` and `softmax(...) @ q`),
    so multi-root matches (merging dots that share an operand) fire in every layer."""
    h = (x - x.mean(-1, keepdims=True)) * jax.lax.rsqrt(x.var(-1, keepdims=True) + 1e-5) * p["g"]
    q = h @ p["wq"]
    att = jax.nn.softmax(q @ q.T / np.float32(np.sqrt(q.shape[-1])), axis=-1)
    x = x + (att @ q) @ p["wo"]
    return x + jax.nn.gelu(x @ p["w1"]) @ p["w2"]


def stack(x, params):
    for p in params:
        x = block(x, p)
    return x


def shared_stack(x, params):
    for p in params:
        x = shared_block(x, p)
    return x


def shared_weights_layer(x, w1, w2, g):
    """Issue 30's layer: every layer of the stack reads the same w1, w2 and g."""
    h = x / jnp.sqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6) * g
    q = h @ w1
    a = jax.nn.softmax(q @ q.T / 8.0, axis=-1) @ q
    return x + jax.nn.gelu(a) @ w2


def shared_weights_stack(x, weights, *, layers: int):
    for _ in range(layers):
        x = shared_weights_layer(x, *weights)
    return x


def make_shared_weights(layers: int, seq: int = 64, dim: int = 128):
    """(the function, its arguments): x (seq, dim), w1 and w2 (dim, dim), g (dim,)."""
    rng = np.random.default_rng(0)
    r = lambda *s: rng.standard_normal(s).astype(np.float32) * 0.1  # noqa: E731
    return functools.partial(shared_weights_stack, layers=layers), (r(seq, dim), (r(dim, dim), r(dim, dim), r(dim)))


SHAPES = {"transformer": (stack, 110), "shared": (shared_stack, 200), "shared_weights": (shared_weights_stack, 200)}


def make(layers: int, seq: int = 8, dim: int = 16):
    rng = np.random.default_rng(0)
    r = lambda *s: rng.standard_normal(s).astype(np.float32) * 0.1  # noqa: E731
    params = [{"g": r(dim), "wq": r(dim, dim), "wk": r(dim, dim), "wv": r(dim, dim), "wo": r(dim, dim),
               "w1": r(dim, 4 * dim), "w2": r(4 * dim, dim)} for _ in range(layers)]
    return r(seq, dim), params


def timed(label, fn, repeats=3):
    """(result, best wall-clock seconds), printing the CPU seconds of the best run too."""
    best, cpu, out = float("inf"), float("inf"), None
    load = os.getloadavg()[0]
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        wall = time.perf_counter() - t
        if wall < best:
            best, cpu = wall, time.process_time() - c
    print(f"  {label:<28} {best:8.3f} s  (cpu {cpu:.3f} s, load {load:.2f})")
    return out, best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), default="transformer",
                    help="transformer blocks, a stack where one value feeds two dots, or one whose "
                         "layers share their weights")
    ap.add_argument("--layers", type=int, default=None,
                    help="default: 110 (transformer), 200 (shared, shared_weights)")
    args = ap.parse_args()
    fn, layers = SHAPES[args.shape]
    layers = args.layers or layers
    if args.shape == "shared_weights":
        fn, inputs = make_shared_weights(layers)
    else:
        inputs = make(layers)
    t = time.perf_counter()
    program = se.lower(fn, *inputs, name=f"{args.shape}_{layers}")
    print(f"{program!r}: lowered in {time.perf_counter() - t:.1f} s")
    patterns = se.patterns.all_patterns()
    print(f"{len(patterns)} patterns")
    augmented, t_aug = timed("augment (all patterns)", lambda: se.augment(program, patterns))
    alts = se.list_alternatives(augmented)
    print(f"  -> {len(alts)} alternatives ops, {sum(a.num_choices - 1 for a in alts)} choices")
    decisions = [1] * len(alts)
    _, t_apply = timed("apply (pick-first) + prune", lambda: se.apply(augmented, decisions))
    text, t_print = timed("print", lambda: augmented.text())
    _, t_parse = timed("parse", lambda: se.load(text))
    _, t_bc = timed("bytecode round trip", lambda: se.load(augmented.bytecode()))
    _, t_hash = timed("dag_hash", lambda: se.dag_hash(augmented))
    print(f"\n{args.shape} x{layers}: {program.num_ops()} ops, {len(alts)} alternatives; "
          f"augment {t_aug:.2f} s (target <= 2), apply+prune {t_apply:.2f} s (target <= 1), "
          f"print {t_print:.2f} s, parse {t_parse:.2f} s")


if __name__ == "__main__":
    main()
