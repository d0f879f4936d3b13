"""strategy="learned": the model's top picks, and probes where the model is unsure (modelled timings)."""

import numpy as np

from test_search import make_ctx, multi_program  # noqa: F401  (multi_program is a fixture)

from shlo_env.search.learned import Learned


class Pessimist(Learned):
    """The learned strategy with a model that predicts every candidate 20 % slower (and no
    pick-first chain first: these tests are about the greedy steps)."""

    def __init__(self, **options):
        super().__init__(chain_share=0.0, **options)

    def estimate(self, ctx, exp, children):
        return 1.0, [1.2] * len(children)


def test_probes_time_pick_first_and_the_hottest_single_when_the_model_is_unsure(multi_program):  # noqa: F811
    ctx, worker = make_ctx(multi_program, max_steps=1)
    lm = Pessimist(unsure=0.5, probes=2)  # 20 % slower is within the model's error: probe
    best = lm.search(ctx)
    assert lm.info["probes"] == 2  # pick-first and the hottest single rewrite, nothing else
    assert ctx.evaluator.stats.timed <= 2
    assert best.ratio < 0.97  # pick-first takes all three flop-cutting rewrites (modelled time)


def test_no_probe_beyond_the_models_error(multi_program):  # noqa: F811
    ctx, worker = make_ctx(multi_program, max_steps=1)
    lm = Pessimist(unsure=0.1)  # 20 % slower is beyond the error: trust the model, time nothing
    best = lm.search(ctx)
    assert ctx.evaluator.stats.timed == 0 and "probes" not in lm.info
    assert best.ratio == 1.0


def test_probes_come_first_among_the_candidates(multi_program):  # noqa: F811
    ctx, _ = make_ctx(multi_program)
    exp = ctx.expand(ctx.root)
    lm = Learned(probes=2)
    vecs = list(lm.candidates(exp, ctx))
    assert vecs[:2] == lm._probe_vectors(exp, ctx) and vecs[0] == [1, 1, 1]
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
    assert lm._probe_vectors(exp, ctx) == [[1, 1, 1], singles[0], sweep, singles[1]]
    lm.search(ctx)
    assert lm.info["probes"] == 4  # every probe timed: the model's 20 % is within its error


def test_loop_rewrites_are_probed_whatever_the_model_predicts():
    """The model and its prior read the static graph (a loop body counted once), so a probe
    that rewrites a loop is timed even when both call it far slower."""
    import jax
    import numpy as np

    import shlo_env as se
    from shlo_env import observe

    def loop(x):
        return jax.lax.fori_loop(0, 8, lambda i, c: c * 0.5 + 1.0, x)

    program = se.lower(loop, np.ones((64,), np.float32))
    ctx, _ = make_ctx(program, max_steps=1, patterns=["while_unroll2"])
    exp = ctx.expand(ctx.root)
    lm = Pessimist(unsure=0.1, probes=2)  # 20 % slower is beyond the error: only blind spots are timed
    lm.search(ctx)
    assert lm.info.get("probes") == 1  # the unroll (pick-first is the same vector)
    g = observe.graph(exp.augmented, uids=False)
    assert Learned._blind(g, [1] * exp.num_rewrites) and not Learned._blind(g, [0] * exp.num_rewrites)


def test_a_rewrite_whose_original_root_is_a_window_reduction_is_probed_whatever_the_model_predicts():
    """A matched root stays in the main body (region 0 yields it), so the window reduction a
    prefix-scan rewrite replaces is outside its alternatives op: it still counts as blind
    (inst-10-20/attn_linear_causal.005 went untimed, 1.000 against beam's 0.235)."""
    import jax.numpy as jnp

    import shlo_env as se
    from shlo_env import observe

    program = se.lower(lambda x: jnp.cumsum(x * 2.0, axis=1), np.ones((4, 256), np.float32))
    ctx, _ = make_ctx(program, max_steps=1, patterns=["reduce_window_prefix_to_scan"])
    exp = ctx.expand(ctx.root)
    assert exp.num_rewrites == 1
    g = observe.graph(exp.augmented, uids=False)
    window = np.nonzero(g.node_opcode == observe.op_id("stablehlo.reduce_window"))[0]
    assert len(window) and (g.node_alt[window] == -1).all()  # the root is outside the alternatives op
    assert Learned._blind(g, [1]) and not Learned._blind(g, [0])
    lm = Pessimist(unsure=0.1, probes=2)  # 20 % slower is beyond the error: only blind spots are timed
    lm.search(ctx)
    assert lm.info.get("probes") == 1 and ctx.evaluator.stats.timed == 1


def test_the_originals_blind_probes_are_timed_before_anything_is_compiled(multi_program):  # noqa: F811
    """A slow program's compiles can use up a small budget before the greedy steps reach the
    probes the models cannot rank (corpus/attn_linear_causal at 8 s: the chain's one compile
    took 2.3 s of 3 s, and the prefix scan, 0.36, went untimed); they are timed first."""
    import jax.numpy as jnp

    import shlo_env as se

    program = se.lower(lambda x: jnp.cumsum(x * 2.0, axis=1), np.ones((4, 256), np.float32))
    ctx, _ = make_ctx(program, max_steps=1, patterns=["reduce_window_prefix_to_scan"])
    lm = Learned(probes=2, compile_k=1)
    lm._exe = Chain(1.5)  # type: ignore[assignment]
    lm.blind_start(ctx)
    assert lm.info["blind_first"] == 1 and ctx.evaluator.stats.timed == 1
    assert ctx.evaluator.stats.featured == 0  # nothing compiled for the models yet
    ctx, _ = make_ctx(program, max_steps=1, patterns=["reduce_window_prefix_to_scan"])
    lm = Learned(probes=2, compile_k=1)
    lm._exe = Chain(1.5)  # type: ignore[assignment]
    lm.search(ctx)
    assert lm.info["blind_first"] == 1 and ctx.evaluator.stats.timed == 1  # the greedy step does not time it again
    ctx, _ = make_ctx(multi_program, max_steps=1)  # no loop, no window: nothing timed first
    lm = Learned(probes=2, compile_k=1)
    assert lm.blind_start(ctx) is None and "blind_first" not in lm.info and ctx.evaluator.stats.timed == 0
    ctx, _ = make_ctx(multi_program, max_steps=1, patterns=["reduce_window_prefix_to_scan"])  # no match at all
    assert ctx.expand(ctx.root).augmented is None and lm.blind_start(ctx) is None


class Stub:
    """An executable model that calls the first compiled child 2x faster, the others 2x slower."""

    info: dict = {}

    def scores(self, features, patterns=None):
        return np.array([0.0, -0.7] + [0.7] * (len(features) - 2))[:len(features)]


def test_the_executable_model_ranks_the_compiled_children_and_only_those_are_timed_on_its_word(multi_program):  # noqa: F811
    ctx, _ = make_ctx(multi_program, max_steps=1)
    lm = Learned(probes=0, compile_k=3, chain_share=0.0)
    lm._exe = Stub()  # type: ignore[assignment]
    lm.search(ctx)
    children = lm.info["costed"]
    assert children > 3  # the graph network's best three first, then the rest while time allows
    assert lm.info["compiled"] == children  # each compiled once, none run
    assert ctx.evaluator.stats.featured == children + 1  # and the state itself
    assert ctx.evaluator.stats.timed == 1  # top_k=1: the child the executable model calls fastest


def test_compiles_beyond_compile_k_stop_when_their_share_of_the_time_is_spent(multi_program):  # noqa: F811
    ctx, _ = make_ctx(multi_program, max_steps=1)
    lm = Learned(probes=0, compile_k=3, chain_share=0.0, compile_share=1e-9)
    lm._exe = Stub()  # type: ignore[assignment]
    lm.search(ctx)
    assert lm.info["compiled"] <= 1 < lm.info["costed"]  # the deadline passes at once


def test_without_compiles_the_graph_network_alone_ranks(multi_program):  # noqa: F811
    ctx, _ = make_ctx(multi_program, max_steps=1)
    lm = Learned(probes=0, compile_k=0)
    lm.search(ctx)
    assert "compiled" not in lm.info and ctx.evaluator.stats.featured == 0


class Chain:
    """An executable model that calls every state after the first row `factor` x the first."""

    info: dict = {}

    def __init__(self, factor: float):
        self.factor = factor

    def scores(self, features, patterns=None):
        return np.array([0.0] + [np.log(self.factor)] * (len(features) - 1))


def test_the_pick_first_chain_is_compiled_and_its_best_state_timed_when_predicted_faster(multi_program):  # noqa: F811
    ctx, _ = make_ctx(multi_program, max_steps=1)
    lm = Learned(probes=0, compile_k=1, chain_share=1.0)
    lm._exe = Chain(0.5)  # type: ignore[assignment]
    start = lm.chain_start(ctx)
    assert lm.info["chain"] == 1 and lm.info["chain_timed"] == 1  # max_steps=1: one pick-first step
    assert start is not None and start[1] < 0.97  # pick-first takes all three flop-cutting rewrites
    assert ctx.evaluator.stats.timed == 1


def test_a_chain_predicted_slower_is_not_timed(multi_program):  # noqa: F811
    ctx, _ = make_ctx(multi_program, max_steps=1)
    lm = Learned(probes=0, compile_k=1, chain_share=1.0)
    lm._exe = Chain(1.5)  # type: ignore[assignment]
    assert lm.chain_start(ctx) is None
    assert "chain_timed" not in lm.info and ctx.evaluator.stats.timed == 0


def test_a_second_look_times_the_best_ranked_children_where_greedy_steps_stop(multi_program):  # noqa: F811
    """Every child predicted 0.5 % faster, short of `min_predicted_gain`: greedy steps time none;
    the second look times the best-ranked ones where they stopped, and greedy steps go on from
    one that measures faster (each rewrite cuts modelled flops). `second_looks=0`: nothing."""
    ctx, _ = make_ctx(multi_program, max_steps=1)
    lm = Learned(probes=0, compile_k=1, chain_share=0.0, second_looks=0)
    lm._exe = Chain(0.995)  # type: ignore[assignment]
    assert lm.search(ctx).ratio == 1.0 and ctx.evaluator.stats.timed == 0
    ctx, _ = make_ctx(multi_program, max_steps=1)
    lm = Learned(probes=0, compile_k=1, chain_share=0.0, second_looks=1)
    lm._exe = Chain(0.995)  # type: ignore[assignment]
    best = lm.search(ctx)
    assert ctx.improves(best) and lm.info["second_looks"] >= 1
    assert ctx.evaluator.stats.timed == lm.info["second_looks"]  # each look timed one new child


def test_no_second_look_at_children_predicted_slower(multi_program):  # noqa: F811
    ctx, _ = make_ctx(multi_program, max_steps=1)
    lm = Learned(probes=0, compile_k=1, chain_share=0.0)
    lm._exe = Chain(1.5)  # type: ignore[assignment]
    lm.search(ctx)
    assert "second_looks" not in lm.info and ctx.evaluator.stats.timed == 0


def test_the_chain_from_a_state_starts_there(multi_program):  # noqa: F811
    """`chain_from` walks pick-first from the state it is given, and counts a gain against that
    state's measured ratio."""
    from shlo_env.search.stepwise import pick_first_states

    ctx, _ = make_ctx(multi_program, max_steps=1)
    root = ctx.expand(ctx.root)
    state = ctx.child(root, next(ctx.singles(root)))
    lm = Learned(probes=0, compile_k=1, chain_share=1.0)
    lm._exe = Chain(0.5)  # type: ignore[assignment]
    found = lm.chain_from(ctx, state, 1.0)
    step = next(pick_first_states(ctx, state))
    assert found is not None and found[0].key == step.key and step.key != state.key
    assert lm.chain_from(ctx, state, found[1]) is None  # not faster than itself


class StopsAt(Learned):
    """Greedy steps that always end at one fixed state; records the chains walked."""

    def __init__(self, stop, **options):
        super().__init__(chain_share=1.0, **options)
        self.stop, self.walked = stop, []

    def _greedy(self, ctx, state, ratio, counts):
        return self.stop

    def chain_from(self, ctx, start, ratio):
        self.walked.append(start.key)
        return (ctx.root, 1.0) if start.key != ctx.root.key else None


def test_where_greedy_steps_stop_the_pick_first_chain_is_walked_once(multi_program):  # noqa: F811
    ctx, _ = make_ctx(multi_program, max_steps=1)
    root = ctx.expand(ctx.root)
    state = ctx.child(root, next(ctx.singles(root)))
    lm = StopsAt((state, 0.9))
    lm.search(ctx)
    # the root's chain (chain_start), then the stop's once: greedy steps from its result stop there again
    assert lm.walked == [ctx.root.key, state.key]
    lm = StopsAt((ctx.root, 1.0))
    lm.search(ctx)
    assert lm.walked == [ctx.root.key]  # the root's chain is chain_start's alone


def test_single_loop_rewrites_are_compiled_for_the_executable_model_whatever_the_graph_network_ranks():
    """The graph network cannot rank loop rewrites (a body counted once); the executable model
    reads trip counts, so every single loop rewrite is compiled, not just the top `compile_k`."""
    import jax

    import shlo_env as se

    def loop(x):
        return jax.lax.fori_loop(0, 8, lambda i, c: c * 0.5 + 1.0, x)

    program = se.lower(loop, np.ones((64,), np.float32))
    ctx, _ = make_ctx(program, max_steps=1, patterns=["while_unroll2", "while_unroll4", "while_unroll_full"])
    exp = ctx.expand(ctx.root)
    singles = sum(d.num_choices - 1 for d in exp.dims[:exp.num_rewrites])
    assert singles >= 2
    lm = Learned(probes=0, compile_k=1, chain_share=0.0)
    lm._exe = Chain(2.0)  # type: ignore[assignment]  # everything slower: nothing timed
    lm.search(ctx)
    assert lm.info["compiled"] >= singles - 1  # at least every blind single besides the top one
    assert ctx.evaluator.stats.timed == 0


def test_pick_first_from_a_state_a_step_reached_is_timed_whatever_the_models_predict(multi_program):  # noqa: F811
    """Beyond the models' error nothing is probed (above), except pick-first once a step has
    paid: both models can be wrong about it by more than their error. From the original the
    pick-first chain (`chain_start`) decides instead."""
    from shlo_env.search.base import pick_first_vector

    ctx, _ = make_ctx(multi_program)
    root = ctx.expand(ctx.root)
    state = ctx.child(root, next(ctx.singles(root)))
    exp = ctx.expand(state)
    assert exp.dims, "the test needs a state with rewrites left"
    children = [(v, ctx.child(exp, v)) for v in Learned(probes=3).candidates(exp, ctx)]
    pick_first = ctx.child(exp, pick_first_vector(exp.dims))

    def timed(lm, e, kids):  # every candidate predicted 20 % slower, beyond the 10 % error
        return [c for _, c in lm.to_time(ctx, e, kids, [1.2] * len(kids), 1.0)]

    for lm, e, kids, want in ((Learned(probes=3, unsure=0.1), exp, children, [pick_first]),
                              (Learned(probes=3, unsure=0.1, time_pick_first=False), exp, children, []),
                              (Learned(probes=3, unsure=0.1), root,
                               [(v, ctx.child(root, v)) for v in Learned(probes=3).candidates(root, ctx)], [])):
        assert timed(lm, e, kids) == want


def test_a_probe_the_executable_model_scored_is_held_to_its_own_error(multi_program):  # noqa: F811
    """Timed only if predicted within that model's error of passing the acceptance threshold,
    or if the prior predicts a gain beyond the graph network's error; a probe it did not score
    keeps the graph network's band."""
    ctx, _ = make_ctx(multi_program, max_steps=1)
    root = ctx.expand(ctx.root)
    kids = [(v, ctx.child(root, v)) for v in Learned(probes=1).candidates(root, ctx)]
    probe = kids[0][1]  # pick-first: the first probe

    def timed(lm, est, prior, by_exe):
        lm._prior, lm._by_exe = [prior] * len(kids), [by_exe] * len(kids)
        return [c for _, c in lm.to_time(ctx, root, kids, [est] * len(kids), 1.0)]

    lm = Learned(probes=1, unsure=0.2, exe_unsure=0.02, min_predicted_gain=0.5)  # no top pick
    passing = ctx.threshold
    assert timed(lm, passing * 1.03, 1.1, True) == []  # beyond its 2 % error of passing
    assert timed(lm, passing * 1.01, 1.1, True) == [probe]  # within it
    assert timed(lm, passing * 1.03, passing * 0.8, True) == [probe]  # the prior: a gain beyond 20 %
    assert timed(lm, passing * 1.03, 1.1, False) == [probe]  # the graph network's: within its 20 %
    assert timed(Learned(probes=1, unsure=0.2, exe_unsure=0.05, min_predicted_gain=0.5),
                 passing * 1.03, 1.1, True) == [probe]


class Recorder(Chain):
    """`Chain` that keeps the pattern counts each call passes."""

    def __init__(self, factor: float):
        super().__init__(factor)
        self.calls: list = []

    def scores(self, features, patterns=None):
        self.calls.append(patterns)
        return super().scores(features)


def test_the_executable_model_sees_the_patterns_each_candidate_takes_relative_to_its_state(multi_program):  # noqa: F811
    """The state's own row takes none (its patterns would cancel in a linear score); along the
    pick-first chain they add up step by step."""
    from collections import Counter

    from shlo_env.search.base import pick_first_vector

    ctx, _ = make_ctx(multi_program, max_steps=1)
    root = ctx.expand(ctx.root)
    first = Learned._patterns(root, pick_first_vector(root.dims))
    assert sum(first.values()) == 3  # pick-first takes all three rewrites (see above)
    lm = Learned(probes=0, compile_k=1, chain_share=1.0)
    lm._exe = Recorder(0.5)  # type: ignore[assignment]
    lm.chain_start(ctx)
    assert lm._exe.calls[-1] == [Counter(), first]
    lm = Learned(probes=0, compile_k=3, chain_share=0.0)
    lm._exe = Recorder(2.0)  # type: ignore[assignment]
    lm.search(ctx)
    rows = lm._exe.calls[0]
    assert rows[0] == Counter() and len(rows) == lm.info["costed"] + 1  # the state and every child
    assert all(sum(c.values()) >= 1 for c in rows[1:]) and all(set(c) <= set(first) for c in rows[1:])
