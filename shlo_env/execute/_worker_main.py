"""The worker child process: `python .../shlo_env/execute/_worker_main.py FD PARENT_PID [--pdeathsig]`.

Started as a file, not with `-m`: importing the package takes seconds, and a worker whose caller
is killed meanwhile must not run on. So this file watches the parent first, with the standard
library only, and imports the package after (`shlo_env.execute.worker.serve` answers the requests).
"""

import os
import sys

if __name__ == "__main__":  # sys.path[0] is this file's directory: its modules would shadow others
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import importlib.util  # noqa: E402
import signal  # noqa: E402


def _load_parent_watch():
    """`shlo_env/execute/_parent_watch.py` by its path: importing it through the package would import
    the package first (seconds), while a killed caller must stop this process at once."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_parent_watch.py")
    spec = importlib.util.spec_from_file_location("shlo_env_parent_watch", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str]) -> None:
    fd, parent = int(argv[0]), int(argv[1])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the caller decides
    _load_parent_watch().die_with_parent(parent, kernel="--pdeathsig" in argv[2:], fd=fd)
    from multiprocessing.connection import Connection

    from shlo_env.execute.worker import serve

    serve(Connection(fd))


if __name__ == "__main__":
    main(sys.argv[1:])
