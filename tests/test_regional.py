"""The regional strategy (issue 31, item 3): candidates judged on the region they change, the
local winners assembled and accepted on the whole program; sites whose region cannot be cut
(inside a loop) judged on the whole program instead."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shlo_env import corpus
from shlo_env.ir.program import lower
from shlo_env.rewrite.region_cut import Candidate, Region
from shlo_env.measure.region_timing import RegionResult
from shlo_env.search import get_strategy, regional, site_heat, strategies
from shlo_env.search.program_search import SearchOptions, optimize_program

SCAN = "reduce_window_prefix_to_scan"


def test_regional_is_registered():
    assert "regional" in strategies()
    with pytest.raises(ValueError, match="batch"):
        get_strategy("regional", batch=0)


def _fake_ctx(ops: int, fn=jnp.sin, call_s: float = 0.01, **more):
    """What the profile's estimate reads of a search: the original (`fn`'s program, counted as
    `ops` ops), its call time and the time left (30 s)."""
    from types import SimpleNamespace

    program = lower(fn, jnp.ones((4,), jnp.float32))
    return SimpleNamespace(original=SimpleNamespace(num_ops=lambda: ops, module=program.module),
                           root=SimpleNamespace(hash=f"{fn.__name__}:{ops}"),
                           evaluator=SimpleNamespace(baseline_s=call_s), time_left=lambda: 30.0, **more)


def test_a_large_program_is_cut_without_the_profiles_kernels(monkeypatch):
    """The program search's profile orders the sites of any program, but regions are cut along
    its kernels only where the program is small enough: a large one's kernel regions are
    large and slow to compile (fewer sites judged)."""
    from types import SimpleNamespace

    monkeypatch.setattr(regional.region_cut, "check_profile", lambda aug, prof: None)
    taken = object()

    def ctx(ops: int):
        return _fake_ctx(ops, caches=SimpleNamespace(profiles={"h": taken}))

    small, large = get_strategy("regional"), get_strategy("regional")
    assert small._profile(ctx(300), None, "h") is taken
    assert small.info["profile"] == "ok (the program search's)"
    assert large._profile(ctx(4500), None, "h") is None
    assert large.info["profile"].startswith("skipped")


def test_the_program_search_does_not_profile_a_large_program_searched_regionally():
    """A BERT train step's profile took 11-12 s of a 60 s budget, its kernels unused there."""
    assert get_strategy("regional").profile_skip(_fake_ctx(300)) == ""
    assert "allowed" in get_strategy("regional").profile_skip(_fake_ctx(4500))
    assert get_strategy("regional", profile=True).profile_skip(_fake_ctx(4500)) == ""
    assert get_strategy("mcts").profile_skip(_fake_ctx(4500)) == ""


def _until_small(x):
    return jax.lax.while_loop(lambda h: jnp.sum(h) > 1.0, lambda h: h * 0.5, x)


def _three_halvings(x):
    return jax.lax.fori_loop(0, 3, lambda i, h: h * 0.5, x)


def test_the_profile_of_a_loop_run_until_a_condition_is_sized_for_tracing_it():
    """Tracing a call costs each executed kernel microseconds: a loop that runs until its
    condition holds may run a thousand times its kernels (an SDE solve of 10 ms: 10 s traced).
    A loop of static trip count adds nothing to the estimate."""
    plain = get_strategy("regional").profile_estimate_s(_fake_ctx(300))
    assert get_strategy("regional").profile_estimate_s(_fake_ctx(300, _three_halvings)) == plain
    dynamic = get_strategy("regional").profile_estimate_s(_fake_ctx(300, _until_small))
    assert dynamic == pytest.approx(plain + site_heat.TRACED_CALLS * 0.01)
    assert get_strategy("regional").profile_skip(_fake_ctx(300, _three_halvings)) == ""
    assert "allowed" in get_strategy("regional").profile_skip(_fake_ctx(300, _until_small))


def test_a_region_win_must_beat_the_regions_own_noise():
    strat = get_strategy("regional", local_gain=0.02)
    region = Region(program=None, sites=(0,), local={0: 0}, labels={0: ("original", "p")}, tiers={0: (0, 0)},
                    share=0.5)
    quiet = RegionResult(Candidate(region, {}), ratio=1.0, median_ratio=1.005)
    noisy = RegionResult(Candidate(region, {}), ratio=0.95, median_ratio=1.0)
    assert strat.noise_margin(quiet) == pytest.approx(0.02)
    assert strat.noise_margin(noisy) == pytest.approx(0.10)
    win = RegionResult(Candidate(region, {0: 1}), ratio=0.85, median_ratio=0.92)
    assert strat._local_winners(region, quiet, [win], {0: 0.5})[0].saving == pytest.approx(0.5 * 0.15)
    assert strat._local_winners(region, noisy, [win], {0: 0.5}) == []  # within twice the control's spread


def test_sweeps_go_by_the_region_evidence_summed_over_sites():
    # a pattern whose regions each sit inside their noise but save in sum is swept first
    strat = get_strategy("regional")
    strat._reset()
    region = Region(program=None, sites=(0,), local={0: 0}, labels={0: ("original", "thin", "loses")},
                    tiers={0: (0, 0, 0)}, share=0.5)
    control = RegionResult(Candidate(region, {}), ratio=1.01, median_ratio=1.0)  # noise margin 2 %
    for _ in range(10):
        strat._weigh(region, control, [RegionResult(Candidate(region, {0: 1}), ratio=0.99, median_ratio=0.99),
                              RegionResult(Candidate(region, {0: 2}), ratio=1.05, median_ratio=1.05),
                              RegionResult(Candidate(region, {0: 2}), ratio=float("nan"), median_ratio=1.0)], {})
    assert strat.evidence["thin"] == pytest.approx(10 * 0.5 * 0.01)
    assert strat.losing == {(0, 2)}  # 5 % slower, beyond the region's 2 % margin: left out of a lead
    order = sorted(["unjudged", "loses", "thin"], key=strat.sweep_rank)
    assert order == ["thin", "unjudged", "loses"]
    # a sum under what the whole-program timing can see goes after the rewrites not judged
    order = sorted(["unjudged", "loses", "thin"], key=lambda label: strat.sweep_rank(label, gain=0.1))
    assert order == ["unjudged", "thin", "loses"]


def _evaluator():
    """A stand-in evaluator: no whole evaluation measured, no hard deadline (the estimate of a
    whole evaluation is then twice the caches' compile time)."""
    from types import SimpleNamespace

    from shlo_env.search.evaluator import EvaluatorStats

    return SimpleNamespace(stats=EvaluatorStats(), hard_deadline=None)


def test_a_refuted_lead_discounts_other_rewrites_judged_on_its_regions():
    """Regions of whole loops predicted 5-9 % for two unrollings; the whole program refuted the
    first lead, and the second's sweep (ranked by the same regions) took the time the sweep
    that won (an unjudged rewrite) needed."""
    from types import SimpleNamespace

    strat = get_strategy("regional")
    strat._reset()
    loop = Region(program=None, sites=(0,), local={0: 0}, labels={0: ("original", "unroll_full", "unroll2")},
                  tiers={0: (0, 0, 0)}, share=0.5)
    other = Region(program=None, sites=(1,), local={1: 0}, labels={1: ("original", "small")},
                   tiers={1: (0, 0)}, share=0.5)
    quiet = RegionResult(Candidate(loop, {}), ratio=1.0, median_ratio=1.0)
    strat._weigh(loop, quiet, [RegionResult(Candidate(loop, {0: 1}), ratio=0.8, median_ratio=0.8),
                               RegionResult(Candidate(loop, {0: 2}), ratio=0.9, median_ratio=0.9)], {0: 0.5})
    strat._weigh(other, quiet, [RegionResult(Candidate(other, {1: 1}), ratio=0.99, median_ratio=0.99)], {1: 0.5})
    assert sorted(["unjudged", "small", "unroll2"], key=strat.sweep_rank) == ["unroll2", "small", "unjudged"]
    ctx = SimpleNamespace(threshold=0.98, out_of_time=lambda: False, time_left=lambda: 100.0,
                          evaluator=_evaluator(), caches=SimpleNamespace(compile_s=1.0))
    strat._try = lambda ctx, exp, trial, state, *rest: (state, rest[0], rest[1])  # the whole program: no gain
    exp = _exp([("original", "unroll_full", "unroll2"), ("original", "small"), ("original", "unroll_full")])
    strat._assemble(ctx, exp, [regional.Winner(0.1, 0, 1, "unroll_full", 0.8)], "s", 1.0, [0] * 3, {})
    assert strat.refuted == {"unroll_full"} and strat.doubtful == {0}
    assert strat.sweep_rank("small") < strat.sweep_rank("unroll2") == strat.sweep_rank("unjudged")  # as not judged


def test_the_whole_estimate_comes_from_measured_evaluations_first():
    from types import SimpleNamespace

    from shlo_env.search.evaluator import EvaluatorStats

    strat = get_strategy("regional")
    strat._reset()
    stats = EvaluatorStats()
    ctx = SimpleNamespace(evaluator=SimpleNamespace(stats=stats), original=SimpleNamespace(num_ops=lambda: 4000),
                          caches=SimpleNamespace(compile_s=0.0))
    assert strat._whole_estimate(ctx) == pytest.approx(4000 * regional.COMPILE_S_PER_OP)  # nothing measured: a guess
    ctx.caches.compile_s = 3.0  # the probe's compile of the original
    assert strat._whole_estimate(ctx) == pytest.approx(6.0)
    stats.evaluated, stats.seconds = 2, 9.0  # the option screen and a fallback, say
    assert strat._whole_estimate(ctx) == pytest.approx(4.5)
    strat.whole_s = [6.0, 8.0]  # the assembly's own
    assert strat._whole_estimate(ctx) == pytest.approx(7.0)


def test_no_whole_program_evaluation_starts_that_cannot_end_before_the_evaluators_deadline():
    """The LM train step at budget 30: a sweep started with 6 s left was cut at the evaluator's
    hard deadline (its compile 4.5 s, its runs and timing more), its 6 s lost and the worker
    restarted. Before the first evaluation the estimate decides; the judging keeps a reserve
    for the sweeps only where one can end, else the regions take the time."""
    import time
    from types import SimpleNamespace

    from shlo_env.measure.timing_policy import QUICK, policy_seconds
    from shlo_env.search.evaluator import EvaluatorStats

    strat = get_strategy("regional")
    strat._reset()
    left = {"open": 16.0, "hard": 6.0}
    ev = SimpleNamespace(stats=EvaluatorStats(), baseline_s=0.3, num_input_sets=3, timing=QUICK,
                         hard_deadline=None)
    ctx = SimpleNamespace(evaluator=ev, caches=SimpleNamespace(compile_s=4.5), original=None,
                          time_left=lambda: left["open"])
    estimate = max(9.0, 4.5 + 0.9 + policy_seconds(QUICK, 0.3))
    assert strat._whole_estimate(ctx) == pytest.approx(estimate)
    ev.hard_deadline = time.perf_counter() + left["hard"]  # the open tail is later than the evaluator's
    assert not strat._fits(ctx) and "takes" in strat.info["stopped"]
    ev.hard_deadline = time.perf_counter() + 100.0
    assert strat._fits(ctx)
    one = estimate + max(1.0, 0.1 * estimate)  # with a judging step's margin
    left["open"] = 1.4 * one  # one evaluation fits, and little else: no sweep, the regions take it
    assert strat._sweeps_reserve(ctx) == 0.0
    left["open"] = 2.5 * one  # room for judging and one sweep: the reserve is one evaluation
    assert strat._sweeps_reserve(ctx) == pytest.approx(one)
    left["open"] = 400.0  # the sweeps' share is more than one evaluation
    assert strat._sweeps_reserve(ctx) == pytest.approx(0.3 * 400.0)


def test_winners_too_small_to_see_alone_are_pooled_and_tried_together():
    from types import SimpleNamespace

    strat = get_strategy("regional")
    strat._reset()
    ctx = SimpleNamespace(threshold=0.98, out_of_time=lambda: False, time_left=lambda: 100.0,
                          evaluator=_evaluator(), caches=SimpleNamespace(compile_s=1.0))
    tried = []

    def fake_try(ctx, exp, trial, state, ratio, vec, counts, count, what):
        tried.append((what.split(" (")[0], [i for i, c in enumerate(trial) if c]))
        return state, ratio, vec

    strat._try = fake_try
    W = regional.Winner
    big, small1, small2 = W(0.03, 0, 1, "big", 0.7), W(0.008, 1, 1, "a", 0.8), W(0.007, 2, 2, "b", 0.8)
    exp = _exp([("original", "big"), ("original", "a"), ("original", "x", "b"), ("original", "c")])
    assert strat._assemblable(ctx, [small1]) is False  # 0.8 %: a whole timing cannot see it
    strat._assemble(ctx, exp, [big, small1], "s", 1.0, [0] * 4, {})
    assert tried == [("big@0", [0])] and strat.pool == [small1]  # the big one alone; the small one waits
    assert strat._assemblable(ctx, [small2, W(0.006, 3, 1, "c", 0.9)])
    strat._assemble(ctx, exp, [small2, W(0.006, 3, 1, "c", 0.9)], "s", 1.0, [0] * 4, {})
    assert tried[1] == ("3 winners together", [1, 2, 3]) and strat.pool == []  # 2.1 % together


def _exp(labels):
    """An expansion of rewrite dimensions with these labels (a stand-in for `ctx.expand`'s)."""
    from shlo_env.search.base import Dim
    from types import SimpleNamespace

    dims = [Dim("rewrite", tuple(ls), i) for i, ls in enumerate(labels)]
    return SimpleNamespace(dims=dims, num_rewrites=len(dims))


def test_a_winner_leads_with_its_rewrite_at_every_site_not_judged_losing():
    from types import SimpleNamespace

    strat = get_strategy("regional")
    strat._reset()
    strat.losing = {(3, 1)}  # site 3's region lost with the rewrite beyond its noise
    ctx = SimpleNamespace(threshold=0.98, out_of_time=lambda: False, time_left=lambda: 100.0,
                          evaluator=_evaluator(), caches=SimpleNamespace(compile_s=1.0))
    tried = []

    def fake_try(ctx, exp, trial, state, ratio, vec, counts, count, what):  # keeps nothing
        tried.append((what.split(" (")[0], trial))
        return state, ratio, vec

    strat._try = fake_try
    W = regional.Winner
    exp = _exp([("original", "p"), ("original", "q", "p"), ("original", "q"), ("original", "p"), ("original", "p")])
    win = W(0.03, 0, 1, "p", 0.7)
    strat._assemble(ctx, exp, [win], "s", 1.0, [0] * 5, {})
    # p at sites 0, 1 (its second choice) and 4, not at 3 (it lost there); not kept: p's region
    # wins did not carry over to the whole program, so neither this winner nor a later one is tried
    assert tried == [("p led by @0", [1, 2, 0, 0, 1])] and strat.pool == [] and strat.refuted == {"p"}
    strat._assemble(ctx, exp, [W(0.025, 4, 1, "p", 0.8), W(0.003, 4, 1, "p", 0.9)], "s", 1.0, [0] * 5, {})
    assert len(tried) == 1 and strat.pool == []
    alone = W(0.03, 2, 1, "q", 0.7)  # q at sites 1 and 2; site 1 already holds p: q alone
    strat._assemble(ctx, exp, [alone], "s", 1.0, [1, 2, 0, 0, 0], {})
    assert tried[1] == ("q@2", [1, 2, 1, 0, 0])
    # in the time kept for the sweeps, a lead still goes (it is a sweep), a winner alone does not
    strat._reset()
    strat.reserve = 200.0
    strat._assemble(ctx, exp, [W(0.03, 0, 1, "p", 0.7), W(0.025, 2, 1, "q", 0.7)], "s", 1.0, [0] * 5, {})
    assert [t[0] for t in tried[2:]] == ["p led by @0", "q led by @2"]
    strat._assemble(ctx, exp, [W(0.03, 4, 1, "p", 0.7)], "s", 1.0, [0] * 5, {})
    assert len(tried) == 4


def test_a_kept_lead_leaves_later_winners_of_its_rewrite_to_go_alone():
    from types import SimpleNamespace

    strat = get_strategy("regional")
    strat._reset()
    ctx = SimpleNamespace(threshold=0.98, out_of_time=lambda: False, time_left=lambda: 100.0,
                          evaluator=_evaluator(), caches=SimpleNamespace(compile_s=1.0))
    tried = []

    def fake_try(ctx, exp, trial, state, ratio, vec, counts, count, what):  # keeps everything
        tried.append(what.split(" (")[0])
        return "kept", 0.9, trial

    strat._try = fake_try
    W = regional.Winner
    exp = _exp([("original", "p"), ("original", "p"), ("original", "q", "p")])
    strat._assemble(ctx, exp, [W(0.03, 0, 1, "p", 0.7)], "s", 1.0, [0] * 3, {})
    strat._assemble(ctx, exp, [W(0.03, 2, 1, "q", 0.7)], "kept", 0.9, [1, 1, 0], {})
    assert tried == ["p led by @0", "q@2"] and not strat.refuted


def test_no_whole_evaluation_starts_that_cannot_end_before_the_deadline():
    from types import SimpleNamespace

    strat = get_strategy("regional")
    strat._reset()
    left = [10.0]
    ctx = SimpleNamespace(threshold=0.98, out_of_time=lambda: False, time_left=lambda: left[0],
                          evaluator=_evaluator(), caches=SimpleNamespace(compile_s=1.0),
                          sweeps=lambda exp, hot_first: iter([[1, 0], [0, 1]]))
    tried = []

    def fake_try(ctx, exp, trial, state, ratio, vec, counts, count, what):
        tried.append(trial)
        left[0] -= 6.0  # each whole evaluation takes 6 s
        strat.whole_s.append(6.0)
        return state, ratio, vec

    strat._try = fake_try
    exp = _exp([("original", "a"), ("original", "b")])
    strat._sweep(ctx, exp, "s", 1.0, [0, 0], {})
    assert tried == [[1, 0]]  # 4 s left after the first, which took 6 s: the second is not started
    assert strat.info["stopped"].startswith("4.0 s left")


def test_without_its_own_profile_the_sites_go_by_the_runners_measured_bounds():
    from types import SimpleNamespace

    class Ctx:
        def __init__(self, measured):
            self._measured = measured

        def measured(self, exp):
            return self._measured

        def hot_order(self, exp):  # as SearchContext.hot_order: measured order, the cold one out
            return [2, 0]

        def heat(self, exp):
            return [3.0, 2.0, 1.0]

    strat = get_strategy("regional")
    exp = SimpleNamespace(num_rewrites=3)
    sites, bounds = strat._order(Ctx([0.2, 0.001, 0.7]), exp, None, None)
    assert sites == [2, 0] and bounds == {0: 0.2, 1: 0.001, 2: 0.7}
    assert strat.info["order"].startswith("measured")
    sites, bounds = strat._order(Ctx(None), exp, None, None)  # no profile at all: the static heat
    assert sites == [0, 1, 2] and bounds[0] == pytest.approx(0.5)


def test_regional_finds_a_single_rewrite_that_wins_and_it_verifies():
    # corpus/attn_linear_causal: two cumsums lowered as quadratic prefix reduce_windows; the
    # scan rewrite wins several times over on its region and on the whole program
    program = corpus.load("corpus/attn_linear_causal")
    options = SearchOptions(patterns=[SCAN], budget_s=40, strategy="regional", xla_options=False)
    closed = []
    close = regional.Regional._close_helpers

    def record_pids(self):
        closed.extend(w.pid for w in self.helper_workers)
        close(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(regional.Regional, "_close_helpers", record_pids)
        res = optimize_program(program, options)
    info = res.strategy_info
    # on a CPU machine of two cores or more, one more worker compiles regions; it is gone after
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert info.get("compile_helpers", 0) == len(closed) == (1 if cores >= 2 else 0)
    for pid in closed:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert info["profile"].startswith("ok") and 1 <= info["sites"] <= 2  # the cooler cumsum may fall under min_time_fraction
    assert info["region_candidates"] >= 1 and info["region_controls"] == info["sites_judged"] >= 1
    assert info["fallback_sites"] == 0
    assert info["winners"] >= 1 and info["taken"], info
    best = res.search_best  # what the strategy returns; the runner's final acceptance is its own
    assert SCAN in best.applied and best.timed and best.verified is not None
    assert best.ratio < 0.9, best.ratio


def test_sweeps_take_a_gain_no_region_showed():
    """With no local winner (a local gain no region can show), the time left goes to each
    rewrite at all its sites, judged on the whole program: both cumsums of attn_linear_causal
    rewritten at once win several times over."""
    program = corpus.load("corpus/attn_linear_causal")
    options = SearchOptions(patterns=[SCAN], budget_s=30, strategy="regional", xla_options=False,
                            strategy_options={"local_gain": 0.99})
    res = optimize_program(program, options)
    info = res.strategy_info
    assert info["winners"] == 0 and info["sweeps"] >= 1, info
    assert any(t.startswith(f"sweep {SCAN}") for t in info["taken"]), info
    best = res.search_best
    assert SCAN in best.applied and best.timed and best.ratio < 0.9, best.ratio


def _loop(x, w):
    return jax.lax.fori_loop(0, 3, lambda i, h: jnp.tanh(jnp.transpose(h) @ w), x)


def test_a_site_in_a_loop_falls_back_to_whole_program_evaluation():
    x = np.eye(16, dtype=np.float32)
    program = lower(_loop, x, x)
    options = SearchOptions(patterns=["fold_transpose_into_dot_lhs"], budget_s=20, strategy="regional",
                            xla_options=False, strategy_options={"profile": False})
    res = optimize_program(program, options)
    info = res.strategy_info
    assert info["fallback_sites"] >= 1 and any("loop" in k for k in info["fallback_reasons"]), info
    assert info["region_candidates"] == 0 and info["whole_candidates"] >= 1
    assert res.status != "error"


def test_auto_picks_regional_for_large_programs_only():
    from shlo_env import zoo
    from shlo_env.search.base import REGIONAL_MIN_OPS, Dim, Expansion, State, auto_strategy

    def exp(program):
        dims = [Dim("rewrite", ("original", "p"), k) for k in range(20)]  # 2**20 vectors
        return Expansion(State.of(program), None, [None] * 20, (), dims)

    big = zoo.load("keras_transformer_train")
    assert big.num_ops() >= REGIONAL_MIN_OPS and auto_strategy(exp(big)) == "regional"
    small = corpus.load("corpus/attn_linear_causal")
    assert auto_strategy(exp(small)) == "mcts"


def _loop_then_outside(x, w):
    h = jax.lax.fori_loop(0, 8, lambda i, h: jnp.tanh(jnp.transpose(h) @ w), x)
    return jnp.transpose(h) @ w


def test_sites_judged_on_the_whole_program_wait_for_the_regions(monkeypatch):
    """A site inside a loop body costs a whole evaluation per alternative: the sites whose
    region can be cut are judged first, whatever the order of their bounds."""
    from shlo_env.search.regional import Regional

    events: list[str] = []
    singles, evaluate = Regional._whole_singles, Regional._evaluate

    def record_singles(self, *a, **k):
        events.append("whole")
        return singles(self, *a, **k)

    def record_regions(self, *a, **k):
        events.append("region")
        return evaluate(self, *a, **k)

    monkeypatch.setattr(Regional, "_whole_singles", record_singles)
    monkeypatch.setattr(Regional, "_evaluate", record_regions)
    x = np.eye(32, dtype=np.float32)
    options = SearchOptions(patterns=["fold_transpose_into_dot_lhs"], budget_s=20, strategy="regional",
                            xla_options=False, strategy_options={"profile": False})
    res = optimize_program(lower(_loop_then_outside, x, x), options)
    assert res.status != "error"
    assert "region" in events and "whole" in events, (events, res.strategy_info)
    assert events.index("region") < events.index("whole"), events


def test_a_large_region_that_costs_more_than_a_whole_evaluation_is_left_to_the_sweeps():
    from types import SimpleNamespace

    strat = get_strategy("regional")
    strat._reset()
    strat.whole_s = [2.0]  # a whole evaluation: 2 s
    strat.region_cost = [3.0, 600]  # the rounds so far: 5 ms per region op
    strat.deferred_ops = {4: 300, 5: 500, 6: 0}  # 1.5 s, 2.5 s, and a fallback site (no region)
    counts = {"left_to_sweeps": 0}
    ctx = SimpleNamespace(evaluator=SimpleNamespace(stats=None), original=SimpleNamespace(num_ops=lambda: 800))
    assert strat._worth_a_region(ctx, [4, 5, 6], counts) == [4, 6]
    assert counts["left_to_sweeps"] == 1
    # no round judged yet: a region op costs two compiles at the whole program's rate (2 x 2 s
    # for 800 ops: 5 ms), so a region of most of the program is not judged (nasrnn's gradient)
    strat.region_cost = [0.0, 0]
    assert strat._worth_a_region(ctx, [4, 5, 6], counts) == [4, 6]
    strat.deferred_ops = {4: 300, 5: 790, 6: 0}
    assert strat._worth_a_region(ctx, [4, 5, 6], counts) == [4, 6]
    strat.deferred_ops = {4: 300, 5: 500, 6: 0}

    # the deferred sites' turn: only those worth a region are cut at all
    strat.region_cost = [3.0, 600]
    cut_asked = []

    def cut(sites, max_ops):
        cut_asked.append(list(sites))
        return []

    strat.cutter = SimpleNamespace(program="aug", profile=None, cut=cut, in_body=lambda s: False)
    ctx.out_of_time = lambda: False
    assert strat._judge(ctx, None, "aug", [4, 5, 6], {}, None, counts, defer=False) == []
    assert cut_asked == [[4, 6]]


def test_no_judging_round_starts_in_the_sweeps_time():
    """Judging stops where the time kept for the sweeps begins, winners or not: on
    keras_transformer_train rounds of large regions ran 15 s into it and no sweep ran."""
    from types import SimpleNamespace

    strat = get_strategy("regional", compile_helpers=0)
    strat._reset()
    strat.reserve = 10.0
    left = [12.0]
    judged = []

    def fake_evaluate(ctx, cands, inputs):
        judged.append(len(cands))
        left[0] -= 5.0  # a round of large regions: 5 s
        return [RegionResult(c, ratio=1.0, median_ratio=1.0) for c in cands]

    def region(site):
        r = Region(program=None, sites=(site,), local={site: 0}, labels={site: ("original", "p")},
                   tiers={site: (0, 0)}, share=0.1, ops=tuple(range(200)))
        return r

    strat.cutter = SimpleNamespace(program="aug", profile=None, cut=lambda sites, max_ops: [region(s) for s in sites],
                                  in_body=lambda s: False)
    strat._evaluate = fake_evaluate
    drawn = []  # the sites whose region inputs were drawn

    def inputs(ctx, aug, regions):
        drawn.extend(r.sites[0] for r in regions)
        return [[] for _ in regions]

    strat._inputs = inputs
    ctx = SimpleNamespace(threshold=0.98, out_of_time=lambda: False, time_left=lambda: left[0],
                          evaluator=SimpleNamespace(stats=SimpleNamespace(evaluated=0)),
                          original=SimpleNamespace(num_ops=lambda: 1000))
    counts = dict(region_candidates=0, region_controls=0, sites_judged=0, region_failed=0, winners=0)
    strat._judge(ctx, None, "aug", [0, 1, 2, 3], {}, None, counts)
    assert judged == [2]  # 12 s left: one round; then 7 s, inside the sweeps' 10 s: no more
    assert counts["sites_judged"] == 1
    assert drawn == [0]  # random inputs only for the region judged, not for the batch

