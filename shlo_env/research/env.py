"""The research interface: one program and HloEnv's operations on it.

    env = Env(fn, x, w)             # or Env("prog.mlir"), Env(program), Env("inst-10-20/3")
    graph = env.augment()           # dry mode: every match recorded as an alternatives op
    env.apply([1, 0])               # one choice per alternatives op (or {index: choice})
    env.evaluate(10)                # Timing(full, async_, compute) of the current program
    env.baseline(10)                # XLA's time for the original program
    env.is_equivalent()             # outputs against the original, within the applied tier
    env.hash(); env.clone(); env.export("out.mlir")

| HloEnv                              | shlo_env.Env                         |
|-------------------------------------|--------------------------------------|
| `HloEnv(path, platform)`            | `Env(path)`, `Env(fn, *args)`, `Env(uri)` |
| `run(pass)` in dry mode             | `augment(patterns)`                  |
| `get_hlo_graph()`                   | `observation()` (an `observe.Graph`)  |
| `apply_alternatives(decisions)`     | `apply(decisions)`                   |
| `evaluate(times)`                   | `evaluate(n)`                        |
| `hlo_module_hash()`                 | `hash()`                             |
| `clone_hlo()`, `load_hlo()`         | `clone()`, `Env(program)`            |
| `export_hlo_to_str()`, `save_hlo()` | `text()`, `export(path)`             |
| `has_equal_output_as(other)`        | `is_equivalent(other)`               |

Compiling and running go through a `Worker` child process by default (`isolate=True`), so a
program that aborts XLA costs an exception (`CandidateError`), not the agent's process. An `Env`
pickles (the programs travel as MLIR bytecode; the worker is restarted on first use).
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from shlo_env.rewrite import driver
from shlo_env.learn import observe
from shlo_env.execute import runtime
from shlo_env.ir.hashing import dag_hash
from shlo_env.ir.program import (  # noqa: F401  (program_state/program_from_state re-exported)
    Program, ProgramError, load, lower, program_from_state, program_state, save,
)
from shlo_env.measure.numerics import Numerics
from shlo_env.patterns.base import resolve
from shlo_env.execute.runners import CandidateError, FailureKind, InProcess, Runner  # noqa: F401  (InProcess re-exported)
from shlo_env.measure.timing_policy import QUICK, TimingPolicy
from shlo_env.measure.verify import Verifier


class EnvError(RuntimeError):
    """An operation that does not fit the environment's state (e.g. augmenting twice)."""


# --- where programs come from -----------------------------------------------------------------

_URI = re.compile(r"[A-Za-z][\w.\-]*/[\w.\-/]+")


def looks_like_uri(source) -> bool:
    """`corpus/<name>`, `inst-10-20/<index>`: a corpus URI rather than a file or module text."""
    return (isinstance(source, str) and _URI.fullmatch(source) is not None
            and not source.endswith((".mlir", ".mlirbc")) and not Path(source).exists())


def load_uri(uri: str) -> Program:
    """A corpus program by URI, through `shlo_env.corpus.load` (imported only when needed)."""
    try:
        from shlo_env import corpus
    except ImportError as e:  # pragma: no cover - the package always ships the corpus
        raise ProgramError(f"{uri!r} looks like a corpus URI, but shlo_env.corpus cannot be imported: {e}") from e
    loader = getattr(corpus, "load", None)
    if loader is None:
        raise ProgramError(f"{uri!r} looks like a corpus URI, but this checkout's shlo_env.corpus has no "
                           "load(); pass a file path, module text, a Program or a function instead")
    program = loader(uri)
    if not isinstance(program, Program):
        raise ProgramError(f"shlo_env.corpus.load({uri!r}) returned {type(program).__name__}, not a Program")
    return program


def resolve_program(source, *args) -> tuple[Program, str | None]:
    """(Program, URI or None) from a function and its args, a Program, a file, module text or
    bytes, or a corpus URI. The Program is always a fresh copy."""
    if isinstance(source, Program):
        if args:
            raise TypeError("extra arguments are only for a function source")
        return source.clone(), None
    if callable(source):
        return lower(source, *args), None
    if args:
        raise TypeError(f"extra arguments given, but the source is a {type(source).__name__}, not a function")
    if looks_like_uri(source):
        return load_uri(source).clone(), source
    if isinstance(source, (str, bytes, os.PathLike)):
        return load(source), None
    raise TypeError(f"cannot make a program from {type(source).__name__}: give a function and its "
                    "arguments, a Program, a .mlir/.mlirbc path, module text, or a corpus URI")


# --- cost analysis without compiling ----------------------------------------------------------

def hlo_cost(text: str) -> dict:
    """XLA's cost analysis of the program as written (no compile); see `runtime.hlo_cost`.
    Raises `CandidateError('compile', ...)` if XLA cannot convert the program."""
    try:
        return runtime.hlo_cost(text)
    except runtime.CompileError as e:
        raise CandidateError(FailureKind.COMPILE, str(e)) from e


# --- results ----------------------------------------------------------------------------------

@dataclasses.dataclass
class Equivalence:
    """Whether a program computes what the reference program does, within a numerics tier."""

    ok: bool
    tier: Numerics
    max_error: float = 0.0
    bound: float = 0.0
    detail: str = ""
    input_sets: int = 0
    error: str = ""  # what max_error is relative to (numerics.Comparison.describe)

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        verdict = "equivalent" if self.ok else "NOT equivalent"
        s = f"{verdict} ({self.tier.name.lower()} tier, {self.input_sets} input sets"
        if self.tier != Numerics.EXACT and self.ok and self.error:
            s += f"; {self.error}"
        s += ")"
        return s + (f": {self.detail}" if self.detail else "")


@dataclasses.dataclass
class Step:
    """One `apply` in the environment's history."""

    decisions: list[int]
    labels: list[str]  # the pattern applied at each non-zero decision
    hash: str


# --- the environment --------------------------------------------------------------------------

class Env:
    """One program under rewriting: the original, the current state, and HloEnv's operations.

    Args:
      source: a function (then `*args` are its example arguments), a `Program`, a `.mlir` or
        `.mlirbc` path, module text or bytes, or a corpus URI (`inst-10-20/3`).
      patterns: what `augment()` records by default (names, classes or instances; None: the
        value-preserving defaults).
      isolate: compile and run in a worker process (default) or in this one.
      worker: share an existing `Worker` (or `InProcess`); the Env then does not close it.
      num_random, seed: the random input sets equivalence checks use, besides the example args.
      cost_cache: a dict to keep `cost()` results in (by DAG hash), e.g. shared by many Envs.
    """

    def __init__(self, source, *args, patterns=None, isolate: bool = True, worker=None,
                 num_random: int = 2, seed: int = 0, timeout_s: float | None = None,
                 cost_cache: dict | None = None):
        self.original, self.uri = resolve_program(source, *args)
        self.program = self.original.clone()
        self.patterns = resolve(patterns)
        self.isolate = isolate
        self.num_random = num_random
        self.seed = seed
        self.timeout_s = timeout_s
        self.history: list[Step] = []
        self._worker = worker
        self._own_worker = worker is None
        self._evaluator = None
        self._verifier: Verifier | None = None
        self._baseline: dict[tuple, runtime.Timing] = {}
        self._costs: dict[str, dict] = {} if cost_cache is None else cost_cache

    # --- state ----------------------------------------------------------------------------

    def __repr__(self) -> str:
        alts = len(self.alternatives())
        src = self.uri or self.original.name
        return f"Env({src!r}, state={self.hash()}, steps={len(self.history)}, alternatives={alts})"

    @property
    def augmented(self) -> bool:
        """Whether the current program holds alternatives ops (decisions pending)."""
        return bool(self.alternatives())

    def alternatives(self):
        return driver.list_alternatives(self.program)

    def reset(self) -> Program:
        """Back to the original program; the worker, baseline and caches are kept."""
        self.program = self.original.clone()
        self.history = []
        return self.program

    def set_program(self, program: Program) -> None:
        """Make `program` the current state (e.g. a search's result); history is kept."""
        self.program = program.clone()

    def augment(self, patterns=None, *, uids: bool = True) -> observe.Graph:
        """Dry mode: record every match of `patterns` (default: the Env's) as an alternatives op,
        and return the observation. Decide with `apply` before augmenting again."""
        if self.augmented:
            raise EnvError("the program already has alternatives ops; apply() decisions first "
                           "(or strip() them)")
        self.program = driver.augment(self.program, self.patterns if patterns is None else resolve(patterns))
        return self.observation(uids=uids)

    def observation(self, *, uids: bool = True) -> observe.Graph:
        """The current program as a graph (see `shlo_env.learn.observe`; `uids=False` skips the
        per-op structural hashes, the slowest part)."""
        return observe.graph(self.program, uids=uids)

    def apply(self, decisions) -> Program:
        """Materialize one choice per alternatives op (a list, or {index: choice}; missing
        indices keep the original), prune, verify. Returns the new current program."""
        alts = self.alternatives()
        vec = driver.normalize_decisions(alts, decisions)
        self.program = driver.apply(self.program, vec, inplace=True)
        labels = [a.labels[d] for a, d in zip(alts, vec) if d]
        self.history.append(Step(vec, labels, self.hash()))
        return self.program

    def strip(self) -> Program:
        """Drop every alternatives op, keeping the originals."""
        if self.augmented:
            self.program = driver.strip(self.program, inplace=True)
        return self.program

    def current(self) -> Program:
        """The current program without alternatives ops (what evaluate/export-to-XLA see)."""
        return driver.strip(self.program) if self.augmented else self.program

    def hash(self) -> str:
        """The DAG hash of the current program (alternatives ops included)."""
        return dag_hash(self.program)

    def text(self) -> str:
        return self.program.text()

    def export(self, path: str | os.PathLike) -> Path:
        """Write the current program: `.mlir` text or `.mlirbc` bytecode (alternatives ops, if
        any, are kept: `shlo_env.load` reads them back)."""
        return save(self.program, path)

    def clone(self) -> "Env":
        """An independent copy (its own worker, started on first use; caches copied)."""
        new = object.__new__(Env)
        new.__setstate__(self.__getstate__())
        return new

    # --- pickling -------------------------------------------------------------------------

    def __getstate__(self) -> dict:
        return {
            "original": program_state(self.original), "program": program_state(self.program),
            "uri": self.uri, "patterns": self.patterns, "isolate": self.isolate,
            "num_random": self.num_random, "seed": self.seed, "timeout_s": self.timeout_s,
            "history": [dataclasses.astuple(s) for s in self.history],
            "baseline": dict(self._baseline), "costs": dict(self._costs),
        }

    def __setstate__(self, state: dict) -> None:
        self.original = program_from_state(state["original"])
        self.program = program_from_state(state["program"])
        self.uri = state["uri"]
        self.patterns = state["patterns"]
        self.isolate = state["isolate"]
        self.num_random, self.seed, self.timeout_s = state["num_random"], state["seed"], state["timeout_s"]
        self.history = [Step(list(d), list(l), h) for d, l, h in state["history"]]
        self._worker, self._own_worker, self._evaluator, self._verifier = None, True, None, None
        self._baseline = dict(state["baseline"])
        self._costs = dict(state["costs"])

    # --- running --------------------------------------------------------------------------

    @property
    def worker(self) -> Runner:
        """The runner (a `Worker`, or `InProcess`) every compile and run goes through."""
        if self._worker is None:
            if self.isolate:
                from shlo_env.execute.worker import Worker

                self._worker = Worker(timeout_s=self.timeout_s)  # None: SHLO_ENV_TIMEOUT_S
            else:
                self._worker = InProcess()
            self._own_worker = True
        return self._worker

    def evaluator(self):
        """The search's `Evaluator` for this Env's original (verification inputs, caches).

        An Evaluator names its input sets per worker ("set0", ...), so on a worker shared with
        other Envs a fresh one is made for each use (it re-sends its inputs)."""
        if self._evaluator is None or not self._own_worker:
            from shlo_env.search.evaluator import Evaluator

            self._evaluator = Evaluator(self.original, worker=self.worker, num_random=self.num_random,
                                        seed=self.seed)
        return self._evaluator

    def verifier(self) -> Verifier:
        """The `Verifier` of this Env's original: its input sets and outputs, computed once.
        On a worker shared with other Envs a fresh one is made for each use (it re-sends its
        inputs), as for `evaluator()`."""
        if self._verifier is None or not self._own_worker:
            self._verifier = Verifier(self.original, self.worker, num_random=self.num_random, seed=self.seed)
        return self._verifier

    def _timing_key(self) -> str:
        key = "env.timing"
        self.worker.set_inputs(key, self.verifier().sets[0])
        return key

    def time(self, *programs: Program, timing: TimingPolicy = QUICK) -> list[runtime.Timing]:
        """Time programs side by side (A, B, A, B, ...) on the original's first input set."""
        texts = [(driver.strip(p) if driver.list_alternatives(p) else p).text() for p in programs]
        return self.worker.time(texts, self._timing_key(), timing)

    def evaluate(self, n: int = 10, warmup: int = 3) -> runtime.Timing:
        """T(current): full, async and compute timings, each the 10th percentile of `n` runs after
        `warmup` (compute is None where the backend reports no device time, e.g. CPU).
        Pending alternatives ops count as their originals."""
        return self.time(self.program, timing=QUICK.with_(runs=n, warmup=warmup))[0]

    def baseline(self, n: int = 10, warmup: int = 3) -> runtime.Timing:
        """XLA's time for the original program (cached per (n, warmup))."""
        key = (n, warmup)
        if key not in self._baseline:
            self._baseline[key] = self.time(self.original, timing=QUICK.with_(runs=n, warmup=warmup))[0]
        return self._baseline[key]

    def speedup(self, n: int = 10, warmup: int = 3) -> float:
        """T(original) / T(current), timed side by side: > 1 means the current program is faster."""
        base, cur = self.time(self.original, self.program, timing=QUICK.with_(runs=n, warmup=warmup))
        return base.full / cur.full

    def cost(self, program: Program | None = None, *, optimized: bool = True) -> dict:
        """XLA's cost analysis of the current program (or `program`): {'flops', 'bytes', ...}.

        `optimized=True`: of the executable XLA compiles (after fusion; a compile, in the worker).
        `optimized=False`: of the program as written (`hlo_cost`: no compile, about a
        millisecond, in this process). No timing either way, so deterministic; cached by DAG
        hash. Raises CandidateError if XLA rejects the program."""
        p = self.current() if program is None else program
        key = f"{dag_hash(p)}/{'compiled' if optimized else 'hlo'}"
        if key not in self._costs:
            self._costs[key] = self.worker.cost(p.text()) if optimized else hlo_cost(p.text())
        return self._costs[key]

    def is_equivalent(self, other: "Program | Env | None" = None, *, tier=None) -> Equivalence:
        """Do the current program's outputs match `other`'s (default: the original), on the
        example inputs and `num_random` seeded random sets? The result's tier is what was
        established: EXACT when bitwise equal, else REASSOCIATE (judged against a float64
        reference) or APPROX for programs that claim it. With `tier`, the check passes only
        if the established tier is at least that strict."""
        candidate = self.current().clone()
        if tier is not None and Numerics.parse(tier) > Numerics(candidate.numerics):
            candidate.numerics = Numerics.parse(tier)  # allow a looser comparison if asked
        claimed = Numerics(candidate.numerics)
        if other is None:
            verifier = self.verifier()
        else:  # a fresh Verifier: the outputs it keeps are the original's, not another program's
            reference_program = other.current() if isinstance(other, Env) else other
            verifier = Verifier(reference_program, self.worker, num_random=self.num_random, seed=self.seed)
        n = verifier.num_input_sets
        try:
            cmp = verifier.check(candidate.text(), (), claimed)
        except CandidateError as e:
            return Equivalence(False, Numerics.parse(tier) if tier is not None else claimed, float("nan"),
                               float("nan"), str(e), n)
        established = cmp.tier if cmp.ok else claimed
        if cmp.ok and (tier is None or established <= Numerics.parse(tier)):
            return Equivalence(True, established, cmp.max_error, cmp.bound, "", n, cmp.describe())
        detail = f"mismatch: {cmp.detail}"
        if cmp.ok:
            detail = f"equal only within {established.name}, not {Numerics.parse(tier).name}"
        return Equivalence(False, Numerics.parse(tier) if tier is not None else established,
                           cmp.max_error, cmp.bound, detail, n)

    def close(self) -> None:
        """Stop the worker (if this Env started it). The Env stays usable: it restarts one."""
        if self._worker is not None and self._own_worker:
            self._worker.close()
        self._worker, self._evaluator, self._verifier = None, None, None

    def __enter__(self) -> "Env":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

