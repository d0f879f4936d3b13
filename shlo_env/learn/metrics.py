"""Ranking quality within one program, as in TpuGraphs: Kendall tau and ordered-pair accuracy.

Scores are "lower is faster" predictions; truths are measured ratios. Per-program metrics are
averaged over programs that have at least two candidates with different measured ratios.
"""

from __future__ import annotations

import math

import numpy as np


def kendall_tau(pred: np.ndarray, truth: np.ndarray) -> float:
    """Kendall's tau-b (ties allowed); 0.0 when the prediction is constant, NaN when the truth is."""
    from scipy.stats import kendalltau

    if len(np.unique(truth)) < 2:
        return math.nan
    if len(np.unique(pred)) < 2:
        return 0.0
    return float(kendalltau(pred, truth).statistic)


def opa(pred: np.ndarray, truth: np.ndarray, min_gap: float = 0.02) -> float:
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


def per_program(scores_by_program: list[tuple[np.ndarray, np.ndarray]], min_gap: float = 0.02) -> dict:
    """Mean tau and OPA over programs (NaN entries skipped) and how many programs counted."""
    taus = [kendall_tau(p, t) for p, t in scores_by_program]
    opas = [opa(p, t, min_gap) for p, t in scores_by_program]
    taus = [t for t in taus if not math.isnan(t)]
    opas = [o for o in opas if not math.isnan(o)]
    return {"kendall_tau": float(np.mean(taus)) if taus else math.nan,
            "opa": float(np.mean(opas)) if opas else math.nan,
            "programs": len(taus)}
