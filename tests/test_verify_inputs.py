"""Random input sets on which the original overflows are redrawn rescaled (shlo_env.measure.verify)."""

import jax
import jax.numpy as jnp
import numpy as np

import shlo_env as se
from shlo_env.execute import runtime
from shlo_env.measure.numerics import SENSITIVITY_ULPS, Numerics
from shlo_env.execute.runners import InProcess
from shlo_env.search.evaluator import Evaluator
from shlo_env.measure.verify import NOTHING_TO_COMPARE, REDRAWS, Verifier, all_finite, escalate, informative

SPEC = jax.ShapeDtypeStruct((64,), jnp.float32)


def _overflowing(x):
    # a * a overflows float32 where |x| > 0.89 (most N(0,1) draws of 64 values); cosh, not
    # exp, since XLA rewrites exp(a) * exp(b) into exp(a + b) and both groupings would agree
    a, c = jnp.cosh(50.0 * x), jnp.exp(-50.0 * jnp.abs(x))
    return (a * a) * c


def _reassociated(x):
    # the same product grouped the other way: finite up to |x| = 1.79, so on N(0,1) inputs
    # its non-finite values sit elsewhere than the original's and the comparison fails
    a, c = jnp.cosh(50.0 * x), jnp.exp(-50.0 * jnp.abs(x))
    return a * (a * c)


def _run(program, inputs):
    return runtime.execute(runtime.compile(program), inputs)


def test_random_inputs_scale_only_the_floats():
    specs = [jax.ShapeDtypeStruct((5,), t) for t in (jnp.float32, jnp.int32, jnp.bool_, jnp.complex64)]
    full, small = runtime.random_inputs(specs, 3), runtime.random_inputs(specs, 3, 0.1)
    np.testing.assert_array_equal(small[0], 0.1 * full[0])  # the same float32 draws, rescaled
    assert small[0].dtype == np.float32
    np.testing.assert_array_equal(small[1], full[1])
    np.testing.assert_array_equal(small[2], full[2])
    np.testing.assert_allclose(small[3], 0.1 * full[3], rtol=1e-6)


def test_overflowing_program_gets_finite_sets_and_a_reassociating_rewrite_verifies():
    original, candidate = se.lower(_overflowing, SPEC), se.lower(_reassociated, SPEC)
    plain = runtime.input_sets(original, 3, 0)
    assert not all(all_finite(_run(original, s)) for s in plain), "test premise"

    v = Verifier(original, InProcess(), num_random=3)
    assert all(all_finite(o) for o in v.originals())
    for got, drawn in zip(v.sets, plain):  # the same draws, at most scaled
        ratio = float(np.max(np.abs(got[0]))) / float(np.max(np.abs(drawn[0])))
        assert any(np.isclose(ratio, d.scale, rtol=1e-6) for d in REDRAWS) or np.isclose(ratio, 1.0, rtol=1e-6)
    assert any(not np.array_equal(got[0], drawn[0]) for got, drawn in zip(v.sets, plain))
    cmp = v.check(candidate.text(), (), Numerics.REASSOCIATE)
    assert cmp.ok, cmp.detail

    # on today's N(0,1) sets the same rewrite fails: the redraw is what makes it verifiable
    outputs, originals = [_run(candidate, s) for s in plain], [_run(original, s) for s in plain]
    refs = [runtime.reference_outputs(original, s) for s in plain]
    sens = [runtime.reference_outputs(original, s, perturb_ulps=SENSITIVITY_ULPS) for s in plain]
    assert not escalate(outputs, originals, Numerics.REASSOCIATE, lambda: refs, lambda: sens).ok


def test_evaluator_times_and_verifies_on_the_same_decided_sets():
    original = se.lower(_overflowing, SPEC)
    ev = Evaluator(original, worker=InProcess(), num_random=2)
    assert all(all_finite(o) for o in ev.originals())
    assert ev.inputs(0) is ev.verifier.sets[0]
    assert ev.verifier.keys[0].endswith(tuple(d.suffix for d in REDRAWS))


def test_example_args_are_kept_even_when_the_original_overflows_on_them():
    x = np.full((64,), 3.0, np.float32)
    original = se.lower(_overflowing, x)
    v = Verifier(original, InProcess(), num_random=2)
    assert not all_finite(v.originals()[0])  # the user's inputs: kept as given
    assert v.sets[0][0] is not None and np.array_equal(v.sets[0][0], x)
    assert all(all_finite(o) for o in v.originals()[1:])


def _log_shifted(x):
    return jnp.log(x - 1.0)  # NaN wherever x < 1: on some values of every draw


def test_program_nonfinite_at_every_scale_keeps_todays_sets():
    original = se.lower(_log_shifted, SPEC)
    v = Verifier(original, InProcess(), num_random=2)
    for got, drawn in zip(v.sets, runtime.input_sets(original, 2, 0)):
        np.testing.assert_array_equal(got[0], drawn[0])
    assert all(k.endswith(("set0", "set1")) for k in v.keys)
    assert not any(all_finite(o) for o in v.originals())


def test_cache_check_redraws_its_set_where_the_original_overflows():
    """A cached REASSOCIATE rewrite of a program that overflows on N(0,1) inputs is checked on a
    redrawn finite set, as the search verified it, and is taken (not searched again)."""
    import warnings

    from shlo_env.api import cache as search_cache
    from shlo_env.api import search_program as front_end
    from shlo_env.ir.hashing import dag_hash
    from shlo_env.search.options import SearchOptions

    x = np.zeros((64,), np.float32)
    original, candidate = se.lower(_overflowing, x), se.lower(_reassociated, x)
    flat = runtime.random_inputs(original.in_specs, front_end.CACHE_CHECK_SEED)
    assert not all_finite(_run(original, flat)), "test premise: the check's N(0,1) set overflows"
    entry = search_cache.Entry(key={}, name="overflowing", program=candidate.text(), actions=(),
                               numerics="REASSOCIATE", optimized_hash=dag_hash(candidate),
                               report={"applied": ["regroup"], "strategy": "beam"})
    with warnings.catch_warnings():
        warnings.simplefilter("error", search_cache.CacheWarning)
        got, _ = front_end.cached_result(original, entry, SearchOptions(name="overflowing"))
    assert not got.returned_original and got.program is not None and got.applied == ("regroup",)
    y = np.linspace(-0.01, 0.01, 64, dtype=np.float32)
    np.testing.assert_allclose(_run(got.program, [y])[0], np.asarray(_overflowing(y)), rtol=1e-5)


def test_scalar_inputs_stay_arrays_at_every_scale():
    specs = [jax.ShapeDtypeStruct((), t) for t in (jnp.float32, jnp.complex64)]
    for d in REDRAWS:
        assert all(isinstance(a, np.ndarray) and a.shape == () for a in d.inputs(specs, 0))


def test_a_program_nonfinite_at_every_scale_is_redrawn_on_its_first_set_only():
    """Once no draw makes the first random set finite, the later sets are not redrawn: the
    program makes non-finite outputs whatever the draw, and each redraw runs it again."""
    runs: list = []
    v = Verifier(se.lower(_log_shifted, SPEC), _counting_runner(runs), num_random=3)
    v.originals()
    assert len(runs) == 3 + len(REDRAWS), runs  # each set once, the first set's redraws


def _counting_runner(runs: list):
    class Counting(InProcess):
        def run(self, text, input_key, *a, **k):
            runs.append(input_key)
            return super().run(text, input_key, *a, **k)
    return Counting()


def _adam_like(m, v, g):
    # adam's update: NaN where a random second moment is negative, at any scale
    return m / (jnp.sqrt(v) + 1e-8) - g


def test_a_program_nan_on_negative_draws_gets_sets_of_magnitudes_and_the_next_set_tries_them_first():
    runs: list = []
    original = se.lower(_adam_like, SPEC, SPEC, SPEC)
    assert not all_finite(_run(original, runtime.random_inputs(original.in_specs, 0))), "test premise"
    v = Verifier(original, _counting_runner(runs), num_random=3)
    outputs = v.originals()
    assert all(all_finite(o) for o in outputs)
    assert all(k.endswith("x1.0+") for k in v.keys), v.keys
    for got, drawn in zip(v.sets, runtime.input_sets(original, 3, 0)):  # the same draws' magnitudes
        for a, b in zip(got, drawn):
            np.testing.assert_array_equal(a, np.abs(b))
    # the first set tries the scales, then magnitudes; the next two take magnitudes without
    # their N(0,1) draw's run
    scales = [f"set0{d.suffix}" for d in REDRAWS if not d.nonnegative]
    assert [r.rsplit("/", 1)[1] for r in runs] == ["set0", *scales, "set0x1.0+", "set1x1.0+", "set2x1.0+"], runs


def test_a_kalman_filter_keeps_a_scaled_set_not_magnitudes():
    """Its overflow ends in NaN, as a square root of a negative draw does; on magnitudes it sits
    at the edge of overflow, where its all-sites `small_dot_to_reduce` overflows first."""
    from shlo_env import corpus

    v = Verifier(corpus.load("corpus/kalman_filter_scan"), InProcess(), num_random=2)
    assert all(all_finite(o) for o in v.originals())
    assert all(k.endswith("x0.1") for k in v.keys), v.keys


def test_a_widened_program_calls_lapacks_f64_kernels():
    def posterior_mean(a, b):
        k = a @ a.T + 64 * jnp.eye(8, dtype=a.dtype)
        return jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(k), b)

    x = jax.ShapeDtypeStruct((8, 8), jnp.float32)
    original = se.lower(posterior_mean, x, x)
    text = runtime.promote_to_f64(original.text())
    assert "lapack_dpotrf" in text and "lapack_spotrf" not in text, "test premise: a CPU Cholesky call"
    inputs = runtime.random_inputs(original.in_specs, 0)
    ref = runtime.reference_outputs(original, inputs)
    assert ref is not None and ref[0].dtype == np.float64
    np.testing.assert_allclose(ref[0], _run(original, inputs)[0], rtol=1e-3, atol=1e-5)


def test_a_draw_of_magnitudes_is_the_same_draw_without_signs():
    specs = [jax.ShapeDtypeStruct((50,), t) for t in (jnp.float32, jnp.int32, jnp.bool_)]
    signed, mags = runtime.random_inputs(specs, 5, 0.1), runtime.random_inputs(specs, 5, 0.1, nonnegative=True)
    np.testing.assert_array_equal(mags[0], np.abs(signed[0]))
    np.testing.assert_array_equal(mags[1], np.abs(signed[1]))
    np.testing.assert_array_equal(mags[2], signed[2])
    assert (signed[1] < 0).any() and (mags[1] >= 0).all()
    bits = runtime.random_inputs(specs, 5, 0.1, nonnegative=True, int_max=1)
    np.testing.assert_array_equal(bits[1], np.abs(signed[1]) % 2)
    np.testing.assert_array_equal(bits[0], mags[0])


def test_a_program_nan_everywhere_whatever_the_draw_verifies_nothing():
    """Outputs that are NaN everywhere compare equal to any candidate's NaN: such a check would
    take a wrong rewrite. The verifier says so instead, and the search does not start."""
    def nowhere_finite(x):
        return jnp.log(-1.0 - x * x)

    def wrong(x):
        return jnp.log(-2.0 - x)  # NaN too on most draws: the outputs would "agree"

    original = se.lower(nowhere_finite, SPEC)
    v = Verifier(original, InProcess(), num_random=2)
    assert not v.informative and not any(informative(o) for o in v.originals())
    cmp = v.check(se.lower(wrong, SPEC).text(), (), Numerics.REASSOCIATE)
    assert not cmp.ok and cmp.detail == NOTHING_TO_COMPARE

    from shlo_env.search.options import SearchOptions
    from shlo_env.search.program_search import optimize_program

    res = optimize_program(original, SearchOptions(strategy="beam", budget_s=20))
    assert res.returned_original and NOTHING_TO_COMPARE in res.reason, res.reason


def test_an_output_with_a_finite_value_or_an_integer_output_is_informative():
    nan, one = np.array([np.nan, np.inf], np.float32), np.array([np.nan, 1.0], np.float32)
    assert not informative([nan]) and informative([nan, one]) and informative([nan, np.array([3], np.int32)])


def _random_inputs_as_documented(specs, seed, scale=1.0, nonnegative=False, int_max=None):
    """`runtime.random_inputs` as documented, one draw per call: the sets' names must keep
    naming these arrays."""
    rng = np.random.default_rng(seed)
    out = []
    for s in specs:
        dtype, shape = np.dtype(s.dtype), tuple(s.shape)
        if dtype == np.bool_:
            out.append(rng.random(shape) < 0.5)
        elif np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
            ints = rng.integers(max(info.min, -8), min(info.max, 8) + 1, size=shape)
            if nonnegative:
                ints = np.abs(ints) if int_max is None else np.abs(ints) % (int_max + 1)
            out.append(ints.astype(dtype))
        elif np.issubdtype(dtype, np.complexfloating):  # drawn at the set's width: 32 bits a part, or 64
            width = np.float32 if dtype.itemsize <= 8 else np.float64
            z = rng.standard_normal(shape, dtype=width) + 1j * rng.standard_normal(shape, dtype=width)
            out.append(np.asarray(scale * z, dtype=dtype))
        else:
            x = rng.standard_normal(shape, dtype=np.float32 if dtype.itemsize <= 4 else np.float64)
            out.append(np.asarray(scale * (np.abs(x) if nonnegative else x), dtype=dtype))
    return out


def test_kept_draws_remake_every_redrawn_set_bit_for_bit():
    specs = [jax.ShapeDtypeStruct(shape, t) for shape, t in [
        ((7, 3), jnp.float32), ((), jnp.float32), ((5,), jnp.float16), ((5,), jnp.bfloat16),
        ((4,), jnp.float64), ((6,), jnp.int8), ((6,), jnp.uint8), ((6,), jnp.int32),
        ((3,), jnp.bool_), ((4,), jnp.complex64), ((), jnp.int32)]]
    draws = runtime.RandomDraws(specs, 11)
    for d in (*REDRAWS, None):
        args = (1.0, False, None) if d is None else (d.scale, d.nonnegative, d.int_max)
        want = _random_inputs_as_documented(specs, 11, *args)
        for got in (draws.inputs(*args), runtime.random_inputs(specs, 11, *args)):
            assert [(g.dtype, g.shape) for g in got] == [(w.dtype, w.shape) for w in want]
            assert all(isinstance(g, np.ndarray) for g in got)
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g.view(np.uint8) if g.ndim else g, w.view(np.uint8) if w.ndim else w)
    a, b = draws.inputs(), draws.inputs()
    assert all(x is not y for x, y in zip(a, b))  # new arrays each time: a caller may own them


def test_redrawn_sets_skip_their_first_draw_and_failed_draws_leave_the_runner():
    """Once a draw made the first random set finite, the later sets are drawn that way at once
    (their N(0,1) draw is never made or sent), and the draws that failed are dropped from the
    runner, which ends holding the decided sets only."""
    sent: list = []
    live: set = set()

    class Recording(InProcess):
        def set_inputs(self, key, arrays):
            sent.append(key)
            live.add(key)
            return super().set_inputs(key, arrays)

        def drop_inputs(self, keys):
            live.difference_update(keys)
            return super().drop_inputs(keys)

    v = Verifier(se.lower(_overflowing, SPEC), Recording(), num_random=3)
    assert sent == []  # nothing drawn before the original runs
    assert all(all_finite(o) for o in v.originals())
    assert live == set(v.keys)
    assert not any(k.endswith(("/set1", "/set2")) for k in sent), sent
    assert sent[0].endswith("/set0") and len(sent) > 3  # set 0 was redrawn (the test's premise)
    plain = runtime.input_sets(v.original, 3, 0)
    for i, key in enumerate(v.keys):  # each set is its seed's draw, redrawn as its name says
        d = next(d for d in REDRAWS if key.endswith(f"set{i}{d.suffix}"))
        np.testing.assert_array_equal(v.sets[i][0], d.inputs(v.original.in_specs, i)[0])
        assert not np.array_equal(v.sets[i][0], plain[i][0])
    v.release()
    assert live == set()
