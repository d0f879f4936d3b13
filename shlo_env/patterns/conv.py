"""Convolution rewrites: kernels XLA:CPU picks badly.

XLA:CPU runs a convolution on a tiny feature map in its generic convolution code at 0.5-2.4
GFLOP/s; the same work as im2col + one dot_general goes to the matmul kernels
(docs/experiments/2026-11-26-zoo-gap.md, docs/experiments/2026-11-26-conv-small-map.md).
"""

from __future__ import annotations

import itertools

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from shlo_env.patterns.base import Match, Numerics, Pattern, register
from shlo_env.patterns.matching import attr_int, i64s, producer, static_shape
from shlo_env.ir.tensor_types import element_type_of, is_float, shape_of


def _conv_window(op, spatial: int) -> dict | None:
    """Strides, padding and dilations of convolution `op` with `spatial` spatial dims, with
    StableHLO's defaults filled in; None for window reversal (not handled)."""
    def ints(name: str, default: int) -> list[int]:
        return i64s(op, name) if name in op.attributes else [default] * spatial

    if "window_reversal" in op.attributes:
        rev = ir.DenseBoolArrayAttr(op.attributes["window_reversal"])
        if any(rev[i] for i in range(len(rev))):
            return None
    pad = (np.array(ir.DenseIntElementsAttr(op.attributes["padding"])).reshape(spatial, 2).tolist()
           if "padding" in op.attributes else [[0, 0]] * spatial)
    return {"strides": ints("window_strides", 1), "lhs_dilation": ints("lhs_dilation", 1),
            "rhs_dilation": ints("rhs_dilation", 1), "padding": pad}


@register
class ConvSmallMapToDot(Pattern):
    """convolution on a map of at most 2x2 (its input or its output) -> pad + strided slices (im2col) + one dot_general,
    when ungrouped, float and static (XLA:CPU's generic convolution runs these at 0.5-2.4 GFLOP/s).

    Matches an ungrouped convolution (feature and batch group count 1) on static float tensors
    with no window reversal, non-negative padding and every input or every output spatial dim at
    most `max_map`: a forward convolution onto a tiny map, and in a train step the gradients of
    one, a weight gradient (the tiny map is its input) and a transposed convolution (lhs
    dilation, done as interior padding). Any stride, dilation, spatial rank and
    dimension_numbers layout. The input goes to [N, spatial..., C] by a transpose, one strided
    slice per kernel offset is concatenated along the feature dim, and one dot contracting those
    offsets and C with the kernel in its own layout gives [N, spatial..., O], transposed back to
    the convolution's layout. A kernel reversed on its spatial dims (the input gradient's
    `reverse(W)`) is read at mirrored offsets instead: neither a reversed nor a transposed copy
    of the weights is made (on the haiku ResNet18 train step those copies took 45 % of the time
    left). REASSOCIATE: the dot sums in another order.
    """

    root = "stablehlo.convolution"
    numerics = Numerics.REASSOCIATE
    name = "conv_small_map_to_dot"
    #: The largest map matched (input or output spatial dim). Measured on single convolutions:
    #: 1x1 and 2x2 outputs 5-20x faster; weight gradients and lhs-dilated gradients from 1x1/2x2
    #: inputs 1.3-3x; at 4x4 maps in and out 0.8-1.1x, at 32x32 0.3x.
    max_map = 2

    def match(self, op):
        if attr_int(op, "feature_group_count") != 1 or attr_int(op, "batch_group_count") != 1:
            return None
        x, w = op.operands
        xs, ws, ys = static_shape(x), static_shape(w), static_shape(op.result)
        if xs is None or ws is None or ys is None:
            return None
        if not (is_float(x.type) and is_float(w.type) and is_float(op.result.type)):
            return None
        dn = stablehlo.ConvDimensionNumbers(op.attributes["dimension_numbers"])
        osp = list(dn.output_spatial_dimensions)
        if any(ys[d] > self.max_map for d in osp) and any(xs[d] > self.max_map for d in dn.input_spatial_dimensions):
            return None
        window = _conv_window(op, len(osp))
        if window is None or min(sum(window["padding"], [])) < 0:
            return None
        ksp = list(dn.kernel_spatial_dimensions)
        flipped: list[int] = []  # kernel spatial dims reversed before the convolution (its input gradient)
        rev = producer(w, "stablehlo.reverse")
        if rev is not None and set(i64s(rev, "dimensions")) <= set(ksp):
            w, flipped = rev.operands[0], sorted(i64s(rev, "dimensions"))
        return Match(x=x, w=w, like=op, out_shape=ys, **window, flipped=flipped,
                     x_perm=[dn.input_batch_dimension, *dn.input_spatial_dimensions, dn.input_feature_dimension],
                     w_contract=[*ksp, dn.kernel_input_feature_dimension],
                     out_dims=(dn.output_batch_dimension, osp, dn.output_feature_dimension))

    def rewrite(self, b, m):
        x = b.transpose(m.x, m.x_perm)                      # [N, spatial..., C]
        ob, osp, of = m.out_dims
        out_sp = [m.out_shape[d] for d in osp]
        k = len(out_sp)
        ws = shape_of(m.w.type)
        taps = [ws[d] for d in m.w_contract[:k]]
        zero = b.constant(0, ir.RankedTensorType.get([], element_type_of(x)))
        lo, hi = [p[0] for p in m.padding], [p[1] for p in m.padding]
        x = b.pad(x, zero, [0, *lo, 0], [0, *hi, 0], [0, *(d - 1 for d in m.lhs_dilation), 0])
        xs = shape_of(x.type)
        cols = []
        for offs in itertools.product(*[range(n) for n in taps]):   # row-major over the kernel's spatial dims
            # a kernel reversed on dim d is read at its mirrored offset: the reverse is never materialized
            offs = tuple(n - 1 - o if d in m.flipped else o for o, n, d in zip(offs, taps, m.w_contract))
            start = [0, *(o * d for o, d in zip(offs, m.rhs_dilation)), 0]
            limit = [xs[0], *(s + (n - 1) * st + 1 for s, n, st in zip(start[1:], out_sp, m.strides)), xs[-1]]
            cols.append(b.slice(x, start, limit, [1, *m.strides, 1]))
        patches = b.reshape(b.concat(cols, k + 1), [xs[0], *out_sp, *taps, xs[-1]])   # [N, spatial..., taps..., C]
        # contract the taps and C with the kernel in its own layout: no transposed copy of the weights
        y = b.dot(patches, m.w, (list(range(k + 1, 2 * k + 2)), m.w_contract), like=m.like)   # [N, spatial..., O]
        # out dim d of the convolution is dim perm[d] of y
        perm = [0] * (k + 2)
        perm[ob], perm[of] = 0, k + 1
        for i, d in enumerate(osp):
            perm[d] = i + 1
        return b.transpose(y, perm)
