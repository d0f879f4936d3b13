"""The pattern library's own checks: a wrong pattern is caught, helpers behave."""

import jax.numpy as jnp
import numpy as np
import pytest

from shlo_env.rewrite import driver
from shlo_env.ir.program import lower
from shlo_env.patterns import Match, Numerics, Pattern, get
from shlo_env.patterns.matching import commuted, splat_value
from shlo_env.testing import MismatchError, arrays, check_pattern, programs_from


class WrongMulZero(Pattern):
    """x * 0 -> 0, wrongly claimed EXACT on floats (NaN * 0 and Inf * 0 are NaN, -1 * 0 is -0)."""

    root = "stablehlo.multiply"
    numerics = Numerics.EXACT

    def match(self, op):
        for _, zero in commuted(op):
            if splat_value(zero) == 0:
                return Match(like=op.result.type)

    def rewrite(self, b, m):
        return b.zeros(m.like)


def test_wrong_exact_pattern_is_caught_with_an_example_input():
    with pytest.raises(MismatchError) as info:
        check_pattern(WrongMulZero, programs_from(lambda x: x * 0.0, arrays((2, 3))), max_examples=20)
    message = str(info.value)
    assert "wrong_mul_zero" in message and "inputs:" in message
    assert "nan" in message.lower() or "inf" in message.lower()


def test_right_version_is_integer_only():
    check_pattern(get("mul_zero_int"), programs_from(lambda x: x * 0, arrays((2, 3), np.int32)), max_examples=10)
    with pytest.raises(AssertionError, match="never fired"):
        check_pattern(get("mul_zero_int"), programs_from(lambda x: x * 0.0, arrays((2, 3))), max_examples=5)


def test_cartpole_loop_rewrites_are_recorded():
    from shlo_env.bench import examples

    ex = examples.suite(["cartpole_scan"])[0]
    prog = lower(ex.fn, *ex.args(0))
    stats = driver.AugmentStats()
    driver.augment(prog, ["while_unroll2", "while_unroll4", "while_unroll_full", "while_unpack_concat_state"],
                   stats=stats)
    assert set(stats.recorded) == {"while_unroll2", "while_unroll4", "while_unroll_full",
                                   "while_unpack_concat_state"}


def test_unpacked_state_has_no_concatenate_in_the_loop():
    from shlo_env.bench import examples

    ex = examples.suite(["cartpole_scan"])[0]
    prog = lower(ex.fn, *ex.args(0))
    aug = driver.augment(prog, ["while_unpack_concat_state"])
    out = driver.apply(aug, [1])
    text = out.text()
    loop = text[text.index("stablehlo.while"):text.index("cond {")]
    assert "tensor<4x256xf32>" not in loop  # the packed state is no longer carried
    assert loop.count("tensor<1x256xf32>") >= 4  # its four parts are


def test_flat_body_sees_through_calls():
    """Loop patterns also work on bodies that are still `func.call`s (modules not inlined)."""
    from jaxlib.mlir import ir

    from shlo_env.ir.program import ir_scope
    from shlo_env.patterns.loop_analysis import FlatBody

    text = """
    func.func private @step(%x: tensor<3xf32>) -> tensor<3xf32> {
      %0 = stablehlo.sine %x : tensor<3xf32>
      return %0 : tensor<3xf32>
    }
    func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
      %c0 = stablehlo.constant dense<0> : tensor<i32>
      %r:2 = stablehlo.while(%i = %c0, %s = %x) : tensor<i32>, tensor<3xf32>
        cond {
          %n = stablehlo.constant dense<5> : tensor<i32>
          %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
          stablehlo.return %p : tensor<i1>
        } do {
          %one = stablehlo.constant dense<1> : tensor<i32>
          %j = stablehlo.add %i, %one : tensor<i32>
          %t = func.call @step(%s) : (tensor<3xf32>) -> tensor<3xf32>
          stablehlo.return %j, %t : tensor<i32>, tensor<3xf32>
        }
      return %r#1 : tensor<3xf32>
    }
    """
    with ir_scope():
        module = ir.Module.parse(text)
        main = list(module.body.operations)[1]
        loop = [o for o in main.regions[0].blocks[0].operations if o.operation.name == "stablehlo.while"][0]
        with FlatBody(loop) as body:
            assert [o.name for o in body.ops] == ["stablehlo.constant", "stablehlo.add", "stablehlo.sine"]
        from shlo_env.patterns.loop_analysis import static_trip_count
        assert static_trip_count(loop).trips == 5


def test_writing_patterns_example_works():
    """The example of docs/writing_patterns.md, verbatim in spirit: it fires and passes."""
    from shlo_env.patterns.matching import producer

    class ExpOfLog(Pattern):
        """exp(log(x)) -> x (APPROX: wrong for x < 0, and rounds differently)."""

        root = "stablehlo.exponential"
        numerics = Numerics.APPROX

        def match(self, op):
            log = producer(op.operands[0], "stablehlo.log")
            if log is not None:
                return Match(x=log.operands[0])

        def rewrite(self, b, m):
            return m.x

    res = check_pattern(ExpOfLog, programs_from(lambda x: jnp.exp(jnp.log(jnp.abs(x) + 1.0)), arrays((4, 8))),
                        max_examples=10)
    assert res.num_candidates >= 1
