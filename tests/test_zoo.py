"""The zoo: third-party library models stored as StableHLO (shlo_env/zoo/), a bench dataset."""

from __future__ import annotations

import numpy as np
import pytest

from shlo_env import corpus, zoo
from shlo_env.execute import runtime
from shlo_env.corpus import CorpusError
from shlo_env.ir.hashing import dag_hash
from shlo_env.execute.worker import Worker

LIBRARIES = {"transformers", "flax.linen", "flax.nnx", "haiku", "equinox", "jraph", "keras"}


@pytest.fixture(scope="module")
def entries():
    return zoo.entries()


def test_zoo_is_a_dataset_apart_from_the_corpus(entries):
    from shlo_env.bench.datasets import dataset_label

    assert "zoo" in corpus.datasets() and dataset_label("zoo") == "zoo"
    assert all(e.uri == f"zoo/{e.name}" for e in entries)
    assert not {e.name for e in entries} & {e.name for e in corpus.entries("corpus")}
    assert zoo.DATA != corpus.DATA / "corpus" and (zoo.DATA / "index.json").is_file()


def test_composition_and_metadata(entries):
    assert len(entries) >= 20 and len({e.name for e in entries}) == len(entries)
    for e in entries:
        m = e.metadata
        assert m["library"] in LIBRARIES, e.name
        assert m["library_version"], e.name
        assert m["kind"] in ("inference", "train_step") and m["training"] == (m["kind"] == "train_step")
        assert m["description"] and isinstance(m["config"], dict) and m["config"], e.name
        assert m["ops"] > 0 and m["in_specs"] and m["out_specs"] and m["runtime_ms"] > 0, e.name
        assert m["jax"] and m["dag_hash"] and (zoo.DATA / m["file"]).is_file(), e.name
        for dist, version in m["uses"].items():
            assert version, (e.name, dist)
    libraries = {e.metadata["library"] for e in entries}
    assert {"transformers", "haiku", "equinox", "jraph", "keras"} <= libraries
    assert libraries & {"flax.linen", "flax.nnx"}
    kinds = [e.metadata["kind"] for e in entries]
    assert kinds.count("train_step") >= 8 and kinds.count("inference") >= 8
    ops = sorted(e.metadata["ops"] for e in entries)
    assert ops[0] <= 300 and ops[-1] >= 3000  # spans small to real-model scale
    assert all(200 <= n <= 5000 for n in ops)
    versions = zoo.info()["versions"]
    assert versions["transformers"].startswith("4.") and versions["jax"]


def test_parameters_are_inputs_not_constants(entries):
    # Weights stored as constants would make the files large; parameters are module inputs.
    for e in entries:
        assert e.metadata["bytes"] < 150_000, (e.name, e.metadata["bytes"])
        assert len(e.metadata["in_specs"]) >= 10, e.name


def test_every_program_parses_as_stored(entries):
    for e in entries:
        p = corpus.load(e.uri)
        assert p.example_args is None
        assert [list(s.shape) for s in p.in_specs] == [s["shape"] for s in e.metadata["in_specs"]], e.name
        assert [np.dtype(s.dtype).name for s in p.out_specs] == [s["dtype"] for s in e.metadata["out_specs"]]
        assert p.num_ops() == e.metadata["ops"], e.name
    small = min(entries, key=lambda e: e.metadata["ops"])
    assert dag_hash(zoo.load(small.name)) == small.metadata["dag_hash"]


def test_a_few_compile_and_run(entries):
    # The quickest inference program and train step of three libraries (all are compiled and run
    # when the zoo is generated; compiling all here would take minutes).
    picks, seen = [], set()
    for e in sorted(entries, key=lambda e: e.metadata["ops"]):
        key = (e.metadata["library"].split(".")[0], e.metadata["kind"])
        if key not in seen and len(picks) < 4 and e.metadata["ops"] < 1500:
            seen.add(key)
            picks.append(e)
    assert {e.metadata["kind"] for e in picks} == {"inference", "train_step"}
    with Worker(timeout_s=120) as worker:
        for e in picks:
            p = corpus.load(e.uri)
            worker.set_inputs("x", runtime.random_inputs(p.in_specs, 0))
            outs = worker.run(p.text(), "x")
            # Shapes only: random inputs put negative values in variances and optimizer moments.
            assert [o.shape for o in outs] == [tuple(s["shape"]) for s in e.metadata["out_specs"]], e.name


def test_bench_loads_the_zoo():
    from shlo_env.bench.datasets import load_items

    items = load_items("zoo", limit=2, seed=0)
    assert len(items) == 2 and all(i.dataset == "zoo" and i.uri.startswith("zoo/") for i in items)
    assert all(i.info["metadata"]["library"] in LIBRARIES for i in items)


def test_unknown_zoo_program_is_a_clear_error():
    with pytest.raises(CorpusError, match="no program 'nope' in zoo"):
        zoo.load("nope")


def test_oracle_actions_and_table(tmp_path):
    # benchmarks/oracle.py's pieces, without timing: the actions it builds and the table it prints.
    import os
    import sys
    import warnings

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    import oracle

    from shlo_env.rewrite import driver

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        aug = driver.augment(zoo.load("jraph_gat_infer"))
    actions = oracle.pattern_actions(aug, max_sites=2)
    every = [a for a in actions if a.kind == "all sites"]
    singles = [a for a in actions if a.kind == "one site"]
    assert every and singles
    for a in every:
        assert sum(1 for d in a.decisions if d) == a.sites
    assert all(sum(1 for d in a.decisions if d) == 1 for a in singles)
    assert all(sum(a.name == b.name for b in singles) <= 2 for a in singles)
    assert oracle.option_actions(approx=False)

    r = oracle.ProgramResult("p", "jax", "inference", 10, base_ms=2.0, floor_ms=1.0, control=[1.01, 0.99])
    paired = {"decision": "accept", "ratio": 0.85, "lower": 0.82, "upper": 0.88, "pairs": 40, "seconds": 3.0}
    win = oracle.Action("option", "x=1", options=("x=1",), status="timed", ratios=[0.8, 0.9, 0.85], paired=paired)
    lucky = oracle.Action("option", "y=1", options=("y=1",), status="timed", ratios=[0.7, 0.7, 0.7],
                          paired=dict(paired, decision="reject", ratio=0.99, lower=0.97, upper=1.01))
    r.actions, r.confirmed = [lucky, win], [lucky.label, win.label]
    assert r.best() is win and r.best_ratio() == 0.85 and r.t_over_floor == 2.0  # the rejected one is not
    csv_path = tmp_path / "bench.csv"
    csv_path.write_text("name,ratio\np,0.9\n")
    row = oracle.table([r], oracle.read_bench_csv(str(csv_path))).splitlines()[-1]
    assert "| 0.850 | accept 0.850 (0.820-0.880) |" in row and row.endswith("| 0.900 | 67% |")
    again = oracle.ProgramResult.from_dict(r.as_dict())
    assert again.best().label == win.label and again.best_ratio() == 0.85
    r.actions = [lucky]  # nothing accepted: no oracle gain, no share
    row = oracle.table([r], oracle.read_bench_csv(str(csv_path))).splitlines()[-1]
    assert "| 1.000 | reject 0.990" in row and "(not accepted)" in row and row.endswith("| 0.900 | - |")
