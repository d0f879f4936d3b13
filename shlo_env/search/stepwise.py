"""The baseline decision makers: pick-first (HloEnv paper) and stepwise exhaustive search."""

from __future__ import annotations

import itertools

from shlo_env.hashing import dag_hash
from shlo_env.search.base import (
    SearchContext, Strategy, all_vectors, decision_space, one_hot_vectors, pick_first_vector,
    register_strategy,
)
from shlo_env.search.evaluator import Evaluation


@register_strategy
class PickFirst(Strategy):
    """Take the first non-original choice at every alternatives op, apply, repeat (Algorithm 1).

    Every state of the chain is verified and timed; the best one is returned.
    """

    name = "pick-first"

    def search(self, ctx: SearchContext) -> Evaluation:
        state = ctx.original
        seen = {dag_hash(state)}
        for _ in range(ctx.max_steps):
            if ctx.out_of_time():
                break
            augmented, alts = ctx.expand(state)
            if not alts:
                break
            nxt = ctx.candidate(augmented, pick_first_vector(alts))
            h = dag_hash(nxt)
            if h in seen:
                break
            seen.add(h)
            if not ctx.evaluate(nxt).ok:
                break
            state = nxt
        return ctx.best


@register_strategy
class Exhaustive(Strategy):
    """Stepwise search: at each step try every decision vector when the space is small
    (at most `max_vectors`), else pick-first plus each single choice alone; move to the
    fastest verified candidate while it beats the current state beyond noise."""

    name = "exhaustive"

    def __init__(self, max_vectors: int = 32):
        self.max_vectors = max_vectors

    def vectors(self, alts):
        if decision_space(alts) - 1 <= self.max_vectors:
            return all_vectors(alts)
        return itertools.chain([pick_first_vector(alts)], one_hot_vectors(alts))

    def search(self, ctx: SearchContext) -> Evaluation:
        state, state_ratio = ctx.original, 1.0
        for _ in range(ctx.max_steps):
            augmented, alts = ctx.expand(state)
            if not alts or ctx.out_of_time():
                break
            step_best = None
            for vec in self.vectors(alts):
                if ctx.out_of_time():
                    break
                ev = ctx.evaluate(ctx.candidate(augmented, vec))
                if ev.ok and (step_best is None or ev.ratio < step_best.ratio):
                    step_best = ev
            if step_best is None or not ctx.improves(step_best, state_ratio):
                break
            state, state_ratio = step_best.program, step_best.ratio
        return ctx.best
