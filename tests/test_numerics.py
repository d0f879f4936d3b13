import numpy as np

from shlo_env.numerics import Numerics, compare_outputs


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
