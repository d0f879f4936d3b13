"""dm-haiku networks: `hk.nets.ResNet18`, an LSTM language model unrolled with `hk.dynamic_unroll`
(a `stablehlo.while`), and a transformer classifier from `hk.MultiHeadAttention`."""

from __future__ import annotations

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax

from shlo_env.zoo.programs import optax_step, program


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _xent(logits, labels):
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


def _resnet18(is_training: bool):
    def f(x):
        return hk.nets.ResNet18(num_classes=10, resnet_v2=False)(x, is_training=is_training)

    return hk.transform_with_state(f)


@program("haiku_resnet18_infer", library="haiku", kind="inference",
         description="hk.nets.ResNet18 (ImageNet stem, 10 classes) in inference mode (moving batch "
                     "statistics); batch 4 of 32x32x3")
def haiku_resnet18_infer():
    net = _resnet18(False)
    x = _rng(0).standard_normal((4, 32, 32, 3)).astype(np.float32)
    params, state = _resnet18(True).init(jax.random.PRNGKey(0), x)

    def forward(params, state, x):
        return net.apply(params, state, None, x)[0]

    return forward, (params, state, x), {"net": "ResNet18", "num_classes": 10, "batch": 4, "image": [32, 32, 3]}


@program("haiku_resnet18_train", library="haiku", kind="train_step", uses=("optax",),
         description="hk.nets.ResNet18 train step: batch norm in training mode (new state returned), "
                     "cross-entropy + L2, optax.sgd momentum; batch 4 of 32x32x3")
def haiku_resnet18_train():
    net = _resnet18(True)
    x = _rng(1).standard_normal((4, 32, 32, 3)).astype(np.float32)
    y = _rng(2).integers(0, 10, size=(4,)).astype(np.int32)
    params, state = net.init(jax.random.PRNGKey(1), x)
    tx = optax.sgd(0.05, momentum=0.9)

    def step(params, state, opt_state, x, y):
        def loss_fn(params):
            logits, new_state = net.apply(params, state, None, x)
            l2 = sum(jnp.sum(w ** 2) for w in jax.tree.leaves(params))
            return _xent(logits, y) + 1e-4 * l2, new_state

        (loss, new_state), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), new_state, opt_state, loss

    return step, (params, state, tx.init(params), x, y), {
        "net": "ResNet18", "batch": 4, "image": [32, 32, 3], "optimizer": "sgd(0.05, m 0.9) + L2 1e-4"}


@program("haiku_lstm_lm_train", library="haiku", kind="train_step", uses=("optax",),
         description="character LSTM language model (hk.Embed, hk.LSTM(256) via hk.dynamic_unroll over "
                     "32 steps, hk.Linear), optax.chain(clip_by_global_norm, rmsprop); batch 16")
def haiku_lstm_lm_train():
    vocab, hidden = 96, 256

    def f(ids):  # ids: [T, B]
        x = hk.Embed(vocab, 64)(ids)
        core = hk.LSTM(hidden)
        out, _ = hk.dynamic_unroll(core, x, core.initial_state(ids.shape[1]))
        return hk.Linear(vocab)(out)

    net = hk.without_apply_rng(hk.transform(f))
    ids = _rng(3).integers(0, vocab, size=(33, 16)).astype(np.int32)
    params = net.init(jax.random.PRNGKey(2), ids[:-1])
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.rmsprop(1e-3))
    step = optax_step(lambda p, ids: _xent(net.apply(p, ids[:-1]), ids[1:]), tx)
    return step, (params, tx.init(params), ids), {
        "vocab": vocab, "hidden": hidden, "steps": 32, "batch": 16, "optimizer": "clip(1) + rmsprop(1e-3)"}


@program("haiku_transformer_cls_infer", library="haiku", kind="inference",
         description="transformer encoder classifier from haiku parts (hk.MultiHeadAttention, "
                     "hk.LayerNorm, hk.nets.MLP), 4 layers, width 128, 8 heads; batch 8 x 64 tokens")
def haiku_transformer_cls_infer():
    def f(ids):
        x = hk.Embed(1000, 128)(ids)
        x = x + hk.get_parameter("pos", [64, 128], init=hk.initializers.TruncatedNormal(0.02))
        for _ in range(4):
            y = hk.LayerNorm(axis=-1, create_scale=True, create_offset=True)(x)
            x = x + hk.MultiHeadAttention(num_heads=8, key_size=16, w_init=hk.initializers.VarianceScaling(1.0))(
                y, y, y)
            y = hk.LayerNorm(axis=-1, create_scale=True, create_offset=True)(x)
            x = x + hk.nets.MLP([256, 128], activation=jax.nn.gelu)(y)
        return hk.Linear(5)(jnp.mean(x, axis=1))

    net = hk.without_apply_rng(hk.transform(f))
    ids = _rng(4).integers(0, 1000, size=(8, 64)).astype(np.int32)
    params = net.init(jax.random.PRNGKey(3), ids)
    return net.apply, (params, ids), {"layers": 4, "width": 128, "heads": 8, "batch": 8, "seq": 64}
