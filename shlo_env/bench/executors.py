"""Where a sweep's programs are optimized: local worker processes (default) or a Ray cluster.

An executor takes `Task`s (a program, its dataset URI, a strategy, the search's options and
the function that runs the search) and yields one result dict per task, in completion order. The caller (the
sweep in `shlo_env.bench`) writes each result to the results database as it arrives, so an
interrupted sweep loses at most the tasks in flight.

Timings never overlap on one device: every timing request holds a `DeviceLock`, an exclusive
`flock` on a file named after the device in the node's temporary directory. Every process on a
node that times on that device (local pool processes, Ray actors, another `shlo-env bench`)
takes the same lock, while compiles and verification runs go on in parallel. The kernel drops
the lock when its holder dies, so a killed process never leaves it held.

- `LocalExecutor(workers=1)`: the sweep runs in this process (programs are compiled and run
  in a `Worker` child process, as everywhere). `workers=N>1`: N processes (spawned), each with
  its own `Worker`.
- `RayExecutor(workers=N, address=None)`: N Ray actors (one CPU each), each with its own
  `Worker`; `address=None` starts a local Ray (`ray.init(num_cpus=N)`), "auto" or
  "ray://host:port" joins a cluster. Programs travel as MLIR bytecode (a `Program` pickles so).
"""

from __future__ import annotations

import collections
import dataclasses
import os
import signal
import socket
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shlo_env.ir.program import Program

if TYPE_CHECKING:
    from shlo_env.execute.worker import Worker

RECYCLE_WORKER_EVERY = 100  # programs per Worker child (bounds its executable cache)


@dataclasses.dataclass
class Task:
    """One (program, strategy) of a sweep."""

    index: int
    dataset: str
    uri: str
    name: str
    program_hash: str
    strategy: str
    program: Program
    options: Any  # what `optimize` reads: a sweep's SearchOptions, a region's texts and inputs
    # (task, worker, device_lock) -> the result record; a module-level function (pickled by name)
    optimize: Callable[[Task, Any, Any], dict]


class DeviceLock:
    """An exclusive lock per device and node (`flock`), held around timings. Picklable."""

    def __init__(self, name: str | None = None, directory: str | os.PathLike | None = None):
        self.name = name or device_name()
        self.directory = Path(directory) if directory else Path(tempfile.gettempdir()) / "shlo_env-locks"
        self._fd: int | None = None
        self._depth = 0

    @property
    def path(self) -> Path:
        return self.directory / f"{self.name}.lock"

    def __enter__(self):
        import fcntl

        if self._depth == 0:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o666)
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        self._depth += 1
        return self

    def __exit__(self, *exc):
        import fcntl

        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
        return False

    def __getstate__(self):
        return {"name": self.name, "directory": str(self.directory)}

    def __setstate__(self, state):
        self.__init__(state["name"], state["directory"])

    def __repr__(self) -> str:
        return f"DeviceLock({str(self.path)!r})"


def device_name() -> str:
    """The device a worker times on: platform plus the visible accelerators."""
    from shlo_env.execute import runtime

    plat = runtime.platform()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") or os.environ.get("ROCR_VISIBLE_DEVICES") or "0"
    return f"{plat}-{visible.replace(',', '_')}" if plat != "cpu" else "cpu"


def run_task(task: Task, worker, device_lock) -> dict:
    """Optimize one task's program with `task.optimize`; its result dict plus bookkeeping.
    Never raises: an exception becomes a result with status "error"."""
    from shlo_env.measure.results_db import now_iso

    started = now_iso()
    try:
        rec = task.optimize(task, worker, device_lock)
    except Exception as e:  # noqa: BLE001 - one program's failure must not stop the sweep
        rec = {"name": task.name, "status": "error", "strategy": task.strategy,
               "error": f"{type(e).__name__}: {e}", "original_hash": task.program_hash,
               "best_hash": task.program_hash, "traceback": traceback.format_exc(limit=8)}
    rec["original_hash"] = task.program_hash  # the key the sweep asked for
    rec.update(_index=task.index, _started_at=started, _finished_at=now_iso(),
               _worker=f"{socket.gethostname()}:{os.getpid()}")
    return rec


def _error_record(task: Task, message: str) -> dict:
    from shlo_env.measure.results_db import now_iso

    return {"name": task.name, "status": "error", "strategy": task.strategy, "error": message,
            "original_hash": task.program_hash, "best_hash": task.program_hash, "_index": task.index,
            "_started_at": now_iso(), "_finished_at": now_iso(), "_worker": ""}


class _TaskRunner:
    """A Worker child reused across tasks (restarted every RECYCLE_WORKER_EVERY programs)."""

    def __init__(self, timeout_s: float | None, device_lock):
        self.timeout_s = timeout_s
        self.lock = device_lock
        self.worker: Worker | None = None
        self.done = 0

    def run(self, task: Task) -> dict:
        from shlo_env.execute.worker import Worker, default_timeout

        if self.worker is None or self.done >= RECYCLE_WORKER_EVERY:
            self.close()
            self.worker = Worker(self.timeout_s or default_timeout())
            self.done = 0
        self.done += 1
        return run_task(task, self.worker, self.lock)

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None


# --- local ----------------------------------------------------------------------------------------

_PROCESS_RUNNER: _TaskRunner | None = None


def _pool_init(timeout_s, device_lock, parent_pid: int, kernel: bool) -> None:
    """In each pool process: it dies with the sweep's process (and its Worker child with it), and
    leaves Ctrl-C, which the terminal sends to the whole group, to the sweep (which kills it)."""
    global _PROCESS_RUNNER
    from shlo_env import _jax_compat
    from shlo_env.execute.worker import die_with_parent

    _jax_compat.share_device(os.environ)  # before this process first touches the device
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent_pid, kernel=kernel)
    _PROCESS_RUNNER = _TaskRunner(timeout_s, device_lock)


def _pool_run(task: Task) -> dict:
    assert _PROCESS_RUNNER is not None, "_pool_init runs first in every pool process"
    return _PROCESS_RUNNER.run(task)


class LocalExecutor:
    name = "local"

    def __init__(self, workers: int = 1, timeout_s: float | None = None, device_lock=None):
        self.workers = max(1, int(workers))
        self.timeout_s = timeout_s
        self.lock = device_lock if device_lock is not None else DeviceLock()

    def run(self, tasks: Iterable[Task]) -> Iterator[dict]:
        tasks = list(tasks)
        if self.workers == 1 or len(tasks) <= 1:
            runner = _TaskRunner(self.timeout_s, self.lock)
            try:
                for t in tasks:
                    yield runner.run(t)
            finally:
                runner.close()
            return
        import concurrent.futures as cf
        import multiprocessing

        from shlo_env.execute.worker import WAKE_S

        ctx = multiprocessing.get_context("spawn")
        # the kernel's parent-death signal follows the thread that starts the pool's processes
        # (this one, in submit): only the main thread is sure to live as long as the process
        kernel = threading.current_thread() is threading.main_thread()
        pool = cf.ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx, initializer=_pool_init,
                                      initargs=(self.timeout_s, self.lock, os.getpid(), kernel))
        futures = {pool.submit(_pool_run, t): t for t in tasks}
        pending = set(futures)
        finished = False
        try:
            while pending:
                # in slices, so that Ctrl-C is raised here promptly (see shlo_env.execute.worker._wait)
                done, pending = cf.wait(pending, timeout=WAKE_S, return_when=cf.FIRST_COMPLETED)
                for f in done:
                    try:
                        yield f.result()
                    except Exception as e:  # noqa: BLE001 - a pool process died (BrokenProcessPool, ...)
                        yield _error_record(futures[f], f"{type(e).__name__}: {e}")
            finished = True
        finally:
            if not finished:  # interrupted, or the consumer stopped: the tasks in flight are abandoned
                # Python 3.14 has kill_workers(); before, the pool's processes are only in _processes
                for proc in list((getattr(pool, "_processes", None) or {}).values()):
                    proc.kill()  # each one's Worker child dies with it (die_with_parent)
            pool.shutdown(wait=finished, cancel_futures=True)


# --- Ray ------------------------------------------------------------------------------------------

def require_ray():
    try:
        import ray
    except ImportError:
        raise SystemExit("the Ray executor needs Ray: pip install 'shlo_env[ray]' (or pip install 'ray>=2.9')") \
            from None
    return ray


class SweepActor:
    """A Ray actor: one Worker child, tasks one at a time. Timings hold the node's DeviceLock."""

    def __init__(self, timeout_s: float | None = None, lock_dir: str | None = None):
        self.runner = _TaskRunner(timeout_s, DeviceLock(directory=lock_dir))

    def run(self, task: Task) -> dict:
        return self.runner.run(task)

    def where(self) -> str:
        return f"{socket.gethostname()}:{os.getpid()}"

    def shutdown(self) -> None:
        self.runner.close()


class RayExecutor:
    name = "ray"

    def __init__(self, workers: int | None = None, address: str | None = None, timeout_s: float | None = None,
                 lock_dir: str | None = None, init_kwargs: dict | None = None):
        self.ray = require_ray()
        self.workers = max(1, int(workers)) if workers else None  # None: one per CPU of the cluster
        self.address = address
        self.timeout_s = timeout_s
        self.lock_dir = lock_dir
        self.init_kwargs = dict(init_kwargs or {})

    def _init(self) -> bool:
        ray = self.ray
        if ray.is_initialized():
            return False
        kwargs: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
        if self.address is None:
            kwargs["num_cpus"] = self.workers or os.cpu_count() or 1
            # the actors must import this package: the driver's sys.path travels with them
            kwargs["runtime_env"] = {"env_vars": {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}}
        else:
            kwargs["address"] = self.address
        kwargs.update(self.init_kwargs)
        import warnings

        with warnings.catch_warnings():  # ray.init forks+execs its processes: jax's fork warning is moot
            warnings.filterwarnings("ignore", message="os.fork\\(\\) was called", category=RuntimeWarning)
            ray.init(**kwargs)
        return True

    def run(self, tasks: Iterable[Task]) -> Iterator[dict]:
        ray = self.ray
        tasks = collections.deque(tasks)
        if not tasks:
            return
        started = self._init()
        workers = self.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        actor_cls = ray.remote(num_cpus=1)(SweepActor)
        actors = [actor_cls.remote(self.timeout_s, self.lock_dir) for _ in range(min(workers, len(tasks)))]
        from shlo_env.execute.worker import WAKE_S

        idle = list(actors)
        inflight: dict = {}
        finished = False
        try:
            while tasks or inflight:
                while tasks and idle:
                    actor, task = idle.pop(), tasks.popleft()
                    inflight[actor.run.remote(task)] = (actor, task)
                # in slices, so that Ctrl-C is raised here promptly (see shlo_env.execute.worker._wait)
                ready, _ = ray.wait(list(inflight), num_returns=1, timeout=WAKE_S)
                if not ready:
                    continue
                ref = ready[0]
                actor, task = inflight.pop(ref)
                try:
                    yield ray.get(ref)
                    idle.append(actor)
                except ray.exceptions.RayActorError as e:  # the actor process died: replace it
                    yield _error_record(task, f"Ray actor died: {str(e).splitlines()[0] if str(e) else e!r}")
                    actors.remove(actor)
                    fresh = actor_cls.remote(self.timeout_s, self.lock_dir)
                    actors.append(fresh)
                    idle.append(fresh)
                except ray.exceptions.RayError as e:
                    yield _error_record(task, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else e!r}")
                    idle.append(actor)
            finished = True
        finally:
            for a in actors:
                if finished:  # idle actors close their Worker children; a busy one is just killed
                    try:
                        ray.get(a.shutdown.remote(), timeout=30)
                    except Exception:  # noqa: BLE001 - best effort
                        pass
                ray.kill(a)  # its Worker child dies with it (die_with_parent)
            if started:
                ray.shutdown()


def make_executor(kind: str, workers: int | None = None, *, address: str | None = None,
                  timeout_s: float | None = None):
    """`workers=None`: 1 local process, or one Ray actor per CPU of the Ray cluster."""
    if kind == "local":
        return LocalExecutor(workers or 1, timeout_s)
    if kind == "ray":
        return RayExecutor(workers, address, timeout_s)
    raise ValueError(f"unknown executor {kind!r}; choose local or ray")


__all__ = ["DeviceLock", "LocalExecutor", "RayExecutor", "SweepActor", "Task", "make_executor", "run_task"]
