"""Search with the real worker process: XLA passes disabled for real, budgets honored end to end."""

from __future__ import annotations

import re
import threading
import time

import jax
import numpy as np
import pytest

import shlo_env as se
from shlo_env.bench import examples
from shlo_env.execute import runtime
from shlo_env.api.optimize import exported_callable
from shlo_env.search import Evaluator
from shlo_env.execute.runners import FailureKind
from shlo_env.execute.worker import Worker


def test_disabled_passes_reach_xla():
    """`compile(..., disabled_passes)` changes XLA's executable (jaxlib 0.10 takes the list as a
    comma-separated string: assigning a list raised TypeError before)."""
    ex = examples.suite(["gelu_chain"])[0]
    p = se.lower(ex.fn, *ex.args())
    default = runtime.optimized_hlo(runtime.compile(p))
    assert runtime.optimized_hlo(runtime.compile(p, ("fusion",))) != default
    assert runtime.optimized_hlo(runtime.compile(p, ("fusion", "algsimp"))) != default
    assert runtime.optimized_hlo(runtime.compile(p, ("no-such-pass",))) == default


def test_evaluator_keys_on_hash_and_passes_and_times_each_with_its_own_passes():
    ex = examples.suite(["gelu_chain"])[0]
    p = se.lower(ex.fn, *ex.args())
    with Evaluator(p, worker=Worker(timeout_s=60), num_random=1) as ev:
        a = ev.evaluate(p, passes=("fusion",))
        assert a.ok and a.timed and a.passes == ("fusion",) and a.key.endswith("|-fusion")
        assert a.numerics == se.Numerics.REASSOCIATE  # verified against the float64 reference
        assert not a.same_executable_as  # a different executable: timed side by side
        assert ev.stats.timed == 1
        assert ev.evaluate(p, passes=["fusion"]) is a and ev.stats.cache_hits == 1
        b = ev.evaluate(p, passes=("no-such-pass",))  # same executable as the original: reused
        assert b.ok and b.ratio == 1.0 and b.same_executable_as == ev.original_key
        assert ev.stats.timed == 1 and ev.stats.executable_hits == 1
        c = ev.evaluate(p)  # the original itself: a cache hit
        assert c.ratio == 1.0 and ev.stats.evaluated == 2


def test_work_beside_a_verification_runs_once_and_its_wait_is_not_the_candidates():
    """`evaluate(beside=...)`: the work runs here while the worker verifies (once, and not for a
    cached state); its seconds past the verification are left out of the candidate's seconds;
    an error of either side reaches the caller."""
    ex = examples.suite(["gelu_chain"])[0]
    p = se.lower(ex.fn, *ex.args())
    threads = []

    def work():
        threads.append(threading.current_thread())
        time.sleep(3.0)  # far longer than verifying the small program on a warm worker

    with Evaluator(p, worker=Worker(timeout_s=60), num_random=1) as ev:
        assert ev.checks_beside
        assert ev.evaluate(p, passes=("cse",)).ok  # the worker warm, the original's outputs known
        before, t = ev.stats.seconds, time.perf_counter()
        a = ev.evaluate(p, passes=("fusion",), beside=work)
        wall = time.perf_counter() - t
        assert a.ok and a.timed and threads == [threading.main_thread()] and wall >= 3.0
        assert ev.stats.seconds - before < wall - 1.0  # the verification and the timing, not the sleep past them
        assert ev.evaluate(p, passes=("fusion",), beside=work) is a and len(threads) == 1  # cached
        with pytest.raises(ZeroDivisionError):
            ev.evaluate(p, passes=("algsimp",), beside=lambda: 1 / 0)
        text, n = re.subn(r"stablehlo.tanh (%\w+) : (tensor<[^>]*>)",
                          r"stablehlo.custom_call @no_such_target(\1) : (\2) -> \2", p.text(), count=1)
        assert n == 1
        broken = se.load(text)
        before, t = ev.stats.seconds, time.perf_counter()
        bad = ev.evaluate(broken, beside=work)
        wall = time.perf_counter() - t
        assert not bad.ok and bad.failure is FailureKind.COMPILE and len(threads) == 2  # rejected on the other thread
        assert ev.stats.seconds - before < wall - 1.0  # a rejected candidate is not charged the sleep either


def test_in_process_work_beside_runs_after_the_verification():
    from shlo_env.execute.runners import InProcess

    ex = examples.suite(["gelu_chain"])[0]
    p = se.lower(ex.fn, *ex.args())
    ran = []
    with Evaluator(p, worker=InProcess(), num_random=1) as ev:
        assert not ev.checks_beside
        assert ev.evaluate(p, passes=("fusion",), beside=lambda: ran.append(1)).ok and ran == [1]


def test_exported_callable_compiles_with_the_passes_disabled():
    ex = examples.suite(["gelu_chain"])[0]
    args = ex.args()
    p = se.lower(ex.fn, *args)
    plain = exported_callable(ex.fn, args, p)
    without_fusion = exported_callable(ex.fn, args, p, ("fusion",))
    np.testing.assert_allclose(without_fusion(*args), jax.jit(ex.fn)(*args), rtol=1e-5, atol=1e-5)
    assert plain.lower(*args).compile().as_text() != without_fusion.lower(*args).compile().as_text()


@pytest.mark.parametrize("strategy", ["beam", "mcts", "cost-model"])
def test_strategies_find_the_cheaper_order_end_to_end(strategy):
    ex = examples.suite(["matmul_chain"])[0]
    opt = se.optimize(ex.fn, *ex.args(), strategy=strategy, budget_s=40)
    r = opt.report
    assert r.strategy == strategy
    assert not r.returned_original, str(r)
    assert "reassociate_left_to_right" in r.applied
    np.testing.assert_allclose(opt(*ex.args()), jax.jit(ex.fn)(*ex.args()), rtol=1e-3, atol=1e-2)


def test_budget_of_30_s_is_honored():
    """A large decision space (a transformer block, with XLA passes as actions too) and a
    strategy that searches until its time is up: optimize uses the budget and returns
    within 35 s."""
    ex = examples.suite(["transformer_block"])[0]
    t0 = time.perf_counter()
    opt = se.optimize(ex.fn, *ex.args(), budget_s=30, passes=True, strategy="random")
    elapsed = time.perf_counter() - t0
    assert 0.7 * 30 <= elapsed <= 35.0, (elapsed, str(opt.report))  # the budget bound, and held
    r = opt.report
    assert r.decision_space > 2 ** 16 and r.candidates_evaluated >= 5
    np.testing.assert_allclose(opt(*ex.args()), jax.jit(ex.fn)(*ex.args()), rtol=1e-3, atol=1e-3)


def test_auto_picks_mcts_for_a_large_space():
    from shlo_env.patterns.base import resolve
    from shlo_env.search.base import SearchContext, auto_strategy
    from shlo_env.search.passes import candidate_passes

    ex = examples.suite(["transformer_block"])[0]
    p = se.lower(ex.fn, *ex.args())
    ev = Evaluator(p, worker=Worker(timeout_s=60), num_random=1)  # no worker request is made
    ctx = SearchContext(p, resolve(None), ev, deadline=time.perf_counter() + 60, passes=candidate_passes())
    assert auto_strategy(ctx.expand(ctx.root)) == "mcts"
    ev.close()


def test_a_hung_compile_does_not_overrun_the_budget():
    """A candidate that never finishes, with a 300 s worker timeout: the budget still holds
    (the request is abandoned at the hard deadline) and the result is correct."""
    from test_optimize import HangForever, chain

    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in [(256, 256), (256, 256), (256, 1)]]
    t0 = time.perf_counter()
    opt = se.optimize(chain, *args, patterns=[HangForever], budget_s=15, timeout_s=300, strategy="exhaustive")
    assert time.perf_counter() - t0 <= 20.0
    assert opt.report.returned_original
    np.testing.assert_array_equal(opt(*args), jax.jit(chain)(*args))
