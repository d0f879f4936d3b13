"""Regenerate the embedded corpus and the sub-graph datasets.

    python -m shlo_env.corpus.generate                      # everything (needs flax, equinox, optax)
    python -m shlo_env.corpus.generate --only corpus        # lower the programs again
    python -m shlo_env.corpus.generate --only subgraphs     # re-cut inst-* from the stored corpus
    python -m shlo_env.corpus.generate --only corpus --programs linen_mlp_train gp_posterior

The corpus step imports the model code in `shlo_env/corpus/programs/` (which needs the optional
extra: `pip install shlo_env[corpus]`), lowers each program with `shlo_env.ir.program.lower`, checks
in a worker process that it compiles and runs on random inputs, times it, and writes
`data/corpus/<name>.mlir.xz` (StableHLO text, xz-compressed) and `data/corpus/index.json`.
StableHLO text is stored rather than bytecode so that the data stays readable by newer jaxlib
releases (and by a person).

The sub-graph step needs only the stored corpus: it cuts random connected sub-graphs (see
`subgraphs.py`), deduplicates them by DAG hash, compiles and runs every one in a worker process
(dropping those that fail), and writes `data/<dataset>.zip` holding `index.json` and one `.mlir`
text file per program.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import io
import json
import lzma
import random
import re
import sys
import time
import zipfile
from importlib import metadata as importlib_metadata

import numpy as np
from jaxlib.mlir import ir

from shlo_env import _jax_compat
from shlo_env.execute import runtime
from shlo_env.corpus import CORPUS, DATA, SUBGRAPH_DATASETS, cache_clear
from shlo_env.ir.hashing import dag_hash
from shlo_env.ir.program import Program
from shlo_env.measure.timing_policy import QUICK, default_timeout
from shlo_env.execute.worker import CandidateError, Worker

TARGETS = {"inst-10-20": 1150, "inst-20-40": 380}  # candidates to validate; >= 1000 / 300 must survive
INPUT_SEED = 0


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _version(dist: str) -> str | None:
    try:
        return importlib_metadata.version(dist)
    except importlib_metadata.PackageNotFoundError:
        return None


def _spec_list(specs) -> list[dict]:
    return [{"shape": list(s.shape), "dtype": np.dtype(s.dtype).name} for s in specs]


def _count_all_ops(program: Program) -> int:
    """Every op in the module except the module, function and return ops (private functions too)."""
    n = 0

    def visit(op):
        nonlocal n
        if op.name not in ("builtin.module", "func.func", "func.return"):
            n += 1
        return ir.WalkResult.ADVANCE

    program.module.operation.walk(visit)
    return n


def _versions() -> dict:
    return {**_jax_compat.jax_versions(), "numpy": np.__version__}


def _validate(worker: Worker, text: str, specs, *, time_it: bool = False) -> tuple[str | None, float | None]:
    """(None, ms) if `text` compiles and runs on random inputs in the worker, else (reason, None)."""
    worker.set_inputs("x", runtime.random_inputs(specs, INPUT_SEED))
    try:
        worker.run(text, "x")
        ms = None
        if time_it:
            ms = worker.time([text], "x", QUICK)[0].full * 1e3
        return None, ms
    except CandidateError as e:
        return f"{e.kind}: {e.message[:300]}", None


# --- corpus -----------------------------------------------------------------------------------

def generate_corpus(names: list[str] | None = None) -> dict:
    from shlo_env.corpus.programs import registry  # needs flax, equinox, optax

    lib_versions = {lib: _version(lib) for lib in ("flax", "equinox", "optax")}
    jax_version = _versions()["jax"]

    def describe(spec, built, program) -> dict:
        return {"library_version": lib_versions.get(spec.library.split(".")[0]) or jax_version,
                "uses": {u: lib_versions.get(u) for u in spec.uses},
                "kind": spec.kind, "training": spec.training}

    return generate_dataset(CORPUS, registry(), DATA / CORPUS, names, lib_versions, describe)


def generate_dataset(dataset: str, specs: dict, out_dir, names: list[str] | None, lib_versions: dict,
                     describe) -> dict:
    """The loop the corpus and the zoo generators share: for each registered program (or those
    `names`; the index keeps the others' entries), build it (`spec.build()` returns the function
    and its arguments, then anything `describe` reads), lower it, check that it compiles and runs
    in a worker and time it, write it xz-compressed to `out_dir` and index it with the common
    metadata plus `describe(spec, built, program)`. A program that fails is reported in the
    index's failures, and the others go on."""
    from shlo_env.ir.program import lower

    unknown = set(names or ()) - set(specs)
    if unknown:
        raise SystemExit(f"unknown {dataset} programs: {sorted(unknown)}; known: {sorted(specs)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    index_path = out_dir / "index.json"
    old = {}
    if names and index_path.exists():
        old = {e["name"]: e for e in json.loads(index_path.read_text())["entries"]}
    versions = _versions()
    entries, failures = [], {}
    start = time.perf_counter()
    with Worker() as worker:  # SHLO_ENV_TIMEOUT_S (default 300 s)
        for name, spec in specs.items():
            if names and name not in names:
                if name in old:
                    entries.append(old[name])
                continue
            t0 = time.perf_counter()
            try:
                built = spec.build()
                program = lower(built[0], *built[1], name=name)
            except Exception as e:  # noqa: BLE001 - report and keep going
                failures[name] = f"lower: {type(e).__name__}: {e}"
                _log(f"  {name}: FAILED to lower: {e}")
                continue
            text = program.text()
            problem, ms = _validate(worker, text, program.in_specs, time_it=True)
            if problem or ms is None:
                failures[name] = problem or "not timed"
                _log(f"  {name}: FAILED {problem}")
                continue
            file = f"{name}.mlir.xz"
            (out_dir / file).write_bytes(lzma.compress(text.encode(), preset=9))
            entry = {
                "name": name,
                "library": spec.library,
                "description": spec.description,
                **describe(spec, built, program),
                "ops": program.num_ops(),
                "ops_total": _count_all_ops(program),
                "in_specs": _spec_list(program.in_specs),
                "out_specs": _spec_list(program.out_specs),
                "custom_calls": sorted(set(re.findall(r"custom_call @([\w.]+)", text))),
                "has_while": "stablehlo.while" in text,
                "dag_hash": dag_hash(program),
                "runtime_ms": round(ms, 3),
                "file": file,
                "bytes": (out_dir / file).stat().st_size,
                **versions,
            }
            entries.append(entry)
            _log(f"  {name:32s} {spec.library:12s} {entry['kind']:16s} ops={entry['ops']:5d} {ms:8.2f} ms  "
                 f"({time.perf_counter() - t0:.1f} s)")
    return write_index(index_path, dataset, specs, entries, failures, {**versions, **lib_versions}, start)


def write_index(index_path, dataset: str, specs, entries: list, failures, versions: dict,
                start: float) -> dict:
    """Write a generated dataset's index.json (entries in the registry's order), shared by the
    corpus and the zoo generators."""
    order = list(specs)
    entries.sort(key=lambda e: order.index(e["name"]) if e["name"] in order else len(order))
    index = {
        "dataset": dataset,
        "format": "StableHLO text, xz-compressed, one file per program",
        "generated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "versions": versions,
        "seconds": round(time.perf_counter() - start, 1),
        "failures": failures,
        "entries": entries,
    }
    index_path.write_text(json.dumps(index, indent=1))
    cache_clear()
    return index


# --- sub-graphs -------------------------------------------------------------------------------

def _op_counts(program: Program) -> dict[str, int]:
    c = collections.Counter(op.operation.name.removeprefix("stablehlo.") for op in program.body.operations
                            if op.operation.name != "func.return")
    return dict(sorted(c.items()))


def sample_subgraphs(programs: list[Program], lo: int, hi: int, target: int, seed: int,
                     max_rounds: int = 200) -> tuple[list, dict]:
    """Round-robin over programs, one cut per program per round, until `target` unique ones."""
    from shlo_env.corpus.subgraphs import Extractor

    extractors = []
    for p in programs:
        ex = Extractor(p)
        if ex.num_eligible >= lo:
            extractors.append(ex)
    rngs = [random.Random(f"{seed}/{lo}-{hi}/{ex.program.name}") for ex in extractors]
    seen: set[str] = set()
    found: list = []
    stats = collections.Counter[str]()
    stale = [0] * len(extractors)
    for _ in range(max_rounds):
        progressed = False
        for k, (ex, rng) in enumerate(zip(extractors, rngs)):
            if len(found) >= target:
                break
            if stale[k] >= 25:  # this program keeps producing duplicates: it is exhausted
                continue
            sg = ex.sample(rng, lo, hi)
            stats["attempts"] += 1
            if sg is None:
                stats["no_cut"] += 1
                stale[k] += 1
                continue
            h = dag_hash(sg.program)
            if h in seen:
                stats["duplicates"] += 1
                stale[k] += 1
                continue
            stale[k] = 0
            seen.add(h)
            found.append((sg, h))
            progressed = True
        if len(found) >= target or not progressed:
            break
    stats["unique"] = len(found)
    stats["source_programs"] = len(extractors)
    return found, dict(stats)


def generate_subgraphs(dataset: str, target: int, seed: int = 0) -> dict:
    from shlo_env import corpus

    lo, hi = SUBGRAPH_DATASETS[dataset]
    programs = [corpus.load(e.uri) for e in corpus.entries(CORPUS)]
    start = time.perf_counter()
    found, stats = sample_subgraphs(programs, lo, hi, target, seed)
    _log(f"  {dataset}: {stats['unique']} unique cuts from {stats['source_programs']} programs "
         f"({stats['attempts']} attempts, {time.perf_counter() - start:.1f} s); validating...")
    kept: list = []
    failures = collections.Counter[str]()
    failure_examples: dict[str, str] = {}
    with Worker(min(120.0, default_timeout())) as worker:  # a cut that hangs costs at most 2 minutes
        for n, (sg, h) in enumerate(found):
            text = sg.program.text()
            problem, _ = _validate(worker, text, sg.program.in_specs)
            if problem:
                kind = problem.split(":")[0]
                failures[kind] += 1
                failure_examples.setdefault(kind, f"{sg.source}: {problem}")
                continue
            kept.append((sg, h, text))
            if (n + 1) % 200 == 0:
                _log(f"    validated {n + 1}/{len(found)} ({len(kept)} ok)")
    kept.sort(key=lambda t: (t[0].source, t[1]))
    per_source = collections.Counter[str]()
    entries = []
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for sg, h, text in kept:
            k = per_source[sg.source]
            per_source[sg.source] += 1
            name = f"{sg.source}.{k:03d}"
            file = f"programs/{name}.mlir"
            z.writestr(zipfile.ZipInfo(file, date_time=(2020, 1, 1, 0, 0, 0)), text,
                       compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
            entries.append({
                "name": name,
                "source": sg.source,
                "ops": sg.size,
                "in_specs": _spec_list(sg.program.in_specs),
                "out_specs": _spec_list(sg.program.out_specs),
                "op_counts": _op_counts(sg.program),
                "dag_hash": h,
                "file": file,
            })
        index = {
            "dataset": dataset,
            "format": "zip of StableHLO text files + this index",
            "ops_range": [lo, hi],
            "generated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "versions": _versions(),
            "seed": seed,
            "seconds": round(time.perf_counter() - start, 1),
            "sampling": stats,
            "validated": len(found),
            "dropped": dict(failures),
            "dropped_examples": failure_examples,
            "count": len(entries),
            "entries": entries,
        }
        z.writestr(zipfile.ZipInfo("index.json", date_time=(2020, 1, 1, 0, 0, 0)), json.dumps(index, indent=0),
                   compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
    (DATA / f"{dataset}.zip").write_bytes(buf.getvalue())
    cache_clear()
    _log(f"  {dataset}: {len(entries)} programs kept, {sum(failures.values())} dropped {dict(failures)}, "
         f"{(DATA / f'{dataset}.zip').stat().st_size / 1e6:.2f} MB, {index['seconds']:.0f} s")
    return index


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m shlo_env.corpus.generate", description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=["corpus", "subgraphs", "all"], default="all")
    ap.add_argument("--programs", nargs="*", help="corpus programs to (re)generate (default: all)")
    ap.add_argument("--datasets", nargs="*", default=list(SUBGRAPH_DATASETS), choices=list(SUBGRAPH_DATASETS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the sub-graph targets (for quick tries)")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    if args.only in ("corpus", "all"):
        _log("corpus:")
        index = generate_corpus(args.programs)
        _log(f"corpus: {len(index['entries'])} programs, {len(index['failures'])} failed, {index['seconds']:.0f} s")
    if args.only in ("subgraphs", "all"):
        for ds in args.datasets:
            generate_subgraphs(ds, int(TARGETS[ds] * args.scale), seed=args.seed)
    total = sum(p.stat().st_size for p in DATA.rglob("*") if p.is_file())
    _log(f"done in {time.perf_counter() - start:.0f} s; data is {total / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
