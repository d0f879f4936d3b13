"""A worker request on its own thread while the caller works on the IR.

Only the request runs on the thread: it talks to the worker's process and handles numpy arrays,
never MLIR objects (the bindings are not shared across threads). The search uses it to match
patterns while the worker compiles the original (the probe) or verifies a candidate.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class BackgroundRequest(Generic[T]):
    """`request()` started on a daemon thread. `join()` waits for it; `ended` is when it
    returned or raised (`time.perf_counter()`); `result()` is its value, or its exception
    raised on the caller's thread."""

    def __init__(self, request: Callable[[], T], name: str):
        self._request = request
        self._value: T | None = None
        self._error: BaseException | None = None
        self.ended = 0.0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._request()
        except BaseException as e:  # noqa: BLE001 - re-raised on the caller's thread
            self._error = e
        self.ended = time.perf_counter()

    def join(self) -> None:
        self._thread.join()

    def result(self) -> T:
        self.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


def run_beside(request: Callable[[], T], work: Callable[[], object],
               name: str) -> tuple[BackgroundRequest[T], float]:
    """Run `work` here while `request` runs on a thread; the finished request, and the
    seconds `work` ran on after the request had ended (time the request did not need)."""
    background = BackgroundRequest(request, name)
    try:
        work()
    finally:
        work_end = time.perf_counter()
        background.join()
    return background, max(0.0, work_end - background.ended)
