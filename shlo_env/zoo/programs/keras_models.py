"""Keras 3 models on the JAX backend, lowered through Keras' stateless API
(`model.stateless_call`, `optimizer.stateless_apply`): StableHLO as Keras emits it."""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

from shlo_env.zoo.programs import program  # noqa: E402

if keras.backend.backend() != "jax":
    raise ImportError(f"the keras zoo programs need KERAS_BACKEND=jax (keras uses {keras.backend.backend()!r})")


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _cnn() -> keras.Model:
    keras.utils.set_random_seed(0)
    return keras.Sequential([
        keras.Input((32, 32, 3)),
        keras.layers.Conv2D(32, 3, padding="same"), keras.layers.BatchNormalization(), keras.layers.ReLU(),
        keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(64, 3, padding="same"), keras.layers.BatchNormalization(), keras.layers.ReLU(),
        keras.layers.MaxPooling2D(),
        keras.layers.SeparableConv2D(128, 3, padding="same", activation="relu"),
        keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(10),
    ])


def _values(variables) -> list[np.ndarray]:
    return [np.asarray(v.value) for v in variables]


def _keras_step(model, optimizer, loss_obj):
    """step(trainable, non_trainable, opt_vars, x, y): Keras' documented JAX training loop, stateless."""
    def step(trainable, non_trainable, opt_vars, x, y):
        def loss_fn(trainable):
            logits, non_trainable_new = model.stateless_call(trainable, non_trainable, x, training=True)
            return loss_obj(y, logits), non_trainable_new

        (loss, non_trainable_new), grads = jax.value_and_grad(loss_fn, has_aux=True)(trainable)
        trainable, opt_vars = optimizer.stateless_apply(opt_vars, grads, trainable)
        return trainable, non_trainable_new, opt_vars, loss

    return step


@program("keras_cnn_train", library="keras", kind="train_step",
         description="keras.Sequential CNN (Conv2D+BatchNormalization+ReLU x2, MaxPooling2D, SeparableConv2D, "
                     "GlobalAveragePooling2D, Dense) train step: stateless_call under jax.grad, "
                     "keras.optimizers.SGD(momentum).stateless_apply; batch 16 of 32x32x3")
def keras_cnn_train():
    model = _cnn()
    optimizer = keras.optimizers.SGD(0.01, momentum=0.9)
    optimizer.build(model.trainable_variables)
    loss_obj = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    x = _rng(0).standard_normal((16, 32, 32, 3)).astype(np.float32)
    y = _rng(3).integers(0, 10, size=(16,)).astype(np.int32)
    args = (_values(model.trainable_variables), _values(model.non_trainable_variables),
            _values(optimizer.variables), x, y)
    return _keras_step(model, optimizer, loss_obj), args, {
        "layers": [layer.name for layer in model.layers], "batch": 16, "optimizer": "keras SGD(0.01, m 0.9)"}


def _transformer_classifier() -> keras.Model:
    keras.utils.set_random_seed(1)
    ids = keras.Input((64,), dtype="int32")
    x = keras.layers.Embedding(2000, 128)(ids)
    for _ in range(2):
        y = keras.layers.MultiHeadAttention(num_heads=4, key_dim=32)(x, x)
        x = keras.layers.LayerNormalization()(x + y)
        y = keras.layers.Dense(256, activation="gelu")(x)
        x = keras.layers.LayerNormalization()(x + keras.layers.Dense(128)(y))
    x = keras.layers.GlobalAveragePooling1D()(x)
    return keras.Model(ids, keras.layers.Dense(4)(x))


@program("keras_transformer_train", library="keras", kind="train_step",
         description="Keras functional transformer classifier (Embedding, 2 post-LN blocks of "
                     "MultiHeadAttention + Dense, 4 heads x 32) train step: stateless_call under jax.grad, "
                     "keras.optimizers.AdamW.stateless_apply, SparseCategoricalCrossentropy; batch 8 x 64")
def keras_transformer_train():
    model = _transformer_classifier()
    optimizer = keras.optimizers.AdamW(1e-3)
    optimizer.build(model.trainable_variables)
    loss_obj = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    ids = _rng(1).integers(0, 2000, size=(8, 64)).astype(np.int32)
    y = _rng(2).integers(0, 4, size=(8,)).astype(np.int32)
    args = (_values(model.trainable_variables), _values(model.non_trainable_variables),
            _values(optimizer.variables), ids, y)
    return _keras_step(model, optimizer, loss_obj), args, {
        "layers": 2, "width": 128, "heads": 4, "batch": 8, "seq": 64, "optimizer": "keras AdamW(1e-3)"}


@program("keras_transformer_infer", library="keras", kind="inference",
         description="the same Keras transformer classifier in inference mode (model.stateless_call, "
                     "training=False), softmax probabilities; batch 16 x 64")
def keras_transformer_infer():
    model = _transformer_classifier()
    ids = _rng(4).integers(0, 2000, size=(16, 64)).astype(np.int32)

    def forward(trainable, non_trainable, ids):
        return jax.nn.softmax(model.stateless_call(trainable, non_trainable, ids, training=False)[0])

    return forward, (_values(model.trainable_variables), _values(model.non_trainable_variables), ids), {
        "layers": 2, "width": 128, "heads": 4, "batch": 16, "seq": 64}
