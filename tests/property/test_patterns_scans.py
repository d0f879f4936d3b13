"""Targeted property tests of the prefix-scan rewrites (shlo_env/patterns/scans.py)."""

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import strategies as st
from jax import lax

from pattern_programs import check_fires, shapes
from shlo_env.patterns import scans as S

#: Cumulative reductions that lower to a prefix `reduce_window` (forward and reverse).
CUMULATIVE = [
    lambda x, a: jnp.cumsum(x, axis=a),
    lambda x, a: lax.cumsum(x, axis=a, reverse=True),
    lambda x, a: lax.cummax(x, axis=a),
    lambda x, a: lax.cummin(x, axis=a, reverse=True),
    lambda x, a: lax.cumprod(x, axis=a),  # not matched (products overflow in another order):
]                                          # check_pattern then only checks nothing is recorded


def _prefix(draw):
    s = draw(shapes(1, 3))
    # lengths 1 to 9 along the scanned axis cover odd, even, power-of-two and the n < 2 edge
    axis = draw(st.integers(0, len(s) - 1))
    s = s[:axis] + (draw(st.integers(1, 9)),) + s[axis + 1:]
    cum = draw(st.sampled_from(CUMULATIVE))
    if draw(st.booleans()):
        return (lambda x: cum(x, axis)), [s], [np.int32] if cum is CUMULATIVE[0] else [np.float32]
    return (lambda x: cum(jnp.tanh(x), axis) * 2.0), [s]


CASES = {
    S.ReduceWindowPrefixToScan: _prefix,
}


@pytest.mark.parametrize("pattern", list(CASES), ids=lambda p: p.name)
def test_pattern(pattern):
    check_fires(pattern, CASES[pattern])
