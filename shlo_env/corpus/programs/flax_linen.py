"""Flax linen models, written the way the flax examples write them (TrainState, optax, apply)."""

from __future__ import annotations

import functools
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import linen as nn
from flax.training import train_state

from shlo_env.corpus.programs import program


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


# --- MLP classifier train step (flax/examples style) -------------------------------------------

class MLP(nn.Module):
    features: Sequence[int]

    @nn.compact
    def __call__(self, x):
        for f in self.features[:-1]:
            x = nn.relu(nn.Dense(f)(x))
        return nn.Dense(self.features[-1])(x)


@program("linen_mlp_train", library="flax.linen", kind="train_step", uses=("optax",),
         description="MNIST-sized MLP classifier (784-256-256-10), cross-entropy, adam; "
                     "one TrainState.apply_gradients step, batch 128")
def linen_mlp_train():
    model = MLP([256, 256, 10])
    x = _rng(0).standard_normal((128, 784)).astype(np.float32)
    y = _rng(1).integers(0, 10, size=(128,)).astype(np.int32)
    params = model.init(jax.random.PRNGKey(0), x)["params"]
    state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adam(1e-3))

    def train_step(state, x, y):
        def loss_fn(params):
            logits = state.apply_fn({"params": params}, x)
            loss = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
            return loss, logits

        (loss, logits), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
        accuracy = jnp.mean(jnp.argmax(logits, -1) == y)
        return state.apply_gradients(grads=grads), loss, accuracy

    return train_step, (state, x, y)


# --- CNN train step (flax/examples/mnist) ------------------------------------------------------

class CNN(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.Conv(features=32, kernel_size=(3, 3))(x)
        x = nn.relu(x)
        x = nn.avg_pool(x, window_shape=(2, 2), strides=(2, 2))
        x = nn.Conv(features=64, kernel_size=(3, 3))(x)
        x = nn.relu(x)
        x = nn.avg_pool(x, window_shape=(2, 2), strides=(2, 2))
        x = x.reshape((x.shape[0], -1))
        x = nn.Dense(features=256)(x)
        x = nn.relu(x)
        x = nn.Dense(features=10)(x)
        return x


@program("linen_cnn_train", library="flax.linen", kind="train_step", uses=("optax",),
         description="flax MNIST example CNN (2 conv + 2 dense), SGD with momentum, batch 16 of 28x28x1")
def linen_cnn_train():
    model = CNN()
    x = _rng(2).standard_normal((16, 28, 28, 1)).astype(np.float32)
    y = _rng(3).integers(0, 10, size=(16,)).astype(np.int32)
    params = model.init(jax.random.PRNGKey(1), x)["params"]
    state = train_state.TrainState.create(apply_fn=model.apply, params=params,
                                          tx=optax.sgd(0.1, momentum=0.9))

    def apply_model(state, images, labels):
        def loss_fn(params):
            logits = state.apply_fn({"params": params}, images)
            one_hot = jax.nn.one_hot(labels, 10)
            loss = jnp.mean(optax.softmax_cross_entropy(logits=logits, labels=one_hot))
            return loss, logits

        (loss, logits), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
        accuracy = jnp.mean(jnp.argmax(logits, -1) == labels)
        return grads, loss, accuracy

    def train_step(state, images, labels):
        grads, loss, accuracy = apply_model(state, images, labels)
        return state.apply_gradients(grads=grads), loss, accuracy

    return train_step, (state, x, y)


# --- ResNet inference (BatchNorm with running averages) ---------------------------------------

class ResNetBlock(nn.Module):
    filters: int
    strides: tuple[int, int] = (1, 1)

    @nn.compact
    def __call__(self, x):
        norm = functools.partial(nn.BatchNorm, use_running_average=True, momentum=0.9, epsilon=1e-5)
        residual = x
        y = nn.Conv(self.filters, (3, 3), self.strides, use_bias=False)(x)
        y = norm()(y)
        y = nn.relu(y)
        y = nn.Conv(self.filters, (3, 3), use_bias=False)(y)
        y = norm(scale_init=nn.initializers.zeros_init())(y)
        if residual.shape != y.shape:
            residual = nn.Conv(self.filters, (1, 1), self.strides, use_bias=False, name="conv_proj")(residual)
            residual = norm(name="norm_proj")(residual)
        return nn.relu(residual + y)


class ResNet(nn.Module):
    stage_sizes: Sequence[int]
    num_filters: int = 16
    num_classes: int = 10

    @nn.compact
    def __call__(self, x):
        x = nn.Conv(self.num_filters, (3, 3), use_bias=False, name="conv_init")(x)
        x = nn.BatchNorm(use_running_average=True, name="bn_init")(x)
        x = nn.relu(x)
        for i, block_size in enumerate(self.stage_sizes):
            for j in range(block_size):
                strides = (2, 2) if i > 0 and j == 0 else (1, 1)
                x = ResNetBlock(self.num_filters * 2 ** i, strides=strides)(x)
        x = jnp.mean(x, axis=(1, 2))
        return nn.Dense(self.num_classes)(x)


@program("linen_resnet_infer", library="flax.linen", kind="inference",
         description="small CIFAR ResNet (stages [1,1,1], 16 filters, BatchNorm in eval mode), batch 4 of 32x32x3")
def linen_resnet_infer():
    model = ResNet(stage_sizes=[1, 1, 1])
    x = _rng(4).standard_normal((4, 32, 32, 3)).astype(np.float32)
    variables = model.init(jax.random.PRNGKey(2), x)

    def predict(variables, x):
        return model.apply(variables, x)

    return predict, (variables, x)


# --- decoder-only transformer LM ---------------------------------------------------------------

class DecoderBlock(nn.Module):
    num_heads: int
    mlp_dim: int

    @nn.compact
    def __call__(self, x, mask):
        y = nn.LayerNorm()(x)
        y = nn.MultiHeadDotProductAttention(num_heads=self.num_heads, deterministic=True)(y, y, mask=mask)
        x = x + y
        y = nn.LayerNorm()(x)
        y = nn.Dense(self.mlp_dim)(y)
        y = nn.gelu(y)
        y = nn.Dense(x.shape[-1])(y)
        return x + y


class TransformerLM(nn.Module):
    vocab_size: int = 512
    emb_dim: int = 128
    num_layers: int = 2
    num_heads: int = 4
    max_len: int = 64

    @nn.compact
    def __call__(self, tokens):
        x = nn.Embed(self.vocab_size, self.emb_dim)(tokens)
        pos = self.param("pos_embedding", nn.initializers.normal(0.02), (1, self.max_len, self.emb_dim))
        x = x + pos[:, : tokens.shape[1]]
        mask = nn.make_causal_mask(tokens)
        for _ in range(self.num_layers):
            x = DecoderBlock(self.num_heads, 4 * self.emb_dim)(x, mask)
        x = nn.LayerNorm()(x)
        return nn.Dense(self.vocab_size)(x)


@program("linen_transformer_lm", library="flax.linen", kind="inference",
         description="decoder-only transformer LM (2 layers, d=128, 4 heads, causal mask), logits for 4x64 tokens")
def linen_transformer_lm():
    model = TransformerLM()
    tokens = _rng(5).integers(0, 512, size=(4, 64)).astype(np.int32)
    params = model.init(jax.random.PRNGKey(3), tokens)

    def logits(params, tokens):
        return model.apply(params, tokens)

    return logits, (params, tokens)


# --- LSTM sequence classifier ------------------------------------------------------------------

class LSTMClassifier(nn.Module):
    hidden: int = 64
    num_classes: int = 5

    @nn.compact
    def __call__(self, x):
        h = nn.RNN(nn.OptimizedLSTMCell(self.hidden))(x)
        return nn.Dense(self.num_classes)(h[:, -1])


@program("linen_lstm_classifier", library="flax.linen", kind="inference",
         description="nn.RNN(OptimizedLSTMCell(64)) over 32 steps (a scan), last state to 5 classes, batch 16")
def linen_lstm_classifier():
    model = LSTMClassifier()
    x = _rng(6).standard_normal((16, 32, 32)).astype(np.float32)
    params = model.init(jax.random.PRNGKey(4), x)

    def classify(params, x):
        return jax.nn.log_softmax(model.apply(params, x))

    return classify, (params, x)


# --- VAE train step (flax/examples/vae) --------------------------------------------------------

class Encoder(nn.Module):
    latents: int

    @nn.compact
    def __call__(self, x):
        x = nn.Dense(256, name="fc1")(x)
        x = nn.relu(x)
        mean_x = nn.Dense(self.latents, name="fc2_mean")(x)
        logvar_x = nn.Dense(self.latents, name="fc2_logvar")(x)
        return mean_x, logvar_x


class Decoder(nn.Module):
    @nn.compact
    def __call__(self, z):
        z = nn.Dense(256, name="fc1")(z)
        z = nn.relu(z)
        return nn.Dense(784, name="fc2")(z)


class VAE(nn.Module):
    latents: int = 20

    def setup(self):
        self.encoder = Encoder(self.latents)
        self.decoder = Decoder()

    def __call__(self, x, eps):
        mean, logvar = self.encoder(x)
        z = mean + eps * jnp.exp(0.5 * logvar)
        return self.decoder(z), mean, logvar


@program("linen_vae_train", library="flax.linen", kind="train_step", uses=("optax",),
         description="flax VAE example: MLP encoder/decoder, reparameterization with given noise, "
                     "BCE + KL loss, adam, batch 64 of 784")
def linen_vae_train():
    model = VAE()
    x = _rng(7).random((64, 784)).astype(np.float32)
    eps = _rng(8).standard_normal((64, 20)).astype(np.float32)
    params = model.init(jax.random.PRNGKey(5), x, eps)["params"]
    state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adam(1e-3))

    def kl_divergence(mean, logvar):
        return -0.5 * jnp.sum(1 + logvar - jnp.square(mean) - jnp.exp(logvar))

    def binary_cross_entropy_with_logits(logits, labels):
        logits = nn.log_sigmoid(logits)
        return -jnp.sum(labels * logits + (1.0 - labels) * jnp.log(-jnp.expm1(logits)))

    def train_step(state, batch, eps):
        def loss_fn(params):
            recon_x, mean, logvar = model.apply({"params": params}, batch, eps)
            bce_loss = jax.vmap(binary_cross_entropy_with_logits)(recon_x, batch).mean()
            kld_loss = jax.vmap(kl_divergence)(mean, logvar).mean()
            return bce_loss + kld_loss

        loss, grads = jax.value_and_grad(loss_fn)(state.params)
        return state.apply_gradients(grads=grads), loss

    return train_step, (state, x, eps)


# --- BatchNorm + Dropout train step (mutable batch_stats, dropout rng) --------------------------

class BNDropoutMLP(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool):
        for f in (128, 128):
            x = nn.Dense(f)(x)
            x = nn.BatchNorm(use_running_average=not train, momentum=0.9)(x)
            x = nn.relu(x)
            x = nn.Dropout(rate=0.1, deterministic=not train)(x)
        return nn.Dense(10)(x)


class TrainStateBN(train_state.TrainState):
    batch_stats: Any = None


@program("linen_bn_dropout_train", library="flax.linen", kind="train_step", uses=("optax",),
         description="MLP with BatchNorm (mutable batch_stats) and Dropout (PRNG key input), "
                     "adamw train step, batch 64")
def linen_bn_dropout_train():
    model = BNDropoutMLP()
    x = _rng(9).standard_normal((64, 64)).astype(np.float32)
    y = _rng(10).integers(0, 10, size=(64,)).astype(np.int32)
    variables = model.init(jax.random.PRNGKey(6), x, train=False)
    state = TrainStateBN.create(apply_fn=model.apply, params=variables["params"],
                                batch_stats=variables["batch_stats"], tx=optax.adamw(1e-3, weight_decay=1e-4))
    dropout_key = np.asarray(jax.random.PRNGKey(7))

    def train_step(state, x, y, dropout_key):
        def loss_fn(params):
            logits, updates = state.apply_fn({"params": params, "batch_stats": state.batch_stats}, x,
                                             train=True, rngs={"dropout": dropout_key},
                                             mutable=["batch_stats"])
            loss = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
            return loss, updates

        (loss, updates), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
        state = state.apply_gradients(grads=grads)
        return state.replace(batch_stats=updates["batch_stats"]), loss

    return train_step, (state, x, y, dropout_key)


# --- diffusion sampling step ------------------------------------------------------------------

class TimeEmbedding(nn.Module):
    dim: int

    @nn.compact
    def __call__(self, t):
        half = self.dim // 2
        freqs = jnp.exp(-jnp.log(10000.0) * jnp.arange(half) / half)
        args = t[:, None].astype(jnp.float32) * freqs[None]
        emb = jnp.concatenate([jnp.sin(args), jnp.cos(args)], axis=-1)
        emb = nn.Dense(self.dim * 2)(emb)
        return nn.Dense(self.dim)(nn.swish(emb))


class Denoiser(nn.Module):
    """A small conv denoiser with time conditioning (a UNet without the down/up levels)."""
    channels: int = 32

    @nn.compact
    def __call__(self, x, t):
        temb = TimeEmbedding(self.channels)(t)
        h = nn.Conv(self.channels, (3, 3))(x)
        for _ in range(2):
            r = h
            h = nn.GroupNorm(num_groups=8)(h)
            h = nn.swish(h)
            h = nn.Conv(self.channels, (3, 3))(h)
            h = h + nn.Dense(self.channels)(temb)[:, None, None, :]
            h = nn.GroupNorm(num_groups=8)(h)
            h = nn.swish(h)
            h = nn.Conv(self.channels, (3, 3))(h)
            h = h + r
        return nn.Conv(x.shape[-1], (3, 3))(nn.swish(nn.GroupNorm(num_groups=8)(h)))


@program("linen_ddpm_sample_step", library="flax.linen", kind="inference",
         description="DDPM ancestral sampling step x_t -> x_{t-1} (linear beta schedule, 1000 steps) "
                     "with a time-conditioned conv denoiser, batch 4 of 16x16x1")
def linen_ddpm_sample_step():
    model = Denoiser()
    x = _rng(11).standard_normal((4, 16, 16, 1)).astype(np.float32)
    z = _rng(12).standard_normal((4, 16, 16, 1)).astype(np.float32)
    t = np.full((4,), 500, np.int32)
    params = model.init(jax.random.PRNGKey(8), x, t)
    betas = jnp.linspace(1e-4, 0.02, 1000)
    alphas = 1.0 - betas
    alphas_cumprod = jnp.cumprod(alphas)

    def p_sample(params, x_t, t, noise):
        eps = model.apply(params, x_t, t)
        beta_t = betas[t][:, None, None, None]
        alpha_t = alphas[t][:, None, None, None]
        abar_t = alphas_cumprod[t][:, None, None, None]
        mean = (x_t - beta_t / jnp.sqrt(1.0 - abar_t) * eps) / jnp.sqrt(alpha_t)
        abar_prev = jnp.where(t > 0, alphas_cumprod[jnp.maximum(t - 1, 0)], 1.0)[:, None, None, None]
        var = beta_t * (1.0 - abar_prev) / (1.0 - abar_t)
        nonzero = (t > 0).astype(x_t.dtype)[:, None, None, None]
        return mean + nonzero * jnp.sqrt(var) * noise

    return p_sample, (params, x, t, z)
