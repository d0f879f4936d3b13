"""Targeted property tests of horizontal batching (shlo_env/patterns/batching.py)."""

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import strategies as st

from pattern_programs import DIM, check_targeted, programs, shapes
from shlo_env.rewrite import driver
from shlo_env.ir.program import lower
from shlo_env.patterns import batching as B
from shlo_env.testing import check_pattern

# Per-parameter update chains, as optimizers write them (scalars broadcast per parameter).
UPDATES = [
    lambda p, g: p - 0.1 * (g * 0.9 + p * 0.01),
    lambda p, g: p - 0.05 * g / (jnp.sqrt(g * g) + 1e-8),
    lambda p, g: jnp.maximum(p * 0.5, g) + jnp.tanh(g),
]


def _updates(draw):
    k = draw(st.integers(2, 4))
    ps = [draw(shapes(1, 3)) for _ in range(k)]  # different shapes: batched flat
    f = draw(st.sampled_from(UPDATES))

    def fn(*args):
        return [f(p, g) for p, g in zip(args[:k], args[k:])]

    return fn, ps + ps


def _projections(draw):
    k = draw(st.integers(2, 4))
    m, n, h = draw(DIM), draw(DIM), draw(DIM)
    batched = draw(st.booleans())
    lead = (draw(DIM),) if batched else ()

    def fn(*args):
        xs, ws = args[:k], args[k:]
        return [jnp.einsum("...ij,...jk->...ik", x, w) for x, w in zip(xs, ws)]

    return fn, [lead + (m, n)] * k + [lead + (n, h)] * k


CASES = {
    B.BatchElementwiseChains: _updates,
    B.BatchDots: _projections,
}


@pytest.mark.parametrize("pattern", list(CASES), ids=lambda p: p.name)
def test_pattern(pattern):
    check_targeted(pattern, CASES[pattern], max_examples=40)


def test_dependent_chains_are_not_batched():
    """The second update reads the first's result: batching them would be a cycle."""
    def fn(p, g):
        a = p - 0.1 * (g * 0.9 + p * 0.01)
        return a - 0.1 * (g * 0.9 + a * 0.01)

    x = np.ones((3, 4), np.float32)
    stats = driver.AugmentStats()
    driver.augment(lower(fn, x, x), [B.BatchElementwiseChains()], stats=stats)
    assert not stats.recorded


def test_one_op_per_chain_after_batching():
    """Three parameters' updates become one chain: one subtract left, on the concatenation."""
    def fn(p1, p2, p3, g1, g2, g3):
        return [p - 0.1 * (g * 0.9 + p * 0.01) for p, g in ((p1, g1), (p2, g2), (p3, g3))]

    args = [np.ones(s, np.float32) for s in ((3, 4), (5,), (2, 2, 2))] * 2
    aug = driver.augment(lower(fn, *args), [B.BatchElementwiseChains()])
    alts = driver.list_alternatives(aug)
    widest = max(range(len(alts)), key=lambda i: len(alts[i].result_types))
    assert len(alts[widest].result_types) == 3  # the other matches are the later pairs
    text = driver.apply(aug, [int(i == widest) for i in range(len(alts))]).text()
    assert text.count("stablehlo.subtract") == 1 and "tensor<25xf32>" in text


@pytest.mark.parametrize("pattern", list(CASES), ids=lambda p: p.name)
def test_pattern_compiled_by_xla(pattern):
    """The tier holds for what XLA compiles, not only under the reference interpreter."""
    check_pattern(pattern, programs(CASES[pattern]), max_examples=8, backend="xla")
