"""The runtime-dependent noise model (`shlo_env.bench.noise_profile.NoiseModel`) and the one acceptance rule
(`shlo_env.bench.noise_profile.accepts`). Nothing here is timed: profiles are made up."""

import math

import pytest

from shlo_env.bench import noise_profile as noise
from shlo_env.bench.report import improved_rows, row_thresholds, summarize, verdict
from shlo_env.measure.results_db import ResultsDB, measurement_row


def _program(name, runtime_s, spread, n=10):
    """A profile program whose self-timing ratios spread by up to `spread` both ways."""
    ratios = [math.exp(spread * (2 * i / (n - 1) - 1)) for i in range(n)]
    return {"program": name, "runtime_s": runtime_s, "n": n, "ratios": ratios}


# a noisy microsecond range, a quiet millisecond range: 30 self-timings each
PROFILE = {"id": 7, "faster": 0.8, "slower": 1.25, "details": [
    _program("us-a", 5e-6, 0.20), _program("us-b", 8e-6, 0.20), _program("us-c", 2e-5, 0.20),
    _program("ms-a", 8e-4, 0.02), _program("ms-b", 1e-3, 0.02), _program("ms-c", 2e-3, 0.02),
    {"program": "broken", "error": "CandidateError: compile failed"}]}


def test_thresholds_come_from_the_programs_nearest_in_runtime():
    model = noise.NoiseModel.from_profile(PROFILE)
    assert len(model.programs) == 6  # the failed program is left out
    fast_ms, slow_ms = model.thresholds(1.2e-3)
    fast_us, slow_us = model.thresholds(1e-5)
    # the ms band's own quantile (|log r| <= 0.02), not the pooled one the us band dominates
    assert math.exp(-0.02) - 1e-9 <= fast_ms < 1.0 < slow_ms <= math.exp(0.02) + 1e-9
    assert fast_us < math.exp(-0.15) and slow_us > math.exp(0.15)
    assert noise.NoiseModel.from_profile(PROFILE).nearest(1e-3)[0][0] == 1e-3
    assert sum(len(r) for _, r in model.nearest(1e-3)) >= noise.MIN_SAMPLES
    assert "3 profile programs of 0.8-2 ms" in model.describe(1.2e-3)


def test_few_samples_widen_the_band_and_no_runtime_gives_the_pooled_thresholds():
    model = noise.NoiseModel.from_profile(PROFILE, min_samples=40)  # the 3 ms programs give 30: one more
    assert len(model.nearest(1e-3)) == 4
    assert model.thresholds(1e-3)[0] < math.exp(-0.15)  # a us program's spread is in now
    for t in (None, math.nan, 0.0):
        assert model.thresholds(t) == (0.8, 1.25)


def test_a_profile_without_per_program_samples_gives_the_pooled_thresholds():
    old = {"faster": 0.9, "slower": 1.1, "samples": 60, "details": [{"program": "a", "runtime_s": 1e-3}]}
    assert noise.NoiseModel.from_profile(old).thresholds(1e-3) == (0.9, 1.1)
    assert noise.NoiseModel.from_profile({"faster": 0.9, "slower": 1.1, "details": None}).faster_at(1e-3) == 0.9


def test_stored_profiles_load_into_the_model(tmp_path):
    """A profile stored as `noise.measure` has always stored it (details with runtime_s and ratios)."""
    with ResultsDB(tmp_path / "r.sqlite") as db:
        db.conn.execute("INSERT INTO environments (env_id) VALUES ('e1')")
        db.add_noise_profile("e1", PROFILE)
        stored = db.noise_profile("e1")
    assert stored is not None
    model = noise.NoiseModel.from_profile(stored)
    assert model.profile_id == stored["id"]
    assert model.thresholds(1e-3) == noise.NoiseModel.from_profile(PROFILE).thresholds(1e-3)


def test_measurement_rows_and_the_report_use_the_threshold_at_the_programs_runtime():
    env = {"env_id": "e1", "hostname": "h", "device_kind": "cpu", "cpu_model": "x", "jax": "0", "jaxlib": "0"}
    model = noise.NoiseModel.from_profile(PROFILE)

    def row(runtime_s, ratio):
        rec = {"original_hash": "h", "name": "p", "ratio": ratio, "returned_original": False, "identical": False,
               "baseline": {"full": runtime_s}, "best": {"full": runtime_s * ratio}}
        r = measurement_row(rec, dataset="d", uri="u", strategy="s", config={}, cfg_key="k", env=env,
                            profile=PROFILE, peaks=None, executor="local", sweep_id=None, started_at="",
                            finished_at="")
        return {**r, "applied": "[]", "disabled_passes": "[]"}

    ms, us = row(1e-3, 0.95), row(1e-5, 0.95)
    assert (ms["faster_threshold"], ms["slower_threshold"]) == model.thresholds(1e-3)
    assert (us["faster_threshold"], us["slower_threshold"]) == model.thresholds(1e-5)
    # 0.95 is beyond the ms programs' noise, within the us programs' (and above the pooled 0.8)
    assert verdict(ms, PROFILE) == "faster" and verdict(us, PROFILE) == "within noise"
    s = summarize([ms, us], PROFILE)[0]
    assert (s["faster_n"], s["slower_n"]) == (1, 0)
    rows = improved_rows([ms, us], PROFILE)
    assert [r[-3:-1] for r in rows] == [(f"{ms['faster_threshold']:.3f}", "faster"),
                                        (f"{us['faster_threshold']:.3f}", "within noise")]
    # a row stored without thresholds falls back to the pooled ones
    assert row_thresholds({"faster_threshold": None, "slower_threshold": None}, PROFILE) == (0.8, 1.25)


def test_a_median_of_three_timings_is_judged_by_medians_of_three_self_timings():
    """The bench's final ratio of a rewrite is the median of three side-by-side timings: its
    thresholds come from the profile's self-timings in consecutive threes, where a stray
    timing (one in three here, 10 % off) no longer sets the band."""
    stray = [1.10 if i % 3 == 0 else 1.0 + 0.005 * (-1) ** i for i in range(31)]  # 31: a last 1 is dropped
    profile = {"faster": 0.8, "slower": 1.25, "details": [
        {"program": f"p{k}", "runtime_s": 1e-2 * (1 + k / 10), "ratios": stray} for k in range(4)]}
    model = noise.NoiseModel.from_profile(profile)
    assert noise.medians([1.0, 1.2, 0.9, 5.0, 1.1], 3) == (1.0,) and noise.medians([1.0, 2.0], 1) == (1.0, 2.0)
    assert model.faster_at(1e-2) < 1 / 1.09 and model.thresholds(1e-2)[1] > 1.09
    faster3, slower3 = model.thresholds(1e-2, timings=3)
    assert 1 / 1.006 < faster3 < 1.0 < slower3 < 1.006
    assert sum(len(r) for _, r in model.nearest(1e-2, 3)) == 30  # 10 medians from each of 3 programs
    assert "30 medians of 3 self-timings of 3 profile programs" in model.describe(1e-2, 3)
    # programs with too few self-timings for one median: the pooled thresholds
    short = {"faster": 0.8, "slower": 1.25, "details": [{"program": "a", "runtime_s": 1e-3, "ratios": [1.0, 1.1]}]}
    assert noise.NoiseModel.from_profile(short).thresholds(1e-3, 3) == (0.8, 1.25)
    # a measurement row of a rewrite timed three times gets the median's thresholds
    env = {"env_id": "e1", "hostname": "h", "device_kind": "cpu", "cpu_model": "x", "jax": "0", "jaxlib": "0"}
    for timings, want in ((3, (faster3, slower3)), (1, model.thresholds(1e-2)), (0, model.thresholds(1e-2))):
        rec = {"original_hash": "h", "name": "p", "ratio": 0.97, "final_timings": timings,
               "baseline": {"full": 1e-2}, "best": {"full": 0.97e-2}}
        r = measurement_row(rec, dataset="d", uri="u", strategy="s", config={}, cfg_key="k", env=env,
                            profile=profile, peaks=None, executor="local", sweep_id=None, started_at="",
                            finished_at="")
        assert (r["faster_threshold"], r["slower_threshold"]) == want and r["final_timings"] == timings
    assert verdict({**r, "final_timings": 3, "faster_threshold": faster3, "slower_threshold": slower3},
                   profile) == "faster"


@pytest.mark.parametrize("ratio, median, ok", [(0.8, 0.85, True), (0.8, 0.95, False), (0.95, 0.8, False),
                                               (0.9, 0.9, False), (1.2, 1.2, False),
                                               (0.8, math.nan, True), (math.nan, 0.8, False)])
def test_acceptance_needs_both_the_10th_percentile_and_the_median_to_clear(ratio, median, ok):
    assert noise.accepts(ratio, median, 0.9) is ok


def test_self_timings_of_the_model_classify_about_the_quantile_as_faster():
    """The control: a profile program against itself is 'faster' no more often than (1 - q) / 2
    plus rounding, with the thresholds at its own runtime."""
    model = noise.NoiseModel.from_profile(PROFILE)
    for runtime_s, ratios in model.programs:
        fast = model.faster_at(runtime_s)
        share = sum(r < fast for r in ratios) / len(ratios)
        assert share <= 0.1
