"""What a program search returns: `SearchSummary` (shared with `optimize`'s `Report`) and
`ProgramResult`, with one persisted form (`to_record` / `from_record`) for the results database,
the cache and the bench's rows."""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any

from shlo_env.execute import xla_options as option_actions
from shlo_env.ir.program import Program

@dataclasses.dataclass
class SearchSummary:
    """What a search did, in the words both `ProgramResult` and `optimize.Report` use (one
    declaration; `optimize.Report.from_result` copies these fields and nothing else)."""

    name: str
    strategy: str  # the strategy that ran ("auto" resolved)
    returned_original: bool = True
    reason: str = ""  # why the original was kept (or what went wrong)
    noise: float = math.nan  # |1 - ratio| of the original against itself (median of the repeats)
    threshold: float = math.nan  # the screening threshold: the best's one-shot ratio must be below it
    # the sequential paired test of the best candidate against the original (`shlo_env.measure.sequential_test`)
    acceptance: str = ""  # its decision: "accept", "reject", "undecided" ("" when it did not run)
    accept_ratio: float = math.nan  # its estimate of T(best) / T(original)
    accept_lower: float = math.nan  # its confidence bounds on that ratio (each one-sided, at the last look)
    accept_upper: float = math.nan  # accepted only when below 1
    accept_pairs: int = 0  # interleaved (original, best) rounds it timed
    accept_s: float = 0.0  # its wall clock
    applied: tuple[str, ...] = ()  # the rewrites of the returned program
    actions: tuple[option_actions.Action, ...] = ()  # XLA actions for it: DisablePass, SetOption
    numerics: str = "EXACT"  # the tier verification established
    candidates_evaluated: int = 0
    cache_hits: int = 0
    failures: dict = dataclasses.field(default_factory=dict)  # rejected candidates by FailureKind
    # candidates left without a timing, by why ("budget", "not asked"; `Evaluator.untimed`)
    untimed: dict = dataclasses.field(default_factory=dict)
    decision_space: int = 1  # decision vectors at the root (pass toggles included)
    strategy_info: dict = dataclasses.field(default_factory=dict)
    search_s: float = 0.0
    total_s: float = 0.0
    original_hash: str = ""
    # what the budget cut short, and why ("phase: why"), and per phase what the schedule gave
    # it, what it spent and what it cut (`search.schedule.PhaseRecord.to_record`), in order
    cuts: tuple[str, ...] = ()
    phases: list = dataclasses.field(default_factory=list)
    candidate_s: float = 0.0  # seconds spent evaluating candidates (region or whole)
    # what `report.explain()` cites, read from the search's measurements (`shlo_env.search.attribution`):
    # per pattern per step of the decision path of the returned program (`returned_original`
    # False): its sites, the user's lines, the profiled kernel share it touched, its measured ratio
    rewrites: list = dataclasses.field(default_factory=list)
    hotspots: list = dataclasses.field(default_factory=list)  # the original's hottest kernels, when profiled
    roofline: dict = dataclasses.field(default_factory=dict)  # the original's time against its floor, or why none

    def describe_phases(self) -> str:
        """One line per phase: seconds given, spent, and what was cut."""
        from shlo_env.search.schedule import PhaseRecord

        lines = [f"  {PhaseRecord.from_record(p)}" for p in self.phases]
        if self.total_s > 0 and self.phases:
            lines.append(f"  candidates  {self.candidate_s:6.1f} s ({self.candidate_s / self.total_s:.0%} of "
                         f"{self.total_s:.1f} s)")
        return "\n".join(lines)

    def describe_acceptance(self) -> str:
        """The paired test's outcome in words ("" when it did not run)."""
        if not self.acceptance:
            return ""
        return (f"paired test: {self.acceptance}, ratio {self.accept_ratio:.3f} (bounds {self.accept_lower:.3f}"
                f"..{self.accept_upper:.3f}) after {self.accept_pairs} pairs in {self.accept_s:.1f} s")

    @property
    def action_tokens(self) -> tuple[str, ...]:
        """The XLA actions (`actions`) as text: pass names disabled, `name=value` options set."""
        return option_actions.tokens(self.actions)

    @action_tokens.setter
    def action_tokens(self, value) -> None:
        self.actions = option_actions.normalize(value)

    @property
    def disabled_passes(self) -> tuple[str, ...]:
        """Deprecated: `actions` (typed) or `action_tokens` (text); it holds options set too."""
        warnings.warn("`disabled_passes` is deprecated: use `actions` or `action_tokens` (it holds XLA "
                      "options set as well as passes disabled)", DeprecationWarning, stacklevel=2)
        return self.action_tokens

    @disabled_passes.setter
    def disabled_passes(self, value) -> None:
        warnings.warn("`disabled_passes` is deprecated: set `actions` or `action_tokens`", DeprecationWarning,
                      stacklevel=2)
        self.action_tokens = value


@dataclasses.dataclass
class ProgramResult(SearchSummary):
    """What `optimize_program` did. Times in seconds (T: 10th percentile of the runs, see runtime); ratio = best / original."""

    requested_strategy: str = ""
    status: str = "ok"  # "ok", or "error" when the original itself could not be compiled/run
    error: str = ""
    best_hash: str = ""
    ratio: float = 1.0  # final independent measurement (1.0 exactly when the original is returned)
    final_timings: int = 0  # side-by-side timings behind `ratio` (their median; 0: the search's)
    search_ratio: float = math.nan  # the best candidate's ratio in the search
    confirm_ratio: float = math.nan  # the acceptance test's estimate (as `accept_ratio`)
    baseline: dict = dataclasses.field(default_factory=dict)  # original: {"full", "async", "compute", "runs"}
    best: dict = dataclasses.field(default_factory=dict)  # returned program, same keys
    decisions: list = dataclasses.field(default_factory=list)  # vectors from the original to the best
    # every decision vector the strategy applied, in order: [parent state key, [[dim, choice], ...]]
    # (sparse: only the non-zero choices; a vector can have hundreds of dimensions)
    trajectory: list = dataclasses.field(default_factory=list)
    verification: dict = dataclasses.field(default_factory=dict)
    timed: int = 0
    num_alternatives: int = 0
    cost_original: dict = dataclasses.field(default_factory=dict)  # XLA cost analysis (flops, bytes)
    cost_best: dict = dataclasses.field(default_factory=dict)
    # peak resident memory of this process plus its worker during the search (`shlo_env.measure.memory`)
    peak_rss_mb: float | None = None
    # Not persisted: what a caller needs to build on the result (optimize() checks the winner
    # once more in its own process on these inputs).
    program: Program | None = dataclasses.field(default=None, repr=False, compare=False)
    evaluation: object = dataclasses.field(default=None, repr=False, compare=False)
    check_inputs: list | None = dataclasses.field(default=None, repr=False, compare=False)
    check_reference: object = dataclasses.field(default=None, repr=False, compare=False)  # (ref, sensitivity)
    search_best: object = dataclasses.field(default=None, repr=False, compare=False)  # even if not kept
    stats: object = dataclasses.field(default=None, repr=False, compare=False)  # EvaluatorStats
    timing: Any = dataclasses.field(default=None, repr=False, compare=False)  # the TimingPolicy of its timings

    @property
    def identical(self) -> bool:
        """The returned program is the original (equal DAG hash, no XLA pass disabled)."""
        return self.best_hash == self.original_hash and not self.actions

    @property
    def speedup(self) -> float:
        return 1.0 / self.ratio if self.ratio > 0 else math.inf

    def to_record(self) -> dict:
        """The persisted fields (JSON-friendly); `from_record` reads them back."""
        out = {}
        for f in dataclasses.fields(self):
            if f.name in TRANSIENT:
                continue
            v = getattr(self, f.name)
            out[f.name] = list(v) if isinstance(v, tuple) else v
        del out["actions"]  # stored as text (the results database's column)
        out["disabled_passes"] = list(self.action_tokens)  # the database's column name
        out["identical"] = self.identical
        return out

    record = to_record  # the name the results database and the bench call

    @classmethod
    def from_record(cls, record: dict) -> "ProgramResult":
        """A result from `to_record`'s dict (fields it does not know are ignored)."""
        known = {f.name for f in dataclasses.fields(cls)} - TRANSIENT - {"actions"}
        values: dict[str, Any] = {k: (tuple(v) if k in ("applied", "cuts") and isinstance(v, list) else v)
                                  for k, v in record.items() if k in known}
        res = cls(**values)
        res.action_tokens = record.get("disabled_passes", ())
        return res

    def __str__(self) -> str:
        if self.status != "ok":
            return f"{self.name}: error: {self.error}"
        what = ", ".join(counted(self.applied) + [f"-{p}" for p in self.action_tokens]) or "(original)"
        base = self.baseline.get("full", math.nan)
        how = f", the median of {self.final_timings} timings" if self.final_timings > 1 and not self.returned_original else ""
        return (f"{self.name} [{self.strategy}]: ratio {self.ratio:.3f}{how} ({what}); original "
                f"{base * 1e3:.3f} ms; threshold {self.threshold:.3f}"
                + (f"; {self.describe_acceptance()}" if self.acceptance else "")
                + (f"; {self.reason}" if self.reason else "")
                + (f"; cut short: {'; '.join(self.cuts)}" if self.cuts else "")
                + (f"\n{self.describe_phases()}" if self.phases else ""))


def counted(names) -> list[str]:
    """["a", "a", "b"] -> ["a x2", "b"] (order of first use): a rewrite taken at many sites, once."""
    counts: dict[str, int] = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    return [f"{n} x{c}" if c > 1 else n for n, c in counts.items()]


def timing_dict(t) -> dict:
    """A `runtime.Timing` as the result's `baseline` / `best` dicts."""
    return {"full": t.full, "async": t.async_, "compute": t.compute, "runs": t.runs}


TRANSIENT = frozenset({"program", "evaluation", "check_inputs", "check_reference", "search_best", "stats", "timing"})

__all__ = ["ProgramResult", "SearchSummary", "counted", "timing_dict"]
