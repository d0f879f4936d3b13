"""One schedule owns the budget (issue 47): its shares, what each phase was given and spent, and
no budget fraction anywhere else."""

import ast
import math
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import shlo_env as se
from shlo_env.measure.timing_policy import SEARCH
from shlo_env.search import schedule
from shlo_env.search.program_search import PHASES, SearchOptions, optimize_program
from shlo_env.search.result import ProgramResult
from shlo_env.search.schedule import PhaseRecord, Schedule

PACKAGE = Path(__file__).resolve().parent.parent / "shlo_env"
#: Shares of something other than the budget (a program's run time), named so.
NOT_BUDGET = set()


def budget_shares(path: Path) -> list[str]:
    """Float constants named `*_SHARE` and parameters named `share` / `*_share` in one module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(getattr(node, "value", None), ast.Constant):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found += [t.id for t in targets if isinstance(t, ast.Name) and t.id.upper().endswith("_SHARE")
                      and isinstance(node.value.value, float)]  # type: ignore[union-attr]
        elif isinstance(node, ast.arguments):
            params = node.posonlyargs + node.args + node.kwonlyargs
            found += [a.arg for a in params if a.arg == "share" or a.arg.endswith("_share")]
    return found


def test_the_detector_finds_constants_and_parameters(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("PROFILE_SHARE = 0.15\nCOUNT_SHARE = 3\n\ndef f(x, share=0.3, *, sweep_share: float = 0.5):\n"
                 "    return x\n")
    assert budget_shares(p) == ["PROFILE_SHARE", "share", "sweep_share"]


def test_no_module_but_the_schedule_holds_a_budget_share():
    found = {str(p.relative_to(PACKAGE)): budget_shares(p) for p in PACKAGE.rglob("*.py")
             if p != PACKAGE / "search" / "schedule.py"}
    found = {k: v for k, v in found.items() if set(v) - NOT_BUDGET}
    assert not found, f"budget shares outside shlo_env/search/schedule.py: {found}"


def test_fixed_phases_share_one_bound():
    plan = Schedule(20.0)
    plan.calibrate(probe_s=0.5, call_s=0.01)
    assert plan.noise_s() == schedule.NOISE * 20.0
    plan.record("probe").spent_s = 4.0  # a slow compile took half of the fixed phases' share
    assert math.isclose(plan.fixed_left(), schedule.FIXED * 20.0 - 4.0)
    # the noise gets what is left once the augment's share is kept
    assert math.isclose(plan.noise_s(), schedule.FIXED * 20.0 - 4.0 - schedule.AUGMENT * 20.0)
    assert plan.random_sets(3) == (3, "")  # verification is never cut for a fast program
    plan.record("originals").spent_s = 3.0
    assert plan.noise_s() == 0.0
    plan.record("augment").spent_s = 1.0
    ok, why = plan.profile_allowed(0.1)
    assert not ok and "0.0 s allowed" in why
    # what a phase outside the fixed ones spends does not count against them
    plan.record("search").spent_s = 100.0
    assert plan.fixed_left() == 0.0 and plan.spent("probe", "originals") == 7.0


def test_a_profile_is_not_stopped_sooner_than_a_worker_restart_would_cost():
    plan = Schedule(30.0)
    plan.calibrate(probe_s=0.3, call_s=0.01)  # compile 0.29 s
    tiny = plan.profile_timeout_s(0.1)
    assert math.isclose(tiny, schedule.WORKER_RESTART_S + 0.29)  # not 0.2 s: stopping it kills the worker
    assert plan.profile_timeout_s(2.0) == 4.0  # twice a larger estimate
    assert plan.profile_timeout_s(4.0) == schedule.PROFILE * 30.0  # within the profile's share
    assert plan.profile_timeout_s(9.0) == 9.0  # never under the estimate it was allowed on


def test_a_slow_call_cuts_rounds_and_sets():
    plan = Schedule(10.0)
    plan.calibrate(probe_s=2.0, call_s=1.0)
    policy, cut = plan.pair_policy(SEARCH)
    assert policy.runs == 2 and policy.warmup == 0 and "rounds per pair" in cut
    n, why = plan.random_sets(3)
    assert n == 1 and "1 random input set instead of 3" in why
    assert plan.compile_s == 1.0


def test_deadlines_are_ordered():
    plan = Schedule(60.0, start=100.0)
    assert plan.search_deadline() <= plan.hard_deadline() < plan.deadline() == 160.0
    assert plan.search_deadline(pair_s=1.0, accept_s=30.0) == plan.hard_deadline() - 30.0
    assert plan.accept_reserve_s(100.0) == schedule.ACCEPT_MAX * 60.0


def test_phase_records_add_up_and_round_trip():
    plan = Schedule(5.0)
    with plan.phase("noise", given_s=1.0):
        time.sleep(0.01)
    with plan.phase("noise", given_s=0.5):
        pass
    plan.cut("noise", "one repeat instead of three")
    plan.cut("noise", "")  # nothing cut: nothing recorded
    (r,) = plan.phases
    assert r.given_s == 1.5 and r.spent_s >= 0.01 and r.cut == "one repeat instead of three"
    assert plan.cuts() == ("noise: one repeat instead of three",)
    assert PhaseRecord.from_record(r.to_record()) == PhaseRecord(r.name, 1.5, round(r.spent_s, 3), r.cut)
    assert "noise" in str(r) and "of 1.5 s" in str(r)


def test_a_search_records_every_phase_and_where_the_budget_went():
    rng = np.random.default_rng(0)
    x, w = (rng.standard_normal((256, 64)).astype(np.float32), rng.standard_normal((64, 64)).astype(np.float32))
    program = se.lower(lambda a, b: jnp.sum(a @ b, axis=0), x, w)
    res = optimize_program(program, SearchOptions(budget_s=10.0, strategy="beam", xla_options=False))
    assert res.status == "ok", res.error
    names = [p["name"] for p in res.phases]
    assert names == [n for n, _ in PHASES][:len(names)] and names[:6] == [n for n, _ in PHASES][:6], names
    spent = sum(p["spent_s"] for p in res.phases)
    assert spent <= res.total_s + 1e-6 and spent >= 0.8 * res.total_s, (spent, res.total_s)
    assert 0.0 < res.candidate_s <= res.total_s and res.candidates_evaluated >= 1
    augment = next(p for p in res.phases if p["name"] == "augment")
    assert augment.get("beside") == "probe", augment  # matched while the worker compiled the original
    text = str(res)
    assert "\n  probe" in text and "candidates" in text and "beside the probe" in text
    back = ProgramResult.from_record(res.to_record())
    assert back.to_record() == res.to_record()


def test_a_search_that_runs_out_of_candidates_says_so():
    """A search that tries every candidate it has well before its deadline ends there, and the
    report says why the budget was not spent (as the bench CSV's `search_ended`)."""
    from shlo_env.bench.report import csv_row

    assert not Schedule(30.0).ended_early(2.0) and Schedule(30.0).ended_early(10.0)
    x = np.ones((64, 16), np.float32)
    program = se.lower(lambda a: jnp.sum(a * 2.0, axis=0), x)
    res = optimize_program(program, SearchOptions(budget_s=20.0, strategy="exhaustive", xla_options=False))
    assert res.status == "ok", res.error
    search = next(p for p in res.phases if p["name"] == "search")
    assert "no candidate left to try" in search.get("ended", ""), search
    assert search["spent_s"] < 10.0 and "ended: exhaustive had no candidate left" in str(res)
    row = csv_row({**res.to_record(), "config": '{"budget_s": 20}'})
    assert row["search_ended"] == search["ended"]
    assert PhaseRecord.from_record(search).to_record() == search
    assert "follow_up" not in res.strategy_info  # a strategy the user named is not followed up


def test_auto_searches_on_with_mcts_when_its_strategy_runs_out_of_candidates():
    x = np.ones((64, 16), np.float32)
    program = se.lower(lambda a: jnp.sum(a * 2.0, axis=0), x)
    res = optimize_program(program, SearchOptions(budget_s=10.0, strategy="auto", xla_options=False))
    assert res.status == "ok", res.error
    assert res.strategy == "exhaustive" and res.strategy_info["follow_up"]["strategy"] == "mcts"
    assert res.strategy_info["follow_up"].get("simulations", 0) >= 1
    search = next(p for p in res.phases if p["name"] == "search")
    assert not search.get("ended") or "exhaustive, then mcts, had no candidate" in search["ended"]
    assert sum(p["spent_s"] for p in res.phases) <= 10.0 * 1.1


def test_a_phase_run_beside_another_counts_only_the_seconds_it_added():
    s = Schedule(30.0)
    t = time.perf_counter()
    with s.phase("probe"):
        time.sleep(0.3)  # the augment: 0.2 s while the probe's request ran, then 0.1 s past its end
        s.beside("augment", 0.3, "probe", overran_s=0.1)
    wall = time.perf_counter() - t
    probe, augment = s.record("probe"), s.record("augment")
    assert augment.spent_s == pytest.approx(0.1) and augment.beside_s == pytest.approx(0.2)
    assert probe.spent_s + augment.spent_s == pytest.approx(wall, abs=1e-3)  # the records add up to the wall
    assert "(and 0.2 s beside the probe)" in str(augment)
    assert PhaseRecord.from_record(augment.to_record()).to_record() == augment.to_record()
    assert s.noise_s() == pytest.approx(0.10 * 30.0)  # augment is done: the noise need not keep its share


def test_xla_actions_have_one_name_and_the_old_one_warns():
    import pytest

    res = ProgramResult(name="p", strategy="beam")
    res.action_tokens = ("cse", "xla_cpu_use_xnnpack=false")
    assert [type(a).__name__ for a in res.actions] == ["DisablePass", "SetOption"]
    assert res.to_record()["disabled_passes"] == ["cse", "xla_cpu_use_xnnpack=false"]
    with pytest.warns(DeprecationWarning, match="action_tokens"):
        assert res.disabled_passes == res.action_tokens


def test_a_fresh_worker_started_by_the_probe_is_not_a_restart():
    """The time kept for a candidate's set-up counts a restarted worker only (one started by
    the probe itself is not), or a fresh search would stop its candidates a compile early."""
    from shlo_env.search.program_search import ProgramSearch, probe

    x = np.ones((8, 8), np.float32)
    run = ProgramSearch(se.lower(lambda a: a @ a, x), SearchOptions(budget_s=10.0), None, None, False)
    try:
        assert probe(run) and run.probe_pid is not None
        assert not run.worker_restarted() and run.setup_s() == 0.0
    finally:
        run.finish()


def test_the_bench_csv_has_a_column_per_phase():
    from shlo_env.bench.report import CSV_COLUMNS, PHASE_COLUMNS, csv_row

    assert len(set(CSV_COLUMNS)) == len(CSV_COLUMNS)  # no phase column shadows another
    assert list(PHASE_COLUMNS) == [name for name, _ in PHASES]
    res = ProgramResult(name="p", strategy="beam", candidate_s=3.0)
    res.phases = [PhaseRecord("probe", spent_s=1.5).to_record(), PhaseRecord("search", 12.0, 11.0).to_record()]
    row = csv_row({**res.to_record(), "config": '{"budget_s": 30}'})
    assert row["phase_probe_s"] == 1.5 and row["phase_search_s"] == 11.0 and row["phase_noise_s"] is None
    assert row["candidate_share"] == 0.1


def test_the_tail_after_the_hard_deadline_is_what_the_final_timing_needs():
    fast = Schedule(60.0, start=0.0)
    fast.calibrate(probe_s=0.5, call_s=1e-3)
    fast.pair_policy(SEARCH)
    slow = Schedule(60.0, start=0.0)
    slow.calibrate(probe_s=3.0, call_s=0.5)
    slow.pair_policy(SEARCH)
    # a fast program's final timing takes little: its search runs to 90 % of the budget
    assert fast.hard_deadline() == pytest.approx(60.0 * (1 - schedule.TAIL_MIN))
    assert fast.search_deadline() == pytest.approx(60.0 * (1 - schedule.TAIL_MIN - schedule.SEARCH_GAP))
    # a slow one keeps what its three side-by-side timings need, at most TAIL_MAX of the budget
    need = schedule.FINAL_MARGIN * 3 * slow.pair_s
    assert slow.hard_deadline() == pytest.approx(60.0 - min(need, schedule.TAIL_MAX * 60.0))
    assert slow.hard_deadline() < fast.hard_deadline()


def test_the_references_are_prefetched_after_the_profile_not_before_it():
    """A slow-to-compile program's float64 references are computed on a thread from the search's
    start: started before the profile, they held the worker while the profile waited for it."""
    from shlo_env.search.program_search import ProgramSearch

    x = np.ones((8, 8), np.float32)
    run = ProgramSearch(se.lower(lambda a: jnp.tanh(a @ a), x), SearchOptions(budget_s=10.0), None, None, False)
    phases = dict(PHASES)
    try:
        assert phases["probe"](run)
        run.schedule.compile_s = 2 * schedule.PREFETCH_COMPILE_S  # as if its compile were slow
        for name in ("originals", "noise", "augment", "profile"):
            assert phases[name](run)
            assert run.evaluator.verifier._prefetch is None and run.evaluator.verifier._references is None
        phases["search"](run)
        assert run.evaluator.verifier._references is not None or run.evaluator.verifier._prefetch is not None
    finally:
        run.finish()
