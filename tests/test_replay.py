"""Episode records: JSONL round trip, replay to the same hashes, validation of the result."""

import dataclasses
import json

import numpy as np
import pytest

from shlo_env.research.env import Env
from shlo_env.ir.hashing import dag_hash
from shlo_env.ir.program import lower
from shlo_env.measure.numerics import Numerics
from shlo_env.patterns.base import Match, Pattern
from shlo_env.research.replay import EpisodeRecord, read_records, replay, validate


def low_rank_update(x, W, A, B):
    return x @ (W + A @ B)


def matmul_chain(A, B, v):
    return (A @ B) @ v


def _program(fn, *shapes, seed=0):
    rng = np.random.default_rng(seed)
    return lower(fn, *[rng.standard_normal(s).astype(np.float32) for s in shapes])


def record_episode(program, patterns=None, seed=0, max_steps=4) -> EpisodeRecord:
    """A random-decision episode through Env, recorded the way the gym env records."""
    env = Env(program, patterns=patterns, isolate=False)
    rec = EpisodeRecord.start(env.original, patterns=env.patterns, reward="none")
    rng = np.random.default_rng(seed)
    for _ in range(max_steps):
        env.augment()
        alts = env.alternatives()
        if not alts:
            break
        vec = [int(rng.integers(a.num_choices)) for a in alts]
        if not any(vec):
            vec[int(rng.integers(len(vec)))] = 1 if alts[0].num_choices > 1 else 0
        env.apply(vec)
        rec.add_step(vec, len(alts), env.history[-1].labels, 0.0, env.hash())
    env.strip()
    rec.finish(env.program)
    return rec


@pytest.fixture(scope="module")
def gym_records(tmp_path_factory, subgraph_dataset):
    """20 episodes of a random agent through the Gymnasium env, read back from JSONL."""
    gym_env = pytest.importorskip("shlo_env.research.gym_env")
    path = tmp_path_factory.mktemp("records") / "episodes.jsonl"
    env = gym_env.RewriteEnv({"programs": subgraph_dataset, "record": str(path), "max_steps": 5})
    finals = []
    episode = 0
    while len(finals) < 20:
        obs, info = env.reset(seed=episode)
        episode += 1
        while True:
            obs, r, term, trunc, info = env.step(env.action_space.sample(mask=tuple(info["action_mask"])))
            if term or trunc:
                break
        finals.append(info["hash"])
    env.close()
    records = read_records(path)
    assert len(records) == 20
    return records, finals


def test_replaying_20_recorded_episodes_reproduces_their_final_hashes(gym_records):
    records, finals = gym_records
    moved = 0
    for rec, final in zip(records, finals):
        assert rec.final_hash == final
        res = replay(rec)
        assert res.ok, str(res)
        assert res.final_hash == final and dag_hash(res.program) == final
        moved += final != rec.initial_hash
    assert moved >= 5  # most episodes did change their program


def test_records_carry_versions_and_round_trip(gym_records):
    records, _ = gym_records
    rec = records[0]
    import jax
    import jaxlib

    assert rec.versions["jax"] == jax.__version__ and rec.versions["jaxlib"] == jaxlib.__version__
    assert rec.patterns and rec.reward == "cost_model" and rec.program_text.startswith("module")
    again = EpisodeRecord.from_jsonl(rec.to_jsonl())
    assert dataclasses.asdict(again) == dataclasses.asdict(rec)
    for line in rec.to_jsonl().splitlines():
        assert json.loads(line)["episode"] == rec.episode


def test_validate_passes_on_an_honest_record():
    rec = record_episode(_program(low_rank_update, (8, 32), (32, 32), (32, 8), (8, 32)))
    assert rec.steps and rec.final_hash != rec.initial_hash
    result = validate(rec)  # in a worker process
    assert result.ok, str(result)
    assert result.replay.ok and result.hash_ok and result.equivalent
    assert result.equivalence.tier == Numerics.REASSOCIATE
    assert "validation passed" in str(result)


def test_validate_catches_a_corrupted_final_program():
    rec = record_episode(_program(matmul_chain, (32, 32), (32, 32), (32, 1)))
    assert rec.final_text and "dot_general" in rec.final_text
    # corrupt the stored final program: negate what it returns
    lines = rec.final_text.splitlines()
    ret = next(i for i, line in enumerate(lines) if line.strip().startswith("return"))
    value = lines[ret].split()[1]
    lines.insert(ret, f"    %neg = stablehlo.negate {value} : {lines[ret].rsplit(':', 1)[1].strip()}")
    lines[ret + 1] = lines[ret + 1].replace(f"return {value}", "return %neg")
    bad_text = "\n".join(lines)
    bad = dataclasses.replace(rec, final_text=bad_text)
    result = validate(bad, isolate=False)
    assert not result.ok
    assert result.replay.ok  # the decisions still replay...
    assert not result.hash_ok  # ...but the stored final program is not the one they produce
    assert not result.equivalent and "mismatch" in result.equivalence.detail
    assert "validation FAILED" in str(result) and "FAIL" in str(result)
    # the same corruption passed in directly
    from shlo_env.ir.program import load

    direct = validate(rec, load(bad_text), isolate=False)
    assert not direct.ok and not direct.equivalent


class MulToAdd(Pattern):
    """A deliberately wrong rewrite: x * y -> x + y, claimed EXACT."""

    root = "stablehlo.multiply"

    def match(self, op):
        return Match(x=op.operands[0], y=op.operands[1])

    def rewrite(self, b, m):
        return b.add(m.x, m.y)


def test_validate_catches_a_wrong_rewrite_that_replays_fine():
    def f(x, y):
        return x * y + 1.0

    program = _program(f, (4, 4), (4, 4))
    rec = record_episode(program, patterns=[MulToAdd()], max_steps=1)
    assert rec.steps and rec.steps[0].labels == ["mul_to_add"]
    rep = replay(rec, patterns=[MulToAdd()])
    assert rep.ok  # reproducible...
    result = validate(rec, patterns=[MulToAdd()], isolate=False)
    assert not result.ok and result.replay.ok and result.hash_ok
    assert not result.equivalent  # ...but wrong
    # without the pattern at hand, replay says why it cannot run
    missing = replay(rec)
    assert not missing.ok and "mul_to_add" in missing.detail


def test_replay_detects_divergence():
    rec = record_episode(_program(low_rank_update, (8, 32), (32, 32), (32, 8), (8, 32)), max_steps=3)
    assert rec.steps
    # a tampered decision
    tampered = dataclasses.replace(rec, steps=[dataclasses.replace(s) for s in rec.steps])
    tampered.steps[0].hash = "0" * 16
    res = replay(tampered)
    assert not res.ok and res.diverged_at == 0 and "differs" in res.detail
    # a different source program
    other = dataclasses.replace(rec, program_text=_program(matmul_chain, (32, 32), (32, 32), (32, 1)).text())
    res = replay(other)
    assert not res.ok and "source program" in res.detail
    # a wrong count of alternatives (as if the pattern library had changed)
    fewer = dataclasses.replace(rec, steps=[dataclasses.replace(s) for s in rec.steps])
    fewer.steps[0].num_alternatives += 1
    res = replay(fewer)
    assert not res.ok and "pattern library changed" in res.detail


def test_unfinished_records_replay_to_their_last_step(tmp_path):
    rec = record_episode(_program(low_rank_update, (8, 32), (32, 32), (32, 8), (8, 32)), max_steps=2)
    lines = rec.to_lines()[:-1]  # no "end" line: the episode was cut off
    path = tmp_path / "cut.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    (cut,) = read_records(path)
    assert not cut.finished
    res = replay(cut)
    assert res.ok and res.final_hash == rec.steps[-1].hash
