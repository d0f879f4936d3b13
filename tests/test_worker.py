import threading
import time

import numpy as np
import pytest

from shlo_env.measure.timing_policy import TimingPolicy
from shlo_env.execute.worker import CandidateError, Worker

IDENTITY = """
func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.add %arg0, %arg0 : tensor<2xf32>
  return %0 : tensor<2xf32>
}"""

HANG = """
func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
  %r = stablehlo.while(%x = %arg0) : tensor<2xf32>
   cond {
    %t = stablehlo.constant dense<true> : tensor<i1>
    stablehlo.return %t : tensor<i1>
  } do {
    %y = stablehlo.add %x, %x : tensor<2xf32>
    stablehlo.return %y : tensor<2xf32>
  }
  return %r : tensor<2xf32>
}"""


@pytest.fixture
def worker():
    w = Worker(timeout_s=60)
    w.set_inputs("a", [np.array([1.0, 2.0], np.float32)])
    yield w
    w.close()


def test_run_and_time(worker):
    np.testing.assert_array_equal(worker.run(IDENTITY, "a")[0], [2.0, 4.0])
    a, b = worker.time([IDENTITY, IDENTITY], "a", TimingPolicy(runs=10))
    assert a.runs == b.runs >= 10
    assert worker.cost(IDENTITY)["flops"] >= 0


def test_compile_error_costs_one_candidate(worker):
    with pytest.raises(CandidateError) as e:
        worker.run("func.func public @main(%a: tensor<2xf32>) -> tensor<2xf32> { bogus }", "a")
    assert e.value.kind == "compile"
    assert worker.run(IDENTITY, "a")[0][1] == 4.0
    assert worker.restarts == 0


def test_a_hang_times_out_and_the_worker_restarts(worker):
    t = time.perf_counter()
    with pytest.raises(CandidateError) as e:
        worker.run(HANG, "a", timeout_s=3)
    assert e.value.kind == "timeout" and time.perf_counter() - t < 20
    np.testing.assert_array_equal(worker.run(IDENTITY, "a")[0], [2.0, 4.0])  # inputs re-sent
    assert worker.restarts == 1


def test_a_crash_costs_one_candidate(worker):
    worker.run(IDENTITY, "a")
    pid = worker.pid
    # The worker dies in the middle of a candidate, as when XLA aborts the process.
    killer = threading.Timer(1.0, lambda: __import__("os").kill(pid, 9))
    killer.start()
    with pytest.raises(CandidateError) as e:
        worker.run(HANG, "a", timeout_s=30)
    killer.join()
    assert e.value.kind == "crash"
    np.testing.assert_array_equal(worker.run(IDENTITY, "a")[0], [2.0, 4.0])
    assert worker.pid != pid


def test_unknown_input_set_is_a_clear_error(worker):
    with pytest.raises(KeyError, match="set_inputs"):
        worker.run(IDENTITY, "missing")


def test_worker_inprocess_and_locked_worker_implement_the_runner_protocol():
    import contextlib

    from shlo_env.execute.runners import FailureKind, InProcess, Runner
    from shlo_env.execute.runners import LockedWorker

    w = Worker(timeout_s=5)  # not started: only its interface is checked
    for runner in (w, InProcess(), LockedWorker(w, contextlib.nullcontext())):
        assert isinstance(runner, Runner), type(runner).__name__
    assert CandidateError("compile", "x").kind is FailureKind.COMPILE and str(CandidateError("run", "y")) == "run: y"
    with pytest.raises(ValueError):
        CandidateError("no such kind", "z")


def test_inprocess_answers_like_the_worker(worker):
    from shlo_env.execute.runners import InProcess

    local = InProcess()
    local.set_inputs("a", [np.array([1.0, 2.0], np.float32)])
    np.testing.assert_array_equal(local.run(IDENTITY, "a")[0], worker.run(IDENTITY, "a")[0])
    for runner in (local, worker):
        with pytest.raises(CandidateError) as e:
            runner.run("not a module", "a")
        assert e.value.kind == "compile"


def test_shlo_env_timeout_s_is_honoured_wherever_a_worker_is_started(monkeypatch):
    import shlo_env as se
    from shlo_env.search.evaluator import Evaluator
    from shlo_env.search.program_search import SearchOptions, optimize_program

    monkeypatch.setenv("SHLO_ENV_TIMEOUT_S", "7")
    started = []

    def no_child(self):  # record the timeout of each worker that would start, start none
        started.append(self.timeout_s)
        raise CandidateError("crash", "no child process in this test")

    monkeypatch.setattr(Worker, "_ensure", no_child)
    assert Worker().timeout_s == 7.0
    program = se.lower(lambda x: x * 2.0, np.ones(4, np.float32))
    with Evaluator(program, num_random=1) as ev:
        assert ev.worker.timeout_s == 7.0
    env = se.Env(program)
    assert env.worker.timeout_s == 7.0
    assert se.Env(program, timeout_s=3.0).worker.timeout_s == 3.0  # an explicit limit wins
    res = optimize_program(program, SearchOptions(budget_s=5))
    assert res.status == "error" and started == [7.0]
    monkeypatch.setenv("SHLO_ENV_TIMEOUT_S", "soon")
    with pytest.raises(ValueError, match="SHLO_ENV_TIMEOUT_S"):
        Worker()


def test_ctrl_c_during_a_request_stops_the_worker_promptly(monkeypatch):
    # SIGINT that lands on another thread (as it can on one of XLA's) does not interrupt the main
    # thread's wait: the wait wakes up on its own to let Python raise KeyboardInterrupt
    import os
    import signal

    from shlo_env.execute.worker import TEST_DELAY_VAR

    monkeypatch.setenv(TEST_DELAY_VAR, "30")  # every request sleeps 30 s in the child
    # Python's own SIGINT handler, even where the test runner inherited SIGINT ignored (a `cmd &`
    # from a non-interactive shell)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with Worker(timeout_s=60) as w:
            w.set_inputs("a", [np.array([1.0, 2.0], np.float32)])
            w._ensure()
            pid = w.pid
            helper = threading.Timer(1.0, lambda: signal.pthread_kill(threading.get_ident(), signal.SIGINT))
            t0 = time.monotonic()
            helper.start()
            with pytest.raises(KeyboardInterrupt):
                w.run(IDENTITY, "a")
            assert time.monotonic() - t0 < 5.0
            assert w.pid is None  # killed at once: its late answer can never reach the next request
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
            monkeypatch.delenv(TEST_DELAY_VAR)
            np.testing.assert_array_equal(w.run(IDENTITY, "a")[0], [2.0, 4.0])  # a fresh worker answers
    finally:
        signal.signal(signal.SIGINT, previous)


def test_xla_info_logs_stay_hidden_unless_the_user_sets_the_level(tmp_path):
    # XLA reads TF_CPP_MIN_LOG_LEVEL when jaxlib's first native library loads; shlo_env loads
    # jaxlib.mlir before jax (and before jax's own default), so it sets the default first
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    probe = [sys.executable, "-c", "import shlo_env, jax; jax.devices()"]
    quiet = subprocess.run(probe, env=env, capture_output=True, text=True, timeout=300)
    assert quiet.returncode == 0 and "PjRt-IFRT" not in quiet.stderr, quiet.stderr
    chosen = subprocess.run(probe, env=dict(env, TF_CPP_MIN_LOG_LEVEL="0"), capture_output=True, text=True,
                            timeout=300)
    assert "PjRt-IFRT device count" in chosen.stderr  # the user's level is kept

    (tmp_path / "tiny.mlir").write_text(IDENTITY)
    cli = subprocess.run([sys.executable, "-m", "shlo_env", "optimize", str(tmp_path / "tiny.mlir"), "-o",
                          str(tmp_path / "out.mlir"), "--budget", "30"], env=env, capture_output=True, text=True,
                         timeout=300)
    assert cli.returncode == 0, cli.stderr
    assert "pjrt_client.cc" not in cli.stderr and not [line for line in cli.stderr.splitlines()
                                                        if line.startswith("I1")], cli.stderr


def test_our_processes_do_not_preallocate_a_shared_device_unless_the_user_chose():
    from shlo_env import _jax_compat

    env: dict[str, str] = {}
    _jax_compat.share_device(env)
    assert env == {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    env = {"XLA_PYTHON_CLIENT_PREALLOCATE": "true"}
    _jax_compat.share_device(env)
    assert env["XLA_PYTHON_CLIENT_PREALLOCATE"] == "true"


def test_messages_carry_arrays_out_of_band_and_whole():
    """`send_message`/`recv_message` (the worker's wire format): every array comes back equal,
    with its dtype, shape and layout, writable, large ones too (sent from another thread: the
    socket's buffer is smaller than they are)."""
    import socket
    from multiprocessing.connection import Connection

    import ml_dtypes

    from shlo_env.execute.worker import recv_message, send_message

    a, b = socket.socketpair()
    left, right = Connection(a.detach()), Connection(b.detach())
    big = np.arange(3_000_000, dtype=np.float64).reshape(1000, 3000)
    payload = ("ok", {"outputs": [big, big.T, big[:, ::7], np.zeros((0, 4), np.float32),
                                  np.array(2.5, np.float32), np.array([True, False]),
                                  np.ones(5, ml_dtypes.bfloat16), np.arange(4, dtype=np.int8)],
                      "note": "text", "n": 3})
    sender = threading.Thread(target=send_message, args=(left, payload))
    sender.start()
    status, got = recv_message(right)
    sender.join()
    assert status == "ok" and got["note"] == "text" and got["n"] == 3
    for want, have in zip(payload[1]["outputs"], got["outputs"]):
        assert have.dtype == want.dtype and have.shape == want.shape
        assert np.array_equal(have.astype(np.float64), want.astype(np.float64))
        assert have.flags.writeable
    assert got["outputs"][1].flags.f_contiguous  # a transposed array stays transposed
    left.close()
    with pytest.raises(EOFError):
        recv_message(right)
