"""The interface every decision maker implements, and what they share.

A `Strategy` gets a `SearchContext`: the original program, the patterns, a shared `Evaluator`
(verify + time, cached by DAG hash), a deadline, and a progress line. It returns the best
verified `Evaluation` it found (the original, ratio 1.0, if nothing better).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import sys
import time
from collections.abc import Iterator

from shlo_env.driver import apply, augment, list_alternatives
from shlo_env.hashing import dag_hash
from shlo_env.import_ import Program
from shlo_env.search.evaluator import Evaluation, Evaluator


class Progress:
    """A live line: best ratio so far, candidates evaluated, cache hits (tqdm when on a tty)."""

    def __init__(self, enabled: bool, label: str = "search"):
        self.enabled = enabled
        self.label = label
        self._bar = None
        if enabled:
            try:
                from tqdm import tqdm

                self._bar = tqdm(desc=label, unit="cand", leave=False, file=sys.stderr,
                                 disable=not sys.stderr.isatty())
            except ImportError:  # pragma: no cover - tqdm is a dependency
                self._bar = None

    def update(self, evaluator: Evaluator, best: Evaluation) -> None:
        if not self.enabled:
            return
        s = evaluator.stats
        if self._bar is not None and not self._bar.disable:
            self._bar.n = s.evaluated
            self._bar.set_postfix(best=f"{best.ratio:.3f}", evaluated=s.evaluated, hits=s.cache_hits,
                                  refresh=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


@dataclasses.dataclass
class SearchContext:
    original: Program
    patterns: list
    evaluator: Evaluator
    deadline: float
    max_steps: int = 6
    progress: Progress = dataclasses.field(default_factory=lambda: Progress(False))
    threshold: float = 0.97  # a candidate must be at least this much faster to count
    _expanded: dict = dataclasses.field(default_factory=dict)
    _best: Evaluation | None = None

    def time_left(self) -> float:
        return self.deadline - time.perf_counter()

    def out_of_time(self) -> bool:
        return self.time_left() <= 0

    def expand(self, program: Program) -> tuple[Program, list]:
        """The program augmented with every pattern, and its alternatives (cached by hash)."""
        h = dag_hash(program)
        if h not in self._expanded:
            augmented = augment(program, self.patterns)
            self._expanded[h] = (augmented, list_alternatives(augmented))
        return self._expanded[h]

    def candidate(self, augmented: Program, decisions) -> Program:
        return apply(augmented, decisions)

    @property
    def best(self) -> Evaluation:
        if self._best is None:
            self._best = self.evaluator.evaluate(self.original, time_it=False)
        return self._best

    def evaluate(self, program: Program) -> Evaluation:
        """Verify and time `program`; remembers the best verified one."""
        ev = self.evaluator.evaluate(program)
        if ev.ok and ev.ratio < self.best.ratio:
            self._best = ev
        self.progress.update(self.evaluator, self.best)
        return ev

    def improves(self, ev: Evaluation, than: float = 1.0) -> bool:
        """Faster than `than` by more than the noise threshold."""
        return ev.ok and ev.ratio < than * self.threshold


class Strategy:
    """Base class of decision makers. Subclasses set `name` and implement `search`."""

    name = ""

    def search(self, ctx: SearchContext) -> Evaluation:  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<strategy {self.name}>"


_STRATEGIES: dict[str, type[Strategy]] = {}


def register_strategy(cls: type[Strategy]) -> type[Strategy]:
    _STRATEGIES[cls.name] = cls
    return cls


def strategies() -> list[str]:
    return sorted(_STRATEGIES)


def get_strategy(name: str | Strategy, **options) -> Strategy:
    if isinstance(name, Strategy):
        return name
    try:
        return _STRATEGIES[name](**options)
    except KeyError:
        raise KeyError(f"unknown strategy {name!r}; choose from {', '.join(strategies())}") from None


def decision_space(alts) -> int:
    return math.prod(a.num_choices for a in alts) if alts else 1


def all_vectors(alts) -> Iterator[list[int]]:
    """Every decision vector except all-originals."""
    for vec in itertools.product(*[range(a.num_choices) for a in alts]):
        if any(vec):
            yield list(vec)


def one_hot_vectors(alts) -> Iterator[list[int]]:
    """Each single choice taken alone."""
    for i, a in enumerate(alts):
        for k in range(1, a.num_choices):
            vec = [0] * len(alts)
            vec[i] = k
            yield vec


def pick_first_vector(alts) -> list[int]:
    return [1 if a.num_choices > 1 else 0 for a in alts]
