"""shlo_env.verify: the checks the evaluator and Env share, run in-process here."""

import numpy as np

import shlo_env as se
from shlo_env.numerics import Numerics
from shlo_env.runners import InProcess
from shlo_env.verify import Verifier, escalate


def _programs():
    x = np.arange(8, dtype=np.float32)
    return se.lower(lambda x: x * 2.0, x), se.lower(lambda x: x + x, x), se.lower(lambda x: x * 2.0 + 1.0, x)


def test_verifier_establishes_exact_and_rejects_a_different_program():
    original, same, different = _programs()
    v = Verifier(original, InProcess(), num_random=2)
    assert v.num_input_sets == 3  # the example args and two random sets
    ok = v.check(same.text(), (), Numerics.EXACT)
    assert ok.ok and ok.tier == Numerics.EXACT
    bad = v.check(different.text(), (), Numerics.EXACT)
    assert not bad.ok and bad.detail


def test_escalate_computes_references_only_when_outputs_differ():
    calls = []

    def refs():
        calls.append("references")
        return None

    def sens():
        calls.append("sensitivities")
        return None

    a = [[np.array([1.0, 2.0], np.float32)]]
    assert escalate(a, a, Numerics.EXACT, refs, sens).tier == Numerics.EXACT and calls == []
    b = [[np.array([1.0, 3.0], np.float32)]]
    assert not escalate(b, a, Numerics.EXACT, refs, sens).ok
    assert calls == ["references", "references", "sensitivities"]


def test_env_is_equivalent_goes_through_its_verifier():
    original, _, different = _programs()
    env = se.Env(original, isolate=False)
    assert env.is_equivalent().ok
    assert not env.is_equivalent(different).ok
    assert env.verifier() is env.verifier()  # the original's outputs are computed once
