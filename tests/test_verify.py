"""shlo_env.measure.verify: the checks the evaluator and Env share, run in-process here."""

import numpy as np

import shlo_env as se
from shlo_env.measure.numerics import Numerics
from shlo_env.execute.runners import InProcess
from shlo_env.measure.verify import Verifier, escalate


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


# --- bounded memory (issue 30 item 7) -----------------------------------------------------------

def test_input_sets_scale_with_the_budget_and_the_program_size():
    import jax

    from shlo_env.measure.verify import random_sets_within, set_bytes
    from shlo_env.search.schedule import MEMORY_CAP, MEMORY_FLOOR, Schedule

    def memory_allowance(budget_s):
        return Schedule(budget_s).memory_bytes()

    assert memory_allowance(1.0) == MEMORY_FLOOR and memory_allowance(1e6) == MEMORY_CAP
    assert memory_allowance(8.0) < memory_allowance(30.0) <= memory_allowance(60.0)
    small, _, _ = _programs()
    assert random_sets_within(small, 3, memory_allowance(8.0)) == 3  # kilobytes: nothing is cut
    big = se.lower(lambda w: (w * 2.0).sum(), jax.ShapeDtypeStruct((64 << 20,), np.float32))  # 256 MiB
    assert set_bytes(big) >= 2 * (256 << 20)
    assert random_sets_within(big, 3, memory_allowance(8.0)) == 1  # at least one random set
    assert random_sets_within(big, 3, 4 * set_bytes(big)) == 3
    assert Verifier(big, InProcess(), num_random=3, max_bytes=memory_allowance(8.0)).num_input_sets == 1


def test_a_released_verifier_frees_its_sets_in_the_runner():
    original, same, _ = _programs()
    runner = InProcess()
    v = Verifier(original, runner, num_random=2)
    assert v.check(same.text(), (), Numerics.EXACT).ok
    keys = list(v.keys)
    assert all(k in runner._inputs for k in keys)
    v.release()
    assert not any(k in runner._inputs for k in keys) and not runner._references


def test_peak_memory_is_read_and_reset():
    from shlo_env.measure import memory

    before = memory.peak_bytes()
    assert before is not None and before > 0
    block = np.ones(64 << 20, np.uint8)  # 64 MiB touched
    assert memory.peak_bytes() >= before
    del block
    if memory.reset_peak():
        assert memory.peak_bytes() < before + (64 << 20)
    assert memory.peak_mb([None]) > 0


def test_prefetched_references_equal_the_ones_computed_on_demand():
    """`prefetch_references` computes on a thread what `references()` would; requests from the
    caller's thread meanwhile take turns with it on one worker (their answers do not mix)."""
    from shlo_env.execute.worker import Worker

    original, same, _ = _programs()
    with Worker(60.0) as w:
        v = Verifier(original, w, num_random=2)
        v.prefetch_references()
        outs = [w.run(same.text(), k) for k in v.keys]  # while the thread's requests run
        fetched = v.references()
        want = Verifier(original, InProcess(), num_random=2).references()
    for o, k in zip(outs, v.keys):
        np.testing.assert_array_equal(o[0], v.originals()[v.keys.index(k)][0])
    assert len(fetched) == len(want) == 3
    for f, r in zip(fetched, want):
        assert f[0].dtype == np.float64
        np.testing.assert_array_equal(f[0], r[0])


def test_a_failed_prefetch_is_met_again_in_the_callers_thread():
    import pytest

    from shlo_env.execute.runners import CandidateError, FailureKind

    class FailingReferences(InProcess):
        def reference(self, *args, **kwargs):
            raise CandidateError(FailureKind.TIMEOUT, "no answer")

    original, _, _ = _programs()
    v = Verifier(original, FailingReferences(), num_random=1)
    v.prefetch_references()
    with pytest.raises(CandidateError, match="no answer"):
        v.references()
    v.release()  # nothing left running
