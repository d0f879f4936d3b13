"""`shlo-env show`: DOT text, SVG through Graphviz, and the message when Graphviz is missing."""

import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from shlo_env import cli
from shlo_env.rewrite import driver
from shlo_env.research import show
from shlo_env.ir.program import lower, save


def qkv(x, Wq, Wk, Wv):
    return x @ Wq, x @ Wk, x @ Wv


def low_rank_update(x, W, A, B):
    return x @ (W + A @ B)


def _lower(fn, *shapes):
    rng = np.random.default_rng(0)
    return lower(fn, *[rng.standard_normal(s).astype(np.float32) for s in shapes])


@pytest.fixture(scope="module")
def lru():
    return _lower(low_rank_update, (8, 32), (32, 32), (32, 8), (8, 32))


@pytest.fixture(scope="module")
def lru_file(lru, tmp_path_factory):
    return save(lru, tmp_path_factory.mktemp("show") / "low_rank_update.mlir")


def _node_ids(dot: str) -> set[str]:
    return set(re.findall(r"^\s*(n\d+) \[", dot, flags=re.M))


def test_dot_without_decisions_shows_every_choice(lru):
    aug = driver.augment(lru, ["distribute_left"])
    dot = show.to_dot(aug, title="lru")
    assert dot.startswith("digraph") and dot.rstrip().endswith("}")
    assert "cluster_alt0_1" in dot and "#0 choice 1: distribute_left" in dot
    assert "alternatives #0" in dot and "hexagon" in dot
    assert "cluster_legend" in dot and "alternative (undecided)" in dot
    # every node is declared once, and every edge joins declared nodes
    ids = _node_ids(dot)
    edges = re.findall(r"^\s*(n\d+) -> (n\d+)", dot, flags=re.M)
    assert edges and all(s in ids and d in ids for s, d in edges)
    # 4 params + 3 original ops + 4 replacement ops + alternatives + return
    assert len(ids) == 13


def test_dot_with_decisions_marks_chosen_and_replaced(lru):
    aug = driver.augment(lru, ["distribute_left"])
    chosen = show.to_dot(aug, [1])
    assert "(chosen)" in chosen and "took 1" in chosen
    assert chosen.count(show._C["chosen_fill"]) >= 4 + 1  # the 4 replacement ops (+ legend)
    assert chosen.count(show._C["replaced_fill"]) >= 3 + 1  # the 3 original ops now dead (+ legend)
    kept = show.to_dot(aug, [0])
    assert "(not taken)" in kept and kept.count(show._C["replaced_fill"]) == 1  # legend only
    with pytest.raises(driver.ApplyError):
        show.to_dot(aug, [2])


def test_overlapping_alternatives_render(lru):
    p = _lower(qkv, (16, 32), (32, 32), (32, 32), (32, 32))
    aug = driver.augment(p)
    k = len(driver.list_alternatives(aug))
    assert k >= 2
    dot = show.to_dot(aug, [1] + [0] * (k - 1))
    assert all(f"alternatives #{i}" in dot for i in range(k))


def test_folded_region_bodies():
    import jax.numpy as jnp

    p = _lower(lambda x: jnp.sum(x * 2.0, axis=0), (8, 4))
    dot = show.to_dot(p)
    assert "reduce {add}" in dot  # the body is folded into the op's label
    assert "parameter" not in dot


def test_cli_writes_svg(lru_file, tmp_path, capsys):
    if show.dot_binary() is None:
        pytest.skip("Graphviz's `dot` binary is not installed (apt-get install graphviz)")
    out = tmp_path / "fig.svg"
    rc = cli.main(["show", str(lru_file), "--augment", "--patterns", "distribute_left", "--decisions", "1",
                   "-o", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "alternatives #0: 0=original, 1=distribute_left  -> 1" in printed and str(out) in printed
    root = ET.parse(out).getroot()
    assert root.tag.endswith("svg")
    text = out.read_text()
    assert "distribute_left" in text and "alternatives #0" in text
    assert out.with_suffix(".dot").exists()
    png = tmp_path / "fig.png"
    assert cli.main(["show", str(lru_file), "--augment", "-o", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_without_graphviz_the_dot_file_is_written(lru_file, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(show, "dot_binary", lambda: None)
    out = tmp_path / "fig.svg"
    assert cli.main(["show", str(lru_file), "--augment", "-o", str(out)]) == 0
    msg = capsys.readouterr().out
    assert "Graphviz" in msg and "apt-get install graphviz" in msg
    assert not out.exists() and out.with_suffix(".dot").read_text().startswith("digraph")


def test_cli_messages(lru_file, tmp_path, capsys):
    out = tmp_path / "plain.dot"
    assert cli.main(["show", str(lru_file), "-o", str(out)]) == 0
    assert "pass --augment" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="alternatives ops: #0: 0=original, 1=distribute_left"):
        cli.main(["show", str(lru_file), "--augment", "--patterns", "distribute_left", "--decisions", "5",
                  "-o", str(out)])
    assert cli.main(["show", str(tmp_path / "missing.mlir")]) == 2
    assert "no such file" in capsys.readouterr().err
