"""Entry point of the worker child process: `python -m shlo_env._worker_main FD`."""

import sys
from multiprocessing.connection import Connection

from shlo_env.worker import serve

serve(Connection(int(sys.argv[1])))
