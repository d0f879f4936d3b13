"""Peak resident memory of processes (Linux `/proc`), for the bench's record of what a search held.

`reset_peak(pid)` starts a new peak (`/proc/PID/clear_refs`, value 5: the kernel resets the
process's high-water mark, VmHWM); `peak_bytes(pid)` reads it. A search resets its own process
and its worker at its start and reads both at its end, so the bench CSV's `peak_rss_mb` is what
that search held, not the process's lifetime peak. Where `/proc` or the reset is not available
(another OS, another user's process) the peak is the lifetime one, or None. Imports nothing of
the package (the facts floor).
"""

from __future__ import annotations


def _proc(pid: int | None) -> str:
    return f"/proc/{'self' if pid is None else int(pid)}"


def reset_peak(pid: int | None = None) -> bool:
    """Start a new peak-RSS measurement of `pid` (None: this process); False where not possible."""
    try:
        with open(f"{_proc(pid)}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_bytes(pid: int | None = None) -> int | None:
    """Peak resident set size of `pid` (None: this process) since its start or last `reset_peak`."""
    try:
        with open(f"{_proc(pid)}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def peak_mb(pids) -> float | None:
    """The summed peaks of several processes in MiB (those that can be read), or None."""
    peaks = [p for p in (peak_bytes(pid) for pid in pids) if p is not None]
    return sum(peaks) / (1 << 20) if peaks else None


__all__ = ["peak_bytes", "peak_mb", "reset_peak"]
