"""BlackJAX: a NUTS step on a Bayesian logistic regression, a MALA chain, and adaptive tempered
SMC run to temperature 1 (HMC moves, systematic resampling, bisection for the next temperature)."""

from __future__ import annotations

import blackjax
import blackjax.smc.resampling as resampling
from blackjax.smc import extend_params
import jax
import jax.numpy as jnp
import jax.random as jr
import jax.scipy.stats as stats
import numpy as np

from shlo_env.zoo.science.programs import program, rng


@program("blackjax_nuts_logreg_step", library="blackjax", kind="sampler_step",
         description="one blackjax.nuts step (multinomial NUTS, step size 0.05, unit diagonal inverse mass "
                     "matrix) on a Bayesian logistic regression with N(0, 1) prior; 256 x 16 data, the "
                     "position and the PRNG key are inputs (the labels are signs of an input)")
def nuts_logreg():
    n, d = 256, 16
    nuts = blackjax.nuts(lambda _: 0.0, step_size=0.05, inverse_mass_matrix=jnp.ones(d))

    def fn(position, X, raw_y, key):
        y = (raw_y > 0).astype(jnp.float32)

        def logdensity(w):
            logits = X @ w
            return jnp.sum(y * logits - jax.nn.softplus(logits)) - 0.5 * jnp.sum(w ** 2)

        nuts_ = blackjax.nuts(logdensity, step_size=0.05, inverse_mass_matrix=jnp.ones(d))
        state, info = nuts_.step(key, nuts_.init(position))
        return state.position, state.logdensity, info.acceptance_rate, info.num_integration_steps

    del nuts
    r = rng(10)
    return fn, (r.standard_normal(d).astype(np.float32), r.standard_normal((n, d)).astype(np.float32),
                r.standard_normal(n).astype(np.float32), np.asarray(jr.key_data(jr.PRNGKey(0)))), {
        "n": n, "d": d, "step_size": 0.05, "inverse_mass_matrix": "ones", "max_num_doublings": 10}


@program("blackjax_mala_chain", library="blackjax", kind="sampler_step",
         description="100 blackjax.mala steps in lax.scan on a 32-D correlated Gaussian whose precision "
                     "A A^T / 32 + I is built from an input; returns the chain's samples and acceptance")
def mala_chain():
    d, steps = 32, 100

    def fn(a, position, key):
        precision = a @ a.T / d + jnp.eye(d)

        def logdensity(x):
            return -0.5 * x @ precision @ x

        mala = blackjax.mala(logdensity, step_size=0.05)

        def body(state, k):
            state, info = mala.step(k, state)
            return state, (state.position, info.acceptance_rate)

        _, (samples, acc) = jax.lax.scan(body, mala.init(position), jr.split(key, steps))
        return samples, jnp.mean(acc)

    r = rng(11)
    return fn, (r.standard_normal((d, d)).astype(np.float32), r.standard_normal(d).astype(np.float32),
                np.asarray(jr.key_data(jr.PRNGKey(1)))), {"d": d, "steps": steps, "step_size": 0.05}


@program("blackjax_adaptive_tempered_smc", library="blackjax", kind="sampler_step",
         description="blackjax.adaptive_tempered_smc (target ESS 0.5, bisection for the next temperature, "
                     "systematic resampling, 2 HMC moves of 5 leapfrog steps) from the N(0, I) prior to a "
                     "bimodal 2-D likelihood, in a while loop until the temperature reaches 1 (at most 40 "
                     "steps); 1024 particles are the input")
def tempered_smc():
    d, n = 2, 1024

    def logprior(x):
        return jnp.sum(stats.norm.logpdf(x))

    def loglikelihood(x):
        return -5.0 * jnp.sum((x ** 2 - 1.0) ** 2)

    params = extend_params({"step_size": 0.1, "inverse_mass_matrix": jnp.ones(d), "num_integration_steps": 5})
    smc = blackjax.adaptive_tempered_smc(logprior, loglikelihood, blackjax.hmc.build_kernel(), blackjax.hmc.init,
                                         params, resampling.systematic, 0.5, num_mcmc_steps=2)

    def fn(particles, key):
        def cond(carry):
            _, state, i, _ = carry
            return (state.tempering_param < 1.0) & (i < 40)

        def body(carry):
            key, state, i, logz = carry
            key, sub = jr.split(key)
            state, info = smc.step(sub, state)
            return key, state, i + 1, logz + info.log_likelihood_increment

        _, state, steps, logz = jax.lax.while_loop(cond, body, (key, smc.init(particles), 0, 0.0))
        return state.particles, state.weights, steps, logz

    return fn, (rng(12).standard_normal((n, d)).astype(np.float32), np.asarray(jr.key_data(jr.PRNGKey(2)))), {
        "particles": n, "d": d, "target_ess": 0.5, "mcmc": "hmc(step 0.1, 5 leapfrog)", "num_mcmc_steps": 2,
        "max_steps": 40, "resampling": "systematic"}
