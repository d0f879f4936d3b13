"""The results database: schema, unique keys, transactions, crash safety."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from shlo_env.measure.results_db import ResultsDB, config_key, measurement_row

ENV = {"env_id": "e1", "hostname": "h", "platform": "cpu", "device_kind": "cpu", "cpu_model": "test cpu",
       "cpu_count": 2, "memory_bytes": 1, "python": "3", "jax": "0.10.2", "jaxlib": "0.10.2", "shlo_env": "0.1.0"}


def _result(h: str, ratio: float = 1.0) -> dict:
    return {"name": f"p{h}", "strategy": "pick-first", "status": "ok", "original_hash": h, "best_hash": h,
            "returned_original": ratio == 1.0, "identical": ratio == 1.0, "ratio": ratio,
            "baseline": {"full": 1e-3, "async": 5e-4, "compute": None}, "best": {"full": ratio * 1e-3},
            "decisions": [[1, 0]], "trajectory": [["root", [1, 0]]], "applied": ["a"],
            "cost_best": {"flops": 1e6, "bytes": 1e6}, "noise": 0.01, "threshold": 0.97}


def _row(h: str, ratio: float = 1.0, strategy: str = "pick-first", cfg: dict | None = None) -> dict:
    cfg = cfg or {"strategy": strategy, "budget_s": 1.0}
    return measurement_row(_result(h, ratio), dataset="d", uri=f"d/{h}", strategy=strategy, config=cfg,
                           cfg_key=config_key(cfg), env=ENV, profile={"id": 1, "faster": 0.95, "slower": 1.05},
                           peaks=(1e9, 1e9, "test"), executor="local", sweep_id=None,
                           started_at="t0", finished_at="t1")


def _program(h: str) -> dict:
    return {"hash": h, "name": f"p{h}", "ops": 3, "num_inputs": 1, "num_outputs": 1,
            "in_specs": [{"shape": [2], "dtype": "float32"}], "out_specs": [], "metadata": {"source": "x"}}


@pytest.fixture
def db(tmp_path):
    with ResultsDB(tmp_path / "r.sqlite") as d:
        d.ensure_environment(ENV)
        yield d


def test_schema_wal_and_environment(db):
    assert db.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.environment_row("e1")["cpu_model"] == "test cpu"
    db.set_peak_rates("e1", 2e9, 3e9, "configured")
    assert db.environment_row("e1")["peak_flops"] == 2e9
    db.ensure_environment(ENV)  # idempotent
    assert db.count("environments") == 1


def test_measurement_written_once(db):
    row = _row("aa", 0.5)
    assert db.add_measurement(row, program=_program("aa"))
    assert not db.add_measurement(row, program=_program("aa"))  # same key: no second row
    assert db.count() == 1 and db.count("programs") == 1 and db.count("dataset_entries") == 1
    (m,) = db.measurements(env_id="e1")
    assert m["ratio"] == 0.5 and m["roofline_floor_s"] == pytest.approx(2e-3)
    assert m["faster_threshold"] == 0.95 and m["jax"] == "0.10.2"
    assert db.done_keys("e1") == {("d", "d/aa", "aa", "pick-first", row["config_key"])}
    # another strategy or configuration is another measurement
    assert db.add_measurement(_row("aa", 0.6, strategy="beam"))
    assert db.add_measurement(_row("aa", 0.7, cfg={"strategy": "pick-first", "budget_s": 2.0}))
    assert db.count() == 3


def test_replace_redoes_a_failed_measurement(db):
    bad = _row("bb")
    bad["status"], bad["error"] = "error", "crash"
    db.add_measurement(bad, program=_program("bb"))
    assert db.done_keys("e1", include_errors=False) == set()
    assert len(db.done_keys("e1")) == 1
    db.add_measurement(_row("bb", 0.9), replace=True)
    (m,) = db.measurements(env_id="e1")
    assert m["status"] == "ok" and m["ratio"] == 0.9


def test_transaction_is_all_or_nothing(db):
    with pytest.raises(RuntimeError):
        with db.transaction() as c:
            c.execute("INSERT INTO programs (hash, name) VALUES ('x', 'x')")
            raise RuntimeError("boom")
    assert db.program("x") is None
    # a measurement whose insert fails leaves no program behind either
    row = _row("cc")
    row["status"] = None  # NOT NULL violated
    with pytest.raises(sqlite3.IntegrityError):
        db.add_measurement(row, program=_program("cc"))
    assert db.program("cc") is None and db.count() == 0


def test_noise_profiles_latest_wins(db):
    assert db.noise_profile("e1") is None
    db.add_noise_profile("e1", {"faster": 0.9, "slower": 1.1, "samples": 10, "details": [{"program": "a"}]})
    db.add_noise_profile("e1", {"faster": 0.95, "slower": 1.05, "samples": 20, "details": []})
    p = db.noise_profile("e1")
    assert (p["faster"], p["slower"], p["samples"]) == (0.95, 1.05, 20)


def test_sweeps_recorded(db):
    sid = db.start_sweep("e1", {"datasets": ["d"]}, "shlo-env bench")
    db.finish_sweep(sid, "done")
    row = db.conn.execute("SELECT * FROM sweeps WHERE id=?", (sid,)).fetchone()
    assert row["status"] == "done" and row["finished"]


WRITER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {tests!r})
    from test_results_db import ENV, _program, _row
    from shlo_env.measure.results_db import ResultsDB
    db = ResultsDB({path!r})
    db.ensure_environment(ENV)
    i = 0
    while True:
        h = f"{{i:06d}}"
        db.add_measurement(_row(h, 0.5), program=_program(h))
        if i == 20:
            print("ready", flush=True)
        i += 1
""")


def test_kill_9_during_writes_keeps_the_database_consistent(tmp_path):
    """A writer killed with SIGKILL mid-stream: every committed row is intact, none is partial,
    and the database opens and accepts the same rows again without duplicates."""
    path = str(tmp_path / "k.sqlite")
    code = WRITER.format(tests=os.path.dirname(__file__), path=path)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.3)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    with ResultsDB(path) as db:
        assert db.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        n = db.count()
        assert n >= 21
        hashes = [r["program_hash"] for r in db.measurements()]
        assert hashes == [f"{i:06d}" for i in range(n)]  # contiguous: nothing lost in between
        assert db.count("programs") == n  # each program written with its measurement, together
        for i in range(n + 5):  # a resumed writer: old keys are no-ops, new ones are added
            db.add_measurement(_row(f"{i:06d}", 0.5), program=_program(f"{i:06d}"))
        assert db.count() == n + 5


def test_concurrent_writers(tmp_path):
    """Two processes writing at once (e.g. two sweeps on one DB): nothing lost, nothing doubled."""
    path = str(tmp_path / "c.sqlite")
    ResultsDB(path).close()
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_results_db import ENV, _program, _row
        from shlo_env.measure.results_db import ResultsDB
        db = ResultsDB({path!r})
        db.ensure_environment(ENV)
        for i in range(40):
            db.add_measurement(_row(f"{{i:03d}}", 0.5), program=_program(f"{{i:03d}}"))
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(2)]
    assert all(p.wait(timeout=60) == 0 for p in procs)
    with ResultsDB(path) as db:
        assert db.count() == 40 and db.count("programs") == 40


def test_a_decision_space_beyond_a_float_is_stored_as_unknown(db):
    """A 2.7k-op zoo program has more than 2**1024 decision vectors: the row is still written
    (this raised OverflowError and ended a zoo sweep after its first program)."""
    rec = {**_result("big"), "decision_space": 2 ** 1500, "num_alternatives": 1500}
    row = measurement_row(rec, dataset="d", uri="d/big", strategy="pick-first", config={"strategy": "pick-first"},
                          cfg_key=config_key({"strategy": "pick-first"}), env=ENV,
                          profile={"id": 1, "faster": 0.95, "slower": 1.05}, peaks=(1e9, 1e9, "test"),
                          executor="local", sweep_id=None, started_at="t0", finished_at="t1")
    assert row["decision_space"] is None and row["num_alternatives"] == 1500
    db.add_measurement(row, program=_program("big"))
    assert [r["decision_space"] for r in db.measurements()] == [None]
    small = measurement_row({**_result("s"), "decision_space": 2 ** 10}, dataset="d", uri="d/s", strategy="p",
                            config={}, cfg_key="k", env=ENV, profile={"id": 1, "faster": 0.95, "slower": 1.05},
                            peaks=(1e9, 1e9, "t"), executor="local", sweep_id=None, started_at="t0",
                            finished_at="t1")
    assert small["decision_space"] == 1024.0
