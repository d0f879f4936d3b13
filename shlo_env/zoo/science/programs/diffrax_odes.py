"""diffrax: adaptive ODE solves (explicit and implicit), a neural ODE trained through the solver
(discretise-then-optimise) and its continuous adjoint, and an SDE on a virtual Brownian tree."""

from __future__ import annotations

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import optax

from shlo_env.zoo.science.programs import program, rng


@program("diffrax_lotka_volterra_tsit5", library="diffrax", kind="simulation", uses=("equinox",),
         description="Lotka-Volterra predator-prey, Tsit5 with a PID step-size controller (rtol 1e-5), "
                     "vmapped over 16 initial populations, 41 saved times on [0, 20]; rates and "
                     "populations are exp of the inputs")
def lotka_volterra():
    def vector_field(t, y, args):
        a, b, c, d = args
        prey, pred = y[0], y[1]
        return jnp.stack([a * prey - b * prey * pred, -c * pred + d * prey * pred])

    term = diffrax.ODETerm(vector_field)
    ts = jnp.linspace(0.0, 20.0, 41)

    def solve_one(y0, rates):
        sol = diffrax.diffeqsolve(term, diffrax.Tsit5(), 0.0, 20.0, 0.05, y0, args=rates,
                                  saveat=diffrax.SaveAt(ts=ts),
                                  stepsize_controller=diffrax.PIDController(rtol=1e-5, atol=1e-7),
                                  max_steps=4096)
        return sol.ys

    def fn(raw_y0, raw_rates):
        y0 = jnp.array([10.0, 5.0]) * jnp.exp(0.3 * jnp.tanh(raw_y0))
        rates = jnp.array([1.1, 0.4, 0.4, 0.1]) * jnp.exp(0.2 * jnp.tanh(raw_rates))
        return jax.vmap(solve_one, in_axes=(0, None))(y0, rates)

    r = rng(0)
    args = (r.standard_normal((16, 2)).astype(np.float32), r.standard_normal(4).astype(np.float32))
    return fn, args, {"solver": "Tsit5", "controller": "PIDController(rtol=1e-5, atol=1e-7)", "batch": 16,
                      "t1": 20.0, "saved_times": 41, "max_steps": 4096}


@program("diffrax_robertson_kvaerno5", library="diffrax", kind="simulation", uses=("equinox", "lineax"),
         description="Robertson's stiff chemical kinetics (k1=0.04, k2=3e7, k3=1e4, scaled by exp of the "
                     "inputs), implicit Kvaerno5 (ESDIRK, Newton iterations with lineax LU) and a PID "
                     "controller, 12 saved times on [0, 100]")
def robertson():
    def vector_field(t, y, k):
        y1, y2, y3 = y[0], y[1], y[2]
        return jnp.stack([-k[0] * y1 + k[2] * y2 * y3,
                          k[0] * y1 - k[1] * y2 ** 2 - k[2] * y2 * y3,
                          k[1] * y2 ** 2])

    term = diffrax.ODETerm(vector_field)
    ts = jnp.concatenate([jnp.zeros(1), jnp.logspace(-4, 2, 11)])

    def fn(raw_k, raw_y0):
        k = jnp.array([0.04, 3e7, 1e4]) * jnp.exp(0.1 * jnp.tanh(raw_k))
        y0 = jnp.array([1.0, 0.0, 0.0]) + jnp.array([0.0, 0.0, 0.01]) * jax.nn.sigmoid(raw_y0)
        sol = diffrax.diffeqsolve(term, diffrax.Kvaerno5(), 0.0, 100.0, 1e-4, y0, args=k,
                                  saveat=diffrax.SaveAt(ts=ts),
                                  stepsize_controller=diffrax.PIDController(rtol=1e-4, atol=1e-7),
                                  max_steps=2048)
        return sol.ys, sol.stats["num_steps"]

    r = rng(1)
    args = (r.standard_normal(3).astype(np.float32), r.standard_normal(3).astype(np.float32))
    return fn, args, {"solver": "Kvaerno5", "controller": "PIDController(rtol=1e-4, atol=1e-7)",
                      "t1": 100.0, "saved_times": 12, "max_steps": 2048}


class _Func(eqx.Module):
    mlp: eqx.nn.MLP

    def __init__(self, data_size, width, depth, key):
        self.mlp = eqx.nn.MLP(data_size, data_size, width, depth, activation=jax.nn.softplus,
                              final_activation=jnp.tanh, key=key)

    def __call__(self, t, y, args):
        return self.mlp(y)


def _spiral(n: int, length: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The diffrax neural ODE example's data: a damped linear spiral from random starts."""
    r = rng(seed)
    ts = np.linspace(0.0, 10.0, length, dtype=np.float32)
    y0 = r.uniform(-0.6, 1.0, (n, 2)).astype(np.float32)
    a = np.array([[-0.1, 1.3], [-1.0, -0.1]])
    w, v = np.linalg.eig(a)
    ys = np.stack([np.real((v * np.exp(w * t)) @ np.linalg.solve(v, y0.T)).T for t in ts], axis=1)
    return ts, ys.astype(np.float32)


@program("diffrax_neural_ode_train", library="diffrax", kind="train_step", uses=("equinox", "optax"),
         description="the diffrax neural ODE example: eqx.nn.MLP vector field (2-64-64-2, softplus, tanh "
                     "out), Tsit5 + PID controller, backpropagation through the solve "
                     "(RecursiveCheckpointAdjoint), MSE on 8 spirals x 32 times, optax.sgd(momentum)")
def neural_ode_train():
    func = _Func(2, 64, 2, jr.PRNGKey(0))
    params, static = eqx.partition(func, eqx.is_array)
    ts, ys = _spiral(8, 32, 0)
    tx = optax.sgd(1e-2, momentum=0.9)

    ts = jnp.asarray(ts)  # the save times are constants: random times would not be increasing

    def loss(params, ys):
        f = eqx.combine(params, static)

        def solve(y0):
            return diffrax.diffeqsolve(diffrax.ODETerm(f), diffrax.Tsit5(), ts[0], ts[-1], ts[1] - ts[0], y0,
                                       saveat=diffrax.SaveAt(ts=ts),
                                       stepsize_controller=diffrax.PIDController(rtol=1e-3, atol=1e-6),
                                       max_steps=1024).ys

        return jnp.mean((jax.vmap(solve)(ys[:, 0]) - ys) ** 2)

    def step(params, opt_state, ys):
        value, grads = jax.value_and_grad(loss)(params, ys)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    return step, (params, tx.init(params), ys), {
        "width": 64, "depth": 2, "batch": 8, "times": 32, "solver": "Tsit5",
        "controller": "PIDController(rtol=1e-3, atol=1e-6)", "adjoint": "RecursiveCheckpointAdjoint",
        "max_steps": 1024, "optimizer": "sgd(1e-2, momentum=0.9)"}


@program("diffrax_neural_ode_backsolve_grad", library="diffrax", kind="gradient", uses=("equinox",),
         description="gradient of a neural ODE's terminal loss by the continuous adjoint "
                     "(diffrax.BacksolveAdjoint: the adjoint ODE solved backwards in time), Dopri5 + PID "
                     "controller, MLP 4-32-32-4 vector field, vmapped over 16 initial states")
def neural_ode_backsolve():
    func = _Func(4, 32, 2, jr.PRNGKey(1))
    params, static = eqx.partition(func, eqx.is_array)
    r = rng(2)
    y0 = r.standard_normal((16, 4)).astype(np.float32)
    target = r.standard_normal((16, 4)).astype(np.float32)

    def loss(params, y0, target):
        f = eqx.combine(params, static)

        def solve(y):
            return diffrax.diffeqsolve(diffrax.ODETerm(f), diffrax.Dopri5(), 0.0, 2.0, 0.1, y,
                                       stepsize_controller=diffrax.PIDController(rtol=1e-4, atol=1e-6),
                                       adjoint=diffrax.BacksolveAdjoint(), max_steps=1024).ys[-1]

        return jnp.mean((jax.vmap(solve)(y0) - target) ** 2)

    fn = jax.value_and_grad(loss)
    return fn, (params, y0, target), {"width": 32, "depth": 2, "state": 4, "batch": 16, "solver": "Dopri5",
                                      "controller": "PIDController(rtol=1e-4, atol=1e-6)",
                                      "adjoint": "BacksolveAdjoint", "t1": 2.0, "max_steps": 1024}


@program("diffrax_ou_sde_heun", library="diffrax", kind="simulation", uses=("equinox",),
         description="Ornstein-Uhlenbeck SDE with state-dependent noise, 32 paths (vmapped keys), Heun "
                     "(Stratonovich) with 100 fixed steps on a diffrax.VirtualBrownianTree (a bisection "
                     "while loop per step); the key is a uint32[2] input")
def ou_sde():
    theta, mu = 0.7, 1.5

    def drift(t, y, args):
        return theta * (mu - y)

    def diffusion(t, y, args):
        return 0.3 * jnp.sqrt(1.0 + y ** 2)[:, None] * jnp.eye(y.shape[0])

    def solve(key, y0):
        bm = diffrax.VirtualBrownianTree(0.0, 1.0, tol=1e-3, shape=(4,), key=key)
        terms = diffrax.MultiTerm(diffrax.ODETerm(drift), diffrax.ControlTerm(diffusion, bm))
        sol = diffrax.diffeqsolve(terms, diffrax.Heun(), 0.0, 1.0, 0.01, y0,
                                  saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, 1.0, 11)), max_steps=128)
        return sol.ys

    def fn(key, y0):
        return jax.vmap(solve)(jr.split(key, y0.shape[0]), y0)

    key = np.asarray(jr.key_data(jr.PRNGKey(0)))
    y0 = rng(3).standard_normal((32, 4)).astype(np.float32)
    return fn, (key, y0), {"paths": 32, "state": 4, "solver": "Heun", "dt0": 0.01, "steps": 100,
                           "brownian": "VirtualBrownianTree(tol=1e-3)", "theta": theta, "mu": mu}
