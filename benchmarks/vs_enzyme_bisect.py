"""Which of Enzyme-JAX's rewrites carry its gain (issue 50, item 2).

    python benchmarks/vs_enzyme_bisect.py llama_rev [--depth 4] [--repeats 2] [--save DIR] [--json FILE]
    python benchmarks/vs_enzyme_bisect.py zoo/hf_bert_cls_padded_infer --max-kinds 1   # one of our programs

Enzyme-JAX's default pipeline (`primitives.full_optimization_pass_pipeline()`) is a fixed
skeleton of MLIR passes (inline, canonicalize, cse, enzyme-batch, the enzyme AD pass, ...) and
five runs of `enzyme-hlo-generate-td{patterns=...}` + `transform-interpreter`, each applying a
list of about 520 named rewrite patterns greedily (548 names in all). This script keeps the
skeleton and changes only those lists:

  skeleton        every pattern list empty: what the plain MLIR passes do
  full            the default pipeline
  only K          the skeleton plus the patterns of kind K (kinds: `kind_of`, by name)
  all but K       the default pipeline without the patterns of kind K

Each subset's output (made public as in `vs_enzyme.py`, and checked against the original's
outputs) is timed against the original in its own interleaved loop (original, subset,
original again; the order rotating every round), `--repeats` times: its ratio is the median
over repeats of the median per-round ratio T(subset)/T(original), and the original against
itself in the same loop is the A/A control. A subset whose output is a module already timed
takes that timing (equal modules, equal time: on 2 shared cores, timing identical modules
again only measures noise).

Then, for the kinds whose removal ("all but K") raises the ratio by at least `--min-gain`
(the largest `--max-kinds` of them), halves of the kind's patterns are removed from the full
pipeline, following every half whose removal still loses at least half of the kind's share,
down to `--depth` levels or single patterns: the patterns the gain needs. With `--slower`, the
same for a loss: the kinds and patterns whose removal makes the output faster.

`--save DIR` keeps each subset's output in DIR (named by a hash of the pipeline) and reuses it
when the same subset runs again.

`--after PATTERNS` asks what the peer still gains beyond our rewrites: the named patterns of ours
are first taken at every site (again on the result, until none matches), and that program is
the "original" every subset starts from and is timed against.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import vs_enzyme  # noqa: E402

# The kind of a pattern, by its name: the first rule that matches (order matters).
KINDS: tuple[tuple[str, str], ...] = (
    ("constant folding", r"const_prop|const_fold|recognize_from_constant|binop_const_simplify|chlo_inf"),
    ("cse", r"^cse_|_cse\b"),
    ("loops and conditionals", r"licm|while|^if_|_if\b|case_|loop_unswitch|unroll"),
    ("pad algebra", r"pad"),
    ("transpose", r"transpose"),
    ("dot_general", r"dot|syrk|symm|einsum"),
    ("concatenate", r"concat"),
    ("slice / dynamic_update_slice", r"slice|dus|dynamic_update"),
    ("reshape / broadcast", r"reshape|broadcast|delete_dims|insert_dim|extend|wrap|rotate"),
    ("scatter / gather", r"scatter|gather"),
    ("reduce", r"reduce"),
    ("iota / compare / select", r"iota|compare|select"),
    ("other algebra and canonicalization", r"."),
)


def base_name(pattern: str) -> str:
    """`slice_slice<16>(1024)` -> `slice_slice` (benefit and parameter stripped)."""
    return re.split(r"[<(]", pattern, maxsplit=1)[0]


def kind_of(pattern: str) -> str:
    name = base_name(pattern)
    for kind, rx in KINDS:
        if re.search(rx, name):
            return kind
    return KINDS[-1][0]


_LIST = re.compile(r"(enzyme-hlo-generate-td\{patterns=)([^}]*)(\})")


def pattern_names(pipeline: str) -> list[str]:
    """Every pattern the pipeline's lists name, in first-seen order (by base name)."""
    seen: dict[str, None] = {}
    for m in _LIST.finditer(pipeline):
        for p in m.group(2).split(";"):
            if p:
                seen.setdefault(base_name(p), None)
    return list(seen)


def restrict(pipeline: str, keep) -> str:
    """The pipeline with each pattern list cut to the patterns whose base name `keep` accepts.
    A list left empty takes its three passes (generate-td, transform-interpreter,
    remove-transform) out with it."""
    def sub(m):
        kept = [p for p in m.group(2).split(";") if p and keep(base_name(p))]
        return m.group(1) + ";".join(kept) + m.group(3) if kept else "@@EMPTY@@"

    out = _LIST.sub(sub, pipeline)
    out = out.replace("@@EMPTY@@,transform-interpreter,enzyme-hlo-remove-transform", "")
    out = re.sub(r",,+", ",", out).strip(",")
    assert "@@EMPTY@@" not in out
    return out


SAVE_DIR: Path | None = None  # --save: each subset's output, reused when the same pipeline runs again


def run_subset(label: str, pipeline: str, program, inputs, original_outs, reference, log) -> dict:
    t0 = time.perf_counter()
    rec: dict = {"label": label}
    saved = None
    if SAVE_DIR is not None:
        import hashlib

        saved = SAVE_DIR / f"{program.name}.{hashlib.sha1(pipeline.encode()).hexdigest()[:16]}.mlir"
    try:
        if saved is not None and saved.exists():
            text = saved.read_text()
        else:
            text = vs_enzyme.run_enzyme(program.text(), pipeline)
            if saved is not None:
                saved.parent.mkdir(parents=True, exist_ok=True)
                saved.write_text(text)
        prog = vs_enzyme.program_of_text(text, program, f"{program.name}.{label}")
    except Exception as e:  # noqa: BLE001
        rec["error"] = str(e)[:300]
        log(f"  {label}: {rec['error']}")
        return rec
    from shlo_env.execute import runtime

    rec["ops"] = prog.num_ops()
    rec["text_hash"] = hash_text(prog.text())
    rec["pipeline_s"] = time.perf_counter() - t0
    try:
        exe = runtime.compile(prog)
        ok, what = vs_enzyme.check_outputs(original_outs, runtime.execute(exe, inputs), reference)
    except Exception as e:  # noqa: BLE001
        rec["error"] = f"compile/run: {str(e)[:300]}"
        return rec
    rec["check"] = what
    if ok:
        rec["exe"] = exe
    else:
        rec["error"] = what
    log(f"  {label}: {rec['ops']} ops, {rec['pipeline_s']:.1f} s, {what[:60]}")
    return rec


def everywhere(program, patterns: list[str], rounds: int = 4):
    """`program` with `patterns` (ours) taken at every site they match, again on the result
    until none matches or `rounds` run out."""
    import warnings

    from shlo_env.rewrite import driver

    for _ in range(rounds):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            aug = driver.augment(program, patterns)
        alts = driver.list_alternatives(aug)
        picks = [next((i for i, label in enumerate(a.labels) if i and label in patterns), 0) for a in alts]
        if not any(picks):
            break
        program = driver.strip(driver.apply(aug, picks))
    return program


def hash_text(text: str) -> str:
    import hashlib

    return hashlib.sha1(text.encode()).hexdigest()[:16]


def time_all(records: list[dict], original_exe, inputs, repeats: int, policy, known: dict) -> None:
    """Each record's ratio to the original: its own interleaved loop (original, subset, original
    again; the order rotating every round), `repeats` times; `ratio` is the median over repeats
    of the median per-round ratio (subset call / original call of the same round), `control`
    the same for the original against itself. A subset whose output is a module already timed
    (`known`, by text) takes that timing: equal modules, equal time."""
    for r in records:
        if "exe" not in r:
            continue
        if r["text_hash"] in known:
            same = known[r["text_hash"]]
            r.update({k: v for k, v in same.items() if k != "label"}, same_module_as=same["label"])
            continue
        paired: list = []
        p10 = vs_enzyme.time_variants([original_exe, r["exe"], original_exe], inputs, repeats, policy, paired)
        r["ratios"] = [rep[1] for rep in paired]
        r["ratio"] = float(np.median(r["ratios"]))
        r["p10_ratios"] = [rep[1] for rep in p10]
        r["control"] = float(np.median([rep[2] for rep in paired]))
        r["load"] = vs_enzyme.load_average()
        known[r["text_hash"]] = {"label": r["label"], **{k: r[k] for k in ("ratios", "ratio", "p10_ratios", "control",
                                                                            "load")}}


def _row(r: dict) -> str:
    same = f" (= {r['same_module_as']})" if r.get("same_module_as") else ""
    return (f"{r['label']:>45}: ratio {r.get('ratio', math.nan):.3f} (A/A {r.get('control', math.nan):.3f}) "
            f"ops {r.get('ops', '?')}{same} {r.get('error', '')[:80]}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("program", help="a peer program (benchmarks/peer_programs.py), e.g. llama_rev, or one of "
                                    "our datasets' (zoo/NAME, corpus/NAME: random N(0,1) inputs, seed 0)")
    ap.add_argument("--depth", type=int, default=4, help="bisection levels within a kind (default 4)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--min-seconds", type=float, default=1.0)
    ap.add_argument("--min-gain", type=float, default=0.05,
                    help="a kind is bisected if removing it raises the ratio this much (default 0.05)")
    ap.add_argument("--max-kinds", type=int, default=2, help="bisect at most this many kinds (default 2)")
    ap.add_argument("--slower", action="store_true",
                    help="bisect what makes the pipeline's output slower: the kinds whose removal lowers the ratio")
    ap.add_argument("--kinds", default="", help="bisect only these kinds (comma-separated prefixes)")
    ap.add_argument("--after", default="", metavar="PATTERNS",
                    help="ours first: these patterns (comma-separated) at every site; the peer starts from that")
    ap.add_argument("--json", default=None)
    ap.add_argument("--save", default=None, metavar="DIR",
                    help="keep each subset's output in DIR and reuse it when the same subset runs again")
    args = ap.parse_args(argv)
    global SAVE_DIR
    SAVE_DIR = Path(args.save) if args.save else None

    why = vs_enzyme.enzyme_available()
    if why is not None:
        print(f"vs_enzyme_bisect: Enzyme-JAX is not installed ({why}); skipped.")
        return 0
    from shlo_env.execute import runtime
    from shlo_env.measure.timing_policy import TimingPolicy

    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    policy = TimingPolicy(runs=args.runs, warmup=2, min_seconds=args.min_seconds)
    dataset, _, entry = args.program.rpartition("/")  # zoo/NAME or corpus/NAME: one of ours
    found = (vs_enzyme.load_programs([], dataset, 1, only=(entry,)) if dataset
             else vs_enzyme.load_programs([args.program], None, 0))
    if not found:
        raise SystemExit(f"vs_enzyme_bisect: no program {entry!r} in the {dataset} dataset")
    [(name, program, inputs, _)] = found
    if args.after:
        ours = [p.strip() for p in args.after.split(",") if p.strip()]
        before = program.num_ops()
        program = everywhere(program, ours)
        log(f"{name}: ours first ({', '.join(ours)} at every site: {len(program.applied)} "
            f"rewrites, {before} -> {program.num_ops()} ops); the ratios below are against that program")
    full = vs_enzyme.default_pipeline()
    names = pattern_names(full)
    kinds: dict[str, list[str]] = {}
    for n in names:
        kinds.setdefault(kind_of(n), []).append(n)
    log(f"{name}: {program.num_ops()} ops; {len(names)} patterns in {len(kinds)} kinds: "
        + ", ".join(f"{k} {len(v)}" for k, v in kinds.items()))
    original_exe = runtime.compile(program)
    original_outs = runtime.execute(original_exe, inputs)
    reference = runtime.reference_outputs(program, inputs)
    result: dict = {"program": name, "ops": program.num_ops(), "kinds": {k: v for k, v in kinds.items()},
                    "load_before": vs_enzyme.load_average()}

    # round 1: skeleton, full, only K, all but K
    known: dict = {}
    subsets = [("skeleton", restrict(full, lambda n: False)), ("full", full)]
    for k, members in kinds.items():
        s = set(members)
        subsets.append((f"only {k}", restrict(full, lambda n, s=s: n in s)))
        subsets.append((f"all but {k}", restrict(full, lambda n, s=s: n not in s)))
    round1 = []
    for label, pipe in subsets:
        rec = run_subset(label, pipe, program, inputs, original_outs, reference, log)
        time_all([rec], original_exe, inputs, args.repeats, policy, known)
        rec.pop("exe", None)
        log(_row(rec))
        round1.append(rec)
    result["round1"] = round1
    by_label = {r["label"]: r for r in round1}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, default=str))

    # round 2: for each kind whose removal loses part of the full pipeline's gain, remove
    # halves of its patterns from the full pipeline, following the halves whose removal still
    # loses at least half of that (or --min-gain), down to --depth levels or single patterns
    full_ratio = by_label["full"].get("ratio", math.nan)
    wanted = [k.strip() for k in args.kinds.split(",") if k.strip()]
    sign = -1.0 if args.slower else 1.0  # --slower: look for what makes the pipeline's output slower
    losses = {k: sign * (by_label.get(f"all but {k}", {}).get("ratio", math.nan) - full_ratio) for k in kinds}
    order = sorted((k for k in kinds if losses[k] >= args.min_gain and (not wanted or any(k.startswith(w) for w in wanted))),
                   key=lambda k: -losses[k])
    result["bisection"] = {}
    for k in order[: args.max_kinds]:
        members = kinds[k]
        loss = losses[k]
        log(f"bisecting {k} ({len(members)} patterns; without them the ratio moves by {sign * loss:+.3f})")
        frontier = [members]
        steps: list[dict] = []
        for level in range(args.depth):
            halves = []
            for group in frontier:
                if len(group) > 1:
                    mid = len(group) // 2
                    halves += [group[:mid], group[mid:]]
            if not halves:
                break
            frontier = []
            for h in halves:
                s = set(h)
                label = (f"all but {k} L{level + 1} {h[0]}..{h[-1]} ({len(h)})" if len(h) > 1 else f"all but {h[0]}")
                rec = run_subset(label, restrict(full, lambda n, s=s: n not in s), program, inputs, original_outs,
                                 reference, log)
                time_all([rec], original_exe, inputs, args.repeats, policy, known)
                rec.pop("exe", None)
                rec["patterns"] = h
                rec["loss"] = sign * (rec.get("ratio", math.nan) - full_ratio)
                log(_row(rec) + f" loss {rec['loss']:.3f}")
                steps.append(rec)
                if rec["loss"] >= max(loss / 2, args.min_gain):
                    frontier.append(h)
            if not frontier:
                break
        result["bisection"][k] = {"loss": loss, "steps": steps, "carriers": frontier}
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1, default=str))
    result["load_after"] = vs_enzyme.load_average()
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, default=str))
    print(f"{name}: skeleton {by_label['skeleton'].get('ratio', math.nan):.3f}, full {full_ratio:.3f} "
          f"(ratios T(subset)/T(original), median per-round ratio; A/A: the original against itself)")
    print("| kind | patterns | only K: ratio | all but K: ratio | ops (only K / all but K) |")
    print("|---|---|---|---|---|")
    for k, members in kinds.items():
        o, a = by_label.get(f"only {k}", {}), by_label.get(f"all but {k}", {})
        print(f"| {k} | {len(members)} | {o.get('ratio', math.nan):.3f} | {a.get('ratio', math.nan):.3f} "
              f"| {o.get('ops', '?')} / {a.get('ops', '?')} |")
    for k, b in result["bisection"].items():
        print(f"{k}: carriers {b['carriers']}")
        for st in b["steps"]:
            print(f"  {_row(st)} loss {st['loss']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
