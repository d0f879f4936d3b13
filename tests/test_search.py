"""Search strategies: the paper's rules (pruning, UCB, decay), the shared cache, budgets.

Most tests run the strategies against `ModelWorker`: the `Worker` interface in this process,
with real compiles and runs (so verification is real) but *modelled* timings: T(program) is a
roofline of XLA's cost analysis, times a factor per disabled pass. Timings are then exact and
repeatable, so a test can assert what a search must find and what it must prune. It also counts
every request, so "no state compiled twice" is checked on what reached the worker.
"""

from __future__ import annotations

import collections
import io
import itertools
import math
import time

import jax.numpy as jnp
import numpy as np
import pytest

import shlo_env as se
from shlo_env.execute import runtime
from shlo_env.ir.hashing import dag_hash
from shlo_env.patterns.base import resolve
from shlo_env.search import Evaluator, get_strategy, strategies
from shlo_env.search.base import (
    Dim, Expansion, Progress, SearchContext, auto_strategy, one_hot_vectors, pick_first_vector,
)
from shlo_env.search.beam import pruned
from shlo_env.search.cost_model import roofline
from shlo_env.search.mcts import C1, C2, FactorizedMCTS, decayed_budgets, ucb_scores
from shlo_env.search.passes import candidate_passes, normalize, resolve as resolve_passes, state_key
from shlo_env.measure.timing_policy import QUICK
from shlo_env.execute.worker import CandidateError


# --- a worker with modelled timings --------------------------------------------------------------

class ModelWorker:
    """In-process `Worker` stand-in: real compile/run/reference, modelled timings, counted calls."""

    def __init__(self, pass_factor: dict | None = None, delay_s: float = 0.0):
        self.inputs: dict[str, list] = {}
        self.pass_factor = pass_factor or {}
        self.delay_s = delay_s
        self.calls: collections.Counter = collections.Counter()  # (command, text hash, passes)
        self.timeout_s = 60.0

    def _k(self, text):
        return dag_hash(se.load(text))

    def set_inputs(self, key, arrays):
        self.inputs[key] = [np.asarray(a) for a in arrays]

    def _exe(self, text, passes):
        try:
            return runtime.compile(text, tuple(passes))
        except runtime.CompileError as e:
            raise CandidateError("compile", str(e)) from e

    def run(self, text, input_key, disabled_passes=(), timeout_s=None):
        self.calls[("run", self._k(text), tuple(disabled_passes), input_key)] += 1
        return runtime.execute(self._exe(text, disabled_passes), self.inputs[input_key])

    def reference(self, text, input_key, timeout_s=None, perturb_ulps=0.0):
        return runtime.reference_outputs(se.load(text), self.inputs[input_key], perturb_ulps)

    def model(self, text, passes) -> float:
        c = runtime.cost_analysis(self._exe(text, passes))
        t = c["flops"] / 1e9 + c["bytes"] / 1e10
        for p in passes:
            t *= self.pass_factor.get(p, 1.0)
        return t

    def _timing(self, t):
        return runtime.Timing(t, t, None, 10)

    def time(self, texts, input_key, timing=QUICK, disabled_passes=(), timeout_s=None):
        if self.delay_s:
            time.sleep(self.delay_s)
        for t in texts[1:]:
            self.calls[("time", self._k(t), tuple(disabled_passes))] += 1
        return [self._timing(self.model(t, disabled_passes)) for t in texts]

    def time_each(self, items, input_key, timing=QUICK, timeout_s=None):
        if self.delay_s:
            time.sleep(self.delay_s)
        for t, p in items[1:]:
            self.calls[("time", self._k(t), tuple(p))] += 1
        return [self._timing(self.model(t, p)) for t, p in items]

    def cost(self, text, disabled_passes=(), timeout_s=None):
        self.calls[("cost", self._k(text), tuple(disabled_passes))] += 1
        return runtime.cost_analysis(self._exe(text, disabled_passes))

    def optimized_hlo(self, text, disabled_passes=(), timeout_s=None):
        # a modelled pass changes the (modelled) executable; an unknown one changes nothing
        changed = sorted(p for p in disabled_passes if p in self.pass_factor)
        return runtime.optimized_hlo(self._exe(text, disabled_passes)) + (f"\n// without {changed}" if changed else "")

    def close(self):
        pass

    def count(self, command) -> collections.Counter:
        return collections.Counter({k[1:]: v for k, v in self.calls.items() if k[0] == command})


def multi(A, B, v, X, W, x2, W2):
    """Three independent rewrites, each cutting flops: (A@B)@v, sum(X@W, 0), (x2@W2)[:, :8]."""
    return (A @ B) @ v, jnp.sum(X @ W, axis=0), (x2 @ W2)[:, :8]


MULTI_SHAPES = [(64, 64), (64, 64), (64, 1), (128, 64), (64, 64), (32, 64), (64, 64)]
PATTERNS = ["reassociate_left_to_right", "reduce_through_dot", "slice_through_dot"]


@pytest.fixture(scope="module")
def multi_program():
    rng = np.random.default_rng(0)
    return se.lower(multi, *[rng.standard_normal(s).astype(np.float32) for s in MULTI_SHAPES])


def make_ctx(program, worker=None, *, budget_s=60.0, passes=(), max_steps=4, seed=0, patterns=PATTERNS,
             progress=None):
    worker = worker or ModelWorker()
    ev = Evaluator(program, worker=worker, num_random=1, seed=0)
    return SearchContext(program, resolve(patterns), ev, deadline=time.perf_counter() + budget_s,
                         max_steps=max_steps, passes=passes, seed=seed,
                         progress=progress or Progress(False)), worker


def optimum_ratio(ctx) -> float:
    """The best ratio any decision vector reaches in one step (the model is exact)."""
    exp = ctx.expand(ctx.root)
    best = 1.0
    for vec in itertools.product(*[range(d.num_choices) for d in exp.dims]):
        child = ctx.child(exp, vec)
        if child is not None and any(vec):
            best = min(best, ctx.evaluate(child).ratio)
    return best


def assert_each_state_compiled_once(ctx, worker):
    """Each state verified once, each (state, input set) run once, each state timed once, plus
    at most one confirming re-time for a state that became the best."""
    stats = ctx.evaluator.stats
    assert all(n == 1 for n in stats.verifications.values()), stats.verifications
    assert all(n == 1 for n in stats.timings.values()), stats.timings
    runs = worker.count("run")
    assert all(n == 1 for n in runs.values()), runs  # each (state, passes, input set) run once
    confirmed = {(ev.hash, ev.passes) for ev in ctx.evaluator.cache.values() if ev.confirmed}
    times = worker.count("time")
    assert all(n == 1 + ((k[0], k[1]) in confirmed) for k, n in times.items()), (times, confirmed)
    assert stats.retimed == len(confirmed - {(ctx.evaluator.original_key, ())})


# --- the rules, as functions ---------------------------------------------------------------------

def test_pruning_rule_is_the_papers():
    assert pruned(1.0, 1.0, 1.0)  # T(child) >= alpha * T(parent): equal is pruned
    assert not pruned(0.99, 1.0, 1.0)
    assert pruned(0.5, 0.5, 1.0)
    assert not pruned(1.01, 1.0, 1.02)  # alpha > 1 keeps a child within noise of its parent
    assert pruned(1.03, 1.0, 1.02)
    assert pruned(0.9, 1.0, 0.9)


def test_ucb_constants_and_values():
    assert (C1, C2) == (1.25, 19652.0)
    N = np.array([3.0, 1.0, 0.0])
    Q = np.array([0.5, 0.2, 0.0])
    got = ucb_scores(N, Q, q_min=0.0, q_max=1.0)
    total = 4.0
    c = C1 + math.log((total + C2 + 1) / C2)
    want = [0.5 + (1 / 3) * 2 / 4 * c, 0.2 + (1 / 3) * 2 / 2 * c, 0.0 + (1 / 3) * 2 / 1 * c]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # Q normalized by the observed min/max
    got = ucb_scores(np.array([1.0, 1.0]), np.array([-0.2, 0.3]), q_min=-0.2, q_max=0.3)
    c = C1 + math.log((2 + C2 + 1) / C2)
    np.testing.assert_allclose(got, [0.0 + 0.5 * math.sqrt(2) / 2 * c, 1.0 + 0.5 * math.sqrt(2) / 2 * c])
    # nothing visited: no preference (ties broken at random by the caller)
    assert np.all(ucb_scores(np.zeros(3), np.zeros(3), math.inf, -math.inf) == 0)
    # an unvisited choice is explored before a visited one of equal prior
    s = ucb_scores(np.array([5.0, 0.0]), np.array([0.1, 0.0]), 0.0, 1.0)
    assert s[1] > s[0]
    # a prior shifts exploration
    s = ucb_scores(np.array([1.0, 1.0]), np.array([0.0, 0.0]), 0.0, 1.0, prior=np.array([0.9, 0.1]))
    assert s[0] > s[1]


def test_budget_decays_per_step():
    assert decayed_budgets(16, 0.5, 4, 5) == [16, 8, 4, 4, 4]
    assert decayed_budgets(10, 0.7, 2, 4) == [10, 7, 4, 3]


def test_roofline_ranks_by_flops_and_bytes():
    m = (1e9, 1e8, 1e9)
    assert roofline({"flops": 2e9, "bytes": 0.0}, m) == pytest.approx(2.0)
    assert roofline({"flops": 1e9, "bytes": 1e9, "transcendentals": 1e8}, m) == pytest.approx(3.0)
    assert roofline({"flops": float("nan"), "bytes": 1.0}, m) == math.inf
    assert roofline({"flops": 1.0, "bytes": 1.0, "error": "compile: no"}, m) == math.inf


def test_auto_picks_by_decision_space_size():
    def exp(*choices):
        dims = [Dim("rewrite", tuple(str(i) for i in range(n)), k) for k, n in enumerate(choices)]
        return Expansion(None, None, [], (), dims)

    assert auto_strategy(exp()) == "pick-first"
    assert auto_strategy(exp(2, 2, 2)) == "exhaustive"
    assert auto_strategy(exp(*[2] * 6)) == "exhaustive"  # 64
    assert auto_strategy(exp(*[2] * 7)) == "beam"
    assert auto_strategy(exp(*[2] * 16)) == "beam"
    assert auto_strategy(exp(*[2] * 17)) == "mcts"


def test_every_strategy_is_registered():
    assert {"pick-first", "exhaustive", "random", "beam", "mcts", "cost-model", "learned"} <= set(strategies())
    with pytest.raises(KeyError, match="unknown strategy"):
        get_strategy("nope")
    assert get_strategy("beam", alpha=1.0).alpha == 1.0


def test_pass_names_and_state_keys():
    assert normalize(["b", "a", "a", ""]) == ("a", "b")
    assert normalize("fusion,algsimp") == ("algsimp", "fusion")
    assert state_key("abc") == "abc"
    assert state_key("abc", ["fusion", "algsimp"]) == "abc|-algsimp,fusion"
    assert resolve_passes(False) == () and resolve_passes(None) == ()
    cpu = candidate_passes("cpu")
    assert resolve_passes(True, "cpu") == cpu and 18 <= len(cpu) <= 24
    assert "copy-insertion" not in cpu and "layout-assignment" not in cpu  # needed for correctness


def test_vectors_pick_first_ignores_passes():
    dims = [Dim("rewrite", ("original", "a", "b"), 0), Dim("rewrite", ("original", "c"), 1),
            Dim("pass", ("keep", "disable x"), 0)]
    assert pick_first_vector(dims) == [1, 1, 0]
    assert list(one_hot_vectors(dims)) == [[1, 0, 0], [2, 0, 0], [0, 1, 0], [0, 0, 1]]


def test_progress_line_reports_best_evaluated_and_hits(multi_program):
    stream = io.StringIO()
    bar = Progress(True, "beam multi", stream=stream, interval_s=0.0, budget_s=60)
    ctx, _ = make_ctx(multi_program, progress=bar)
    get_strategy("beam").search(ctx)
    bar.close(ctx.evaluator, ctx.best)
    out = stream.getvalue().strip().splitlines()
    assert len(out) >= 3
    last = out[-1]
    assert last.startswith("beam multi:") and "/60 s" in last and "done" in last
    assert f"best {ctx.best.ratio:.3f}" in last
    s = ctx.evaluator.stats
    assert f"{s.evaluated} evaluated, {s.cache_hits} cache hits" in last


# --- strategies against the modelled timings -----------------------------------------------------

def test_pick_first_follows_algorithm_1(multi_program):
    ctx, worker = make_ctx(multi_program)
    best = get_strategy("pick-first").search(ctx)
    assert set(best.applied) == set(PATTERNS)  # every first choice, in one step
    assert ctx.evaluator.stats.evaluated == 1  # the next state has no alternatives: stop
    assert_each_state_compiled_once(ctx, worker)


@pytest.mark.parametrize("name", ["exhaustive", "beam", "mcts", "cost-model", "random"])
def test_strategy_finds_the_optimum(name, multi_program):
    ctx, worker = make_ctx(multi_program)
    best = get_strategy(name).search(ctx)
    ref_ctx, _ = make_ctx(multi_program)
    assert best.ok and best.ratio == pytest.approx(optimum_ratio(ref_ctx), rel=1e-9)
    assert set(best.applied) == set(PATTERNS)
    assert_each_state_compiled_once(ctx, worker)


def with_neutral(A, B, v, X, W, x2, W2):
    """`multi` plus a rewrite that changes nothing XLA's cost model sees (x*2 -> x+x)."""
    return multi(A, B, v, X, W, x2, W2) + (jnp.tanh(v) * 2.0,)


def test_beam_prunes_exactly_the_children_the_rule_says():
    rng = np.random.default_rng(0)
    program = se.lower(with_neutral, *[rng.standard_normal(s).astype(np.float32) for s in MULTI_SHAPES])
    ctx, worker = make_ctx(program, patterns=PATTERNS + ["mul_two_to_add_self"])
    assert len(ctx.expand(ctx.root).dims) == 4
    beam = get_strategy("beam", alpha=1.0, expand_budget=8, beam_width=8, widen=(1.2,))
    trace = []

    # record every (parent ratio, child ratio, kept) decision through the rule itself
    import shlo_env.search.beam as beam_module

    rule = beam_module.pruned

    def recording(child, parent, alpha):
        out = rule(child, parent, alpha)
        trace.append((parent, child, alpha, out))
        return out

    beam_module.pruned = recording
    try:
        beam.search(ctx)
    finally:
        beam_module.pruned = rule
    assert trace
    for parent, child, alpha, out in trace:
        assert out == (child >= alpha * parent)
        assert alpha in beam.info["alphas"]
    assert beam.info["pruned"] == sum(out for *_, out in trace)
    assert beam.info["pruned"] >= 1  # the neutral rewrite alone is no faster: pruned at alpha = 1
    assert_each_state_compiled_once(ctx, worker)


def test_beam_with_alpha_zero_expands_only_the_root(multi_program):
    ctx, _ = make_ctx(multi_program)
    beam = get_strategy("beam", alpha=0.0, widen=(), seed_pick_first=False)
    beam.search(ctx)
    assert beam.info["expansions"] == 1
    assert beam.info["pruned"] == beam.info["children"]
    assert beam.info["alphas"] == [0.0]


def test_beam_widens_alpha_when_the_stack_runs_empty(multi_program):
    ctx, _ = make_ctx(multi_program)
    beam = get_strategy("beam", alpha=0.0, widen=(1.5, 0.5), seed_pick_first=False)
    beam.search(ctx)
    assert beam.info["alphas"] == [0.0, 0.5, 1.5]  # looser each round, each the paper's rule
    assert beam.info["expansions"] > 3  # the later rounds get past the root


def test_beam_evaluates_the_pick_first_chain_first(multi_program):
    ctx, _ = make_ctx(multi_program)
    beam = get_strategy("beam", alpha=0.0, widen=(), seed_pick_first=True, expand_budget=1)
    best = beam.search(ctx)
    assert set(best.applied) == set(PATTERNS)  # pick-first's state, although alpha = 0 prunes all


def test_beam_reports_cache_hits_when_paths_meet(multi_program):
    """Applying A then B, or B then A, reaches one state: evaluated once, then cache hits."""
    ctx, worker = make_ctx(multi_program, max_steps=3)
    beam = get_strategy("beam", alpha=1.5, expand_budget=8, beam_width=8, seed_pick_first=False)
    beam.search(ctx)
    s = ctx.evaluator.stats
    assert s.cache_hits > 0 and s.hit_rate > 0
    assert s.evaluated == len(s.verifications) == 7  # the 2**3 - 1 rewritten states, each once
    assert_each_state_compiled_once(ctx, worker)


def test_strategies_share_one_cache(multi_program):
    ctx, worker = make_ctx(multi_program)
    get_strategy("exhaustive").search(ctx)
    evaluated = ctx.evaluator.stats.evaluated
    hits = ctx.evaluator.stats.cache_hits
    seconds = ctx.evaluator.stats.seconds
    assert seconds > 0  # what the evaluations took: the regional strategy's whole estimate
    for name in ("beam", "mcts", "pick-first", "cost-model"):
        ctx.deadline = time.perf_counter() + 60
        get_strategy(name).search(ctx)
    assert ctx.evaluator.stats.evaluated == evaluated  # every state was already known
    assert ctx.evaluator.stats.cache_hits > hits
    assert ctx.evaluator.stats.seconds == seconds  # cache hits take no evaluation time
    assert_each_state_compiled_once(ctx, worker)


def test_mcts_statistics_and_decay(multi_program):
    ctx, worker = make_ctx(multi_program, max_steps=3)
    mcts = FactorizedMCTS(budget=8, decay=0.5, min_budget=2, seed_pick_first=False)
    best = mcts.search(ctx)
    budgets = mcts.info["budgets"]
    assert budgets[0] == 8 and set(budgets) <= set(decayed_budgets(8, 0.5, 2, 3))  # each episode decays
    assert mcts.info["simulations"] == sum(budgets) and mcts.info["episodes"] >= 1
    assert best.ratio < 1.0
    assert_each_state_compiled_once(ctx, worker)


def test_mcts_backs_up_marginal_counts_per_dimension(multi_program):
    ctx, _ = make_ctx(multi_program, max_steps=1)
    mcts = FactorizedMCTS(budget=12, seed_pick_first=False)
    roots = []
    original_node = mcts._node

    def capture(c, state, value):
        node = original_node(c, state, value)
        if not roots:
            roots.append(node)
        return node

    mcts._node = capture
    mcts.search(ctx)
    root = roots[0]
    sims = mcts.info["simulations"]  # one step an episode: every simulation starts at the top
    for k in range(len(root.exp.dims)):
        assert root.N[k].sum() == sims  # every simulation picks one choice per dimension
    # one value per simulation is backed up into every dimension: the per-dimension sums agree
    totals = [root.W[k].sum() for k in range(len(root.exp.dims))]
    np.testing.assert_allclose(totals, totals[0])
    assert totals[0] > 0  # rewrites that cut flops have positive value -log(ratio)


def test_random_search_is_seeded(multi_program):
    a_ctx, _ = make_ctx(multi_program, seed=3)
    b_ctx, _ = make_ctx(multi_program, seed=3)
    a = get_strategy("random", episodes=5).search(a_ctx)
    b = get_strategy("random", episodes=5).search(b_ctx)
    assert a.key == b.key and a_ctx.evaluator.stats.evaluated == b_ctx.evaluator.stats.evaluated


def test_cost_model_times_only_the_most_promising(multi_program):
    ctx, worker = make_ctx(multi_program)
    cm = get_strategy("cost-model", top_k=2)
    best = cm.search(ctx)
    s = ctx.evaluator.stats
    assert s.costed >= 7  # every child ranked by the cost model...
    assert s.timed <= 2 * max(1, cm.info["steps"] + 1)  # ...but at most top_k timed per step
    assert s.timed < s.costed
    assert set(best.applied) == set(PATTERNS)


def test_learned_ranks_without_compiling_and_times_only_the_top(multi_program):
    ctx, worker = make_ctx(multi_program)
    lm = get_strategy("learned", top_k=2, probes=0)  # the weights shipped in the package; no probes
    best = lm.search(ctx)
    s = ctx.evaluator.stats
    assert best.ok and best.ratio <= 1.0
    assert s.costed == 0  # ranked by the learned model: no cost-analysis compile
    assert lm.info["costed"] >= 7  # yet every child was ranked...
    assert s.timed <= 2 * max(1, lm.info["steps"] + 1)  # ...and at most top_k timed per step
    assert_each_state_compiled_once(ctx, worker)


# --- XLA passes as macro actions -----------------------------------------------------------------

def test_passes_enter_the_action_space_and_the_cache_key(multi_program):
    worker = ModelWorker(pass_factor={"fake-slow-pass": 0.5})  # disabling it halves the time
    ctx, _ = make_ctx(multi_program, worker, passes=("fake-slow-pass", "other-pass"))
    exp = ctx.expand(ctx.root)
    assert [d.kind for d in exp.dims] == ["rewrite"] * 3 + ["pass"] * 2
    toggle = [0, 0, 0, 1, 0]
    child = ctx.child(exp, toggle)
    assert child.hash == ctx.root.hash and child.passes == ("fake-slow-pass",)
    assert child.key == f"{ctx.root.hash}|-fake-slow-pass" != ctx.root.key
    ev = ctx.evaluate(child)
    assert ev.ok and ev.ratio == pytest.approx(0.5) and ev.passes == ("fake-slow-pass",)
    assert ev.numerics >= se.Numerics.REASSOCIATE  # passes may reorder float math
    # the child offers only the passes not yet disabled
    assert ctx.expand(child).passes == ("other-pass",)
    best = get_strategy("beam").search(ctx)
    assert "fake-slow-pass" in best.passes and set(best.applied) == set(PATTERNS)
    assert_each_state_compiled_once(ctx, worker)
    assert ("fake-slow-pass",) in {k[2] for k in worker.calls if k[0] == "time"}  # time_each carried it


def test_pick_first_never_disables_a_pass(multi_program):
    ctx, _ = make_ctx(multi_program, ModelWorker(pass_factor={"p": 0.1}), passes=("p",))
    best = get_strategy("pick-first").search(ctx)
    assert best.passes == ()


@pytest.mark.parametrize("name", ["mcts", "random", "cost-model"])
def test_every_strategy_can_use_pass_actions(name, multi_program):
    worker = ModelWorker(pass_factor={"p": 0.25})
    ctx, _ = make_ctx(multi_program, worker, passes=("p",), seed=1)
    opts = {"pass_prob": 0.5}
    best = get_strategy(name, **opts).search(ctx)
    assert best.passes == ("p",), (best.key, best.ratio)
    assert_each_state_compiled_once(ctx, worker)


# --- budgets -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["exhaustive", "beam", "mcts", "random", "cost-model", "learned"])
def test_deadline_is_honored(name, multi_program):
    """Each timing takes 0.3 s: a 1.5 s search stops after about five of them."""
    worker = ModelWorker(delay_s=0.3)
    ctx, _ = make_ctx(multi_program, worker, budget_s=1.5)
    t0 = time.perf_counter()
    get_strategy(name).search(ctx)
    assert time.perf_counter() - t0 < 1.5 + 0.3 + 1.0  # the last evaluation may finish, no more


def _stopping_first(mcts, times):
    """`mcts.act` that answers the stop action the first `times` calls."""
    real_act, calls = mcts.act, []

    def act(node):
        calls.append(1)
        return [0] * len(node.exp.dims) if len(calls) <= times else real_act(node)

    mcts.act = act


def test_mcts_searches_on_after_a_stop_while_time_is_left(multi_program):
    ctx, worker = make_ctx(multi_program, max_steps=3)
    mcts = FactorizedMCTS(budget=4, min_budget=4, seed_pick_first=False)
    _stopping_first(mcts, 1)
    best = mcts.search(ctx)
    assert mcts.info["stops_deferred"] == 1
    assert mcts.info["actions"][0] == "stop" and len(mcts.info["actions"]) >= 2
    assert best.ratio < 1.0
    assert_each_state_compiled_once(ctx, worker)


def test_mcts_walks_episodes_from_the_top_until_none_finds_a_new_state(multi_program):
    """One step an episode: the time left after it goes to further walks from the original with
    the tree kept; the search ends on its own once a walk (and the widening after it) tries no
    new state."""
    ctx, worker = make_ctx(multi_program, max_steps=1)
    mcts = FactorizedMCTS(budget=2, min_budget=2, seed_pick_first=False, seed_hot=0)
    walk, added, tried = mcts.episode, [], []

    def counted(*a, **k):
        before, evaluated = mcts.info.get("nodes", 0), ctx.evaluator.stats.evaluated
        walk(*a, **k)
        added.append(mcts.info.get("nodes", 0) - before)
        tried.append(ctx.evaluator.stats.evaluated - evaluated)

    mcts.episode = counted
    best = mcts.search(ctx)
    assert len(added) == mcts.info["episodes"] >= 2
    assert added[0] > 0 and added[1] > 0 and tried[-1] == 0  # a later walk found new states
    assert not ctx.out_of_time()
    assert best.ratio < 1.0
    assert_each_state_compiled_once(ctx, worker)


def test_mcts_tries_the_untried_singles_when_a_walk_finds_nothing_new(multi_program):
    """Walks that meet only states tried before (most candidates failing, say) do not end the
    search while single rewrites at the top are untried: those are valued, then it ends on its own."""
    ctx, worker = make_ctx(multi_program, max_steps=1)
    mcts = FactorizedMCTS(budget=2, min_budget=2, seed_pick_first=False, seed_hot=0)
    mcts.episode = lambda *a, **k: None  # a walk that tries nothing
    mcts.search(ctx)
    top = mcts._node(ctx, ctx.root, 0.0)
    singles = [tuple(v) for v in one_hot_vectors(top.exp.dims) if top.exp.dims[v.index(max(v))].kind == "rewrite"]
    assert mcts.info["widened"] >= len(singles) >= 2
    evaluated = {ev.hash for ev in ctx.evaluator.cache.values()}
    children = [ctx.child(top.exp, list(vec)) for vec in singles]
    assert all(child.hash in evaluated for child in children if child is not None)  # each was tried
    assert mcts.info["episodes"] >= 2  # a walk after the widening, which found nothing new either
    assert not ctx.out_of_time()
    assert_each_state_compiled_once(ctx, worker)


def test_a_follow_up_search_begins_where_the_earlier_strategy_handed_over(multi_program):
    ctx, _ = make_ctx(multi_program)
    exp = ctx.expand(ctx.root)
    ev = ctx.evaluate(ctx.child(exp, pick_first_vector(exp.dims)))
    assert ev.timed
    state = ctx.hand_over(ev)
    mcts = FactorizedMCTS()
    assert mcts.begin(ctx) is state and mcts.start_ratio(ctx, state) == ev.ratio
    assert state.key == ev.key


def test_mcts_takes_the_best_simulated_child_when_the_acted_combination_fails(multi_program):
    from shlo_env.search.evaluator import Evaluation, Status
    from shlo_env.search.mcts import Node

    ctx, _ = make_ctx(multi_program)
    mcts = FactorizedMCTS()
    root = mcts._node(ctx, ctx.root, 0.0)
    single = next(iter(one_hot_vectors(root.exp.dims)))
    root.children[tuple(single)] = Node(ctx.child(root.exp, single), root.exp, 0.5)
    combined = pick_first_vector(root.exp.dims)
    ctx.evaluate = lambda state, expand=False: Evaluation(state.hash, state.program, Status.REJECTED)  # all fail
    assert mcts._step_to(ctx, root, combined) is root.children[tuple(single)]
    assert tuple(combined) not in root.children
    del root.children[tuple(single)]
    assert mcts._step_to(ctx, root, combined) is None  # nothing measured to go to: the walk ends


def test_mcts_stops_once_its_steps_find_no_new_state(multi_program):
    ctx, _ = make_ctx(multi_program, max_steps=2)
    mcts = FactorizedMCTS(budget=64, min_budget=64, seed_pick_first=False)
    _stopping_first(mcts, 10**6)
    mcts.search(ctx)
    assert not ctx.out_of_time()  # it ended on its own, not at the deadline
    assert mcts.info["stops_deferred"] <= 4 * 2


def test_the_open_tail_is_the_searchs_until_a_candidate_beats_the_original(multi_program):
    ctx, _ = make_ctx(multi_program, budget_s=5.0)
    now = time.perf_counter()
    ctx.evaluator.hard_deadline = usual_hard = now + 6.0
    ctx.open_tail(now + 50.0)
    assert not ctx.in_hand() and ctx.time_left() > 40.0  # nothing beats the original: searched on
    exp = ctx.expand(ctx.root)
    ctx.evaluate(ctx.child(exp, pick_first_vector(exp.dims)))  # every rewrite: faster (the model)
    assert ctx.in_hand() and ctx.best.ratio < 1.0
    assert ctx.time_left() < 5.0  # the usual deadline again, with its time for acceptance
    ctx.evaluate(ctx.root)
    assert ctx.evaluator.hard_deadline == usual_hard
