"""shlo_env's logs: standard `logging` loggers, silent unless asked for.

    SHLO_ENV_LOGS=search,cache python train.py        # as TORCH_LOGS: these loggers at INFO on stderr
    SHLO_ENV_LOGS=+search,verify python train.py      # "+name": DEBUG (every candidate), "all": every logger

| logger | says |
|---|---|
| `shlo_env.search` | a search's start, each new best, its outcome; at DEBUG every candidate evaluated |
| `shlo_env.cache` | the persistent cache: hit, miss (and the key), stored, ignored entries |
| `shlo_env.verify` | candidates rejected by verification and why; the in-process check against jax.jit |
| `shlo_env.worker` | the worker process: started, restarted after a crash or a timeout |

Nothing is printed unless asked: the loggers log at INFO and DEBUG (below Python's default
WARNING) and the `shlo_env` logger has a `NullHandler`, so only `shlo_env.jit`'s one-line notice
reaches stderr by default. The loggers are ordinary ones: `logging.getLogger("shlo_env.search").setLevel(...)`
with your own handlers works as with any library. This module imports nothing heavy (it is read
by `import shlo_env`).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TextIO

ENV_VAR = "SHLO_ENV_LOGS"
NAMES = ("search", "cache", "verify", "worker")
ROOT = "shlo_env"
FORMAT = "[%(name)s] %(message)s"

logging.getLogger(ROOT).addHandler(logging.NullHandler())


def get(name: str) -> logging.Logger:
    """The logger `shlo_env.<name>` (one of `NAMES`)."""
    if name not in NAMES:
        raise ValueError(f"no shlo_env logger {name!r}; the loggers are {', '.join(NAMES)}")
    return logging.getLogger(f"{ROOT}.{name}")


def parse(spec: str) -> dict[str, int]:
    """`"search,+cache"` -> {"search": INFO, "cache": DEBUG}; "all" names every logger; an
    unknown name is a ValueError naming the loggers."""
    levels: dict[str, int] = {}
    for token in (t.strip() for t in spec.split(",")):
        if not token:
            continue
        level = logging.INFO
        if token[0] in "+-":
            level = logging.DEBUG if token[0] == "+" else logging.WARNING
            token = token[1:]
        names = NAMES if token == "all" else (token,)
        for name in names:
            if name not in NAMES:
                raise ValueError(f"{ENV_VAR}: no logger {name!r}; choose from {', '.join(NAMES)} or all")
            levels[name] = level
    return levels


_handlers: dict[str, logging.Handler] = {}


def enable(spec: str | dict[str, int], stream: TextIO | None = None) -> dict[str, int]:
    """Turn the named loggers on (`spec` as in `SHLO_ENV_LOGS`), writing to `stream` (stderr)."""
    levels = parse(spec) if isinstance(spec, str) else dict(spec)
    for name, level in levels.items():
        logger = get(name)
        logger.setLevel(level)
        old = _handlers.pop(name, None)
        if old is not None:
            logger.removeHandler(old)
        handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
        handler.setFormatter(logging.Formatter(FORMAT))
        logger.addHandler(handler)
        logger.propagate = False  # not twice through a handler the application put on the root
        _handlers[name] = handler
    return levels


def disable() -> None:
    """Undo `enable` (the loggers back to silent)."""
    for name, handler in list(_handlers.items()):
        logger = get(name)
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)
        logger.propagate = True
        del _handlers[name]


def configure_from_env(environ=os.environ) -> dict[str, int]:
    """`enable(SHLO_ENV_LOGS)` when it is set (`import shlo_env` calls this); a bad value warns
    and enables nothing rather than failing the import."""
    spec = environ.get(ENV_VAR, "").strip()
    if not spec:
        return {}
    try:
        return enable(spec)
    except ValueError as e:
        import warnings

        warnings.warn(str(e), stacklevel=2)
        return {}


__all__ = ["ENV_VAR", "NAMES", "configure_from_env", "disable", "enable", "get", "parse"]
