"""The persistent cache of searches: across processes, corrupted entries, concurrent writers, CLI."""

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shlo_env as se
from shlo_env.api import cache as search_cache
from shlo_env.cli import main as cli_main
from shlo_env.search.options import SearchOptions

ROOT = Path(__file__).resolve().parents[1]


def colsum(X, W):
    return jnp.sum(X @ W, axis=0)


def _env(cache_dir) -> dict:
    env = dict(os.environ, SHLO_ENV_CACHE_DIR=str(cache_dir), TF_CPP_MIN_LOG_LEVEL="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


# The README example, as a user runs it (the search budget kept small so the test is fast).
README_SCRIPT = textwrap.dedent("""
    import json, time
    import jax, jax.numpy as jnp, numpy as np
    import shlo_env

    @shlo_env.jit(budget_s=60)
    def f(X, W):
        return jnp.sum(X @ W, axis=0)

    def g(X, W):
        return jnp.sum(X @ W, axis=0)

    X = np.random.randn(4096, 1024).astype(np.float32)
    W = np.random.randn(1024, 1024).astype(np.float32)
    t = time.perf_counter(); jax.block_until_ready(f(X, W)); ours = time.perf_counter() - t
    t = time.perf_counter(); jax.block_until_ready(jax.jit(g)(X, W)); theirs = time.perf_counter() - t
    r = f.report(X, W)
    print(json.dumps({"first_call_s": ours, "jit_first_call_s": theirs, "cache": r.cache,
                      "candidates": r.candidates_evaluated, "applied": list(r.applied),
                      "returned_original": r.returned_original, "reason": r.reason}))
""")


def test_second_process_finds_the_search_in_the_cache(tmp_path):
    script = tmp_path / "readme.py"
    script.write_text(README_SCRIPT)
    runs = []
    for _ in range(2):
        out = subprocess.run([sys.executable, str(script)], env=_env(tmp_path / "cache"), capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    first, second = runs
    assert first["cache"] == "stored" and first["candidates"] >= 1
    assert not first["returned_original"] and "reduce_through_dot" in first["applied"], first
    assert second["cache"] == "hit" and second["candidates"] == 0, second
    assert second["applied"] == first["applied"] and not second["returned_original"]
    assert second["first_call_s"] <= second["jit_first_call_s"] + 2.0, second


@pytest.fixture
def small():
    rng = np.random.default_rng(0)
    return rng.standard_normal((512, 256)).astype(np.float32), rng.standard_normal((256, 256)).astype(np.float32)


def _only_entry(directory) -> Path:
    files = list((Path(directory) / "searches").glob("*.json"))
    assert len(files) == 1, files
    return files[0]


@pytest.mark.parametrize("damage", ["garbage", "other_format", "wrong_program", "truncated"])
def test_a_damaged_entry_is_ignored_with_a_warning_and_replaced(tmp_path, small, damage):
    opt = se.optimize(colsum, *small, budget_s=40, cache=tmp_path)
    assert opt.report.cache == "stored" and not opt.report.returned_original
    path = _only_entry(tmp_path)
    good = json.loads(path.read_text())
    if damage == "garbage":
        path.write_bytes(b"\x00\xffnot json at all")
    elif damage == "other_format":
        path.write_text(json.dumps({**good, "format": 999}))
    elif damage == "wrong_program":  # a stored program that is not what its hash says
        path.write_text(json.dumps({**good, "program": good["program"].replace("stablehlo.add", "stablehlo.multiply")}))
    else:
        path.write_text(path.read_text()[: len(path.read_text()) // 2])
    with pytest.warns(search_cache.CacheWarning):
        again = se.optimize(colsum, *small, budget_s=40, cache=tmp_path)
    assert again.report.cache == "stored" and again.report.candidates_evaluated >= 1  # searched again
    np.testing.assert_allclose(again(*small), jax.jit(colsum)(*small), rtol=1e-4, atol=1e-3)
    replaced = search_cache.Entry.from_json(_only_entry(tmp_path).read_text())  # readable again
    assert replaced.key == good["key"]
    assert replaced.program == (None if again.report.returned_original else good["program"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", search_cache.CacheWarning)
        assert se.optimize(colsum, *small, budget_s=40, cache=tmp_path).report.cache == "hit"


def test_cache_off_and_directory_choice(tmp_path, small, monkeypatch):
    monkeypatch.setenv("SHLO_ENV_CACHE_DIR", "off")
    assert search_cache.resolve_dir(True) is None
    opt = se.optimize(colsum, *small, budget_s=20)
    assert opt.report.cache == ""
    monkeypatch.setenv("SHLO_ENV_CACHE_DIR", str(tmp_path / "env"))
    assert search_cache.resolve_dir(True) == tmp_path / "env"
    assert search_cache.resolve_dir(tmp_path / "explicit") == tmp_path / "explicit"
    assert search_cache.resolve_dir(False) is None
    monkeypatch.delenv("SHLO_ENV_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert search_cache.default_dir() == tmp_path / "xdg" / "shlo_env"


def test_a_changed_option_is_another_key(small):
    program = se.lower(colsum, *small)
    k1 = search_cache.search_key(program, SearchOptions(budget_s=20))
    assert k1 == search_cache.search_key(se.lower(colsum, *small), SearchOptions(budget_s=20))
    assert k1 != search_cache.search_key(program, SearchOptions(budget_s=30))
    assert k1 != search_cache.search_key(program, SearchOptions(patterns=["reduce_through_dot"], budget_s=20))
    assert k1 != search_cache.search_key(se.lower(colsum, small[0][:100], small[1]), SearchOptions(budget_s=20))


WRITER = textwrap.dedent("""
    import sys
    from shlo_env.api.cache import Entry, SearchCache
    store, me = SearchCache(sys.argv[1]), sys.argv[2]
    for i in range(150):
        shared = i % 2 == 0  # half the keys are written by both processes
        key = {"i": i} if shared else {"i": i, "writer": me}
        store.put(Entry(key=key, name=f"{me}-{i}", program="x" * 20000, report={"i": i}))
""")


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    procs = [subprocess.Popen([sys.executable, str(script), str(tmp_path / "c"), me], env=_env(tmp_path / "c"))
             for me in ("a", "b")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    store = search_cache.SearchCache(tmp_path / "c")
    entries = store.entries()
    assert len(entries) == 75 + 75 + 75  # shared keys once, each writer's own keys
    assert all(e is not None and e.program == "x" * 20000 for _, e in entries)
    assert not list((tmp_path / "c" / "searches").glob("*.tmp"))


def test_cli_cache_list_and_clear(tmp_path, small, capsys):
    se.optimize(colsum, *small, budget_s=40, cache=tmp_path)
    [(_, entry)] = search_cache.SearchCache(tmp_path).entries()
    # what the search found depends on the machine's load; the listing must say what it was
    found = ["jax.jit kept"] if entry.program is None else list(entry.report["applied"])
    (tmp_path / "searches" / "broken.json").write_text("{")
    assert cli_main(["cache", "list", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "2 cached searches" in out and "colsum" in out and "unreadable" in out
    assert found and all(what in out for what in found), (found, out)
    assert cli_main(["cache", "clear", "--dir", str(tmp_path)]) == 0
    assert "removed 2" in capsys.readouterr().out
    assert search_cache.SearchCache(tmp_path).entries() == []


def test_an_unwritable_cache_costs_the_cache_not_the_result(tmp_path, small):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where the cache directory should be")
    with pytest.warns(search_cache.CacheWarning, match="cannot store"):
        opt = se.optimize(colsum, *small, budget_s=20, cache=blocker)
    assert opt.report.cache == "" and not opt.report.returned_original
    np.testing.assert_allclose(opt(*small), jax.jit(colsum)(*small), rtol=1e-4, atol=1e-3)
