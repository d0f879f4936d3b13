# %% [markdown]
# # Episode rewards of two agents on sub-graphs
#
# A notebook-style script (run it whole, or cell by cell in an editor that knows `# %%`).
# It plays a random agent and pick-first through `shlo_env/Rewrite-v0`, then plots the return
# of every episode and its running mean. matplotlib is optional: without it the numbers are
# printed. Needs gymnasium.

# %%
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gym_agents import POLICIES, default_programs, run_episodes  # noqa: E402

import gymnasium as gym  # noqa: E402

import shlo_env.research.gym_env  # noqa: E402,F401

EPISODES = int(sys.argv[1]) if len(sys.argv) > 1 else 40
OUT = Path(sys.argv[2]) if len(sys.argv) > 2 else Path("episode_rewards.png")

# %%
env = gym.make("shlo_env/Rewrite-v0", config={"programs": default_programs(), "reward": "cost_model"})
returns = {}
for name, policy in POLICIES.items():
    results = run_episodes(env, policy, EPISODES, seed=0)
    returns[name] = np.array([r["return"] for r in results])
    print(f"{name:>10}: mean return {returns[name].mean():+.4f} over {EPISODES} episodes")
env.close()

# %% [markdown]
# Both agents see the same programs in the same order (same reset seeds), so the curves
# compare episode by episode. A return is the episode's total fractional improvement of the
# cost model, (C(original) - C(final)) / C(original): 0.5 halves the estimated cost.

# %%
def running_mean(x, window=10):
    return np.array([x[max(0, i - window + 1): i + 1].mean() for i in range(len(x))])


try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    plt = None

if plt is None:
    print("matplotlib is not installed (pip install matplotlib); the returns:")
    print("episode " + " ".join(f"{n:>10}" for n in returns))
    for i in range(EPISODES):
        print(f"{i:7d} " + " ".join(f"{returns[n][i]:+10.4f}" for n in returns))
else:
    fig, ax = plt.subplots(figsize=(8, 4))
    for name, r in returns.items():
        line, = ax.plot(r, "o", alpha=0.35, markersize=4, label=f"{name} (episode)")
        ax.plot(running_mean(r), "-", color=line.get_color(), linewidth=2, label=f"{name} (running mean)")
    ax.axhline(0.0, color="grey", linewidth=0.8)
    ax.set_xlabel("episode")
    ax.set_ylabel("return (cost-model improvement)")
    ax.set_title("shlo_env/Rewrite-v0 on sub-graphs")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT, dpi=120)
    print(f"wrote {OUT}")
