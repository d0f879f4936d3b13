"""Region evaluation (issue 31, items 3-4): cutting the ops a rewrite changes out of the
program, judging the rewrite there, and bounding what a site can save from one profile."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shlo_env.rewrite import driver
from shlo_env.rewrite import region_cut
from shlo_env.measure import region_inputs, region_timing
from shlo_env.bench.executors import LocalExecutor
from shlo_env.measure.numerics import Numerics
from shlo_env.measure.kernel_profile import Kernel, Profile, profile_program
from shlo_env.execute.runners import InProcess
from shlo_env.measure.verify import Verifier


def _mlp(x, w, b, v):
    h = jnp.tanh(x @ w + b)
    return (h @ v) @ v.T, jnp.transpose(h) @ x


def _hot_and_cold(x, w, s):
    """A big transposed dot (hot) and a broadcast of a broadcast of a tiny vector (cold)."""
    hot = jnp.transpose(x) @ w
    cold = jnp.broadcast_to(jnp.broadcast_to(s[None, :], (1, 4)), (3, 4))
    return hot, cold * 2.0


def _augment(fn, *args):
    from shlo_env.ir.program import lower

    return driver.augment(lower(fn, *args))


@pytest.fixture(scope="module")
def mlp():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 128)).astype(np.float32)
    program = _augment(_mlp, x, x, x[0], x)
    return program, profile_program(region_cut.baseline(program), runs=3, patterns=())


def _same_values(got, want, text: str) -> bool:
    """The region computes what the program computes there: bitwise, except that a dot (or
    another reduction) compiled in another fusion context may accumulate in another order (a
    few ulps on an AMD EPYC for a 128-long float32 dot), so those are held to rounding error
    of their size; a cut that reads or writes the wrong values is off by far more."""
    if np.array_equal(got, want):
        return True
    reductions = ("stablehlo.dot_general", "stablehlo.reduce", "stablehlo.convolution")
    if got.dtype.kind != "f" or not any(op in text for op in reductions):
        return False
    scale = max(1.0, float(np.abs(want).max()))
    return bool(np.all(np.abs(got.astype(np.float64) - want) <= 1e-5 * scale))


def _site(program, label):
    return next(a.index for a in driver.list_alternatives(program) if label in a.labels)


def test_regions_verify_and_compute_exactly_what_the_program_computes_there(mlp):
    program, prof = mlp
    sites = range(len(driver.list_alternatives(program)))
    runner = InProcess()
    for regions in (region_cut.cut_regions(program, sites, prof), region_cut.cut_regions(program, sites)):
        assert not any(r.whole for r in regions)
        for r, (ins, outs) in zip(regions, region_inputs.boundary_values(runner, program, regions)):
            before = r.before()
            assert before.module.operation.verify()
            assert before.num_ops() < program.num_ops()  # a part, not the program again
            runner.set_inputs("b", ins)
            got = runner.run(before.text(), "b")
            assert len(got) == len(outs) > 0
            for a, b in zip(got, outs):
                assert a.dtype == b.dtype and _same_values(a, b, before.text()), r.sites


def test_region_after_matches_before_within_the_patterns_tier(mlp):
    program, prof = mlp
    runner = InProcess()
    for r in region_cut.cut_regions(program, range(len(driver.list_alternatives(program))), prof):
        verifier = Verifier(r.before(), runner, num_random=2)
        for c in r.candidates():
            (site, choice), = c.choices.items()
            tier = Numerics(r.tiers[site][choice])
            assert verifier.check(r.after(c.choices).text(), (), tier), (r.labels[site][choice], tier)


def test_the_region_holds_the_kernels_of_the_site(mlp):
    program, prof = mlp
    site = _site(program, "fold_transpose_into_dot_rhs")
    r = region_cut.cut_region(program, site, prof)
    assert r.kernels and 0 < r.share < 1
    assert "stablehlo.dot_general" in r.before().text()
    assert r.share == pytest.approx(region_cut.site_bounds(prof, program)[site])
    with pytest.raises(region_cut.RegionError, match="not in this region"):
        r.after({site + 100: 1})


def _loop(x, w):
    y = jnp.transpose(x) @ w  # a site in main
    return jax.lax.fori_loop(0, 3, lambda i, h: jnp.tanh(jnp.transpose(h) @ w), y)


def test_a_site_inside_a_loop_is_cut_from_the_loop_body():
    x = np.eye(16, dtype=np.float32) * 0.5
    program = _augment(_loop, x, x)
    inner = next(a.index for a in driver.list_alternatives(program)
                 if "fold_transpose_into_dot_lhs" in a.labels and a.op.block != program.body)
    prof = profile_program(region_cut.baseline(program), runs=2, patterns=())
    for r in (region_cut.cut_region(program, inner), region_cut.cut_region(program, inner, prof)):
        assert not r.whole and r.in_body and "stablehlo.while" not in r.before().text()
        assert r.before().module.operation.verify()
        runner = InProcess()
        verifier = Verifier(r.before(), runner, num_random=2)
        (site, choice), = r.candidates()[0].choices.items()
        assert verifier.check(r.after({site: choice}).text(), (), Numerics(r.tiers[site][choice]))
        with pytest.raises(region_cut.RegionError, match="loop body"):
            region_inputs.boundary_values(runner, program, [r])
        ins, = region_inputs.boundary_inputs(runner, program, [r])  # random ones for a body region
        assert [a.shape for a in ins] == [tuple(s.shape) for s in r.program.in_specs]
    assert 0 < region_cut.site_bounds(prof, program)[inner] <= 1


def test_the_cutter_tells_a_body_site_without_cutting_it():
    x = np.eye(16, dtype=np.float32) * 0.5
    program = _augment(_loop, x, x)
    cutter = region_cut.RegionCutter(program)
    n = len(driver.list_alternatives(program))
    told = [cutter.in_body(s) for s in range(n)]
    assert any(told) and not all(told)  # the loop's sites and main's
    assert told == [r.in_body for r in cutter.cut(list(range(n)))]


def test_sites_in_different_blocks_fall_back_to_the_whole_program():
    x = np.eye(16, dtype=np.float32) * 0.5
    program = _augment(_loop, x, x)
    alts = driver.list_alternatives(program)
    inner = next(a.index for a in alts if "fold_transpose_into_dot_lhs" in a.labels and a.op.block != program.body)
    outer = next(a.index for a in alts if a.op.block == program.body)
    r = region_cut.cut_region(program, [outer, inner])
    assert r.whole and "different blocks" in r.reason and r.share == 1.0
    after = r.after({inner: 1})
    assert "fold_transpose_into_dot_lhs" in after.applied
    runner = InProcess()
    (ins, outs), = region_inputs.boundary_values(runner, program, [r])
    runner.set_inputs("w", ins)
    assert all(np.array_equal(a, b) for a, b in zip(runner.run(r.before().text(), "w"), outs))
    res, = region_timing.evaluate_regions(runner, [region_cut.Candidate(r, {inner: 1})], inputs=[ins])
    assert not res.error and res.predicted == pytest.approx(res.ratio)


def test_evaluation_gives_ratios_and_the_predicted_whole_ratio(mlp):
    program, prof = mlp
    regions = region_cut.cut_regions(program, [_site(program, "fold_transpose_into_dot_rhs")], prof)
    cands = [c for r in regions for c in r.candidates()]
    inputs = region_inputs.boundary_inputs(InProcess(), program, regions)
    res, = region_timing.evaluate_regions(InProcess(), cands, inputs=inputs)
    assert not res.error and res.ratio > 0 and res.before_s > 0 and res.compile_s > 0
    assert res.predicted == pytest.approx(1 - res.share * (1 - res.ratio))
    assert res.predicted_from_time(2.0) == pytest.approx(1 + (res.after_s - res.before_s) / 2.0)
    on_executor, = region_timing.evaluate_regions_on(LocalExecutor(workers=1), cands, inputs=inputs)
    assert not on_executor.error and on_executor.ratio > 0


def _fake_profile(program, shares: dict) -> Profile:
    """A profile whose kernels are the ops named in `shares` (op name -> share), one each."""
    g = region_cut._Graph(program)
    kernels = []
    for name, share in shares.items():
        ops = tuple(i for i, n in enumerate(g.names) if n == name)
        kernels.append(Kernel(name, "fusion", "other", share, 1.0, share, ops=ops,
                              op_kinds={name: len(ops)}))
    return Profile("fake", "cpu", 1, "test", kernels, 1.0)


def test_bounds_order_sites_and_skip_the_negligible():
    x = np.ones((64, 64), np.float32)
    program = _augment(_hot_and_cold, x, x, np.ones(4, np.float32))
    hot = _site(program, "fold_transpose_into_dot_lhs")
    cold = _site(program, "broadcast_of_broadcast")
    prof = _fake_profile(program, {"stablehlo.dot_general": 0.95, "stablehlo.broadcast_in_dim": 0.002,
                                   "stablehlo.multiply": 0.048})
    bounds = region_cut.site_bounds(prof, program)
    assert bounds[hot] == pytest.approx(0.95) and bounds[cold] == pytest.approx(0.002)
    order = region_cut.order_sites(bounds)
    assert order[0] == hot and all(order.index(s) < order.index(cold) for s in bounds if bounds[s] > bounds[cold])
    kept = region_cut.skip_negligible(bounds)
    assert hot in kept and cold not in kept
    assert region_cut.skip_negligible(bounds, min_time_fraction=0.0) == region_cut.order_sites(bounds)


def test_bounds_from_a_measured_profile_put_the_hot_site_first():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((384, 384)).astype(np.float32)
    program = _augment(_hot_and_cold, x, x, np.ones(4, np.float32))
    prof = profile_program(region_cut.baseline(program), runs=3, patterns=())
    bounds = region_cut.site_bounds(prof, program)
    hot = _site(program, "fold_transpose_into_dot_lhs")
    cold = _site(program, "broadcast_of_broadcast")
    assert region_cut.order_sites(bounds)[0] == hot and bounds[hot] > 0.5 > bounds[cold]


def test_a_profile_of_another_program_is_rejected(mlp):
    program, _ = mlp
    x = np.ones((8, 8), np.float32)
    other = _augment(_hot_and_cold, x, x, np.ones(4, np.float32))
    prof = _fake_profile(other, {"stablehlo.transpose": 1.0})
    prof.kernels[0].ops = (0, 1, 2)
    with pytest.raises(region_cut.RegionError, match="does not fit"):
        region_cut.cut_region(program, 0, prof)
    with pytest.raises(region_cut.RegionError, match="out of range"):
        region_cut.cut_region(program, 999)


def _quadratic_form(v, a, b):
    return v.T @ (a @ b) @ v


def test_a_site_is_bounded_by_the_producer_its_rewrite_makes_dead():
    """`v.T @ (A @ B)` reassociated to `(v.T @ A) @ B` reads `A @ B` in no choice but the
    original, so the 512^3 dot (the whole runtime) is what the site can save; it used to get
    only the matrix-vector products (0.07 % of the time), and the search skipped it."""
    v = np.ones((512, 1), np.float32)
    a = np.ones((512, 512), np.float32)
    program = _augment(_quadratic_form, v, a, a)
    g = region_cut._Graph(program)
    big = next(i for i, op in enumerate(g.ops) if op.name == "stablehlo.dot_general"
               and all(t.shape == [512, 512] for t in (o.type for o in op.operands)))
    shares = [0.97 if g.indices(big) == [k] else 0.03 / len(g.names) for k in range(len(g.names))]
    kernels = [Kernel(f"k{k}", "fusion", "other", share, 1.0, share, ops=(k,), op_kinds={name: 1})
               for k, (name, share) in enumerate(zip(g.names, shares))]
    prof = Profile("fake", "cpu", 1, "test", kernels, 1.0)
    site = _site(program, "reassociate_right_to_left")
    assert region_cut.site_bounds(prof, program)[site] > 0.97
    assert big in region_cut._matched(g, region_cut._sites(program)[site])
    # an input that something else also reads stays outside: the transpose of v feeds another site
    transpose = next(i for i, op in enumerate(g.ops) if op.name == "stablehlo.transpose")
    assert transpose not in region_cut._matched(g, region_cut._sites(program)[site])


def _convex_neighbours_by_closure(g, members):
    """The plain rule `_convex_neighbours` implements: a neighbour is added when the convex
    closure with it grows by exactly it (one closure per neighbour)."""
    core = region_cut._convex(g, members)
    if len(core) > region_cut.NEIGHBOURS_UP_TO:
        return core
    for j in sorted(region_cut._fusible_neighbours(g, members) - core):
        if len(region_cut._convex(g, core | {j})) == len(core) + 1:
            core.add(j)
    return core


def test_neighbours_and_cutter_agree_with_the_plain_rules():
    """On a train step (forward ops read far below by the backward pass), every site's
    neighbours are those of the one-closure-per-neighbour rule, and a `RegionCutter` reused
    over batches cuts the regions `cut_region` cuts alone."""
    from shlo_env import corpus

    program = driver.augment(corpus.load("zoo/flax_mnist_cnn_train"))
    g = region_cut._Graph(program)
    sites = [s for s in region_cut._sites(program) if s.block == program.body]
    assert len(sites) > 50
    grew = 0
    for site in sites:
        matched = region_cut._matched(g, site)
        fast = region_cut._convex_neighbours(g, set(matched))
        assert fast == _convex_neighbours_by_closure(g, set(matched)), site.index
        grew += len(fast) > len(region_cut._convex(g, matched))
    assert grew > 0  # some neighbours were taken, so both branches of the rule ran
    cutter = region_cut.RegionCutter(program)
    picked = [s.index for s in sites[::max(1, len(sites) // 12)]]
    batched = cutter.cut(picked[:6]) + cutter.cut(picked[6:])
    alone = [region_cut.cut_region(program, s) for s in picked]
    assert [(r.ops, r.whole, r.inputs, r.outputs) for r in batched] == \
        [(r.ops, r.whole, r.inputs, r.outputs) for r in alone]


def test_the_closure_and_the_scan_find_the_same_paths(monkeypatch):
    """The bitmask closure (`region._Closure`) gives the sets the scan of the span gives, on a
    train step's matched ops, and so the same regions."""
    from shlo_env import corpus

    program = driver.augment(corpus.load("zoo/flax_mnist_cnn_train"))
    g = region_cut._Graph(program)
    assert g.closure is not None
    monkeypatch.setattr(region_cut, "CLOSURE_OPS", 0)
    scanned = region_cut._Graph(program)
    assert scanned.closure is None
    sites = [s for s in region_cut._sites(program) if s.block == program.body]
    for site in sites[::7]:
        core = region_cut._core(g, site)
        lo, hi = max(0, min(core) - 20), min(len(g.ops) - 1, max(core) + 20)
        assert region_cut._outside_paths(g, core, lo, hi) == region_cut._outside_paths(scanned, core, lo, hi), site.index
    picked = [s.index for s in sites[::max(1, len(sites) // 8)]]
    fast = region_cut.cut_regions(program, picked)
    monkeypatch.setattr(region_cut._Graph, "closure", None)
    assert [(r.ops, r.inputs, r.outputs) for r in fast] == \
        [(r.ops, r.inputs, r.outputs) for r in region_cut.cut_regions(program, picked)]


def test_a_region_over_max_ops_is_not_cut():
    from shlo_env import corpus

    program = driver.augment(corpus.load("zoo/flax_mnist_cnn_train"))
    sites = [s.index for s in region_cut._sites(program) if s.block == program.body]
    cutter = region_cut.RegionCutter(program)
    full = cutter.cut(sites)
    limited = cutter.cut(sites, max_ops=20)
    nonconstant = [sum(cutter.graphs.main.ops[i].name != "stablehlo.constant" for i in r.ops) for r in full]
    over = [r.oversize for r in limited]
    assert any(over) and not all(over)
    for r, lim, n in zip(full, limited, nonconstant):
        if lim.oversize:  # put off: nothing built, and cut in full it is indeed over the limit
            assert n > 20 and not lim.local and "over 20 ops" in lim.reason
        elif not r.whole:
            assert (lim.ops, lim.inputs) == (r.ops, r.inputs)



def test_a_region_already_over_max_ops_skips_the_search_for_derived_inputs(monkeypatch):
    """Finding derived inputs only adds ops, and on regions grown to hundreds of ops it was
    nearly all the cutting: a region over the limit before it is not searched for them, and
    the decisions stay those of the full cut."""
    from shlo_env import corpus

    program = driver.augment(corpus.load("zoo/flax_mnist_cnn_train"))
    sites = [s.index for s in region_cut._sites(program) if s.block == program.body]
    cutter = region_cut.RegionCutter(program)
    full = [(r.oversize, r.whole, r.ops) for r in cutter.cut(sites, max_ops=20)]
    sizes = []
    real = region_cut._with_derived_inputs

    def counting(g, members, *a, **k):
        sizes.append(len(members))
        return real(g, members, *a, **k)

    monkeypatch.setattr(region_cut, "_with_derived_inputs", counting)
    again = cutter.cut(sites, max_ops=20)
    assert sizes and max(sizes) <= 20  # never called on a region already over the limit
    assert [(r.oversize, r.whole) for r in again] == [(o, w) for o, w, _ in full]
    assert [r.ops for r in again if not r.oversize] == [ops for o, _, ops in full if not o]

def test_one_region_is_timed_in_one_run_and_a_bad_alternative_fails_alone(mlp, monkeypatch):
    """`evaluate_regions` judges a region's control and alternatives in one interleaved run;
    an alternative that does not compile gets its own error, the others their ratios."""
    program, prof = mlp
    r, = region_cut.cut_regions(program, [_site(program, "fold_transpose_into_dot_rhs")], prof)
    times = []

    class Counting(InProcess):
        def time_each(self, items, *a, **k):
            times.append(len(items))
            return super().time_each(items, *a, **k)

    class Unparsable:
        def text(self):
            return "module { this is not stablehlo }"

    broken: dict = {}  # the choices of the candidate whose after does not compile
    after = region_cut.Region.after
    monkeypatch.setattr(region_cut.Region, "after", lambda self, c: Unparsable() if c is broken else after(self, c))
    good = [region_cut.Candidate(r, {})] + r.candidates()
    cands = good + [region_cut.Candidate(r, broken)]
    results = region_timing.evaluate_regions(Counting(), cands, inputs=[region_inputs.random_inputs(r)] * len(cands))
    assert times == [len(good) + 1]  # the before and every good after, once
    assert all(not res.error and res.ratio > 0 for res in results[:-1])
    assert results[0].before_s == results[1].before_s  # one before for the group
    assert results[-1].error and np.isnan(results[-1].ratio)


def _shared_transpose(x, w):
    """A transpose read by a dot and, through a long chain, by that dot's other operand: the
    shape of a forward-pass transpose read again by a backward dot."""
    t = jnp.transpose(x)
    h = t @ w
    for _ in range(2 * region_cut.FAR_SPAN):
        h = jnp.sin(jnp.cos(h))
    return t @ h


def test_a_far_shared_transpose_stays_outside_the_region():
    # the last dot folds the transpose; it stays alive for `t @ w`, and h depends on it
    # through a chain longer than FAR_SPAN: the region is the dot, not the chain in between.
    x = np.random.default_rng(0).standard_normal((32, 32)).astype(np.float32)
    program = _augment(_shared_transpose, x, x)
    site = [a.index for a in driver.list_alternatives(program) if "fold_transpose_into_dot_lhs" in a.labels][-1]
    g = region_cut._Graph(program)
    s = region_cut._sites(program)[site]
    changed, far = region_cut._changed(g, s)
    assert far and all(g.ops[i].name == "stablehlo.transpose" for i in far)
    assert len(region_cut._convex(g, region_cut._matched(g, s))) > 2 * region_cut.FAR_SPAN  # what the rule avoids
    r = region_cut.cut_region(program, site)
    assert not r.whole and len(r.ops) < region_cut.FAR_SPAN and not far & set(r.ops)
    # the cut stands alone and computes what the program computes there, before and after
    runner = InProcess()
    (ins, outs), = region_inputs.boundary_values(runner, program, [r])
    runner.set_inputs("b", ins)
    assert all(_same_values(a, b, r.before().text()) for a, b in zip(runner.run(r.before().text(), "b"), outs))
    choice = next(k for k, lab in enumerate(r.labels[site]) if k and "transpose" in lab)
    after = runner.run(r.after({site: choice}).text(), "b")
    assert all(np.allclose(a, b, rtol=1e-4, atol=1e-4) for a, b in zip(after, outs))


class _Recorder:
    """A runner that sleeps instead of compiling and timing, and logs when it did which."""

    def __init__(self, name, log, compile_s, fail_on=None):
        import threading

        self.name, self.log, self.compile_s, self.fail_on = name, log, compile_s, fail_on
        self.lock = threading.Lock()  # its turn (`Worker.turn`)

    def turn(self):
        return self.lock

    def set_inputs(self, key, arrays):
        pass

    def _busy(self, kind, seconds):
        import time

        t0 = time.perf_counter()
        time.sleep(seconds)
        self.log.append((kind, self.name, t0, time.perf_counter()))

    def run(self, text, key, *a, **k):
        from shlo_env.execute.runners import CandidateError, FailureKind

        if text == self.fail_on:
            raise CandidateError(FailureKind.COMPILE, "does not compile")
        self._busy("compile", self.compile_s)

    def time(self, texts, key, timing=None, *a, **k):
        from shlo_env.execute.runtime import Timing

        self._busy("time", 0.03)
        return [Timing(1e-3 * (1 + len(t) % 3), 1e-3, None, 3, [1e-3] * 3) for t in texts]


def test_helpers_compile_side_by_side_and_every_timing_runs_alone():
    """`judge_groups`: one group per runner compiles at the same time; the timings run one
    after another with no compile in flight, a helper's under the first runner's turn; a
    group whose before fails gets its errors and the others their results."""
    log: list = []
    main, helper = _Recorder("main", log, 0.05), _Recorder("helper", log, 0.15, fail_on="bad-before")
    held = []
    time_of = helper.time
    helper.time = lambda *a, **k: (held.append(main.lock.locked()), time_of(*a, **k))[1]
    jobs = [([], f"before{i}", [f"after{i}a", f"after{i}b"]) for i in range(3)] + [([], "bad-before", ["x"])]
    out = region_timing.judge_groups([main, helper], jobs, per_runner=1)
    assert [len(recs) for recs in out] == [2, 2, 2, 1]
    assert all("error" not in rec and rec["before"][0] > 0 for recs in out[:3] for rec in recs)
    assert "does not compile" in out[3][0]["error"]
    compiles = [(s, e, who) for kind, who, s, e in log if kind == "compile"]
    timings = [(s, e) for kind, _, s, e in log if kind == "time"]
    assert len(timings) == 3 and held == [True]  # two rounds: groups 0 and 2 on main, 1 on the helper
    assert not any(s < te and ts < e for s, e, _ in compiles for ts, te in timings)
    first_main = next((s, e) for s, e, who in compiles if who == "main")
    first_helper = next((s, e) for s, e, who in compiles if who == "helper")
    assert first_main[0] < first_helper[1] and first_helper[0] < first_main[1]  # side by side


def test_a_round_spreads_the_longest_texts_first_over_the_runners():
    jobs = [([], "b" * n, ["a" * n]) for n in (1, 9, 5, 4)]
    owner = region_timing._spread(jobs, 2)
    assert owner == {1: 0, 2: 1, 3: 1, 0: 0}  # 9 | 5, then 4 to the lighter, then 1


def test_no_region_request_runs_past_the_searchs_deadline():
    """A region with a long loop took 44 s of a 60 s budget: each request gets what is left of
    the deadline as its timeout, and a group not started by then is not judged."""
    import time

    log: list = []
    timeouts: list = []
    main, helper = _Recorder("main", log, 0.2), _Recorder("helper", log, 0.2)
    run_of = main.run
    main.run = lambda text, key, *a, timeout_s=None, **k: (timeouts.append(timeout_s), run_of(text, key))[1]
    jobs = [([], f"before{i}", [f"after{i}"]) for i in range(6)]
    deadline = time.perf_counter() + 0.3
    out = region_timing.judge_groups([main, helper], jobs, per_runner=1, deadline=deadline)
    assert len(out) == 6 and "error" not in out[0][0]  # the first round ran
    assert all("deadline came first" in recs[0]["error"] for recs in out[2:])
    assert timeouts and all(t is not None and t <= 0.5 for t in timeouts)  # what is left, 0.5 s at least
    alone = region_timing.judge_groups([main], jobs[:2], deadline=time.perf_counter() - 1)
    assert all("deadline came first" in recs[0]["error"] for recs in alone)


def test_random_region_inputs_are_cut_from_one_block_and_keep_every_dtype(monkeypatch):
    """Floats of 32 bits or less are slices of one N(0,1) block at random offsets (a long one
    repeats it); the others are drawn as `runtime.random_inputs` draws them."""
    from types import SimpleNamespace

    import ml_dtypes

    monkeypatch.setattr(region_inputs, "BLOCK", 1 << 10)
    region_inputs._normal_block.cache_clear()
    specs = [jax.ShapeDtypeStruct(shape, t) for shape, t in [
        ((8, 16), jnp.float32), ((8, 16), jnp.float32), ((3000,), jnp.float32), ((5,), jnp.bfloat16),
        ((5,), jnp.float16), ((4,), jnp.float64), ((6,), jnp.int32), ((3,), jnp.bool_), ((2,), jnp.complex64)]]
    region = SimpleNamespace(program=SimpleNamespace(in_specs=specs))
    try:
        xs = region_inputs.random_inputs(region, seed=3)
        block = region_inputs._normal_block(3)
        assert [(x.shape, x.dtype) for x in xs] == [(s.shape, np.dtype(s.dtype)) for s in specs]
        assert not np.array_equal(xs[0], xs[1])  # two inputs of one spec: other offsets
        for x in xs[:3]:  # each a run of the block's values, wrapping round at its end
            start = int(np.flatnonzero(block == x.flat[0])[0])
            np.testing.assert_array_equal(x.ravel(), np.resize(np.roll(block, -start), x.size))
        assert xs[3].dtype == ml_dtypes.bfloat16 and np.all(np.isfinite(xs[3].astype(np.float32)))
        assert np.all(np.abs(xs[6]) <= 8) and xs[7].dtype == np.bool_ and xs[8].dtype == np.complex64
        again = region_inputs.random_inputs(region, seed=3)
        assert all(np.array_equal(a, b) for a, b in zip(xs, again))  # a seed gives the same inputs
    finally:
        region_inputs._normal_block.cache_clear()
