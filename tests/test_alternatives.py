import numpy as np
import pytest

import shlo_env as se
from shlo_env.ir import alternatives as ad
from shlo_env.execute import runtime
from shlo_env.ir.program import ir_scope
from shlo_env.rewrite.driver import ApplyError


def chain_program():
    return se.lower(lambda a, b, v: (a @ b) @ v, np.ones((8, 8), np.float32), np.ones((8, 8), np.float32),
                    np.ones((8, 1), np.float32))


def test_augment_builds_inspectable_alternatives():
    aug = se.augment(chain_program(), ["reassociate_left_to_right"])
    alts = se.list_alternatives(aug)
    assert len(alts) == 1
    a = alts[0]
    assert a.labels == ("original", "reassociate_left_to_right")
    assert a.tiers == (0, int(se.Numerics.REASSOCIATE))
    assert a.num_choices == 2
    assert [op.name for op in a.region_ops(1)] == ["stablehlo.dot_general"] * 2
    assert a.region_ops(0) == []
    assert aug.module.operation.verify()


def test_alternatives_roundtrip_through_print_and_parse():
    aug = se.augment(chain_program(), ["reassociate_left_to_right"])
    text = aug.text()
    again = se.load(text)
    assert se.dag_hash(again) == se.dag_hash(aug)
    assert len(se.list_alternatives(again)) == 1
    assert se.dag_hash(se.load(aug.bytecode())) == se.dag_hash(aug)


@pytest.mark.parametrize("choice", [0, 1])
def test_materialize_each_choice(choice):
    p = chain_program()
    aug = se.augment(p, ["reassociate_left_to_right"])
    out = se.apply(aug, [choice])
    assert "shlo_env" not in out.text()
    if choice == 0:
        assert se.dag_hash(out) == se.dag_hash(p)
    else:
        assert out.applied == ("reassociate_left_to_right",)


def test_lower_to_case_compiles_an_undecided_program():
    p = chain_program()
    aug = se.augment(p, ["reassociate_left_to_right"])
    with ir_scope():
        ad.lower_to_case(se.list_alternatives(aug)[0].op, 1)
    assert "shlo_env" not in aug.text() and "stablehlo.case" in aug.text()
    args = [np.random.default_rng(0).standard_normal(s.shape).astype(np.float32) for s in p.in_specs]
    got = runtime.execute(runtime.compile(aug), args)[0]
    want = runtime.execute(runtime.compile(p), args)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_materialize_rejects_out_of_range_choice():
    aug = se.augment(chain_program(), ["reassociate_left_to_right"])
    with pytest.raises(ApplyError):
        se.apply(aug, [2])
