"""Random connected sub-graphs cut out of a program: HloEnv's inst-10-20 / inst-20-40 datasets.

How a cut is chosen (`Extractor.sample`):

1. **Nodes** are the ops directly in `main`'s entry block. Nested regions are never entered: a
   `reduce`, `sort`, `scatter`, `reduce_window` or `select_and_scatter` is one node together with
   its small body (as an HLO instruction is). Never in a cut: the `return`; control flow
   (`while`, `case`, `if`), since its body is a whole computation; `custom_call`s and anything
   with side effects or tokens; ops whose regions read values from outside themselves.
2. **Constants** are not nodes. A cut op that reads a constant gets a copy of that constant inside
   the cut, so it stays a constant (XLA can fold it, as in the original), not a parameter. Only
   a non-splat constant of more than `MAX_CONSTANT_ELEMENTS` elements becomes a parameter, to
   keep the dataset small.
3. **Growth**: pick a seed node uniformly at random, then repeatedly add a random neighbour of
   the cut (an op that defines an operand of a cut op, or that uses a result of one: edges are
   undirected, so the cut is connected) until it reaches a size drawn uniformly from the range.
4. **Convexity**: every op that lies on a path from one cut op to another through the outside
   is added too (the descendants of the cut that are also its ancestors); otherwise the cut
   could not be put back into its program as one node. A cut that this makes too large, or that
   would need an excluded op, is dropped.
5. **Interface**: values defined outside the cut and read inside it (results of outside ops and
   arguments of `main` alike) become the parameters of the new `main`, in first-use order.
   Results of cut ops that are used outside the cut (the original `return` included) or not used
   at all (sinks) become its results, in program order.
6. The new module (`func.func @main(params) -> results`, ops cloned in program order) is
   verified. **Size** is the number of ops in its body, copied constants included, the return
   not; a sample outside the requested range is dropped. Callers deduplicate by `dag_hash`.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator

import numpy as np
from jaxlib.mlir import ir

from shlo_env.ir.program import Program, ir_scope, program_from_module
from shlo_env.ir.ops import ancestor_in, block_ops
from shlo_env.rewrite.region_cut import module_of

MAX_CONSTANT_ELEMENTS = 1024

# Ops that never go into a cut (see the module docstring).
EXCLUDED = frozenset({
    "func.return", "func.call", "stablehlo.return",
    "stablehlo.while", "stablehlo.case", "stablehlo.if",
    "stablehlo.custom_call", "stablehlo.send", "stablehlo.recv", "stablehlo.infeed",
    "stablehlo.outfeed", "stablehlo.after_all", "stablehlo.create_token", "stablehlo.rng",
    "stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.all_to_all",
    "stablehlo.reduce_scatter", "stablehlo.collective_permute", "stablehlo.collective_broadcast",
    "stablehlo.partition_id", "stablehlo.replica_id", "stablehlo.optimization_barrier",
})
CONSTANT = "stablehlo.constant"


@dataclasses.dataclass
class SubGraph:
    program: Program
    source: str
    size: int  # ops in the new main's body, constants included, the return not
    seed_op: str


def _is_tensor(t: ir.Type) -> bool:
    return isinstance(t, ir.RankedTensorType) or ir.RankedTensorType.isinstance(t)  # type: ignore[attr-defined]  # older bindings


def _regions_closed(op: ir.Operation) -> bool:
    """True if the ops in op's regions read only values defined inside those regions."""
    if not len(op.regions):
        return True
    inside: set = set()
    stack = [op]
    nested = []
    while stack:
        o = stack.pop()
        for region in o.regions:
            for b in region.blocks:
                inside.update(b.arguments)
                for inner in block_ops(b):
                    nested.append(inner)
                    inside.update(inner.results)
                    stack.append(inner)
    return all(v in inside for n in nested for v in n.operands)


def _big_constant(op: ir.Operation) -> bool:
    attr = op.attributes["value"]
    try:
        dense = ir.DenseElementsAttr(attr)
    except (ValueError, TypeError):
        return True
    if dense.is_splat:
        return False
    t = ir.RankedTensorType(op.results[0].type)
    return int(np.prod(t.shape, dtype=np.int64)) > MAX_CONSTANT_ELEMENTS


class Extractor:
    """The graph of one program's entry block, ready for sampling cuts."""

    def __init__(self, program: Program):
        self.program = program.clone()
        self.block = self.program.body
        self.ops: list[ir.Operation] = [o.operation for o in self.block.operations]
        self.index = {op: i for i, op in enumerate(self.ops)}
        n = len(self.ops)
        self.preds: list[set[int]] = [set() for _ in range(n)]
        self.succs: list[set[int]] = [set() for _ in range(n)]
        self.eligible = [False] * n
        self.is_const = [op.name == CONSTANT for op in self.ops]
        self.small_const = [c and not _big_constant(op) for c, op in zip(self.is_const, self.ops)]
        for i, op in enumerate(self.ops):
            for v in self._all_operands(op):
                if isinstance(v, ir.OpResult):
                    d = self._owner(v)
                    if d is not None and d != op and d in self.index:
                        self.preds[i].add(self.index[d])
                        self.succs[self.index[d]].add(i)
            self.eligible[i] = self._eligible(op)

    def _owner(self, v: ir.OpResult) -> ir.Operation | None:
        owner = v.owner
        return ancestor_in(self.block, owner)

    def _all_operands(self, op: ir.Operation) -> Iterator[ir.Value]:
        yield from op.operands
        for region in op.regions:
            for b in region.blocks:
                for inner in b.operations:
                    yield from self._all_operands(inner.operation)

    def _eligible(self, op: ir.Operation) -> bool:
        if op.name in EXCLUDED or op.name == CONSTANT or op.name.startswith("shlo_env."):
            return False
        if not len(op.results):
            return False
        if not all(_is_tensor(r.type) for r in op.results):
            return False
        if not all(_is_tensor(v.type) for v in op.operands):
            return False
        return _regions_closed(op)

    @property
    def num_eligible(self) -> int:
        return sum(self.eligible)

    # --- sampling ---------------------------------------------------------------------------

    def _constants_of(self, cut: set[int]) -> set[int]:
        return {p for i in cut for p in self.preds[i] if self.small_const[p]}

    def _size(self, cut: set[int]) -> int:
        return len(cut) + len(self._constants_of(cut))

    def _convex_closure(self, cut: set[int]) -> set[int] | None:
        lo, hi = min(cut), max(cut)
        down = set(cut)  # descendants of the cut (within [lo, hi])
        for i in range(lo, hi + 1):
            if i not in down and any(p in down for p in self.preds[i]):
                down.add(i)
        up = set(cut)  # ancestors of the cut (within [lo, hi])
        for i in range(hi, lo - 1, -1):
            if i not in up and any(s in up for s in self.succs[i]):
                up.add(i)
        closure = down & up
        if any(not self.eligible[i] for i in closure - cut):
            return None
        return closure

    def sample(self, rng: random.Random, lo: int, hi: int, max_tries: int = 20) -> SubGraph | None:
        """One random connected, convex cut of `lo`..`hi` ops (see the module docstring)."""
        nodes = [i for i, e in enumerate(self.eligible) if e]
        if len(nodes) < 2:
            return None
        for _ in range(max_tries):
            target = rng.randint(lo, hi)
            seed = rng.choice(nodes)
            cut = {seed}
            frontier = set()

            def extend(i):
                for j in self.preds[i] | self.succs[i]:
                    if self.eligible[j] and j not in cut:
                        frontier.add(j)

            extend(seed)
            while frontier and self._size(cut) < target:
                j = rng.choice(sorted(frontier))
                frontier.discard(j)
                cut.add(j)
                extend(j)
            closed = self._convex_closure(cut)
            if closed is None:
                continue
            size = self._size(closed)
            if not lo <= size <= hi:
                continue
            try:
                sub = self.build(closed)
            except (ir.MLIRError, ValueError):
                continue
            return SubGraph(sub, self.program.name, size, self.ops[seed].name)
        return None

    # --- building -----------------------------------------------------------------------------

    def build(self, cut: set[int]) -> Program:
        """The cut as a standalone program (parameters and results as in the module docstring)."""
        members = sorted(cut | self._constants_of(cut))
        member_ops = {self.ops[i] for i in members}
        params: list[ir.Value] = []
        seen: set = set()
        for i in members:
            for v in self.ops[i].operands:  # regions are closed, so only top-level operands
                if isinstance(v, ir.OpResult):
                    if self._owner(v) in member_ops:
                        continue  # defined in the cut
                if v not in seen:
                    seen.add(v)
                    params.append(v)
        outputs: list[ir.Value] = []
        for i in members:
            if self.is_const[i]:
                continue
            for r in self.ops[i].results:
                users = [ancestor_in(self.block, u.owner) for u in r.uses]
                if not users or any(u not in member_ops for u in users):
                    outputs.append(r)
        if not outputs:
            raise ValueError("cut has no outputs")
        module = module_of([self.ops[i] for i in members], params, outputs)
        with ir_scope():
            if not module.operation.verify():
                raise ValueError("sub-graph does not verify")
        return program_from_module(module, name=self.program.name, source=self.program.source, inline=False)


def size_of(program: Program) -> int:
    """Ops in main's body excluding the return (the size a sub-graph is binned by)."""
    return sum(1 for op in program.body.operations if op.operation.name != "func.return")
