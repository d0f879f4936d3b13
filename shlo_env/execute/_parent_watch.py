"""Exit a process when its parent dies, for any reason (`kill -9` included).

Standard library only: the worker child (`_worker_main.py`) runs this before it imports the
package, which takes seconds; bench's pool processes use it too.
"""

import ctypes
import os
import select
import signal
import socket
import sys
import threading
import time

WAKE_S = 0.2  # how often a child watching its parent, and a caller waiting for an answer, wake up
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent_pid: int, kernel: bool = True, fd: int | None = None) -> None:
    """Exit this process as soon as `parent_pid` (its parent) dies, for any reason.

    `kernel`: also ask Linux for SIGKILL when the parent dies (`PR_SET_PDEATHSIG`), which works
    while this process is busy in native code. The kernel sends it when the *thread* that
    started this process exits, so a parent asks for it only from its main thread. Always: a
    daemon thread checks every `WAKE_S` that the parent is still the parent (an orphan is
    re-parented) and that the socket `fd` to it is not closed."""
    if kernel and sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover - no prctl: the watcher remains
            pass
    # Not our parent: it died before prctl took effect, or `sys.executable` is a wrapper that
    # forks Python (then the caller's pid is watched instead).
    direct = os.getppid() == parent_pid
    if not _parent_alive(parent_pid, direct):
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent_pid, direct, fd), name="shlo_env parent watch",
                     daemon=True).start()


def _parent_alive(parent_pid: int, direct: bool) -> bool:
    if direct:
        return os.getppid() == parent_pid  # an orphan is re-parented
    try:
        os.kill(parent_pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:  # a killed parent stays a zombie until its own parent reaps it
        with open(f"/proc/{parent_pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _watch_parent(parent_pid: int, direct: bool, fd: int | None) -> None:
    sock = socket.socket(fileno=os.dup(fd)) if fd is not None else None
    while True:
        if not _parent_alive(parent_pid, direct):
            os._exit(1)
        if sock is None:
            time.sleep(WAKE_S)
            continue
        readable, _, _ = select.select([sock], [], [], WAKE_S)
        if readable:  # a request the main thread has not read yet, or the parent's end closed
            try:
                closed = not sock.recv(1, socket.MSG_PEEK)
            except OSError:
                closed = True
            if closed:
                os._exit(1)
            time.sleep(WAKE_S)
