"""What a later search reuses: the process's warm worker (`shlo_env.execute.worker.shared`) and the
runner's remembered float64 references. Counted, not timed."""

from __future__ import annotations

import threading

import numpy as np

from shlo_env.execute import runtime
from shlo_env.ir.program import lower
from shlo_env.execute.runners import InProcess
from shlo_env.execute.worker import Worker, shared


def test_the_shared_worker_is_one_per_process_and_a_busy_one_is_not_shared():
    with shared(30.0) as first:
        assert isinstance(first, Worker) and first.timeout_s == 30.0
        other: list = []
        t = threading.Thread(target=lambda: other.append(_use_shared()))
        t.start()
        t.join()
        assert other[0] is not first  # the other thread got a worker of its own meanwhile
    with shared(45.0) as again:
        assert again is first and again.timeout_s == 45.0


def test_the_shared_worker_is_let_go_once_its_input_sets_are_large(monkeypatch):
    import shlo_env.execute.worker as worker_module

    monkeypatch.setattr(worker_module, "SHARED_INPUT_BYTES", 1000)
    worker_module._close_shared()  # earlier tests' input sets would already pass 1000 bytes
    with shared() as w:
        w.set_inputs("small", [np.zeros(10, np.float32)])
    with shared() as again:
        assert again is w  # 40 bytes: kept
        again.set_inputs("big", [np.zeros(1000, np.float32)])
    with shared() as third:
        assert third is not w and third.input_bytes == 0


def _use_shared():
    with shared() as w:
        return w


def test_references_are_remembered_per_text_and_input_set(monkeypatch):
    program = lower(lambda x: x * 2.0 + 1.0, np.ones(8, np.float32))
    calls = []
    real = runtime.reference_outputs

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(runtime, "reference_outputs", counted)
    r = InProcess()
    r.set_inputs("k", [np.arange(8, dtype=np.float32)])
    first = r.reference(program.text(), "k")
    assert first is not None and np.array_equal(first[0], np.arange(8) * 2.0 + 1.0)
    assert r.reference(program.text(), "k") is first and len(calls) == 1
    r.reference(program.text(), "k", perturb_ulps=4.0)  # another request: computed
    assert len(calls) == 2
    r.set_inputs("k", [np.zeros(8, dtype=np.float32)])  # new arrays under the same name
    again = r.reference(program.text(), "k")
    assert len(calls) == 3 and again is not None and np.array_equal(again[0], np.ones(8))
