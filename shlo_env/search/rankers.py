"""Rankers: a predicted runtime ratio, with an uncertainty, for each child of a state.

A *ranker* has one method, `rank(ctx, exp, children) -> list[Prediction]`: for each
(vector, child state) pair of the expansion `exp`, the child's predicted runtime ratio to the
parent state and the uncertainty of that prediction (a log-ratio band; `math.inf`: unbounded).
Rankers compile at most (no run); what they predict is acted on by the one acquisition rule
(`shlo_env.search.acquisition`).

    CostAnalysis     XLA's cost analysis through a roofline (flops, transcendentals, bytes)
    GraphNetwork     the learned graph model (`shlo_env.learn.model`), no compile
    ExecutableModel  the learned model of XLA's optimized HLO (`shlo_env.learn.exe_model`)

A static graph counts a loop body once and a window once: a child that rewrites a `while` or a
`reduce_window` (`touches_blind_ops`) gets unbounded uncertainty from the learned rankers, so
the acquisition rule always lets it be timed.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from typing import TYPE_CHECKING, Protocol

import numpy as np

from shlo_env import observe
from shlo_env.roofline import cost_seconds

if TYPE_CHECKING:
    from shlo_env.search.base import Expansion, SearchContext, State

# ops whose cost depends on how often or over what window they run, which the static graph omits
BLIND_OPS = frozenset({"stablehlo.while", "stablehlo.reduce_window"})
DEFAULT_UNSURE = 0.25  # log-ratio band when a learned model's weights record no validation error

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
        from shlo_env import runtime

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


class GraphNetwork:
    """The learned graph model over the augmented program (no compile): exp(score - score of
    the parent) is the predicted ratio; the band is the weights' validation error
    (`val_log_error_median`), unbounded for `touches_blind_ops`. Rewrite decisions only: a
    vector that takes an XLA action gets no estimate. `corrected=False`: the readout's bytes
    roofline without the learned correction (the model's prior)."""

    def __init__(self, weights=None, uncertainty: float | None = None, corrected: bool = True):
        self.weights = weights
        self.uncertainty = uncertainty
        self.corrected = corrected
        self._model: tuple | None = None

    def state(self) -> tuple:
        from shlo_env.learn import model

        if self._model is None:
            self._model = model.load(self.weights)
        return self._model

    def band(self) -> float:
        if self.uncertainty is not None:
            return self.uncertainty
        return float(self.state()[2].get("val_log_error_median", DEFAULT_UNSURE))

    def rank(self, ctx: SearchContext, exp: Expansion, children: list[tuple[list[int], State]]) -> list[Prediction]:
        from shlo_env.learn import model

        if exp.augmented is None or not children:
            return [Prediction(math.inf) for _ in children]
        g = observe.graph(exp.augmented, uids=False)
        vectors = [[0] * exp.num_rewrites] + [list(vec[:exp.num_rewrites]) for vec, _ in children]
        s = model.predicted_scores(g, vectors, self.state(), corrected=self.corrected)
        band = self.band()
        return [Prediction(math.inf) if any(vec[exp.num_rewrites:]) else
                Prediction(float(np.exp(score - s[0])), math.inf if touches_blind_ops(g, vec) else band)
                for (vec, _), score in zip(children, s[1:])]


def step_patterns(exp: Expansion, vec) -> Counter:
    """The rewrite patterns a decision vector takes in the state `exp` expands (the executable
    model's pattern columns; the state's own are 0, as they cancel)."""
    from shlo_env.learn import exe_model

    return exe_model.step_patterns([d.labels[c] for d, c in zip(exp.dims, vec) if c and d.kind == "rewrite"])


class ExecutableModel:
    """The learned model of XLA's optimized HLO (`learn.hlo_features`; one compile per child,
    no run): it reads trip counts, so its band (the weights' `cv_log_error_median`) holds for
    loop rewrites too. A child that does not compile gets no estimate."""

    def __init__(self, weights=None, uncertainty: float | None = None):
        self.weights = weights
        self.uncertainty = uncertainty
        self._exe = None

    def model(self):
        from shlo_env.learn import exe_model

        if self._exe is None:
            self._exe = exe_model.shipped() if self.weights is None else exe_model.load(self.weights)
        return self._exe

    def band(self) -> float:
        if self.uncertainty is not None:
            return self.uncertainty
        value = self.model().info.get("cv_log_error_median")
        return float(value) if value is not None else DEFAULT_UNSURE

    def rank(self, ctx: SearchContext, exp: Expansion, children: list[tuple[list[int], State]]) -> list[Prediction]:
        parent = ctx.executable_features(exp.state)
        out = [Prediction(math.inf)] * len(children)
        if parent is None:
            return out
        rows, idx = [parent], []
        patterns: list[Counter] = [Counter()]
        for i, (vec, child) in enumerate(children):
            f = None if ctx.out_of_time() else ctx.executable_features(child)
            if f is not None:
                rows.append(f)
                patterns.append(step_patterns(exp, vec))
                idx.append(i)
        if not idx:
            return out
        s = self.model().scores(np.stack(rows), patterns)
        band = self.band()
        for i, score in zip(idx, s[1:]):
            out[i] = Prediction(float(np.exp(score - s[0])), band)
        return out


__all__ = ["BLIND_OPS", "CostAnalysis", "ExecutableModel", "GraphNetwork", "MACHINE", "Prediction", "Ranker",
           "roofline", "step_patterns", "touches_blind_ops"]
