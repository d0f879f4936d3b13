"""Decisions and reported ratios hold up (issue 11, item 8): the median per-call ratio is
reported next to the 10th-percentile one and both must clear the threshold; reports of a
returned original print no NaN; errors say what they are relative to."""

import types

import numpy as np

from shlo_env.execute import runtime
from shlo_env.measure.numerics import Numerics, compare_one
from shlo_env.api.optimize import Report
from shlo_env.search.acceptance import decide as _decide
from shlo_env.search.result import ProgramResult


def test_median_ratio_pairs_calls_made_side_by_side():
    base = [1.0] * 20
    cand = [0.3] * 3 + [1.0] * 17  # three lucky runs: the 10th percentile says 3x faster
    assert runtime.typical(cand) / runtime.typical(base) < 0.5
    assert runtime.median_ratio(base, cand) == 1.0
    assert np.isnan(runtime.median_ratio([], []))


def _best(ratio, median):
    return types.SimpleNamespace(key="cand", ok=True, ratio=ratio, median_ratio=median)


def test_a_candidate_is_accepted_only_when_both_ratios_clear_the_threshold():
    evaluator = types.SimpleNamespace(original_key="orig")
    res = ProgramResult(name="p", strategy="beam")
    assert not _decide(res, evaluator, _best(0.43, 0.98), 4, 0.94, confirm=False)
    assert "median per call 0.980" in res.reason
    assert _decide(ProgramResult(name="p", strategy="beam"), evaluator, _best(0.43, 0.6), 4, 0.94, confirm=False)


def test_a_report_of_the_original_prints_no_nan():
    r = Report(name="f", strategy="beam", baseline_s=1e-4, noise=0.02, threshold=0.94,
               returned_original=True, reason="no pattern matched")
    assert "nan" not in str(r) and "0.100 ms" in str(r)
    r2 = Report(name="f", strategy="beam", baseline_s=1e-4, optimized_s=5e-5, ratio=0.5, median_ratio=0.6,
                returned_original=False, noise=0.02, threshold=0.94)
    assert "median per call 0.600" in str(r2)


def test_errors_say_what_they_are_relative_to():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal(100) * 1.3e4
    orig = (ref * (1 + 1e-7)).astype(np.float32)
    cand = (ref * (1 + 2e-7)).astype(np.float32)
    cmp = compare_one(cand, orig, Numerics.REASSOCIATE, ref)
    text = cmp.describe()
    assert "float64 reference" in text and "of the largest output" in text and f"{cmp.scale:.3g}" in text
    assert compare_one(orig, orig, Numerics.EXACT).describe() == ""
