"""Host callbacks and ordered effects (issue 48, item 1): searched around, delivered working.

A program with `jax.debug.callback`, `jax.debug.print`, `jax.pure_callback`,
`jax.experimental.io_callback` or `eqx.error_if` is searched with its callbacks cut out
(`shlo_env.ir.effects`), and the winner is compiled by jax from the user's own lowering with the
stitched module swapped in (`shlo_env.api.effects`): the user's callbacks fire once per call,
in order, and never during the search; the worker never runs them (it refuses, it does not
crash)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import io_callback

import shlo_env as se
from shlo_env.execute.runners import CandidateError, FailureKind
from shlo_env.execute.worker import Worker
from shlo_env.ir import effects

BUDGET = 20  # as tests/test_jit.py: the colsum rewrite is found in a few seconds


@pytest.fixture(scope="module")
def XW():
    rng = np.random.default_rng(0)
    return rng.standard_normal((512, 256)).astype(np.float32), rng.standard_normal((256, 256)).astype(np.float32)


def _colsum_with_callback(calls):
    def colsum_cb(X, W):
        jax.debug.callback(lambda s: calls.append(float(s)), jnp.sum(X[0]))
        return jnp.sum(X @ W, axis=0)
    return colsum_cb


def test_callback_program_is_searched_and_delivered_with_its_callback(XW):
    X, W = XW
    calls: list[float] = []
    fn = _colsum_with_callback(calls)
    fast = se.optimize(fn, X, W, budget_s=BUDGET, cache=False)
    jax.effects_barrier()
    r = fast.report
    assert not calls, "the user's callback fired during the search"
    assert not r.returned_original and "reduce_through_dot" in r.applied, str(r)
    assert r.candidates_evaluated > 0 and r.ratio < 0.9, str(r)
    y = fast(X, W)
    jax.effects_barrier()
    assert len(calls) == 1 and calls[0] == pytest.approx(float(np.sum(X[0])), rel=1e-5)
    np.testing.assert_allclose(np.asarray(y), np.sum(X @ W, axis=0), rtol=1e-4, atol=1e-2)
    # the delivered module still holds the one callback, unchanged
    assert effects.side_effect_sequence(fast.stitched) == effects.side_effect_sequence(
        effects.lower_inlined(fn, X, W)[1])
    fast(X, W), fast(X, W)
    jax.effects_barrier()
    assert len(calls) == 3  # once per call
    # under transformations and for other shapes: jax.jit(fn) itself, callback included
    calls.clear()
    g = jax.grad(lambda X: jnp.sum(fast(X, W)))(X)
    np.testing.assert_allclose(np.asarray(g), np.broadcast_to(W.sum(axis=1), X.shape), rtol=1e-4, atol=1e-4)
    fast(X[:8], W)
    jax.effects_barrier()
    assert len(calls) == 2


def test_the_worker_refuses_a_callback_program_instead_of_crashing():
    def f(x):
        jax.debug.callback(lambda v: None, x)
        return x * 2

    lowered, module = effects.lower_inlined(f, np.ones(4, np.float32))
    text = str(module.operation.get_asm())
    with Worker(timeout_s=60) as w:
        w.set_inputs("x", [np.ones(4, np.float32)])
        with pytest.raises(CandidateError) as e:
            w.run(text, "x")
        assert e.value.kind == FailureKind.COMPILE and "host callbacks" in e.value.message
        assert w.run(str(se.lower(lambda x: x * 2, np.ones(4, np.float32)).module.operation.get_asm()), "x")[0][1] == 2


def test_ordered_io_callback_pure_callback_and_print_keep_their_order(capfd):
    log: list = []

    def f(x, w):
        y = io_callback(lambda a: (log.append(("io", float(a.sum()))), a * 2)[1],
                        jax.ShapeDtypeStruct(x.shape[:1], x.dtype), x[:, 0], ordered=True)
        z = jax.pure_callback(lambda a: (log.append(("pure", float(a.sum()))), a + 1)[1],
                              jax.ShapeDtypeStruct(y.shape, y.dtype), y)
        jax.debug.print("printed {s}", s=jnp.sum(z), ordered=True)
        return jnp.sum(x @ w, axis=0) + jnp.sum(z)

    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((64, 32)).astype(np.float32), rng.standard_normal((32, 32)).astype(np.float32)
    fast = se.optimize(f, x, w, budget_s=8, cache=False)
    jax.effects_barrier()
    assert not log, "callbacks fired during the search"
    capfd.readouterr()
    y = fast(x, w)
    jax.effects_barrier()
    assert [k for k, _ in log] == ["io", "pure"]
    assert log[0][1] == pytest.approx(float(x[:, 0].sum()), rel=1e-5)
    assert log[1][1] == pytest.approx(2 * float(x[:, 0].sum()), rel=1e-5)
    assert capfd.readouterr().out.count("printed") == 1
    want = np.sum(x @ w, axis=0) + np.sum(2 * x[:, 0] + 1)
    np.testing.assert_allclose(np.asarray(y), want, rtol=1e-4, atol=1e-3)
    # searched: candidates were evaluated around the three callbacks
    assert fast.report.candidates_evaluated > 0, str(fast.report)


def test_equinox_error_if_is_searched_and_still_raises():
    eqx = pytest.importorskip("equinox")

    def f(x, w):
        x = eqx.error_if(x, jnp.any(x > 100.0), "x too large")
        return jnp.sum(x @ w, axis=0)

    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((64, 32)).astype(np.float32), rng.standard_normal((32, 32)).astype(np.float32)
    fast = se.optimize(f, x, w, budget_s=8, cache=False)
    r = fast.report
    assert r.candidates_evaluated > 0, str(r)
    np.testing.assert_allclose(np.asarray(fast(x, w)), np.sum(x @ w, axis=0), rtol=1e-4, atol=1e-3)
    with pytest.raises(Exception, match="x too large"):
        jax.block_until_ready(fast(x + 1000.0, w))


def test_cut_and_stitch_keep_every_effect_in_place():
    def f(x):
        y = io_callback(lambda a: a * 2, jax.ShapeDtypeStruct(x.shape, x.dtype), x * 3, ordered=True)
        z = jax.pure_callback(lambda a: a + 1, jax.ShapeDtypeStruct(x.shape, x.dtype), y)
        jax.debug.print("{}", z)
        return z + 1, x

    _, module = effects.lower_inlined(f, np.ones(3, np.float32))
    c = effects.cut(module)
    assert c is not None and c.num_cut == 3
    assert not effects.has_host_callbacks(c.program) and "token" not in c.program.text()
    # what a callback reads is an output of the cut program; what one returns, an input
    assert len(c.program.in_specs) == 2 and len(c.program.out_specs) == 3
    stitched = c.stitch(c.program)
    assert effects.side_effect_sequence(stitched) == effects.side_effect_sequence(module)
    assert str(stitched.operation.get_asm()).count("!stablehlo.token") == str(module.operation.get_asm()).count(
        "!stablehlo.token")


def test_jit_with_a_callback_runs_the_winner_and_fires_the_callback(XW, tmp_path):
    X, W = XW
    calls: list[float] = []
    f = se.jit(_colsum_with_callback(calls), budget_s=BUDGET, cache=str(tmp_path))
    y = f(X, W)
    jax.effects_barrier()
    assert len(calls) == 1
    r = f.report(X, W)
    assert not r.returned_original and "reduce_through_dot" in r.applied, str(r)
    f(X, W)
    jax.effects_barrier()
    assert len(calls) == 2
    np.testing.assert_allclose(np.asarray(y), np.sum(X @ W, axis=0), rtol=1e-4, atol=1e-2)


@pytest.mark.slow
def test_the_issue_case_at_its_size_is_about_40x_faster_with_its_callback():
    """Issue 48's smallest case: X 4096x1024, W 1024x1024 (a call of jax.jit takes 0.2-0.4 s on
    2 shared cores, so the search needs a larger budget than the tests above)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((4096, 1024)).astype(np.float32)
    W = rng.standard_normal((1024, 1024)).astype(np.float32)
    calls: list[float] = []
    fast = se.optimize(_colsum_with_callback(calls), X, W, budget_s=60, cache=False)
    r = fast.report
    assert not r.returned_original and "reduce_through_dot" in r.applied and r.ratio < 0.2, str(r)
    jax.effects_barrier()
    assert not calls
    fast(X, W)
    jax.effects_barrier()
    assert len(calls) == 1


def test_a_python_scalar_argument_beside_a_callback():
    """The cut program's example inputs are cast as `lower` casts them (2.0 is a weak f32)."""
    seen: list[float] = []

    def scaled(x, w, s):
        jax.debug.callback(lambda v: seen.append(float(v)), s)
        return jnp.sum(x @ w, axis=0) * s

    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((64, 32)).astype(np.float32), rng.standard_normal((32, 32)).astype(np.float32)
    fast = se.optimize(scaled, x, w, 2.0, budget_s=6, cache=False)
    assert fast.report.candidates_evaluated > 0, str(fast.report)
    y = fast(x, w, 3.0)
    jax.effects_barrier()
    assert seen == [3.0]
    np.testing.assert_allclose(np.asarray(y), np.sum(x @ w, axis=0) * 3.0, rtol=1e-4, atol=1e-3)
