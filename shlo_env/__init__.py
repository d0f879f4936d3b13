"""shlo_env: graph-rewrite search over StableHLO that makes JAX programs faster, never wrong."""

from shlo_env import _jax_compat  # noqa: F401  (first: sets XLA's log level before jaxlib loads)
from shlo_env import patterns
from shlo_env.research import gym_registration
from shlo_env._version import __version__  # noqa: F401
from shlo_env.research.env import Env
from shlo_env.rewrite.driver import apply, augment, list_alternatives, prune, run_loop
from shlo_env.ir.hashing import dag_hash
from shlo_env.ir.program import Program, ProgramError, load, lower, save
from shlo_env.api.jit import JitFunction, jit
from shlo_env.measure.numerics import Numerics
from shlo_env.api.optimize import OptimizedFunction, Report, optimize
from shlo_env.patterns.base import Match, Pattern
from shlo_env.measure.kernel_profile import profile

__all__ = [
    "Program", "ProgramError", "lower", "load", "save", "augment", "apply", "prune", "run_loop",
    "list_alternatives", "dag_hash", "patterns", "Pattern", "Match", "Numerics", "optimize",
    "OptimizedFunction", "Report", "Env", "profile", "jit", "JitFunction",
]

gym_registration.install()  # shlo_env/Rewrite-v0, as soon as gymnasium is imported (never imports it)
