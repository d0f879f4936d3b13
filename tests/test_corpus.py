"""The embedded corpus and the inst-10-20 / inst-20-40 sub-graph datasets."""

from __future__ import annotations

import random
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest
from jaxlib.mlir import ir

from shlo_env import corpus
from shlo_env.execute import runtime
from shlo_env.corpus import CorpusError
from shlo_env.corpus.subgraphs import Extractor, size_of
from shlo_env.ir.hashing import dag_hash
from shlo_env.ir.program import lower, save
from shlo_env.execute.worker import Worker


def test_datasets_listed():
    assert corpus.datasets()[:3] == ["corpus", "inst-10-20", "inst-20-40"]


def test_corpus_composition():
    es = corpus.entries("corpus")
    assert len(es) >= 30
    libraries = {e.metadata["library"].split(".")[0] for e in es}
    assert {"flax", "equinox", "optax"} <= libraries and len(libraries) >= 3
    assert sum(e.metadata["training"] for e in es) >= 8
    assert len({e.name for e in es}) == len(es)
    for e in es:
        m = e.metadata
        assert e.uri == f"corpus/{e.name}"
        assert m["library_version"] and m["ops"] > 0 and m["in_specs"] and m["description"]
        assert m["kind"] in ("train_step", "optimizer_update", "inference", "simulation")
    workloads = " ".join(e.name for e in es)
    for required in ("cartpole", "nbody", "gp_", "pinn", "siren", "ddpm", "attn_", "gnn"):
        assert required in workloads


@pytest.mark.parametrize("dataset,minimum", [("inst-10-20", 1000), ("inst-20-40", 300)])
def test_subgraph_dataset_sizes(dataset, minimum):
    es = corpus.entries(dataset)
    assert len(es) >= minimum
    lo, hi = corpus.SUBGRAPH_DATASETS[dataset]
    assert all(lo <= e.metadata["ops"] <= hi for e in es)
    # Deduplicated by DAG hash (as computed when the dataset was generated).
    assert len({e.metadata["dag_hash"] for e in es}) == len(es)
    info = corpus.index_info(dataset)
    assert info["count"] == len(es)
    assert info["validated"] - sum(info["dropped"].values()) == len(es)


def _sample(dataset: str, k: int = 10) -> list[corpus.Entry]:
    es = corpus.entries(dataset)
    if dataset == "corpus":  # the quickest to compile, plus a random few
        small = sorted(es, key=lambda e: e.metadata["ops_total"])[:5]
        rest = [e for e in es if e not in small]
        return small + random.Random(0).sample(rest, k - len(small))
    return random.Random(0).sample(es, k)


def test_samples_compile_and_run():
    with Worker(timeout_s=120) as worker:
        for dataset in [d for d in corpus.datasets() if d not in (corpus.ZOO, corpus.SCIENCE)]:  # test_zoo.py and
            # test_science_zoo.py run those
            for e in _sample(dataset):
                p = corpus.load(e.uri)
                assert p.example_args is None
                assert [list(s.shape) for s in p.in_specs] == [s["shape"] for s in e.metadata["in_specs"]]
                worker.set_inputs("x", runtime.random_inputs(p.in_specs, 0))
                outs = worker.run(p.text(), "x")
                assert len(outs) == len(p.out_specs), e.uri
                assert [o.shape for o in outs] == [tuple(s.shape) for s in p.out_specs]
                if dataset != "corpus":
                    assert size_of(p) == e.metadata["ops"]


def test_load_by_uri_name_and_index():
    p = corpus.load("corpus/linen_mlp_train")
    assert p.name == "linen_mlp_train" and p.source == "corpus/linen_mlp_train"
    assert [list(s.shape) for s in p.out_specs] == [
        s["shape"] for s in corpus.resolve("corpus/linen_mlp_train").metadata["out_specs"]]
    first = corpus.entries("inst-20-40")[0]
    by_index = corpus.load("inst-20-40/0")
    by_name = corpus.load(f"inst-20-40/{first.name}")
    assert by_index.name == by_name.name == first.name
    assert dag_hash(by_index) == dag_hash(by_name) == dag_hash(first.load())
    assert corpus.load("inst-10-20/3").name == corpus.entries("inst-10-20")[3].name


@pytest.mark.parametrize("uri,message", [
    ("nope/linen_mlp_train", "unknown dataset 'nope'"),
    ("corpus/no_such_program", "no program 'no_such_program' in corpus"),
    ("inst-10-20/999999", "out of range"),
    ("corpus", "names a dataset"),
    ("missing/file.mlir", "no such file"),
])
def test_bad_uri_is_a_clear_error(uri, message):
    with pytest.raises(CorpusError, match=message):
        corpus.load(uri)


def test_bad_dataset_is_a_clear_error():
    with pytest.raises(CorpusError, match="unknown dataset 'inst-5-10'"):
        corpus.entries("inst-5-10")


def test_load_dir(tmp_path):
    a = lower(lambda x, w: jnp.tanh(x @ w), np.ones((4, 8), np.float32), np.ones((8, 3), np.float32))
    b = lower(lambda x: jnp.sum(x * 2.0), np.ones((5,), np.float32))
    save(a, tmp_path / "a.mlir")
    save(b, tmp_path / "b.mlirbc")
    (tmp_path / "notes.txt").write_text("not a program")
    es = corpus.entries(tmp_path)
    assert [e.name for e in es] == ["a", "b"]
    assert corpus.entries(str(tmp_path)) == es
    assert dag_hash(corpus.load(es[0].uri)) == dag_hash(a)
    assert dag_hash(es[1].load()) == dag_hash(b)
    with pytest.raises(CorpusError, match="is a directory"):
        corpus.load(tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusError, match="no .mlir"):
        corpus.load_dir(tmp_path / "empty")


def test_loading_needs_no_model_libraries():
    code = ("import sys, shlo_env.corpus as c; c.load('corpus/linen_mlp_train'); c.load('inst-10-20/0'); "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('flax', 'equinox', 'optax')]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_extracted_cut_computes_what_the_original_does():
    def f(x, w, b):
        h = jnp.tanh(x @ w + b) * 2.0
        return jnp.sum(h * h, axis=-1) + 1.0

    args = [np.random.default_rng(0).standard_normal(s).astype(np.float32) for s in ((4, 8), (8, 6), (6,))]
    prog = lower(f, *args)
    ex = Extractor(prog)
    whole = ex.build({i for i, ok in enumerate(ex.eligible) if ok})
    # Every constant stays a constant: the parameters are exactly the three arguments.
    assert [tuple(s.shape) for s in whole.in_specs] == [(4, 8), (8, 6), (6,)]
    expect = runtime.execute(runtime.compile(prog), args)
    got = runtime.execute(runtime.compile(whole), args)
    np.testing.assert_allclose(got[0], expect[0], rtol=1e-6)


def test_random_cuts_are_connected_convex_and_in_range():
    prog = corpus.load("corpus/linen_transformer_lm")
    ex = Extractor(prog)
    rng = random.Random(1)
    for _ in range(20):
        sg = ex.sample(rng, 10, 20)
        assert sg is not None
        assert 10 <= size_of(sg.program) == sg.size <= 20
        assert sg.program.module.operation.verify()
        body = sg.program.body
        ops = [o.operation for o in body.operations
               if o.operation.name not in ("func.return", "stablehlo.constant")]
        # Connected: every op reaches the first through operand/user edges.
        component, stack = {ops[0]}, [ops[0]]
        while stack:
            op = stack.pop()
            near = [v.owner for v in op.operands if isinstance(v, ir.OpResult)]
            near += [u.owner for r in op.results for u in r.uses]
            for n in near:
                n = n.operation if hasattr(n, "operation") else n
                if n in ops and n not in component:
                    component.add(n)
                    stack.append(n)
        assert len(component) == len(ops)
        # Constants read by the cut are copied in, never left dangling.
        consts = [o for o in body.operations if o.operation.name == "stablehlo.constant"]
        assert all(next(iter(c.results[0].uses), None) is not None for c in consts)
