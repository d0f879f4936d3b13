"""How a program is timed and how a search budget is split: one place to change either.

`TimingPolicy` is what every timing request takes (the worker, the in-process runner, the
evaluator, the bench); `Budget` is how `optimize_program` divides its wall-clock budget. The
worker timeout comes from `SHLO_ENV_TIMEOUT_S` (default 300 s) everywhere a worker is started.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace

DEFAULT_TIMEOUT_S = 300.0


def default_timeout() -> float:
    """Seconds one worker request may take before the worker is killed (`SHLO_ENV_TIMEOUT_S`)."""
    value = os.environ.get("SHLO_ENV_TIMEOUT_S", "")
    if not value:
        return DEFAULT_TIMEOUT_S
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError(f"SHLO_ENV_TIMEOUT_S must be a number of seconds, got {value!r}") from None
    if not seconds > 0:
        raise ValueError(f"SHLO_ENV_TIMEOUT_S must be positive, got {value!r}")
    return seconds


@dataclass(frozen=True)
class TimingPolicy:
    """Rounds of side-by-side timing (A, B, A, B...): `warmup` untimed rounds, then at least `runs`
    timed rounds, and more until `min_seconds` of measuring (at most `max_rounds`, default 100 x runs)."""

    runs: int = 10
    warmup: int = 3
    min_seconds: float = 0.0
    max_rounds: int | None = None  # default: 100 * runs

    def __post_init__(self):
        if self.runs < 1 or self.warmup < 0 or self.min_seconds < 0 or (self.max_rounds is not None and self.max_rounds < self.runs):
            raise ValueError(f"invalid timing policy {self}")

    def with_(self, **changes) -> "TimingPolicy":
        return replace(self, **changes)


# Quick measurements (unit tests, Env.time) and the search's measurements (which extend the
# rounds to 0.2 s so that a 60 us program is not decided on ten samples of a shared machine).
QUICK = TimingPolicy()
SEARCH = TimingPolicy(min_seconds=0.2)


@dataclass(frozen=True)
class Budget:
    """How `optimize_program` splits `total_s` of wall clock: the noise measurement may take
    `noise` of it, the search stops at `search`, no worker request runs past `hard`; confirming
    the winner and the final measurement use what is left (and always run)."""

    total_s: float = 60.0
    noise: float = 0.1
    search: float = 0.75
    hard: float = 0.85

    def __post_init__(self):
        if not self.total_s > 0:
            raise ValueError(f"budget must be positive, got {self.total_s!r} s")
        if not 0 <= self.noise <= self.search <= self.hard <= 1:
            raise ValueError(f"budget fractions must satisfy 0 <= noise <= search <= hard <= 1: {self}")

    @property
    def noise_s(self) -> float:
        return self.noise * self.total_s

    def search_deadline(self, start: float) -> float:
        """`time.perf_counter()` value at which the search stops proposing candidates."""
        return start + self.search * self.total_s

    def hard_deadline(self, start: float) -> float:
        """`time.perf_counter()` value past which no worker request may run."""
        return start + self.hard * self.total_s

    def left(self, start: float) -> float:
        return max(0.0, start + self.total_s - time.perf_counter())
