"""Greedy search ranked by the learned cost model (`shlo_env.learn.model`): strategy "learned".

The cost-model strategy's loop (candidates of the current state, rank, time only the `top_k`
predicted faster, move to the fastest timed one if it beats the state beyond noise), with the
ranking from the learned graph network instead of XLA's cost analysis: no compile at all to
rank. The model sees the augmented program and each vector's live nodes, so only rewrite
decisions are ranked (vectors that disable XLA passes are not offered). Estimates are
exp(score): their ratio to the current state's is the model's predicted runtime ratio.
Weights: the ones shipped in the package unless `weights=` names another .npz.
"""

from __future__ import annotations

import numpy as np

from shlo_env import observe
from shlo_env.learn import model
from shlo_env.search.base import SearchContext, register_strategy
from shlo_env.search.cost_model import CostModel


@register_strategy
class Learned(CostModel):
    name = "learned"

    def __init__(self, top_k: int = 2, max_candidates: int = 24, min_predicted_gain: float = 0.01,
                 weights=None):
        super().__init__(top_k=top_k, max_candidates=max_candidates, min_predicted_gain=min_predicted_gain,
                         pass_prob=0.0)
        self.weights = weights
        self._model: tuple | None = None

    def candidates(self, exp, ctx: SearchContext):
        for vec in super().candidates(exp, ctx):
            if not any(vec[exp.num_rewrites:]):  # the model cannot see disabled XLA passes
                yield vec

    def estimate(self, ctx: SearchContext, exp, children: list) -> tuple[float, list[float]]:
        if self._model is None:
            self._model = model.load(self.weights)
        vectors = [[0] * exp.num_rewrites] + [list(vec[:exp.num_rewrites]) for vec, _ in children]
        s = model.predicted_scores(observe.graph(exp.augmented, uids=False), vectors, self._model)
        est = np.exp(s - s[0])  # relative to the current state: a predicted runtime ratio
        return 1.0, [float(e) for e in est[1:]]
