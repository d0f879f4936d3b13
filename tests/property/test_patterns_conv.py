"""Targeted property tests of the convolution rewrites (shlo_env/patterns/conv.py)."""

import numpy as np
from hypothesis import strategies as st
from jax import lax

from pattern_programs import programs
from shlo_env.import_ import lower
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


def test_larger_output_map_not_matched():
    def conv(x, w):  # 4x4 output: im2col measured 0.8x there
        return lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=LAYOUTS["NHWC"])
    assert _alternatives(conv, (1, 4, 4, 3), (3, 3, 3, 4)) == 0
    assert _alternatives(conv, (1, 2, 2, 3), (3, 3, 3, 4)) == 1  # the same conv at 2x2 is


def test_grouped_conv_not_matched():
    def grouped(x, w):
        return lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=LAYOUTS["NHWC"],
                                        feature_group_count=2)
    assert _alternatives(grouped, (1, 2, 2, 4), (3, 3, 2, 4)) == 0


def test_lhs_dilated_conv_not_matched():
    def transposed(x, w):
        return lax.conv_general_dilated(x, w, (1, 1), ((0, 0), (0, 0)), lhs_dilation=(2, 2),
                                        dimension_numbers=LAYOUTS["NHWC"])
    assert _alternatives(transposed, (1, 2, 2, 3), (2, 2, 3, 4)) == 0  # output 2x2


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
