"""Modes, the numerics cap, excluded patterns, and options checked when built (issue 49 item 4)."""

import argparse

import pytest

from shlo_env.measure.numerics import Numerics
from shlo_env.patterns import all_patterns, default_patterns
from shlo_env.search import options as search_options
from shlo_env.search.options import MODES, SearchOptions, options_from, preset


def test_each_mode_sets_its_fields_and_the_fields_given_win():
    assert set(MODES) == {"quick", "default", "max"}
    quick, default, most = preset("quick"), preset("default"), preset("max")
    assert quick.budget_s < default.budget_s < most.budget_s
    assert default == SearchOptions()  # the dataclass's defaults are the "default" mode
    assert most.passes is True and most.xla_options is True
    assert preset("max", budget_s=30).budget_s == 30 and preset("max", budget_s=30).passes is True
    # a mode over a front end's base keeps the base's other fields (jit's xla_options=False)
    jit_like = preset("quick", xla_options=False)
    assert options_from(jit_like, {"mode": "default"}, where="x").xla_options is False
    assert options_from(jit_like, {"mode": "default"}, where="x").budget_s == 60.0
    with pytest.raises(ValueError, match="unknown mode 'fast'; choose from quick, default, max"):
        preset("fast")


def test_front_end_defaults_are_named_modes():
    import shlo_env as se
    from shlo_env.api.optimize import DEFAULTS

    assert DEFAULTS == preset("default")
    f = se.jit(lambda x: x * 2)
    assert f.options.budget_s == MODES["quick"]["budget_s"] and f.options.xla_options is False
    assert se.jit(lambda x: x, mode="max").options.budget_s == MODES["max"]["budget_s"]


def test_a_wrong_value_fails_when_the_options_are_built():
    with pytest.raises(ValueError, match=r"unknown strategy 'bema'; choose from auto, .*beam"):
        SearchOptions(strategy="bema")
    with pytest.raises(ValueError, match="unknown strategy"):
        SearchOptions().with_(strategy="nope")
    with pytest.raises(ValueError, match="budget_s=0"):
        SearchOptions(budget_s=0)
    with pytest.raises(ValueError, match="numerics='fast'"):
        SearchOptions(numerics="fast")
    with pytest.raises(ValueError, match=r"no pattern named 'dto' \(did you mean 'dot'\?\)"):
        SearchOptions(exclude_patterns=["dto"])
    with pytest.raises(ValueError, match="no pattern named 'nope'"):
        SearchOptions(patterns=["nope"])
    with pytest.raises(ValueError, match="not one string"):
        SearchOptions(patterns="mul_one")
    with pytest.raises(ValueError, match="max_steps"):
        SearchOptions(max_steps=-1)
    import shlo_env as se

    with pytest.raises(ValueError, match="unknown strategy"):
        se.jit(lambda x: x, strategy="nope")  # at decoration, not at the first call


def test_the_numerics_cap_and_exclusions_shape_the_pattern_set():
    exact = SearchOptions(numerics="exact").effective()
    assert exact.patterns and all(p.numerics is Numerics.EXACT for p in exact.patterns)
    assert exact.passes is False and exact.xla_options is False  # XLA actions may reorder float math
    reassociate = SearchOptions(numerics="reassociate").effective()
    assert {p.name for p in reassociate.patterns} == {p.name for p in default_patterns()}
    approx = SearchOptions(numerics="approx").effective()
    assert len(approx.patterns) == len(all_patterns()) > len(reassociate.patterns)
    no_dots = SearchOptions(exclude_patterns=["dot", "mul_one"]).effective()
    names = {p.name for p in no_dots.patterns}
    assert "reduce_through_dot" not in names and "mul_one" not in names and "add_zero" in names
    assert SearchOptions().effective() == SearchOptions()  # nothing to apply: the same options
    again = no_dots.effective()
    assert [p.name for p in again.patterns] == [p.name for p in no_dots.patterns]  # idempotent
    # xla_options="approx" needs numerics="approx" once a cap is given
    assert SearchOptions(numerics="reassociate", xla_options="approx").effective().xla_options is True
    assert SearchOptions(numerics="approx", xla_options="approx").effective().xla_options == "approx"


def test_the_file_cli_takes_a_mode_under_its_flags():
    from shlo_env.api import optimize_file

    parser = argparse.ArgumentParser()
    optimize_file.add_arguments(parser)

    def opts(*argv):
        args = parser.parse_args(["m.mlir", "-o", "-", *argv])
        return search_options.from_args(args, args._search_options)

    assert opts() == SearchOptions()
    assert opts("--mode", "max") == preset("max")
    assert opts("--mode", "max", "--budget", "60") == preset("max", budget_s=60.0)  # a flag given wins
    assert opts("--numerics", "exact", "--exclude-patterns", "dot,loops").exclude_patterns == ["dot", "loops"]
