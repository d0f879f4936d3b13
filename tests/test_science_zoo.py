"""The scientific zoo: programs from diffrax, numpyro, blackjax, jax-md, jaxopt, optimistix,
lineax and plain jax, stored as StableHLO (shlo_env/zoo/science/), the `science` dataset."""

from __future__ import annotations

import numpy as np
import pytest

from shlo_env import corpus
from shlo_env.corpus import CorpusError
from shlo_env.execute import runtime
from shlo_env.ir.hashing import dag_hash
from shlo_env.zoo import science

LIBRARIES = {"diffrax", "numpyro", "blackjax", "jax-md", "jaxopt", "optimistix", "lineax", "jax"}
KINDS = {"simulation", "gradient", "sampler_step", "log_density", "optimization", "solve", "filter", "train_step"}


@pytest.fixture(scope="module")
def entries():
    return science.entries()


def test_science_is_a_dataset_of_its_own(entries):
    from shlo_env.bench.datasets import dataset_label

    assert "science" in corpus.datasets() and dataset_label("science") == "science"
    assert [e.uri for e in corpus.entries("science")] == [e.uri for e in entries]
    assert all(e.uri == f"science/{e.name}" for e in entries)
    others = {e.name for d in ("corpus", "zoo") for e in corpus.entries(d)}
    assert not {e.name for e in entries} & others
    assert (science.DATA / "index.json").is_file() and science.DATA != corpus.ZOO_DATA


def test_composition_and_metadata(entries):
    assert len(entries) >= 15 and len({e.name for e in entries}) == len(entries)
    for e in entries:
        m = e.metadata
        assert m["library"] in LIBRARIES and m["library_version"], e.name
        assert m["kind"] in KINDS and m["training"] == (m["kind"] == "train_step"), e.name
        assert m["description"] and isinstance(m["config"], dict) and m["config"], e.name
        assert m["ops"] > 0 and m["in_specs"] and m["out_specs"] and m["runtime_ms"] > 0, e.name
        assert m["jax"] and m["dag_hash"] and (science.DATA / m["file"]).is_file(), e.name
        assert all(version for version in m["uses"].values()), e.name
        # A file cannot hold a host callback: equinox's checks were turned off (and recorded) instead.
        assert not [c for c in m["custom_calls"] if "callback" in c], e.name
        assert isinstance(m["host_callbacks_removed"], bool), e.name
        assert isinstance(m["finite_outputs"], bool), e.name
        assert m["finite_outputs"] or m["nonfinite_reason"], e.name
        assert m["bytes"] < 150_000, e.name
    libraries = {e.metadata["library"] for e in entries}
    assert {"diffrax", "numpyro", "blackjax", "jax-md", "jaxopt"} <= libraries
    assert libraries & {"optimistix", "lineax"}
    assert {e.metadata["kind"] for e in entries} >= {"simulation", "gradient", "sampler_step", "optimization",
                                                     "solve", "filter"}
    assert sum(e.metadata["ops"] >= 1000 for e in entries) >= 5  # several real-size programs
    assert any(e.metadata["host_callbacks_removed"] for e in entries)  # diffrax/optimistix carry eqx checks
    assert sum(e.metadata["has_while"] for e in entries) >= 10  # loops are what this dataset is about
    versions = science.info()["versions"]
    assert versions["jax"] and versions["diffrax"] and versions["numpyro"]


def test_every_program_parses_as_stored(entries):
    for e in entries:
        p = corpus.load(e.uri)
        assert p.example_args is None
        assert [list(s.shape) for s in p.in_specs] == [s["shape"] for s in e.metadata["in_specs"]], e.name
        assert [np.dtype(s.dtype).name for s in p.out_specs] == [s["dtype"] for s in e.metadata["out_specs"]]
        assert p.num_ops() == e.metadata["ops"], e.name
    small = min(entries, key=lambda e: e.metadata["ops"])
    assert dag_hash(science.load(small.name)) == small.metadata["dag_hash"]


def test_the_smallest_run_with_finite_outputs(entries):
    # Every program is compiled and run when the dataset is generated; here the three smallest of
    # different libraries, in this process through the runtime, on N(0,1) random inputs.
    picks, seen = [], set()
    for e in sorted(entries, key=lambda e: e.metadata["ops"]):
        if e.metadata["library"] not in seen and e.metadata["finite_outputs"] and len(picks) < 3:
            seen.add(e.metadata["library"])
            picks.append(e)
    assert len(picks) == 3
    for e in picks:
        p = science.load(e.name)
        outs = runtime.execute(runtime.compile(p), runtime.random_inputs(p.in_specs, 0))
        assert [o.shape for o in outs] == [tuple(s["shape"]) for s in e.metadata["out_specs"]], e.name
        for o in outs:
            if np.issubdtype(o.dtype, np.inexact):
                assert np.isfinite(o).all(), e.name


def test_bench_loads_science():
    from shlo_env.bench.datasets import load_items

    items = load_items("science", limit=2, seed=0)
    assert len(items) == 2 and all(i.dataset == "science" and i.uri.startswith("science/") for i in items)
    assert all(i.info["metadata"]["library"] in LIBRARIES for i in items)


def test_unknown_science_program_is_a_clear_error():
    with pytest.raises(CorpusError, match="no program 'nope' in science"):
        science.load("nope")
