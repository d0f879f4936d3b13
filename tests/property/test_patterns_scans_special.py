"""The prefix scan (patterns/scans.py) on special values: a REASSOCIATE rewrite must never put a
NaN or an inf where the original has none (nor lose one the original has).

Every (combining op, element type, direction, length) the pattern accepts is rewritten and run
on `runtime.special_inputs` (NaN, +-inf, +-0, huge, tiny, mixed with ordinary values), compiled
by XLA and, for the types it supports, on the reference interpreter: the rewritten output must
be non-finite exactly where the original is, with the same non-finite values.
"""

import itertools

import jax
import ml_dtypes
import numpy as np
import pytest
from jax import lax

from shlo_env.rewrite import driver
from shlo_env.execute import runtime
from shlo_env.ir.program import lower
from shlo_env.measure.numerics import nonfinite_agree
from shlo_env.testing import evaluate

PATTERN = "reduce_window_prefix_to_scan"
BODIES = {"add": lax.add, "maximum": lax.max, "minimum": lax.min, "multiply": lax.mul}
FLOATS = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64]
DTYPES = FLOATS + [np.complex64, np.complex128, np.int32]
INTERPRETER = {np.dtype(t) for t in (np.float16, np.float32, np.float64, np.int32)}
LENGTHS = (2, 5, 9, 16)  # even, odd, the n = 2 base case, a power of two
SEEDS = range(12)  # mixed special sets: seeds 4 and 8 put a NaN in float32 cumprod before the fix


def _identity(body: str, dtype):
    if body in ("add", "multiply"):
        return np.array(0 if body == "add" else 1, dtype)
    if np.issubdtype(np.dtype(dtype), np.integer):
        info = np.iinfo(dtype)
        return np.array(info.min if body == "maximum" else info.max, dtype)
    return np.array(-np.inf if body == "maximum" else np.inf, dtype)


def _prefix_program(body: str, dtype, n: int, reverse: bool):
    """A prefix reduction of a (3, n) array along axis 1, as `jnp.cumsum` & co. lower it."""
    pad = (0, n - 1) if reverse else (n - 1, 0)

    def fn(x):
        return lax.reduce_window(x, _identity(body, dtype), BODIES[body], (1, n), (1, 1), ((0, 0), pad))

    with jax.enable_x64(True):
        return lower(fn, jax.ShapeDtypeStruct((3, n), np.dtype(dtype)))


def _special_sets(specs):
    sets = runtime.special_inputs(specs, 0)
    return sets + [runtime.special_inputs(specs, seed)[-1] for seed in SEEDS if seed]  # more mixed sets


def _rewritten(program):
    """The program with every prefix scan site rewritten, or None if the pattern does not match."""
    aug = driver.augment(program, [PATTERN])
    alts = driver.list_alternatives(aug)
    if not alts:
        return None
    return driver.apply(aug, [1] * len(alts))


def _nonfinite_mismatches(program, candidate, backend: str) -> list[str]:
    bad = []
    for i, inputs in enumerate(_special_sets(program.in_specs)):
        want, got = evaluate(program, inputs, backend)[0], evaluate(candidate, inputs, backend)[0]
        if not nonfinite_agree(got, want):
            where = ~np.isfinite(want.astype(np.complex128)) | ~np.isfinite(got.astype(np.complex128))
            bad.append(f"set {i} on {backend}: original {want[where][:4]}, rewritten {got[where][:4]}")
    return bad


def test_a_product_that_underflows_before_it_overflows_is_not_turned_into_nan():
    """cumprod [1e-30, 1e-30, 3e38, 3e38, 2]: the sequential product underflows to 0 and stays
    0; the scan's tree multiplies 3e38 * 3e38 = inf first and then 0 * inf = NaN."""
    x = np.array([[1e-30, 1e-30, 3e38, 3e38, 2.0]], np.float32)
    program = lower(lambda x: lax.cumprod(x, axis=1), x)
    for backend in ("interpreter", "xla"):
        assert np.isfinite(evaluate(program, [x], backend)[0]).all()
    candidate = _rewritten(program)
    # Not offered at all: a reordered float product can always overflow where the sequential one
    # underflowed (or the other way round), whatever the inputs' range.
    assert candidate is None
    for backend in ("interpreter", "xla"):  # (kept for a future safe product rewrite)
        assert np.isfinite(evaluate(candidate or program, [x], backend)[0]).all()


def test_a_complex_sum_keeps_its_infinities_and_rounds_only_the_finite_part():
    """cumsum in complex: an infinite real part with an imaginary part that rounds differently
    is the same non-finite value (the comparison is per component)."""
    # imaginary prefix 3: sequentially (1 + 1e-16) + 1e-16 + 1e-16 = 1, by the tree 1 + 2e-16
    x = np.array([[np.inf + 1j, 1e-16j, 1e-16j, 1e-16j]], np.complex128)
    with jax.enable_x64(True):
        program = lower(lambda x: lax.cumsum(x, axis=1), x)
    candidate = _rewritten(program)
    assert candidate is not None
    want, got = evaluate(program, [x], "xla")[0], evaluate(candidate, [x], "xla")[0]
    assert np.isinf(want.real).all() and np.isinf(got.real).all()
    assert want.imag[0, 3] != got.imag[0, 3]  # the rounding the comparison must let through
    assert nonfinite_agree(got, want)


@pytest.mark.parametrize("body", list(BODIES))
def test_every_accepted_body_and_type_keeps_the_nonfinite_positions(body):
    accepted, bad = [], []
    for dtype, n, reverse in itertools.product(DTYPES, LENGTHS, (False, True)):
        program = _prefix_program(body, dtype, n, reverse)
        candidate = _rewritten(program)
        if candidate is None:
            continue
        accepted.append(np.dtype(dtype).name)
        backends = ["xla"] + (["interpreter"] if np.dtype(dtype) in INTERPRETER else [])
        for backend in backends:
            bad += [f"{np.dtype(dtype).name} n={n} reverse={reverse}: {m}"
                    for m in _nonfinite_mismatches(program, candidate, backend)]
    assert not bad, f"{body}: NaN/inf moved on {len(bad)} special input sets:\n" + "\n".join(bad[:10])
    # What the pattern offers (so this test is not vacuous, and a newly accepted body or type
    # is a deliberate change of this list): sums of every type; max/min of real floats; no products.
    want = {"add": DTYPES, "maximum": FLOATS, "minimum": FLOATS, "multiply": []}[body]
    assert sorted(set(accepted)) == sorted({np.dtype(t).name for t in want})
    assert len(accepted) == len(want) * len(LENGTHS) * 2


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_a_sum_stays_finite_while_the_originals_partial_sums_stay_under_half_the_range(dtype):
    """What makes sums safe where products are not: every block the scan adds up is a
    difference of two prefixes, so huge terms of both signs (each up to 0.9 of the largest
    finite value) cannot overflow while the sequential partial sums stay under 0.45 of it."""
    big = float(np.finfo(dtype).max)
    rng = np.random.default_rng(0)
    prefixes = rng.uniform(-0.45, 0.45, (4, 16)) * big
    x = np.diff(prefixes, axis=1, prepend=0.0).astype(dtype)
    program = lower(lambda x: lax.cumsum(x, axis=1), x)
    candidate = _rewritten(program)
    assert candidate is not None
    for backend in ("interpreter", "xla"):
        assert np.isfinite(evaluate(program, [x], backend)[0]).all()
        assert np.isfinite(evaluate(candidate, [x], backend)[0]).all()
