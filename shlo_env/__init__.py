"""shlo_env: graph-rewrite search over StableHLO that makes JAX programs faster, never wrong."""

from shlo_env import _jax_compat  # noqa: F401  (first: sets XLA's log level before jaxlib loads)
from shlo_env import gym_registration, patterns
from shlo_env._version import __version__  # noqa: F401
from shlo_env.env import Env
from shlo_env.driver import apply, augment, list_alternatives, prune, run_loop
from shlo_env.hashing import dag_hash
from shlo_env.import_ import Program, ProgramError, load, lower, save
from shlo_env.jit import JitFunction, jit
from shlo_env.numerics import Numerics
from shlo_env.optimize import OptimizedFunction, Report, optimize
from shlo_env.patterns.base import Match, Pattern
from shlo_env.profile import profile  # the function; the module stays importable as shlo_env.profile

__all__ = [
    "Program", "ProgramError", "lower", "load", "save", "augment", "apply", "prune", "run_loop",
    "list_alternatives", "dag_hash", "patterns", "Pattern", "Match", "Numerics", "optimize",
    "OptimizedFunction", "Report", "Env", "profile", "jit", "JitFunction",
]

gym_registration.install()  # shlo_env/Rewrite-v0, as soon as gymnasium is imported (never imports it)
