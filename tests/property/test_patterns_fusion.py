"""Targeted property tests of the fusion-boundary rewrites (shlo_env/patterns/fusion.py)."""

import jax
import jax.numpy as jnp
import pytest
from hypothesis import strategies as st

from pattern_programs import DIM, programs, shapes
from shlo_env.patterns import fusion as F
from shlo_env.testing import check_pattern

UNARY = [jnp.tanh, jnp.exp, lambda v: v * 3.0, jnp.abs]


def _insert(draw):
    s = draw(shapes())
    f = draw(st.sampled_from(UNARY))
    if draw(st.booleans()):
        return (lambda a, b: (lambda y: (y * 2.0, y + b))(f(a + b))), [s, s]
    return (lambda a, w: (lambda y: jnp.sum(y, axis=0) + jnp.max(y, axis=0))(a @ w)), [(draw(DIM), s[0]), (s[0], 3)]


def _remove(draw):
    s = draw(shapes())
    return (lambda a, b: (lambda p: p[0] * p[1])(jax.lax.optimization_barrier((jnp.sin(a), b)))), [s, s]


def _duplicate(draw):
    s = draw(shapes())
    f = draw(st.sampled_from(UNARY))
    k = draw(st.integers(2, 3))
    return (lambda a, b: (lambda y: tuple(g(y) for g in [jnp.sin, jnp.cos, jnp.tanh][:k]))(f(a * b))), [s, s]


def _merge(draw):
    s = draw(shapes())
    if draw(st.booleans()):
        f = draw(st.sampled_from(UNARY))
        return (lambda a, b: (f(a), f(b))), [s, s]
    return (lambda a, b, c, d: (a * b, c * d)), [s, s, s, s]


CASES = {
    F.InsertOptimizationBarrier: _insert,
    F.RemoveOptimizationBarrier: _remove,
    F.DuplicateProducer: _duplicate,
    F.HorizontalMerge: _merge,
}


@pytest.mark.parametrize("pattern", list(CASES), ids=lambda p: p.name)
def test_pattern(pattern):
    res = check_pattern(pattern, programs(CASES[pattern]), max_examples=50)
    assert res.num_alternatives >= 25, f"{pattern.name} fired on only {res.num_alternatives} of 50 programs"
