"""What a sweep takes (`SweepOptions`), and the error it raises for bad input (`BenchError`)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Literal

from shlo_env.search.options import SearchOptions, option_fields

QUICK_SUITE = ("examples", "corpus")
QUICK_BUDGET_S = 8.0
DEFAULT_STRATEGY = "auto"


class BenchError(ValueError):
    """A sweep that cannot run as asked (an unknown strategy, ...): nothing was measured.
    Library code raises it; `shlo-env bench` prints it and exits with status 2."""


@dataclasses.dataclass(frozen=True)
class SweepOptions:
    """How a sweep runs; `shlo-env bench` fills one from its flags (same names, same defaults)."""

    # the search of each (program, strategy): `SearchOptions` fields (same names, types and
    # defaults but the quick budget; `SEARCH_FIELDS`, checked by tests/test_search_options.py),
    # and part of a measurement's key in the results database (change one: measured again)
    budget_s: float = QUICK_BUDGET_S
    seed: int = 0  # also seeds the sample of `limit` programs
    max_steps: int = 6
    num_random: int = 3  # random input sets for verification
    min_gain: float = 0.02
    passes: bool | Sequence[str] = False  # XLA passes the search may disable
    xla_options: bool | str | Sequence[str] = "default"  # XLA compile options it may set (SearchOptions)
    patterns: Sequence[str] | None = None  # None: every value-preserving pattern
    timeout_s: float | None = None  # per worker request (None: `timing.default_timeout()`)
    # which programs
    limit: int | None = None  # at most this many per dataset (a seeded sample)
    examples_only: Sequence[str] | None = None  # with the examples dataset: only these
    # where it runs
    workers: int | None = None
    executor: str = "local"  # "local" or "ray"
    ray_address: str | None = None
    # the results database, the noise profile, the roofline peaks
    db_path: str | os.PathLike | None = None  # None: results_db.DEFAULT_PATH
    retry_errors: bool = False  # measure failed (program, strategy) pairs again
    noise_profile: bool = False  # measure a new noise profile first, even if the database has one
    noise_repeats: int | None = None
    noise_max_age_h: float = 1.0  # a sweep with something to measure re-measures an older profile
    peak_flops: float | None = None
    peak_bandwidth: float | None = None
    # the reports
    out: str | os.PathLike | Literal[False] | None = None  # None: ./results; False: no report files
    plot: bool = True
    progress: bool = True

    def search_options(self, **fields) -> SearchOptions:
        """The `SearchOptions` of this sweep's searches (its `SEARCH_FIELDS`), with `fields`."""
        return SearchOptions(**{name: getattr(self, name) for name in SEARCH_FIELDS}).with_(**fields)


# the fields of a sweep that are search options (`shlo-env bench` generates their flags)
SEARCH_FIELDS = tuple(f.name for f in dataclasses.fields(SweepOptions)
                      if f.name in {o.name for o in option_fields()})
