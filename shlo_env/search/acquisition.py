"""The one acquisition rule: which ranked candidates are worth a timing.

A ranker (`shlo_env.search.rankers`) predicts each child's runtime ratio to its parent with an
uncertainty u (a log-ratio band: the truth is believed to lie within ratio * exp(+-u)). A
timing can only pay if the child then passes the acceptance rule (`noise_model.accepts`: a
ratio below `threshold`), so a child is timed when its *optimistic bound*, ratio * exp(-u),
is below the threshold. Unbounded uncertainty (u = inf: a rewrite of a loop's trip count or a
window, which a static graph cannot see) always qualifies; no estimate (ratio = inf) never
does, unless unbounded.

`pick` orders the qualifying children by their optimistic bound (then by predicted ratio) and
keeps the first `top_k`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from shlo_env.search.rankers import Prediction


def optimistic(p: Prediction) -> float:
    """The lowest ratio the prediction allows: ratio * exp(-uncertainty) (0 when unbounded)."""
    if math.isinf(p.uncertainty):
        return 0.0
    return p.ratio * math.exp(-p.uncertainty)


def worth_timing(p: Prediction, threshold: float) -> bool:
    """Whether the child's optimistic bound can clear the acceptance threshold."""
    return optimistic(p) < threshold


def pick(predictions: Sequence[Prediction], threshold: float, top_k: int | None = None) -> list[int]:
    """Indices of the predictions worth timing, most promising first, at most `top_k`."""
    order = sorted((i for i, p in enumerate(predictions) if worth_timing(p, threshold)),
                   key=lambda i: (optimistic(predictions[i]), predictions[i].ratio))
    return order if top_k is None else order[:top_k]


__all__ = ["optimistic", "pick", "worth_timing"]
