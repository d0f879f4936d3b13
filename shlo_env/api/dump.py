"""A dump folder per search: what was searched, what won, and every candidate with its fate.

    SHLO_ENV_DUMP_DIR=/tmp/dumps python train.py          # one subfolder per search: NAME-HASH/
    shlo-env optimize model.mlir -o out.mlir --dump DIR     # the files directly in DIR

| file | holds |
|---|---|
| `original.mlir` | the program as lowered (StableHLO text) |
| `winner.mlir` | the program returned (the original itself when jax.jit was kept) |
| `report.json` | the report (`str(report)`'s fields; `ProgramResult.record()` for a file) |
| `candidates.jsonl` | one line per state evaluated: hash, rewrites, XLA actions, claimed and verified tier, status, ratio, why rejected or untimed |

A search served from the persistent cache evaluates no candidate: its `candidates.jsonl` is empty.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from shlo_env import logs
from shlo_env.api.cache import json_default

ENV_VAR = "SHLO_ENV_DUMP_DIR"
FILES = ("original.mlir", "winner.mlir", "report.json", "candidates.jsonl")
log = logs.get("search")


def root(explicit: str | os.PathLike | None = None) -> Path | None:
    """Where dumps go: `explicit`, else `$SHLO_ENV_DUMP_DIR`, else None (no dump)."""
    value = explicit if explicit is not None else os.environ.get(ENV_VAR, "").strip() or None
    return None if value is None else Path(value)


def folder_for(base: Path, name: str, original_hash: str) -> Path:
    """The subfolder of one search under `base`: NAME-HASH (a name safe on any file system)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "program"
    return base / f"{safe[:60]}-{original_hash[:12]}"


def _json(x: Any) -> Any:
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: getattr(x, f.name) for f in dataclasses.fields(x)}
    return json_default(x)


def write(folder: str | os.PathLike, *, original_text: str, winner_text: str | None, report: Mapping[str, Any],
          candidates: Iterable[Mapping[str, Any]]) -> Path:
    """Write the four files into `folder` (created); returns it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "original.mlir").write_text(original_text)
    (folder / "winner.mlir").write_text(winner_text if winner_text is not None else original_text)
    (folder / "report.json").write_text(json.dumps(dict(report), indent=2, default=_json))
    with open(folder / "candidates.jsonl", "w") as f:
        for record in candidates:
            f.write(json.dumps(dict(record), default=_json) + "\n")
    log.info("dump written to %s", folder)
    return folder


def report_record(report: Any) -> dict:
    """A report (an `optimize` Report, a `ProgramResult`) as JSON data."""
    record = getattr(report, "record", None)
    if callable(record):
        return dict(record())
    if dataclasses.is_dataclass(report) and not isinstance(report, type):
        return {f.name: getattr(report, f.name) for f in dataclasses.fields(report)}
    return dict(report)


__all__ = ["ENV_VAR", "FILES", "folder_for", "report_record", "root", "write"]
