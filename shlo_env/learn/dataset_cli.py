"""`shlo-env dataset build|export|merge|exe-features`: the measurement dataset for learned cost models (docs/learned.md)."""

from __future__ import annotations

import json

from shlo_env.learn import dataset


def add_arguments(p) -> None:
    sub = p.add_subparsers(dest="action", required=True)
    b = sub.add_parser("build", help="measure candidates into the results database (resumable)")
    b.add_argument("--datasets", nargs="+", default=["inst-10-20"], help="corpus datasets to draw programs from")
    b.add_argument("--db", default="results/shlo_env.sqlite")
    b.add_argument("--max-programs", type=int, default=20, help="programs per dataset (the first N)")
    b.add_argument("--skip-programs", type=int, default=0,
                   help="leave out the first N programs of each dataset (measured by an earlier build)")
    b.add_argument("--max-candidates", type=int, default=8, help="distinct executables timed per program")
    b.add_argument("--max-seconds", type=float, default=600.0, help="stop (resumably) after this long")
    b.add_argument("--runs", type=int, default=10, help="timed runs per side-by-side measurement")
    b.add_argument("--min-seconds", type=float, default=0.05, help="minimum timing time per candidate")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--rounds", type=int, default=4, help="side-by-side timings pooled into each executable's label")
    b.add_argument("--pool", type=int, default=3,
                   help="vectors compiled per program, as a multiple of --max-candidates (grouped by executable)")
    b.add_argument("--ties", type=int, default=2, help="extra vectors kept per executable (exact ties, not timed)")
    e = sub.add_parser("export", help="write <split>.npz + <split>.json, split by source program")
    e.add_argument("--db", default="results/shlo_env.sqlite")
    e.add_argument("--out", required=True)
    e.add_argument("--fractions", type=float, nargs=3, default=list(dataset.DEFAULT_FRACTIONS),
                   metavar=("TRAIN", "VAL", "TEST"))
    m = sub.add_parser("merge", help="join exports (a dataset grown by a later build) into one directory")
    m.add_argument("sources", nargs="+", help="exported dataset directories, earliest first")
    m.add_argument("--out", required=True)
    x = sub.add_parser("exe-features", help="re-export a dataset with its executables' features (format 4): "
                                            "compiles one vector per executable, times nothing")
    x.add_argument("source", help="an exported dataset directory (format 3)")
    x.add_argument("--out", required=True)


def run(args) -> int:
    try:
        if args.action == "build":
            out = dataset.build(datasets=args.datasets, db_path=args.db, max_programs=args.max_programs,
                                max_candidates=args.max_candidates, max_seconds=args.max_seconds,
                                runs=args.runs, min_seconds=args.min_seconds, seed=args.seed,
                                rounds=args.rounds, pool=args.pool, ties=args.ties,
                                skip_programs=args.skip_programs)
        elif args.action == "exe-features":
            out = dataset.add_executable_features(args.source, args.out)
        elif args.action == "merge":
            out = dataset.merge(args.out, args.sources)
        else:
            out = dataset.export(args.out, db_path=args.db, fractions=args.fractions)
    except dataset.DatasetError as e:
        print(f"error: {e}")
        return 2
    print(json.dumps(out, indent=1))
    return 0
