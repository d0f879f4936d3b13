"""Targeted property tests of the loop rewrites (shlo_env/patterns/loops.py)."""

import jax
import jax.numpy as jnp
import pytest
from hypothesis import strategies as st

from pattern_programs import DIM, programs, shapes
from shlo_env.patterns import loops as L
from shlo_env.testing import check_pattern

BODIES = [
    lambda i, c: c * 0.75 + 1.0,
    lambda i, c: jnp.sin(c) + c * 0.5,
    lambda i, c: c + i.astype(c.dtype) * 0.125,
]


def _loop(min_trips):
    def build(draw):
        s = draw(shapes(1, 2))
        n = draw(st.integers(min_trips, 12))
        start = draw(st.integers(0, 2))
        body = draw(st.sampled_from(BODIES))
        if draw(st.booleans()):
            return (lambda x: jax.lax.fori_loop(start, start + n, body, x)), [s]

        def scan_fn(x, xs):
            def step(c, t):
                c = body(jnp.int32(1), c) + t
                return c, c * 2.0
            return jax.lax.scan(step, x, xs)

        return scan_fn, [s, (n,) + s]
    return build


def _hoist(draw):
    s = draw(shapes(1, 2))
    n = draw(st.integers(1, 6))
    f = draw(st.sampled_from([jnp.tanh, lambda w: w * 2.0 + 1.0, lambda w: jnp.exp(-w * w)]))
    return (lambda x, w: jax.lax.fori_loop(0, n, lambda i, c: c * f(w) + 0.5, x)), [s, s]


def _packed_state(draw):
    m = draw(DIM)
    k = draw(st.integers(2, 4))
    n = draw(st.integers(1, 6))

    def fn(*parts):
        def step(state, _):
            xs = [state[j] for j in range(k)]
            new = [xs[j] + 0.25 * jnp.cos(xs[(j + 1) % k]) for j in range(k)]
            return jnp.stack(new), None
        out, _ = jax.lax.scan(step, jnp.stack(parts), None, length=n)
        return out

    return fn, [(m,)] * k


CASES = {
    L.WhileUnroll2: _loop(4),
    L.WhileUnroll4: _loop(8),
    L.WhileUnrollFull: _loop(1),
    L.WhileHoistInvariant: _hoist,
    L.WhileUnpackConcatState: _packed_state,
}


@pytest.mark.parametrize("pattern", list(CASES), ids=lambda p: p.name)
def test_pattern(pattern):
    res = check_pattern(pattern, programs(CASES[pattern]), max_examples=50)
    assert res.num_alternatives >= 25, f"{pattern.name} fired on only {res.num_alternatives} of 50 programs"
