"""Ctrl-C and killed callers: a search stops, and no worker process outlives its caller.

Each test starts a caller in a subprocess with a request in flight (the worker's test hook makes
every request sleep first, `SHLO_ENV_WORKER_TEST_DELAY_S`), signals the caller, and looks for
its worker among the processes 3 s later (workers carry the caller's pid on their command line).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from test_worker import HANG  # an endless while loop

from shlo_env.execute.worker import TEST_DELAY_VAR

pytestmark = pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="finds processes in /proc")

TINY = """
func.func public @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.tanh %arg0 : tensor<8xf32>
  %1 = stablehlo.add %0, %0 : tensor<8xf32>
  return %1 : tensor<8xf32>
}"""

OPTIMIZE = """
import jax.numpy as jnp
import shlo_env
shlo_env.optimize(lambda x: jnp.tanh(x) * 2.0, jnp.ones(8, jnp.float32), budget_s=60)
"""

JIT_BACKGROUND = """
import time
import jax.numpy as jnp
import shlo_env
f = shlo_env.jit(lambda x: jnp.tanh(x) * 2.0, background=True, budget_s=60)
f(jnp.ones(8, jnp.float32)).block_until_ready()  # jax.jit's answer; the search goes on meanwhile
time.sleep(600)
"""

# A Worker busy in XLA (an endless loop), started from the main thread or from another thread
# (there only the watching thread, not the kernel's parent-death signal, stops it).
BUSY_IN_XLA = f"""
import sys, threading
import numpy as np
from shlo_env.execute.worker import Worker
def go():
    w = Worker(timeout_s=300)
    w.set_inputs("a", [np.ones(2, np.float32)])
    w.run('''{HANG}''', "a")
if sys.argv[1] == "thread":
    t = threading.Thread(target=go)
    t.start()
    t.join()
else:
    go()
"""


def workers_of(caller: int) -> list[int]:
    """Live worker processes started by `caller` (zombies have no command line)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(a.endswith(b"shlo_env/execute/_worker_main.py") for a in argv) and str(caller).encode() in argv:
            found.append(int(entry))
    return found


def _kill_quietly(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def start(tmp_path: Path, caller: str, *, own_group: bool = False, delay_s: float = 60.0):
    """The caller's process, its worker's pid (once the worker is up), and the output path."""
    out = tmp_path / "out.mlir"
    if caller == "cli":
        (tmp_path / "tiny.mlir").write_text(TINY)
        cmd = [sys.executable, "-m", "shlo_env", "optimize", str(tmp_path / "tiny.mlir"), "-o", str(out),
               "--budget", "60"]
    else:
        script = {"optimize": OPTIMIZE, "jit": JIT_BACKGROUND, "main": BUSY_IN_XLA, "thread": BUSY_IN_XLA}[caller]
        cmd = [sys.executable, "-c", textwrap.dedent(script), caller]
    env = dict(os.environ, SHLO_ENV_TIMEOUT_S="300")
    if delay_s:
        env[TEST_DELAY_VAR] = str(delay_s)
    stderr = open(tmp_path / "stderr.txt", "w")
    # an interactive caller: SIGINT at its default even where the test runner inherited it
    # ignored (a `cmd &` from a non-interactive shell), so Python raises KeyboardInterrupt
    proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=stderr, start_new_session=own_group,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    stderr.close()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        found = workers_of(proc.pid)
        if found:
            return proc, found[0], out
        time.sleep(0.1)
    proc.kill()
    pytest.fail(f"no worker started (exit {proc.poll()}): {(tmp_path / 'stderr.txt').read_text()[-2000:]}")


def assert_worker_gone(caller: int, worker: int, within_s: float = 3.0) -> None:
    deadline = time.monotonic() + within_s
    while workers_of(caller) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = workers_of(caller)
    for pid in left:  # a failing run leaves nothing behind on the shared machine
        _kill_quietly(pid)
    assert not left, f"worker {worker} still running {within_s} s after its caller was signalled"


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGKILL"])
@pytest.mark.parametrize("caller", ["cli", "optimize", "jit"])
def test_no_worker_outlives_a_signalled_caller(tmp_path, caller, sig):
    proc, worker, out = start(tmp_path, caller)
    try:
        time.sleep(0.5)  # the worker is answering its first request (sleeping in the test hook)
        os.kill(proc.pid, getattr(signal, sig))
        rc = proc.wait(timeout=30)
        assert_worker_gone(proc.pid, worker)
        stderr = (tmp_path / "stderr.txt").read_text()
        if caller == "cli" and sig != "SIGKILL":
            word, code = ("interrupted", 130) if sig == "SIGINT" else ("terminated", 143)
            assert rc == code, stderr
            assert stderr.strip().splitlines() == [f"shlo-env optimize: {word}"]
            assert not out.exists()  # nothing half-written
        if sig == "SIGINT" and caller != "cli":
            assert "KeyboardInterrupt" in stderr  # the caller's own Ctrl-C, raised promptly
    finally:
        _kill_quietly(proc.pid)
        proc.wait()


def test_ctrl_c_at_a_terminal_stops_the_cli_with_one_line(tmp_path):
    # the terminal signals the whole process group, worker included: the worker ignores it and
    # the CLI stops it, so the user sees one line (no traceback from either process)
    proc, worker, out = start(tmp_path, "cli", own_group=True)
    try:
        time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=30) == 130
        assert_worker_gone(proc.pid, worker)
        assert (tmp_path / "stderr.txt").read_text().strip().splitlines() == ["shlo-env optimize: interrupted"]
        assert not out.exists()
    finally:
        _kill_quietly(proc.pid)
        proc.wait()


@pytest.mark.parametrize("thread", ["main", "thread"])
def test_a_worker_busy_in_xla_dies_with_its_killed_caller(tmp_path, thread):
    proc, worker, _ = start(tmp_path, thread, delay_s=0)
    try:
        time.sleep(3)  # compiled, and running the endless loop
        assert proc.poll() is None, (tmp_path / "stderr.txt").read_text()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert_worker_gone(proc.pid, worker)
    finally:
        _kill_quietly(proc.pid)
        proc.wait()


def test_an_interrupted_write_leaves_the_output_as_it_was(tmp_path, monkeypatch):
    from shlo_env.ir.program import load
    from shlo_env.api.optimize_file import write_program

    out = tmp_path / "out.mlir"
    out.write_text("the previous run's module")
    real = Path.write_bytes

    def half_then_ctrl_c(self, data):
        real(self, data[: len(data) // 2])
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_bytes", half_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        write_program(load(TINY), str(out))
    assert [p.name for p in tmp_path.iterdir()] == ["out.mlir"]  # no half-written file beside it
    assert out.read_text() == "the previous run's module"
