"""The results database: programs, measurements, noise profiles and machines in one SQLite file.

Standard library only (`sqlite3`), WAL mode, one transaction per measurement. Tables:

- `environments`: a machine and software stack (`env_id` = hash of host, platform, device,
  CPU model, Python/jax/jaxlib/shlo_env versions) with its peak rates for the roofline.
- `programs`: programs by DAG hash, with metadata (name, op count, specs, dataset metadata).
- `dataset_entries`: which program a dataset URI named (a URI whose file changed gets a new hash).
- `noise_profiles`: faster/slower thresholds derived on an environment, with the samples.
- `sweeps`: one row per `shlo-env bench` invocation (config, start/end, status).
- `measurements`: one row per (dataset, uri, program hash, strategy, config, environment):
  decisions and applied patterns, timings full/async/compute of the original and the returned
  program, ratio, noise and thresholds, cost analysis, verification, timestamps.

A sweep is resumable at any point, even after `kill -9`: a measurement is written in one
transaction together with its program (committed rows survive a killed process: WAL with
`synchronous=FULL`), the unique key makes a second write of the same measurement a no-op, and a
sweep asks `done_keys()` before it starts and skips what is there.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import math
import os
import platform as _platform
import socket
import sqlite3
import time
from pathlib import Path

from shlo_env.measure.noise_thresholds import NoiseModel

DEFAULT_PATH = Path("results") / "shlo_env.sqlite"
SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT
);
CREATE TABLE IF NOT EXISTS environments (
    env_id TEXT PRIMARY KEY,
    hostname TEXT, platform TEXT, device_kind TEXT, cpu_model TEXT, cpu_count INTEGER,
    memory_bytes INTEGER, python TEXT, jax TEXT, jaxlib TEXT, shlo_env TEXT,
    peak_flops REAL, peak_bandwidth REAL, peak_source TEXT,
    created TEXT, info TEXT
);
CREATE TABLE IF NOT EXISTS programs (
    hash TEXT PRIMARY KEY,
    name TEXT, ops INTEGER, num_inputs INTEGER, num_outputs INTEGER,
    in_specs TEXT, out_specs TEXT, metadata TEXT, first_seen TEXT
);
CREATE TABLE IF NOT EXISTS dataset_entries (
    dataset TEXT NOT NULL, uri TEXT NOT NULL, hash TEXT NOT NULL REFERENCES programs(hash),
    name TEXT, added TEXT,
    PRIMARY KEY (dataset, uri, hash)
);
CREATE TABLE IF NOT EXISTS noise_profiles (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    env_id TEXT NOT NULL REFERENCES environments(env_id),
    created TEXT, faster REAL NOT NULL, slower REAL NOT NULL, method TEXT,
    programs INTEGER, repeats INTEGER, samples INTEGER, load_avg REAL, details TEXT
);
CREATE TABLE IF NOT EXISTS sweeps (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    env_id TEXT, started TEXT, finished TEXT, status TEXT, config TEXT, command TEXT,
    load_avg_start REAL, load_avg_end REAL
);
CREATE TABLE IF NOT EXISTS measurements (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset TEXT NOT NULL, uri TEXT NOT NULL, program_hash TEXT NOT NULL REFERENCES programs(hash),
    name TEXT,
    strategy TEXT NOT NULL, strategy_used TEXT,
    config_key TEXT NOT NULL, config TEXT,
    env_id TEXT NOT NULL REFERENCES environments(env_id), machine TEXT, jax TEXT, jaxlib TEXT,
    status TEXT NOT NULL, error TEXT, reason TEXT,
    returned_original INTEGER, identical INTEGER, best_hash TEXT,
    decisions TEXT, trajectory TEXT, applied TEXT, disabled_passes TEXT, numerics TEXT, verification TEXT,
    baseline_full REAL, baseline_async REAL, baseline_compute REAL,
    best_full REAL, best_async REAL, best_compute REAL,
    ratio REAL, search_ratio REAL, confirm_ratio REAL,
    noise REAL, threshold REAL, faster_threshold REAL, slower_threshold REAL, noise_profile_id INTEGER,
    flops_original REAL, bytes_original REAL, flops_best REAL, bytes_best REAL,
    transcendentals_best REAL, roofline_floor_s REAL,
    candidates INTEGER, cache_hits INTEGER, timed INTEGER, failures TEXT, untimed TEXT,
    decision_space REAL, num_alternatives INTEGER, strategy_info TEXT,
    search_s REAL, total_s REAL, executor TEXT, sweep_id INTEGER, worker TEXT,
    started_at TEXT, finished_at TEXT,
    UNIQUE (dataset, uri, program_hash, strategy, config_key, env_id)
);
CREATE INDEX IF NOT EXISTS measurements_by_sweep ON measurements (dataset, strategy, config_key, env_id);
"""

# columns added after a table was first released: added to an older database when it is opened
ADDED_COLUMNS = {"measurements": (("untimed", "TEXT"), ("peak_rss_mb", "REAL"), ("final_timings", "INTEGER"),
                                  ("phases", "TEXT"), ("candidate_s", "REAL"))}

KEY_FIELDS = ("dataset", "uri", "program_hash", "strategy", "config_key", "env_id")


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


def load_avg() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def config_key(config: dict) -> str:
    """A short stable hash of a measurement's configuration (what changes the result)."""
    blob = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _j(x) -> str | None:
    return None if x is None else json.dumps(_clean(x), sort_keys=True, default=str)


def _clean(x):
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _num(x) -> float | None:
    if x is None:
        return None
    try:
        x = float(x)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond a float (a decision space)
        return None
    return x if math.isfinite(x) else None


# --- the environment ------------------------------------------------------------------------------

def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return _platform.processor() or _platform.machine()


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def environment() -> dict:
    """This machine and software stack (what a measurement depends on)."""
    from shlo_env import _jax_compat
    from shlo_env.execute import runtime
    from shlo_env._version import __version__

    versions = _jax_compat.jax_versions()
    dev = runtime.devices()[0]
    env = {
        "hostname": socket.gethostname(),
        "platform": runtime.platform(),
        "device_kind": getattr(dev, "device_kind", str(dev)),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": _memory_bytes(),
        "python": _platform.python_version(),
        "jax": versions["jax"],
        "jaxlib": versions["jaxlib"],
        "shlo_env": __version__,
    }
    ident = {k: env[k] for k in ("hostname", "platform", "device_kind", "cpu_model", "cpu_count",
                                 "python", "jax", "jaxlib", "shlo_env")}
    env["env_id"] = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]
    return env


# --- the database ---------------------------------------------------------------------------------

class ResultsDB:
    """The results database. Use as a context manager or call `close()`."""

    def __init__(self, path: str | os.PathLike = DEFAULT_PATH, timeout_s: float = 60.0):
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(str(path), timeout=timeout_s, isolation_level=None)
        self.conn.row_factory = sqlite3.Row
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute("PRAGMA foreign_keys=ON")
        self._init()

    def _init(self) -> None:
        # executescript() commits first; schema statements are idempotent (IF NOT EXISTS).
        self.conn.executescript(SCHEMA)
        with self.transaction() as c:
            for table, columns in ADDED_COLUMNS.items():
                have = {r[1] for r in c.execute(f"PRAGMA table_info({table})")}
                for name, kind in columns:
                    if name not in have:
                        c.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
            row = c.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is None:
                c.execute("INSERT INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            elif int(row[0]) != SCHEMA_VERSION:
                raise RuntimeError(f"{self.path}: schema version {row[0]}, this shlo_env writes "
                                   f"{SCHEMA_VERSION}; use another --db")

    @contextlib.contextmanager
    def transaction(self):
        """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error): all or nothing, one writer at a time."""
        for attempt in range(50):
            try:
                self.conn.execute("BEGIN IMMEDIATE")
                break
            except sqlite3.OperationalError as e:  # "database is locked" past the busy timeout
                if "locked" not in str(e) or attempt == 49:
                    raise
                time.sleep(0.1)
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "ResultsDB":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- environments -------------------------------------------------------------------------

    def ensure_environment(self, env: dict) -> str:
        with self.transaction() as c:
            c.execute(
                "INSERT OR IGNORE INTO environments (env_id, hostname, platform, device_kind, cpu_model, "
                "cpu_count, memory_bytes, python, jax, jaxlib, shlo_env, created, info) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (env["env_id"], env["hostname"], env["platform"], env["device_kind"], env["cpu_model"],
                 env["cpu_count"], env["memory_bytes"], env["python"], env["jax"], env["jaxlib"],
                 env["shlo_env"], now_iso(), _j(env)))
        return env["env_id"]

    def environment_row(self, env_id: str) -> dict | None:
        row = self.conn.execute("SELECT * FROM environments WHERE env_id=?", (env_id,)).fetchone()
        return dict(row) if row else None

    def set_peak_rates(self, env_id: str, flops: float | None, bandwidth: float | None, source: str) -> None:
        with self.transaction() as c:
            c.execute("UPDATE environments SET peak_flops=?, peak_bandwidth=?, peak_source=? WHERE env_id=?",
                      (_num(flops), _num(bandwidth), source, env_id))

    # --- programs -----------------------------------------------------------------------------

    @staticmethod
    def _put_program(c, dataset: str, uri: str, info: dict) -> None:
        c.execute("INSERT OR IGNORE INTO programs (hash, name, ops, num_inputs, num_outputs, in_specs, "
                  "out_specs, metadata, first_seen) VALUES (?,?,?,?,?,?,?,?,?)",
                  (info["hash"], info.get("name"), info.get("ops"), info.get("num_inputs"),
                   info.get("num_outputs"), _j(info.get("in_specs")), _j(info.get("out_specs")),
                   _j(info.get("metadata")), now_iso()))
        c.execute("INSERT OR IGNORE INTO dataset_entries (dataset, uri, hash, name, added) VALUES (?,?,?,?,?)",
                  (dataset, uri, info["hash"], info.get("name"), now_iso()))

    def add_program(self, dataset: str, uri: str, info: dict) -> None:
        with self.transaction() as c:
            self._put_program(c, dataset, uri, info)

    def program(self, hash: str) -> dict | None:  # noqa: A002
        row = self.conn.execute("SELECT * FROM programs WHERE hash=?", (hash,)).fetchone()
        return dict(row) if row else None

    # --- noise profiles -----------------------------------------------------------------------

    def add_noise_profile(self, env_id: str, profile: dict) -> int:
        with self.transaction() as c:
            cur = c.execute(
                "INSERT INTO noise_profiles (env_id, created, faster, slower, method, programs, repeats, "
                "samples, load_avg, details) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (env_id, now_iso(), profile["faster"], profile["slower"], profile.get("method"),
                 profile.get("programs"), profile.get("repeats"), profile.get("samples"),
                 _num(profile.get("load_avg")), _j(profile.get("details"))))
            return int(cur.lastrowid)

    def noise_profile(self, env_id: str) -> dict | None:
        """The latest noise profile of an environment."""
        row = self.conn.execute("SELECT * FROM noise_profiles WHERE env_id=? ORDER BY id DESC LIMIT 1",
                                (env_id,)).fetchone()
        if row is None:
            return None
        out = dict(row)
        out["details"] = json.loads(out["details"]) if out["details"] else None
        return out

    # --- sweeps -------------------------------------------------------------------------------

    def start_sweep(self, env_id: str, config: dict, command: str = "") -> int:
        with self.transaction() as c:
            cur = c.execute("INSERT INTO sweeps (env_id, started, status, config, command, load_avg_start) "
                            "VALUES (?,?,?,?,?,?)", (env_id, now_iso(), "running", _j(config), command, load_avg()))
            return int(cur.lastrowid)

    def finish_sweep(self, sweep_id: int, status: str = "done") -> None:
        with self.transaction() as c:
            c.execute("UPDATE sweeps SET finished=?, status=?, load_avg_end=? WHERE id=?",
                      (now_iso(), status, load_avg(), sweep_id))

    # --- measurements -------------------------------------------------------------------------

    def done_keys(self, env_id: str, config_keys: set[str] | None = None, include_errors: bool = True) -> set:
        """Keys (dataset, uri, program_hash, strategy, config_key) already measured here."""
        q = "SELECT dataset, uri, program_hash, strategy, config_key, status FROM measurements WHERE env_id=?"
        out = set()
        for r in self.conn.execute(q, (env_id,)):
            if config_keys is not None and r["config_key"] not in config_keys:
                continue
            if not include_errors and r["status"] != "ok":
                continue
            out.add((r["dataset"], r["uri"], r["program_hash"], r["strategy"], r["config_key"]))
        return out

    def add_measurement(self, row: dict, program: dict | None = None, replace: bool = False) -> bool:
        """Write one measurement (and its program) in one transaction.

        Returns False (and writes nothing) when a row with the same key exists, unless `replace`
        (used to redo a failed measurement), which swaps the old row for the new one."""
        cols = [k for k in row if k != "id"]
        values = [row[k] for k in cols]
        # ON CONFLICT on the unique key only: any other constraint violation raises (and rolls
        # back the program rows too), where INSERT OR IGNORE would drop the row silently.
        on_conflict = ("DO UPDATE SET " + ", ".join(f"{k}=excluded.{k}" for k in cols if k not in KEY_FIELDS)
                       if replace else "DO NOTHING")
        with self.transaction() as c:
            if program is not None:
                self._put_program(c, row["dataset"], row["uri"], program)
            cur = c.execute(f"INSERT INTO measurements ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) "
                            f"ON CONFLICT ({', '.join(KEY_FIELDS)}) {on_conflict}", values)
            return cur.rowcount > 0

    def measurements(self, *, env_id: str | None = None, datasets=None, strategies=None,
                     config_keys=None, status: str | None = None) -> list[dict]:
        q, args = "SELECT * FROM measurements WHERE 1=1", []
        for col, vals in (("dataset", datasets), ("strategy", strategies), ("config_key", config_keys)):
            if vals is not None:
                vals = list(vals)
                q += f" AND {col} IN ({', '.join('?' * len(vals))})"
                args += vals
        if env_id is not None:
            q += " AND env_id=?"
            args.append(env_id)
        if status is not None:
            q += " AND status=?"
            args.append(status)
        q += " ORDER BY id"
        return [dict(r) for r in self.conn.execute(q, args)]

    def count(self, table: str = "measurements") -> int:
        if table not in ("measurements", "programs", "dataset_entries", "noise_profiles", "sweeps", "environments"):
            raise ValueError(table)
        return int(self.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


def measurement_row(result: dict, *, dataset: str, uri: str, strategy: str, config: dict, cfg_key: str,
                    env: dict, profile: dict | None, peaks: tuple | None, executor: str, sweep_id: int | None,
                    started_at: str, finished_at: str, worker: str = "") -> dict:
    """A `measurements` row from a `ProgramResult.to_record()` dict. Its faster/slower thresholds
    are the profile's at the original's runtime (`shlo_env.measure.noise_thresholds.NoiseModel`), for a ratio
    that is the median of as many side-by-side timings as the final measurement took."""
    base, best = result.get("baseline") or {}, result.get("best") or {}
    timings = max(1, int(result.get("final_timings") or 1))
    thresholds = NoiseModel.from_profile(profile).thresholds(base.get("full"), timings) if profile else None
    cost_o, cost_b = result.get("cost_original") or {}, result.get("cost_best") or {}
    floor = None
    if peaks is not None and peaks[0] and peaks[1] and cost_b.get("flops") is not None \
            and cost_b.get("bytes") is not None:
        floor = cost_b["flops"] / peaks[0] + cost_b["bytes"] / peaks[1]
    return {
        "dataset": dataset, "uri": uri, "program_hash": result["original_hash"], "name": result.get("name"),
        "strategy": strategy, "strategy_used": result.get("strategy"),
        "config_key": cfg_key, "config": _j(config),
        "env_id": env["env_id"], "machine": f"{env['hostname']} ({env['device_kind']}; {env['cpu_model']})",
        "jax": env["jax"], "jaxlib": env["jaxlib"],
        "status": result.get("status", "ok"), "error": result.get("error") or None, "reason": result.get("reason"),
        "returned_original": int(bool(result.get("returned_original", True))),
        "identical": int(bool(result.get("identical", True))), "best_hash": result.get("best_hash"),
        "decisions": _j(result.get("decisions")), "trajectory": _j(result.get("trajectory")),
        "applied": _j(result.get("applied")), "disabled_passes": _j(result.get("disabled_passes")),
        "numerics": result.get("numerics"), "verification": _j(result.get("verification")),
        "baseline_full": _num(base.get("full")), "baseline_async": _num(base.get("async")),
        "baseline_compute": _num(base.get("compute")),
        "best_full": _num(best.get("full")), "best_async": _num(best.get("async")),
        "best_compute": _num(best.get("compute")),
        "ratio": _num(result.get("ratio")), "search_ratio": _num(result.get("search_ratio")),
        "confirm_ratio": _num(result.get("confirm_ratio")),
        "noise": _num(result.get("noise")), "threshold": _num(result.get("threshold")),
        "faster_threshold": _num(thresholds[0]) if thresholds else None,
        "slower_threshold": _num(thresholds[1]) if thresholds else None,
        "noise_profile_id": profile.get("id") if profile else None,
        "flops_original": _num(cost_o.get("flops")), "bytes_original": _num(cost_o.get("bytes")),
        "flops_best": _num(cost_b.get("flops")), "bytes_best": _num(cost_b.get("bytes")),
        "transcendentals_best": _num(cost_b.get("transcendentals")), "roofline_floor_s": _num(floor),
        "candidates": result.get("candidates_evaluated"), "cache_hits": result.get("cache_hits"),
        "timed": result.get("timed"), "failures": _j(result.get("failures")),
        "untimed": _j(result.get("untimed") or None),
        "decision_space": _num(result.get("decision_space")), "num_alternatives": result.get("num_alternatives"),
        "strategy_info": _j(result.get("strategy_info")),
        "search_s": _num(result.get("search_s")), "total_s": _num(result.get("total_s")),
        "peak_rss_mb": _num(result.get("peak_rss_mb")), "final_timings": result.get("final_timings"),
        "phases": _j(result.get("phases") or None), "candidate_s": _num(result.get("candidate_s")),
        "executor": executor, "sweep_id": sweep_id, "worker": worker,
        "started_at": started_at, "finished_at": finished_at,
    }


__all__ = ["DEFAULT_PATH", "ResultsDB", "config_key", "environment", "measurement_row", "now_iso", "load_avg"]
