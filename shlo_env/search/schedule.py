"""One schedule per program search: every deadline and share of the budget, and where it went.

A `Schedule` is built once per `optimize_program` call from the budget, the program's size and
the machine, and calibrated by the probe (the original's compile and first call). Every phase of
the search asks it for its time, and every strategy asks it for the time of its own steps; no
other module holds a budget fraction (`tests/test_schedule.py` checks that). It records what each
phase was given, what it spent and what it cut, for the report (`ProgramResult.phases`).

The shares, in one table (fractions of the whole budget unless the name says otherwise):

| share | of | for |
|---|---|---|
| `FIXED` 0.40 | budget | probe, originals, noise, augment and profile together: the noise and the profile take what the others leave |
| `ORIGINALS` 0.05 | budget | the original's runs on the random input sets |
| `PAIR` 0.05 | budget | one side-by-side timing of two programs |
| `NOISE` 0.10 | budget | the original timed against itself |
| `AUGMENT` 0.10 | budget | matching the patterns on the original |
| `PROFILE` 0.15 | budget | one profile of the original (site order) |
| `TAIL` 0.05-0.15 | budget | kept after the hard deadline for the final timing: `FINAL_MARGIN` x its `FINAL_TIMINGS` pair timings, within these bounds |
| `SEARCH_GAP` 0.05 | budget | the search proposes no candidate past the hard deadline less this (or less the paired test's reserve, if more) |
| `ACCEPT_MAX` 0.30 | budget | the most the search leaves for the paired test |
| `ACCEPT_OF_LEFT` 0.80 | time left before the hard deadline | the paired test (the rest: the check's reference) |
| `CHILD_AUGMENT` 0.20 | search time left | matching the patterns on one searched state |
| `REGION_PROFILE` 0.35 | search time left | the regional strategy's profile |
| `SWEEPS` 0.30 | search time left after the profile | the regional strategy's sweeps (at least one whole-program evaluation, and `SWEEP_MARGIN` of one; none where the time left holds less than `SWEEP_ROOM` of them) |
| `STEP` 0.50 | search time left | one MCTS step before it acts |
| `COMPILE_RANK` 0.50 | search time left | the learned strategy's ranking by compiled executables |
| `OPTION_SCREEN` 0.35 | search time left | screening XLA options before the rewrites |
| `ENDED_EARLY` 0.10 | budget | a search that ends with more of its time left than this ran out of candidates: the report says so |
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Iterator

from shlo_env.measure.timing_policy import FINAL_TIMINGS, TimingPolicy, policy_seconds

FIXED = 0.40
ORIGINALS = 0.05
PAIR = 0.05
NOISE = 0.10
AUGMENT = 0.10
PROFILE = 0.15
#: At least this much is kept: a winner found late in the open tail still needs its float64
#: reference and its final timing from it.
TAIL_MIN = 0.05
TAIL_MAX = 0.15
FINAL_MARGIN = 1.5
SEARCH_GAP = 0.05
ACCEPT_MAX = 0.30
ACCEPT_OF_LEFT = 0.80
RESERVE_MAX = 0.25  # of the budget: kept after the search for confirming and measuring the winner
CHILD_AUGMENT = 0.20
REGION_PROFILE = 0.35
SWEEPS = 0.30
SWEEP_MARGIN = 0.10  # of a whole-program evaluation: kept past the sweeps' reserve for a judging step
SWEEP_ROOM = 1.5  # whole-program evaluations the time left must hold for a sweeps reserve at all
STEP = 0.50
COMPILE_RANK = 0.50
OPTION_SCREEN = 0.35
ENDED_EARLY = 0.10
#: Seconds a worker process takes to start again (its jax import; measured 1.0 s on the 2-core
#: dev machine). A profile stopped at its timeout kills the worker: stopping it sooner than a
#: restart and the original's compile would take again saves nothing.
WORKER_RESTART_S = 1.0
#: A program whose compile takes this long (seconds) has its float64 references computed on a
#: thread from the search's start, while the strategy builds its first candidates.
PREFETCH_COMPILE_S = 1.0
#: Verification data (input sets, the original's outputs, float64 references) a search may hold:
#: this many bytes per budget second, within floor and cap. Corpus programs hold kilobytes; only
#: large models are cut.
MEMORY_PER_BUDGET_S = 32 << 20
MEMORY_FLOOR = 256 << 20
MEMORY_CAP = 2 << 30
#: The phases before the search, whose sum `FIXED` bounds.
FIXED_PHASES = ("probe", "originals", "noise", "augment", "profile")


@dataclasses.dataclass
class PhaseRecord:
    """What one phase was given (seconds; nan: bounded only by a deadline), spent, and cut.
    `beside_s`: seconds it ran while an earlier phase (`beside`) waited on the worker; they are
    not in `spent_s`, so that the records add up to the search's wall time. `ended`: why it
    ended well before its time (the search: no candidate left to try)."""

    name: str
    given_s: float = math.nan
    spent_s: float = 0.0
    cut: str = ""
    beside_s: float = 0.0
    beside: str = ""
    ended: str = ""

    def to_record(self) -> dict:
        return {"name": self.name, "given_s": None if math.isnan(self.given_s) else round(self.given_s, 3),
                "spent_s": round(self.spent_s, 3), "cut": self.cut,
                **({"beside_s": round(self.beside_s, 3), "beside": self.beside} if self.beside else {}),
                **({"ended": self.ended} if self.ended else {})}

    @classmethod
    def from_record(cls, d: dict) -> "PhaseRecord":
        given = d.get("given_s")
        return cls(d["name"], math.nan if given is None else float(given), float(d.get("spent_s", 0.0)),
                   d.get("cut", ""), float(d.get("beside_s", 0.0)), d.get("beside", ""), d.get("ended", ""))

    def __str__(self) -> str:
        given = "" if math.isnan(self.given_s) else f" of {self.given_s:.1f} s"
        beside = f" (and {self.beside_s:.1f} s beside the {self.beside})" if self.beside else ""
        return (f"{self.name:<11} {self.spent_s:6.1f} s{given}{beside}"
                + (f"; cut: {self.cut}" if self.cut else "") + (f"; ended: {self.ended}" if self.ended else ""))


class Schedule:
    """Deadlines (`time.perf_counter()` values) and allowances (seconds) for one program search."""

    def __init__(self, budget_s: float, *, num_ops: int = 0, start: float | None = None):
        if not budget_s > 0:
            raise ValueError(f"budget must be positive, got {budget_s!r} s")
        self.total_s = float(budget_s)
        self.num_ops = num_ops
        self.start = time.perf_counter() if start is None else start
        self.compile_s = 0.0  # the original's compile (the probe's time less its call)
        self.call_s = 0.0  # the original's call time: the probe's, then the steady one
        self.pair_s = 0.0  # one side-by-side timing of two programs, under the pair policy
        self.phases: list[PhaseRecord] = []
        self.candidate_s = 0.0  # seconds the search spent evaluating candidates (region or whole)

    # --- records -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def phase(self, name: str, given_s: float = math.nan) -> Iterator[PhaseRecord]:
        """Time the block as phase `name` (several blocks of one name add up)."""
        record = self.record(name)
        if not math.isnan(given_s):
            record.given_s = given_s if math.isnan(record.given_s) else record.given_s + given_s
        t = time.perf_counter()
        try:
            yield record
        finally:
            record.spent_s += time.perf_counter() - t

    def record(self, name: str) -> PhaseRecord:
        for r in self.phases:
            if r.name == name:
                return r
        self.phases.append(PhaseRecord(name))
        return self.phases[-1]

    def beside(self, name: str, seconds: float, during: str, overran_s: float) -> None:
        """Phase `name` ran `seconds` on this thread while phase `during` waited on the worker,
        and went on `overran_s` past it: those seconds are `name`'s, not `during`'s (call it
        inside `during`'s block)."""
        self.record(during).spent_s -= overran_s
        r = self.record(name)
        r.spent_s += overran_s
        r.beside_s, r.beside = max(0.0, seconds - overran_s), during

    def cut(self, name: str, why: str) -> None:
        """Phase `name` did less than it would have, because `why` (empty: nothing)."""
        if why:
            r = self.record(name)
            r.cut = f"{r.cut}; {why}" if r.cut else why

    def ended_early(self, left_s: float) -> bool:
        """A search that returned with `left_s` seconds to its deadline ran out of candidates
        (more than `ENDED_EARLY` of the budget unused), rather than out of time."""
        return left_s > ENDED_EARLY * self.total_s

    def cuts(self) -> tuple[str, ...]:
        return tuple(f"{r.name}: {r.cut}" for r in self.phases if r.cut)

    def spent(self, *names: str) -> float:
        return sum(r.spent_s for r in self.phases if not names or r.name in names)

    def candidate_share(self) -> float:
        """Of the budget, the share spent evaluating candidates."""
        return self.candidate_s / self.total_s

    # --- the whole budget ----------------------------------------------------------------------

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def left(self) -> float:
        return max(0.0, self.deadline() - time.perf_counter())

    def deadline(self) -> float:
        return self.start + self.total_s

    def hard_deadline(self) -> float:
        """No worker request of the search or of its acceptance runs past this: what is left
        after it is the final timing's (`FINAL_TIMINGS` pair timings), so a fast program's
        search runs closer to the budget's end than a slow one's."""
        return self.deadline() - self.tail_s()

    def tail_s(self) -> float:
        """Seconds kept after the hard deadline for the final timing."""
        need = FINAL_MARGIN * FINAL_TIMINGS * self.pair_s
        return min(TAIL_MAX, max(TAIL_MIN, need / self.total_s)) * self.total_s

    def fixed_left(self) -> float:
        """Seconds the fixed phases may still take together (`FIXED` of the budget)."""
        return max(0.0, FIXED * self.total_s - self.spent(*FIXED_PHASES))

    # --- sized by the probe ---------------------------------------------------------------------

    def calibrate(self, probe_s: float, call_s: float) -> None:
        """The probe took `probe_s` (compile and first call); a call takes `call_s`."""
        self.call_s = call_s
        self.compile_s = max(0.0, probe_s - call_s)

    def pair_policy(self, policy: TimingPolicy) -> tuple[TimingPolicy, str]:
        """`policy`, with fewer rounds where one pair timing would take more than `PAIR` of the
        budget: at least 2 timed rounds, no `min_seconds` padding, and no warmup (every program
        timed has run before: the original in the probe, a candidate in verification)."""
        call_s = self.call_s
        if not call_s > 0 or policy_seconds(policy, call_s) <= PAIR * self.total_s:
            self.pair_s = policy_seconds(policy, call_s)
            return policy, ""
        runs = max(2, min(policy.runs, int(PAIR * self.total_s / (2 * call_s))))
        cut = policy.with_(warmup=0, runs=runs, min_seconds=0.0, max_rounds=runs)
        self.pair_s = policy_seconds(cut, call_s)
        return cut, (f"0 warmup + {runs} timed rounds per pair instead of {policy.warmup} + {policy.runs} "
                     f"(a call takes {call_s:.2f} s)")

    def random_sets(self, num_random: int, examples: int = 0) -> tuple[int, str]:
        """How many of `num_random` random input sets to verify on, so that running the original
        on all of them takes at most `ORIGINALS` of the budget (at least 1 set in all)."""
        call_s = self.call_s
        if not call_s > 0 or num_random <= 0:
            return num_random, ""
        fit = int(ORIGINALS * self.total_s / call_s) - examples
        keep = max(0 if examples else 1, min(num_random, fit))
        if keep >= num_random:
            return num_random, ""
        return keep, (f"{keep} random input set{'s' if keep != 1 else ''} instead of {num_random} "
                      f"(a call takes {call_s:.2f} s)")

    def memory_bytes(self) -> int:
        """Bytes of verification data (input sets, outputs, references) the search may hold."""
        return int(min(MEMORY_CAP, max(MEMORY_FLOOR, self.total_s * MEMORY_PER_BUDGET_S)))

    def noise_s(self) -> float:
        """The noise measurement's seconds (it takes one timing at least): `NOISE` of the
        budget, less where the fixed phases' share is spent, keeping the augment's share."""
        done = self.record("augment").spent_s or self.record("augment").beside
        augment_s = 0.0 if done else AUGMENT * self.total_s
        return max(0.0, min(NOISE * self.total_s, self.fixed_left() - augment_s))

    def augment_deadline(self) -> float:
        """Matching the patterns on the original stops here (the matches found by then count)."""
        return min(self.search_deadline(), time.perf_counter() + AUGMENT * self.total_s)

    def profile_allowed(self, cost_s: float) -> tuple[bool, str]:
        """Whether a profile that takes about `cost_s` fits `PROFILE` of the budget, the fixed
        phases' share and the time before the search's end; the reason if not."""
        allowed = min(PROFILE * self.total_s, self.fixed_left(), self.search_deadline() - time.perf_counter())
        if cost_s <= allowed:
            return True, ""
        return False, f"a profile of the original takes about {cost_s:.1f} s, {max(0.0, allowed):.1f} s allowed"

    def profile_timeout_s(self, cost_s: float) -> float:
        """The profile's request timeout, past which it is stopped (the worker restarted) and the
        static order used: twice its estimate, or at least what the restart costs (a 0.1 s
        profile stopped at 0.1 s cost seconds), within `PROFILE` of the budget."""
        return max(cost_s, min(max(2 * cost_s, self.restart_s()), PROFILE * self.total_s))

    def restart_s(self) -> float:
        """What a killed worker costs the next request: its start and the original's compile."""
        return WORKER_RESTART_S + self.compile_s

    def prefetch_references(self) -> bool:
        """Compute the float64 references on a thread from the search's start (a slow compile)."""
        return self.compile_s >= PREFETCH_COMPILE_S

    # --- the search and its acceptance ------------------------------------------------------------

    def accept_reserve_s(self, seconds_to_look: float) -> float:
        """Seconds the search leaves before the hard deadline for the paired test of its winner
        (`seconds_to_look`: its second look), at most `ACCEPT_MAX` of the budget."""
        return min(ACCEPT_MAX * self.total_s, seconds_to_look)

    def search_deadline(self, pair_s: float = 0.0, accept_s: float = 0.0) -> float:
        """The search proposes no candidate past this: `SEARCH_GAP` of the budget before the
        hard deadline, earlier where confirming (two pair timings of `pair_s`) or the paired test
        (`accept_s`) need more."""
        reserve = max(SEARCH_GAP * self.total_s, min(RESERVE_MAX * self.total_s, 2.5 * pair_s), accept_s)
        return self.hard_deadline() - reserve

    def open_search_deadline(self) -> float:
        """While nothing beats the original the search may run to here: the paired test's and
        the winner's final timings are not needed, only the original's final timing."""
        return self.deadline() - max(TAIL_MIN * self.total_s, FINAL_MARGIN * self.pair_s)

    def accept_allowance(self, setup_s: float = 0.0) -> float:
        """The paired test's seconds, from what is left before the hard deadline."""
        return ACCEPT_OF_LEFT * (self.hard_deadline() - time.perf_counter()) - setup_s

    # --- a strategy's steps, from the search's time left ------------------------------------------

    @staticmethod
    def child_augment_s(left_s: float) -> float:
        return CHILD_AUGMENT * max(0.0, left_s)

    @staticmethod
    def region_profile_s(left_s: float) -> float:
        return REGION_PROFILE * max(0.0, left_s)

    @staticmethod
    def sweeps_s(left_s: float) -> float:
        """Seconds kept for sweeps (each rewrite at all its sites, judged on the whole program)."""
        return SWEEPS * max(0.0, left_s)

    @staticmethod
    def sweeps_reserve_s(left_s: float, whole_left_s: float, whole_s: float) -> float:
        """Seconds a search keeps for its sweeps out of `left_s`: their share, at least one
        whole-program evaluation of `whole_s` (with a judging step's margin); none when the
        `whole_left_s` whole evaluations may still use holds less than `SWEEP_ROOM` of those."""
        whole = whole_s + max(1.0, SWEEP_MARGIN * whole_s)  # the judging stops between its steps
        return max(SWEEPS * max(0.0, left_s), whole) if whole_left_s >= SWEEP_ROOM * whole else 0.0

    @staticmethod
    def step_s(left_s: float) -> float:
        return STEP * max(0.0, left_s)

    @staticmethod
    def compile_rank_s(left_s: float) -> float:
        return COMPILE_RANK * max(0.0, left_s)

    @staticmethod
    def option_screen_s(left_s: float) -> float:
        return OPTION_SCREEN * max(0.0, left_s)

    def summary(self) -> str:
        """One line per phase, and the share spent on candidates."""
        lines = [str(r) for r in self.phases]
        lines.append(f"candidates  {self.candidate_s:6.1f} s ({self.candidate_share():.0%} of the "
                     f"{self.total_s:.0f} s budget)")
        return "\n".join(lines)


__all__ = ["Schedule", "PhaseRecord"]
