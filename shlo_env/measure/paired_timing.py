"""Time A against B until the sequential test decides: `time_until_decided`.

The driver of `shlo_env.measure.sequential_test` (read its module doc for the statistics). It asks a runner
(`shlo_env.execute.runners`: the worker, or in process) for side-by-side timings in chunks, through the
ordinary `time_each` request with an exact number of rounds, alternating the order of the two
programs from one request to the next ([A, B], then [B, A]), cuts each request's interleaved run
times into blocks of a few rounds, and feeds the counterbalanced block log-ratios to the test,
until it decides or the time allowed is spent (undecided: not accepted).

    from shlo_env.measure.paired_timing import time_until_decided
    res = time_until_decided(worker, original_text, candidate_text, "inputs", allowance_s=3.0)
    if res.accepted: ...      # res.ratio, res.upper (the bound), res.pairs, res.seconds

Both programs are compiled by the runner (cached by text, so a candidate already compiled for
verification is not compiled again); the allowance counts from the call, compiles included.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from shlo_env.execute.runners import Runner
from shlo_env.execute.runtime import Timing
from shlo_env.measure.sequential_test import (Decision, SequentialRatioTest, SequentialResult, block_log_ratios,
                                 counterbalanced)
from shlo_env.measure.timing_policy import TimingPolicy

# rounds per block: at least, at most. One round a block (a slow program: tens of ms a call)
# still gives symmetric observations under B = A; it only loses the percentile's robustness.
ROUNDS = (1, 16)
TARGET_LOOK = 4  # blocks are sized so that the allowance reaches this look (0-based: 41 observations)
OVERHEAD = 1.25  # wall clock of a request over its timed runs (warm-up round, round trip)
REQUEST_S = 0.1  # a timing request lasts about this long (fewer round trips to the worker)


class _HasText(Protocol):
    def text(self) -> str: ...


@dataclasses.dataclass(frozen=True)
class PairedTiming:
    """What `time_until_decided` found. Ratios are T(B)/T(A) (below 1: B is faster).

    `decision`: accept / reject / undecided (`shlo_env.measure.sequential_test.Decision`); `ratio`: the
    estimate; `lower`, `upper`: the last look's confidence bounds (each one-sided at level
    alpha / looks; NaN when no look was reached); `pairs`: interleaved (A, B) rounds timed,
    warm-ups left out; `observations`: counterbalanced block log-ratios fed to the test;
    `requests`: timing requests sent; `seconds`: wall clock of the call; `time_a_s`,
    `time_b_s`: the 10th percentile of all of A's and B's runs; `block_rounds`: rounds a block."""

    decision: Decision
    ratio: float
    lower: float
    upper: float
    pairs: int
    observations: int
    requests: int
    seconds: float
    time_a_s: float
    time_b_s: float
    block_rounds: int
    test: SequentialResult

    @property
    def accepted(self) -> bool:
        return self.decision is Decision.ACCEPT

    def describe(self) -> str:
        return (f"{self.decision}: ratio {self.ratio:.4f} (bounds {self.lower:.4f} .. {self.upper:.4f}), "
                f"{self.pairs} pairs in {self.requests} requests, {self.seconds:.2f} s")


def _text(program: str | _HasText) -> str:
    return program if isinstance(program, str) else program.text()


def _runs(t: Timing) -> list[float]:
    """A timing's per-run times; a runner that reports none gives its one time."""
    return list(t.samples) if t.samples else [t.full]


def seconds_to_look(round_s: float, test: SequentialRatioTest, look: int = 0, rounds: int = 1) -> float:
    """Seconds of interleaved timing before `test` takes its look `look` (0-based) when one
    (A, B) round takes `round_s` and a block holds `rounds` rounds: a lower bound (no load),
    plus one probe request."""
    observations = test.schedule[min(look, test.looks - 1)]
    return 2 * observations * rounds * round_s * OVERHEAD + REQUEST_S


def block_rounds_for(round_s: float, allowance_s: float, test: SequentialRatioTest) -> int:
    """Rounds per block when one (A, B) round takes `round_s` seconds: as many as let the
    allowance reach the test's look `TARGET_LOOK` (the last look when it has fewer), within
    `ROUNDS`. The 10th percentile of a larger block is a steadier number (run times are
    right-skewed: the fast end is the program's own speed), while a look needs its count of
    blocks: slow programs (or a loaded machine) get small blocks, fast ones large blocks."""
    if not round_s > 0 or not math.isfinite(round_s):
        return ROUNDS[1]
    schedule = test.schedule
    observations = schedule[min(TARGET_LOOK, len(schedule) - 1)]
    fit = allowance_s / (2 * observations * round_s * OVERHEAD)  # two blocks an observation
    return int(min(ROUNDS[1], max(ROUNDS[0], fit)))


def time_until_decided(runner: Runner, a: str | _HasText, b: str | _HasText, input_key: str,
                       allowance_s: float, *, test: SequentialRatioTest | None = None,
                       passes_a: Sequence[str] = (), passes_b: Sequence[str] = (),
                       block_rounds: int | None = None, request_s: float = REQUEST_S, warmup: int = 1,
                       timeout_s: float | None = None) -> PairedTiming:
    """Time B against A (StableHLO text, or Programs) side by side on input set `input_key`
    until `test` (default `SequentialRatioTest()`: alpha 1 %, min gain 1 %) decides, or
    `allowance_s` seconds have passed since the call (no request is started that would end
    past it, by the last pair of requests' duration); returns a `PairedTiming`.

    `passes_a`/`passes_b`: each program's disabled XLA passes or option actions (as
    `Runner.time_each` takes them); `block_rounds`: rounds per block (default: by the time of a
    round and the allowance left after the first request, `block_rounds_for`); `request_s`: the length of one timing request; `warmup`: untimed
    rounds at the start of each request (after the order switch). A failing request raises
    the runner's `CandidateError`."""
    if not allowance_s > 0:
        raise ValueError(f"allowance_s must be positive, got {allowance_s!r}")
    if block_rounds is not None and block_rounds < 1:
        raise ValueError(f"block_rounds must be >= 1, got {block_rounds!r}")
    start = time.perf_counter()
    test = test if test is not None else SequentialRatioTest()
    item_a, item_b = (_text(a), tuple(passes_a)), (_text(b), tuple(passes_b))

    def request(items, rounds: int, warm: int):
        policy = TimingPolicy(runs=rounds, warmup=warm, min_seconds=0.0, max_rounds=rounds)
        return runner.time_each(items, input_key, policy, timeout_s=timeout_s)

    # A first short request compiles both (when not cached) and gives the time of a round.
    probe = request([item_a, item_b], 3, 1)
    requests = 1
    # a runner that reports no per-run times (a model of one) gives one value a request: one block
    per_run = bool(probe[0].samples) and bool(probe[1].samples)
    run_s = (float(np.median(np.asarray(probe[0].samples) + np.asarray(probe[1].samples))) if per_run
             else probe[0].full + probe[1].full)
    rounds = block_rounds or (block_rounds_for(run_s, allowance_s - (time.perf_counter() - start), test)
                              if per_run else 1)
    # a round longer than a request: the previous request warmed the caches, and an untimed
    # round would double the cost of each block
    warmup = warmup if run_s < request_s else 0
    all_a: list[float] = []
    all_b: list[float] = []
    last_pair_s = 0.0
    while not test.done:
        if time.perf_counter() - start + max(last_pair_s, 2 * (rounds + warmup) * run_s) > allowance_s:
            break
        blocks = max(1, min(test.needed, int(request_s // max(rounds * run_s, 1e-9)))) if per_run else 1
        t0 = time.perf_counter()
        ta, tb = request([item_a, item_b], blocks * rounds, warmup)
        sb, sa = request([item_b, item_a], blocks * rounds, warmup)
        requests += 2
        last_pair_s = time.perf_counter() - t0
        ab = block_log_ratios(_runs(ta), _runs(tb), rounds)
        ba = block_log_ratios(_runs(sa), _runs(sb), rounds)
        test.add(counterbalanced(ab, ba))
        all_a += _runs(ta) + _runs(sa)
        all_b += _runs(tb) + _runs(sb)
    res = test.result()
    q = (lambda xs: float(np.percentile(xs, 10.0)) if xs else math.nan)
    return PairedTiming(res.decision, res.ratio, res.lower, res.upper, min(len(all_a), len(all_b)), res.n,
                        requests, time.perf_counter() - start, q(all_a), q(all_b), rounds, res)


__all__ = ["OVERHEAD", "PairedTiming", "REQUEST_S", "ROUNDS", "TARGET_LOOK", "block_rounds_for", "seconds_to_look",
           "time_until_decided"]
