"""`shlo-env bench`: the command line of `shlo_env.bench` (the only place that exits)."""

from __future__ import annotations

import argparse
import sys

from shlo_env.bench.options import (DEFAULT_STRATEGY, QUICK_BUDGET_S, QUICK_SUITE, SEARCH_FIELDS, BenchError,
                                    SweepOptions)
from shlo_env.bench.report import IMPROVED_HEADER, TABLE_HEADER, format_table, header_lines, improved_rows, table_rows
from shlo_env.bench.sweep import sweep
from shlo_env.search.options import add_arguments as add_search_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = ("With no --dataset, the quick suite: the example suite and the corpus, "
                     f"{QUICK_BUDGET_S:g} s per program.")
    parser.add_argument("--dataset", nargs="+", default=None, metavar="NAME_OR_DIR",
                        help="examples, corpus, inst-10-20, inst-20-40, zoo, or a directory of .mlir/.mlirbc files "
                             "(several allowed; default: the quick suite, examples corpus)")
    parser.add_argument("--limit", type=int, default=None, help="at most N programs per dataset (a seeded sample)")
    parser.add_argument("--strategy", nargs="+", default=[DEFAULT_STRATEGY], metavar="NAME",
                        help="search strategies (several allowed): auto or a name from shlo_env.search "
                             "(pick-first, exhaustive, random, beam, mcts, cost-model); default auto")
    parser.add_argument("--workers", type=int, default=None,
                        help="parallel workers: local processes (default 1) or Ray actors (default one per "
                             "CPU of the Ray cluster); timings are serialized per device either way")
    parser.add_argument("--executor", choices=("local", "ray"), default="local",
                        help="local worker processes (default) or a Ray cluster")
    parser.add_argument("--ray-address", default=None,
                        help="Ray cluster to join ('auto', 'ray://host:10001'); default: start a local Ray")
    parser.add_argument("--db", default=None, help="results database (default ./results/shlo_env.sqlite)")
    parser.add_argument("--out", default="results", help="directory for the reports (default ./results)")
    parser.add_argument("--noise-profile", action="store_true",
                        help="measure this machine's noise profile again before the sweep")
    parser.add_argument("--noise-repeats", type=int, default=None, help="self-timings per profile program")
    parser.add_argument("--noise-max-age", type=float, default=1.0, metavar="HOURS",
                        help="measure a quick noise profile first when the database's latest is older than this "
                             "and there is something to measure (default 1; a machine's noise drifts)")
    parser.add_argument("--retry-errors", action="store_true", help="run failed measurements again")
    parser.add_argument("--peak-flops", type=float, default=None, help="device peak flops/s for the roofline")
    parser.add_argument("--peak-bandwidth", type=float, default=None, help="device peak bytes/s for the roofline")
    parser.add_argument("--examples", nargs="*", default=None, metavar="NAME",
                        help="with the examples dataset: only these examples")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--no-plot", action="store_true", help="no PNG")
    # the search's flags, as `SearchOptions` declares them (the strategies are --strategy above)
    add_search_arguments(parser, SEARCH_FIELDS, defaults={"budget_s": None}, helps={
        "budget_s": f"seconds per program and strategy (default {QUICK_BUDGET_S:g})",
        "seed": "seed of the random input sets, of the strategies and of the sample of --limit programs"})


def options_from_args(args: argparse.Namespace) -> SweepOptions:
    search = {name: getattr(args, name) for name in SEARCH_FIELDS}
    search["budget_s"] = search["budget_s"] or QUICK_BUDGET_S
    return SweepOptions(
        **search, limit=args.limit, workers=args.workers,
        executor=args.executor, ray_address=args.ray_address, db_path=args.db, out=args.out,
        retry_errors=args.retry_errors, noise_profile=args.noise_profile, noise_repeats=args.noise_repeats,
        noise_max_age_h=args.noise_max_age,
        peak_flops=args.peak_flops, peak_bandwidth=args.peak_bandwidth, examples_only=args.examples,
        progress=not args.no_progress, plot=not args.no_plot)


def run(args: argparse.Namespace) -> int:
    datasets = args.dataset or (["examples"] if args.examples else list(QUICK_SUITE))
    try:
        res = sweep(datasets, args.strategy, options_from_args(args))
    except KeyboardInterrupt:
        return 130
    except (BenchError, LookupError, ValueError, OSError) as e:  # a bad dataset, path or option: say it plainly
        print(f"shlo-env bench: {e}", file=sys.stderr)
        return 2
    print()
    print(format_table(TABLE_HEADER, table_rows(res.summary)))
    print()
    for line in header_lines(res):
        print(line)
    imp = improved_rows(res.rows, res.profile, width=72)
    if imp:
        print(f"\nrewrites returned ({len(imp)}):")
        print(format_table(IMPROVED_HEADER, imp))
    if res.reports:
        print("\nreports: " + ", ".join(str(p) for p in res.reports.values()))
    return 0
