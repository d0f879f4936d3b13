"""Is `budget_s` kept on big, slow programs? (issue 31 item 2)

    python benchmarks/budget_keeping.py [--budgets 10,20,60] [--programs lm_small,lm_big,mlp_slow]

Builds plain-JAX programs: a 6-layer transformer LM train step (about 2,000 StableHLO ops) at a
small batch (about 0.2 s per call on 2 shared cores) and at a large one (over 1.5 s per call),
and an MLP whose call takes seconds. Runs `optimize_program` at each budget and prints wall time
against the budget, the candidates evaluated, the time of each phase (`ProgramResult.phases`:
original compile, noise, expand (augment), search, confirmation, reference, final) and what was
cut short (`ProgramResult.cuts`). The machine is shared: note `uptime` with any number.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from shlo_env.ir.program import lower
from shlo_env.search.program_search import SearchOptions, optimize_program


def _layer_norm(x, g):
    return (x - x.mean(-1, keepdims=True)) * jax.lax.rsqrt(x.var(-1, keepdims=True) + 1e-5) * g


def _block(x, p):
    b, t, d = x.shape
    h = _layer_norm(x, p["g1"])
    q, k, v = h @ p["wq"], h @ p["wk"], h @ p["wv"]
    heads = 4
    split = lambda a: a.reshape(b, t, heads, d // heads).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = split(q), split(k), split(v)
    att = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(d // heads))
    att = jnp.where(jnp.tril(jnp.ones((t, t), bool)), att, -1e9)
    o = (jax.nn.softmax(att, -1) @ v).transpose(0, 2, 1, 3).reshape(b, t, d)
    x = x + o @ p["wo"]
    return x + jax.nn.gelu(_layer_norm(x, p["g2"]) @ p["w1"]) @ p["w2"]


def lm_train_step(batch: int, seq: int = 64, d: int = 128, layers: int = 6, vocab: int = 512):
    """A plain-JAX transformer LM train step (SGD): (params, tokens) -> (loss, new params)."""
    rng = np.random.default_rng(0)
    w = lambda *s: jnp.asarray(rng.normal(0, 0.02, s), jnp.float32)  # noqa: E731
    params = {"emb": w(vocab, d), "out": w(d, vocab), "layers": [
        {"g1": jnp.ones(d), "g2": jnp.ones(d), "wq": w(d, d), "wk": w(d, d), "wv": w(d, d),
         "wo": w(d, d), "w1": w(d, 4 * d), "w2": w(4 * d, d)} for _ in range(layers)]}
    tokens = jnp.asarray(rng.integers(0, vocab, (batch, seq + 1)), jnp.int32)

    def loss(p, tok):
        x = p["emb"][tok[:, :-1]]
        for lp in p["layers"]:
            x = _block(x, lp)
        logits = x @ p["out"]
        logp = jax.nn.log_softmax(logits, -1)
        return -jnp.take_along_axis(logp, tok[:, 1:, None], -1).mean()

    def step(p, tok):
        val, g = jax.value_and_grad(loss)(p, tok)
        return val, jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, p, g)

    return step, (params, tokens)


def mlp_slow(width: int = 2048, depth: int = 6, batch: int = 1024):
    """An MLP whose call takes seconds on 2 cores (big dots, few ops)."""
    rng = np.random.default_rng(0)
    ws = [jnp.asarray(rng.normal(0, 1 / np.sqrt(width), (width, width)), jnp.float32) for _ in range(depth)]
    x = jnp.asarray(rng.normal(size=(batch, width)), jnp.float32)

    def f(ws, x):
        for w in ws:
            x = jnp.tanh(x @ w) * 1.01 + 0.5 * x
        return x.sum()

    return f, (ws, x)


PROGRAMS = {
    "lm_small": lambda: lm_train_step(batch=2),
    "lm_big": lambda: lm_train_step(batch=16),
    "mlp_slow": lambda: mlp_slow(),
}


def call_s(fn, args, runs: int = 2) -> float:
    jf = jax.jit(fn)
    jax.block_until_ready(jf(*args))
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        jax.block_until_ready(jf(*args))
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budgets", default="10,20,60")
    ap.add_argument("--programs", default=",".join(PROGRAMS))
    ap.add_argument("--strategy", default="auto")
    a = ap.parse_args()
    print(f"load: {os.getloadavg()}")
    print("| program | ops | s/call | budget | wall | wall/budget | candidates | phases (s) | cut |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in a.programs.split(","):
        fn, args = PROGRAMS[name]()
        program = lower(fn, *args, name=name)
        per_call = call_s(fn, args)
        for budget in [float(b) for b in a.budgets.split(",")]:
            t = time.perf_counter()
            res = optimize_program(program, SearchOptions(strategy=a.strategy, budget_s=budget))
            wall = time.perf_counter() - t
            phases = ", ".join(f"{p['name']} {p['spent_s']:.1f}" for p in getattr(res, "phases", []))
            cuts = "; ".join(getattr(res, "cuts", ())) or "-"
            print(f"| {name} | {program.num_ops()} | {per_call:.2f} | {budget:.0f} | {wall:.1f} | "
                  f"{wall / budget:.2f} | {res.candidates_evaluated} | {phases or res.reason} | {cuts} |",
                  flush=True)
        print(f"load: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
