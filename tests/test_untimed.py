"""Why a candidate went untimed is recorded (Evaluation, `Evaluator.untimed`, the search's
result, the results database and the bench report). Timings are modelled (`ModelWorker` of
test_search.py); nothing here is timed."""

from __future__ import annotations

import json
import re
import sqlite3
import time

import numpy as np
from test_search import ModelWorker, make_ctx

import shlo_env as se
from shlo_env.bench.report import SweepResult, markdown_report
from shlo_env.execute.runners import CandidateError
from shlo_env.measure.results_db import ResultsDB, measurement_row
from shlo_env.search.acceptance import decide as _decide
from shlo_env.search.result import ProgramResult


def chain(A, B, v):
    return (A @ B) @ v  # reassociate_left_to_right: one candidate


class DeadlineDuringTiming(ModelWorker):
    """The search's hard deadline arrives while a candidate is timed against the original."""

    evaluator = None

    def time(self, texts, input_key, timing=None, disabled_passes=(), timeout_s=None):
        if len(texts) > 1 and texts[0] != texts[1]:
            self.evaluator.hard_deadline = time.perf_counter()
            raise CandidateError("timeout", "no answer within 0.5 s")
        return super().time(texts, input_key, disabled_passes=disabled_passes)


def _candidate_ctx():
    rng = np.random.default_rng(0)
    program = se.lower(chain, *[rng.standard_normal(s).astype(np.float32) for s in [(32, 32), (32, 32), (32, 1)]])
    worker = DeadlineDuringTiming()
    ctx, _ = make_ctx(program, worker, patterns=["reassociate_left_to_right"])
    worker.evaluator = ctx.evaluator
    exp = ctx.expand(ctx.root)
    state = ctx.child(exp, [1] * len(exp.dims))
    assert state is not None
    return ctx, state


def test_a_candidate_whose_timing_hit_the_deadline_says_so():
    ctx, state = _candidate_ctx()
    ev = ctx.evaluator.evaluate(state.program, hash=state.hash)
    assert ev.ok and not ev.timed and ev.verified is not None  # verified, kept for a later timing
    assert ev.untimed.startswith("budget: the search's hard deadline came during the request")
    assert ctx.evaluator.untimed() == {"budget": 1}
    res = ProgramResult(name="chain", strategy="pick-first", candidates_evaluated=1)
    res.untimed = ctx.evaluator.untimed()
    assert not _decide(res, ctx.evaluator, ctx.evaluator.cache[ctx.evaluator.original_key], 2, 0.9, True)
    assert res.reason == ("no candidate was verified faster than the original; not timed: 1 candidate (budget)")


class DeadlineDuringVerification(ModelWorker):
    """The hard deadline arrives while a candidate (not the original) is run for verification."""

    evaluator = None
    original = ""

    def run(self, text, input_key, disabled_passes=(), timeout_s=None):
        if text != self.original and self.evaluator.hard_deadline is not None:
            self.evaluator.hard_deadline = time.perf_counter()
            raise CandidateError("timeout", "no answer within 0.5 s")
        return super().run(text, input_key, disabled_passes)


def test_a_candidate_whose_verification_hit_the_deadline_counts_until_verified():
    ctx, state = _candidate_ctx()
    worker = DeadlineDuringVerification()
    ev = ctx.evaluator
    worker.evaluator, worker.original = ev, ev.baseline_text
    ev.verifier.originals()  # decides the input sets (shlo_env.measure.verify) before the runner changes
    ev.worker = ev.verifier.runner = worker
    for key, arrays in zip(ev.verifier.keys, ev.verifier.sets):
        worker.set_inputs(key, arrays)
    ev.hard_deadline = time.perf_counter() + 60
    first = ev.evaluate(state.program, hash=state.hash, time_it=False)
    assert not first.ok and first.failure == "budget" and ev.untimed() == {"budget": 1}
    ev.hard_deadline = None  # a later request without a deadline verifies it
    again = ev.evaluate(state.program, hash=state.hash, time_it=False)
    assert again.ok and ev.untimed() == {"not asked": 1}


def test_a_candidate_only_verified_says_not_asked():
    ctx, state = _candidate_ctx()
    ev = ctx.evaluator.verify_only(state.program)
    assert ev.ok and not ev.timed and ev.untimed.startswith("not asked")
    assert ctx.evaluator.untimed() == {"not asked": 1}


def test_the_results_db_and_the_report_show_untimed_candidates(tmp_path):
    env = {"env_id": "e1", "hostname": "h", "device_kind": "cpu", "cpu_model": "x", "jax": "0", "jaxlib": "0"}
    rec = {"original_hash": "h", "name": "column_sums", "ratio": 1.0, "returned_original": True, "identical": True,
           "untimed": {"budget": 1}, "reason": "no candidate was verified faster than the original; not timed: "
                                               "1 candidate (budget)", "baseline": {"full": 1e-3}}
    row = measurement_row(rec, dataset="examples", uri="u", strategy="auto", config={}, cfg_key="k", env=env,
                          profile=None, peaks=None, executor="local", sweep_id=None, started_at="", finished_at="")
    assert json.loads(row["untimed"]) == {"budget": 1}
    result = SweepResult([row], [], None, {**env, "cpu_count": 2, "shlo_env": "0"}, (None, None, "none"), 1, 0, 1,
                         1.0)
    md = markdown_report(result, {}, {})
    assert "## Verified candidates left untimed" in md and re.search(r"\| column_sums +\| budget: 1 +\|", md)


def test_an_older_database_gets_the_untimed_column(tmp_path):
    path = tmp_path / "old.sqlite"
    with ResultsDB(path):
        pass
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE measurements DROP COLUMN untimed")  # as written before the column existed
    conn.commit()
    conn.close()
    with ResultsDB(path) as db:
        cols = {r[1] for r in db.conn.execute("PRAGMA table_info(measurements)")}
    assert "untimed" in cols


def test_a_search_that_reached_no_candidate_says_where_the_time_went():
    ctx, _state = _candidate_ctx()
    res = ProgramResult(name="column_sums", strategy="exhaustive", candidates_evaluated=0, search_s=0.5, total_s=7.5)
    assert not _decide(res, ctx.evaluator, ctx.evaluator.cache[ctx.evaluator.original_key], 2, 0.9, True)
    assert res.reason == ("the search evaluated no whole-program candidate in its 0.5 s (after 7.0 s timing the "
                          "original against itself and expanding it)")
    res.strategy_info = {"region_candidates": 7}
    _decide(res, ctx.evaluator, ctx.evaluator.cache[ctx.evaluator.original_key], 2, 0.9, True)
    assert "in its 0.5 s (7 region candidates judged; after 7.0 s" in res.reason
