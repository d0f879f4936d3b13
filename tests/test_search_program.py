"""One front end (issue 47 item 3): `optimize`, `shlo_env.jit`, `shlo-env optimize` and the bench
call `search_program`, and a result goes through the cache as its record (item 2)."""

import json
import warnings

import numpy as np
import pytest

import shlo_env as se
from shlo_env.api import cache as search_cache
from shlo_env.api import search_program as front_end
from shlo_env.execute import runtime
from shlo_env.ir.hashing import dag_hash
from shlo_env.search.options import SearchOptions
from shlo_env.search.result import ProgramResult


def times_one(x):
    return x * 1.0


def identity(x):
    return x  # the rewrite of `times_one`: same signature, same outputs


X = np.linspace(-1.0, 1.0, 32, dtype=np.float32)


@pytest.fixture
def spy(monkeypatch):
    """`search_program` replaced by one that records its calls and keeps the original (no search)."""
    calls = []

    def fake(program, options, **kwargs):
        calls.append({"program": program, "options": options, **kwargs})
        res = ProgramResult(name=str(options.name or program.name), strategy="spy", reason="the spy kept it",
                            original_hash=dag_hash(program), best_hash=dag_hash(program))
        res.program = program
        return res, front_end.UNCACHED

    monkeypatch.setattr(front_end, "search_program", fake)
    return calls


def test_optimize_and_jit_go_through_search_program(spy):
    opt = se.optimize(times_one, X, budget_s=5, cache=False)
    assert len(spy) == 1 and spy[0]["cache"] is None and spy[0]["options"].name == "times_one"
    assert opt.report.returned_original and opt.report.reason == "the spy kept it"
    np.testing.assert_array_equal(opt(X), X)
    f = se.jit(times_one, budget_s=5, cache=False)
    np.testing.assert_array_equal(f(X), X)
    assert len(spy) == 2 and spy[1]["program"].in_specs[0].shape == X.shape


def test_the_file_cli_goes_through_search_program(spy, tmp_path):
    from shlo_env.cli import main as cli_main

    src, out = tmp_path / "m.mlir", tmp_path / "out.mlir"
    src.write_text(se.lower(times_one, X).text())
    assert cli_main(["optimize", str(src), "-o", str(out), "--budget", "5", "--cache-dir", str(tmp_path / "c"),
                     "--report"]) == 0
    assert len(spy) == 1 and isinstance(spy[0]["cache"], search_cache.SearchCache)
    assert json.loads((tmp_path / "out.mlir.report.json").read_text())["strategy"] == "spy"
    assert "func.func" in out.read_text()


def test_the_bench_goes_through_search_program_without_the_cache(spy):
    from shlo_env.bench.executors import Task
    from shlo_env.bench.sweep import _optimize_one

    program = se.lower(times_one, X)
    task = Task(0, "examples", "uri", "times_one", dag_hash(program), "beam", program, SearchOptions(budget_s=5),
                _optimize_one)
    record = _optimize_one(task, worker="the executor's worker", device_lock=None)
    assert len(spy) == 1 and spy[0]["cache"] is None and spy[0]["worker"] == "the executor's worker"
    assert spy[0]["options"].strategy == "beam" and record["strategy"] == "spy"


def _stored(tmp_path, report: dict | None = None):
    """A cache holding the search of `times_one` whose winner is `identity`; its key, entry, program."""
    program, chosen = se.lower(times_one, X), se.lower(identity, X)
    options = SearchOptions(budget_s=5, name="times_one")
    res = ProgramResult(name="times_one", strategy="beam", returned_original=False, applied=("mul_one",),
                        numerics="EXACT", candidates_evaluated=7, ratio=0.8, noise=0.01, threshold=0.97,
                        baseline={"full": 1e-4, "async": None, "compute": None, "runs": 10},
                        best={"full": 8e-5, "async": None, "compute": None, "runs": 10},
                        verification={"tier": "EXACT", "input_sets": 4}, decisions=[[1]], cuts=("profile: too dear",),
                        original_hash=dag_hash(program), best_hash=dag_hash(chosen))
    res.program = chosen
    key = search_cache.search_key(program, options)
    entry = front_end.cache_entry(key, res)
    if report is not None:
        entry.report = report
    store = search_cache.SearchCache(tmp_path)
    store.put(entry)
    return store, key, program, options, res


def test_a_result_round_trips_through_the_cache(tmp_path):
    store, key, program, options, res = _stored(tmp_path)
    entry = store.get(key)
    assert entry is not None and entry.program is not None
    with warnings.catch_warnings():
        warnings.simplefilter("error", search_cache.CacheWarning)
        hit, status = front_end.search_program(program, options, cache=store)
    assert status == front_end.HIT and not hit.returned_original
    assert hit.candidates_evaluated == 0  # nothing searched in this run
    want, got = res.to_record(), hit.to_record()
    for field in ("name", "strategy", "applied", "numerics", "ratio", "noise", "threshold", "baseline", "best",
                  "verification", "decisions", "cuts", "original_hash", "best_hash", "disabled_passes"):
        assert got[field] == want[field], field
    np.testing.assert_array_equal(runtime.execute(runtime.compile(hit.program), [X])[0], X)


def test_a_hit_that_fails_its_check_is_searched_again(tmp_path, monkeypatch):
    store, key, program, options, _ = _stored(tmp_path)

    def wrong(flat):
        return [np.asarray(flat[0]) + 1.0]

    class Lying(front_end.CompiledReplay):
        run_chosen = staticmethod(wrong)

    searched = []
    monkeypatch.setattr(front_end, "optimize_program",
                        lambda program, options, **kw: searched.append(program) or ProgramResult(
                            name="times_one", strategy="beam", status="error", error="not searched here"))
    with pytest.warns(search_cache.CacheWarning, match="outputs differ"):
        res, status = front_end.search_program(program, options, cache=store, replay=Lying)
    assert searched and status == front_end.UNCACHED and res.error == "not searched here"


def test_an_entry_of_an_optimize_report_still_loads(tmp_path):
    """Entries `optimize` wrote before the cache held results stored its Report's fields."""
    program = se.lower(times_one, X)
    old = {"name": "times_one", "strategy": "beam", "returned_original": False, "applied": ["mul_one"],
           "numerics": "EXACT", "baseline_s": 1e-4, "optimized_s": 8e-5, "ratio": 0.8, "median_ratio": 0.82,
           "verification": "EXACT tier on random sets in a worker, then against jax.jit in-process",
           "optimized_hash": "abc", "pass_actions": [], "decisions": [[1]], "cache": "", "candidates_evaluated": 3}
    store, key, program, options, _ = _stored(tmp_path, report=old)
    hit, status = front_end.search_program(program, options, cache=store)
    assert status == front_end.HIT and hit.applied == ("mul_one",) and hit.ratio == 0.8
    assert hit.baseline["full"] == 1e-4 and hit.best["full"] == 8e-5 and hit.best["median_ratio"] == 0.82
    assert hit.verification["summary"].startswith("EXACT tier")


def test_optimize_takes_a_hit_as_its_callable_and_report(tmp_path):
    """The entry of a search as `optimize` keys it: a hit, checked on the callable `optimize`
    returns, reported with the stored measurements (no search, so no budget spent)."""
    from shlo_env.api.optimize import DEFAULTS

    options = DEFAULTS.with_(budget_s=5, name="times_one", final_timing=False, cost=False)
    store, key, program, _, res = _stored(tmp_path)
    store.discard(key)
    res.verification["summary"] = "EXACT tier on random sets in a worker, then against jax.jit in-process"
    store.put(front_end.cache_entry(search_cache.search_key(program, options), res))
    with warnings.catch_warnings():
        warnings.simplefilter("error", search_cache.CacheWarning)
        opt = se.optimize(times_one, X, budget_s=5, cache=tmp_path)
    r = opt.report
    assert r.cache == "hit" and not r.returned_original and r.candidates_evaluated == 0, str(r)
    assert r.applied == ("mul_one",) and r.ratio == 0.8 and r.baseline_s == 1e-4 and r.optimized_s == 8e-5
    assert r.verification == res.verification["summary"] and "persistent cache: hit" in str(r)
    assert opt.program is not None and opt.module_call is not opt._fallback
    np.testing.assert_array_equal(opt(X), X)
