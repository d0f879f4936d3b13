"""Source locations kept through rewrites, and the user's lines read back from them.

jax gives every op the Python frames it was traced from. An op a pattern builds would have
none (`Location.unknown()`), so profiles and XLA dumps of a rewritten program would no longer
point at the user's code, and `report.explain()` could not say where a rewrite applied. The
driver therefore builds each rewrite inside `rewrite_location(pattern, roots, captured)`:

    loc(fused<"reduce_through_dot">[<loc of the reduce>, <loc of the dot>])

a fused location of the original ops the match replaces, with the pattern's name as its
metadata. XLA copies the first file:line of it into the HLO metadata; `rewrite_sources`
reads, per pattern, the user's lines back from the ops of a rewritten program. A rewrite of a
rewritten op nests them (`fused<"b">[fused<"a">[...]]`): its lines count for both patterns.

Locations are debug information only: the DAG hash ignores them (`shlo_env.ir.hashing`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence

from jaxlib.mlir import ir

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_FRAME = re.compile(r'"([^"]+)":(\d+):\d+')
_FUSED = re.compile(r'fused<"((?:[^"\\]|\\.)*)">\[')
_OPEN, _CLOSE = "([{", ")]}"
#: matched ops named in one rewrite's location: the roots and the producers that die with them
MAX_MATCHED_OPS = 16
_ALTERNATIVES = "shlo_env.alternatives"


def _is_users(file: str) -> bool:
    """A frame of the user's code: not shlo_env's, not jax's (nor `-`, a module read from stdin)."""
    return not (file in ("-", "") or file.startswith(_PACKAGE_DIR)
                or f"{os.sep}jax{os.sep}" in file or f"{os.sep}jax_" in file)


def source_line(location) -> tuple[str, int] | None:
    """The innermost (file, line) of a location that is the user's: not shlo_env's, not jax's."""
    for file, line in _FRAME.findall(str(location)):
        if _is_users(file):
            return file, int(line)
    return None


# --- building: the location a rewrite's ops get ------------------------------------------------

def matched_ops(roots: Sequence[ir.Value], captured: Iterable[ir.Value],
                limit: int = MAX_MATCHED_OPS) -> list[ir.Operation]:
    """The original ops a match replaces: the ops defining `roots`, then the producers that
    die with them (every use read by an op already found), not crossing a `captured` value
    (an input of the rewrite, which stays) nor another rewrite's alternatives op."""
    stop = set(captured)
    found: list[ir.Operation] = []
    todo = [r.owner.operation for r in roots if isinstance(r, ir.OpResult)]
    while todo and len(found) < limit:
        op = todo.pop(0)
        if any(op == f for f in found):
            continue
        found.append(op)
        for v in op.operands:
            if v in stop or not isinstance(v, ir.OpResult):
                continue
            producer = v.owner.operation
            if producer.name == _ALTERNATIVES or any(producer == f for f in found):
                continue
            if all(any(use.owner == f for f in found) for use in v.uses):
                todo.append(producer)
    return found


def rewrite_location(pattern: str, roots: Sequence[ir.Value], captured: Iterable[ir.Value]) -> ir.Location:
    """A fused location of the ops the match replaces, named after `pattern` (in the current
    MLIR context): enter it (`with loc:`) around the pattern's `rewrite` and the ops the
    `Builder` makes carry it."""
    locs = [op.location for op in matched_ops(roots, captured)]
    return ir.Location.fused(locs or [ir.Location.unknown()], metadata=ir.StringAttr.get(pattern))


# --- reading: the user's lines per pattern -----------------------------------------------------

def _unquoted(text: str, start: int = 0) -> Iterator[tuple[int, str, int]]:
    """(index, character, bracket depth after it) of the characters of `text` from `start`
    that are outside quoted strings."""
    depth, quoted, i = 0, False, start
    while i < len(text):
        ch = text[i]
        if quoted:
            if ch == "\\":
                i += 1
            elif ch == '"':
                quoted = False
        elif ch == '"':
            quoted = True
        else:
            depth += (ch in _OPEN) - (ch in _CLOSE)
            yield i, ch, depth
        i += 1


def _closing(text: str, start: int) -> int:
    """The index of the bracket closing the one at `start`."""
    return next((i for i, ch, depth in _unquoted(text, start) if depth == 0 and ch in _CLOSE), len(text))


def _parts(text: str) -> list[str]:
    """The comma-separated items of `text` at bracket depth 0."""
    cuts = [i for i, ch, depth in _unquoted(text) if ch == "," and depth == 0]
    bounds = zip([-1] + cuts, cuts + [len(text)])
    return [text[a + 1:b].strip() for a, b in bounds if text[a + 1:b].strip()]


def _collect(text: str, out: dict[str, list[tuple[str, int]]]) -> list[tuple[str, int]]:
    """The user's lines of a location's text (one per op it names), adding each fused
    location's lines to `out` under its pattern name."""
    m = _FUSED.search(text)
    if m is None:
        line = source_line(text)
        return [line] if line is not None else []
    end = _closing(text, m.end() - 1)
    lines: list[tuple[str, int]] = []
    for part in _parts(text[m.end():end]):
        lines += [x for x in _collect(part, out) if x not in lines]
    named = out.setdefault(m.group(1), [])
    named += [x for x in lines if x not in named]
    return lines


def location_sources(location) -> dict[str, list[tuple[str, int]]]:
    """Pattern name -> the user's (file, line)s of the ops its rewrite replaced, read from one
    op's location ({} for an op no rewrite built)."""
    out: dict[str, list[tuple[str, int]]] = {}
    _collect(str(location), out)
    return out


def rewrite_sources(ops: Iterable[ir.Operation]) -> dict[str, list[tuple[str, int]]]:
    """Pattern name -> the user's (file, line)s its rewrites replaced, over `ops` (the ops of
    a rewritten program), each line once, in order of appearance."""
    out: dict[str, list[tuple[str, int]]] = {}
    for op in ops:
        for name, lines in location_sources(op.location).items():
            have = out.setdefault(name, [])
            have += [x for x in lines if x not in have]
    return out


__all__ = ["MAX_MATCHED_OPS", "location_sources", "matched_ops", "rewrite_location", "rewrite_sources",
           "source_line"]
