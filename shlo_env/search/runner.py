"""`run_search(program, strategy, budget_s)`: one search on a lowered program, without the rest
of `optimize` (no confirmation, no callable). For benchmarks and research scripts.

    from shlo_env.search.runner import run_search
    result = run_search(program, "beam", budget_s=30, passes=True)
    result.best.ratio, result.best.describe(), result.stats.hit_rate, result.info
"""

from __future__ import annotations

import dataclasses
import time

from shlo_env.import_ import Program
from shlo_env.patterns.base import resolve
from shlo_env.search import passes as pass_actions
from shlo_env.search.base import Progress, SearchContext, auto_strategy, get_strategy
from shlo_env.search.evaluator import Evaluation, Evaluator, EvaluatorStats
from shlo_env.worker import CandidateError, Worker, default_timeout


@dataclasses.dataclass
class SearchResult:
    """`best`: the best verified state the search found. `result`: what `optimize` would keep:
    `best` if it is faster than `threshold` (1 - max(min_gain, 2 * noise)) on its search
    measurement and again on a confirming re-time, else the original (ratio 1)."""

    strategy: str
    best: Evaluation
    result: Evaluation
    confirmed_ratio: float
    stats: EvaluatorStats
    info: dict
    decision_space: int
    noise: float
    threshold: float
    seconds: float
    expansions: int


def run_search(program: Program, strategy: str = "auto", *, budget_s: float = 60.0, patterns=None,
               passes=False, max_steps: int = 6, num_random: int = 2, seed: int = 0, min_gain: float = 0.03,
               strategy_options: dict | None = None, worker: Worker | None = None, progress: bool = False,
               timeout_s: float | None = None) -> SearchResult:
    """Search `program` with one strategy in a fresh evaluator (its own cache) for `budget_s`."""
    t0 = time.perf_counter()
    own = worker is None
    worker = worker or Worker(timeout_s or default_timeout())
    try:
        ev = Evaluator(program, worker=worker, num_random=num_random, seed=seed, hard_deadline=t0 + budget_s + 10)
        noise = ev.measure_noise()
        threshold = 1.0 - max(min_gain, 2.0 * noise)
        bar = Progress(progress, label=f"{strategy} {program.name}", budget_s=budget_s)
        ctx = SearchContext(program, resolve(patterns), ev, deadline=t0 + budget_s, max_steps=max_steps,
                            progress=bar, threshold=threshold, passes=pass_actions.resolve(passes), seed=seed)
        root = ctx.expand(ctx.root)
        name = strategy if strategy != "auto" else auto_strategy(root)
        searcher = get_strategy(name, **(strategy_options or {}))
        try:
            best = searcher.search(ctx)
        finally:
            bar.close(ev, ctx.best)
        original = ev.cache[ev.original_key]
        result, confirmed = original, float("nan")
        if best.ok and best.key != ev.original_key and best.ratio < threshold:
            try:
                confirmed = ev.retime(best)
            except CandidateError:
                confirmed = float("inf")
            if confirmed < threshold:
                result = best
        return SearchResult(name, best, result, confirmed, ev.stats, dict(searcher.info), root.size, noise,
                            threshold, time.perf_counter() - t0, ctx.expansions)
    finally:
        if own:
            worker.close()
