import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shlo_env import cli
import shlo_env
from shlo_env.measure.kernel_profile import categorize, parse_hlo, profile


def _mlp(x, w):
    return jnp.tanh(x @ w).sum(0)


def test_profile_maps_kernels_to_stablehlo_ops():
    x = np.ones((128, 128), np.float32)
    prof = shlo_env.profile(_mlp, x, x, runs=3)
    assert prof.kernels and prof.platform == jax.default_backend()
    assert sum(k.share for k in prof.kernels) == pytest.approx(1.0)
    assert all(k.time_s > 0 for k in prof.kernels)
    dots = [k for k in prof.kernels if k.category == "dot"]
    assert dots and any("stablehlo.dot_general" in k.op_kinds for k in dots)
    data = json.loads(prof.to_json())
    assert data["kernels"][0]["name"] == prof.kernels[0].name
    assert "dot" in prof.table()


def test_kernels_inside_a_loop_are_flagged_and_counted_per_iteration():
    def f(x, w):
        return jax.lax.fori_loop(0, 7, lambda i, h: jnp.tanh(h @ w), x)

    x = np.ones((64, 64), np.float32)
    prof = profile(f, x, x, runs=2, patterns=())
    inner = [k for k in prof.kernels if k.in_loop and k.category == "dot"]
    assert inner and inner[0].calls == pytest.approx(7)
    assert prof.by_category()["in loops"] > 0


def test_parse_hlo_reads_tuple_types_and_called_computations():
    text = """HloModule m
%body (p: (s32[], f32[2])) -> (s32[], f32[2]) {
  %p = (s32[], f32[2]{0}) parameter(0)
  ROOT %t = (s32[], f32[2]{0}) tuple(%a, %b), metadata={op_name="shlo_env#3"}
}
ENTRY %main (x: f32[2]) -> f32[2] {
  %w = (s32[], /*index=1*/f32[2]{0}) while(%init), condition=%cond, body=%body, metadata={op_name="shlo_env#1"}
}
"""
    info = parse_hlo(text)
    assert info.entry == "main"
    assert info.instructions["main"][0][:2] == ("w", "while")
    assert "body" in info.instructions["main"][0][2] and info.instructions["main"][0][3] == 1
    assert info.instructions["body"][1][1] == "tuple"


def test_categorize_prefers_the_heaviest_structure():
    assert categorize("fusion", ["stablehlo.dot_general", "stablehlo.add"], []) == "dot"
    assert categorize("fusion", ["stablehlo.transpose", "stablehlo.reshape"], []) == "copy/transpose"
    assert categorize("fusion", ["stablehlo.add", "stablehlo.tanh"], []) == "elementwise"
    assert categorize("while", ["stablehlo.while"], []) == "loop"
    assert categorize("fusion", [], ["broadcast", "parameter"]) == "copy/transpose"


def test_cli_profile_corpus_uri(capsys):
    assert cli.main(["profile", "corpus/linen_mlp_train", "--runs", "2", "--top", "5"]) == 0
    out = capsys.readouterr().out
    assert "linen_mlp_train on" in out and "by category" in out


def test_cli_profile_bad_uri_is_a_clear_error(capsys):
    assert cli.main(["profile", "corpus/no_such_program"]) == 2
    assert "no program" in capsys.readouterr().out
