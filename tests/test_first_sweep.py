"""The first sweep (shlo_env.search.first_sweep): a rewrite that never costs (`sweep_first`),
taken at every site, is a search's first whole-program candidate and, when faster, its start.

Timings are `ModelWorker`'s (tests/test_search.py): real compiles and runs, a roofline of XLA's
cost analysis for time, every request counted."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shlo_env as se
from shlo_env.search import get_strategy

from test_search import ModelWorker, make_ctx

PATTERNS = ["sum_of_disjoint_pads", "reduce_through_dot"]


def stacked_gradient(w, x, X, W):
    """The reverse mode of a 6-layer stack (six zero pads of each layer's gradient, summed: the
    sweep's sites), beside a `reduce_through_dot` site."""
    g = jax.grad(lambda w: sum(jnp.sum(jnp.sin(w[l] @ x)) for l in range(6)))(w)
    return g, jnp.sum(X @ W, axis=0)


@pytest.fixture(scope="module")
def program():
    rng = np.random.default_rng(0)
    shapes = [(6, 64, 64), (64,), (128, 64), (64, 64)]
    return se.lower(stacked_gradient, *[rng.standard_normal(s).astype(np.float32) for s in shapes])


def _timed(worker) -> list[str]:
    """The DAG hashes of the programs timed against the original, in the order first timed."""
    return [k[0] for k in worker.count("time")]


def test_the_sweep_is_the_first_candidate_and_the_start(program):
    ctx, worker = make_ctx(program, patterns=PATTERNS)
    strategy = get_strategy("beam")
    best = strategy.search(ctx)
    found = strategy.info["first_sweep"]
    assert found["patterns"] == ["sum_of_disjoint_pads"] and found["sites"] >= 1, found
    assert found["outcome"] == "taken" and found["ratio"] < 1.0, found
    swept = ctx.run.start
    assert swept.key != ctx.root.key and swept.program.applied == ("sum_of_disjoint_pads",)
    assert _timed(worker)[0] == swept.hash  # before any other candidate
    ratio = ctx.run.swept.ratio
    assert ctx.start_ratio == ratio and strategy.start_ratio(ctx, swept) == ratio
    assert "sum_of_disjoint_pads" in best.applied and best.ratio <= ratio


def test_a_slower_sweep_is_not_the_start(program):
    class ConcatenatesAreSlow(ModelWorker):
        def model(self, text, passes):
            return super().model(text, passes) * (10.0 if "stablehlo.concatenate" in text else 1.0)

    ctx, worker = make_ctx(program, ConcatenatesAreSlow(), patterns=PATTERNS)
    strategy = get_strategy("beam")
    best = strategy.search(ctx)
    assert strategy.info["first_sweep"]["outcome"] == "not faster", strategy.info["first_sweep"]
    assert strategy.info["first_sweep"]["ratio"] > 1.0
    assert ctx.run.start.key == ctx.root.key and "sum_of_disjoint_pads" not in best.applied


def test_it_runs_only_with_a_sweep_first_pattern_and_when_asked(program):
    ctx, worker = make_ctx(program, patterns=["reduce_through_dot"])
    strategy = get_strategy("beam")
    strategy.search(ctx)
    assert "first_sweep" not in strategy.info and ctx.run.start.key == ctx.root.key

    ctx, worker = make_ctx(program, patterns=PATTERNS)
    strategy = get_strategy("beam", first_sweep=False)
    strategy.search(ctx)
    assert "first_sweep" not in strategy.info and ctx.run.swept is None


def test_no_time_no_sweep(program):
    ctx, worker = make_ctx(program, patterns=PATTERNS, budget_s=0.0)
    assert ctx.first_sweep(ctx.root) is ctx.root
    assert ctx.run.swept.outcome == "no time" and not worker.count("time")


def test_regional_knows_what_a_whole_evaluation_costs_from_the_first_sweep(program, monkeypatch):
    """After the first sweep, the regional strategy's first whole evaluation must fit the time
    left like any later one (`Regional._fits`): on llama's gradient at load 7 a sweep started
    with less time than the first sweep's evaluation took, was cut at the hard deadline, and
    the restarted worker left no time to confirm the first sweep's gain."""
    from shlo_env.search.regional import Regional

    seen = {}

    def record(self, ctx, exp, state, ratio, vec, counts):
        seen["whole_s"], seen["start"] = list(self.whole_s), state
        return state, ratio, vec

    monkeypatch.setattr(Regional, "_judge", lambda self, *a, **k: [])
    monkeypatch.setattr(Regional, "_sweep", record)
    ctx, worker = make_ctx(program, patterns=PATTERNS)
    strategy = Regional(profile=False)
    strategy.search(ctx)
    assert strategy.info["first_sweep"]["outcome"] == "taken"
    assert seen["start"].key == ctx.run.start.key != ctx.root.key
    assert seen["whole_s"] == [ctx.run.swept.evaluate_s] and ctx.run.swept.evaluate_s > 0
