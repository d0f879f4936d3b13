"""`shlo-env bench`: optimize every program of a suite and print the table against jax.jit."""

from __future__ import annotations

import argparse
import math
import sys
import time

from shlo_env import examples
from shlo_env.optimize import optimize


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--examples", nargs="*", default=None, metavar="NAME",
                        help=f"examples to run (default: all of {', '.join(e.name for e in examples.EXAMPLES)})")
    parser.add_argument("--strategy", default="auto", help="search strategy (default: auto)")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds per program (default: 60)")
    parser.add_argument("--seed", type=int, default=0)


def _fmt_ms(s: float) -> str:
    return "-" if s is None or math.isnan(s) else f"{s * 1e3:.3f}"


def run(args: argparse.Namespace) -> int:
    suite = examples.suite(args.examples)
    rows = []
    t0 = time.perf_counter()
    print(f"shlo-env bench: {len(suite)} programs, strategy {args.strategy}, budget {args.budget:.0f} s each",
          file=sys.stderr)
    for i, ex in enumerate(suite, 1):
        print(f"[{i}/{len(suite)}] {ex.name}: {ex.description}", file=sys.stderr, flush=True)
        opt = optimize(ex.fn, *ex.args(args.seed), strategy=args.strategy, budget_s=args.budget,
                       name=ex.name, progress=True)
        r = opt.report
        rows.append((ex.name, _fmt_ms(r.baseline_s), _fmt_ms(r.optimized_s if not r.returned_original else r.baseline_s),
                     f"{r.speedup:.2f}x", ", ".join(r.applied) or "(original)", str(r.candidates_evaluated)))
    header = ("program", "jax.jit ms", "optimized ms", "speedup", "rewrites applied", "candidates")
    print(format_table(header, rows))
    speedups = [float(r[3][:-1]) for r in rows]
    geo = math.exp(sum(math.log(s) for s in speedups) / len(speedups)) if speedups else 1.0
    faster = sum(s > 1.0 for s in speedups)
    print(f"\ngeomean speedup {geo:.2f}x; {faster}/{len(rows)} faster, none slower by construction; "
          f"{time.perf_counter() - t0:.0f} s total")
    return 0


def format_table(header, rows) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(header), sep] + [line(r) for r in rows])
