"""Targeted property tests of the small-dot rewrites (shlo_env/patterns/small_ops.py)."""

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import strategies as st
from jax import lax

from pattern_programs import DIM, check_fires, shapes
from shlo_env.patterns import small_ops as D


def _small_dot(draw):
    """A loop accumulating dot_general with 0-1 batch, 1-2 contracted and 0-2 free dims per side, every dim of each
    operand in a drawn order (transposed forms: contracted or batch dims first, last, between)."""
    nb, nc = draw(st.integers(0, 1)), draw(st.integers(1, 2))
    nl, nr = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    batch, contract = [draw(DIM) for _ in range(nb)], [draw(DIM) for _ in range(nc)]
    lfree, rfree = [draw(DIM) for _ in range(nl)], [draw(DIM) for _ in range(nr)]

    def operand(free):
        roles = [("b", i) for i in range(nb)] + [("c", i) for i in range(nc)] + [("f", i) for i in range(len(free))]
        order = draw(st.permutations(roles))
        sizes = {"b": batch, "c": contract, "f": free}
        return order, tuple(sizes[r][i] for r, i in order)

    lorder, lshape = operand(lfree)
    rorder, rshape = operand(rfree)
    where = lambda order, role: [order.index((role, i)) for i in range(nb if role == "b" else nc)]  # noqa: E731
    dims = ((where(lorder, "c"), where(rorder, "c")), (where(lorder, "b"), where(rorder, "b")))
    def fn(a, b):  # in a loop body: where the pattern is offered
        step = lambda i, acc: acc * 0.5 + lax.dot_general(a, b, dims)  # noqa: E731
        return lax.fori_loop(0, 2, step, jnp.zeros_like(lax.dot_general(a, b, dims)))

    return fn, [lshape, rshape], [np.float32, np.float32]


def _dot_without_contraction(draw):
    """A dot_general with 0-2 batch and 0-2 free dims per side and nothing contracted (an outer
    product, a per-head mask), every dim of each operand in a drawn order, in or out of a loop."""
    nb, nl, nr = draw(st.integers(0, 2)), draw(st.integers(0, 2)), draw(st.integers(0, 2))
    batch = [draw(DIM) for _ in range(nb)]
    lfree, rfree = [draw(DIM) for _ in range(nl)], [draw(DIM) for _ in range(nr)]

    def operand(free):
        roles = [("b", i) for i in range(nb)] + [("f", i) for i in range(len(free))]
        order = draw(st.permutations(roles))
        return order, tuple((batch if r == "b" else free)[i] for r, i in order)

    lorder, lshape = operand(lfree)
    rorder, rshape = operand(rfree)
    dims = (([], []), ([lorder.index(("b", i)) for i in range(nb)], [rorder.index(("b", i)) for i in range(nb)]))
    if draw(st.booleans()):
        return (lambda a, b: jnp.tanh(lax.dot_general(a, b, dims))), [lshape, rshape]
    return (lambda a, b: lax.fori_loop(0, 2, lambda i, acc: acc * 0.5 + lax.dot_general(a, b, dims),
                                       jnp.zeros_like(lax.dot_general(a, b, dims))), [lshape, rshape])


def _small_reduce(draw):
    """sum / max / min / prod over 1-2 dims holding 2 to 8 elements per output (ints for sums)."""
    s = draw(shapes(1, 3))
    dims = tuple(sorted(draw(st.sets(st.integers(0, len(s) - 1), min_size=1, max_size=2))))
    sizes = list(s)
    for d in dims:
        sizes[d] = draw(st.integers(1, 4))
    if not 2 <= int(np.prod([sizes[d] for d in dims])) <= D.MAX_UNROLLED_REDUCE:
        sizes[dims[0]] = 2
        for d in dims[1:]:
            sizes[d] = 1
    red = draw(st.sampled_from([jnp.sum, jnp.max, jnp.min, jnp.prod]))
    if red is jnp.sum and draw(st.booleans()):
        return (lambda x: jnp.sum(x, axis=dims)), [tuple(sizes)], [np.int32]
    return (lambda x: red(jnp.tanh(x) * 2.0, axis=dims)), [tuple(sizes)]


CASES = {
    D.SmallDotToReduce: _small_dot,
    D.SmallReduceToElementwise: _small_reduce,
    D.DotWithoutContractionToMultiply: _dot_without_contraction,
}


@pytest.mark.parametrize("pattern", list(CASES), ids=lambda p: p.name)
def test_pattern(pattern):
    check_fires(pattern, CASES[pattern])
