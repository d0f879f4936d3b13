"""The README and the user guide as a new user reads them (issue 49 item 6): their Python blocks
run (with small budgets), the README opens with its title, one sentence and the two commands CI
runs, every document is in docs/index.md, and the Equinox example works."""

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SKIP_MARK = "# not run"  # a block whose first line has this is shown, not run

# Budgets cut to a few seconds: the examples' searches are real, only shorter.
PRELUDE = textwrap.dedent("""
    from shlo_env.search import options as _options
    for _fields in _options.MODES.values():
        _fields["budget_s"] = min(_fields["budget_s"], 5.0)
    import shlo_env.api.jit as _jit, shlo_env.api.optimize as _optimize
    _optimize.DEFAULTS = _optimize.DEFAULTS.with_(budget_s=5.0)
    _jit.JIT_DEFAULTS = _jit.JIT_DEFAULTS.with_(budget_s=5.0)
""")


def python_blocks(path: Path) -> list[str]:
    blocks = re.findall(r"^```python\n(.*?)^```", path.read_text(), flags=re.S | re.M)
    return [b for b in blocks if not b.lstrip().startswith(SKIP_MARK)]


def run_blocks(path: Path, tmp_path: Path) -> None:
    blocks = python_blocks(path)
    assert blocks, f"no python block in {path}"
    script = PRELUDE + "\n".join(f"# --- block {i}\n{b}" for i, b in enumerate(blocks)) + \
        "\nimport json\nprint(json.dumps({'ok': True}))\n"
    (tmp_path / "blocks.py").write_text(script)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SHLO_ENV_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "blocks.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, f"{path.name}'s python blocks failed:\n{out.stderr[-3000:]}"
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"ok": True}


def test_the_readme_opens_with_its_title_a_sentence_and_the_two_commands():
    text = (ROOT / "README.md").read_text()
    lines = text.splitlines()
    assert lines[0] == "# shlo_env" and len(lines) < 150
    intro = text.split("```", 1)[0]
    assert intro.count("\n\n") == 2, "the title, one sentence (paragraph), then the commands"
    first_block = re.search(r"```bash\n(.*?)```", text, flags=re.S).group(1).splitlines()
    assert first_block[0] == "python -m pip install . && shlo-env bench"
    assert "pytest" in first_block[1] and '".[test]"' in first_block[1]  # .ci/run runs this line
    assert "## Use it like `jax.jit`" in text


def test_every_document_is_in_the_index():
    index = (ROOT / "docs" / "index.md").read_text()
    missing = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if p.name != "index.md" and f"]({p.name})" not in index]
    assert not missing, f"docs/index.md does not list {missing}"
    assert "](experiments/)" in index


def test_the_readme_python_blocks_run(tmp_path):
    run_blocks(ROOT / "README.md", tmp_path)


def test_the_guide_python_blocks_run(tmp_path):
    run_blocks(ROOT / "docs" / "guide.md", tmp_path)


def test_the_equinox_example_runs(tmp_path):
    pytest.importorskip("equinox", reason="the example needs equinox (pip install '.[dev]')")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SHLO_ENV_CACHE_DIR": str(tmp_path / "cache")}
    code = ("import json, runpy; "
            f"ns = runpy.run_path({str(ROOT / 'examples' / 'equinox_mlp.py')!r}); "
            "print(json.dumps(ns['main'](['--budget', '4'])))")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["loss"] > 0 and res["ratio"] > 0
