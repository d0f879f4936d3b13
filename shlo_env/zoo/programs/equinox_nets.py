"""Equinox models: a ViT-style transformer from `eqx.nn.MultiheadAttention` (train step) and a
1-D convolutional encoder (inference), in the `eqx.partition`/`eqx.combine` style."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import optax

from shlo_env.zoo.programs import optax_step, program


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


class Block(eqx.Module):
    norm1: eqx.nn.LayerNorm
    attn: eqx.nn.MultiheadAttention
    norm2: eqx.nn.LayerNorm
    mlp: eqx.nn.MLP

    def __init__(self, width: int, heads: int, key):
        k1, k2 = jr.split(key)
        self.norm1 = eqx.nn.LayerNorm(width)
        self.attn = eqx.nn.MultiheadAttention(heads, width, key=k1)
        self.norm2 = eqx.nn.LayerNorm(width)
        self.mlp = eqx.nn.MLP(width, width, 2 * width, depth=1, activation=jax.nn.gelu, key=k2)

    def __call__(self, x):  # x: [tokens, width]
        y = jax.vmap(self.norm1)(x)
        x = x + self.attn(y, y, y)
        return x + jax.vmap(self.mlp)(jax.vmap(self.norm2)(x))


class ViT(eqx.Module):
    patch: eqx.nn.Conv2d
    pos: jax.Array
    blocks: list
    head: eqx.nn.Linear

    def __init__(self, width=96, heads=4, depth=3, key=jr.PRNGKey(0)):
        keys = jr.split(key, depth + 2)
        self.patch = eqx.nn.Conv2d(3, width, kernel_size=4, stride=4, key=keys[0])
        self.pos = jr.normal(keys[1], (64, width)) * 0.02
        self.blocks = [Block(width, heads, k) for k in keys[2:]]
        self.head = eqx.nn.Linear(width, 10, key=keys[-1])

    def __call__(self, img):  # img: [3, 32, 32]
        x = self.patch(img).reshape(self.pos.shape[1], -1).T + self.pos
        for b in self.blocks:
            x = b(x)
        return self.head(jnp.mean(x, axis=0))


@program("eqx_vit_train", library="equinox", kind="train_step", uses=("optax",),
         description="ViT from equinox parts (Conv2d patches, 3 blocks of eqx.nn.MultiheadAttention + MLP, "
                     "width 96), vmapped over batch 8 of 32x32x3, optax.adamw; eqx.filter_value_and_grad")
def eqx_vit_train():
    model = ViT()
    tx = optax.adamw(1e-3)
    params, static = eqx.partition(model, eqx.is_array)
    x = _rng(0).standard_normal((8, 3, 32, 32)).astype(np.float32)
    y = _rng(1).integers(0, 10, size=(8,)).astype(np.int32)

    def loss(model, x, y):
        logits = jax.vmap(model)(x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    def step(params, opt_state, x, y):
        model = eqx.combine(params, static)
        value, grads = eqx.filter_value_and_grad(loss)(model, x, y)
        updates, opt_state = tx.update(grads, opt_state, params)
        return eqx.apply_updates(params, updates), opt_state, value

    return step, (params, tx.init(params), x, y), {"width": 96, "heads": 4, "depth": 3, "batch": 8,
                                                   "optimizer": "adamw(1e-3)"}


class ConvEncoder(eqx.Module):
    convs: list
    linear: eqx.nn.Linear

    def __init__(self, key):
        keys = jr.split(key, 5)
        chans = [8, 32, 64, 64, 128]
        self.convs = [eqx.nn.Conv1d(a, b, kernel_size=5, padding=2, key=k)
                      for a, b, k in zip(chans[:-1], chans[1:], keys)]
        self.linear = eqx.nn.Linear(128, 16, key=keys[-1])

    def __call__(self, x):  # x: [8, 256]
        for conv in self.convs:
            x = jax.nn.silu(conv(x))
            x = eqx.nn.MaxPool1d(2, 2)(x)
        return self.linear(jnp.mean(x, axis=-1))


@program("eqx_conv1d_encoder_train", library="equinox", kind="train_step", uses=("optax",),
         description="1-D convolutional signal encoder (4 eqx.nn.Conv1d + silu + MaxPool1d, Linear), "
                     "vmapped over batch 32 of 8 channels x 256 samples, MSE, optax.adabelief")
def eqx_conv1d_encoder_train():
    model = ConvEncoder(jr.PRNGKey(1))
    params, static = eqx.partition(model, eqx.is_array)
    tx = optax.adabelief(1e-3)
    x = _rng(2).standard_normal((32, 8, 256)).astype(np.float32)
    y = _rng(3).standard_normal((32, 16)).astype(np.float32)

    def loss(params, x, y):
        return jnp.mean((jax.vmap(eqx.combine(params, static))(x) - y) ** 2)

    return optax_step(loss, tx), (params, tx.init(params), x, y), {
        "channels": [8, 32, 64, 64, 128], "batch": 32, "length": 256, "optimizer": "adabelief(1e-3)"}
