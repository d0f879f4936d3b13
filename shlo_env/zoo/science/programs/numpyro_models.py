"""numpyro: a NUTS transition on the eight-schools model, a hierarchical logistic regression's
potential energy with its gradient, and a stochastic-volatility HMC chain."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.infer.hmc import hmc
from numpyro.infer.util import initialize_model, potential_energy

from shlo_env.zoo.science.programs import program, rng

_SCHOOLS_Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0], np.float32)
_SCHOOLS_SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0], np.float32)


def _eight_schools(sigma, y=None):
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
    with numpyro.plate("J", sigma.shape[0]):
        theta_raw = numpyro.sample("theta_raw", dist.Normal(0.0, 1.0))  # non-centred
        numpyro.sample("obs", dist.Normal(mu + tau * theta_raw, sigma), obs=y)


@program("numpyro_eight_schools_nuts_step", library="numpyro", kind="sampler_step",
         description="one NUTS transition (numpyro.infer.hmc, iterative tree building, max tree depth 8, "
                     "step size 0.4, diagonal unit mass, no adaptation) on the non-centred eight-schools "
                     "model; the unconstrained position and the PRNG key are inputs")
def eight_schools_nuts():
    init, potential_fn, _, _ = initialize_model(jr.PRNGKey(0), _eight_schools,
                                                model_args=(_SCHOOLS_SIGMA, _SCHOOLS_Y))
    init_kernel, sample_kernel = hmc(potential_fn, algo="NUTS")
    state0 = init_kernel(init.z, num_warmup=0, step_size=0.4, adapt_step_size=False,
                         adapt_mass_matrix=False, max_tree_depth=8, rng_key=jr.PRNGKey(1))

    def fn(z, key):
        pe, grad = jax.value_and_grad(potential_fn)(z)
        state = state0._replace(z=z, z_grad=grad, potential_energy=pe, rng_key=key)
        new = sample_kernel(state)
        return new.z, new.potential_energy, new.accept_prob, new.num_steps, new.diverging

    z = {k: rng(4).standard_normal(np.shape(v)).astype(np.float32) for k, v in init.z.items()}
    return fn, (z, np.asarray(jr.key_data(jr.PRNGKey(2)))), {
        "model": "eight schools, non-centred", "algo": "NUTS", "max_tree_depth": 8, "step_size": 0.4,
        "mass": "diagonal, unit", "warmup": 0}


def _hier_logreg(X, y=None):
    n, d = X.shape
    tau = numpyro.sample("tau", dist.HalfNormal(1.0))
    lam = numpyro.sample("lambda", dist.HalfCauchy(jnp.ones(d)).to_event(1))  # horseshoe-style local scales
    beta = numpyro.sample("beta", dist.Normal(jnp.zeros(d), tau * lam).to_event(1))
    alpha = numpyro.sample("alpha", dist.Normal(0.0, 3.0))
    with numpyro.plate("data", n):
        numpyro.sample("y", dist.Bernoulli(logits=X @ beta + alpha), obs=y)


@program("numpyro_horseshoe_logreg_potential_grad", library="numpyro", kind="log_density",
         description="potential energy (negative log joint in unconstrained space, with the log-det "
                     "Jacobians of the positive transforms) and its gradient for a horseshoe-prior "
                     "logistic regression, numpyro.infer.util.potential_energy; 512 x 32 data as inputs "
                     "(labels are the signs of an input)")
def horseshoe_potential():
    n, d = 512, 32
    X = rng(5).standard_normal((n, d)).astype(np.float32)
    raw_y = rng(6).standard_normal(n).astype(np.float32)
    params = {"tau": np.float32(0.0), "lambda": np.zeros(d, np.float32), "beta": np.zeros(d, np.float32),
              "alpha": np.float32(0.0)}

    def fn(params, X, raw_y):
        y = (raw_y > 0).astype(jnp.float32)
        return jax.value_and_grad(lambda p: potential_energy(_hier_logreg, (X, y), {}, p))(params)

    return fn, (params, X, raw_y), {"n": n, "d": d, "prior": "horseshoe (HalfNormal tau, HalfCauchy lambda)"}


def _stochastic_volatility(returns):
    sigma = numpyro.sample("sigma", dist.Exponential(50.0))
    nu = numpyro.sample("nu", dist.Exponential(0.1))
    s = numpyro.sample("s", dist.GaussianRandomWalk(scale=sigma, num_steps=returns.shape[0]))
    numpyro.sample("r", dist.StudentT(df=nu, loc=0.0, scale=jnp.exp(s)), obs=returns)


@program("numpyro_stochvol_hmc_chain", library="numpyro", kind="sampler_step",
         description="10 HMC transitions (10 leapfrog steps each, step size 0.005, no adaptation) in lax.scan "
                     "on numpyro's stochastic-volatility example (GaussianRandomWalk log-volatility, StudentT "
                     "returns) over 100 returns; model arguments passed dynamically (potential_fn_gen)")
def stochvol_hmc():
    T = 100
    returns = (0.02 * rng(7).standard_normal(T)).astype(np.float32)
    init, pfg, _, _ = initialize_model(jr.PRNGKey(0), _stochastic_volatility, model_args=(returns,),
                                       dynamic_args=True)
    init_kernel, sample_kernel = hmc(potential_fn_gen=pfg, algo="HMC")
    # trajectory_length must be given: with num_steps alone init_kernel keeps the default 2 pi
    state0 = init_kernel(init.z, num_warmup=0, step_size=0.005, num_steps=10, trajectory_length=0.05,
                         adapt_step_size=False,
                         adapt_mass_matrix=False, model_args=(returns,), rng_key=jr.PRNGKey(1))

    def fn(z, raw_returns, key):
        returns = 0.02 * raw_returns
        pe, grad = jax.value_and_grad(pfg(returns))(z)
        state = state0._replace(z=z, z_grad=grad, potential_energy=pe, rng_key=key)

        def body(state, _):
            state = sample_kernel(state, model_args=(returns,))
            return state, (state.potential_energy, state.accept_prob)

        state, trace = jax.lax.scan(body, state, None, length=10)
        return state.z, trace

    z = {k: (0.1 * rng(8).standard_normal(np.shape(v))).astype(np.float32) for k, v in init.z.items()}
    return fn, (z, rng(9).standard_normal(T).astype(np.float32), np.asarray(jr.key_data(jr.PRNGKey(3)))), {
        "model": "stochastic volatility (numpyro example)", "T": T, "algo": "HMC", "num_steps": 10,
        "step_size": 0.005, "transitions": 10}
