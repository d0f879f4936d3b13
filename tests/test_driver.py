import jax.numpy as jnp
import numpy as np
import pytest

import shlo_env as se
from shlo_env.rewrite import driver
from shlo_env.rewrite.driver import ApplyError, AugmentStats, PatternWarning
from shlo_env.patterns.base import Match, Pattern
from shlo_env.testing import check_rewrites, evaluate


def f32(*shape):
    return np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)


class AddCommute(Pattern):
    """x + y -> y + x"""

    root = "stablehlo.add"

    def match(self, op):
        x, y = op.operands
        if x != y:
            return Match(x=x, y=y)

    def rewrite(self, b, m):
        return b.add(m.y, m.x)


class RaisesInMatch(Pattern):
    root = "stablehlo.add"

    def match(self, op):
        raise RuntimeError("boom")

    def rewrite(self, b, m):  # pragma: no cover
        return None


class WrongType(Pattern):
    root = "stablehlo.add"

    def match(self, op):
        return Match(x=op.operands[0])

    def rewrite(self, b, m):
        return b.reduce_sum(m.x, [0])  # drops a dimension: not the root's type


class InvalidIR(Pattern):
    root = "stablehlo.add"

    def match(self, op):
        return Match(x=op.operands[0])

    def rewrite(self, b, m):
        # a transpose whose permutation does not fit the rank: fails verification
        from jaxlib.mlir import ir

        return b.op("stablehlo.transpose", [m.x], [m.x.type],
                    {"permutation": ir.DenseI64ArrayAttr.get([0, 0, 1])}).result


class ReadsOutside(Pattern):
    root = "stablehlo.add"

    def match(self, op):
        return Match(x=op.operands[0], op=op)

    def rewrite(self, b, m):
        return b.add(m.x, m.op.operands[1])  # op.operands are outside the region


def test_augment_does_not_change_the_computation():
    p = se.lower(lambda x, w, a, b: x @ (w + a @ b), f32(4, 8), f32(8, 8), f32(8, 2), f32(2, 8))
    aug = se.augment(p)
    assert se.list_alternatives(aug)
    assert se.dag_hash(driver.strip(aug)) == se.dag_hash(p)
    args = [f32(4, 8), f32(8, 8), f32(8, 2), f32(2, 8)]
    # region 0 everywhere == the original, evaluated with the alternatives still present
    np.testing.assert_array_equal(evaluate(driver.strip(aug), args)[0], evaluate(p, args)[0])


def test_patterns_on_the_same_root_share_one_op():
    p = se.lower(lambda x, y: x + y, f32(3), f32(3))
    aug = se.augment(p, [AddCommute(), se.patterns.get("add_zero")])
    assert len(se.list_alternatives(aug)) == 1  # add_zero does not match; commute does
    aug = se.augment(p, [AddCommute(), AddCommute()])
    (alt,) = se.list_alternatives(aug)
    assert alt.num_choices == 3


def test_overlapping_matches_are_all_recorded_and_compose():
    # (A·B)·C·D: two overlapping reassociation sites
    p = se.lower(lambda a, b, c, d: ((a @ b) @ c) @ d, f32(16, 16), f32(16, 16), f32(16, 2), f32(2, 1))
    aug = se.augment(p, ["reassociate_left_to_right"])
    alts = se.list_alternatives(aug)
    assert len(alts) == 2
    res = check_rewrites(p, ["reassociate_left_to_right"], decisions=4)
    assert res.ok and res.num_candidates >= 4


def test_multi_root_match_that_would_create_a_cycle_is_rejected():
    def f(x, w1):
        d1 = x @ w1
        w2 = d1 * 2.0  # the second product's weight depends on the first product
        return x @ w2

    p = se.lower(f, f32(4, 4), f32(4, 4))
    stats = AugmentStats()
    aug = se.augment(p, ["merge_dots_sharing_lhs"], stats=stats)
    assert stats.matches["merge_dots_sharing_lhs"] == 1
    assert stats.cycles["merge_dots_sharing_lhs"] == 1
    assert not se.list_alternatives(aug)
    assert aug.module.operation.verify()


def test_multi_root_match_moves_early_users_after_the_merge():
    def f(x, w1, w2):
        d1 = x @ w1
        u = jnp.tanh(d1)  # uses d1 before d2 exists
        return u, x @ w2

    p = se.lower(f, f32(4, 4), f32(4, 3), f32(4, 5))
    aug = se.augment(p, ["merge_dots_sharing_lhs"])
    assert len(se.list_alternatives(aug)) == 1
    assert aug.module.operation.verify()
    assert check_rewrites(p, ["merge_dots_sharing_lhs"]).ok


def test_a_pattern_that_raises_is_skipped_with_a_warning_and_others_run():
    p = se.lower(lambda x, y: x + y, f32(3), f32(3))
    with pytest.warns(PatternWarning, match="raises_in_match"):
        aug = se.augment(p, [RaisesInMatch(), AddCommute()])
    assert se.list_alternatives(aug)[0].labels == ("original", "add_commute")


@pytest.mark.parametrize("bad", [WrongType, InvalidIR, ReadsOutside])
def test_an_alternative_with_invalid_ir_is_dropped(bad):
    p = se.lower(lambda x, y: x + y, f32(3, 2), f32(3, 2))
    stats = AugmentStats()
    with pytest.warns(PatternWarning, match=bad().name):
        aug = se.augment(p, [bad(), AddCommute()], stats=stats)
    assert stats.dropped[bad().name] == 1
    (alt,) = se.list_alternatives(aug)
    assert alt.labels == ("original", "add_commute")
    assert aug.module.operation.verify()


def test_apply_validates_decisions():
    p = se.lower(lambda x, y: x + y, f32(3), f32(3))
    aug = se.augment(p, [AddCommute()])
    with pytest.raises(ApplyError, match="decisions for 1"):
        se.apply(aug, [1, 1])
    with pytest.raises(ApplyError, match="out of range"):
        se.apply(aug, {0: 5})
    assert se.apply(aug, {0: 1}).applied == ("add_commute",)


def test_apply_prunes_dead_ops():
    p = se.lower(lambda a, b, v: (a @ b) @ v, f32(8, 8), f32(8, 8), f32(8, 1))
    out = se.apply(se.augment(p, ["reassociate_left_to_right"]), [1])
    # the old (A·B) product and the old outer dot are gone: exactly two dots remain
    assert out.text().count("stablehlo.dot_general") == 2


def test_prune_keeps_side_effects():
    text = """
    func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
      %0 = stablehlo.custom_call @foo(%arg0) {has_side_effect = true} : (tensor<2xf32>) -> tensor<2xf32>
      %1 = stablehlo.add %arg0, %arg0 : tensor<2xf32>
      return %arg0 : tensor<2xf32>
    }"""
    p = se.load(text)
    assert se.prune(p) == 1
    assert "custom_call" in p.text() and "stablehlo.add" not in p.text()


def test_run_loop_stops_on_a_repeated_state():
    p = se.lower(lambda x, y: x + y, f32(3), f32(3))
    out, trace = se.run_loop(p, [AddCommute()], max_steps=10)
    assert len(trace) == 2  # commute, commute back (== the original): stop
    assert trace[-1].state_hash == se.dag_hash(p)


def test_run_loop_honours_the_step_cap():
    p = se.lower(lambda a, b, c, d, e: (((a @ b) @ c) @ d) @ e, f32(8, 8), f32(8, 8), f32(8, 8), f32(8, 8), f32(8, 1))
    _, trace = se.run_loop(p, ["reassociate_left_to_right"], max_steps=1)
    assert len(trace) == 1


def test_run_loop_stops_when_the_policy_keeps_the_originals():
    p = se.lower(lambda a, b, v: (a @ b) @ v, f32(8, 8), f32(8, 8), f32(8, 1))
    out, trace = se.run_loop(p, None, policy=lambda prog, alts: [0] * len(alts))
    assert trace == [] and se.dag_hash(out) == se.dag_hash(p)
