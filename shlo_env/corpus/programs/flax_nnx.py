"""Flax NNX models. Train steps use the functional form of the NNX docs: `nnx.split` the model
and optimizer into a graph definition and a state pytree, and `nnx.merge` them inside a pure
function, which is what `nnx.jit` does under the hood."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from shlo_env.corpus.programs import program


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _functional_train_step(model, optimizer, loss_fn):
    """`nnx.split` (model, optimizer) once; return a pure step(state, *batch) -> (state, loss)."""
    graphdef, state = nnx.split((model, optimizer))

    def train_step(state, *batch):
        model, optimizer = nnx.merge(graphdef, state)
        loss, grads = nnx.value_and_grad(loss_fn)(model, *batch)
        optimizer.update(model, grads)
        return nnx.state((model, optimizer)), loss

    return train_step, state


class NnxMLP(nnx.Module):
    def __init__(self, din: int, dmid: int, dout: int, *, rngs: nnx.Rngs):
        self.linear1 = nnx.Linear(din, dmid, rngs=rngs)
        self.linear2 = nnx.Linear(dmid, dmid, rngs=rngs)
        self.linear3 = nnx.Linear(dmid, dout, rngs=rngs)

    def __call__(self, x):
        x = nnx.gelu(self.linear1(x))
        x = nnx.gelu(self.linear2(x))
        return self.linear3(x)


@program("nnx_mlp_train", library="flax.nnx", kind="train_step", uses=("optax",),
         description="NNX MLP regression (64-256-256-8, gelu), MSE, nnx.Optimizer(adamw) update, batch 256")
def nnx_mlp_train():
    model = NnxMLP(64, 256, 8, rngs=nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adamw(3e-4), wrt=nnx.Param)
    x = _rng(20).standard_normal((256, 64)).astype(np.float32)
    y = _rng(21).standard_normal((256, 8)).astype(np.float32)

    def loss_fn(model, x, y):
        return jnp.mean((model(x) - y) ** 2)

    step, state = _functional_train_step(model, optimizer, loss_fn)
    return step, (state, x, y)


class NnxCNN(nnx.Module):
    """The CNN of the NNX MNIST tutorial."""

    def __init__(self, *, rngs: nnx.Rngs):
        self.conv1 = nnx.Conv(1, 32, kernel_size=(3, 3), rngs=rngs)
        self.conv2 = nnx.Conv(32, 64, kernel_size=(3, 3), rngs=rngs)
        self.avg_pool = lambda x: nnx.avg_pool(x, window_shape=(2, 2), strides=(2, 2))
        self.linear1 = nnx.Linear(3136, 256, rngs=rngs)
        self.linear2 = nnx.Linear(256, 10, rngs=rngs)

    def __call__(self, x):
        x = self.avg_pool(nnx.relu(self.conv1(x)))
        x = self.avg_pool(nnx.relu(self.conv2(x)))
        x = x.reshape(x.shape[0], -1)
        x = nnx.relu(self.linear1(x))
        return self.linear2(x)


@program("nnx_cnn_train", library="flax.nnx", kind="train_step", uses=("optax",),
         description="NNX MNIST tutorial CNN, cross-entropy, nnx.Optimizer(adamw) step, batch 8 of 28x28x1")
def nnx_cnn_train():
    model = NnxCNN(rngs=nnx.Rngs(1))
    optimizer = nnx.Optimizer(model, optax.adamw(5e-3, 0.9), wrt=nnx.Param)
    x = _rng(22).standard_normal((8, 28, 28, 1)).astype(np.float32)
    y = _rng(23).integers(0, 10, size=(8,)).astype(np.int32)

    def loss_fn(model, images, labels):
        logits = model(images)
        return optax.softmax_cross_entropy_with_integer_labels(logits=logits, labels=labels).mean()

    step, state = _functional_train_step(model, optimizer, loss_fn)
    return step, (state, x, y)


class NnxTransformerBlock(nnx.Module):
    def __init__(self, d: int, heads: int, *, rngs: nnx.Rngs):
        self.ln1 = nnx.LayerNorm(d, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(num_heads=heads, in_features=d, decode=False, rngs=rngs)
        self.ln2 = nnx.LayerNorm(d, rngs=rngs)
        self.fc1 = nnx.Linear(d, 4 * d, rngs=rngs)
        self.fc2 = nnx.Linear(4 * d, d, rngs=rngs)

    def __call__(self, x, mask):
        x = x + self.attn(self.ln1(x), mask=mask, deterministic=True)
        return x + self.fc2(nnx.gelu(self.fc1(self.ln2(x))))


@program("nnx_transformer_block", library="flax.nnx", kind="inference",
         description="NNX pre-LN transformer block (MultiHeadAttention 4 heads, d=128, causal), 4x64 tokens")
def nnx_transformer_block():
    block = NnxTransformerBlock(128, 4, rngs=nnx.Rngs(2))
    graphdef, state = nnx.split(block)
    x = _rng(24).standard_normal((4, 64, 128)).astype(np.float32)

    def forward(state, x):
        block = nnx.merge(graphdef, state)
        mask = nnx.make_causal_mask(jnp.ones(x.shape[:2]))
        return block(x, mask)

    return forward, (state, x)


class LoRAMLP(nnx.Module):
    def __init__(self, d: int, rank: int, *, rngs: nnx.Rngs):
        self.base1 = nnx.Linear(d, d, rngs=rngs)
        self.lora1 = nnx.LoRA(d, rank, d, rngs=rngs)
        self.base2 = nnx.Linear(d, d, rngs=rngs)
        self.lora2 = nnx.LoRA(d, rank, d, rngs=rngs)

    def __call__(self, x):
        x = nnx.relu(self.base1(x) + self.lora1(x))
        return self.base2(x) + self.lora2(x)


@program("nnx_lora_mlp", library="flax.nnx", kind="inference",
         description="two frozen 256x256 layers with rank-8 nnx.LoRA adapters, batch 512")
def nnx_lora_mlp():
    model = LoRAMLP(256, 8, rngs=nnx.Rngs(3))
    # LoRA's B starts at zero; give it values as a fine-tuned adapter would have.
    model.lora1.lora_b.value = jnp.asarray(_rng(25).standard_normal((8, 256)).astype(np.float32) * 0.01)
    model.lora2.lora_b.value = jnp.asarray(_rng(26).standard_normal((8, 256)).astype(np.float32) * 0.01)
    graphdef, state = nnx.split(model)
    x = _rng(27).standard_normal((512, 256)).astype(np.float32)

    def forward(state, x):
        return nnx.merge(graphdef, state)(x)

    return forward, (state, x)


class NnxGRUEncoder(nnx.Module):
    def __init__(self, din: int, hidden: int, *, rngs: nnx.Rngs):
        self.hidden = hidden
        cell = nnx.GRUCell(din, hidden, rngs=rngs)
        cell.rngs = None  # the carry is passed in, so the cell needs no RNG stream of its own
        self.rnn = nnx.RNN(cell, rngs=False)
        self.head = nnx.Linear(hidden, 1, rngs=rngs)

    def __call__(self, x):
        h0 = jnp.zeros((x.shape[0], self.hidden), x.dtype)
        return self.head(self.rnn(x, initial_carry=h0)[:, -1])


@program("nnx_gru_train", library="flax.nnx", kind="train_step", uses=("optax",),
         description="NNX RNN(GRUCell 32->64) over 24 steps, regression head, MSE, adam step, batch 16")
def nnx_gru_train():
    model = NnxGRUEncoder(32, 64, rngs=nnx.Rngs(4))
    optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
    x = _rng(28).standard_normal((16, 24, 32)).astype(np.float32)
    y = _rng(29).standard_normal((16, 1)).astype(np.float32)

    def loss_fn(model, x, y):
        return jnp.mean((model(x) - y) ** 2)

    step, state = _functional_train_step(model, optimizer, loss_fn)
    return step, (state, x, y)
