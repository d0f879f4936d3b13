"""learn.exe_model: the linear ranking model over executable features (the learned strategy's
second stage), its weights file and its cross-validation."""

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from shlo_env.learn import dataset, exe_model, hlo_features, learn_cli

DATA = Path(__file__).parent.parent / "data"
KERNELS, BYTES = hlo_features.INDEX["kernels"], hlo_features.INDEX["bytes_in"]


def planted(seed: int, programs: int = 100) -> list[exe_model.Program]:
    """Programs whose runtime is set by their kernels and bytes read; other features are noise."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(programs):
        f = rng.uniform(1, 1000, size=(6, len(hlo_features.FEATURES)))
        runtime = 0.7 * np.log1p(f[:, KERNELS]) + 0.3 * np.log1p(f[:, BYTES])
        out.append(exe_model.Program(f, np.exp(runtime - runtime.mean()), 0.02, f"src{i % 20}"))
    return out


def test_fit_finds_the_features_that_set_the_runtime():
    m = exe_model.fit(planted(0))
    assert exe_model.quality(m, planted(1))["tau_above_noise"] > 0.9  # held-out programs, ordered
    top = np.argsort(-np.abs(m.w))[:2]
    assert set(top) == {KERNELS, BYTES} and (m.w[top] > 0).all()  # more of either: slower


def with_a_costly_pattern(seed: int, programs: int = 100) -> list[exe_model.Program]:
    """Programs whose runtime is set by the features, plus 0.5 in log for each candidate that
    takes the pattern "slow" (which no feature shows); "free" is taken as often, for nothing."""
    rng = np.random.default_rng(seed)
    out = []
    for p in planted(seed, programs):
        taken = [Counter({name: 1 for name in ("slow", "free") if rng.random() < 0.5}) for _ in p.labels]
        labels = p.labels * np.exp([0.5 * c["slow"] for c in taken])
        out.append(exe_model.Program(p.features, labels, p.gap, p.source, taken))
    return out


def test_pattern_columns_learn_what_a_rewrite_costs_beyond_the_features():
    m = exe_model.fit(with_a_costly_pattern(0))
    assert m.patterns == ("free", "slow")
    slow, free = m.w[len(hlo_features.FEATURES) + 1], m.w[len(hlo_features.FEATURES)]
    assert slow > 0 and abs(free) < slow / 5
    held = with_a_costly_pattern(1)
    without = exe_model.fit(with_a_costly_pattern(0), l2_patterns=None)
    assert without.patterns == () and len(without.w) == len(hlo_features.FEATURES)
    assert exe_model.quality(m, held)["tau_above_noise"] > exe_model.quality(without, held)["tau_above_noise"] + 0.1
    f = held[0].features[:1]  # a pattern the model never saw counts for nothing; None: none taken
    assert m.scores(f, [Counter(unknown=3)]) == m.scores(f, None) == m.scores(f, [Counter()])


def test_weights_round_trip_and_refuse_another_feature_list(tmp_path):
    m = exe_model.fit(planted(0))
    f = planted(2)[0].features
    back = exe_model.load(m.save(tmp_path / "w.npz"))
    assert np.allclose(back.scores(f), m.scores(f)) and back.info["l2"] == exe_model.DEFAULT_L2
    costly = exe_model.fit(with_a_costly_pattern(0))
    back = exe_model.load(costly.save(tmp_path / "p.npz"))
    taken = [Counter(slow=1)] * len(f)
    assert back.patterns == costly.patterns and np.array_equal(back.scores(f, taken), costly.scores(f, taken))
    other = exe_model.ExeModel(m.w[:-1], m.mean[:-1], m.std[:-1], hlo_features.FEATURES[:-1])
    with pytest.raises(ValueError, match="retrain"):
        exe_model.load(other.save(tmp_path / "old.npz"))
    with pytest.raises(FileNotFoundError):
        exe_model.load(tmp_path / "missing.npz")


def test_a_dataset_without_executable_features_is_a_clear_error():
    with pytest.raises(dataset.DatasetError, match="exe-features"):
        exe_model.programs_of(dataset.load(DATA / "learned-v4", "test"))


def test_cross_validation_reports_each_l2_per_fold():
    out = exe_model.cross_validate(planted(0), learn_cli.fold_of, folds=2, l2s=(1e-3, 1.0))
    assert set(out) == {"0.001", "1.0"}
    assert all(len(v["folds"]) == 2 and -1 <= v["mean"] <= 1 for v in out.values())
    assert out["0.001"]["mean"] > 0.8  # a fold trains on as few as 20 programs
    with pytest.raises(ValueError, match="too few sources"):
        exe_model.cross_validate(planted(0)[:1], learn_cli.fold_of, folds=2)


def test_the_error_band_is_measured_on_held_out_programs_over_distinct_executables():
    programs = planted(0)
    noisy = [exe_model.Program(p.features, p.labels * np.exp(np.random.default_rng(i).normal(0, 0.3, len(p.labels))),
                               p.gap, p.source) for i, p in enumerate(programs)]
    clean = exe_model.cv_log_error_median(programs, learn_cli.fold_of, folds=2)
    assert 0 < clean < exe_model.cv_log_error_median(noisy, learn_cli.fold_of, folds=2)
    # two candidates of one executable differ only by noise: their pair is not counted
    twin = exe_model.Program(np.repeat(programs[0].features[:1], 2, axis=0), np.array([1.0, 2.0]), 0.02)
    assert len(exe_model.log_errors(exe_model.fit(programs), [twin])) == 0


def test_shipped_weights_rank_the_held_out_test_split_better_than_the_roofline():
    """The shipped executable model never saw the test split (fitted on train and val)."""
    m = exe_model.shipped()
    assert m.info["splits"] == ["train", "val"] and m.info["data"] == "data/learned-v7"
    assert 0 < m.info["cv_log_error_median"] < 0.25  # the learned strategy's band for its predictions
    report = learn_cli.evaluate(str(DATA / "learned-v7"))["test"]
    assert report["learned_executable"]["programs"] == report["roofline"]["programs"] > 100
    assert report["learned_executable"]["tau_above_noise"] > report["roofline"]["tau_above_noise"]


def test_score_differences_are_calibrated_log_ratios():
    """The ranking loss leaves the scale free; `calibration` sets it so that a score difference
    predicts the log runtime ratio (the learned strategy compares it with its noise band)."""
    m = exe_model.fit(planted(0))
    s, y = [], []
    for p in planted(1):
        s.append(m.scores(p.features) - m.scores(p.features).mean())
        y.append(np.log(p.labels) - np.log(p.labels).mean())
    slope = float(np.concatenate(s) @ np.concatenate(y) / (np.concatenate(s) @ np.concatenate(s)))
    assert 0.8 < slope < 1.25 and m.info["calibration"] > 0


def test_one_executable_scores_exactly_alike():
    """Rows of one executable group are equal; a matrix product may round them apart (BLAS
    computes blocks of rows and the remainder with different kernels), which would order
    exact ties at random in the metrics. Checked on the test split's real feature rows."""
    m = exe_model.shipped()
    checked = 0
    for p in exe_model.programs_of(dataset.load(DATA / "learned-v7", "test")):
        s = m.scores(p.features)
        same = (p.features[:, None, :] == p.features[None, :, :]).all(axis=2)
        assert not (same & (s[:, None] != s[None, :])).any()
        checked += int(same.sum() - len(s))
    assert checked > 1000  # many pairs of equal rows
