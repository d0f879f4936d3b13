"""The rewards of `shlo_env/Rewrite-v0`, chosen by name (`config["reward"]`).

Each is a small class in CompilerGym's shape: `reset(env)` at the start of an episode (it
returns the info entries it adds, e.g. the original's cost), `update(env, prev, new, decisions)`
after each step that applied a rewrite (it returns that step's reward), and `episode_end(env)`
when the episode ends without an error (a float replaces the last step's reward, None keeps
it; the "baseline" reward pays out there). `env` is the `RewriteEnv`; `env.episode` is the
research `Env` of the episode. A new reward: subclass `Reward`, give it a `name`, decorate it with `@register`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

if TYPE_CHECKING:
    from shlo_env.research.gym_env import RewriteEnv
    from shlo_env.ir.program import Program


class Reward:
    """See the module docstring. One instance per environment; it keeps its episode's state."""

    name: ClassVar[str]

    def reset(self, env: RewriteEnv) -> dict:
        return {}

    def update(self, env: RewriteEnv, prev: Program, new: Program, decisions: list[int]) -> float:
        raise NotImplementedError

    def episode_end(self, env: RewriteEnv) -> float | None:
        return None


REWARDS: dict[str, type[Reward]] = {}


def register(cls: type[Reward]) -> type[Reward]:
    REWARDS[cls.name] = cls
    return cls


def make_reward(name: str) -> Reward:
    if name not in REWARDS:
        raise ValueError(f"reward must be one of {tuple(REWARDS)}, not {name!r}")
    return REWARDS[name]()


@register
class CostModelReward(Reward):
    """(C(prev) - C(new)) / C(original), C the cost model (`gym_env.cost_seconds`)."""

    name = "cost_model"

    def reset(self, env: RewriteEnv) -> dict:
        self.c0 = self.prev = env.cost_s(env.program)
        return {"cost_s": self.c0}

    def update(self, env: RewriteEnv, prev: Program, new: Program, decisions: list[int]) -> float:
        value = env.cost_s(new)
        reward = (self.prev - value) / self.c0 if self.c0 > 0 else 0.0
        self.prev = value
        return float(reward)


class _TimedReward(Reward):
    """Rewards relative to the original's measured time (cached per program across episodes)."""

    def reset(self, env: RewriteEnv) -> dict:
        self.t0 = env.baseline_time()
        return {"time_s": self.t0}


@register
class RuntimeReward(_TimedReward):
    """(T(prev) - T(new)) / T(original), prev and new timed side by side."""

    name = "runtime"

    def update(self, env: RewriteEnv, prev: Program, new: Program, decisions: list[int]) -> float:
        t_prev, t_new = env.episode.time(prev, new, timing=env.config.timing())
        return float((t_prev.full - t_new.full) / self.t0)


@register
class BaselineReward(_TimedReward):
    """0 per step, then T(original) / T(final) - 1 when the episode ends."""

    name = "baseline"

    def update(self, env: RewriteEnv, prev: Program, new: Program, decisions: list[int]) -> float:
        env.episode.cost(new)  # compile now, so that XLA rejections surface at this step
        return 0.0

    def episode_end(self, env: RewriteEnv) -> float | None:
        c = env.config
        base, final = env.episode.time(env.episode.original, env.program, timing=c.timing())
        return float(base.full / final.full - 1.0)


@register
class PredictedReward(Reward):
    """1 - T̂(new) / T̂(prev), T̂ the learned cost model's prediction: no compile, no timing."""

    name = "predicted"

    def update(self, env: RewriteEnv, prev: Program, new: Program, decisions: list[int]) -> float:
        from shlo_env.learn.model import predicted_scores

        # env.graph is still the augmented prev, which the decisions index
        s = predicted_scores(env.graph, [[0] * len(decisions), decisions])
        return float(1.0 - np.exp(s[1] - s[0]))


__all__ = ["REWARDS", "BaselineReward", "CostModelReward", "PredictedReward", "Reward", "RuntimeReward",
           "make_reward", "register"]
