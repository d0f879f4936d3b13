"""Strategy "learned": the greedy loop of `cost-model` (`shlo_env.search.cost_model`) with the
learned models as its ranker. Nothing else: every choice is a setting of a part.

Source (`shlo_env.search.sources`): first the `probes` vectors beam search would try first
(pick-first, then the hottest single rewrites alternating with sweeps), then pick-first, the
singles and seeded random draws, rewrites only (the graph network cannot see an XLA action),
at most `max_candidates`; plus the deeper states of the pick-first chain from the current
state (`sources.pick_first_chain`: its best state is often several steps deep, a rewrite that
pays only once a later one applies).

Ranker (`shlo_env.search.rankers.Cascade`): the graph network (`learn.model`, no compile)
ranks every child; the `compile_k` it ranks best, then the chain's states (it cannot rank
those), then the rest in its order are compiled (no run) and ranked again by the executable
model (`learn.exe_model`, over XLA's optimized HLO) until `Schedule.compile_rank_s` of the time left is
spent (`compile_k=0`: the graph network alone). A rewrite of a loop or a window reduction
(`rankers.touches_blind_ops`: a static graph counts a loop body once) gets unbounded
uncertainty and is not compiled: the acquisition rule times it first, before the cascade
compiles anything (the greedy loop's `cheap` ranker). Each model's band is its weights' own recorded error
(`unsure`, `exe_unsure` override them).

Acquisition (`shlo_env.search.acquisition`): a child is timed when its optimistic bound
(predicted ratio less the model's error) can clear the acceptance threshold, in order of that
bound, so the unbounded ones come first; `top_k` of them per step, and where none passes, up
to `looks` more down the same ranking (the second look).

Weights: those shipped in the package unless `weights=` (graph network) or `exe_weights=`
(executable model) names another .npz.
"""

from __future__ import annotations

from shlo_env.search import sources
from shlo_env.search.base import SearchContext, register_strategy
from shlo_env.search.cost_model import CostModel
from shlo_env.search.evaluator import Evaluation
from shlo_env.search.rankers import BLIND_OPS, Cascade, ExecutableModel, GraphNetwork, Ranker

__all__ = ["BLIND_OPS", "Learned"]


@register_strategy
class Learned(CostModel):
    name = "learned"

    def __init__(self, top_k: int = 1, looks: int = 2, probes: int = 3, max_candidates: int = 24,
                 compile_k: int = 4, weights=None, unsure: float | None = None,
                 exe_weights=None, exe_unsure: float | None = None, **aim):
        hot = aim.get("hot_first", True)
        rewrites = sources.singles(hot, rewrites_only=True)
        probe = sources.first(probes, sources.chain(sources.pick_first,
                                                    sources.alternate(rewrites, sources.sweeps(hot))))
        source = sources.chain(probe, sources.pick_first, rewrites, sources.random_draws(max_candidates, 0.0))
        graph = GraphNetwork(weights, unsure)
        ranker: Ranker = graph
        if compile_k > 0:
            ranker = Cascade(graph, ExecutableModel(exe_weights, exe_unsure), compile_k)
        super().__init__(top_k=top_k, max_candidates=max_candidates, ranker=ranker, source=source,
                         chain=compile_k > 0, looks=looks, cheap=graph if compile_k > 0 else None, **aim)

    def search(self, ctx: SearchContext) -> Evaluation:
        if isinstance(self.ranker, Cascade):
            self.ranker.compiled = 0
        best = super().search(ctx)
        if isinstance(self.ranker, Cascade):
            self.info["compiled"] = self.ranker.compiled
        return best
