"""One definition of purity (shlo_env.ir.ops.is_pure) used by prune, the DAG hash and the patterns
(issue 11, item 7): every effectful op is kept when dead and counts in the hash; pure ops
(stablehlo.rng_bit_generator included: its state is an operand) are pruned and do not."""

import pytest
from jaxlib.mlir import ir

from shlo_env.rewrite import driver
from shlo_env.ir import hashing, ops as shlo_ir
from shlo_env.learn import observe
from shlo_env.ir.program import Program, ir_scope
from shlo_env.patterns import fusion, loops

PURE = ["stablehlo.rng_bit_generator", "stablehlo.add", "stablehlo.exponential"]


def _program_with(name: str | None, nested: bool = False) -> Program:
    """main(%x) returns %x; `name` is an extra op on %x whose result nothing reads (inside a
    while body when `nested`)."""
    with ir_scope():
        module = ir.Module.parse("""
func.func @main(%x: tensor<f32>) -> tensor<f32> {
  return %x : tensor<f32>
}""")
        main = module.body.operations[0]
        block = main.regions[0].blocks[0]
        ret = block.operations[0]
        x = block.arguments[0]
        t = x.type
        if name is not None and not nested:
            ir.Operation.create(name, results=[t], operands=[x], ip=ir.InsertionPoint(ret))
        elif name is not None:
            loop = ir.Operation.create("stablehlo.while", results=[t], operands=[x], regions=2,
                                       ip=ir.InsertionPoint(ret))
            for region in loop.regions:
                body = region.blocks.append(t)
                ip = ir.InsertionPoint(body)
                inner = ir.Operation.create(name, results=[t], operands=[body.arguments[0]], ip=ip)
                ir.Operation.create("stablehlo.return", operands=[inner.results[0]], ip=ip)
    return Program(module, (), ())


def _extra_op(p: Program) -> ir.Operation:
    return [o.operation for o in p.body.operations][0]


def test_every_module_uses_the_one_definition():
    assert fusion.is_pure is shlo_ir.is_pure and loops.is_pure is shlo_ir.is_pure  # the patterns that ask
    assert driver.is_pure is shlo_ir.is_pure
    assert observe.is_pure is shlo_ir.is_pure


@pytest.mark.parametrize("nested", [False, True])
@pytest.mark.parametrize("name", sorted(shlo_ir.EFFECTFUL_OPS) + PURE)
def test_prune_hash_and_patterns_agree(name, nested):
    effectful = name in shlo_ir.EFFECTFUL_OPS
    p = _program_with(name, nested)
    assert shlo_ir.is_pure(_extra_op(p)) is not effectful
    # the DAG hash counts a dead op exactly when it is effectful
    assert (hashing.dag_hash(p) != hashing.dag_hash(_program_with(None))) is effectful
    # prune erases a dead op exactly when it is pure
    assert driver.prune(p) == (0 if effectful else 1)
    assert len(list(p.body.operations)) == (2 if effectful else 1)


def test_a_call_is_as_pure_as_its_callee():
    with ir_scope():
        module = ir.Module.parse("""
func.func @main(%x: tensor<f32>) -> tensor<f32> {
  %0 = call @f(%x) : (tensor<f32>) -> tensor<f32>
  %1 = call @g(%x) : (tensor<f32>) -> tensor<f32>
  return %x : tensor<f32>
}
func.func private @f(%x: tensor<f32>) -> tensor<f32> {
  %0 = stablehlo.exponential %x : tensor<f32>
  return %0 : tensor<f32>
}
func.func private @g(%x: tensor<f32>) -> tensor<f32> {
  %0 = stablehlo.custom_call @host(%x) : (tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}""")
    funcs = {ir.StringAttr(f.attributes["sym_name"]).value: f.operation for f in module.body.operations}
    callee = lambda call: funcs.get(ir.FlatSymbolRefAttr(call.attributes["callee"]).value)  # noqa: E731
    calls = [o.operation for o in funcs["main"].regions[0].blocks[0].operations][:2]
    assert [shlo_ir.is_pure(c, callee) for c in calls] == [True, False]
    assert [shlo_ir.is_pure(c) for c in calls] == [False, False]  # unresolved: assume the worst
