"""augment's per-pass index answers as MLIR does, its order bookkeeping agrees with MLIR's, and
augment's work grows linearly with the program (counted, not timed)."""

import random
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxlib.mlir import ir

import shlo_env as se
from shlo_env.rewrite import driver
from shlo_env.ir.program import ir_scope
from shlo_env.patterns import batching, match_cache
from shlo_env.patterns import matching as base


def _layer(x, w, v):
    q = x @ w
    att = jax.nn.softmax(q @ q.T, axis=-1)  # q feeds two dots: multi-root matches
    return x + jnp.tanh(att @ q) @ v


def _stack(x, params):
    for w, v in params:
        x = _layer(x, w, v)
    return x


def _params(layers, dim=8):
    rng = np.random.default_rng(0)
    return [(rng.standard_normal((dim, dim)).astype(np.float32),
             rng.standard_normal((dim, dim)).astype(np.float32)) for _ in range(layers)]


def _looped(x, w):
    def body(i, c):
        return jnp.tanh(c @ w) + c * 2.0 + x  # captures x and w from outside the loop
    return jax.lax.fori_loop(0, 3, body, x) + jnp.exp(x) * jnp.exp(x)


def _programs():
    x = np.ones((4, 8), np.float32)
    yield se.lower(_stack, x, _params(3))
    yield se.lower(_looped, x, np.eye(8, dtype=np.float32))


def _facts(ops, i):
    """What the matching helpers say about op i (some questions relative to earlier ops)."""
    op = ops[i]
    firsts = ops[max(0, i - 30):i + 1:5]
    return (
        base.related_ops(op), base.related_ops(op, budget=256), base.related_ops(op, up=1, down=0),
        base.related_ops(op, name=op.name), base.related_ops(op, budget=256, after=True),
        [base.ancestors_since(op.operands, f, 4) for f in firsts],
        [base.ancestors_since(op.operands, f) for f in firsts],
        [base.operand_ancestors_since(op, f, 4) for f in firsts],
        [base.depends_on(v, f) for v in op.operands for f in firsts],
        [base.users(v) for v in op.results], [base.single_use(v) for v in op.results],
        [base.producer(v) for v in op.operands], base.producer_names(op), op.name, base.is_elementwise(op),
        base.attr_strings(op),
        [match_cache.is_before(f, op) for f in firsts if f.block == op.block],
    )


@pytest.mark.parametrize("program", list(_programs()), ids=["stack", "loop"])
def test_helpers_answer_the_same_with_the_index(program):
    with ir_scope():
        ops = list(driver.walk_ops(program.body))
        direct = [_facts(ops, i) for i in range(len(ops))]
        with match_cache.indexed(program.body) as index:
            assert len(index.ops) == len(ops)
            cached = [_facts(ops, i) for i in range(len(ops))]
            again = [_facts(index.ops, i) for i in range(len(ops))]  # the objects the index holds
    assert cached == direct
    assert again == direct


@pytest.mark.parametrize("program", list(_programs()), ids=["stack", "loop"])
def test_related_ops_stops_at_its_budget_as_mlir_does(program):
    """Small budgets cut the search off while it gathers users, and at each later level; a
    search kept from a larger or smaller budget answers only where it may."""
    def searches(ops):
        return [base.related_ops(op, up=up, down=down, budget=budget)
                for op in ops for up, down in ((1, 1), (2, 3), (3, 2)) for budget in (0, 1, 2, 5, 9, 2, 0, 64)]

    with ir_scope():
        ops = list(driver.walk_ops(program.body))
        direct = searches(ops)
        with match_cache.indexed(program.body):
            cached = searches(ops)
    assert any(len(found) == 5 for found in direct)  # budgets are reached
    assert cached == direct


def test_index_is_only_active_inside_the_block():
    program = next(_programs())
    with ir_scope():
        with match_cache.indexed(program.body) as index:
            assert match_cache.find(index.ops[0]) == (index, 0)
        assert match_cache.find(index.ops[0]) is None


def test_order_agrees_with_mlir_after_inserts_and_moves():
    program = se.lower(_stack, np.ones((4, 8), np.float32), _params(2))
    rnd = random.Random(0)
    with ir_scope():
        block = program.body
        order = driver._Order(block)
        for step in range(60):
            ops = [o.operation for o in block.operations][:-1]  # not the terminator
            anchor = rnd.choice(ops)
            if step % 2:
                new = ir.Operation.create("shlo_env.marker", ip=ir.InsertionPoint.after(anchor))
                order.inserted_after(new, anchor)
            else:
                moved = rnd.choice([o for o in ops if o != anchor])
                moved.move_after(anchor)
                order.removed(moved)
                order.inserted_after(moved, anchor)
            ops = [o.operation for o in block.operations]
            picks = rnd.sample(ops, 8)
            for a in picks:
                for b in picks:
                    if a != b:
                        assert order.is_before(a, b) == a.is_before_in_block(b)
            assert order.sort(reversed(picks)) == sorted(picks, key=ops.index)


def test_order_renumbers_when_a_gap_runs_out():
    program = se.lower(_stack, np.ones((4, 8), np.float32), _params(1))
    with ir_scope():
        block = program.body
        order = driver._Order(block)
        anchor = [o.operation for o in block.operations][3]
        for _ in range(80):  # each halves the gap after `anchor`: floats run out after about 50
            new = ir.Operation.create("shlo_env.marker", ip=ir.InsertionPoint.after(anchor))
            order.inserted_after(new, anchor)
        ops = [o.operation for o in block.operations]
        assert order.sort(reversed(ops)) == ops
        assert len(set(order.key.values())) == len(order.key)


def _count_calls(fn) -> int:
    """Python function calls made while running fn()."""
    calls = 0

    def profile(frame, event, arg):
        nonlocal calls
        if event == "call":
            calls += 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls


def _shared_stack(layers):
    import os
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    try:
        import ir_scale
    finally:
        sys.path.pop(0)
    return se.lower(ir_scale.shared_stack, *ir_scale.make(layers))


@pytest.mark.slow
def test_augment_work_grows_linearly_with_depth(monkeypatch):
    """Doubling the depth of a stack with shared operands (multi-root matches whose users move)
    about doubles augment's work: Python calls counted, not time. Past the patterns' fixed
    search windows (about 20 layers) the ratio is about 2; quadratic work gives about 4."""
    patterns = se.patterns.all_patterns()
    small, large = _shared_stack(24), _shared_stack(48)
    assert 2 * small.num_ops() - 10 < large.num_ops() < 2 * small.num_ops() + 10

    # MLIR renumbers a whole block at the next order query after any op in it moves: once
    # augment has moved an op it must not ask MLIR for order again (that was quadratic).
    moves, late_queries = [0], [0]
    move_after, is_before = ir.Operation.move_after, ir.Operation.is_before_in_block

    def counted_move(self, other):
        moves[0] += 1
        return move_after(self, other)

    def counted_query(self, other):
        late_queries[0] += moves[0] > 0
        return is_before(self, other)

    monkeypatch.setattr(ir.Operation, "move_after", counted_move)
    monkeypatch.setattr(ir.Operation, "is_before_in_block", counted_query)
    calls_small = _count_calls(lambda: se.augment(small, patterns))
    assert moves[0] > 0, "the stack should make augment move users after a merged op"
    assert late_queries[0] == 0
    calls_large = _count_calls(lambda: se.augment(large, patterns))
    assert calls_large / calls_small < 2.4


def test_declared_operand_preconditions_hold_wherever_a_pattern_matches():
    """`Pattern.operand_from` lets the driver skip `match`; each declaration must be a necessary
    condition: wherever the pattern matches, an operand is made by one of the declared ops."""
    from shlo_env import corpus
    from shlo_env.patterns.base import all_patterns

    declared = [p for p in all_patterns() if p.operand_producers()]
    programs = [corpus.load(e.uri) for e in corpus.entries(corpus.CORPUS)] + list(_programs())
    checked: dict[str, int] = {}
    with ir_scope():
        for program in programs:
            with match_cache.indexed(program.body) as index:
                for i, (op, name) in enumerate(zip(index.ops, index.names)):
                    made = index.operand_producers(i)
                    direct = {v.owner.name for v in op.operands if isinstance(v, ir.OpResult)}
                    assert made == direct
                    for p in declared:
                        if name in p.roots() and p.match(match_cache.view(op)) is not None:
                            assert p.operand_producers() & made, (p.name, str(op))
                            checked[p.name] = checked.get(p.name, 0) + 1
    assert len(checked) >= 25, sorted(checked)  # the corpus exercises most declarations


def _matmul(found):
    return None if found is None else (found[0], found[1], found[2].operation)


@pytest.mark.parametrize("program", list(_programs()), ids=["stack", "loop"])
def test_remembered_facts_are_what_mlir_says(program):
    """static_shape, splat_value, reduce_body, i64s and matmul_operands, remembered per op or
    value while indexed; batching's attribute keys and element type names, per op and per type."""
    def facts(ops):
        out = []
        for op in ops:
            out.append(([base.static_shape(v) for v in op.operands], [base.splat_value(v) for v in op.operands],
                        base.reduce_body(op), base.i64s(op, "dimensions") if op.name == "stablehlo.reduce" else None,
                        batching._attr_key(op), [batching._elem_name(v) for v in op.results],
                        [_matmul(base.matmul_operands(v)) for v in op.results]))
        return out

    with ir_scope():
        ops = list(driver.walk_ops(program.body))
        direct = facts(ops)
        with match_cache.indexed(program.body) as index:
            cached, again = facts(index.ops), facts(index.ops)
    assert any(s is not None for r in direct for s in r[1])  # (the stack's softmax has reduces)
    assert any(m is not None for r in direct for m in r[6])
    assert cached == direct and again == direct
