"""shlo_env.ir.ops, the bottom layer: ops and blocks, walking, calls, splicing, element types."""

import numpy as np
from jaxlib.mlir import ir

from shlo_env.ir import ops as shlo_ir
from shlo_env.ir.program import ir_scope
from shlo_env.ir.tensor_types import element_type_of

MODULE = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = call @double(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = stablehlo.while(%i = %0) : tensor<4xf32>
    cond {
      %c = stablehlo.constant dense<true> : tensor<i1>
      stablehlo.return %c : tensor<i1>
    } do {
      %n = stablehlo.negate %i : tensor<4xf32>
      stablehlo.return %n : tensor<4xf32>
    }
  return %1 : tensor<4xf32>
}
func.func private @double(%y: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %y, %y : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""


def _module() -> ir.Module:
    with ir_scope():
        return ir.Module.parse(MODULE)


def _main_ops(module):
    main = shlo_ir.functions(module)["main"]
    return main, shlo_ir.block_ops(main.regions[0].blocks[0])


def test_as_operation_and_block_ops():
    module = _module()
    view = module.body.operations[0]  # an OpView (func.FuncOp)
    assert not isinstance(view, ir.Operation)
    op = shlo_ir.as_operation(view)
    assert isinstance(op, ir.Operation) and shlo_ir.as_operation(op) is op
    main, ops = _main_ops(module)
    assert [o.name for o in ops] == ["func.call", "stablehlo.while", "func.return"]
    assert shlo_ir.terminator(main.regions[0].blocks[0]) == ops[-1]


def test_walk_in_program_order_and_stop():
    module = _module()  # kept alive: the ops die with it
    main, ops = _main_ops(module)
    names = [o.name for o in shlo_ir.walk(main)]
    assert names == ["func.call", "stablehlo.while", "stablehlo.constant", "stablehlo.return",
                     "stablehlo.negate", "stablehlo.return", "func.return"]
    stopped = [o.name for o in shlo_ir.walk(main, stop=("stablehlo.while",))]
    assert stopped == ["func.call", "stablehlo.while", "func.return"]
    assert [o.name for o in shlo_ir.walk_block(main.regions[0].blocks[0])] == names


def test_ancestor_in():
    module = _module()
    main, ops = _main_ops(module)
    block = main.regions[0].blocks[0]
    loop = ops[1]
    negate = shlo_ir.block_ops(loop.regions[1].blocks[0])[0]
    assert negate.name == "stablehlo.negate"
    assert shlo_ir.ancestor_in(block, negate) == loop
    assert shlo_ir.ancestor_in(block, loop.opview) == loop
    assert shlo_ir.ancestor_in(loop.regions[1].blocks[0], negate) == negate
    other = shlo_ir.functions(module)["double"]
    assert shlo_ir.ancestor_in(block, shlo_ir.block_ops(other.regions[0].blocks[0])[0]) is None


def test_callee_and_functions():
    module = _module()
    funcs = shlo_ir.functions(module)
    assert set(funcs) == {"main", "double"}
    assert shlo_ir.functions(module.operation).keys() == funcs.keys()
    _, ops = _main_ops(module)
    call = ops[0]
    assert shlo_ir.callee_name(call) == "double"
    assert shlo_ir.callee(call) == funcs["double"]
    funcs["double"].erase()  # a call to a function the module does not define resolves to nothing
    assert shlo_ir.callee(call) is None


def test_splice_block_replaces_the_op():
    module = _module()
    _, ops = _main_ops(module)
    call = ops[0]
    with ir_scope():
        clone = shlo_ir.callee(call).clone(ip=ir.InsertionPoint(module.body))
        shlo_ir.splice_block(clone.regions[0].blocks[0], call)
        assert [o.name for o in shlo_ir.block_ops(clone.regions[0].blocks[0])] == ["func.return"]
        clone.erase()
    _, ops = _main_ops(module)
    assert [o.name for o in ops] == ["stablehlo.add", "stablehlo.while", "func.return"]
    main = shlo_ir.functions(module)["main"]
    assert list(ops[0].operands) == [main.regions[0].blocks[0].arguments[0]] * 2
    assert ops[1].operands[0] == ops[0].results[0]  # the call's user now reads the add
    assert module.operation.verify()


def test_element_type_of_value_tensor_and_bare_type():
    module = _module()
    _, ops = _main_ops(module)
    value = ops[0].results[0]
    with ir_scope():
        f32 = ir.F32Type.get()
        assert element_type_of(value) == f32
        assert element_type_of(value.type) == f32
        assert element_type_of(f32) == f32
        c64 = ir.RankedTensorType.get([2], ir.ComplexType.get(f32))
        assert shlo_ir.is_complex(c64) and not shlo_ir.is_complex(value)


def test_dense_literal_round_trips_through_complex_constant():
    with ir_scope():
        t = ir.RankedTensorType.get([2], ir.ComplexType.get(ir.F32Type.get()))
        values = np.array([1 + 2j, -0.0 - 3j], np.complex64)
        op = ir.Operation.parse(f"%0 = stablehlo.constant {shlo_ir.dense_literal(values, t)}")
        np.testing.assert_array_equal(shlo_ir.complex_constant(op), values)
        op.erase()
