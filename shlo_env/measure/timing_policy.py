"""How a program is timed: one place to change it.

`TimingPolicy` is what every timing request takes (the worker, the in-process runner, the
evaluator, the bench); how a search's budget is split is `shlo_env.search.schedule`'s. The
worker timeout comes from `SHLO_ENV_TIMEOUT_S` (default 300 s) everywhere a worker is started.
"""
from __future__ import annotations

import os
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
# A returned rewrite's final ratio is the median of this many SEARCH timings side by side; the
# bench judges it by the noise profile's medians of as many self-timings (`NoiseModel.thresholds`).
FINAL_TIMINGS = 3


def policy_seconds(policy: TimingPolicy, call_s: float, programs: int = 2) -> float:
    """Seconds one timing of `programs` side by side takes under `policy` (lower bound: each
    program runs warmup + max(runs, min_seconds) calls of `call_s`)."""
    timed = max(policy.runs * programs * call_s, policy.min_seconds)
    return policy.warmup * programs * call_s + timed
