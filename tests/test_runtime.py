import numpy as np
import pytest

import shlo_env as se
from shlo_env.execute import runtime
from shlo_env.measure.timing_policy import TimingPolicy


@pytest.fixture(scope="module")
def chain():
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in [(64, 64), (64, 64), (64, 1)]]
    return se.lower(lambda a, b, v: (a @ b) @ v, *args), args


# XLA GPU's float32 dots round their inputs to TF32 by default (jax's default precision).
DOT_TOL = 2e-2 if runtime.platform() == "gpu" else 1e-4


def test_compile_execute_matches_numpy(chain):
    p, args = chain
    out = runtime.execute(runtime.compile(p), args)[0]
    np.testing.assert_allclose(out, (args[0] @ args[1]) @ args[2], rtol=DOT_TOL, atol=DOT_TOL)


def test_compile_is_cached_by_text(chain):
    p, _ = chain
    assert runtime.compile(p) is runtime.compile(p.text())


def test_compile_error_is_reported():
    text = "func.func public @main(%a: tensor<2xf32>) -> tensor<2xf32> { %0 = stablehlo.custom_call @nope(%a) : (tensor<2xf32>) -> tensor<2xf32>\n return %0 : tensor<2xf32> }"
    with pytest.raises(runtime.CompileError):
        runtime.compile(text)


def test_measure_takes_a_low_percentile_of_at_least_ten_runs(chain):
    p, args = chain
    t = runtime.measure(runtime.compile(p), args, TimingPolicy(runs=10, warmup=3))
    assert t.runs >= 10 and len(t.samples) == t.runs
    assert t.full == np.percentile(t.samples, 10) and t.minimum == min(t.samples) <= t.full
    assert 0 < t.async_ <= t.full


def test_fast_programs_get_more_runs_within_min_seconds(chain):
    p, args = chain
    fast = se.apply(se.augment(p, ["reassociate_left_to_right"]), [1])
    (t,) = runtime.compare([runtime.compile(fast)], args, TimingPolicy(runs=10, min_seconds=0.2))
    assert 10 < t.runs <= 1000
    assert t.compute is None or t.compute > 0


def test_compare_interleaves_and_sees_the_difference():
    # 512-wide, not the 64-wide chain: there both orders take ~40 us of dispatch and the
    # 64x flop difference drowns in it; here it is ~250x, far beyond any machine's noise.
    # A GPU runs the 512-wide product in the launch's own time: 2048 there.
    n = 2048 if runtime.platform() == "gpu" else 512
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in [(n, n), (n, n), (n, 1)]]
    p = se.lower(lambda a, b, v: (a @ b) @ v, *args)
    fast = se.apply(se.augment(p, ["reassociate_left_to_right"]), [1])
    a, b = runtime.compare([runtime.compile(p), runtime.compile(fast)], args, TimingPolicy(runs=10))
    assert a.runs == b.runs
    assert b.full < a.full


def test_cost_analysis_counts_flops(chain):
    p, _ = chain
    fast = se.apply(se.augment(p, ["reassociate_left_to_right"]), [1])
    slow_flops = runtime.cost_analysis(runtime.compile(p))["flops"]
    fast_flops = runtime.cost_analysis(runtime.compile(fast))["flops"]
    assert slow_flops >= 2 * 64**3 and fast_flops < slow_flops / 10


def test_random_inputs_are_seeded_and_typed():
    specs = [se.Program.__annotations__ and type("S", (), {"shape": (3, 2), "dtype": np.dtype(d)}) for d in
             ("float32", "int32", "bool", "float16")]
    a = runtime.random_inputs(specs, 7)
    b = runtime.random_inputs(specs, 7)
    for x, y, s in zip(a, b, specs):
        assert x.dtype == s.dtype and x.shape == (3, 2)
        np.testing.assert_array_equal(x, y)
    assert np.all(np.abs(a[1]) <= 8)


def test_special_inputs_cover_nan_inf_and_signed_zero():
    spec = type("S", (), {"shape": (4,), "dtype": np.dtype("float32")})
    sets = runtime.special_inputs([spec], 0)
    values = np.concatenate([s[0] for s in sets])
    assert np.isnan(values).any() and np.isposinf(values).any() and np.isneginf(values).any()
    assert np.any((values == 0) & np.signbit(values))


def test_promote_to_f64():
    text = "tensor<4x8xf32> tensor<bf16> complex<f32> 1.0 : f16 notf32"
    assert runtime.promote_to_f64(text) == "tensor<4x8xf64> tensor<f64> complex<f64> 1.0 : f64 notf32"


def test_reference_outputs_are_float64(chain):
    p, args = chain
    ref = runtime.reference_outputs(p, args)
    assert ref[0].dtype == np.float64
    np.testing.assert_allclose(ref[0], (args[0].astype(np.float64) @ args[1]) @ args[2], rtol=1e-10)


def test_canonical_hlo_drops_names_debug_tables_and_the_gpu_fingerprint():
    a = ('HloModule jit_f, frontend_attributes={fingerprint_before_lhs="4561291a23e4"}\n\nENTRY %main {}\n'
         'FileNames\n1 "x.py"\n')
    b = 'HloModule jit_g, frontend_attributes={fingerprint_before_lhs="3017dee66054"}\n\nENTRY %main {}\n'
    assert runtime.canonical_hlo(a) == runtime.canonical_hlo(b)
    assert runtime.canonical_hlo(b) != runtime.canonical_hlo(b.replace("main {}", "main { x }"))


def test_optimized_hlo_tells_executables_apart(chain):
    p, _ = chain
    fast = se.apply(se.augment(p, ["reassociate_left_to_right"]), [1])
    assert runtime.optimized_hlo(runtime.compile(p)) == runtime.optimized_hlo(runtime.compile(p.text(debug_info=True)))
    assert runtime.optimized_hlo(runtime.compile(p)) != runtime.optimized_hlo(runtime.compile(fast))
