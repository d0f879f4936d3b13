"""optimistix and lineax: BFGS with a backtracking line search, Newton root finding with LU
solves, and Krylov solves (CG, GMRES) of matrix-free PDE operators."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import optimistix as optx

from shlo_env.zoo.science.programs import program, rng


@program("optimistix_bfgs_rosenbrock", library="optimistix", kind="optimization", uses=("equinox", "lineax"),
         description="optx.minimise with optx.BFGS (dense inverse-Hessian update, backtracking Armijo line "
                     "search, rtol = atol = 1e-6, at most 512 steps) on the 32-D extended Rosenbrock "
                     "function from 0.5 tanh(input); returns the minimiser, the value and the step count")
def bfgs_rosenbrock():
    d = 32

    def rosenbrock(x, args):
        return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)

    def fn(raw_x0):
        sol = optx.minimise(rosenbrock, optx.BFGS(rtol=1e-6, atol=1e-6), 0.5 * jnp.tanh(raw_x0), max_steps=512,
                            throw=False)
        return sol.value, rosenbrock(sol.value, None), sol.stats["num_steps"], sol.result._value

    return fn, (rng(19).standard_normal(d).astype(np.float32),), {
        "d": d, "solver": "BFGS(rtol=1e-6, atol=1e-6)", "max_steps": 512, "throw": False}


@program("optimistix_newton_bratu", library="optimistix", kind="solve", uses=("equinox", "lineax"),
         description="optx.root_find with optx.Newton (Jacobian by jacfwd, lineax LU solves) on the 1-D "
                     "Bratu problem u'' + lambda exp(u) = 0 discretised on 128 points, vmapped over 8 values "
                     "of lambda in [1, 3] (from inputs); the start is 0.1 tanh(input)")
def newton_bratu():
    n, batch = 128, 8
    h = 1.0 / (n + 1)

    def residual(u, lam):
        up = jnp.concatenate([u[1:], jnp.zeros(1)])
        um = jnp.concatenate([jnp.zeros(1), u[:-1]])
        return (up - 2.0 * u + um) / h ** 2 + lam * jnp.exp(u)

    def solve(u0, lam):
        sol = optx.root_find(residual, optx.Newton(rtol=1e-5, atol=1e-5), u0, args=lam, max_steps=50,
                             throw=False)
        return sol.value, sol.stats["num_steps"]

    def fn(raw_u0, raw_lam):
        lam = 2.0 + jnp.tanh(raw_lam)
        return jax.vmap(solve)(0.1 * jnp.tanh(raw_u0), lam)

    r = rng(20)
    return fn, (r.standard_normal((batch, n)).astype(np.float32), r.standard_normal(batch).astype(np.float32)), {
        "points": n, "batch": batch, "lambda": "2 + tanh(input)", "solver": "Newton(rtol=1e-5, atol=1e-5)",
        "linear_solver": "AutoLinearSolver (LU)", "max_steps": 50, "throw": False}


def _laplacian_2d(n: int):
    """-Laplacian with zero Dirichlet boundary on an n x n grid, matrix-free (5-point stencil)."""
    h2 = 1.0 / (n + 1) ** 2

    def apply(u):
        p = jnp.pad(u, 1)
        return (4.0 * u - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]) / h2

    return apply


@program("lineax_cg_poisson2d", library="lineax", kind="solve", uses=("equinox",),
         description="lineax.CG (rtol = atol = 1e-5, at most 1000 steps) on the 2-D Poisson equation "
                     "-lap(u) = f, a matrix-free 5-point stencil FunctionLinearOperator tagged positive "
                     "definite, 64 x 64 grid; f is the input")
def cg_poisson():
    n = 64
    apply = _laplacian_2d(n)

    def fn(f):
        op = lx.FunctionLinearOperator(apply, jax.ShapeDtypeStruct((n, n), jnp.float32),
                                       tags=lx.positive_semidefinite_tag)
        sol = lx.linear_solve(op, f, lx.CG(rtol=1e-5, atol=1e-5, max_steps=1000), throw=False)
        return sol.value, sol.stats["num_steps"]

    return fn, (rng(21).standard_normal((n, n)).astype(np.float32),), {
        "grid": [n, n], "stencil": "5-point, Dirichlet", "solver": "CG(rtol=1e-5, atol=1e-5)",
        "max_steps": 1000, "throw": False}


@program("lineax_gmres_advection_diffusion", library="lineax", kind="solve", uses=("equinox",),
         description="lineax.GMRES (restart 20, rtol = atol = 1e-5, at most 500 steps) on a steady 2-D "
                     "advection-diffusion operator (upwind advection, velocity (1, 0.5), Peclet ~ 10), "
                     "matrix-free, 48 x 48 grid; the right-hand side is the input")
def gmres_advection_diffusion():
    n = 48
    lap = _laplacian_2d(n)
    h = 1.0 / (n + 1)
    vx, vy, nu = 1.0, 0.5, 0.1

    def apply(u):
        p = jnp.pad(u, 1)
        adv = vx * (u - p[:-2, 1:-1]) / h + vy * (u - p[1:-1, :-2]) / h  # upwind for positive velocity
        return nu * lap(u) + adv

    def fn(b):
        op = lx.FunctionLinearOperator(apply, jax.ShapeDtypeStruct((n, n), jnp.float32))
        sol = lx.linear_solve(op, b, lx.GMRES(rtol=1e-5, atol=1e-5, restart=20, max_steps=500), throw=False)
        return sol.value, sol.stats["num_steps"]

    return fn, (rng(22).standard_normal((n, n)).astype(np.float32),), {
        "grid": [n, n], "velocity": [vx, vy], "diffusivity": nu, "advection": "first-order upwind",
        "solver": "GMRES(restart=20, rtol=1e-5, atol=1e-5)", "max_steps": 500, "throw": False}
