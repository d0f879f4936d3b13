"""Which patterns are real decisions? For every pattern, over the example suite: how often it
matches, and how often choosing it (that one alternative alone) changes XLA's optimized
executable.

    python benchmarks/pattern_effectiveness.py [--examples NAME ...] [--out docs/pattern_effectiveness.md]

For each example program: augment with every registered pattern (APPROX included), then for
each alternative, apply it alone and compile both programs through a `shlo_env.worker.Worker`
(an XLA crash costs one candidate). The optimized HLO texts are compared after renaming every
instruction and computation by order of appearance, so that a rewrite XLA undoes (an identity
it re-applies, a transpose it folds) counts as "unchanged" even when XLA numbers its
instructions differently. XLA's cost estimate (flops, bytes accessed) is compared too.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import time
import warnings
from pathlib import Path

from shlo_env import driver, examples, runtime
from shlo_env.import_ import lower
from shlo_env.patterns import all_patterns
from shlo_env.worker import CandidateError, Worker

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
    examples_changed: set = dataclasses.field(default_factory=set)
    examples_matched: set = dataclasses.field(default_factory=set)


def run(names=None, verbose=True) -> dict[str, Row]:
    patterns = all_patterns()
    rows = {p.name: Row(p.name, p.numerics.name, type(p).__module__.rsplit(".", 1)[-1]) for p in patterns}
    with Worker(timeout_s=120) as worker:
        for ex in examples.suite(names):
            t0 = time.perf_counter()
            prog = lower(ex.fn, *ex.args(0), name=ex.name)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                aug = driver.augment(prog, patterns)
            alts = driver.list_alternatives(aug)
            base_text = driver.strip(aug).text()
            try:
                base_hlo = canonical_hlo(worker.optimized_hlo(base_text))
                base_cost = worker.cost(base_text)
            except CandidateError as e:
                print(f"{ex.name}: original does not compile ({e}); skipped", file=sys.stderr)
                continue
            n = 0
            for i, a in enumerate(alts):
                for k in range(1, a.num_choices):
                    label = a.labels[k]
                    row = rows.setdefault(label, Row(label, "?", "?"))
                    row.matches += 1
                    row.examples_matched.add(ex.name)
                    vec = [0] * len(alts)
                    vec[i] = k
                    try:
                        text = driver.apply(aug, vec).text()
                        hlo = canonical_hlo(worker.optimized_hlo(text))
                        cost = worker.cost(text)
                    except (CandidateError, driver.ApplyError) as e:
                        row.errors += 1
                        print(f"  {ex.name} #{i} {label}: {e}", file=sys.stderr)
                        continue
                    n += 1
                    if hlo != base_hlo:
                        row.changed += 1
                        row.examples_changed.add(ex.name)
                    if any(abs(cost.get(key, 0) - base_cost.get(key, 0)) > 1e-6 * max(1.0, abs(base_cost.get(key, 0)))
                           for key in ("flops", "bytes")):
                        row.cost_changed += 1
            if verbose:
                print(f"{ex.name}: {len(alts)} alternatives ops, {n} candidates compiled "
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", nargs="*", help="only these examples (default: the whole suite)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "docs" / "pattern_effectiveness.md"))
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows = run(args.examples)
    body = table(rows)
    print(body)
    print()
    print(summary(rows))
    names = [e.name for e in examples.suite(args.examples)]
    doc = ("# Pattern effectiveness\n\n"
           "Generated by `python benchmarks/pattern_effectiveness.py` "
           f"(platform: {runtime.platform()}; {time.perf_counter() - t0:.0f} s). For each pattern: how many "
           "alternatives it records on the example suite (`shlo_env/examples.py`: "
           f"{', '.join(names)}), and how many of those, applied alone, change XLA's optimized HLO "
           "(compared after renaming instructions by order of appearance) or XLA's cost estimate "
           "(flops, bytes accessed). A pattern that matches but never changes the executable is "
           "one XLA redoes or undoes by itself: not a decision a search can make on this backend.\n\n"
           + summary(rows) + "\n\n" + body + "\n\n" + GPU_NOTE + "\n")
    Path(args.out).write_text(doc)
    print(f"\nwritten to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
