"""Scientific programs users write in plain jax: PDE time steppers (finite differences and a
pseudo-spectral method), a Kalman filter's likelihood with its gradient, a bootstrap particle
filter, a CartPole rollout in a while loop, and a RealNVP normalizing flow's train step."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import optax

from shlo_env.zoo.science.programs import program, rng


@program("pde_gray_scott_fori", library="jax", kind="simulation",
         description="Gray-Scott reaction-diffusion (Du 0.16, Dv 0.08, F 0.035, k 0.065), 128 x 128 periodic "
                     "grid, 5-point Laplacian with jnp.roll, explicit Euler (dt 1) for 500 steps in "
                     "lax.fori_loop; the initial v is a centred square plus 0.05 sigmoid(input)")
def gray_scott():
    n, steps = 128, 500
    du, dv, feed, kill = 0.16, 0.08, 0.035, 0.065

    def lap(a):
        return jnp.roll(a, 1, 0) + jnp.roll(a, -1, 0) + jnp.roll(a, 1, 1) + jnp.roll(a, -1, 1) - 4.0 * a

    def fn(raw):
        square = jnp.zeros((n, n)).at[n // 2 - 8:n // 2 + 8, n // 2 - 8:n // 2 + 8].set(1.0)
        v = 0.25 * square + 0.05 * jax.nn.sigmoid(raw)
        u = 1.0 - 0.5 * square

        def body(i, uv):
            u, v = uv
            uvv = u * v * v
            return u + du * lap(u) - uvv + feed * (1.0 - u), v + dv * lap(v) + uvv - (feed + kill) * v

        return jax.lax.fori_loop(0, steps, body, (u, v))

    return fn, (rng(23).standard_normal((n, n)).astype(np.float32),), {
        "grid": [n, n], "Du": du, "Dv": dv, "F": feed, "k": kill, "dt": 1.0, "steps": steps}


@program("pde_burgers_spectral_rk4", library="jax", kind="simulation",
         description="viscous Burgers u_t + u u_x = nu u_xx (nu 0.02) on a periodic 256-point grid, "
                     "pseudo-spectral (rfft/irfft derivatives, 2/3 de-aliasing), classical RK4 with dt 1e-3 "
                     "for 400 steps in lax.scan, 20 snapshots; the initial condition is a smoothed input")
def burgers_spectral():
    n, steps, every, nu, dt = 256, 400, 20, 0.02, 1e-3
    k = 2 * np.pi * np.fft.rfftfreq(n, d=1.0 / n) / (2 * np.pi)  # integer wavenumbers on [0, 2 pi)
    dealias = (k < (2.0 / 3.0) * (n // 2)).astype(np.float32)
    ik = (1j * k).astype(np.complex64)

    def rhs(u):
        u_hat = jnp.fft.rfft(u)
        ux = jnp.fft.irfft(ik * u_hat * dealias, n)
        uxx = jnp.fft.irfft(-(k ** 2) * u_hat, n)
        return -u * ux + nu * uxx

    def rk4(u, _):
        k1 = rhs(u)
        k2 = rhs(u + 0.5 * dt * k1)
        k3 = rhs(u + 0.5 * dt * k2)
        k4 = rhs(u + dt * k3)
        return u + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4), None

    def fn(raw):
        smooth = jnp.fft.irfft(jnp.fft.rfft(raw) * jnp.exp(-0.05 * k ** 2), n)  # low modes of the input
        u0 = jnp.sin(jnp.linspace(0.0, 2 * jnp.pi, n, endpoint=False)) + smooth

        def chunk(u, _):
            u, _ = jax.lax.scan(rk4, u, None, length=every)
            return u, u

        _, snapshots = jax.lax.scan(chunk, u0, None, length=steps // every)
        return snapshots

    return fn, (rng(24).standard_normal(n).astype(np.float32),), {
        "points": n, "nu": nu, "dt": dt, "steps": steps, "snapshot_every": every, "integrator": "RK4",
        "dealias": "2/3 rule"}


@program("kalman_filter_loglik_grad", library="jax", kind="filter",
         description="linear-Gaussian state-space model (6-D state, 3-D observations, 200 steps): Kalman "
                     "filter log-likelihood in lax.scan with Cholesky solves, and its gradient wrt the "
                     "transition, observation and noise parameters (jax.value_and_grad); A is scaled to "
                     "spectral norm < 1 and Q, R are L L^T + c I built from the inputs")
def kalman_grad():
    dx, dy, T = 6, 3, 200

    def build(p):
        A = 0.95 * p["A"] / (1.0 + jnp.linalg.norm(p["A"]))
        Q = p["LQ"] @ p["LQ"].T * 0.1 + 0.1 * jnp.eye(dx)
        R = p["LR"] @ p["LR"].T * 0.1 + 0.2 * jnp.eye(dy)
        return A, p["C"], Q, R

    def loglik(p, ys):
        A, C, Q, R = build(p)

        def step(carry, y):
            m, P = carry
            m, P = A @ m, A @ P @ A.T + Q  # predict
            S = C @ P @ C.T + R
            L = jnp.linalg.cholesky(S)
            v = y - C @ m
            w = jax.scipy.linalg.solve_triangular(L, v, lower=True)
            ll = -0.5 * (w @ w) - jnp.sum(jnp.log(jnp.diag(L))) - 0.5 * dy * jnp.log(2 * jnp.pi)
            K = jax.scipy.linalg.cho_solve((L, True), C @ P).T  # P C^T S^-1
            return (m + K @ v, P - K @ S @ K.T), ll

        _, lls = jax.lax.scan(step, (jnp.zeros(dx), jnp.eye(dx)), ys)
        return jnp.sum(lls)

    fn = jax.value_and_grad(loglik)
    r = rng(25)
    p = {"A": r.standard_normal((dx, dx)), "C": r.standard_normal((dy, dx)), "LQ": r.standard_normal((dx, dx)),
         "LR": r.standard_normal((dy, dy))}
    p = {k: v.astype(np.float32) for k, v in p.items()}
    return fn, (p, r.standard_normal((T, dy)).astype(np.float32)), {
        "state": dx, "obs": dy, "T": T, "A": "0.95 A / (1 + ||A||_F)", "Q": "0.1 L L^T + 0.1 I",
        "R": "0.1 L L^T + 0.2 I", "solves": "cholesky, solve_triangular, cho_solve"}


@program("particle_filter_stochvol", library="jax", kind="filter",
         description="bootstrap particle filter (1024 particles, 100 steps in lax.scan) for a stochastic "
                     "volatility model, systematic resampling by jnp.searchsorted on the cumulative weights "
                     "and a gather, log marginal likelihood by logsumexp; the observations and the key are "
                     "inputs")
def particle_filter():
    n, T = 1024, 100
    phi, sigma, beta = 0.95, 0.25, 0.6

    def fn(ys, key):
        def step(carry, inp):
            x, logz = carry
            y, k = inp
            k1, k2 = jr.split(k)
            x = phi * x + sigma * jr.normal(k1, (n,))
            logw = -0.5 * (y / beta) ** 2 * jnp.exp(-x) - 0.5 * x - jnp.log(beta) - 0.5 * jnp.log(2 * jnp.pi)
            lse = jax.nn.logsumexp(logw)
            w = jnp.exp(logw - lse)
            u = (jr.uniform(k2) + jnp.arange(n)) / n
            idx = jnp.clip(jnp.searchsorted(jnp.cumsum(w), u), 0, n - 1)
            return (x[idx], logz + lse - jnp.log(n)), jnp.sum(w * x)

        x0 = sigma / jnp.sqrt(1 - phi ** 2) * jr.normal(key, (n,))
        (_, logz), means = jax.lax.scan(step, (x0, 0.0), (ys, jr.split(jr.fold_in(key, 1), T)))
        return logz, means

    ys = (beta * rng(26).standard_normal(T)).astype(np.float32)
    return fn, (ys, np.asarray(jr.key_data(jr.PRNGKey(4)))), {
        "particles": n, "T": T, "phi": phi, "sigma": sigma, "beta": beta, "resampling": "systematic, every step"}


@program("cartpole_rollout_while", library="jax", kind="simulation",
         description="CartPole (gym's equations, Euler, tau 0.02) for 128 vmapped environments under a "
                     "2-layer tanh policy, each episode in a lax.while_loop until the pole falls or 500 "
                     "steps; returns the episode lengths and final states (the starts are 0.05 tanh(input))")
def cartpole_while():
    n_envs, hidden, max_steps = 128, 32, 500
    g, mc, mp, length, fmag, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    total, pml = mc + mp, mp * length

    def policy(p, s):
        return jnp.tanh(jnp.tanh(s @ p["W1"] + p["b1"]) @ p["W2"] + p["b2"])[0]

    def physics(s, a):
        x, xd, th, thd = s[0], s[1], s[2], s[3]
        force = fmag * a
        ct, st = jnp.cos(th), jnp.sin(th)
        temp = (force + pml * thd ** 2 * st) / total
        thacc = (g * st - ct * temp) / (length * (4.0 / 3.0 - mp * ct ** 2 / total))
        xacc = temp - pml * thacc * ct / total
        return jnp.stack([x + tau * xd, xd + tau * xacc, th + tau * thd, thd + tau * thacc])

    def episode(p, s0):
        def cond(c):
            s, t = c
            alive = (jnp.abs(s[0]) < 2.4) & (jnp.abs(s[2]) < 0.2095)
            return alive & (t < max_steps)

        def body(c):
            s, t = c
            return physics(s, policy(p, s)), t + 1

        return jax.lax.while_loop(cond, body, (s0, 0))

    def fn(p, raw_s0):
        p = jax.tree.map(lambda w: 0.5 * w, p)
        s, steps = jax.vmap(episode, in_axes=(None, 0))(p, 0.05 * jnp.tanh(raw_s0))
        return steps, s

    r = rng(27)
    p = {"W1": r.standard_normal((4, hidden)), "b1": r.standard_normal(hidden), "W2": r.standard_normal((hidden, 1)),
         "b2": r.standard_normal(1)}
    p = {k: v.astype(np.float32) for k, v in p.items()}
    return fn, (p, r.standard_normal((n_envs, 4)).astype(np.float32)), {
        "envs": n_envs, "hidden": hidden, "max_steps": max_steps, "tau": tau, "integrator": "Euler",
        "policy": "tanh MLP 4-32-1, weights 0.5 x input", "termination": "|x| > 2.4 or |theta| > 12 deg"}


def _coupling_init(r, d: int, hidden: int) -> dict:
    half = d // 2
    return {"W1": r.standard_normal((half, hidden)) / np.sqrt(half), "b1": np.zeros(hidden),
            "W2": r.standard_normal((hidden, hidden)) / np.sqrt(hidden), "b2": np.zeros(hidden),
            "Ws": 0.01 * r.standard_normal((hidden, d - half)), "bs": np.zeros(d - half),
            "Wt": 0.01 * r.standard_normal((hidden, d - half)), "bt": np.zeros(d - half)}


@program("realnvp_flow_train", library="jax", kind="train_step", uses=("optax",),
         description="RealNVP normalizing flow (8 affine coupling layers with alternating halves, MLP "
                     "conditioners 8-64-64, tanh-bounded log-scales), maximum-likelihood train step on a "
                     "batch of 256 16-D samples, optax.sgd(momentum 0.9) with global-norm clipping")
def realnvp_train():
    d, hidden, layers, batch = 16, 64, 8, 256
    r = rng(28)
    params = [{k: v.astype(np.float32) for k, v in _coupling_init(r, d, hidden).items()} for _ in range(layers)]
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.sgd(1e-3, momentum=0.9))
    half = d // 2

    def forward(params, x):  # data -> latent, with log|det J|
        logdet = jnp.zeros(x.shape[0])
        for i, p in enumerate(params):
            if i % 2:
                x = x[:, ::-1]
            x1, x2 = x[:, :half], x[:, half:]
            h = jax.nn.relu(x1 @ p["W1"] + p["b1"])
            h = jax.nn.relu(h @ p["W2"] + p["b2"])
            s = jnp.tanh(h @ p["Ws"] + p["bs"])
            t = h @ p["Wt"] + p["bt"]
            x = jnp.concatenate([x1, x2 * jnp.exp(s) + t], axis=1)
            logdet = logdet + jnp.sum(s, axis=1)
        return x, logdet

    def nll(params, x):
        z, logdet = forward(params, x)
        return -jnp.mean(-0.5 * jnp.sum(z ** 2, axis=1) - 0.5 * d * jnp.log(2 * jnp.pi) + logdet)

    def step(params, opt_state, x):
        value, grads = jax.value_and_grad(nll)(params, x)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    x = r.standard_normal((batch, d)).astype(np.float32)
    return step, (params, tx.init(params), x), {
        "d": d, "layers": layers, "hidden": hidden, "batch": batch, "log_scale": "tanh",
        "optimizer": "chain(clip_by_global_norm(1), sgd(1e-3, momentum=0.9))"}
