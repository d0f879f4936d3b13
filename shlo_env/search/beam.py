"""Beam search as the HloEnv paper defines it: a depth-first stack with pruning.

    stack = [start]        (the original, or the option state the XLA option screen chose)
    while stack and time is left:
        s = stack.pop()
        children = up to `expand_budget` decision vectors from s, each applied and timed
        prune every child with T(child) >= alpha * T(s)
        push the best `beam_width` survivors, best last (so it is expanded next)

T is measured side by side with the original, so T(child) >= alpha * T(s) is
ratio(child) >= alpha * ratio(s). Children of a state are generated in this order: the
pick-first vector, then single choices alone (rewrites at the hottest sites first, see
`shlo_env.search.site_heat`; then pass toggles) alternating with sweeps (one rewrite taken at
all its sites at once, `SearchContext.sweeps`), then seeded random vectors; `expand_budget` caps how many are evaluated per expansion (the paper's expand budget),
the context's deadline is the global time budget, and `ctx.max_steps` bounds the depth. A state
reached twice (another path, or a rewrite undone) is expanded once; its evaluation is a cache
hit. `alpha` slightly above 1 keeps children within measurement noise of their parent, so a
neutral rewrite that enables a faster one is not cut off.

Two additions around that loop, both on by default and both optional:

- `seed_pick_first`: before the first pop, the pick-first chain from the root is evaluated
  (the paper's baseline heuristic; at most `max_steps` evaluations, all cached), so beam
  search never ends up behind it when its own ordering leads elsewhere.
- `widen`: when the stack runs empty before the deadline, the search starts over from the
  root with the next, looser alpha (children already evaluated are cache hits), so an
  improvement reachable only through a slower intermediate state (x@W + (x@A)@B: merge the
  two dots, then split differently) is found when time allows. Each round applies the
  paper's rule with its own alpha.
"""

from __future__ import annotations

import itertools

from shlo_env.search import sources
from shlo_env.search.base import Expansion, SearchContext, State, Strategy, register_strategy
from shlo_env.search.evaluator import Evaluation
from shlo_env.search.stepwise import pick_first_chain


def pruned(child_ratio: float, parent_ratio: float, alpha: float) -> bool:
    """The paper's pruning rule: drop a child with T(child) >= alpha * T(parent)."""
    return child_ratio >= alpha * parent_ratio


@register_strategy
class Beam(Strategy):
    name = "beam"

    def __init__(self, alpha: float = 1.02, expand_budget: int = 8, beam_width: int = 3,
                 max_expansions: int | None = None, pass_prob: float = 0.1, seed_pick_first: bool = True,
                 widen: tuple[float, ...] = (1.15, 1.5, 2.0), **aim):
        super().__init__(**aim)
        self.alpha = alpha
        self.seed_pick_first = seed_pick_first
        self.widen = tuple(widen)
        self.expand_budget = expand_budget
        self.beam_width = beam_width
        self.max_expansions = max_expansions
        self.pass_prob = pass_prob

    def child_vectors(self, exp: Expansion, ctx: SearchContext):
        """The candidate source (`shlo_env.search.sources`): pick-first, then singles
        alternating with sweeps, then random draws; no stop vector, no repeat."""
        source = sources.distinct(sources.chain(
            sources.pick_first, sources.alternate(sources.singles(self.hot_first), sources.sweeps(self.hot_first)),
            sources.random_draws(4 * self.expand_budget, self.pass_prob)))
        return source(ctx, exp)

    def search(self, ctx: SearchContext) -> Evaluation:
        counts = dict(expansions=0, children=0, pruned=0, failed=0, max_depth=0)
        self.info.update(counts, alphas=[])
        start = self.begin(ctx)
        if self.seed_pick_first:
            pick_first_chain(ctx, start)
        for alpha in [self.alpha] + sorted(a for a in self.widen if a > self.alpha):
            if ctx.out_of_time():
                break
            self.info["alphas"].append(alpha)
            self._dfs(ctx, start, self.start_ratio(ctx, start), alpha, counts)
        self.info.update(counts)
        return ctx.best

    def _dfs(self, ctx: SearchContext, start: State, start_ratio: float, alpha: float, counts: dict) -> None:
        stack = [(start, start_ratio, 0)]
        expanded: set[str] = set()
        while stack and not ctx.out_of_time():
            if self.max_expansions is not None and counts["expansions"] >= self.max_expansions:
                break
            state, ratio, depth = stack.pop()
            if depth >= ctx.max_steps or state.key in expanded:
                continue
            expanded.add(state.key)
            exp = ctx.expand(state)
            if not exp.dims:
                continue
            counts["expansions"] += 1
            survivors = []
            for vec in itertools.islice(self.child_vectors(exp, ctx), self.expand_budget):
                if ctx.out_of_time():
                    break
                child = ctx.child(exp, vec)
                if child is None or child.key == state.key:
                    continue
                counts["children"] += 1
                ev = ctx.evaluate(child)
                if not ev.timed:
                    counts["failed"] += 1
                    continue
                if pruned(ev.ratio, ratio, alpha):
                    counts["pruned"] += 1
                    continue
                survivors.append((ev.ratio, child))
            survivors.sort(key=lambda s: s[0])
            for child_ratio, child in reversed(survivors[:self.beam_width]):
                stack.append((child, child_ratio, depth + 1))
                counts["max_depth"] = max(counts["max_depth"], depth + 1)
