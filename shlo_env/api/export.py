"""Shipping a result: an artifact that keeps its XLA actions, and `load_optimized` to run it.

    fast = shlo_env.optimize(f, X, W)
    fast.export("f.shlo")                        # a folder; or `shlo-env optimize ... --export DIR`
    g = shlo_env.load_optimized("f.shlo")        # on the serving machine: no search, no shlo_env search code
    y = g(X, W)

`jax.export` alone serializes the module but not the compiler options it was tuned with. The
artifact is a folder:

| file | holds |
|---|---|
| `module.jax_export` | the serialized `jax.export.Exported` whose module is the optimized program |
| `manifest.json` | format, name, XLA actions (tokens: disabled passes, `name=value` options), numerics tier, jax/jaxlib/shlo_env versions, backend and device kind it was tuned on, input and output specs |
| `report.json`, `report.txt` | the search's report, as data and as `str(report)` |
| `optimized.mlir` | the optimized StableHLO, to read |

`load_optimized(path)` compiles with the artifact's XLA actions (`jax.jit(exported.call,
compiler_options=...)`). On another jax or jaxlib version, or another device kind, it refuses
with an `ExportError` that says what differs: the timing that chose the result, and the XLA
options themselves, belong to that version and device. `strict=False` loads it anyway, without
the XLA actions (the rewritten module is still exact within its numerics tier: it was verified
against the original; only its speed is untested there).
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from shlo_env import _jax_compat
from shlo_env._version import __version__
from shlo_env.execute import xla_options as option_actions
from shlo_env.ir.program import Program

FORMAT = 1
MODULE, MANIFEST, REPORT_JSON, REPORT_TEXT, MLIR = (
    "module.jax_export", "manifest.json", "report.json", "report.txt", "optimized.mlir")


class ExportError(RuntimeError):
    """An artifact that cannot be loaded here (another jax/jaxlib version or device kind, another
    format, missing files)."""


def environment() -> dict:
    device = jax.devices()[0]
    return {**_jax_compat.jax_versions(), "shlo_env": __version__, "backend": device.platform,
            "device_kind": device.device_kind}


def _specs(specs: Sequence) -> list[jax.ShapeDtypeStruct]:
    return [jax.ShapeDtypeStruct(tuple(s.shape), np.dtype(s.dtype)) for s in specs]


def exported_module(program: Program, fn: Callable | None = None, original: Program | None = None):
    """A `jax.export.Exported` whose module is `program`.

    With `fn` (and the `original` program it was lowered to), the export of `jax.jit(fn)` on
    the original's argument specs, so the call takes and returns `fn`'s pytrees. Without, a
    stand-in function of the same flat signature is exported (a StableHLO file): the call takes
    the flat arguments and returns the flat results (one array when there is one)."""
    from jax import export

    base = original if original is not None else program
    flat = _specs(base.in_specs)
    if fn is not None and base.in_tree is not None:
        args = jax.tree_util.tree_unflatten(base.in_tree, flat)[0]
        exp = export.export(jax.jit(fn, keep_unused=True))(*args)
    else:
        outs = _specs(program.out_specs)

        def stand_in(*xs):
            del xs
            results = tuple(jax.numpy.zeros(s.shape, s.dtype) for s in outs)
            return results[0] if len(results) == 1 else results

        stand_in.__name__ = program.name or "main"
        exp = export.export(jax.jit(stand_in, keep_unused=True))(*flat)
    return dataclasses.replace(exp, mlir_module_serialized=program.portable(),
                               module_kept_var_idx=tuple(range(len(program.in_specs))))


def write_artifact(path: str | os.PathLike, program: Program, *, fn: Callable | None = None,
                   original: Program | None = None, actions: Sequence = (), numerics: str = "EXACT",
                   report: Mapping[str, Any] | None = None, report_text: str = "", name: str | None = None) -> Path:
    """Write the artifact folder `path` (created; its files replaced) and return it."""
    exp = exported_module(program, fn, original)
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    tokens = list(option_actions.tokens(option_actions.normalize(actions)))
    manifest = {
        "format": FORMAT, "name": name or program.name, "xla_actions": tokens, "numerics": str(numerics),
        "tuned_on": environment(), "applied": list(program.applied),
        "in_specs": [[list(s.shape), str(np.dtype(s.dtype))] for s in program.in_specs],
        "out_specs": [[list(s.shape), str(np.dtype(s.dtype))] for s in program.out_specs],
    }
    try:
        module = bytes(exp.serialize())
    except ValueError as e:  # a pytree node type jax.export cannot serialize (an Equinox module, ...)
        raise ExportError(f"jax.export cannot serialize this function's signature: {e} (or export a function "
                          "of lists, tuples and dicts of arrays: flatten the pytree first)") from None
    files = {MODULE: module, MANIFEST: json.dumps(manifest, indent=2).encode(),
             REPORT_JSON: json.dumps(dict(report or {}), indent=2, default=str).encode(),
             REPORT_TEXT: (report_text or "").encode(), MLIR: program.text().encode()}
    for file, data in files.items():  # each complete or absent: written aside, then renamed
        tmp = folder / (file + ".partial")
        tmp.write_bytes(data)
        tmp.replace(folder / file)
    return folder


def mismatch(tuned_on: Mapping[str, Any], here: Mapping[str, Any] | None = None) -> list[str]:
    """What differs between where an artifact was tuned and here: "jax 0.10.2 here, 0.11.0 there"."""
    here = here if here is not None else environment()
    return [f"{k} {here.get(k)!r} here, {tuned_on.get(k)!r} in the artifact"
            for k in ("jax", "jaxlib", "backend", "device_kind") if tuned_on.get(k) != here.get(k)]


class LoadedFunction:
    """What `load_optimized` returns: call it like the optimized function. `lower(*args)` is
    jax.jit's `Lowered` (compiled with the artifact's XLA actions); `manifest`, `report`,
    `report_text`, `actions`, `numerics` say what it is."""

    def __init__(self, exported, manifest: dict, report: dict, report_text: str, actions: tuple[str, ...]):
        self.exported = exported
        self.manifest, self.report, self.report_text = manifest, report, report_text
        self.actions = actions
        self.numerics = manifest.get("numerics", "EXACT")
        self.compiler_options = option_actions.compiler_options(actions) if actions else {}
        self._jitted = (jax.jit(exported.call, compiler_options=self.compiler_options) if self.compiler_options
                        else jax.jit(exported.call))
        self.__name__ = str(manifest.get("name") or "optimized")

    def __call__(self, *args, **kwargs):
        return self._jitted(*args, **kwargs)

    def lower(self, *args, **kwargs):
        return self._jitted.lower(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<LoadedFunction {self.__name__}: {len(self.manifest.get('applied') or ())} rewrites, " \
               f"XLA actions {list(self.actions)}>"


def load_optimized(path: str | os.PathLike, *, strict: bool = True) -> LoadedFunction:
    """The callable of an artifact written by `OptimizedFunction.export` / `--export`.

    Raises `ExportError` when the artifact was tuned on another jax/jaxlib version or device
    kind (`strict=False`: load it without its XLA actions, with a warning)."""
    from jax import export

    folder = Path(path)
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
        data = (folder / MODULE).read_bytes()
    except (OSError, ValueError) as e:
        raise ExportError(f"{folder}: not a shlo_env artifact ({e})") from None
    if manifest.get("format") != FORMAT:
        raise ExportError(f"{folder}: artifact format {manifest.get('format')!r}, this shlo_env reads {FORMAT}")
    actions = tuple(manifest.get("xla_actions") or ())
    differs = mismatch(manifest.get("tuned_on") or {})
    if differs:
        message = (f"{folder} was tuned elsewhere: {'; '.join(differs)}. Its XLA actions and timings "
                   "belong there: optimize again here, or load_optimized(..., strict=False) to run the "
                   "rewritten module without its XLA actions")
        if strict:
            raise ExportError(message)
        warnings.warn(message, stacklevel=2)
        actions = ()
    try:
        exported = export.deserialize(bytearray(data))
    except Exception as e:  # noqa: BLE001 - jax raises several kinds for a foreign or damaged module
        raise ExportError(f"{folder}: cannot deserialize {MODULE} ({type(e).__name__}: {e})") from None

    def read(file: str) -> str:
        try:
            return (folder / file).read_text()
        except OSError:
            return ""

    try:
        report = json.loads(read(REPORT_JSON) or "{}")
    except ValueError:
        report = {}
    return LoadedFunction(exported, manifest, report, read(REPORT_TEXT), actions)


__all__ = ["ExportError", "LoadedFunction", "exported_module", "load_optimized", "mismatch", "write_artifact"]
