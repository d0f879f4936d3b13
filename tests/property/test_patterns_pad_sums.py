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
    layers, m = draw(st.integers(3, 5)), draw(DIM)
    take = sorted(draw(st.sets(st.integers(0, layers - 1), min_size=3, max_size=layers)))

    def f(w, x):
        return jax.grad(lambda w: sum(jnp.sum(jnp.sin(w[l] * x)) for l in take))(w)

    return f, [(layers, m), (m,)]


def _explicit_pads(draw):
    """pads placed at chosen, possibly gapped, positions along a random dim of a rank-2 array."""
    n_pieces, other = draw(st.integers(3, 4)), draw(DIM)
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

    def f(a, b, c):
        return lax.pad(a, 0.0, [(0, 2, 0)]) + lax.pad(b, 0.0, [(1, 1, 0)]) + lax.pad(c, 0.0, [(2, 0, 0)])

    return f, [(n,), (n,), (n,)]


def _two_pieces(draw):
    """Two disjoint pieces: XLA's fused add of two pads is already the concatenate's loop, left alone."""
    n = draw(st.integers(1, 4))
    return (lambda a, b: lax.pad(a, 0.0, [(0, n, 0)]) + lax.pad(b, 0.0, [(n, 0, 0)])), [(n,), (n,)]


#: Each pattern of the family and the programs it is checked on (tests/property/test_patterns_meta.py).
CASES = {SumOfDisjointPads: (_stacked_gradient, _explicit_pads)}


@pytest.mark.parametrize("build", CASES[SumOfDisjointPads], ids=lambda b: b.__name__.lstrip("_"))
def test_sum_of_disjoint_pads(build):
    check_pattern(SumOfDisjointPads, programs(build), max_examples=25)


@pytest.mark.parametrize("build", [_overlapping, _two_pieces], ids=["overlapping", "two_pieces"])
def test_pads_are_left_alone(build):
    res = check_pattern(SumOfDisjointPads, programs(build), max_examples=5, require_match=False)
    assert res.num_alternatives == 0


def test_the_whole_tree_is_one_match():
    from shlo_env.ir.program import lower
    from shlo_env.rewrite import driver

    w, x = np.ones((4, 3), np.float32), np.ones((3,), np.float32)
    f = lambda w, x: jax.grad(lambda w: sum(jnp.sum(jnp.sin(w[l] * x)) for l in range(4)))(w)  # noqa: E731
    program = lower(f, w, x)
    augmented = driver.augment(program, [SumOfDisjointPads()])
    assert len(driver.list_alternatives(augmented)) == 1


def test_it_never_adds_ops():
    """`sweep_first` promises a rewrite that never costs: on a stacked gradient (no gaps) and on
    pads with a gap between two of the pieces, the rewritten program has no more ops, and no add left."""
    from shlo_env.ir.program import lower
    from shlo_env.rewrite import driver

    w, x = np.ones((4, 3), np.float32), np.ones((3,), np.float32)
    stacked = lambda w, x: jax.grad(lambda w: sum(jnp.sum(jnp.sin(w[l] * x)) for l in range(4)))(w)  # noqa: E731
    gapped = lambda a, b, c: (lax.pad(a, 0.0, [(0, 5, 0)]) + lax.pad(b, 0.0, [(3, 2, 0)])  # noqa: E731
                              + lax.pad(c, 0.0, [(5, 0, 0)]))
    for f, args in ((stacked, (w, x)), (gapped, [np.ones(2, np.float32)] * 3)):
        program = lower(f, *args)
        augmented = driver.augment(program, [SumOfDisjointPads()])
        alts = driver.list_alternatives(augmented)
        assert alts, f.__name__
        rewritten = driver.apply(augmented, [1] * len(alts))
        assert rewritten.num_ops() <= program.num_ops(), (rewritten.num_ops(), program.num_ops())
        assert program.text().count("stablehlo.add") and not rewritten.text().count("stablehlo.add")
