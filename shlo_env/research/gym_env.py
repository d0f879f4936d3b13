"""A Gymnasium (>= 1.0) environment over graph rewrites: `shlo_env/Rewrite-v0`.

    import gymnasium as gym
    import shlo_env.research.gym_env                       # registers shlo_env/Rewrite-v0
    env = gym.make("shlo_env/Rewrite-v0", config={"programs": "random", "reward": "cost_model"})
    obs, info = env.reset(seed=0)
    while True:
        action = env.action_space.sample(mask=tuple(info["action_mask"]))
        obs, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break

    # RLlib: register_env("shlo", lambda cfg: RewriteEnv(cfg))   (a plain config dict)

**MDP** (the HloEnv paper's). State: the current program, augmented with every match of the
pattern set (dry mode). Action: one choice per alternatives op. The step applies the choices,
prunes, and augments the result for the next observation.

**Action space**: `MultiDiscrete([max_choices] * max_alternatives)`. Entry i is the choice for
the program's i-th alternatives op (in `driver.list_alternatives` order); 0 keeps the original.
`info["action_mask"]` (also `obs["action_mask"]`) is an int8 `(max_alternatives, max_choices)`
array: row i allows the choices alternatives op i has, and only 0 for rows without one; pass
`tuple(mask)` to `action_space.sample(mask=...)`. A masked-out entry is treated as 0 and counted
in `info["invalid_choices"]`. An action that keeps every original ends the episode (the agent's
"stop"; Algorithm 1's stopping rule). Alternatives past `max_alternatives` keep their originals.

**Observation space**: a `Dict` of fixed-size, padded arrays (what RL libraries take):

| key | shape, dtype | content |
|---|---|---|
| `node_opcode` | (max_nodes,) int64 | op kind id in `observe.OP_VOCAB` (0 = other/padding) |
| `node_features` | (max_nodes, len(NODE_FEATURES)) float32 | `observe.NODE_FEATURES` columns |
| `node_mask` | (max_nodes,) int8 | 1 for real nodes |
| `edge_index` | (2, max_edges) int64 | senders; receivers (PyG layout), padding 0 |
| `edge_features` | (max_edges, len(EDGE_FEATURES)) float32 | `observe.EDGE_FEATURES` columns |
| `edge_mask` | (max_edges,) int8 | 1 for real edges |
| `alternatives` | (max_alternatives,) int64 | node index of each alternatives op, -1 none |
| `num_choices` | (max_alternatives,) int64 | choices of each, 0 none |
| `action_mask` | (max_alternatives, max_choices) int8 | as above |
| `summary` | (observe.SUMMARY_SIZE,) float32 | op histogram + sizes, for agents without a GNN |

Programs larger than `max_nodes`/`max_edges` are cut (nodes in topological order; edges between
kept nodes) and `info["graph_truncated"]` is True; the full graph is `env.unwrapped.graph`.

**Rewards** (`config["reward"]`; one class each in `shlo_env.research.gym_rewards`, CompilerGym's
`reset`/`update` shape):

- `"cost_model"` (default): (C(prev) - C(new)) / C(original), C = flops / flops_per_s +
  bytes / bytes_per_s from XLA's cost analysis. Deterministic and needs no timing; an episode's
  return is the total fractional improvement of the estimate. `cost_model="hlo"` (default)
  analyses the program as written (no compile, ~1 ms, in-process); `"compiled"` analyses the
  executable XLA builds (after fusion; one compile per new state, in the worker).
- `"runtime"`: the same with measured time: prev and new timed side by side (A, B, A, B, ...),
  divided by the original's time measured at reset.
- `"predicted"`: 1 - T̂(new) / T̂(prev), T̂ the learned cost model's predicted runtime
  (`shlo_env.learn`, the shipped weights): no compile, no timing; a step's predicted fractional
  improvement.
- `"baseline"`: 0 until the episode ends, then T(original) / T(final) - 1: the speedup over
  XLA's own compilation of the original (timed side by side).

A step whose program XLA rejects, or that fails to apply, gets `error_reward`, ends the episode
with the previous state kept, and reports `info["error"]`.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Mapping
from pathlib import Path

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from shlo_env.rewrite import driver
from shlo_env.research import gym_registration
from shlo_env.learn import observe
from shlo_env.measure import roofline
from shlo_env.research.env import (
    Env, EnvError, looks_like_uri, program_from_state, program_state, resolve_program,
)
from shlo_env.research.gym_rewards import REWARDS, Reward, make_reward
from shlo_env.ir.hashing import dag_hash
from shlo_env.ir.program import Program
from shlo_env.research.replay import EpisodeRecord
from shlo_env.measure.timing_policy import TimingPolicy
from shlo_env.execute.worker import CandidateError

ENV_ID = gym_registration.ENV_ID
FEATURE_HIGH = 1e6  # features are clipped to [-1, FEATURE_HIGH] so every Box is finite


@dataclasses.dataclass
class Config:
    """Everything the environment is built from; `RewriteEnv(dict)` fills it (unknown keys fail)."""

    programs: object = "examples"  # "examples" | "random" | a corpus dataset (e.g. "inst-10-20") | list of sources
    patterns: list | None = None  # pattern names (None: the value-preserving defaults)
    reward: str = "cost_model"
    max_steps: int = 8
    max_nodes: int = 256
    max_edges: int = 512
    max_alternatives: int = 16
    max_choices: int = 8
    isolate: bool = True  # compile in a worker process (a crash costs the step, not the agent)
    timing_runs: int = 10
    timing_warmup: int = 3
    cost_model: str = "hlo"  # "hlo": the program as written (no compile); "compiled": after XLA's passes
    flops_per_s: float = 1e11
    bytes_per_s: float = 2e10
    error_reward: float = -1.0
    record: str | None = None  # append every finished episode to this JSONL file
    random_programs: int = 32  # size of the "random" program set
    random_max_ops: int = 6
    random_seed: int = 0

    @classmethod
    def from_dict(cls, d: Mapping | None) -> "Config":
        d = dict(d or {})
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise TypeError(f"unknown config keys {unknown}; known: {sorted(known)}")
        cfg = cls(**d)
        if cfg.cost_model not in ("hlo", "compiled"):
            raise ValueError(f"cost_model must be 'hlo' or 'compiled', not {cfg.cost_model!r}")
        if cfg.reward not in REWARDS:
            raise ValueError(f"reward must be one of {tuple(REWARDS)}, not {cfg.reward!r}")
        if cfg.max_choices < 2 or cfg.max_alternatives < 1 or cfg.max_nodes < 1 or cfg.max_edges < 1:
            raise ValueError("max_choices >= 2 and max_alternatives, max_nodes, max_edges >= 1 are needed")
        return cfg

    def timing(self) -> TimingPolicy:
        """How the "runtime" and "baseline" rewards time a program."""
        return TimingPolicy(self.timing_runs, self.timing_warmup)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


# --- program sets -----------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Source:
    """One entry of a program set: a label, how to load it, and its corpus URI (if any)."""

    label: str
    load: Callable[[], Program]
    uri: str | None = None


def _small(shape, cap: int = 32) -> tuple[int, ...]:
    return tuple(min(int(d), cap) for d in shape)


@functools.cache
def _example_sources() -> tuple[Source, ...]:
    from shlo_env.bench import examples

    out = []
    for ex in examples.EXAMPLES:
        def build(ex=ex):
            rng = np.random.default_rng(0)
            args = [rng.standard_normal(_small(s)).astype(ex.dtype) for s in ex.shapes]
            return resolve_program(ex.fn, *args)[0]
        out.append(Source(f"examples/{ex.name}", build))
    return tuple(out)


@functools.cache
def _random_sources(n: int, max_ops: int, seed: int) -> tuple[Source, ...]:
    """`n` small random programs (shlo_env.testing.random_programs, motifs on), drawn deterministically.
    hypothesis draws them: the `gym` extra installs it (`pip install "shlo_env[gym]"`)."""
    try:
        from hypothesis import HealthCheck, given, settings
        from hypothesis import strategies as st
    except ImportError as e:
        raise ImportError('programs="random" draws its programs with hypothesis, which is not installed: '
                          'pip install "shlo_env[gym]" (or use programs="examples" or a corpus dataset)') from e

    from shlo_env.testing.random_programs import jax_programs

    drawn = []

    @settings(max_examples=n, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(jax_programs(max_ops=max_ops, dtypes=("float32",), min_ops=2), st.just(seed))
    def draw(fn_args, _seed):
        drawn.append(fn_args)

    draw()
    out = []
    for i, (fn, args) in enumerate(drawn[:n]):
        out.append(Source(f"random/{seed}/{i}", functools.partial(_load_item, (fn, args))))
    return tuple(out)


def _corpus_sources(dataset) -> tuple[Source, ...]:
    """A corpus dataset ("inst-10-20") or a directory of .mlir/.mlirbc files, via shlo_env.corpus."""
    try:
        from shlo_env import corpus

        entries = corpus.entries(dataset)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"programs={dataset!r} needs shlo_env.corpus.entries(), which this checkout "
                         f"lacks ({e})") from e
    if not entries:
        raise ValueError(f"programs={dataset!r}: no programs")
    return tuple(Source(e.uri, functools.partial(corpus.load, e.uri), e.uri) for e in entries)


def program_sources(spec, cfg: Config | None = None) -> list[Source]:
    """The program set of a `programs` spec: "examples" (the example suite at small shapes),
    "random" (`cfg.random_programs` drawn programs), a corpus dataset name ("inst-10-20") or a
    directory of program files, or a list of sources (Programs, paths, module text, corpus
    URIs, (fn, args) tuples)."""
    cfg = cfg or Config()
    if isinstance(spec, str) and spec == "examples":
        return list(_example_sources())
    if isinstance(spec, str) and spec == "random":
        return list(_random_sources(cfg.random_programs, cfg.random_max_ops, cfg.random_seed))
    if isinstance(spec, (str, os.PathLike)) and "\n" not in str(spec):
        path = Path(spec)
        if path.is_dir() or (not path.exists() and "/" not in str(spec)):
            return list(_corpus_sources(spec))
    items = [spec] if isinstance(spec, (str, bytes, os.PathLike, Program)) else list(spec)
    out = []
    for i, item in enumerate(items):
        uri = item if isinstance(item, str) and looks_like_uri(item) else None
        out.append(Source(uri or f"program/{i}", functools.partial(_load_item, item), uri))
    if not out:
        raise ValueError("programs is empty")
    return out


def _load_item(item) -> Program:
    if isinstance(item, tuple) and len(item) == 2 and callable(item[0]):
        return resolve_program(item[0], *item[1])[0]
    return resolve_program(item)[0]


# --- the environment --------------------------------------------------------------------------

class RewriteEnv(gym.Env):
    """See the module docstring. `RewriteEnv(config_dict)` or `RewriteEnv(**config)`."""

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, config: Mapping | None = None, *, render_mode: str | None = None, **kwargs):
        self.config = Config.from_dict({**dict(config or {}), **kwargs})
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}")
        self.render_mode = render_mode
        c = self.config
        self.action_space = spaces.MultiDiscrete(np.full(c.max_alternatives, c.max_choices, dtype=np.int64))
        self.observation_space = observation_space(c)
        self._init_runtime()
        self.reward_fn: Reward = make_reward(c.reward)
        self.env: Env | None = None  # the research Env of the current episode
        self.graph: observe.Graph | None = None
        self.record: EpisodeRecord | None = None  # the current (or last) episode
        self._label: str | None = None

    def _init_runtime(self) -> None:
        self._sources: list[Source] | None = None
        self._loaded: dict[str, Program] = {}
        self._worker = None
        self._costs: dict[str, dict] = {}
        self._baselines: dict[str, float] = {}

    # --- pickling: config + current episode; workers and loaders are rebuilt ---------------

    def __getstate__(self) -> dict:
        state = {k: v for k, v in self.__dict__.items()
                 if k not in ("_sources", "_loaded", "_worker", "env", "_state")}
        state["env"] = None if self.env is None else self.env.__getstate__()
        state["_state"] = program_state(self._state) if getattr(self, "_state", None) is not None else None
        return state

    def __setstate__(self, state: dict) -> None:
        env_state = state.pop("env")
        program = state.pop("_state")
        self.__dict__.update(state)
        if program is not None:
            self._state = program_from_state(program)
        self._sources, self._loaded, self._worker = None, {}, None
        self.env = None
        if env_state is not None:
            self.env = object.__new__(Env)
            self.env.__setstate__(env_state)
            self.env._worker, self.env._own_worker = self._worker_for_env(), False
            self.env._costs = self._costs

    # --- programs --------------------------------------------------------------------------

    @property
    def sources(self) -> list[Source]:
        """The program set `reset` draws from."""
        if self._sources is None:
            self._sources = program_sources(self.config.programs, self.config)
        return self._sources

    def _program(self, source: Source) -> tuple[Program, Source]:
        """A program of the set (loaded once; Env clones it)."""
        if source.label not in self._loaded:
            self._loaded[source.label] = source.load()
        return self._loaded[source.label], source

    def _worker_for_env(self):
        if self._worker is None:
            if self.config.isolate:
                from shlo_env.execute.worker import Worker, default_timeout

                self._worker = Worker(timeout_s=default_timeout())
            else:
                from shlo_env.research.env import InProcess

                self._worker = InProcess()
        return self._worker

    # --- gym API ---------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        options = dict(options or {})
        item = options.get("program")
        if item is None:
            program, source = self._program(self.sources[int(self.np_random.integers(len(self.sources)))])
        elif isinstance(item, (int, np.integer)):
            program, source = self._program(self.sources[int(item)])
        elif isinstance(item, str) and any(item == s.label for s in self.sources):
            program, source = self._program(next(s for s in self.sources if s.label == item))
        else:  # any source Env takes: a Program, a path, module text, a URI, (fn, args)
            uri = item if isinstance(item, str) and looks_like_uri(item) else None
            source = Source(uri or "program", functools.partial(_load_item, item), uri)
            program = source.load()
        self._label = source.label
        c = self.config
        self.env = Env(program, patterns=c.patterns, isolate=c.isolate, worker=self._worker_for_env(),
                       cost_cache=self._costs)  # one cost cache (by DAG hash) for every episode
        self.env.uri = source.uri
        self._steps = 0
        self._state = self.env.program  # the current program without alternatives
        self._hash = dag_hash(self._state)
        self._seen = {self._hash}
        self._done = False
        self.record = EpisodeRecord.start(self._state, uri=source.uri, patterns=self.env.patterns,
                                          reward=c.reward, config=self._record_config())
        info = self.reward_fn.reset(self)
        obs = self._observe()
        return obs, self._info(info)

    def step(self, action):
        if self.env is None:
            raise EnvError("call reset() before step()")
        if self._done:
            raise EnvError("the episode has ended; call reset()")
        c = self.config
        alts = driver.list_alternatives(self.env.program)
        decisions, invalid = self._decode(action, alts)
        self._steps += 1
        info: dict = {"invalid_choices": invalid}
        reward = 0.0
        terminated = False
        labels = [a.labels[d] for a, d in zip(alts, decisions) if d]
        if not any(decisions):
            terminated = True  # the agent keeps every original: stop (Algorithm 1)
            self.record.add_step(decisions, len(alts), [], 0.0, self._hash, stop=True)
        else:
            prev, depth = self._state, len(self.env.history)
            try:
                new = self.env.apply(decisions)
                reward = self.reward_fn.update(self, prev, new, decisions)
            except (CandidateError, driver.ApplyError) as e:
                reward, terminated = float(c.error_reward), True
                info["error"] = f"{type(e).__name__}: {e}"
                self.env.set_program(prev)  # the failed step leaves no trace in the state
                del self.env.history[depth:]
            self._state = self.env.program
            self._hash = h = self.env.history[-1].hash if "error" not in info else dag_hash(self._state)
            info["revisit"] = h in self._seen and "error" not in info
            self._seen.add(h)
            self.record.add_step(decisions, len(alts), labels, reward, h, error=info.get("error", ""))
        if not terminated:
            obs = self._observe()  # augments the new state
            if self.graph.num_alternatives == 0:
                terminated = True
        else:
            self.env.strip()
            obs = self._observe(augment=False)
        truncated = not terminated and self._steps >= c.max_steps
        if terminated or truncated:
            self._done = True
            final = None
            if "error" not in info:
                try:
                    final = self.reward_fn.episode_end(self)
                except CandidateError as e:
                    final = float(c.error_reward)
                    info["error"] = f"{type(e).__name__}: {e}"
            if final is not None:  # the last step's reward instead of update's
                reward = final
                self.record.total_reward += reward - self.record.steps[-1].reward
                self.record.steps[-1].reward = reward
            self.record.finish(self._state)
            if c.record:
                self.record.write(c.record)
        info["applied"] = labels
        return obs, float(reward), terminated, truncated, self._info(info)

    def render(self):
        if self.render_mode != "ansi" or self.env is None:
            return None
        alts = driver.list_alternatives(self.env.program)
        head = [f"// {self._label or self.env.original.name}: step {self._steps}, state {self.env.hash()}"]
        head += [f"// alternatives #{a.index}: {', '.join(a.labels)}" for a in alts]
        return "\n".join(head) + "\n" + self.env.text()

    def close(self):
        if self._worker is not None:
            self._worker.close()
            self._worker = None
        if self.env is not None:
            self.env._worker = None

    # --- internals -------------------------------------------------------------------------

    def _record_config(self) -> dict:
        c = self.config
        return {"reward": c.reward, "max_steps": c.max_steps, "max_alternatives": c.max_alternatives,
                "max_choices": c.max_choices, "cost_model": c.cost_model, "flops_per_s": c.flops_per_s,
                "bytes_per_s": c.bytes_per_s}

    def _decode(self, action, alts) -> tuple[list[int], int]:
        a = np.asarray(action).reshape(-1)
        decisions, invalid = [], 0
        for i, alt in enumerate(alts):
            d = int(a[i]) if i < len(a) and i < self.config.max_alternatives else 0
            if not 0 <= d < alt.num_choices:
                invalid += 1
                d = 0
            decisions.append(d)
        return decisions, invalid

    def cost_s(self, program: Program) -> float:
        """The cost model's seconds for `program` (the "cost_model" reward's C)."""
        cost = self.episode.cost(program, optimized=self.config.cost_model == "compiled")
        return cost_seconds(cost, self.config.flops_per_s, self.config.bytes_per_s)

    def baseline_time(self) -> float:
        """The original's measured time (`Env.baseline`), once per program across episodes."""
        if self._hash not in self._baselines:
            self._baselines[self._hash] = self.episode.baseline(self.config.timing_runs, self.config.timing_warmup).full
        return self._baselines[self._hash]

    def _observe(self, augment: bool = True) -> dict:
        if augment:
            self.graph = self.episode.augment(uids=False)
        else:
            self.graph = self.episode.observation(uids=False)
        return encode(self.graph, self.config)

    def _info(self, extra: dict) -> dict:
        g = self.graph
        assert g is not None, "_observe() runs before _info()"
        info = {
            "action_mask": action_mask(g, self.config),
            "num_alternatives": g.num_alternatives,
            "num_nodes": g.num_nodes,
            "graph_truncated": g.num_nodes > self.config.max_nodes or g.num_edges > self.config.max_edges,
            "alternatives_truncated": g.num_alternatives > self.config.max_alternatives,
            "step": self._steps,
            "hash": self._hash,
            "program": self._label or self.episode.original.name,
        }
        info.update(extra)
        return info

    @property
    def program(self) -> Program:
        """The current program (without alternatives)."""
        return self._state

    @property
    def episode(self) -> Env:
        """The research `Env` of the current episode."""
        if self.env is None:
            raise EnvError("call reset() first")
        return self.env


def make_env(config: Mapping | None = None) -> RewriteEnv:
    """RLlib's `register_env(name, make_env)` convention: a config dict in, an env out."""
    return RewriteEnv(config)


def cost_seconds(cost: Mapping, flops_per_s: float, bytes_per_s: float) -> float:
    """The cost model of the "cost_model" reward: `roofline.cost_seconds`; a cost without an
    estimate (XLA reported no cost analysis) fails the step (CandidateError)."""
    seconds = roofline.cost_seconds(cost, flops_per_s, bytes_per_s)
    if seconds is None:
        raise CandidateError("compile", f"XLA reported no cost analysis ({dict(cost)})")
    return seconds


# --- observation encoding ---------------------------------------------------------------------

def observation_space(c: Config) -> spaces.Dict:
    N, E, A, C = c.max_nodes, c.max_edges, c.max_alternatives, c.max_choices
    nf, ef = len(observe.NODE_FEATURES), len(observe.EDGE_FEATURES)
    return spaces.Dict({
        "node_opcode": spaces.Box(0, len(observe.OP_VOCAB) - 1, (N,), np.int64),
        "node_features": spaces.Box(-1.0, FEATURE_HIGH, (N, nf), np.float32),
        "node_mask": spaces.Box(0, 1, (N,), np.int8),
        "edge_index": spaces.Box(0, N - 1, (2, E), np.int64),
        "edge_features": spaces.Box(-1.0, FEATURE_HIGH, (E, ef), np.float32),
        "edge_mask": spaces.Box(0, 1, (E,), np.int8),
        "alternatives": spaces.Box(-1, N - 1, (A,), np.int64),
        "num_choices": spaces.Box(0, C, (A,), np.int64),
        "action_mask": spaces.Box(0, 1, (A, C), np.int8),
        "summary": spaces.Box(0.0, FEATURE_HIGH, (observe.SUMMARY_SIZE,), np.float32),
    })


def action_mask(g: observe.Graph, c: Config) -> np.ndarray:
    mask = np.zeros((c.max_alternatives, c.max_choices), dtype=np.int8)
    mask[:, 0] = 1
    for i, n in enumerate(g.alternative_num_choices[: c.max_alternatives]):
        mask[i, : min(int(n), c.max_choices)] = 1
    return mask


def encode(g: observe.Graph, c: Config) -> dict:
    """The padded Dict observation of a graph (see the module docstring)."""
    N, E, A, C = c.max_nodes, c.max_edges, c.max_alternatives, c.max_choices
    n = min(g.num_nodes, N)
    keep = (g.edge_src < N) & (g.edge_dst < N)
    edges = np.flatnonzero(keep)[:E]
    e = len(edges)
    node_opcode = np.zeros(N, np.int64)
    node_opcode[:n] = g.node_opcode[:n]
    node_features = np.zeros((N, len(observe.NODE_FEATURES)), np.float32)
    node_features[:n] = g.node_feature_matrix()[:n]
    node_mask = np.zeros(N, np.int8)
    node_mask[:n] = 1
    edge_index = np.zeros((2, E), np.int64)
    edge_index[:, :e] = g.edge_index[:, edges]
    edge_features = np.zeros((E, len(observe.EDGE_FEATURES)), np.float32)
    edge_features[:e] = g.edge_feature_matrix()[edges]
    edge_mask = np.zeros(E, np.int8)
    edge_mask[:e] = 1
    k = min(g.num_alternatives, A)
    alternatives = np.full(A, -1, np.int64)
    idx = g.alternative_indices[:k].astype(np.int64)
    alternatives[:k] = np.where(idx < N, idx, -1)
    num_choices = np.zeros(A, np.int64)
    num_choices[:k] = np.minimum(g.alternative_num_choices[:k], C)
    return {
        "node_opcode": node_opcode,
        "node_features": np.clip(node_features, -1.0, FEATURE_HIGH),
        "node_mask": node_mask,
        "edge_index": edge_index,
        "edge_features": np.clip(edge_features, -1.0, FEATURE_HIGH),
        "edge_mask": edge_mask,
        "alternatives": alternatives,
        "num_choices": num_choices,
        "action_mask": action_mask(g, c),
        "summary": np.clip(observe.summary(g), 0.0, FEATURE_HIGH),
    }


def register() -> None:
    """Register `shlo_env/Rewrite-v0` with gymnasium (done when this module is imported)."""
    gym_registration.register(gym)


register()
