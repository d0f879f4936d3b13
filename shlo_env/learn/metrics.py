"""Ranking quality within one program, as in TpuGraphs: Kendall tau and ordered-pair accuracy.

Scores are "lower is faster" predictions; truths are measured ratios. Per-program metrics are
averaged over programs that have at least two candidates with different measured ratios.

The measured ratios carry timing noise (docs/learned.md measures it), so besides Kendall's
tau-b over all candidates (ties and noise-sized differences included) the metrics are also
given over the pairs whose measured log ratios differ by more than the noise: `opa` (the
fraction such pairs the prediction orders right) and `tau_above_noise` = 2 OPA - 1 (Kendall's
tau restricted to those pairs). The latter is the headline: a pair whose order a second
measurement could flip is not a ranking error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

MIN_GAP = 0.02  # smallest log-ratio difference counted as an order when the noise is unknown


def kendall_tau(pred: np.ndarray, truth: np.ndarray) -> float:
    """Kendall's tau-b (ties allowed); 0.0 when the prediction is constant, NaN when the truth is."""
    from scipy.stats import kendalltau

    if len(np.unique(truth)) < 2:
        return math.nan
    if len(np.unique(pred)) < 2:
        return 0.0
    return float(kendalltau(pred, truth).statistic)


def opa(pred: np.ndarray, truth: np.ndarray, min_gap: float = MIN_GAP) -> float:
    """Ordered-pair accuracy over pairs whose log ratios differ by more than `min_gap`
    (a tie in the prediction counts half); NaN without such pairs."""
    logt = np.log(truth)
    good, total = 0.0, 0
    for i in range(len(pred)):
        for j in range(len(pred)):
            if logt[i] + min_gap < logt[j]:
                total += 1
                good += 1.0 if pred[i] < pred[j] else 0.5 if pred[i] == pred[j] else 0.0
    return good / total if total else math.nan


def noise_gap(noise: float) -> float:
    """The log-ratio gap a pair must exceed to count as ordered, from a program's measured
    noise (median |1 - ratio| of its original timed against itself); MIN_GAP when unknown."""
    return max(MIN_GAP, math.log1p(noise)) if math.isfinite(noise) else MIN_GAP


def per_program(scores_by_program: list[tuple[np.ndarray, np.ndarray]], min_gap: float | Sequence[float] = MIN_GAP) -> dict:
    """Mean tau-b, OPA and tau above noise over programs (NaN entries skipped), and how many
    programs counted for each. `min_gap` is one gap or one per program."""
    gaps = [min_gap] * len(scores_by_program) if isinstance(min_gap, (int, float)) else list(min_gap)
    taus = [kendall_tau(p, t) for p, t in scores_by_program]
    opas = [opa(p, t, g) for (p, t), g in zip(scores_by_program, gaps)]
    taus = [t for t in taus if not math.isnan(t)]
    opas = [o for o in opas if not math.isnan(o)]
    mean_opa = float(np.mean(opas)) if opas else math.nan
    return {"kendall_tau": float(np.mean(taus)) if taus else math.nan, "programs": len(taus),
            "opa": mean_opa, "tau_above_noise": 2 * mean_opa - 1, "programs_above_noise": len(opas)}
