"""The prefix-scan rewrite on the corpus program it targets (corpus/attn_linear_causal: two
`jnp.cumsum`s lowered as prefix `reduce_window`s), and the search ranks its sites hot."""

import numpy as np

from shlo_env import corpus, driver, runtime
from shlo_env.ir import walk
from shlo_env.patterns import all_patterns
from shlo_env.search import site_heat

PATTERN = "reduce_window_prefix_to_scan"


def _augmented():
    return driver.augment(corpus.load("corpus/attn_linear_causal"), [PATTERN])


def test_matches_both_cumsums_and_the_rewrite_agrees_with_the_original():
    aug = _augmented()
    alts = driver.list_alternatives(aug)
    assert sum(a.num_choices > 1 for a in alts) == 2
    original = driver.strip(aug)
    rewritten = driver.apply(aug, [1 if a.num_choices > 1 else 0 for a in alts])
    assert "reduce_window" in original.text() and "reduce_window" not in rewritten.text()
    inputs = runtime.random_inputs(original.in_specs, 0)
    want = runtime.execute(runtime.compile(original), inputs)
    got = runtime.execute(runtime.compile(rewritten), inputs)
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_cumsum_sites_are_the_hottest():
    aug = driver.augment(corpus.load("corpus/attn_linear_causal"), all_patterns())
    alts = driver.list_alternatives(aug)
    weights = site_heat.site_weights(alts)
    hottest = alts[site_heat.hot_order(weights)[0]]
    assert PATTERN in hottest.labels


def test_a_prefix_reduce_window_costs_its_window_per_element():
    program = corpus.load("corpus/attn_linear_causal")
    cumsum = next(o for o in walk(program.module.operation) if o.name == "stablehlo.reduce_window"
                  and len(o.results[0].type.shape) == 4)
    add = cumsum.operands[0].owner.operation  # elementwise, the same shape
    assert add.name == "stablehlo.add"
    assert site_heat.op_time(cumsum) > 5 * site_heat.op_time(add)  # 1x before windows counted
