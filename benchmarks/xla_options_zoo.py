"""Which XLA compile options pay on the zoo (issue 31, item 5), judged by the acceptance test.

    python benchmarks/xla_options_zoo.py [--programs NAME ...] [--limit N] [--allowance 4]
                                         [--tokens TOKEN ...] [--json rows.json]

For each zoo program (or `--programs`; `--limit`: a seeded sample), one worker holds its
example inputs, and each value-preserving option of `shlo_env.execute.xla_options.candidate_options()`
(or `--tokens`) is timed against the original, the same StableHLO compiled without it, by the
search's own acceptance test (`shlo_env.measure.paired_timing.time_until_decided`: the sequential paired
Wilcoxon test, alpha 1 %, min gain 1 %, at most `--allowance` seconds with the compile). The
original against itself is the A/A control on every program (accepted: a false acceptance).

An option is "faster" on a program when the test accepts it, "slower" when its lower bound is
above 1 (the test rejects it with confidence that it costs time), else "same". Outputs are not
verified here: the search verifies every candidate, and tests/test_xla_options.py checks that
every value compiles and verifies. `--json` appends one row per (program, option), so a long run
can be split (`--programs`); the table covers every row in the file.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import random
import sys
import time
from pathlib import Path

import numpy as np

from shlo_env import corpus
from shlo_env.execute import runtime, xla_options
from shlo_env.measure.paired_timing import time_until_decided
from shlo_env.execute.worker import CandidateError, Worker

CONTROL = "(original: A/A control)"


def measure(name: str, tokens: list[str], allowance: float) -> list[dict]:
    entry = corpus.resolve(f"zoo/{name}")
    program = corpus.load(entry)
    text = program.text()
    arrays = list(program.example_args) if program.example_args is not None else \
        runtime.random_inputs(program.in_specs, 0)
    rows = []
    with Worker() as w:
        w.set_inputs("x", arrays)
        w.run(text, "x")  # the original compiled once, outside every allowance
        for token in [CONTROL, *tokens]:
            passes = () if token == CONTROL else (token,)
            row = dict(program=name, kind=entry.metadata.get("kind", ""), ops=entry.metadata.get("ops"),
                       option=token)
            try:
                r = time_until_decided(w, text, text, "x", allowance, passes_b=passes)
            except CandidateError as e:
                row.update(outcome="error", error=str(e)[:200])
            else:
                slower = math.isfinite(r.lower) and r.lower > 1.0
                row.update(outcome="faster" if r.decision == "accept" else "slower" if slower else "same",
                           decision=str(r.decision), ratio=r.ratio, lower=r.lower, upper=r.upper,
                           observations=r.observations, seconds=round(r.seconds, 2))
            rows.append(row)
            print(f"  {name:28s} {token:72s} {row['outcome']:7s} {row.get('ratio', math.nan):.3f} "
                  f"[{row.get('lower', math.nan):.3f}, {row.get('upper', math.nan):.3f}]", file=sys.stderr)
    return rows


def table(rows: list[dict]) -> str:
    by_option: dict[str, list[dict]] = collections.defaultdict(list)
    for r in rows:
        by_option[r["option"]].append(r)
    out = ["| option | programs | faster | slower | errors | geomean estimate | faster on |",
           "|---|---|---|---|---|---|---|"]
    for option, rs in by_option.items():
        ok = [r for r in rs if r["outcome"] != "error"]
        geo = math.exp(sum(math.log(r["ratio"]) for r in ok) / len(ok)) if ok else math.nan
        faster = [f"{r['program']} {r['ratio']:.3f}" for r in ok if r["outcome"] == "faster"]
        out.append(f"| {option} | {len(rs)} | {len(faster)} | {sum(r['outcome'] == 'slower' for r in ok)} | "
                   f"{len(rs) - len(ok)} | {geo:.3f} | {', '.join(faster) or '-'} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", nargs="*", default=None)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--tokens", nargs="*", default=None, help="NAME=VALUE option tokens (default: all candidates)")
    ap.add_argument("--allowance", type=float, default=4.0, help="seconds per test, compile included")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    names = args.programs or [e.name for e in corpus.entries("zoo")]
    if args.limit:
        names = sorted(random.Random(args.seed).sample(names, min(args.limit, len(names))))
    tokens = list(args.tokens) if args.tokens is not None else list(xla_options.candidate_options())
    rows: list[dict] = []
    if args.json and Path(args.json).exists():
        rows = json.loads(Path(args.json).read_text())
    t0 = time.perf_counter()
    for name in names:
        rows += measure(name, tokens, args.allowance)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1, default=float))
    print(f"{len(names)} programs x {len(tokens)} options + the control, {time.perf_counter() - t0:.0f} s",
          file=sys.stderr)
    print(table(rows))
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    raise SystemExit(main())
