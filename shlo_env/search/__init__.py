"""Decision makers behind one interface: `get_strategy(name)`, `strategies()`.

    pick-first   the paper's heuristic (Algorithm 1 with the first rewrite everywhere)
    exhaustive   stepwise: every decision vector when few, else each single choice
    random       random walks
    beam         the paper's beam search (depth-first stack, T(child) >= alpha*T(parent) pruned)
    mcts         the paper's factorized MCTS (marginal Q/N per alternatives op, MuZero UCB)
    cost-model   greedy by XLA's cost analysis, timing only the most promising candidates
    learned      the same greedy loop ranked by the learned graph model (shlo_env.learn), no compile to rank
    regional     candidates judged on the region they change, local winners assembled on the whole program

The shared `Evaluator` verifies then times states, cached by (DAG hash, disabled XLA passes);
XLA's own passes can join the action space as macro actions (`shlo_env.search.passes`).
Every built-in strategy aims a small budget (`Strategy.begin`): offered XLA compile options are
screened first (`shlo_env.search.option_screen`) and single rewrites are tried on the hottest
sites first (`shlo_env.search.site_heat`).

Strategies are built from three kinds of parts (docs/search_parts.md): candidate sources
(`shlo_env.search.sources`), rankers with an uncertainty (`shlo_env.search.rankers`) and one
acquisition rule (`shlo_env.search.acquisition`).
"""

from shlo_env.search.base import (
    Dim, Expansion, Progress, SearchContext, State, Strategy, auto_strategy, get_strategy, register_strategy,
    strategies,
)
from shlo_env.search.evaluator import Evaluation, Evaluator
from shlo_env.search import stepwise, random_search, beam, mcts, cost_model, learned, regional  # noqa: F401,E402,E501  (register)
from shlo_env.search import passes  # noqa: E402

__all__ = ["Dim", "Evaluation", "Evaluator", "Expansion", "Progress", "SearchContext", "State", "Strategy",
           "auto_strategy", "get_strategy", "passes", "register_strategy", "strategies"]
