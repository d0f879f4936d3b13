"""Greedy search ranked by the learned cost model (`shlo_env.learn.model`): strategy "learned".

The cost-model strategy's loop (candidates of the current state, rank, time only a few, move to
the fastest timed one if it beats the state beyond noise), with the ranking from the learned
model instead of XLA's cost analysis. The model sees the augmented program and each vector's
live nodes, so only rewrite decisions are ranked (vectors that disable XLA passes are not
offered). Estimates are exp(score): their ratio to the current state's is the model's predicted
runtime ratio.

Before the greedy steps, the original's probes that rewrite a loop or a window reduction
(which the models cannot rank, below) are timed (`blind_start`), before any compile for the
models can use up a small budget. Then the pick-first chain from the original is compiled
(no run) and scored by the executable model; its best state is timed if predicted faster
(`chain_start`): it is often several pick-first steps deep, out of a greedy step's reach.
The greedy steps start from the faster of these two that measures faster beyond noise, then
from the other, then again from the original. Where greedy steps stop, the chain from that
state is walked the same way (`chain_from`), and they go on from its best state if that
measures faster. Where that finds nothing either, the *second look* times the next
`second_looks` children the models rank best there and predict faster at all, and greedy
steps go on from the first that pays (time left is otherwise unused). These two are
`CostModel.search`'s `restart` hook.

A cascade, cheapest first: the graph network ranks every candidate without compiling; the
`compile_k` best-ranked children and the probes are then compiled (no run), then the other
children while time allows, and ranked again by the executable model (`learn.exe_model`, over
`learn.hlo_features` of XLA's optimized HLO), and only those can be timed on its word
(`compile_k=0`: the graph network alone). A child timed later reuses the executable compiled
here.

What is timed at each step:
- the `top_k` candidates the model predicts faster than the current state (by
  `min_predicted_gain`), best first;
- the *probes*, where the model is unsure: the first `probes` of pick-first, then the hottest
  single rewrites (`SearchContext.singles`) alternating with sweeps (one rewrite at all its
  sites, `SearchContext.sweeps`, those that paid at an earlier step first, as beam search
  orders them), unless both the model and its prior (the
  readout's bytes roofline without the learned correction) predict them slower than the
  state by more than the model's error (`unsure`: by default the median |predicted -
  measured| log ratio on the validation split, recorded in the weights' info; 0.25 when
  absent). Where the correction turns the prior's predicted gain into a loss, the model is
  extrapolating (shapes unlike its training programs), so the candidate is timed. A probe
  the executable model has scored is held to that model's own, smaller error (`exe_unsure`:
  by default its cross-validated median error, recorded in its weights' info): it is timed
  only if its prediction is within that error of passing the acceptance threshold
  (`ctx.threshold`), or the prior predicts a gain beyond the graph network's error. A probe
  that rewrites a loop or a window reduction (`BLIND_OPS` in the region it replaces, among the
  matched roots that region yields, or in the region it takes) is timed whatever the
  predictions: the model and its prior read the static graph, a loop body counted once, so
  they cannot see a change in how often ops run. So is
  pick-first from a state a step reached (`time_pick_first`: the pick-first chain continued
  from a rewrite that paid, where both models can be wrong by more than their error). A probe
  that XLA compiles to an executable already timed (often the original's) costs a compile,
  no timing.
Weights: the ones shipped in the package unless `weights=` (graph network) or `exe_weights=`
(executable model) names another .npz.
"""

from __future__ import annotations

import itertools
import math
import time
from collections import Counter
from collections.abc import Iterator

import numpy as np

from shlo_env import observe
from shlo_env.learn import exe_model, model
from shlo_env.search import acquisition
from shlo_env.search.base import SearchContext, State, interleave, pick_first_vector, register_strategy
from shlo_env.search.cost_model import CostModel
from shlo_env.search.rankers import (
    BLIND_OPS, DEFAULT_UNSURE, ExecutableModel, GraphNetwork, Prediction, step_patterns, touches_blind_ops,
)
from shlo_env.search.stepwise import pick_first_states

__all__ = ["BLIND_OPS", "DEFAULT_UNSURE", "Learned"]


@register_strategy
class Learned(CostModel):
    name = "learned"

    def __init__(self, top_k: int = 1, max_candidates: int = 24, min_predicted_gain: float = 0.01,
                 probes: int = 3, unsure: float | None = None, weights=None, compile_k: int = 4,
                 exe_weights=None, compile_share: float = 0.5, chain_share: float = 0.25,
                 time_pick_first: bool = True, exe_unsure: float | None = None,
                 second_looks: int = 2, **aim):
        super().__init__(top_k=top_k, max_candidates=max_candidates, min_predicted_gain=min_predicted_gain,
                         pass_prob=0.0, **aim)
        self.probes = probes
        self.compile_k = compile_k
        self.exe_weights = exe_weights
        self.compile_share = compile_share
        self.chain_share = chain_share
        self.time_pick_first = time_pick_first
        self.second_looks = second_looks
        self._ranked: dict = {}  # state key -> its children predicted faster at all, best first
        self._timed: set = set()  # keys of the children chosen to be timed
        self._exe: exe_model.ExeModel | None = None
        self.unsure = unsure
        self.exe_unsure = exe_unsure
        self.weights = weights
        # the rankers this strategy draws its models from (`shlo_env.search.rankers`)
        self.graph_network = GraphNetwork(weights, unsure)
        self.executable_model = ExecutableModel(exe_weights, exe_unsure)
        self._prior: list[float] = []  # the last estimate's prior (uncorrected) ratios, per child
        self._by_exe: list[bool] = []  # the last estimate's children the executable model scored
        self._graph: observe.Graph | None = None  # the last estimate's augmented graph

    def _state(self) -> tuple:
        return self.graph_network.state()

    # the rankers' definitions (`shlo_env.search.rankers`), under the names this strategy used
    _blind = staticmethod(touches_blind_ops)
    _patterns = staticmethod(step_patterns)

    def _timed_anyway(self, g: observe.Graph, vec: list[int], exp, ctx: SearchContext) -> bool:
        """Probes timed whatever the models predict: those that touch `BLIND_OPS`, and, when
        `time_pick_first`, pick-first from a state a step reached (the pick-first chain
        continued from a rewrite that paid, as beam search's seed continues it; both models
        can be wrong about it by more than their error: on low_rank_update,
        `merge_dots_sharing_lhs` after `distribute_left` is predicted 1.5x and 2x slower and
        measures 3-5 % faster). From the original, `chain_start` has scored the chain already."""
        if self._blind(g, vec):
            return True
        return (self.time_pick_first and exp.state.key != ctx.root.key
                and list(vec) == pick_first_vector(exp.dims))

    def _unsure(self) -> float:
        return self.graph_network.band()

    def _exe_unsure(self) -> float | None:
        """The executable model's error band (log ratio); None when its weights record none
        (its estimates then share the graph network's band)."""
        if self.exe_unsure is not None:
            return self.exe_unsure
        value = self._exe_model().info.get("cv_log_error_median")
        return float(value) if value is not None else None

    def _worth_probing(self, ctx: SearchContext, est: float, prior: float, by_exe: bool, state_est: float) -> bool:
        """Whether a probe may pay. Scored by the executable model: predicted within that
        model's error of passing the acceptance threshold (a timing pays only if the child
        passes it), or its prior predicts a gain beyond the graph network's error. Otherwise:
        neither the graph network nor its prior predicts it slower beyond that error."""
        exe_error = self._exe_unsure() if by_exe else None
        if exe_error is None:  # the graph network's wide band: a probe that may gain at all
            return acquisition.worth_timing(Prediction(min(est, prior) / state_est, self._unsure()), 1.0)
        # the acquisition rule on the executable model's prediction, or a prior sure of a gain
        return (acquisition.worth_timing(Prediction(est / state_est, exe_error), ctx.threshold)
                or prior < state_est * ctx.threshold * math.exp(-self._unsure()))

    def _probe_vectors(self, exp, ctx: SearchContext) -> list[list[int]]:
        """The first `probes` of: pick-first, then the single rewrites (hottest first)
        alternating with the sweeps."""
        singles = (v for v in ctx.singles(exp, self.hot_first) if not any(v[exp.num_rewrites:]))
        vectors = itertools.chain([pick_first_vector(exp.dims)], interleave(singles, ctx.sweeps(exp, self.hot_first)))
        return list(itertools.islice(vectors, self.probes))

    def candidates(self, exp, ctx: SearchContext):
        seen = set()
        for vec in itertools.chain(self._probe_vectors(exp, ctx), super().candidates(exp, ctx)):
            if not any(vec) or any(vec[exp.num_rewrites:]) or tuple(vec) in seen:
                continue  # the stop vector, or a disabled XLA pass: the model cannot see those
            seen.add(tuple(vec))
            yield vec
            if len(seen) >= self.max_candidates:
                return

    def estimate(self, ctx: SearchContext, exp, children: list) -> tuple[float, list[float]]:
        vectors = [[0] * exp.num_rewrites] + [list(vec[:exp.num_rewrites]) for vec, _ in children]
        g = self._graph = observe.graph(exp.augmented, uids=False)
        s = model.predicted_scores(g, vectors, self._state())
        est = np.exp(s - s[0])  # relative to the current state: a predicted runtime ratio
        prior = model.predicted_scores(g, vectors, self._state(), corrected=False)
        self._prior = [float(e) for e in np.exp(prior - prior[0])[1:]]
        compiled = self._with_executables(ctx, exp, children, s)
        self._by_exe = [bool(np.isfinite(c)) for c in compiled[1:]] if compiled is not None else [False] * len(children)
        ests = [float(e) for e in (compiled if compiled is not None else est)[1:]]
        self._ranked[exp.state.key] = sorted(((e, c) for e, (_, c) in zip(ests, children) if e < 1.0),
                                             key=lambda r: r[0])
        return 1.0, ests

    def _with_executables(self, ctx: SearchContext, exp, children: list, static: np.ndarray) -> np.ndarray | None:
        """Predicted ratios from the executable model (`learn.exe_model`) for the state, the
        `compile_k` children the graph network ranks best, every single loop or window rewrite
        (`BLIND_OPS`: the graph network cannot rank those, the executable model reads trip
        counts) and the probes, then the other children in the graph network's order: each
        is compiled (no run; a child timed later reuses the executable). Children not compiled
        get +inf: only compiled ones are timed on the model's word (probes aside). Probes timed
        anyway (`_timed_anyway`) are not compiled here, and compiling stops once it has used
        `compile_share` of the time left (a large program's compiles must not eat the budget
        its timings need). None (the graph network's ranking stands) when `compile_k` is 0,
        the state does not compile or no child could be compiled in time."""
        if self.compile_k <= 0 or not children:
            return None
        state_features = ctx.executable_features(exp.state)
        if state_features is None:
            return None
        g = self._graph if self._graph is not None else observe.graph(exp.augmented, uids=False)
        probe_vectors = self._probe_vectors(exp, ctx)
        timed_anyway = {tuple(v) for v in probe_vectors if self._timed_anyway(g, v, exp, ctx)}
        probes = {tuple(v) for v in probe_vectors} - timed_anyway
        # single loop or window rewrites: the graph network cannot rank them, the executable model can
        blind = {i for i, (vec, _) in enumerate(children)
                 if sum(1 for x in vec if x) == 1 and tuple(vec) not in timed_anyway and self._blind(g, vec)}
        order = [int(i) for i in np.argsort(static[1:], kind="stable")]  # the graph network's best first
        chosen = (set(order[:self.compile_k]) | blind
                  | {i for i, (vec, _) in enumerate(children) if tuple(vec) in probes})
        stop_at = time.perf_counter() + self.compile_share * ctx.time_left()
        rows, idx = [state_features], [0]
        patterns: list[Counter] = [Counter()]
        # the chosen first, then the rest in the graph network's order while time allows: it can
        # rank a rewrite low that the executable model sees (a dot's output layout)
        for i in [i for i in order if i in chosen] + [i for i in order if i not in chosen]:
            if time.perf_counter() > stop_at:
                break
            f = ctx.executable_features(children[i][1])
            if f is not None:
                rows.append(f)
                patterns.append(self._patterns(exp, children[i][0]))
                idx.append(i + 1)
        self.info["compiled"] = self.info.get("compiled", 0) + len(idx) - 1
        if len(idx) == 1:
            return None  # no time left to compile a child: the graph network's ranking stands
        s = self._exe_model().scores(np.stack(rows), patterns)
        out = np.full(len(children) + 1, np.inf)
        out[idx] = np.exp(s - s[0])
        return out

    def starts(self, ctx: SearchContext) -> Iterator[tuple[State, float]]:
        """First the states `blind_start` and `chain_start` found faster than the original,
        the fastest first; then `begin`'s state (the original, or the option screen's choice)."""
        start = self.begin(ctx)
        found = [s for s in (self.blind_start(ctx), self.chain_start(ctx)) if s is not None]
        yield from sorted(found, key=lambda s: s[1])
        yield start, self.start_ratio(ctx, start)

    def blind_start(self, ctx: SearchContext) -> tuple[State, float] | None:
        """The original's probes that touch `BLIND_OPS`, timed before anything is compiled for
        the models: the models cannot rank them, so they are timed anyway, and a slow program's
        compiles can use up a small budget before the greedy steps reach them. (state, ratio) of
        the fastest that measures faster than the original beyond noise, else None."""
        if self.probes <= 0 or ctx.out_of_time():
            return None
        exp = ctx.expand(ctx.root)
        if exp.augmented is None:
            return None  # no pattern matches
        g = observe.graph(exp.augmented, uids=False)
        best = None
        for vec in self._probe_vectors(exp, ctx):
            if ctx.out_of_time():
                break
            child = ctx.child(exp, vec) if self._blind(g, vec) else None
            if child is None or child.key == ctx.root.key or child.key in self._timed:
                continue
            self._timed.add(child.key)
            ev = ctx.evaluate(child)
            self.info["blind_first"] = self.info.get("blind_first", 0) + 1
            if ctx.improves(ev) and (best is None or ev.ratio < best[1]):
                best = (child, ev.ratio)
        return best

    def restart(self, ctx: SearchContext, stop: State, stop_ratio: float, seen: set) -> tuple[State, float] | None:
        """Once per stop: where greedy steps stop short of the original, the pick-first chain
        from there (`chain_from`; the original's is `chain_start`'s); where that finds nothing,
        the second look."""
        if stop.key in seen:
            return None
        found = None if stop.key == ctx.root.key else self.chain_from(ctx, stop, stop_ratio)
        return found if found is not None else self.second_look(ctx, stop, stop_ratio)

    def second_look(self, ctx: SearchContext, stop: State, stop_ratio: float) -> tuple[State, float] | None:
        """While time is left where greedy steps stopped: the next `second_looks` children the
        models rank best there and predict faster at all, not yet timed, are timed in order;
        (child, ratio) for the first that measures faster beyond noise, else None."""
        untimed = [child for _, child in self._ranked.get(stop.key, []) if child.key not in self._timed]
        for child in untimed[:self.second_looks]:
            if ctx.out_of_time():
                break
            self._timed.add(child.key)
            ev = ctx.evaluate(child)
            self.info["second_looks"] = self.info.get("second_looks", 0) + 1
            if ctx.improves(ev, stop_ratio):
                return child, ev.ratio
        return None

    def search(self, ctx: SearchContext):
        """`CostModel.search`, with what the second look needs reset."""
        self._ranked, self._timed = {}, set()
        return super().search(ctx)

    def chain_start(self, ctx: SearchContext) -> tuple[State, float] | None:
        """`chain_from` the original."""
        return self.chain_from(ctx, ctx.root, 1.0)

    def chain_from(self, ctx: SearchContext, start: State, start_ratio: float) -> tuple[State, float] | None:
        """The pick-first chain from `start`, compiled but not run: pick-first at every step
        until it stops or repeats a state (at most `ctx.max_steps` steps, `chain_share` of the
        time left). The executable model scores every state of it, and the best is timed if it
        is predicted faster than `start` by `min_predicted_gain`. (state, ratio) if it measures
        faster than `start_ratio` beyond noise, else None. Beam search times the whole chain;
        its best state is often several steps deep (a rewrite that pays only once a later one
        applies), which single greedy steps do not reach."""
        if self.compile_k <= 0 or self.chain_share <= 0 or ctx.out_of_time():
            return None
        start_features = ctx.executable_features(start)
        if start_features is None:
            return None
        stop_at = time.perf_counter() + self.chain_share * ctx.time_left()
        states, rows = [], [start_features]
        patterns: list[Counter] = [Counter()]
        previous = start
        for state in pick_first_states(ctx, start):
            f = ctx.executable_features(state)
            if f is None:
                break
            exp = ctx.expand(previous)  # cached: the walk expanded it
            states.append(state)
            rows.append(f)
            patterns.append(patterns[-1] + self._patterns(exp, pick_first_vector(exp.dims)))
            previous = state
            if time.perf_counter() > stop_at:
                break
        self.info["chain"] = self.info.get("chain", 0) + len(states)
        if not states:
            return None
        s = self._exe_model().scores(np.stack(rows), patterns)
        best = int(np.argmin(s[1:]))
        if math.exp(s[best + 1] - s[0]) >= 1 - self.min_predicted_gain:
            return None
        ev = ctx.evaluate(states[best])
        self.info["chain_timed"] = self.info.get("chain_timed", 0) + 1
        return (states[best], ev.ratio) if ctx.improves(ev, start_ratio) else None

    def _exe_model(self) -> exe_model.ExeModel:
        if self._exe is None:
            self._exe = self.executable_model.model()
        return self._exe

    def to_time(self, ctx: SearchContext, exp, children: list, ests: list[float],
                state_est: float) -> list[tuple[float, State]]:
        chosen = super().to_time(ctx, exp, children, ests, state_est)
        prior = self._prior if len(self._prior) == len(ests) else ests
        by_exe = self._by_exe if len(self._by_exe) == len(ests) else [False] * len(ests)
        by_vec = {tuple(vec): (e, p, x, child) for (vec, child), e, p, x in zip(children, ests, prior, by_exe)}
        g = self._graph if self._graph is not None else observe.graph(exp.augmented, uids=False)
        picked = {id(c) for _, c in chosen}
        for vec in self._probe_vectors(exp, ctx):
            found = by_vec.get(tuple(vec))
            if found is None or id(found[3]) in picked:
                continue
            est, prior_est, scored, child = found
            if self._worth_probing(ctx, est, prior_est, scored, state_est) or self._timed_anyway(g, vec, exp, ctx):
                picked.add(id(child))
                chosen.append((est, child))
                self.info["probes"] = self.info.get("probes", 0) + 1
        self._timed.update(c.key for _, c in chosen)
        return chosen
