"""Targeted property tests of the reduce rewrites (shlo_env/patterns/reduce.py)."""

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import strategies as st
from jax import lax

from pattern_programs import DIM, programs, shapes
from shlo_env.patterns import reduce as R
from shlo_env.testing import check_pattern


def _empty_dims(draw):
    s = draw(shapes(1, 3))
    case = draw(st.integers(0, 3))
    if case == 0:
        return (lambda x: lax.reduce(x, np.float32(-np.inf), lax.max, ())), [s]
    if case == 1:
        return (lambda x: lax.reduce(x, np.int32(0), lax.add, ())), [s], [np.int32]
    if case == 2:
        return (lambda x: lax.reduce(x, np.float32(-0.0), lax.add, ())), [s]
    return (lambda x: lax.reduce(x, np.float32(np.inf), lax.min, ())), [s]


def _two_axes(draw):
    s = draw(shapes(2, 3))
    a = draw(st.integers(0, len(s) - 1))
    b = draw(st.integers(0, len(s) - 2))
    return s, a, b


def _reduce_of_reduce(draw):
    s, a, b = _two_axes(draw)
    if draw(st.booleans()):
        red = draw(st.sampled_from([jnp.max, jnp.min]))
        return (lambda x: red(red(x, axis=a), axis=b)), [s]
    return (lambda x: jnp.sum(jnp.sum(x, axis=a), axis=b)), [s], [np.int32]


def _reduce_of_reduce_sum(draw):
    s, a, b = _two_axes(draw)
    return (lambda x: jnp.sum(jnp.sum(x, axis=a), axis=b)), [s]


def _reduce_of_transpose(draw):
    s = draw(shapes(2, 3))
    p = draw(st.permutations(range(len(s))))
    axes = tuple(sorted(draw(st.sets(st.integers(0, len(s) - 1), min_size=1, max_size=len(s)))))
    red = draw(st.sampled_from([jnp.sum, jnp.max]))
    return (lambda x: red(lax.transpose(x, p), axis=axes)), [s]


def _sum_of_scaled(draw):
    s = draw(shapes(1, 3))
    axis = draw(st.integers(0, len(s) - 1))
    c = draw(st.sampled_from([0.5, 3.0, -1.25]))
    return (lambda x: jnp.sum(x * c, axis=axis)), [s]


def _reduce_of_concat(draw):
    n1, n2, m = draw(DIM), draw(DIM), draw(DIM)
    red = draw(st.sampled_from([jnp.sum, jnp.max, jnp.min]))
    axis = draw(st.sampled_from([0, None]))
    return (lambda a, b: red(jnp.concatenate([a, b], axis=0), axis=axis)), [(n1, m), (n2, m)]


CASES = {
    R.ReduceEmptyDims: _empty_dims,
    R.ReduceOfReduce: _reduce_of_reduce,
    R.ReduceOfReduceSum: _reduce_of_reduce_sum,
    R.ReduceOfTranspose: _reduce_of_transpose,
    R.ReduceSumOfScaled: _sum_of_scaled,
    R.ReduceOfConcat: _reduce_of_concat,
}


@pytest.mark.parametrize("pattern", list(CASES), ids=lambda p: p.name)
def test_pattern(pattern):
    res = check_pattern(pattern, programs(CASES[pattern]), max_examples=50)
    assert res.num_alternatives >= 25, f"{pattern.name} fired on only {res.num_alternatives} of 50 programs"
