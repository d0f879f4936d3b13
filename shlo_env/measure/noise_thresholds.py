"""Noise thresholds by runtime (`NoiseModel`) and the one screening rule (`accepts`).

The pure part of `shlo_env.bench.noise_profile` (see its module doc for how a profile is measured): numbers
in, thresholds out, no import of the rest of the package, so the search (`search.program_search`),
`optimize()`, the bench and the results database all use it without import circles.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np


def thresholds(ratios, quantile: float = 0.95) -> tuple[float, float]:
    """(faster, slower) = exp(-d), exp(d), d the `quantile` of |log ratio| over self-timing ratios."""
    dev = np.abs(np.log(np.asarray(ratios, dtype=np.float64)))
    d = float(np.quantile(dev, quantile)) if len(dev) else 0.0
    return math.exp(-d), math.exp(d)


MIN_SAMPLES = 30  # self-timings behind a per-runtime threshold (the nearest programs' samples)


def medians(ratios, timings: int) -> tuple[float, ...]:
    """Medians of `ratios` in consecutive groups of `timings` (a last, shorter group is dropped):
    what a ratio measured as the median of `timings` side-by-side timings looks like when the
    program is timed against itself. The ratios themselves when `timings` <= 1."""
    if timings <= 1:
        return tuple(ratios)
    return tuple(float(np.median(ratios[i:i + timings])) for i in range(0, len(ratios) - timings + 1, timings))


def accepts(ratio: float, median_ratio: float, threshold: float) -> bool:
    """The one screening rule for a one-shot side-by-side measurement: faster than `threshold`
    only when both its 10th-percentile ratio and its median per-call ratio are below it (a
    lucky tail of fast runs is not a win). The search screens candidates with it (and
    `optimize()` its in-process check); what the search returns is then decided by the
    sequential paired test (`shlo_env.measure.sequential_test`, see `search.program_search._decide`), which one
    timing cannot replace. An unknown median (NaN: a runner that reports no per-call samples)
    does not block; an unknown ratio does."""
    return ratio < threshold and not median_ratio >= threshold


@dataclasses.dataclass(frozen=True)
class NoiseModel:
    """Thresholds by runtime from a noise profile (see the module doc).

    `programs`: (runtime_s, self-timing ratios) per profile program, sorted by runtime;
    `faster`/`slower`: the pooled thresholds (the fallback)."""

    faster: float
    slower: float
    quantile: float = 0.95
    programs: tuple[tuple[float, tuple[float, ...]], ...] = ()
    min_samples: int = MIN_SAMPLES
    profile_id: int | None = None

    @classmethod
    def from_profile(cls, profile: dict, min_samples: int = MIN_SAMPLES) -> "NoiseModel":
        """The model of a stored or just measured profile (any version: only `faster`, `slower`
        and, when present, the per-program `details` with `runtime_s` and `ratios` are read)."""
        progs = []
        for d in profile.get("details") or []:
            t, ratios = d.get("runtime_s"), d.get("ratios")
            if "error" in d or not ratios or not t or not math.isfinite(t) or t <= 0:
                continue
            progs.append((float(t), tuple(float(r) for r in ratios)))
        progs.sort()
        return cls(float(profile["faster"]), float(profile["slower"]), float(profile.get("quantile") or 0.95),
                   tuple(progs), min_samples, profile.get("id"))

    def nearest(self, runtime_s: float | None, timings: int = 1) -> list[tuple[float, tuple[float, ...]]]:
        """The profile programs nearest to `runtime_s` in log runtime, enough for `min_samples`
        samples (all of them when the profile has fewer), each program's samples being its
        self-timings, or with `timings` > 1 their medians in consecutive groups of that many
        (`medians`); [] without a usable runtime."""
        if runtime_s is None or not math.isfinite(runtime_s) or runtime_s <= 0 or not self.programs:
            return []
        by_distance = sorted(self.programs, key=lambda p: abs(math.log(p[0] / runtime_s)))
        picked, n = [], 0
        for t, ratios in by_distance:
            samples = medians(ratios, timings)
            if not samples:
                continue
            picked.append((t, samples))
            n += len(samples)
            if n >= self.min_samples:
                break
        return picked

    def thresholds(self, runtime_s: float | None, timings: int = 1) -> tuple[float, float]:
        """(faster, slower) for a program whose original runs in `runtime_s` seconds, for a ratio
        measured by one side-by-side timing, or by the median of `timings` of them (the bench's
        final measurement of a rewrite: `timing.FINAL_TIMINGS`)."""
        near = self.nearest(runtime_s, timings)
        if not near:
            return self.faster, self.slower
        return thresholds([r for _, ratios in near for r in ratios], self.quantile)

    def faster_at(self, runtime_s: float | None, timings: int = 1) -> float:
        return self.thresholds(runtime_s, timings)[0]

    def describe(self, runtime_s: float | None, timings: int = 1) -> str:
        """Where the thresholds for `runtime_s` come from, in words."""
        near = self.nearest(runtime_s, timings)
        if not near:
            return "pooled profile thresholds"
        lo, hi = min(t for t, _ in near), max(t for t, _ in near)
        what = "self-timings" if timings <= 1 else f"medians of {timings} self-timings"
        return (f"{sum(len(r) for _, r in near)} {what} of {len(near)} profile programs of "
                f"{lo * 1e3:.3g}-{hi * 1e3:.3g} ms")

    def __str__(self) -> str:  # how a sweep's stored configuration shows it
        return (f"noise profile {self.profile_id if self.profile_id is not None else '(new)'}: thresholds by "
                f"runtime, >= {self.min_samples} nearest self-timings")


__all__ = ["MIN_SAMPLES", "NoiseModel", "accepts", "medians", "thresholds"]
