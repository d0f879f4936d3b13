"""The runner protocol: what compiles, runs and times programs for the search and the `Env`.

A runner holds named input sets and answers requests on StableHLO text. Three implement it:

- `shlo_env.execute.worker.Worker`: the requests run in a child process, so a program that aborts or
  hangs XLA costs that request (`CandidateError`), not the caller. The default.
- `InProcess` (below): the same requests in this process (`Env(isolate=False)`): faster, but a
  program that aborts XLA takes the caller with it. The worker's child serves its requests
  with an `InProcess`, so both run the same code.
- `LockedWorker`: another runner whose timing requests hold a lock.

Every failure a runner reports is a `CandidateError` whose `kind` is a `FailureKind`.
"""

from __future__ import annotations

import collections
import contextlib
import enum
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable

import numpy as np

from shlo_env.execute import runtime
from shlo_env.measure.timing_policy import QUICK, TimingPolicy


class FailureKind(enum.StrEnum):
    """Why a candidate was rejected (a `StrEnum`: compares equal to its value, e.g. "compile")."""

    COMPILE = "compile"  # XLA rejected the program
    RUN = "run"  # it compiled, but running it raised
    CRASH = "crash"  # the worker process died
    TIMEOUT = "timeout"  # no answer within the worker's timeout (the worker was restarted)
    UNSUPPORTED = "unsupported"  # the runner cannot do what was asked
    MISMATCH = "mismatch"  # outputs differ from the original's beyond the tier (verification)
    BUDGET = "budget"  # abandoned at the search's deadline: not the candidate's fault


class CandidateError(RuntimeError):
    """A runner request failed: `kind` says why (a `FailureKind`), `message` how."""

    def __init__(self, kind: FailureKind | str, message: str):
        self.kind = FailureKind(kind)
        self.message = message
        super().__init__(f"{self.kind}: {message}")


Arrays = list[np.ndarray]


@runtime_checkable
class Runner(Protocol):
    """Compiles, runs and times StableHLO programs given as text.

    Programs run on input sets registered by name with `set_inputs`. `disabled_passes` are XLA
    passes to disable when compiling, and `name=value` XLA option actions
    (`shlo_env.execute.xla_options`); compiled executables are cached by (text, passes). `timeout_s`
    bounds one request where the runner can enforce it (`Worker`; `None`: the runner's own
    `timeout_s`). Every failure raises `CandidateError`.
    """

    @property
    def timeout_s(self) -> float | None:
        """Seconds one request may take by default; None where the runner cannot stop a request."""
        ...

    def set_inputs(self, key: str, arrays: Sequence[np.ndarray]) -> None:
        """Register (or replace) the input set `key`."""
        ...

    def drop_inputs(self, keys: Sequence[str]) -> None:
        """Forget the input sets `keys` and what was computed on them (a search ended)."""
        ...

    def run(self, text: str, input_key: str, disabled_passes: Sequence[str] = (),
            timeout_s: float | None = None) -> Arrays:
        """Compile `text` and run it once on input set `input_key`; the outputs as numpy arrays."""
        ...

    def reference(self, text: str, input_key: str, timeout_s: float | None = None,
                  perturb_ulps: float = 0.0) -> Arrays | None:
        """float64 reference outputs of `text` (None if it cannot be widened), optionally on
        inputs moved by `perturb_ulps` ulps (the sensitivity used by the REASSOCIATE tier)."""
        ...

    def time(self, texts: Sequence[str], input_key: str, timing: TimingPolicy = QUICK,
             disabled_passes: Sequence[str] = (), timeout_s: float | None = None) -> list[runtime.Timing]:
        """Time programs side by side (A, B, A, B, ...) as `timing` says; see `runtime.compare`."""
        ...

    def time_each(self, items: Sequence[tuple[str, Sequence[str]]], input_key: str,
                  timing: TimingPolicy = QUICK, timeout_s: float | None = None) -> list[runtime.Timing]:
        """Like `time`, with each program's own disabled XLA passes: items are (text, passes)."""
        ...

    def cost(self, text: str, disabled_passes: Sequence[str] = (), timeout_s: float | None = None) -> dict:
        """XLA's cost analysis of the compiled program: {'flops', 'bytes', 'transcendentals'}."""
        ...

    def optimized_hlo(self, text: str, disabled_passes: Sequence[str] = (),
                      timeout_s: float | None = None) -> str:
        """XLA's optimized HLO of the compiled program, canonical text (see `runtime.optimized_hlo`)."""
        ...

    def close(self) -> None:
        """Release what the runner holds (a child process); it may be used again afterwards."""
        ...


class InProcess:
    """A `Runner` in this process. Errors are raised as `CandidateError` all the same.

    Its methods are also the worker's command table: the worker's child process answers
    each request by calling the `InProcess` method of that name (`COMMANDS`)."""

    timeout_s: float | None = None  # a request in this process cannot be stopped

    REFERENCES_KEPT = 16  # float64 reference outputs remembered (a warm worker serves many searches)

    def __init__(self) -> None:
        self._inputs: dict[str, Arrays] = {}
        self._on_device: dict[str, list] = {}  # moved to the device on first use, once
        # (text, input key, ulps) -> reference outputs: a later search of the same program in
        # this runner (`shlo_env.execute.worker.shared`) neither compiles nor runs them again
        self._references: collections.OrderedDict = collections.OrderedDict()

    def set_inputs(self, key: str, arrays: Sequence[np.ndarray]) -> None:
        self._inputs[key] = [np.asarray(a) for a in arrays]
        self._on_device.pop(key, None)
        for k in [k for k in self._references if k[1] == key]:
            del self._references[k]  # computed on the arrays this key held before

    def drop_inputs(self, keys: Sequence[str]) -> None:
        for key in keys:
            self._inputs.pop(key, None)
            self._on_device.pop(key, None)
        for k in [k for k in self._references if k[1] in set(keys)]:
            del self._references[k]

    def _host(self, key: str) -> Arrays:
        if key not in self._inputs:
            raise KeyError(f"no input set {key!r}; call set_inputs first")
        return self._inputs[key]

    def _device(self, key: str) -> list:
        if key not in self._on_device:
            self._on_device[key] = runtime.to_device(self._host(key))
        return self._on_device[key]

    def run(self, text: str, input_key: str, disabled_passes: Sequence[str] = (),
            timeout_s: float | None = None) -> Arrays:
        return _guard(lambda: runtime.execute(runtime.compile(text, tuple(disabled_passes)), self._device(input_key)))

    def reference(self, text: str, input_key: str, timeout_s: float | None = None,
                  perturb_ulps: float = 0.0) -> Arrays | None:
        from shlo_env.ir.program import load

        k = (text, input_key, perturb_ulps)
        if k in self._references:
            self._references.move_to_end(k)
            return self._references[k]
        out = _guard(lambda: runtime.reference_outputs(load(text), self._host(input_key), perturb_ulps))
        self._references[k] = out
        while len(self._references) > self.REFERENCES_KEPT:
            self._references.popitem(last=False)
        return out

    def time(self, texts: Sequence[str], input_key: str, timing: TimingPolicy = QUICK,
             disabled_passes: Sequence[str] = (), timeout_s: float | None = None) -> list[runtime.Timing]:
        return self.time_each([(t, disabled_passes) for t in texts], input_key, timing, timeout_s)

    def time_each(self, items: Sequence[tuple[str, Sequence[str]]], input_key: str,
                  timing: TimingPolicy = QUICK, timeout_s: float | None = None) -> list[runtime.Timing]:
        def go():
            exes = [runtime.compile(t, tuple(passes)) for t, passes in items]
            return runtime.compare(exes, self._device(input_key), timing)
        return _guard(go)

    def cost(self, text: str, disabled_passes: Sequence[str] = (), timeout_s: float | None = None) -> dict:
        return _guard(lambda: runtime.cost_analysis(runtime.compile(text, tuple(disabled_passes))))

    def optimized_hlo(self, text: str, disabled_passes: Sequence[str] = (),
                      timeout_s: float | None = None) -> str:
        return _guard(lambda: runtime.optimized_hlo(runtime.compile(text, tuple(disabled_passes))))

    def profile(self, text: str, input_key: str, runs: int = 5, warmup: int = 1, timeout_s: float | None = None):
        """Per-kernel profile of the program `text` on the input set `input_key`
        (`kernel_profile.profile_program`, no pattern sites): in a worker, a profile that runs
        long (tracing a loop's every iteration) is stopped at its timeout like any request."""
        from shlo_env.ir.program import load
        from shlo_env.measure.kernel_profile import profile_program

        return _guard(lambda: profile_program(load(text), self._host(input_key), runs=runs, warmup=warmup,
                                              patterns=()))

    def close(self) -> None:
        pass


# The requests a `Worker` sends to its child, each answered by the `InProcess` method of that
# name (arguments as the method takes them; the worker never sends a timeout_s).
COMMANDS = frozenset({"set_inputs", "drop_inputs", "run", "reference", "time_each", "cost", "optimized_hlo",
                      "profile"})


def _guard(fn):
    """`fn()`, with XLA's and Python's errors reported as `CandidateError`s."""
    try:
        return fn()
    except runtime.CompileError as e:
        raise CandidateError(FailureKind.COMPILE, str(e)) from e
    except CandidateError:
        raise
    except Exception as e:  # noqa: BLE001 - a candidate's failure, reported, never fatal
        raise CandidateError(FailureKind.RUN, f"{type(e).__name__}: {e}") from e


class LockedWorker:
    """A `Runner` whose timing requests hold `lock` (compiles and verification runs do not):
    several searches sharing a device never time at the same moment."""

    def __init__(self, worker: Runner, lock: AbstractContextManager):
        self._worker = worker
        self._lock = lock
        self.timeout_s = worker.timeout_s

    @property
    def worker(self) -> Runner:
        """The runner whose timings this one locks."""
        return self._worker

    def like(self, worker: Runner) -> "LockedWorker":
        """`worker`, its timings holding this one's lock."""
        return LockedWorker(worker, self._lock)

    def turn(self) -> AbstractContextManager:
        """The wrapped runner's turn (`Worker.turn`), where it has one."""
        turn = getattr(self._worker, "turn", None)
        return turn() if turn is not None else contextlib.nullcontext()

    def set_inputs(self, key: str, arrays: Sequence[np.ndarray]) -> None:
        self._worker.set_inputs(key, arrays)

    def drop_inputs(self, keys: Sequence[str]) -> None:
        drop = getattr(self._worker, "drop_inputs", None)
        if drop is not None:
            drop(keys)

    def run(self, text: str, input_key: str, disabled_passes: Sequence[str] = (),
            timeout_s: float | None = None) -> list[np.ndarray]:
        return self._worker.run(text, input_key, disabled_passes, timeout_s)

    def reference(self, text: str, input_key: str, timeout_s: float | None = None,
                  perturb_ulps: float = 0.0) -> list[np.ndarray] | None:
        return self._worker.reference(text, input_key, timeout_s, perturb_ulps)

    def time(self, texts: Sequence[str], input_key: str, timing: TimingPolicy = QUICK,
             disabled_passes: Sequence[str] = (), timeout_s: float | None = None) -> list[runtime.Timing]:
        with self._lock:
            return self._worker.time(texts, input_key, timing, disabled_passes, timeout_s)

    def time_each(self, items: Sequence[tuple[str, Sequence[str]]], input_key: str,
                  timing: TimingPolicy = QUICK, timeout_s: float | None = None) -> list[runtime.Timing]:
        with self._lock:
            return self._worker.time_each(items, input_key, timing, timeout_s)

    def cost(self, text: str, disabled_passes: Sequence[str] = (), timeout_s: float | None = None) -> dict:
        return self._worker.cost(text, disabled_passes, timeout_s)

    def optimized_hlo(self, text: str, disabled_passes: Sequence[str] = (), timeout_s: float | None = None) -> str:
        return self._worker.optimized_hlo(text, disabled_passes, timeout_s)

    def profile(self, text: str, input_key: str, runs: int = 5, warmup: int = 1, timeout_s: float | None = None):
        profile = getattr(self._worker, "profile")  # a worker's or an in-process runner's: not the protocol's
        with self._lock:  # traced runs: a timing
            return profile(text, input_key, runs, warmup, timeout_s)

    def close(self) -> None:
        self._worker.close()


__all__ = ["COMMANDS", "CandidateError", "FailureKind", "InProcess", "LockedWorker", "Runner"]
