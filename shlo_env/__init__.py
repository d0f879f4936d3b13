"""shlo_env: graph-rewrite search over StableHLO that makes JAX programs faster, never wrong."""

import importlib as _importlib
import os as _os
from typing import TYPE_CHECKING

from shlo_env import logs
from shlo_env._version import __version__  # noqa: F401
from shlo_env.research import gym_registration

# XLA reads TF_CPP_MIN_LOG_LEVEL once, when jaxlib's first native library loads: hide its INFO
# lines unless the user chose a level (`_jax_compat.quiet_xla_logs`, set here too because every
# shlo_env module, and so jaxlib through it, loads after this package's __init__).
_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

# The public names are imported on first use (`shlo_env.optimize`, `from shlo_env import jit`):
# `import shlo_env` and `shlo-env --help` do not import jax.
_PUBLIC = {
    "Program": "shlo_env.ir.program", "ProgramError": "shlo_env.ir.program", "lower": "shlo_env.ir.program",
    "load": "shlo_env.ir.program", "save": "shlo_env.ir.program",
    "augment": "shlo_env.rewrite.driver", "apply": "shlo_env.rewrite.driver", "prune": "shlo_env.rewrite.driver",
    "run_loop": "shlo_env.rewrite.driver", "list_alternatives": "shlo_env.rewrite.driver",
    "dag_hash": "shlo_env.ir.hashing",
    "Pattern": "shlo_env.patterns.base", "Match": "shlo_env.patterns.base",
    "Numerics": "shlo_env.measure.numerics",
    "optimize": "shlo_env.api.optimize", "OptimizedFunction": "shlo_env.api.optimize",
    "Report": "shlo_env.api.optimize",
    "Env": "shlo_env.research.env",
    "profile": "shlo_env.measure.kernel_profile",
    "jit": "shlo_env.api.jit", "JitFunction": "shlo_env.api.jit",
    "load_optimized": "shlo_env.api.export",
}

if TYPE_CHECKING:  # what type checkers and editors see: the same names, imported eagerly
    from shlo_env import patterns
    from shlo_env.api.export import load_optimized
    from shlo_env.api.jit import JitFunction, jit
    from shlo_env.api.optimize import OptimizedFunction, Report, optimize
    from shlo_env.ir.hashing import dag_hash
    from shlo_env.ir.program import Program, ProgramError, load, lower, save
    from shlo_env.measure.kernel_profile import profile
    from shlo_env.measure.numerics import Numerics
    from shlo_env.patterns.base import Match, Pattern
    from shlo_env.research.env import Env
    from shlo_env.rewrite.driver import apply, augment, list_alternatives, prune, run_loop


def __getattr__(name: str):
    """A public name, imported on first use (jax with it), then kept in the module."""
    if name == "patterns":
        _importlib.import_module("shlo_env._jax_compat")
        return _importlib.import_module("shlo_env.patterns")
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'shlo_env' has no attribute {name!r}")
    _importlib.import_module("shlo_env._jax_compat")  # first: every private jax API, with its settings
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC) | {"patterns"})


__all__ = [
    "Program", "ProgramError", "lower", "load", "save", "augment", "apply", "prune", "run_loop",
    "list_alternatives", "dag_hash", "patterns", "Pattern", "Match", "Numerics", "optimize",
    "OptimizedFunction", "Report", "Env", "profile", "jit", "JitFunction", "load_optimized",
]

logs.configure_from_env()  # SHLO_ENV_LOGS=search,cache: those loggers on stderr (shlo_env.logs)
gym_registration.install()  # shlo_env/Rewrite-v0, as soon as gymnasium is imported (never imports it)
