"""Properties of the DAG hash (HloEnv's HloDagHash)."""

import random
import subprocess
import sys

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import shlo_env as se
from shlo_env import examples
from shlo_env.import_ import ir_scope

SMALL = [
    lambda x, y: (x - y) * jnp_tanh(x),
    lambda x, y: x @ y.T + 1.0,
    lambda x, y: (x[:, :2] - y[:, 1:3], (x * 2.0).T),
]


def jnp_tanh(x):
    import jax.numpy as jnp

    return jnp.tanh(x)


def _programs():
    out = [se.lower(ex.fn, *ex.args()) for ex in examples.suite()]
    a = np.ones((4, 4), np.float32)
    out += [se.lower(f, a, a) for f in SMALL]
    return out


PROGRAMS = _programs()
programs = st.sampled_from(PROGRAMS)


def reorder(program, seed):
    """A copy of `program` with its independent ops in a random topological order."""
    q = program.clone()
    rng = random.Random(seed)
    with ir_scope():
        ops = [o.operation for o in q.body.operations][:-1]  # keep the return last
        ret = [o.operation for o in q.body.operations][-1]
        produced_by = {r: op for op in ops for r in op.results}
        deps = {op: {produced_by[v] for v in op.operands if v in produced_by} for op in ops}
        done, order = set(), []
        while len(order) < len(ops):
            ready = [op for op in ops if op not in done and deps[op] <= done]
            pick = rng.choice(ready)
            done.add(pick)
            order.append(pick)
        for op in order:
            op.move_before(ret)
    return q


@settings(max_examples=40, deadline=None, derandomize=True)
@given(programs)
def test_equal_for_reprinted_and_reparsed_copies(p):
    h = se.dag_hash(p)
    assert se.dag_hash(se.load(p.text())) == h
    assert se.dag_hash(se.load(p.text(debug_info=True))) == h  # locations do not count
    assert se.dag_hash(se.load(p.bytecode())) == h


@settings(max_examples=40, deadline=None, derandomize=True)
@given(programs, st.integers(0, 10_000))
def test_equal_for_op_reordered_copies(p, seed):
    q = reorder(p, seed)
    assert q.module.operation.verify()
    assert se.dag_hash(q) == se.dag_hash(p)


def _mutations(text):
    """Small textual edits, each changing exactly one constant, attribute, shape or edge."""
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


def test_different_when_a_constant_attribute_or_edge_changes():
    changed = 0
    for p in PROGRAMS:
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


@settings(max_examples=20, deadline=None, derandomize=True)
@given(st.integers(1, 6), st.integers(1, 6))
def test_different_when_a_shape_changes(m, n):
    f = examples.matmul_chain
    a = se.lower(f, np.ones((m, n), np.float32), np.ones((n, n), np.float32), np.ones((n, 1), np.float32))
    b = se.lower(f, np.ones((m + 1, n), np.float32), np.ones((n, n), np.float32), np.ones((n, 1), np.float32))
    assert se.dag_hash(a) != se.dag_hash(b)


def test_stable_across_processes(tmp_path):
    hashes = {}
    for i, p in enumerate(PROGRAMS):
        path = tmp_path / f"p{i}.mlirbc"
        se.save(p, path)
        hashes[str(path)] = se.dag_hash(p)
    code = ("import sys, json, shlo_env as se; "
            "print(json.dumps({p: se.dag_hash(se.load(p)) for p in sys.argv[1:]}))")
    out = subprocess.run([sys.executable, "-c", code, *hashes], capture_output=True, text=True, check=True)
    import json

    assert json.loads(out.stdout.strip().splitlines()[-1]) == hashes
