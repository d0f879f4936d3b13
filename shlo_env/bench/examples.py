"""The built-in example suite: small JAX programs the main job (`shlo-env bench`) optimizes.

Some contain a rewrite XLA does not make (a cheaper dot-chain order, a low-rank update,
a reduction that can move through a product); others are ordinary layers that no pattern
should improve, to show `optimize` returns them unchanged. Weights are random; nothing is
downloaded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np


@dataclasses.dataclass(frozen=True)
class Example:
    name: str
    fn: Callable
    shapes: tuple[tuple[int, ...], ...]
    description: str
    dtype: str = "float32"

    def args(self, seed: int = 0) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        return [rng.standard_normal(s).astype(self.dtype) for s in self.shapes]


def low_rank_update(x, W, A, B):
    return x @ (W + A @ B)


def matmul_chain(A, B, v):
    return (A @ B) @ v


def column_sums_of_product(X, W):
    return jnp.sum(X @ W, axis=0)


def mlp(x, W1, b1, W2, b2):
    return jax.nn.relu(x @ W1 + b1) @ W2 + b2


def attention(q, k, v):
    scores = q @ k.T / jnp.sqrt(q.shape[-1]).astype(q.dtype)
    return jax.nn.softmax(scores, axis=-1) @ v


def qkv_projection(x, Wq, Wk, Wv):
    return x @ Wq, x @ Wk, x @ Wv


def layer_norm(x, gamma, beta):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * gamma + beta


def lora_forward(x, W, A, B):
    return x @ W + (x @ A) @ B


def quadratic_form(v, A, B):
    return v.T @ (A @ B) @ v


def gelu_chain(x):
    return jax.nn.gelu(jnp.tanh(x) * 2.0 + 1.0)


def head_slice(x, W):
    return (x @ W)[:, :64]


def residual_block(x, W1, W2):
    h = jax.nn.relu(x @ W1)
    return x + h @ W2


# --- appended by the pattern-library issue (6) ---------------------------------------------

def cartpole_scan(x, x_dot, theta, theta_dot):
    """A batch of CartPole simulations in `lax.scan`: the step packs its four state arrays with
    a concatenate (`jnp.stack`) and unpacks them with slices every iteration."""
    gravity, masscart, masspole, length, tau, force_mag = 9.8, 1.0, 0.1, 0.5, 0.02, 10.0
    total_mass = masscart + masspole
    polemass_length = masspole * length

    def step(state, _):
        x, x_dot, theta, theta_dot = state[0], state[1], state[2], state[3]
        force = jnp.where(theta > 0, force_mag, -force_mag)
        cos, sin = jnp.cos(theta), jnp.sin(theta)
        temp = (force + polemass_length * theta_dot * theta_dot * sin) / total_mass
        theta_acc = (gravity * sin - cos * temp) / (
            length * (4.0 / 3.0 - masspole * cos * cos / total_mass))
        x_acc = temp - polemass_length * theta_acc * cos / total_mass
        new = jnp.stack([x + tau * x_dot, x_dot + tau * x_acc,
                         theta + tau * theta_dot, theta_dot + tau * theta_acc])
        return new, None

    state, _ = jax.lax.scan(step, jnp.stack([x, x_dot, theta, theta_dot]), None, length=32)
    return state


def transformer_block(x, Wq, Wk, Wv, Wo, W1, W2):
    """One pre-norm transformer block (single head) on a sequence x[T, D]."""
    def norm(h):
        mu = jnp.mean(h, axis=-1, keepdims=True)
        return (h - mu) * jax.lax.rsqrt(jnp.mean((h - mu) ** 2, axis=-1, keepdims=True) + 1e-5)

    h = norm(x)
    q, k, v = h @ Wq, h @ Wk, h @ Wv
    a = jax.nn.softmax(q @ k.T / jnp.sqrt(jnp.float32(q.shape[-1])), axis=-1) @ v
    x = x + a @ Wo
    return x + jax.nn.gelu(norm(x) @ W1) @ W2


def mlp_loop(x, W, b):
    """The same layer applied 8 times in `fori_loop`; `tanh(b) * 0.5` does not depend on the
    iteration (loop-invariant work XLA leaves in the loop)."""
    def body(i, h):
        return jnp.tanh(h @ W + jnp.tanh(b) * 0.5)

    return jax.lax.fori_loop(0, 8, body, x)


def glu_mlp(x, W, V, W2):
    """A gated MLP: (x@W) * sigmoid(x@V) then a projection; two products share x."""
    return (jax.nn.silu(x @ W) * (x @ V)) @ W2


def mixed_precision_proj(x, W):
    """A transpose and broadcast in f32 followed by a bf16 matmul: narrowing can move first."""
    xt = x.T.astype(jnp.bfloat16)
    return (xt @ W.astype(jnp.bfloat16)).astype(jnp.float32)


def scaled_sums(x, y):
    """Row sums of scaled and concatenated activations."""
    z = jnp.concatenate([x, y], axis=1)
    return jnp.sum(z * 0.125, axis=1) + jnp.max(jnp.tanh(x), axis=1)


EXAMPLES: list[Example] = [
    Example("low_rank_update", low_rank_update, ((8, 2048), (2048, 2048), (2048, 8), (8, 2048)),
            "x @ (W + A @ B): distributing avoids the 2048x2048 rank-8 product"),
    Example("matmul_chain", matmul_chain, ((1024, 1024), (1024, 1024), (1024, 1)),
            "(A @ B) @ v: the matrix-vector order needs 500x fewer flops"),
    Example("column_sums", column_sums_of_product, ((4096, 1024), (1024, 1024)),
            "sum(X @ W, axis=0): summing X's rows first turns a matmul into a vector-matrix product"),
    Example("quadratic_form", quadratic_form, ((512, 1), (512, 512), (512, 512)),
            "v.T @ (A @ B) @ v: reassociation to vector products"),
    Example("head_slice", head_slice, ((256, 512), (512, 1024)),
            "(x @ W)[:, :64]: compute only the columns that are read"),
    Example("lora_forward", lora_forward, ((64, 512), (512, 512), (512, 8), (8, 512)),
            "x @ W + (x @ A) @ B: LoRA, already in the cheap order"),
    Example("qkv_projection", qkv_projection, ((128, 256), (256, 256), (256, 256), (256, 256)),
            "three projections of one input: merging them into one matmul is a choice"),
    Example("mlp", mlp, ((128, 256), (256, 512), (512,), (512, 256), (256,)),
            "a two-layer MLP: nothing to gain"),
    Example("attention", attention, ((128, 64), (128, 64), (128, 64)),
            "single-head attention"),
    Example("layer_norm", layer_norm, ((256, 512), (512,), (512,)),
            "layer normalization: nothing to gain"),
    Example("residual_block", residual_block, ((128, 256), (256, 256), (256, 256)),
            "a residual MLP block"),
    Example("gelu_chain", gelu_chain, ((512, 512),), "elementwise only: nothing to gain"),
    # appended by the pattern-library issue (6); existing entries above are unchanged
    Example("cartpole_scan", cartpole_scan, ((256,), (256,), (256,), (256,)),
            "CartPole in lax.scan: unrolling and unpacking the concatenated state are choices"),
    Example("transformer_block", transformer_block,
            ((64, 128), (128, 128), (128, 128), (128, 128), (128, 128), (128, 512), (512, 128)),
            "a pre-norm single-head transformer block"),
    Example("mlp_loop", mlp_loop, ((64, 128), (128, 128), (128,)),
            "a layer applied in fori_loop with loop-invariant work"),
    Example("glu_mlp", glu_mlp, ((128, 256), (256, 512), (256, 512), (512, 256)),
            "a gated MLP: two products of one input"),
    Example("mixed_precision_proj", mixed_precision_proj, ((256, 128), (256, 256)),
            "f32 data moved before a bf16 convert"),
    Example("scaled_sums", scaled_sums, ((128, 256), (128, 256)),
            "reductions of scaled and concatenated values"),
]


def suite(names: list[str] | None = None) -> list[Example]:
    """The examples, optionally only those named."""
    if not names:
        return list(EXAMPLES)
    by_name = {e.name: e for e in EXAMPLES}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise KeyError(f"unknown examples {missing}; known: {', '.join(by_name)}")
    return [by_name[n] for n in names]
