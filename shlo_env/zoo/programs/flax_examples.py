"""Models from the flax examples (linen MNIST CNN, ImageNet ResNet, lm1b-style decoder) and the
NNX guides, written the way those examples write them, at sizes that run in milliseconds on CPU."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import linen as nn
from flax import nnx

from shlo_env.zoo.programs import optax_step, program


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _xent(logits, labels):
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


# --- examples/mnist --------------------------------------------------------------------------

class MnistCNN(nn.Module):
    """flax/examples/mnist/train.py's CNN."""

    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Conv(features=32, kernel_size=(3, 3))(x))
        x = nn.avg_pool(x, window_shape=(2, 2), strides=(2, 2))
        x = nn.relu(nn.Conv(features=64, kernel_size=(3, 3))(x))
        x = nn.avg_pool(x, window_shape=(2, 2), strides=(2, 2))
        x = x.reshape((x.shape[0], -1))
        x = nn.relu(nn.Dense(features=256)(x))
        return nn.Dense(features=10)(x)


@program("flax_mnist_cnn_train", library="flax.linen", kind="train_step", uses=("optax",),
         description="the flax MNIST example's CNN (2 conv + avg_pool, 2 dense), cross-entropy, "
                     "optax.sgd(0.1, momentum 0.9); batch 16 of 28x28x1")
def flax_mnist_cnn_train():
    model = MnistCNN()
    x = _rng(0).standard_normal((16, 28, 28, 1)).astype(np.float32)
    y = _rng(1).integers(0, 10, size=(16,)).astype(np.int32)
    params = model.init(jax.random.PRNGKey(0), x)["params"]
    tx = optax.sgd(0.1, momentum=0.9)
    step = optax_step(lambda p, x, y: _xent(model.apply({"params": p}, x), y), tx)
    return step, (params, tx.init(params), x, y), {"batch": 16, "image": [28, 28, 1], "optimizer": "sgd(0.1, m 0.9)"}


# --- examples/imagenet/models.py -------------------------------------------------------------

class ResNetBlock(nn.Module):
    filters: int
    conv: Any
    norm: Any
    act: Any
    strides: tuple[int, int] = (1, 1)

    @nn.compact
    def __call__(self, x):
        residual = x
        y = self.conv(self.filters, (3, 3), self.strides)(x)
        y = self.act(self.norm()(y))
        y = self.conv(self.filters, (3, 3))(y)
        y = self.norm(scale_init=nn.initializers.zeros_init())(y)
        if residual.shape != y.shape:
            residual = self.conv(self.filters, (1, 1), self.strides, name="conv_proj")(residual)
            residual = self.norm(name="norm_proj")(residual)
        return self.act(residual + y)


class ResNet(nn.Module):
    stage_sizes: tuple[int, ...]
    num_classes: int
    num_filters: int = 64

    @nn.compact
    def __call__(self, x, train: bool = True):
        conv = functools.partial(nn.Conv, use_bias=False, dtype=jnp.float32)
        norm = functools.partial(nn.BatchNorm, use_running_average=not train, momentum=0.9, epsilon=1e-5)
        x = conv(self.num_filters, (3, 3), name="conv_init")(x)  # CIFAR stem: no 7x7/max-pool
        x = nn.relu(norm(name="bn_init")(x))
        for i, block_size in enumerate(self.stage_sizes):
            for j in range(block_size):
                strides = (2, 2) if i > 0 and j == 0 else (1, 1)
                x = ResNetBlock(self.num_filters * 2 ** i, strides=strides, conv=conv, norm=norm, act=nn.relu)(x)
        x = jnp.mean(x, axis=(1, 2))
        return nn.Dense(self.num_classes)(x)


def _resnet18():
    return ResNet(stage_sizes=(2, 2, 2, 2), num_classes=10, num_filters=16)


@program("flax_resnet18_train", library="flax.linen", kind="train_step", uses=("optax",),
         description="the flax ImageNet example's ResNet18 (BatchNorm with batch_stats as mutable state) "
                     "at CIFAR size (16 base filters, 3x3 stem), SGD nesterov + weight decay; batch 8 of 32x32")
def flax_resnet18_train():
    model = _resnet18()
    x = _rng(2).standard_normal((8, 32, 32, 3)).astype(np.float32)
    y = _rng(3).integers(0, 10, size=(8,)).astype(np.int32)
    variables = model.init(jax.random.PRNGKey(1), x)
    params, batch_stats = variables["params"], variables["batch_stats"]
    tx = optax.chain(optax.add_decayed_weights(1e-4), optax.sgd(0.1, momentum=0.9, nesterov=True))

    def step(params, batch_stats, opt_state, x, y):
        def loss_fn(params):
            logits, updates = model.apply({"params": params, "batch_stats": batch_stats}, x,
                                          mutable=["batch_stats"])
            return _xent(logits, y), updates["batch_stats"]

        (loss, new_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), new_stats, opt_state, loss

    return step, (params, batch_stats, tx.init(params), x, y), {
        "stage_sizes": [2, 2, 2, 2], "num_filters": 16, "batch": 8, "image": [32, 32, 3],
        "optimizer": "add_decayed_weights(1e-4) + sgd(0.1, nesterov)"}


@program("flax_resnet18_infer", library="flax.linen", kind="inference",
         description="the same ResNet18 in evaluation mode (running batch statistics); batch 16 of 32x32")
def flax_resnet18_infer():
    model = _resnet18()
    x = _rng(4).standard_normal((16, 32, 32, 3)).astype(np.float32)
    variables = model.init(jax.random.PRNGKey(2), x)

    def forward(variables, x):
        return model.apply(variables, x, train=False)

    return forward, (variables, x), {"stage_sizes": [2, 2, 2, 2], "num_filters": 16, "batch": 16}


# --- examples/lm1b-style decoder-only transformer --------------------------------------------

class DecoderBlock(nn.Module):
    heads: int
    mlp: int

    @nn.compact
    def __call__(self, x, mask):
        y = nn.LayerNorm()(x)
        y = nn.MultiHeadDotProductAttention(num_heads=self.heads, use_bias=False)(y, y, mask=mask)
        x = x + y
        y = nn.LayerNorm()(x)
        y = nn.Dense(self.mlp)(y)
        y = nn.Dense(x.shape[-1])(nn.gelu(y))
        return x + y


class DecoderLM(nn.Module):
    vocab: int = 1024
    width: int = 128
    layers: int = 3
    heads: int = 4
    max_len: int = 128

    @nn.compact
    def __call__(self, ids):
        embed = nn.Embed(self.vocab, self.width)
        pos = self.param("pos_embedding", nn.initializers.normal(0.02), (1, self.max_len, self.width))
        x = embed(ids) + pos[:, : ids.shape[1]]
        mask = nn.make_causal_mask(ids)
        for _ in range(self.layers):
            x = DecoderBlock(self.heads, 4 * self.width)(x, mask)
        return embed.attend(nn.LayerNorm()(x))  # tied input/output embeddings, as lm1b does


@program("flax_lm_decoder_train", library="flax.linen", kind="train_step", uses=("optax",),
         description="lm1b-style decoder-only LM (3 pre-LN blocks, width 128, 4 heads, tied embeddings, "
                     "causal mask), next-token cross-entropy, optax.adamw with linear warmup; batch 4 x 64")
def flax_lm_decoder_train():
    model = DecoderLM()
    ids = _rng(5).integers(0, 1024, size=(4, 64)).astype(np.int32)
    params = model.init(jax.random.PRNGKey(3), ids)["params"]
    tx = optax.adamw(optax.linear_schedule(0.0, 1e-3, 1000), b2=0.98, weight_decay=0.1)

    def loss_fn(params, ids):
        logits = model.apply({"params": params}, ids)
        return _xent(logits[:, :-1], ids[:, 1:])

    return optax_step(loss_fn, tx), (params, tx.init(params), ids), {
        "vocab": 1024, "width": 128, "layers": 3, "heads": 4, "batch": 4, "seq": 64,
        "optimizer": "adamw(linear warmup 1e-3, b2 0.98, wd 0.1)"}


# --- NNX ---------------------------------------------------------------------------------------

def _is_key(x) -> bool:
    return hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def _keys_to_data(state):
    """Typed PRNG keys (the Dropout RNG state) as their uint32 data: a module input must be an array."""
    return jax.tree.map(lambda x: jax.random.key_data(x) if _is_key(x) else x, state)


def _keys_from_data(state):
    return jax.tree.map(lambda x: jax.random.wrap_key_data(x) if x.dtype == jnp.uint32 and x.ndim >= 1 else x,
                        state)


# --- NNX guides -------------------------------------------------------------------------

class NnxConvNet(nnx.Module):
    """A CIFAR-sized CNN in the NNX style: conv-BatchNorm-relu stages, Dropout, Linear head."""

    def __init__(self, *, rngs: nnx.Rngs):
        self.conv1 = nnx.Conv(3, 32, kernel_size=(3, 3), rngs=rngs)
        self.bn1 = nnx.BatchNorm(32, rngs=rngs)
        self.conv2 = nnx.Conv(32, 64, kernel_size=(3, 3), rngs=rngs)
        self.bn2 = nnx.BatchNorm(64, rngs=rngs)
        self.dropout = nnx.Dropout(0.2, rngs=rngs)
        self.linear = nnx.Linear(64 * 8 * 8, 10, rngs=rngs)

    def __call__(self, x):
        x = nnx.max_pool(nnx.relu(self.bn1(self.conv1(x))), window_shape=(2, 2), strides=(2, 2))
        x = nnx.max_pool(nnx.relu(self.bn2(self.conv2(x))), window_shape=(2, 2), strides=(2, 2))
        return self.linear(self.dropout(x.reshape(x.shape[0], -1)))


@program("nnx_convnet_train", library="flax.nnx", kind="train_step", uses=("optax",),
         description="NNX CNN (2 conv + BatchNorm + max_pool, Dropout, Linear) train step: nnx.split/merge, "
                     "nnx.Optimizer(adam); batch statistics and the dropout RNG state are module state; "
                     "batch 16 of 32x32x3")
def nnx_convnet_train():
    model = NnxConvNet(rngs=nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
    graphdef, state = nnx.split((model, optimizer))
    x = _rng(6).standard_normal((16, 32, 32, 3)).astype(np.float32)
    y = _rng(7).integers(0, 10, size=(16,)).astype(np.int32)

    def step(raw_state, x, y):
        model, optimizer = nnx.merge(graphdef, _keys_from_data(raw_state))
        loss, grads = nnx.value_and_grad(lambda m: _xent(m(x), y))(model)
        optimizer.update(model, grads)
        return _keys_to_data(nnx.state((model, optimizer))), loss

    return step, (_keys_to_data(state), x, y), {"batch": 16, "image": [32, 32, 3], "optimizer": "adam(1e-3)"}
