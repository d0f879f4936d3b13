"""The random-program generator itself (shlo_env/testing/random_programs.py)."""

from __future__ import annotations

import collections

import jax
import numpy as np
import pytest

from shlo_env.testing import random_programs as rp
from shlo_env.ir.program import lower

# The StableHLO op each table entry must produce (at least this one; motifs produce more).
EXPECTED_OP = {
    "unary": None,  # one of several; checked by UNARY_OPS below
    "binary": None,
    "divide": "stablehlo.divide",
    "compare_select": "stablehlo.select",
    "clamp": "stablehlo.clamp",
    "matmul": "stablehlo.dot_general",
    "batched_matmul": "stablehlo.dot_general",
    "broadcast_in_dim": "stablehlo.broadcast_in_dim",
    "reshape": "stablehlo.reshape",
    "transpose": "stablehlo.transpose",
    "reduce_sum": "stablehlo.reduce",
    "reduce_max": "stablehlo.reduce",
    "slice": "stablehlo.slice",
    "concatenate": "stablehlo.concatenate",
    "convert": "stablehlo.convert",
    "pad": "stablehlo.pad",
    "reverse": "stablehlo.reverse",
    "identity_arith": None,
    "dot_chain": "stablehlo.dot_general",
    "low_rank_update": "stablehlo.dot_general",
    "shared_dot_sum": "stablehlo.dot_general",
    "reduce_of_dot": "stablehlo.reduce",
    "slice_of_concat": "stablehlo.concatenate",
    "transpose_of_transpose": "stablehlo.transpose",
    "reshape_of_reshape": "stablehlo.reshape",
    "select_same": "stablehlo.select",
    "dots_sharing_operand": "stablehlo.dot_general",
    "dot_of_concat": "stablehlo.concatenate",
    "slice_of_dot": "stablehlo.slice",
}
UNARY_OPS = {"stablehlo.negate", "stablehlo.abs", "stablehlo.sign", "stablehlo.tanh", "stablehlo.exponential",
             "stablehlo.sine", "stablehlo.floor", "stablehlo.divide"}  # logistic lowers to 1 / (1 + exp(-x))
BINARY_OPS = {"stablehlo.add", "stablehlo.subtract", "stablehlo.multiply", "stablehlo.maximum",
              "stablehlo.minimum"}


def _ops(program) -> set[str]:
    return {line.split("=", 1)[1].split()[0].split("(")[0] for line in program.text().splitlines()
            if "= stablehlo." in line}


def test_table_covers_the_required_op_kinds():
    plain = [k.name for k in rp.OP_TABLE if not k.motif]
    assert len(plain) >= 15
    assert set(EXPECTED_OP) == {k.name for k in rp.OP_TABLE}
    assert len({k.name for k in rp.OP_TABLE}) == len(rp.OP_TABLE)


@pytest.mark.parametrize("kind", [k.name for k in rp.OP_TABLE])
def test_each_kind_lowers_to_its_op_and_runs(kind):
    """Programs of one kind only: they lower (and verify), emit the op, and evaluate to the specs."""
    for fn, args in rp.sample(3, kinds=[kind], max_ops=3):
        assert fn.kinds and set(fn.kinds) == {kind}
        program = lower(fn, *args)
        assert program.module.operation.verify()
        ops = _ops(program)
        expected = EXPECTED_OP[kind]
        if expected:
            assert expected in ops, (kind, ops, repr(fn))
        elif kind == "unary":
            assert ops & UNARY_OPS, ops
        elif kind == "binary":
            assert ops & BINARY_OPS, ops
        specs = [(tuple(s.shape), np.dtype(s.dtype)) for s in program.out_specs]
        assert [(tuple(v.shape), v.dtype) for v in fn.outputs] == specs
        outs = [np.asarray(o) for o in jax.jit(fn)(*args)]
        assert [(o.shape, o.dtype) for o in outs] == specs


def test_every_kind_appears_in_a_default_sample():
    counts = collections.Counter()
    for fn, _ in rp.sample(200):
        counts.update(fn.kinds)
    missing = {k.name for k in rp.OP_TABLE} - set(counts)
    assert not missing, f"never drawn: {missing}"


def test_sample_is_deterministic_and_distinct():
    a, b = rp.sample(15), rp.sample(15)
    assert [repr(f) for f, _ in a] == [repr(f) for f, _ in b]
    assert all(np.array_equal(x, y) for (_, xs), (_, ys) in zip(a, b) for x, y in zip(xs, ys))
    assert len({repr(f) for f, _ in a}) == 15


def test_outputs_are_the_unread_values_and_stay_finite():
    """No dead code, and the magnitude guard keeps exp / f16 / long dot chains finite."""
    for fn, args in rp.sample(40, max_ops=10):
        read = {v.id for s in fn.steps for v in s.ins}
        assert fn.outputs and all(v.id not in read for v in fn.outputs)
        outs = jax.jit(fn)(*args)
        for o in outs:
            o = np.asarray(o)
            if np.issubdtype(o.dtype, np.floating):
                assert np.isfinite(o).all(), repr(fn)


def test_repr_lists_the_program():
    fn, args = rp.sample(1, kinds=["dot_chain"], max_ops=1)[0]
    text = repr(fn)
    assert text.startswith("def random_program(") and "matmul(" in text and "return (" in text
    assert len(args) == len(fn.inputs)


def test_strategies_give_functions_and_programs():
    from hypothesis import given, settings

    seen = []

    @settings(max_examples=5, deadline=None, database=None, derandomize=True)
    @given(rp.jax_programs(max_ops=3), rp.programs(max_ops=3))
    def run(fn_args, program):
        fn, args = fn_args
        assert isinstance(fn, rp.RandomFunction) and all(isinstance(a, np.ndarray) for a in args)
        assert program.example_args is not None and isinstance(program.fn, rp.RandomFunction)
        seen.append(program)

    run()
    assert len(seen) == 5


def test_fire_rate_is_high():
    """The motifs make the patterns fire on most programs (the equivalence tests rely on it)."""
    rate, per_pattern = rp.fire_rate(100)
    assert rate >= 0.7, (rate, per_pattern)
    assert len(per_pattern) >= 10
