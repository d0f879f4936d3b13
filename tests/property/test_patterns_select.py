"""Targeted property tests of the select / compare rewrites (shlo_env/patterns/select.py)."""

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import strategies as st
from jax import lax

from pattern_programs import programs, shapes
from shlo_env.patterns import select as S
from shlo_env.testing import check_pattern

I32, I8 = np.int32, np.int8
CMP = [lax.eq, lax.ne, lax.lt, lax.le, lax.gt, lax.ge]


def _same(draw):
    s = draw(shapes())
    def fn(a, b):
        c = b * 2
        return lax.select(a > 0, c, c)

    return fn, [s, s]


def _constant_pred(draw):
    s = draw(shapes())
    v = draw(st.booleans())
    return (lambda a, b: lax.select(jnp.full(s, v), a, b) + 1.0), [s, s]


def _not_swap(draw):
    s = draw(shapes())
    dt = draw(st.sampled_from([np.float32, I32]))
    return (lambda a, b: jnp.where(~(a > b), a, b - 1)), [s, s], [dt, dt]


def _compare_self(draw):
    s = draw(shapes())
    cmp = draw(st.sampled_from(CMP))
    dt = draw(st.sampled_from([I32, I8]))
    return (lambda x: jnp.where(cmp(x, x), x, x + 1)), [s], [dt]


def _select_minmax(draw):
    s = draw(shapes())
    cmp = draw(st.sampled_from([lax.lt, lax.le, lax.gt, lax.ge]))
    dt = draw(st.sampled_from([I32, I8]))
    if draw(st.booleans()):
        return (lambda a, b: jnp.where(cmp(a, b), a, b)), [s, s], [dt, dt]
    return (lambda a, b: jnp.where(cmp(a, b), b, a)), [s, s], [dt, dt]


CASES = {
    S.SelectSameBranches: _same,
    S.SelectConstantPredicate: _constant_pred,
    S.SelectNotSwap: _not_swap,
    S.CompareSelfInt: _compare_self,
    S.SelectCompareToMinMax: _select_minmax,
}


@pytest.mark.parametrize("pattern", list(CASES), ids=lambda p: p.name)
def test_pattern(pattern):
    res = check_pattern(pattern, programs(CASES[pattern]), max_examples=50)
    assert res.num_alternatives >= 25, f"{pattern.name} fired on only {res.num_alternatives} of 50 programs"
