"""A random agent and pick-first, driven through the Gymnasium interface on sub-graphs.

    python examples/gym_agents.py                          # both policies, 20 episodes each
    python examples/gym_agents.py --policy random --episodes 100 --record episodes.jsonl
    python examples/gym_agents.py --programs inst-10-20    # the corpus's sub-graph dataset

Needs gymnasium (`pip install "gymnasium>=1.0"`). The reward is the cost model by default
(deterministic, no timing); `--reward runtime` times every step in a worker process.
Every episode can be recorded (`--record`) and later replayed and validated:

    from shlo_env.research.replay import read_records, replay, validate
    for rec in read_records("episodes.jsonl"):
        print(replay(rec)); print(validate(rec))
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np

import shlo_env.research.gym_env  # noqa: F401  (registers shlo_env/Rewrite-v0)
from shlo_env.learn.policy import pick_first_agent, random_agent


def default_programs() -> str:
    """The corpus's `inst-10-20` sub-graphs when their data is present, else drawn random programs."""
    try:
        from shlo_env import corpus

        corpus.entries("inst-10-20")
        return "inst-10-20"
    except (ImportError, AttributeError, LookupError):
        return "random"


# uniform over each alternatives op's choices; the HloEnv paper's pick-first (choice 1 everywhere)
POLICIES = {"random": random_agent, "pick-first": pick_first_agent}


def run_episodes(env, policy, episodes: int, seed: int = 0) -> list[dict]:
    """Play `episodes` episodes; one dict per episode (program, steps, return, applied)."""
    env.action_space.seed(seed)
    results = []
    for episode in range(episodes):
        obs, info = env.reset(seed=seed + episode)
        total, steps = 0.0, 0
        while True:
            obs, reward, terminated, truncated, info = env.step(policy(env, obs, info))
            total += reward
            steps += 1
            if terminated or truncated:
                break
        results.append({"episode": episode, "program": info["program"], "steps": steps, "return": total,
                        "applied": list(env.unwrapped.program.applied), "error": info.get("error", "")})
    return results


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--policy", choices=[*POLICIES, "both"], default="both")
    p.add_argument("--episodes", type=int, default=20)
    p.add_argument("--programs", default=None, help="examples | random | inst-10-20 | inst-20-40 | a directory")
    p.add_argument("--reward", default="cost_model", choices=["cost_model", "runtime", "baseline"])
    p.add_argument("--max-steps", type=int, default=8)
    p.add_argument("--record", default=None, help="append every episode to this JSONL file")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    config = {"programs": args.programs or default_programs(), "reward": args.reward,
              "max_steps": args.max_steps, "record": args.record}
    env = gym.make("shlo_env/Rewrite-v0", config=config)
    print(f"programs: {config['programs']} ({len(env.unwrapped.sources)}), reward: {args.reward}")
    for name in (POLICIES if args.policy == "both" else [args.policy]):
        results = run_episodes(env, POLICIES[name], args.episodes, args.seed)
        returns = np.array([r["return"] for r in results])
        print(f"\n{name}: mean return {returns.mean():+.4f}, best {returns.max():+.4f}, "
              f"mean length {np.mean([r['steps'] for r in results]):.1f}, "
              f"errors {sum(bool(r['error']) for r in results)}")
        for r in sorted(results, key=lambda r: -r["return"])[:5]:
            applied = ", ".join(r["applied"]) or "-"
            print(f"  {r['return']:+.4f}  {r['program']:<28} {r['steps']} steps  {applied}")
    env.close()


if __name__ == "__main__":
    main()
