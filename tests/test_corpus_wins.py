"""The wins families on the corpus programs they target: each pattern matches there, its
rewrite runs and agrees with the original, and the search's site heat ranks its sites hot.

- `reduce_window_prefix_to_scan` (patterns/scans.py): corpus/attn_linear_causal's two
  `jnp.cumsum`s, lowered as prefix `reduce_window`s.
- `small_dot_to_reduce` (patterns/small_ops.py): the per-step 8x8 / 4x8 products of
  corpus/kalman_filter_scan and the 64x4 policy of corpus/cartpole_scan, inside their loops.
- `small_reduce_to_elementwise` (patterns/small_ops.py): the sums over 2 or 3 coordinates of
  the pairwise squared distances in corpus/gp_posterior and corpus/nbody_leapfrog.
"""

import numpy as np

from shlo_env import corpus
from shlo_env.rewrite import driver
from shlo_env.execute import runtime
from shlo_env.ir.ops import walk
from shlo_env.patterns import all_patterns
from shlo_env.patterns.small_ops import MAX_MACS
from shlo_env.search import site_heat

SCAN, SMALL_DOT, SMALL_REDUCE = "reduce_window_prefix_to_scan", "small_dot_to_reduce", "small_reduce_to_elementwise"


def _sites(name: str, pattern: str):
    """(augmented program, its alternatives, the indices where `pattern` offers a choice). Keep
    the program alive while using the alternatives: they point into it."""
    aug = driver.augment(corpus.load(f"corpus/{name}"), [pattern])
    alts = driver.list_alternatives(aug)
    return aug, alts, [i for i, a in enumerate(alts) if a.num_choices > 1]


def _apply_all_and_compare(name: str, pattern: str, rtol: float, atol: float):
    """The original and the program with every site of `pattern` rewritten, after checking
    both run on XLA and agree on random inputs."""
    aug, alts, sites = _sites(name, pattern)
    original = driver.strip(aug)
    rewritten = driver.apply(aug, [1 if i in sites else 0 for i in range(len(alts))])
    inputs = runtime.random_inputs(original.in_specs, 0)
    want = runtime.execute(runtime.compile(original), inputs)
    got = runtime.execute(runtime.compile(rewritten), inputs)
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return original.text(), rewritten.text()


def _hot_ranks(name: str, pattern: str) -> list[int]:
    """Where `pattern`'s sites come in the hottest-first order of all patterns' sites."""
    aug = driver.augment(corpus.load(f"corpus/{name}"), all_patterns())
    alts = driver.list_alternatives(aug)
    order = site_heat.hot_order(site_heat.site_weights(alts))
    return [rank for rank, i in enumerate(order) if pattern in alts[i].labels]


# --- reduce_window_prefix_to_scan --------------------------------------------------------------

def test_prefix_scan_replaces_both_cumsums_and_agrees():
    assert len(_sites("attn_linear_causal", SCAN)[2]) == 2
    before, after = _apply_all_and_compare("attn_linear_causal", SCAN, rtol=1e-4, atol=1e-5)
    assert "reduce_window" in before and "reduce_window" not in after


def test_cumsum_site_is_the_hottest():
    assert _hot_ranks("attn_linear_causal", SCAN)[0] == 0


def test_a_prefix_reduce_window_costs_its_window_per_element():
    program = corpus.load("corpus/attn_linear_causal")
    cumsum = next(o for o in walk(program.module.operation) if o.name == "stablehlo.reduce_window"
                  and len(o.results[0].type.shape) == 4)
    add = cumsum.operands[0].owner.operation  # elementwise, the same shape
    assert add.name == "stablehlo.add"
    assert site_heat.op_time(cumsum) > 5 * site_heat.op_time(add)  # 1x before windows counted


# --- small_dot_to_reduce -----------------------------------------------------------------------

def test_small_ops_match_every_product_of_the_kalman_step():
    program = corpus.load("corpus/kalman_filter_scan")
    in_loop = [o for o in walk(program.module.operation)
               if o.name == "stablehlo.dot_general" and site_heat.multiplier(o) == 100]
    assert len(_sites("kalman_filter_scan", SMALL_DOT)[2]) == len(in_loop) == 11
    assert MAX_MACS >= 8 * 8 * 8


def test_cartpole_policy_dot_rewrite_agrees():
    assert len(_sites("cartpole_scan", SMALL_DOT)[2]) == 1
    before, after = _apply_all_and_compare("cartpole_scan", SMALL_DOT, rtol=1e-5, atol=1e-6)
    assert after.count("stablehlo.dot_general") == before.count("stablehlo.dot_general") - 1


def test_the_cartpole_policy_dot_is_among_the_hottest_sites():
    """A dot is a library call of its own: 200 calls of a 64x4 product weigh more than their flops."""
    assert _hot_ranks("cartpole_scan", SMALL_DOT)[0] < 3


# --- small_reduce_to_elementwise ---------------------------------------------------------------

def test_pairwise_distance_sums_become_elementwise_and_agree():
    assert len(_sites("gp_posterior", SMALL_REDUCE)[2]) == 2  # 256x256x2 and 256x128x2
    before, after = _apply_all_and_compare("gp_posterior", SMALL_REDUCE, rtol=1e-5, atol=1e-6)
    assert after.count("stablehlo.reduce(") < before.count("stablehlo.reduce(")


def test_nbody_distance_sums_are_matched_inside_the_loop():
    _, alts, sites = _sites("nbody_leapfrog", SMALL_REDUCE)
    assert len(sites) == 2
    assert all(site_heat.multiplier(alts[i].op) > 1 for i in sites)
    assert min(_hot_ranks("nbody_leapfrog", SMALL_REDUCE)) < 8  # after the loop's own sites
