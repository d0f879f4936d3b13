"""Complex element types wherever element types are read: hash, constants, splats, rewrites,
verification, optimize (issue 11, item 2)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxlib.mlir import ir

import shlo_env as se
from shlo_env.execute import runtime
from shlo_env import testing
from shlo_env.rewrite import driver
from shlo_env.ir.builder import Builder
from shlo_env.ir.program import ir_scope
from shlo_env.ir.ops import complex_constant
from shlo_env.patterns.base import all_patterns
from shlo_env.patterns.matching import constant_value, splat_value

C = jnp.array([1 + 2j, 3 - 1j, .5j, 2.], jnp.complex64)


def issue_example(x):
    return x * C


def mixed(x, y):
    a = x * C + (x * 1)
    b = jnp.broadcast_to(y, (4, 4)) * (2 + 1j) + jnp.ones((4, 4), jnp.complex64)
    d = (b @ b.T) @ x[:, None]
    e = jnp.concatenate([a, a]) - jnp.concatenate([x, x])
    return a + (-(-a)), jnp.sum(d, axis=0) + jnp.sum(b.T.reshape(16)), e[::2]


def cvec(rng, n, dtype=np.complex64):
    return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype)


def test_dag_hash_reads_complex_constants():
    x = cvec(np.random.default_rng(0), 4)
    p = se.lower(issue_example, x)
    other = se.lower(lambda x: x * (C + 1j), x)
    assert se.dag_hash(p) == se.dag_hash(se.load(p.text()))
    assert se.dag_hash(p) != se.dag_hash(other)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("n", [3, 300])  # small constants print as lists, large ones as hex bytes
def test_complex_constants_round_trip_through_the_builder(dtype, n):
    rng = np.random.default_rng(1)
    values = cvec(rng, n, dtype)
    values[0] = complex(np.nan, -0.0)
    values[1] = complex(np.inf, 1.5)
    with ir_scope():
        t = ir.RankedTensorType.get([n], ir.ComplexType.get(ir.F64Type.get() if dtype == np.complex128
                                                            else ir.F32Type.get()))
        module = ir.Module.parse("func.func @f() { return }")
        block = module.body.operations[0].regions[0].blocks[0]
        b = Builder.before(block.operations[0])
        full, splat = b.constant(values, t), b.constant(values[2], t)
        reparsed = ir.Module.parse(str(module))
    got = constant_value(full)
    assert got.dtype == dtype and got.tobytes() == values.tobytes()  # bitwise, NaN and -0 included
    assert splat_value(splat) == values[2].item()
    ops = list(reparsed.body.operations[0].regions[0].blocks[0].operations)
    assert complex_constant(ops[0]).tobytes() == values.tobytes()


def test_patterns_match_complex_constants_without_errors():
    rng = np.random.default_rng(2)
    p = se.lower(mixed, cvec(rng, 4), cvec(rng, 4))
    stats = driver.AugmentStats()
    driver.augment(p, all_patterns(), stats=stats)
    assert stats.errors == {}
    assert stats.recorded["mul_one"] >= 1  # reads the splat (1+0j) of a complex constant


def test_rewrites_of_complex_programs_keep_their_values():
    rng = np.random.default_rng(3)
    p = se.lower(mixed, cvec(rng, 4), cvec(rng, 4))
    result = testing.check_rewrites(p, decisions="each")
    assert result.num_candidates >= 8
    assert not result.mismatches, result.mismatches[0]


def test_the_float64_reference_covers_complex_programs():
    x = cvec(np.random.default_rng(4), 4)
    p = se.lower(issue_example, x)
    ref = runtime.reference_outputs(p, [x])
    assert ref is not None and ref[0].dtype == np.complex128
    np.testing.assert_allclose(ref[0], x.astype(np.complex128) * np.asarray(C, np.complex128), rtol=1e-6)


def test_optimize_env_and_run_loop_accept_complex_programs():
    x = cvec(np.random.default_rng(5), 4)
    opt = se.optimize(issue_example, x, budget_s=20)
    np.testing.assert_array_equal(opt(x), jax.jit(issue_example)(x))
    env = se.Env(issue_example, x, isolate=False)
    env.augment()
    assert env.is_equivalent()
    final, _ = se.run_loop(se.lower(mixed, x, x))
    assert se.dag_hash(final)
