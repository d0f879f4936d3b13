"""Attention variants as written in JAX LLM code bases: rotary embeddings with a causal mask,
grouped-query decoding against a KV cache, linear attention, blockwise (flash-style) attention
with an online softmax in `lax.scan`, sliding-window attention with ALiBi, and
`jax.nn.dot_product_attention`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from shlo_env.corpus.programs import program


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _w(rng, *shape):
    return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)


def rotary(x, positions, base=10000.0):
    """Rotary position embedding on the last axis of x: [..., seq, heads, head_dim]."""
    d = x.shape[-1]
    inv_freq = 1.0 / (base ** (jnp.arange(0, d, 2, dtype=jnp.float32) / d))
    angles = positions[:, None].astype(jnp.float32) * inv_freq[None, :]
    sin, cos = jnp.sin(angles)[:, None, :], jnp.cos(angles)[:, None, :]
    x1, x2 = jnp.split(x, 2, axis=-1)
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def rms_norm(x, scale, eps=1e-6):
    return x * lax.rsqrt(jnp.mean(x ** 2, axis=-1, keepdims=True) + eps) * scale


@program("attn_rope_causal_mha", library="jax", kind="inference",
         description="Llama-style attention block: RMSNorm, fused QKV projection, rotary embeddings, "
                     "causal softmax attention (8 heads x 32), output projection; batch 2 x 128 tokens")
def attn_rope_causal_mha():
    B, T, H, D = 2, 128, 8, 32

    def attention_block(params, x):
        h = rms_norm(x, params["norm"])
        qkv = h @ params["wqkv"]
        q, k, v = jnp.split(qkv.reshape(B, T, 3 * H, D), 3, axis=2)
        pos = jnp.arange(T)
        q, k = jax.vmap(rotary, (0, None))(q, pos), jax.vmap(rotary, (0, None))(k, pos)
        scores = jnp.einsum("bthd,bshd->bhts", q, k) / np.sqrt(D)
        mask = jnp.tril(jnp.ones((T, T), bool))
        scores = jnp.where(mask, scores, jnp.finfo(scores.dtype).min)
        probs = jax.nn.softmax(scores, axis=-1)
        out = jnp.einsum("bhts,bshd->bthd", probs, v).reshape(B, T, H * D)
        return x + out @ params["wo"]

    rng = _rng(70)
    params = {"norm": np.ones(H * D, np.float32), "wqkv": _w(rng, H * D, 3 * H * D), "wo": _w(rng, H * D, H * D)}
    return attention_block, (params, rng.standard_normal((B, T, H * D)).astype(np.float32))


@program("attn_gqa_kv_cache_decode", library="jax", kind="inference",
         description="one decoding step of grouped-query attention (8 query heads, 2 KV heads, head 64): "
                     "rotary at the current position, dynamic_update_slice into a 512-slot KV cache, "
                     "masked attention over the filled prefix; batch 4")
def attn_gqa_kv_cache_decode():
    B, S, Hq, Hkv, D = 4, 512, 8, 2, 64
    G = Hq // Hkv

    def decode_step(params, x, k_cache, v_cache, pos):
        q = (x @ params["wq"]).reshape(B, 1, Hq, D)
        k = (x @ params["wk"]).reshape(B, 1, Hkv, D)
        v = (x @ params["wv"]).reshape(B, 1, Hkv, D)
        positions = jnp.full((1,), pos)
        q = jax.vmap(rotary, (0, None))(q, positions)
        k = jax.vmap(rotary, (0, None))(k, positions)
        k_cache = lax.dynamic_update_slice(k_cache, k, (0, pos, 0, 0))
        v_cache = lax.dynamic_update_slice(v_cache, v, (0, pos, 0, 0))
        qg = q.reshape(B, Hkv, G, D)
        scores = jnp.einsum("bkgd,bskd->bkgs", qg, k_cache) / np.sqrt(D)
        valid = jnp.arange(S) <= pos
        scores = jnp.where(valid[None, None, None, :], scores, -1e30)
        probs = jax.nn.softmax(scores, axis=-1)
        out = jnp.einsum("bkgs,bskd->bkgd", probs, v_cache).reshape(B, Hq * D)
        return out @ params["wo"], k_cache, v_cache

    rng = _rng(71)
    d_model = Hq * D
    params = {"wq": _w(rng, d_model, Hq * D), "wk": _w(rng, d_model, Hkv * D), "wv": _w(rng, d_model, Hkv * D),
              "wo": _w(rng, Hq * D, d_model)}
    x = rng.standard_normal((B, d_model)).astype(np.float32)
    k_cache = rng.standard_normal((B, S, Hkv, D)).astype(np.float32)
    v_cache = rng.standard_normal((B, S, Hkv, D)).astype(np.float32)
    return decode_step, (params, x, k_cache, v_cache, np.int32(300))


@program("attn_linear_causal", library="jax", kind="inference",
         description="causal linear attention (Katharopoulos et al.): elu+1 feature map, prefix sums "
                     "of k v^T via jnp.cumsum; 4 heads x 32, batch 2 x 256")
def attn_linear_causal():
    B, T, H, D = 2, 256, 4, 32

    def linear_attention(q, k, v, eps=1e-6):
        phi_q, phi_k = jax.nn.elu(q) + 1.0, jax.nn.elu(k) + 1.0
        kv = jnp.cumsum(jnp.einsum("bthd,bthe->bthde", phi_k, v), axis=1)
        z = jnp.cumsum(phi_k, axis=1)
        num = jnp.einsum("bthd,bthde->bthe", phi_q, kv)
        den = jnp.einsum("bthd,bthd->bth", phi_q, z)[..., None] + eps
        return num / den

    rng = _rng(72)
    q, k, v = (rng.standard_normal((B, T, H, D)).astype(np.float32) for _ in range(3))
    return linear_attention, (q, k, v)


@program("attn_blockwise_online_softmax", library="jax", kind="inference",
         description="memory-efficient (flash-style) attention: lax.scan over 8 key/value blocks of 64 "
                     "with a running max and normalizer (online softmax); 4 heads x 64, 512 tokens")
def attn_blockwise_online_softmax():
    H, T, D, BLOCK = 4, 512, 64, 64

    def blockwise_attention(q, k, v):
        scale = 1.0 / np.sqrt(D)
        kb = k.reshape(H, T // BLOCK, BLOCK, D).transpose(1, 0, 2, 3)
        vb = v.reshape(H, T // BLOCK, BLOCK, D).transpose(1, 0, 2, 3)

        def body(carry, kv):
            acc, m, l = carry
            kj, vj = kv
            s = jnp.einsum("hqd,hkd->hqk", q, kj) * scale
            m_new = jnp.maximum(m, s.max(-1))
            p = jnp.exp(s - m_new[..., None])
            correction = jnp.exp(m - m_new)
            l = l * correction + p.sum(-1)
            acc = acc * correction[..., None] + jnp.einsum("hqk,hkd->hqd", p, vj)
            return (acc, m_new, l), None

        init = (jnp.zeros_like(q), jnp.full(q.shape[:-1], -jnp.inf), jnp.zeros(q.shape[:-1]))
        (acc, _, l), _ = lax.scan(body, init, (kb, vb))
        return acc / l[..., None]

    rng = _rng(73)
    q, k, v = (rng.standard_normal((H, T, D)).astype(np.float32) for _ in range(3))
    return blockwise_attention, (q, k, v)


@program("attn_sliding_window_alibi", library="jax", kind="inference",
         description="sliding-window (128) causal attention with ALiBi linear position biases "
                     "(geometric head slopes), 8 heads x 32, batch 2 x 256")
def attn_sliding_window_alibi():
    B, T, H, D, W = 2, 256, 8, 32, 128
    slopes = np.array([2 ** (-8 * (i + 1) / H) for i in range(H)], np.float32)

    def local_alibi_attention(q, k, v):
        i = jnp.arange(T)[:, None]
        j = jnp.arange(T)[None, :]
        bias = -slopes[:, None, None] * (i - j)[None].astype(jnp.float32)
        allowed = (j <= i) & (i - j < W)
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(D) + bias[None]
        scores = jnp.where(allowed[None, None], scores, -1e9)
        return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(scores, -1), v)

    rng = _rng(74)
    q, k, v = (rng.standard_normal((B, T, H, D)).astype(np.float32) for _ in range(3))
    return local_alibi_attention, (q, k, v)


@program("attn_jax_nn_dpa_cross", library="jax", kind="inference",
         description="cross-attention through jax.nn.dot_product_attention (XLA implementation) with a "
                     "key padding mask, 4 heads x 64, 128 queries over 192 keys, batch 2")
def attn_jax_nn_dpa_cross():
    B, Tq, Tk, H, D = 2, 128, 192, 4, 64

    def cross_attention(params, x, ctx, ctx_len):
        q = (x @ params["wq"]).reshape(B, Tq, H, D)
        k = (ctx @ params["wk"]).reshape(B, Tk, H, D)
        v = (ctx @ params["wv"]).reshape(B, Tk, H, D)
        key_mask = jnp.arange(Tk)[None, :] < ctx_len[:, None]
        mask = key_mask[:, None, None, :]
        out = jax.nn.dot_product_attention(q, k, v, mask=mask, implementation="xla")
        return out.reshape(B, Tq, H * D) @ params["wo"]

    rng = _rng(75)
    d = H * D
    params = {n: _w(rng, d, d) for n in ("wq", "wk", "wv", "wo")}
    x = rng.standard_normal((B, Tq, d)).astype(np.float32)
    ctx = rng.standard_normal((B, Tk, d)).astype(np.float32)
    return cross_attention, (params, x, ctx, np.array([192, 150], np.int32))
