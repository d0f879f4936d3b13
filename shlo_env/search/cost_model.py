"""Greedy search by XLA's cost model: rank without timing, time only the most promising.

At each step the candidate vectors of the current state (every vector when the space is
small, else pick-first, each single choice, and a few seeded random vectors; at most
`max_candidates`) are applied and compiled for `cost_analysis` only (flops, bytes accessed,
transcendentals: noise-free, no run). They are ranked by a roofline estimate

    t_est = flops / peak_flops + transcendentals / peak_transcendentals + bytes / peak_bandwidth

and only the `top_k` best-ranked candidates that the model predicts faster than the current
state (by `min_predicted_gain`) are verified and timed. The search moves to the fastest timed
one if it beats the current state beyond noise, and stops otherwise. The machine constants
default per platform; only their ratios matter for the ranking.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

from shlo_env.roofline import cost_seconds
from shlo_env.search.base import (
    SearchContext, State, Strategy, all_vectors, is_stop, one_hot_vectors, pick_first_vector, random_vector,
    register_strategy,
)
from shlo_env.search.evaluator import Evaluation

# (flops/s, transcendentals/s, bytes/s): rough orders of magnitude for one CPU socket / one GPU.
MACHINE = {
    "cpu": (5e10, 5e9, 2e10),
    "gpu": (5e13, 5e12, 2e12),
}


def roofline(cost: dict, machine: tuple[float, float, float]) -> float:
    """Estimated seconds from a cost analysis (`roofline.cost_seconds`); inf, ranked last, when
    there is no estimate (XLA rejected the program)."""
    flops, trans, bw = machine
    seconds = cost_seconds(cost, flops, bw, transcendentals_per_s=trans)
    return math.inf if seconds is None else seconds


@register_strategy
class CostModel(Strategy):
    name = "cost-model"

    def __init__(self, top_k: int = 2, max_candidates: int = 24, min_predicted_gain: float = 0.01,
                 machine: tuple[float, float, float] | None = None, pass_prob: float = 0.1, **aim):
        super().__init__(**aim)  # the shared aim options: the XLA option screen, hot_first
        self.top_k = top_k
        self.max_candidates = max_candidates
        self.min_predicted_gain = min_predicted_gain
        self.machine = machine
        self.pass_prob = pass_prob

    def _machine(self) -> tuple[float, float, float]:
        if self.machine is not None:
            return self.machine
        from shlo_env import runtime

        return MACHINE["cpu" if runtime.platform() == "cpu" else "gpu"]

    def candidates(self, exp, ctx: SearchContext):
        if exp.size - 1 <= self.max_candidates:
            gen = all_vectors(exp.dims)
        else:
            gen = itertools.chain([pick_first_vector(exp.dims)], one_hot_vectors(exp.dims),
                                  (random_vector(exp.dims, ctx.rng, self.pass_prob) for _ in range(self.max_candidates)))
        seen = set()
        for vec in gen:
            if is_stop(vec) or tuple(vec) in seen:
                continue
            seen.add(tuple(vec))
            yield vec
            if len(seen) >= self.max_candidates:
                return

    def estimate(self, ctx: SearchContext, exp, children: list) -> tuple[float, list[float]]:
        """(estimate of the current state, estimates of the (vector, child) pairs): lower is faster.
        Subclasses swap the model (strategy "learned" uses the learned ranking model)."""
        machine = self._machine()
        ests = []
        for _, child in children:
            ests.append(math.inf if ctx.out_of_time() else roofline(ctx.cost(child), machine))
        return roofline(ctx.cost(exp.state), machine), ests

    def to_time(self, ctx: SearchContext, exp, children: list, ests: list[float],
                state_est: float) -> list[tuple[float, State]]:
        """(estimate, child) pairs to verify and time, in order: the `top_k` best-ranked that
        the model predicts faster than the current state by `min_predicted_gain`."""
        ranked = sorted(zip(ests, (c for _, c in children)), key=lambda r: r[0])
        return [(e, c) for e, c in ranked if e < state_est * (1 - self.min_predicted_gain)][:self.top_k]

    def starts(self, ctx: SearchContext) -> Iterator[tuple[State, float]]:
        """(state, measured ratio) pairs the greedy steps start from, in turn, while time is
        left: `begin`'s state (the original, or the option screen's choice)."""
        start = self.begin(ctx)
        yield start, self.start_ratio(ctx, start)

    def restart(self, ctx: SearchContext, stop: State, stop_ratio: float, seen: set) -> tuple[State, float] | None:
        """Where greedy steps stopped at `stop`, a (state, measured ratio) to go on from, or
        None to take the next start. `seen` holds the keys of the stops already handed here
        in this search. The base model has none."""
        return None

    def search(self, ctx: SearchContext) -> Evaluation:
        counts: dict = dict(costed=0, timed=0, steps=0, predicted=[])
        seen: set = set()
        for state, state_ratio in self.starts(ctx):
            while not ctx.out_of_time():
                state, state_ratio = self._greedy(ctx, state, state_ratio, counts)
                found = self.restart(ctx, state, state_ratio, seen)
                seen.add(state.key)
                if found is None:
                    break
                state, state_ratio = found
        self.info.update(counts)
        return ctx.best

    def _greedy(self, ctx: SearchContext, state: State, state_ratio: float, counts: dict) -> tuple[State, float]:
        """Steps from `state` to the fastest timed child while one beats it beyond noise; returns
        the state it stopped at and its measured ratio."""
        for _ in range(ctx.max_steps):
            if ctx.out_of_time():
                break
            exp = ctx.expand(state)
            if not exp.dims:
                break
            children = []
            for vec in self.candidates(exp, ctx):
                if ctx.out_of_time():
                    break
                child = ctx.child(exp, vec)
                if child is not None and child.key != state.key:
                    children.append((vec, child))
            state_est, ests = self.estimate(ctx, exp, children)
            counts["costed"] += len(children)
            promising = self.to_time(ctx, exp, children, ests, state_est)
            step_best = None
            for est, child in promising:
                if ctx.out_of_time():
                    break
                ev = ctx.evaluate(child)
                counts["timed"] += 1
                if ev.timed and (step_best is None or ev.ratio < step_best[0].ratio):
                    step_best = (ev, child, est)
            if step_best is None or not ctx.improves(step_best[0], state_ratio):
                break
            counts["steps"] += 1
            counts["predicted"].append(step_best[2] / state_est if state_est > 0 else math.nan)
            state, state_ratio = step_best[1], step_best[0].ratio
        return state, state_ratio
