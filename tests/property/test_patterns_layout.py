"""Targeted property tests of layout motion (shlo_env/patterns/layout.py), and a check that the
greedy loop stops when two inverse movers undo each other."""

import math

import jax.numpy as jnp
import pytest
from hypothesis import strategies as st
from jax import lax

from pattern_programs import DIM, ELEMENTWISE, permuted_shapes, programs, shapes
from shlo_env.rewrite import driver
from shlo_env.ir.hashing import dag_hash
from shlo_env.ir.program import lower
from shlo_env.patterns import Numerics
from shlo_env.patterns import layout as L
from shlo_env.testing import check_pattern


def _ew_through_transpose(draw):
    s, p = draw(permuted_shapes())
    f = draw(st.sampled_from(ELEMENTWISE))
    if draw(st.booleans()):
        return (lambda a, b: f(lax.transpose(a, p), lax.transpose(b, p))), [s, s]
    return (lambda a, b: f(lax.transpose(a, p), 1.5) + b), [s, tuple(s[i] for i in p)]


def _transpose_of_ew(draw):
    s, p = draw(permuted_shapes())
    f = draw(st.sampled_from(ELEMENTWISE))
    return (lambda a, b: lax.transpose(f(a, b), p)), [s, s]


def _ew_through_transpose_beside_dot(draw):
    m, k, n = draw(DIM), draw(DIM), draw(DIM)
    f = draw(st.sampled_from(ELEMENTWISE))
    return (lambda a, b, c: f((a @ b).T, c.T)), [(m, k), (k, n), (m, n)]


def _transpose_of_ew_beside_dot(draw):
    m, k, n = draw(st.integers(2, 4)), draw(DIM), draw(st.integers(2, 4))
    f = draw(st.sampled_from([jnp.add, jnp.multiply, jnp.maximum, lambda d, c: jnp.where(d > c, d, c)]))
    return (lambda a, b, c: f(a @ b, c).T), [(m, k), (k, n), (m, n)]


def _ew_through_reshape(draw):
    s = draw(shapes(1, 3))
    t = draw(st.sampled_from([(math.prod(s),), s[::-1], (1,) + s]))
    f = draw(st.sampled_from(ELEMENTWISE))
    if draw(st.booleans()):
        return (lambda a, b: f(a.reshape(t), b.reshape(t))), [s, s]
    return (lambda a, b: f(a.reshape(t), 0.25) * b), [s, t]


def _reshape_of_ew(draw):
    s = draw(shapes(1, 3))
    t = draw(st.sampled_from([(math.prod(s),), s[::-1], (1,) + s]))
    f = draw(st.sampled_from(ELEMENTWISE))
    return (lambda a, b: f(a, b).reshape(t)), [s, s]


@st.composite
def _broadcast(draw, min_rank=1):
    """(x shape, broadcast shape, broadcast dims): x's dims spread over a larger rank, some of
    them size 1 expanding."""
    s = draw(shapes(min_rank, 2))
    extra = draw(st.lists(DIM, min_size=1, max_size=2))
    rank = len(s) + len(extra)
    dims = sorted(draw(st.permutations(range(rank)))[:len(s)])
    out = list(extra)
    for d, n in zip(dims, s):
        out.insert(d, n)
    x = tuple(1 if draw(st.integers(0, 3)) == 0 else n for n in s)  # sometimes an expanding size-1 dim
    return x, tuple(out), dims


def _transpose_of_broadcast(draw):
    x, out, dims = draw(_broadcast())
    p = draw(st.permutations(range(len(out))))
    return (lambda a: jnp.tanh(lax.transpose(lax.broadcast_in_dim(a, out, dims), p))), [x]


def _broadcast_of_transpose(draw):
    x, out, dims = draw(_broadcast(min_rank=2))
    p = draw(st.permutations(range(len(x))).filter(lambda q: list(q) != sorted(q)))
    xt = tuple(x[i] for i in inverse_perm(p))  # transpose(xt, p) has shape x
    return (lambda a: lax.broadcast_in_dim(lax.transpose(a, p), out, dims) * 2.0), [xt]


def inverse_perm(p):
    return [p.index(i) for i in range(len(p))]


def _broadcast_of_unit_reshape(draw):
    s = draw(shapes(1, 2).filter(lambda t: 1 not in t))
    unit = draw(st.lists(st.integers(0, len(s)), min_size=1, max_size=2))  # where size-1 dims go
    t = list(s)
    for u in sorted(unit, reverse=True):
        t.insert(u, 1)
    full = tuple(draw(DIM) if n == 1 else n for n in t)
    return (lambda a, v: a * v.reshape(t)), [full, s]


def _transpose_of_reduce(draw):
    s = draw(shapes(3, 4))
    axis = draw(st.integers(0, len(s) - 1))
    rest = len(s) - 1
    p = draw(st.permutations(range(rest)).filter(lambda q: rest < 2 or list(q) != list(range(rest))))
    red = draw(st.sampled_from([jnp.sum, jnp.max]))
    return (lambda a: lax.transpose(red(a, axis=axis), p) + 1.0), [s]


def _reduce_of_unit_reshape(draw):
    s = draw(shapes(1, 2).filter(lambda t: 1 not in t))
    red = draw(st.sampled_from([jnp.sum, jnp.min]))
    if draw(st.booleans()):  # a sum over an added size-1 dim only (a bias gradient for batch 1)
        return (lambda a: red(a.reshape((1,) + s), axis=0) * 2.0), [s]
    return (lambda a: red(a.reshape(s + (1,)), axis=(0, len(s)))), [s]


def _concat_of_transposes(draw):
    s, p = draw(permuted_shapes())
    d = draw(st.integers(0, len(s) - 1))
    s2 = tuple(n + 1 if i == p[d] else n for i, n in enumerate(s))
    return (lambda a, b: jnp.concatenate([lax.transpose(a, p), lax.transpose(b, p)], axis=d)), [s, s2]


def _transpose_of_concat(draw):
    s, p = draw(permuted_shapes())
    d = draw(st.integers(0, len(s) - 1))
    s2 = tuple(n + 2 if i == d else n for i, n in enumerate(s))
    return (lambda a, b: lax.transpose(jnp.concatenate([a, b], axis=d), p) - 1.0), [s, s2]


CASES = {
    L.ElementwiseThroughTranspose: _ew_through_transpose,
    L.TransposeOfElementwise: _transpose_of_ew,
    L.ElementwiseThroughTransposeBesideDot: _ew_through_transpose_beside_dot,
    L.TransposeOfElementwiseBesideDot: _transpose_of_ew_beside_dot,
    L.ElementwiseThroughReshape: _ew_through_reshape,
    L.ReshapeOfElementwise: _reshape_of_ew,
    L.TransposeOfBroadcast: _transpose_of_broadcast,
    L.BroadcastOfTranspose: _broadcast_of_transpose,
    L.BroadcastOfUnitReshape: _broadcast_of_unit_reshape,
    L.TransposeOfReduce: _transpose_of_reduce,
    L.ReduceOfUnitReshape: _reduce_of_unit_reshape,
    L.ConcatOfTransposes: _concat_of_transposes,
    L.TransposeOfConcat: _transpose_of_concat,
}


@pytest.mark.parametrize("pattern", list(CASES), ids=lambda p: p.name)
def test_pattern(pattern):
    res = check_pattern(pattern, programs(CASES[pattern]), max_examples=50)
    assert res.num_alternatives >= 25, f"{pattern.name} fired on only {res.num_alternatives} of 50 programs"


def test_inverse_movers_converge_in_the_greedy_loop():
    """Sinking then hoisting a transpose returns to the original program: run_loop must stop at
    the repeated state instead of bouncing until max_steps."""
    p = [1, 0]
    prog = lower(lambda a, b: jnp.tanh(lax.transpose(a, p) + lax.transpose(b, p)), jnp.ones((2, 3)), jnp.ones((2, 3)))
    patterns = [L.ElementwiseThroughTranspose(), L.TransposeOfElementwise()]
    _, trace = driver.run_loop(prog, patterns, max_steps=20)
    assert 2 <= len(trace) < 20
    assert trace[-1].state_hash in {s.state_hash for s in trace[:-1]} | {dag_hash(prog)}


EXACT = [p for p in CASES if p.numerics == Numerics.EXACT]


@pytest.mark.parametrize("pattern", EXACT, ids=lambda p: p.name)
def test_exact_pattern_compiled_by_xla(pattern):
    """EXACT is a promise about what XLA runs: bitwise equal after XLA compiles both programs."""
    res = check_pattern(pattern, programs(CASES[pattern]), max_examples=20, backend="xla")
    assert res.num_alternatives >= 10


BESIDE_DOT = [  # a transpose each EXACT mover could move, but next to a dot_general
    (L.ElementwiseThroughTranspose, lambda a, b: jnp.tanh((a @ b).T) + 1.0),
    (L.TransposeOfElementwise, lambda a, b: jnp.tanh(a @ b).T + 1.0),
    (L.BroadcastOfTranspose, lambda a, b: lax.broadcast_in_dim((a @ b).T, (4, 4, 2), (1, 0)) * 2.0),
    (L.TransposeOfBroadcast, lambda a, b: lax.transpose(lax.broadcast_in_dim(a @ b, (4, 4, 2), (0, 1)), (2, 1, 0)) @ b),
    (L.ConcatOfTransposes, lambda a, b: jnp.concatenate([(a @ b).T, b.T], axis=0)),
    (L.TransposeOfConcat, lambda a, b: jnp.concatenate([a, b], axis=1).T @ a),
]


@pytest.mark.parametrize("pattern,fn", BESIDE_DOT, ids=[p.name for p, _ in BESIDE_DOT])
def test_exact_movers_leave_transposes_beside_dots(pattern, fn):
    """XLA folds a transpose next to a dot into the dot (another kernel and rounding), so the
    EXACT movers must not offer to add or remove one there."""
    prog = lower(fn, jnp.ones((4, 4)), jnp.ones((4, 4)))
    assert "dot_general" in prog.text() and "transpose" in prog.text()
    assert not driver.list_alternatives(driver.augment(prog, [pattern()]))
