"""Episode records: write them as JSONL, replay them, validate their result.

An episode is a few JSON lines sharing an `episode` id:

    {"kind": "episode", "episode": "...", "program": {"uri": ..., "name": ..., "text": ...},
     "patterns": [...], "initial_hash": ..., "reward": "cost_model", "versions": {...}, ...}
    {"kind": "step", "episode": "...", "step": 0, "decisions": [1, 0], "num_alternatives": 2,
     "labels": ["dot_reassociate"], "reward": 0.12, "hash": "..."}
    ...
    {"kind": "end", "episode": "...", "final_hash": ..., "final_text": ..., "numerics": 1, "total_reward": ...}

`replay(record)` re-runs augment + apply with the recorded pattern names and decisions and checks
every intermediate hash; `validate(record)` also re-checks that the final program computes what
the original does (within the numerics tier of what was applied) and that it is the program the
record claims. Both return result objects that print as a clear verdict.
"""

from __future__ import annotations

import dataclasses
import json
import os
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path

from shlo_env import _jax_compat
from shlo_env.rewrite import driver
from shlo_env.ir.hashing import dag_hash
from shlo_env.ir.program import Program, ProgramError, load
from shlo_env.measure.numerics import Numerics
from shlo_env.patterns.base import resolve

FORMAT_VERSION = 1


def versions() -> dict[str, str]:
    from shlo_env._version import __version__

    return {**_jax_compat.jax_versions(), "shlo_env": __version__}


@dataclasses.dataclass
class StepRecord:
    step: int
    decisions: list[int]
    num_alternatives: int
    labels: list[str]  # pattern applied at each non-zero decision
    reward: float
    hash: str  # DAG hash of the state after the step (unchanged for a stop or a failed step)
    stop: bool = False  # the agent kept every original
    error: str = ""  # the step failed (state unchanged)


@dataclasses.dataclass
class EpisodeRecord:
    """One episode: where the program came from, every step, and the result."""

    program_text: str | None  # the original program (StableHLO text); None: load program_uri
    program_uri: str | None = None
    program_name: str = ""
    patterns: list[str] = dataclasses.field(default_factory=list)
    initial_hash: str = ""
    reward: str = ""
    steps: list[StepRecord] = dataclasses.field(default_factory=list)
    final_hash: str | None = None
    final_text: str | None = None
    numerics: int = 0  # loosest tier among applied patterns
    total_reward: float = 0.0
    versions: dict = dataclasses.field(default_factory=versions)
    episode: str = dataclasses.field(default_factory=lambda: uuid.uuid4().hex[:12])
    config: dict = dataclasses.field(default_factory=dict)

    # --- building -------------------------------------------------------------------------

    @classmethod
    def start(cls, program: Program, *, uri: str | None = None, patterns: Sequence = (),
              reward: str = "", config: dict | None = None, store_text: bool = True) -> "EpisodeRecord":
        return cls(program.text() if store_text or uri is None else None, uri, program.name,
                   [p.name for p in resolve(list(patterns))], dag_hash(program), reward,
                   config=dict(config or {}))

    def add_step(self, decisions: Sequence[int], num_alternatives: int, labels: Sequence[str],
                 reward: float, state_hash: str, *, stop: bool = False, error: str = "") -> StepRecord:
        s = StepRecord(len(self.steps), [int(d) for d in decisions], int(num_alternatives), list(labels),
                       float(reward), state_hash, stop, error)
        self.steps.append(s)
        self.total_reward += float(reward)
        return s

    def finish(self, final: Program, *, store_text: bool = True) -> None:
        self.final_hash = dag_hash(final)
        self.final_text = final.text() if store_text else None
        self.numerics = int(final.numerics)

    @property
    def finished(self) -> bool:
        return self.final_hash is not None

    # --- the program ----------------------------------------------------------------------

    def load_program(self) -> Program:
        """The episode's original program: from the stored text, else from its URI."""
        if self.program_text is not None:
            return load(self.program_text, name=self.program_name or None)
        if self.program_uri is None:
            raise ProgramError(f"episode {self.episode}: the record has neither program text nor a URI")
        from shlo_env.research.env import load_uri

        return load_uri(self.program_uri)

    def final_program(self) -> Program | None:
        """The final program the record stores (None if it stores only its hash)."""
        if self.final_text is None:
            return None
        p = load(self.final_text, name=self.program_name or None)
        p.numerics = Numerics(self.numerics)
        return p

    # --- JSONL ----------------------------------------------------------------------------

    def to_lines(self) -> list[dict]:
        head = {"kind": "episode", "format": FORMAT_VERSION, "episode": self.episode,
                "program": {"uri": self.program_uri, "name": self.program_name, "text": self.program_text},
                "patterns": self.patterns, "initial_hash": self.initial_hash, "reward": self.reward,
                "versions": self.versions, "config": self.config}
        lines = [head]
        for s in self.steps:
            lines.append({"kind": "step", "episode": self.episode, **dataclasses.asdict(s)})
        if self.finished:
            lines.append({"kind": "end", "episode": self.episode, "final_hash": self.final_hash,
                          "final_text": self.final_text, "numerics": self.numerics,
                          "total_reward": self.total_reward, "steps": len(self.steps)})
        return lines

    def to_jsonl(self) -> str:
        return "".join(json.dumps(line, sort_keys=True) + "\n" for line in self.to_lines())

    def write(self, path: str | os.PathLike, mode: str = "a") -> Path:
        path = Path(path)
        with path.open(mode, encoding="utf-8") as f:
            f.write(self.to_jsonl())
        return path

    @classmethod
    def from_lines(cls, lines: Iterable[dict]) -> "EpisodeRecord":
        records = _group(lines)
        if len(records) != 1:
            raise ValueError(f"expected the lines of one episode, got {len(records)}")
        return records[0]

    @classmethod
    def from_jsonl(cls, text: str) -> "EpisodeRecord":
        return cls.from_lines(json.loads(line) for line in text.splitlines() if line.strip())


def _group(lines: Iterable[dict]) -> list[EpisodeRecord]:
    records: dict[str, EpisodeRecord] = {}
    for n, line in enumerate(lines):
        kind, eid = line.get("kind"), line.get("episode")
        if not isinstance(eid, str):
            raise ValueError(f"line {n + 1}: a record without an episode id: {str(line)[:80]}")
        if kind == "episode":
            if line.get("format", FORMAT_VERSION) > FORMAT_VERSION:
                raise ValueError(f"episode {eid}: record format {line['format']} is newer than this "
                                 f"shlo_env reads ({FORMAT_VERSION})")
            prog = line["program"]
            records[eid] = EpisodeRecord(prog.get("text"), prog.get("uri"), prog.get("name", ""),
                                         list(line.get("patterns", [])), line.get("initial_hash", ""),
                                         line.get("reward", ""), versions=line.get("versions", {}),
                                         episode=eid, config=line.get("config", {}))
            continue
        if eid not in records:
            raise ValueError(f"line {n + 1}: a {kind!r} line for episode {eid!r} before its header")
        rec = records[eid]
        if kind == "step":
            fields = {f.name for f in dataclasses.fields(StepRecord)}
            rec.steps.append(StepRecord(**{k: v for k, v in line.items() if k in fields}))
        elif kind == "end":
            rec.final_hash, rec.final_text = line["final_hash"], line.get("final_text")
            rec.numerics = int(line.get("numerics", 0))
            rec.total_reward = float(line.get("total_reward", sum(s.reward for s in rec.steps)))
        else:
            raise ValueError(f"line {n + 1}: unknown kind {kind!r}")
    return list(records.values())


def read_records(path: str | os.PathLike) -> list[EpisodeRecord]:
    """Every episode in a JSONL file, in the order their headers appear."""
    with Path(path).open(encoding="utf-8") as f:
        return _group(json.loads(line) for line in f if line.strip())


# --- replay -----------------------------------------------------------------------------------

@dataclasses.dataclass
class ReplayResult:
    ok: bool
    final_hash: str
    expected_hash: str | None
    program: Program | None  # the replayed final program
    steps: int = 0  # steps replayed
    diverged_at: int | None = None  # first step whose result differs from the record
    detail: str = ""

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        if self.ok:
            return f"replay ok: {self.steps} step{'' if self.steps == 1 else 's'} reproduce final hash {self.final_hash}"
        where = f" at step {self.diverged_at}" if self.diverged_at is not None else ""
        return f"replay FAILED{where}: {self.detail}"


def replay(record: EpisodeRecord, *, patterns=None, program: Program | None = None) -> ReplayResult:
    """Re-run the episode's decisions from its original program and compare every hash.

    `patterns` overrides the recorded pattern names (needed for patterns outside the registry);
    `program` overrides the recorded source program.
    """
    try:
        pats = resolve(patterns if patterns is not None else record.patterns)
    except KeyError as e:
        return ReplayResult(False, "", record.final_hash, None, detail=f"cannot resolve the recorded patterns: {e}; "
                            "pass patterns=[...] for patterns outside the registry")
    state = program.clone() if program is not None else record.load_program()
    h = dag_hash(state)
    if record.initial_hash and h != record.initial_hash:
        return ReplayResult(False, h, record.final_hash, state, diverged_at=None,
                            detail=f"the source program hashes to {h}, the record says {record.initial_hash} "
                                   "(the corpus entry or the file changed)")
    for s in record.steps:
        if s.stop or s.error or not any(s.decisions):
            continue
        augmented = driver.augment(state, pats)
        alts = driver.list_alternatives(augmented)
        if len(alts) != s.num_alternatives:
            return ReplayResult(False, dag_hash(state), record.final_hash, state, s.step, s.step,
                                f"augment found {len(alts)} alternatives, the record {s.num_alternatives} "
                                f"(the pattern library changed since jax {record.versions.get('jax', '?')} / "
                                f"shlo_env {record.versions.get('shlo_env', '?')})")
        try:
            state = driver.apply(augmented, s.decisions, inplace=True)
        except driver.ApplyError as e:
            return ReplayResult(False, dag_hash(state), record.final_hash, state, s.step, s.step,
                                f"decisions {s.decisions} no longer apply: {e}")
        h = dag_hash(state)
        if h != s.hash:
            return ReplayResult(False, h, record.final_hash, state, s.step, s.step,
                                f"state hash {h} differs from the recorded {s.hash}")
    h = dag_hash(state)
    expected = record.final_hash if record.final_hash is not None else (
        record.steps[-1].hash if record.steps else record.initial_hash)
    ok = h == expected
    return ReplayResult(ok, h, expected, state, len(record.steps), None if ok else len(record.steps),
                        "" if ok else f"final hash {h} differs from the recorded {expected}")


# --- validation -------------------------------------------------------------------------------

@dataclasses.dataclass
class ValidationResult:
    """The three checks of `validate`, each with what it found."""

    replay: ReplayResult
    hash_ok: bool  # the final program is the one the record names (its hash)
    equivalence: object | None  # env.Equivalence, None if it could not run
    final_hash: str
    expected_hash: str | None
    detail: str = ""

    @property
    def equivalent(self) -> bool:
        return bool(self.equivalence)

    @property
    def ok(self) -> bool:
        return self.replay.ok and self.hash_ok and self.equivalent

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        mark = lambda b: "ok  " if b else "FAIL"  # noqa: E731
        lines = [f"validation {'passed' if self.ok else 'FAILED'}",
                 f"  [{mark(self.replay.ok)}] {self.replay}",
                 f"  [{mark(self.hash_ok)}] final program hash {self.final_hash}"
                 + ("" if self.hash_ok else f" != recorded {self.expected_hash}"),
                 f"  [{mark(self.equivalent)}] outputs vs the original: "
                 + (str(self.equivalence) if self.equivalence is not None else self.detail)]
        return "\n".join(lines)


def validate(record: EpisodeRecord, program: Program | None = None, *, patterns=None,
             isolate: bool = True, num_random: int = 2, seed: int = 0) -> ValidationResult:
    """Check an episode's result: (1) its decisions replay to the recorded hashes, (2) the final
    program (`program`, else the one stored in the record, else the replayed one) is the one the
    record names, (3) it computes what the original does, within the applied numerics tier, on
    the example inputs and `num_random` seeded random input sets (in a worker process unless
    `isolate=False`)."""
    from shlo_env.research.env import Env

    rep = replay(record, patterns=patterns)
    final = program if program is not None else record.final_program()
    if final is None:
        final = rep.program
    expected = record.final_hash if record.final_hash is not None else rep.expected_hash
    if final is None:
        return ValidationResult(rep, False, None, "", expected, "no final program to check")
    h = dag_hash(final)
    tier = Numerics(max(int(final.numerics), int(record.numerics),
                        int(rep.program.numerics) if rep.program is not None else 0))
    try:
        original = record.load_program()
        with Env(original, isolate=isolate, num_random=num_random, seed=seed) as env:
            env.set_program(final)
            eq = env.is_equivalent(tier=tier)
        detail = ""
    except Exception as e:  # noqa: BLE001 - reported in the result, never raised
        eq, detail = None, f"could not check: {type(e).__name__}: {e}"
    return ValidationResult(rep, h == expected, eq, h, expected, detail)
