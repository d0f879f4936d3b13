"""A child process that compiles, runs and times candidate programs.

XLA can abort the whole process or hang on some programs; here that costs one candidate, not
the caller. A crash or timeout raises `CandidateError` and the next call starts a fresh worker
(re-sending the input sets it needs).

A worker never outlives its caller. The child exits when the caller process dies, `kill -9`
included (`die_with_parent`: the kernel's parent-death signal, plus a thread that watches the
parent's pid and the socket), and it ignores SIGINT: on Ctrl-C the caller, whose waits for an
answer wake up every `WAKE_S`, kills the child and raises `KeyboardInterrupt`.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from shlo_env import _jax_compat, logs
from shlo_env.execute._parent_watch import WAKE_S, die_with_parent
from shlo_env.execute.runners import COMMANDS, CandidateError, FailureKind, InProcess
from shlo_env.execute.runtime import Timing
from shlo_env.measure.timing_policy import QUICK, TimingPolicy, default_timeout  # noqa: F401  (re-exported)

log = logs.get("worker")  # SHLO_ENV_LOGS=worker: starts, and kills after a timeout or a crash

# Seconds the child sleeps before answering each request: lets tests interrupt a request in flight.
TEST_DELAY_VAR = "SHLO_ENV_WORKER_TEST_DELAY_S"


def send_message(conn: Connection, obj: Any) -> None:
    """Send `obj` with its arrays' bytes out of band (pickle protocol 5), written straight to
    the socket: a train step's outputs (90 MB for the haiku ResNet18's parameters and optimizer
    state) are not copied into and out of one pickle (0.6 s a run there; 0.1 s this way)."""
    buffers: list[pickle.PickleBuffer] = []
    body = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]  # flat byte views: format "B", C-contiguous
    conn.send_bytes(pickle.dumps([r.nbytes for r in raws]))
    conn.send_bytes(body)
    for view in raws:
        while len(view):
            view = view[os.write(conn.fileno(), view):]


def recv_message(conn: Connection) -> Any:
    """What `send_message` sent: arrays land in writable buffers of their own."""
    sizes = pickle.loads(conn.recv_bytes())
    body = conn.recv_bytes()
    buffers = []
    for n in sizes:
        buf = bytearray(n)
        view = memoryview(buf)
        while len(view):
            got = os.readv(conn.fileno(), [view])
            if not got:
                raise EOFError("the other end closed the connection during a message")
            view = view[got:]
        buffers.append(buf)
    return pickle.loads(body, buffers=buffers)


def serve(conn) -> None:
    """The child's loop: answer requests until told to exit or the pipe closes. A request is
    (command, keyword arguments), answered by the `InProcess` method of that name."""
    runner = InProcess()
    delay = float(os.environ.get(TEST_DELAY_VAR) or 0)
    while True:
        try:
            cmd, kwargs = recv_message(conn)
        except (EOFError, OSError, KeyboardInterrupt):
            return
        if cmd == "exit":
            send_message(conn, ("ok", None))
            return
        time.sleep(delay)
        try:
            if cmd not in COMMANDS:
                raise ValueError(f"unknown worker command {cmd!r}")
            answer = ("ok", getattr(runner, cmd)(**kwargs))
        except CandidateError as e:
            answer = ("error", (e.kind.value, e.message))
        except Exception as e:  # noqa: BLE001 - reported to the parent, never fatal here
            answer = ("error", (FailureKind.RUN.value, f"{type(e).__name__}: {e}"))
        send_message(conn, answer)


WORKER_MAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_worker_main.py")  # run as a file
_live: "weakref.WeakSet[Worker]" = weakref.WeakSet()  # killed at interpreter exit
_exiting = False


@atexit.register
def _kill_all_at_exit() -> None:
    """A worker still in use at exit (a `jit(background=True)` search, a thread) is killed, and
    no new one starts; its thread is a daemon that dies with the interpreter."""
    global _exiting
    _exiting = True
    for w in list(_live):
        w._kill()


class Worker:
    """A `Runner` (see `shlo_env.execute.runners`) whose requests run in a restartable child process;
    use as a context manager or call `close()`. `timeout_s` defaults to `SHLO_ENV_TIMEOUT_S`.
    Threads may share one: their requests take turns (`Verifier.prefetch_references`)."""

    def __init__(self, timeout_s: float | None = None):
        self.timeout_s: float = timeout_s if timeout_s is not None else default_timeout()
        self._proc: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._inputs: dict[str, list[np.ndarray]] = {}
        self._sent: set[str] = set()
        self._starts = 0
        self._turn = threading.RLock()  # one request at a time, whichever thread sends it

    # --- lifecycle ------------------------------------------------------------------------

    def _ensure(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            return
        if _exiting:
            raise CandidateError(FailureKind.CRASH, "the interpreter is exiting: no new worker")
        self._starts += 1
        # A fresh interpreter (not fork: unsafe once jax runs threads; not multiprocessing's
        # spawn: it re-imports the user's __main__).
        parent, child = socket.socketpair()
        env = dict(os.environ)
        _jax_compat.quiet_xla_logs(env)
        _jax_compat.share_device(env)
        args = [sys.executable, WORKER_MAIN, str(child.fileno()), str(os.getpid())]
        if threading.current_thread() is threading.main_thread():
            args.append("--pdeathsig")  # see die_with_parent: only a thread that lives as long as we do
        proc = subprocess.Popen(args, pass_fds=(child.fileno(),), env=env, stdin=subprocess.DEVNULL)
        child.close()
        self._proc, self._conn, self._sent = proc, Connection(parent.detach()), set()
        _live.add(self)
        log.info("worker process %d started%s", proc.pid, f" (restart {self._starts - 1})" if self._starts > 1 else "")

    def start(self) -> "Worker":
        """Start the child now rather than at the first request (it imports jax meanwhile);
        from the main thread, so that it dies with this process (`die_with_parent`)."""
        with self._turn:
            self._ensure()
        return self

    def ready(self, timeout_s: float | None = None) -> None:
        """Start the child if needed and wait until it answers (its jax import done): a caller
        that times its first request then times the request, not the child's start."""
        self._call("drop_inputs", None, timeout_s, keys=[])

    def turn(self) -> threading.RLock:
        """Held, no request of another thread runs on this worker (each request takes it)."""
        return self._turn

    def _kill(self) -> None:
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        self._sent = set()
        if proc is not None:
            proc.kill()
            proc.wait(timeout=10)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None and self._conn is not None:
            try:
                send_message(self._conn, ("exit", {}))
                if _wait(self._conn, 5):
                    recv_message(self._conn)
            except (OSError, EOFError, BrokenPipeError):
                pass
        self._kill()

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # pragma: no cover - best effort
        try:
            self._kill()
        except Exception:  # noqa: BLE001
            pass

    # --- requests -------------------------------------------------------------------------

    def _call(self, cmd: str, needs: str | None, timeout_s: float | None, /, **kwargs: Any) -> Any:
        """Send one request (first the input set it `needs`, if the child does not have it yet).
        `timeout_s` bounds the whole call: the child's start and the input set's transfer too
        (a search's budget counts them)."""
        limit = timeout_s or self.timeout_s
        with self._turn:
            end = time.monotonic() + limit
            self._ensure()
            if needs is not None and needs not in self._sent:
                if needs not in self._inputs:
                    raise KeyError(f"no input set {needs!r}; call set_inputs first")
                self._request("set_inputs", {"key": needs, "arrays": self._inputs[needs]}, limit)
                self._sent.add(needs)
            return self._request(cmd, kwargs, max(0.1, end - time.monotonic()))

    def _request(self, cmd: str, kwargs: dict, timeout_s: float) -> Any:
        try:
            return self._exchange(cmd, kwargs, timeout_s)
        except CandidateError:
            raise
        except BaseException:
            # Interrupted (Ctrl-C, SIGTERM turned into an exception) with the request in flight:
            # stop the child now, and its answer can never reach the next request.
            self._kill()
            raise

    def _exchange(self, cmd: str, kwargs: dict, timeout_s: float) -> Any:
        conn = self._conn
        assert conn is not None, "_ensure starts the child first"
        try:
            send_message(conn, (cmd, kwargs))
            ready = _wait(conn, timeout_s)
        except (BrokenPipeError, OSError, EOFError):
            ready = True  # fall through to recv, which reports the crash
        if not ready:
            log.info("%s: no answer within %.0f s; the worker process is killed", cmd, timeout_s)
            self._kill()
            raise CandidateError(FailureKind.TIMEOUT, f"no answer within {timeout_s:.0f} s (worker restarted)")
        try:
            status, payload = recv_message(conn)
        except (EOFError, OSError):
            code = None
            if self._proc is not None:
                try:
                    code = self._proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            log.info("%s: the worker process died (exit code %s)", cmd, code)
            self._kill()
            raise CandidateError(FailureKind.CRASH, f"worker process died (exit code {code})") from None
        if status == "error":
            kind, message = payload
            raise CandidateError(kind, message)
        return payload

    # --- the Runner protocol (see shlo_env.execute.runners for what each request does) ----------------

    def set_inputs(self, key: str, arrays: Sequence[np.ndarray]) -> None:
        with self._turn:
            self._inputs[key] = [np.asarray(a) for a in arrays]
            self._sent.discard(key)

    def drop_inputs(self, keys: Sequence[str]) -> None:
        """Forget input sets here and, where it holds them, in the child (bounded memory: a warm
        worker serves search after search)."""
        with self._turn:
            sent = [k for k in keys if k in self._sent]
            for k in keys:
                self._inputs.pop(k, None)
                self._sent.discard(k)
            if sent and self._proc is not None and self._proc.poll() is None:
                try:
                    self._request("drop_inputs", {"keys": sent}, self.timeout_s)
                except CandidateError:
                    pass  # a child that cannot answer holds nothing for long: it is restarted

    def run(self, text: str, input_key: str, disabled_passes: Sequence[str] = (),
            timeout_s: float | None = None) -> list[np.ndarray]:
        return self._call("run", input_key, timeout_s, text=text, input_key=input_key,
                          disabled_passes=tuple(disabled_passes))

    def reference(self, text: str, input_key: str, timeout_s: float | None = None,
                  perturb_ulps: float = 0.0) -> list[np.ndarray] | None:
        return self._call("reference", input_key, timeout_s, text=text, input_key=input_key,
                          perturb_ulps=perturb_ulps)

    def time(self, texts: Sequence[str], input_key: str, timing: TimingPolicy = QUICK,
             disabled_passes: Sequence[str] = (), timeout_s: float | None = None) -> list[Timing]:
        return self.time_each([(t, disabled_passes) for t in texts], input_key, timing, timeout_s)

    def time_each(self, items: Sequence[tuple[str, Sequence[str]]], input_key: str,
                  timing: TimingPolicy = QUICK, timeout_s: float | None = None) -> list[Timing]:
        return self._call("time_each", input_key, timeout_s, items=[(t, tuple(p)) for t, p in items],
                          input_key=input_key, timing=timing)

    def cost(self, text: str, disabled_passes: Sequence[str] = (), timeout_s: float | None = None) -> dict:
        return self._call("cost", None, timeout_s, text=text, disabled_passes=tuple(disabled_passes))

    def optimized_hlo(self, text: str, disabled_passes: Sequence[str] = (), timeout_s: float | None = None) -> str:
        return self._call("optimized_hlo", None, timeout_s, text=text, disabled_passes=tuple(disabled_passes))

    def profile(self, text: str, input_key: str, runs: int = 5, warmup: int = 1, timeout_s: float | None = None):
        """`InProcess.profile` in the child: stopped (the child killed) past `timeout_s`."""
        return self._call("profile", input_key, timeout_s, text=text, input_key=input_key, runs=runs, warmup=warmup)

    @property
    def input_bytes(self) -> int:
        """Bytes of the input sets registered (held here and, once sent, in the child)."""
        return sum(a.nbytes for arrays in self._inputs.values() for a in arrays)

    @property
    def restarts(self) -> int:
        """How many times a crashed or hung worker was replaced."""
        return max(0, self._starts - 1)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None


def _wait(conn: Connection, timeout_s: float) -> bool:
    """`conn.poll(timeout_s)` in slices of `WAKE_S`: a signal that lands on another thread (XLA's)
    does not interrupt the main thread's wait, so it wakes up to let Python run the handler."""
    end = time.monotonic() + timeout_s
    while True:
        left = end - time.monotonic()
        if conn.poll(max(0.0, min(WAKE_S, left))):
            return True
        if left <= WAKE_S:
            return False


# --- one warm worker per process, for `optimize()` -------------------------------------------

SHARED_INPUT_BYTES = 512 << 20  # input sets the warm worker may keep across calls
_shared: Worker | None = None
_shared_lock = threading.Lock()


@contextlib.contextmanager
def shared(timeout_s: float | None = None) -> Iterator[Worker]:
    """The process's warm worker for `optimize()` calls: started once (a fresh interpreter and
    jax import cost seconds of every call's budget otherwise) and kept, so a later call on the
    same program also finds the original's executable and float64 reference compiled (the
    child caches executables by text, `runtime.compile`). Each use sets its `timeout_s`. One
    caller at a time: a second thread meanwhile gets a fresh worker of its own (closed after).
    A worker that crashed or hung is restarted by its next request, as any `Worker` is. Input
    sets are kept by name in both processes, so once they hold more than `SHARED_INPUT_BYTES`
    the worker is closed after the call (the next one starts afresh)."""
    global _shared
    if not _shared_lock.acquire(blocking=False):
        with Worker(timeout_s) as own:
            yield own
        return
    try:
        if _shared is None:
            _shared = Worker(timeout_s)  # killed at exit by _kill_all_at_exit, busy or not
        _shared.timeout_s = timeout_s if timeout_s is not None else default_timeout()
        yield _shared
    finally:
        if _shared is not None and _shared.input_bytes > SHARED_INPUT_BYTES:
            _close_shared()
        _shared_lock.release()


def _close_shared() -> None:
    global _shared
    if _shared is not None:
        _shared.close()
        _shared = None


__all__ = ["CandidateError", "FailureKind", "Worker", "default_timeout", "die_with_parent", "serve", "shared"]
