"""The `shlo_env.alternatives` op: one region per choice, region 0 is the original.

```
%r:2 = "shlo_env.alternatives"(%root0, %root1, %in0, ...) ({
  ^bb0(%root0, %root1, %in0, ...):          // every region takes all operands as block arguments
    "shlo_env.yield"(%root0, %root1)        // region 0 yields the original values
}, {
  ^bb0(...):  ...replacement ops...  "shlo_env.yield"(...)
}) {patterns = ["original", "dot_reassociate"], tiers = [0, 1]}
```

The first `num_results` operands are the original root values, so choosing region 0 is the
identity. Regions are self-contained: they only read their block arguments.
"""

from __future__ import annotations

import dataclasses
import sys
import types
from collections.abc import Sequence

from jaxlib.mlir import ir

from shlo_env.ir.ops import block_ops, splice_block, walk

# The bindings look for a Python module named after an op's dialect each time they wrap an op;
# registering an empty one for ours saves three failed imports per op visited (~70 us each).
sys.modules.setdefault("jaxlib.mlir.dialects.shlo_env", types.ModuleType("jaxlib.mlir.dialects.shlo_env"))

ALTERNATIVES = "shlo_env.alternatives"
YIELD = "shlo_env.yield"
ORIGINAL = "original"


@dataclasses.dataclass(frozen=True)
class Alternatives:
    """A read-only view of one alternatives op."""

    index: int
    op: ir.Operation
    labels: tuple[str, ...]  # pattern name per region; labels[0] == "original"
    tiers: tuple[int, ...]  # numerics tier per region

    @property
    def num_choices(self) -> int:
        return len(self.labels)

    @property
    def result_types(self) -> list[ir.Type]:
        return [r.type for r in self.op.results]

    def region_ops(self, k: int) -> list[ir.Operation]:
        """The ops of choice k, without its yield."""
        return block_ops(self.op.regions[k].blocks[0])[:-1]

    def __repr__(self) -> str:
        return f"Alternatives(#{self.index}: {', '.join(self.labels)})"


def is_alternatives(op) -> bool:
    return op.operation.name == ALTERNATIVES


def create(ip: ir.InsertionPoint, roots: Sequence[ir.Value], inputs: Sequence[ir.Value],
           blocks: Sequence[ir.Block], labels: Sequence[str], tiers: Sequence[int]) -> ir.Operation:
    """Create an alternatives op whose region 0 yields `roots` and whose other regions take `blocks`.

    Each block in `blocks` must already take (roots + inputs) as arguments and end in a yield.
    The blocks are moved (not copied) into the new op.
    """
    operands = list(roots) + list(inputs)
    attrs: dict[str, ir.Attribute] = {
        "patterns": ir.ArrayAttr.get([ir.StringAttr.get(s) for s in [ORIGINAL, *labels]]),
        "tiers": ir.ArrayAttr.get([ir.IntegerAttr.get(ir.IntegerType.get_signless(32), int(t))
                                   for t in [0, *tiers]]),
    }
    op = ir.Operation.create(ALTERNATIVES, results=[r.type for r in roots], operands=operands,
                             attributes=attrs, regions=1 + len(blocks), ip=ip)
    identity = new_block(op.regions[0], operands)
    ir.Operation.create(YIELD, operands=list(identity.arguments)[: len(roots)],
                        ip=ir.InsertionPoint(identity))
    for region, block in zip(list(op.regions)[1:], blocks):
        block.append_to(region)
    return op


def new_block(region: ir.Region, operands: Sequence[ir.Value]) -> ir.Block:
    return region.blocks.append(*[v.type for v in operands])


def yield_(block: ir.Block, values: Sequence[ir.Value]) -> ir.Operation:
    return ir.Operation.create(YIELD, operands=list(values), ip=ir.InsertionPoint(block))


def _strings(op: ir.Operation, name: str) -> tuple[str, ...]:
    return tuple(ir.StringAttr(a).value for a in ir.ArrayAttr(op.attributes[name]))


def _ints(op: ir.Operation, name: str) -> tuple[int, ...]:
    return tuple(ir.IntegerAttr(a).value for a in ir.ArrayAttr(op.attributes[name]))


def view(op: ir.Operation, index: int = -1) -> Alternatives:
    op = op.operation
    return Alternatives(index, op, _strings(op, "patterns"), _ints(op, "tiers"))


def list_alternatives(func_op: ir.Operation) -> list[Alternatives]:
    """All alternatives ops under `func_op`, in program order (outer blocks before nested ones)."""
    # An alternatives op never nests another one: they are not entered.
    found = [op for op in walk(func_op, stop=(ALTERNATIVES,)) if op.name == ALTERNATIVES]
    return [view(op, i) for i, op in enumerate(found)]


def materialize(op: ir.Operation, choice: int) -> None:
    """Replace the alternatives op by the ops of region `choice` (moved, not cloned)."""
    op = op.operation
    n = len(op.regions)
    if not 0 <= choice < n:
        raise IndexError(f"choice {choice} out of range for an alternatives op with {n} regions")
    splice_block(op.regions[choice].blocks[0], op)


def lower_to_case(op: ir.Operation, choice: int) -> ir.Operation:
    """Turn an alternatives op into legal StableHLO: `stablehlo.case` on a constant index.

    Lets XLA compile a program whose decisions are still open (all branches are kept).
    """
    op = op.operation
    ip = ir.InsertionPoint(op)
    i32 = ir.RankedTensorType.get([], ir.IntegerType.get_signless(32))
    index = ir.Operation.create(
        "stablehlo.constant", results=[i32],
        attributes={"value": ir.DenseElementsAttr.get_splat(i32, ir.IntegerAttr.get(
            ir.IntegerType.get_signless(32), choice))}, ip=ip)
    case = ir.Operation.create("stablehlo.case", results=[r.type for r in op.results],
                               operands=[index.result], regions=len(op.regions), ip=ip)
    for region, target in zip(op.regions, case.regions):
        block = region.blocks[0]
        for arg, operand in zip(block.arguments, op.operands):
            arg.replace_all_uses_with(operand)
        new = target.blocks.append()
        for inner in block_ops(block):
            if inner.name == YIELD:
                ir.Operation.create("stablehlo.return", operands=list(inner.operands),
                                    ip=ir.InsertionPoint(new))
            else:
                ir.InsertionPoint(new).insert(inner.detach_from_parent())
    for result, new_result in zip(op.results, case.results):
        result.replace_all_uses_with(new_result)
    op.erase()
    return case
