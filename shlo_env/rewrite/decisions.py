"""The one pick-first rule (the HloEnv paper's baseline heuristic), on choice counts alone.

A decision picks one choice per alternatives op; choice 0 keeps the original. Pick-first takes
choice 1 (the first rewrite) wherever there is one. `driver.pick_first` (Algorithm 1's policy),
the search's `pick_first_vector` (over decision dimensions, XLA toggles left alone) and the
learned policy's baseline agent (over an action mask) all call `pick_first` here, so the rule
lives in one place. This module imports nothing of the package (the facts floor).
"""

from __future__ import annotations

from collections.abc import Iterable


def pick_first(num_choices: Iterable[int]) -> list[int]:
    """Choice 1 wherever a decision has more than one choice, else 0 (keep the original)."""
    return [1 if int(n) > 1 else 0 for n in num_choices]


__all__ = ["pick_first"]
