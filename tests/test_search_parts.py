"""The search parts (issue 29 item 1): sources, rankers, the acquisition rule; and the worked
example of docs/search_parts.md runs as written."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

from shlo_env.search import acquisition, sources
from shlo_env.search.base import _STRATEGIES, get_strategy, is_stop
from shlo_env.search.rankers import CostAnalysis, Prediction

from test_search import make_ctx, multi_program  # noqa: F401  (multi_program is a fixture)

DOC = Path(__file__).resolve().parents[1] / "docs" / "search_parts.md"


def test_the_acquisition_rule_times_what_may_clear_the_threshold():
    sure_gain, maybe, slow, blind, none = (Prediction(0.8, 0.0), Prediction(1.0, 0.1), Prediction(1.5, 0.1),
                                           Prediction(3.0, math.inf), Prediction(math.inf, 0.1))
    assert acquisition.worth_timing(sure_gain, 0.97) and acquisition.worth_timing(maybe, 0.97)
    assert not acquisition.worth_timing(slow, 0.97) and not acquisition.worth_timing(none, 0.97)
    assert acquisition.worth_timing(blind, 0.97)  # unbounded: a static model cannot see it
    assert acquisition.pick([slow, maybe, sure_gain, blind, none], 0.97) == [3, 2, 1]
    assert acquisition.pick([slow, maybe, sure_gain, blind, none], 0.97, top_k=2) == [3, 2]


def test_sources_compose(multi_program):
    ctx, _ = make_ctx(multi_program, max_steps=1)
    exp = ctx.expand(ctx.root)
    first = list(sources.pick_first(ctx, exp))
    singles = list(sources.singles(False)(ctx, exp))
    assert first and len(singles) == sum(d.num_choices - 1 for d in exp.dims)
    both = list(sources.distinct(sources.chain(sources.pick_first, sources.singles(False)))(ctx, exp))
    assert both[0] == first[0] and len(both) == len({tuple(v) for v in both})
    assert not any(is_stop(v) for v in both)
    assert len(list(sources.distinct(sources.random_draws(50), limit=3)(ctx, exp))) <= 3


def test_the_cost_analysis_ranker_predicts_ratios_to_the_parent(multi_program):
    ctx, _ = make_ctx(multi_program, max_steps=1)
    exp = ctx.expand(ctx.root)
    children = [(v, ctx.child(exp, v)) for v in sources.singles(False)(ctx, exp)]
    preds = CostAnalysis(uncertainty=0.1).rank(ctx, exp, children)
    assert len(preds) == len(children) and all(p.uncertainty == 0.1 and p.ratio > 0 for p in preds)


def test_the_worked_example_runs(multi_program):
    code = re.search(r"```python\n(.*?)```", DOC.read_text().split("## A new strategy", 1)[1], re.S).group(1)
    assert len(code.strip().splitlines()) <= 40
    try:
        exec(compile(code, str(DOC), "exec"), {})
        ctx, _ = make_ctx(multi_program, max_steps=3, budget_s=60)
        strategy = get_strategy("hot-greedy")
        best = strategy.search(ctx)
        assert best.timed and best.ratio < 1.0  # the fake timing model has faster rewrites
        assert ctx.evaluator.stats.timed <= 2 * 3  # at most top_k per step
    finally:
        _STRATEGIES.pop("hot-greedy", None)


def test_nothing_is_timed_when_no_ratio_can_pass(multi_program):
    """A noise measurement above 50 % (a loaded machine) gives a threshold at or below 0."""
    from shlo_env.search.cost_model import CostModel

    ctx, _ = make_ctx(multi_program, max_steps=1)
    ctx.settings = dataclasses.replace(ctx.settings, threshold=-0.2)
    exp = ctx.expand(ctx.root)
    children = [(v, ctx.child(exp, v)) for v in sources.singles(False)(ctx, exp)]
    cm = CostModel()
    assert cm.to_time(ctx, [Prediction(0.5, cm.band(ctx))] * len(children)) == []
    assert acquisition.pick([Prediction(0.1, math.inf)], -0.2) == []
