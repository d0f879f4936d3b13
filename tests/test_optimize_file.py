"""`shlo-env optimize IN -o OUT`: a StableHLO file in, a verified optimized module out."""

import gzip
import json
import lzma
import os
import subprocess
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import shlo_env as se
from shlo_env.execute import runtime
from shlo_env.cli import main as cli_main
from shlo_env.measure.numerics import Numerics, verify

ROOT = Path(__file__).resolve().parents[1]


def colsum(X, W):
    return jnp.sum(X @ W, axis=0)


@pytest.fixture(scope="module")
def module_text():
    rng = np.random.default_rng(0)
    return se.lower(colsum, rng.standard_normal((512, 256)).astype(np.float32),
                    rng.standard_normal((256, 256)).astype(np.float32)).text()


def outputs(program, inputs):
    return runtime.execute(runtime.compile(program), inputs)


def assert_same_function(original: se.Program, optimized: se.Program):
    """Compiles, and matches the input module's outputs within REASSOCIATE on seeded inputs."""
    assert [(s.shape, s.dtype) for s in optimized.in_specs] == [(s.shape, s.dtype) for s in original.in_specs]
    for seed in range(2):
        inputs = runtime.random_inputs(original.in_specs, seed)
        ref = runtime.reference_outputs(original, inputs)
        cmp = verify([outputs(optimized, inputs)], [outputs(original, inputs)], Numerics.REASSOCIATE,
                     None if ref is None else [ref])
        assert cmp.ok, cmp.detail


def test_round_trip_bytecode_with_report(tmp_path, module_text, capsys):
    src = tmp_path / "colsum.mlir"
    src.write_text(module_text)
    out = tmp_path / "colsum.opt.mlirbc"
    assert cli_main(["optimize", str(src), "-o", str(out), "--budget", "30", "--report"]) == 0
    assert out.read_bytes().startswith(b"ML\xefR")  # bytecode, by the extension
    optimized = se.load(out)
    assert_same_function(se.load(src), optimized)
    report = json.loads(Path(str(out) + ".report.json").read_text())
    assert report["status"] == "ok" and report["output"] == str(out)
    assert "reduce_through_dot" in report["applied"] and not report["returned_original"]
    assert se.dag_hash(optimized) == report["best_hash"]
    assert "colsum" in capsys.readouterr().err


def test_compressed_input_and_text_output(tmp_path, module_text):
    src = tmp_path / "colsum.mlir.xz"
    src.write_bytes(lzma.compress(module_text.encode()))
    out = tmp_path / "out.mlir.gz"
    report = tmp_path / "r.json"
    assert cli_main(["optimize", str(src), "-o", str(out), "--budget", "30", "--report", str(report),
                     "--strategy", "pick-first"]) == 0
    optimized = se.load(gzip.decompress(out.read_bytes()).decode())
    assert_same_function(se.load(module_text), optimized)
    assert json.loads(report.read_text())["strategy"] == "pick-first"


def test_stdin_to_stdout(tmp_path, module_text):
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="1")
    out = subprocess.run([sys.executable, "-m", "shlo_env", "optimize", "-", "-o", "-", "--budget", "30"],
                         input=gzip.compress(module_text.encode()), capture_output=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    optimized = se.load(out.stdout.decode())
    assert_same_function(se.load(module_text), optimized)


@pytest.mark.parametrize("content, message", [
    (b"this is not MLIR", "could not parse"),
    (b"", "empty"),
    (b"\xfd7zXZ\x00 truncated xz", "corrupt compressed input"),
    (b"\xff\xfe\x00binary", "neither MLIR text nor MLIR bytecode"),
])
def test_bad_input_exits_non_zero_with_a_clear_message(tmp_path, capsys, content, message):
    src = tmp_path / "bad.mlir"
    src.write_bytes(content)
    assert cli_main(["optimize", str(src), "-o", str(tmp_path / "out.mlir")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("shlo-env optimize: error:") and message in err
    assert not (tmp_path / "out.mlir").exists()


def test_bad_arguments(tmp_path, capsys, module_text):
    src = tmp_path / "m.mlir"
    src.write_text(module_text)
    assert cli_main(["optimize", str(tmp_path / "missing.mlir"), "-o", str(tmp_path / "o.mlir")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert cli_main(["optimize", str(src), "-o", str(tmp_path / "o.mlir"), "--strategy", "nope"]) == 2
    assert "unknown strategy" in capsys.readouterr().err
    assert cli_main(["optimize", str(src), "-o", str(tmp_path / "o.mlir"), "--patterns", "no_such_pattern"]) == 2
    assert "no pattern named" in capsys.readouterr().err
    assert cli_main(["optimize", str(src), "-o", "-", "--report"]) == 2
    assert "--report needs a path" in capsys.readouterr().err


def test_xla_options_and_the_search_cache(tmp_path, module_text, capsys):
    """Every option `optimize` has (here `--xla-options`), and the cache `optimize` uses: a
    second run is a hit (reported), writes the same module, and `--no-cache` searches again."""
    src = tmp_path / "colsum.mlir"
    src.write_text(module_text)
    cache = tmp_path / "cache"
    runs = []
    for i in range(2):
        out = tmp_path / f"out{i}.mlir"
        assert cli_main(["optimize", str(src), "-o", str(out), "--xla-options", "--budget", "30",
                         "--cache-dir", str(cache), "--report"]) == 0
        runs.append((json.loads(Path(str(out) + ".report.json").read_text()), capsys.readouterr().err,
                     out.read_text()))
    (first, _, text1), (second, err2, text2) = runs
    assert first["cache"] == "stored" and first["candidates_evaluated"] >= 1
    assert second["cache"] == "hit" and second["candidates_evaluated"] == 0, second
    assert "persistent cache: hit" in err2
    assert text2 == text1 and second["applied"] == first["applied"]
    assert second["disabled_passes"] == first["disabled_passes"]
    assert_same_function(se.load(src), se.load(text2))
    assert len(list((cache / "searches").glob("*.json"))) == 1
    out = tmp_path / "uncached.mlir"
    assert cli_main(["optimize", str(src), "-o", str(out), "--xla-options", "--budget", "30",
                     "--cache-dir", str(cache), "--no-cache", "--report"]) == 0
    uncached = json.loads(Path(str(out) + ".report.json").read_text())
    assert uncached["cache"] == "" and uncached["candidates_evaluated"] >= 1
    assert len(list((cache / "searches").glob("*.json"))) == 1


# --- nothing to search, --inputs, host callbacks (issue 48, items 1 and 4) ---------------------

def nan_unless_large_v(X, W, v):
    """NaN everywhere unless every v > 50: on N(0,1) inputs (and on every redraw the verifier
    tries) the original is NaN everywhere, so nothing can be compared; on the user's inputs it
    is colsum, whose reduce_through_dot rewrite is the win."""
    return jnp.sum(X @ W, axis=0) * jnp.sqrt(jnp.min(v) - 50.0)


@pytest.fixture(scope="module")
def nan_module(tmp_path_factory):
    rng = np.random.default_rng(3)
    args = (rng.standard_normal((512, 256)).astype(np.float32), rng.standard_normal((256, 256)).astype(np.float32),
            (100.0 + np.abs(rng.standard_normal(8))).astype(np.float32))
    folder = tmp_path_factory.mktemp("nan_module")
    src = folder / "nan.mlir"
    src.write_text(se.lower(nan_unless_large_v, *args).text())
    np.savez(folder / "inputs.npz", *args)
    return src, folder / "inputs.npz", args


def test_nothing_to_search_writes_the_module_unchanged_and_exits_0(nan_module, tmp_path, capsys):
    src, _, _ = nan_module
    out = tmp_path / "nan.opt.mlir"
    assert cli_main(["optimize", str(src), "-o", str(out), "--budget", "8", "--no-cache", "--report"]) == 0
    err = capsys.readouterr().err
    assert "written unchanged" in err and "NaN" in err, err
    assert se.dag_hash(se.load(out)) == se.dag_hash(se.load(src))
    report = json.loads(Path(str(out) + ".report.json").read_text())
    assert report["returned_original"] and "NaN" in report["reason"]


def test_inputs_npz_makes_the_module_searchable(nan_module, tmp_path, capsys):
    src, inputs, args = nan_module
    out = tmp_path / "nan.inputs.mlir"
    assert cli_main(["optimize", str(src), "-o", str(out), "--budget", "20", "--no-cache", "--report",
                     "--inputs", str(inputs)]) == 0
    report = json.loads(Path(str(out) + ".report.json").read_text())
    assert "reduce_through_dot" in report["applied"] and not report["returned_original"], report
    optimized = se.load(out)
    got = runtime.execute(runtime.compile(optimized), list(args))[0]
    np.testing.assert_allclose(got, np.asarray(nan_unless_large_v(*args)), rtol=1e-3, atol=1e-2)
    # a wrong --inputs file is a usage error, named
    bad = tmp_path / "bad.npz"
    np.savez(bad, args[0])
    assert cli_main(["optimize", str(src), "-o", str(out), "--no-cache", "--inputs", str(bad)]) == 2
    assert "1 arrays for the 3 inputs" in capsys.readouterr().err


def test_load_takes_example_args_and_perturbs_them(nan_module):
    src, _, args = nan_module
    program = se.load(src, example_args=args)
    assert program.perturb_examples and program.example_args[2].dtype == np.float32
    sets = runtime.input_sets(program, 2, seed=0)
    assert len(sets) == 3 and np.array_equal(sets[0][2], args[2])
    assert all(np.all(s[2] > 50.0) for s in sets)  # perturbations of the user's inputs, not N(0,1)
    assert not np.array_equal(sets[1][0], args[0]) and np.allclose(sets[1][0], args[0], rtol=0.1, atol=1e-6)
    with pytest.raises(se.ProgramError, match="input 0 is float32"):
        se.load(src, example_args=(args[1], args[0], args[2]))


def test_a_file_with_host_callbacks_is_refused_with_the_reason(tmp_path, capsys):
    import jax

    def f(x):
        jax.debug.print("x {}", x)
        return x * 2

    text = jax.jit(f).lower(np.ones(4, np.float32)).as_text()
    src = tmp_path / "cb.mlir"
    src.write_text(text)
    out = tmp_path / "cb.opt.mlir"
    assert cli_main(["optimize", str(src), "-o", str(out), "--budget", "4", "--no-cache"]) == 0
    err = capsys.readouterr().err
    assert "host callback" in err and "cannot carry" in err and "shlo_env.optimize" in err, err
    assert "xla_ffi_python_cpu_callback" in out.read_text()
