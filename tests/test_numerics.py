import ml_dtypes
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from shlo_env.measure import numerics
from shlo_env.measure.numerics import Numerics, compare_outputs, nonfinite_agree


def test_exact_is_bitwise_with_nan_and_signed_zero():
    a = np.array([1.0, np.nan, -0.0], np.float32)
    b = np.array([1.0, np.nan, 0.0], np.float32)
    assert compare_outputs([a], [b], Numerics.EXACT).ok
    c = np.nextafter(a, np.float32(2))
    assert not compare_outputs([c], [a], Numerics.EXACT).ok


def test_integers_are_always_exact():
    a = np.array([1, 2, 3], np.int32)
    assert not compare_outputs([a + 1], [a], Numerics.REASSOCIATE).ok


def test_reassociate_uses_the_reference_error():
    ref = np.array([1.0, 2.0, 3.0])
    orig = (ref + 1e-6).astype(np.float32)
    close = (ref - 2e-6).astype(np.float32)
    far = (ref + 1e-3).astype(np.float32)
    assert compare_outputs([close], [orig], Numerics.REASSOCIATE, [ref]).ok
    assert not compare_outputs([far], [orig], Numerics.REASSOCIATE, [ref]).ok


def test_reassociate_requires_same_nonfinite_positions():
    a = np.array([1.0, np.inf], np.float32)
    b = np.array([1.0, np.nan], np.float32)
    assert not compare_outputs([a], [b], Numerics.REASSOCIATE).ok


def test_shape_and_count_mismatch():
    a = np.zeros((2, 2), np.float32)
    assert not compare_outputs([a], [a.reshape(4)], Numerics.APPROX).ok
    assert not compare_outputs([a, a], [a], Numerics.EXACT).ok


def test_reassociate_sensitivity_covers_an_unusually_accurate_original():
    ref = np.array([0.5], np.float64)
    orig = np.array([0.5], np.float32)  # happens to be exact: the original's own error is 0
    cand = np.array([0.5 + 3e-6], np.float32)  # a few ulps of the terms that were summed
    assert not compare_outputs([cand], [orig], Numerics.REASSOCIATE, [ref]).ok
    moved = ref + 5e-6  # the exact result moves this much when inputs move by a few ulps
    assert compare_outputs([cand], [orig], Numerics.REASSOCIATE, [ref], [moved]).ok
    assert not compare_outputs([cand + 1e-3], [orig], Numerics.REASSOCIATE, [ref], [moved]).ok


def test_reassociate_rejects_a_nan_or_inf_where_the_original_is_finite():
    """Whatever the error bound: a reordered product that gives NaN where the sequential one
    underflowed to 0 (0 * inf), or inf where it stayed finite, is rejected."""
    orig = np.array([1e-30, 0.0, -0.0, 5.0], np.float32)
    ref = orig.astype(np.float64)
    for bad in ([1e-30, np.nan, -0.0, 5.0], [1e-30, 0.0, -0.0, np.inf]):
        cand = np.array(bad, np.float32)
        assert not compare_outputs([cand], [orig], Numerics.REASSOCIATE, [ref], [ref]).ok
        assert not compare_outputs([cand], [orig], Numerics.REASSOCIATE).ok
        assert not compare_outputs([orig], [cand], Numerics.REASSOCIATE).ok  # nor lose one


def test_complex_nonfinite_values_are_compared_per_component():
    """A complex inf whose finite imaginary part rounds differently is the same infinity; an
    infinity that moves from one component to the other, or a NaN part, is not."""
    orig = np.array([np.inf + 1.0j, 2.0 + 3.0j], np.complex128)
    rounded = np.array([np.inf + (1.0 + 2e-16) * 1j, 2.0 + 3.0j], np.complex128)
    assert nonfinite_agree(rounded, orig)
    assert compare_outputs([rounded], [orig], Numerics.REASSOCIATE, [orig]).ok
    for moved in ([complex(1.0, np.inf), 2.0 + 3.0j], [complex(np.inf, np.nan), 2.0 + 3.0j]):
        assert not nonfinite_agree(np.array(moved, np.complex128), orig)
        assert not compare_outputs([np.array(moved, np.complex128)], [orig], Numerics.REASSOCIATE, [orig]).ok


# The all-finite fast path gives the masked path's numbers exactly, for every tier and dtype.
@settings(max_examples=60, deadline=None)
@given(st.sampled_from([np.float32, np.float16, ml_dtypes.bfloat16, np.float64]),
       st.sampled_from([Numerics.APPROX, Numerics.REASSOCIATE]),
       st.integers(0, 40), st.integers(0, 2**31 - 1), st.booleans(), st.booleans())
def test_finite_fast_path_agrees_with_the_masked_path(dtype, tier, size, seed, with_ref, with_sens):
    rng = np.random.default_rng(seed)
    ref = rng.standard_normal(size) * 10.0 ** rng.integers(-3, 4)
    orig = (ref + rng.standard_normal(size) * 1e-3).astype(dtype)
    cand = (ref + rng.standard_normal(size) * 1e-3).astype(dtype)
    sens = ref + rng.standard_normal(size) * 10.0 ** rng.integers(-4, -1)  # some widen the bound
    args = (cand, orig, ref if with_ref else None, sens if with_sens else None)
    fast = numerics.compare_one(args[0], args[1], tier, *args[2:])
    masked = numerics._within_finite_values(tier, numerics.eps(dtype), *args)
    assert (fast.ok, fast.max_error, fast.bound, fast.scale, fast.detail, fast.against) == (
        masked.ok, masked.max_error, masked.bound, masked.scale, masked.detail, masked.against)
    if size:  # and the numbers are the plain ones
        against = ref if with_ref and tier == Numerics.REASSOCIATE else orig.astype(np.float64)
        assert fast.max_error == np.max(np.abs(cand.astype(np.float64) - against))
        assert fast.scale == np.max(np.abs(against))


def test_a_nan_takes_the_masked_path():
    orig = np.array([1.0, np.nan, 3.0], np.float32)
    moved = np.array([1.5, np.nan, 3.0], np.float32)
    assert not compare_outputs([moved], [orig], Numerics.REASSOCIATE).ok
    assert compare_outputs([orig.copy()], [orig], Numerics.REASSOCIATE).ok
