"""optax update steps on their own: `tx.update(grads, opt_state, params)` + `optax.apply_updates`
over a parameter pytree shaped like a small transformer's, the way training loops call them."""

from __future__ import annotations

import jax
import numpy as np
import optax

from shlo_env.corpus.programs import program


def _params(seed: int, d: int = 128, layers: int = 2, vocab: int = 256) -> dict:
    rng = np.random.default_rng(seed)

    def w(*shape):
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)

    p = {"embed": w(vocab, d)}
    for i in range(layers):
        p[f"layer_{i}"] = {
            "attn": {"qkv": w(d, 3 * d), "out": w(d, d)},
            "mlp": {"fc1": w(d, 4 * d), "b1": np.zeros(4 * d, np.float32), "fc2": w(4 * d, d),
                    "b2": np.zeros(d, np.float32)},
            "ln": {"scale": np.ones(d, np.float32), "bias": np.zeros(d, np.float32)},
        }
    return p


def _grads(params, seed: int):
    rng = np.random.default_rng(seed)
    return jax.tree.map(lambda p: (0.01 * rng.standard_normal(p.shape)).astype(p.dtype), params)


def _update_program(tx, seed: int):
    params = _params(seed)
    grads = _grads(params, seed + 1)
    opt_state = tx.init(params)
    # One step in, so the moments are not all zero.
    _, opt_state = jax.jit(tx.update)(grads, opt_state, params)
    opt_state = jax.tree.map(np.asarray, opt_state)

    def update_step(params, opt_state, grads):
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    return update_step, (params, opt_state, grads)


@program("optax_adamw_schedule", library="optax", kind="optimizer_update",
         description="optax.chain(clip_by_global_norm(1), adamw(warmup_cosine_decay_schedule, wd=0.01)) "
                     "update + apply_updates on a 2-layer transformer's parameters")
def optax_adamw_schedule():
    schedule = optax.warmup_cosine_decay_schedule(0.0, 3e-4, warmup_steps=100, decay_steps=10_000)
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(schedule, weight_decay=0.01))
    return _update_program(tx, 40)


@program("optax_lamb", library="optax", kind="optimizer_update",
         description="optax.lamb (layer-wise trust ratio) update + apply_updates on a 2-layer transformer's parameters")
def optax_lamb():
    return _update_program(optax.lamb(1e-3, weight_decay=1e-4), 42)


@program("optax_adafactor", library="optax", kind="optimizer_update",
         description="optax.adafactor (factored second moments, update clipping) on a 2-layer transformer's parameters")
def optax_adafactor():
    return _update_program(optax.adafactor(1e-3), 44)


@program("optax_lion_masked_wd", library="optax", kind="optimizer_update",
         description="optax.lion with weight decay masked to matrices only (optax.masked), "
                     "update + apply_updates")
def optax_lion_masked_wd():
    params = _params(46)
    mask = jax.tree.map(lambda p: p.ndim > 1, params)
    tx = optax.lion(1e-4, weight_decay=0.1, mask=mask)
    return _update_program(tx, 46)


@program("optax_sgd_accumulate", library="optax", kind="optimizer_update",
         description="optax.MultiSteps(sgd(nesterov momentum), every_k_schedule=4): gradient "
                     "accumulation with a conditional apply")
def optax_sgd_accumulate():
    tx = optax.MultiSteps(optax.sgd(1e-2, momentum=0.9, nesterov=True), every_k_schedule=4)
    return _update_program(tx, 48)
