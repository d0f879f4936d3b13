"""The measurement dataset: (program, decision vector, measured runtime ratio, tier) rows.

    shlo-env dataset build --datasets inst-20-40 --max-programs 20 --max-candidates 6
    shlo-env dataset export --out data/learned-v6
    from shlo_env.learn import dataset
    ds = dataset.load("data/learned-v6", "train")   # a Split
    g = ds.graph(0)                                  # shlo_env.learn.observe.Graph of program 0 (augmented)
    ds.candidates(0)                                 # its rows: decisions, ratio, group, tier, flops, bytes, exe

Building: each source program is augmented once (default patterns, dry mode); a pool of its
decision vectors (every vector when few, else pick-first, each single choice and seeded random
vectors) is compiled and grouped by XLA's optimized HLO: one group is one executable, the same
program to the machine. One vector per group is verified and timed against the original
`rounds` times, side by side (same worker, A,B,A,B interleaving), and the pooled ratio is the
label of every vector of the group; the original's group is exactly 1.0. XLA's cost analysis
of each candidate is kept as well, and the features of each executable (`hlo_features`).
Every candidate is one row of the results database's `measurements` table (strategy
"dataset", config_key = hash of the build config and the vector); a program's rows are
written when it is done, so a killed build redoes at most one.

Exporting: rows are grouped by program and split train/val/test by *source* program (the corpus
program a sub-graph was cut from, or the corpus program itself), hashed, so no program's cuts
leak across splits. One `<split>.npz` + `<split>.json` per split; the format is in
docs/dataset_format.md.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import random
import time
from collections.abc import Iterator, Sequence
from typing import Any
from pathlib import Path

import numpy as np

from shlo_env.learn import hlo_features

# 2 adds the label-noise arrays; 3 pools labels per executable (cand_group, cand_rounds); 4 adds
# the executables' features (cand_exe, orig_exe: learn.hlo_features)
FORMAT_VERSION = 4
READABLE_VERSIONS = (1, 2, 3, 4)
STRATEGY = "dataset"
SPLITS = ("train", "val", "test")
DEFAULT_FRACTIONS = (0.6, 0.2, 0.2)


class DatasetError(ValueError):
    """A bad build option, a missing export or a file of another format version."""


# --- building -----------------------------------------------------------------------------------

def split_of(source: str, fractions: Sequence[float] = DEFAULT_FRACTIONS) -> str:
    """The split a source program belongs to: a stable hash of its name (no leakage by design)."""
    if len(fractions) != 3 or any(f < 0 for f in fractions) or not math.isclose(sum(fractions), 1.0):
        raise DatasetError(f"split fractions must be three non-negative numbers summing to 1, got {fractions}")
    u = int(hashlib.sha256(source.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    if u < fractions[0]:
        return "train"
    return "val" if u < fractions[0] + fractions[1] else "test"


def source_of(entry) -> str:
    """The corpus program an entry comes from (sub-graphs carry it in their metadata)."""
    return str(entry.metadata.get("source") or entry.name)


def candidate_vectors(num_choices: Sequence[int], max_candidates: int, seed: int) -> list[list[int]]:
    """The vectors measured for one program: all (except all-zero) when at most `max_candidates`,
    else pick-first, each single choice, then seeded random vectors; deduplicated, bounded."""
    if max_candidates < 1:
        raise DatasetError(f"max_candidates must be >= 1, got {max_candidates}")
    space = math.prod(num_choices) - 1 if num_choices else 0
    if space <= max_candidates:
        gen: Iterator = (list(v) for v in itertools.product(*[range(n) for n in num_choices]) if any(v))
    else:
        rng = random.Random(seed)
        singles = ([k if j == i else 0 for j in range(len(num_choices))]
                   for i, n in enumerate(num_choices) for k in range(1, n))
        rand = ([rng.randrange(n) for n in num_choices] for _ in range(20 * max_candidates))
        gen = itertools.chain([[1 if n > 1 else 0 for n in num_choices]], singles, rand)
    out, seen = [], set()
    for v in gen:
        if any(v) and tuple(v) not in seen:
            seen.add(tuple(v))
            out.append(v)
            if len(out) >= max_candidates:
                break
    return out


def interleave_sources(entries: Sequence) -> list:
    """Entries round-robin over their source programs, so the first N cover as many sources
    (and therefore all three splits) as they can."""
    by_source: dict[str, list] = {}
    for e in entries:
        by_source.setdefault(source_of(e), []).append(e)
    queues = list(by_source.values())
    return [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]


def _row_key(config: dict, decisions: Sequence[int]) -> str:
    from shlo_env.measure.results_db import config_key

    return config_key({**config, "decisions": list(decisions)})


def build(*, datasets: Sequence[str] = ("inst-10-20",), db_path: str | os.PathLike = "results/shlo_env.sqlite",
          max_programs: int = 20, max_candidates: int = 8, max_seconds: float = 600.0, seed: int = 0,
          runs: int = 10, min_seconds: float = 0.05, rounds: int = 4, pool: int = 3, ties: int = 2,
          skip_programs: int = 0, log=print) -> dict:
    """Measure candidates into the results database; returns counts. Bounded by `max_programs`
    per dataset, `max_candidates` distinct executables per program and `max_seconds` overall;
    resumes (a program with rows of this config is skipped; one cut off mid-way is redone).
    `skip_programs`: leave out the first N of each dataset (those an earlier build measured, to
    grow a dataset with new programs into a new database; `merge` joins the exports).

    Per program, `pool` x `max_candidates` decision vectors are compiled to XLA's optimized HLO
    (`Evaluator.fingerprint`) and grouped by it: vectors in one group are the same program to
    the machine. Each group other than the original's gets one label, `rounds` independent
    side-by-side timings (A, B, A, B, ... in one worker request each) pooled by their geometric
    mean; the original's group is exactly 1.0. Up to `max_candidates` groups are timed (those
    whose executable differs from the original's first); each verified vector is one row, at
    most `ties` + 1 per group (the exact ties). The original is also timed against itself
    `rounds` times: the program's noise (`noise_of`)."""
    from shlo_env import corpus
    from shlo_env.rewrite import driver
    from shlo_env.ir.hashing import dag_hash
    from shlo_env.measure.results_db import ResultsDB, _j, environment, now_iso
    from shlo_env.search.evaluator import Evaluator
    from shlo_env.measure.timing_policy import SEARCH
    from shlo_env.execute.worker import Worker

    if max_programs < 1 or rounds < 1 or pool < 1 or skip_programs < 0:
        raise DatasetError(f"max_programs, rounds and pool must be >= 1 and skip_programs >= 0, got "
                           f"{max_programs}, {rounds}, {pool}, {skip_programs}")
    config = {"kind": "dataset", "version": FORMAT_VERSION, "seed": seed, "runs": runs,
              "min_seconds": min_seconds, "rounds": rounds, "pool": pool, "ties": ties,
              "max_candidates": max_candidates}
    deadline = time.monotonic() + max_seconds
    counts = {"programs": 0, "measured": 0, "skipped": 0, "failed": 0, "executables": 0, "stopped_by_time": False}
    env = environment()
    timing = SEARCH.with_(runs=runs, min_seconds=min_seconds)
    with ResultsDB(db_path) as db, Worker() as worker:
        db.ensure_environment(env)
        done = {tuple(r) for r in db.conn.execute(
            "SELECT DISTINCT dataset, uri, program_hash FROM measurements WHERE strategy=? AND config=? AND env_id=?",
            (STRATEGY, _j(config), env["env_id"]))}
        for ds in datasets:
            for entry in interleave_sources(corpus.entries(ds))[skip_programs:skip_programs + max_programs]:
                if time.monotonic() > deadline:
                    counts["stopped_by_time"] = True
                    return counts
                program = corpus.load(entry.uri)
                h = dag_hash(program)
                if (ds, entry.uri, h) in done:
                    counts["skipped"] += 1
                    continue
                augmented = driver.augment(program)
                alts = driver.list_alternatives(augmented)
                vectors = candidate_vectors([len(a.labels) for a in alts], pool * max_candidates, seed)
                if not vectors:
                    continue
                info = {"name": entry.name, "metadata": {"source": source_of(entry), **entry.metadata}}
                rows: list[tuple[list[int], Any, list[float] | None, str, str]] = []  # vec, result, timings, fingerprint, error
                with Evaluator(program, worker=worker, timing=timing, seed=seed) as ev:
                    cost_o = ev.cost(program)
                    noise_ratios = [_side_by_side(ev, ev.baseline_text) for _ in range(rounds)]
                    orig_fp = ev.fingerprint(program)
                    exe = {orig_fp: ev.executable_features(program)}  # fingerprint -> hlo_features
                    groups: dict[str, list] = {}
                    for vec in vectors:
                        if time.monotonic() > deadline:
                            counts["stopped_by_time"] = True
                            return counts  # nothing of this program written: redone on resume
                        try:
                            cand = driver.apply(augmented, vec)
                            fp = ev.fingerprint(cand)
                            if fp not in exe:
                                exe[fp] = ev.executable_features(cand)
                        except Exception as e:  # noqa: BLE001  a candidate that fails is a row, not a crash
                            rows.append((vec, None, None, "", f"{type(e).__name__}: {e}"))
                            continue
                        groups.setdefault(fp or f"unknown:{len(groups)}", []).append((vec, cand))
                    order = sorted(groups, key=lambda g: g == orig_fp)  # executables the rewrites changed first
                    timed_groups = 0
                    for fp in order:
                        if fp != orig_fp and timed_groups >= max_candidates:
                            continue
                        timings: list[float] = []
                        for vec, cand in groups[fp][:ties + 1]:
                            if time.monotonic() > deadline:
                                counts["stopped_by_time"] = True
                                return counts
                            res = ev.verify_only(cand)
                            if not res.ok:
                                rows.append((vec, res, None, fp, res.error or "not verified"))
                                continue
                            if fp != orig_fp and not timings:  # the group's one label, timed once per group
                                timings = [_side_by_side(ev, cand.text()) for _ in range(rounds)]
                                timed_groups += 1
                                counts["executables"] += 1
                            rows.append((vec, res, [1.0] if fp == orig_fp else timings, fp, ""))
                    started = now_iso()
                    for vec, res, ratios, fp, error in rows:
                        cost: dict = ev.cost(res.program) if res is not None and res.ok else {}
                        status = "ok" if ratios else "error"
                        counts["measured" if status == "ok" else "failed"] += 1
                        label = math.exp(float(np.mean(np.log(ratios)))) if ratios else None
                        row = _row(ds, entry, h, config, vec, env, res, cost, cost_o, status, error,
                                   len(alts), started, now_iso())
                        row.update(ratio=label, noise=noise_of(noise_ratios), identical=int(fp == orig_fp),
                                   strategy_info=_j({"fingerprint": fp, "original_fingerprint": orig_fp,
                                                     "ratios": ratios if fp != orig_fp else [],
                                                     "noise_ratios": noise_ratios,
                                                     "exe_features": _listed(exe.get(fp)),
                                                     "orig_exe_features": _listed(exe.get(orig_fp)),
                                                     "load": os.getloadavg()[0]}))
                        db.add_measurement(row, program={"hash": h, **_program_info(program, info)})
                counts["programs"] += 1
                log(f"{entry.uri}: {len(rows)} candidates, {len(groups)} executables "
                    f"({timed_groups} timed), load {os.getloadavg()[0]:.1f}")
    return counts


def _listed(features) -> list[float] | None:
    return None if features is None else [float(x) for x in features]


def _side_by_side(ev, text: str) -> float:
    """One interleaved timing (A, B, A, B, ...) of `text` against the original, in one worker
    request: T(text) / T(original), as the search's `Evaluation.ratio` measures it."""
    base, cand = ev.worker.time([ev.baseline_text, text], ev.verifier.keys[0], ev.timing, ev.disabled_passes)
    return float(cand.full / base.full)


def noise_of(ratios: Sequence[float]) -> float:
    """A program's timing noise from its original timed against itself: median |1 - ratio|."""
    return float(np.median([abs(1.0 - r) for r in ratios])) if len(ratios) else math.nan


def _program_info(program, info: dict) -> dict:
    return {"name": info["name"], "ops": None, "num_inputs": len(program.in_specs),
            "num_outputs": len(program.out_specs), "in_specs": [], "out_specs": [], "metadata": info["metadata"]}


def _row(ds, entry, h, config, vec, env, res, cost, cost_o, status, error, num_alts, started, finished) -> dict:
    from shlo_env.measure.results_db import _j, _num

    return {
        "dataset": ds, "uri": entry.uri, "program_hash": h, "name": entry.name,
        "strategy": STRATEGY, "strategy_used": STRATEGY, "config_key": _row_key(config, vec), "config": _j(config),
        "env_id": env["env_id"], "machine": f"{env['hostname']} ({env['device_kind']}; {env['cpu_model']})",
        "jax": env["jax"], "jaxlib": env["jaxlib"], "status": status, "error": error or None,
        "decisions": _j(list(vec)), "num_alternatives": num_alts,
        "numerics": res.verified.name if res is not None and res.verified is not None else None,
        "applied": _j(list(res.applied)) if res is not None else None,
        "ratio": _num(res.ratio) if res is not None else None,
        "baseline_full": _num(res.baseline_s) if res is not None else None,
        "best_full": _num(res.time_s) if res is not None else None,
        "flops_original": _num(cost_o.get("flops")), "bytes_original": _num(cost_o.get("bytes")),
        "flops_best": _num(cost.get("flops")), "bytes_best": _num(cost.get("bytes")),
        "transcendentals_best": _num(cost.get("transcendentals")),
        "started_at": started, "finished_at": finished,
    }


# --- exporting ----------------------------------------------------------------------------------

TIERS = ("EXACT", "REASSOCIATE", "APPROX")


def program_graph(uri: str):
    """The augmented program of a dataset row and its observation (default patterns, one step)."""
    from shlo_env import corpus
    from shlo_env.rewrite import driver
    from shlo_env.learn import observe

    augmented = driver.augment(corpus.load(uri))
    return augmented, observe.graph(augmented)


def export(out_dir: str | os.PathLike, *, db_path: str | os.PathLike = "results/shlo_env.sqlite",
           fractions: Sequence[float] = DEFAULT_FRACTIONS, env_id: str | None = None) -> dict:
    """Write `<split>.npz` + `<split>.json` for each split from the database's dataset rows;
    returns {split: {"programs", "candidates"}}. Only verified, timed rows are exported."""
    from shlo_env.learn.observe import live_nodes
    from shlo_env.measure.results_db import ResultsDB

    with ResultsDB(db_path) as db:
        rows = db.measurements(env_id=env_id, strategies=[STRATEGY], status="ok")
        sources = {r["hash"]: json.loads(r["metadata"] or "{}").get("source")
                   for r in db.conn.execute("SELECT hash, metadata FROM programs")}
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["ratio"] is not None and math.isfinite(r["ratio"]) and r["ratio"] > 0:
            groups.setdefault((r["dataset"], r["uri"], r["program_hash"]), []).append(r)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    per_split: dict[str, list] = {s: [] for s in SPLITS}
    for (ds, uri, h), cands in sorted(groups.items()):
        source = sources.get(h) or uri
        per_split[split_of(source, fractions)].append((ds, uri, h, source, cands))
    summary = {}
    for split, programs in per_split.items():
        arrays: dict[str, list] = {k: [] for k in (
            "node_features", "node_opcode", "node_alt", "node_choice", "edge_src", "edge_dst",
            "cand_program", "cand_decisions", "cand_ratio", "cand_tier", "cand_flops", "cand_bytes",
            "cand_transcendentals", "cand_live", "node_offsets", "edge_offsets", "orig_flops", "orig_bytes",
            "orig_live", "prog_noise", "cand_confirm_ratio", "cand_same_executable", "cand_group",
            "cand_rounds", "cand_label_sd", "prog_load", "cand_exe", "orig_exe")}
        meta_programs: list[dict] = []
        n_nodes = n_edges = 0
        for ds, uri, h, source, cands in programs:
            _, g = program_graph(uri)
            if any(len(json.loads(c["decisions"])) != g.num_alternatives for c in cands):
                continue  # the patterns changed since the build: these vectors mean something else now
            p = len(meta_programs)
            meta_programs.append({"dataset": ds, "uri": uri, "hash": h, "source": source,
                                  "num_alternatives": int(g.num_alternatives),
                                  "num_choices": [int(c) for c in g.alternative_num_choices],
                                  "labels": [list(lab) for lab in g.alternative_labels],
                                  "num_candidates": len(cands)})
            arrays["node_offsets"].append(n_nodes)
            arrays["edge_offsets"].append(n_edges)
            arrays["node_features"].append(g.node_feature_matrix())
            arrays["node_opcode"].append(g.node_opcode)
            arrays["node_alt"].append(g.node_alt)
            arrays["node_choice"].append(g.node_choice)
            arrays["edge_src"].append(g.edge_src)
            arrays["edge_dst"].append(g.edge_dst)
            arrays["orig_flops"].append(_f(cands[0]["flops_original"]))
            arrays["orig_bytes"].append(_f(cands[0]["bytes_original"]))
            arrays["orig_live"].append(live_nodes(g))
            arrays["prog_noise"].append(_f(cands[0].get("noise")))
            arrays["prog_load"].append(_f(max(_info(c).get("load", math.nan) for c in cands)))
            arrays["orig_exe"].append(_exe(_info(cands[0]).get("orig_exe_features")))
            group_ids = _executable_groups(cands)
            n_nodes += g.num_nodes
            n_edges += g.num_edges
            for c, group in zip(cands, group_ids):
                vec = json.loads(c["decisions"])
                timings = _info(c).get("ratios") or []
                arrays["cand_group"].append(group)
                arrays["cand_rounds"].append(len(timings))
                arrays["cand_label_sd"].append(float(np.std(np.log(timings), ddof=1)) if len(timings) > 1 else math.nan)
                arrays["cand_program"].append(p)
                arrays["cand_decisions"].append(",".join(map(str, vec)))
                arrays["cand_ratio"].append(c["ratio"])
                arrays["cand_tier"].append(TIERS.index(c["numerics"]) if c["numerics"] in TIERS else -1)
                arrays["cand_flops"].append(_f(c["flops_best"]))
                arrays["cand_bytes"].append(_f(c["bytes_best"]))
                arrays["cand_transcendentals"].append(_f(c["transcendentals_best"]))
                arrays["cand_live"].append(live_nodes(g, vec))
                arrays["cand_confirm_ratio"].append(_f(c.get("confirm_ratio")))
                arrays["cand_same_executable"].append(bool(c.get("identical")))
                arrays["cand_exe"].append(_exe(_info(c).get("exe_features")))
        arrays["node_offsets"].append(n_nodes)
        arrays["edge_offsets"].append(n_edges)
        np.savez_compressed(out / f"{split}.npz", **_stack(arrays))
        (out / f"{split}.json").write_text(json.dumps(
            {"format_version": FORMAT_VERSION, "split": split, "fractions": list(fractions),
             "exe_features": list(hlo_features.FEATURES), "programs": meta_programs}, indent=1))
        summary[split] = {"programs": len(meta_programs), "candidates": len(arrays["cand_ratio"])}
    return summary


def _info(row: dict) -> dict:
    return json.loads(row.get("strategy_info") or "{}")


def _executable_groups(cands: list[dict]) -> list[int]:
    """Per row, its executable group within the program: 0 is the original's executable, then
    1, 2, ... in order of first appearance (rows without a fingerprint, version 2, get their own)."""
    ids: dict[str, int] = {}
    out = []
    for i, c in enumerate(cands):
        info = _info(c)
        fp = info.get("fingerprint")
        if fp is not None and fp == info.get("original_fingerprint"):
            out.append(0)
            continue
        out.append(ids.setdefault(fp if fp is not None else f"row{i}", len(ids) + 1))
    return out


def _f(x) -> float:
    return float("nan") if x is None else float(x)


def _exe(features) -> np.ndarray:
    """A stored hlo_features vector, NaN where the build had none."""
    if features is None or len(features) != len(hlo_features.FEATURES):
        return np.full(len(hlo_features.FEATURES), np.nan)
    return np.asarray(features, np.float64)


def _stack(a: dict[str, list]) -> dict[str, Any]:
    cat = lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt)  # noqa: E731
    from shlo_env.learn.observe import NODE_FEATURES
    return {
        "node_features": (np.concatenate(a["node_features"]) if a["node_features"]
                          else np.zeros((0, len(NODE_FEATURES)), np.float32)).astype(np.float32),
        "node_opcode": cat(a["node_opcode"], np.int32), "node_alt": cat(a["node_alt"], np.int32),
        "node_choice": cat(a["node_choice"], np.int32),
        "edge_src": cat(a["edge_src"], np.int32), "edge_dst": cat(a["edge_dst"], np.int32),
        "node_offsets": np.asarray(a["node_offsets"], np.int64), "edge_offsets": np.asarray(a["edge_offsets"], np.int64),
        "orig_flops": np.asarray(a["orig_flops"], np.float64), "orig_bytes": np.asarray(a["orig_bytes"], np.float64),
        "orig_live": cat(a["orig_live"], bool),
        "cand_program": np.asarray(a["cand_program"], np.int32),
        "cand_decisions": np.asarray(a["cand_decisions"], dtype=np.str_),
        "cand_ratio": np.asarray(a["cand_ratio"], np.float64), "cand_tier": np.asarray(a["cand_tier"], np.int8),
        "cand_flops": np.asarray(a["cand_flops"], np.float64), "cand_bytes": np.asarray(a["cand_bytes"], np.float64),
        "cand_transcendentals": np.asarray(a["cand_transcendentals"], np.float64),
        "cand_live": cat(a["cand_live"], bool),
        "prog_noise": np.asarray(a["prog_noise"], np.float64),
        "cand_confirm_ratio": np.asarray(a["cand_confirm_ratio"], np.float64),
        "cand_same_executable": np.asarray(a["cand_same_executable"], bool),
        "cand_group": np.asarray(a["cand_group"], np.int32),
        "cand_rounds": np.asarray(a["cand_rounds"], np.int32),
        "cand_label_sd": np.asarray(a["cand_label_sd"], np.float64),
        "prog_load": np.asarray(a["prog_load"], np.float64),
        "cand_exe": np.asarray(a["cand_exe"], np.float64).reshape(-1, len(hlo_features.FEATURES)),
        "orig_exe": np.asarray(a["orig_exe"], np.float64).reshape(-1, len(hlo_features.FEATURES)),
    }


def merge(out_dir: str | os.PathLike, sources: Sequence[str | os.PathLike]) -> dict:
    """Join exports (of the same format version and split fractions) into one, per split: a
    dataset grown by a later build into a new database (`build(skip_programs=...)`). A program
    (dataset, uri) already taken from an earlier export is left out of later ones."""
    out = Path(out_dir)
    if not sources:
        raise DatasetError("merge needs at least one exported dataset")
    summary = {}
    for split in SPLITS:
        parts = [load(src, split) for src in sources]
        versions = {p.meta["format_version"] for p in parts}
        fractions = {tuple(p.meta["fractions"]) for p in parts}
        if len(versions) > 1 or len(fractions) > 1:
            raise DatasetError(f"cannot merge exports of format versions {sorted(versions)} and split fractions "
                               f"{sorted(fractions)}: one of each")
        features = {tuple(p.meta.get("exe_features") or ()) for p in parts}
        if len(features) > 1:
            raise DatasetError("cannot merge exports with different executable feature lists; bring them to "
                               "this code's with `shlo-env dataset exe-features` first")
        seen: set[tuple[str, str]] = set()
        programs: list[dict] = []
        pieces: dict[str, list[np.ndarray]] = {}
        for part in parts:
            for p, prog in enumerate(part.programs):
                if (prog["dataset"], prog["uri"]) in seen:
                    continue
                seen.add((prog["dataset"], prog["uri"]))
                _append_program(pieces, part, p, len(programs))
                programs.append(prog)
        summary[split] = _write_pieces(out, split, pieces, {**parts[0].meta, "programs": programs,
                                                            "merged_from": [str(s) for s in sources]})
    return summary


def _append_program(pieces: dict[str, list[np.ndarray]], part: "Split", p: int, index: int,
                    extra: dict[str, np.ndarray] | None = None) -> None:
    """Add program p of `part`, renumbered `index`, to the arrays being joined (`extra` adds or
    replaces arrays of its rows or its program)."""
    a = part.arrays
    nodes = int(sum(len(x) for x in pieces.get("node_opcode", [])))
    edges = int(sum(len(x) for x in pieces.get("edge_src", [])))
    n0, n1 = int(a["node_offsets"][p]), int(a["node_offsets"][p + 1])
    e0, e1 = int(a["edge_offsets"][p]), int(a["edge_offsets"][p + 1])
    rows = np.nonzero(a["cand_program"] == p)[0]
    take = {"node_offsets": np.asarray([nodes]), "edge_offsets": np.asarray([edges]),
            "cand_program": np.full(len(rows), index, np.int32),
            "cand_live": part.candidates(p)["live"].reshape(-1), **(extra or {})}
    for k, v in a.items():
        if k not in take:
            take[k] = (v[n0:n1] if k in _NODE_ARRAYS else v[e0:e1] if k in _EDGE_ARRAYS
                       else v[p:p + 1] if k in _PROGRAM_ARRAYS else v[rows])
    for k, v in take.items():
        pieces.setdefault(k, []).append(v)


def _write_pieces(out: Path, split: str, pieces: dict[str, list[np.ndarray]], meta: dict) -> dict:
    nodes = int(sum(len(x) for x in pieces.get("node_opcode", [])))
    edges = int(sum(len(x) for x in pieces.get("edge_src", [])))
    pieces.setdefault("node_offsets", []).append(np.asarray([nodes]))
    pieces.setdefault("edge_offsets", []).append(np.asarray([edges]))
    out.mkdir(parents=True, exist_ok=True)
    joined: dict[str, Any] = {k: np.concatenate(v) for k, v in pieces.items()}
    np.savez_compressed(out / f"{split}.npz", **joined)
    (out / f"{split}.json").write_text(json.dumps(meta, indent=1))
    return {"programs": len(meta["programs"]), "candidates": int(sum(len(v) for v in pieces.get("cand_ratio", [])))}


def add_executable_features(src: str | os.PathLike, out_dir: str | os.PathLike, *, log=print) -> dict:
    """Re-export `src` with each candidate's executable features (`hlo_features`, format 4):
    every program is augmented again and one vector per executable group is compiled to XLA's
    optimized HLO (the rows of a group share its executable). A program whose patterns now give
    other alternatives than at its build is left out (its vectors mean something else), and so
    is one whose group 0 no longer compiles to the original's executable, or whose candidates
    fail to compile. For exports built before format 4; nothing is timed."""
    from shlo_env.execute.worker import Worker

    out = Path(out_dir)
    summary: dict[str, Any] = {}
    with Worker() as worker:
        for split in SPLITS:
            part = load(src, split)
            pieces: dict[str, list[np.ndarray]] = {}
            programs: list[dict] = []
            dropped: dict[str, int] = {}
            for p, prog in enumerate(part.programs):
                why, orig, cand = _compile_features(worker, prog, part.candidates(p))
                if why:
                    dropped[why] = dropped.get(why, 0) + 1
                    log(f"{split} {prog['uri']}: left out ({why})")
                    continue
                _append_program(pieces, part, p, len(programs), {"orig_exe": orig[None, :], "cand_exe": cand})
                programs.append(prog)
            meta = {**part.meta, "format_version": FORMAT_VERSION, "exe_features": list(hlo_features.FEATURES),
                    "programs": programs, "exe_features_from": str(src)}
            summary[split] = {**_write_pieces(out, split, pieces, meta), "left_out": dropped}
            log(f"{split}: {summary[split]}")
    return summary


def _compile_features(worker, prog: dict, c: dict) -> tuple[str, Any, Any]:
    """(reason to leave the program out or "", original's features, (C, F) candidates' features)."""
    from shlo_env import corpus
    from shlo_env.rewrite import driver
    from shlo_env.execute.runners import CandidateError

    try:
        program = corpus.load(prog["uri"])
        augmented = driver.augment(program)
        alts = driver.list_alternatives(augmented)
        if [list(a.labels) for a in alts] != [list(x) for x in prog["labels"]]:
            return "the patterns changed since the build", None, None
        orig_text = worker.optimized_hlo(program.text())
        by_group: dict[int, np.ndarray] = {}
        for vec, group in zip(c["decisions"], c["group"]):
            if int(group) not in by_group:
                text = worker.optimized_hlo(driver.apply(augmented, [int(x) for x in vec]).text())
                if int(group) == 0 and text != orig_text:
                    return "group 0 no longer compiles to the original's executable", None, None
                by_group[int(group)] = hlo_features.features(text)
        return "", hlo_features.features(orig_text), np.stack([by_group[int(g)] for g in c["group"]])
    except (CandidateError, hlo_features.HloParseError, OSError, ValueError) as e:
        return f"{type(e).__name__}: {str(e)[:80]}", None, None


_NODE_ARRAYS = ("node_features", "node_opcode", "node_alt", "node_choice", "orig_live")
_EDGE_ARRAYS = ("edge_src", "edge_dst")
_PROGRAM_ARRAYS = ("orig_flops", "orig_bytes", "prog_noise", "prog_load", "orig_exe")


# --- loading ------------------------------------------------------------------------------------

class Split:
    """One exported split: arrays (`.arrays`), per-program metadata (`.programs`)."""

    def __init__(self, arrays: dict[str, np.ndarray], meta: dict):
        self.arrays, self.meta, self.programs = arrays, meta, meta["programs"]
        self.name = meta["split"]

    def __len__(self) -> int:
        return len(self.programs)

    @property
    def num_candidates(self) -> int:
        return len(self.arrays["cand_ratio"])

    def candidates(self, p: int) -> dict[str, np.ndarray]:
        """Program p's rows: decisions (C, K) int, ratio, tier, flops, bytes, live (C, N) bool, and
        the label noise: confirm_ratio (a second timing; NaN when not re-timed or in version 1)
        and noise (the program's original against itself, repeated per row; NaN in version 1)."""
        a = self.arrays
        idx = np.nonzero(a["cand_program"] == p)[0]
        n = int(a["node_offsets"][p + 1] - a["node_offsets"][p])
        k = self.programs[p]["num_alternatives"]
        live_start = sum(int(a["node_offsets"][q + 1] - a["node_offsets"][q]) * self.programs[q]["num_candidates"]
                         for q in range(p))
        live = a["cand_live"][live_start: live_start + n * len(idx)].reshape(len(idx), n)
        dec = np.array([[int(x) for x in s.split(",")] if k else [] for s in a["cand_decisions"][idx]],
                       dtype=np.int32).reshape(len(idx), k)
        return {"decisions": dec, "ratio": a["cand_ratio"][idx], "tier": a["cand_tier"][idx],
                "flops": a["cand_flops"][idx], "bytes": a["cand_bytes"][idx],
                "transcendentals": a["cand_transcendentals"][idx], "live": live,
                "confirm_ratio": a["cand_confirm_ratio"][idx] if "cand_confirm_ratio" in a else np.full(len(idx), np.nan),
                "noise": np.full(len(idx), a["prog_noise"][p] if "prog_noise" in a else np.nan),
                "group": a["cand_group"][idx] if "cand_group" in a else -1 - np.arange(len(idx)),
                "exe": a["cand_exe"][idx] if "cand_exe" in a else np.full((len(idx), len(hlo_features.FEATURES)), np.nan)}

    def graph(self, p: int):
        """The `shlo_env.learn.observe.Graph` of program p's augmented program (recomputed from its URI)."""
        _, g = program_graph(self.programs[p]["uri"])
        if g.num_alternatives != self.programs[p]["num_alternatives"]:
            raise DatasetError(f"{self.programs[p]['uri']}: the patterns now give {g.num_alternatives} "
                               f"alternatives, the dataset was built with {self.programs[p]['num_alternatives']}")
        return g


def label(c: dict[str, np.ndarray]) -> np.ndarray:
    """The ratio a model learns and is scored on: the geometric mean of the two independent
    measurements where the candidate was timed twice (version 2), else the one measurement."""
    second = c["confirm_ratio"]
    both = np.isfinite(second) & (second > 0)
    return np.where(both, np.sqrt(c["ratio"] * np.where(both, second, 1.0)), c["ratio"])


def load(path: str | os.PathLike, split: str) -> Split:
    if split not in SPLITS:
        raise DatasetError(f"unknown split {split!r}; one of {SPLITS}")
    base = Path(path)
    meta_file, npz_file = base / f"{split}.json", base / f"{split}.npz"
    if not meta_file.exists() or not npz_file.exists():
        raise DatasetError(f"no exported split {split!r} in {base} (run `shlo-env dataset export --out {base}`)")
    meta = json.loads(meta_file.read_text())
    if meta.get("format_version") not in READABLE_VERSIONS:
        raise DatasetError(f"{meta_file}: format version {meta.get('format_version')}, this code reads "
                           f"{READABLE_VERSIONS}")
    with np.load(npz_file) as z:
        arrays = {k: z[k] for k in z.files}
    return Split(arrays, meta)
