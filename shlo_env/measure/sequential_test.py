"""A sequential paired test of "B runs faster than A": feed it log-ratios, ask for a decision.

Acceptance of a candidate B against the original A (issue 31, item 6). The fixed threshold it
replaces (one side-by-side timing, accept below ~0.97) cannot take a real 2-4 % gain, and a lucky
timing of a shared machine passes it now and then. This test keeps asking for more timing until
a confidence bound on the ratio T(B)/T(A) decides, and says how sure it is.

**The observations.** The timing driver (`shlo_env.measure.paired_timing`) times A and B interleaved
(A, B, A, B, ...) in one process, in requests that alternate the order ([A, B], then [B, A]).
Each request is cut into blocks of a few rounds; a block gives

    y = log( q10(B's run times in the block) / q10(A's run times in the block) )

(the 10th percentile of a few runs: about their minimum, so one run slowed by another process
moves it little; run times are right-skewed, their fast end is the program's own speed). A
block of an [A, B] request and the block at the same place in the following [B, A] request
give one observation z = (y_AB + y_BA) / 2 (`counterbalanced`): a bias of the position in
the pair (the second program finding the caches warm, say) cancels, and when B is A (the
null that matters most) z is *exactly* symmetric about 0 whatever the noise looks like.

**The statistic.** The location of z (its pseudo-median, the Hodges-Lehmann estimate: the
median of the Walsh averages (z_i + z_j) / 2) with Wilcoxon signed-rank confidence bounds,
from the exact null distribution of the signed-rank statistic. It is distribution-free for
symmetric z (the A-against-A case), keeps ~95 % of a t-test's efficiency on normal data, and
one wild block moves it by one rank, not by its size (heavy tails do not break it; they only
cost power).

**The sequential part.** The test looks at the data only at fixed sample sizes n_k =
ceil(first_look * growth**k), k = 0 .. looks-1 (10, 16, 26, 41, 66, 105, 168, 269 by default),
and spends alpha / looks at each look (Bonferroni). So whatever the caller does between looks
(stop when its time is up, stop at the first decision), the chance of ever accepting a B that
is not faster is at most alpha (exact for symmetric z, as for B = A; a union bound, so the
real rate is lower). At each look, with one-sided bounds at level alpha / looks each:

- **accept** (B faster) when the upper bound on the ratio is below 1 *and* the estimate shows
  at least `min_gain` (ratio <= 1 - min_gain): a gain that is real but smaller is not taken;
- **reject** when the lower bound is above 1 - min_gain: B is, with confidence, not faster by
  `min_gain` (slower, the same, or faster by less than is worth taking);
- otherwise go on; after the last look, or when the caller's time is up: **undecided**, which
  is not accepted.

The error rates, by construction: P(accept | true ratio >= 1) <= alpha; P(reject | true ratio
<= 1 - min_gain) <= alpha. How quickly a true gain is accepted depends on the spread of z: see
docs/acceptance.md for the measured rates (tests/test_sequential.py checks them on synthetic
data).

Pure numpy: no jax, no I/O (the facts floor).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
from collections.abc import Iterable, Sequence

import numpy as np


class Decision(enum.StrEnum):
    ACCEPT = "accept"  # B is faster, by at least min_gain on the estimate and below 1 on the bound
    REJECT = "reject"  # B is not faster by min_gain (with confidence)
    UNDECIDED = "undecided"  # not yet (or never: out of looks or time); not accepted


@dataclasses.dataclass(frozen=True)
class SequentialResult:
    """Where the test stands. Ratios are T(B)/T(A): below 1 means B is faster.

    `lower`/`upper`: the one-sided confidence bounds of the last look (each at level
    alpha / looks; NaN before the first look, +-inf when the sample is too small for one);
    `ratio`: the Hodges-Lehmann estimate on all observations fed so far; `n`: observations fed;
    `looks`: looks taken."""

    decision: Decision
    ratio: float
    lower: float
    upper: float
    n: int
    looks: int
    alpha: float
    min_gain: float

    @property
    def accepted(self) -> bool:
        return self.decision is Decision.ACCEPT

    def describe(self) -> str:
        bound = (f"bounds [{self.lower:.4f}, {self.upper:.4f}]" if self.looks else "no look yet")
        return (f"{self.decision}: ratio {self.ratio:.4f}, {bound} after {self.n} observations "
                f"({self.looks} looks, alpha {self.alpha:g}, min gain {self.min_gain:.1%})")


# --- the signed-rank distribution and Wilcoxon bounds -------------------------------------------

@functools.lru_cache(maxsize=64)
def _signed_rank_cdf(n: int) -> np.ndarray:
    """P(T+ <= t), t = 0 .. n(n+1)/2, for the Wilcoxon signed-rank statistic of n symmetric
    observations (each rank in or out with probability 1/2: a convolution, rank by rank)."""
    pmf = np.zeros(n * (n + 1) // 2 + 1)
    pmf[0] = 1.0
    top = 0
    for r in range(1, n + 1):
        shifted = pmf[: top + 1].copy()
        pmf[: top + 1] *= 0.5
        pmf[r: r + top + 1] += 0.5 * shifted
        top += r
    return np.minimum(np.cumsum(pmf), 1.0)


def signed_rank_critical(n: int, level: float) -> int:
    """The largest c with P(T+ <= c) <= level under the null (-1 when even T+ = 0 is likelier)."""
    if n < 1:
        return -1
    cdf = _signed_rank_cdf(n)
    return int(np.searchsorted(cdf, level, side="right")) - 1


def walsh_averages(z: np.ndarray) -> np.ndarray:
    """The n(n+1)/2 averages (z_i + z_j) / 2, i <= j, sorted."""
    i, j = np.triu_indices(len(z))
    return np.sort((z[i] + z[j]) * 0.5)


def wilcoxon_bounds(sample: Sequence[float] | np.ndarray, level: float) -> tuple[float, float, float]:
    """(lower, estimate, upper) for the location (pseudo-median) of `z`: one-sided bounds, each
    wrong with probability at most `level` when the sample is symmetric about its location; the estimate
    is Hodges-Lehmann's. A bound is -inf/+inf when n is too small for `level`."""
    z = np.asarray(sample, dtype=np.float64)
    if z.ndim != 1 or not len(z):
        raise ValueError("wilcoxon_bounds needs a non-empty 1-d sample")
    if not np.all(np.isfinite(z)):
        raise ValueError("wilcoxon_bounds: the sample holds NaN or inf")
    w = walsh_averages(z)
    c = signed_rank_critical(len(z), level)
    est = float(np.median(w))
    if c < 0:
        return -math.inf, est, math.inf
    # T+(mu) = #{Walsh averages > mu}; "location < mu" is shown when T+(mu) <= c, i.e. for
    # mu >= w[M - c - 1] (0-based); symmetrically for the lower bound.
    return float(w[c]), est, float(w[len(w) - c - 1])


# --- the sequential test ------------------------------------------------------------------------

@dataclasses.dataclass
class SequentialRatioTest:
    """Sequential Wilcoxon test on log-ratio observations z = log(T(B)/T(A)) (module doc).

        test = SequentialRatioTest()
        while not test.done:
            test.add(counterbalanced(block_log_ratios(...AB...), block_log_ratios(...BA...)))
        test.result().decision

    `alpha`: the chance of accepting a B that is not faster (and of rejecting a B faster by
    `min_gain`), over all looks; `min_gain`: the smallest gain worth accepting (on the estimate);
    looks at ceil(first_look * growth**k) observations, k < `looks`."""

    alpha: float = 0.01
    min_gain: float = 0.01
    first_look: int = 10
    growth: float = 1.6
    looks: int = 8

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 0.5:
            raise ValueError(f"alpha must be in (0, 0.5), got {self.alpha!r}")
        if not 0 <= self.min_gain < 1:
            raise ValueError(f"min_gain must be in [0, 1), got {self.min_gain!r}")
        if self.first_look < 1 or self.looks < 1 or not self.growth > 1:
            raise ValueError(f"need first_look >= 1, looks >= 1, growth > 1: {self}")
        self._z: list[float] = []
        self._looked = 0
        self._decision = Decision.UNDECIDED
        self._bounds = (math.nan, math.nan)

    @property
    def schedule(self) -> list[int]:
        """The sample sizes at which the test looks (strictly increasing)."""
        out: list[int] = []
        for k in range(self.looks):
            n = math.ceil(self.first_look * self.growth ** k - 1e-9)
            out.append(max(n, out[-1] + 1) if out else n)
        return out

    @property
    def level(self) -> float:
        """The one-sided level of each bound at each look (alpha spent evenly)."""
        return self.alpha / self.looks

    @property
    def n(self) -> int:
        return len(self._z)

    @property
    def done(self) -> bool:
        """Decided, or past the last look (more data changes nothing)."""
        return self._decision is not Decision.UNDECIDED or self._looked >= self.looks

    @property
    def needed(self) -> int:
        """Observations still to feed before the next look (0 when done)."""
        return 0 if self.done else self.schedule[self._looked] - self.n

    def add(self, values: float | Iterable[float]) -> Decision:
        """Feed observations (log-ratios); take every look their count reaches, each on the
        first n_k observations, and stop at the first decision (later data is kept, unused)."""
        vals = [float(values)] if isinstance(values, (int, float)) else [float(v) for v in values]
        if not all(math.isfinite(v) for v in vals):
            raise ValueError("SequentialRatioTest.add: observations must be finite log-ratios")
        self._z.extend(vals)
        schedule = self.schedule
        while not self.done and self.n >= schedule[self._looked]:
            self._look(schedule[self._looked])
        return self._decision

    def _look(self, n: int) -> None:
        lower, est, upper = wilcoxon_bounds(self._z[:n], self.level)
        self._looked += 1
        self._bounds = (lower, upper)
        floor = math.log1p(-self.min_gain)  # log of the largest ratio worth taking
        if upper < 0.0 and est <= floor:
            self._decision = Decision.ACCEPT
        elif lower > floor:
            self._decision = Decision.REJECT

    def result(self) -> SequentialResult:
        est = float(np.median(walsh_averages(np.asarray(self._z)))) if self._z else math.nan
        lower, upper = self._bounds
        return SequentialResult(self._decision, math.exp(est), math.exp(lower), math.exp(upper), self.n,
                                self._looked, self.alpha, self.min_gain)


# --- observations from run times ----------------------------------------------------------------

BLOCK_PERCENTILE = 10.0


def block_log_ratios(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, rounds: int,
                     percentile: float = BLOCK_PERCENTILE) -> np.ndarray:
    """log(q(B) / q(A)) per block of `rounds` consecutive interleaved rounds, q the
    `percentile` of the block's run times (a trailing partial block is dropped)."""
    if rounds < 1:
        raise ValueError(f"rounds per block must be >= 1, got {rounds!r}")
    n = min(len(a), len(b)) // rounds * rounds
    if n == 0:
        return np.zeros(0)
    qa = np.percentile(np.asarray(a[:n], dtype=np.float64).reshape(-1, rounds), percentile, axis=1)
    qb = np.percentile(np.asarray(b[:n], dtype=np.float64).reshape(-1, rounds), percentile, axis=1)
    if np.any(qa <= 0) or np.any(qb <= 0):
        raise ValueError("run times must be positive")
    return np.log(qb / qa)


def counterbalanced(ab: Sequence[float] | np.ndarray, ba: Sequence[float] | np.ndarray) -> np.ndarray:
    """(y_AB + y_BA) / 2 for block log-ratios of an [A, B] request and a [B, A] request (both
    log(T(B)/T(A))), paired in order; the position-in-pair bias cancels (module doc)."""
    n = min(len(ab), len(ba))
    return (np.asarray(ab[:n], dtype=np.float64) + np.asarray(ba[:n], dtype=np.float64)) * 0.5


__all__ = ["BLOCK_PERCENTILE", "Decision", "SequentialRatioTest", "SequentialResult", "block_log_ratios",
           "counterbalanced", "signed_rank_critical", "walsh_averages", "wilcoxon_bounds"]
