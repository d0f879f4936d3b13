"""Loop analysis for patterns/loops.py: static trip counts, body sizes, and `FlatBody`, a
detached copy of a loop body with its calls inlined."""

from __future__ import annotations

from jaxlib.mlir import ir

from shlo_env.ir.builder import Builder
from shlo_env.ir.ops import as_operation, block_ops, callee, terminator, walk
from shlo_env.patterns import match_cache as mc
from shlo_env.patterns.matching import commuted, comparison, producer, splat_value, static_shape
from shlo_env.ir.tensor_types import is_integer

__all__ = ["LoopInfo", "static_trip_count", "has_dynamic_loop", "body_size", "FlatBody"]


class LoopInfo:
    """A `stablehlo.while` counting `i` from `start` to `limit` by `step`: `trips` iterations."""

    __slots__ = ("counter", "start", "limit", "step", "trips")

    def __init__(self, counter, start, limit, step, trips):
        self.counter, self.start, self.limit, self.step, self.trips = counter, start, limit, step, trips


def _int_constant(value: ir.Value):
    v = splat_value(value)
    if isinstance(v, bool) or not isinstance(v, int):
        return None
    return v


def static_trip_count(op) -> LoopInfo | None:
    """The trip count of a while loop `for i in range(start, limit, step)`, if it is static.

    The condition must be `i < limit` (signed compare, `limit` a constant captured or in the
    condition), `i` starts from a constant and the body only adds a positive constant step.
    """
    op = as_operation(op)
    if op.name != "stablehlo.while":
        return None
    cond, body = op.regions[0].blocks[0], op.regions[1].blocks[0]
    cond_ops = block_ops(cond)
    if len(cond_ops) < 2 or cond_ops[-1].name != "stablehlo.return":
        return None
    pred = cond_ops[-1].operands[0]
    cmp = producer(pred, "stablehlo.compare")
    if cmp is None or comparison(cmp) != "LT":
        return None
    if any(o.name not in ("stablehlo.compare", "stablehlo.constant", "stablehlo.return") for o in cond_ops):
        return None
    i, lim = cmp.operands
    if not isinstance(i, ir.BlockArgument) or i.owner != cond or static_shape(i) != ():
        return None
    if not is_integer(i.type):
        return None
    limit = _int_constant(lim)
    start = _int_constant(op.operands[i.arg_number])
    if limit is None or start is None:
        return None
    ret = terminator(body)
    nxt = producer(ret.operands[i.arg_number], "stablehlo.add")
    if nxt is None:
        return None
    barg = body.arguments[i.arg_number]
    step = None
    for x, c in commuted(nxt):
        if x == barg:
            step = _int_constant(c)
    if step is None or step <= 0:
        return None
    trips = max(0, -(-(limit - start) // step))
    return LoopInfo(i.arg_number, start, limit, step, trips)


def has_dynamic_loop(op) -> bool:
    """Whether a while loop nested in `op` (a module: every function) has no static trip count:
    how often it runs is known only at run time."""
    return any(inner.name == "stablehlo.while" and static_trip_count(inner) is None for inner in walk(op))


def body_size(op) -> int:
    """Ops in a loop body, counting the ops of called functions."""
    n = 0
    for inner in walk(op):
        n += 1
        if inner.name == "func.call":
            f = callee(inner)
            if f is not None:
                n += body_size(f)
    return n

class FlatBody:
    """A detached copy of a loop body (or any single-block region) with `func.call`s inlined.

    JAX lowers loop bodies as calls to private functions; patterns analyse and rebuild loops
    from this flat copy. Use as a context manager (the copy is erased on exit):

        with FlatBody(while_op) as body:
            for op in body.ops: ...
    """

    def __init__(self, op, region: int = 1):
        op = as_operation(op)
        src = op.regions[region].blocks[0]
        self.scratch: ir.Operation | None = ir.Operation.create("shlo_env.scratch", regions=1)
        self.block = self.scratch.regions[0].blocks.append(*[a.type for a in src.arguments])
        b = Builder.at_end(self.block)
        outs = b.inline(src, list(self.block.arguments))
        b.op("stablehlo.return", outs, [])
        mc.forget_users()  # the copy uses values captured from the program

    @property
    def args(self) -> list[ir.Value]:
        return list(self.block.arguments)

    @property
    def ops(self) -> list[ir.Operation]:
        """The body's ops without the terminator."""
        return block_ops(self.block)[:-1]

    @property
    def results(self) -> list[ir.Value]:
        return list(terminator(self.block).operands)

    def close(self) -> None:
        if self.scratch is not None:
            self.scratch.erase()
            self.scratch = None
            mc.forget_users()

    def __enter__(self) -> "FlatBody":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
