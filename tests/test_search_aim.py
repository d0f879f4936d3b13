"""A search that aims: the XLA option screen and hot-site ordering (`shlo_env.search.option_screen`,
`shlo_env.search.site_heat`). Timings are modelled (`ModelWorker` of test_search.py): exact and
repeatable, so the tests assert what is reached and in which order, never how fast."""

from __future__ import annotations

import itertools

import jax
import numpy as np
import pytest
from test_search import ModelWorker, make_ctx

import shlo_env as se
from shlo_env.execute import xla_options
from shlo_env.ir.program import ir_scope
from shlo_env.search import get_strategy, option_screen, site_heat
from shlo_env.search.beam import Beam
from shlo_env.search.mcts import FactorizedMCTS

FAST = "xla_cpu_enable_concurrency_optimized_scheduler=true"  # EXACT tier: verified bitwise
OTHER = "xla_cpu_parallel_codegen_split_count=8"


def cold_then_hot(x, A, B):
    """A tiny elementwise site first in program order, then a 128^3 dot site."""
    small = x / 2.0
    big = (A @ B).T
    return small, big


def loop_then_straight(x, h):
    """The same rewrite outside and inside an 8-trip loop."""
    return x / 2.0, jax.lax.fori_loop(0, 8, lambda i, c: c / 2.0, h)


PATTERNS = ["transpose_of_dot", "div_by_power_of_two"]
RNG = np.random.default_rng(0)


@pytest.fixture(scope="module")
def hot_program():
    return se.lower(cold_then_hot, *[RNG.standard_normal(s).astype(np.float32) for s in [(8,), (128, 128), (128, 128)]])


def labels_of(exp, vec):
    return [d.labels[c] for d, c in zip(exp.dims, vec) if c]


# --- site heat -----------------------------------------------------------------------------------

def test_hot_sites_come_first(hot_program):
    ctx, _ = make_ctx(hot_program, patterns=PATTERNS)
    exp = ctx.expand(ctx.root)
    assert [d.labels[1] for d in exp.dims] == ["div_by_power_of_two", "transpose_of_dot"]  # program order
    heat = ctx.heat(exp)
    assert heat[1] > 100 * heat[0]  # a 128^3 dot against 8 divides
    assert labels_of(exp, next(ctx.singles(exp))) == ["transpose_of_dot"]
    assert labels_of(exp, next(ctx.singles(exp, hot_first=False))) == ["div_by_power_of_two"]


def test_loop_body_ops_count_per_iteration():
    program = se.lower(loop_then_straight, *[RNG.standard_normal(64).astype(np.float32) for _ in range(2)])
    ctx, _ = make_ctx(program, patterns=["div_by_power_of_two"])
    exp = ctx.expand(ctx.root)
    heat = ctx.heat(exp)
    assert len(heat) == 2
    inside, outside = max(heat), min(heat)
    assert inside == pytest.approx(8 * outside)  # same op, 8 static trips
    with ir_scope():
        total = site_heat.program_time(program.body)
    assert total >= inside + outside


def test_hot_order_is_stable():
    assert site_heat.hot_order([1.0, 3.0, 1.0, 3.0]) == [1, 3, 0, 2]


def test_beam_tries_the_hot_single_right_after_pick_first(hot_program):
    ctx, _ = make_ctx(hot_program, patterns=PATTERNS)
    exp = ctx.expand(ctx.root)
    vecs = list(itertools.islice(Beam().child_vectors(exp, ctx), 3))
    assert labels_of(exp, vecs[0]) == ["div_by_power_of_two", "transpose_of_dot"]  # pick-first
    assert labels_of(exp, vecs[1]) == ["transpose_of_dot"]


def test_mcts_first_simulation_takes_the_hottest_single(hot_program):
    ctx, _ = make_ctx(hot_program, patterns=PATTERNS, max_steps=1)
    mcts = FactorizedMCTS(budget=1, min_budget=1, seed_hot=1, seed_pick_first=False)
    mcts.search(ctx)
    evaluated = [ev for key, ev in ctx.evaluator.cache.items() if key != ctx.evaluator.original_key]
    assert evaluated[0].applied == ("transpose_of_dot",)  # the first candidate (later walks explore on)


def three_sites(x, y):
    """div_by_power_of_two at three sites; transpose_of_dot at one."""
    return x / 2.0, (x * 3.0) / 4.0, (y @ y).T / 8.0


def test_sweeps_take_one_rewrite_at_every_site_hottest_first():
    from shlo_env.search.base import Dim, sweep_vectors

    dims = [Dim("rewrite", ("original", "a", "b"), 0), Dim("rewrite", ("original", "a"), 1),
            Dim("rewrite", ("original", "b"), 2), Dim("rewrite", ("original", "c"), 3),
            Dim("pass", ("keep", "disable p"), 0)]
    assert list(sweep_vectors(dims)) == [[1, 1, 0, 0, 0], [2, 0, 1, 0, 0]]  # "c" has one site: a single
    assert list(sweep_vectors(dims, [0.0, 0.0, 5.0, 0.0, 0.0]))[0] == [2, 0, 1, 0, 0]


def test_sweeps_of_other_sites_come_before_other_rewrites_of_the_same_sites():
    # kalman_filter_loglik_grad: unroll 2x, 4x, 8x and hoist, all at the two hot loops, took the
    # first sweeps; small_dot_to_reduce at 37 cooler sites (0.43 alone) came fifth
    from shlo_env.search.base import Dim, new_sites_first, sweep_vectors

    dims = [Dim("rewrite", ("original", "unroll2", "unroll4", "hoist"), 0),
            Dim("rewrite", ("original", "unroll2", "unroll4", "hoist"), 1),
            Dim("rewrite", ("original", "dot"), 2), Dim("rewrite", ("original", "dot"), 3)]
    hot = list(sweep_vectors(dims, [5.0, 5.0, 1.0, 1.0]))
    assert hot[:3] == [[1, 1, 0, 0], [2, 2, 0, 0], [3, 3, 0, 0]]
    assert new_sites_first(hot) == [[1, 1, 0, 0], [0, 0, 1, 1], [2, 2, 0, 0], [3, 3, 0, 0]]


def test_no_new_candidate_starts_that_would_run_past_the_hard_deadline():
    """A candidate cut at the hard deadline kills the worker, and every later request pays its
    restart: one that cannot end in time (as long as candidates lately took) is not started."""
    import time

    from shlo_env.search.evaluator import FailureKind

    program = se.lower(three_sites, *[RNG.standard_normal(s).astype(np.float32) for s in [(64,), (32, 32)]])
    ctx, worker = make_ctx(program, patterns=PATTERNS)
    exp = ctx.expand(ctx.root)
    children = [c for c in (ctx.child(exp, v) for v in ctx.singles(exp)) if c is not None]
    assert len(children) >= 3
    ev = ctx.evaluator
    ev._fresh_s[:] = [4.0, 4.0]  # as if each candidate took 4 s
    ev.hard_deadline = time.perf_counter() + 2.0
    assert ctx.out_of_time() and not ev.room_for_one()
    late = ev.evaluate(children[0].program, hash=children[0].hash)
    assert late.failure is FailureKind.BUDGET and "takes about 4.0 s" in late.detail
    assert late.key not in ev.cache and ev.untimed().get("budget") == 1
    ev.hard_deadline = time.perf_counter() + 60.0
    assert not ctx.out_of_time()
    assert ev.evaluate(children[0].program, hash=children[0].hash).ok  # in time now: evaluated


def test_beam_children_include_a_sweep_of_all_sites():
    program = se.lower(three_sites, *[RNG.standard_normal(s).astype(np.float32) for s in [(64,), (32, 32)]])
    ctx, _ = make_ctx(program, patterns=PATTERNS)
    exp = ctx.expand(ctx.root)
    vecs = list(itertools.islice(Beam().child_vectors(exp, ctx), 4))
    sweep = [labels_of(exp, v) for v in vecs if labels_of(exp, v) == ["div_by_power_of_two"] * 3]
    assert sweep, [labels_of(exp, v) for v in vecs]


def test_mcts_seeds_include_the_hottest_sweep():
    program = se.lower(three_sites, *[RNG.standard_normal(s).astype(np.float32) for s in [(64,), (32, 32)]])
    ctx, _ = make_ctx(program, patterns=PATTERNS)
    mcts = FactorizedMCTS(seed_hot=1, seed_sweeps=1, seed_pick_first=False)
    root = mcts._node(ctx, ctx.root, 0.0)
    seeds = [labels_of(root.exp, v) for v, _ in mcts.seeds(ctx, root)]
    assert seeds == [["transpose_of_dot"], ["div_by_power_of_two"] * 3]  # a single, then a sweep


def test_a_rewrite_that_paid_is_swept_first_at_the_next_step():
    import dataclasses

    program = se.lower(three_sites, *[RNG.standard_normal(s).astype(np.float32) for s in [(64,), (32, 32)]])
    ctx, _ = make_ctx(program, patterns=PATTERNS)
    exp = ctx.expand(ctx.root)
    single = next(v for v in ctx.singles(exp) if labels_of(exp, v) == ["div_by_power_of_two"])
    child = ctx.child(exp, single)
    base = ctx.evaluator.cache[ctx.evaluator.original_key]
    from shlo_env.search.evaluator import Measurement, Status

    fake = {child.hash: dataclasses.replace(base, hash=child.hash, status=Status.CONFIRMED,
                                            measurement=Measurement(0.5, 0.5))}
    real = ctx.evaluator.evaluate
    ctx.evaluator.evaluate = lambda prog, *, passes=(), hash=None, time_it=True, beside=None: (  # noqa: A006
        fake.get(hash) or real(prog, passes=passes, hash=hash, time_it=time_it, beside=beside))
    assert labels_of(exp, next(ctx.sweeps(exp)))[0] == "div_by_power_of_two"  # the only sweep here
    ctx.evaluate(child)
    assert ctx.paid == {"div_by_power_of_two": 0.5}
    ctx.evaluate(ctx.child(exp, next(v for v in ctx.singles(exp) if labels_of(exp, v) == ["transpose_of_dot"])))
    assert "transpose_of_dot" not in ctx.paid or ctx.paid["transpose_of_dot"] < ctx.threshold


def test_mcts_step_cut_short_acts_with_the_best_measured_child():
    from shlo_env.search.mcts import Node

    program = se.lower(three_sites, *[RNG.standard_normal(s).astype(np.float32) for s in [(64,), (32, 32)]])
    ctx, _ = make_ctx(program, patterns=PATTERNS)
    mcts = FactorizedMCTS()
    root = mcts._node(ctx, ctx.root, 0.0)
    vecs = list(itertools.islice(ctx.singles(root.exp), 2))
    for v, value in zip(vecs, (0.1, 0.7)):
        root.children[tuple(v)] = Node(ctx.child(root.exp, v), root.exp, value)
    assert mcts.act_best_child(root) == vecs[1]
    for child in root.children.values():
        child.value = -1.0  # none beats the root: the paper's rule decides
    assert mcts.act_best_child(root) == mcts.act(root)


# --- the option screen ---------------------------------------------------------------------------

def test_priority_names_real_cpu_option_tokens():
    assert set(option_screen.PRIORITY) == set(xla_options.candidate_options("cpu"))


def test_screen_order_puts_known_movers_first():
    tokens = ["a=1", OTHER, option_screen.PRIORITY[0], "b=2"]
    assert option_screen.ordered(tokens) == [option_screen.PRIORITY[0], OTHER, "a=1", "b=2"]


@pytest.mark.parametrize("name", ["beam", "mcts", "random", "exhaustive", "pick-first"])
def test_a_faster_option_is_the_start_after_few_candidates(name, hot_program):
    worker = ModelWorker(pass_factor={FAST: 0.5})
    ctx, _ = make_ctx(hot_program, worker, patterns=PATTERNS, passes=(OTHER, FAST))
    strategy = get_strategy(name)
    start = strategy.begin(ctx)
    assert start.passes == (FAST,) and start.hash == ctx.root.hash
    assert ctx.start_ratio == pytest.approx(0.5)
    assert ctx.evaluator.stats.evaluated <= 2  # only screened options that looked faster are evaluated
    screen = strategy.info["option_screen"]
    assert screen["chosen"] == FAST and set(screen["screen_ratios"]) == {FAST, OTHER}
    best = strategy.search(ctx)  # begin again is a no-op: the start stays
    assert FAST in best.passes and best.ratio <= 0.5


def test_no_start_move_without_a_verified_gain(hot_program):
    worker = ModelWorker(pass_factor={FAST: 1.3})
    ctx, _ = make_ctx(hot_program, worker, patterns=PATTERNS, passes=(FAST,))
    start = Beam().begin(ctx)
    assert start is ctx.root and ctx.start_ratio == 1.0
    assert ctx.evaluator.stats.evaluated == 0  # a slower screen ratio is not even verified


def test_an_option_faster_by_less_than_the_least_gain_is_not_verified(hot_program):
    worker = ModelWorker(pass_factor={FAST: 0.99})  # 1 % faster; the search screens for 3 % here
    ctx, _ = make_ctx(hot_program, worker, patterns=PATTERNS, passes=(FAST,))
    assert ctx.threshold < 0.99
    start = Beam().begin(ctx)
    assert start is ctx.root and ctx.evaluator.stats.evaluated == 0


def test_screen_can_be_turned_off(hot_program):
    worker = ModelWorker(pass_factor={FAST: 0.5})
    ctx, _ = make_ctx(hot_program, worker, patterns=PATTERNS, passes=(FAST,))
    beam = Beam(screen_options=False)
    assert beam.begin(ctx) is ctx.root
    assert "option_screen" not in beam.info
    assert not any(k[0] == "time" for k in worker.calls)


def test_no_options_offered_means_no_screen(hot_program):
    worker = ModelWorker(pass_factor={"some-pass": 0.5})
    ctx, _ = make_ctx(hot_program, worker, patterns=PATTERNS, passes=("some-pass",))
    beam = Beam()
    assert beam.begin(ctx) is ctx.root  # passes are not options: the search toggles them itself
    assert "option_screen" not in beam.info


def test_optimize_program_returns_the_screened_option(hot_program):
    from shlo_env.search.program_search import SearchOptions, optimize_program

    worker = ModelWorker(pass_factor={FAST: 0.5})
    options = SearchOptions(patterns=["div_by_power_of_two"], budget_s=60, xla_options=[OTHER, FAST], strategy="beam",
                            strategy_options={"expand_budget": 2, "max_expansions": 1})
    res = optimize_program(hot_program, options, worker=worker)
    assert FAST in res.action_tokens and res.ratio <= 0.5
    assert res.strategy_info["option_screen"]["chosen"] == FAST
    assert res.decisions and len(res.decisions) >= 1  # the option step is a recorded decision
