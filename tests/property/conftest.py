"""Tally of the random-program equivalence tests (tests/property/test_random_programs.py).

Tests add to `TALLY` through the fixture `tally` (one for pytest's whole run); the totals are
printed at the end of the run (`pytest -s` not needed: they go to the terminal summary).
"""

from __future__ import annotations

import collections
import time

import pytest

TALLY: collections.Counter = collections.Counter()
PATTERNS_RECORDED: collections.Counter = collections.Counter()  # alternatives recorded, per pattern
KINDS_DRAWN: collections.Counter = collections.Counter()  # op-table entries drawn, per kind
DISTINCT: set = set()  # hashes of the distinct programs checked
MISMATCHED: list = []  # case ids of the programs with a mismatch
_START: list[float] = []


class Tally:
    """The whole run's counters, as the tests see them."""

    counts = TALLY
    patterns = PATTERNS_RECORDED
    kinds = KINDS_DRAWN
    distinct = DISTINCT
    mismatched = MISMATCHED

    def __repr__(self) -> str:
        return f"<tally: {TALLY['programs']} programs so far>"


@pytest.fixture(scope="session")
def tally() -> Tally:
    if not _START:
        _START.append(time.perf_counter())
    return Tally()


def pytest_terminal_summary(terminalreporter):
    if not TALLY:
        return
    t = TALLY
    w = terminalreporter
    w.write_sep("=", "random programs: rewrite equivalence tally")
    elapsed = time.perf_counter() - _START[0] if _START else float("nan")
    fired = t["programs_with_alternatives"] / t["programs"] if t["programs"] else 0.0
    w.write_line(f"programs checked:        {t['programs']} ({len(DISTINCT)} distinct), "
                 f"{t['programs_with_alternatives']} with >= 1 alternative ({fired:.0%})")
    w.write_line(f"alternatives recorded:   {t['alternatives']}")
    w.write_line(f"candidates checked:      {t['candidates']} "
                 f"({t['candidates_xla']} of them on XLA, in {t['programs_xla']} programs)")
    where = f" (programs {', '.join(MISMATCHED)}; xfail-marked ones are known bugs)" if MISMATCHED else ""
    w.write_line(f"mismatches:              {t['mismatches']}{where}")
    w.write_line(f"time in these tests:     {elapsed:.1f} s")
    if PATTERNS_RECORDED:
        top = ", ".join(f"{k} {v}" for k, v in PATTERNS_RECORDED.most_common())
        w.write_line(f"patterns that fired ({len(PATTERNS_RECORDED)}): {top}")
