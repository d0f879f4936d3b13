"""Random search: random walks through the decision space, the best state kept.

Each episode starts at the original and takes up to `max_steps` steps; a step draws a uniformly
random choice at every alternatives op (and disables each offered XLA pass with probability
`pass_prob`), applies it and evaluates the result. An episode ends at a stop vector, a state
that fails verification, or a state it already visited. Episodes repeat until the deadline or
`episodes` is reached, or until `patience` episodes in a row found no state not seen
before (a small space is exhausted). Seeded by the context's seed: the same walks on every run.
"""

from __future__ import annotations

from shlo_env.search.base import SearchContext, Strategy, is_stop, random_vector, register_strategy
from shlo_env.search.evaluator import Evaluation


@register_strategy
class RandomSearch(Strategy):
    name = "random"

    def __init__(self, episodes: int | None = None, pass_prob: float = 0.1, redraws: int = 4,
                 patience: int = 30, **aim):
        super().__init__(**aim)
        self.patience = patience
        self.episodes = episodes
        self.pass_prob = pass_prob
        self.redraws = redraws

    def search(self, ctx: SearchContext) -> Evaluation:
        start = self.begin(ctx)
        episode = 0
        steps = 0
        stale = 0
        while not ctx.out_of_time() and (self.episodes is None or episode < self.episodes):
            episode += 1
            before = ctx.evaluator.stats.evaluated
            state = start
            seen = {state.key}
            moved = False
            for _ in range(ctx.max_steps):
                if ctx.out_of_time():
                    break
                exp = ctx.expand(state)
                if not exp.dims:
                    break
                vec = random_vector(exp.dims, ctx.rng, self.pass_prob)
                for _ in range(self.redraws):  # a stop drawn at the root wastes an episode
                    if not is_stop(vec):
                        break
                    vec = random_vector(exp.dims, ctx.rng, self.pass_prob)
                if is_stop(vec):
                    break
                nxt = ctx.child(exp, vec)
                if nxt is None or nxt.key in seen:
                    break
                seen.add(nxt.key)
                steps += 1
                moved = True
                if not ctx.evaluate(nxt).ok:
                    break
                state = nxt
            if not moved and not ctx.expand(start).dims:
                break  # nothing to decide at all
            stale = stale + 1 if ctx.evaluator.stats.evaluated == before else 0
            if stale >= self.patience:
                break
        self.info.update(episodes=episode, steps=steps)
        return ctx.best
