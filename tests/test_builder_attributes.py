"""Builder.like keeps only the attributes that stay valid on an op of another shape (issue 11, item 3)."""

import numpy as np

import shlo_env as se
from shlo_env import testing

SHARDED = """
func.func @main(%x: tensor<4xf32>, %c: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %b = stablehlo.broadcast_in_dim %x, dims = [0] : (tensor<4xf32>) -> tensor<4x8xf32>
  %k = stablehlo.constant dense<2.0> : tensor<4x8xf32>
  %y = stablehlo.add %b, %k {mhlo.sharding = "{devices=[1,2]<=[2]}", mhlo.frontend_attributes = {tag = "t"}} : tensor<4x8xf32>
  %z = stablehlo.add %y, %c {mhlo.sharding = "{devices=[1,2]<=[2]}"} : tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}
"""


def _candidates(text, pattern):
    p = se.load(text)
    aug = se.augment(p, [pattern])
    alts = se.list_alternatives(aug)
    assert alts, f"{pattern} did not match"
    return p, [se.apply(aug, [0] * i + [1] + [0] * (len(alts) - i - 1)) for i in range(len(alts))]


def test_a_sharding_is_dropped_when_the_shape_changes_and_the_result_compiles():
    p, cands = _candidates(SHARDED, "elementwise_through_broadcast")
    x = np.arange(4, dtype=np.float32)
    c = np.ones((4, 8), np.float32)
    want = testing.evaluate(p, [x, c], "xla")
    for q in cands:
        text = q.text()
        narrow = [line for line in text.splitlines() if "stablehlo.add" in line and "tensor<4xf32>" in line]
        assert narrow and all("mhlo.sharding" not in line for line in narrow), text
        assert any("frontend_attributes" in line for line in narrow)  # shape-independent: kept
        got = testing.evaluate(q, [x, c], "xla")  # XLA rejected the 2-D sharding on a 1-D add
        np.testing.assert_array_equal(got[0], want[0])


def test_same_shape_copies_keep_every_attribute():
    text = """
func.func @main(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %p = stablehlo.negate %a {mhlo.sharding = "{devices=[1,2]<=[2]}"} : tensor<4x8xf32>
  %x = stablehlo.add %p, %b : tensor<4x8xf32>
  %y = stablehlo.multiply %p, %b : tensor<4x8xf32>
  return %x, %y : tensor<4x8xf32>, tensor<4x8xf32>
}
"""
    _, cands = _candidates(text, "duplicate_producer")
    for q in cands:
        negates = [line for line in q.text().splitlines() if "stablehlo.negate" in line]
        assert len(negates) == 2 and all("devices=[1,2]<=[2]" in line for line in negates)


def test_merges_drop_shardings_of_the_narrow_ops():
    text = """
func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %x = stablehlo.exponential %a {mhlo.sharding = "{devices=[2]<=[2]}"} : tensor<4xf32>
  %y = stablehlo.exponential %b {mhlo.sharding = "{devices=[2]<=[2]}"} : tensor<4xf32>
  return %x, %y : tensor<4xf32>, tensor<4xf32>
}
"""
    p, cands = _candidates(text, "horizontal_merge")
    a, b = np.linspace(-1, 1, 4, dtype=np.float32), np.linspace(0, 2, 4, dtype=np.float32)
    want = testing.evaluate(p, [a, b], "xla")
    for q in cands:
        wide = [line for line in q.text().splitlines() if "stablehlo.exponential" in line]
        assert len(wide) == 1 and "tensor<8xf32>" in wide[0] and "sharding" not in wide[0]
        got = testing.evaluate(q, [a, b], "xla")
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
