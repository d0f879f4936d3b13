"""Factorized MCTS (f-MCTS) as the HloEnv paper defines it.

A state with K alternatives ops has prod_k n_k joint actions; f-MCTS never enumerates them.
Each tree node keeps *marginal* statistics per dimension k and choice a: N(k, a) visits and
Q(k, a) mean value. A joint action is picked one dimension at a time with the UCB score of
MuZero (which the paper uses):

    U(k, a) = Q'(k, a) + P(k, a) * sqrt(sum_b N(k, b)) / (1 + N(k, a))
                         * (c1 + log((sum_b N(k, b) + c2 + 1) / c2)),   c1 = 1.25, c2 = 19652

with a uniform prior P(k, a) = 1 / n_k over an alternatives op's choices (there is no learned
policy; for an XLA-pass toggle, the macro action this project adds, the prior is the rollout
policy's: keep 1 - pass_prob, disable pass_prob) and Q' the mean value
normalized by the minimum and maximum values observed so far in the tree (Q' = 0 for an
unvisited choice; ties broken at random). A simulation descends from the root by these
factorized choices until it reaches a state not yet in the tree, adds it, and values it by a
Monte-Carlo rollout: `rollout_depth` random decision vectors applied and evaluated; the value
is the best log-speedup -log(ratio) seen on the way (the search may stop at any state). The
value is backed up into N and Q of every (node, dimension, chosen choice) on the path.

After `budget` simulations the search acts: at the root, the most visited choice per dimension
forms the action; the root moves to that child (keeping its subtree) and the budget for the
next step is multiplied by `decay` (at least `min_budget`): the budget decays per step. A step
also acts once it has used `Schedule.step_s` of the time left when it began, so that a slow program
(seconds per candidate) still gets a second step, where rewrites that build on the first
(a pattern inside a loop body the first step unrolled) are found. Such a step acts with the
joint action whose state measured best (`act_best_child`), since its visit counts say little. It
stops at a terminal state or after `ctx.max_steps` steps; a stop action ends it only when the
time is spent or its step found no new state, otherwise the next step searches on from the same
root (a stop chosen after a few simulations would leave most of the budget unused). An acted
joint action that fails verification gives way to the best simulated child. Such a walk is an
episode: while time is left, the next one starts at the top again with the tree kept; when an
episode tries no new state, the top's singles and sweeps not simulated yet are (`widen`), and
the search ends once neither finds a new state. Failed candidates get the lowest value seen.
The returned result is the best verified state evaluated anywhere.

Two additions to the paper, on by default. `seed_hot` (with `hot_first`): the first simulations of each step
take the single rewrite at each of the `seed_hot` hottest sites (`SearchContext.singles`, ordered by
`shlo_env.search.site_heat`), then the `seed_sweeps` hottest sweeps (one rewrite at all its
sites, `SearchContext.sweeps`), valued without a rollout, so a small budget is spent where the
time is instead of on a random joint action of dozens of dimensions. `seed_pick_first`: the
next simulation takes the pick-first action and rolls out with pick-first, so f-MCTS starts
from the paper's baseline heuristic instead of having to rediscover it by chance in a large
space. The search starts at `Strategy.begin`'s state (the original, or the option state the
XLA option screen chose).
"""

from __future__ import annotations

import dataclasses
import itertools
import time
import math

import numpy as np

from shlo_env.search.base import (
    Expansion, SearchContext, State, Strategy, interleave, is_stop, pick_first_vector, random_vector, register_strategy,
)
from shlo_env.search import sources
from shlo_env.search.evaluator import Evaluation
from shlo_env.search.schedule import Schedule

C1 = 1.25
C2 = 19652.0


def ucb_scores(N: np.ndarray, Q: np.ndarray, q_min: float, q_max: float, prior: np.ndarray | None = None,
               c1: float = C1, c2: float = C2) -> np.ndarray:
    """MuZero's pUCT score of each choice of one dimension (the factorized selection rule)."""
    N = np.asarray(N, dtype=np.float64)
    total = float(N.sum())
    prior = np.full(len(N), 1.0 / len(N)) if prior is None else np.asarray(prior, dtype=np.float64)
    if q_max > q_min:
        q = np.where(N > 0, (np.asarray(Q, dtype=np.float64) - q_min) / (q_max - q_min), 0.0)
    else:
        q = np.zeros(len(N))
    explore = prior * math.sqrt(total) / (1.0 + N) * (c1 + math.log((total + c2 + 1.0) / c2))
    return q + explore


def decayed_budgets(budget: int, decay: float, min_budget: int, steps: int) -> list[int]:
    """Simulations per acting step: budget, budget*decay, ... (floored, at least min_budget)."""
    out, b = [], float(budget)
    for _ in range(steps):
        out.append(max(min_budget, int(b)))
        b *= decay
    return out


@dataclasses.dataclass(eq=False)
class Node:
    state: State
    exp: Expansion
    value: float  # -log(ratio) of the state itself (its own evaluation)
    N: list[np.ndarray] = dataclasses.field(default_factory=list)
    W: list[np.ndarray] = dataclasses.field(default_factory=list)
    children: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        self.N = [np.zeros(d.num_choices) for d in self.exp.dims]
        self.W = [np.zeros(d.num_choices) for d in self.exp.dims]

    @property
    def terminal(self) -> bool:
        return not self.exp.dims

    def Q(self, k: int) -> np.ndarray:
        return np.divide(self.W[k], self.N[k], out=np.zeros_like(self.W[k]), where=self.N[k] > 0)

    def visits(self) -> int:
        return int(self.N[0].sum()) if self.N else 0


class MinMax:
    """The minimum and maximum value backed up so far (MuZero's MinMaxStats)."""

    def __init__(self):
        self.lo, self.hi = math.inf, -math.inf

    def update(self, v: float) -> None:
        self.lo, self.hi = min(self.lo, v), max(self.hi, v)


def value_of(ev: Evaluation) -> float | None:
    """-log(ratio): 0 for the original's speed, positive when faster; None if not usable."""
    if not ev.timed or ev.ratio <= 0:
        return None
    return -math.log(ev.ratio)


@register_strategy
class FactorizedMCTS(Strategy):
    name = "mcts"

    def __init__(self, budget: int = 32, decay: float = 0.5, min_budget: int = 4, rollout_depth: int = 1,
                 c1: float = C1, c2: float = C2, pass_prob: float = 0.1, seed_pick_first: bool = True,
                 seed_hot: int = 3, seed_sweeps: int = 2, **aim):
        super().__init__(**aim)
        self.seed_hot, self.seed_sweeps = seed_hot, seed_sweeps
        self.budget, self.decay, self.min_budget = budget, decay, min_budget
        self.rollout_depth = rollout_depth
        self.c1, self.c2 = c1, c2
        self.pass_prob = pass_prob
        self.seed_pick_first = seed_pick_first

    # --- pieces ---------------------------------------------------------------------------

    def _node(self, ctx: SearchContext, state: State, value: float) -> Node:
        return Node(state, ctx.expand(state), value)

    def select(self, node: Node, ctx: SearchContext, minmax: MinMax) -> list[int]:
        """One choice per dimension by the factorized UCB rule (random tie-break)."""
        vec = []
        for k, dim in enumerate(node.exp.dims):
            prior = None if dim.kind == "rewrite" else np.array([1.0 - self.pass_prob, self.pass_prob])
            scores = ucb_scores(node.N[k], node.Q(k), minmax.lo, minmax.hi, prior, c1=self.c1, c2=self.c2)
            best = np.flatnonzero(scores >= scores.max() - 1e-12)
            vec.append(int(best[ctx.rng.randrange(len(best))]))
        return vec

    def _fail_value(self, minmax: MinMax) -> float:
        return minmax.lo if math.isfinite(minmax.lo) else 0.0

    def rollout(self, ctx: SearchContext, state: State, value: float, policy: str = "random") -> float:
        """Monte-Carlo value of a new leaf: the best -log(ratio) over a short rollout from it."""
        if policy == "none":
            return value
        best = value
        depth = self.rollout_depth if policy == "random" else ctx.max_steps
        for step in range(depth):
            if ctx.out_of_time():
                break
            exp = ctx.expand(state)
            if not exp.dims:
                break
            vec = pick_first_vector(exp.dims) if policy == "pick-first" else random_vector(
                exp.dims, ctx.rng, self.pass_prob)
            if is_stop(vec):
                break
            nxt = ctx.child(exp, vec)
            if nxt is None:
                break
            v = value_of(ctx.evaluate(nxt, expand=step + 1 < depth))
            if v is None:
                break
            best = max(best, v)
            state = nxt
        self.info["rollout_steps"] = self.info.get("rollout_steps", 0) + 1
        return best

    def simulate(self, root: Node, ctx: SearchContext, minmax: MinMax, forced: list[int] | None = None,
                 policy: str = "random") -> None:
        """One simulation: descend by UCB, add one node, roll out, back up."""
        path: list[tuple[Node, list[int]]] = []
        node, depth = root, 0
        while True:
            if node.terminal or depth >= ctx.max_steps:
                value = node.value
                break
            vec = forced if (forced is not None and node is root) else self.select(node, ctx, minmax)
            path.append((node, vec))
            if is_stop(vec):
                value = node.value  # stopping here: the state's own value
                break
            key = tuple(vec)
            if key in node.children:
                node, depth = node.children[key], depth + 1
                continue
            child = ctx.child(node.exp, vec)
            # a new node is expanded: its patterns match while the worker verifies it
            v = value_of(ctx.evaluate(child, expand=True)) if child is not None else None
            if child is None or v is None:
                value = self._fail_value(minmax)
                break
            new = self._node(ctx, child, v)
            node.children[key] = new
            self.info["nodes"] = self.info.get("nodes", 0) + 1
            value = self.rollout(ctx, child, v, policy)
            break
        minmax.update(value)
        for n, vec in path:
            for k, a in enumerate(vec):
                n.N[k][a] += 1
                n.W[k][a] += value
        self.info["simulations"] = self.info.get("simulations", 0) + 1

    def act(self, node: Node) -> list[int]:
        """The most visited choice per dimension (ties: the higher mean value)."""
        vec = []
        for k in range(len(node.exp.dims)):
            n, q = node.N[k], node.Q(k)
            order = np.lexsort((q, n))  # by visits, then value
            vec.append(int(order[-1]))
        return vec

    def act_best_child(self, node: Node) -> list[int]:
        """After a step cut short by time (a few simulations, about one visit per choice, so
        the visit counts say little): the simulated joint action whose state measured best,
        or the paper's rule when none beats the node itself."""
        if not node.children:
            return self.act(node)
        key, child = max(node.children.items(), key=lambda kv: kv[1].value)
        return list(key) if child.value > node.value else self.act(node)

    # --- the search -----------------------------------------------------------------------

    def seeds(self, ctx: SearchContext, root: Node) -> list[tuple[list[int], str]]:
        """The forced first simulations at each step's root (vector, rollout policy): hot singles
        alternating with the hottest sweeps, then pick-first."""
        hot = self.seed_hot if self.hot_first else 0
        singles = itertools.islice(sources.singles(self.hot_first)(ctx, root.exp), hot)
        sweeps = itertools.islice(sources.sweeps(self.hot_first)(ctx, root.exp), self.seed_sweeps if hot else 0)
        out = [(vec, "none") for vec in interleave(singles, sweeps)]
        if self.seed_pick_first:
            out += [(vec, "pick-first") for vec in sources.pick_first(ctx, root.exp)]
        return out

    def search(self, ctx: SearchContext) -> Evaluation:
        minmax = MinMax()
        start = self.begin(ctx)
        top = self._node(ctx, start, -math.log(self.start_ratio(ctx, start)))  # the original: ratio 1.0, value 0
        minmax.update(top.value)
        self.info.update(budgets=[], actions=[], episodes=0)
        widened: set[tuple[int, ...]] = set()
        while not top.terminal and not ctx.out_of_time():
            tried = ctx.evaluator.stats.evaluated
            self.episode(ctx, top, minmax, seed_top=self.info["episodes"] == 0)
            self.info["episodes"] += 1
            if ctx.evaluator.stats.evaluated == tried and not self.widen(ctx, top, minmax, widened):
                break  # neither the walk nor the untried singles and sweeps found a new state
        return ctx.best

    def widen(self, ctx: SearchContext, top: Node, minmax: MinMax, done: set[tuple[int, ...]]) -> bool:
        """A walk that tried no new state, with time left: the singles and sweeps at the top not
        simulated yet (hottest first, alternating), each valued alone, for a step's share of
        the time left. Where most candidates fail verification (a float64 solver whose
        iteration count any reordering changes), the walks keep meeting the same failed
        combinations while most single rewrites are untried; the next walk combines those
        that verify. Returns whether a new state was tried (`done`: the vectors taken so far)."""
        tried = ctx.evaluator.stats.evaluated
        end = time.perf_counter() + Schedule.step_s(ctx.time_left())
        vecs = interleave(sources.singles(self.hot_first)(ctx, top.exp), sources.sweeps(self.hot_first)(ctx, top.exp))
        for vec in vecs:
            if ctx.out_of_time() or time.perf_counter() >= end:
                break
            key = tuple(vec)
            if key in done or key in top.children:
                continue
            done.add(key)
            self.simulate(top, ctx, minmax, forced=vec, policy="none")
        new = ctx.evaluator.stats.evaluated - tried
        self.info["widened"] = self.info.get("widened", 0) + new
        return new > 0

    def episode(self, ctx: SearchContext, root: Node, minmax: MinMax, seed_top: bool = True) -> None:
        """Acting steps from `root` until a terminal state, `ctx.max_steps` steps, or a stop.
        Later episodes start at the top again with the tree kept (the time is the user's
        budget: walked to the end with time left, the search explores on)."""
        budgets = decayed_budgets(self.budget, self.decay, self.min_budget, ctx.max_steps)
        seeds = self.seeds(ctx, root) if seed_top else []
        deferred, max_deferred = 0, 4 * len(budgets)
        for budget in budgets:
            if root.terminal or ctx.out_of_time():
                return
            done, tried = 0, ctx.evaluator.stats.evaluated
            step_end = time.perf_counter() + Schedule.step_s(ctx.time_left())

            def go_on() -> bool:
                return done < budget and not ctx.out_of_time() and (done == 0 or time.perf_counter() < step_end)

            while seeds and go_on():
                vec, policy = seeds.pop(0)
                self.simulate(root, ctx, minmax, forced=vec, policy=policy)
                done += 1
            while go_on():
                self.simulate(root, ctx, minmax)
                done += 1
            self.info["budgets"].append(done)
            vec = self.act(root) if done >= budget else self.act_best_child(root)
            self.info["actions"].append(root.exp.describe(vec))
            if is_stop(vec):
                if ctx.out_of_time() or ctx.evaluator.stats.evaluated == tried or deferred >= max_deferred:
                    return
                # time is left and the step still tried new states (failed ones too, which add no
                # node: where most candidates fail verification, they are most of what is new)
                deferred += 1
                self.info["stops_deferred"] = self.info.get("stops_deferred", 0) + 1
                budgets.append(budget)
                continue
            nxt = self._step_to(ctx, root, vec)
            if nxt is None:
                return
            root = nxt
            seeds = self.seeds(ctx, root) if not root.terminal else []  # each step's root gets its own

    def _step_to(self, ctx: SearchContext, root: Node, vec: list[int]) -> Node | None:
        """The child the acting step chose. The marginals can combine into a joint action no
        simulation took: it is tried now, and when it fails, the best simulated child is taken
        instead (a failed combination does not end the search)."""
        key = tuple(vec)
        if key in root.children:
            return root.children[key]
        child = ctx.child(root.exp, vec) if not ctx.out_of_time() else None
        if child is not None:
            v = value_of(ctx.evaluate(child, expand=True))
            if v is not None:
                root.children[key] = self._node(ctx, child, v)
                return root.children[key]
        best = self.act_best_child(root)
        return root.children.get(tuple(best)) if not is_stop(best) else None
