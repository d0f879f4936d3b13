"""Which patterns are real decisions? For every pattern, over the example suite or the corpus:
how often it matches, and how often choosing it (that one alternative alone) changes XLA's
optimized executable.

    python benchmarks/pattern_effectiveness.py [--examples NAME ...] [--out docs/pattern_effectiveness.md]
    python benchmarks/pattern_effectiveness.py --dataset corpus [--programs NAME ...] \
        [--patterns NAME_OR_FAMILY ...] [--max-candidates 4] [--out FILE.md]
    python benchmarks/pattern_effectiveness.py --all-sites PATTERN [--programs NAME ...] [--rounds 3]

For each program: augment with every registered pattern (APPROX included; `--patterns` narrows
that to named patterns or families, e.g. `loops batching`), then for each alternative, apply it
alone and compile both programs through a `shlo_env.execute.worker.Worker` (an XLA crash costs one
candidate). Compile only, nothing is timed, so the 45-program corpus takes minutes: on the corpus
at most `--max-candidates` alternatives per pattern and program are compiled (spread over the
program; matches are all counted), and the table reports programs rather than alternatives. The optimized HLO texts are compared after renaming every
instruction and computation by order of appearance, so that a rewrite XLA undoes (an identity
it re-applies, a transpose it folds) counts as "unchanged" even when XLA numbers its
instructions differently. XLA's cost estimate (flops, bytes accessed) is compared too.

`--all-sites PATTERN` measures what one pattern is worth on the corpus: on every program it
matches, every one of its sites rewritten at once, verified like a search candidate (the
REASSOCIATE criterion on seeded random inputs) and timed against the original side by side in
this process (`--rounds` rounds of A, B, A, B, ...; one ratio per round, with the load average),
as a markdown table on stdout. The regenerated file keeps its hand-written sections between
`<!-- name -->` and `<!-- /name -->` markers (the XLA options table, the measured families).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import re
import sys
import time
import warnings
from pathlib import Path

import os

from shlo_env import corpus
from shlo_env.rewrite import driver
from shlo_env.bench import examples
from shlo_env.execute import runtime
from shlo_env.ir.program import lower
from shlo_env.measure.numerics import Numerics
from shlo_env.patterns import all_patterns
from shlo_env.execute.runners import InProcess
from shlo_env.measure.verify import Verifier
from shlo_env.execute.worker import CandidateError, Worker
from shlo_env.measure.timing_policy import TimingPolicy

_NAME = re.compile(r"%[\w.\-]+")


def canonical_hlo(text: str) -> str:
    """Optimized HLO with instruction/computation names replaced by their order of appearance."""
    names: dict[str, str] = {}

    def rename(m):
        return names.setdefault(m.group(0), f"%n{len(names)}")

    text = _NAME.sub(rename, text)
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip())


@dataclasses.dataclass
class Row:
    pattern: str
    tier: str
    family: str
    matches: int = 0
    changed: int = 0
    cost_changed: int = 0
    errors: int = 0
    compiled: int = 0
    ratios: list = dataclasses.field(default_factory=list)  # (program, candidate time / original time)
    examples_changed: set = dataclasses.field(default_factory=set)
    examples_matched: set = dataclasses.field(default_factory=set)


def family(p) -> str:
    return type(p).__module__.rsplit(".", 1)[-1]


def select_patterns(names=None) -> list:
    """Every registered pattern, or those named (a pattern's name or its family's module name)."""
    patterns = all_patterns()
    if not names:
        return patterns
    known = {p.name for p in patterns} | {family(p) for p in patterns}
    unknown = sorted(set(names) - known)
    if unknown:
        raise SystemExit(f"unknown patterns or families {unknown}; families: "
                         f"{', '.join(sorted({family(p) for p in patterns}))}")
    return [p for p in patterns if p.name in names or family(p) in names]


def example_programs(names=None):
    """(name, Program) for the example suite, lowered on their example arguments."""
    for ex in examples.suite(names):
        yield ex.name, lower(ex.fn, *ex.args(0), name=ex.name)


def corpus_programs(names=None):
    """(name, Program) for the embedded corpus (or the entries named)."""
    entries = corpus.entries("corpus")
    if names:
        known = {e.name for e in entries}
        missing = sorted(set(names) - known)
        if missing:
            raise SystemExit(f"unknown corpus programs {missing}; known: {', '.join(sorted(known))}")
        entries = [e for e in entries if e.name in names]
    for e in entries:
        yield e.name, e.load()


def _spread(items: list, limit: int | None) -> list:
    """At most `limit` of `items`, evenly spread (all of them when limit is None)."""
    if limit is None or len(items) <= limit:
        return items
    step = len(items) / limit
    return [items[int(i * step)] for i in range(limit)]


def run(programs, patterns=None, max_candidates: int | None = None, verbose=True,
        time_runs: int = 0) -> dict[str, Row]:
    """Rows per pattern over `programs` ((name, Program) pairs); see the module docstring.
    With `time_runs`, every candidate that changes the executable is also timed side by side
    with the original (A, B, A, B, ...; random inputs, seed 0) and its time ratio recorded."""
    patterns = patterns if patterns is not None else all_patterns()
    rows = {p.name: Row(p.name, p.numerics.name, family(p)) for p in patterns}
    with Worker(timeout_s=120) as worker:
        for name, prog in programs:
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                aug = driver.augment(prog, patterns)
            alts = driver.list_alternatives(aug)
            base_text = driver.strip(aug).text()
            try:
                base_hlo = canonical_hlo(worker.optimized_hlo(base_text))
                base_cost = worker.cost(base_text)
            except CandidateError as e:
                print(f"{name}: original does not compile ({e}); skipped", file=sys.stderr)
                continue
            if time_runs:
                worker.set_inputs(name, runtime.random_inputs(prog.in_specs, 0))
            n = 0
            choices = collections.defaultdict(list)  # pattern -> [(alternatives op, choice)]
            for i, a in enumerate(alts):
                for k in range(1, a.num_choices):
                    choices[a.labels[k]].append((i, k))
            for label, picks in choices.items():
                row = rows.setdefault(label, Row(label, "?", "?"))
                row.matches += len(picks)
                row.examples_matched.add(name)
                for i, k in _spread(picks, max_candidates):
                    vec = [0] * len(alts)
                    vec[i] = k
                    try:
                        text = driver.apply(aug, vec).text()
                        hlo = canonical_hlo(worker.optimized_hlo(text))
                        cost = worker.cost(text)
                    except (CandidateError, driver.ApplyError) as e:
                        row.errors += 1
                        print(f"  {name} #{i} {label}: {e}", file=sys.stderr)
                        continue
                    n += 1
                    row.compiled += 1
                    if hlo != base_hlo:
                        row.changed += 1
                        row.examples_changed.add(name)
                        if time_runs:
                            try:
                                base_t, cand_t = worker.time([base_text, text], name, TimingPolicy(runs=time_runs))
                                row.ratios.append((name, cand_t.full / base_t.full))
                            except CandidateError as e:
                                print(f"  {name} #{i} {label}: timing failed ({e})", file=sys.stderr)
                    if any(abs(cost.get(key, 0) - base_cost.get(key, 0)) > 1e-6 * max(1.0, abs(base_cost.get(key, 0)))
                           for key in ("flops", "bytes")):
                        row.cost_changed += 1
            if verbose:
                print(f"{name}: {len(alts)} alternatives ops, {n} candidates compiled "
                      f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    return rows


def table(rows: dict[str, Row]) -> str:
    lines = ["| pattern | family | tier | matches | changes XLA's executable | changes XLA's cost estimate | "
             "examples where it changes the executable |",
             "|---|---|---|---:|---:|---:|---|"]
    order = sorted(rows.values(), key=lambda r: (-(r.changed > 0), -r.changed, -r.matches, r.family, r.pattern))
    for r in order:
        ex = ", ".join(sorted(r.examples_changed)) if r.examples_changed else ""
        err = f" ({r.errors} failed)" if r.errors else ""
        lines.append(f"| `{r.pattern}` | {r.family} | {r.tier.lower()} | {r.matches} | {r.changed}{err} | "
                     f"{r.cost_changed} | {ex} |")
    return "\n".join(lines)


def corpus_table(rows: dict[str, Row]) -> str:
    """Per pattern, counted in corpus programs (a candidate sample per program is compiled)."""
    lines = ["| pattern | family | tier | programs matched | programs where it changes the executable | "
             "alternatives (compiled / changed) | programs where it changes the executable |",
             "|---|---|---|---:|---:|---:|---|"]
    order = sorted(rows.values(), key=lambda r: (-len(r.examples_changed), -len(r.examples_matched),
                                                 r.family, r.pattern))
    for r in order:
        err = f", {r.errors} failed" if r.errors else ""
        lines.append(f"| `{r.pattern}` | {r.family} | {r.tier.lower()} | {len(r.examples_matched)} | "
                     f"{len(r.examples_changed)} | {r.matches} ({r.compiled} / {r.changed}{err}) | "
                     f"{_programs_changed(r)} |")
    return "\n".join(lines)


def _programs_changed(r: Row) -> str:
    """The programs where `r` changes the executable, each with its best time ratio (candidate /
    original; < 1 is faster) when timed."""
    best: dict[str, float] = {}
    for name, ratio in r.ratios:
        best[name] = min(ratio, best.get(name, ratio))
    return ", ".join(f"{n} ({best[n]:.2f})" if n in best else n for n in sorted(r.examples_changed))


def summary(rows: dict[str, Row]) -> str:
    real = sorted(r.pattern for r in rows.values() if r.changed)
    undone = sorted(r.pattern for r in rows.values() if r.matches and not r.changed)
    unmatched = sorted(r.pattern for r in rows.values() if not r.matches)
    return (f"- {len(rows)} patterns; {sum(1 for r in rows.values() if r.matches)} match somewhere in the suite.\n"
            f"- **{len(real)} change XLA's optimized executable** (real decisions): {', '.join(real)}.\n"
            f"- {len(undone)} match but XLA compiles the result to the same executable (XLA redoes or "
            f"undoes them): {', '.join(undone)}.\n"
            f"- {len(unmatched)} never match on the suite (their targeted tests show them firing): "
            f"{', '.join(unmatched)}.")


GPU_NOTE = """## Backend matters

The table above is for the platform named at the top. The fusion-boundary patterns are GPU
decisions first: on CPU XLA removes `optimization_barrier` before fusion (on GPU after it, so a
barrier is a real fusion boundary there), and `duplicate_producer`, `horizontal_merge` and
`insert_optimization_barrier` trade recomputation, kernel count and materialization, which
mostly pays on a GPU where every fusion is a kernel launch. The loop patterns (unrolling,
unpacking a concatenated loop state: the CartPole-in-`lax.scan` case) are likewise aimed at
GPU launch overhead. Run this script on a GPU machine to see which of them change the GPU
executable."""


def all_sites(pattern: str, names=None, rounds: int = 3) -> list[str]:
    """Markdown rows: per corpus program `pattern` matches, every site rewritten at once,
    verified and timed against the original (see the module docstring)."""
    rows = []
    for name, prog in corpus_programs(names):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            aug = driver.augment(prog, [pattern])
        alts = driver.list_alternatives(aug)
        picks = [1 if a.num_choices > 1 else 0 for a in alts]
        if not any(picks):
            continue
        base, cand = driver.strip(aug), driver.apply(aug, picks)
        cmp = Verifier(base, InProcess()).check(cand.text(), (), Numerics.REASSOCIATE)
        verdict = f"verified {cmp.tier.name.lower()}" if cmp.ok else f"rejected: {cmp.detail}"
        inputs = runtime.random_inputs(prog.in_specs, 0)
        exes = [runtime.compile(base), runtime.compile(cand)]
        ratios, loads = [], []
        for _ in range(rounds):
            t_base, t_cand = runtime.compare(exes, inputs, TimingPolicy(runs=10, min_seconds=0.5))
            ratios.append(t_cand.full / t_base.full)
            loads.append(os.getloadavg()[0])
        row = (f"| {name} | {sum(picks)} | {' '.join(f'{r:.3f}' for r in ratios)} | {t_base.full * 1e3:.3f} | "
               f"{min(loads):.1f}-{max(loads):.1f} | {verdict} |")
        print(row, flush=True)
        rows.append(row)
    return rows


def keep_marked_sections(old: str, new: str) -> str:
    """`new` followed by every `<!-- name -->` ... `<!-- /name -->` section of `old`."""
    kept = re.findall(r"(<!-- ([\w-]+)[^>]*-->.*?<!-- /\2 -->)", old, flags=re.S)
    return new + "".join("\n" + block + "\n" for block, _ in kept)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", choices=["examples", "corpus"], default="examples",
                    help="the example suite (default) or the 45-program corpus")
    ap.add_argument("--examples", "--programs", nargs="*", dest="programs",
                    help="only these examples / corpus programs (default: all)")
    ap.add_argument("--patterns", nargs="*", help="only these patterns or families (default: all)")
    ap.add_argument("--max-candidates", type=int, default=None,
                    help="alternatives compiled per pattern and program (default: all; 4 on the corpus)")
    ap.add_argument("--time", type=int, default=0, metavar="RUNS",
                    help="also time each candidate that changes the executable against the original, "
                         "side by side with RUNS interleaved runs (corpus table only)")
    ap.add_argument("--out", default=None, help="markdown file (default: docs/pattern_effectiveness.md, "
                    "docs/pattern_effectiveness_corpus.md with --dataset corpus)")
    ap.add_argument("--all-sites", metavar="PATTERN", default=None,
                    help="time PATTERN with all its sites rewritten on each corpus program it matches "
                         "(verified, A/B against the original); prints a markdown table, writes nothing")
    ap.add_argument("--rounds", type=int, default=3, help="timing rounds per program with --all-sites")
    args = ap.parse_args(argv)
    if args.all_sites:
        print("| program | sites | ratio per round (all sites / original) | original ms | load | verification |")
        print("|---|---:|---|---:|---|---|")
        all_sites(args.all_sites, args.programs, args.rounds)
        return 0
    docs = Path(__file__).resolve().parents[1] / "docs"
    on_corpus = args.dataset == "corpus"
    out = args.out or str(docs / ("pattern_effectiveness_corpus.md" if on_corpus else "pattern_effectiveness.md"))
    max_candidates = args.max_candidates if args.max_candidates is not None else (4 if on_corpus else None)
    patterns = select_patterns(args.patterns)
    t0 = time.perf_counter()
    programs = list(corpus_programs(args.programs) if on_corpus else example_programs(args.programs))
    rows = run(programs, patterns, max_candidates, time_runs=args.time)
    body = corpus_table(rows) if on_corpus else table(rows)
    print(body)
    print()
    print(summary(rows))
    names = [name for name, _ in programs]
    command = "python benchmarks/pattern_effectiveness.py" + (" " + " ".join(argv) if argv else "")
    if on_corpus:
        intro = (f"For each pattern: on how many of the {len(names)} corpus programs (`shlo_env.corpus`) it "
                 f"matches, and on how many applying one of its alternatives alone changes XLA's optimized "
                 f"HLO (compared after renaming instructions by order of appearance). At most "
                 f"{max_candidates} alternatives per pattern and program are compiled (spread over the "
                 "program), so a program counts as unchanged only for the sample compiled."
                 + (f" With `--time {args.time}`, each program listed is followed by its best time ratio "
                    "(candidate / original, side by side; < 1 is faster; one alternative alone, so a "
                    "ratio near 1 within the machine's noise means no change)." if args.time else ""))
    else:
        intro = ("For each pattern: how many alternatives it records on the example suite "
                 f"(`shlo_env/bench/examples.py`: {', '.join(names)}), and how many of those, applied alone, "
                 "change XLA's optimized HLO (compared after renaming instructions by order of appearance) "
                 "or XLA's cost estimate (flops, bytes accessed).")
    doc = ("# Pattern effectiveness" + (" on the corpus" if on_corpus else "") + "\n\n"
           f"Generated by `{command}` (platform: {runtime.platform()}; {time.perf_counter() - t0:.0f} s). "
           + intro + " A pattern that matches but never changes the executable is "
           "one XLA redoes or undoes by itself: not a decision a search can make on this backend.\n\n"
           + summary(rows) + "\n\n" + body + "\n\n" + GPU_NOTE + "\n")
    Path(out).write_text(keep_marked_sections(Path(out).read_text() if Path(out).exists() else "", doc))
    print(f"\nwritten to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
