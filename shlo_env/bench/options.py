"""What a sweep takes, and the error it raises for bad input."""

from __future__ import annotations

QUICK_SUITE = ("examples", "corpus")
QUICK_BUDGET_S = 8.0
DEFAULT_STRATEGY = "auto"


class BenchError(ValueError):
    """A sweep that cannot run as asked (an unknown strategy, ...): nothing was measured.
    Library code raises it; `shlo-env bench` prints it and exits with status 2."""
