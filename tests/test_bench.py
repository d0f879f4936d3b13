"""`shlo-env bench`: the program-level search, the Table-2 summary, reports, and resuming a
sweep after `kill -9`."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time

import jax.numpy as jnp
import numpy as np
import pytest

from shlo_env import bench
from shlo_env.bench import examples
from shlo_env.ir.program import lower, save
from shlo_env.measure.results_db import ResultsDB, environment
from shlo_env.search.program_search import SearchOptions, optimize_program
from shlo_env.execute.worker import Worker


@pytest.fixture(scope="module")
def worker():
    with Worker(timeout_s=120) as w:
        yield w


def test_optimize_program_returns_a_verified_faster_rewrite(worker):
    ex = examples.suite(["matmul_chain"])[0]  # (A @ B) @ v -> A @ (B @ v): ~500x fewer flops
    p = lower(ex.fn, *ex.args(0), name=ex.name)
    res = optimize_program(p, SearchOptions(strategy="pick-first", budget_s=30, xla_options=False), worker=worker)
    assert res.status == "ok" and not res.returned_original, res.reason
    assert res.ratio < res.threshold < 1.0 and res.search_ratio < res.threshold and res.confirm_ratio < res.threshold
    assert res.applied and res.decisions and res.best_hash != res.original_hash and not res.identical
    assert res.trajectory[0] == [res.original_hash, [[i, c] for i, c in enumerate(res.decisions[0]) if c]]
    assert res.verification["tier"] == "REASSOCIATE" and res.verification["input_sets"] == 4
    assert res.best["full"] < res.baseline["full"] and res.baseline["async"] is not None
    assert res.cost_best["flops"] < res.cost_original["flops"]
    rec = res.to_record()
    json.dumps(rec)  # persisted as JSON
    assert rec["identical"] is False and "program" not in rec


def test_optimize_program_keeps_the_original_when_nothing_matches(worker):
    p = lower(lambda x: jnp.tanh(x) * 2.0, np.ones((64, 64), np.float32), name="tanh2")
    res = optimize_program(p, SearchOptions(strategy="exhaustive", budget_s=10, patterns=[], xla_options=False), worker=worker)
    assert res.returned_original and res.identical and res.ratio == 1.0 and res.decisions == []
    assert res.reason == "no pattern matched" and res.decision_space == 1
    assert res.baseline["full"] > 0 and res.best == res.baseline


def _row(ratio, identical=False, status="ok", floor=None, dataset="d", strategy="s"):
    return {"dataset": dataset, "strategy": strategy, "status": status, "ratio": ratio, "identical": identical,
            "best_full": 2e-3, "roofline_floor_s": floor, "name": f"p{ratio}", "strategy_used": strategy}


def test_every_program_row_names_the_rewrites_and_the_xla_options_returned():
    from shlo_env.bench.report import program_rows

    row = dict(_row(0.86), returned_original=False, applied='["batch_dots"]',
               disabled_passes='["xla_cpu_multi_thread_eigen=false"]', candidates=10, search_s=30.0, total_s=40.0)
    (out,) = program_rows([row])
    assert out[-1] == "batch_dots, -xla_cpu_multi_thread_eigen=false"


def test_summary_is_table_2():
    rows = [_row(1.0, True, floor=1e-3), _row(0.5, floor=5e-4), _row(0.97), _row(1.2), _row(None, status="error")]
    (s,) = bench.summarize(rows, {"faster": 0.95, "slower": 1.05})
    assert (s["programs"], s["measured"], s["errors"]) == (5, 4, 1)
    assert s["avg_ratio"] == pytest.approx((1.0 + 0.5 + 0.97 + 1.2) / 4)
    assert (s["max_ratio"], s["min_ratio"]) == (1.2, 0.5)
    assert s["geomean_ratio"] == pytest.approx(math.exp(np.mean(np.log([1.0, 0.5, 0.97, 1.2]))))
    assert (s["faster_pct"], s["slower_pct"], s["identical_pct"]) == (25.0, 25.0, 25.0)  # 0.97 is noise
    assert s["roofline_geomean"] == pytest.approx(math.sqrt(2.0 * 4.0))
    text = bench.format_table(bench.TABLE_HEADER, bench.table_rows([s]))
    assert "| d " in text and "25.0" in text and "2.8x" in text


def test_user_directory_dataset_and_reports(tmp_path):
    d = tmp_path / "mine"
    d.mkdir()
    save(lower(lambda a, b, v: (a @ b) @ v, *[np.ones(s, np.float32) for s in ((256, 256), (256, 256), (256, 1))],
               name="chain"), d / "chain.mlir")
    save(lower(lambda x: jnp.sum(x * 2.0, axis=0), np.ones((32, 16), np.float32), name="s"), d / "sums.mlirbc")
    db = tmp_path / "r.sqlite"
    _seed_profile(db)
    # pick-first ends after one candidate (about 4 s); the budget's room keeps the cost analysis,
    # skipped once the budget is spent, from depending on the machine's load (4 beside CI)
    res = bench.sweep([str(d)], ["pick-first"], bench.SweepOptions(
        budget_s=20, db_path=db, out=tmp_path / "out", progress=False, peak_flops=1e11, peak_bandwidth=1e10))
    assert [r["name"] for r in res.rows] == ["chain", "sums"] and res.ran == 2
    assert all(r["status"] == "ok" for r in res.rows)
    assert res.rows[0]["roofline_floor_s"] > 0 and res.summary[0]["measured"] == 2
    for key in ("md", "csv", "summary_csv"):
        assert res.reports[key].exists()
    md = res.reports["md"].read_text()
    assert "Table 2 form" in md and "| mine/ " in md
    every = md.split("## Every program")[1].split("##")[0]  # each program's candidates, rate and wall
    for r in res.rows:
        line = next(x for x in every.splitlines() if f"| {r['name']} " in x)
        assert f"| {r['candidates']} " in line and f"| {r['total_s']:.1f} " in line
    assert res.reports["csv"].read_text().count("\n") == 3
    if "png" in res.reports:
        assert res.reports["png"].read_bytes()[:4] == b"\x89PNG"
    again = bench.sweep([str(d)], ["pick-first"], bench.SweepOptions(budget_s=20, db_path=db, out=False, progress=False))
    assert (again.resumed, again.ran) == (2, 0) and [r["id"] for r in again.rows] == [r["id"] for r in res.rows]
    # XLA option actions are part of a measurement's key: asking for them measures again
    opts = bench.sweep([str(d)], ["pick-first"], bench.SweepOptions(
        budget_s=20, db_path=db, out=False, progress=False, xla_options=["xla_cpu_use_xnnpack=false"], limit=1))
    assert (opts.resumed, opts.ran) == (0, 1) and opts.rows[0]["status"] == "ok"


def test_bad_input_is_a_bench_error_and_only_the_cli_exits(tmp_path, capsys):
    from shlo_env.cli import main

    db = tmp_path / "r.sqlite"
    with pytest.raises(bench.BenchError, match="unknown strategy 'nope'"):
        bench.sweep(["examples"], ["nope"], bench.SweepOptions(db_path=db))
    assert not db.exists()  # nothing was measured or stored
    assert main(["bench", "--strategy", "nope", "--db", str(db)]) == 2
    assert "shlo-env bench: unknown strategy 'nope'" in capsys.readouterr().err


def _seed_profile(db_path) -> None:
    """Give the test database a noise profile, so a sweep does not measure one first (the
    profile itself is tested in test_noise_profile)."""
    env = environment()
    with ResultsDB(db_path) as db:
        db.ensure_environment(env)
        db.add_noise_profile(env["env_id"], {"faster": 0.9, "slower": 1.1, "samples": 0, "method": "test"})


def test_noise_profile_thresholds():
    from shlo_env.bench import noise_profile as noise

    lo, hi = noise.thresholds([1.0, 1.02, 0.98, 1.0, 0.99], quantile=1.0)
    assert lo == pytest.approx(0.98) and hi == pytest.approx(1 / 0.98)
    progs = noise.profile_programs(4)
    assert len(progs) == 4 and progs[0][0].startswith("inst-") and progs[-1][0].startswith("corpus/")
    labels = [label for label, _ in noise.profile_programs(12)]  # the bench's: the zoo's noise too
    assert len(set(labels)) == 12 and [x.split("/")[0] for x in labels[-3:]] == ["zoo"] * 3
    prof = noise.measure(progs[:2], repeats=3, progress=False)
    assert prof["samples"] == 6 and prof["faster"] <= 1.0 <= prof["slower"]
    assert all(len(d["ratios"]) == 3 for d in prof["details"])


def _measurement_rows(db_path):
    c = sqlite3.connect(db_path)
    c.row_factory = sqlite3.Row
    rows = [dict(r) for r in c.execute("SELECT * FROM measurements ORDER BY id")]
    sweeps = [dict(r) for r in c.execute("SELECT * FROM sweeps ORDER BY id")]
    c.close()
    return rows, sweeps


def test_sweep_killed_with_sigkill_resumes_without_redoing_or_losing(tmp_path):
    db = str(tmp_path / "r.sqlite")
    _seed_profile(db)
    cmd = [sys.executable, "-m", "shlo_env", "bench", "--dataset", "inst-10-20", "--limit", "8",
           "--strategy", "pick-first", "--budget", "2", "--db", db, "--out", str(tmp_path / "out"),
           "--no-plot", "--no-progress"]
    env = dict(os.environ, SHLO_ENV_PEAK_FLOPS="1e11", SHLO_ENV_PEAK_BANDWIDTH="1e10")
    # first run: killed (the whole process group, worker child included) after 3 measurements
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.time() + 150
    before = []
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
        try:
            before, _ = _measurement_rows(db)
        except sqlite3.OperationalError:
            continue
        if len(before) >= 3:
            break
    assert proc.poll() is None, "the sweep ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    before, sweeps = _measurement_rows(db)
    assert 3 <= len(before) < 8 and sweeps[0]["status"] == "running"  # killed: never marked done

    # second run: resumes
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    after, sweeps = _measurement_rows(db)
    assert len(after) == 8  # nothing lost
    keys = [(r["dataset"], r["uri"], r["program_hash"], r["strategy"], r["config_key"]) for r in after]
    assert len(set(keys)) == 8  # nothing duplicated
    old = {r["id"]: r for r in before}
    for r in after:  # finished measurements were not redone: same rows, same timestamps
        if r["id"] in old:
            assert r == old[r["id"]]
    assert len([r for r in after if r["sweep_id"] == sweeps[-1]["id"]]) == 8 - len(before)
    assert sweeps[-1]["status"] == "done"
    assert re.search(rf"\b{len(before)} measurements from the database\b|{len(before)} from the database",
                     out.stdout + out.stderr)
    assert "| inst-10-20 | pick-first | 8 " in out.stdout  # the table covers old and new rows


def test_benchmark_tables_print_huge_decision_spaces_short():
    """Spaces of real models run past 10**100 (beyond a float): exact below a million, else
    a mantissa and an exponent from the digits."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    try:
        from strategies import space_text
    finally:
        sys.path.pop(0)
    assert space_text(999_999) == "999999"
    assert space_text(15 * 10**28) == "1.5e29"
    assert space_text(81 * 10**400) == "8.1e401"


def test_a_stale_noise_profile_is_measured_again_only_when_there_is_something_to_measure(tmp_path, monkeypatch):
    import importlib
    import io

    from shlo_env.bench import noise_profile as noise

    sweep_mod = importlib.import_module("shlo_env.bench.sweep")  # the package exports the function `sweep`

    db_path = tmp_path / "r.sqlite"
    _seed_profile(db_path)
    measured = []

    def fake_measure(programs, **kwargs):
        measured.append(kwargs)
        return {"faster": 0.97, "slower": 1.03, "samples": 1, "method": "fake"}

    monkeypatch.setattr(noise, "measure", fake_measure)
    monkeypatch.setattr(noise, "profile_programs", lambda count, seed: [])
    env_id = environment()["env_id"]
    opts = bench.SweepOptions(db_path=db_path, progress=False)
    with ResultsDB(db_path) as db:
        log = io.StringIO()
        assert sweep_mod._noise_profile(db, env_id, opts, True, log)["faster"] == 0.9 and not measured  # fresh
        db.conn.execute("UPDATE noise_profiles SET created='2026-01-01T00:00:00.000+00:00'")
        assert sweep_mod._noise_profile(db, env_id, opts, False, log)["faster"] == 0.9 and not measured  # nothing to run
        assert sweep_mod._noise_profile(db, env_id, opts, True, log)["faster"] == 0.97 and len(measured) == 1
        assert "the latest (2026-01-01T00:00) is older than 1 h; measuring" in log.getvalue()
        always = bench.SweepOptions(db_path=db_path, progress=False, noise_max_age_h=0.0)
        assert sweep_mod._noise_profile(db, env_id, always, True, log)["method"] == "fake" and len(measured) == 2
    assert sweep_mod._age_h("not a time") == math.inf
