"""Regenerate the stored zoo: lower every program of `shlo_env/zoo/programs/`, check it, store it.

    python -m shlo_env.zoo.generate                              # everything (needs shlo_env[zoo])
    python -m shlo_env.zoo.generate --programs hf_gpt2_lm_train  # just these (the rest are kept)

Each program is built from its config with random weights (nothing is downloaded), lowered with
`shlo_env.ir.program.lower` (parameters and optimizer state are module inputs), compiled, run on
random inputs and timed in a worker process, and written as `data/<name>.mlir.xz` (StableHLO
text, xz-compressed) with its metadata in `data/index.json`. The checks and the index layout are
the corpus's (`shlo_env.corpus.generate`), plus the library's config and version.
"""

from __future__ import annotations

import argparse

from shlo_env.corpus import ZOO, ZOO_DATA
from shlo_env.corpus.generate import _log, _version, generate_dataset

OPS_RANGE = (200, 5000)  # the span the zoo is meant to cover; programs outside it are reported


def _library_versions(libraries: dict[str, str]) -> dict[str, str | None]:
    return {d: _version(d) for d in sorted({*libraries.values(), "optax"})}


def generate(names: list[str] | None = None) -> dict:
    from shlo_env.zoo.programs import LIBRARIES, registry

    lib_versions = _library_versions(LIBRARIES)

    def describe(spec, built, program) -> dict:
        ops = program.num_ops()
        if not OPS_RANGE[0] <= ops <= OPS_RANGE[1]:
            _log(f"  {spec.name}: {ops} ops, outside the zoo's span {OPS_RANGE}")
        return {"library_version": lib_versions.get(LIBRARIES[spec.library]),
                "uses": {u: lib_versions.get(u) or _version(u) for u in spec.uses},
                "kind": spec.kind, "training": spec.kind == "train_step", "config": built[2]}

    return generate_dataset(ZOO, registry(), ZOO_DATA, names, lib_versions, describe)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m shlo_env.zoo.generate", description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", nargs="*", help="zoo programs to (re)generate (default: all)")
    args = ap.parse_args(argv)
    index = generate(args.programs)
    _log(f"zoo: {len(index['entries'])} programs, {len(index['failures'])} failed, {index['seconds']:.0f} s")
    return 1 if index["failures"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
