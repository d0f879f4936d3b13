"""Equinox models, written as the equinox docs write them: modules are pytrees, `eqx.partition`
splits arrays from static parts, per-example code is `jax.vmap`ped, optax does the updates."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import optax

from shlo_env.corpus.programs import program


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _pure(model, fn):
    """Split a model into (arrays, static) so a program can take the arrays as inputs."""
    params, static = eqx.partition(model, eqx.is_array)

    def wrapped(params, *args):
        return fn(eqx.combine(params, static), *args)

    return wrapped, params


@program("eqx_mlp_train", library="equinox", kind="train_step", uses=("optax",),
         description="eqx.nn.MLP (2->128x3->1, tanh) fitting a 1-D function: filter_value_and_grad, "
                     "optax.adam, eqx.apply_updates, batch 512")
def eqx_mlp_train():
    model = eqx.nn.MLP(in_size=2, out_size=1, width_size=128, depth=3, activation=jnp.tanh, key=jr.PRNGKey(0))
    optim = optax.adam(3e-3)
    opt_state = optim.init(eqx.filter(model, eqx.is_array))
    x = _rng(30).standard_normal((512, 2)).astype(np.float32)
    y = np.sin(3 * x[:, :1]) * np.cos(2 * x[:, 1:])

    @eqx.filter_value_and_grad
    def compute_loss(model, x, y):
        pred_y = jax.vmap(model)(x)
        return jnp.mean((y - pred_y) ** 2)

    params, static = eqx.partition(model, eqx.is_array)

    def make_step(params, opt_state, x, y):
        model = eqx.combine(params, static)
        loss, grads = compute_loss(model, x, y)
        updates, opt_state = optim.update(grads, opt_state, eqx.filter(model, eqx.is_array))
        model = eqx.apply_updates(model, updates)
        return eqx.filter(model, eqx.is_array), opt_state, loss

    return make_step, (params, opt_state, x, y.astype(np.float32))


class EqxCNN(eqx.Module):
    layers: list

    def __init__(self, key):
        key1, key2, key3, key4 = jr.split(key, 4)
        self.layers = [
            eqx.nn.Conv2d(1, 3, kernel_size=4, key=key1),
            eqx.nn.MaxPool2d(kernel_size=2),
            jax.nn.relu,
            jnp.ravel,
            eqx.nn.Linear(1728, 512, key=key2),
            jax.nn.sigmoid,
            eqx.nn.Linear(512, 64, key=key3),
            jax.nn.relu,
            eqx.nn.Linear(64, 10, key=key4),
            jax.nn.log_softmax,
        ]

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


@program("eqx_cnn_train", library="equinox", kind="train_step", uses=("optax",),
         description="the equinox MNIST tutorial CNN (Conv2d, MaxPool2d, 3 Linear), NLL loss, "
                     "optax.adamw step, batch 32 of 1x28x28")
def eqx_cnn_train():
    model = EqxCNN(jr.PRNGKey(1))
    optim = optax.adamw(3e-4)
    opt_state = optim.init(eqx.filter(model, eqx.is_array))
    x = _rng(31).standard_normal((32, 1, 28, 28)).astype(np.float32)
    y = _rng(32).integers(0, 10, size=(32,)).astype(np.int32)

    def cross_entropy(y, pred_y):
        pred_y = jnp.take_along_axis(pred_y, jnp.expand_dims(y, 1), axis=1)
        return -jnp.mean(pred_y)

    def loss(model, x, y):
        pred_y = jax.vmap(model)(x)
        return cross_entropy(y, pred_y)

    params, static = eqx.partition(model, eqx.is_array)

    def make_step(params, opt_state, x, y):
        model = eqx.combine(params, static)
        loss_value, grads = eqx.filter_value_and_grad(loss)(model, x, y)
        updates, opt_state = optim.update(grads, opt_state, eqx.filter(model, eqx.is_array))
        model = eqx.apply_updates(model, updates)
        return eqx.filter(model, eqx.is_array), opt_state, loss_value

    return make_step, (params, opt_state, x, y)


class GRUEncoder(eqx.Module):
    cell: eqx.nn.GRUCell
    linear: eqx.nn.Linear
    bias: jax.Array

    def __init__(self, in_size, out_size, hidden_size, *, key):
        ckey, lkey = jr.split(key)
        self.cell = eqx.nn.GRUCell(in_size, hidden_size, key=ckey)
        self.linear = eqx.nn.Linear(hidden_size, out_size, use_bias=False, key=lkey)
        self.bias = jnp.zeros(out_size)

    def __call__(self, input):
        hidden = jnp.zeros((self.cell.hidden_size,))

        def f(carry, inp):
            return self.cell(inp, carry), None

        out, _ = jax.lax.scan(f, hidden, input)
        return jax.nn.sigmoid(self.linear(out) + self.bias)


@program("eqx_gru_classifier", library="equinox", kind="inference",
         description="the equinox RNN example: GRUCell in lax.scan over 48 steps, vmapped over a batch of 32")
def eqx_gru_classifier():
    model = GRUEncoder(in_size=2, out_size=1, hidden_size=32, key=jr.PRNGKey(2))
    x = _rng(33).standard_normal((32, 48, 2)).astype(np.float32)
    fn, params = _pure(model, lambda m, x: jax.vmap(m)(x))
    return fn, (params, x)


class EqxTransformerLayer(eqx.Module):
    attention: eqx.nn.MultiheadAttention
    norm1: eqx.nn.LayerNorm
    norm2: eqx.nn.LayerNorm
    mlp: eqx.nn.MLP

    def __init__(self, d, heads, *, key):
        k1, k2 = jr.split(key)
        self.attention = eqx.nn.MultiheadAttention(num_heads=heads, query_size=d, key=k1)
        self.norm1 = eqx.nn.LayerNorm(d)
        self.norm2 = eqx.nn.LayerNorm(d)
        self.mlp = eqx.nn.MLP(d, d, 4 * d, depth=1, activation=jax.nn.gelu, key=k2)

    def __call__(self, x):
        y = jax.vmap(self.norm1)(x)
        x = x + self.attention(y, y, y)
        y = jax.vmap(self.norm2)(x)
        return x + jax.vmap(self.mlp)(y)


@program("eqx_transformer_layer", library="equinox", kind="inference",
         description="eqx.nn.MultiheadAttention (4 heads, d=64) + LayerNorm + MLP, vmapped over 8 sequences of 48")
def eqx_transformer_layer():
    model = EqxTransformerLayer(64, 4, key=jr.PRNGKey(3))
    x = _rng(34).standard_normal((8, 48, 64)).astype(np.float32)
    fn, params = _pure(model, lambda m, x: jax.vmap(m)(x))
    return fn, (params, x)


class Func(eqx.Module):
    mlp: eqx.nn.MLP

    def __init__(self, data_size, width_size, depth, *, key):
        self.mlp = eqx.nn.MLP(in_size=data_size, out_size=data_size, width_size=width_size, depth=depth,
                              activation=jax.nn.softplus, key=key)

    def __call__(self, t, y):
        return self.mlp(y)


@program("eqx_neural_ode_rk4", library="equinox", kind="inference",
         description="neural ODE (the equinox/diffrax example's MLP vector field), 20 fixed RK4 steps "
                     "in lax.fori_loop, vmapped over 64 initial states")
def eqx_neural_ode_rk4():
    func = Func(data_size=4, width_size=64, depth=2, key=jr.PRNGKey(4))
    y0 = _rng(35).standard_normal((64, 4)).astype(np.float32)

    def solve(func, y0, t1=1.0, steps=20):
        dt = t1 / steps

        def step(i, y):
            t = i * dt
            k1 = func(t, y)
            k2 = func(t + dt / 2, y + dt / 2 * k1)
            k3 = func(t + dt / 2, y + dt / 2 * k2)
            k4 = func(t + dt, y + dt * k3)
            return y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)

        return jax.lax.fori_loop(0, steps, step, y0)

    fn, params = _pure(func, lambda f, y0: jax.vmap(lambda y: solve(f, y))(y0))
    return fn, (params, y0)


@program("eqx_resnet_mlp_infer", library="equinox", kind="inference",
         description="residual MLP of eqx.nn.Linear + eqx.nn.LayerNorm + Dropout(inference=True) "
                     "built with eqx.nn.Sequential, batch 256")
def eqx_resnet_mlp_infer():
    keys = jr.split(jr.PRNGKey(5), 8)

    class Residual(eqx.Module):
        block: eqx.nn.Sequential

        def __init__(self, d, key):
            k1, k2 = jr.split(key)
            self.block = eqx.nn.Sequential([
                eqx.nn.LayerNorm(d),
                eqx.nn.Linear(d, 2 * d, key=k1),
                eqx.nn.Lambda(jax.nn.silu),
                eqx.nn.Dropout(0.1, inference=True),
                eqx.nn.Linear(2 * d, d, key=k2),
            ])

        def __call__(self, x, *, key=None):
            return x + self.block(x, key=key)

    model = eqx.nn.Sequential([eqx.nn.Linear(32, 128, key=keys[0])]
                              + [Residual(128, k) for k in keys[1:5]]
                              + [eqx.nn.LayerNorm(128), eqx.nn.Linear(128, 10, key=keys[5])])
    x = _rng(36).standard_normal((256, 32)).astype(np.float32)
    fn, params = _pure(model, lambda m, x: jax.vmap(m)(x))
    return fn, (params, x)
