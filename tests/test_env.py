"""The research interface `shlo_env.research.env.Env`: sources, augment/apply, evaluation, pickling."""

import os
import pickle

import jax.numpy as jnp
import numpy as np
import pytest

from shlo_env.rewrite import driver
from shlo_env.research.env import Env, EnvError, hlo_cost, looks_like_uri, resolve_program
from shlo_env.ir.hashing import dag_hash
from shlo_env.ir.program import ProgramError, lower, save
from shlo_env.measure.numerics import Numerics


def matmul_chain(A, B, v):
    return (A @ B) @ v


def other_chain(A, B, v):  # same signature, different function
    return (A @ B) @ v + 1.0


def low_rank_update(x, W, A, B):
    return x @ (W + A @ B)


def _chain_args(rng):
    return [rng.standard_normal(s).astype(np.float32) for s in ((32, 32), (32, 32), (32, 1))]


@pytest.fixture
def env(rng):
    e = Env(matmul_chain, *_chain_args(rng), isolate=False)
    yield e
    e.close()


def test_sources_agree(tmp_path, rng):
    args = _chain_args(rng)
    ref = Env(matmul_chain, *args, isolate=False)
    h = ref.hash()
    text_path = save(ref.original, tmp_path / "chain.mlir")
    bc_path = save(ref.original, tmp_path / "chain.mlirbc")
    for source in (ref.original, str(text_path), text_path, bc_path, ref.original.text(),
                   ref.original.bytecode()):
        e = Env(source, isolate=False)
        assert e.hash() == h, source
        assert e.uri is None
    assert ref.original.example_args is not None  # from a function: its args are example inputs


def test_bad_sources(rng):
    with pytest.raises(TypeError, match="only for a function"):
        Env(lower(matmul_chain, *_chain_args(rng)), 1, 2)
    with pytest.raises(TypeError, match="cannot make a program"):
        Env(3.5)
    with pytest.raises(ProgramError):
        Env("/no/such/file.mlir")
    assert looks_like_uri("inst-10-20/3") and looks_like_uri("corpus/linen_mlp_train")
    assert not looks_like_uri("prog.mlir") and not looks_like_uri("module {\n}")


def test_corpus_uri_when_present():
    corpus = pytest.importorskip("shlo_env.corpus")
    try:
        entries = corpus.entries("corpus")
    except LookupError as e:
        pytest.skip(f"corpus data not generated: {e}")
    uri = entries[0].uri
    e = Env(uri, isolate=False)
    assert e.uri == uri
    assert e.hash() == dag_hash(corpus.load(uri))


def test_augment_apply_history(env):
    h0 = env.hash()
    g = env.augment(["reassociate_left_to_right"])
    assert g.num_alternatives == 1 and env.augmented
    assert env.hash() != h0  # alternatives ops are part of the state
    with pytest.raises(EnvError, match="already has alternatives"):
        env.augment()
    prog = env.apply([1])
    assert not env.augmented and prog is env.program
    assert prog.applied == ("reassociate_left_to_right",)
    assert Numerics(prog.numerics) == Numerics.REASSOCIATE
    assert env.history[-1].decisions == [1] and env.history[-1].hash == env.hash()
    assert env.history[-1].labels == ["reassociate_left_to_right"]
    # {index: choice} form, and the reset
    env.reset()
    assert env.hash() == h0 and env.history == []
    env.augment(["reassociate_left_to_right"])
    env.apply({0: 0})
    assert env.hash() == h0  # keeping the original is the identity


def test_strip_and_current(env):
    h0 = env.hash()
    env.augment()
    assert dag_hash(env.current()) == h0  # pending alternatives count as originals
    assert env.augmented  # current() does not change the state
    env.strip()
    assert env.hash() == h0 and not env.augmented


def test_clone_is_independent(env):
    env.augment()
    twin = env.clone()
    assert twin.hash() == env.hash()
    twin.apply([1] * len(twin.alternatives()))
    assert twin.hash() != env.hash() and env.augmented
    assert twin.original.in_tree == env.original.in_tree


def test_export_round_trip(env, tmp_path):
    env.augment()
    for name in ("state.mlir", "state.mlirbc"):
        path = env.export(tmp_path / name)
        again = Env(path, isolate=False)
        assert again.hash() == env.hash()  # alternatives ops survive the file
        assert len(again.alternatives()) == len(env.alternatives())


def test_pickle_round_trip(env):
    env.augment()
    env.apply([1] * len(env.alternatives()))
    env.augment()
    env.cost()
    data = pickle.dumps(env)
    back = pickle.loads(data)
    assert back.hash() == env.hash()
    assert dag_hash(back.original) == dag_hash(env.original)
    assert back.history == env.history
    assert back.original.in_tree == env.original.in_tree and back.original.out_tree == env.original.out_tree
    assert [np.array_equal(a, b) for a, b in zip(back.original.example_args, env.original.example_args)]
    assert back.program.applied == env.program.applied and back.program.numerics == env.program.numerics
    assert back._costs == env._costs
    # and it still works: decide, check
    back.apply([1] * len(back.alternatives()))
    assert back.is_equivalent().ok


def test_is_equivalent(env, rng):
    env.augment()
    env.apply([1] * len(env.alternatives()))
    eq = env.is_equivalent()
    assert eq.ok and eq.tier == Numerics.REASSOCIATE and eq.input_sets == 3
    assert eq.max_error <= eq.bound and "equivalent" in str(eq)
    # against a different program with the same signature
    other = lower(other_chain, *_chain_args(rng))
    neq = env.is_equivalent(other)
    assert not neq.ok and "mismatch" in neq.detail and "NOT equivalent" in str(neq)
    # the Env's own check still uses its original afterwards
    assert env.is_equivalent().ok
    # a tier that is too strict for a reassociation fails
    assert not env.is_equivalent(tier=Numerics.EXACT).ok


def test_costs(env):
    base = env.cost(optimized=False)
    assert set(base) >= {"flops", "bytes"} and base["flops"] > 0
    assert hlo_cost(env.original.text()) == base
    env.augment(["reassociate_left_to_right"])
    env.apply([1])
    after = env.cost(optimized=False)
    assert after["flops"] < base["flops"] / 10  # (A@B)@v -> A@(B@v)
    compiled = env.cost()
    assert compiled["flops"] < base["flops"]


def test_evaluate_and_baseline_in_a_worker(rng):
    with Env(low_rank_update, *[rng.standard_normal(s).astype(np.float32)
                                for s in ((8, 64), (64, 64), (64, 8), (8, 64))]) as env:
        t = env.evaluate(5, warmup=1)
        assert t.runs == 5 and 0 < t.async_ <= t.full and t.compute is None  # CPU: no device time
        assert env.worker.pid is not None and env.worker.pid != os.getpid()
        b = env.baseline(5, warmup=1)
        assert env.baseline(5, warmup=1) is b  # cached
        env.augment()
        env.apply([1] * len(env.alternatives()))
        assert env.speedup(5, warmup=1) > 0
        assert env.is_equivalent().ok


def test_resolve_program_copies(rng):
    p = lower(matmul_chain, *_chain_args(rng))
    q, uri = resolve_program(p)
    assert q is not p and q.module is not p.module and uri is None
    driver.augment(q, inplace=True)
    assert dag_hash(p) != dag_hash(q)


def test_env_on_function_with_pytree_args(rng):
    def f(params, x):
        return jnp.tanh(x @ params["w"]) @ params["v"]

    params = {"w": rng.standard_normal((16, 16)).astype(np.float32),
              "v": rng.standard_normal((16, 4)).astype(np.float32)}
    env = Env(f, params, rng.standard_normal((8, 16)).astype(np.float32), isolate=False)
    assert len(env.original.in_specs) == 3
    env.augment()
    env.apply([1] * len(env.alternatives()))
    assert env.is_equivalent().ok
