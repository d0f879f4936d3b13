"""The source code of the scientific zoo: programs from the scientific JAX ecosystem (ODE
solvers, samplers, molecular dynamics, optimisers, solvers, filters, simulators), lowered by
`shlo_env.zoo.science.generate`.

Each module registers builders with `@program(...)`. A builder takes no arguments and returns
`(fn, args, config)`: a pure function, its example arguments (synthetic data, built from the
config; nothing is downloaded) and the config as a JSON-able dict. Inputs are meaningful on
N(0,1) random draws wherever that can be arranged: step sizes, rates and tolerances are
constants, and what must be positive (a rate, a covariance, an initial state of a population
model) is made so inside the program from the input (`exp`, `softplus`, `A @ A.T + c I`).

Equinox's runtime checks (`eqx.error_if`, used by diffrax, optimistix and lineax) lower to host
callbacks, which a stored file cannot hold: these modules set `EQX_ON_ERROR=nan` before equinox
is imported, so a failed check gives NaN instead, and the generator records
`host_callbacks_removed: true` for every program where that removed a callback.

These modules import the libraries at the top (`pip install shlo_env[science]`); only
`shlo_env.zoo.science.generate` imports them. Loading the stored programs needs none of them.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

# Must be set before equinox is first imported (equinox reads it once, at import).
os.environ["EQX_ON_ERROR"] = "nan"
if "equinox" in sys.modules:  # imported earlier in this process with another setting
    import equinox._errors as _eqx_errors

    _eqx_errors.EQX_ON_ERROR = "nan"

# What a program computes:
#   simulation    time stepping of a model (an ODE/SDE solve, molecular dynamics, a PDE, an environment)
#   gradient      a gradient through a solver or a simulation (adjoints, implicit differentiation)
#   sampler_step  MCMC: one kernel step or a short chain
#   log_density   a model's log density (potential) with its gradient
#   optimization  an optimiser run to convergence (quasi-Newton with line searches, ...)
#   solve         root finding or a linear solve
#   filter        state-space filtering (Kalman, particle), with or without gradients
#   train_step    loss, gradient and parameter update in one program
KINDS = ("simulation", "gradient", "sampler_step", "log_density", "optimization", "solve", "filter",
         "train_step")
# library -> the distribution whose version is recorded ("jax": plain jax code)
LIBRARIES = {"diffrax": "diffrax", "numpyro": "numpyro", "blackjax": "blackjax", "jax-md": "jax-md",
             "jaxopt": "jaxopt", "optimistix": "optimistix", "lineax": "lineax", "jax": "jax"}

# The modules that define programs, in registry order.
MODULES = ("diffrax_odes", "numpyro_models", "blackjax_samplers", "jaxmd_sims", "jaxopt_solvers",
           "optimistix_solvers", "plain_jax")


@dataclasses.dataclass(frozen=True)
class ScienceSpec:
    name: str
    library: str  # a key of LIBRARIES
    kind: str  # one of KINDS
    description: str
    build: Callable[[], tuple[Callable, tuple, dict[str, Any]]]
    uses: tuple[str, ...] = ()  # other distributions the code calls (e.g. equinox, optax)
    # Why the outputs are not finite on N(0,1) inputs, where that is expected (None: they are)
    nonfinite_reason: str | None = None


_REGISTRY: dict[str, ScienceSpec] = {}


def program(name: str, *, library: str, kind: str, description: str, uses: tuple[str, ...] = (),
            nonfinite_reason: str | None = None):
    """Register a builder `() -> (fn, args, config)` under `name`."""
    if library not in LIBRARIES:
        raise ValueError(f"unknown science library {library!r}; one of {sorted(LIBRARIES)}")
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; one of {KINDS}")

    def register(build):
        if name in _REGISTRY:
            raise ValueError(f"duplicate science program {name!r}")
        _REGISTRY[name] = ScienceSpec(name, library, kind, description, build, tuple(uses), nonfinite_reason)
        return build

    return register


def rng(seed: int):
    """The numpy generator the builders draw their synthetic data from."""
    import numpy as np

    return np.random.default_rng(seed)


def registry() -> dict[str, ScienceSpec]:
    """Every registered program (imports the source modules and so the libraries)."""
    for m in MODULES:
        importlib.import_module(f"{__name__}.{m}")
    return dict(_REGISTRY)
