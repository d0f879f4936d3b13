"""The greedy loop over the search parts: rank without timing, time only what may pay.

At each step the candidates of the current state come from a candidate source
(`shlo_env.search.sources`; by default every vector when the space is small, else pick-first,
each single choice (hottest first when `hot_first`) and a few seeded random vectors; at most
`max_candidates`), plus, when `chain`, the deeper states of the pick-first chain from it
(`sources.pick_first_chain`). They are ranked by a ranker (`shlo_env.search.rankers`; by
default XLA's cost analysis through a roofline

    t_est = flops / peak_flops + transcendentals / peak_transcendentals + bytes / peak_bandwidth

compiled, never run). The one acquisition rule (`shlo_env.search.acquisition`) orders the
children whose optimistic bound can clear the acceptance threshold; the first `top_k` are
verified and timed, and where none of them passes the acceptance rule, up to `looks` more
(a second look, down the same ranking). With a `cheap` ranker, the children it gives
unbounded uncertainty (those the rule would time first anyway) are timed before the ranker
runs: its compiles must not use up the time their timings need. The search moves to the fastest timed child that
beats the current state beyond noise (`SearchContext.improves`), and stops otherwise.

`min_predicted_gain` sets the roofline's band: a child predicted faster than its parent by at
least that much is timed (band log((1 - gain) / threshold)); a ranker passed in brings its own
band. Strategy "learned" is this loop with the learned rankers (`shlo_env.search.learned`).
"""

from __future__ import annotations

import math

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
                 ranker: Ranker | None = None, source: sources.Source | None = None, chain: bool = False,
                 looks: int = 0, cheap: Ranker | None = None, **aim):
        super().__init__(**aim)  # the shared aim options: the XLA option screen, hot_first
        self.top_k = top_k
        self.looks = looks
        self.max_candidates = max_candidates
        self.min_predicted_gain = min_predicted_gain
        self.machine = machine
        self.pass_prob = pass_prob
        self.source = source
        self.chain = chain
        self.cheap = cheap  # its unbounded picks are timed before `ranker` runs (it may compile)
        self.own_band = ranker is None  # the roofline's band comes from `min_predicted_gain`
        self.ranker: Ranker = ranker if ranker is not None else CostAnalysis(machine)

    def candidates(self, exp, ctx: SearchContext):
        """The source's vectors (default: every vector when few, else pick-first, singles, random draws)."""
        source = self.source
        if source is None:
            if exp.size - 1 <= self.max_candidates:
                source = sources.exhaustive
            else:
                source = sources.chain(sources.pick_first, sources.singles(self.hot_first),
                                       sources.random_draws(self.max_candidates, self.pass_prob))
        return sources.distinct(source, self.max_candidates)(ctx, exp)

    def band(self, ctx: SearchContext) -> float:
        """The uncertainty that makes the acquisition rule time a child predicted faster by
        `min_predicted_gain` (never below 0; 0 when no ratio can pass the threshold, a noise
        measurement of more than 50 %: then the rule times nothing)."""
        if not ctx.threshold > 0:
            return 0.0
        return max(0.0, math.log((1 - self.min_predicted_gain) / ctx.threshold))

    def predict(self, ctx: SearchContext, exp, children: list) -> list[Prediction]:
        """The ranker's predictions of the (vector, child) pairs (with the roofline's band)."""
        predictions = self.ranker.rank(ctx, exp, children)
        if self.own_band:
            band = self.band(ctx)
            predictions = [Prediction(p.ratio, band) for p in predictions]
        return predictions

    def to_time(self, ctx: SearchContext, predictions: list[Prediction]) -> list[int]:
        """Indices of the children worth timing, in order (the acquisition rule)."""
        return acquisition.pick(predictions, ctx.threshold)

    def search(self, ctx: SearchContext) -> Evaluation:
        counts: dict = dict(costed=0, timed=0, steps=0, looks=0, predicted=[])
        state = self.begin(ctx)
        self._greedy(ctx, state, self.start_ratio(ctx, state), counts)
        self.info.update(counts)
        return ctx.best

    def _children(self, ctx: SearchContext, exp, deeper: bool | None = None) -> list[tuple[list[int], State]]:
        """The source's children, then (when `deeper`, default `chain`) the chain's states."""
        children: list[tuple[list[int], State]] = []
        self._add(ctx, exp, children, ((vec, ctx.child(exp, vec)) for vec in self.candidates(exp, ctx)))
        if self.chain if deeper is None else deeper:
            self._add(ctx, exp, children, sources.pick_first_chain(ctx, exp))
        return children

    @staticmethod
    def _add(ctx: SearchContext, exp, children: list, pairs) -> None:
        seen = {exp.state.key} | {c.key for _, c in children}
        for vec, child in pairs:
            if ctx.out_of_time():
                break
            if child is not None and child.key not in seen:
                seen.add(child.key)
                children.append((vec, child))

    def _greedy(self, ctx: SearchContext, state: State, state_ratio: float, counts: dict) -> tuple[State, float]:
        """Steps from `state` to the fastest timed child while one beats it beyond noise; returns
        the state it stopped at and its measured ratio."""
        for _ in range(ctx.max_steps):
            if ctx.out_of_time():
                break
            exp = ctx.expand(state)
            if not exp.dims:
                break
            step: dict = dict(best=None, n=0, done=set())
            if self.cheap is not None:  # what the cheap ranker cannot bound, before the chain and the costly ranking
                children = self._children(ctx, exp, deeper=False)
                cheap = self.cheap.rank(ctx, exp, children)
                first = [i for i in self.to_time(ctx, cheap) if math.isinf(cheap[i].uncertainty)]
                self._time(ctx, children, cheap, first, state_ratio, step, counts)
                if self.chain:
                    self._add(ctx, exp, children, sources.pick_first_chain(ctx, exp))
            else:
                children = self._children(ctx, exp)
            counts["costed"] += len(children)
            predictions = self.predict(ctx, exp, children)
            self._time(ctx, children, predictions, self.to_time(ctx, predictions), state_ratio, step, counts)
            best = step["best"]
            if best is None or not ctx.improves(best[0], state_ratio):
                break
            counts["steps"] += 1
            counts["predicted"].append(best[2])
            state, state_ratio = best[1], best[0].ratio
        return state, state_ratio

    def _time(self, ctx: SearchContext, children: list, predictions: list[Prediction], picks: list[int],
              state_ratio: float, step: dict, counts: dict) -> None:
        """Times the picks in order: `top_k` of the step's, then, while none passes the
        acceptance rule, up to `looks` more (the second look); `step` carries the step's count,
        the indices timed and its best (evaluation, child, predicted ratio)."""
        for i in picks:
            if ctx.out_of_time() or step["n"] >= self.top_k + self.looks:
                return
            if i in step["done"]:
                continue
            if step["n"] >= self.top_k:  # a second look: none of the top picks passed
                if step["best"] is not None and ctx.improves(step["best"][0], state_ratio):
                    return
                counts["looks"] += 1
            step["n"] += 1
            step["done"].add(i)
            ev = ctx.evaluate(children[i][1])
            counts["timed"] += 1
            if ev.timed and (step["best"] is None or ev.ratio < step["best"][0].ratio):
                step["best"] = (ev, children[i][1], predictions[i].ratio)
