"""The learned policy example: REINFORCE on the gym env runs, stays finite, reports all agents."""

import importlib.util
import math

import jax
import numpy as np
import pytest

from shlo_env.learn import policy

# The training run and the split read programs through the gym env (the `gym` extra; `.ci/run`
# installs it, the README's test command alone does not).
needs_gym = pytest.mark.skipif(importlib.util.find_spec("gymnasium") is None,
                               reason="the gym extra is not installed (pip install 'shlo_env[gym]')")


def test_policy_respects_the_action_mask():
    params = policy.init_params(jax.random.PRNGKey(0))
    labels = np.array([[policy.bucket("original"), policy.bucket("constant_to_rhs"), 0]] * 2, np.int32)
    mask = np.array([[True, True, False], [True, False, False]])
    feats = np.zeros((2, policy.FEATURES), np.float32)
    z = np.asarray(policy.logits(params, labels, feats, mask))
    assert z[0, 2] < -1e8 and z[1, 1] < -1e8  # masked choices are never taken
    lp, ent = policy.log_prob(params, labels, feats, mask, np.array([1, 0]))
    assert np.isfinite(float(lp)) and float(lp) < 0 and np.isfinite(float(ent))
    # the row without a choice contributes nothing: only row 0's probability counts
    lp0, _ = policy.log_prob(params, labels, feats, mask, np.array([1, 2]))
    assert float(lp0) == float(lp)


@needs_gym
def test_tiny_training_run_is_finite_and_reports_all_three_agents():
    out = policy.experiment(train_programs=3, eval_programs=2, updates=2, episodes_per_update=2, max_steps=2,
                            seeds=[0], eval_seeds=[0], log=lambda m: None)
    assert out["train_programs"] == 3 and out["eval_programs"] == 2
    history = out["policies"][0]["history"]
    assert len(history) == 2 and all(math.isfinite(h["loss"]) and math.isfinite(h["mean_return"]) for h in history)
    agents = {"learned": out["policies"][0]["eval"], **out["baselines"]}
    assert set(agents) == {"learned", "pick-first", "random"}
    for a in agents.values():
        assert a["episodes"] == 2 and math.isfinite(a["mean_return"])


@needs_gym
def test_held_out_programs_share_no_source_with_training():
    from shlo_env import corpus
    from shlo_env.research.gym_env import program_sources
    from shlo_env.learn.dataset import source_of

    sources = program_sources("inst-10-20")
    train, held_out = policy.split_programs(sources, 50, 50)
    origin = {e.uri: source_of(e) for e in corpus.entries("inst-10-20")}
    assert train and held_out
    assert {origin[sources[i].uri] for i in train}.isdisjoint(origin[sources[i].uri] for i in held_out)
