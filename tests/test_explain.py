"""Explaining a result (issue 49 item 2): locations kept through rewrites, what each rewrite
measured, the original's hottest kernels when nothing was faster, and `shlo-env show` of a report."""

import inspect
import json
import math
import types

import numpy as np
import pytest

import shlo_env as se
from shlo_env import cli
from shlo_env.api.explain import explain
from shlo_env.ir.hashing import dag_hash
from shlo_env.ir.locations import location_sources, rewrite_sources
from shlo_env.ir.program import ir_scope, parse_module, save
from shlo_env.research import show
from shlo_env.rewrite.driver import walk_ops
from shlo_env.search.result import ProgramResult


def colsum(X, W):
    import jax.numpy as jnp

    return jnp.sum(X @ W, axis=0)  # the rewritten line


COLSUM_LINE = inspect.getsourcelines(colsum)[1] + next(
    i for i, t in enumerate(inspect.getsourcelines(colsum)[0]) if "the rewritten line" in t)


@pytest.fixture(scope="module")
def colsum_program():
    rng = np.random.default_rng(0)
    return se.lower(colsum, rng.standard_normal((64, 32), np.float32), rng.standard_normal((32, 32), np.float32))


def _rewritten(program):
    aug = se.augment(program, ["reduce_through_dot"])
    assert [a.labels for a in se.list_alternatives(aug)] == [("original", "reduce_through_dot")]
    return aug, se.apply(aug, [1])


# --- locations -------------------------------------------------------------------------------------

def test_a_rewritten_op_carries_the_matched_ops_location_named_after_its_pattern(colsum_program):
    _, rewritten = _rewritten(colsum_program)
    with ir_scope():
        new = [op for op in walk_ops(rewritten.body) if "fused<" in str(op.location)]
        assert {op.name for op in new} >= {"stablehlo.dot_general", "stablehlo.reduce"}
        for op in new:
            loc = str(op.location)
            assert 'fused<"reduce_through_dot">' in loc and f'{__file__}":{COLSUM_LINE}:' in loc, loc
        assert rewrite_sources(walk_ops(rewritten.body)) == {"reduce_through_dot": [(__file__, COLSUM_LINE)]}


def test_nested_rewrites_credit_both_patterns():
    from jaxlib.mlir import ir

    with ir_scope():
        a = ir.Location.fused([ir.Location.file("x.py", 3, 1)], metadata=ir.StringAttr.get("first"))
        b = ir.Location.fused([a, ir.Location.file("y.py", 5, 2)], metadata=ir.StringAttr.get("second"))
        assert location_sources(b) == {"first": [("x.py", 3)], "second": [("x.py", 3), ("y.py", 5)]}
        assert location_sources(ir.Location.file("z.py", 1, 1)) == {}


def test_locations_leave_the_hash_alone_and_the_module_prints_parses_and_compiles(colsum_program):
    from jaxlib.mlir import ir

    from shlo_env.execute import runtime

    _, rewritten = _rewritten(colsum_program)
    stripped = rewritten.clone()
    with ir_scope():
        for op in walk_ops(stripped.body):
            op.location = ir.Location.unknown()
        assert "fused<" not in stripped.text(debug_info=True)
    assert dag_hash(stripped) == dag_hash(rewritten) != dag_hash(colsum_program)
    text = rewritten.text(debug_info=True)
    assert 'fused<"reduce_through_dot">' in text
    assert dag_hash(parse_module(text)) == dag_hash(rewritten)
    assert dag_hash(parse_module(rewritten.bytecode())) == dag_hash(rewritten)
    runtime.compile(text)  # XLA takes the fused locations
    from shlo_env import _jax_compat

    exported = parse_module(_jax_compat.deserialize_portable(rewritten.portable()))  # what jax.export holds
    assert 'fused<"reduce_through_dot">' in str(exported.operation.get_asm(enable_debug_info=True))


# --- explain ---------------------------------------------------------------------------------------

def test_explain_names_each_rewrite_with_its_line_its_share_and_what_it_measured(colsum_program):
    _, rewritten = _rewritten(colsum_program)
    res = ProgramResult(name="colsum", strategy="beam", returned_original=False, applied=("reduce_through_dot",),
                        ratio=0.4, noise=0.02, threshold=0.98)
    res.rewrites = [{"pattern": "reduce_through_dot", "step": 0, "sites": [[0, 1]], "sources": [],
                     "share": 0.75, "kernel_ms": 0.5, "ratio": 0.41, "measured": "alone"}]
    text = explain(res, colsum_program, rewritten)
    # the line comes from the optimized program's fused locations when the record has none
    assert f"{__file__}:{COLSUM_LINE}: return jnp.sum(X @ W, axis=0)" in text, text
    assert "reduce_through_dot (step 1, 1 site): ratio 0.410 alone; its kernels held 75.0% of the time" in text, text
    assert "StableHLO diff" in text and "\n  +" in text


def test_the_search_records_each_rewrite_and_explain_prints_it():
    from shlo_env.search.program_search import SearchOptions, optimize_program

    rng = np.random.default_rng(0)  # large enough that the rewrite (about 4x here) is timed beyond the noise
    program = se.lower(colsum, rng.standard_normal((512, 256), np.float32), rng.standard_normal((256, 256), np.float32))
    res = optimize_program(program, SearchOptions(budget_s=8, strategy="beam", xla_options=False))
    if res.returned_original:
        pytest.skip(f"the search kept the original on this machine: {res.reason}")
    (record,) = [r for r in res.rewrites if r["pattern"] == "reduce_through_dot"]
    assert record["sources"] == [f"{__file__}:{COLSUM_LINE}"] and record["sites"]
    assert record["ratio"] is None or 0 < record["ratio"] < 2, record
    again = ProgramResult.from_record(json.loads(json.dumps(res.to_record())))
    assert again.rewrites == res.rewrites and again.hotspots == res.hotspots and again.roofline == res.roofline
    text = explain(res, program, res.program)
    assert f"{__file__}:{COLSUM_LINE}: return jnp.sum(X @ W, axis=0)" in text, text


def _profiled_context(program, region_ratio=None):
    """A search context holding what the program search keeps when it profiles the original."""
    from shlo_env.measure.kernel_profile import profile_program
    from shlo_env.rewrite import region_cut
    from shlo_env.search.base import SearchCaches, State

    aug = se.augment(program)
    evaluator = types.SimpleNamespace(cache={})
    ctx = types.SimpleNamespace(root=State.of(program), caches=SearchCaches(evaluator), evaluator=evaluator)
    ctx.caches.augmented[ctx.root.hash] = (aug, se.list_alternatives(aug))
    ctx.caches.profiles[ctx.root.hash] = profile_program(region_cut.baseline(aug), runs=2, warmup=1, patterns=())
    if region_ratio is not None:
        ctx.caches.region_ratios[(ctx.root.hash, 0, 1)] = region_ratio
    return ctx


def test_why_not_faster_lists_the_hottest_kernels_with_their_lines_and_patterns(colsum_program):
    from shlo_env.search import attribution

    hot = attribution.hotspots(_profiled_context(colsum_program, region_ratio=0.93))
    assert hot and sum(k["share"] for k in hot) <= 1 + 1e-9
    dot = next(k for k in hot if k["category"] == "dot")
    assert f"{__file__}:{COLSUM_LINE}" in dot["sources"], dot
    assert dot["patterns"]["reduce_through_dot"] == {"ratio": 0.93, "how": "region"}
    kept = ProgramResult(name="colsum", strategy="beam", returned_original=True, noise=0.02, threshold=0.98,
                         reason="nothing verified was faster", candidates_evaluated=3, hotspots=hot,
                         roofline={"floor_s": 1e-4, "time_s": 4e-4, "source": "configured"})
    text = explain(kept, colsum_program)
    assert "why not faster:" in text and "where the time goes" in text, text
    assert "reduce_through_dot 0.930 region" in text and f"{__file__}:{COLSUM_LINE}: return jnp.sum" in text, text
    assert "roofline: jax.jit's 0.400 ms is 4.0x its floor of 0.100 ms" in text, text
    unprofiled = explain(ProgramResult(name="f", strategy="beam", returned_original=True), colsum_program)
    assert "not profiled in this search" in unprofiled


def test_roofline_without_peak_rates_says_why(monkeypatch):
    from shlo_env.search.attribution import roofline_record

    monkeypatch.delenv("SHLO_ENV_PEAK_FLOPS", raising=False)
    monkeypatch.delenv("SHLO_ENV_PEAK_BANDWIDTH", raising=False)
    assert roofline_record({}, 1e-3) == {"reason": "no XLA cost analysis"}
    monkeypatch.setenv("SHLO_ENV_PEAK_FLOPS", "1e12")
    monkeypatch.setenv("SHLO_ENV_PEAK_BANDWIDTH", "1e11")
    r = roofline_record({"flops": 2e9, "bytes": 1e8}, 1e-2)
    assert r["source"] == "configured" and math.isclose(r["floor_s"], 2e-3 + 1e-3)


# --- show ------------------------------------------------------------------------------------------

def test_show_draws_the_decisions_of_a_report(colsum_program, tmp_path, capsys):
    path = save(colsum_program, tmp_path / "colsum.mlir")
    record = {"name": "colsum", "input": path.name, "decisions": [[1]],
              "rewrites": [{"pattern": "reduce_through_dot", "step": 0, "sites": [[0, 1]]}]}
    report = tmp_path / "colsum.report.json"
    report.write_text(json.dumps(record))
    out = tmp_path / "result.dot"
    assert cli.main(["show", str(report), "-o", str(out)]) == 0
    dot = out.read_text()
    assert "reduce_through_dot (chosen)" in dot and "step 1 of 1" in dot
    assert "took 1=reduce_through_dot" in capsys.readouterr().out

    wrong = dict(record, rewrites=[{"pattern": "some_other_pattern", "step": 0, "sites": [[0, 1]]}])
    report.write_text(json.dumps(wrong))
    assert cli.main(["show", str(report), "-o", str(out)]) == 2
    assert "offers reduce_through_dot there" in capsys.readouterr().err
    assert cli.main(["show", str(report), "--step", "3", "-o", str(out)]) == 2
    kept = tmp_path / "kept.json"
    kept.write_text(json.dumps({"name": "colsum", "input": path.name, "decisions": [], "rewrites": []}))
    assert cli.main(["show", str(kept)]) == 2
    assert "took no rewrite" in capsys.readouterr().err


def test_report_step_replays_a_report_object(colsum_program):
    res = ProgramResult(name="colsum", strategy="beam", returned_original=False, decisions=[[1, 0]])
    aug, vec = show.report_step(colsum_program, res)  # from the decision vectors (no pattern names)
    assert vec == [1] and "(chosen)" in show.to_dot(aug, vec)
