"""The Ray executor: the same sweep on a local 2-worker Ray gives the same decisions as the local
executor for a deterministic strategy, and timings on one device never overlap."""

from __future__ import annotations

import json
import time

import pytest

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'shlo_env[ray]')")

from shlo_env import bench, corpus  # noqa: E402
from shlo_env.rewrite.driver import augment, list_alternatives  # noqa: E402
from shlo_env.bench.executors import DeviceLock  # noqa: E402
from shlo_env.ir.program import save  # noqa: E402
from shlo_env.measure.results_db import ResultsDB, environment  # noqa: E402

N_PROGRAMS = 10
# ray.init starts its processes with fork+exec; jax's warning about fork does not apply
pytestmark = pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")


@pytest.fixture(scope="module")
def programs_dir(tmp_path_factory):
    """10 sub-graphs of inst-10-20 on which pick-first has something to decide."""
    d = tmp_path_factory.mktemp("progs")
    n = 0
    for e in corpus.entries("inst-10-20"):
        p = corpus.load(e.uri)
        if not list_alternatives(augment(p)):
            continue
        save(p, d / f"{n:02d}_{e.name}.mlir")
        n += 1
        if n == N_PROGRAMS:
            break
    assert n == N_PROGRAMS
    return d


def _sweep(programs_dir, db, executor):
    env = environment()
    with ResultsDB(db) as rdb:  # a fixed noise profile: this test is about the executors
        rdb.ensure_environment(env)
        rdb.add_noise_profile(env["env_id"], {"faster": 0.9, "slower": 1.1, "samples": 0, "method": "test"})
    return bench.sweep([str(programs_dir)], ["pick-first"], bench.SweepOptions(
        budget_s=20, executor=executor, workers=2, db_path=db, out=False, progress=False, peak_flops=1e11,
        peak_bandwidth=1e10, max_steps=4, num_random=2, xla_options=False))  # no option screen: a timing


def test_ray_executor_decisions_equal_local(programs_dir, tmp_path):
    local = _sweep(programs_dir, tmp_path / "local.sqlite", "local")
    t0 = time.perf_counter()
    remote = _sweep(programs_dir, tmp_path / "ray.sqlite", "ray")
    ray_s = time.perf_counter() - t0
    assert len(local.rows) == len(remote.rows) == N_PROGRAMS
    assert all(r["executor"] == "ray" for r in remote.rows) and all(r["executor"] == "local" for r in local.rows)
    # two Ray actors did the work (in parallel), each in its own process
    assert len({r["worker"] for r in remote.rows}) == 2, ray_s
    for a, b in zip(local.rows, remote.rows):
        assert (a["uri"], a["program_hash"]) == (b["uri"], b["program_hash"])
        assert a["status"] == b["status"] == "ok", (a["error"], b["error"])
        # pick-first is deterministic: the same decisions, step by step, from the same states
        ta, tb = json.loads(a["trajectory"]), json.loads(b["trajectory"])
        assert ta and ta == tb, a["name"]
        # The program returned is the fastest verified state on that chain, if faster beyond
        # noise: a measurement, not a decision, so it may be another step of the same chain.
        # Either way its decisions are the chain's first steps.
        for r in (a, b):
            steps = [[[i, c] for i, c in enumerate(d) if c] for d in json.loads(r["decisions"])]
            assert steps == [v for _, v in ta[:len(steps)]], r["name"]
        if a["decisions"] == b["decisions"]:
            assert a["best_hash"] == b["best_hash"] and a["applied"] == b["applied"]


def test_device_lock_serializes_across_ray_workers(tmp_path):
    """Timings hold the node's device lock: two Ray workers never hold it at the same time."""
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        lock = DeviceLock("test-device", tmp_path)

        @ray.remote(num_cpus=1)
        def hold(lock, seconds):
            import os
            import time

            with lock:
                t = time.time()
                time.sleep(seconds)
                return t, time.time(), os.getpid()

        spans = sorted(ray.get([hold.remote(lock, 0.3) for _ in range(4)]))
        assert len({pid for _, _, pid in spans}) == 2  # two workers competed for the lock
        for (_, end, _), (start, _, _) in zip(spans, spans[1:]):
            assert start >= end - 1e-3
    finally:
        if started:
            ray.shutdown()
