"""Numerics tiers and output comparison.

Every pattern declares how far its rewrite may move values:

- EXACT: bitwise equal (NaN equals NaN, -0 equals +0).
- REASSOCIATE: reordered sums/products. The candidate's error against a float64 reference may be
  at most `REASSOCIATE_FACTOR` times the original's own error (normwise, per output), or, as
  reassociation is backward stable, the change of the exact result when every input moves by
  `SENSITIVITY_ULPS` ulps (the `sensitivity`: covers an original whose summation order happens
  to be unusually accurate, and cancellation), with a floor of a few ulps of the output's scale.
  Without a reference, a normwise bound of `NO_REFERENCE_ULPS` ulps of the output's scale.
- APPROX: not value preserving; opt-in only and never in `optimize`'s defaults.
"""

from __future__ import annotations

import dataclasses
import enum

import ml_dtypes
import numpy as np

REASSOCIATE_FACTOR = 8.0
SENSITIVITY_ULPS = 16.0  # relative input perturbation, in ulps of the input dtype
SENSITIVITY_FACTOR = 2.0
FLOOR_ULPS = 4.0
NO_REFERENCE_ULPS = 32.0
APPROX_RTOL = 1e-2


class Numerics(enum.IntEnum):
    EXACT = 0
    REASSOCIATE = 1
    APPROX = 2

    @classmethod
    def parse(cls, value) -> "Numerics":
        if isinstance(value, Numerics):
            return value
        if isinstance(value, str):
            return cls[value.upper()]
        return cls(int(value))


@dataclasses.dataclass
class Comparison:
    ok: bool
    tier: Numerics
    max_error: float = 0.0  # largest absolute difference, in the outputs' own units
    bound: float = 0.0
    detail: str = ""
    against: str = ""  # what max_error is measured against: "float64 reference" or "original outputs"
    scale: float = 0.0  # largest magnitude among the values compared against (max_error / scale: relative)

    def describe(self) -> str:
        """For messages: the max abs error, what it is measured against, its size relative to the
        largest output, and the bound. Empty for bitwise results."""
        if not self.against:
            return ""
        rel = f", {self.max_error / self.scale:.2g} of the largest output {self.scale:.3g}" if self.scale else ""
        return f"max abs error {self.max_error:.3g} vs the {self.against}{rel}; bound {self.bound:.3g}"

    def __bool__(self) -> bool:
        return self.ok


def eps(dtype) -> float:
    dtype = np.dtype(dtype)
    try:
        return float(np.finfo(dtype).eps)
    except ValueError:
        return float(ml_dtypes.finfo(dtype).eps)


def is_floating(dtype) -> bool:
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.floating) or np.issubdtype(dtype, np.complexfloating):
        return True
    try:
        ml_dtypes.finfo(dtype)
        return True
    except (ValueError, TypeError):
        return False


def _as_f64(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(np.complex128 if np.iscomplexobj(x) else np.float64)


def _bitwise_equal(a: np.ndarray, b: np.ndarray) -> bool:
    if np.array_equal(a, b):  # the common case, without float64 copies
        return True
    if not is_floating(a.dtype):
        return False
    a64, b64 = _as_f64(a), _as_f64(b)
    same = (a64 == b64) | (np.isnan(a64) & np.isnan(b64))
    return bool(np.all(same))


def _components(x: np.ndarray) -> np.ndarray:
    """A complex array as its real and imaginary parts side by side: complex arithmetic keeps
    an infinity in one part while the other part is an ordinary value that rounds."""
    return np.stack([x.real, x.imag], axis=-1) if np.iscomplexobj(x) else x


def nonfinite_agree(candidate, original) -> bool:
    """Non-finite values must sit in the same places with the same values (NaN matches NaN);
    complex values part by part. A REASSOCIATE rewrite may round, never create or lose a NaN
    or an inf."""
    c64, o64 = (_components(_as_f64(np.asarray(x))) for x in (candidate, original))
    cf, of = np.isfinite(c64), np.isfinite(o64)
    if not np.array_equal(cf, of):
        return False
    bad = ~of
    return bool(np.all((c64[bad] == o64[bad]) | (np.isnan(c64[bad]) & np.isnan(o64[bad]))))


def compare_one(candidate, original, tier: Numerics, reference=None, sensitivity=None) -> Comparison:
    """`reference`: float64 outputs; `sensitivity`: float64 outputs for inputs moved by
    SENSITIVITY_ULPS (both from the original program)."""
    c, o = np.asarray(candidate), np.asarray(original)
    if c.shape != o.shape or c.dtype != o.dtype:
        return Comparison(False, tier, detail=f"shape/dtype {c.dtype}{list(c.shape)} != {o.dtype}{list(o.shape)}")
    if tier == Numerics.EXACT or not is_floating(o.dtype):
        ok = _bitwise_equal(c, o)
        return Comparison(ok, tier, detail="" if ok else "values differ bitwise")
    if not o.size:
        return Comparison(True, tier)
    e = eps(o.dtype)
    if not np.iscomplexobj(o) and _finite(o, c, reference, sensitivity):
        # the common case: whole outputs, no masks and no float64 copies of them (18 M values on
        # three sets, about a ResNet-18 train step's outputs: 1.6 s to 0.16 s)
        sens_err = None if sensitivity is None or reference is None else _max_abs_diff(sensitivity, reference)
        return _within(tier, e, c, o, reference, sens_err)
    return _within_finite_values(tier, e, c, o, reference, sensitivity)


def _within_finite_values(tier: Numerics, e: float, c: np.ndarray, o: np.ndarray, reference=None,
                          sensitivity=None) -> Comparison:
    """`compare_one` for outputs with NaN, Inf or complex values: the non-finite ones must
    agree, and `_within` judges the finite ones (those finite in the reference too, when there
    is one; the sensitivity over those finite in it as well)."""
    c64, o64 = _as_f64(c), _as_f64(o)
    if not nonfinite_agree(c64, o64):
        return Comparison(False, tier, detail="NaN/Inf in different places")
    finite = np.isfinite(o64)
    if not finite.any():
        return Comparison(True, tier)
    if tier == Numerics.APPROX or reference is None:
        return _within(tier, e, c64[finite], o64[finite])
    r = _as_f64(reference)
    keep = finite & np.isfinite(r)
    sens_err = None
    if sensitivity is not None:
        s = _as_f64(sensitivity)
        keep_s = keep & np.isfinite(s)
        sens_err = _max_abs_diff(s[keep_s], r[keep_s])
    return _within(tier, e, c64[keep], o64[keep], r[keep], sens_err)


def _max_abs(x: np.ndarray) -> float:
    """max |x| (0 when empty); of a real array without an |x| copy."""
    if not x.size:
        return 0.0
    return float(np.abs(x).max()) if np.iscomplexobj(x) else float(max(x.max(), -x.min()))


def _max_abs_diff(a, b) -> float:
    """max |a - b|, the difference taken in float64 (complex128)."""
    a, b = np.asarray(a), np.asarray(b)
    return _max_abs(np.subtract(a, b, dtype=np.result_type(a, b, np.float64)))


def _finite(*arrays) -> bool:
    """Every value of every array given (None: skipped) is finite."""
    return all(bool(np.isfinite(x).all()) for x in arrays if x is not None)


def _within(tier: Numerics, e: float, c: np.ndarray, o: np.ndarray, reference=None,
            sens_err: float | None = None) -> Comparison:
    """The tier's criterion on finite values: APPROX against the original's scale; REASSOCIATE
    against the float64 reference (a multiple of the original's own error, at least a few ulps,
    or of `sens_err`, the original's change for inputs moved a few ulps), or without one a
    few ulps of the original's scale."""
    if tier == Numerics.APPROX:
        scale, err = _max_abs(o), _max_abs_diff(c, o)
        bound = APPROX_RTOL * max(scale, 1.0)
        return Comparison(err <= bound, tier, err, bound, against="original outputs", scale=scale)
    if reference is not None:
        r = np.asarray(reference)
        scale, err_c, err_o = _max_abs(r), _max_abs_diff(c, r), _max_abs_diff(o, r)
        bound = max(REASSOCIATE_FACTOR * err_o, FLOOR_ULPS * e * scale)
        if sens_err is not None:
            bound = max(bound, SENSITIVITY_FACTOR * sens_err)
        detail = "" if err_c <= bound else f"error {err_c:.3g} vs original's {err_o:.3g}"
        return Comparison(err_c <= bound, tier, err_c, bound, detail, "float64 reference", scale)
    scale, err = _max_abs(o), _max_abs_diff(c, o)
    bound = NO_REFERENCE_ULPS * e * scale
    return Comparison(err <= bound, tier, err, bound, "" if err <= bound else f"error {err:.3g} > {bound:.3g}",
                      "original outputs", scale)


def compare_outputs(candidate, original, tier, reference=None, sensitivity=None) -> Comparison:
    """Compare flat output lists; the first failing output decides."""
    tier = Numerics.parse(tier)
    if len(candidate) != len(original):
        return Comparison(False, tier, detail=f"{len(candidate)} outputs vs {len(original)}")
    worst = Comparison(True, tier)
    for i, (c, o) in enumerate(zip(candidate, original)):
        ref = None if reference is None else reference[i]
        sens = None if sensitivity is None else sensitivity[i]
        cmp = compare_one(c, o, tier, ref, sens)
        if not cmp.ok:
            cmp.detail = f"output {i}: {cmp.detail}"
            return cmp
        if cmp.max_error >= worst.max_error:
            worst = cmp
    return worst


def verify(candidate_sets, original_sets, claimed, references=None, sensitivities=None) -> Comparison:
    """The tier a candidate is verified in, over several input sets.

    Bitwise equal on every set: EXACT. Otherwise the REASSOCIATE criterion decides (APPROX
    for candidates that claim it), also for rewrites exact in StableHLO semantics: compilers
    reassociate float math differently in different programs (XLA folds constants, and
    vectorizes transcendentals differently), so compiled outputs of exact rewrites can differ
    in the last bits. The returned Comparison's `tier` is the tier established; `ok` False
    means the candidate is not verified in any tier it may use.
    """
    candidate_sets, original_sets = list(candidate_sets), list(original_sets)
    if all(compare_outputs(c, o, Numerics.EXACT).ok for c, o in zip(candidate_sets, original_sets)):
        return Comparison(True, Numerics.EXACT)
    tier = max(Numerics.parse(claimed), Numerics.REASSOCIATE)
    n = len(original_sets)
    references = references if references is not None else [None] * n
    sensitivities = sensitivities if sensitivities is not None else [None] * n
    worst = Comparison(True, tier)
    for c, o, r, s in zip(candidate_sets, original_sets, references, sensitivities):
        cmp = compare_outputs(c, o, tier, r, s)
        if not cmp.ok:
            return cmp
        if cmp.max_error >= worst.max_error:
            worst = cmp
    return worst
