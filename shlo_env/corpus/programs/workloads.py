"""Classic JAX workloads in plain jax/jax.numpy, written the way their communities write them:
simulation in `lax.scan`/`fori_loop`, forces from `jax.grad` of an energy, `vmap` over particles
or collocation points, `jax.scipy.linalg` for Gaussian processes, `segment_sum` for graphs."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax
from jax.scipy.linalg import cho_factor, cho_solve, solve_triangular

from shlo_env.corpus.programs import program


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _dense_init(rng, sizes, scale=None):
    params = []
    for m, n in zip(sizes[:-1], sizes[1:]):
        s = scale if scale is not None else np.sqrt(2.0 / m)
        params.append((rng.standard_normal((m, n)).astype(np.float32) * s, np.zeros(n, np.float32)))
    return params


# --- CartPole in lax.scan (gymnax-style dynamics) ----------------------------------------------

@program("cartpole_scan", library="jax", kind="simulation",
         description="CartPole (gym equations, Euler, auto-reset) for 64 vmapped envs x 200 steps in "
                     "lax.scan under a linear-tanh policy; returns the mean return")
def cartpole_scan():
    gravity, masscart, masspole, length, force_mag, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    total_mass = masscart + masspole
    polemass_length = masspole * length
    theta_threshold = 12 * 2 * np.pi / 360
    x_threshold = 2.4

    def step(state, action):
        x, x_dot, theta, theta_dot = state
        force = force_mag * action
        costheta, sintheta = jnp.cos(theta), jnp.sin(theta)
        temp = (force + polemass_length * theta_dot ** 2 * sintheta) / total_mass
        thetaacc = (gravity * sintheta - costheta * temp) / (
            length * (4.0 / 3.0 - masspole * costheta ** 2 / total_mass))
        xacc = temp - polemass_length * thetaacc * costheta / total_mass
        x = x + tau * x_dot
        x_dot = x_dot + tau * xacc
        theta = theta + tau * theta_dot
        theta_dot = theta_dot + tau * thetaacc
        new = jnp.stack([x, x_dot, theta, theta_dot])
        done = (x < -x_threshold) | (x > x_threshold) | (theta < -theta_threshold) | (theta > theta_threshold)
        return new, done

    def policy(w, b, obs):
        return jnp.tanh(obs @ w + b)

    def rollout(w, b, init_states):
        def env_step(carry, _):
            states, returns, alive = carry
            actions = jax.vmap(functools.partial(policy, w, b))(states)
            new_states, done = jax.vmap(step)(states, actions)
            reward = alive.astype(jnp.float32)
            states = jnp.where(done[:, None], init_states, new_states)  # auto-reset
            alive = alive & ~done
            return (states, returns + reward, alive), reward.mean()

        carry0 = (init_states, jnp.zeros(init_states.shape[0]), jnp.ones(init_states.shape[0], bool))
        (_, returns, _), per_step = lax.scan(env_step, carry0, None, length=200)
        return returns.mean(), per_step

    rng = _rng(50)
    w = rng.standard_normal((4,)).astype(np.float32)
    b = np.float32(0.0)
    init = rng.uniform(-0.05, 0.05, size=(64, 4)).astype(np.float32)
    return rollout, (w, b, init)


# --- gravitational N-body, leapfrog ------------------------------------------------------------

@program("nbody_leapfrog", library="jax", kind="simulation",
         description="gravitational N-body (256 bodies, softened all-pairs forces), 10 kick-drift-kick "
                     "leapfrog steps in lax.fori_loop")
def nbody_leapfrog():
    G, softening, dt = 1.0, 0.1, 0.01

    def accelerations(pos, mass):
        d = pos[None, :, :] - pos[:, None, :]
        inv_r3 = (jnp.sum(d ** 2, axis=-1) + softening ** 2) ** -1.5
        return G * jnp.einsum("ij,ijk,j->ik", inv_r3, d, mass)

    def simulate(pos, vel, mass):
        def kdk(_, state):
            pos, vel = state
            vel = vel + 0.5 * dt * accelerations(pos, mass)
            pos = pos + dt * vel
            vel = vel + 0.5 * dt * accelerations(pos, mass)
            return pos, vel

        pos, vel = lax.fori_loop(0, 10, kdk, (pos, vel))
        kinetic = 0.5 * jnp.sum(mass[:, None] * vel ** 2)
        return pos, vel, kinetic

    rng = _rng(51)
    pos = rng.standard_normal((256, 3)).astype(np.float32)
    vel = 0.1 * rng.standard_normal((256, 3)).astype(np.float32)
    mass = rng.uniform(0.5, 1.5, 256).astype(np.float32) / 256
    return simulate, (pos, vel, mass)


# --- Lennard-Jones molecular dynamics (jax-md style: forces = -grad(energy)) ---------------------

@program("lj_md_verlet", library="jax", kind="simulation",
         description="Lennard-Jones fluid (128 particles, periodic box, minimum image), forces as "
                     "-jax.grad(energy), 5 velocity-Verlet steps")
def lj_md_verlet():
    box, sigma, epsilon, dt = 6.0, 1.0, 1.0, 0.002

    def displacement(Ra, Rb):
        dR = Ra - Rb
        return dR - box * jnp.round(dR / box)

    def energy_fn(R):
        dR = jax.vmap(jax.vmap(displacement, (None, 0)), (0, None))(R, R)
        r2 = jnp.sum(dR ** 2, axis=-1)
        n = R.shape[0]
        mask = ~jnp.eye(n, dtype=bool)
        r2 = jnp.where(mask, r2, 1.0)
        inv6 = (sigma ** 2 / r2) ** 3
        e = 4.0 * epsilon * (inv6 ** 2 - inv6)
        return 0.5 * jnp.sum(jnp.where(mask & (r2 < 2.5 ** 2), e, 0.0))

    force_fn = jax.grad(lambda R: -energy_fn(R))

    def simulate(R, V):
        def step(state, _):
            R, V, F = state
            R = jnp.mod(R + dt * V + 0.5 * dt ** 2 * F, box)
            F_new = force_fn(R)
            V = V + 0.5 * dt * (F + F_new)
            return (R, V, F_new), energy_fn(R)

        (R, V, _), energies = lax.scan(step, (R, V, force_fn(R)), None, length=5)
        return R, V, energies

    rng = _rng(52)
    side = int(np.ceil(128 ** (1 / 3)))
    grid = np.stack(np.meshgrid(*[np.arange(side)] * 3, indexing="ij"), -1).reshape(-1, 3)[:128]
    R = (grid * (box / side) + 0.05 * rng.standard_normal((128, 3))).astype(np.float32) % box
    V = 0.1 * rng.standard_normal((128, 3)).astype(np.float32)
    return simulate, (R.astype(np.float32), V)


# --- Gaussian processes ------------------------------------------------------------------------

def _rbf(x1, x2, lengthscale, variance):
    d2 = jnp.sum((x1[:, None, :] - x2[None, :, :]) ** 2, axis=-1)
    return variance * jnp.exp(-0.5 * d2 / lengthscale ** 2)


@program("gp_posterior", library="jax", kind="inference",
         description="GP regression: RBF kernel on 256 training points, Cholesky (cho_factor/cho_solve), "
                     "posterior mean and variance at 128 test points (LAPACK potrf custom call)")
def gp_posterior():
    def posterior(X, y, Xs, lengthscale, variance, noise):
        K = _rbf(X, X, lengthscale, variance) + noise * jnp.eye(X.shape[0])
        Ks = _rbf(X, Xs, lengthscale, variance)
        Kss_diag = variance * jnp.ones(Xs.shape[0])
        L = cho_factor(K, lower=True)
        alpha = cho_solve(L, y)
        mean = Ks.T @ alpha
        v = solve_triangular(L[0], Ks, lower=True)
        var = Kss_diag - jnp.sum(v ** 2, axis=0)
        return mean, var

    rng = _rng(53)
    X = rng.uniform(-3, 3, (256, 2)).astype(np.float32)
    y = (np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.standard_normal(256)).astype(np.float32)
    Xs = rng.uniform(-3, 3, (128, 2)).astype(np.float32)
    return posterior, (X, y, Xs, np.float32(1.0), np.float32(1.0), np.float32(0.1))


@program("gp_hyperparam_train", library="jax", kind="train_step", uses=("optax",),
         description="GP marginal-likelihood training: grad of the negative log marginal likelihood "
                     "(through a Cholesky) wrt log-hyperparameters, optax.adam step, 128 points")
def gp_hyperparam_train():
    opt = optax.adam(0.05)

    def nll(log_params, X, y):
        lengthscale, variance, noise = jnp.exp(log_params)
        K = _rbf(X, X, lengthscale, variance) + (noise + 1e-4) * jnp.eye(X.shape[0])
        L = jnp.linalg.cholesky(K)
        alpha = cho_solve((L, True), y)
        return 0.5 * y @ alpha + jnp.sum(jnp.log(jnp.diag(L))) + 0.5 * X.shape[0] * jnp.log(2 * jnp.pi)

    def train_step(log_params, opt_state, X, y):
        loss, grads = jax.value_and_grad(nll)(log_params, X, y)
        updates, opt_state = opt.update(grads, opt_state)
        return optax.apply_updates(log_params, updates), opt_state, loss

    rng = _rng(54)
    X = rng.uniform(-3, 3, (128, 1)).astype(np.float32)
    y = (np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(128)).astype(np.float32)
    log_params = np.log(np.array([1.0, 1.0, 0.1], np.float32))
    return train_step, (log_params, opt.init(log_params), X, y)


# --- physics-informed neural networks ----------------------------------------------------------

def _mlp_tanh(params, x):
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    return x @ w + b


@program("pinn_burgers_train", library="jax", kind="train_step", uses=("optax",),
         description="PINN for viscous Burgers (u_t + u u_x = nu u_xx): residual via nested jax.grad, "
                     "vmapped over 256 collocation points, + initial/boundary loss; optax.adam step")
def pinn_burgers_train():
    nu = 0.01 / np.pi
    opt = optax.adam(1e-3)

    def u(params, t, x):
        return _mlp_tanh(params, jnp.stack([t, x]))[0]

    def residual(params, t, x):
        u_val = u(params, t, x)
        u_t = jax.grad(u, 1)(params, t, x)
        u_x = jax.grad(u, 2)(params, t, x)
        u_xx = jax.grad(jax.grad(u, 2), 2)(params, t, x)
        return u_t + u_val * u_x - nu * u_xx

    def loss_fn(params, tc, xc, x0, tb):
        r = jax.vmap(residual, (None, 0, 0))(params, tc, xc)
        u0 = jax.vmap(u, (None, None, 0))(params, 0.0, x0)
        ub = jax.vmap(u, (None, 0, None))(params, tb, 1.0) ** 2 + jax.vmap(u, (None, 0, None))(params, tb, -1.0) ** 2
        return jnp.mean(r ** 2) + jnp.mean((u0 + jnp.sin(jnp.pi * x0)) ** 2) + jnp.mean(ub)

    def train_step(params, opt_state, tc, xc, x0, tb):
        loss, grads = jax.value_and_grad(loss_fn)(params, tc, xc, x0, tb)
        updates, opt_state = opt.update(grads, opt_state)
        return optax.apply_updates(params, updates), opt_state, loss

    rng = _rng(55)
    params = _dense_init(rng, [2, 32, 32, 32, 1])
    tc = rng.uniform(0, 1, 256).astype(np.float32)
    xc = rng.uniform(-1, 1, 256).astype(np.float32)
    x0 = rng.uniform(-1, 1, 64).astype(np.float32)
    tb = rng.uniform(0, 1, 64).astype(np.float32)
    return train_step, (params, opt.init(params), tc, xc, x0, tb)


@program("pinn_poisson_loss", library="jax", kind="inference",
         description="PINN loss for the 2-D Poisson equation -lap(u) = f on [0,1]^2: Laplacian via "
                     "jax.hessian trace, vmapped over 512 interior + 128 boundary points")
def pinn_poisson_loss():
    def u(params, xy):
        return _mlp_tanh(params, xy)[0]

    def f(xy):
        return 2 * jnp.pi ** 2 * jnp.sin(jnp.pi * xy[0]) * jnp.sin(jnp.pi * xy[1])

    def loss(params, interior, boundary):
        lap = jax.vmap(lambda p: jnp.trace(jax.hessian(u, 1)(params, p)))(interior)
        res = -lap - jax.vmap(f)(interior)
        bc = jax.vmap(u, (None, 0))(params, boundary)
        return jnp.mean(res ** 2) + 10.0 * jnp.mean(bc ** 2)

    rng = _rng(56)
    params = _dense_init(rng, [2, 64, 64, 1])
    interior = rng.uniform(0, 1, (512, 2)).astype(np.float32)
    s = rng.uniform(0, 1, 32).astype(np.float32)
    z, o = np.zeros(32, np.float32), np.ones(32, np.float32)
    boundary = np.concatenate([np.stack(p, 1) for p in [(s, z), (s, o), (z, s), (o, s)]])
    return loss, (params, interior, boundary)


# --- SIREN -------------------------------------------------------------------------------------

def _siren_init(rng, sizes, w0=30.0):
    params = []
    for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        bound = 1.0 / m if i == 0 else np.sqrt(6.0 / m) / w0
        params.append((rng.uniform(-bound, bound, (m, n)).astype(np.float32),
                       rng.uniform(-1 / np.sqrt(m), 1 / np.sqrt(m), n).astype(np.float32)))
    return params


def _siren(params, coords, w0=30.0):
    x = coords
    for w, b in params[:-1]:
        x = jnp.sin(w0 * (x @ w + b))
    w, b = params[-1]
    return x @ w + b


@program("siren_image_fit_train", library="jax", kind="train_step", uses=("optax",),
         description="SIREN (sine activations, w0=30, Sitzmann init; 2-128-128-128-3) fitting a 32x32 "
                     "RGB image: MSE, optax.adam step over all 1024 pixel coordinates")
def siren_image_fit_train():
    opt = optax.adam(1e-4)

    def train_step(params, opt_state, coords, pixels):
        loss, grads = jax.value_and_grad(lambda p: jnp.mean((_siren(p, coords) - pixels) ** 2))(params)
        updates, opt_state = opt.update(grads, opt_state)
        return optax.apply_updates(params, updates), opt_state, loss

    rng = _rng(57)
    params = _siren_init(rng, [2, 128, 128, 128, 3])
    lin = np.linspace(-1, 1, 32, dtype=np.float32)
    coords = np.stack(np.meshgrid(lin, lin, indexing="ij"), -1).reshape(-1, 2)
    pixels = rng.random((1024, 3)).astype(np.float32)
    return train_step, (params, opt.init(params), coords, pixels)


@program("siren_gradient_field", library="jax", kind="inference",
         description="SIREN forward plus its spatial gradient (jax.vmap(jax.grad)), the Poisson/ "
                     "gradient-supervision setup of the SIREN paper, 4096 coordinates")
def siren_gradient_field():
    def field(params, coords):
        values = _siren(params, coords)
        grads = jax.vmap(jax.grad(lambda c: _siren(params, c[None])[0, 0]))(coords)
        return values, grads

    rng = _rng(58)
    params = _siren_init(rng, [2, 64, 64, 1])
    coords = rng.uniform(-1, 1, (4096, 2)).astype(np.float32)
    return field, (params, coords)


# --- graph neural networks (jraph-style, segment_sum) ------------------------------------------

@program("gnn_gcn_layer", library="jax", kind="inference",
         description="two GCN layers with symmetric degree normalization: gather senders, "
                     "jax.ops.segment_sum over receivers; 512 nodes, 4096 edges, 64 features")
def gnn_gcn_layer():
    def gcn_layer(w, b, nodes, senders, receivers):
        n = nodes.shape[0]
        ones = jnp.ones_like(senders, dtype=nodes.dtype)
        deg = jax.ops.segment_sum(ones, receivers, n) + 1.0  # self loops
        norm = lax.rsqrt(deg)
        h = nodes @ w
        messages = h[senders] * norm[senders, None]
        agg = jax.ops.segment_sum(messages, receivers, n) * norm[:, None]
        return agg + h / deg[:, None] + b

    def gcn(params, nodes, senders, receivers):
        (w1, b1), (w2, b2) = params
        h = jax.nn.relu(gcn_layer(w1, b1, nodes, senders, receivers))
        return gcn_layer(w2, b2, h, senders, receivers)

    rng = _rng(59)
    params = _dense_init(rng, [64, 64, 16])
    nodes = rng.standard_normal((512, 64)).astype(np.float32)
    senders = rng.integers(0, 512, 4096).astype(np.int32)
    receivers = rng.integers(0, 512, 4096).astype(np.int32)
    return gcn, (params, nodes, senders, receivers)


@program("gnn_interaction_net_train", library="jax", kind="train_step", uses=("optax",),
         description="interaction network (edge MLP on [sender, receiver, edge] features, segment_sum "
                     "aggregation, node MLP), MSE on node targets, optax.adam step; 256 nodes, 1024 edges")
def gnn_interaction_net_train():
    opt = optax.adam(1e-3)

    def mlp(params, x):
        for w, b in params[:-1]:
            x = jax.nn.relu(x @ w + b)
        w, b = params[-1]
        return x @ w + b

    def forward(params, nodes, edges, senders, receivers):
        edge_in = jnp.concatenate([nodes[senders], nodes[receivers], edges], axis=-1)
        messages = mlp(params["edge"], edge_in)
        agg = jax.ops.segment_sum(messages, receivers, num_segments=nodes.shape[0])
        return mlp(params["node"], jnp.concatenate([nodes, agg], axis=-1))

    def train_step(params, opt_state, nodes, edges, senders, receivers, targets):
        def loss_fn(params):
            return jnp.mean((forward(params, nodes, edges, senders, receivers) - targets) ** 2)

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    rng = _rng(60)
    params = {"edge": _dense_init(rng, [16 + 16 + 8, 64, 32]), "node": _dense_init(rng, [16 + 32, 64, 16])}
    nodes = rng.standard_normal((256, 16)).astype(np.float32)
    edges = rng.standard_normal((1024, 8)).astype(np.float32)
    senders = rng.integers(0, 256, 1024).astype(np.int32)
    receivers = rng.integers(0, 256, 1024).astype(np.int32)
    targets = rng.standard_normal((256, 16)).astype(np.float32)
    return train_step, (params, opt.init(params), nodes, edges, senders, receivers, targets)


# --- PDE stencil, filtering, MCMC, linear models --------------------------------------------------

@program("heat2d_stencil", library="jax", kind="simulation",
         description="2-D heat equation, explicit finite differences with jnp.roll (periodic), "
                     "128x128 grid, 50 steps in lax.fori_loop")
def heat2d_stencil():
    alpha, dx, dt = 0.1, 1.0 / 128, 0.2 * (1.0 / 128) ** 2 / 0.1

    def laplacian(u):
        return (jnp.roll(u, 1, 0) + jnp.roll(u, -1, 0) + jnp.roll(u, 1, 1) + jnp.roll(u, -1, 1) - 4 * u) / dx ** 2

    def simulate(u0, source):
        return lax.fori_loop(0, 50, lambda _, u: u + dt * (alpha * laplacian(u) + source), u0)

    rng = _rng(61)
    return simulate, (rng.standard_normal((128, 128)).astype(np.float32),
                      rng.standard_normal((128, 128)).astype(np.float32))


@program("kalman_filter_scan", library="jax", kind="inference",
         description="linear-Gaussian Kalman filter (8-D state, 4-D observations) over 100 steps in "
                     "lax.scan, with log-likelihood; jnp.linalg.solve in the update (LAPACK getrf)")
def kalman_filter_scan():
    def kalman_filter(A, Q, H, R, m0, P0, ys):
        def step(carry, y):
            m, P, ll = carry
            m = A @ m
            P = A @ P @ A.T + Q
            S = H @ P @ H.T + R
            resid = y - H @ m
            K = jnp.linalg.solve(S, H @ P).T
            m = m + K @ resid
            P = P - K @ S @ K.T
            ll = ll - 0.5 * (resid @ jnp.linalg.solve(S, resid) + jnp.linalg.slogdet(S)[1]
                             + y.shape[0] * jnp.log(2 * jnp.pi))
            return (m, P, ll), m

        (m, P, ll), ms = lax.scan(step, (m0, P0, jnp.zeros((), m0.dtype)), ys)
        return ms, ll

    rng = _rng(62)
    A = (np.eye(8) + 0.05 * rng.standard_normal((8, 8))).astype(np.float32) * 0.95
    Q = 0.1 * np.eye(8, dtype=np.float32)
    H = rng.standard_normal((4, 8)).astype(np.float32)
    R = 0.5 * np.eye(4, dtype=np.float32)
    ys = rng.standard_normal((100, 4)).astype(np.float32)
    return kalman_filter, (A, Q, H, R, np.zeros(8, np.float32), np.eye(8, dtype=np.float32), ys)


@program("hmc_logreg_leapfrog", library="jax", kind="inference",
         description="HMC proposal for Bayesian logistic regression (BlackJAX style): 16 leapfrog "
                     "steps with jax.grad of the log posterior, Metropolis log acceptance; 1000x20 data")
def hmc_logreg_leapfrog():
    def logdensity(beta, X, y):
        logits = X @ beta
        return jnp.sum(y * logits - jnp.logaddexp(0.0, logits)) - 0.5 * jnp.sum(beta ** 2)

    def hmc_proposal(beta, momentum, X, y, step_size):
        grad = jax.grad(logdensity)

        def leapfrog(_, state):
            q, p = state
            p = p + 0.5 * step_size * grad(q, X, y)
            q = q + step_size * p
            p = p + 0.5 * step_size * grad(q, X, y)
            return q, p

        q, p = lax.fori_loop(0, 16, leapfrog, (beta, momentum))
        h0 = -logdensity(beta, X, y) + 0.5 * momentum @ momentum
        h1 = -logdensity(q, X, y) + 0.5 * p @ p
        return q, jnp.minimum(0.0, h0 - h1)

    rng = _rng(63)
    X = rng.standard_normal((1000, 20)).astype(np.float32)
    true = rng.standard_normal(20).astype(np.float32)
    y = (rng.random(1000) < 1 / (1 + np.exp(-X @ true))).astype(np.float32)
    return hmc_proposal, (np.zeros(20, np.float32), rng.standard_normal(20).astype(np.float32), X, y,
                          np.float32(0.01))


@program("logreg_sgd_train", library="jax", kind="train_step",
         description="softmax regression with L2, hand-written SGD update via jax.grad and "
                     "jax.tree.map (the JAX quickstart style), batch 512 x 128 features, 10 classes")
def logreg_sgd_train():
    def loss(params, x, y):
        w, b = params
        logits = x @ w + b
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * jax.nn.one_hot(y, 10), -1)) + 1e-4 * jnp.sum(w ** 2)

    def update(params, x, y, lr=0.1):
        l, grads = jax.value_and_grad(loss)(params, x, y)
        return jax.tree.map(lambda p, g: p - lr * g, params, grads), l

    rng = _rng(64)
    params = (0.01 * rng.standard_normal((128, 10)).astype(np.float32), np.zeros(10, np.float32))
    return update, (params, rng.standard_normal((512, 128)).astype(np.float32),
                    rng.integers(0, 10, 512).astype(np.int32))
