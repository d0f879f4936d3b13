"""benchmarks/vs_enzyme.py without Enzyme-JAX: its set-level summary, and its clear skip."""

import os
import subprocess
import sys

import pytest

BENCH = os.path.join(os.path.dirname(__file__), "..", "benchmarks")


@pytest.fixture()
def vs_enzyme():
    sys.path.insert(0, BENCH)
    try:
        import vs_enzyme as mod
    finally:
        sys.path.pop(0)
    return mod


def _record(name, enzyme, shlo, control):
    return {"program": name, "variants": {"enzyme": {"ratios": enzyme}, "shlo_env": {"ratios": shlo},
                                          "original again": {"ratios": control}}}


def test_summary_gives_geomeans_and_counts_only_what_clears_the_control(vs_enzyme):
    records = [
        _record("a", [1.10, 1.12, 1.11], [0.50, 0.52, 0.51], [0.99, 1.01, 1.00]),  # enzyme slower, we faster
        _record("b", [0.90, 0.91, 0.89], [0.95, 0.96, 0.97], [0.90, 1.02, 1.00]),  # both inside a wide control
        {"program": "c", "variants": {"enzyme": {"error": "crashed"}}},  # not timed with both: left out
    ]
    returned = _record("d", [1.0] * 3, [1.03, 1.04, 1.05], [0.99, 1.0, 1.01])  # the original again: jax.jit
    returned["variants"]["shlo_env"]["returned_input"] = True
    records.append(returned)
    lines = vs_enzyme.summary(records)
    geo_b, geo_c = (1.11 * 0.90 * 1.0) ** (1 / 3), (0.51 * 0.96 * 1.04) ** (1 / 3)
    assert lines[0] == (f"set of 3 programs timed with both: geomean enzyme {geo_b:.3f}, shlo_env {geo_c:.3f}, "
                        f"shlo_env / enzyme {geo_c / geo_b:.3f}")
    assert lines[1] == "enzyme: faster than jax.jit beyond the A/A control's spread on 0, slower on 1, within it on 2"
    assert lines[2] == ("shlo_env: faster than jax.jit beyond the A/A control's spread on 1, slower on 0, within it "
                        "on 2 (1 returned the original unchanged)")


def test_summary_of_nothing_timed_is_empty(vs_enzyme):
    assert vs_enzyme.summary([{"program": "x", "variants": {}}]) == []


def test_without_enzyme_the_benchmark_says_so_and_exits_zero(vs_enzyme):
    if vs_enzyme.enzyme_available() is None:
        pytest.skip("Enzyme-JAX is installed here")
    out = subprocess.run([sys.executable, os.path.join(BENCH, "vs_enzyme.py"), "--programs", "none"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Enzyme-JAX is not installed" in out.stdout and "skipped" in out.stdout


def test_a_searched_variant_with_other_outputs_counts_as_its_input(vs_enzyme, tmp_path):
    """`optimize` checks a winner in-process and keeps its input when the outputs differ; the
    benchmark counts such a variant the same way (and says so), instead of leaving it untimed."""
    import json
    from types import SimpleNamespace

    import jax.numpy as jnp
    import numpy as np

    from shlo_env.ir.program import lower

    program = lower(lambda x: jnp.tanh(x) * 2.0, np.ones((4, 8), np.float32))
    wrong = lower(lambda x: jnp.tanh(x) * 3.0, np.ones((4, 8), np.float32))
    for label, prog in (("enzyme", program), ("shlo_env", wrong)):
        (tmp_path / f"p.{label}.mlir").write_text(prog.text())
        (tmp_path / f"p.{label}.json").write_text(json.dumps({"actions": []}))
    args = SimpleNamespace(retime=str(tmp_path), save=None, no_search=False, runs=3, min_seconds=0.01, repeats=1)
    logged = []
    rec = vs_enzyme.bench_program("p", program, [np.ones((4, 8), np.float32)], "", args, None, logged.append)
    v = rec["variants"]["shlo_env"]
    assert v["returned_input"] and v["check"].startswith("KEPT") and "ratios" in v
    assert any("counted as its input" in line for line in logged)


def test_publish_main_strips_nested_enzymexla_attributes_and_keeps_empty_values(vs_enzyme):
    """Two forms that made the peer's output unparsable on 15 of our programs: a nested list
    value (`enzymexla.bounds = [[0, 5]]`) and an attribute whose value is an empty dictionary."""
    text = ("func.func private @main(%arg0: tensor<i32>) -> tensor<i32> {\n"
            "  %0 = stablehlo.add %arg0, %arg0 {enzymexla.bounds = [[0, 5]]} : tensor<i32>\n"
            '  %1 = stablehlo.custom_call @f(%0) {backend_config = "", mhlo.backend_config = {}, x = 1} : '
            "(tensor<i32>) -> tensor<i32>\n  return %1 : tensor<i32>\n}")
    out = vs_enzyme.publish_main(text)
    assert "func.func public @main" in out and "enzymexla" not in out
    assert "%arg0, %arg0 : tensor<i32>" in out
    assert "mhlo.backend_config = {}, x = 1" in out
