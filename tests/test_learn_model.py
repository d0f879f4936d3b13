"""The learned ranking model: metrics, training on a synthetic ranking, weights that round-trip."""

import math

import numpy as np
import pytest

from shlo_env.learn import observe
from shlo_env.learn import metrics, model


def test_metrics_on_known_orders():
    t = np.array([1.0, 1.2, 1.5, 2.0])
    assert metrics.kendall_tau(t, t) == pytest.approx(1.0)
    assert metrics.kendall_tau(-t, t) == pytest.approx(-1.0)
    assert metrics.opa(t, t) == 1.0 and metrics.opa(-t, t) == 0.0
    assert metrics.opa(np.zeros(4), t) == 0.5  # ties in the prediction count half
    assert math.isnan(metrics.kendall_tau(t, np.ones(4)))  # nothing to rank
    assert metrics.per_program([(t, t), (-t, t), (t, np.ones(4))])["programs"] == 2


MUL = observe.OP_IDS["stablehlo.multiply"]


def synthetic_batch(num_programs: int, seed: int) -> model.Batch:
    """Chains of 12 nodes with random op kinds; each candidate keeps a random subset live, and its
    'runtime' grows with the live multiplies (and a little with the live node count)."""
    rng = np.random.default_rng(seed)
    xs, ops, lives, copies, srcs, dsts, cp, cr, co = [], [], [], [], [], [], [], [], []
    base = 0
    nf = len(observe.NODE_FEATURES)
    for p in range(num_programs):
        n = 12
        op = rng.choice([MUL, observe.OP_IDS["stablehlo.add"], observe.OP_IDS["stablehlo.reshape"]], size=n)
        x = np.zeros((n, nf), np.float32)  # only the op kinds and the live mask carry the signal
        for k in range(6):
            live = (rng.random(n) < 0.6).astype(np.float32) if k else np.ones(n, np.float32)
            xs.append(x), ops.append(op), lives.append(live)
            copies.append(np.full(n, len(cp), np.int32))
            srcs.append(np.arange(n - 1, dtype=np.int32) + base), dsts.append(np.arange(1, n, dtype=np.int32) + base)
            cp.append(p)
            cr.append(math.exp(0.2 * float(live[op == MUL].sum()) + 0.01 * float(live.sum())))
            co.append(k == 0)
            base += n
    return model._batch(xs, ops, lives, copies, srcs, dsts, cp, cr, co)


def test_training_recovers_a_synthetic_ranking(tmp_path):
    train = synthetic_batch(24, seed=0)
    params, norm, losses = model.train(train, steps=150, lr=1e-2, seed=0)
    assert losses[-1] < 0.5 * losses[0]
    held_out = synthetic_batch(12, seed=1)
    pred = model.predict(params, norm, held_out)
    per = [(pred[held_out.copy_program == p], held_out.copy_ratio[held_out.copy_program == p]) for p in range(12)]
    assert metrics.per_program(per)["kendall_tau"] > 0.7
    # weights round-trip through the .npz format
    path = model.save(tmp_path / "w.npz", params, norm, {"note": "test"})
    p2, n2, info = model.load(path)
    assert info == {"note": "test"}
    np.testing.assert_allclose(model.predict(p2, n2, held_out), pred, rtol=1e-5, atol=1e-5)


def test_numpy_inference_equals_the_jax_training_path():
    """`predict` evaluates `scores` in numpy (no compile per graph shape); it must be the
    function training optimizes (shipped weights, random node features)."""
    params, norm, _ = model.load()
    b = synthetic_batch(3, seed=2)
    b.x = np.random.default_rng(0).normal(size=b.x.shape).astype(np.float32)
    jax_scores = np.asarray(model.scores(params, norm, *model.arrays(b), b.num_copies))
    np.testing.assert_allclose(model.predict(params, norm, b), jax_scores, rtol=1e-5, atol=1e-5)


def test_training_without_ranked_pairs_is_an_error():
    b = synthetic_batch(2, seed=0)
    b.copy_ratio[:] = 1.0
    with pytest.raises(ValueError, match="nothing to rank"):
        model.train(b, steps=1)


def test_missing_weights_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="learn train"):
        model.load(tmp_path / "none.npz")


def test_shipped_weights_resolve_inside_the_package_and_load():
    import importlib.resources

    import shlo_env

    shipped = importlib.resources.files("shlo_env") / "learn" / "weights.npz"
    assert shipped.is_file() and model.WEIGHTS.samefile(str(shipped))
    assert model.WEIGHTS.stat().st_size <= 5 * 2**20
    params, norm, info = model.load()
    assert info["format_version"] >= 1 and info["final_loss"] < info["first_loss"]
    assert params["w_in"].shape[0] == len(observe.NODE_FEATURES) == norm[0].shape[0]
    assert shlo_env.__file__  # the package that the weights were resolved in


def test_metrics_above_noise_ignore_pairs_within_the_noise():
    truth = np.array([1.00, 1.01, 1.30])
    pred = np.array([2.0, 1.0, 3.0])  # orders the 1 % pair wrongly, the 30 % pairs rightly
    assert metrics.noise_gap(0.05) == pytest.approx(math.log1p(0.05))
    assert metrics.noise_gap(math.nan) == metrics.MIN_GAP
    within = metrics.per_program([(pred, truth)], [metrics.noise_gap(0.05)])
    assert within["opa"] == 1.0 and within["tau_above_noise"] == 1.0
    assert metrics.per_program([(pred, truth)], 0.0)["opa"] == pytest.approx(2 / 3)


def test_label_is_the_geometric_mean_of_two_measurements():
    from shlo_env.learn.dataset import label

    c = {"ratio": np.array([0.81, 1.0, 1.2]), "confirm_ratio": np.array([1.0, np.nan, 1.2])}
    np.testing.assert_allclose(label(c), [0.9, 1.0, 1.2])


def test_tie_pairs_are_within_one_program_and_one_executable():
    b = synthetic_batch(2, seed=0)  # 6 copies per program
    b.copy_group = np.array([0, 1, 0, 2, 1, -1, 0, 0, 1, 1, 2, 3], np.int32)
    a, c = model.tie_pairs(b)
    assert sorted(zip(a.tolist(), c.tolist())) == [(0, 2), (1, 4), (6, 7), (8, 9)]


def test_tie_loss_pulls_one_executable_to_one_score():
    b = synthetic_batch(12, seed=0)
    b.copy_group = np.arange(b.num_copies, dtype=np.int32) % 6 // 2  # copies 0-1, 2-3, 4-5 of each program tie
    a, c = model.tie_pairs(b)

    def spread(tie_weight: float) -> float:
        params, norm, _ = model.train(b, steps=100, lr=1e-2, seed=0, tie_weight=tie_weight)
        pred = model.predict(params, norm, b)
        return float(np.mean(np.abs(pred[a] - pred[c])))

    assert spread(10.0) < 0.5 * spread(0.0)


def test_cross_validation_holds_out_whole_sources():
    from pathlib import Path

    from shlo_env.learn import dataset, learn_cli

    data = Path(__file__).parent.parent / "data" / "learned-v3"
    sources = {p["source"] for s in ("train", "val") for p in dataset.load(data, s).programs}
    folds = {learn_cli.fold_of(src, 2) for src in sources}
    assert folds == {0, 1}  # both folds hold some sources out; a source is in exactly one by construction
    out = learn_cli.cross_validate(str(data), folds=2, steps=1)
    assert len(out["folds"]) == 2 and 0 in out["mean"]  # step 0: the untrained prior, on held-out programs
    assert all(-1.0 <= v <= 1.0 for fold in out["folds"] for v in fold.values())


def test_both_learned_models_share_one_interface():
    """`LearnedModel`: load (None: the shipped weights), shipped once, ratios to row 0 from
    predict's scores, and the error band the weights record (what the search's rankers read)."""
    from shlo_env.learn import exe_model
    from shlo_env.learn.model import GraphModel, LearnedModel

    for cls, key in ((GraphModel, "val_log_error_median"), (exe_model.ExeModel, "cv_log_error_median")):
        m = cls.shipped()
        assert isinstance(m, LearnedModel) and cls.shipped() is m and type(cls.load()) is cls
        assert m.uncertainty() == pytest.approx(float(m.info.get(key, model.DEFAULT_UNSURE))) and m.uncertainty() > 0
    exe = exe_model.ExeModel.shipped()
    f = np.abs(np.random.default_rng(0).standard_normal((3, len(exe.features))))
    assert np.allclose(exe.ratios(f), np.exp(exe.scores(f)[1:] - exe.scores(f)[0]))
    assert exe_model.shipped() is exe
