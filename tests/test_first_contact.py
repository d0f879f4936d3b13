"""First contact (issue 49 item 6): `import shlo_env` and `shlo-env --help` do not import jax,
`--version`, `shlo-env patterns`, and the public names load on first use."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_fresh(code: str, drop: tuple[str, ...] = ()) -> dict:
    """Run `code` in a fresh interpreter (without the environment variables `drop`); returns the
    JSON it prints last."""
    env = {k: v for k, v in os.environ.items() if k not in drop}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120,
                         env={**env, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_help_is_fast_and_does_not_import_jax():
    """Under 0.5 s from the first import to the printed help: the best of three fresh processes
    (the machine is shared; one slow start is the machine's, three are ours)."""
    runs = [run_fresh(HELP_PROBE) for _ in range(3)]
    res = min(runs, key=lambda r: r["seconds"])
    assert all(r["heavy"] == [] for r in runs), [r["heavy"] for r in runs]
    assert res["seconds"] < 0.5, [r["seconds"] for r in runs]
    for command in ("optimize", "patterns", "cache", "bench"):
        assert f"    {command}" in res["help"]
    assert "--version" in res["help"] and "SHLO_ENV_LOGS" in res["help"]


HELP_PROBE = """
        import contextlib, io, json, sys, time
        start = time.perf_counter()
        from shlo_env.cli import main
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            try:
                main(["--help"])
            except SystemExit:
                pass
        seconds = time.perf_counter() - start
        heavy = sorted(m for m in ("jax", "jaxlib", "numpy", "shlo_env.patterns") if m in sys.modules)
        print(json.dumps({"seconds": seconds, "heavy": heavy, "help": buf.getvalue()}))
"""


def test_import_is_lazy_and_the_public_names_load_on_use():
    res = run_fresh("""
        import json, os, sys
        import shlo_env
        lazy = "jax" not in sys.modules and "jaxlib" not in sys.modules
        level = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
        opt = shlo_env.optimize
        from shlo_env import jit, Program, Numerics, load_optimized
        names = [n for n in shlo_env.__all__ if not hasattr(shlo_env, n)]
        print(json.dumps({"lazy": lazy, "level": level, "loaded": "jax" in sys.modules,
                          "module": opt.__module__, "jit": jit.__module__, "missing": names,
                          "in_dir": "optimize" in dir(shlo_env) and "Env" in dir(shlo_env),
                          "numerics": Numerics.EXACT.name}))
    """, drop=("TF_CPP_MIN_LOG_LEVEL",))
    assert res["lazy"] and res["loaded"]
    assert res["level"] == "1"  # XLA's INFO lines hidden before jaxlib loads (unless the user chose)
    assert res["module"] == "shlo_env.api.optimize" and res["jit"] == "shlo_env.api.jit"
    assert res["missing"] == [] and res["in_dir"] and res["numerics"] == "EXACT"


def test_an_unknown_attribute_is_an_attribute_error():
    import shlo_env

    with pytest.raises(AttributeError, match="no attribute 'optimise'"):
        shlo_env.optimise  # noqa: B018


def test_version_names_shlo_env_and_jax_without_importing_it(capsys):
    from importlib import metadata

    from shlo_env import __version__
    from shlo_env.cli import main

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"shlo-env {__version__} (jax {metadata.version('jax')}, jaxlib ")


def test_patterns_lists_name_family_tier_and_one_line(capsys):
    from shlo_env.cli import main
    from shlo_env.patterns import all_patterns

    assert main(["patterns"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == len(all_patterns())
    row = next(line.split(None, 3) for line in lines if line.startswith("reduce_through_dot "))
    assert row[1:3] == ["dot", "reassociate"] and "->" in row[3]
    assert main(["patterns", "--family", "loops", "--tier", "exact"]) == 0
    loops = capsys.readouterr().out.strip().splitlines()
    assert loops and all(line.split()[1:3] == ["loops", "exact"] for line in loops)
    assert main(["patterns", "--family", "nope"]) == 2
