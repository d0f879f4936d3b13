"""The sequential paired acceptance test (shlo_env.measure.sequential_test) on synthetic run times, and the
timing driver (shlo_env.measure.paired_timing) on a tiny program."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from shlo_env.measure.sequential_test import (Decision, SequentialRatioTest, block_log_ratios, counterbalanced,
                                 signed_rank_critical, wilcoxon_bounds)
from shlo_env.measure.sequential_test import _signed_rank_cdf

ROUNDS = 8  # rounds per block in the simulations (the driver's typical block)


def test_signed_rank_distribution_matches_enumeration():
    n = 9
    sums = np.array([sum(r for r, keep in zip(range(1, n + 1), bits) if keep)
                     for bits in itertools.product((0, 1), repeat=n)])
    expected = np.array([(sums <= t).mean() for t in range(n * (n + 1) // 2 + 1)])
    assert np.allclose(_signed_rank_cdf(n), expected)
    assert signed_rank_critical(10, 2.0 ** -10) == 0 and signed_rank_critical(9, 2.0 ** -10) == -1


def test_wilcoxon_bounds_cover_and_refuse_bad_input():
    rng = np.random.default_rng(0)
    misses = 0
    for _ in range(400):
        z = rng.standard_t(3, 30) + 0.3
        lo, est, hi = wilcoxon_bounds(z, 0.05)
        assert lo <= est <= hi
        misses += (hi < 0.3) + (lo > 0.3)
    assert misses / 400 <= 0.1 + 0.05  # two one-sided 5 % bounds, with room for the sampling
    assert wilcoxon_bounds([1.0, 2.0], 0.01)[0] == -math.inf  # too few for the level
    with pytest.raises(ValueError):
        wilcoxon_bounds([], 0.05)
    with pytest.raises(ValueError):
        wilcoxon_bounds([0.1, float("nan")], 0.05)


def test_bad_parameters_and_observations_are_refused():
    for bad in ({"alpha": 0.0}, {"alpha": 0.7}, {"min_gain": 1.0}, {"growth": 1.0}, {"looks": 0}):
        with pytest.raises(ValueError):
            SequentialRatioTest(**bad)
    with pytest.raises(ValueError):
        SequentialRatioTest().add([0.1, math.inf])
    with pytest.raises(ValueError):
        block_log_ratios([1.0, 2.0], [1.0, 2.0], 0)


def simulate(rng, gain: float, *, spread: float = 0.05, load: float = 0.15, position_bias: float = 0.02,
             outliers: float = 0.0, test: SequentialRatioTest | None = None):
    """Run one sequential test on synthetic run times until it is done.

    Run times are lognormal around 1 (B: around 1 - gain) with a per-round load factor common
    to both programs (what pairing removes), the second program of each pair `position_bias`
    slower (what the [A, B] / [B, A] alternation removes), and with probability `outliers` a
    run slowed by a Pareto-distributed factor (another process taking the core)."""
    test = test or SequentialRatioTest()

    def times(n: int, mean: float, second: bool, common):
        t = mean * common * np.exp(spread * rng.standard_normal(n)) * (1 + position_bias * second)
        hit = rng.random(n) < outliers
        return np.where(hit, t * (1 + rng.pareto(1.5, n) + 0.5), t)

    while not test.done:
        m = max(test.needed, 1)
        ys = []
        for b_first in (False, True):
            common = np.exp(load * rng.standard_normal(m * ROUNDS))
            a = times(m * ROUNDS, 1.0, b_first, common)
            b = times(m * ROUNDS, 1.0 - gain, not b_first, common)
            ys.append(block_log_ratios(a, b, ROUNDS))
        test.add(counterbalanced(*ys))
    return test.result()


def rates(gain: float, tries: int, seed: int, **kw) -> tuple[dict, float]:
    rng = np.random.default_rng(seed)
    results = [simulate(rng, gain, **kw) for _ in range(tries)]
    counts = {d: sum(r.decision is d for r in results) / tries for d in Decision}
    return counts, float(np.mean([r.n for r in results]))


def test_equal_programs_are_accepted_at_most_one_percent_of_the_time():
    counts, _ = rates(0.0, 1000, seed=1)
    assert counts[Decision.ACCEPT] <= 0.01
    assert counts[Decision.REJECT] >= 0.9  # and the test usually says so, not "undecided"


def test_a_true_three_percent_gain_is_detected():
    counts, mean_n = rates(0.03, 300, seed=2)
    assert counts[Decision.ACCEPT] >= 0.9
    assert mean_n <= 66  # observations: about 1000 interleaved pairs of runs at 8 rounds a block


def test_heavy_tailed_outliers_do_not_break_it():
    null, _ = rates(0.0, 600, seed=3, outliers=0.05)
    assert null[Decision.ACCEPT] <= 0.01
    gain, _ = rates(0.03, 200, seed=4, outliers=0.05)
    assert gain[Decision.ACCEPT] >= 0.9


def test_position_bias_is_cancelled_by_the_alternation():
    # B is A, the second program of a pair runs 5 % faster (finds the caches warm): timed only
    # as [A, B], B would look 5 % faster and be accepted every time; alternated, it is not.
    counts, _ = rates(0.0, 300, seed=5, position_bias=-0.05)
    assert counts[Decision.ACCEPT] <= 0.01 and counts[Decision.REJECT] >= 0.9


def test_a_gain_below_min_gain_is_not_accepted():
    counts, _ = rates(0.004, 200, seed=6, spread=0.01, load=0.05)
    assert counts[Decision.ACCEPT] <= 0.01 and counts[Decision.REJECT] >= 0.9


def test_looks_follow_the_schedule_and_later_data_is_ignored():
    test = SequentialRatioTest()
    assert test.schedule == [10, 16, 26, 41, 66, 105, 168, 269]
    assert test.add([-0.05] * 9) is Decision.UNDECIDED and test.result().looks == 0
    assert test.add([-0.05] * 20) is Decision.ACCEPT  # decided at the first look, on 10 observations
    r = test.result()
    assert r.looks == 1 and r.n == 29 and r.upper < 1 and r.accepted and test.done and test.needed == 0
    assert test.add([5.0] * 50) is Decision.ACCEPT  # decided stays decided


# --- the timing driver on a tiny program ----------------------------------------------------------

@pytest.fixture(scope="module")
def tiny():
    """(runner, one matmul, two matmuls) on 128x128 inputs registered as "x"."""
    import jax.numpy as jnp

    from shlo_env.execute import runtime
    from shlo_env.ir.program import lower
    from shlo_env.execute.runners import InProcess

    x = np.ones((128, 128), np.float32)
    one = lower(lambda x, w: jnp.tanh(x @ w), x, x)
    two = lower(lambda x, w: jnp.tanh((x @ w) @ w), x, x)
    runner = InProcess()
    runner.set_inputs("x", runtime.random_inputs(one.in_specs, 0))
    return runner, one, two


def test_driver_accepts_a_clearly_faster_program_and_rejects_a_slower_one(tiny):
    from shlo_env.measure.paired_timing import time_until_decided

    runner, one, two = tiny
    faster = time_until_decided(runner, two, one, "x", allowance_s=10.0)
    assert faster.accepted and faster.upper < 1 and faster.ratio < 0.8, faster.describe()
    assert faster.pairs >= 10 * faster.block_rounds and faster.seconds < 10.0 and faster.requests >= 3
    slower = time_until_decided(runner, one, two, "x", allowance_s=10.0)
    assert slower.decision is Decision.REJECT and slower.lower > 1, slower.describe()


def test_driver_does_not_accept_a_program_against_its_own_copy(tiny):
    from shlo_env.measure.paired_timing import time_until_decided

    runner, one, _ = tiny
    copy = one.text() + "\n// a separately compiled copy\n"
    res = time_until_decided(runner, one, copy, "x", allowance_s=3.0,
                             test=SequentialRatioTest(alpha=0.001))  # a 0.1 % chance of a false accept
    assert not res.accepted, res.describe()
    assert res.seconds < 3.0 + 1.0 and res.time_a_s > 0 and res.time_b_s > 0


def test_driver_refuses_a_bad_allowance(tiny):
    from shlo_env.measure.paired_timing import time_until_decided

    runner, one, _ = tiny
    with pytest.raises(ValueError):
        time_until_decided(runner, one, one, "x", allowance_s=0.0)
