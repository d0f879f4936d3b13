"""Regenerate the stored zoo: lower every program of `shlo_env/zoo/programs/`, check it, store it.

    python -m shlo_env.zoo.generate                              # everything (needs shlo_env[zoo])
    python -m shlo_env.zoo.generate --programs hf_gpt2_lm_train  # just these (the rest are kept)

Each program is built from its config with random weights (nothing is downloaded), lowered with
`shlo_env.import_.lower` (parameters and optimizer state are module inputs), compiled, run on
random inputs and timed in a worker process, and written as `data/<name>.mlir.xz` (StableHLO
text, xz-compressed) with its metadata in `data/index.json`. The checks and the index layout are
the corpus's (`shlo_env.corpus.generate`), plus the library's config and version.
"""

from __future__ import annotations

import argparse
import json
import lzma
import re
import time

from shlo_env.corpus import ZOO, ZOO_DATA
from shlo_env.corpus.generate import (_count_all_ops, _log, _spec_list, _validate, _version, _versions,
                                      write_index)
from shlo_env.hashing import dag_hash
from shlo_env.worker import Worker

OPS_RANGE = (200, 5000)  # the span the zoo is meant to cover; programs outside it are reported


def _library_versions(libraries: dict[str, str]) -> dict[str, str | None]:
    return {d: _version(d) for d in sorted({*libraries.values(), "optax"})}


def generate(names: list[str] | None = None) -> dict:
    from shlo_env.import_ import lower
    from shlo_env.zoo.programs import LIBRARIES, registry

    specs = registry()
    unknown = set(names or ()) - set(specs)
    if unknown:
        raise SystemExit(f"unknown zoo programs: {sorted(unknown)}; known: {sorted(specs)}")
    ZOO_DATA.mkdir(parents=True, exist_ok=True)
    index_path = ZOO_DATA / "index.json"
    old = {}
    if names and index_path.exists():
        old = {e["name"]: e for e in json.loads(index_path.read_text())["entries"]}
    versions = _versions()
    lib_versions = _library_versions(LIBRARIES)
    entries, failures = [], {}
    start = time.perf_counter()
    with Worker() as worker:
        for name, spec in specs.items():
            if names and name not in names:
                if name in old:
                    entries.append(old[name])
                continue
            t0 = time.perf_counter()
            try:
                fn, args, config = spec.build()
                program = lower(fn, *args, name=name)
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
            (ZOO_DATA / file).write_bytes(lzma.compress(text.encode(), preset=9))
            ops = program.num_ops()
            entry = {
                "name": name,
                "library": spec.library,
                "library_version": lib_versions.get(LIBRARIES[spec.library]),
                "uses": {u: lib_versions.get(u) or _version(u) for u in spec.uses},
                "kind": spec.kind,
                "training": spec.kind == "train_step",
                "description": spec.description,
                "config": config,
                "ops": ops,
                "ops_total": _count_all_ops(program),
                "in_specs": _spec_list(program.in_specs),
                "out_specs": _spec_list(program.out_specs),
                "custom_calls": sorted(set(re.findall(r"custom_call @([\w.]+)", text))),
                "has_while": "stablehlo.while" in text,
                "dag_hash": dag_hash(program),
                "runtime_ms": round(ms, 3),
                "file": file,
                "bytes": (ZOO_DATA / file).stat().st_size,
                **versions,
            }
            entries.append(entry)
            flag = "" if OPS_RANGE[0] <= ops <= OPS_RANGE[1] else f"  (outside {OPS_RANGE})"
            _log(f"  {name:28s} {spec.library:12s} {spec.kind:10s} ops={ops:5d} {ms:8.2f} ms "
                 f"({time.perf_counter() - t0:.0f} s){flag}")
    return write_index(index_path, ZOO, specs, entries, failures, {**versions, **lib_versions}, start)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m shlo_env.zoo.generate", description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", nargs="*", help="zoo programs to (re)generate (default: all)")
    args = ap.parse_args(argv)
    index = generate(args.programs)
    _log(f"zoo: {len(index['entries'])} programs, {len(index['failures'])} failed, {index['seconds']:.0f} s")
    return 1 if index["failures"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
