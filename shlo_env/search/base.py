"""The interface every decision maker implements, and what they share.

A search state is a `State`: a program plus the typed XLA actions (`xla_options.DisablePass`,
`xla_options.SetOption`) it is compiled with. From a state, `SearchContext.expand` gives an
`Expansion`: the program augmented with every pattern (dry mode) and its *decision
dimensions*: one per alternatives op (choice 0 keeps the original, choice k takes pattern k's
rewrite) and, when the search may use XLA actions, one per action not yet taken (choice 0
leaves it, 1 takes it). A decision vector picks one choice per dimension;
`SearchContext.child` applies it (the paper's Algorithm 1 step) and gives the next state.
All-zero vectors are the "stop" action.

A `Strategy` gets a `SearchContext`, made of three parts:

- `SearchSettings` (frozen): the original, the patterns, the XLA actions offered, the
  acceptance threshold, the step limit, the seed;
- `SearchCaches`: what any search over this original may reuse: the shared `Evaluator`
  (verify + time, cached by (DAG hash, XLA actions)), augmented programs, expansions, children,
  site heat;
- `SearchRun`: this search's own state: deadline, progress line, random stream, best so far,
  the start state the XLA option screen chose, the rewrites that paid.

It returns the best verified `Evaluation` it found (the original, ratio 1.0, if nothing
better). Strategies register by name (`register_strategy`) and are built with `get_strategy`.
A strategy's own options (`hot_first`, `screen_options`) stay on the strategy: it passes them
to the context's methods, never writes them into the context.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
import sys
import time
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from shlo_env.execute import xla_options
from shlo_env.rewrite.decisions import pick_first
from shlo_env.rewrite.driver import ApplyError, AugmentStats, apply, augment, list_alternatives
from shlo_env.ir.hashing import dag_hash
from shlo_env.ir.program import Program, ir_scope
from shlo_env.measure.noise_thresholds import accepts
from shlo_env.search import first_sweep as first_sweeps, option_screen, site_heat
from shlo_env.search.evaluator import Evaluation, Evaluator, Keyed
from shlo_env.search.passes import describe
from shlo_env.search.schedule import Schedule
from shlo_env.execute.xla_options import Action, SetOption, normalize

# --- states and decisions -----------------------------------------------------------------------

@dataclasses.dataclass(frozen=True, eq=False)
class State(Keyed):
    """A program and the XLA actions it is compiled with (`xla_options.normalize`d)."""

    program: Program
    hash: str
    actions: tuple[Action, ...] = ()

    @classmethod
    def of(cls, program: Program, actions=()) -> "State":
        return cls(program, dag_hash(program), normalize(actions))

    def __repr__(self) -> str:
        what = list(self.program.applied) + [f"-{p}" for p in self.passes]
        return f"State({self.hash[:8]}: {', '.join(what) or 'original'})"


@dataclasses.dataclass(frozen=True)
class Dim:
    """One decision: an alternatives op ("rewrite") or an XLA action toggle ("pass")."""

    kind: str
    labels: tuple[str, ...]  # labels[0] is the no-change choice
    index: int  # alternatives index, or position in Expansion.actions

    @property
    def num_choices(self) -> int:
        return len(self.labels)


@dataclasses.dataclass(eq=False)
class Expansion:
    """A state's decision dimensions: its alternatives ops, then the XLA action toggles."""

    state: State
    augmented: Program | None
    alts: list
    actions: tuple[Action, ...]  # XLA actions offered (not yet taken), one "pass" dim each
    dims: list[Dim]

    @property
    def passes(self) -> tuple[str, ...]:
        """The offered XLA actions as tokens."""
        return xla_options.tokens(self.actions)

    @property
    def num_rewrites(self) -> int:
        return len(self.alts)

    @property
    def size(self) -> int:
        """Number of decision vectors (the stop vector included)."""
        return math.prod(d.num_choices for d in self.dims) if self.dims else 1

    @property
    def rewrite_space(self) -> int:
        return math.prod(a.num_choices for a in self.alts) if self.alts else 1

    def describe(self, vec: Sequence[int]) -> str:
        picks = [d.labels[c] for d, c in zip(self.dims, vec) if c]
        return ", ".join(picks) if picks else "stop"


def is_stop(vec: Sequence[int]) -> bool:
    return not any(vec)


def pick_first_vector(dims: Sequence[Dim]) -> list[int]:
    """The paper's pick-first (`shlo_env.rewrite.decisions.pick_first`) over the alternatives ops;
    XLA action toggles untouched."""
    return pick_first(d.num_choices if d.kind == "rewrite" else 1 for d in dims)


def sweep_label(exp: Expansion, vec: Sequence[int]) -> str:
    """The rewrite a sweep vector (`sweep_vectors`) takes at its sites."""
    i = next(i for i, c in enumerate(vec) if c)
    return exp.dims[i].labels[vec[i]]


def one_hot_vectors(dims: Sequence[Dim], order: Sequence[int] | None = None) -> Iterator[list[int]]:
    """Each single choice taken alone, dimension by dimension in `order` (default: the
    dimensions' own order, rewrites first, then pass toggles)."""
    for i in (range(len(dims)) if order is None else order):
        d = dims[i]
        for k in range(1, d.num_choices):
            vec = [0] * len(dims)
            vec[i] = k
            yield vec


def interleave(*iterables):
    """a1, b1, a2, b2, ...: until every iterable is exhausted."""
    sentinel = object()
    for group in itertools.zip_longest(*iterables, fillvalue=sentinel):
        yield from (x for x in group if x is not sentinel)


def sweep_vectors(dims: Sequence[Dim], weights: Sequence[float] | None = None) -> Iterator[list[int]]:
    """One vector per rewrite label offered at two or more sites: that rewrite taken at every
    site offering it. A rewrite that pays a little at each of many sites (a pattern inside an
    unrolled loop body, one per copy) is worth trying whole, since each single alone stays
    within noise. Ordered by the summed `weights` of their sites (hottest first; program order
    of the first site when None)."""
    sites: dict[str, list[tuple[int, int]]] = {}
    for i, d in enumerate(dims):
        if d.kind != "rewrite":
            continue
        seen: set[str] = set()
        for k, label in enumerate(d.labels[1:], 1):
            if label not in seen:
                seen.add(label)
                sites.setdefault(label, []).append((i, k))
    labels = [lab for lab, at in sites.items() if len(at) >= 2]
    if weights is not None:
        labels.sort(key=lambda lab: -sum(weights[i] for i, _ in sites[lab]))
    for lab in labels:
        vec = [0] * len(dims)
        for i, k in sites[lab]:
            vec[i] = k
        yield vec


def new_sites_first(vecs: Sequence[list[int]]) -> list[list[int]]:
    """The vectors in their order, but each one that takes exactly the sites of an earlier one
    after all the others: another rewrite of the same ops (unroll a loop 2x, 4x, 8x, hoist from
    it) waits until every other set of sites had its turn. A first few sweeps then try
    different rewrites, not three variants of the hottest one."""
    seen: set[frozenset[int]] = set()
    first: list[list[int]] = []
    later: list[list[int]] = []
    for vec in vecs:
        at = frozenset(i for i, c in enumerate(vec) if c)
        (later if at in seen else first).append(vec)
        seen.add(at)
    return first + later


def all_vectors(dims: Sequence[Dim]) -> Iterator[list[int]]:
    """Every decision vector except the stop vector."""
    for vec in itertools.product(*[range(d.num_choices) for d in dims]):
        if any(vec):
            yield list(vec)


def random_vector(dims: Sequence[Dim], rng: random.Random, pass_prob: float = 0.1) -> list[int]:
    """A uniformly random choice per alternatives op; each pass disabled with `pass_prob`."""
    vec = []
    for d in dims:
        if d.kind == "pass":
            vec.append(1 if rng.random() < pass_prob else 0)
        else:
            vec.append(rng.randrange(d.num_choices))
    return vec


def decision_space(dims_or_alts) -> int:
    return math.prod(d.num_choices for d in dims_or_alts) if dims_or_alts else 1


# --- progress -----------------------------------------------------------------------------------

class Progress:
    """A live line: strategy, elapsed/budget, best ratio so far, candidates evaluated, cache hits.

    On a terminal it rewrites one line in place; elsewhere (logs, CI) it prints a line every
    `interval_s` seconds. `lines` keeps what was shown (for tests and reports).
    """

    def __init__(self, enabled: bool, label: str = "search", *, stream=None, interval_s: float = 5.0,
                 budget_s: float | None = None):
        self.enabled = enabled
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval_s = 0.1 if self.tty else interval_s
        self.budget_s = budget_s
        self.start = time.perf_counter()
        self._last = -math.inf
        self.lines: list[str] = []
        self._width = 0

    def line(self, evaluator: Evaluator, best: Evaluation, note: str = "") -> str:
        s = evaluator.stats
        elapsed = time.perf_counter() - self.start
        budget = f"/{self.budget_s:.0f}" if self.budget_s else ""
        fails = sum(s.failures.values())
        return (f"{self.label}: {elapsed:5.1f}{budget} s | best {best.ratio:.3f} ({best.speedup:.2f}x) | "
                f"{s.evaluated} evaluated, {s.cache_hits} cache hits ({s.hit_rate:.0%})"
                + (f", {fails} rejected" if fails else "") + (f" | {note}" if note else ""))

    def update(self, evaluator: Evaluator, best: Evaluation, note: str = "", force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self._last < self.interval_s:
            return
        self._last = now
        text = self.line(evaluator, best, note)
        self.lines.append(text)
        if self.tty:
            pad = max(0, self._width - len(text))
            self.stream.write("\r" + text + " " * pad)
            self._width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self, evaluator: Evaluator | None = None, best: Evaluation | None = None) -> None:
        if not self.enabled:
            return
        if evaluator is not None and best is not None:
            self.update(evaluator, best, "done", force=True)
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


# --- the context: settings, shared caches, one search's state ----------------------------------

@dataclasses.dataclass(frozen=True)
class SearchSettings:
    """What a search is asked to do; fixed for its length."""

    original: Program
    patterns: tuple
    max_steps: int = 6
    threshold: float = 0.97  # the acceptance rule's threshold (`noise_model.accepts`)
    actions: tuple[Action, ...] = ()  # XLA actions the search may take (macro actions)
    seed: int = 0
    confirm_best: bool = True  # time a new best twice before it counts (see SearchContext.evaluate)


class SearchCaches:
    """What any search over one original may reuse, keyed by DAG hash or state key: the
    evaluator (its evaluation cache), augmented programs, expansions, children, site heat,
    and the single-rewrite steps (child key -> (parent key, its one label))."""

    def __init__(self, evaluator: Evaluator):
        self.evaluator = evaluator
        self.augmented: dict[str, tuple[Program, list]] = {}
        self.expanded: dict[str, Expansion] = {}
        self.heat: dict[str, list[float]] = {}
        # measured: DAG hash -> per site, the share of the run time its kernels hold (one
        # profile of the original, `site_heat.measured_sites`; the runner sets it)
        self.bounds: dict[str, list[float]] = {}
        self.profiles: dict[str, object] = {}  # DAG hash -> that profile (`kernel_profile.Profile`)
        self.site_kernels: dict[str, dict[int, list[int]]] = {}  # DAG hash -> site -> its kernels in it
        # (DAG hash, site, choice) -> the region ratio the regional strategy measured for it
        self.region_ratios: dict[tuple[str, int, int], float] = {}
        self.profile_cost_s = 0.0  # the schedule's estimate of one profile (from the measured compile)
        self.compile_s = 0.0  # the original's compile, measured by the program search's probe
        self.children: dict[tuple, State | None] = {}
        self.steps: dict[str, tuple[str, str]] = {}
        self.expansions = 0  # programs augmented
        self.augments_cut = 0  # of them, stopped by their deadline (`Schedule.child_augment_s`)
        self.apply_failures = 0


class OpenTail(NamedTuple):
    """`SearchContext.open_tail`: the search and its requests may run `until` while nothing
    beats the original; `usual_requests` is the evaluator's request deadline otherwise."""

    until: float
    usual_requests: float | None


@dataclasses.dataclass
class SearchRun:
    """One search's own state. Only `SearchContext`'s methods write it."""

    deadline: float  # a time.perf_counter() value
    progress: Progress
    rng: random.Random
    start: State  # the root, or the faster option state the XLA option screen chose
    start_ratio: float = 1.0
    screened: bool = False  # the option screen ran (once per search, whichever strategy asks)
    screen: dict | None = None  # its summary, when it tried something
    swept: first_sweeps.FirstSweep | None = None  # the first sweep, once it ran (once per search)
    best: Evaluation | None = None
    open_tail: OpenTail | None = None  # the deadlines while nothing beats the original
    handed: bool = False  # `start` was handed over: a follow-up search begins there (`SearchContext.hand_over`)
    # Rewrites that paid: label -> the best ratio (child / parent) of a step taking only that
    # rewrite (at one site or all). A child state offers the same rewrite at new sites (the
    # copies of an unrolled loop body), so sweeps try these first (see `SearchContext.sweeps`).
    paid: dict[str, float] = dataclasses.field(default_factory=dict)


class SearchContext:
    """What a strategy searches with: `settings`, `caches`, `run` (see the module docstring),
    and the operations on them. `deadline` is a `time.perf_counter()` value."""

    def __init__(self, original: Program, patterns, evaluator: Evaluator, deadline: float, *, max_steps: int = 6,
                 progress: Progress | None = None, threshold: float = 0.97, passes=(), seed: int = 0,
                 confirm_best: bool = True, caches: SearchCaches | None = None):
        self.settings = SearchSettings(original, tuple(patterns), max_steps, threshold, normalize(passes), seed,
                                       confirm_best)
        self.caches = caches if caches is not None else SearchCaches(evaluator)
        if self.caches.evaluator is not evaluator:
            raise ValueError("the shared caches belong to another evaluator")
        self.root = State.of(original)
        self.run = SearchRun(deadline, progress if progress is not None else Progress(False), random.Random(seed),
                             self.root)

    # read-through names (the parts own the values)
    original = property(lambda self: self.settings.original)
    patterns = property(lambda self: self.settings.patterns)
    max_steps = property(lambda self: self.settings.max_steps)
    threshold = property(lambda self: self.settings.threshold)
    seed = property(lambda self: self.settings.seed)
    evaluator = property(lambda self: self.caches.evaluator)
    progress = property(lambda self: self.run.progress)
    rng = property(lambda self: self.run.rng)
    start = property(lambda self: self.run.start)
    start_ratio = property(lambda self: self.run.start_ratio)
    paid = property(lambda self: self.run.paid)
    expansions = property(lambda self: self.caches.expansions)
    apply_failures = property(lambda self: self.caches.apply_failures)

    @property
    def passes(self) -> tuple[str, ...]:
        """The offered XLA actions as tokens."""
        return xla_options.tokens(self.settings.actions)

    @property
    def deadline(self) -> float:
        """The search's deadline: the later open one while nothing beats the original."""
        tail = self.run.open_tail
        if tail is not None and not self.in_hand():
            return max(self.run.deadline, tail.until)
        return self.run.deadline

    @deadline.setter
    def deadline(self, value: float) -> None:
        self.run.deadline = value

    def open_tail(self, until: float) -> None:
        """While nothing beats the original, search on and let requests run until `until`: the
        time kept for confirming and measuring a winner is not needed then. Once a candidate
        beats the original the usual deadlines hold again."""
        self.run.open_tail = OpenTail(until, self.evaluator.hard_deadline)

    def request_deadline(self) -> float | None:
        """No worker request of the search runs past this (the evaluator's hard deadline, the
        open tail's while nothing beats the original); sets the evaluator's to it."""
        tail = self.run.open_tail
        if tail is not None:
            usual = tail.usual_requests
            self.evaluator.hard_deadline = usual if self.in_hand() else max(tail.until, usual or 0.0)
        return self.evaluator.hard_deadline

    def in_hand(self) -> bool:
        """A candidate faster than the original (on its timings so far) awaits acceptance."""
        best = self.best
        return best.key != self.evaluator.original_key and best.timed and best.ratio < 1.0

    # time
    def time_left(self) -> float:
        return self.deadline - time.perf_counter()

    def out_of_time(self) -> bool:
        """The deadline came, or a new whole candidate would not end before the request deadline."""
        if self.time_left() <= 0:
            return True
        self.request_deadline()
        return not self.evaluator.room_for_one()

    # actions
    def expand(self, state: State) -> Expansion:
        """The state's decision dimensions (augmenting its program once per DAG hash)."""
        c = self.caches
        if state.key in c.expanded:
            return c.expanded[state.key]
        if state.hash in c.augmented:
            augmented, alts = c.augmented[state.hash]
        else:
            # one state's matching must not eat the search: a share of the time left (the
            # matches found by then are recorded; the root's augment has its own share)
            stats = AugmentStats()
            deadline = time.perf_counter() + Schedule.child_augment_s(self.time_left())
            augmented = augment(state.program, list(self.patterns), stats=stats, deadline=deadline)
            alts = list_alternatives(augmented)
            c.augmented[state.hash] = (augmented, alts)
            c.expansions += 1
            c.augments_cut += stats.cut
        set_options = {a.name for a in state.actions if isinstance(a, SetOption)}
        offered = tuple(a for a in self.settings.actions
                        if a not in state.actions and not (isinstance(a, SetOption) and a.name in set_options))
        dims = [Dim("rewrite", tuple(a.labels), i) for i, a in enumerate(alts)]
        dims += [Dim("pass", ("keep", f"set {a}" if isinstance(a, SetOption) else f"disable {a}"), j)
                 for j, a in enumerate(offered)]
        exp = Expansion(state, augmented if alts else None, alts, offered, dims)
        c.expanded[state.key] = exp
        return exp

    def heat(self, exp: Expansion) -> list[float]:
        """Per dimension, the estimated time of the ops its rewrite touches
        (`shlo_env.search.site_heat`; 0 for XLA action toggles). Cached by DAG hash."""
        if exp.state.hash not in self.caches.heat:
            with ir_scope():
                self.caches.heat[exp.state.hash] = site_heat.site_weights(exp.alts)
        weights = self.caches.heat[exp.state.hash]
        return [weights[d.index] if d.kind == "rewrite" else 0.0 for d in exp.dims]

    def measured(self, exp: Expansion) -> list[float] | None:
        """Per dimension, the measured share of the run time its site's kernels hold (0 for
        XLA action toggles), or None when this state was not profiled (see `SearchCaches.bounds`)."""
        bounds = self.caches.bounds.get(exp.state.hash)
        if bounds is None:
            return None
        return [bounds[d.index] if d.kind == "rewrite" else 0.0 for d in exp.dims]

    def hot_order(self, exp: Expansion) -> list[int]:
        """The dimensions, hottest first: by measured bound when the state was profiled
        (rewrite sites below `site_heat.NEGLIGIBLE_TIME_FRACTION` left out, toggles after them), else
        by the static estimate."""
        static = self.heat(exp)
        bounds = self.measured(exp)
        if bounds is None:
            return site_heat.hot_order(static)
        toggles = [i for i, d in enumerate(exp.dims) if d.kind != "rewrite"]
        rewrites = site_heat.measured_order(bounds, static)
        return [i for i in rewrites if exp.dims[i].kind == "rewrite"] + toggles

    def singles(self, exp: Expansion, hot_first: bool = True) -> Iterator[list[int]]:
        """Each single choice alone: hottest sites first when `hot_first` (`hot_order`: measured
        sites of negligible share skipped), else in program order."""
        return one_hot_vectors(exp.dims, self.hot_order(exp) if hot_first else None)

    def sweeps(self, exp: Expansion, hot_first: bool = True) -> Iterator[list[int]]:
        """Each rewrite taken at all its sites at once (`sweep_vectors`): those that paid at an
        earlier step first (`paid`, best first), then the hottest when `hot_first` (by measured
        bound, summed over the sites, when the state was profiled: a sweep below
        `site_heat.NEGLIGIBLE_TIME_FRACTION` is skipped), else in program order; other
        rewrites of sites an earlier sweep took wait (`new_sites_first`)."""
        bounds = self.measured(exp) if hot_first else None
        vecs = list(sweep_vectors(exp.dims, (bounds or self.heat(exp)) if hot_first else None))
        if bounds is not None:
            vecs = [v for v in vecs if sum(bounds[i] for i, c in enumerate(v) if c) >= site_heat.NEGLIGIBLE_TIME_FRACTION]

        def paid(vec: list[int]) -> float:
            return self.run.paid.get(sweep_label(exp, vec), math.inf)

        return iter(sorted(new_sites_first(vecs), key=paid))  # stable: unpaid keep that order

    def child(self, exp: Expansion, decisions: Sequence[int]) -> State | None:
        """The state a decision vector leads to (None if the rewrite cannot be applied).
        Cached per (state, vector), so re-visiting an edge costs nothing."""
        c = self.caches
        vec = tuple(int(d) for d in decisions)
        if len(vec) != len(exp.dims):
            raise ValueError(f"{len(vec)} decisions for {len(exp.dims)} dimensions")
        key = (exp.state.key, vec)
        if key in c.children:
            return c.children[key]
        rewrite, toggles = vec[:exp.num_rewrites], vec[exp.num_rewrites:]
        actions = normalize(exp.state.actions + tuple(a for a, t in zip(exp.actions, toggles) if t))
        if any(rewrite):
            assert exp.augmented is not None  # a rewrite choice exists only where alternatives do
            try:
                program = apply(exp.augmented, list(rewrite))
            except ApplyError:
                c.apply_failures += 1
                c.children[key] = None
                return None
            state = State(program, dag_hash(program), actions)
        else:
            state = State(exp.state.program, exp.state.hash, actions)
        c.children[key] = state
        labels = {d.labels[k] for d, k in zip(exp.dims, vec) if k and d.kind == "rewrite"}
        if len(labels) == 1 and not any(toggles):
            c.steps.setdefault(state.key, (exp.state.key, labels.pop()))
        return state

    # evaluation
    @property
    def best(self) -> Evaluation:
        if self.run.best is None:  # the original: always in the evaluator's cache, ratio 1.0
            self.run.best = self.evaluator.cache[self.evaluator.original_key]
        return self.run.best

    def evaluate(self, state: State, *, time_it: bool = True, expand: bool = False) -> Evaluation:
        """Verify and time a state (once per state, shared by every strategy); remembers the best.
        `expand`: the caller will expand the state: its patterns are matched while the worker
        verifies it (a tree search's new node: matching a state took as long as verifying it).

        A state that would become the new best is first timed a second time (`confirm_best`)
        and keeps the slower of its two ratios: among hundreds of noisy measurements the
        fastest one is otherwise often just the luckiest."""
        self.request_deadline()
        beside = (lambda: self.expand(state)) if expand else None
        ev = self.evaluator.evaluate(state.program, passes=state.actions, hash=state.hash, time_it=time_it,
                                     beside=beside)
        if ev.timed and ev.ratio < self.best.ratio:
            if self.settings.confirm_best and not ev.confirmed and not self.out_of_time():
                self.evaluator.confirm(ev)
        if ev.timed and ev.ratio < self.best.ratio:
            self.run.best = ev
        self._remember_paid(state, ev)
        self.run.progress.update(self.evaluator, self.best)
        return ev

    def _remember_paid(self, state: State, ev: Evaluation) -> None:
        step = self.caches.steps.get(state.key)
        if step is None or not ev.timed:
            return
        parent_key, label = step
        parent = self.evaluator.cache.get(parent_key)
        parent_ratio = parent.ratio if parent is not None and parent.timed else 1.0
        gain = ev.ratio / parent_ratio
        if gain < self.threshold:
            self.run.paid[label] = min(gain, self.run.paid.get(label, math.inf))

    def cost(self, state: State) -> dict:
        return self.evaluator.cost(state.program, state.actions, hash=state.hash)

    def executable_features(self, state: State):
        """`learn.hlo_features` of the state's executable (a compile, no timing), or None."""
        return self.evaluator.executable_features(state.program, state.actions, hash=state.hash)

    def improves(self, ev: Evaluation, than: float = 1.0) -> bool:
        """Timed, and faster than the ratio `than` on its one-shot timing: the one screening
        rule (`noise_model.accepts`: its 10th-percentile and its median per-call ratio, each
        relative to `than`, below the threshold). A screen only: what the search returns must
        also pass the sequential paired test (`search.program_search._decide`)."""
        return ev.timed and accepts(ev.ratio / than, ev.median_ratio / than, self.threshold)

    def screen_options(self) -> State:
        """Run the XLA option screen once per search (`shlo_env.search.option_screen`) and
        return the state to start from: the best verified option state that beats the
        threshold, else the root."""
        if not self.run.screened:
            self.run.screened = True
            found = option_screen.screen(self)
            if found.tried:
                self.run.screen = found.summary()
            if found.start is not None:
                self.run.start, self.run.start_ratio = found.start
        return self.run.start

    def first_sweep(self, start: State) -> State:
        """Run the first sweep once per search (`shlo_env.search.first_sweep`: the rewrites that
        never cost, at every site, evaluated on the whole program) on top of `start`, and
        return the state to search from: the swept one when it beat `start`, else `start`."""
        if self.run.swept is None:
            ratio = self.run.start_ratio if start.key == self.run.start.key else 1.0
            self.run.swept = first_sweeps.sweep(self, start, ratio)
            if self.run.swept.start is not None:
                self.run.start, self.run.start_ratio = self.run.swept.start
        return self.run.swept.start[0] if self.run.swept.start is not None else start

    def hand_over(self, evaluation: Evaluation) -> State:
        """Make a measured state the one the next strategy begins from (a follow-up search
        from an earlier strategy's best); returns it."""
        state = State(evaluation.program, evaluation.hash, evaluation.actions)
        self.run.start, self.run.start_ratio, self.run.handed = state, evaluation.ratio, True
        return state

    def describe_passes(self) -> list[str]:
        return [f"{a} ({describe(a)})" for a in self.settings.actions]


class Strategy:
    """Base class of decision makers. Subclasses set `name` and implement `search`.

    Options are constructor keyword arguments (`get_strategy("beam", alpha=1.0)`); `info`
    collects what a strategy wants to report (pruned children, simulations, ...).

    Three options every built-in strategy takes, all on by default (they aim a small budget):
    `screen_options` runs the XLA option screen before the search when option actions are
    offered (`shlo_env.search.option_screen`: offered options timed against the original in
    as few requests as the time allows, the best verified one becomes the start state);
    `first_sweep` then takes the rewrites that never cost (`Pattern.sweep_first`) at every
    site as the first whole-program candidate (`shlo_env.search.first_sweep`; the swept
    program becomes the start state when it is faster); `hot_first` orders single rewrites
    by the estimated time of the ops they touch (`shlo_env.search.site_heat`).
    A strategy calls `begin(ctx)` first and searches from the state it returns.
    """

    name = ""

    def __init__(self, screen_options: bool = True, hot_first: bool = True, first_sweep: bool = True):
        self.info: dict = {}
        self.screen_options = screen_options
        self.hot_first = hot_first
        self.first_sweep = first_sweep

    def begin(self, ctx: SearchContext) -> State:
        """The state to start from: the XLA option screen's choice when `screen_options`
        (run once per search, `SearchContext.screen_options`), else the root; then the first
        sweep's program on top of it when `first_sweep` and it is faster. A follow-up search
        begins where the earlier strategy handed over (`SearchContext.hand_over`)."""
        if ctx.run.handed:
            return ctx.start
        start = ctx.root
        if self.screen_options:
            start = ctx.screen_options()
            if ctx.run.screen is not None:
                self.info["option_screen"] = ctx.run.screen
        if self.first_sweep:
            start = ctx.first_sweep(start)
            if ctx.run.swept is not None and ctx.run.swept.patterns:
                self.info["first_sweep"] = ctx.run.swept.summary()
        return start

    def start_ratio(self, ctx: SearchContext, start: State) -> float:
        """The measured ratio of a state `begin` returned (1.0 for the root)."""
        return ctx.start_ratio if start.key == ctx.start.key else 1.0

    def profile_skip(self, ctx: SearchContext) -> str:
        """Why the program search should not profile the original for this strategy ("": it
        should, when its schedule affords it)."""
        return ""

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
        cls = _STRATEGIES[name]
    except KeyError:
        raise KeyError(f"unknown strategy {name!r}; choose from {', '.join(strategies())}") from None
    return cls(**options)


#: From this many ops a whole-program compile per candidate is what limits the search: "auto"
#: judges candidates on their regions (the regional strategy) instead.
REGIONAL_MIN_OPS = 1000


def auto_strategy(exp: Expansion) -> str:
    """A sensible strategy for a decision space of this size (at the root):

    - nothing to decide: pick-first (it stops at once);
    - up to 64 vectors: exhaustive (every vector, stepwise);
    - up to 2**16: beam search;
    - larger: factorized MCTS (its statistics are per dimension, so it scales with the number
      of alternatives ops, not with the product of their choices);
    - any space, on a program of `REGIONAL_MIN_OPS` ops or more: regional (candidates judged
      on the region they change; docs/experiments/2026-11-26-regional-strategy.md).
    """
    size = exp.size
    if size > 1 and exp.num_rewrites and exp.state.program.num_ops() >= REGIONAL_MIN_OPS:
        return "regional"
    if size <= 1:
        return "pick-first"
    if size <= 64:
        return "exhaustive"
    if size <= 2 ** 16:
        return "beam"
    return "mcts"
