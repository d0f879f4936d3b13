import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxlib.mlir import ir

import shlo_env as se
from shlo_env.patterns.base import Match, Pattern
from shlo_env.search import Evaluator
from shlo_env.execute.worker import Worker
from shlo_env.ir.builder import Builder


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def chain(a, b, v):
    return (a @ b) @ v


ON_GPU = jax.default_backend() == "gpu"


@pytest.fixture(scope="module")
def chain_args():
    # A GPU runs the 256-wide product in the launch's own time: no order is faster there.
    n = 2048 if ON_GPU else 256
    rng = np.random.default_rng(0)
    return [f32(rng, n, n), f32(rng, n, n), f32(rng, n, 1)]


def assert_chain_close(got, want):
    """Two orders of the chain agree: float32 sums of 256 terms here; on a GPU, 2048 terms of
    TF32 products (its default precision), so the tolerance scales with the output."""
    tol = dict(rtol=2e-2, atol=2e-2 * float(np.abs(want).max())) if ON_GPU else dict(rtol=1e-3, atol=1e-2)
    np.testing.assert_allclose(got, want, **tol)


class ZeroProduct(Pattern):
    """(A·B)·v -> 0: much faster, and wrong."""

    root = "stablehlo.dot_general"

    def match(self, op):
        if se.patterns.matching.producer(op.operands[0], "stablehlo.dot_general") is not None:
            return Match(like=op.result)

    def rewrite(self, b, m):
        return b.zeros(m.like.type)


class HangForever(Pattern):
    """x·y -> a while loop that never ends (as a broken rewrite might build)."""

    root = "stablehlo.dot_general"

    def match(self, op):
        if se.patterns.matching.producer(op.operands[0], "stablehlo.dot_general") is not None:
            return Match(x=op.result)

    def rewrite(self, b, m):
        loop = b.op("stablehlo.while", [m.x], [m.x.type], regions=2)
        cond = loop.regions[0].blocks.append(m.x.type)
        pred_t = ir.RankedTensorType.get([], ir.IntegerType.get_signless(1))
        inner = Builder.at_end(cond)
        true = inner.op("stablehlo.constant", [], [pred_t],
                        {"value": ir.DenseElementsAttr.get_splat(pred_t, ir.BoolAttr.get(True))}).result
        inner.op("stablehlo.return", [true], [])
        body = loop.regions[1].blocks.append(m.x.type)
        inner = Builder.at_end(body)
        doubled = inner.add(body.arguments[0], body.arguments[0])  # not an identity: XLA keeps the loop
        inner.op("stablehlo.return", [doubled], [])
        return loop.results[0]


def test_optimize_finds_the_cheaper_order_and_matches_jit(chain_args):
    # the rewrite alone: an XLA option would not apply inside another jit (it is inlined there)
    opt = se.optimize(chain, *chain_args, budget_s=60, xla_options=False)
    r = opt.report
    assert not r.returned_original, str(r)
    assert "reassociate_left_to_right" in r.applied
    assert r.numerics == "REASSOCIATE" and "float64" in r.verification
    want = jax.jit(chain)(*chain_args)
    got = opt(*chain_args)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert_chain_close(got, want)
    # composes inside other jitted code, like jax.jit(fn)
    np.testing.assert_allclose(jax.jit(lambda *a: opt(*a) * 2)(*chain_args), 2 * np.asarray(got), rtol=1e-6)


def test_optimize_returns_jit_when_nothing_helps():
    rng = np.random.default_rng(1)
    fn = lambda x, w: jax.nn.relu(x @ w)  # noqa: E731
    args = [f32(rng, 16, 32), f32(rng, 32, 8)]
    opt = se.optimize(fn, *args, budget_s=30, xla_options=False)  # no rewrite helps (an option might)
    assert opt.report.returned_original and opt.program is None
    np.testing.assert_array_equal(opt(*args), jax.jit(fn)(*args))


def test_pytrees_in_and_out_are_preserved(chain_args):
    def f(params, v):
        return {"y": (params["a"] @ params["b"]) @ v, "n": jnp.sum(v)}

    params = {"a": chain_args[0], "b": chain_args[1]}
    opt = se.optimize(f, params, chain_args[2], budget_s=60)
    out = opt(params, chain_args[2])
    want = jax.jit(f)(params, chain_args[2])
    assert jax.tree_util.tree_structure(out) == jax.tree_util.tree_structure(want)
    assert_chain_close(out["y"], want["y"])


def test_a_wrong_candidate_is_never_chosen(chain_args):
    opt = se.optimize(chain, *chain_args, patterns=[ZeroProduct], budget_s=60)
    assert opt.report.returned_original
    assert opt.report.failures.get("mismatch", 0) >= 1
    np.testing.assert_array_equal(opt(*chain_args), jax.jit(chain)(*chain_args))


def test_a_hanging_candidate_costs_only_itself(chain_args):
    opt = se.optimize(chain, *chain_args, patterns=[HangForever, "reassociate_left_to_right"],
                      budget_s=90, timeout_s=5, strategy="exhaustive")
    r = opt.report
    assert r.failures.get("timeout", 0) >= 1, str(r)
    assert not r.returned_original and "reassociate_left_to_right" in r.applied


def test_evaluator_survives_bad_candidates_and_caches_states():
    identity = se.load("""
    func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
      %0 = stablehlo.add %arg0, %arg0 : tensor<2xf32>
      return %0 : tensor<2xf32>
    }""")
    broken = se.load("""
    func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
      %0 = stablehlo.multiply %arg0, %arg0 : tensor<2xf32>
      return %0 : tensor<2xf32>
    }""")
    same = se.load("""
    func.func public @main(%x: tensor<2xf32>) -> tensor<2xf32> {
      %y = stablehlo.add %x, %x : tensor<2xf32>
      return %y : tensor<2xf32>
    }""")
    with Evaluator(identity, worker=Worker(timeout_s=30)) as ev:
        bad = ev.evaluate(broken)
        assert not bad.ok and bad.error.startswith("mismatch")
        good = ev.evaluate(same)  # the original under other SSA names: a cache hit, never compiled
        assert good.ok and good.ratio == 1.0
        assert ev.stats.evaluated == 1 and ev.stats.cache_hits == 1
        assert ev.evaluate(broken) is bad and ev.stats.evaluated == 1


def test_report_names_the_strategy_the_space_and_the_cache(chain_args):
    """"auto" picks by decision-space size (one alternatives op with two choices: exhaustive);
    the report carries the search's effort and its cache hit rate (no XLA option: a toggle is a
    dimension too)."""
    opt = se.optimize(chain, *chain_args, budget_s=40, xla_options=False)
    r = opt.report
    assert r.strategy == "exhaustive" and r.decision_space == 2
    assert r.pass_actions == () and r.actions == ()
    assert r.candidates_evaluated >= 1 and 0.0 <= r.hit_rate <= 1.0
    assert "cache hits" in str(r) and r.total_s <= 40 + 5


def test_strategy_options_reach_the_strategy(chain_args):
    opt = se.optimize(chain, *chain_args, strategy="beam", strategy_options={"alpha": 0.0, "widen": (), "seed_pick_first": False}, budget_s=40)
    info = opt.report.strategy_info
    assert opt.report.strategy == "beam" and info["expansions"] == 1 and info["pruned"] == info["children"]
    # pruning stops expansion, not evaluation: the root's children were timed and the best kept
    assert not opt.report.returned_original and "reassociate_left_to_right" in opt.report.applied


def test_the_callable_is_built_for_programs_with_chlo_ops():
    from shlo_env.api.optimize import exported_callable

    rng = np.random.default_rng(0)
    fn = lambda x, w: jnp.sum(x @ w, axis=0) + jnp.sum(jnp.square(w))  # noqa: E731  (chlo.square)
    args = [f32(rng, 64, 32), f32(rng, 32, 32)]
    program = se.lower(fn, *args)
    assert "chlo.square" in program.text()
    call = exported_callable(fn, args, program)
    np.testing.assert_array_equal(call(*args), jax.jit(fn)(*args))
