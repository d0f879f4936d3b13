"""The GPU path: run by `benchmarks/gpu_check.sh` on a machine with a CUDA GPU, skipped elsewhere.

These check what only a GPU shows: that programs compile, run and time on the GPU, that the
GPU's XLA options are accepted by its compiler, that `optimization_barrier` is a real fusion
boundary there (it is removed before fusion on CPU), and that `optimize` returns a verified
callable on the GPU.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(jax.default_backend() != "gpu", reason="needs a GPU (jax's default backend)")]


def _mlp(x, w1, w2):
    return jnp.sum(jax.nn.gelu(x @ w1) @ w2, axis=0)


def _args(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((256, 512), np.float32), rng.standard_normal((512, 512), np.float32),
            rng.standard_normal((512, 128), np.float32))


def test_runtime_compiles_runs_and_times_on_the_gpu():
    from shlo_env.execute import runtime
    from shlo_env.ir.program import lower

    assert runtime.platform() == "gpu"
    args = _args()
    program = lower(_mlp, *args)
    exe = runtime.compile(program)
    (out,) = runtime.execute(exe, args)
    np.testing.assert_allclose(out, np.asarray(jax.jit(_mlp)(*args)), rtol=2e-2, atol=2e-2)
    timing = runtime.measure(exe, runtime.to_device(args))
    assert 0 < timing.full < 1.0


def test_gpu_options_compile():
    """Every value-preserving GPU option the search may set is accepted by this jaxlib's compiler."""
    from shlo_env.execute import xla_options

    args = _args()
    expected = np.asarray(jax.jit(_mlp)(*args))
    options = xla_options.candidate_options("gpu")
    assert options
    for token in options:
        f = jax.jit(_mlp, compiler_options=xla_options.compiler_options((token,)))
        np.testing.assert_allclose(np.asarray(f(*args)), expected, rtol=2e-2, atol=2e-2, err_msg=token)


def test_optimization_barrier_is_a_fusion_boundary_on_gpu():
    from shlo_env.execute import runtime
    from shlo_env.ir.program import lower

    def fused(x):
        return jnp.tanh(jnp.exp(x) * 2.0)

    def split(x):
        (y,) = jax.lax.optimization_barrier((jnp.exp(x),))
        return jnp.tanh(y * 2.0)

    x = np.ones((1024, 1024), np.float32)
    kernels = []
    for fn in (fused, split):
        hlo = runtime.optimized_hlo(runtime.compile(lower(fn, x)))
        entry = hlo[hlo.index("ENTRY"):]
        kernels.append(entry.count(" fusion(") + entry.count("kind=k"))
    assert kernels[1] > kernels[0], kernels


def test_optimize_on_gpu_is_verified_and_not_slower():
    import shlo_env

    args = _args()
    f = shlo_env.optimize(_mlp, *args, budget_s=20, cache=False)
    np.testing.assert_allclose(np.asarray(f(*args)), np.asarray(jax.jit(_mlp)(*args)), rtol=2e-2, atol=2e-2)
    assert f.report.ratio <= 1.0 + 1e-9
