"""Every registered pattern has a targeted property test in tests/property/test_patterns_<family>.py."""

import importlib

from shlo_env.patterns import Numerics, all_patterns, default_patterns

FAMILIES = ["algebraic", "shape", "dot", "slicing", "reduce", "convert", "select", "loops", "fusion",
            "layout", "batching", "scans", "small_ops", "conv", "pad_sums"]


def _tested():
    tested = {}
    for family in FAMILIES:
        mod = importlib.import_module(f"test_patterns_{family}")
        for cls in mod.CASES:
            tested[cls.name] = family
    return tested


def test_every_pattern_has_a_targeted_test():
    tested = _tested()
    missing = [p.name for p in all_patterns() if p.name not in tested]
    assert not missing, f"patterns without a targeted property test: {missing}"


def test_each_test_lives_with_its_family():
    tested = _tested()
    for p in all_patterns():
        family = type(p).__module__.rsplit(".", 1)[-1]
        if family in FAMILIES:
            assert tested[p.name] == family, f"{p.name} is tested in test_patterns_{tested[p.name]}.py"


def test_library_size_and_tiers():
    patterns = all_patterns()
    assert len(patterns) >= 50
    families = {type(p).__module__.rsplit(".", 1)[-1] for p in patterns}
    assert set(FAMILIES) <= families
    for p in patterns:
        assert isinstance(p.numerics, Numerics) and p.roots(), p
        assert type(p).__doc__ and "->" in type(p).__doc__, f"{p.name}: docstring must say before -> after"
    approx = {p.name for p in patterns if p.numerics == Numerics.APPROX}
    assert approx, "at least one opt-in APPROX pattern is expected (x / c -> x * (1/c))"
    assert not approx & {p.name for p in default_patterns()}


def test_sweep_first_patterns_are_exact():
    """A `sweep_first` rewrite is taken at every site before the search times anything else
    (`shlo_env.search.first_sweep`): it must never change a value."""
    first = [p for p in all_patterns() if p.sweep_first]
    assert "sum_of_disjoint_pads" in {p.name for p in first}
    assert all(p.numerics is Numerics.EXACT for p in first), [p.name for p in first if p.numerics is not Numerics.EXACT]
