"""Targeted property tests of the small-dot rewrites (shlo_env/patterns/small_dots.py)."""

import numpy as np
import pytest
from hypothesis import strategies as st
from jax import lax

from pattern_programs import DIM, check_fires
from shlo_env.patterns import small_dots as D


def _small_dot(draw):
    """dot_general with 0-1 batch, 1-2 contracted and 0-2 free dims per side, every dim of each
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
    return (lambda a, b: lax.dot_general(a, b, dims) * 2.0), [lshape, rshape], [np.float32, np.float32]


CASES = {
    D.SmallDotToReduce: _small_dot,
}


@pytest.mark.parametrize("pattern", list(CASES), ids=lambda p: p.name)
def test_pattern(pattern):
    check_fires(pattern, CASES[pattern])
