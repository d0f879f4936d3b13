"""The baseline decision makers: pick-first (HloEnv paper) and stepwise exhaustive search."""

from __future__ import annotations

from shlo_env.search import sources
from shlo_env.search.base import (
    SearchContext, State, Strategy, all_vectors, register_strategy,
)
from shlo_env.search.evaluator import Evaluation


@register_strategy
class PickFirst(Strategy):
    """Take the first non-original choice at every alternatives op, apply, repeat (Algorithm 1).

    Every state of the chain is verified and timed; the best one is returned. Pick-first never
    disables an XLA pass (passes are not alternatives ops).
    """

    name = "pick-first"

    def search(self, ctx: SearchContext) -> Evaluation:
        pick_first_chain(ctx, self.begin(ctx))
        return ctx.best


pick_first_states = sources.pick_first_states  # the walk lives with the sources (`pick_first_chain`)


def pick_first_chain(ctx: SearchContext, start: State | None = None) -> None:
    """Evaluate the pick-first chain from `start` (default: the root) until it stops, repeats
    a state, fails, or time runs out (beam search seeds itself with it too)."""
    if ctx.out_of_time():
        return
    for state in pick_first_states(ctx, start):
        if not ctx.evaluate(state).ok or ctx.out_of_time():
            return


@register_strategy
class Exhaustive(Strategy):
    """Stepwise search: at each step try every decision vector when the space is small
    (at most `max_vectors`), else pick-first plus each single choice alone; move to the
    fastest verified candidate while it beats the current state beyond noise."""

    name = "exhaustive"

    def __init__(self, max_vectors: int = 32, **aim):
        super().__init__(**aim)
        self.max_vectors = max_vectors

    def vectors(self, exp, ctx: SearchContext):
        if exp.size - 1 <= self.max_vectors:
            return all_vectors(exp.dims)
        return sources.chain(sources.pick_first, sources.singles(self.hot_first))(ctx, exp)

    def search(self, ctx: SearchContext) -> Evaluation:
        state = self.begin(ctx)
        state_ratio = self.start_ratio(ctx, state)
        for _ in range(ctx.max_steps):
            exp = ctx.expand(state)
            if not exp.dims or ctx.out_of_time():
                break
            step_best = None
            for vec in self.vectors(exp, ctx):
                if ctx.out_of_time():
                    break
                child = ctx.child(exp, vec)
                if child is None:
                    continue
                ev = ctx.evaluate(child)
                if ev.timed and (step_best is None or ev.ratio < step_best[0].ratio):
                    step_best = (ev, child)
            if step_best is None or not ctx.improves(step_best[0], state_ratio):
                break
            state, state_ratio = step_best[1], step_best[0].ratio
        return ctx.best
