"""Decision makers behind one interface: `get_strategy(name)`, `strategies()`.

The shared `Evaluator` verifies then times candidates, cached by DAG hash.
"""

from shlo_env.search.base import SearchContext, Strategy, get_strategy, register_strategy, strategies
from shlo_env.search.evaluator import Evaluation, Evaluator
from shlo_env.search import stepwise  # noqa: F401,E402  (registers pick-first, exhaustive)

__all__ = ["Evaluation", "Evaluator", "SearchContext", "Strategy", "get_strategy", "register_strategy",
           "strategies"]
