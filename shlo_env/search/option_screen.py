"""The XLA option screen: reach option actions in the first seconds of a search.

XLA compile options (`shlo_env.execute.xla_options`) are toggles beside the rewrites, but a strategy
that meets them as one more decision dimension among dozens of alternatives ops rarely tries
one within a budget of a few seconds (a random or UCB choice flips them with a small prior, and
beam search's single choices come after every rewrite). The screen runs first instead:

1. Every offered option token is compiled and timed against the original, side by side in as
   few worker requests as the time allows (A, B1, B2, ..., A, B1, B2, ...): one compile each
   and a short run count, the first request with `first_chunk` tokens, later ones sized by the
   time a token took, all within `share` of the time left. Tokens go in `PRIORITY` order, so a
   short screen covers the options that moved corpus programs most often.
2. The screen's ratios only rank; nothing is accepted by them. The `verify_top` options that
   looked faster by the search's least gain (a screen ratio under `ctx.threshold`: on the zoo
   and the corpus, none of 31 screened between that and 1 passed its evaluation) are
   evaluated like any candidate (`SearchContext.evaluate`: verified on every
   input set within the option's numerics tier, timed side by side, a new best timed twice),
   and the compiles the screen made are reused by that evaluation (the worker caches by text
   and options).
3. The fastest one that beats the noise threshold is the screen's `start` (state, ratio);
   `SearchContext.screen_options` makes it the search's start state, and the strategy then
   searches rewrites on top of it. The result keeps what was screened.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

from shlo_env.execute import xla_options
from shlo_env.search.passes import normalize
from shlo_env.search.schedule import Schedule
from shlo_env.measure.timing_policy import TimingPolicy
from shlo_env.execute.worker import CandidateError

if TYPE_CHECKING:
    from shlo_env.search.base import SearchContext, State

# Screen order on CPU: by the corpus geomean of each option value alone in the XLA options table
# of docs/pattern_effectiveness.md (benchmarks/xla_options.py; measured at load 9, so weak
# evidence: re-rank on a quiet machine). Any other offered token (GPU options, values not
# listed) follows in its given order.
PRIORITY: tuple[str, ...] = (
    "xla_cpu_experimental_xnn_graph_fusion_mode=XNN_GRAPH_FUSION_MODE_BYPASS_COST_MODEL",  # 0.951
    "xla_cpu_experimental_xnn_graph_fusion_mode=XNN_GRAPH_FUSION_MODE_GREEDY_SLINKY",  # 0.982
    "xla_cpu_prefer_vector_width=128",  # 1.017
    "xla_cpu_multi_thread_eigen=false",  # 1.079
    "xla_cpu_experimental_xnn_graph_fusion_mode=XNN_GRAPH_FUSION_MODE_GREEDY",  # 1.096
    "xla_cpu_enable_concurrency_optimized_scheduler=true",  # 1.116
    "xla_cpu_parallel_codegen_split_count=1",  # 1.123
    "xla_cpu_use_xnnpack=true",  # 1.142
    "xla_cpu_parallel_codegen_split_count=8",  # 1.143
    "xla_cpu_prefer_vector_width=512",  # 1.173
    "xla_cpu_use_xnnpack=false",  # 1.202
    "xla_cpu_enable_concurrency_optimized_scheduler=false",  # 1.236
    "xla_cpu_use_onednn=true",  # 1.278
)


@dataclasses.dataclass
class Screen:
    """What the screen did: the screen ratio per token tried, and the start state it chose."""

    tried: dict[str, float] = dataclasses.field(default_factory=dict)  # token -> screen ratio
    verified: dict[str, float] = dataclasses.field(default_factory=dict)  # token -> evaluated ratio
    chosen: str | None = None
    seconds: float = 0.0
    stopped: str = ""  # why screening stopped before the last token ("" when it did not)
    start: tuple[State, float] | None = None  # the chosen option's state and its measured ratio

    def summary(self) -> dict:
        return {"tried": len(self.tried), "screen_ratios": dict(self.tried), "verified": dict(self.verified),
                "chosen": self.chosen, "seconds": round(self.seconds, 3), "stopped": self.stopped}


def ordered(tokens) -> list[str]:
    """Option tokens in screen order: `PRIORITY` first, the others after, each once."""
    rank = {t: i for i, t in enumerate(PRIORITY)}
    unique = list(dict.fromkeys(tokens))
    return sorted(unique, key=lambda t: (rank.get(t, len(PRIORITY)), unique.index(t)))


def _timeout(ctx: SearchContext) -> float | None:
    """A worker request may run up to the evaluator's hard deadline (None: the worker's limit)."""
    hard = ctx.evaluator.hard_deadline
    return None if hard is None else max(0.5, hard - time.perf_counter())


# Screen ratios only rank the options (the best are then evaluated like any candidate): short timings.
SCREEN_TIMING = TimingPolicy(runs=5, warmup=2, min_seconds=0.05)


def screen(ctx: SearchContext, *, first_chunk: int = 1, timing: TimingPolicy = SCREEN_TIMING,
           verify_top: int = 2) -> Screen:
    """Screen the option actions offered at the root (see the module docstring); `start` is
    the best verified option state that beats the noise threshold, if any."""
    out = Screen()
    exp = ctx.expand(ctx.root)
    position = {exp.passes[d.index]: i for i, d in enumerate(exp.dims) if d.kind == "pass"}
    tokens = ordered(t for t in exp.passes if xla_options.is_option(t))
    if not tokens or ctx.out_of_time():
        return out
    t0 = time.perf_counter()
    allowance = Schedule.option_screen_s(ctx.time_left())
    ev = ctx.evaluator
    key = ev.verifier.keys[0]  # the search's set 0, already in the worker
    base = (ev.baseline_text, ev.disabled_passes)
    per_token: float | None = None
    i = 0
    while i < len(tokens):
        left = allowance - (time.perf_counter() - t0)
        n = first_chunk if per_token is None else int(left // per_token)
        if n < 1 or ctx.out_of_time():
            out.stopped = "time"
            break
        chunk = tokens[i:i + n]
        started = time.perf_counter()
        items = [base] + [(ev.baseline_text, normalize(ev.disabled_passes + (t,))) for t in chunk]
        try:
            timings = ev.worker.time_each(items, key, timing, timeout_s=_timeout(ctx))
        except CandidateError as e:  # a compile XLA rejects, or the deadline: the search may still try them
            out.stopped = f"{e.kind}: {e.message}"[:200]
            break
        per_token = (time.perf_counter() - started) / len(chunk)
        for t, measured in zip(chunk, timings[1:]):
            out.tried[t] = measured.full / timings[0].full
        i += len(chunk)

    for t in sorted(out.tried, key=out.tried.__getitem__)[:verify_top]:
        if out.tried[t] >= ctx.threshold or ctx.out_of_time():
            break  # not faster by the search's least gain: its evaluation would not take it
        vec = [0] * len(exp.dims)
        vec[position[t]] = 1
        state = ctx.child(exp, vec)
        if state is None:
            continue
        evaluation = ctx.evaluate(state)
        if evaluation.timed:
            out.verified[t] = evaluation.ratio
            if ctx.improves(evaluation) and (out.start is None or evaluation.ratio < out.start[1]):
                out.start = (state, evaluation.ratio)
                out.chosen = t
    out.seconds = time.perf_counter() - t0
    return out
