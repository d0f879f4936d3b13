"""Rankers: a predicted runtime ratio, with an uncertainty, for each child of a state.

A *ranker* has one method, `rank(ctx, exp, children) -> list[Prediction]`: for each
(vector, child state) pair of the expansion `exp`, the child's predicted runtime ratio to the
parent state and the uncertainty of that prediction (a log-ratio band; `math.inf`: unbounded).
Rankers compile at most (no run); what they predict is acted on by the one acquisition rule
(`shlo_env.search.acquisition`).

    CostAnalysis     XLA's cost analysis through a roofline (flops, transcendentals, bytes)
    GraphNetwork     the learned graph model (`shlo_env.learn.model`), no compile
    ExecutableModel  the learned model of XLA's optimized HLO (`shlo_env.learn.exe_model`)
    Cascade          a cheap ranker for every child, a costly one again on the best

Both learned rankers read one `learn.model.LearnedModel` (load, predict, uncertainty). A
static graph counts a loop body once and a window once: a child that rewrites a `while` or a
`reduce_window` (`touches_blind_ops`) gets unbounded uncertainty from `GraphNetwork`, so the
acquisition rule times it first.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import Counter
from typing import TYPE_CHECKING, Protocol

import numpy as np

from shlo_env.learn import observe
from shlo_env.measure.roofline import cost_seconds
from shlo_env.search.schedule import Schedule

if TYPE_CHECKING:
    from shlo_env.search.base import Expansion, SearchContext, State

# ops whose cost depends on how often or over what window they run, which the static graph omits
BLIND_OPS = frozenset({"stablehlo.while", "stablehlo.reduce_window"})

# (flops/s, transcendentals/s, bytes/s): rough orders of magnitude for one CPU socket / one GPU.
MACHINE = {
    "cpu": (5e10, 5e9, 2e10),
    "gpu": (5e13, 5e12, 2e12),
}


@dataclasses.dataclass(frozen=True)
class Prediction:
    """A child's predicted runtime ratio to its parent (inf: no estimate) and the log-ratio
    band around it (inf: unbounded, the ranker cannot see what the rewrite changes)."""

    ratio: float
    uncertainty: float = 0.0


class Ranker(Protocol):
    def rank(self, ctx: SearchContext, exp: Expansion, children: list[tuple[list[int], State]]) -> list[Prediction]:
        """One prediction per (vector, child) pair, in order."""
        ...


def roofline(cost: dict, machine: tuple[float, float, float]) -> float:
    """Estimated seconds from a cost analysis (`roofline.cost_seconds`); inf, ranked last, when
    there is no estimate (XLA rejected the program)."""
    flops, trans, bw = machine
    seconds = cost_seconds(cost, flops, bw, transcendentals_per_s=trans)
    return math.inf if seconds is None else seconds


class CostAnalysis:
    """XLA's cost analysis of each child (one compile, no run) through a roofline. The machine
    constants default per platform; only their ratios matter for the ranking. `uncertainty`:
    the band given to every prediction (the roofline is rough)."""

    def __init__(self, machine: tuple[float, float, float] | None = None, uncertainty: float = 0.0):
        self.machine = machine
        self.uncertainty = uncertainty

    def _machine(self) -> tuple[float, float, float]:
        if self.machine is not None:
            return self.machine
        from shlo_env.execute import runtime

        return MACHINE["cpu" if runtime.platform() == "cpu" else "gpu"]

    def rank(self, ctx: SearchContext, exp: Expansion, children: list[tuple[list[int], State]]) -> list[Prediction]:
        machine = self._machine()
        parent = roofline(ctx.cost(exp.state), machine)
        out = []
        for _, child in children:
            est = math.inf if ctx.out_of_time() else roofline(ctx.cost(child), machine)
            out.append(Prediction(est / parent if parent > 0 else math.inf, self.uncertainty))
        return out


def touches_blind_ops(g: observe.Graph, vec: list[int]) -> bool:
    """Whether the vector replaces or introduces a `BLIND_OPS` op: one in a taken choice's
    region or in the original region of its alternatives op, or an original root that region 0
    yields from outside it (a matched root stays in the main body)."""
    blind = np.isin(g.node_opcode, [observe.op_id(name) for name in BLIND_OPS])
    taken = {a for a, c in enumerate(vec[:g.num_alternatives]) if c}
    for i in np.nonzero(blind & (g.node_alt >= 0))[0]:
        a = int(g.node_alt[i])
        if a in taken and int(g.node_choice[i]) in (0, vec[a]):
            return True
    alternative_of = {int(node): a for a, node in enumerate(g.alternative_indices)}
    roots = np.nonzero((g.edge_choice == 0) & blind[g.edge_src])[0]
    return any(alternative_of.get(int(g.edge_dst[e])) in taken for e in roots)


def is_direct(ctx: SearchContext, exp: Expansion, vec, child: State) -> bool:
    """Whether `child` is the state `vec` leads to in one step (not a state further along a
    chain, `sources.pick_first_chain`)."""
    return ctx.child(exp, vec) is child


def patterns_taken(ctx: SearchContext, exp: Expansion, vec, child: State) -> Counter:
    """The rewrite patterns `child` takes beyond the state `exp` expands (the executable
    model's pattern columns; the state's own are 0, as they cancel): the vector's for a
    direct child, the applied rewrites added since the state for one further along a chain."""
    if is_direct(ctx, exp, vec, child):
        return step_patterns(exp, vec)
    return Counter(child.program.applied) - Counter(exp.state.program.applied)


def step_patterns(exp: Expansion, vec) -> Counter:
    """The rewrite patterns a decision vector takes in the state `exp` expands."""
    from shlo_env.learn import exe_model

    return exe_model.step_patterns([d.labels[c] for d, c in zip(exp.dims, vec) if c and d.kind == "rewrite"])


class LearnedRanker:
    """A ranker over one learned model (`learn.model.LearnedModel`): `weights` None for those
    shipped in the package; the band is `uncertainty` if given, else the model's own error."""

    def __init__(self, weights=None, uncertainty: float | None = None):
        self.weights = weights
        self.uncertainty = uncertainty
        self._model = None

    def model_class(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def model(self):
        if self._model is None:
            cls = self.model_class()
            self._model = cls.shipped() if self.weights is None else cls.load(self.weights)
        return self._model

    def band(self) -> float:
        return self.uncertainty if self.uncertainty is not None else self.model().uncertainty()


class GraphNetwork(LearnedRanker):
    """The learned graph model over the augmented program (no compile); band: the weights'
    validation error, unbounded for `touches_blind_ops`. Rewrite decisions of one step only:
    a vector that takes an XLA action, or a state further along a chain, gets no estimate.
    `corrected=False`: the readout's bytes roofline without the learned correction."""

    def __init__(self, weights=None, uncertainty: float | None = None, corrected: bool = True):
        super().__init__(weights, uncertainty)
        self.corrected = corrected
        self._last: tuple | None = None

    def model_class(self):
        from shlo_env.learn import model

        return model.GraphModel

    def rank(self, ctx: SearchContext, exp: Expansion, children: list[tuple[list[int], State]]) -> list[Prediction]:
        states = [c for _, c in children]
        last = self._last  # (exp, states, predictions): a cascade ranks the same children again, or more
        done = 0 if last is None or last[0] is not exp or len(last[1]) > len(states) or any(
            a is not b for a, b in zip(last[1], states)) else len(last[1])
        out = (last[2][:done] if last is not None and done else []) + self._rank(ctx, exp, children[done:])
        self._last = (exp, states, out)
        return out

    def _rank(self, ctx: SearchContext, exp: Expansion, children: list[tuple[list[int], State]]) -> list[Prediction]:
        if exp.augmented is None or not children:
            return [Prediction(math.inf) for _ in children]
        seen = [i for i, (vec, child) in enumerate(children)
                if not any(vec[exp.num_rewrites:]) and is_direct(ctx, exp, vec, child)]
        out = [Prediction(math.inf)] * len(children)
        if not seen:
            return out
        g = observe.graph(exp.augmented, uids=False)
        vectors = [[0] * exp.num_rewrites] + [list(children[i][0][:exp.num_rewrites]) for i in seen]
        band = self.band()
        for i, r in zip(seen, self.model().ratios(g, vectors, self.corrected)):
            out[i] = Prediction(float(r), math.inf if touches_blind_ops(g, children[i][0]) else band)
        return out


class ExecutableModel(LearnedRanker):
    """The learned model of XLA's optimized HLO (`learn.hlo_features`; one compile per child,
    no run): it reads trip counts and XLA actions, so its band (the weights'
    `cv_log_error_median`) holds for loop rewrites too. A child that does not compile, or
    that `only` leaves out, gets no estimate; compiling stops at the perf_counter `until`."""

    def model_class(self):
        from shlo_env.learn import exe_model

        return exe_model.ExeModel

    def rank(self, ctx: SearchContext, exp: Expansion, children: list[tuple[list[int], State]],
             only: list[int] | None = None, until: float = math.inf) -> list[Prediction]:
        out = [Prediction(math.inf)] * len(children)
        parent = None if only == [] else ctx.executable_features(exp.state)
        if parent is None:
            return out
        rows, idx = [parent], []
        patterns: list[Counter] = [Counter()]
        for i in (range(len(children)) if only is None else only):
            if ctx.out_of_time() or time.perf_counter() > until:
                break
            vec, child = children[i]
            f = ctx.executable_features(child)
            if f is not None:
                rows.append(f)
                patterns.append(patterns_taken(ctx, exp, vec, child))
                idx.append(i)
        if not idx:
            return out
        band = self.band()
        for i, r in zip(idx, self.model().ratios(np.stack(rows), patterns)):
            out[i] = Prediction(float(r), band)
        return out


class Cascade:
    """Two rankers, cheapest first: `first` ranks every child; `then` (an `ExecutableModel`)
    ranks again, by compiling, the `k` children `first` ranks best, then those `first` has no
    estimate for (a chain's deeper states), then the rest in `first`'s order, until
    `Schedule.compile_rank_s` of the time left is spent (compiles must not eat the budget the timings need). Children
    with unbounded uncertainty are left to `first` (the acquisition rule times them anyway:
    nothing to compile for). Where `then` ranked, its prediction stands; other children get
    none. If `then` ranked nothing (the state does not compile, no time), `first`'s stand."""

    def __init__(self, first: GraphNetwork, then: ExecutableModel, k: int = 4):
        self.first, self.then, self.k = first, then, k
        self.compiled = 0

    def rank(self, ctx: SearchContext, exp: Expansion, children: list[tuple[list[int], State]]) -> list[Prediction]:
        cheap = self.first.rank(ctx, exp, children)
        if self.k <= 0 or not children:
            return cheap
        seen = [i for i, p in enumerate(cheap) if not math.isinf(p.uncertainty)]
        ranked = sorted((i for i in seen if math.isfinite(cheap[i].ratio)), key=lambda i: cheap[i].ratio)
        blank = [i for i in seen if not math.isfinite(cheap[i].ratio)]
        order = ranked[:self.k] + blank + ranked[self.k:]
        until = time.perf_counter() + Schedule.compile_rank_s(ctx.time_left())
        costly = self.then.rank(ctx, exp, children, only=order, until=until)
        scored = [i for i, p in enumerate(costly) if math.isfinite(p.ratio)]
        self.compiled += len(scored)
        if not scored:
            return cheap
        return [cheap[i] if math.isinf(cheap[i].uncertainty) else costly[i] for i in range(len(children))]


__all__ = ["BLIND_OPS", "Cascade", "CostAnalysis", "ExecutableModel", "GraphNetwork", "LearnedRanker", "MACHINE",
           "Prediction", "Ranker", "is_direct", "patterns_taken", "roofline", "step_patterns", "touches_blind_ops"]
