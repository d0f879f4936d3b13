"""Targeted property tests of the dot / linear-algebra rewrites (shlo_env/patterns/dot.py)."""

import jax.numpy as jnp
import pytest
from hypothesis import strategies as st
from jax import lax

from pattern_programs import programs
from shlo_env.patterns import dot as D
from shlo_env.testing import check_pattern

N = st.integers(2, 6)
SMALL = st.integers(1, 2)
BIG = st.integers(3, 6)


def _left_to_right(draw):
    m, k, n = draw(N), draw(N), draw(N)
    return (lambda a, b, v: (a @ b) @ v), [(m, k), (k, n), draw(st.sampled_from([(n,), (n, 1)]))]


def _right_to_left(draw):
    k, n, p = draw(BIG), draw(BIG), draw(BIG)
    return (lambda a, b, c: a @ (b @ c)), [(1, k), (k, n), (n, p)]


def _distribute_left(draw):
    m, k, n, r = draw(N), draw(N), draw(N), draw(SMALL)
    if draw(st.booleans()):
        return (lambda x, w, a, b: x @ (w + a @ b)), [(m, k), (k, n), (k, r), (r, n)]
    return (lambda x, w, v: x @ (w + v)), [(m, k), (k, n), (k, n)]


def _distribute_right(draw):
    m, k, n = draw(N), draw(N), draw(N)
    return (lambda w, v, x: (w + v) @ x), [(m, k), (m, k), (k, n)]


def _factor_lhs(draw):
    m, k, n = draw(N), draw(N), draw(N)
    return (lambda x, w, v: x @ w + x @ v), [(m, k), (k, n), (k, n)]


def _factor_rhs(draw):
    m, k, n = draw(N), draw(N), draw(N)
    return (lambda w, v, x: w @ x + v @ x), [(m, k), (m, k), (k, n)]


def _reduce_through_dot(draw):
    m, k, n = draw(N), draw(N), draw(N)
    axis = draw(st.sampled_from([0, 1, None]))
    return (lambda x, w: jnp.sum(x @ w, axis=axis)), [(m, k), (k, n)]


def _merge_lhs(draw):
    m, k, n1, n2 = draw(N), draw(N), draw(N), draw(N)
    return (lambda x, w1, w2: (x @ w1, jnp.tanh(x @ w2))), [(m, k), (k, n1), (k, n2)]


def _merge_rhs(draw):
    m1, m2, k, n = draw(N), draw(N), draw(N), draw(N)
    return (lambda a1, a2, w: (a1 @ w, a2 @ w * 2.0)), [(m1, k), (m2, k), (k, n)]


def _stack_rhs(draw):
    """An unrolled recurrence: each step's input projection x_t·W is independent of the others,
    the state's h·U is not (a product that reads an earlier one is never stacked with it)."""
    t, k, n = draw(st.integers(2, 4)), draw(N), draw(N)
    transposed = draw(st.booleans())
    rows = draw(st.sampled_from([(), (2,)]))  # vectors, or row blocks (then three or more steps)
    t = max(t, 3) if rows else t

    def project(x, w):  # x·W, or x·Wᵀ contracting W's dim 1 (as a PyTorch linear layer)
        return lax.dot_general(x, w, (((x.ndim - 1,), (1,)), ((), ()))) if transposed else x @ w

    def fn(xs, w, u):
        h = jnp.zeros(rows + (n,), xs.dtype)
        for i in range(t):
            h = jnp.tanh(project(xs[i], w) + h @ u)
        return h

    return fn, [(t,) + rows + (k,), (n, k) if transposed else (k, n), (n, n)]


def _sum_of_products(draw):
    """A weight gradient of a layer used N times: a sum of outer products (some transposed) or
    of short contractions, with another term of the sum now and then."""
    t, m, n = draw(st.integers(2, 4)), draw(st.integers(4, 6)), draw(st.integers(4, 6))  # products larger than operands
    outer = draw(st.booleans())
    flip = draw(st.lists(st.booleans(), min_size=t, max_size=t))
    extra = draw(st.booleans())

    def outer_product(a, b):  # as reverse mode writes it: a dot_general contracting nothing
        return lax.dot_general(a, b, (((), ()), ((), ())))

    def fn(xs, gs, c):
        total = c if extra else None
        for i in range(t):
            if outer:
                p = outer_product(gs[i], xs[i]).T if flip[i] else outer_product(xs[i], gs[i])
            else:
                p = xs[i].T @ gs[i]
            total = p if total is None else total + p
        return total

    rows = () if outer else (draw(SMALL),)
    return fn, [(t,) + rows + (m,), (t,) + rows + (n,), (m, n)]


def _split_over_concat(draw):
    m, k, n1, n2 = draw(N), draw(N), draw(N), draw(N)
    if draw(st.booleans()):
        return (lambda x, w1, w2: x @ jnp.concatenate([w1, w2], axis=1)), [(m, k), (k, n1), (k, n2)]
    return (lambda a1, a2, w: jnp.concatenate([a1, a2], axis=0) @ w), [(n1, k), (n2, k), (k, m)]


def _slice_through_dot(draw):
    m, k, n = draw(BIG), draw(N), draw(BIG)
    r0, c0 = draw(st.integers(0, m - 2)), draw(st.integers(0, n - 2))
    return (lambda a, b: (a @ b)[r0:m - 1, c0:n:2]), [(m, k), (k, n)]


def _fold_lhs(draw):
    m, k, n, bt = draw(N), draw(N), draw(N), draw(N)
    if draw(st.booleans()):
        return (lambda a, b: a.T @ b), [(k, m), (k, n)]
    return (lambda a, b: jnp.matmul(jnp.swapaxes(a, 1, 2), b)), [(bt, k, m), (bt, k, n)]


def _fold_rhs(draw):
    m, k, n, bt = draw(N), draw(N), draw(N), draw(N)
    if draw(st.booleans()):
        return (lambda a, b: a @ b.T), [(m, k), (n, k)]
    return (lambda a, b: lax.dot_general(a, lax.transpose(b, (2, 0, 1)), (((2,), (1,)), ((0,), (0,))))), \
        [(bt, m, k), (k, n, bt)]


def _transpose_of_dot(draw):
    m, k, n, bt, h = draw(N), draw(N), draw(N), draw(N), draw(N)
    case = draw(st.integers(0, 3))
    if case == 0:  # (AB)ᵀ: swap the operands
        return (lambda a, b: (a @ b).T), [(m, k), (k, n)]
    if case == 1:  # batched, free dims swapped
        return (lambda a, b: jnp.swapaxes(a @ b, 1, 2)), [(bt, m, k), (bt, k, n)]
    if case == 2:  # batch dims reordered: only the dimension numbers change
        return (lambda a, b: lax.transpose(jnp.einsum("bhmk,bhkn->bhmn", a, b), (1, 0, 2, 3))), \
            [(bt, h, m, k), (bt, h, k, n)]
    # two lhs free dims reordered: a transpose of the lhs operand
    return (lambda a, b: lax.transpose(jnp.einsum("mhk,kn->mhn", a, b), (1, 0, 2))), [(m, h, k), (k, n)]


def _reduce_of_product(draw):
    m, n = draw(N), draw(N)
    k = draw(st.integers(16, 24))
    case = draw(st.integers(0, 3))
    if case == 0:  # a squared norm
        return (lambda x: jnp.sum(x * x)), [(m, k)]
    if case == 1:  # row-wise dot products: a batch dim
        return (lambda a, b: jnp.sum(a * b, axis=-1)), [(m, k), (m, k)]
    if case == 2:  # a matrix-vector product written with broadcasting
        return (lambda a, v: jnp.sum(a * v[None, :], axis=1)), [(m, k), (k,)]
    # an outer-product sum: the broadcast dims become free dims of each side
    return (lambda a, b: jnp.sum(a[:, None, :] * b[None, :, :], axis=2)), [(m, k), (n, k)]


def _dot_of_broadcast(draw):
    m, k, n, bt = draw(N), draw(N), draw(N), draw(N)
    case = draw(st.integers(0, 2))
    if case == 0:  # weights broadcast over a batch (vmap of a shared matmul)
        return (lambda a, b: jnp.matmul(jnp.broadcast_to(a, (bt, m, k)), b)), [(m, k), (bt, k, n)]
    if case == 1:
        return (lambda a, b: jnp.matmul(a, jnp.broadcast_to(b, (bt, k, n)))), [(bt, m, k), (k, n)]
    # a vector made a column (an added size-1 free dim)
    return (lambda v, w: lax.dot_general(lax.broadcast_in_dim(v, (k, 1), (0,)), w, (((0,), (0,)), ((), ())))), \
        [(k,), (k, n)]


def _dot_over_concat(draw):
    m, k1, k2, n = draw(N), draw(N), draw(N), draw(N)
    if draw(st.booleans()):
        return (lambda a1, a2, b: jnp.concatenate([a1, a2], axis=1) @ b), [(m, k1), (m, k2), (k1 + k2, n)]
    return (lambda a, b1, b2: a @ jnp.concatenate([b1, b2], axis=0)), [(m, k1 + k2), (k1, n), (k2, n)]


def _scalar_out(draw):
    m, k, n, bt = draw(N), draw(N), draw(N), draw(N)
    case = draw(st.integers(0, 2))
    if case == 0:
        return (lambda a, b: (2.5 * a) @ b), [(m, k), (k, n)]
    if case == 1:
        return (lambda a, b: a @ (b / 3.0)), [(m, k), (k, n)]
    return (lambda a, b: jnp.matmul(a * 0.125, b)), [(bt, m, k), (bt, k, n)]


def _scalar_in(draw):
    m, k, n = draw(BIG), draw(SMALL), draw(BIG)
    if draw(st.booleans()):
        return (lambda a, b: (a @ b) * 0.7), [(m, k), (k, n)]
    return (lambda a, b: (a @ b) / 3.0), [(m, k), (k, n)]


CASES = {
    D.ReassociateLeftToRight: _left_to_right,
    D.ReassociateRightToLeft: _right_to_left,
    D.DistributeLeft: _distribute_left,
    D.DistributeRight: _distribute_right,
    D.FactorCommonLhs: _factor_lhs,
    D.FactorCommonRhs: _factor_rhs,
    D.ReduceThroughDot: _reduce_through_dot,
    D.MergeDotsSharingLhs: _merge_lhs,
    D.MergeDotsSharingRhs: _merge_rhs,
    D.StackDotsSharingRhs: _stack_rhs,
    D.SumOfProductsAsOneProduct: _sum_of_products,
    D.SplitDotOverConcat: _split_over_concat,
    D.SliceThroughDot: _slice_through_dot,
    D.FoldTransposeIntoDotLhs: _fold_lhs,
    D.FoldTransposeIntoDotRhs: _fold_rhs,
    D.TransposeOfDot: _transpose_of_dot,
    D.ReduceOfProductToDot: _reduce_of_product,
    D.DotOfBroadcast: _dot_of_broadcast,
    D.DotOverContractingConcat: _dot_over_concat,
    D.ScalarOutOfDot: _scalar_out,
    D.ScalarIntoDot: _scalar_in,
}


@pytest.mark.parametrize("pattern", list(CASES), ids=lambda p: p.name)
def test_pattern(pattern):
    res = check_pattern(pattern, programs(CASES[pattern]), max_examples=50)
    assert res.num_alternatives >= 25, f"{pattern.name} fired on only {res.num_alternatives} of 50 programs"


def test_a_stack_takes_every_independent_product_once_and_no_product_that_reads_another():
    """An unrolled recurrence of 4 steps: the 4 input projections x_t·W form one stack (led by
    the first; the later ones start none of their own), and the state's h·U products, each
    reading the one before, form none."""
    import numpy as np

    import shlo_env as se
    from shlo_env.ir.program import lower

    def fn(xs, w, u):
        h = jnp.zeros((5,), xs.dtype)
        for t in range(4):
            h = jnp.tanh(xs[t] @ w + h @ u)
        return h

    args = [np.ones(s, np.float32) for s in [(4, 3), (3, 5), (5, 5)]]
    aug = se.augment(lower(fn, *args), ["stack_dots_sharing_rhs"])
    alts = se.list_alternatives(aug)
    assert len(alts) == 1
    assert len(alts[0].op.results) == 4


def test_a_sum_of_outer_products_is_one_product_and_a_sum_of_matrix_vector_products_is_not():
    """One alternatives op for the whole sum of 4 outer products (no other for its inner adds);
    none for a sum of matrix-vector products, where concatenating the matrices would copy more
    than the adds it saves."""
    import numpy as np

    import shlo_env as se
    from shlo_env.ir.program import lower

    def outer_sum(xs, gs):
        total = lax.dot_general(xs[0], gs[0], (((), ()), ((), ())))
        for t in range(1, 4):
            total = total + lax.dot_general(xs[t], gs[t], (((), ()), ((), ())))
        return total

    def matvec_sum(ws, vs):
        return sum(ws[i] @ vs[i] for i in range(1, 4)) + ws[0] @ vs[0]

    def alternatives(fn, *shapes):
        program = lower(fn, *[np.ones(s, np.float32) for s in shapes])
        return se.list_alternatives(se.augment(program, ["sum_of_products_as_one_product"]))

    assert len(alternatives(outer_sum, (4, 6), (4, 5))) == 1
    assert alternatives(matvec_sum, (4, 6, 5), (4, 5)) == []
