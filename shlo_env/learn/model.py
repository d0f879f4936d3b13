"""A small graph network that scores candidates of one program (plain JAX, no flax/optax).

The input is the *augmented* program's graph (`shlo_env.learn.observe`) and one decision vector,
given as the mask of nodes that vector keeps live (`observe.live_nodes`): every candidate of a
program shares the graph, only the mask differs, so the alternative structure is seen directly.

    h0     = tanh(norm(x) @ W_in + E[opcode])               x: observe.NODE_FEATURES (shapes, dtype, sizes, choice)
    h_l    = tanh(h @ W_self + (sum over live in-edges h_src) @ W_in_msg + (sum over out-edges h_dst) @ W_out_msg)
    cost_i = (bytes_out_i + bytes_in_i + 1) * exp(MLP(h_L)_i)  a memory roofline per op, corrected by the network
    s      = log(sum over live nodes of cost_i)             predicted log runtime

The readout is an analytic estimate with a learned correction: at initialization (MLP output 0)
`s` is the log of the bytes the live ops move, a graph-only roofline, and the ranking is that
estimate's. Score differences are log runtime ratios, so every program is on the same scale
(no per-program normalization needed). Training pulls the correction toward 0 (weight decay) and
keeps the step with the best validation tau (early stopping).

Trained with a pairwise logistic ranking loss over pairs of one program's candidates whose
measured ratios differ by more than `min_gap` (log scale): only the order within a program is
learned, as in the TpuGraphs ranking setup.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from shlo_env.learn.observe import NODE_FEATURES, OP_VOCAB

HIDDEN = 16
LAYERS = 2
_LOG2_BYTES = NODE_FEATURES.index("log2_bytes")
_LOG2_IN_BYTES = NODE_FEATURES.index("log2_in_bytes")
WEIGHTS = Path(__file__).parent / "weights.npz"


@dataclasses.dataclass
class Batch:
    """Many (program, candidate) graph copies flattened into one graph: node i of copy c is a row."""
    x: np.ndarray          # (M, F) float32 node features
    opcode: np.ndarray     # (M,) int32
    live: np.ndarray       # (M,) float32 1 for live nodes of the copy
    copy: np.ndarray       # (M,) int32 copy index of each node
    src: np.ndarray        # (D,) int32
    dst: np.ndarray        # (D,) int32
    num_copies: int
    copy_program: np.ndarray  # (num_copies,) int32 program of each copy
    copy_ratio: np.ndarray    # (num_copies,) measured ratio (1.0 for the original)
    copy_is_original: np.ndarray  # (num_copies,) bool
    # (num_copies,) executable group within the program: copies of one group are one executable
    # to XLA (exact ties; the original is group 0); negative: unknown, a group of its own
    copy_group: np.ndarray | None = None
    copy_gap: np.ndarray | None = None  # (num_copies,) the program's noise gap (metrics.noise_gap)


def batch_from_split(split, programs=None) -> Batch:
    """Every candidate of the chosen programs (and each program's original) as graph copies;
    the ratios are `dataset.label` (both measurements where there are two)."""
    from shlo_env.learn.dataset import label
    from shlo_env.learn.metrics import noise_gap

    a = split.arrays
    xs, ops, lives, copies, srcs, dsts, cr, co = [], [], [], [], [], [], [], []
    cp: list[int] = []
    groups: list[int] = []
    gaps: list[float] = []
    base = 0
    for p in (range(len(split)) if programs is None else programs):
        n0, n1 = int(a["node_offsets"][p]), int(a["node_offsets"][p + 1])
        e0, e1 = int(a["edge_offsets"][p]), int(a["edge_offsets"][p + 1])
        c = split.candidates(p)
        masks = [a["orig_live"][n0:n1]] + list(c["live"])
        ratios = [1.0] + list(label(c))
        groups += [0] + [int(g) for g in c["group"]]
        gaps += [noise_gap(float(c["noise"][0]) if len(c["noise"]) else math.nan)] * len(ratios)
        for k, (m, r) in enumerate(zip(masks, ratios)):
            xs.append(a["node_features"][n0:n1])
            ops.append(a["node_opcode"][n0:n1])
            lives.append(m.astype(np.float32))
            copies.append(np.full(n1 - n0, len(cp), np.int32))
            srcs.append(a["edge_src"][e0:e1] + base)
            dsts.append(a["edge_dst"][e0:e1] + base)
            cp.append(p)
            cr.append(r)
            co.append(k == 0)
            base += n1 - n0
    b = _batch(xs, ops, lives, copies, srcs, dsts, cp, cr, co)
    b.copy_group, b.copy_gap = np.asarray(groups, np.int32), np.asarray(gaps, np.float64)
    return b


def _batch(xs, ops, lives, copies, srcs, dsts, cp, cr, co) -> Batch:
    cat = lambda v, dt, w=None: (np.concatenate(v).astype(dt) if v else np.zeros((0,) if w is None else (0, w), dt))  # noqa: E731
    return Batch(cat(xs, np.float32, len(xs[0][0]) if xs else 1), cat(ops, np.int32), cat(lives, np.float32),
                 cat(copies, np.int32), cat(srcs, np.int32), cat(dsts, np.int32), len(cp),
                 np.asarray(cp, np.int32), np.asarray(cr, np.float64), np.asarray(co, bool))


def concat(batches: Sequence[Batch]) -> Batch:
    """One batch of several (e.g. the train and validation splits): copies, nodes and programs
    renumbered so that programs of different batches stay apart."""
    nodes = copies = programs = 0
    parts: dict[str, list] = {}
    for b in batches:
        for name, value in (("x", b.x), ("opcode", b.opcode), ("live", b.live), ("copy", b.copy + copies),
                            ("src", b.src + nodes), ("dst", b.dst + nodes), ("copy_program", b.copy_program + programs),
                            ("copy_ratio", b.copy_ratio), ("copy_is_original", b.copy_is_original),
                            ("copy_group", b.copy_group if b.copy_group is not None else -1 - np.arange(b.num_copies)),
                            ("copy_gap", b.copy_gap if b.copy_gap is not None else np.full(b.num_copies, np.nan))):
            parts.setdefault(name, []).append(value)
        nodes, copies = nodes + len(b.opcode), copies + b.num_copies
        programs += int(b.copy_program.max()) + 1 if b.num_copies else 0
    cat = {k: np.concatenate(v) for k, v in parts.items()}
    return Batch(cat["x"], cat["opcode"], cat["live"], cat["copy"], cat["src"], cat["dst"], copies,
                 cat["copy_program"], cat["copy_ratio"], cat["copy_is_original"], cat["copy_group"], cat["copy_gap"])


def init_params(key, num_features: int, hidden: int = HIDDEN, layers: int = LAYERS) -> dict:
    ks = iter(jax.random.split(key, 4 + 3 * layers))
    glorot = lambda k, i, o: jax.random.normal(k, (i, o)) * math.sqrt(1.0 / i)  # noqa: E731
    p = {"w_in": glorot(next(ks), num_features, hidden), "emb": 0.1 * jax.random.normal(next(ks), (len(OP_VOCAB), hidden)),
         "b_in": jnp.zeros(hidden), "w_r1": glorot(next(ks), hidden, hidden), "b_r1": jnp.zeros(hidden),
         "w_r2": jnp.zeros((hidden, 1))}  # correction 0 at start: the bytes roofline
    for i in range(layers):
        p[f"w_self{i}"] = glorot(next(ks), hidden, hidden)
        p[f"w_min{i}"] = glorot(next(ks), hidden, hidden) * 0.5
        p[f"w_mout{i}"] = glorot(next(ks), hidden, hidden) * 0.5
        p[f"b{i}"] = jnp.zeros(hidden)
    return p


def scores(params: dict, norm: tuple, x, opcode, live, copy, src, dst, num_copies: int, xp: Any = jnp):
    """(num_copies,) predicted log runtime of each copy (comparable only within a program).
    `xp=np` evaluates the same math in numpy (inference: no XLA compile per graph shape)."""
    mean, std = norm
    h = xp.tanh(((x - mean) / std) @ params["w_in"] + params["emb"][opcode] + params["b_in"])
    w = live[src] * live[dst]  # an edge carries a message only between live nodes
    layers = sum(1 for k in params if k.startswith("w_self"))
    for i in range(layers):
        m_in = _segment_sum(xp, h[src] * w[:, None], dst, h.shape[0])
        m_out = _segment_sum(xp, h[dst] * w[:, None], src, h.shape[0])
        h = xp.tanh(h @ params[f"w_self{i}"] + m_in @ params[f"w_min{i}"] + m_out @ params[f"w_mout{i}"]
                    + params[f"b{i}"])
    correction = xp.clip((xp.tanh(h @ params["w_r1"] + params["b_r1"]) @ params["w_r2"])[:, 0], -10.0, 10.0)
    # bytes written + read (the features are log2(1 + b)), plus one for the op's own overhead
    moved = xp.exp2(x[:, _LOG2_BYTES]) + xp.exp2(x[:, _LOG2_IN_BYTES]) - 1.0
    cost = moved * xp.exp(correction) * live
    return xp.log(xp.maximum(_segment_sum(xp, cost, copy, num_copies), 1.0))


def _segment_sum(xp: Any, data, ids, n: int):
    if xp is jnp:
        return jax.ops.segment_sum(data, ids, num_segments=n)
    out = np.zeros((n,) + data.shape[1:], data.dtype)
    np.add.at(out, ids, data)
    return out


def ranking_pairs(batch: Batch, min_gap: float = 0.02, noise_gaps: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(faster, slower) copy indices: pairs of one program whose log ratios differ by > min_gap
    (`noise_gaps`: by more than the program's noise gap too, the pairs the metrics count)."""
    fast, slow = [], []
    logr = np.log(batch.copy_ratio)
    for p in np.unique(batch.copy_program):
        idx = np.nonzero(batch.copy_program == p)[0]
        gap = max(min_gap, float(batch.copy_gap[idx[0]])) if noise_gaps and batch.copy_gap is not None else min_gap
        for i in idx:
            for j in idx:
                if logr[i] + gap < logr[j]:
                    fast.append(i)
                    slow.append(j)
    return np.asarray(fast, np.int32), np.asarray(slow, np.int32)


def tie_pairs(batch: Batch) -> tuple[np.ndarray, np.ndarray]:
    """(i, j) copy indices, i < j, of one program and one executable group: the same program to
    XLA, so exact ties (the original and the candidates XLA compiles back to it included)."""
    a, b = [], []
    if batch.copy_group is None:
        return np.zeros(0, np.int32), np.zeros(0, np.int32)
    for p in np.unique(batch.copy_program):
        idx = np.nonzero((batch.copy_program == p) & (batch.copy_group >= 0))[0]
        for x, i in enumerate(idx):
            for j in idx[x + 1:]:
                if batch.copy_group[i] == batch.copy_group[j]:
                    a.append(i)
                    b.append(j)
    return np.asarray(a, np.int32), np.asarray(b, np.int32)


def pair_loss(params, norm, batch_arrays, num_copies, fast, slow, weight_decay=0.0, tie_a=None, tie_b=None,
              tie_weight=0.0):
    """Pairwise logistic loss (faster before slower), plus `tie_weight` x the mean squared score
    difference of exact ties (one executable), plus weight decay."""
    s = scores(params, norm, *batch_arrays, num_copies)
    decay = sum(jnp.sum(v * v) for k, v in params.items() if k.startswith("w"))
    loss = jnp.mean(jax.nn.softplus(s[fast] - s[slow])) + weight_decay * decay  # want s[fast] < s[slow]
    if tie_a is not None and tie_a.shape[0]:
        loss = loss + tie_weight * jnp.mean((s[tie_a] - s[tie_b]) ** 2)
    return loss


def arrays(batch: Batch) -> tuple:
    return (jnp.asarray(batch.x), jnp.asarray(batch.opcode), jnp.asarray(batch.live), jnp.asarray(batch.copy),
            jnp.asarray(batch.src), jnp.asarray(batch.dst))


def ranking_quality(pred: np.ndarray, batch: Batch, min_gap: float = 0.02) -> dict:
    """Mean per-program Kendall tau and OPA of predictions over the candidates (originals left
    out); OPA and tau above noise use each program's noise gap where the batch has it."""
    from shlo_env.learn import metrics

    cand = ~batch.copy_is_original
    progs = np.unique(batch.copy_program)
    gaps = ([float(batch.copy_gap[batch.copy_program == p][0]) for p in progs] if batch.copy_gap is not None
            else min_gap)
    return metrics.per_program([(pred[cand & (batch.copy_program == p)], batch.copy_ratio[cand & (batch.copy_program == p)])
                                for p in progs], gaps)


def train(batch: Batch, *, steps: int = 300, lr: float = 3e-3, seed: int = 0, min_gap: float = 0.02,
          hidden: int = HIDDEN, layers: int = LAYERS, weight_decay: float = 1e-3, val: Batch | None = None,
          eval_every: int = 10, tie_weight: float = 0.0, select_on: str = "tau_above_noise",
          noise_gaps: bool = False, curve: dict[int, float] | None = None,
          log=None) -> tuple[dict, tuple, list[float]]:
    """Full-batch Adam on the pairwise loss (plus the tie loss and weight decay); returns
    (params, norm, losses).

    With `val`, the parameters returned are those of the step with the best validation
    `select_on` metric (`ranking_quality`; checked every `eval_every` steps, step 0 included:
    the untrained bytes roofline), so training never returns something worse on validation
    than the analytic start. `curve`, when given, receives the validation metric of every check
    (step -> value)."""
    fast, slow = ranking_pairs(batch, min_gap, noise_gaps)
    tie_a, tie_b = (jnp.asarray(x) for x in tie_pairs(batch))
    if len(fast) == 0:
        raise ValueError("no candidate pairs with different measured ratios: nothing to rank")
    mean = batch.x.mean(axis=0)
    std = batch.x.std(axis=0) + 1e-3
    norm = (jnp.asarray(mean), jnp.asarray(std))
    params = init_params(jax.random.PRNGKey(seed), batch.x.shape[1], hidden, layers)
    arr = arrays(batch)
    grad = jax.jit(jax.value_and_grad(pair_loss), static_argnums=(3,))
    m = jax.tree_util.tree_map(jnp.zeros_like, params)
    v = jax.tree_util.tree_map(jnp.zeros_like, params)
    b1, b2, eps = 0.9, 0.999, 1e-8
    losses: list[float] = []
    f, sl = jnp.asarray(fast), jnp.asarray(slow)
    best: tuple[float, int, dict] | None = None

    def check(t: int) -> None:
        nonlocal best
        tau = ranking_quality(predict(params, norm, val), val, min_gap)[select_on] if val is not None else math.nan
        if val is not None and (best is None or tau > best[0]):
            best = (tau, t, params)
        if curve is not None and val is not None:
            curve[t] = float(tau)
        if log and t % 50 == 0:
            log(f"step {t}: loss {losses[-1] if losses else float('nan'):.4f}" + (f", val {select_on} {tau:.3f}" if val else ""))

    check(0)
    for t in range(1, steps + 1):
        loss, g = grad(params, norm, arr, batch.num_copies, f, sl, weight_decay, tie_a, tie_b, tie_weight)
        m = jax.tree_util.tree_map(lambda a, b: b1 * a + (1 - b1) * b, m, g)
        v = jax.tree_util.tree_map(lambda a, b: b2 * a + (1 - b2) * b * b, v, g)
        params = jax.tree_util.tree_map(
            lambda p, a, b: p - lr * (a / (1 - b1 ** t)) / (jnp.sqrt(b / (1 - b2 ** t)) + eps), params, m, v)
        losses.append(float(loss))
        if t % eval_every == 0 or t == steps:
            check(t)
    if best is not None:
        params = best[2]
        if log:
            log(f"kept step {best[1]} (val {select_on} {best[0]:.3f})")
    return params, norm, losses


def log_errors(pred: np.ndarray, batch: Batch) -> np.ndarray:
    """|predicted - measured| log ratio against the program's original, per candidate copy:
    how far the model's predicted runtime ratios are off (the learned strategy's "unsure" band)."""
    orig = {int(p): pred[i] for i, p in enumerate(batch.copy_program) if batch.copy_is_original[i]}
    cand = np.nonzero(~batch.copy_is_original)[0]
    return np.array([abs(pred[i] - orig[int(batch.copy_program[i])] - math.log(batch.copy_ratio[i])) for i in cand])


def predict(params, norm, batch: Batch) -> np.ndarray:
    """`scores` of every copy, evaluated in numpy: graphs differ in size from call to call, and
    XLA would compile every op again for each new shape (seconds per search step)."""
    p = {k: np.asarray(v) for k, v in params.items()}
    mean, std = (np.asarray(v) for v in norm)
    return scores(p, (mean, std), batch.x, batch.opcode, batch.live, batch.copy, batch.src, batch.dst,
                  batch.num_copies, xp=np)


def save(path, params: dict, norm: tuple, info: dict | None = None) -> Path:
    import json

    out: dict[str, Any] = {f"param/{k}": np.asarray(v, np.float32) for k, v in params.items()}
    out["norm/mean"], out["norm/std"] = np.asarray(norm[0], np.float32), np.asarray(norm[1], np.float32)
    out["info"] = np.asarray(json.dumps(info or {}))
    np.savez_compressed(path, **out)
    return Path(path)


def load(path=None) -> tuple[dict, tuple, dict]:
    """(params, norm, info) from an .npz written by `save` (default: the weights shipped in the package)."""
    import json

    path = Path(path) if path is not None else WEIGHTS
    if not path.exists():
        raise FileNotFoundError(f"no learned weights at {path} (train with `shlo-env learn train`)")
    with np.load(path) as z:
        params = {k[len("param/"):]: jnp.asarray(z[k]) for k in z.files if k.startswith("param/")}
        norm = (jnp.asarray(z["norm/mean"]), jnp.asarray(z["norm/std"]))
        info = json.loads(str(z["info"]))
    return params, norm, info


DEFAULT_UNSURE = 0.25  # log-ratio band when weights record no validation error


class LearnedModel:
    """What both learned models share, and all the search's rankers use (`search.rankers`):
    `load(path)` (None: the weights shipped in the package), `shipped()` (loaded once),
    `predict(*inputs)` (scores: predicted log runtime of each row, up to a per-program
    constant), `ratios(*inputs)` (each row's predicted runtime ratio to row 0) and
    `uncertainty()` (the log-ratio error band its weights record under `ERROR_KEY`)."""

    ERROR_KEY = ""
    info: dict
    _shipped: Any = None

    def predict(self, *inputs) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def ratios(self, *inputs) -> np.ndarray:
        s = self.predict(*inputs)
        return np.exp(s[1:] - s[0])

    def uncertainty(self) -> float:
        value = self.info.get(self.ERROR_KEY)
        return float(value) if value is not None else DEFAULT_UNSURE

    @classmethod
    def load(cls, path=None):  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def shipped(cls):
        if cls.__dict__.get("_shipped") is None:  # per subclass
            cls._shipped = cls.load()
        return cls._shipped


@dataclasses.dataclass
class GraphModel(LearnedModel):
    """The graph network's weights: `predict(g, vectors)` scores the augmented graph `g` under
    each decision vector (`predicted_scores`)."""

    ERROR_KEY = "val_log_error_median"
    params: dict
    norm: tuple
    info: dict

    def predict(self, g, vectors, corrected: bool = True) -> np.ndarray:
        return predicted_scores(g, vectors, (self.params, self.norm, self.info), corrected)

    @classmethod
    def load(cls, path=None) -> "GraphModel":
        return cls(*load(path))


_SHIPPED: tuple | None = None


def predicted_scores(g, vectors, model_state: tuple | None = None, corrected: bool = True) -> np.ndarray:
    """Scores (log runtime, up to a constant) of the augmented graph `g` (`observe.graph`) under
    each rewrite decision vector; `model_state` = `load(...)`, default the shipped weights.
    `corrected=False`: the readout's analytic part alone (the bytes roofline the correction
    starts from, the model's prior)."""
    from shlo_env.learn.observe import live_nodes

    global _SHIPPED
    if model_state is None:
        if _SHIPPED is None:
            _SHIPPED = load()
        model_state = _SHIPPED
    params, norm, _ = model_state
    if not corrected:
        params = {**params, "w_r2": jnp.zeros_like(params["w_r2"])}
    n, k = g.num_nodes, len(vectors)
    batch = _batch(
        [g.node_feature_matrix()] * k, [g.node_opcode] * k,
        [live_nodes(g, v).astype(np.float32) for v in vectors],
        [np.full(n, c, np.int32) for c in range(k)],
        [g.edge_src + c * n for c in range(k)], [g.edge_dst + c * n for c in range(k)],
        list(range(k)), [1.0] * k, [False] * k)
    return predict(params, norm, batch)
