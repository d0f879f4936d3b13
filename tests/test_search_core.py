"""The search core's single definitions (issue 29): one evaluation status, one acceptance rule
(with its median requirement), one pick-first, and a context whose strategies do not write
into each other's state."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from shlo_env.rewrite.decisions import pick_first
from shlo_env.execute.runners import FailureKind
from shlo_env.search.base import Dim, pick_first_vector
from shlo_env.search.evaluator import Measurement, Status

from test_search import make_ctx, multi_program  # noqa: F401  (multi_program is a fixture)


def test_one_pick_first_rule_everywhere():
    from shlo_env.rewrite.driver import pick_first as driver_pick_first
    from shlo_env.learn.policy import pick_first_agent

    assert pick_first([1, 3, 2, 1]) == [0, 1, 1, 0]
    alts = [type("A", (), {"num_choices": n})() for n in (1, 3, 2)]
    assert driver_pick_first(None, alts) == [0, 1, 1]
    dims = [Dim("rewrite", ("", "a"), 0), Dim("rewrite", ("",), 1), Dim("pass", ("keep", "disable cse"), 0)]
    assert pick_first_vector(dims) == [1, 0, 0]  # XLA toggles untouched
    mask = np.array([[True, True, False], [True, False, False]])
    assert pick_first_agent(None, None, {"action_mask": mask}).tolist() == [1, 0]


def test_evaluation_status_replaces_the_flags(multi_program):
    ctx, _ = make_ctx(multi_program, max_steps=1)
    exp = ctx.expand(ctx.root)
    child = ctx.child(exp, next(iter(ctx.singles(exp))))
    verified = ctx.evaluate(child, time_it=False)
    assert verified.status is Status.VERIFIED and verified.ok and not verified.timed
    assert math.isnan(verified.ratio)  # unknown, never an inf that means "not timed"
    assert verified.untimed.startswith("not asked")
    timed = ctx.evaluate(child)
    assert timed is verified and timed.status in (Status.TIMED, Status.CONFIRMED) and timed.untimed == ""
    original = ctx.evaluator.cache[ctx.evaluator.original_key]
    assert original.status is Status.CONFIRMED and original.ratio == 1.0
    rejected = dataclasses.replace(timed)
    rejected.reject(FailureKind.CRASH, "x")
    assert not rejected.ok and not rejected.timed and rejected.error == "crash: x" and math.isnan(rejected.ratio)


def test_improves_is_the_one_acceptance_rule_with_its_median(multi_program):
    ctx, _ = make_ctx(multi_program, max_steps=1)
    base = ctx.evaluator.cache[ctx.evaluator.original_key]
    fast = dataclasses.replace(base, status=Status.TIMED, measurement=Measurement(0.5, 0.5))
    lucky = dataclasses.replace(base, status=Status.TIMED, measurement=Measurement(0.5, 0.99))
    unknown_median = dataclasses.replace(base, status=Status.TIMED, measurement=Measurement(0.5))
    untimed = dataclasses.replace(base, status=Status.VERIFIED, measurement=None)
    assert ctx.improves(fast) and ctx.improves(unknown_median)
    assert not ctx.improves(lucky)  # a lucky tail of fast runs is not a win
    assert not ctx.improves(untimed)
    assert ctx.improves(fast, 0.6) and not ctx.improves(fast, 0.5)  # relative to a parent's ratio


def test_strategies_keep_their_options_to_themselves(multi_program):
    from shlo_env.search import get_strategy

    ctx, _ = make_ctx(multi_program, max_steps=1, budget_s=30)
    settings = ctx.settings
    get_strategy("beam", hot_first=False, expand_budget=2).search(ctx)
    assert ctx.settings is settings and not hasattr(ctx, "hot_first")
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.settings.threshold = 0.5  # type: ignore[misc]
    # learned and cost-model take the shared aim options (they used to drop them)
    for name in ("learned", "cost-model"):
        s = get_strategy(name, screen_options=False, hot_first=False)
        assert not s.screen_options and not s.hot_first


def test_a_search_records_its_peak_memory_for_the_bench_csv(multi_program):
    from shlo_env.bench.report import CSV_COLUMNS, csv_row
    from shlo_env.execute.runners import InProcess
    from shlo_env.search.program_search import SearchOptions, optimize_program

    res = optimize_program(multi_program, SearchOptions(strategy="pick-first", budget_s=4, cost=False,
                                                        xla_options=False), worker=InProcess())
    rec = res.record()
    assert rec["peak_rss_mb"] is not None and rec["peak_rss_mb"] > 10
    assert rec["disabled_passes"] == [] and "actions" not in rec  # the database's text column
    assert "peak_rss_mb" in CSV_COLUMNS and csv_row(rec)["peak_rss_mb"] == rec["peak_rss_mb"]
