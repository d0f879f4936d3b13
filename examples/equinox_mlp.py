"""An Equinox model's training step through `shlo_env.jit`, and its artifact shipped.

    pip install equinox optax        # or: pip install ".[dev]"
    python examples/equinox_mlp.py [--budget SECONDS] [--export DIR]

An `eqx.nn.MLP` is a pytree of arrays and static fields: split it with `eqx.partition` so that
the arrays are the traced arguments and the rest is closed over (as `eqx.filter_jit` does), then
`shlo_env.jit` the step like `jax.jit`. The first call searches rewrites of the step (cached on
disk), the later ones run the winner; the result is checked against `jax.jit` of the same step.
"""

from __future__ import annotations

import argparse

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import shlo_env


def make_step(static, lr: float = 1e-2):
    """A plain SGD step on the model's arrays (`params`), with the static part closed over."""

    def loss(params, x, y):
        model = eqx.combine(params, static)
        pred = jax.vmap(model)(x)
        return jnp.mean((pred - y) ** 2)

    def step(params, x, y):
        value, grads = jax.value_and_grad(loss)(params, x, y)
        params = jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)
        return params, value

    return step


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=15.0, help="search budget in seconds (default 15)")
    parser.add_argument("--export", default=None, metavar="DIR", help="also write the step as an artifact")
    args = parser.parse_args(argv)

    # The model's structure without running its initializers (each compiles a random op), then
    # weights drawn with numpy: quick to start, the same model.
    shapes = eqx.filter_eval_shape(eqx.nn.MLP, in_size=64, out_size=8, width_size=128, depth=2,
                                   key=jax.random.PRNGKey(0))
    rng = np.random.default_rng(0)
    model = jax.tree_util.tree_map(
        lambda s: (rng.standard_normal(s.shape) * 0.1).astype(s.dtype) if isinstance(s, jax.ShapeDtypeStruct) else s,
        shapes, is_leaf=lambda x: isinstance(x, jax.ShapeDtypeStruct))
    params, static = eqx.partition(model, eqx.is_array)
    x = rng.standard_normal((256, 64), np.float32)
    y = rng.standard_normal((256, 8), np.float32)

    step = make_step(static)
    fast_step = shlo_env.jit(step, budget_s=args.budget)
    new_params, value = fast_step(params, x, y)        # the first call searches
    want_params, want = jax.jit(step)(params, x, y)
    np.testing.assert_allclose(value, want, rtol=1e-4)
    for got, ref in zip(jax.tree_util.tree_leaves(new_params), jax.tree_util.tree_leaves(want_params)):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    report = fast_step.report(params, x, y)
    print(report)
    if args.export:
        # jax.export serializes lists, tuples and dicts: the artifact takes the model's leaves
        leaves, treedef = jax.tree_util.tree_flatten(params)

        def flat_step(leaves, x, y):
            new, value = step(jax.tree_util.tree_unflatten(treedef, leaves), x, y)
            return jax.tree_util.tree_leaves(new), value

        fast = shlo_env.optimize(flat_step, leaves, x, y, budget_s=args.budget)
        fast.export(args.export)
        served = shlo_env.load_optimized(args.export)
        np.testing.assert_allclose(served(leaves, x, y)[1], want, rtol=1e-4)
        print(f"exported to {args.export}")
    return {"applied": list(report.applied), "ratio": report.ratio, "loss": float(value)}


if __name__ == "__main__":
    main()
