"""strategy="learned": the greedy loop with the learned rankers; what each setting times (modelled timings)."""

import math

import numpy as np

from test_search import make_ctx, multi_program  # noqa: F401  (multi_program is a fixture)

from shlo_env.learn.model import LearnedModel
from shlo_env.search import sources
from shlo_env.search.learned import Learned
from shlo_env.search.rankers import patterns_taken, step_patterns, touches_blind_ops


class Slower(LearnedModel):
    """A graph network that predicts every candidate 20 % slower than its state."""

    info: dict = {}

    def ratios(self, g, vectors, corrected=True):
        return np.full(len(vectors) - 1, 1.2)


class Pessimist(Learned):
    """The learned strategy with a graph network that predicts every candidate 20 % slower
    (and no executable model: these tests are about the graph network's band)."""

    def __init__(self, **options):
        super().__init__(compile_k=0, **options)
        self.ranker._model = Slower()  # type: ignore[attr-defined]


def ranked(lm, ctx, exp):
    """The children of `exp` and the indices the acquisition rule would time, in order."""
    children = lm._children(ctx, exp)
    return children, lm.to_time(ctx, lm.predict(ctx, exp, children))


def test_probes_time_pick_first_and_the_hottest_single_when_the_model_is_unsure(multi_program):  # noqa: F811
    ctx, worker = make_ctx(multi_program, max_steps=1)
    lm = Pessimist(unsure=0.5, probes=2)  # 20 % slower is within the model's error: probe
    exp = ctx.expand(ctx.root)
    children, picks = ranked(lm, ctx, exp)
    # pick-first and the hottest single rewrite first (the probes), then the rest
    assert [children[i][0] for i in picks[:2]] == [[1, 1, 1], next(ctx.singles(exp))]
    best = lm.search(ctx)
    assert ctx.evaluator.stats.timed <= 2
    assert best.ratio < 0.97  # pick-first takes all three flop-cutting rewrites (modelled time)


def test_no_probe_beyond_the_models_error(multi_program):  # noqa: F811
    ctx, worker = make_ctx(multi_program, max_steps=1)
    lm = Pessimist(unsure=0.1)  # 20 % slower is beyond the error: trust the model, time nothing
    best = lm.search(ctx)
    assert ctx.evaluator.stats.timed == 0 and lm.info["looks"] == 0
    assert best.ratio == 1.0


def test_probes_come_first_among_the_candidates(multi_program):  # noqa: F811
    ctx, _ = make_ctx(multi_program)
    exp = ctx.expand(ctx.root)
    lm = Learned(probes=2)
    vecs = list(lm.candidates(exp, ctx))
    assert vecs[:2] == [[1, 1, 1], next(ctx.singles(exp))] and vecs[0] == [1, 1, 1]
    assert len({tuple(v) for v in vecs}) == len(vecs) and all(any(v) for v in vecs)


def test_probes_alternate_singles_with_sweeps(multi_program):  # noqa: F811
    """A rewrite that pays only when taken at all its sites (a sweep) is probed like beam
    search tries it: after pick-first and the hottest single, even when the model calls it slower."""
    ctx, _ = make_ctx(multi_program, max_steps=1)
    exp = ctx.expand(ctx.root)
    sweep = [0, 1, 1]  # stands in for one rewrite taken at its two sites
    ctx.sweeps = lambda e, hot_first=True: iter([sweep])  # type: ignore[method-assign]
    singles = list(ctx.singles(exp))
    lm = Pessimist(unsure=0.5, probes=4)
    assert list(lm.candidates(exp, ctx))[:4] == [[1, 1, 1], singles[0], sweep, singles[1]]
    children, picks = ranked(lm, ctx, exp)
    assert picks[:4] == [0, 1, 2, 3]  # every probe worth timing: the model's 20 % is within its error


def test_loop_rewrites_are_probed_whatever_the_model_predicts():
    """The model reads the static graph (a loop body counted once), so a rewrite of a loop
    gets unbounded uncertainty and is timed even when the model calls it far slower."""
    import jax
    import numpy as np

    import shlo_env as se
    from shlo_env.learn import observe

    def loop(x):
        return jax.lax.fori_loop(0, 8, lambda i, c: c * 0.5 + 1.0, x)

    program = se.lower(loop, np.ones((64,), np.float32))
    ctx, _ = make_ctx(program, max_steps=1, patterns=["while_unroll2"])
    exp = ctx.expand(ctx.root)
    lm = Pessimist(unsure=0.1, probes=2)  # 20 % slower is beyond the error: only blind spots are timed
    lm.search(ctx)
    assert ctx.evaluator.stats.timed == 1  # the unroll (pick-first is the same vector)
    g = observe.graph(exp.augmented, uids=False)
    assert touches_blind_ops(g, [1] * exp.num_rewrites) and not touches_blind_ops(g, [0] * exp.num_rewrites)


def test_a_rewrite_whose_original_root_is_a_window_reduction_is_probed_whatever_the_model_predicts():
    """A matched root stays in the main body (region 0 yields it), so the window reduction a
    prefix-scan rewrite replaces is outside its alternatives op: it still counts as blind
    (inst-10-20/attn_linear_causal.005 went untimed, 1.000 against beam's 0.235)."""
    import jax.numpy as jnp

    import shlo_env as se
    from shlo_env.learn import observe

    program = se.lower(lambda x: jnp.cumsum(x * 2.0, axis=1), np.ones((4, 256), np.float32))
    ctx, _ = make_ctx(program, max_steps=1, patterns=["reduce_window_prefix_to_scan"])
    exp = ctx.expand(ctx.root)
    assert exp.num_rewrites == 1
    g = observe.graph(exp.augmented, uids=False)
    window = np.nonzero(g.node_opcode == observe.op_id("stablehlo.reduce_window"))[0]
    assert len(window) and (g.node_alt[window] == -1).all()  # the root is outside the alternatives op
    assert touches_blind_ops(g, [1]) and not touches_blind_ops(g, [0])
    lm = Pessimist(unsure=0.1, probes=2)  # 20 % slower is beyond the error: only blind spots are timed
    lm.search(ctx)
    assert ctx.evaluator.stats.timed == 1


def test_blind_rewrites_are_timed_first_and_never_compiled_for_the_models(multi_program):  # noqa: F811
    """Replaces `blind_start`: a child with unbounded uncertainty has the lowest optimistic
    bound, so the acquisition rule times it first, and the cascade does not compile it (a slow
    program's compiles could use up a small budget before it is timed; corpus/attn_linear_causal
    at 8 s)."""
    import jax.numpy as jnp

    import shlo_env as se

    program = se.lower(lambda x: jnp.cumsum(x * 2.0, axis=1), np.ones((4, 256), np.float32))
    ctx, _ = make_ctx(program, max_steps=1, patterns=["reduce_window_prefix_to_scan"])
    lm = Learned(probes=2, compile_k=1)
    lm.ranker.then._model = Chain(1.5)  # type: ignore[attr-defined]
    lm.search(ctx)
    assert ctx.evaluator.stats.timed == 1  # timed once
    assert ctx.evaluator.stats.featured == 0 and lm.info["compiled"] == 0  # nothing compiled for the models
    ctx, _ = make_ctx(multi_program, max_steps=1)  # no loop, no window: the models' picks only
    exp = ctx.expand(ctx.root)
    lm = Learned(probes=2, compile_k=0)
    assert not any(math.isinf(p.uncertainty) for p in lm.predict(ctx, exp, lm._children(ctx, exp)))


class Stub(LearnedModel):
    """An executable model that calls the first compiled child 2x faster, the others 2x slower."""

    info: dict = {}

    def predict(self, features, patterns=None):
        return np.array([0.0, -0.7] + [0.7] * (len(features) - 2))[:len(features)]


def test_the_executable_model_ranks_the_compiled_children_and_only_those_are_timed_on_its_word(multi_program):  # noqa: F811
    ctx, _ = make_ctx(multi_program, max_steps=1)
    lm = Learned(probes=0, compile_k=3)
    lm.ranker.then._model = Stub()  # type: ignore[attr-defined]
    lm.search(ctx)
    children = lm.info["costed"]
    assert children > 3  # the graph network's best three first, then the rest while time allows
    assert lm.info["compiled"] == children  # each compiled once, none run
    assert ctx.evaluator.stats.featured == children + 1  # and the state itself
    assert ctx.evaluator.stats.timed == 1  # top_k=1: the child the executable model calls fastest


def test_compiles_beyond_compile_k_stop_when_their_share_of_the_time_is_spent(multi_program, monkeypatch):  # noqa: F811
    from shlo_env.search import schedule

    ctx, _ = make_ctx(multi_program, max_steps=1)
    monkeypatch.setattr(schedule, "COMPILE_RANK", 1e-9)
    lm = Learned(probes=0, compile_k=3)
    lm.ranker.then._model = Stub()  # type: ignore[attr-defined]
    lm.search(ctx)
    assert lm.info["compiled"] <= 1 < lm.info["costed"]  # the deadline passes at once


def test_without_compiles_the_graph_network_alone_ranks(multi_program):  # noqa: F811
    ctx, _ = make_ctx(multi_program, max_steps=1)
    lm = Learned(probes=0, compile_k=0)
    lm.search(ctx)
    assert "compiled" not in lm.info and ctx.evaluator.stats.featured == 0


class Chain(LearnedModel):
    """An executable model that calls every state after the first row `factor` x the first."""

    info: dict = {}

    def __init__(self, factor: float):
        self.factor = factor

    def predict(self, features, patterns=None):
        return np.array([0.0] + [np.log(self.factor)] * (len(features) - 1))


def test_the_pick_first_chain_is_a_source_of_deeper_states():
    """Replaces `chain_start`/`chain_from`: the pick-first chain from every state the greedy
    steps reach is among its candidates (after its first step, which pick-first's child is)."""
    import shlo_env as se
    from shlo_env.search.stepwise import pick_first_states

    program = se.lower(lambda a, b, c, v: ((a @ b) @ c) @ v, *[np.ones((64, 64), np.float32)] * 3,
                       np.ones((64, 1), np.float32))
    ctx, _ = make_ctx(program, max_steps=3, patterns=["reassociate_left_to_right"])
    exp = ctx.expand(ctx.root)
    deep = [s.key for _, s in sources.pick_first_chain(ctx, exp)]
    assert deep == [s.key for s in pick_first_states(ctx, ctx.root)][1:] and deep
    lm = Learned(probes=0, compile_k=1)
    keys = [c.key for _, c in lm._children(ctx, exp)]
    assert set(deep) <= set(keys)
    assert not set(deep) & {c.key for _, c in Learned(probes=0, compile_k=0)._children(ctx, exp)}
    first = [v for v, _ in sources.pick_first_chain(ctx, exp)]
    chain_end = ctx.child(exp, first[0])
    # the deeper state's patterns: both steps' (the executable model's pattern columns)
    deeper = next(s for _, s in sources.pick_first_chain(ctx, exp))
    assert sum(patterns_taken(ctx, exp, first[0], deeper).values()) == 2
    assert sum(patterns_taken(ctx, exp, first[0], chain_end).values()) == 1


def test_the_best_of_the_chain_is_timed_when_predicted_faster(multi_program):  # noqa: F811
    ctx, _ = make_ctx(multi_program, max_steps=1)
    lm = Learned(probes=0, compile_k=1)
    lm.ranker.then._model = Chain(0.5)  # type: ignore[attr-defined]
    best = lm.search(ctx)
    assert best.ratio < 0.97  # pick-first takes all three flop-cutting rewrites
    assert ctx.evaluator.stats.timed == 1


def test_a_chain_predicted_slower_is_not_timed(multi_program):  # noqa: F811
    ctx, _ = make_ctx(multi_program, max_steps=1)
    lm = Learned(probes=0, compile_k=1)
    lm.ranker.then._model = Chain(1.5)  # type: ignore[attr-defined]
    assert lm.search(ctx).ratio == 1.0
    assert ctx.evaluator.stats.timed == 0


def test_children_within_the_models_own_error_of_passing_are_timed(multi_program):  # noqa: F811
    """Replaces the second look at children predicted faster short of `min_predicted_gain`:
    every child predicted 0.5 % faster is timed when the executable model's own error makes
    its optimistic bound clear the threshold, and none when its error is 0."""
    ctx, _ = make_ctx(multi_program, max_steps=1)
    lm = Learned(probes=0, compile_k=1, exe_unsure=0.0)
    lm.ranker.then._model = Chain(0.995)  # type: ignore[attr-defined]
    assert lm.search(ctx).ratio == 1.0 and ctx.evaluator.stats.timed == 0
    ctx, _ = make_ctx(multi_program, max_steps=1)
    lm = Learned(probes=0, compile_k=1, exe_unsure=0.05)
    lm.ranker.then._model = Chain(0.995)  # type: ignore[attr-defined]
    best = lm.search(ctx)
    assert ctx.improves(best) and ctx.evaluator.stats.timed >= 1


def test_a_second_look_times_more_down_the_ranking_where_the_top_pick_fails(multi_program):  # noqa: F811
    """`looks`: where none of the `top_k` picks passes the acceptance rule, up to `looks` more."""
    for looks in (0, 2):
        ctx, _ = make_ctx(multi_program, max_steps=1)
        ctx.improves = lambda ev, than=1.0: False  # type: ignore[method-assign]
        lm = Learned(probes=0, compile_k=1, looks=looks)
        lm.ranker.then._model = Chain(0.5)  # type: ignore[attr-defined]
        lm.search(ctx)
        assert lm.info["looks"] == looks and ctx.evaluator.stats.timed == 1 + looks


def test_no_second_look_at_children_predicted_slower(multi_program):  # noqa: F811
    ctx, _ = make_ctx(multi_program, max_steps=1)
    lm = Learned(probes=0, compile_k=1)
    lm.ranker.then._model = Chain(1.5)  # type: ignore[attr-defined]
    lm.search(ctx)
    assert lm.info["looks"] == 0 and ctx.evaluator.stats.timed == 0


def test_single_loop_rewrites_are_timed_first_whatever_the_graph_network_ranks():
    """The graph network cannot rank loop rewrites (a body counted once): each single loop
    rewrite has unbounded uncertainty, so the acquisition rule times them first (at most
    `top_k` + `looks` a step), not compiled for the executable model."""
    import jax

    import shlo_env as se

    def loop(x):
        return jax.lax.fori_loop(0, 8, lambda i, c: c * 0.5 + 1.0, x)

    program = se.lower(loop, np.ones((64,), np.float32))
    ctx, _ = make_ctx(program, max_steps=1, patterns=["while_unroll2", "while_unroll4", "while_unroll_full"])
    exp = ctx.expand(ctx.root)
    singles = sum(d.num_choices - 1 for d in exp.dims[:exp.num_rewrites])
    assert singles >= 2
    lm = Learned(probes=0, compile_k=1)
    lm.ranker.then._model = Chain(2.0)  # type: ignore[attr-defined]  # everything slower: only blind spots timed
    children, picks = ranked(lm, ctx, exp)
    blind = [i for i, p in enumerate(lm.predict(ctx, exp, children)) if math.isinf(p.uncertainty)]
    assert len(blind) >= singles and picks[:len(blind)] == blind


def test_a_child_the_executable_model_scored_is_held_to_its_own_error(multi_program):  # noqa: F811
    """Timed only if predicted within that model's error of passing the acceptance threshold."""
    ctx, _ = make_ctx(multi_program, max_steps=1)
    root = ctx.expand(ctx.root)
    passing = ctx.threshold

    def timed(factor, exe_unsure):
        lm = Learned(probes=1, compile_k=1, exe_unsure=exe_unsure)
        lm.ranker.then._model = Chain(factor)  # type: ignore[attr-defined]
        return ranked(lm, ctx, root)[1]

    assert timed(passing * 1.03, 0.02) == []  # beyond its 2 % error of passing
    assert timed(passing * 1.01, 0.02) != []  # within it
    assert timed(passing * 1.03, 0.05) != []


class Recorder(Chain):
    """`Chain` that keeps the pattern counts each call passes."""

    def __init__(self, factor: float):
        super().__init__(factor)
        self.calls: list = []

    def predict(self, features, patterns=None):
        self.calls.append(patterns)
        return super().predict(features)


def test_the_executable_model_sees_the_patterns_each_candidate_takes_relative_to_its_state(multi_program):  # noqa: F811
    """The state's own row takes none (its patterns would cancel in a linear score); along the
    pick-first chain they add up step by step."""
    from collections import Counter

    from shlo_env.search.base import pick_first_vector

    ctx, _ = make_ctx(multi_program, max_steps=1)
    root = ctx.expand(ctx.root)
    first = step_patterns(root, pick_first_vector(root.dims))
    assert sum(first.values()) == 3  # pick-first takes all three rewrites (see above)
    single = next(ctx.singles(root))
    state = ctx.child(root, single)
    chain_end = ctx.child(ctx.expand(state), pick_first_vector(ctx.expand(state).dims))
    assert patterns_taken(ctx, root, pick_first_vector(root.dims), ctx.child(root, pick_first_vector(root.dims))) == first
    if chain_end is not None:  # two steps along: both steps' patterns
        assert patterns_taken(ctx, root, single, chain_end) == step_patterns(root, single) + Counter(
            chain_end.program.applied) - Counter(state.program.applied)
    lm = Learned(probes=0, compile_k=3)
    lm.ranker.then._model = Recorder(2.0)  # type: ignore[attr-defined]
    lm.search(ctx)
    rows = lm.ranker.then._model.calls[0]  # type: ignore[attr-defined]
    assert rows[0] == Counter() and len(rows) == lm.info["costed"] + 1  # the state and every child
    assert all(sum(c.values()) >= 1 for c in rows[1:]) and all(set(c) <= set(first) for c in rows[1:])
