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
# A returned rewrite's final ratio is the median of this many SEARCH timings side by side; the
# bench judges it by the noise profile's medians of as many self-timings (`NoiseModel.thresholds`).
FINAL_TIMINGS = 3


@dataclass(frozen=True)
class Budget:
    """How `optimize_program` splits `total_s` of wall clock: the noise measurement may take
    `noise` of it, the search stops at `search` (earlier, to keep `reserve_s` for confirming the
    winner and the final measurement), no worker request runs past `hard` during the search,
    and nothing runs past `total_s`: a step that does not fit is cut and the report says so."""

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

    def deadline(self, start: float) -> float:
        """`time.perf_counter()` value at which the whole budget is spent."""
        return start + self.total_s

    # --- scaled to the program's measured call time (issue 31 item 2) ----------------------
    # A fixed policy (3 warmup + 10 timed rounds of two calls, three noise repeats, four input
    # sets) costs 26 calls per pair timing: 100 s for a 4 s call. These size each phase from
    # the original's call time `call_s` so that it takes a bounded share of the budget; each
    # returns what it cut ("" when nothing), for the report.
    pair_share: float = 0.05  # one side-by-side timing of two programs
    verify_share: float = 0.05  # the original's runs on all the input sets
    augment_share: float = 0.1  # matching the patterns on the original (`driver.augment`)

    def pair_policy(self, policy: TimingPolicy, call_s: float) -> tuple[TimingPolicy, str]:
        """`policy`, with fewer rounds where one pair timing would take more than `pair_share`
        of the budget: at least 2 timed rounds, no `min_seconds` padding, and no warmup (every
        program timed has run before: the original in the probe, a candidate in verification)."""
        if not call_s > 0 or policy_seconds(policy, call_s) <= self.pair_share * self.total_s:
            return policy, ""
        rounds = int(self.pair_share * self.total_s / (2 * call_s))
        warmup = 0
        runs = max(2, min(policy.runs, rounds - warmup))
        cut = policy.with_(warmup=warmup, runs=runs, min_seconds=0.0, max_rounds=runs)
        return cut, (f"timing: {warmup} warmup + {runs} timed rounds per pair instead of {policy.warmup} + "
                     f"{policy.runs} (a call takes {call_s:.2f} s)")

    def random_sets(self, num_random: int, call_s: float, examples: int = 0) -> tuple[int, str]:
        """How many of `num_random` random input sets to verify on, so that running the original
        on all of them takes at most `verify_share` of the budget (at least 1 set in all)."""
        if not call_s > 0 or num_random <= 0:
            return num_random, ""
        fit = int(self.verify_share * self.total_s / call_s) - examples
        keep = max(0 if examples else 1, min(num_random, fit))
        if keep >= num_random:
            return num_random, ""
        return keep, (f"verification: {keep} random input set{'s' if keep != 1 else ''} instead of {num_random} "
                      f"(a call takes {call_s:.2f} s)")

    def reserve_s(self, pair_s: float) -> float:
        """Seconds kept after the search for confirming the winner and the final measurement
        (two pair timings and a margin), at most a quarter of the budget."""
        return min(0.25 * self.total_s, 2.5 * pair_s)


def policy_seconds(policy: TimingPolicy, call_s: float, programs: int = 2) -> float:
    """Seconds one timing of `programs` side by side takes under `policy` (lower bound: each
    program runs warmup + max(runs, min_seconds) calls of `call_s`)."""
    timed = max(policy.runs * programs * call_s, policy.min_seconds)
    return policy.warmup * programs * call_s + timed
