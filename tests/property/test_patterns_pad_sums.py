"""Targeted property tests of SumOfDisjointPads (shlo_env/patterns/pad_sums.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import strategies as st
from jax import lax

from pattern_programs import DIM, programs
from shlo_env.patterns.pad_sums import SumOfDisjointPads
from shlo_env.testing import check_pattern


def _stacked_gradient(draw):
    """The reverse mode of slicing a stacked array: sum over l of pad(g_l) (jax emits the tree)."""
    layers, m = draw(st.integers(2, 4)), draw(DIM)
    take = sorted(draw(st.sets(st.integers(0, layers - 1), min_size=2, max_size=layers)))

    def f(w, x):
        return jax.grad(lambda w: sum(jnp.sum(jnp.sin(w[l] * x)) for l in take))(w)

    return f, [(layers, m), (m,)]


def _explicit_pads(draw):
    """pads placed at chosen, possibly gapped, positions along a random dim of a rank-2 array."""
    n_pieces, other = draw(st.integers(2, 3)), draw(DIM)
    sizes = [draw(st.integers(1, 2)) for _ in range(n_pieces)]
    gaps = [draw(st.integers(0, 2)) for _ in range(n_pieces + 1)]
    dim = draw(st.integers(0, 1))
    total = sum(sizes) + sum(gaps)
    starts, at = [], gaps[0]
    for s, g in zip(sizes, gaps[1:]):
        starts.append(at)
        at += s + g
    order = draw(st.permutations(range(n_pieces)))

    def f(*xs):
        out = None
        for i in order:
            cfg = [(0, 0, 0), (0, 0, 0)]
            cfg[dim] = (starts[i], total - starts[i] - sizes[i], 0)
            p = lax.pad(xs[i] * 2.0, 0.0, cfg)
            out = p if out is None else out + p
        return out

    shapes = [((s, other) if dim == 0 else (other, s)) for s in sizes]
    return f, shapes


def _overlapping(draw):
    """Overlapping pieces are a real sum: the pattern must not fire."""
    n = draw(st.integers(2, 4))
    return (lambda a, b: lax.pad(a, 0.0, [(0, 1, 0)]) + lax.pad(b, 0.0, [(1, 0, 0)])), [(n,), (n,)]


@pytest.mark.parametrize("build", [_stacked_gradient, _explicit_pads], ids=["stacked_gradient", "explicit_pads"])
def test_sum_of_disjoint_pads(build):
    check_pattern(SumOfDisjointPads, programs(build), max_examples=25)


def test_overlapping_pads_are_left_alone():
    res = check_pattern(SumOfDisjointPads, programs(_overlapping), max_examples=5, require_match=False)
    assert res.num_alternatives == 0


def test_the_whole_tree_is_one_match():
    from shlo_env.ir.program import lower
    from shlo_env.rewrite import driver

    w, x = np.ones((4, 3), np.float32), np.ones((3,), np.float32)
    f = lambda w, x: jax.grad(lambda w: sum(jnp.sum(jnp.sin(w[l] * x)) for l in range(4)))(w)  # noqa: E731
    program = lower(f, w, x)
    augmented = driver.augment(program, [SumOfDisjointPads()])
    assert len(driver.list_alternatives(augmented)) == 1
