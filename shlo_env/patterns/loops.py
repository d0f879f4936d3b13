"""Loop rewrites on `stablehlo.while`: unrolling, hoisting invariant work, unpacking state.

JAX lowers `fori_loop`/`scan` bodies as calls to private functions; these patterns work on a
flat copy of the body (`FlatBody`, calls inlined) and rebuild the loop from it. All but one are
exact: the same operations run in the same order on the same values; only the loop structure
(and so what XLA can fuse or schedule across iterations) changes. The exception,
`while_accumulated_dot_after_loop`, sums a loop's dot products in another order.

Exact means bitwise under StableHLO's semantics (the reference interpreter agrees bit for bit).
XLA may then change float results itself: after full unrolling its algebraic simplifier folds
chains of constant additions ((x + c1) + c2 -> x + (c1 + c2)), so the compiled unrolled loop can
differ from the compiled loop by an ulp. That is XLA reassociating, not the rewrite.
"""

from __future__ import annotations

from typing import NamedTuple

from jaxlib.mlir import ir

from shlo_env.ir.ops import as_operation, is_pure, terminator
from shlo_env.patterns.base import Match, Numerics, Pattern, register
from shlo_env.patterns.loop_analysis import FlatBody, body_size, static_trip_count
from shlo_env.patterns.matching import (captured_values, concat_dim, depends_on, dot_dims, permutation, producer,
                                        slice_params, users)
from shlo_env.ir.tensor_types import element_type_of, is_float, nbytes, shape_of, tensor_type

#: Unrolled bodies stay below this many ops (body size x copies).
MAX_UNROLLED_OPS = 4000
#: Full unrolling is offered up to this trip count.
MAX_FULL_UNROLL = 64


def _loop_match(op, **extra) -> Match:
    """The Match every loop rewrite needs: the loop's operands and what its regions capture."""
    return Match(loop=op, inits=list(op.operands), captured=captured_values(op), **extra)


def _env(m) -> dict:
    """Map the loop's captured values to the rewrite's region arguments."""
    return dict(zip(captured_values(m.loop), m.captured))


def _cond_block(m):
    return m.loop.operation.regions[0].blocks[0]


def _body_block(m):
    return m.loop.operation.regions[1].blocks[0]


#: Stacks a loop rewrite may add, in bytes at most (trip count x operand size, all operands).
MAX_STACK_BYTES = 64 << 20


class _Accumulator(NamedTuple):
    """Carried value `carry` of a loop body that does `acc' = acc + [transpose] dot(lhs, rhs)`."""

    carry: int
    add: ir.Operation
    dot: ir.Operation
    transpose: ir.Operation | None


def _only_use(value: ir.Value) -> ir.Operation | None:
    """The op using `value`, when it has exactly one use."""
    found = users(value)
    return as_operation(found[0]) if len(found) == 1 else None


def _same(a: ir.Operation | None, b: ir.Operation | None) -> bool:
    """Both ops and the same one (the bindings' `==` raises on None: a body that returns a
    block argument as it is has no owning op there)."""
    return a is not None and b is not None and a == b


def _accumulators(body: FlatBody, cond_uses: set[int]) -> list[_Accumulator]:
    """The carried values the body only ever adds a dot product to (a scan's weight gradient:
    acc' = acc + dot(x_t, g_t), or its transpose)."""
    found = []
    terminator_op = as_operation(terminator(body.block))
    for k, (arg, res) in enumerate(zip(body.args, body.results)):
        add = _only_use(arg)
        if k in cond_uses or add is None or add.name != "stablehlo.add" or not _same(as_operation(res.owner), add):
            continue
        if not _same(_only_use(add.result), terminator_op) or not is_float(arg.type):
            continue
        term = add.operands[1] if add.operands[0] == arg else add.operands[0]
        transpose = producer(term, "stablehlo.transpose")
        dot_value = transpose.operands[0] if transpose is not None else term
        dot = producer(dot_value, "stablehlo.dot_general")
        if dot is None or _only_use(dot_value) is None or (transpose is not None and _only_use(term) is None):
            continue
        found.append(_Accumulator(k, add, as_operation(dot), transpose and as_operation(transpose)))
    return found


def _stacked(accs: list[_Accumulator]) -> list[ir.Value]:
    """The values to stack across iterations: every accumulated dot's operands, each once."""
    return list(dict.fromkeys(v for a in accs for v in a.dot.operands))


@register  # before the unrolls: at a loop offering both, the first single a search tries
class WhileAccumulatedDotAfterLoop(Pattern):
    """while(acc){acc' = acc + dot(a_t, b_t)} -> while(A, B){A[t] = a_t, B[t] = b_t}, then acc + dot(A, B) contracting t;
    a scan's per-step weight-gradient updates become one dot after the loop (the loop's stacks
    take trip count x operand size; summation order changes)."""

    root = "stablehlo.while"
    numerics = Numerics.REASSOCIATE

    def match(self, op):
        info = static_trip_count(op)
        if info is None or info.trips < 2 or not is_pure(op):
            return None
        with FlatBody(op) as body:
            accs = _accumulators(body, _cond_uses(op))
            stacked = sum(nbytes(v.type) for v in _stacked(accs)) * info.trips
        if not accs or stacked > MAX_STACK_BYTES:
            return None
        return _loop_match(op, info=info)

    def rewrite(self, b, m):
        env, info, n = _env(m), m.info, len(m.inits)
        with FlatBody(m.loop) as body:
            accs = _accumulators(body, _cond_uses(m.loop))
            operands = _stacked(accs)
            stacks = [b.zeros(tensor_type((info.trips,) + shape_of(v.type), element_type_of(v))) for v in operands]

            def new_body(bb, args):
                inner = dict(env)
                inner.update(zip(body.args, args[:n]))
                skipped = {r: r for a in accs for o in (a.add, a.dot, a.transpose) if o is not None for r in o.results}
                bb.copy_ops(body.ops, inner, skipped)
                outs = [inner.get(v, v) for v in body.results]
                for a in accs:
                    outs[a.carry] = args[a.carry]  # passes through; its sum is taken after the loop
                step = _step_index(bb, args[info.counter], info)
                for stack, v in zip(args[n:], operands):
                    row = bb.reshape(inner.get(v, v), (1,) + shape_of(v.type))
                    starts = [step] + [bb.zeros(step.type)] * (len(shape_of(v.type)))
                    outs.append(bb.op("stablehlo.dynamic_update_slice", [stack, row, *starts], [stack.type]).result)
                return outs

            results = b.while_(list(m.inits) + stacks, lambda bb, args: bb.inline(_cond_block(m), args[:n], env)[0],
                               new_body)
            out, filled = results[:n], dict(zip(operands, results[n:]))
            for a in accs:
                (lhs, rhs), d = [filled[v] for v in a.dot.operands], dot_dims(a.dot)
                total = b.dot(lhs, rhs, contract=([0] + [i + 1 for i in d.lhs_contract], [0] + [i + 1 for i in d.rhs_contract]),
                              batch=([i + 1 for i in d.lhs_batch], [i + 1 for i in d.rhs_batch]), like=a.dot)
                if a.transpose is not None:
                    total = b.transpose(total, permutation(a.transpose))
                out[a.carry] = b.add(out[a.carry], total)
            return out


def _step_index(b, counter: ir.Value, info) -> ir.Value:
    """(i - start) / step: which iteration of the loop this is, 0 to trips - 1."""
    if info.start:
        counter = b.sub(counter, b.constant(info.start, counter.type))
    if info.step != 1:
        counter = b.div(counter, b.constant(info.step, counter.type))
    return counter


class _Unroll(Pattern):
    """Unroll by `factor`: each iteration of the new loop runs the body `factor` times; the
    `trips % factor` leftover iterations are peeled off before it."""

    root = "stablehlo.while"
    factor = 2

    def match(self, op):
        info = static_trip_count(op)
        if info is None or info.trips < 2 * self.factor:
            return None
        if body_size(op) * self.factor > MAX_UNROLLED_OPS:
            return None
        return _loop_match(op, trips=info.trips)

    def rewrite(self, b, m):
        env = _env(m)
        cond, body = _cond_block(m), _body_block(m)
        vals = list(m.inits)
        for _ in range(m.trips % self.factor):
            vals = b.inline(body, vals, env)

        def new_body(bb, args):
            for _ in range(self.factor):
                args = bb.inline(body, args, env)
            return args

        return b.while_(vals, lambda bb, args: bb.inline(cond, args, env)[0], new_body)


@register
class WhileUnroll2(_Unroll):
    """while{body} -> while{body; body} plus n % 2 peeled iterations, for a static trip count n >= 4."""

    factor = 2


@register
class WhileUnroll4(_Unroll):
    """while{body} -> while{body; body; body; body} plus n % 4 peeled iterations, for a static trip count n >= 8."""

    factor = 4


@register
class WhileUnrollFull(Pattern):
    """while{body} -> body · body · ... · body (n copies, no loop), for a static trip count n <= 64."""

    root = "stablehlo.while"

    def match(self, op):
        info = static_trip_count(op)
        if info is None or not 1 <= info.trips <= MAX_FULL_UNROLL:
            return None
        if body_size(op) * info.trips > MAX_UNROLLED_OPS:
            return None
        return _loop_match(op, trips=info.trips)

    def rewrite(self, b, m):
        env = _env(m)
        vals = list(m.inits)
        for _ in range(m.trips):
            vals = b.inline(_body_block(m), vals, env)
        return vals


def _invariant_ops(body: FlatBody) -> list:
    """Ops of the flat body to compute once before the loop: pure, computed only from loop
    invariants (captured values, carried values the body passes through unchanged, constants),
    and depending on at least one non-constant invariant input."""
    args, results = body.args, body.results
    invariant = {a for a, r in zip(args, results) if a == r}
    inputs = set(invariant)  # non-constant loop-invariant values
    defined = set(args)
    for o in body.ops:
        defined.update(o.results)
    hoist = []
    for o in body.ops:
        deps = list(o.operands) + captured_values(o)
        if not is_pure(o) or not all(v in invariant or v not in defined for v in deps):
            continue
        invariant.update(o.results)
        if o.name == "stablehlo.constant":
            continue
        if any(v in inputs or v not in defined for v in deps):
            inputs.update(o.results)
            hoist.append(o)
        else:
            hoist.append(o)  # constant-only: needed before the loop if a hoisted op reads it
    real = [o for o in hoist if any(r in inputs for r in o.results)]
    return hoist if real else []


@register
class WhileHoistInvariant(Pattern):
    """while{y = f(w); ...y...} -> y = f(w) then while{...y...}, when w is loop-invariant
    (loop-invariant code motion)."""

    root = "stablehlo.while"

    def match(self, op):
        with FlatBody(op) as body:
            hoist = _invariant_ops(body)
            if not hoist:
                return None
        return _loop_match(op)

    def rewrite(self, b, m):
        env = _env(m)
        with FlatBody(m.loop) as body:
            hoist = _invariant_ops(body)
            outside = dict(env)
            outside.update(zip(body.args, m.inits))  # pass-through values are their inits
            consts = {o.operation for o in body.ops if o.name == "stablehlo.constant"}
            needed = _closure(hoist, consts)
            b.copy_ops(needed, outside)
            overrides = {r: outside[r] for o in hoist for r in o.results}
            return b.while_(list(m.inits), lambda bb, args: bb.inline(_cond_block(m), args, env)[0],
                            lambda bb, args: bb.inline(body.block, args, env, overrides))


def _closure(hoist, consts):
    """The hoisted ops plus the body constants they read, in body order."""
    needed = set(hoist)
    for o in hoist:
        for v in o.operands:
            if hasattr(v, "owner") and producer(v) is not None and v.owner.operation in consts:
                needed.add(v.owner.operation)
    block_order = list(hoist[0].block.operations) if hoist else []
    return [o.operation for o in block_order if o.operation in needed]


def _packed_state(body: FlatBody, cond_uses) -> dict:
    """Carried values the body reads only through slices of one part each and rebuilds with a
    concatenate: {index: (dim, sizes, [(slice op, part, start, limit, strides)], concat op)}."""
    out = {}
    for j, (arg, res) in enumerate(zip(body.args, body.results)):
        cat = producer(res, "stablehlo.concatenate")
        if cat is None or cat.operation.block != body.block or j in cond_uses:
            continue
        dim = concat_dim(cat)
        sizes = [shape_of(v.type)[dim] for v in cat.operands]
        if len(sizes) < 2:
            continue
        bounds = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
        reads = []
        for use in arg.uses:
            user = as_operation(use.owner)
            if user.name != "stablehlo.slice" or user.block != body.block:
                break
            start, limit, strides = slice_params(user.opview)
            part = next((i for i in range(len(sizes))
                         if bounds[i] <= start[dim] and limit[dim] <= bounds[i + 1]), None)
            if part is None:
                break
            start, limit = list(start), list(limit)
            start[dim] -= bounds[part]
            limit[dim] -= bounds[part]
            reads.append((user, part, start, limit, strides))
        else:  # every read is a slice within one part
            out[j] = (dim, sizes, reads, cat)
    return out


def _cond_uses(op) -> set[int]:
    cond = op.operation.regions[0].blocks[0]
    return {i for i, a in enumerate(cond.arguments) if next(iter(a.uses), None) is not None}


@register
class WhileUnpackConcatState(Pattern):
    """while{s: slices of s; ...; s' = concat(a', b', c', d')} -> while{a, b, c, d: ...; a', b', c', d'}
    then s = concat(a, b, c, d) after the loop, when the body reads s only through slices of one part each.

    The loop carries the parts instead of packing and unpacking them every iteration."""

    root = "stablehlo.while"

    def match(self, op):
        with FlatBody(op) as body:
            packed = _packed_state(body, _cond_uses(op))
            if not packed:
                return None
            layout = {j: (dim, sizes) for j, (dim, sizes, _, _) in packed.items()}
        init_parts = {}
        for j, (dim, sizes) in layout.items():
            cat = producer(op.operands[j], "stablehlo.concatenate")
            if cat is not None and concat_dim(cat) == dim and [shape_of(v.type)[dim] for v in cat.operands] == sizes:
                init_parts[j] = list(cat.operands)
        return _loop_match(op, layout=layout, init_parts=init_parts)

    def rewrite(self, b, m):
        env = _env(m)
        n = len(m.inits)
        # The new loop's carried values: packed ones replaced by their parts.
        inits, where = [], {}
        for j in range(n):
            if j in m.layout:
                dim, sizes = m.layout[j]
                parts = m.init_parts.get(j)
                if parts is None:
                    offs = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
                    parts = [b.slice_dim(m.inits[j], dim, offs[i], offs[i + 1]) for i in range(len(sizes))]
                where[j] = list(range(len(inits), len(inits) + len(parts)))
                inits.extend(parts)
            else:
                where[j] = len(inits)
                inits.append(m.inits[j])

        def old_view(bb, args):
            """The old loop's carried values, packing parts with a concatenate where needed."""
            return [bb.concat([args[k] for k in where[j]], m.layout[j][0]) if j in m.layout else args[where[j]]
                    for j in range(n)]

        with FlatBody(m.loop) as body:
            packed = _packed_state(body, _cond_uses(m.loop))

            def new_body(bb, args):
                overrides = {}
                for j, (dim, sizes, reads, cat) in packed.items():
                    for user, part, start, limit, strides in reads:
                        overrides[user.results[0]] = bb.slice(args[where[j][part]], start, limit, strides)
                old_args = [args[where[j]] if j not in packed else None for j in range(n)]
                env2 = dict(env)
                env2.update({a: v for a, v in zip(body.args, old_args) if v is not None})
                bb.copy_ops(body.ops, env2, overrides)
                out = []
                for j, r in enumerate(body.results):
                    if j in packed:
                        out.extend(env2.get(v, v) for v in packed[j][3].operands)
                    else:
                        out.append(env2.get(r, r))
                return out

            results = b.while_(inits, lambda bb, args: bb.inline(_cond_block(m), old_view(bb, args), env)[0],
                               new_body)
        return old_view(b, results)


@register
class WhileUnroll8(_Unroll):
    """while{body} -> while{body x 8} plus n % 8 peeled iterations, for a static trip count n >= 16."""

    factor = 8


def _reads(body: FlatBody) -> list[set[int]]:
    """For each of the body's results, the indices of the carried values (block arguments) it is
    computed from, through nested regions too. One pass in program order: a search per result
    walked each nested loop once per result (3 s on a NUTS step's nested loops)."""
    deps: dict[ir.Value, frozenset[int]] = {a: frozenset((j,)) for j, a in enumerate(body.args)}
    none: frozenset[int] = frozenset()
    for op in body.ops:
        found: set[int] = set()
        for v in list(op.operands) + captured_values(op):
            found |= deps.get(v, none)  # a value from outside the body reads no carried value
        computed = frozenset(found)
        for r in op.results:
            deps[r] = computed
    return [set(deps.get(r, none)) for r in body.results]


def _live_carries(op) -> set[int] | None:
    """Indices of carried values the loop's users or its condition need, closed over the body's
    data flow; None when the body has side effects (everything stays)."""
    if not is_pure(op):
        return None
    live = _cond_uses(op) | {j for j, r in enumerate(op.results) if next(iter(r.uses), None) is not None}
    with FlatBody(op) as body:
        reads = _reads(body)
    todo = list(live)
    while todo:
        for k in reads[todo.pop()] - live:
            live.add(k)
            todo.append(k)
    return live


@register
class WhileDropDeadCarry(Pattern):
    """while(a, d){a' = f(a); d' = g(a, d)} with d unused after the loop -> while(a){a' = f(a)}:
    a carried value nothing outside the loop reads (and no live value depends on) is dropped."""

    root = "stablehlo.while"

    def match(self, op):
        live = _live_carries(op)
        if live is None or len(live) == len(op.results):
            return None
        return _loop_match(op, live=sorted(live))

    def rewrite(self, b, m):
        kept = _subset_loop(b, m, m.live)
        # Dead results have no users; any value of their type will do.
        return [kept.get(j, v) for j, v in enumerate(m.inits)]


def _subset_loop(b, m, keep: list[int]) -> dict:
    """A copy of the matched loop carrying only the indices `keep` (which must not read the
    others); returns {index: result}. The others' reads see their (unused) initial values."""
    env = _env(m)

    def full(args):
        vals = list(m.inits)
        for j, a in zip(keep, args):
            vals[j] = a
        return vals

    out = b.while_([m.inits[j] for j in keep],
                   lambda bb, args: bb.inline(_cond_block(m), full(args), env)[0],
                   lambda bb, args: [bb.inline(_body_block(m), full(args), env)[j] for j in keep])
    return dict(zip(keep, out))


def _fusable_partner(op):
    """The nearest later pure `stablehlo.while` of `op`'s block with the same static trip count
    that neither reads `op`'s results nor is read by it."""
    info = static_trip_count(op)
    if info is None or not is_pure(op):
        return None
    block_ops = list(op.operation.block.operations)
    start = next(i for i, x in enumerate(block_ops) if x.operation == op.operation)
    for cand in block_ops[start + 1:start + 1 + MAX_FUSE_DISTANCE]:
        cand = cand.operation
        if cand.name != "stablehlo.while":
            continue
        other = static_trip_count(cand)
        if other is None or other.trips != info.trips or not is_pure(cand):
            continue
        if any(depends_on(v, op) for v in list(cand.operands) + captured_values(cand)):
            continue
        return cand.opview
    return None


#: How far (in ops of the block) a second loop to fuse with is looked for.
MAX_FUSE_DISTANCE = 200


@register
class WhileFuse(Pattern):
    """while_A{a}, while_B{b} independent, same trip count -> while{a; b}: one loop runs both
    bodies (loop fusion), so XLA can fuse across them and runs one loop instead of two."""

    root = "stablehlo.while"

    def match(self, op):
        other = _fusable_partner(op)
        if other is None:
            return None
        return _loop_match(op, roots=list(op.results) + list(other.results), other=other,
                           other_inits=list(other.operands), other_captured=captured_values(other))

    def rewrite(self, b, m):
        env_a = _env(m)
        env_b = dict(zip(captured_values(m.other), m.other_captured))
        n = len(m.inits)
        body_b = m.other.operation.regions[1].blocks[0]

        def body(bb, args):
            return bb.inline(_body_block(m), args[:n], env_a) + bb.inline(body_b, args[n:], env_b)

        # Equal trip counts: the first loop's condition decides for both.
        return b.while_(list(m.inits) + list(m.other_inits),
                        lambda bb, args: bb.inline(_cond_block(m), args[:n], env_a)[0], body)


def _independent_groups(op) -> tuple[list[int], list[list[int]]] | None:
    """(shared, groups): the carried values every copy of the loop carries (what the condition
    reads, i.e. the counter, and values passed through unchanged) and the groups of the others
    that never read each other in the body; None for a side-effecting body or a condition that
    reads more than a self-contained counter."""
    if not is_pure(op):
        return None
    n = len(op.operands)
    with FlatBody(op) as body:
        reads = _reads(body)
        passed = {j for j, (a, r) in enumerate(zip(body.args, body.results)) if a == r}
    cond = _cond_uses(op)
    if any(not reads[j] <= cond | passed for j in cond):
        return None
    shared = cond | passed
    parent = list(range(n))

    def root(j):
        while parent[j] != j:
            j = parent[j]
        return j

    for j in range(n):
        if j not in shared:
            for k in reads[j] - shared:
                parent[root(k)] = root(j)
    groups: dict[int, list[int]] = {}
    for j in range(n):
        if j not in shared:
            groups.setdefault(root(j), []).append(j)
    return sorted(shared), list(groups.values())


@register
class WhileSplit(Pattern):
    """while(i, a, b){a' = f(i, a); b' = g(i, b)} -> while(i, a){a' = f(i, a)}, while(i, b){b' = g(i, b)}:
    carried values that never read each other go into loops of their own (loop fission), each
    with its own copy of the counter; the converse of while_fuse."""

    root = "stablehlo.while"

    def match(self, op):
        found = _independent_groups(op)
        if found is None:
            return None
        shared, groups = found
        used = [g for g in groups if any(next(iter(op.results[j].uses), None) is not None for j in g)]
        if len(used) < 2:
            return None  # splitting off only unused values: while_drop_dead_carry's job
        for g in groups:  # unused groups ride along with the first used one
            if g not in used:
                used[0] = used[0] + g
        return _loop_match(op, shared=shared, groups=used)

    def rewrite(self, b, m):
        out = {}
        for group in m.groups:
            loop = _subset_loop(b, m, sorted(m.shared + group))
            out.update({j: v for j, v in loop.items() if j in group or j not in out})
        return [out[j] for j in range(len(m.inits))]
