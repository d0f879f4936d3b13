"""Enzyme-JAX's benchmark programs, rebuilt in our own code for `benchmarks/vs_enzyme.py`.

Enzyme-JAX (github.com/EnzymeAD/Enzyme-JAX) times its StableHLO pipeline against XLA on the
programs of its `test/` directory. Each builder here reproduces one of them from its computation
and configuration (the shapes, the layer counts, the op structure the peer's pipeline sees), written
anew: no code of the peer's is used. Each builder's docstring names the file and config it
reproduces and where it departs from it.

A builder returns `PeerProgram(name, fn, args, reproduces)`: `jax.jit(fn)(*args)` is the program;
`args` are pytrees of numpy arrays drawn from a seeded numpy generator (the values are data, the
peer draws its own from `jax.random`). Reverse mode follows the peer's harness
(`test/test_utils.py`, `splatvjp_noprim`): `rev(dout, *ins) = vjp(fn, *ins)[1](dout)`, the
gradients only, for every input.

    from peer_programs import build, programs     # with benchmarks/ on sys.path
    p = build("llama_rev")                        # programs(): every builder by name
    jax.jit(p.fn)(*p.args)
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np


@dataclasses.dataclass
class PeerProgram:
    name: str
    fn: Callable
    args: tuple
    reproduces: str  # the peer's file and configuration this program rebuilds


def _uniform(rng: np.random.Generator, shape) -> np.ndarray:
    return rng.random(shape, dtype=np.float32)


def _reverse(fn: Callable, n_ins: int) -> Callable:
    """The peer's reverse-mode harness: the cotangent first, then the inputs; gradients only."""
    import jax

    def rev(dout, *ins):
        assert len(ins) == n_ins
        _, pullback = jax.vjp(fn, *ins)
        return pullback(dout)

    return rev


# --- llama (test/llama.py) --------------------------------------------------------------------

LLAMA_CONFIG = {"dim": 288, "hidden_dim": 768, "n_layers": 6, "n_heads": 6, "n_kv_heads": 6,
                "vocab_size": 32000, "seq_len": 256}


def _llama_decode_step(config: dict) -> Callable:
    """One decode step of a llama2.c-style transformer on a single token at position
    `key_cache.shape[1]` (the peer's `forward`): per layer RMS norm, q/k/v mat-vecs, rotary
    embedding built as one 2x2 rotation per pair of features (scalar power/cos/sin per pair: the
    setup the peer's pipeline constant-folds), k and v appended to the caches, per-head softmax
    attention whose normalizer is Python's `sum` over the scores (an element-by-element add
    chain), the output projection and a SwiGLU feed-forward, each with a residual add; a final RMS
    norm. The classifier mat-vec is computed and dropped, and the updated caches are not
    returned, both as in the peer's program."""
    import jax.numpy as jnp

    dim, hidden, layers = config["dim"], config["hidden_dim"], config["n_layers"]
    heads, kv_heads = config["n_heads"], config["n_kv_heads"]
    head_size = dim // heads
    group = heads // kv_heads  # query heads sharing one key/value head
    kv_dim = head_size * kv_heads

    def rms_norm(v, gain):
        inv_rms = 1 / jnp.sqrt(v.dot(v) / v.shape[0] + 1e-5)
        return gain * v * inv_rms

    def python_sum(v):  # Python's builtin sum over a vector: 0 + v[0] + v[1] + ...
        total = 0
        for j in range(v.shape[0]):
            total = total + v[j]
        return total

    def attention_weights(scores):
        shifted = jnp.exp(scores - jnp.max(scores))
        return shifted / python_sum(shifted)

    def swish(v):
        return v * (1 / (1 + jnp.exp(-v)))

    def step(x, weights, key_cache, value_cache):
        position = key_cache.shape[1]
        assert value_cache.shape[1] == position
        w = weights
        for name, shape in (("wq", (layers, dim, dim)), ("wk", (layers, kv_dim, dim)), ("wv", (layers, kv_dim, dim)),
                            ("wo", (layers, dim, dim)), ("w1", (layers, hidden, dim)), ("w2", (layers, dim, hidden)),
                            ("w3", (layers, hidden, dim)), ("rms_att_weight", (layers, dim)),
                            ("rms_ffn_weight", (layers, dim)), ("rms_final_weight", (dim,))):
            assert w[name].shape == shape, (name, w[name].shape, shape)

        # Rotary embedding: pair p of features is rotated by position * 10000^(-(2p mod hs)/hs).
        rotations = []
        for pair in range(dim // 2):
            exponent = ((2 * pair) % head_size) / head_size
            angle = position * (1 / jnp.power(10000, exponent))
            c, s = jnp.cos(angle), jnp.sin(angle)
            rotations.append(jnp.stack([jnp.stack([c, -s]), jnp.stack([s, c])]))
        eye = jnp.eye(2)
        key_rotations = rotations[: kv_dim // 2] + [eye] * (dim // 2 - kv_dim // 2)
        rot_q, rot_k = jnp.stack(rotations), jnp.stack(key_rotations)

        for layer in range(layers):
            h = rms_norm(x, w["rms_att_weight"][layer, :])
            q = w["wq"][layer, :, :] @ h
            k = w["wk"][layer, :, :] @ h
            v = w["wv"][layer, :, :] @ h
            q = jnp.einsum("pab,pb->pa", rot_q, q.reshape(dim // 2, 2)).reshape(dim)
            k = jnp.einsum("pab,pb->pa", rot_k, k.reshape(dim // 2, 2)).reshape(dim)
            keys = jnp.concatenate([key_cache[layer, :, :], k.reshape(1, dim)], axis=0)
            values = jnp.concatenate([value_cache[layer, :, :], v.reshape(1, dim)], axis=0)
            outs = []
            for head in range(heads):
                lo = (head // group) * head_size
                query = q[head * head_size:(head + 1) * head_size]
                scores = jnp.einsum("tj,j->t", keys[:, lo:lo + head_size], query) / jnp.sqrt(head_size)
                probs = attention_weights(scores)
                outs.append(jnp.einsum("tj,t->j", values[:, lo:lo + head_size], probs))
            x = x + w["wo"][layer, :, :] @ jnp.concatenate(outs, axis=None)
            h = rms_norm(x, w["rms_ffn_weight"][layer, :])
            gate = swish(w["w1"][layer, :, :] @ h)
            x = x + w["w2"][layer, :, :] @ (gate * (w["w3"][layer, :, :] @ h))
        x = rms_norm(x, w["rms_final_weight"])
        _logits = w["wcls"] @ x  # noqa: F841 - computed and dropped, as in the peer's program
        return x

    return step


def _llama_inputs(config: dict, seed: int = 0):
    dim, hidden, layers = config["dim"], config["hidden_dim"], config["n_layers"]
    head_size = dim // config["n_heads"]
    kv_dim = head_size * config["n_kv_heads"]
    rng = np.random.default_rng(seed)
    shapes = {"rms_att_weight": (layers, dim), "wq": (layers, dim, dim), "wk": (layers, kv_dim, dim),
              "wv": (layers, kv_dim, dim), "wo": (layers, dim, dim), "rms_ffn_weight": (layers, dim),
              "w1": (layers, hidden, dim), "w2": (layers, dim, hidden), "w3": (layers, hidden, dim),
              "rms_final_weight": (dim,), "wcls": (config["vocab_size"], dim)}
    weights = {name: _uniform(rng, shape) for name, shape in shapes.items()}
    x = _uniform(rng, (dim,))
    dx = _uniform(rng, (dim,))
    position = 1
    key_cache = np.zeros((layers, position, kv_dim), np.float32)
    value_cache = np.zeros((layers, position, kv_dim), np.float32)
    return x, weights, key_cache, value_cache, dx


def llama_fwd() -> PeerProgram:
    """test/llama.py, `Llama.setUp` config (dim 288, hidden 768, 6 layers, 6 heads, 6 kv heads,
    vocab 32000, position 1: caches of shape (6, 1, 288)): the primal decode step,
    `fn(x, weights, key_cache, value_cache)`, weights uniform on [0, 1) as the peer draws them."""
    x, weights, kc, vc, _ = _llama_inputs(LLAMA_CONFIG)
    return PeerProgram("llama_fwd", _llama_decode_step(LLAMA_CONFIG), (x, weights, kc, vc),
                       "test/llama.py: primal, dim 288, hidden 768, 6 layers, 6 heads, pos 1")


def llama_rev() -> PeerProgram:
    """test/llama.py, the same config, reverse mode as the peer's harness runs it
    (`revprimal = False`): the gradients wrt x, every weight and both caches for the cotangent
    `dx` of shape (288,)."""
    x, weights, kc, vc, dx = _llama_inputs(LLAMA_CONFIG)
    return PeerProgram("llama_rev", _reverse(_llama_decode_step(LLAMA_CONFIG), 4), (dx, x, weights, kc, vc),
                       "test/llama.py: reverse mode (grads of x, weights, caches), same config")


# --- nasrnn (test/nasrnn.py) ------------------------------------------------------------------

NASRNN_CONFIG = {"hidden_size": 512, "seq_len": 5}


def _nasrnn(config: dict) -> Callable:
    """The NAS-discovered recurrent cell unrolled over the sequence: eight `x @ A_i + h @ B_i`
    projections, combined as relu/sigmoid/tanh sums and products in two levels, then tanh."""
    import jax
    import jax.numpy as jnp

    def sig(v):
        return jax.nn.sigmoid(v)

    def relu(v):
        return jax.nn.relu(v)

    def cell(h, x, w):
        p = [jnp.matmul(x, w[f"combine_w1_{i}"]) + jnp.matmul(h, w[f"combine_w2_{i}"]) for i in range(8)]
        a = relu(p[0]) + sig(p[3])
        b = sig(p[1]) + jnp.tanh(p[2])
        c = sig(p[4]) * jnp.tanh(p[5])
        d = sig(p[6]) * relu(p[7])
        e = sig(b) + jnp.tanh(c)
        f = jnp.tanh(a) * jnp.tanh(d)
        return jnp.tanh(jnp.tanh(e) * jnp.tanh(f))

    def run(xs, w):
        h = w["initial_state"]
        for t in range(config["seq_len"]):
            h = cell(h, xs[t], w)
        return h

    return run


def _nasrnn_inputs(config: dict, seed: int = 1):
    n, t = config["hidden_size"], config["seq_len"]
    rng = np.random.default_rng(seed)
    w = {}
    for i in range(8):
        w[f"combine_w1_{i}"] = _uniform(rng, (n, n))
        w[f"combine_w2_{i}"] = _uniform(rng, (n, n))
    w["initial_state"] = _uniform(rng, (n,))
    return _uniform(rng, (t, n)), w, _uniform(rng, (n,))


def nasrnn_fwd() -> PeerProgram:
    """test/nasrnn.py, config hidden 512, sequence 5: the primal `fn(x_sequence, weights)`."""
    xs, w, _ = _nasrnn_inputs(NASRNN_CONFIG)
    return PeerProgram("nasrnn_fwd", _nasrnn(NASRNN_CONFIG), (xs, w), "test/nasrnn.py: primal, hidden 512, seq 5")


def nasrnn_rev() -> PeerProgram:
    """test/nasrnn.py, same config, reverse mode. The peer's cotangent has the input sequence's
    shape (5, 512), which is not the output's; ours is a (512,) vector, the output's shape."""
    xs, w, dout = _nasrnn_inputs(NASRNN_CONFIG)
    return PeerProgram("nasrnn_rev", _reverse(_nasrnn(NASRNN_CONFIG), 2), (dout, xs, w),
                       "test/nasrnn.py: reverse mode, hidden 512, seq 5")


# --- KAN (test/kan1.py, test/kan2.py) ---------------------------------------------------------

KAN_WIDTHS = (1, 48, 48, 1)
KAN_KNOTS = 10  # per layer: one (10,) vector, as the peer's modules take three
KAN_ORDER = 3


def _kan(widths=KAN_WIDTHS, order=KAN_ORDER) -> Callable:
    """A Kolmogorov-Arnold network: every edge (i -> j) of a layer carries
    `w_ij * silu(x_i) + sum_k c_ijk B_k(tanh x_i)`, B_k the cubic B-splines (Cox-de Boor
    recursion) on the layer's 10 knots. Knots are made increasing inside the program from the
    layer's (10,) parameter vector (a normalized cumulative sum of magnitudes spanning
    [-1.5, 1.5]), so random inputs keep the recursion free of 0/0."""
    import jax
    import jax.numpy as jnp

    n_basis = KAN_KNOTS - order - 1

    def knots_of(g):
        steps = jnp.abs(g) + 1e-3
        return -1.5 + 3.0 * jnp.cumsum(steps) / jnp.sum(steps)

    def bsplines(u, t):  # u: (batch, in), t: (knots,) -> (batch, in, n_basis)
        u = u[..., None]
        b = ((u >= t[:-1]) & (u < t[1:])).astype(u.dtype)
        for p in range(1, order + 1):
            left = (u - t[:-(p + 1)]) / (t[p:-1] - t[:-(p + 1)]) * b[..., :-1]
            right = (t[p + 1:] - u) / (t[p + 1:] - t[1:-p]) * b[..., 1:]
            b = left + right
        return b

    def net(x, params, g0, g1, g2):
        offset = 0
        for layer, g in enumerate((g0, g1, g2)):
            n_in, n_out = widths[layer], widths[layer + 1]
            size = n_in * n_out
            base = params[offset:offset + size].reshape(n_in, n_out)
            offset += size
            coef = params[offset:offset + size * n_basis].reshape(n_in, n_out, n_basis)
            offset += size * n_basis
            basis = bsplines(jnp.tanh(x), knots_of(g))
            x = jax.nn.silu(x) @ base + jnp.einsum("bik,ijk->bj", basis, coef)
        assert offset == params.shape[0], (offset, params.shape)
        return x

    return net


def _kan_inputs(seed: int = 2):
    n_params = sum(a * b for a, b in zip(KAN_WIDTHS, KAN_WIDTHS[1:])) * (KAN_KNOTS - KAN_ORDER)
    rng = np.random.default_rng(seed)
    return (_uniform(rng, (100, 1)), _uniform(rng, (n_params,)) - 0.5, *(_uniform(rng, (KAN_KNOTS,)) for _ in range(3)))


def kan_fwd() -> PeerProgram:
    """test/kan1.py / test/kan2.py: the peer runs exported KAN modules (`test/exported_modules/
    kan{1,2}.mlir`, not rebuilt here) taking a (100, 1) batch, a flat parameter vector (18,480
    and 16,800 values) and three (10,) vectors. Ours has kan2's signature exactly: widths
    1-48-48-1, cubic splines on 10 knots per layer (6 bases + a SiLU base weight per edge:
    2,400 edges x 7 = 16,800 parameters)."""
    args = _kan_inputs()
    return PeerProgram("kan_fwd", _kan(), args, "test/kan2.py signature: KAN 1-48-48-1, cubic B-splines, primal")


def kan_rev() -> PeerProgram:
    """As `kan_fwd`, reverse mode with the peer's cotangent: ones of shape (100, 1)."""
    args = _kan_inputs()
    return PeerProgram("kan_rev", _reverse(_kan(), 5), (np.ones((100, 1), np.float32), *args),
                       "test/kan2.py signature: KAN 1-48-48-1, reverse mode")


# --- jax-md (test/jaxmd.py) -------------------------------------------------------------------

LJ_LATTICE = 1.37820
LJ_REPS = 20  # the peer's GPU setting (40 on CPU): 8,000 particles rather than 64,000
LJ_CUTOFF = 3.0
LJ_ONSET = 2.0
LJ_DT = 5e-3


def _lj_pairs(reps: int) -> tuple[np.ndarray, np.ndarray]:
    """Each pair of lattice sites closer than the cutoff under periodic images, once (i, j)."""
    reach = int(np.ceil(LJ_CUTOFF / LJ_LATTICE))
    offsets = [(a, b, c) for a in range(-reach, reach + 1) for b in range(-reach, reach + 1)
               for c in range(-reach, reach + 1)
               if 0 < (a * a + b * b + c * c) * LJ_LATTICE ** 2 < LJ_CUTOFF ** 2 and (a, b, c) > (0, 0, 0)]
    grid = np.stack(np.meshgrid(*(np.arange(reps),) * 3, indexing="ij"), -1).reshape(-1, 3)
    index = grid[:, 0] * reps * reps + grid[:, 1] * reps + grid[:, 2]
    senders, receivers = [], []
    for off in offsets:
        other = (grid + np.asarray(off)) % reps
        senders.append(index)
        receivers.append(other[:, 0] * reps * reps + other[:, 1] * reps + other[:, 2])
    return np.concatenate(senders).astype(np.int32), np.concatenate(receivers).astype(np.int32)


def _lj_step(box: float) -> Callable:
    """One velocity-Verlet step of a Lennard-Jones fluid (sigma = epsilon = 1) in a periodic box:
    the energy over a fixed pair list with jax-md's multiplicative smooth cutoff (onset 2.0,
    cutoff 3.0), forces as its negative gradient (gather, then scatter-add), positions wrapped
    into the box."""
    import jax
    import jax.numpy as jnp

    def switch(r2):
        rc2, ro2 = LJ_CUTOFF ** 2, LJ_ONSET ** 2
        inner = (rc2 - r2) ** 2 * (rc2 + 2 * r2 - 3 * ro2) / (rc2 - ro2) ** 3
        return jnp.where(r2 < ro2, 1.0, jnp.where(r2 < rc2, inner, 0.0))

    def energy(position, senders, receivers):
        d = position[senders] - position[receivers]
        d = jnp.mod(d + box / 2, box) - box / 2
        r2 = jnp.sum(d * d, axis=-1)
        inv6 = (1.0 / r2) ** 3
        return jnp.sum(4.0 * (inv6 * inv6 - inv6) * switch(r2))

    def step(position, momentum, force, mass, senders, receivers):
        momentum = momentum + 0.5 * LJ_DT * force
        position = jnp.mod(position + LJ_DT * momentum / mass, box)
        e, grad = jax.value_and_grad(energy)(position, senders, receivers)
        force = -grad
        momentum = momentum + 0.5 * LJ_DT * force
        return position, momentum, force, e

    return step


def jaxmd_lj() -> PeerProgram:
    """test/jaxmd.py: Lennard-Jones particles on a simple cubic lattice (constant 1.3782, N_rep 20
    per side: the peer's GPU setting; 40 on CPU), r_cutoff 3.0, dt 5e-3. The peer runs one jax-md
    NVT Nose-Hoover step with an in-graph neighbor-list update (OrderedSparse); jax-md is not
    installed here, so ours is a velocity-Verlet (NVE) step over a fixed half pair list built on
    the host: the energy, the force gather/scatter and the integration, without the
    neighbor-list rebuild or the thermostat chain."""
    box = LJ_REPS * LJ_LATTICE
    grid = np.stack(np.meshgrid(*(np.arange(LJ_REPS),) * 3, indexing="ij"), -1).reshape(-1, 3)
    rng = np.random.default_rng(3)
    position = (grid * LJ_LATTICE).astype(np.float32)
    momentum = (rng.standard_normal(position.shape) * np.sqrt(1.2)).astype(np.float32)
    force = np.zeros_like(position)
    mass = np.ones((), np.float32)
    senders, receivers = _lj_pairs(LJ_REPS)
    return PeerProgram("jaxmd_lj", _lj_step(box), (position, momentum, force, mass, senders, receivers),
                       "test/jaxmd.py: LJ lattice 1.3782, N_rep 20, cutoff 3.0; NVE step, fixed pairs")


# --- the small programs of test/bench_vs_xla.py -----------------------------------------------

def _f32(values) -> np.ndarray:
    return np.asarray(values, np.float32)


def _bench_vs_xla() -> dict[str, Callable[[], PeerProgram]]:
    """test/bench_vs_xla.py: each `EnzymeJaxTest` there is a tiny program with fixed inputs;
    these are their primal computations, with those inputs."""
    import jax
    import jax.numpy as jnp

    src = "test/bench_vs_xla.py"

    def add_one():
        return PeerProgram("bvx_add_one", lambda x, y: x + 1 + y, (_f32([1, 2, 3]), _f32([10, 20, 30])),
                           f"{src} AddOne: x + 1 + y, f32[3]")

    def add_two():
        return PeerProgram("bvx_add_two", lambda x, z, y: x + y,
                           (_f32([1, 2, 3]), _f32([10, 20, 30]), _f32([100, 200, 300])),
                           f"{src} AddTwo: x + y, an unused middle input, f32[3]")

    def total():
        return PeerProgram("bvx_sum", lambda x: jnp.sum(x), (np.arange(50, dtype=np.float32),),
                           f"{src} Sum: sum of f32[50]")

    def cache():
        return PeerProgram("bvx_cache", lambda x: x * x[0], (np.arange(288, dtype=np.float32),),
                           f"{src} Cache: x * x[0], f32[288]")

    def slicing():
        return PeerProgram("bvx_slicing", lambda x: x[0, 0:1, 0] * jnp.ones((3,)),
                           (np.arange(3, dtype=np.float32).reshape(1, 3, 1),),
                           f"{src} Slicing: x[0, 0:1, 0] * ones(3), f32[1,3,1]")

    def activity_mismatch():
        n = 12

        def f(x):
            k = jnp.einsum("jk,k->j", jnp.ones((n, n)), x)
            return jnp.concatenate([jnp.zeros((1, n)), k.reshape(1, n)], axis=0)

        return PeerProgram("bvx_actmtch", f, (np.arange(n, dtype=np.float32),),
                           f"{src} ActivityMismatch: ones(12,12) x, stacked under a zero row")

    def gen_dot():
        n = 12

        def f(x):
            k = (jnp.ones((n, n)) @ x).reshape(2, n // 2)
            k = jnp.einsum("ijk,ik->ij", jnp.ones((2, n // 2, n // 2)), k).reshape(n)
            return jnp.concatenate([jnp.zeros((1, n)), k.reshape(1, n)], axis=0)

        return PeerProgram("bvx_gendot", f, (np.arange(n, dtype=np.float32),),
                           f"{src} GenDot: a mat-vec, a batched mat-vec, stacked under a zero row")

    def concat():
        n = 12
        return PeerProgram("bvx_concat", lambda x, y: jnp.concatenate([x, y], axis=None),
                           (np.arange(n, dtype=np.float32), 10 * np.arange(n, dtype=np.float32)),
                           f"{src} Concat: concatenate two f32[12]")

    def const_scatter():
        return PeerProgram("bvx_const_scatter", lambda q: (q.at[0].multiply(3),), (_f32([2.7, 2.7, 2.7]),),
                           f"{src} ConstScatter: q.at[0].multiply(3), f32[3]")

    def scatter_sum():
        pairs = np.asarray([[2, 2]])

        def f(r):
            return (jax.grad(lambda p: jnp.sum(jnp.sin(p[pairs[0]])))(r),)

        return PeerProgram("bvx_scatter_sum", f, (_f32([2, 4, 6, 8]),),
                           f"{src} ScatterSum: grad of sum(sin(R[[2, 2]])), f32[4]")

    return {p().name: p for p in (add_one, add_two, total, cache, slicing, activity_mismatch, gen_dot, concat,
                                  const_scatter, scatter_sum)}


def _catalog() -> dict[str, Callable[[], PeerProgram]]:
    out: dict[str, Callable[[], PeerProgram]] = {
        "llama_fwd": llama_fwd, "llama_rev": llama_rev, "nasrnn_fwd": nasrnn_fwd, "nasrnn_rev": nasrnn_rev,
        "kan_fwd": kan_fwd, "kan_rev": kan_rev, "jaxmd_lj": jaxmd_lj,
    }
    out.update(_bench_vs_xla())
    return out


def programs() -> dict[str, Callable[[], PeerProgram]]:
    """Every builder by name (the models, then the small programs of bench_vs_xla.py)."""
    return _catalog()


# The default selection: the peer's models; the bench_vs_xla programs are a few ops each.
DEFAULT = ("llama_fwd", "llama_rev", "nasrnn_fwd", "nasrnn_rev", "kan_fwd", "kan_rev", "jaxmd_lj")


def build(name: str) -> PeerProgram:
    known = programs()
    if name not in known:
        raise KeyError(f"unknown program {name!r}; known: {', '.join(known)}")
    return known[name]()
