"""Unrolling `stablehlo.while` loops whose trip count is not known at compile time (opt-in).

Solvers, samplers and environments loop until a condition holds (`lax.while_loop`: an ODE
solver's step loop, a line search, CG to a tolerance, an episode until the pole falls). The
unrolls of `loops.py` need a static trip count; this one runs the body twice per iteration and
keeps the second step only where the loop's condition still held before it:

    while c(x): x = f(x)   ->   while c(x): y = f(x); x = select(c(y), f(y), y)

The second copy is computed speculatively and dropped by the select when the loop would have
stopped, so under StableHLO's semantics the result is the original's bit for bit. XLA does not
keep it so: on diffrax_ou_sde_heun the compiled rewrite differs by a few ulp (1e-6 on outputs of
2.6), the two copies fusing differently, so the tier is REASSOCIATE. Speculation is only safe
when the body has no side effects and always terminates: loops nested in the body must have
static trip counts (a nested `while` iterating to convergence, run on a state where the outer
loop would have stopped, might never end).

Not registered: on the scientific zoo it was slower or within noise on every program it matched
(docs/experiments/2026-11-29-science-oracle-and-gap.md), so it would only spend a search's
budget. Pass it by class: `optimize(fn, *args, patterns=[WhileUnroll2Guarded, ...])`.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from shlo_env.ir.ops import as_operation, callee, is_pure, walk
from shlo_env.patterns.base import Numerics, Pattern
from shlo_env.patterns.loop_analysis import body_size, static_trip_count
from shlo_env.patterns.loops import MAX_UNROLLED_OPS, _body_block, _cond_block, _env, _loop_match


def _nested_loops_bounded(op, seen: set | None = None) -> bool:
    """Every `stablehlo.while` inside `op`'s regions (and the functions they call) has a static
    trip count, so running the body once more always ends."""
    seen = set() if seen is None else seen
    top = as_operation(op)
    for inner in walk(top):
        if inner is not top and inner.name == "stablehlo.while" and static_trip_count(inner) is None:
            return False
        if inner.name == "func.call":
            fn = callee(inner)
            if fn is None:
                return False
            key = str(fn.attributes["sym_name"])
            if key not in seen:
                seen.add(key)
                if not _nested_loops_bounded(fn, seen):
                    return False
    return True


class WhileUnroll2Guarded(Pattern):
    """while c(x): x = f(x) -> while c(x): y = f(x); x = select(c(y), f(y), y), for a loop with no
    static trip count (f pure, its nested loops bounded)."""

    root = "stablehlo.while"
    numerics = Numerics.REASSOCIATE
    #: Body copies per iteration of the new loop; copies after the first are guarded.
    factor = 2

    def match(self, op):
        if static_trip_count(op) is not None:
            return None  # loops.py's unrolls cover it without speculation
        loop = as_operation(op)
        if not all(isinstance(v.type, ir.RankedTensorType) for v in loop.operands):
            return None  # a select needs tensors (no tokens, no tuples)
        if body_size(op) * self.factor > MAX_UNROLLED_OPS:
            return None
        if not is_pure(loop, callee) or not _nested_loops_bounded(loop):
            return None
        return _loop_match(op)

    def rewrite(self, b, m):
        env = _env(m)
        cond, body = _cond_block(m), _body_block(m)

        def new_body(bb, args):
            vals = bb.inline(body, args, env)
            for _ in range(self.factor - 1):
                go_on = bb.inline(cond, vals, env)[0]
                more = bb.inline(body, vals, env)
                vals = [bb.select(go_on, new, old) for new, old in zip(more, vals)]
            return vals

        return b.while_(list(m.inits), lambda bb, args: bb.inline(cond, args, env)[0], new_body)


__all__ = ["WhileUnroll2Guarded"]
