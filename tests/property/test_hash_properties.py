"""Properties of the DAG hash (HloEnv's HloDagHash), checked with hypothesis.

Programs come from three places: random programs drawn from `shlo_env.testing.random_programs`
(hypothesis strategies), the example suite, and a few programs with nested regions (while
loops, reductions, scans), calls and in-memory-built custom calls. For each, the hash must be

- equal for a re-printed (with or without locations), re-parsed, bytecode, SSA-renamed,
  op-reordered (in every block, nested regions included), or call-inlined copy, and for one
  with a dead side-effect-free op added;
- different when any attribute, any constant value (one element, one ulp), any result type,
  any edge (an operand rewired to a structurally different value), an op's name, or anything
  inside a nested region changes;
- the same in another process (another PYTHONHASHSEED) and on every machine (a pinned value).
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from jaxlib.mlir import ir

import shlo_env as se
from shlo_env.ir import program as program_module
from shlo_env.bench import examples
from shlo_env.rewrite.driver import apply, augment, list_alternatives
from shlo_env.ir.hashing import _Hasher
from shlo_env.ir.program import ir_scope
from shlo_env.testing.random_programs import programs as random_programs

SETTINGS = dict(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


# --- programs -----------------------------------------------------------------------------------

def while_loop(x, w):
    return jax.lax.fori_loop(0, 3, lambda i, h: jnp.tanh(h @ w) + jnp.sum(h) * 0.5, x)


def scan_with_reduce(x):
    def step(c, row):
        return c + jnp.max(row) * 2.0, jnp.cumsum(row)
    return jax.lax.scan(step, jnp.float32(0), x)


def cond_program(p, x):
    return jax.lax.cond(p > 0, lambda v: v * 2.0, lambda v: v - 1.0, x)


@jax.jit
def _helper(x):
    return jnp.sin(x) * 2.0


def with_calls(x, y):
    return _helper(x) + _helper(y)


def cholesky(a):
    return jnp.linalg.cholesky(a @ a.T + 4.0 * jnp.eye(a.shape[0], dtype=a.dtype))


def _nested_programs():
    f = np.float32
    x4 = np.arange(16, dtype=f).reshape(4, 4) / 16
    return [
        se.lower(while_loop, x4, x4),
        se.lower(scan_with_reduce, x4),
        se.lower(cond_program, np.float32(1.0), x4),
        se.lower(with_calls, x4, x4),
        se.lower(cholesky, x4),  # a lapack custom_call built in memory with default-valued attributes
        se.lower(examples.mlp_loop, *examples.suite(["mlp_loop"])[0].args()),
    ]


def _suite_programs():
    return [se.lower(ex.fn, *ex.args()) for ex in examples.suite()]


NESTED = _nested_programs()
SUITE = _suite_programs()
FIXED = NESTED + SUITE

fixed_programs = st.sampled_from(FIXED)
drawn_programs = random_programs(max_ops=8)
any_program = st.one_of(drawn_programs, fixed_programs)


# --- helpers ------------------------------------------------------------------------------------

def all_ops(program) -> list[ir.Operation]:
    """Every op in main, nested regions included (not main's terminator)."""
    out = []

    def walk(block):
        for o in block.operations:
            o = o.operation
            out.append(o)
            for r in o.regions:
                for b in r.blocks:
                    walk(b)

    walk(program.body)
    return out[:-1] if out and out[-1].name == "func.return" else out


def _op(x):
    """An Operation for an OpView/Operation, None for anything else (a Block, ...)."""
    if isinstance(x, ir.OpView):
        return x.operation
    return x if isinstance(x, ir.Operation) else None


def live(program) -> set:
    """Ops whose results reach main's return (or an op without results), nested ones included."""
    keep: set = set()
    ops = all_ops(program)
    root_values = [v for o in [o.operation for o in program.body.operations][-1:] for v in o.operands]
    stack = [_op(v.owner) for v in root_values if _op(v.owner) is not None]
    parents = {}
    for o in ops:
        for r in o.regions:
            for b in r.blocks:
                for inner in b.operations:
                    parents[inner.operation] = o
    while stack:
        op = stack.pop()
        if op in keep:
            continue
        keep.add(op)
        for v in op.operands:
            if _op(v.owner) is not None:
                stack.append(_op(v.owner))
        for r in op.regions:
            for b in r.blocks:
                for inner in b.operations:
                    stack.append(inner.operation)
        if op in parents:
            stack.append(parents[op])
    return keep


def reorder(program, seed):
    """A copy with the ops of every block (nested ones too) in a random topological order."""
    q = program.clone()
    rng = random.Random(seed)
    with ir_scope():
        _reorder_block(q.body, rng)
    return q


def _reorder_block(block, rng):
    ops = [o.operation for o in block.operations]
    for op in ops:
        for r in op.regions:
            for b in r.blocks:
                _reorder_block(b, rng)
    body, term = ops[:-1], ops[-1]

    def defined_by(v):
        # the op of this block that defines v, or the op of this block whose region defines it
        owner = _op(v.owner)
        if owner is None:  # a block argument: find the op that owns the block
            owner = _op(v.owner.owner)
        while owner is not None:
            if owner in index:
                return owner
            owner = _op(owner.parent)
        return None

    index = {op: i for i, op in enumerate(body)}
    deps = {}
    for op in body:
        used = set()
        for inner in [op] + _nested(op):
            for v in inner.operands:
                d = defined_by(v)
                if d is not None and d != op:
                    used.add(d)
        deps[op] = used
    done, order = set(), []
    while len(order) < len(body):
        ready = [op for op in body if op not in done and deps[op] <= done]
        pick = rng.choice(ready)
        done.add(pick)
        order.append(pick)
    for op in order:
        op.move_before(term)


def _nested(op):
    out = []
    for r in op.regions:
        for b in r.blocks:
            for o in b.operations:
                out.append(o.operation)
                out += _nested(o.operation)
    return out


def perturbed(attr: ir.Attribute) -> ir.Attribute | None:
    """The same constant with one element moved by one ulp (or by one / flipped), or None."""
    try:
        dense = ir.DenseElementsAttr(attr)
    except (ValueError, TypeError):
        return None
    t = ir.RankedTensorType(dense.type)
    try:
        arr = np.array(dense)
    except Exception:  # noqa: BLE001 - element types numpy cannot view
        return None
    shape = tuple(t.shape)
    arr = np.broadcast_to(arr.reshape(-1)[:1] if dense.is_splat else arr, shape).copy() if shape else arr.copy()
    flat = arr.reshape(-1)
    if flat.size == 0:
        return None
    if arr.dtype == np.bool_:
        flat[0] = not flat[0]
    elif np.issubdtype(arr.dtype, np.floating):
        flat[0] = np.nextafter(flat[0], np.inf if flat[0] < 1 else -np.inf, dtype=arr.dtype)
    elif np.issubdtype(arr.dtype, np.integer):
        flat[0] = flat[0] + 1 if flat[0] < np.iinfo(arr.dtype).max else flat[0] - 1
    else:
        return None
    try:
        return ir.DenseElementsAttr.get(flat.reshape(shape), type=t)
    except Exception:  # noqa: BLE001
        return None


def value_hash(program, value) -> int:
    h = _Hasher(program.module)
    h.block(program.body, 0)
    return h.values[value]


# --- equal for copies ---------------------------------------------------------------------------

@settings(max_examples=30, **SETTINGS)
@given(any_program)
def test_equal_for_reprinted_reparsed_and_bytecode_copies(p):
    h = se.dag_hash(p)
    assert se.dag_hash(se.load(p.text())) == h
    assert se.dag_hash(se.load(p.text(debug_info=True))) == h  # locations do not count
    assert se.dag_hash(se.load(p.bytecode())) == h
    assert se.dag_hash(p.clone()) == h


@settings(max_examples=20, **SETTINGS)
@given(any_program)
def test_equal_whatever_the_ssa_names(p):
    text = p.text()
    renamed = re.sub(r"%([A-Za-z_][\w.]*|\d+)", lambda m: f"%v_{m.group(1)}_renamed", text)
    assume(renamed != text)
    assert se.dag_hash(se.load(renamed)) == se.dag_hash(p)


@settings(max_examples=40, **SETTINGS)
@given(any_program, st.integers(0, 10_000))
def test_equal_for_op_reordered_copies_nested_blocks_included(p, seed):
    q = reorder(p, seed)
    assert q.module.operation.verify()
    assert se.dag_hash(q) == se.dag_hash(p)


def test_reorder_moves_ops_inside_nested_regions():
    """The reordering helper itself does something to nested blocks (else the test above is void)."""
    p = NESTED[0]
    moved = 0
    for seed in range(10):
        q = reorder(p, seed)
        moved += q.text() != p.text()
    assert moved >= 5


@settings(max_examples=25, **SETTINGS)
@given(drawn_programs, st.integers(0, 2**16))
def test_equal_after_rewrites_and_round_trip(p, seed):
    """Programs built by patterns in memory hash like their printed-and-parsed copies."""
    aug = augment(p)
    alts = list_alternatives(aug)
    assume(alts)
    rng = random.Random(seed)
    q = apply(aug, [rng.randrange(a.num_choices) for a in alts])
    assert se.dag_hash(se.load(q.text())) == se.dag_hash(q)
    assert se.dag_hash(se.load(q.bytecode())) == se.dag_hash(q)


def test_default_valued_attributes_spelled_out_or_left_out_hash_the_same():
    """jax builds lapack custom calls with api_version = 1 etc. spelled out; the printer drops
    them. Both must hash the same (this failed before: a corpus program and its saved text)."""
    p = NESTED[4]
    text = p.text()
    assert "lapack" in text
    with ir_scope():
        call = next(o for o in all_ops(p) if o.name == "stablehlo.custom_call")
        explicit = {n for n in call.attributes}
    q = se.load(text)
    with ir_scope():
        call_q = next(o for o in all_ops(q) if o.name == "stablehlo.custom_call")
        parsed = {n for n in call_q.attributes}
    assert explicit - parsed, "the lowered op should spell out defaults the parsed one leaves out"
    assert se.dag_hash(q) == se.dag_hash(p)


def test_calls_hash_as_if_inlined():
    x = np.ones((3,), np.float32)
    assert se.dag_hash(se.lower(with_calls, x, x, inline=False)) == se.dag_hash(se.lower(with_calls, x, x))
    a = np.eye(4, dtype=np.float32)
    for f in (lambda m: jnp.linalg.slogdet(m)[0], lambda m: jnp.linalg.solve(m, m), cholesky):
        assert se.dag_hash(se.lower(f, a, inline=False)) == se.dag_hash(se.lower(f, a))


CALLS_DEAD_EFFECT = """
func.func public @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = func.call @f(%a) : (tensor<2xf32>) -> tensor<2xf32>
  return %a : tensor<2xf32>
}
func.func private @f(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.custom_call @side_effect(%x) {has_side_effect = true} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
"""

IDENTITY = """
func.func public @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  return %a : tensor<2xf32>
}
"""


def test_dead_ops_count_only_when_impure():
    base = se.load(IDENTITY)
    with_pure_dead = se.load(IDENTITY.replace("return", "%0 = stablehlo.sine %a : tensor<2xf32>\n  return"))
    assert se.dag_hash(with_pure_dead) == se.dag_hash(base)
    inlined = se.load(CALLS_DEAD_EFFECT)  # inlining keeps the dead custom_call
    assert "side_effect" in inlined.text()
    kept_call = program_module.program_from_module(program_module.parse_module(CALLS_DEAD_EFFECT), inline=False)
    assert se.dag_hash(inlined) == se.dag_hash(kept_call) != se.dag_hash(base)


# --- different when something changes ----------------------------------------------------------

@settings(max_examples=30, **SETTINGS)
@given(any_program, st.data())
def test_different_when_any_attribute_changes(p, data):
    q = p.clone()
    with ir_scope():
        keep = live(q)
        candidates = [(op, name) for op in all_ops(q) if op in keep for name in op.attributes]
        assume(candidates)
        op, name = data.draw(st.sampled_from(candidates))
        op.attributes[name] = ir.StringAttr.get(f"changed {name}")
    assert se.dag_hash(q) != se.dag_hash(p)


@settings(max_examples=30, **SETTINGS)
@given(any_program, st.data())
def test_different_when_a_constant_value_changes_by_one_ulp(p, data):
    q = p.clone()
    with ir_scope():
        keep = live(q)
        consts = [op for op in all_ops(q) if op.name == "stablehlo.constant" and op in keep]
        assume(consts)
        op = data.draw(st.sampled_from(consts))
        new = perturbed(op.attributes["value"])
        assume(new is not None)
        op.attributes["value"] = new
    assert se.dag_hash(q) != se.dag_hash(p)


@settings(max_examples=30, **SETTINGS)
@given(any_program, st.data())
def test_different_when_an_edge_changes(p, data):
    """Rewire one operand of a live op to another value of the same type (defined earlier in the
    same block) that computes something else: the hash must change."""
    q = p.clone()
    with ir_scope():
        keep = live(q)
        choices = []
        for block_op in [q.main] + [o for o in all_ops(q) if o.regions]:
            for region in block_op.regions:
                for block in region.blocks:
                    seen = list(block.arguments)
                    for op in [o.operation for o in block.operations]:
                        if op in keep and op.name != "func.return":
                            for i, v in enumerate(op.operands):
                                others = [w for w in seen if w.type == v.type and w != v]
                                if others:
                                    choices.append((op, i, others))
                        seen += list(op.results)
        assume(choices)
        op, i, others = data.draw(st.sampled_from(choices))
        w = data.draw(st.sampled_from(others))
        assume(value_hash(q, w) != value_hash(q, op.operands[i]))
        op.operands[i] = w
    assert se.dag_hash(q) != se.dag_hash(p)


@settings(max_examples=30, **SETTINGS)
@given(any_program, st.data())
def test_different_when_a_result_type_changes(p, data):
    q = p.clone()
    with ir_scope():
        keep = live(q)
        results = [(op, r) for op in all_ops(q) if op in keep for r in op.results
                   if isinstance(r.type, ir.RankedTensorType) or ir.RankedTensorType.isinstance(r.type)]
        assume(results)
        op, r = data.draw(st.sampled_from(results))
        t = ir.RankedTensorType(r.type)
        r.set_type(ir.RankedTensorType.get(list(t.shape) + [1], t.element_type))
    assert se.dag_hash(q) != se.dag_hash(p)


@settings(max_examples=30, **SETTINGS)
@given(drawn_programs, st.data())
def test_different_when_an_op_changes_kind(p, data):
    text = p.text()
    swaps = [(a, b) for a, b in [("stablehlo.add ", "stablehlo.multiply "), ("stablehlo.multiply ", "stablehlo.add "),
                                 ("stablehlo.maximum ", "stablehlo.minimum "), ("stablehlo.tanh ", "stablehlo.sine "),
                                 ("stablehlo.exponential ", "stablehlo.log ")] if a in text]
    assume(swaps)
    a, b = data.draw(st.sampled_from(swaps))
    n = text.count(a)
    k = data.draw(st.integers(0, n - 1))
    parts = text.split(a)
    changed = a.join(parts[:k + 1]) + b + a.join(parts[k + 1:])
    q = se.load(changed)
    with ir_scope():
        keep = live(q)
        assume(all(op in keep for op in all_ops(q) if op.name == b.strip()))
    assert se.dag_hash(q) != se.dag_hash(p)


@pytest.mark.parametrize("program", NESTED[:3], ids=["while", "scan", "cond"])
def test_different_when_anything_in_a_nested_region_changes(program):
    """Every op inside a nested region: change one attribute, or one constant's value."""
    h = se.dag_hash(program)
    with ir_scope():
        nested = [op for op in all_ops(program) for op in _nested(op) if op.name != "stablehlo.return"]
    assert nested
    checked = 0
    for i in range(len(nested)):
        q = program.clone()
        with ir_scope():
            op = [op for op in all_ops(q) for op in _nested(op) if op.name != "stablehlo.return"][i]
            if op.name == "stablehlo.constant":
                new = perturbed(op.attributes["value"])
                if new is None:
                    continue
                op.attributes["value"] = new
            else:
                op.attributes["hash_probe"] = ir.UnitAttr.get()
        assert se.dag_hash(q) != h, str(op)
        checked += 1
    assert checked >= 5


@settings(max_examples=20, **SETTINGS)
@given(st.integers(1, 6), st.integers(1, 6))
def test_different_when_a_shape_changes(m, n):
    f = examples.matmul_chain
    a = se.lower(f, np.ones((m, n), np.float32), np.ones((n, n), np.float32), np.ones((n, 1), np.float32))
    b = se.lower(f, np.ones((m + 1, n), np.float32), np.ones((n, n), np.float32), np.ones((n, 1), np.float32))
    assert se.dag_hash(a) != se.dag_hash(b)


def _mutations(text):
    """Small textual edits, each changing exactly one constant, attribute or edge."""
    out = []
    if "dense<1.000000e+00>" in text:
        out.append(text.replace("dense<1.000000e+00>", "dense<1.500000e+00>", 1))
    if "dense<2.000000e+00>" in text:
        out.append(text.replace("dense<2.000000e+00>", "dense<2.500000e+00>", 1))
    if "dims = [1, 0]" in text:
        out.append(text.replace("dims = [1, 0]", "dims = [0, 1]", 1))
    if "stablehlo.subtract %" in text:
        i = text.index("stablehlo.subtract %")
        line_end = text.index(" :", i)
        a, b = text[i + len("stablehlo.subtract "):line_end].split(", ")
        out.append(text[:i] + f"stablehlo.subtract {b}, {a}" + text[line_end:])
    if "across dimensions = [0]" in text:
        out.append(text.replace("stablehlo.maximum across", "stablehlo.minimum across", 1)
                   if "maximum across" in text else text.replace("stablehlo.add across", "stablehlo.multiply across", 1))
    return out


def test_different_for_textual_edits_of_constants_attributes_and_edges():
    changed = 0
    for p in FIXED:
        text = p.text()
        for mutated in _mutations(text):
            if mutated == text:
                continue
            try:
                q = se.load(mutated)
            except se.ProgramError:
                continue  # an edit that does not type-check is not a program
            assert se.dag_hash(q) != se.dag_hash(p), mutated
            changed += 1
    assert changed >= 5


# --- stable across processes and machines ------------------------------------------------------

def test_stable_across_processes(tmp_path):
    hashes = {}
    for i, p in enumerate(FIXED):
        path = tmp_path / f"p{i}.mlirbc"
        se.save(p, path)
        hashes[str(path)] = se.dag_hash(p)
    code = ("import sys, json, shlo_env as se; "
            "print(json.dumps({p: se.dag_hash(se.load(p)) for p in sys.argv[1:]}))")
    for seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run([sys.executable, "-c", code, *hashes], capture_output=True, text=True,
                             check=True, env=env)
        assert json.loads(out.stdout.strip().splitlines()[-1]) == hashes


PINNED = """
func.func public @main(%x: tensor<4x4xf32>, %y: tensor<4x4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.dot_general %x, %y, contracting_dims = [1] x [0] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %c = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %1 = stablehlo.reduce(%0 init: %c) applies stablehlo.add across dimensions = [1] : (tensor<4x4xf32>, tensor<f32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
"""


def test_pinned_value_is_the_same_on_every_machine():
    """xxh3 over a fixed encoding: a change here changes every stored hash (corpus indexes,
    replay records), so it must be deliberate."""
    assert se.dag_hash(se.load(PINNED)) == PINNED_HASH


PINNED_HASH = "45947dd333c408b3"


# Hashes key the search cache and the results database across versions: these are the values
# of stored programs (a while loop and a scan, a train step, a science program, a zoo model).
STORED_HASHES = {
    ("corpus", "linen_mlp_train"): "88d7fc044274a73c",
    ("corpus", "linen_transformer_lm"): "ba9cb5f0aee40a4b",
    ("corpus", "kalman_filter_scan"): "e837369a2e70a7f5",
    ("science", "diffrax_ou_sde_heun"): "b1f841e85182cacf",
    ("zoo", "hf_vit_cls_infer"): "fb06ac6e52eddac6",
}


def test_hash_values_of_stored_programs_do_not_change():
    from shlo_env.bench.datasets import load_items
    from shlo_env.ir.hashing import dag_hash

    got = {}
    for dataset in sorted({d for d, _ in STORED_HASHES}):
        for item in load_items(dataset, limit=None):
            if (dataset, item.name) in STORED_HASHES:
                got[dataset, item.name] = dag_hash(item.program)
    assert got == STORED_HASHES
