"""Regenerate the stored scientific zoo: lower every program of `programs/`, check it, store it.

    python -m shlo_env.zoo.science.generate                          # everything (needs shlo_env[science])
    python -m shlo_env.zoo.science.generate --programs jaxopt_lbfgs_logreg   # just these (the rest are kept)

The loop is the zoo's (`shlo_env.corpus.generate.generate_dataset`: build from the config, lower
with `shlo_env.ir.program.lower`, compile, run and time in a worker process, write
`data/<name>.mlir.xz` and `data/index.json`), plus two checks of this dataset's own:

- host callbacks: the programs are built with `EQX_ON_ERROR=nan` (set by `programs/__init__.py`
  before equinox is imported). For each program that calls equinox, the generator lowers it once
  more with equinox's checks set to raise and counts the host callbacks that gives: where there
  are any, the entry says `host_callbacks_removed: true` (and how many). A stored program never
  holds a host callback (a file cannot carry the Python function): the generator refuses one.
- finite outputs: the stored program is run in this process on N(0,1) random inputs
  (`runtime.random_inputs(in_specs, 0)`, what the search draws first) and `finite_outputs` says
  whether every float output is finite; where not, `nonfinite_reason` says why.
"""

from __future__ import annotations

import argparse
import os
import re

os.environ["EQX_ON_ERROR"] = "nan"  # before anything imports equinox (programs/__init__.py repeats it)

import numpy as np  # noqa: E402

from shlo_env.corpus import SCIENCE, SCIENCE_DATA  # noqa: E402
from shlo_env.corpus.generate import _log, _version, generate_dataset  # noqa: E402

OPS_RANGE = (100, 6000)  # the span the scientific zoo is meant to cover; programs outside it are reported
_CALLBACK = re.compile(r"custom_call @(\w*callback\w*)")
_EQUINOX_LIBRARIES = {"diffrax", "optimistix", "lineax", "equinox"}


def _library_versions(libraries: dict[str, str]) -> dict[str, str | None]:
    return {d: _version(d) for d in sorted({*libraries.values(), "equinox", "optax"})}


def host_callbacks(text: str) -> list[str]:
    """The host-callback custom-call targets in a module's text (one per call site)."""
    return _CALLBACK.findall(text)


def _callbacks_with_checks_on(fn, args) -> int:
    """How many host callbacks `fn` lowers to with equinox's runtime checks on (EQX_ON_ERROR=raise)."""
    import equinox._errors as eqx_errors
    import jax

    saved = eqx_errors.EQX_ON_ERROR
    eqx_errors.EQX_ON_ERROR = "raise"  # read at trace time; jit caches hold the other setting's traces
    jax.clear_caches()
    try:
        return len(host_callbacks(jax.jit(fn, keep_unused=True).lower(*args).as_text()))
    finally:
        eqx_errors.EQX_ON_ERROR = saved
        jax.clear_caches()


def _finite_outputs(program) -> bool:
    from shlo_env.execute import runtime

    outs = runtime.execute(runtime.compile(program), runtime.random_inputs(program.in_specs, 0))
    return all(np.isfinite(o).all() for o in map(np.asarray, outs) if np.issubdtype(o.dtype, np.inexact))


def generate(names: list[str] | None = None) -> dict:
    from shlo_env.zoo.science.programs import LIBRARIES, registry

    specs = registry()
    lib_versions = _library_versions(LIBRARIES)
    lib_versions["jax"] = _version("jax")

    def describe(spec, built, program) -> dict:
        ops = program.num_ops()
        if not OPS_RANGE[0] <= ops <= OPS_RANGE[1]:
            _log(f"  {spec.name}: {ops} ops, outside the scientific zoo's span {OPS_RANGE}")
        text = program.text()
        if host_callbacks(text):
            raise SystemExit(f"{spec.name}: the lowered program holds host callbacks {host_callbacks(text)}; "
                             "a stored program cannot (is EQX_ON_ERROR=nan set before equinox is imported?)")
        removed = 0
        if {spec.library, *spec.uses} & _EQUINOX_LIBRARIES:
            removed = _callbacks_with_checks_on(built[0], built[1])
        finite = _finite_outputs(program)
        if not finite and not spec.nonfinite_reason:
            _log(f"  {spec.name}: outputs NaN/Inf on N(0,1) inputs, and no reason recorded")
        entry = {"library_version": lib_versions.get(LIBRARIES[spec.library]),
                 "uses": {u: lib_versions.get(u) or _version(u) for u in spec.uses},
                 "kind": spec.kind, "training": spec.kind == "train_step", "config": built[2],
                 "host_callbacks_removed": removed > 0, "finite_outputs": finite}
        if removed:
            entry["host_callbacks_removed_count"] = removed
            entry["eqx_on_error"] = "nan"
        if not finite:
            entry["nonfinite_reason"] = spec.nonfinite_reason or "not known"
        return entry

    return generate_dataset(SCIENCE, specs, SCIENCE_DATA, names, lib_versions, describe)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m shlo_env.zoo.science.generate",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", nargs="*", help="programs to (re)generate (default: all)")
    args = ap.parse_args(argv)
    index = generate(args.programs)
    _log(f"science: {len(index['entries'])} programs, {len(index['failures'])} failed, {index['seconds']:.0f} s")
    return 1 if index["failures"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
