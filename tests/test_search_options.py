"""`SearchOptions` declared once (issue 29): the cache key is derived from the fields marked as
changing the result, and `optimize`, `jit`, the file CLI and `bench` take the same options."""

import argparse
import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest

import shlo_env as se
from shlo_env.api import cache as search_cache
from shlo_env.bench import SweepOptions
from shlo_env.bench.options import SEARCH_FIELDS
from shlo_env.bench import cli as bench_cli
from shlo_env.measure.noise_thresholds import NoiseModel
from shlo_env.api.optimize import DEFAULTS
from shlo_env.search import options as search_options
from shlo_env.search.options import SearchOptions, declaration, option_fields, options_from, result_fields
from shlo_env.measure.timing_policy import TimingPolicy

# A value other than the default for every field. A new field fails
# `test_every_field_has_a_sample` until it is added here, and its declaration (changes the
# result or not) is then checked against the cache key by the tests below.
OTHER = {
    "patterns": ["reduce_through_dot"],
    "numerics": "exact",
    "exclude_patterns": ["reduce_through_dot"],
    "strategy": "beam",
    "strategy_options": {"alpha": 1.0},
    "budget_s": 30.0,
    "max_steps": 3,
    "num_random": 2,
    "seed": 1,
    "min_gain": 0.05,
    "threshold": 0.9,
    "timeout_s": 5.0,
    "passes": ["algsimp"],
    "xla_options": ["xla_cpu_use_thunk_runtime=false"],
    "confirm": False,
    "final_timing": False,
    "cost": False,
    "timing": TimingPolicy(runs=5),
    "name": "another name",
}


def colsum(X, W):
    return jnp.sum(X @ W, axis=0)


@pytest.fixture(scope="module")
def program():
    return se.lower(colsum, np.ones((8, 4), np.float32), np.ones((4, 4), np.float32))


def test_every_field_has_a_sample_and_a_declaration():
    names = [f.name for f in option_fields()]
    assert sorted(OTHER) == sorted(names), "add the new option to OTHER (a value other than its default)"
    for f in option_fields():
        a = declaration(f)
        assert a.doc and isinstance(a.result, bool), f.name
        assert OTHER[f.name] != f.default, f.name


@pytest.mark.parametrize("name", sorted(OTHER))
def test_the_key_changes_exactly_with_the_result_changing_fields(program, name):
    """A result-changing field missing from the key (a stale cache hit) fails here; so does a
    field that does not change the result but is in the key (needless searches)."""
    base = SearchOptions()
    key = search_cache.search_key(program, base)
    other = search_cache.search_key(program, base.with_(**{name: OTHER[name]}))
    if name in result_fields():
        assert key != other, f"{name} changes the result but not the cache key"
        assert key["options"][name] != other["options"][name]
    else:
        assert key == other, f"{name} does not change the result but changes the cache key"


def test_the_key_is_the_result_fields_and_is_stable(program):
    key = search_cache.search_key(program, SearchOptions())
    assert set(key["options"]) == set(result_fields())
    assert {"budget_s", "strategy", "patterns", "passes", "xla_options", "seed"} <= set(result_fields())
    assert not {"timeout_s", "name", "final_timing", "cost"} & set(result_fields())
    model = NoiseModel(0.97, 1.03, programs=((1e-3, (0.99, 1.01)),))
    same = NoiseModel(0.97, 1.03, programs=((1e-3, (0.99, 1.01)),))
    assert search_cache.search_key(program, SearchOptions(threshold=model)) == \
        search_cache.search_key(program, SearchOptions(threshold=same))
    assert search_cache.search_key(program, SearchOptions(threshold=model)) != key


def test_unknown_options_are_a_clear_type_error():
    with pytest.raises(TypeError, match=r"optimize\(\) got unknown search option 'budgte_s' \(did you mean 'budget_s'\?\)"):
        se.optimize(colsum, np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), budgte_s=3)
    with pytest.raises(TypeError, match=r"shlo_env.jit\(\) got unknown search option 'stratgy'"):
        se.jit(colsum, stratgy="beam")
    with pytest.raises(TypeError, match="unknown search option"):
        se.jit(stratgy="beam")
    with pytest.raises(TypeError, match="unknown search option"):
        SearchOptions().with_(nope=1)
    assert options_from(None, {"budget_s": 5.0}, where="x") == SearchOptions(budget_s=5.0)


def test_optimize_and_jit_take_the_options_object(program):
    f = se.jit(colsum, options=SearchOptions(budget_s=7.0, seed=2), seed=3)
    assert f.options == SearchOptions(budget_s=7.0, seed=3)
    # the "quick" mode, without XLA options (a jit function nests inside other jits); optimize's is "default"
    assert se.jit(colsum).options == search_options.preset("quick", xla_options=False)
    assert DEFAULTS == search_options.preset("default") == SearchOptions()


def _parser_with(add) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add(p)
    return p


def _flags(parser: argparse.ArgumentParser) -> dict[str, str]:
    return {a.dest: a.option_strings[0] for a in parser._actions if a.option_strings}


def test_the_file_cli_has_a_flag_for_every_option_with_one():
    from shlo_env.api import optimize_file

    parser = _parser_with(optimize_file.add_arguments)
    flags = _flags(parser)
    declared = {f.name: declaration(f).flag for f in option_fields() if declaration(f).flag}
    assert {k: flags.get(k) for k in declared} == declared
    assert "--xla-options" in flags.values() and "--no-cache" in flags.values()
    args = parser.parse_args(["m.mlir", "-o", "-", "--budget", "12", "--xla-options", "--patterns", "mul_one,add_zero",
                              "--strategy-options", '{"alpha": 0.5}', "--no-confirm", "--threshold", "0.9"])
    opts = search_options.from_args(args, args._search_options)
    assert opts == SearchOptions(budget_s=12.0, xla_options=True, patterns=["mul_one", "add_zero"],
                                 strategy_options={"alpha": 0.5}, confirm=False, threshold=0.9)
    defaults = search_options.from_args(parser.parse_args(["m.mlir", "-o", "-"]), args._search_options)
    assert defaults == SearchOptions()


def test_bench_takes_the_same_options():
    """`SweepOptions`' search fields are `SearchOptions` fields of the same type, its defaults
    are theirs (but the quick budget), and `shlo-env bench`'s search flags are generated."""
    search = {f.name: f for f in option_fields()}
    sweep_search = [f for f in dataclasses.fields(SweepOptions) if f.name in search]
    assert {f.name for f in sweep_search} == set(SEARCH_FIELDS)
    narrower = {"patterns"}  # names only: a sweep sends its options to worker processes and Ray actors
    for f in sweep_search:
        if f.name not in narrower:
            assert str(f.type).replace(" ", "") == str(search[f.name].type).replace(" ", ""), f.name
        if f.name != "budget_s":
            assert f.default == search[f.name].default, f.name
    parser = _parser_with(bench_cli.add_arguments)
    flags = _flags(parser)
    for name in SEARCH_FIELDS:
        assert flags[name] == declaration(search[name]).flag
    args = parser.parse_args(["--budget", "3", "--xla-options", "approx", "--patterns", "reduce_through_dot",
                              "--min-gain", "0.1"])
    o = bench_cli.options_from_args(args)
    assert (o.budget_s, o.xla_options, o.patterns, o.min_gain) == (3.0, "approx", ["reduce_through_dot"], 0.1)
    assert o.search_options().with_(strategy="beam").budget_s == 3.0
    assert bench_cli.options_from_args(parser.parse_args([])).budget_s == SweepOptions().budget_s


@pytest.mark.parametrize("name", sorted(OTHER))
def test_the_bench_key_is_the_search_key_without_the_noise_model(name):
    """A results database's measurement key (`bench.measurement_config`) is derived from the
    same declarations: it changes exactly with the result-changing fields. The noise model a
    sweep passes as `threshold` is recorded per row (its profile id), not keyed."""
    from shlo_env.bench import measurement_config

    base = SearchOptions()
    key = measurement_config(base)
    other = measurement_config(base.with_(**{name: OTHER[name]}))
    if name in result_fields() and name != "threshold":
        assert key != other, f"{name} changes the result but not the bench's measurement key"
    else:
        assert key == other, name
    model = NoiseModel(0.97, 1.03, programs=((1e-3, (0.99, 1.01)),))
    assert measurement_config(base.with_(threshold=model)) == key
