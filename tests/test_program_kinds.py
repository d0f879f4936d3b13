"""Every kind of program jax.jit accepts gets a search or a one-line reason, never an exception
(issue 48, item 5): tokens and ordered effects, custom_jvp/custom_vjp, sharded and multi-device
programs, 64-bit mode, dynamic (symbolic) shapes. Small programs, a few seconds each."""

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import io_callback

import shlo_env as se

BUDGET = 6


@pytest.fixture(scope="module")
def XW():
    rng = np.random.default_rng(0)
    return rng.standard_normal((64, 32)).astype(np.float32), rng.standard_normal((32, 32)).astype(np.float32)


def searched(report) -> bool:
    return report.candidates_evaluated > 0 or report.cache_hits > 0


def test_tokens_and_ordered_effects_are_searched_around(XW):
    X, W = XW
    seen: list[float] = []

    def f(X, W):
        s = io_callback(lambda v: (seen.append(float(v)), v)[1], jax.ShapeDtypeStruct((), X.dtype), jnp.sum(X),
                        ordered=True)
        return jnp.sum(X @ W, axis=0) * s

    opt = se.optimize(f, X, W, budget_s=BUDGET, cache=False)
    assert searched(opt.report), str(opt.report)
    seen.clear()
    np.testing.assert_allclose(np.asarray(opt(X, W)), np.sum(X @ W, axis=0) * np.sum(X), rtol=1e-3, atol=1e-2)
    assert len(seen) == 1


def test_custom_jvp_is_searched_and_its_rule_kept(XW):
    X, W = XW

    @jax.custom_jvp
    def softplus(x):
        return jnp.log1p(jnp.exp(x))

    @softplus.defjvp
    def _jvp(primals, tangents):
        return softplus(primals[0]), tangents[0] * 7.0  # a rule jax would not derive: it must be used

    def f(X, W):
        return jnp.sum(softplus(X) @ W)

    opt = se.optimize(f, X, W, budget_s=BUDGET, cache=False)
    assert searched(opt.report), str(opt.report)
    np.testing.assert_allclose(np.asarray(opt(X, W)), np.asarray(jax.jit(f)(X, W)), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(np.asarray(jax.grad(opt)(X, W)), np.asarray(jax.grad(f)(X, W)), rtol=1e-5)


def test_custom_vjp_is_searched_and_its_rule_kept(XW):
    X, W = XW

    @jax.custom_vjp
    def clip_gradient(x):
        return x

    clip_gradient.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -0.5, 0.5),))

    def f(X, W):
        return jnp.sum(clip_gradient(X) @ W)

    opt = se.optimize(f, X, W, budget_s=BUDGET, cache=False)
    assert searched(opt.report), str(opt.report)
    g = np.asarray(jax.grad(opt)(X, W))
    assert np.abs(g).max() <= 0.5 + 1e-6  # the custom rule, not plain autodiff
    np.testing.assert_allclose(g, np.asarray(jax.grad(f)(X, W)), rtol=1e-6)


def test_64_bit_mode_is_searched(XW):
    X, W = XW
    with jax.enable_x64(True):
        X64, W64 = X.astype(np.float64), W.astype(np.float64)

        def f(X, W):
            return jnp.sum(X @ W, axis=0)

        opt = se.optimize(f, X64, W64, budget_s=BUDGET, cache=False)
        assert searched(opt.report), str(opt.report)
        y = opt(X64, W64)
        assert y.dtype == np.float64
        np.testing.assert_allclose(np.asarray(y), np.sum(X64 @ W64, axis=0), rtol=1e-10)


def test_dynamic_shapes_get_a_reason_not_an_exception(XW):
    _, W = XW
    from jax import export

    (n,) = export.symbolic_shape("n")

    def f(X, W):
        return jnp.sum(X @ W, axis=0)

    opt = se.optimize(f, jax.ShapeDtypeStruct((n, 32), np.float32), W, budget_s=BUDGET, cache=False)
    r = opt.report
    assert r.returned_original and r.reason.startswith("not searched: dynamic shapes"), str(r)
    assert "\n" not in r.reason
    X = np.ones((5, 32), np.float32)
    np.testing.assert_allclose(np.asarray(opt(X, W)), np.sum(X @ W, axis=0), rtol=1e-5)


def test_a_single_device_sharding_is_searched(XW):
    X, W = XW
    sharding = jax.sharding.SingleDeviceSharding(jax.devices()[0])

    def f(X, W):
        return jnp.sum(jax.lax.with_sharding_constraint(X @ W, sharding), axis=0)

    opt = se.optimize(f, jax.device_put(X, sharding), W, budget_s=BUDGET, cache=False)
    assert searched(opt.report), str(opt.report)
    np.testing.assert_allclose(np.asarray(opt(X, W)), np.sum(X @ W, axis=0), rtol=1e-4, atol=1e-3)


def test_a_multi_device_program_gets_a_reason_and_runs_as_jax_jit(tmp_path):
    """Two CPU devices need XLA_FLAGS before jax starts: a child process."""
    script = textwrap.dedent("""
        import jax, jax.numpy as jnp, numpy as np, shlo_env as se
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        assert len(jax.devices()) == 2
        mesh = Mesh(np.array(jax.devices()), ("x",))
        X = np.arange(64 * 32, dtype=np.float32).reshape(64, 32) / 1000
        W = np.ones((32, 32), np.float32)
        Xs = jax.device_put(X, NamedSharding(mesh, P("x")))
        f = lambda X, W: jnp.sum(X @ W, axis=0)
        opt = se.optimize(f, Xs, W, budget_s=4, cache=False)
        r = opt.report
        assert r.returned_original and "runs on 2 devices" in r.reason, str(r)
        assert r.candidates_evaluated == 0
        np.testing.assert_allclose(np.asarray(opt(Xs, W)), np.sum(X @ W, axis=0), rtol=1e-4)
        print("OK", r.reason)
    """)
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "OK" in out.stdout, out.stdout + out.stderr
