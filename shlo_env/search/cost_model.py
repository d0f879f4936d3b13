"""The greedy loop over the search parts: rank without timing, time only what may pay.

At each step the candidate vectors of the current state (a candidate source,
`shlo_env.search.sources`: every vector when the space is small, else pick-first, each single
choice (hottest first when `hot_first`) and a few seeded random vectors; at most
`max_candidates`) are applied and ranked by a ranker (`shlo_env.search.rankers`; here XLA's
cost analysis through a roofline

    t_est = flops / peak_flops + transcendentals / peak_transcendentals + bytes / peak_bandwidth

compiled, never run). The one acquisition rule (`shlo_env.search.acquisition`) picks the at
most `top_k` children whose optimistic bound can clear the acceptance threshold; they are
verified and timed. The search moves to the fastest timed one if it beats the current state
beyond noise (`SearchContext.improves`), and stops otherwise.

`min_predicted_gain` keeps its meaning: a child predicted faster than its parent by at least
that much is timed (it sets the roofline's band to log((1 - gain) / threshold)). Strategy
"learned" is this loop with the learned rankers (`shlo_env.search.learned`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from shlo_env.search import acquisition, sources
from shlo_env.search.base import SearchContext, State, Strategy, register_strategy
from shlo_env.search.evaluator import Evaluation
from shlo_env.search.rankers import MACHINE, CostAnalysis, Prediction, Ranker, roofline

__all__ = ["MACHINE", "CostModel", "roofline"]


@register_strategy
class CostModel(Strategy):
    name = "cost-model"

    def __init__(self, top_k: int = 2, max_candidates: int = 24, min_predicted_gain: float = 0.01,
                 machine: tuple[float, float, float] | None = None, pass_prob: float = 0.1,
                 ranker: Ranker | None = None, **aim):
        super().__init__(**aim)  # the shared aim options: the XLA option screen, hot_first
        self.top_k = top_k
        self.max_candidates = max_candidates
        self.min_predicted_gain = min_predicted_gain
        self.machine = machine
        self.pass_prob = pass_prob
        self.ranker: Ranker = ranker if ranker is not None else CostAnalysis(machine)

    def candidates(self, exp, ctx: SearchContext):
        """The source: every vector when few, else pick-first, singles, random draws."""
        source: sources.Source
        if exp.size - 1 <= self.max_candidates:
            source = sources.exhaustive
        else:
            source = sources.chain(sources.pick_first, sources.singles(self.hot_first),
                                   sources.random_draws(self.max_candidates, self.pass_prob))
        return sources.distinct(source, self.max_candidates)(ctx, exp)

    def estimate(self, ctx: SearchContext, exp, children: list) -> tuple[float, list[float]]:
        """(estimate of the current state, estimates of the (vector, child) pairs): lower is
        faster; here the ranker's predicted ratios, so the state's estimate is 1.0."""
        return 1.0, [p.ratio for p in self.ranker.rank(ctx, exp, children)]

    def band(self, ctx: SearchContext) -> float:
        """The uncertainty that makes the acquisition rule time a child predicted faster by
        `min_predicted_gain` (never below 0; 0 when no ratio can pass the threshold, a noise
        measurement of more than 50 %: then the rule times nothing)."""
        if not ctx.threshold > 0:
            return 0.0
        return max(0.0, math.log((1 - self.min_predicted_gain) / ctx.threshold))

    def to_time(self, ctx: SearchContext, exp, children: list, ests: list[float],
                state_est: float) -> list[tuple[float, State]]:
        """(estimate, child) pairs to verify and time, in order: the acquisition rule's
        `top_k` picks among the ranked children."""
        band = self.band(ctx)
        predictions = [Prediction(e / state_est if state_est > 0 else math.inf, band) for e in ests]
        return [(ests[i], children[i][1]) for i in acquisition.pick(predictions, ctx.threshold, self.top_k)]

    def starts(self, ctx: SearchContext) -> Iterator[tuple[State, float]]:
        """(state, measured ratio) pairs the greedy steps start from, in turn, while time is
        left: `begin`'s state (the original, or the option screen's choice)."""
        start = self.begin(ctx)
        yield start, self.start_ratio(ctx, start)

    def restart(self, ctx: SearchContext, stop: State, stop_ratio: float, seen: set) -> tuple[State, float] | None:
        """Where greedy steps stopped at `stop`, a (state, measured ratio) to go on from, or
        None to take the next start. `seen` holds the keys of the stops already handed here
        in this search. The base loop has none."""
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
