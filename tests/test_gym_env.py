"""The Gymnasium environment `shlo_env/Rewrite-v0`.

Sub-graph programs: the corpus's `inst-10-20` dataset when its data is present, else the drawn
random programs (`programs="random"`, small programs with the motifs patterns look for).
"""

import json
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")

from gymnasium.utils.env_checker import check_env  # noqa: E402

from shlo_env.research import gym_env  # noqa: E402
from shlo_env.research.gym_env import RewriteEnv, cost_seconds, make_env  # noqa: E402
from shlo_env.ir.program import lower  # noqa: E402


def matmul_chain(A, B, v):
    return (A @ B) @ v


@pytest.fixture(scope="module")
def chain_program():
    rng = np.random.default_rng(0)
    return lower(matmul_chain, *[rng.standard_normal(s).astype(np.float32)
                                 for s in ((32, 32), (32, 32), (32, 1))])


def _masked(env, info):
    return env.action_space.sample(mask=tuple(info["action_mask"]))


def test_check_env_passes_without_warnings(subgraph_dataset):
    env = RewriteEnv({"programs": subgraph_dataset, "random_programs": 8})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True)
    gym_warnings = [str(w.message) for w in caught if "gymnasium" in str(w.filename) or "env_checker" in str(w.message)]
    assert gym_warnings == []
    env.close()


def test_registered_and_made_through_gym(chain_program):
    assert gym_env.ENV_ID in gym.registry
    env = gym.make(gym_env.ENV_ID, config={"programs": [chain_program]}, render_mode="ansi")
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    text = env.render()
    assert "shlo_env.alternatives" in text and "alternatives #0" in text
    # check_env through the wrapper stack, render modes included (spec.make works)
    check_env(env.unwrapped)
    env.close()


def test_importing_shlo_env_does_not_need_gymnasium():
    code = "import sys, shlo_env, shlo_env.research.env, shlo_env.learn.observe, shlo_env.research.replay, shlo_env.research.show; " \
           "sys.exit(1 if 'gymnasium' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_config_dict_convention(chain_program):
    env = make_env({"programs": [chain_program], "max_alternatives": 4, "max_choices": 3})
    assert env.action_space.nvec.tolist() == [3] * 4
    assert env.observation_space["action_mask"].shape == (4, 3)
    with pytest.raises(TypeError, match="unknown config keys"):
        RewriteEnv({"programs": "examples", "rewrad": "runtime"})
    with pytest.raises(ValueError, match="reward must be one of"):
        RewriteEnv({"reward": "speed"})
    # kwargs work too (gym.make passes them that way)
    assert RewriteEnv(programs=[chain_program], reward="runtime").config.reward == "runtime"


def test_predicted_reward_is_the_learned_models_step_estimate(chain_program):
    from shlo_env.learn.model import predicted_scores

    env = RewriteEnv({"programs": [chain_program], "reward": "predicted"})
    obs, info = env.reset(seed=0)
    action = (info["action_mask"].sum(axis=1) > 1).astype(np.int64)
    decisions = [int(a) for a in action[:env.graph.num_alternatives]]
    s = predicted_scores(env.graph, [[0] * len(decisions), decisions])  # before the step changes the graph
    obs, reward, terminated, truncated, info = env.step(action)
    assert np.isfinite(reward) and reward < 1.0 and "error" not in info
    assert reward == pytest.approx(1.0 - np.exp(s[1] - s[0]), rel=1e-5, abs=1e-6)
    assert "reassociate_left_to_right" in env.program.applied  # the step was applied as usual


def test_a_registered_reward_class_is_chosen_by_name(chain_program, monkeypatch):
    from shlo_env.research import gym_rewards

    class StepCount(gym_rewards.Reward):  # reset/update/episode_end, as CompilerGym's rewards
        name = "step_count"

        def reset(self, env):
            self.steps = 0
            return {"step_count": 0}

        def update(self, env, prev, new, decisions):
            self.steps += 1
            return float(self.steps)

        def episode_end(self, env):
            return -1.0

    monkeypatch.setitem(gym_rewards.REWARDS, StepCount.name, StepCount)
    env = RewriteEnv({"programs": [chain_program], "reward": "step_count", "max_steps": 1})
    obs, info = env.reset(seed=0)
    assert info["step_count"] == 0 and isinstance(env.reward_fn, StepCount)
    action = (info["action_mask"].sum(axis=1) > 1).astype(np.int64)
    obs, reward, terminated, truncated, info = env.step(action)
    assert (terminated or truncated) and reward == -1.0 and env.reward_fn.steps == 1  # the episode's end pays
    assert env.record.total_reward == pytest.approx(-1.0)


def test_cost_seconds_has_one_policy_for_a_missing_cost():
    from shlo_env.measure import roofline
    from shlo_env.search.cost_model import roofline as estimate
    from shlo_env.execute.worker import CandidateError

    assert roofline.cost_seconds({"flops": 2e9, "bytes": 1e9}, 1e9, 1e9) == pytest.approx(3.0)
    for missing in ({"flops": float("nan"), "bytes": 1e9}, {"flops": 1e9}, {"flops": 1.0, "bytes": 1.0, "error": "x"}):
        assert roofline.cost_seconds(missing, 1e9, 1e9) is None
        assert roofline.floor_s(missing, 1e9, 1e9) is None  # no floor in the report
        assert estimate(missing, (1e9, 1e9, 1e9)) == float("inf")  # ranked last by the cost model
        with pytest.raises(CandidateError, match="no cost analysis"):
            cost_seconds(missing, 1e9, 1e9)  # the gym step fails


def test_pick_first_episode_improves_the_cost_model(chain_program):
    env = RewriteEnv({"programs": [chain_program]})
    obs, info = env.reset(seed=0)
    assert info["num_alternatives"] >= 1
    assert np.array_equal(obs["action_mask"], info["action_mask"])
    c0 = info["cost_s"]
    total, steps = 0.0, 0
    while True:
        action = (info["action_mask"].sum(axis=1) > 1).astype(np.int64)  # choice 1 where there is one
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        steps += 1
        if terminated or truncated:
            break
    assert total > 0.5  # (A@B)@v -> A@(B@v): most of the flops go
    final = cost_seconds(env.env.cost(env.program, optimized=False), 1e11, 2e10)
    assert total == pytest.approx((c0 - final) / c0, rel=1e-9)  # rewards telescope
    assert "reassociate_left_to_right" in env.program.applied
    assert env.record.final_hash == info["hash"] and len(env.record.steps) == steps


def test_random_agent_100_episodes_over_subgraphs(subgraph_dataset):
    env = RewriteEnv({"programs": subgraph_dataset, "max_steps": 6})
    space = env.observation_space
    lengths, totals, programs = [], [], set()
    for episode in range(100):
        obs, info = env.reset(seed=episode)
        assert space.contains(obs)
        c0, total, steps = info["cost_s"], 0.0, 0
        programs.add(info["program"])
        while True:
            obs, reward, terminated, truncated, info = env.step(_masked(env, info))
            steps += 1
            total += reward
            assert "error" not in info, info.get("error")
            assert info["invalid_choices"] == 0
            assert np.isfinite(reward)
            assert space.contains(obs)
            if terminated or truncated:
                break
        assert steps <= 6 and (terminated or steps == 6)
        final = cost_seconds(env.env.cost(env.program, optimized=False), 1e11, 2e10)
        assert total == pytest.approx((c0 - final) / c0, rel=1e-6, abs=1e-12)
        lengths.append(steps)
        totals.append(total)
    assert len(programs) > 5
    assert max(lengths) > 1  # some episodes went on past the first rewrite
    assert any(t != 0 for t in totals)
    env.close()


def test_invalid_choices_are_kept_as_originals(chain_program):
    env = RewriteEnv({"programs": [chain_program]})
    obs, info = env.reset(seed=0)
    k = info["num_alternatives"]
    action = np.full(env.action_space.shape, env.config.max_choices - 1)  # out of range everywhere
    obs, reward, terminated, truncated, info = env.step(action)
    assert info["invalid_choices"] == k
    assert terminated and reward == 0.0  # all originals: the agent stopped
    assert env.record.steps[-1].stop
    with pytest.raises(Exception, match="episode has ended"):
        env.step(action)


def test_reset_options_program(chain_program, tmp_path):
    env = RewriteEnv({"programs": "examples"})
    obs, info = env.reset(options={"program": chain_program})
    assert info["program"] == "program" and env.env.original.name == chain_program.name
    path = tmp_path / "chain.mlir"
    path.write_text(chain_program.text())
    obs, info = env.reset(options={"program": str(path)})
    assert info["hash"] == env.record.initial_hash
    label = env.sources[3].label
    obs, info = env.reset(options={"program": label})
    assert info["program"] == label
    obs, info = env.reset(options={"program": 2})
    assert info["program"] == env.sources[2].label


def test_pickle_round_trip_mid_episode(subgraph_dataset):
    env = RewriteEnv({"programs": subgraph_dataset, "random_programs": 8})
    for seed in range(20):  # find an episode with a few steps to go
        obs, info = env.reset(seed=seed)
        if info["num_alternatives"]:
            break
    action = (info["action_mask"].sum(axis=1) > 1).astype(np.int64)
    twin = pickle.loads(pickle.dumps(env))
    a = env.step(action)
    b = twin.step(action)
    for x, y in zip(a[0].values(), b[0].values()):
        assert np.array_equal(x, y)
    assert a[1:4] == b[1:4]
    assert a[4]["hash"] == b[4]["hash"]
    # a fresh env pickles too, and a pickled one resets
    again = pickle.loads(pickle.dumps(RewriteEnv({"programs": "random", "random_programs": 4})))
    obs, info = again.reset(seed=1)
    assert again.observation_space.contains(obs)
    for e in (env, twin, again):
        e.close()


def test_records_are_written(tmp_path, chain_program):
    path = tmp_path / "episodes.jsonl"
    env = RewriteEnv({"programs": [chain_program], "record": str(path)})
    for seed in range(3):
        obs, info = env.reset(seed=seed)
        while True:
            obs, r, term, trunc, info = env.step(_masked(env, info))
            if term or trunc:
                break
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert sum(line["kind"] == "episode" for line in lines) == 3
    assert sum(line["kind"] == "end" for line in lines) == 3
    head = lines[0]
    assert head["versions"]["jax"] and head["versions"]["jaxlib"] and head["reward"] == "cost_model"
    assert head["program"]["text"].startswith("module")


def test_graph_truncation_is_reported():
    env = RewriteEnv({"programs": "examples", "max_nodes": 8, "max_edges": 8})
    obs, info = env.reset(options={"program": "examples/low_rank_update"})
    assert info["graph_truncated"] and info["num_nodes"] > 8
    assert env.observation_space.contains(obs)
    assert obs["node_mask"].sum() == 8 and obs["edge_mask"].sum() <= 8


def test_runtime_and_baseline_rewards(chain_program):
    for reward in ("runtime", "baseline"):
        env = RewriteEnv({"programs": [chain_program], "reward": reward, "timing_runs": 3, "timing_warmup": 1})
        obs, info = env.reset(seed=0)
        assert info["time_s"] > 0
        action = (info["action_mask"].sum(axis=1) > 1).astype(np.int64)
        total = 0.0
        while True:
            obs, r, term, trunc, info = env.step(action)
            total += r
            assert np.isfinite(r) and "error" not in info
            if term or trunc:
                break
            if reward == "baseline":
                assert r == 0.0  # only the last step is rewarded
        assert total != 0.0
        env.close()


def test_a_step_xla_rejects_costs_the_step_not_the_agent():
    from jaxlib.mlir import ir

    from shlo_env.patterns.base import Match, Pattern

    class MulToUnknownCall(Pattern):
        """x * y -> a custom call XLA has no implementation for (verifies, fails to compile)."""

        root = "stablehlo.multiply"

        def match(self, op):
            return Match(x=op.operands[0], y=op.operands[1])

        def rewrite(self, b, m):
            attrs = {"call_target_name": ir.StringAttr.get("shlo_env_no_such_target")}
            return b.op("stablehlo.custom_call", [m.x, m.y], [m.x.type], attrs).results[0]

    def f(x, y):
        return x * y + 1.0

    rng = np.random.default_rng(0)
    program = lower(f, *[rng.standard_normal((4, 4)).astype(np.float32) for _ in range(2)])
    env = RewriteEnv({"programs": [program], "patterns": [MulToUnknownCall()], "cost_model": "compiled"})
    obs, info = env.reset(seed=0)
    assert info["num_alternatives"] == 1
    h0 = info["hash"]
    obs, reward, terminated, truncated, info = env.step(np.ones(env.action_space.shape, np.int64))
    assert terminated and reward == env.config.error_reward
    assert "compile" in info["error"]
    assert info["hash"] == h0 and env.env.history == []  # the state is the one before the step
    assert env.record.steps[-1].error and env.record.final_hash == h0
    env.close()
