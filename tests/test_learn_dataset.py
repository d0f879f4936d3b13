"""The measurement dataset: bounded candidate sets, a resumable build, a split without leakage."""

import json
import math

import numpy as np
import pytest

from shlo_env.learn import observe
from shlo_env.learn import dataset


def test_split_is_stable_and_validated():
    assert dataset.split_of("linen_mlp_train") == dataset.split_of("linen_mlp_train")
    names = [f"prog{i}" for i in range(300)]
    counts = {s: sum(dataset.split_of(n) == s for n in names) for s in dataset.SPLITS}
    assert all(c > 30 for c in counts.values()), counts  # 60/20/20 roughly
    assert {dataset.split_of(n, (1.0, 0.0, 0.0)) for n in names} == {"train"}
    with pytest.raises(dataset.DatasetError):
        dataset.split_of("x", (0.5, 0.5, 0.5))


def test_candidate_vectors_are_bounded_unique_and_never_the_original():
    small = dataset.candidate_vectors([2, 3], 10, seed=0)
    assert len(small) == 5 and [0, 0] not in small  # every vector but the all-zero one
    big = dataset.candidate_vectors([3] * 12, 7, seed=0)
    assert len(big) == 7 and len({tuple(v) for v in big}) == 7 and all(any(v) for v in big)
    assert big[0] == [1] * 12  # pick-first comes first
    assert dataset.candidate_vectors([3] * 12, 7, seed=0) == big  # seeded
    with pytest.raises(dataset.DatasetError):
        dataset.candidate_vectors([2], 0, seed=0)


def test_interleave_sources_covers_sources_first():
    from shlo_env import corpus

    entries = dataset.interleave_sources(corpus.entries("inst-10-20"))
    first = [dataset.source_of(e) for e in entries[:5]]
    assert len(set(first)) == 5
    assert sorted(e.uri for e in entries) == sorted(e.uri for e in corpus.entries("inst-10-20"))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("learn_ds")
    db = tmp / "db.sqlite"
    kw = dict(datasets=["inst-10-20"], db_path=db, max_programs=4, max_candidates=2, runs=3,
              min_seconds=0.01, rounds=2, max_seconds=120, log=lambda *_: None)
    first = dataset.build(**kw)
    again = dataset.build(**kw)
    return tmp, db, first, again


def test_build_measures_and_resumes(built):
    _, _, first, again = built
    assert first["measured"] + first["failed"] > 0
    assert again["measured"] == again["failed"] == 0  # everything was already there
    assert again["skipped"] == first["programs"] + first["skipped"]  # whole programs are skipped


def test_export_splits_by_source_and_loads_graphs(built):
    tmp, db, _, _ = built
    out = tmp / "export"
    summary = dataset.export(out, db_path=db, fractions=(0.34, 0.33, 0.33))
    assert sum(s["candidates"] for s in summary.values()) > 0
    sources = {}
    for split in dataset.SPLITS:
        meta = json.loads((out / f"{split}.json").read_text())
        assert meta["format_version"] == dataset.FORMAT_VERSION
        for p in meta["programs"]:
            sources.setdefault(p["source"], set()).add(split)
            assert dataset.split_of(p["source"], (0.34, 0.33, 0.33)) == split
    assert all(len(s) == 1 for s in sources.values()), sources  # no source in two splits
    split = next(dataset.load(out, s) for s in dataset.SPLITS if summary[s]["programs"])
    g = split.graph(0)
    assert isinstance(g, observe.Graph)
    c = split.candidates(0)
    assert c["decisions"].shape == (split.programs[0]["num_candidates"], g.num_alternatives)
    assert c["live"].shape == (len(c["ratio"]), g.num_nodes)
    assert np.all(c["ratio"] > 0) and np.all(np.isfinite(c["ratio"]))
    # the stored live mask is what observe.live_nodes says for that decision vector
    assert np.array_equal(c["live"][0], observe.live_nodes(g, c["decisions"][0]))
    # one label per executable: the original's group is exactly 1.0, every group has one ratio
    for s in dataset.SPLITS:
        part = dataset.load(out, s)
        for p in range(len(part)):
            c = part.candidates(p)
            assert np.all(c["ratio"][c["group"] == 0] == 1.0)
            for grp in np.unique(c["group"]):
                assert len(np.unique(c["ratio"][c["group"] == grp])) == 1


def test_load_rejects_missing_and_unknown(tmp_path):
    with pytest.raises(dataset.DatasetError):
        dataset.load(tmp_path, "train")
    with pytest.raises(dataset.DatasetError):
        dataset.load(tmp_path, "holdout")


def test_eval_reports_model_and_baselines_on_the_same_programs(built):
    from shlo_env.learn import learn_cli

    tmp, db, _, _ = built
    out = tmp / "export_eval"
    summary = dataset.export(out, db_path=db, fractions=(1.0, 0.0, 0.0))
    report = learn_cli.evaluate(str(out))  # the shipped weights
    assert report["train"]["candidates"] == summary["train"]["candidates"]
    methods = {"learned", "learned_executable", "xla_cost_analysis", "roofline"}
    assert methods <= set(report["train"])
    assert len({report["train"][m]["programs"] for m in methods}) == 1  # same programs for all three
    assert report["val"] == {"programs": 0}


def test_build_records_each_executables_features_and_a_recompile_gives_the_same(built, tmp_path):
    """The build reads every executable's features when it groups them; `exe-features` on the
    export compiles the vectors again and must find the same (one compiler, one text)."""
    tmp, db, _, _ = built
    out = tmp / "export_exe"
    dataset.export(out, db_path=db, fractions=(1.0, 0.0, 0.0))
    built_split = dataset.load(out, "train")
    assert np.isfinite(built_split.arrays["cand_exe"]).all() and np.isfinite(built_split.arrays["orig_exe"]).all()
    again = dataset.add_executable_features(out, tmp_path / "again", log=lambda *_: None)
    assert again["train"]["left_out"] == {}
    recompiled = dataset.load(tmp_path / "again", "train")
    assert recompiled.meta["format_version"] == dataset.FORMAT_VERSION
    assert np.array_equal(recompiled.arrays["cand_exe"], built_split.arrays["cand_exe"])
    assert np.array_equal(recompiled.arrays["orig_exe"], built_split.arrays["orig_exe"])
    for p in range(len(built_split)):  # everything else is carried over as it was
        for k in ("decisions", "ratio", "group", "live"):
            assert np.array_equal(recompiled.candidates(p)[k], built_split.candidates(p)[k])


def test_executable_features_of_a_program_whose_patterns_changed_are_left_out(built, tmp_path):
    tmp, db, _, _ = built
    out = tmp / "export_stale"
    dataset.export(out, db_path=db, fractions=(1.0, 0.0, 0.0))
    meta = json.loads((out / "train.json").read_text())
    meta["programs"][0]["labels"][0] = ["original", "a_rewrite_that_no_longer_exists"]
    (out / "train.json").write_text(json.dumps(meta))
    summary = dataset.add_executable_features(out, tmp_path / "fresh", log=lambda *_: None)
    assert summary["train"]["left_out"] == {"the patterns changed since the build": 1}
    assert summary["train"]["programs"] == len(meta["programs"]) - 1


def test_executable_groups_share_a_label_and_the_original_is_group_zero():
    info = lambda fp: {"strategy_info": json.dumps({"fingerprint": fp, "original_fingerprint": "o"})}  # noqa: E731
    rows = [info("a"), info("o"), info("b"), info("a"), {"strategy_info": None}, info("o")]
    assert dataset._executable_groups(rows) == [1, 0, 2, 1, 3, 0]


def test_noise_of_is_the_median_deviation_from_one():
    assert dataset.noise_of([1.0, 1.02, 0.95]) == pytest.approx(0.02)
    assert math.isnan(dataset.noise_of([]))


@pytest.mark.parametrize("version", ["learned-v1", "learned-v2", "learned-v3", "learned-v4", "learned-v5",
                                     "learned-v6", "learned-v7"])
def test_shipped_export_loads(version):
    from pathlib import Path

    data = Path(__file__).parent.parent / "data" / version
    split = dataset.load(data, "test")
    assert len(split) > 0 and split.num_candidates == sum(p["num_candidates"] for p in split.programs)
    assert set(p["source"] for p in split.programs).isdisjoint(
        p["source"] for p in dataset.load(data, "train").programs)
    c = split.candidates(0)
    # every candidate has its executable's features; one executable, one vector
    if version in ("learned-v5", "learned-v6", "learned-v7"):
        from shlo_env.learn import hlo_features

        a = split.arrays
        before_narrow = [f for f in hlo_features.FEATURES if f != "narrow_dot_flops"]  # v5 and v6 predate it
        want = list(hlo_features.FEATURES) if version == "learned-v7" else before_narrow
        assert split.meta["exe_features"] == want
        assert np.isfinite(a["cand_exe"]).all() and np.isfinite(a["orig_exe"]).all()
        for p in range(len(split)):
            c = split.candidates(p)
            assert np.array_equal(c["exe"][c["group"] == 0], np.repeat(a["orig_exe"][p:p + 1], (c["group"] == 0).sum(), 0))
    if version in ("learned-v3", "learned-v4", "learned-v5", "learned-v6", "learned-v7"):  # one label per executable, pooled over several rounds; the original's is 1.0
        a = split.arrays
        assert np.isfinite(a["prog_noise"]).all()
        assert np.all(a["cand_ratio"][a["cand_group"] == 0] == 1.0)
        assert np.all(a["cand_rounds"][a["cand_group"] != 0] >= 2)
        for p in range(len(split)):
            c = split.candidates(p)
            assert all(len(np.unique(c["ratio"][c["group"] == g])) == 1 for g in np.unique(c["group"]))
    elif version == "learned-v2":  # the label noise is recorded: every program's, and re-times where timed
        assert np.isfinite(split.arrays["prog_noise"]).all()
        timed = ~split.arrays["cand_same_executable"]
        assert np.isfinite(split.arrays["cand_confirm_ratio"][timed]).all()
    else:
        assert np.isnan(c["confirm_ratio"]).all() and np.isnan(c["noise"]).all()



def test_learned_v6_is_v5_with_more_programs_of_the_same_sources():
    """v6 = v5 merged with a later build: every v5 program kept as it was, each source in the
    split it was in (the split is a hash of the source), so the held-out test sources stay held out."""
    from pathlib import Path

    data = Path(__file__).parent.parent / "data"
    for s in dataset.SPLITS:
        old, new = dataset.load(data / "learned-v5", s), dataset.load(data / "learned-v6", s)
        assert [p["uri"] for p in new.programs[:len(old)]] == [p["uri"] for p in old.programs]
        assert len(new) > len(old) and {p["source"] for p in new.programs} == {p["source"] for p in old.programs}
        assert np.array_equal(new.arrays["cand_ratio"][:old.num_candidates], old.arrays["cand_ratio"])

def test_learned_v7_is_v6_with_the_narrow_dot_feature():
    """v7 = `dataset exe-features` of v6 under the feature list that added `narrow_dot_flops`:
    the same programs and labels, and the same values of the other features (XLA compiled 15
    of the 9598 candidates a little differently the second time)."""
    from pathlib import Path

    from shlo_env.learn import hlo_features

    data = Path(__file__).parent.parent / "data"
    keep = [i for i, f in enumerate(hlo_features.FEATURES) if f != "narrow_dot_flops"]
    differ = 0
    for s in dataset.SPLITS:
        old, new = dataset.load(data / "learned-v6", s), dataset.load(data / "learned-v7", s)
        assert [p["uri"] for p in new.programs] == [p["uri"] for p in old.programs]
        assert np.array_equal(new.arrays["cand_ratio"], old.arrays["cand_ratio"])
        same = np.isclose(new.arrays["cand_exe"][:, keep], old.arrays["cand_exe"], rtol=1e-6).all(axis=1)
        differ += int((~same).sum())
    assert differ <= 15


def test_merge_joins_exports_and_keeps_each_program_once(built, tmp_path):
    from pathlib import Path

    tmp, db, _, _ = built
    shipped = Path(__file__).parent.parent / "data" / "learned-v7"
    odd = tmp / "export_odd_fractions"
    dataset.export(odd, db_path=db, fractions=(0.34, 0.33, 0.33))
    with pytest.raises(dataset.DatasetError):  # other split fractions: the splits would disagree
        dataset.merge(tmp_path / "bad", [shipped, odd])
    with pytest.raises(dataset.DatasetError, match="feature lists"):  # v6 predates narrow_dot_flops
        dataset.merge(tmp_path / "bad", [shipped, Path(__file__).parent.parent / "data" / "learned-v6"])
    mine = tmp / "export_default"
    dataset.export(mine, db_path=db)
    merged = tmp_path / "merged"
    dataset.merge(merged, [mine, shipped, shipped])  # the repeated export adds nothing
    for s in dataset.SPLITS:
        parts = [dataset.load(mine, s), dataset.load(shipped, s)]
        out = dataset.load(merged, s)
        uris = [p["uri"] for p in out.programs]
        assert len(uris) == len(set(uris)) == len({p["uri"] for part in parts for p in part.programs})
        assert out.num_candidates == sum(p["num_candidates"] for p in out.programs)
        for q, uri in enumerate(uris):  # each program is the first export's copy of it, intact
            part = next(x for x in parts if any(p["uri"] == uri for p in x.programs))
            p = next(i for i, x in enumerate(part.programs) if x["uri"] == uri)
            c, d = part.candidates(p), out.candidates(q)
            for k in ("decisions", "ratio", "group", "live", "tier", "exe"):
                assert np.array_equal(c[k], d[k], equal_nan=k == "exe"), (s, uri, k)
            for k in ("node_features", "node_opcode"):
                a, b = part.arrays, out.arrays
                assert np.array_equal(a[k][a["node_offsets"][p]:a["node_offsets"][p + 1]],
                                      b[k][b["node_offsets"][q]:b["node_offsets"][q + 1]])
            assert np.array_equal(part.arrays["edge_src"][part.arrays["edge_offsets"][p]:part.arrays["edge_offsets"][p + 1]],
                                  out.arrays["edge_src"][out.arrays["edge_offsets"][q]:out.arrays["edge_offsets"][q + 1]])
            assert part.arrays["prog_noise"][p] == out.arrays["prog_noise"][q]
