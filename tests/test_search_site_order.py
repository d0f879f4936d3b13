"""The search spends its budget where the time is (issue 31, item 4): with one profile of the
original, sites are tried by the share of the run time their kernels hold, and a site whose
kernels hold a negligible share is not tried at all."""

import time

import jax.numpy as jnp
import numpy as np

from shlo_env.ir.program import lower
from shlo_env.search import site_heat
from shlo_env.search.base import SearchContext
from shlo_env.search.evaluator import Evaluator
from shlo_env.rewrite.driver import augment, list_alternatives
from shlo_env.search.program_search import measure_sites
from shlo_env.search.schedule import Schedule
from shlo_env.execute.runners import InProcess
from test_search_acceptance import TanhTimesOne  # one site per tanh


def _augment_root(ctx):
    """The original augmented once, where the root's expansion reads it (as the augment phase does)."""
    augmented = augment(ctx.original, list(ctx.patterns), deadline=time.perf_counter() + 30)
    ctx.caches.augmented[ctx.root.hash] = (augmented, list_alternatives(augmented))


def _sites_tried(ctx, exp, hot_first=True):
    return [next(i for i, c in enumerate(v) if c) for v in ctx.singles(exp, hot_first)]


def test_the_hot_site_is_tried_first_and_the_cold_one_skipped():
    rng = np.random.default_rng(0)
    small = rng.standard_normal((4,)).astype(np.float32)
    # 768, not 512: under load the 4-value kernel was once timed at 0.57 % of the 512 x 512
    # program, past the 0.5 % line; of this one it holds under 0.1 %
    big = rng.standard_normal((768, 768)).astype(np.float32)
    # the cold site comes first in program order, so the static order by position would try it first
    p = lower(lambda s, a: (jnp.tanh(s), jnp.tanh(a) @ a), small, big, name="hot_and_cold")
    with Evaluator(p, worker=InProcess(), num_random=0) as evaluator:
        ctx = SearchContext(p, [TanhTimesOne()], evaluator, deadline=time.perf_counter() + 60)
        plan = Schedule(60.0)
        plan.calibrate(probe_s=0.1, call_s=1e-3)
        _augment_root(ctx)
        order = measure_sites(ctx, None, plan)
        cuts = plan.cuts()
        exp = ctx.expand(ctx.root)
        assert len(exp.alts) == 2 and not cuts, cuts
        hot = next(i for i, a in enumerate(exp.alts) if "768x768" in str(a.op.operands[0].type))
        cold = 1 - hot
        bounds = ctx.measured(exp)
        # the hot tanh's fusion shares the time with the dot (not its site's kernel): a few per cent
        assert bounds is not None and bounds[cold] < site_heat.NEGLIGIBLE_TIME_FRACTION <= bounds[hot], bounds
        assert bounds[hot] > 10 * bounds[cold], bounds
        assert order.startswith("measured: 1 of 2 sites"), order
        assert _sites_tried(ctx, exp) == [hot]  # the cold site is skipped
        assert sorted(_sites_tried(ctx, exp, hot_first=False)) == [0, 1]  # program order: both


def test_no_profile_when_the_budget_cannot_afford_it():
    from shlo_env.search import schedule

    plan = schedule.Schedule(30.0)
    assert plan.profile_allowed(site_heat.profile_cost_s(compile_s=0.2, call_s=1e-3))[0]
    ok, why = plan.profile_allowed(site_heat.profile_cost_s(compile_s=0.5, call_s=4.0))  # a 4 s call
    assert not ok and f"{schedule.PROFILE * 30:.1f} s allowed" in why


def test_the_strategys_own_estimate_of_the_profile_can_rule_it_out():
    """A train step's profile took 12.5 s where the probe predicted at most 9 (the fixed phases'
    share at budget 60): the strategy's estimate, sized from the program, counts too."""
    p = lower(lambda a: jnp.tanh(a) * 1.0, np.ones((8,), np.float32), name="one_site")
    with Evaluator(p, worker=InProcess(), num_random=0) as evaluator:
        ctx = SearchContext(p, [TanhTimesOne()], evaluator, deadline=time.perf_counter() + 60)
        plan = Schedule(60.0)
        plan.calibrate(probe_s=0.1, call_s=1e-3)
        _augment_root(ctx)
        assert measure_sites(ctx, None, plan, at_least_s=16.3) == "static"
        assert any("about 16.3 s" in c or "16.3" in c for c in plan.cuts()), plan.cuts()
        assert measure_sites(ctx, None, plan, at_least_s=0.5).startswith("measured")


def test_a_site_is_skipped_only_when_measured_and_static_weights_agree_it_is_cold():
    # site 1's matched ops missed its kernel (measured 0.07 %), but the static estimate says it
    # holds most of the time: it is kept (quadratic_form's 25x reassociation looked like this)
    assert site_heat.measured_order([0.0, 0.0007, 0.3], [1.0, 900.0, 99.0]) == [2, 1]


def test_the_profile_runs_in_the_worker_and_is_stopped_at_its_timeout():
    import pytest

    from shlo_env.execute import runtime
    from shlo_env.execute.runners import CandidateError, FailureKind
    from shlo_env.execute.worker import Worker
    from shlo_env.rewrite import region_cut
    from shlo_env.rewrite.driver import augment, list_alternatives

    rng = np.random.default_rng(0)
    big = rng.standard_normal((256, 256)).astype(np.float32)
    p = lower(lambda a: jnp.tanh(a) @ a, big, name="one_site")
    aug = augment(p, [TanhTimesOne()])
    with Worker() as w:
        w.set_inputs("x", runtime.random_inputs(p.in_specs, 0))
        prof = site_heat.profile_original(aug, runner=w, input_key="x", runs=2, warmup=1, timeout_s=120)
        region_cut.check_profile(aug, prof)  # op indices of the augmented program's baseline
        weights, _ = site_heat.measured_weights(aug, len(list_alternatives(aug)), runner=w, input_key="x")
        assert len(weights) == 1 and 0 < weights[0] <= 1
        with pytest.raises(CandidateError) as stopped:
            # a request gets 0.1 s at least (`Worker._call`): 5,000 traced runs take far longer
            site_heat.profile_original(aug, runner=w, input_key="x", runs=5000, timeout_s=0.1)
        assert stopped.value.kind is FailureKind.TIMEOUT


def test_a_program_that_loops_is_profiled_on_one_traced_call():
    """Tracing each iteration of a loop costs 30-300 calls a call, and one call already runs its
    kernels many times: a looping program's profile traces one call, any other `PROFILE_RUNS`."""
    import jax

    x = np.ones((8, 8), np.float32)
    straight = lower(lambda a: jnp.tanh(a) @ a, x, name="straight")
    looping = lower(lambda a: jax.lax.fori_loop(0, 4, lambda i, h: jnp.tanh(h) @ a, a), x, name="looping")
    assert site_heat.profile_runs(straight) == site_heat.PROFILE_RUNS > 1
    assert site_heat.profile_runs(looping) == 1
    with Evaluator(looping, worker=InProcess(), num_random=0) as evaluator:
        ctx = SearchContext(looping, [TanhTimesOne()], evaluator, deadline=time.perf_counter() + 60)
        plan = Schedule(60.0)
        plan.calibrate(probe_s=0.1, call_s=1e-3)
        _augment_root(ctx)
        assert measure_sites(ctx, None, plan).startswith("measured"), plan.cuts()
        assert ctx.caches.profiles[ctx.root.hash].runs == 1
