"""A learned rewrite policy: REINFORCE in plain JAX on the gym env (`shlo_env/Rewrite-v0`).

    shlo-env learn policy --train-programs 40 --updates 30 --episodes-per-update 8 --seeds 0 1

The policy picks, independently for every alternatives op of the current program, one of its
choices (0 keeps the original; an action that keeps every original ends the episode):

    logit(op i, choice k) = MLP([E[pattern name of choice k], standardized features of op i])

E is a learned embedding of the choice's pattern name (hashed into `BUCKETS` buckets; choice 0
is "original"), so what the policy learns is which rewrites pay off where, and it transfers to
programs it never saw. Training is REINFORCE with the return-to-go of each step and a per-step
running-mean baseline, batches of episodes, Adam. The reward is the env's (default
"cost_model": the analytic estimate, deterministic and cheap, so training fits a loaded 2-core
machine in minutes).

Programs: the `inst-10-20` sub-graphs, split by *source* program with the dataset's split
(`dataset.split_of`): the policy trains on sub-graphs of train-split sources and is evaluated on
sub-graphs of test-split sources, against pick-first (choice 1 wherever there is one, the HloEnv
paper's baseline) and a uniformly random agent, on the same programs.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
import zlib
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

BUCKETS = 256
EMBED = 8
HIDDEN = 16
FEATURES = 6  # log2 size, log2 bytes, rank, operands, users, choices of the alternatives op

Agent = Callable[[object, dict, dict], np.ndarray]  # (env, obs, info) -> action


def bucket(label: str) -> int:
    """A stable bucket of a pattern name (crc32, not Python's salted hash)."""
    return zlib.crc32(label.encode()) % BUCKETS


# --- agents -------------------------------------------------------------------------------------

def random_agent(env, obs, info) -> np.ndarray:
    """Uniform over the choices each alternatives op has (the action mask)."""
    return env.action_space.sample(mask=tuple(info["action_mask"]))


def pick_first_agent(env, obs, info) -> np.ndarray:
    """The HloEnv paper's pick-first: choice 1 wherever an alternatives op has one."""
    from shlo_env.rewrite.decisions import pick_first

    return np.asarray(pick_first(np.asarray(info["action_mask"]).sum(axis=1)), np.int64)


def step_inputs(env, obs, info) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(labels (A, C) int32 buckets, op features (A, FEATURES) float32, mask (A, C) bool) of the
    current state: A alternatives rows and C choices of the env's action space."""
    from shlo_env.learn.observe import NODE_FEATURES

    mask = np.asarray(info["action_mask"], bool)
    rows, choices = mask.shape
    labels = np.zeros((rows, choices), np.int32)
    for i, names in enumerate(env.unwrapped.graph.alternative_labels[:rows]):
        for k, name in enumerate(names[:choices]):
            labels[i, k] = bucket(name)
    cols = [NODE_FEATURES.index(c) for c in ("log2_size", "log2_bytes", "rank", "num_operands", "num_users",
                                             "num_choices")]
    nodes = np.asarray(obs["alternatives"])
    feats = np.where(nodes[:, None] >= 0, np.asarray(obs["node_features"])[np.maximum(nodes, 0)][:, cols], 0.0)
    return labels, (feats / 16.0).astype(np.float32), mask


# --- the policy network -------------------------------------------------------------------------

def init_params(key) -> dict:
    k1, k2, k3 = jax.random.split(key, 3)
    return {"emb": 0.1 * jax.random.normal(k1, (BUCKETS, EMBED)),
            "w1": jax.random.normal(k2, (EMBED + FEATURES, HIDDEN)) / math.sqrt(EMBED + FEATURES),
            "b1": jnp.zeros(HIDDEN), "w2": 0.1 * jax.random.normal(k3, (HIDDEN, 1))}


def logits(params: dict, labels, feats, mask):
    """(A, C) masked logits (invalid choices -1e9)."""
    rows, choices = labels.shape
    x = jnp.concatenate([params["emb"][labels], jnp.broadcast_to(feats[:, None, :], (rows, choices, FEATURES))], -1)
    z = (jnp.tanh(x @ params["w1"] + params["b1"]) @ params["w2"])[..., 0]
    return jnp.where(mask, z, -1e9)


def log_prob(params: dict, labels, feats, mask, action):
    """Log probability of an action (rows without a choice contribute 0) and the mean entropy."""
    logp = jax.nn.log_softmax(logits(params, labels, feats, mask), axis=-1)
    real = mask.sum(-1) > 1
    chosen = jnp.take_along_axis(logp, action[:, None], axis=-1)[:, 0]
    entropy = -(jnp.exp(logp) * jnp.where(mask, logp, 0.0)).sum(-1)
    return jnp.where(real, chosen, 0.0).sum(), jnp.where(real, entropy, 0.0).sum() / jnp.maximum(real.sum(), 1)


@dataclasses.dataclass
class PolicyAgent:
    """The learned policy as an agent: sampled (training) or greedy (evaluation)."""

    params: dict
    greedy: bool = True
    rng: np.random.Generator = dataclasses.field(default_factory=lambda: np.random.default_rng(0))

    def __call__(self, env, obs, info) -> np.ndarray:
        labels, feats, mask = step_inputs(env, obs, info)
        z = np.asarray(logits(self.params, labels, feats, mask))
        if self.greedy:
            return z.argmax(-1).astype(np.int64)
        p = np.exp(z - z.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        return np.array([self.rng.choice(len(row), p=row) for row in p], np.int64)


# --- episodes -----------------------------------------------------------------------------------

def run_episode(env, agent: Agent, program: int, seed: int) -> dict:
    """One episode on program index `program`: return, steps, and the (inputs, action, reward)
    of every step (for the policy gradient)."""
    env.action_space.seed(seed)
    obs, info = env.reset(seed=seed, options={"program": program})
    steps, total = [], 0.0
    while True:
        inputs = step_inputs(env, obs, info)
        action = np.asarray(agent(env, obs, info), np.int64)
        obs, reward, terminated, truncated, info = env.step(action)
        steps.append((inputs, action, float(reward)))
        total += float(reward)
        if terminated or truncated:
            break
    return {"program": info.get("program"), "return": total, "steps": steps, "error": info.get("error", "")}


def evaluate(env, agents: dict[str, Agent], programs: Sequence[int], seeds: Sequence[int]) -> dict:
    """Mean/median reward per episode of every agent on the same (program, seed) episodes."""
    out = {}
    for name, agent in agents.items():
        returns = [run_episode(env, agent, p, s)["return"] for s in seeds for p in programs]
        out[name] = {"mean_return": float(np.mean(returns)), "median_return": float(np.median(returns)),
                     "episodes": len(returns), "seeds": list(seeds)}
    return out


# --- REINFORCE ----------------------------------------------------------------------------------

def _loss(params, labels, feats, mask, action, advantage, entropy_coef):
    """REINFORCE loss over a padded batch of steps (padding rows have advantage 0 and no choices)."""
    lp, ent = jax.vmap(log_prob, in_axes=(None, 0, 0, 0, 0))(params, labels, feats, mask, action)
    real = mask.sum((1, 2)) > 0  # padding rows allow nothing
    return -(advantage * lp).mean() - entropy_coef * jnp.where(real, ent, 0.0).mean()


_GRAD = jax.jit(jax.value_and_grad(_loss))


def _padded(steps: list, size: int) -> tuple:
    """Stack (labels, feats, mask, action, advantage) steps and pad to `size` rows (fewer recompiles)."""
    n = len(steps)
    cols = [np.stack([st[i] for st in steps]) for i in range(4)] + [np.array([st[4] for st in steps], np.float32)]
    pad = size - n
    return tuple(np.concatenate([c, np.zeros((pad, *c.shape[1:]), c.dtype)]) if pad else c for c in cols)


def train(env, programs: Sequence[int], *, updates: int = 30, episodes_per_update: int = 8, lr: float = 0.05,
          entropy_coef: float = 0.01, seed: int = 0, log=None) -> tuple[dict, list[dict]]:
    """REINFORCE on the env's programs with these indices; returns (params, one record per update:
    mean return, loss)."""
    params = init_params(jax.random.PRNGKey(seed))
    rng = random.Random(seed)
    agent = PolicyAgent(params, greedy=False, rng=np.random.default_rng(seed))
    m = jax.tree_util.tree_map(jnp.zeros_like, params)
    v = jax.tree_util.tree_map(jnp.zeros_like, params)
    baseline: dict[int, float] = {}  # running mean return-to-go per step index
    history = []
    for t in range(1, updates + 1):
        agent.params = params
        episodes = [run_episode(env, agent, rng.choice(list(programs)), rng.randrange(2**31))
                    for _ in range(episodes_per_update)]
        batch = []
        for ep in episodes:
            rewards = [r for _, _, r in ep["steps"]]
            to_go = np.cumsum(rewards[::-1])[::-1]
            for i, ((labels, feats, mask), action, _) in enumerate(ep["steps"]):
                b = baseline.get(i, 0.0)
                batch.append((labels, feats, mask, action, float(to_go[i] - b)))
                baseline[i] = 0.9 * b + 0.1 * float(to_go[i])
        size = 32 * math.ceil(len(batch) / 32)
        loss, g = _GRAD(params, *_padded(batch, size), entropy_coef)
        m = jax.tree_util.tree_map(lambda a, b: 0.9 * a + 0.1 * b, m, g)
        v = jax.tree_util.tree_map(lambda a, b: 0.999 * a + 0.001 * b * b, v, g)
        params = jax.tree_util.tree_map(
            lambda p, a, b: p - lr * (a / (1 - 0.9 ** t)) / (jnp.sqrt(b / (1 - 0.999 ** t)) + 1e-8), params, m, v)
        rec = {"update": t, "mean_return": float(np.mean([ep["return"] for ep in episodes])), "loss": float(loss)}
        history.append(rec)
        if log:
            log(f"update {t}: mean return {rec['mean_return']:+.4f}, loss {rec['loss']:+.4f}")
    return params, history


# --- the experiment -----------------------------------------------------------------------------

def split_programs(sources, max_train: int, max_eval: int, seed: int = 0) -> tuple[list[int], list[int]]:
    """Indices of the env's programs (`env.sources`, corpus sub-graphs) for training (train-split
    sources) and evaluation (test-split sources): no source program contributes to both."""
    from shlo_env import corpus
    from shlo_env.learn.dataset import source_of, split_of

    origin: dict[str, str] = {}
    for dataset in {str(s.uri).split("/", 1)[0] for s in sources if s.uri}:
        origin.update({e.uri: source_of(e) for e in corpus.entries(dataset)})
    by: dict[str, list[int]] = {"train": [], "val": [], "test": []}
    for i, s in enumerate(sources):
        by[split_of(origin.get(s.uri, s.label))].append(i)
    rng = random.Random(seed)
    return (sorted(rng.sample(by["train"], min(max_train, len(by["train"])))),
            sorted(rng.sample(by["test"], min(max_eval, len(by["test"])))))


def experiment(*, programs: str = "inst-10-20", reward: str = "cost_model", train_programs: int = 40,
               eval_programs: int = 20, updates: int = 30, episodes_per_update: int = 8, seeds: Sequence[int] = (0,),
               eval_seeds: Sequence[int] = (0, 1), max_steps: int = 4, log=print) -> dict:
    """Train one policy per seed and evaluate each, pick-first and random on held-out programs."""
    from shlo_env.research.gym_env import RewriteEnv

    env = RewriteEnv({"programs": programs, "reward": reward, "max_steps": max_steps, "isolate": False})
    train_idx, eval_idx = split_programs(env.sources, train_programs, eval_programs)
    log(f"{len(train_idx)} training programs, {len(eval_idx)} held-out programs (by source), reward {reward}")
    out: dict = {"reward": reward, "train_programs": len(train_idx), "eval_programs": len(eval_idx),
                 "max_steps": max_steps, "updates": updates, "episodes_per_update": episodes_per_update,
                 "policies": []}
    started = time.perf_counter()
    for seed in seeds:
        params, history = train(env, train_idx, updates=updates, episodes_per_update=episodes_per_update,
                                seed=seed, log=log)
        out["policies"].append({"seed": seed, "history": history,
                                "eval": evaluate(env, {"learned": PolicyAgent(params)}, eval_idx, eval_seeds)["learned"]})
    out["baselines"] = evaluate(env, {"pick-first": pick_first_agent, "random": random_agent}, eval_idx, eval_seeds)
    learned = [p["eval"]["mean_return"] for p in out["policies"]]
    out["learned"] = {"mean_return": float(np.mean(learned)), "std_over_training_seeds": float(np.std(learned)),
                      "episodes_each": out["policies"][0]["eval"]["episodes"] if learned else 0}
    out["seconds"] = round(time.perf_counter() - started, 1)
    env.close()
    return out
