import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shlo_env as se
from shlo_env.ir import program as program_module
from shlo_env.execute import runtime
from shlo_env.ir.program import ProgramError


def f(params, x):
    return {"y": x @ params["w"] + params["b"], "n": jnp.sum(x)}


def test_lower_carries_specs_trees_and_inputs(rng):
    params = {"w": rng.standard_normal((4, 3)).astype(np.float32), "b": np.zeros(3, np.float32)}
    x = rng.standard_normal((2, 4)).astype(np.float32)
    p = se.lower(f, params, x)
    assert [tuple(s.shape) for s in p.in_specs] == [(3,), (4, 3), (2, 4)]  # pytree leaf order
    assert [tuple(s.shape) for s in p.out_specs] == [(), (2, 3)]
    assert p.in_tree is not None and p.out_tree is not None
    assert len(p.example_args) == 3 and p.example_args[2].dtype == np.float32
    outs = jax.tree_util.tree_unflatten(p.out_tree, list(p.out_specs))
    assert set(outs) == {"y", "n"}


def test_lower_keeps_unused_arguments():
    p = se.lower(lambda x, unused: x * 2, np.ones(3, np.float32), np.ones(5, np.float32))
    assert len(p.in_specs) == 2


def test_lower_accepts_shape_dtype_structs():
    spec = jax.ShapeDtypeStruct((3, 3), jnp.float32)
    p = se.lower(lambda a: a @ a, spec)
    assert p.example_args is None and tuple(p.in_specs[0].shape) == (3, 3)


def test_private_functions_are_inlined():
    inner = jax.jit(lambda a: jnp.sin(a) * 2)
    p = se.lower(lambda a: inner(a) + 1, np.ones(3, np.float32))
    assert "call @" not in p.text()
    assert p.text().count("func.func") == 1


@pytest.mark.parametrize("suffix", [".mlir", ".mlirbc"])
def test_save_load_roundtrip(tmp_path, suffix):
    p = se.lower(lambda a, b: a @ b, np.ones((2, 3), np.float32), np.ones((3, 4), np.float32))
    path = se.save(p, tmp_path / f"m{suffix}")
    q = se.load(path)
    assert se.dag_hash(q) == se.dag_hash(p)
    assert q.in_specs == p.in_specs and q.out_specs == p.out_specs
    assert q.name == "m"


def test_load_text_and_bytes():
    p = se.lower(lambda a: a + 1, np.ones(3, np.float32))
    assert se.dag_hash(se.load(p.text())) == se.dag_hash(p)
    assert se.dag_hash(se.load(p.bytecode())) == se.dag_hash(p)


def test_load_portable_artifact():
    from shlo_env import _jax_compat

    p = se.lower(lambda a: a * 3, np.ones(3, np.float32))
    art = _jax_compat.serialize_portable(p.text())
    assert se.dag_hash(se.load(art)) == se.dag_hash(p)


def test_unparsable_text_is_a_clear_error():
    with pytest.raises(ProgramError, match="could not parse"):
        se.load("module { func.func @main( this is not mlir }")


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ProgramError, match="no such file"):
        se.load(tmp_path / "nope.mlir")


def test_dynamic_shapes_are_rejected():
    text = """
    func.func public @main(%arg0: tensor<?x4xf32>) -> tensor<?x4xf32> {
      %0 = stablehlo.add %arg0, %arg0 : tensor<?x4xf32>
      return %0 : tensor<?x4xf32>
    }"""
    with pytest.raises(ProgramError, match="dynamic"):
        se.load(text)


def test_module_without_main_is_rejected():
    text = """
    func.func private @f(%arg0: tensor<4xf32>) -> tensor<4xf32> { return %arg0 : tensor<4xf32> }
    func.func private @g(%arg0: tensor<4xf32>) -> tensor<4xf32> { return %arg0 : tensor<4xf32> }"""
    with pytest.raises(ProgramError, match="main"):
        se.load(text)


def test_lowering_error_names_the_function():
    def broken(x):
        return x @ x  # shapes do not fit

    with pytest.raises(ProgramError, match="broken"):
        se.lower(broken, np.ones((2, 3), np.float32))


def test_clone_is_independent():
    p = se.lower(lambda a, v: (a @ a) @ v, np.ones((4, 4), np.float32), np.ones((4, 1), np.float32))
    q = se.augment(p)  # augment clones
    assert se.dag_hash(p) != se.dag_hash(q)
    assert "shlo_env.alternatives" not in p.text()


def _chlo_fn(x, w):
    # jnp.square -> chlo.square, erfc -> chlo.erfc, erf_inv -> chlo.erf_inv: ops with no VHLO form
    return jnp.sum(x @ w, axis=0) + jnp.sum(jnp.square(w)) + jnp.sum(jax.scipy.special.erfc(w)) \
        + jnp.sum(jax.lax.erf_inv(jnp.tanh(w)))


@pytest.fixture(scope="module")
def chlo_program():
    rng = np.random.default_rng(0)
    args = (rng.standard_normal((8, 4)).astype(np.float32), rng.standard_normal((4, 4)).astype(np.float32))
    p = se.lower(_chlo_fn, *args)
    assert "chlo." in p.text()
    return p, args


def test_chlo_programs_serialize_to_a_portable_artifact(chlo_program):
    p, args = chlo_program
    art = p.portable()
    assert "chlo." in p.text()  # the program itself keeps its ops
    q = se.load(art)
    assert "chlo." not in q.text()
    want = jax.jit(_chlo_fn)(*args)
    got = runtime.execute(runtime.compile(q), list(args))[0]
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("suffix", [".mlir", ".mlirbc"])
def test_chlo_programs_save_and_load(tmp_path, suffix, chlo_program):
    p, _ = chlo_program
    q = se.load(se.save(p, tmp_path / f"c{suffix}"))
    assert se.dag_hash(q) == se.dag_hash(p)
    q.portable()


@pytest.mark.parametrize("source", ["", "   ", b""])
def test_empty_source_is_a_clear_error(source):
    with pytest.raises(ProgramError, match="empty"):
        se.load(source)


RECURSIVE = """
func.func @main(%x: tensor<f32>) -> tensor<f32> {
  %0 = call @f(%x) : (tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}
func.func private @f(%x: tensor<f32>) -> tensor<f32> {
  %0 = call @g(%x) : (tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}
func.func private @g(%x: tensor<f32>) -> tensor<f32> {
  %0 = call @%s(%x) : (tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}
"""


@pytest.mark.parametrize("target", ["g", "f"])
def test_recursive_calls_are_a_clear_error(target):
    with pytest.raises(ProgramError, match="recursive call: .*@" + target):
        se.load(RECURSIVE.replace("@%s", "@" + target))
    module = program_module.parse_module(RECURSIVE.replace("@%s", "@" + target))
    with pytest.raises(ProgramError, match="recursive"):  # also when not inlining
        program_module.program_from_module(module, inline=False)


def test_elided_constants_are_refused_with_how_to_save_them(tmp_path):
    # `large_elements_limit` prints big constants as `dense_resource<__elided__>`: the text parses,
    # but XLA cannot compile it ("Only dense elements attr are supported")
    c = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    lowered = jax.jit(lambda x: x @ c + jnp.float32(1.0)).lower(jnp.ones((64, 64), jnp.float32))
    elided = lowered.compiler_ir("stablehlo").operation.get_asm(large_elements_limit=16)
    assert "dense_resource<__elided__>" in elided
    path = tmp_path / "model.mlir"
    path.write_text(elided)
    with pytest.raises(ProgramError) as e:
        se.load(path)
    message = str(e.value)
    assert "model.mlir" in message and "stablehlo.constant at line 3 (tensor<64x64xf32>)" in message
    assert "large_elements_limit" in message and "as_text()" in message
    # the advice holds: the module printed as the message says loads with its constants
    full = se.load(lowered.as_text())
    assert full.num_ops() == se.load(lowered.compiler_ir("stablehlo").operation.get_asm()).num_ops()
