"""augment stays linear where patterns pair ops far apart (a stack whose layers share their
weights: issue 30), and its cycle check still rejects every match that would close a cycle.
Work is counted (Python calls), not timed."""

import functools
import itertools
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shlo_env as se
from shlo_env.rewrite import driver
from shlo_env.ir.program import ir_scope
from shlo_env.patterns import match_cache
from shlo_env.patterns.base import resolve
from shlo_env.testing import check_rewrites
from test_match_cache import _count_calls


def _ir_scale():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    try:
        import ir_scale
    finally:
        sys.path.pop(0)
    return ir_scale


def _shared_weights(layers):
    fn, args = _ir_scale().make_shared_weights(layers, seq=8, dim=16)
    return se.lower(fn, *args)


def f32(*shape):
    return np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)


@pytest.mark.slow
def test_augment_work_grows_linearly_when_layers_share_weights():
    """merge_dots_sharing_rhs pairs each layer's product with the last layer's (the first user
    of the shared weight): every such match closes a cycle. Rejecting each by walking the ops
    between its roots made augment quadratic (about 2.7 here); linear work doubles (about 2)."""
    patterns = se.patterns.all_patterns()
    small, large = _shared_weights(20), _shared_weights(40)
    assert 2 * small.num_ops() - 10 < large.num_ops() < 2 * small.num_ops() + 10
    stats = driver.AugmentStats()
    calls_small = _count_calls(lambda: se.augment(small, patterns, stats=stats))
    assert stats.matches["merge_dots_sharing_rhs"] == 2 * 19
    assert stats.cycles["merge_dots_sharing_rhs"] == 2 * 19  # each closes a cycle: rejected
    calls_large = _count_calls(lambda: se.augment(large, patterns))
    assert calls_large / calls_small < 2.4


def test_matches_known_to_close_a_cycle_are_rejected_without_a_walk(monkeypatch):
    walks = []
    forward_cone = driver._forward_cone

    def counted(block, early, stop, order):
        cone = forward_cone(block, early, stop, order)
        walks.append(len(cone))
        return cone

    monkeypatch.setattr(driver, "_forward_cone", counted)
    stats = driver.AugmentStats()
    aug = se.augment(_shared_weights(6), ["merge_dots_sharing_rhs"], stats=stats)
    assert stats.cycles["merge_dots_sharing_rhs"] == stats.matches["merge_dots_sharing_rhs"] == 2 * 5
    assert walks == []
    assert not se.list_alternatives(aug)
    assert aug.module.operation.verify()


def _same_without_the_index(program, patterns, monkeypatch):
    """augment with and without the reachability index: the same module and the same counts."""
    with_index = driver.AugmentStats()
    a = se.augment(program, patterns, stats=with_index)
    monkeypatch.setattr(driver, "_cyclic_groups", lambda index, groups: set())
    walked = driver.AugmentStats()
    b = se.augment(program, patterns, stats=walked)
    monkeypatch.undo()
    assert a.text() == b.text()
    assert (with_index.recorded, with_index.cycles, with_index.dropped) == (walked.recorded, walked.cycles, walked.dropped)
    assert a.module.operation.verify()
    return with_index


@pytest.mark.parametrize("layers", [3, 8])
def test_the_index_rejects_exactly_what_the_walk_rejects(layers, monkeypatch):
    stats = _same_without_the_index(_shared_weights(layers), se.patterns.all_patterns(), monkeypatch)
    assert sum(stats.cycles.values()) > 0 and sum(stats.recorded.values()) > 0


def test_a_cycle_made_by_an_earlier_merge_is_still_rejected(monkeypatch):
    """Neither merge closes a cycle in the program as written; recording the first (d3 with d4)
    makes w2 read d1 through the new op, so the second (d1 with d2) would. The index, made on
    the unchanged program, cannot know: `_place` walks and rejects it."""
    def f(x, y, w1, v1):
        d3 = y @ v1
        w2 = jnp.tanh(d3)
        d1 = x @ w1
        v2 = jnp.tanh(d1)
        return x @ w2, y @ v2

    p = se.lower(f, f32(4, 4), f32(4, 4), f32(4, 4), f32(4, 4))
    with ir_scope():
        groups, cyclic = driver._collect_matches(p, resolve(["merge_dots_sharing_lhs"]), driver.AugmentStats())
    assert len(groups) == 2
    assert cyclic == set()
    stats = _same_without_the_index(p, ["merge_dots_sharing_lhs"], monkeypatch)
    assert stats.recorded["merge_dots_sharing_lhs"] == 1
    assert stats.cycles["merge_dots_sharing_lhs"] == 1
    assert check_rewrites(p, ["merge_dots_sharing_lhs"]).ok


def _reads(index, b, target, source):
    """Does op `target` read op `source` (both of block b), directly or through ops of b? A
    plain walk back from `target`."""
    todo, seen = [target], {target}
    while todo:
        i = todo.pop()
        for v in index._inputs(i):
            o = index.owner[v]
            if o >= 0 and index.block[o] == b and o not in seen:
                if o == source:
                    return True
                seen.add(o)
                todo.append(o)
    return False


def _looped(x, w):
    def body(i, c):
        return jnp.tanh(c @ w) + c * 2.0 + x  # captures x and w from outside the loop
    y = jnp.exp(x)
    return jax.lax.fori_loop(0, 3, body, y) + y * jnp.exp(x)


@pytest.mark.parametrize("program", [functools.partial(_shared_weights, 2),
                                     lambda: se.lower(_looped, f32(4, 8), np.eye(8, dtype=np.float32))],
                         ids=["stack", "loop"])
def test_reaching_agrees_with_a_walk(program):
    program = program()
    rng = np.random.default_rng(0)
    with ir_scope(), match_cache.indexed(program.body) as index:
        ops = index._block_ops(0)
        queries = [(sorted(rng.choice(ops, size=2, replace=False).tolist()),
                    sorted(rng.choice(ops, size=3, replace=False).tolist())) for _ in range(200)]
        expected = {q for q, (sources, targets) in enumerate(queries)
                    if any(t != s and _reads(index, 0, t, s) for s, t in itertools.product(sources, targets))}
        assert index.reaching(queries) == expected
        assert 0 < len(expected) < len(queries)
