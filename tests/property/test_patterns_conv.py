"""Targeted property tests of the convolution rewrites (shlo_env/patterns/conv.py)."""

import jax
import numpy as np
from hypothesis import strategies as st
from jax import lax

from pattern_programs import programs
from shlo_env.rewrite import driver
from shlo_env.ir.program import lower
from shlo_env.patterns.conv import ConvSmallMapToDot
from shlo_env.testing import check_pattern, check_rewrites

LAYOUTS = {"NHWC": ("NHWC", "HWIO", "NHWC"), "NCHW": ("NCHW", "OIHW", "NCHW")}


def _input_size(out: int, k: int, stride: int, padding: str) -> int:
    """An input spatial size giving output size `out` (SAME: ceil(n / s); VALID: (n - k) // s + 1)."""
    return (out - 1) * stride + 1 if padding == "SAME" else (out - 1) * stride + k


def _shapes(layout, n, c, o, hw, khw):
    if layout == "NHWC":
        return (n, *hw, c), (*khw, c, o)
    return (n, c, *hw), (o, c, *khw)


def _small_conv(draw):
    n, c, o = (draw(st.integers(1, 8)) for _ in range(3))
    layout = draw(st.sampled_from(sorted(LAYOUTS)))
    padding = draw(st.sampled_from(["SAME", "VALID"]))
    strides = tuple(draw(st.integers(1, 2)) for _ in range(2))
    khw = tuple(draw(st.integers(1, 3)) for _ in range(2))
    out = tuple(draw(st.integers(1, 2)) for _ in range(2))
    hw = tuple(_input_size(q, k, s, padding) for q, k, s in zip(out, khw, strides))
    dilation = tuple(draw(st.integers(1, 2)) for _ in range(2)) if padding == "SAME" else (1, 1)

    def fn(x, w):
        return lax.conv_general_dilated(x, w, strides, padding, rhs_dilation=dilation,
                                        dimension_numbers=LAYOUTS[layout])
    return fn, list(_shapes(layout, n, c, o, hw, khw))


CASES = {ConvSmallMapToDot: _small_conv}


def test_conv_small_map_to_dot():
    res = check_pattern(ConvSmallMapToDot, programs(CASES[ConvSmallMapToDot]), max_examples=40)
    assert res.num_alternatives >= 40


def _alternatives(fn, *shapes):
    return check_rewrites(lower(fn, *(np.ones(s, np.float32) for s in shapes)), [ConvSmallMapToDot()]).num_alternatives


def test_larger_maps_not_matched():
    def conv(x, w):  # 4x4 in and out: im2col measured 0.8-1.1x there
        return lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=LAYOUTS["NHWC"])
    assert _alternatives(conv, (1, 4, 4, 3), (3, 3, 3, 4)) == 0
    assert _alternatives(conv, (1, 2, 2, 3), (3, 3, 3, 4)) == 1  # the same conv at 2x2 is


def test_grouped_conv_not_matched():
    def grouped(x, w):
        return lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=LAYOUTS["NHWC"],
                                        feature_group_count=2)
    assert _alternatives(grouped, (1, 2, 2, 4), (3, 3, 2, 4)) == 0


def _small_map_gradient(draw):
    """The gradient of a convolution on a 1x1 or 2x2 map (stride 1 or 2): its weight gradient
    reads the tiny map, its input gradient (for stride 2) is lhs-dilated."""
    n, c, o = (draw(st.integers(1, 4)) for _ in range(3))
    stride = draw(st.integers(1, 2))
    k = draw(st.integers(1, 3))
    hw = draw(st.integers(1, 2)) * stride
    padding = draw(st.sampled_from(["SAME", "VALID"])) if k <= hw else "SAME"

    def loss(x, w):
        y = lax.conv_general_dilated(x, w, (stride, stride), padding, dimension_numbers=LAYOUTS["NHWC"])
        return (y * y).sum()
    return jax.grad(loss, argnums=(0, 1)), [(n, hw, hw, c), (k, k, c, o)]


def test_gradients_of_a_small_map_convolution():
    res = check_pattern(ConvSmallMapToDot, programs(_small_map_gradient), max_examples=30)
    assert res.num_alternatives >= 30


def test_reversed_kernel_read_in_place():
    def input_gradient(dy, w):  # what jax.grad emits for a conv's input: conv(dy, reverse(w))
        return lax.conv_general_dilated(dy, lax.rev(w, (0, 1)), (1, 1), "SAME", dimension_numbers=LAYOUTS["NHWC"])
    prog = lower(input_gradient, np.ones((1, 2, 2, 3), np.float32), np.ones((3, 3, 3, 4), np.float32))
    res = check_rewrites(prog, [ConvSmallMapToDot()])
    assert res.num_alternatives == 1 and not res.mismatches, res.mismatches[:1]
    rewritten = driver.apply(driver.augment(prog, [ConvSmallMapToDot()]), [1])
    assert "stablehlo.reverse" not in rewritten.text() and "stablehlo.convolution" not in rewritten.text()


def test_lhs_dilated_conv():
    def transposed(x, w):  # a 2x2 input dilated to 3x3: output 2x2 (as in a strided conv's input gradient)
        return lax.conv_general_dilated(x, w, (1, 1), ((0, 0), (0, 0)), lhs_dilation=(2, 2),
                                        dimension_numbers=LAYOUTS["NHWC"])
    res = check_rewrites(lower(transposed, np.ones((1, 2, 2, 3), np.float32), np.ones((2, 2, 3, 4), np.float32)),
                         [ConvSmallMapToDot()])
    assert res.num_alternatives == 1 and not res.mismatches, res.mismatches[:1]


def test_any_layout_stride_padding_and_dilation():
    def odd(x, w):  # spatial dims out of order, asymmetric padding, stride and rhs dilation on one dim each
        return lax.conv_general_dilated(x, w, (1, 2), ((1, 0), (2, 1)), rhs_dilation=(2, 1),
                                        dimension_numbers=("HNCW", "WOHI", "CWNH"))
    res = check_rewrites(lower(odd, np.ones((2, 2, 3, 2), np.float32), np.ones((2, 4, 2, 3), np.float32)),
                         [ConvSmallMapToDot()])
    assert res.num_alternatives == 1 and not res.mismatches, res.mismatches[:1]


def test_one_spatial_dim():
    def conv1d(x, w):
        return lax.conv_general_dilated(x, w, (1,), "SAME", dimension_numbers=("NWC", "WIO", "NWC"))
    res = check_rewrites(lower(conv1d, np.ones((2, 2, 3), np.float32), np.ones((3, 3, 4), np.float32)),
                         [ConvSmallMapToDot()])
    assert res.num_alternatives == 1 and not res.mismatches, res.mismatches[:1]
