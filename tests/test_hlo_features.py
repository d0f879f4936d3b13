"""learn.hlo_features: what it reads from XLA's optimized HLO of real compiled programs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shlo_env.execute import runtime
from shlo_env.ir.program import lower
from shlo_env.learn import hlo_features as H


def hlo_of(fn, *args) -> str:
    return runtime.optimized_hlo(runtime.compile(lower(fn, *args)))


def feature(text: str, name: str) -> float:
    return float(H.features(text)[H.INDEX[name]])


X = np.ones((64, 128), np.float32)


def test_an_elementwise_chain_is_one_kernel_reading_its_input_and_writing_its_output():
    text = hlo_of(lambda x: jnp.tanh(x * 2.0 + 1.0), X)
    assert feature(text, "kernels") == 1
    assert feature(text, "bytes_in") == X.nbytes
    assert feature(text, "bytes_out") == X.nbytes
    assert feature(text, "transcendental") == X.size
    assert feature(text, "roofline_us") > H.LAUNCH_US


def test_dot_flops_are_two_m_n_k():
    a, b = np.ones((32, 48), np.float32), np.ones((48, 16), np.float32)
    assert feature(hlo_of(jnp.dot, a, b), "dot_flops") == 2 * 32 * 16 * 48


def test_a_loop_body_counts_once_per_known_trip():
    def loop(trips):
        return lambda x: jax.lax.fori_loop(0, trips, lambda i, v: jnp.sin(v) * 1.5, x)

    four, eight = hlo_of(loop(4), X), hlo_of(loop(8), X)
    assert feature(four, "n_while") == feature(eight, "n_while") == 1
    assert feature(eight, "transcendental") == 2 * feature(four, "transcendental") == 8 * X.size
    assert feature(eight, "unknown_trips") == 0


def test_a_data_dependent_loop_is_counted_once_and_flagged():
    text = hlo_of(lambda x: jax.lax.while_loop(lambda v: v.sum() < 1e6, lambda v: v * 2.0, x), X)
    assert feature(text, "unknown_trips") == 1
    assert feature(text, "n_while") == 1


def test_an_op_xla_cannot_fuse_splits_the_work_into_more_kernels_and_bytes():
    fused = hlo_of(lambda x: x * 3.0 + 1.0, X)
    split = hlo_of(lambda x: jnp.sort(x * 3.0, axis=1) + 1.0, X)
    assert feature(split, "n_sort") == 1
    assert feature(split, "kernels") > feature(fused, "kernels")
    assert feature(split, "bytes_in") > feature(fused, "bytes_in")


def test_a_dot_whose_output_has_a_narrow_minor_dimension_counts_its_flops_as_narrow():
    """XLA:CPU's GEMM fills few vector lanes when the output's contiguous dimension is narrow:
    on linen_mlp_train's sub-graph the [10,256] product runs 2.8x faster than its transpose
    [256,10], at the same flops."""
    x, w = np.ones((128, 10), np.float32), np.ones((128, 256), np.float32)
    narrow = hlo_of(lambda a, b: jnp.einsum("kn,km->mn", a, b), x, w)  # [256,10]
    wide = hlo_of(lambda a, b: jnp.einsum("kn,km->nm", a, b), x, w)  # [10,256]
    assert feature(narrow, "narrow_dot_flops") == feature(narrow, "dot_flops") == 2 * 256 * 10 * 128
    assert feature(wide, "narrow_dot_flops") == 0 and feature(wide, "dot_flops") == 2 * 256 * 10 * 128
    assert H.minor_dim("f32[256,20]{1,0}") == 20 and H.minor_dim("f32[256,20]{0,1}") == 256
    assert H.minor_dim("f32[256,20]") == 20 and H.minor_dim("f32[]") == 0


def test_layouts_that_are_not_row_major_count_as_strided():
    assert H.strided_bytes("f32[32,16]{0,1}") == 32 * 16 * 4
    assert H.strided_bytes("f32[32,16]{1,0} f16[8]{0}") == 0


def test_text_that_is_not_hlo_is_a_clear_error():
    with pytest.raises(H.HloParseError, match="ENTRY"):
        H.features("module { func.func @main() }")
    with pytest.raises(H.HloParseError, match="unreadable"):
        H.features("ENTRY {\n  this is not an instruction\n}")


def test_every_named_feature_has_one_slot():
    assert len(H.FEATURES) == len(set(H.FEATURES)) == len(H.INDEX)


def test_a_conditional_counts_the_mean_of_its_branches():
    def f(x, p):
        return jax.lax.cond(p > 0, lambda v: jnp.sin(v) * 2.0, lambda v: jnp.cos(v) + 1.0, x)

    text = hlo_of(f, X, np.float32(1.0))
    assert "conditional" in text
    assert feature(text, "transcendental") == X.size  # one sine or one cosine, not both
