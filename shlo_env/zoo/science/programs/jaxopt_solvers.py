"""jaxopt: L-BFGS with a zoom line search, hyperparameter gradients by implicit differentiation,
and Levenberg-Marquardt nonlinear least squares."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jaxopt
import numpy as np

from shlo_env.zoo.science.programs import program, rng


@program("jaxopt_lbfgs_logreg", library="jaxopt", kind="optimization",
         description="jaxopt.LBFGS (history 10, zoom line search satisfying the strong Wolfe conditions, "
                     "at most 50 iterations, tol 1e-5) on an L2-regularised multinomial logistic regression, "
                     "512 x 32 features, 5 classes (labels from an input's argmax); returns the weights, the "
                     "loss and the iteration count")
def lbfgs_logreg():
    n, d, k = 512, 32, 5

    def fn(w0, X, raw_labels):
        labels = jnp.argmax(raw_labels, axis=1)

        def loss(w):
            logits = X @ w["W"] + w["b"]
            nll = -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], axis=1))
            return nll + 1e-2 * jnp.sum(w["W"] ** 2)

        solver = jaxopt.LBFGS(fun=loss, history_size=10, maxiter=50, tol=1e-5, linesearch="zoom")
        w, state = solver.run(w0)
        return w, state.value, state.iter_num

    r = rng(16)
    w0 = {"W": (0.1 * r.standard_normal((d, k))).astype(np.float32), "b": np.zeros(k, np.float32)}
    return fn, (w0, r.standard_normal((n, d)).astype(np.float32), r.standard_normal((n, k)).astype(np.float32)), {
        "n": n, "d": d, "classes": k, "l2": 1e-2, "history_size": 10, "maxiter": 50, "tol": 1e-5,
        "linesearch": "zoom"}


@program("jaxopt_implicit_diff_ridge", library="jaxopt", kind="gradient",
         description="hyperparameter gradient by implicit differentiation: the validation loss of a ridge "
                     "regression solved by jaxopt.GradientDescent (acceleration, 200 iterations) on 256 x 64 "
                     "training data, differentiated wrt the log regularisation through the optimality "
                     "condition (jaxopt's custom root, a CG linear solve)")
def implicit_diff_ridge():
    n, m, d = 256, 128, 64

    def ridge_obj(w, log_lam, X, y):
        return 0.5 * jnp.mean((X @ w - y) ** 2) + 0.5 * jnp.exp(log_lam) * jnp.sum(w ** 2)

    solver = jaxopt.GradientDescent(fun=ridge_obj, maxiter=200, tol=1e-6, acceleration=True, implicit_diff=True)

    def outer(log_lam, X, y, Xv, yv):
        w = solver.run(jnp.zeros(X.shape[1]), log_lam, X, y).params
        return jnp.mean((Xv @ w - yv) ** 2)

    def fn(raw_log_lam, X, y, Xv, yv):
        log_lam = -1.0 + 0.5 * jnp.tanh(raw_log_lam)
        return jax.value_and_grad(outer)(log_lam, X, y, Xv, yv)

    r = rng(17)
    w_true = r.standard_normal(d)
    X, Xv = r.standard_normal((n, d)), r.standard_normal((m, d))
    y, yv = X @ w_true + r.standard_normal(n), Xv @ w_true + r.standard_normal(m)
    f32 = lambda a: np.asarray(a, np.float32)  # noqa: E731
    return fn, (np.float32(0.0), f32(X), f32(y), f32(Xv), f32(yv)), {
        "n_train": n, "n_val": m, "d": d, "inner": "GradientDescent(acceleration, maxiter 200)",
        "implicit_diff": "custom_root, CG", "log_lambda": "-1 + 0.5 tanh(input)"}


@program("jaxopt_levenberg_marquardt_fit", library="jaxopt", kind="optimization",
         description="jaxopt.LevenbergMarquardt (at most 30 iterations, materialised Jacobian, Cholesky "
                     "solves of the damped normal equations) fitting a sum of 3 damped sinusoids (9 "
                     "parameters) to 200 noisy samples from an input; returns the fit and the residual norm")
def levenberg_marquardt():
    t = np.linspace(0.0, 10.0, 200, dtype=np.float32)
    theta_true = np.array([1.0, 0.3, 1.5, 0.5, 0.1, 3.0, 0.8, 0.2, 0.7], np.float32)

    def model(theta):
        a, lam, w = theta[0::3], theta[1::3], theta[2::3]
        return jnp.sum(a[:, None] * jnp.exp(-lam[:, None] * t) * jnp.cos(w[:, None] * t), axis=0)

    def fn(raw_theta0, noise):
        y = model(jnp.asarray(theta_true)) + 0.05 * noise
        theta0 = jnp.asarray(theta_true) * (1.0 + 0.05 * jnp.tanh(raw_theta0))
        solver = jaxopt.LevenbergMarquardt(residual_fun=lambda th: model(th) - y, maxiter=30, tol=1e-6,
                                            solver="cholesky", materialize_jac=True)
        theta, state = solver.run(theta0)
        return theta, jnp.linalg.norm(state.residual), state.iter_num

    r = rng(18)
    return fn, (r.standard_normal(9).astype(np.float32), r.standard_normal(t.shape[0]).astype(np.float32)), {
        "samples": int(t.shape[0]), "components": 3, "parameters": 9, "maxiter": 30, "tol": 1e-6,
        "solver": "cholesky", "materialize_jac": True,
        "start": "true parameters x (1 + 0.05 tanh(input))", "noise": 0.05}
