"""shlo_env.jit: jax.jit's calling convention, one search per input signature, and composition
with jax's transformations on a function whose rewrite was accepted."""

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shlo_env as se

BUDGET = 20  # the rewrite below is found by an exhaustive search over 2 candidates in a few seconds


def colsum(X, W):
    return jnp.sum(X @ W, axis=0)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    """One cache for the module: a signature searched by one test is a hit for the next."""
    return str(tmp_path_factory.mktemp("jit_cache"))


@pytest.fixture(scope="module")
def XW():
    rng = np.random.default_rng(0)
    return rng.standard_normal((512, 256)).astype(np.float32), rng.standard_normal((256, 256)).astype(np.float32)


@pytest.fixture(scope="module")
def fast(cache_dir, XW):
    f = se.jit(colsum, budget_s=BUDGET, cache=cache_dir)
    f(*XW)
    r = f.report(*XW)
    assert not r.returned_original and "reduce_through_dot" in r.applied, str(r)
    return f


def close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-3)


def test_decorator_forms_and_the_accepted_rewrite(fast, XW, cache_dir):
    want = jax.jit(colsum)(*XW)
    close(fast(*XW), want)

    @se.jit
    def plain(x):
        return x * 2.0

    @se.jit(budget_s=BUDGET, cache=cache_dir)
    def configured(X, W):
        return jnp.sum(X @ W, axis=0)

    np.testing.assert_array_equal(plain(np.ones(3, np.float32)), 2 * np.ones(3, np.float32))
    close(configured(*XW), want)
    assert configured.report(*XW).cache == "hit"  # same program as `fast`: found in the cache
    assert configured.__name__ == "configured" and isinstance(fast, se.JitFunction)


def test_keyword_arguments(fast, XW):
    X, W = XW
    want = jax.jit(colsum)(X, W)
    close(fast(X, W=W), want)
    close(fast(X=X, W=W), want)
    # another signature for jax.jit, but the same program as fast(X, W): found in the cache
    assert fast.report(X, W=W).cache == "hit"
    assert not fast.report(X=X, W=W).returned_original  # leaves (W, X): a program of its own


def test_vmap_grad_and_nesting_in_jit(fast, XW):
    X, W = XW
    XB = np.stack([X, 2 * X, -X])
    close(jax.vmap(fast, in_axes=(0, None))(XB, W), jax.vmap(colsum, in_axes=(0, None))(XB, W))
    loss = lambda f: lambda w: jnp.sum(f(X, w) ** 2)  # noqa: E731
    close(jax.grad(loss(fast))(W), jax.grad(loss(colsum))(W))
    close(jax.jit(lambda x, w: fast(x, w) * 3)(X, W), 3 * np.asarray(jax.jit(colsum)(X, W)))
    # transformations of transformations
    close(jax.jit(jax.vmap(jax.grad(lambda x: jnp.sum(fast(x, W)))))(XB),
          jax.vmap(jax.grad(lambda x: jnp.sum(colsum(x, W))))(XB))
    close(jax.vmap(jax.jit(lambda x: fast(x, W)))(XB), jax.vmap(lambda x: colsum(x, W))(XB))


def test_lower_like_jax_jit(fast, XW):
    lowered = fast.lower(*XW)
    assert "stablehlo.reduce" in lowered.as_text()
    close(lowered.compile()(*XW), jax.jit(colsum)(*XW))


def test_a_new_input_shape_gets_its_own_specialization(fast, XW):
    X, W = XW
    before = len(fast.specializations)
    X2 = X[:384]
    close(fast(X2, W), jax.jit(colsum)(X2, W))
    assert len(fast.specializations) == before + 1
    assert fast.report(X2, W).cache in ("stored", "hit")
    # a dtype jax.jit rejects raises jax.jit's own error
    with pytest.raises(TypeError):
        fast(X, "not an array")


def test_static_arguments(cache_dir, XW):
    X, W = XW

    @se.jit(static_argnums=2, static_argnames="transpose", budget_s=BUDGET, cache=cache_dir)
    def scaled(X, W, k, transpose=False):
        y = jnp.sum(X @ (W.T if transpose else W), axis=0)
        return y * k

    close(scaled(X, W, 3), 3 * np.asarray(colsum(X, W)))
    close(scaled(X, W, 3, transpose=True), 3 * np.asarray(colsum(X, W.T)))
    close(scaled(X, W, k=2), 2 * np.asarray(colsum(X, W)))
    keys = list(scaled.specializations)
    assert len(keys) == 3
    assert not scaled.report(X, W, 3).returned_original


def test_pytree_input_and_output(cache_dir, XW):
    X, W = XW

    @se.jit(budget_s=BUDGET, cache=cache_dir)
    def tree_fn(params, x):
        return {"y": jnp.sum(x @ params["w"], axis=0), "n": [params["b"] * 2]}

    params = {"w": W, "b": np.float32(1.5)}
    out = tree_fn(params, X)
    want = jax.jit(tree_fn.__wrapped__)(params, X)
    assert jax.tree_util.tree_structure(out) == jax.tree_util.tree_structure(want)
    close(out["y"], want["y"])
    assert float(out["n"][0]) == 3.0
    assert not tree_fn.report(params, X).returned_original


def test_donation(cache_dir, XW):
    X, W = XW

    @se.jit(donate_argnums=1, budget_s=BUDGET, cache=cache_dir)
    def donated(X, W):
        return jnp.sum(X @ W, axis=0), W * 2  # W's buffer can hold the second output

    w = jnp.asarray(W)
    y, w2 = donated(X, w)
    close(y, jax.jit(colsum)(X, W))
    close(w2, 2 * W)
    assert w.is_deleted()  # as with jax.jit(fn, donate_argnums=1)
    assert not donated.report(X, W).returned_original


def test_background_runs_jit_first_then_swaps_the_winner_in(XW, tmp_path):
    X, W = XW
    f = se.jit(colsum, background=True, budget_s=BUDGET, cache=str(tmp_path))
    first = f(X, W)  # returns at once, through jax.jit(fn)
    close(first, jax.jit(colsum)(X, W))
    assert f.wait(timeout=120)
    r = f.report(X, W)
    assert not r.returned_original and "reduce_through_dot" in r.applied, str(r)
    spec = next(iter(f.specializations.values()))
    assert spec.optimized is not None and spec.call is not f._jitted
    close(f(X, W), jax.jit(colsum)(X, W))


def test_progress_line_when_the_search_takes_long(monkeypatch, capsys, tmp_path, XW):
    jit_module = sys.modules["shlo_env.api.jit"]  # the module (shlo_env.jit is the function)
    monkeypatch.setattr(jit_module, "NOTICE_AFTER_S", 0.0)
    f = se.jit(colsum, budget_s=BUDGET, cache=str(tmp_path))
    f(*XW)
    err = capsys.readouterr().err
    assert "shlo_env.jit: searching rewrites of colsum(float32[512,256], float32[256,256])" in err
    assert "faster than jax.jit" in err or "kept jax.jit" in err


def test_optimize_callable_takes_keywords_and_other_shapes(XW, cache_dir):
    X, W = XW
    opt = se.optimize(colsum, X, W, budget_s=BUDGET, cache=cache_dir)
    assert not opt.report.returned_original
    close(opt(X, W=W), jax.jit(colsum)(X, W))
    close(jax.vmap(opt, in_axes=(0, None))(np.stack([X, X]), W), jax.vmap(colsum, in_axes=(0, None))(np.stack([X, X]), W))
    X2 = X[:100]
    close(opt(X2, W), jax.jit(colsum)(X2, W))  # not the optimized signature: jax.jit(fn)


def test_a_signature_first_seen_under_a_transformation(XW, cache_dir):
    """Searched on shapes and dtypes alone (the leaves are tracers), then used by later calls."""
    X, W = XW
    under_jit = se.jit(colsum, budget_s=BUDGET, cache=cache_dir)
    close(jax.jit(lambda x, w: under_jit(x, w) * 2)(X, W), 2 * np.asarray(jax.jit(colsum)(X, W)))
    assert not under_jit.report(X, W).returned_original
    under_vmap = se.jit(colsum, budget_s=BUDGET, cache=cache_dir)
    XB = np.stack([X, -X])
    close(jax.vmap(under_vmap, in_axes=(0, None))(XB, W), jax.vmap(colsum, in_axes=(0, None))(XB, W))
    assert len(under_vmap.specializations) == 1


def test_bad_calls_raise_what_jax_jit_raises():
    bad = se.jit(lambda x: x.reshape(7))
    with pytest.raises(TypeError, match="reshape"):
        bad(np.ones(8, np.float32))
    assert "not searched" in bad.report(np.ones(8, np.float32)).reason
    static = se.jit(lambda x, opts: x * len(opts), static_argnums=1)
    with pytest.raises(ValueError, match="hashable"):
        static(np.ones(2, np.float32), ["unhashable", "list"])


def python_calls(f, *args, n=20) -> list[str]:
    """The Python functions run by `n` calls of `f` (after one call to warm jax's caches)."""
    f(*args)
    calls: list[str] = []

    def profile(frame, event, arg):
        if event == "call":
            calls.append(f"{frame.f_code.co_filename}:{frame.f_code.co_name}")

    sys.setprofile(profile)
    try:
        for _ in range(n):
            f(*args)
    finally:
        sys.setprofile(None)
    return calls


def test_a_specialized_signature_is_dispatched_by_jax_alone(fast, XW, cache_dir):
    """Issue 30: no Python runs per call once a signature is specialized, as with jax.jit (the
    control), for shlo_env.jit and for the optimize callable; the timings are in
    benchmarks/dispatch.py."""
    X, W = jax.device_put(XW[0]), jax.device_put(XW[1])
    assert python_calls(jax.jit(colsum), X, W) == []
    assert python_calls(fast, X, W) == []
    opt = se.optimize(colsum, *XW, budget_s=BUDGET, cache=cache_dir, xla_options=False)  # jit's: in the cache
    assert not opt.report.returned_original
    assert python_calls(opt, X, W) == []
    kept = se.jit(lambda x: x * 2.0, budget_s=BUDGET, cache=cache_dir)
    assert python_calls(kept, X) == []


def test_donation_compiles_with_a_chosen_xla_option_set(monkeypatch, XW, tmp_path):
    """issue 48: with donation, the outer jax.jit takes the winner's actions through
    `xla_options.compiler_options`: a `name=value` option is set as an option (jax's
    env_option_overrides in the executable), not passed as a bogus pass name."""
    import importlib

    jit_module = importlib.import_module("shlo_env.api.jit")
    real = jit_module.optimize
    option = "xla_cpu_use_xnnpack=false"  # a SetOption the search might choose

    def chose_option(*args, **kwargs):
        opt = real(*args, **kwargs)
        opt.report.action_tokens = tuple(opt.report.action_tokens) + (option,)
        return opt

    monkeypatch.setattr(jit_module, "optimize", chose_option)
    X, W = XW

    def colsum_and_w(W, X):
        return jnp.sum(X @ W, axis=0), W * 2

    f = se.jit(colsum_and_w, donate_argnums=0, budget_s=BUDGET, cache=str(tmp_path))
    w = jnp.asarray(W)
    y, w2 = f(w, X)
    close(y, colsum(X, W))
    close(w2, 2 * W)
    assert w.is_deleted()
    [spec] = f.specializations.values()
    assert spec.optimized is not None and option in spec.report.action_tokens, str(spec.report)
    blob = spec.jitted.lower(jnp.asarray(W), X).compile().runtime_executable().serialize()
    assert b"\x13xla_cpu_use_xnnpack\x12" in blob  # set as an option override
    assert b"xla_cpu_use_xnnpack=" not in blob  # not in xla_disable_hlo_passes
