"""A child process that compiles, runs and times candidate programs.

XLA can abort the whole process or hang on some programs; here that costs one candidate, not
the caller. A crash or timeout raises `CandidateError` and the next call starts a fresh worker
(re-sending the input sets it needs).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from multiprocessing.connection import Connection

import numpy as np


class CandidateError(RuntimeError):
    """A candidate could not be evaluated: kind is 'compile', 'run', 'crash' or 'timeout'."""

    def __init__(self, kind: str, message: str):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


def serve(conn) -> None:
    """The child's loop: answer requests until told to exit or the pipe closes."""
    from shlo_env import runtime

    inputs: dict[str, list] = {}
    while True:
        try:
            cmd, args = conn.recv()
        except (EOFError, KeyboardInterrupt):
            return
        try:
            if cmd == "inputs":
                key, arrays = args
                inputs[key] = (runtime.to_device(arrays), arrays)
                result = None
            elif cmd == "run":
                text, key, passes = args
                result = runtime.execute(runtime.compile(text, passes), inputs[key][0])
            elif cmd == "reference":
                from shlo_env.import_ import load

                text, key, perturb_ulps = args
                result = runtime.reference_outputs(load(text), inputs[key][1], perturb_ulps)
            elif cmd == "time":
                # side by side, each program compiled with its own disabled XLA passes
                items, key, runs, warmup, min_seconds = args
                exes = [runtime.compile(t, passes) for t, passes in items]
                result = runtime.compare(exes, inputs[key][0], runs=runs, warmup=warmup,
                                         min_seconds=min_seconds)
            elif cmd == "cost":
                text, passes = args
                result = runtime.cost_analysis(runtime.compile(text, passes))
            elif cmd == "hlo":
                text, passes = args
                result = runtime.optimized_hlo(runtime.compile(text, passes))
            elif cmd == "exit":
                conn.send(("ok", None))
                return
            else:
                raise ValueError(f"unknown worker command {cmd!r}")
            conn.send(("ok", result))
        except runtime.CompileError as e:
            conn.send(("error", ("compile", str(e))))
        except Exception as e:  # noqa: BLE001 - reported to the parent, never fatal here
            conn.send(("error", ("run", f"{type(e).__name__}: {e}")))


class Worker:
    """A restartable child process; use as a context manager or call `close()`."""

    def __init__(self, timeout_s: float = 300.0):
        self.timeout_s = timeout_s
        self._proc = None
        self._conn = None
        self._inputs: dict[str, list[np.ndarray]] = {}
        self._sent: set[str] = set()
        self._starts = 0

    # --- lifecycle ------------------------------------------------------------------------

    def _ensure(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            return
        self._starts += 1
        # A fresh interpreter (not fork: unsafe once jax runs threads; not multiprocessing's
        # spawn: it re-imports the user's __main__).
        parent, child = socket.socketpair()
        env = dict(os.environ)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
        proc = subprocess.Popen([sys.executable, "-m", "shlo_env._worker_main", str(child.fileno())],
                                pass_fds=(child.fileno(),), env=env, stdin=subprocess.DEVNULL)
        child.close()
        self._proc, self._conn, self._sent = proc, Connection(parent.detach()), set()

    def _kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait(timeout=10)
        if self._conn is not None:
            self._conn.close()
        self._proc = self._conn = None
        self._sent = set()

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            try:
                self._conn.send(("exit", ()))
                if self._conn.poll(5):
                    self._conn.recv()
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

    # --- protocol -------------------------------------------------------------------------

    def _call(self, cmd: str, args: tuple, input_key: str | None = None, timeout_s: float | None = None):
        self._ensure()
        if input_key is not None and input_key not in self._sent:
            if input_key not in self._inputs:
                raise KeyError(f"no input set {input_key!r}; call set_inputs first")
            self._request("inputs", (input_key, self._inputs[input_key]), self.timeout_s)
            self._sent.add(input_key)
        return self._request(cmd, args, timeout_s or self.timeout_s)

    def _request(self, cmd: str, args: tuple, timeout_s: float):
        try:
            self._conn.send((cmd, args))
            ready = self._conn.poll(timeout_s)
        except (BrokenPipeError, OSError, EOFError):
            ready = True  # fall through to recv, which reports the crash
        if not ready:
            self._kill()
            raise CandidateError("timeout", f"no answer within {timeout_s:.0f} s (worker restarted)")
        try:
            status, payload = self._conn.recv()
        except (EOFError, OSError):
            code = None
            if self._proc is not None:
                try:
                    code = self._proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            self._kill()
            raise CandidateError("crash", f"worker process died (exit code {code})") from None
        if status == "error":
            kind, message = payload
            raise CandidateError(kind, message)
        return payload

    # --- commands -------------------------------------------------------------------------

    def set_inputs(self, key: str, arrays: Sequence[np.ndarray]) -> None:
        self._inputs[key] = [np.asarray(a) for a in arrays]
        self._sent.discard(key)

    def run(self, text: str, input_key: str, disabled_passes: Sequence[str] = (),
            timeout_s: float | None = None) -> list[np.ndarray]:
        return self._call("run", (text, input_key, tuple(disabled_passes)), input_key, timeout_s)

    def reference(self, text: str, input_key: str, timeout_s: float | None = None, perturb_ulps: float = 0.0):
        """float64 reference outputs of `text` (None if it cannot be widened), optionally on
        inputs moved by `perturb_ulps` ulps (the sensitivity used by the REASSOCIATE tier)."""
        return self._call("reference", (text, input_key, perturb_ulps), input_key, timeout_s)

    def time(self, texts: Sequence[str], input_key: str, runs: int = 10, warmup: int = 3,
             min_seconds: float = 0.0, disabled_passes: Sequence[str] = (), timeout_s: float | None = None):
        """Time programs side by side (A, B, A, B, ...); see `runtime.compare`."""
        return self.time_each([(t, disabled_passes) for t in texts], input_key, runs, warmup, min_seconds,
                              timeout_s)

    def time_each(self, items: Sequence[tuple[str, Sequence[str]]], input_key: str, runs: int = 10,
                  warmup: int = 3, min_seconds: float = 0.0, timeout_s: float | None = None):
        """Like `time`, with each program's own disabled XLA passes: items are (text, passes)."""
        items = [(t, tuple(p)) for t, p in items]
        return self._call("time", (items, input_key, runs, warmup, min_seconds), input_key, timeout_s)

    def cost(self, text: str, disabled_passes: Sequence[str] = (), timeout_s: float | None = None) -> dict:
        return self._call("cost", (text, tuple(disabled_passes)), None, timeout_s)

    def optimized_hlo(self, text: str, disabled_passes: Sequence[str] = (), timeout_s: float | None = None) -> str:
        return self._call("hlo", (text, tuple(disabled_passes)), None, timeout_s)

    @property
    def restarts(self) -> int:
        """How many times a crashed or hung worker was replaced."""
        return max(0, self._starts - 1)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None


def default_timeout() -> float:
    return float(os.environ.get("SHLO_ENV_TIMEOUT_S", "300"))

