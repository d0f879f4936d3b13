"""Logs, dump folders, the export artifact and moving the cache (issue 49 items 1 and 3)."""

import io
import json
import logging
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest

from shlo_env import logs

ROOT = Path(__file__).resolve().parents[1]


def run_fresh(code: str, tmp_path: Path, **env: str) -> dict:
    base = {k: v for k, v in os.environ.items() if k not in ("SHLO_ENV_LOGS", "SHLO_ENV_DUMP_DIR")}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path, env={**base, "PYTHONPATH": str(ROOT), "SHLO_ENV_CACHE_DIR": str(tmp_path / "cache"),
                                            **env})
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


# --- logs ----------------------------------------------------------------------------------------

def test_logs_parse_like_torch_logs():
    assert logs.parse("search, +cache") == {"search": logging.INFO, "cache": logging.DEBUG}
    assert set(logs.parse("all")) == set(logs.NAMES)
    with pytest.raises(ValueError, match="no logger 'serch'; choose from search, cache, verify, worker"):
        logs.parse("serch")
    with pytest.warns(UserWarning, match="no logger"):
        assert logs.configure_from_env({"SHLO_ENV_LOGS": "serch"}) == {}


def test_loggers_are_silent_until_enabled():
    stream = io.StringIO()
    log = logs.get("cache")
    assert not log.isEnabledFor(logging.INFO)
    try:
        logs.enable("cache", stream=stream)
        log.info("miss: %s", "abc")
        logs.get("search").info("not this one")
    finally:
        logs.disable()
    assert stream.getvalue() == "[shlo_env.cache] miss: abc\n"
    assert not log.isEnabledFor(logging.INFO)


def test_a_search_is_silent_by_default_and_logs_and_dumps_when_asked(tmp_path):
    """One process: a search with nothing asked prints nothing (Python-level stderr); then
    SHLO_ENV_LOGS's loggers and a SHLO_ENV_DUMP_DIR folder for a second search; its artifact."""
    res = run_fresh(f"""
        import contextlib, io, json, os, sys
        import jax.numpy as jnp, numpy as np
        import shlo_env
        from shlo_env import logs
        X = np.random.default_rng(0).standard_normal((256, 128)).astype(np.float32)
        W = np.random.default_rng(1).standard_normal((128, 128)).astype(np.float32)
        def colsum(X, W):
            return jnp.sum(X @ W, axis=0)
        quiet = io.StringIO()
        with contextlib.redirect_stderr(quiet):
            shlo_env.optimize(colsum, X, W, budget_s=4, cache=False)
        loud = io.StringIO()
        with contextlib.redirect_stderr(loud):
            logs.configure_from_env({{"SHLO_ENV_LOGS": "search,cache,verify,worker"}})
            os.environ["SHLO_ENV_DUMP_DIR"] = {str(tmp_path / "dumps")!r}
            fast = shlo_env.optimize(colsum, X, W, budget_s=6, seed=1)
        fast.export({str(tmp_path / "artifact")!r})
        print(json.dumps({{"quiet": quiet.getvalue(), "loud": loud.getvalue(), "applied": list(fast.report.applied),
                          "y": np.asarray(fast(X, W)).tolist()}}))
    """, tmp_path)
    assert res["quiet"] == ""
    loud = res["loud"]
    assert "[shlo_env.cache] miss:" in loud and "[shlo_env.cache] stored:" in loud
    assert "[shlo_env.search] optimize(colsum)" in loud
    if res["applied"]:  # the winner's in-process check against jax.jit is logged
        assert "[shlo_env.verify] colsum: in-process check against jax.jit: ok" in loud
    (folder,) = (tmp_path / "dumps").iterdir()
    assert folder.name.startswith("colsum-")
    assert sorted(p.name for p in folder.iterdir()) == ["candidates.jsonl", "original.mlir", "report.json",
                                                      "winner.mlir"]
    assert "func.func" in (folder / "original.mlir").read_text()
    report = json.loads((folder / "report.json").read_text())
    assert report["name"] == "colsum"
    rows = [json.loads(line) for line in (folder / "candidates.jsonl").read_text().splitlines()]
    assert rows and {"hash", "rewrites", "tier", "ratio", "rejected", "status"} <= set(rows[0])
    assert any(r["rewrites"] == [] for r in rows)  # the original is among them
    if res["applied"]:
        assert any(r["rewrites"] == res["applied"] for r in rows)
        assert (folder / "winner.mlir").read_text() != (folder / "original.mlir").read_text()

    # the artifact, loaded in a fresh process: the same outputs, no search
    loaded = run_fresh(f"""
        import json, sys
        import numpy as np
        import shlo_env
        X = np.random.default_rng(0).standard_normal((256, 128)).astype(np.float32)
        W = np.random.default_rng(1).standard_normal((128, 128)).astype(np.float32)
        g = shlo_env.load_optimized({str(tmp_path / "artifact")!r})
        print(json.dumps({{"y": np.asarray(g(X, W)).tolist(), "applied": g.manifest["applied"],
                          "searched": "shlo_env.search.program_search" in sys.modules}}))
    """, tmp_path)
    np.testing.assert_array_equal(np.asarray(loaded["y"]), np.asarray(res["y"]))
    assert loaded["applied"] == res["applied"] and not loaded["searched"]


def test_the_progress_line_is_one_tqdm_line():
    from shlo_env.api.progress import SearchWatch

    stats = types.SimpleNamespace(failures={"mismatch": 1}, evaluated=3, cache_hits=1)
    evaluator = types.SimpleNamespace(stats=stats, cache={})
    best = types.SimpleNamespace(ratio=0.5, speedup=2.0, describe=lambda: "mul_one")
    stream = io.StringIO()
    watch = SearchWatch(True, "f", budget_s=10, stream=stream)
    watch.update(evaluator, best, force=True)
    watch.close(evaluator, best)
    text = stream.getvalue()
    assert "best 0.500 (2.00x), 3 evaluated, 1 cache hits, 1 rejected" in text
    assert text.count("\n") <= 1  # one line, redrawn in place
    silent = io.StringIO()
    off = SearchWatch(False, "f", stream=silent)
    off.update(evaluator, best, force=True)
    off.close(evaluator, best)
    assert silent.getvalue() == "" and off.evaluators == [evaluator]


# --- the export artifact -------------------------------------------------------------------------

def twice(x, y):
    return (x * y) * 1.0 + x * y


def test_an_artifact_keeps_its_xla_actions_and_refuses_another_jax(tmp_path):
    """Written here with a disabled pass, loaded in a fresh process: equal outputs, and the
    compiled executable has the pass off (cse off: the product is computed twice)."""
    import shlo_env as se
    from shlo_env.api.export import ExportError, load_optimized, write_artifact
    from shlo_env.execute.xla_options import DisablePass

    x = np.arange(64, dtype=np.float32)
    program = se.lower(twice, x, x)
    write_artifact(tmp_path / "art", program, fn=twice, original=program, actions=(DisablePass("cse"),),
                   numerics="EXACT", report={"name": "twice"}, report_text="twice: kept", name="twice")
    res = run_fresh(f"""
        import json
        import jax, numpy as np
        import shlo_env
        g = shlo_env.load_optimized({str(tmp_path / "art")!r})
        x = np.arange(64, dtype=np.float32)
        hlo = g.lower(x, x).compile().as_text()
        plain = jax.jit(lambda x, y: (x * y) * 1.0 + x * y).lower(x, x).compile().as_text()
        print(json.dumps({{"equal": bool(np.array_equal(g(x, x), (x * x) * 1.0 + x * x)),
                          "multiplies": hlo.count("multiply("), "plain": plain.count("multiply("),
                          "actions": list(g.actions), "report": g.report_text}}))
    """, tmp_path)
    assert res["equal"] and res["actions"] == ["cse"] and res["report"] == "twice: kept"
    assert res["multiplies"] > res["plain"], res  # the artifact's executable was compiled with cse off

    manifest = json.loads((tmp_path / "art" / "manifest.json").read_text())
    manifest["tuned_on"]["jax"] = "0.0.1"
    (tmp_path / "art" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ExportError, match=r"tuned elsewhere: jax '.*' here, '0.0.1' in the artifact"):
        load_optimized(tmp_path / "art")
    with pytest.warns(UserWarning, match="tuned elsewhere"):
        g = load_optimized(tmp_path / "art", strict=False)
    assert g.actions == () and np.array_equal(g(x, x), twice(x, x))
    with pytest.raises(ExportError, match="not a shlo_env artifact"):
        load_optimized(tmp_path / "nothing")


def test_the_file_cli_dumps_and_exports(tmp_path):
    from shlo_env.api.export import load_optimized
    from shlo_env.cli import main

    import shlo_env as se

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    src = tmp_path / "m.mlir"
    src.write_text(se.lower(lambda a: a * 1.0 + 0.0, x).text())
    assert main(["optimize", str(src), "-o", str(tmp_path / "out.mlir"), "--budget", "10", "--no-cache",
                 "--dump", str(tmp_path / "dump"), "--export", str(tmp_path / "art"), "--mode", "quick"]) == 0
    assert sorted(p.name for p in (tmp_path / "dump").iterdir()) == ["candidates.jsonl", "original.mlir",
                                                                    "report.json", "winner.mlir"]
    g = load_optimized(tmp_path / "art")
    np.testing.assert_array_equal(np.asarray(g(x)), x)


# --- moving the cache ----------------------------------------------------------------------------

def test_cache_export_import_and_a_miss_explained(tmp_path, capsys):
    from shlo_env.api.cache import Entry, SearchCache
    from shlo_env.cli import main

    key = {"format": 1, "program": "abc", "backend": "cpu", "device_kind": "cpu", "jax": "0.10.2",
           "options": {"budget_s": 60.0, "seed": 0}}
    SearchCache(tmp_path / "a").put(Entry(key=key, name="f", program=None, report={"ratio": 1.0}))
    assert main(["cache", "export", str(tmp_path / "c.tar.gz"), "--dir", str(tmp_path / "a")]) == 0
    assert "exported 1 cached searches" in capsys.readouterr().out
    assert main(["cache", "import", str(tmp_path / "c.tar.gz"), "--dir", str(tmp_path / "b")]) == 0
    assert "imported 1 cached searches" in capsys.readouterr().out
    b = SearchCache(tmp_path / "b")
    assert b.get(key) is not None and b.get(key).name == "f"
    other = {**key, "options": {"budget_s": 30.0, "seed": 0}}
    assert b.nearest(other) == "; the nearest entry differs in options.budget_s"
    assert b.nearest({**key, "program": "zzz"}) == ""
    assert main(["cache", "import", str(tmp_path / "missing.tar.gz"), "--dir", str(tmp_path / "b")]) == 2


# --- a cache that survives upgrades ----------------------------------------------------------------

def test_an_entry_of_older_jax_versions_is_reverified_not_searched_again(tmp_path):
    """Simulate the upgrade: the stored entry's key gets other jax/jaxlib versions; the next
    optimize re-verifies and re-times it (no candidate evaluated) and stores it under this key."""
    import jax.numpy as jnp

    import shlo_env as se
    from shlo_env.api.cache import Entry, SearchCache, digest

    def colsum(X, W):
        return jnp.sum(X @ W, axis=0)

    rng = np.random.default_rng(0)
    X, W = rng.standard_normal((512, 256), np.float32), rng.standard_normal((256, 256), np.float32)
    first = se.optimize(colsum, X, W, budget_s=10, cache=tmp_path)
    if first.report.returned_original:
        pytest.skip(f"the search kept jax.jit on this machine: {first.report.reason}")
    store = SearchCache(tmp_path)
    (path,) = store.files()
    entry = Entry.from_json(path.read_text())
    old_key = {**entry.key, "jax": "0.0.1", "jaxlib": "0.0.1"}
    path.unlink()
    store.put(Entry(key=old_key, name=entry.name, program=entry.program, actions=entry.actions,
                    numerics=entry.numerics, optimized_hash=entry.optimized_hash, report=entry.report))
    assert store.find_stale(entry.key) is not None and store.get(entry.key) is None
    again = se.optimize(colsum, X, W, budget_s=10, cache=tmp_path)
    r = again.report
    assert r.cache == "revalidated" and r.candidates_evaluated == 0 and r.applied == first.report.applied, str(r)
    assert "verified and timed again here" in str(r)
    np.testing.assert_allclose(again(X, W), first(X, W), rtol=1e-5)
    assert store.get(entry.key) is not None  # stored under this version's key
    assert {p.name for p in store.files()} == {f"{digest(old_key)}.json", f"{digest(entry.key)}.json"}


def test_the_cache_prunes_least_recently_used_entries(tmp_path):
    import time as _time

    from shlo_env.api.cache import Entry, SearchCache

    store = SearchCache(tmp_path)
    keys = [{"format": 1, "program": f"p{i}", "options": {}} for i in range(4)]
    for i, key in enumerate(keys):
        path = store.put(Entry(key=key, name=f"f{i}", program="x" * 1000))
        os.utime(path, (_time.time() - 100 + i, _time.time() - 100 + i))
    store.get(keys[0])  # read now: the most recently used
    one = store.files()[0].stat().st_size
    assert store.prune(max_bytes=2.5 * one) == 2
    assert store.get(keys[0]) is not None and store.get(keys[3]) is not None
    assert store.get(keys[1]) is None and store.get(keys[2]) is None


# --- explain ---------------------------------------------------------------------------------------

def _colsum(X, W):
    import jax.numpy as jnp

    return jnp.sum(X @ W, axis=0)  # the line explain() names


def test_explain_names_the_source_line_of_each_rewrite_and_why_not():
    import inspect

    import shlo_env as se

    rng = np.random.default_rng(0)
    X, W = rng.standard_normal((512, 256), np.float32), rng.standard_normal((256, 256), np.float32)
    fast = se.optimize(_colsum, X, W, budget_s=10, cache=False)
    text = fast.report.explain()
    if fast.report.returned_original:
        pytest.skip(f"the search kept jax.jit on this machine: {fast.report.reason}")
    lines, start = inspect.getsourcelines(_colsum)
    line = start + next(i for i, t in enumerate(lines) if "the line explain() names" in t)
    assert f"{__file__}:{line}: " in text and "jnp.sum(X @ W, axis=0)" in text, text
    assert "reduce_through_dot" in text and "StableHLO diff" in text and "\n  +" in text
    assert fast.report.decisions  # the path from the original to the result

    kept = se.optimize(lambda x: x + 1.0, np.ones(16, np.float32), budget_s=4, cache=False)
    why = kept.report.explain()
    assert kept.report.returned_original and "why not faster:" in why and "searched:" in why, why


def test_stablehlo_diff_canonicalizes_ssa_names():
    from shlo_env.api.explain import canonical, stablehlo_diff

    a = "%x = stablehlo.add %arg0, %arg0\nreturn %x"
    b = "%y = stablehlo.add %arg0, %arg0\nreturn %y"
    assert canonical(a) == canonical(b) == ["%0 = stablehlo.add %1, %1", "return %0"]
    assert stablehlo_diff(a, b) == ""
    assert "+%0 = stablehlo.multiply %1, %1" in stablehlo_diff(a, b.replace("add", "multiply"))
