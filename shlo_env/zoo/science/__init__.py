"""The scientific zoo: programs from the scientific JAX ecosystem (diffrax, numpyro, blackjax,
jax-md, jaxopt, optimistix, lineax, and plain jax: ODE solves and adjoints, MCMC, molecular
dynamics, quasi-Newton optimisers, root finding and Krylov solves, PDE steppers, filters, an RL
rollout, a normalizing flow) as stored StableHLO: loops inside loops, small ops, gathers and
scatters, LAPACK calls.

    >>> from shlo_env.zoo import science
    >>> p = science.load("jaxopt_lbfgs_logreg")        # = shlo_env.corpus.load("science/jaxopt_lbfgs_logreg")
    >>> science.entries()[0].metadata["library"]
    'diffrax'

It is the `science` dataset of `shlo_env.corpus` (`corpus.entries("science")`, URIs
`science/<name>`), so `shlo-env bench --dataset science` runs it. Loading needs only jax;
regenerating needs the libraries (`pip install shlo_env[science]`, then
`python -m shlo_env.zoo.science.generate`). See README.md here.
"""

from __future__ import annotations

from shlo_env.corpus import SCIENCE, SCIENCE_DATA, Entry, index_info
from shlo_env.ir.program import Program

DATA = SCIENCE_DATA


def entries() -> list[Entry]:
    """The scientific zoo's programs with their metadata (library, kind, config, ops, runtime_ms, ...)."""
    from shlo_env import corpus

    return corpus.entries(SCIENCE)


def load(name: str) -> Program:
    """The program `name` (or a `science/<name>` URI); example_args is None."""
    from shlo_env import corpus

    return corpus.load(name if name.startswith(f"{SCIENCE}/") else f"{SCIENCE}/{name}")


def info() -> dict:
    """The index's header: versions used, generation time, failures."""
    return index_info(SCIENCE)


__all__ = ["DATA", "SCIENCE", "entries", "info", "load"]
