"""The first sweep: rewrites that never cost, at every site, as a search's first candidate.

A `sweep_first` pattern (`Pattern.sweep_first`: EXACT, never more ops than it replaces, no
arithmetic added; `SumOfDisjointPads`) can only help, so it need not wait its turn among
thousands of sites. On Enzyme-JAX's llama gradient (7.3k ops) `SumOfDisjointPads` taken at its
29 sites gives about 0.80 of jax.jit, and the regional strategy never reached it: matching every
pattern on the original was cut at its deadline with those sites unrecorded, and judging sites
one region at a time cannot show a gain that comes from all of them together
(docs/experiments/2026-11-29-vs-enzyme.md).

So before a strategy searches (`Strategy.begin`, after the XLA option screen), `sweep`:

1. matches the `sweep_first` patterns alone on the start state's program (one or two patterns:
   fast where matching all of them is not);
2. takes every site at once (pick-first: each site's first rewrite) and evaluates that program
   like any candidate (`SearchContext.evaluate`: verified on every input set, timed side by
   side with the original, a new best timed twice);
3. when it passes the acceptance rule against the start (`SearchContext.improves`), it becomes
   the search's start state (`SearchContext.first_sweep`): the strategy searches the other
   rewrites on top of it, and the final acceptance judges whatever the strategy returns.

Its decisions index the first sweep's own alternatives, not an expansion the strategy sees: the
result's `decisions` begin after it, and its `applied` names the pattern.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from shlo_env.rewrite.decisions import pick_first
from shlo_env.rewrite.driver import ApplyError, AugmentStats, apply, augment, list_alternatives
from shlo_env.search.schedule import Schedule

if TYPE_CHECKING:
    from shlo_env.search.base import SearchContext, State


@dataclasses.dataclass
class FirstSweep:
    """What the first sweep did: its patterns, sites, the candidate's ratio, and the start it chose."""

    patterns: tuple[str, ...] = ()
    sites: int = 0
    ratio: float = math.nan  # the swept program's evaluated ratio to the original
    outcome: str = ""  # taken, not faster, no site, no time, or why it was not evaluated
    seconds: float = 0.0
    evaluate_s: float = 0.0  # of those, its whole-program evaluation's (0: none ran)
    start: tuple[State, float] | None = None  # the swept state and its ratio, when taken

    def summary(self) -> dict:
        return {"patterns": list(self.patterns), "sites": self.sites,
                "ratio": None if math.isnan(self.ratio) else round(self.ratio, 4),
                "outcome": self.outcome, "seconds": round(self.seconds, 3), "evaluate_s": round(self.evaluate_s, 3)}


def sweep_first_patterns(patterns: Iterable) -> list:
    """The `sweep_first` patterns among `patterns` (names and other entries are not)."""
    return [p for p in patterns if getattr(p, "sweep_first", False)]


def sweep(ctx: SearchContext, start: State, start_ratio: float = 1.0) -> FirstSweep:
    """Evaluate `start` with every `sweep_first` rewrite taken at all its sites (see the module
    docstring); `start` of the result is that state when it beats `start_ratio`."""
    out = FirstSweep()
    first = sweep_first_patterns(ctx.patterns)
    if not first:
        return out
    out.patterns = tuple(p.name for p in first)
    if ctx.out_of_time():
        out.outcome = "no time"
        return out
    t0 = time.perf_counter()
    try:
        out.outcome = _evaluate(ctx, out, first, start, start_ratio)
    finally:
        out.seconds = time.perf_counter() - t0
    return out


def _evaluate(ctx: SearchContext, out: FirstSweep, first: list, start: State, start_ratio: float) -> str:
    """Match, apply everywhere, evaluate; fills `out` and says how it ended."""
    stats = AugmentStats()
    augmented = augment(start.program, first, stats=stats,
                        deadline=time.perf_counter() + Schedule.child_augment_s(ctx.time_left()))
    alts = list_alternatives(augmented)
    out.sites = len(alts)
    if not alts:
        return "no site" + (" (matching was cut at its deadline)" if stats.cut else "")
    try:
        program = apply(augmented, pick_first(a.num_choices for a in alts))
    except ApplyError as e:
        return f"not applied: {e}"[:200]
    swept = type(start).of(program, start.actions)  # a `State` (base imports this module, not the reverse)
    t = time.perf_counter()
    ev = ctx.evaluate(swept)
    out.evaluate_s = time.perf_counter() - t
    if not ev.timed:
        return (ev.error or f"untimed: {ev.untimed}")[:200]
    out.ratio = ev.ratio
    if not ctx.improves(ev, start_ratio):
        return "not faster"
    out.start = (swept, ev.ratio)
    return "taken"


__all__ = ["FirstSweep", "sweep", "sweep_first_patterns"]
