"""Conformance sweep (issue 11, item 9): what third-party programs contain and the random op
table does not draw (complex, f64, bf16/f16, unsigned, i1, 0-sized tensors, while/cond, chlo
ops, sharding attributes, multiply-add chains). Every pattern, every single choice, compiled by
XLA (which contracts multiply-adds into FMAs) and compared in its tier; the reference
interpreter too where it runs the program."""

from __future__ import annotations

import pytest

from shlo_env.rewrite import driver
from shlo_env.ir.program import load
from shlo_env.patterns import all_patterns
from shlo_env.testing.random_programs import SHARDED_TEXT, conformance_programs
from shlo_env.testing import check_rewrites, interpretable

pytestmark = pytest.mark.filterwarnings("error::shlo_env.rewrite.driver.PatternWarning")

PROGRAMS = conformance_programs()
ALL = all_patterns()


def test_the_sweep_covers_what_it_claims():
    ids = " ".join(pid for pid, _ in PROGRAMS)
    for needle in ("complex64", "complex128", "float64", "bfloat16", "float16", "uint8", "uint32", "int8",
                   "-0x3", "loop_and_cond", "chlo_ops", "bool_ops", "madd_chain"):
        assert needle in ids
    texts = " ".join(p.text() for _, p in PROGRAMS)
    for op in ("stablehlo.while", "stablehlo.case", "chlo.", "complex<f64>", "tensor<0x3x", "i1>", "ui8"):
        assert op in texts, op


@pytest.mark.parametrize("pid,program", PROGRAMS, ids=[pid for pid, _ in PROGRAMS])
def test_every_choice_keeps_the_values(pid, program):
    stats = driver.AugmentStats()
    driver.augment(program, ALL, stats=stats)
    assert stats.errors == {}, stats.errors  # no pattern raised (and was silently disabled)
    backends = ["xla"] + (["interpreter"] if interpretable(program) else [])
    for backend in backends:
        result = check_rewrites(program, ALL, decisions="each", backend=backend, num_random=1)
        assert not result.mismatches, (backend, result.mismatches[0])


def test_sharded_programs_rewrite_into_programs_xla_compiles():
    program = load(SHARDED_TEXT)
    result = check_rewrites(program, ALL, decisions="each", backend="xla", num_random=1)
    assert result.num_candidates >= 2
    assert not result.mismatches, result.mismatches[0]
