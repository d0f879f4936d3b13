"""Targeted property tests of the guarded unroll (shlo_env/patterns/dynamic_loops.py, opt-in, not
registered): while loops that stop on a data-dependent condition, as solvers and samplers write
them."""

import jax
import jax.numpy as jnp
import pytest
from hypothesis import strategies as st

from pattern_programs import check_targeted, shapes
from shlo_env.ir.program import lower
from shlo_env.patterns import dynamic_loops as D
from shlo_env.rewrite import driver

STEPS = [
    lambda x: x * 0.75 + 0.125,
    lambda x: jnp.sin(x) + x * 0.5,
    lambda x: x - 0.25 * jnp.tanh(x),
]


def _until_converged(draw):
    """`while i < n and |x| > tol: x = f(x)`: the trip count depends on the data (0 to n)."""
    s = draw(shapes(1, 2))
    step = draw(st.sampled_from(STEPS))
    n = draw(st.integers(0, 9))
    tol = draw(st.sampled_from([0.05, 0.3, 1.0]))
    nested = draw(st.booleans())  # a fori_loop inside the body: bounded, so speculation is safe

    def body(carry):
        i, x, total = carry
        x = jax.lax.fori_loop(0, 2, lambda _, y: step(y), x) if nested else step(x)
        return i + 1, x, total + jnp.sum(x)

    def fn(x):
        def cond(carry):
            i, x, _ = carry
            return (i < n) & (jnp.max(jnp.abs(x)) > tol)
        i, x, total = jax.lax.while_loop(cond, body, (jnp.int32(0), x, jnp.zeros((), x.dtype)))
        return x, total, i

    return fn, [s]


class _WhileUnroll3Guarded(D.WhileUnroll2Guarded):
    """while c(x): x = f(x) -> three guarded copies per iteration (the factor is a parameter)."""

    factor = 3


@pytest.mark.parametrize("pattern", [D.WhileUnroll2Guarded, _WhileUnroll3Guarded], ids=lambda p: p.__name__)
def test_pattern(pattern):
    check_targeted(pattern, _until_converged, max_examples=50)


def _matches(fn, *args) -> int:
    aug = driver.augment(lower(fn, *args), [D.WhileUnroll2Guarded()])
    return sum(a.num_choices - 1 for a in driver.list_alternatives(aug))


def test_not_offered_where_speculation_could_loop_forever_or_has_effects():
    x = jnp.linspace(-1.0, 1.0, 8)

    def converge(y):  # an inner loop to a tolerance: run on a finished state it might never stop
        return jax.lax.while_loop(lambda z: jnp.max(jnp.abs(z)) > 0.01, lambda z: z * 0.5, y)

    def outer_with_unbounded_inner(x):
        return jax.lax.while_loop(lambda c: (c[0] < 5) & (jnp.sum(c[1]) > 0.1),
                                  lambda c: (c[0] + 1, converge(c[1]) + 0.2), (0, x))[1]

    def with_callback(x):
        def body(c):
            jax.debug.callback(lambda v: None, c[1])
            return c[0] + 1, c[1] * 0.5
        return jax.lax.while_loop(lambda c: (c[0] < 5) & (jnp.sum(c[1]) > 0.1), body, (0, x))[1]

    def fixed_trip_count(x):  # loops.py's exact unrolls cover it
        return jax.lax.fori_loop(0, 8, lambda i, y: y * 0.5, x)

    assert _matches(converge, x) == 1  # a single converging loop is fine: nothing nested
    assert _matches(outer_with_unbounded_inner, x) == 1  # only the inner one
    assert _matches(with_callback, x) == 0
    assert _matches(fixed_trip_count, x) == 0
