"""A persistent cache of searches, so that a second process starts with the winner, not a search.

One JSON file per search under `<dir>/searches/`, named by a digest of the key and written by
atomic rename (several processes may write at once; the last complete write wins, a reader never
sees half a file). The directory is, in order: the `cache=` option of `optimize`/`jit` (a path,
or False to disable), the `SHLO_ENV_CACHE_DIR` environment variable ("off" disables), the
platform's user cache directory (`~/.cache/shlo_env` on Linux).

Key (`search_key`): the DAG hash of the original program, the backend and device kind, the
jax/jaxlib/shlo_env versions, and the options that change the result (the `SearchOptions` fields
declared `result=True`, the pattern set among them: `SearchOptions.result_key`).
Value (`Entry`): the chosen program as StableHLO text (None when the search kept the original),
the XLA actions it is compiled with (`xla_options.DisablePass`/`SetOption`, stored as tokens),
its numerics tier, and the search's result as its record (`ProgramResult.to_record`). Entries written before the actions were typed
(a `disabled_passes` list of strings) load: `name=value` is read as a SetOption, anything else
as a DisablePass.

An entry that cannot be read, was written by another format, or does not match its key is
ignored with a `CacheWarning` and replaced by the next search. The check of a hit against the
original, and the store, are `shlo_env.api.search_program`'s.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import os
import sys
import tarfile
import tempfile
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shlo_env.search.options import SearchOptions

from shlo_env import logs
from shlo_env.execute import xla_options

log = logs.get("cache")
FORMAT = 1
ENV_VAR = "SHLO_ENV_CACHE_DIR"
MAX_MB_VAR = "SHLO_ENV_CACHE_MAX_MB"  # the cache's size limit (least recently used entries go first)
DEFAULT_MAX_MB = 1024.0
#: Key fields that change with an upgrade: an entry that differs from a key in these only is
#: re-verified and re-timed (`search_program`, seconds) rather than searched again (`find_stale`).
VERSION_FIELDS = ("jax", "jaxlib", "shlo_env")
_OFF = {"off", "0", "false", "no", "none", "disable", "disabled"}


class CacheWarning(UserWarning):
    """A cache entry was ignored (unreadable, another format, or failed its check)."""


def default_dir() -> Path:
    """The platform's user cache directory for shlo_env."""
    home = Path.home()
    if sys.platform == "darwin":
        return home / "Library" / "Caches" / "shlo_env"
    if os.name == "nt":
        return Path(os.environ.get("LOCALAPPDATA", home / "AppData" / "Local")) / "shlo_env" / "Cache"
    return Path(os.environ.get("XDG_CACHE_HOME") or home / ".cache") / "shlo_env"


def resolve_dir(cache: bool | str | os.PathLike | None = True) -> Path | None:
    """The cache directory the `cache=` option selects, or None when caching is off."""
    if cache is None or cache is False:
        return None
    if cache is not True:
        return Path(cache).expanduser()
    env = os.environ.get(ENV_VAR)
    if env is not None and env.strip():
        return None if env.strip().lower() in _OFF else Path(env).expanduser()
    return default_dir()


def open_cache(cache: bool | str | os.PathLike | None = True) -> "SearchCache | None":
    directory = resolve_dir(cache)
    return None if directory is None else SearchCache(directory)


@dataclasses.dataclass
class Entry:
    """One finished search."""

    key: dict
    name: str
    program: str | None  # StableHLO text of the chosen program; None: the original was kept
    actions: tuple[xla_options.Action, ...] = ()  # XLA actions to compile it with
    numerics: str = "EXACT"
    optimized_hash: str = ""
    report: dict = dataclasses.field(default_factory=dict)  # the result's record (`ProgramResult.to_record`)
    created: float = 0.0
    format: int = FORMAT

    def __post_init__(self):
        self.actions = xla_options.normalize(self.actions)

    @property
    def disabled_passes(self) -> tuple[str, ...]:
        """The actions as tokens (pass names, `name=value` options)."""
        return xla_options.tokens(self.actions)

    def to_json(self) -> str:
        d = dataclasses.asdict(self)
        d["actions"] = list(self.disabled_passes)
        if isinstance(d.get("report"), dict) and "actions" in d["report"]:
            d["report"]["actions"] = list(xla_options.tokens(_actions(d["report"]["actions"])))
        return json.dumps(d, default=json_default)

    @classmethod
    def from_json(cls, text: str) -> "Entry":
        d = json.loads(text)
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise ValueError(f"format {d.get('format') if isinstance(d, dict) else '?'} (this version reads {FORMAT})")
        names = {f.name for f in dataclasses.fields(cls)}
        missing = {"key", "name", "program"} - set(d)
        if missing:
            raise ValueError(f"missing fields {sorted(missing)}")
        # before typed actions: a "disabled_passes" list of tokens (read as DisablePass/SetOption)
        d["actions"] = _actions(d["actions"] if "actions" in d else d.get("disabled_passes"))
        report = d.get("report")
        if isinstance(report, dict):
            report["actions"] = _actions(report["actions"] if "actions" in report else report.get("disabled_passes"))
            report.pop("disabled_passes", None)
        d = {k: v for k, v in d.items() if k in names}
        return cls(**d)


def _actions(stored) -> tuple[xla_options.Action, ...]:
    """Typed actions from what a file holds: tokens, or {"name"[, "value"]} records."""
    out = []
    for a in stored or ():
        if isinstance(a, dict):
            out.append(xla_options.SetOption(a["name"], a["value"]) if "value" in a
                       else xla_options.DisablePass(a["name"]))
        else:
            out.append(xla_options.parse(a))
    return xla_options.normalize(out)


def json_default(x):
    """JSON for what `json.dumps` cannot write: sets and tuples as lists, numbers as floats, else text."""
    if isinstance(x, (set, frozenset, tuple)):
        return list(x)
    try:
        return float(x)
    except (TypeError, ValueError):
        return str(x)


def digest(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=json_default).encode()).hexdigest()[:32]


class SearchCache:
    """The entries under one directory. Safe to share between processes."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)
        self.searches = self.directory / "searches"

    def path(self, key: dict) -> Path:
        return self.searches / f"{digest(key)}.json"

    def get(self, key: dict) -> Entry | None:
        """The entry for `key`, or None (missing, or ignored with a CacheWarning)."""
        path = self.path(key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            log.info("miss: %s (program %s on %s/%s)%s", path.name, key.get("program", "?"), key.get("backend", "?"),
                     key.get("device_kind", "?"), self.nearest(key))
            return None
        except OSError as e:
            warnings.warn(f"shlo_env cache: cannot read {path} ({e}); searching again", CacheWarning, stacklevel=3)
            return None
        try:
            entry = Entry.from_json(data.decode("utf-8"))
        except (ValueError, TypeError, KeyError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            warnings.warn(f"shlo_env cache: ignoring unreadable entry {path} ({type(e).__name__}: {e}); "
                          f"it will be replaced", CacheWarning, stacklevel=3)
            return None
        if json.loads(json.dumps(key, default=json_default)) != entry.key:
            warnings.warn(f"shlo_env cache: ignoring entry {path} written for another key; it will be "
                          f"replaced", CacheWarning, stacklevel=3)
            return None
        log.info("hit: %s (%s)", path.name, entry.name)
        try:
            os.utime(path)  # used now: the last to be pruned (`prune`)
        except OSError:
            pass
        return entry

    def find_stale(self, key: dict) -> Entry | None:
        """The newest entry for the same program, options, backend and device as `key`, written
        by other jax/jaxlib/shlo_env versions (`VERSION_FIELDS`), or None."""
        want = json.loads(json.dumps(key, default=json_default))
        same = {k: v for k, v in want.items() if k not in VERSION_FIELDS}
        found: list[Entry] = []
        for _, entry in self.entries():
            if entry is None or {k: v for k, v in entry.key.items() if k not in VERSION_FIELDS} != same:
                continue
            if any(entry.key.get(k) != want.get(k) for k in VERSION_FIELDS):
                found.append(entry)
        return max(found, key=lambda e: e.created) if found else None

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.files() if p.exists())

    def prune(self, max_bytes: float | None = None) -> int:
        """Remove least recently used entries (by the time each was last read or written) until
        the cache holds at most `max_bytes` (default `$SHLO_ENV_CACHE_MAX_MB`, else 1 GiB).
        Returns how many were removed."""
        if max_bytes is None:
            try:
                max_bytes = float(os.environ.get(MAX_MB_VAR, DEFAULT_MAX_MB)) * 2**20
            except ValueError:
                max_bytes = DEFAULT_MAX_MB * 2**20
        files = []
        for path in self.files():
            try:
                st = path.stat()
            except OSError:
                continue
            files.append((st.st_mtime, st.st_size, path))
        total = sum(size for _, size, _ in files)
        removed = 0
        for _, size, path in sorted(files, key=lambda f: f[0]):
            if total <= max_bytes:
                break
            path.unlink(missing_ok=True)
            total -= size
            removed += 1
        if removed:
            log.info("pruned %d least recently used entries (limit %.0f MB)", removed, max_bytes / 2**20)
        return removed

    def nearest(self, key: dict) -> str:
        """Why `key` missed, against the entries of the same program: the key fields that differ
        from the closest one ("" when no entry holds this program)."""
        best: list[str] | None = None
        want = json.loads(json.dumps(key, default=json_default))
        for _, entry in self.entries():
            if entry is None or entry.key.get("program") != want.get("program"):
                continue
            diff = [k for k in sorted(set(want) | set(entry.key)) if k != "options" and want.get(k) != entry.key.get(k)]
            options, stored = want.get("options") or {}, entry.key.get("options") or {}
            diff += [f"options.{k}" for k in sorted(set(options) | set(stored)) if options.get(k) != stored.get(k)]
            if best is None or len(diff) < len(best):
                best = diff
        return "" if best is None else f"; the nearest entry differs in {', '.join(best) or 'nothing'}"

    def put(self, entry: Entry) -> Path:
        """Write `entry` atomically (temporary file in the same directory, then rename)."""
        self.searches.mkdir(parents=True, exist_ok=True)
        entry.created = entry.created or time.time()
        path = self.path(entry.key)
        fd, tmp = tempfile.mkstemp(prefix=path.stem + ".", suffix=".tmp", dir=self.searches)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(entry.to_json())
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        log.info("stored: %s (%s)", path.name, entry.name)
        self.prune()
        return path

    def discard(self, key: dict) -> None:
        self.path(key).unlink(missing_ok=True)

    def files(self) -> list[Path]:
        return sorted(self.searches.glob("*.json")) if self.searches.is_dir() else []

    def entries(self) -> list[tuple[Path, Entry | None]]:
        """Every entry file with its parsed entry (None for an unreadable one)."""
        out: list[tuple[Path, Entry | None]] = []
        for path in self.files():
            try:
                out.append((path, Entry.from_json(path.read_bytes().decode("utf-8"))))
            except (OSError, ValueError, TypeError):
                out.append((path, None))
        return out

    def clear(self) -> int:
        """Remove every entry (and stray temporary files); returns how many entries were removed."""
        n = 0
        for path in self.files():
            path.unlink(missing_ok=True)
            n += 1
        if self.searches.is_dir():
            for tmp in self.searches.glob("*.tmp"):
                tmp.unlink(missing_ok=True)
        return n


# --- the key --------------------------------------------------------------------------------------

def pattern_identity(patterns) -> str:
    """A digest of the pattern set: names and classes, plus the source of patterns that are not
    built in (a user's pattern that changes gets new searches)."""
    from shlo_env.patterns.base import resolve

    parts = []
    for p in resolve(patterns):
        cls = type(p)
        part = f"{p.name}={cls.__module__}.{cls.__qualname__}"
        if not cls.__module__.startswith("shlo_env."):
            try:
                part += ":" + hashlib.sha256(inspect.getsource(cls).encode()).hexdigest()[:16]
            except (OSError, TypeError):
                part += ":" + repr(sorted(vars(p).items()))
        parts.append(part)
    return hashlib.sha256("\n".join(sorted(parts)).encode()).hexdigest()[:16]


def environment() -> dict:
    """Backend, device kind and versions: a search measured elsewhere does not apply here."""
    import jax

    from shlo_env import _jax_compat
    from shlo_env._version import __version__

    device = jax.devices()[0]
    return {"backend": device.platform, "device_kind": device.device_kind,
            **_jax_compat.jax_versions(), "shlo_env": __version__}


def search_key(program, options: "SearchOptions") -> dict:
    """The key of a search of `program` (a Program) with `options`: the program's DAG hash, the
    environment, and the options' result-changing fields (`SearchOptions.result_key`, derived
    from their declarations; the pattern set as `pattern_identity`)."""
    from shlo_env.ir.hashing import dag_hash

    return {"format": FORMAT, "program": dag_hash(program), **environment(), "options": options.result_key()}


# --- moving entries between machines ----------------------------------------------------------------

def export_entries(store: SearchCache, path: str | os.PathLike) -> int:
    """Write every readable entry of `store` into the archive `path` (.tar.gz); returns how many.
    An entry applies where its key's backend, device kind and versions match (`search_key`)."""
    n = 0
    tmp = Path(str(path) + ".partial")
    with tarfile.open(tmp, "w:gz") as tar:
        for file, entry in store.entries():
            if entry is not None:
                tar.add(file, arcname=f"searches/{file.name}")
                n += 1
    tmp.replace(path)
    return n


def import_entries(store: SearchCache, path: str | os.PathLike) -> tuple[int, int]:
    """Add the entries of the archive `path` (from `export_entries`) to `store`: each is parsed
    and stored under its own key (a file whose name is not its key's digest is skipped, as is
    anything but an entry). Returns (imported, skipped)."""
    imported = skipped = 0
    with tarfile.open(path, "r:*") as tar:
        for member in tar.getmembers():
            if not member.isfile() or not member.name.endswith(".json"):
                skipped += member.isfile()
                continue
            f = tar.extractfile(member)
            try:
                entry = Entry.from_json(f.read().decode("utf-8")) if f is not None else None
            except (ValueError, TypeError, KeyError):
                entry = None
            if entry is None or Path(member.name).name != f"{digest(entry.key)}.json":
                skipped += 1
                continue
            store.put(entry)
            imported += 1
    return imported, skipped


# --- `shlo-env cache list|clear|export|import` ------------------------------------------------------

def add_arguments(p) -> None:
    p.add_argument("action", choices=("list", "clear", "export", "import"),
                   help="list the cached searches, remove them all, or copy them to/from an archive")
    p.add_argument("archive", nargs="?", help="export/import: the .tar.gz archive")
    p.add_argument("--dir", default=None, help=f"the cache directory (default: ${ENV_VAR}, else {default_dir()})")


def run(args) -> int:
    store = open_cache(args.dir if args.dir else True)
    if store is None:
        print(f"the search cache is off (${ENV_VAR}={os.environ.get(ENV_VAR)})")
        return 0
    if args.action == "clear":
        print(f"removed {store.clear()} cached searches from {store.directory}")
        return 0
    if args.action in ("export", "import"):
        if not args.archive:
            print(f"shlo-env cache {args.action}: error: give the archive's path", file=sys.stderr)
            return 2
        try:
            if args.action == "export":
                print(f"exported {export_entries(store, args.archive)} cached searches to {args.archive}")
            else:
                imported, skipped = import_entries(store, args.archive)
                print(f"imported {imported} cached searches into {store.directory}"
                      + (f" ({skipped} files skipped: not entries)" if skipped else ""))
        except (OSError, EOFError, ValueError, tarfile.TarError) as e:
            print(f"shlo-env cache {args.action}: error: {e}", file=sys.stderr)
            return 2
        return 0
    rows = store.entries()
    print(f"{len(rows)} cached searches in {store.directory}")
    for path, entry in rows:
        if entry is None:
            print(f"  {path.name}: unreadable (ignored; replaced by the next search)")
            continue
        r, k = entry.report, entry.key
        ratio = r.get("ratio") or 1.0
        what = ("jax.jit kept" if entry.program is None
                else f"{1.0 / ratio:.2f}x: {', '.join(r.get('applied') or ())}")
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.created))
        print(f"  {entry.name:24s} {k.get('program', '?')} {k.get('backend', '?')}/{k.get('device_kind', '?')} "
              f"{when}  {what}")
    return 0


__all__ = ["CacheWarning", "Entry", "SearchCache", "default_dir", "resolve_dir", "open_cache",
           "search_key", "ENV_VAR", "export_entries", "import_entries"]
