"""Acceptance: whether the search's best candidate is returned instead of the original.

The order (see `decide`): the best must be verified and its one-shot timing below the
original's (the screen); then the sequential paired test (`shlo_env.measure.sequential_test`,
alpha `ACCEPT_ALPHA`) against the original decides. Where the budget leaves the test undecided,
or leaves no time for it, the earlier rule decides: two timings both beyond twice the measured
noise (`beyond_noise_twice`, `timed_twice_beyond_noise`); a best the search timed once, found
too late for a re-time, has the final timings for its second (`left_to_the_final`). Last,
`final_measurement` times the returned program `FINAL_TIMINGS` times side by side and reports
their median; a median at or above 1 (or the bound `left_to_the_final` set) returns the original.
"""

from __future__ import annotations

import math
import time

import numpy as np

from shlo_env.execute.runners import CandidateError
from shlo_env.execute.runtime import Timing
from shlo_env.ir.program import Program
from shlo_env.measure.noise_thresholds import accepts
from shlo_env.measure.sequential_test import Decision, SequentialRatioTest
from shlo_env.measure.timing_policy import FINAL_TIMINGS
from shlo_env.search.evaluator import Evaluator
from shlo_env.search.result import ProgramResult, timing_dict

ACCEPT_ALPHA = 0.01  # the paired test's chance of accepting a candidate that is not faster


def decide(res: ProgramResult, evaluator: Evaluator, best, space: int, thr: float, confirm: bool, *,
            min_gain: float = 0.01, allowance_s: float = 0.0) -> bool:
    """Accept the search's best only if verified, its one-shot timing is below the original's,
    and the sequential paired test against the original accepts it within `allowance_s`
    (the test's minimum gain `min_gain`); `confirm=False`: the screen (`thr`) alone decides."""
    if best.key == evaluator.original_key or not best.ok:
        regions = int(res.strategy_info.get("region_candidates", 0))
        judged = f"{regions} region candidates judged; " if regions else ""
        res.reason = ("no pattern matched" if space <= 1 else
                      "no candidate was verified faster than the original" if res.candidates_evaluated
                      else f"the search evaluated no whole-program candidate in its {res.search_s:.1f} s ({judged}"
                           f"after {res.total_s - res.search_s:.1f} s timing the original against itself "
                           f"and expanding it)")
        if res.untimed:
            res.reason += "; not timed: " + ", ".join(f"{n} candidate{'s' if n > 1 else ''} ({why})"
                                                      for why, n in sorted(res.untimed.items()))
        return False
    # The paired test decides, so any best that looked faster at all goes to it: a real 2 % gain
    # fails a 0.97 screen. Without the test (`confirm=False`) the screen alone decides.
    gate = 1.0 if confirm else thr
    if not accepts(best.ratio, best.median_ratio, gate):
        res.reason = (f"best candidate ratio {best.ratio:.3f} (median per call {best.median_ratio:.3f}) "
                      + (f"is within noise (threshold {thr:.3f})" if not confirm else
                         "is not below the original's"))
        return False
    if not confirm:
        return True
    if not allowance_s > 0:  # what the search measured decides (a confirmed 0.86 was lost here)
        res.reason = "no time left for the paired test of the best candidate"
        return timed_twice_beyond_noise(res, best, min_gain)
    try:
        test = evaluator.paired_test(best, allowance_s, SequentialRatioTest(alpha=ACCEPT_ALPHA, min_gain=min_gain))
    except CandidateError as e:  # out of time (a slow compile, a late search): what the search measured
        return untimed_again(res, best, min_gain, e)
    res.acceptance, res.accept_pairs, res.accept_s = str(test.decision), test.pairs, test.seconds
    res.accept_ratio = res.confirm_ratio = test.ratio
    res.accept_lower, res.accept_upper = test.lower, test.upper
    if test.decision is Decision.UNDECIDED:
        return beyond_noise_twice(res, evaluator, best, test, min_gain, allowance_s)
    if test.decision is not Decision.ACCEPT:
        res.reason = (f"the paired test did not accept the best candidate (one-shot ratio {best.ratio:.3f}): "
                      "it is not faster by the minimum gain (the original is kept)")
        return False
    return True


def twice_the_noise(res: ProgramResult, min_gain: float) -> float:
    """The earlier rule's threshold: a ratio beyond twice the measured noise, and `min_gain`."""
    return 1.0 - max(min_gain, 2.0 * res.noise) if not math.isnan(res.noise) else 1.0 - min_gain


def timed_twice_beyond_noise(res: ProgramResult, best, min_gain: float) -> bool:
    """With no time left for the paired test or a re-time (a search's last evaluation ran
    late), the earlier rule on what the search measured: a best it timed twice (`confirmed`,
    its ratio the slower of the two) with both ratios beyond twice the noise is taken (a 5x
    conv rewrite was lost this way); anything less keeps the original."""
    thr = twice_the_noise(res, min_gain)
    if best.confirmed and accepts(best.ratio, best.median_ratio, thr):
        res.acceptance = "accept (beyond noise in the search's two timings; no time left for the paired test)"
        return True
    res.reason = (f"no time left to confirm the best candidate (ratio {best.ratio:.3f}, "
                  + ("timed once" if not best.confirmed else f"not beyond twice the noise: threshold {thr:.3f}")
                  + ")")
    return False


def left_to_the_final(res: ProgramResult, best, min_gain: float) -> float | None:
    """A best the search timed once, too late for a re-time (its last evaluation, in the time a
    winner would have been confirmed in, found it): the final measurement is its second timing.
    Returns the ratio the final median must be below, twice the noise, when the one timing is
    beyond it too; else None, and the original is kept (a 0.75 conv rewrite of the haiku ResNet18
    train step was lost in 2 of 4 searches with the final timing's 6 s unspent)."""
    thr = twice_the_noise(res, min_gain)
    if best.confirmed or not accepts(best.ratio, best.median_ratio, thr):
        return None
    res.acceptance = (f"to the final timings (timed once at {best.ratio:.3f} with no time left for a re-time: "
                      f"their median must be below {thr:.3f}, twice the noise)")
    return thr


def untimed_again(res: ProgramResult, best, min_gain: float, error: CandidateError) -> bool:
    """The best could not be timed again within the budget: `timed_twice_beyond_noise` decides
    (a 4.7x conv rewrite of a 30 ms program was lost to a 1 s timeout of its paired test)."""
    if timed_twice_beyond_noise(res, best, min_gain):
        return True
    res.reason = f"best candidate could not be timed again ({error}); {res.reason}"
    return False


def beyond_noise_twice(res: ProgramResult, evaluator: Evaluator, best, test, min_gain: float,
                        allowance_s: float) -> bool:
    """Where the budget leaves the paired test undecided (a slow program, a small budget), the
    earlier rule decides: the screening timing and a second, independent one (the test's own
    pairs) both beyond twice the measured noise. It takes large gains the test had no time to
    prove and never a gain inside the noise; the report says which rule decided."""
    thr = twice_the_noise(res, min_gain)
    again = test.time_b_s / test.time_a_s if test.time_a_s > 0 else math.nan
    if math.isnan(again):
        try:
            again, _ = evaluator.retime_ratios(best)
        except CandidateError as e:
            return untimed_again(res, best, min_gain, e)
    res.confirm_ratio = again
    if accepts(best.ratio, best.median_ratio, thr) and again < thr:
        res.acceptance = "accept (beyond noise twice; the paired test was undecided)"
        return True
    res.reason = (f"the paired test was undecided in its {allowance_s:.1f} s and the best candidate is not "
                  f"beyond twice the noise in two timings ({best.ratio:.3f}, then {again:.3f}; threshold "
                  f"{thr:.3f}): the original is kept")
    return False


def return_original(res: ProgramResult, program: Program) -> None:
    """`res` returns the original: no rewrite, no XLA action, nothing for the caller to check."""
    res.returned_original, res.program, res.evaluation = True, program, None
    res.best_hash, res.applied, res.actions, res.decisions = res.original_hash, (), (), []
    res.numerics, res.check_reference = "EXACT", None
    res.verification = {"tier": "EXACT", "input_sets": 0, "note": "the original itself"}


def side_by_side(evaluator: Evaluator, worker, best, timeout_s: float | None):
    """One timing request of the original and `best` (with its XLA actions) on input set 0."""
    key = evaluator.verifier.keys[0]
    base = (evaluator.baseline_text, evaluator.disabled_passes)
    text = best.program.text()
    if best.actions:
        return worker.time_each([base, (text, evaluator.compile_tokens(best.actions))], key, evaluator.timing,
                                timeout_s=timeout_s)
    return worker.time([base[0], text], key, evaluator.timing, base[1], timeout_s=timeout_s)


def final_measurement(res: ProgramResult, evaluator: Evaluator, worker, best, original: Program,
                       timeout_s: float | None = None, below: float = 1.0) -> bool:
    """Time the returned program (side by side with the original when it is a rewrite), on
    the search's input set 0 (already in the worker: no second copy of a large model's inputs).
    A rewrite gets `FINAL_TIMINGS` side-by-side timings (fewer when the time left does not
    hold them) and the reported ratio is their median: the bench judges it against the noise
    profile's medians of as many self-timings (`NoiseModel.thresholds(timings=)`), which spread
    about half as wide as single ones. A median at 1 or above contradicts the paired test (the
    machine's state can change between them): the original is returned instead, with ratio
    1.0; so is a median at or above `below` (the bound of `left_to_the_final`, for a best these
    timings confirm). Returns whether `best` is still the returned program."""
    try:
        if best is None:
            (t,) = worker.time([evaluator.baseline_text], evaluator.verifier.keys[0], evaluator.timing,
                               evaluator.disabled_passes, timeout_s=timeout_s)
            res.baseline = res.best = timing_dict(t)
            res.ratio, res.final_timings = 1.0, 1
            return False
        start = time.perf_counter()
        timings: list[tuple[float, Timing, Timing]] = []
        while len(timings) < FINAL_TIMINGS:
            t0 = time.perf_counter()
            left = None if timeout_s is None else timeout_s - (t0 - start)
            if timings and left is not None and left < (t0 - start) / len(timings):
                res.reason = (res.reason + "; " if res.reason else "") + (
                    f"the final measurement took {len(timings)} of {FINAL_TIMINGS} timings (no time left for more)")
                break
            try:
                tb, tc = side_by_side(evaluator, worker, best, left)
            except CandidateError as e:
                if not timings:
                    raise
                res.reason = (res.reason + "; " if res.reason else "") + (
                    f"the final measurement took {len(timings)} of {FINAL_TIMINGS} timings (the next failed: {e})")
                break
            timings.append((tc.full / tb.full, tb, tc))
        ratios = [r for r, _, _ in timings]
        median = float(np.median(ratios))
        _, tb, tc = sorted(timings, key=lambda x: x[0])[(len(timings) - 1) // 2]
        res.baseline, res.best = timing_dict(tb), timing_dict(tc)
        res.ratio, res.final_timings = median, len(timings)
        if median < below:
            return True
        how = (f"the paired test had accepted it at {res.accept_ratio:.3f}" if res.acceptance == "accept"
               else f"acceptance: {res.acceptance or 'the screening timing alone'}")
        return_original(res, original)
        res.ratio = 1.0
        res.best = res.baseline
        res.reason = (f"the final timings measured the best candidate at {', '.join(f'{r:.3f}' for r in ratios)} "
                      f"(median {median:.3f}), not " + ("faster than the original" if below >= 1.0 else
                                                        f"below {below:.3f}") + f" ({how}): the original is kept")
        return False
    except CandidateError as e:
        res.reason = (res.reason + "; " if res.reason else "") + f"final measurement failed ({e})"
        if best is not None and below < 1.0:  # these timings were to confirm it: unconfirmed, not taken
            return_original(res, original)
            return False
        return best is not None


__all__ = ["ACCEPT_ALPHA", "beyond_noise_twice", "decide", "final_measurement", "left_to_the_final",
           "return_original", "side_by_side", "timed_twice_beyond_noise"]
