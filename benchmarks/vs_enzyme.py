"""shlo_env against Enzyme-JAX side by side (issue 50, item 1).

    pip install -e ".[peer]"            # Enzyme-JAX (enzyme-ad); without it this prints one line and exits 0
    python benchmarks/vs_enzyme.py --budget 60                       # the peer's models (peer_programs.DEFAULT)
    python benchmarks/vs_enzyme.py --programs llama_fwd,llama_rev --budget 60 --repeats 3
    python benchmarks/vs_enzyme.py --programs bvx --budget 10        # the small programs of bench_vs_xla.py
    python benchmarks/vs_enzyme.py --programs none --dataset zoo --limit 3 --budget 60   # our zoo (or corpus)
    python benchmarks/vs_enzyme.py --programs none --dataset zoo --limit 27 --no-search-on-enzyme  # C, not D

For each program, four variants of one StableHLO module:

  A  original: the module `jax.jit` lowers (`shlo_env.lower`, calls inlined)
  B  enzyme: A through Enzyme-JAX's default pipeline (`enzyme_call.run_pass_pipeline` with
     `primitives.full_optimization_pass_pipeline()`, the pipeline `enzyme_jax_ir()` uses; run
     in a child process, so a crash there costs that variant only; its output declares `main`
     private, which is made public again before compiling)
  C  shlo_env: `optimize_program(A)` at `--budget` seconds (`shlo-env optimize`'s search)
  D  enzyme + shlo_env: `optimize_program(B)` at the same budget

Outputs first: each variant is run on the program's inputs and checked against A with the
search's own criterion (`shlo_env.measure.numerics.verify`: bitwise, else an error against the
float64 reference of A no worse than a small multiple of A's own); a variant that fails is
reported and not timed. Then all variants, compiled by the same PJRT CPU client in this process
(with the XLA actions the search chose, if any), are timed interleaved in one loop (A, B, C, D,
A', then B, C, D, A', A, ...: the order rotates every round), `--repeats` times; each repeat
gives T(X)/T(A) with T the 10th percentile of X's calls. A' is A's executable once more: its
ratio is the loop's own noise (an A/A control). The table shows the median ratio over the
repeats and its range, the op counts of each variant, and the load average before and after
timing (on shared cores: read the ratios with it and with the control). Below it, the set's
figures: geomeans of B, C and C/B, and how often B and C are faster or slower than A beyond the
control's spread in the same loop.

`--save DIR` writes every variant's module (and the search's XLA actions) to DIR; `--retime DIR`
checks and times those again without running the pipeline or the search (a quieter moment,
more repeats).

The peer's programs are rebuilt in `benchmarks/peer_programs.py` (our code; each builder's
docstring names the file and config it reproduces). `--dataset zoo|corpus --limit N` adds our
own programs (random N(0,1) inputs, seed 0).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

VARIANTS = ("original", "enzyme", "shlo_env", "enzyme+shlo_env")
CONTROL = "original again"  # the original's executable once more in the loop: the A/A noise control
ENZYME_TIMEOUT_S = 900.0


# --- Enzyme-JAX ---------------------------------------------------------------------------------

def enzyme_available() -> str | None:
    """None when enzyme-ad imports, else why not (one line)."""
    try:
        from enzyme_ad.jax import enzyme_call, primitives  # noqa: F401
    except Exception as e:  # noqa: BLE001 - ImportError, or a native library that fails to load
        return f"{type(e).__name__}: {e}".splitlines()[0]
    return None


def default_pipeline() -> str:
    from enzyme_ad.jax import primitives

    return primitives.full_optimization_pass_pipeline()


_ENZYMEXLA_ATTR = re.compile(r"enzymexla\.\w+\s*=\s*(?:\[(?:[^\[\]]|\[[^\]]*\])*\]|#enzymexla\.\w+<[^>]*>|\w+)")


def publish_main(text: str) -> str:
    """Enzyme's output with `main` public again (its pipeline marks it private), without the
    `enzymexla.*` attributes it adds to functions, arguments and ops (facts its own later passes
    read, e.g. `enzymexla.non_negative = [#enzymexla.guaranteed<...>]`; XLA's parser rejects
    the unregistered dialect)."""
    text = re.sub(r"func\.func\s+private\s+@main\b", "func.func public @main", text, count=1)
    text = _ENZYMEXLA_ATTR.sub("", text)
    text = re.sub(r"\{\s*,\s*", "{", text)
    text = re.sub(r",\s*(?=,|\})", "", text)
    text = re.sub(r"\s+attributes\s*\{\s*\}", "", text)  # a function's attribute dictionary left empty
    text = re.sub(r"(?<![=\s])\s*\{\s*\}(?=\s*(?:[,):]|loc\())", "", text)  # an argument's, result's or op's (not a value)
    return text


def run_enzyme(text: str, pipeline: str | None = None, timeout_s: float = ENZYME_TIMEOUT_S) -> str:
    """`text` through Enzyme-JAX's pass pipeline (default: `default_pipeline()`), in a child
    process; the output with `main` public. Raises RuntimeError with the child's last line."""
    payload = json.dumps({"text": text, "pipeline": pipeline})
    proc = subprocess.run([sys.executable, __file__, "--enzyme-child"], input=payload, capture_output=True,
                          text=True, timeout=timeout_s)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise RuntimeError(f"Enzyme-JAX pipeline failed (status {proc.returncode}): {tail}")
    return publish_main(proc.stdout)


def _enzyme_child() -> int:
    from enzyme_ad.jax import enzyme_call

    request = json.loads(sys.stdin.read())
    pipeline = request["pipeline"] or default_pipeline()
    out = enzyme_call.run_pass_pipeline([], request["text"], pipeline)
    sys.stdout.write(out[1] if isinstance(out, tuple) else out)
    return 0


# --- programs -----------------------------------------------------------------------------------

def program_of_text(text: str, like, name: str):
    """A Program of a module's text, checked to take and return what `like` does."""
    from shlo_env.ir.program import parse_module, program_from_module

    p = program_from_module(parse_module(text, what=name), name=name, source=name)
    sig = lambda specs: [(tuple(s.shape), np.dtype(s.dtype).name) for s in specs]  # noqa: E731
    if sig(p.in_specs) != sig(like.in_specs) or sig(p.out_specs) != sig(like.out_specs):
        raise RuntimeError(f"{name}: signature changed: {sig(p.in_specs)} -> {sig(p.out_specs)}")
    return p


def load_programs(names: list[str], dataset: str | None, limit: int,
                  only: tuple[str, ...] = ()) -> list[tuple[str, object, list, str]]:
    """(name, Program, inputs, what it reproduces) for each peer program named, then the
    dataset's first `limit` (of those named in `only`, if given)."""
    import peer_programs

    from shlo_env.execute import runtime
    from shlo_env.ir.program import lower

    out = []
    for name in names:
        p = peer_programs.build(name)
        prog = lower(p.fn, *p.args, name=p.name)
        out.append((p.name, prog, list(prog.example_args), p.reproduces))
    if dataset:
        from shlo_env import corpus

        chosen = [e for e in corpus.entries(dataset) if not only or e.name in only]
        for entry in chosen[:limit]:
            prog = corpus.load(entry)
            out.append((f"{dataset}/{entry.name}", prog, runtime.random_inputs(prog.in_specs, seed=0),
                        f"shlo_env {dataset}: {entry.metadata.get('description', entry.name)}"))
    return out


def resolve_names(spec: str) -> list[str]:
    import peer_programs

    if not spec:
        return list(peer_programs.DEFAULT)
    known = list(peer_programs.programs())
    names: list[str] = []
    for item in spec.split(","):
        item = item.strip()
        if item in ("all",):
            names += known
        elif item == "bvx":
            names += [n for n in known if n.startswith("bvx_")]
        elif item == "models":
            names += list(peer_programs.DEFAULT)
        elif item:
            if item not in known:
                raise SystemExit(f"vs_enzyme: unknown program {item!r}; known: {', '.join(known)} (or all, bvx, models)")
            names.append(item)
    return list(dict.fromkeys(names))


# --- checking and timing ------------------------------------------------------------------------

def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def check_outputs(original_outs, outs, reference) -> tuple[bool, str]:
    """The search's criterion: EXACT when bitwise equal, else REASSOCIATE against the float64
    reference of the original (APPROX, reported as such, when only that holds)."""
    from shlo_env.measure import numerics

    refs = [reference] if reference is not None else None
    cmp = numerics.verify([outs], [original_outs], "REASSOCIATE", references=refs)
    if cmp.ok:
        return True, cmp.tier.name + (f" ({cmp.describe()})" if cmp.describe() else "")
    approx = numerics.verify([outs], [original_outs], "APPROX")
    why = cmp.detail or cmp.describe()
    return False, ("only APPROX: " if approx.ok else "WRONG: ") + why


def time_variants(exes: list, inputs: list, repeats: int, policy, paired: list | None = None) -> list[list[float]]:
    """Per repeat, T(X)/T(first) for every executable, timed interleaved in one loop (each
    round one call of each; the order rotates by one every round, so no variant always runs
    right after another); T is the 10th percentile of a variant's calls in that repeat.
    `paired`, if given, receives per repeat the median over rounds of X's call / first's call
    in the same round (`runtime.median_ratio`)."""
    from shlo_env.execute import runtime

    args = runtime.to_device(inputs)
    n = len(exes)

    def once(exe):
        t0 = time.perf_counter()
        for o in exe.loaded.execute(args):
            o.block_until_ready()
        return time.perf_counter() - t0

    ratios = []
    for _ in range(repeats):
        for e in exes * policy.warmup:
            once(e)
        samples: list[list[float]] = [[] for _ in exes]
        start, rounds = time.perf_counter(), 0
        max_rounds = policy.max_rounds or 100 * policy.runs
        while rounds < policy.runs or (time.perf_counter() - start < policy.min_seconds and rounds < max_rounds):
            for k in range(n):
                i = (k + rounds) % n
                samples[i].append(once(exes[i]))
            rounds += 1
        t = [runtime.typical(x) for x in samples]
        ratios.append([x / t[0] for x in t])
        if paired is not None:
            paired.append([runtime.median_ratio(samples[0], x) for x in samples])
    return ratios


def summarize(values: list[float]) -> tuple[float, float, float]:
    v = [x for x in values if not math.isnan(x)]
    if not v:
        return math.nan, math.nan, math.nan
    return float(np.median(v)), min(v), max(v)


# --- one program --------------------------------------------------------------------------------

def _tokens(res) -> tuple[str, ...]:
    """The XLA actions a search chose, as text (`action_tokens`; `disabled_passes` before)."""
    tokens = getattr(res, "action_tokens", None)
    return tuple(tokens if tokens is not None else res.disabled_passes)


def search(program, budget_s: float, name: str, worker):
    from shlo_env.search.options import SearchOptions
    from shlo_env.search.program_search import optimize_program

    res = optimize_program(program, SearchOptions(budget_s=budget_s, name=name), worker=worker)
    return res


#: The variants a search produced (the others are the original and the peer's output).
SEARCHED = ("shlo_env", "enzyme+shlo_env")


def bench_program(name: str, program, inputs: list, reproduces: str, args, worker, log) -> dict:
    from shlo_env.execute import runtime
    from shlo_env.measure.timing_policy import TimingPolicy

    rec: dict = {"program": name, "reproduces": reproduces, "variants": {}}
    variants: dict[str, tuple[object, tuple[str, ...]]] = {"original": (program, ())}
    t0 = time.perf_counter()
    enzyme_prog = None
    try:
        saved = Path(args.retime or "/nonexistent") / f"{_slug(name)}.enzyme.mlir"
        enzyme_text = publish_main(saved.read_text()) if args.retime and saved.exists() else run_enzyme(program.text())
        enzyme_prog = program_of_text(enzyme_text, program, name + ".enzyme")
        variants["enzyme"] = (enzyme_prog, ())
    except Exception as e:  # noqa: BLE001 - reported per variant
        rec["variants"]["enzyme"] = {"error": str(e)[:300]}
    rec["enzyme_s"] = time.perf_counter() - t0
    log(f"{name}: {program.num_ops()} ops; enzyme {rec['enzyme_s']:.1f} s"
        + (f" -> {enzyme_prog.num_ops()} ops" if enzyme_prog is not None else f": {rec['variants']['enzyme']['error']}"))
    if args.retime:
        _load_saved(Path(args.retime), name, program, variants, rec)
    elif not args.no_search:
        searched = (("shlo_env", program),) + (() if args.no_search_on_enzyme else (("enzyme+shlo_env", enzyme_prog),))
        for label, base in searched:
            if base is None:
                rec["variants"][label] = {"error": "no enzyme output"}
                continue
            t1 = time.perf_counter()
            res = search(base, args.budget, f"{name}.{label}", worker)
            rec["variants"][label] = {"search": str(res), "search_s": time.perf_counter() - t1,
                                      "returned_original": res.returned_original, "applied": list(res.applied),
                                      "actions": list(_tokens(res)), "search_ratio": res.ratio,
                                      "first_sweep": res.strategy_info.get("first_sweep")}
            log(f"  {label}: {res}" + (f"\n  first sweep: {res.strategy_info['first_sweep']}"
                                        if res.strategy_info.get("first_sweep") else ""))
            if res.status == "ok" and res.program is not None:
                variants[label] = (res.program, tuple(_tokens(res)))
            elif res.status == "ok" and res.returned_original:  # the search's answer: its input, as is
                variants[label] = (base, ())
            else:
                rec["variants"][label]["error"] = res.error or "no program"
    if args.save:
        _save(Path(args.save), name, variants, rec)
    # outputs first
    original_outs = runtime.execute(runtime.compile(program), inputs)
    reference = runtime.reference_outputs(program, inputs)
    timed: list[str] = []
    exes = []
    for label in VARIANTS:
        if label not in variants:
            continue
        prog, actions = variants[label]
        v = rec["variants"].setdefault(label, {})
        v["ops"] = prog.num_ops()
        v["actions"] = list(actions)
        base = {"shlo_env": "original", "enzyme+shlo_env": "enzyme"}.get(label)
        if base in variants:
            v["returned_input"] = not actions and prog.text() == variants[base][0].text()
        try:
            exe = runtime.compile(prog, actions)
            outs = runtime.execute(exe, inputs)
        except Exception as e:  # noqa: BLE001
            v["error"] = f"compile/run: {str(e)[:300]}"
            continue
        ok, what = (True, "reference") if label == "original" else check_outputs(original_outs, outs, reference)
        v["check"] = what
        if not ok and base in variants and label in SEARCHED:
            # as `optimize` delivers it: its in-process check against the input keeps the input
            log(f"  {label}: outputs differ ({what}): counted as its input, as optimize's final check keeps it")
            v["kept_input"], v["returned_input"], v["actions"] = what, True, []
            v["ops"], v["check"] = variants[base][0].num_ops(), f"KEPT its input (outputs differed: {what})"
            exe, ok = runtime.compile(variants[base][0]), True
        if ok:
            timed.append(label)
            exes.append(exe)
        else:
            log(f"  {label}: outputs differ: {what}")
    timed.append(CONTROL)
    exes.append(exes[0])
    rec["variants"][CONTROL] = {"ops": program.num_ops()}
    rec["load_before"] = load_average()
    policy = TimingPolicy(runs=args.runs, warmup=3, min_seconds=args.min_seconds)
    paired: list = []
    ratios = time_variants(exes, inputs, args.repeats, policy, paired)
    rec["load_after"] = load_average()
    for i, label in enumerate(timed):
        rec["variants"][label]["ratios"] = [r[i] for r in ratios]
        rec["variants"][label]["paired_ratios"] = [r[i] for r in paired]
    base = runtime.measure(exes[0], runtime.to_device(inputs), policy)
    rec["original_ms"] = base.full * 1e3
    return rec


def _slug(name: str) -> str:
    return name.replace("/", "__")


def _save(where: Path, name: str, variants: dict, rec: dict) -> None:
    """Each variant's module text (and its XLA actions) under `where`, for `--retime`."""
    where.mkdir(parents=True, exist_ok=True)
    for label, (prog, actions) in variants.items():
        if label == "original":
            continue
        (where / f"{_slug(name)}.{label}.mlir").write_text(prog.text())
        (where / f"{_slug(name)}.{label}.json").write_text(json.dumps(
            {"actions": list(actions), **{k: v for k, v in rec["variants"].get(label, {}).items() if k != "ratios"}},
            indent=1, default=str))


def _load_saved(where: Path, name: str, program, variants: dict, rec: dict) -> None:
    """The searched variants `--save` wrote, instead of searching again."""
    for label in VARIANTS[2:]:
        text_path = where / f"{_slug(name)}.{label}.mlir"
        if not text_path.exists():
            rec["variants"][label] = {"error": f"not saved in {where}"}
            continue
        meta = json.loads((where / f"{_slug(name)}.{label}.json").read_text())
        variants[label] = (program_of_text(text_path.read_text(), program, f"{name}.{label}"),
                           tuple(meta.get("actions", ())))
        rec["variants"][label] = {k: v for k, v in meta.items() if k in ("search", "returned_original", "applied",
                                                                           "search_s", "search_ratio")}


# --- report -------------------------------------------------------------------------------------

def fmt_ratio(v: dict) -> str:
    if "ratios" not in v:
        return "—" if "error" not in v else "fail"
    med, lo, hi = summarize(v["ratios"])
    return f"{med:.3f} ({lo:.3f}–{hi:.3f})"


def _short_check(v: dict) -> str:
    """EXACT, REASSOC(iate), or why the variant was not timed."""
    if "check" in v:
        return v["check"].split(" ")[0].replace("REASSOCIATE", "REASSOC") if "ratios" in v else "FAIL"
    return "err" if "error" in v else "—"


def table(records: list[dict]) -> str:
    head = ("| program | original | ops A | enzyme | ops B | shlo_env | ops C | enzyme+shlo_env | ops D "
            "| shlo_env / enzyme | A/A control | outputs | load (1/5/15 min) before / after |")
    lines = [head, "|" + "---|" * 13]
    for r in records:
        v = r["variants"]
        a = v.get("original", {})
        cells = [r["program"], f"{r.get('original_ms', math.nan):.3f} ms", str(a.get("ops", "?"))]
        for label in VARIANTS[1:]:
            x = v.get(label, {})
            cells += [fmt_ratio(x) + (" =in" if x.get("returned_input") else ""), str(x.get("ops", "—"))]
        c, b = v.get("shlo_env", {}).get("ratios"), v.get("enzyme", {}).get("ratios")
        cells.append(f"{summarize(c)[0] / summarize(b)[0]:.3f}" if c and b else "—")
        cells.append(fmt_ratio(v.get(CONTROL, {})))
        cells.append(" ".join(f"{k}:{_short_check(v.get(label, {}))}" for k, label in zip("BCD", VARIANTS[1:])))
        cells.append(f"{r.get('load_before', '?')} / {r.get('load_after', '?')}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _beyond_noise(r: dict, label: str) -> int:
    """+1 when `label`'s ratio is above 1 by more than the A/A control's spread in its loop, -1
    below, 0 within it or when the variant is the original's module unchanged (a search that
    returned its input is jax.jit itself: another compile of it only measures the loop's noise)."""
    v, c = r["variants"].get(label, {}).get("ratios"), r["variants"].get(CONTROL, {}).get("ratios")
    if not v or not c or r["variants"][label].get("returned_input"):
        return 0
    med, (cm, lo, hi) = summarize(v)[0], summarize(c)
    spread = max(abs(hi - 1.0), abs(lo - 1.0), abs(cm - 1.0))
    return 1 if med > 1.0 + spread else -1 if med < 1.0 - spread else 0


def summary(records: list[dict]) -> list[str]:
    """The set's figures: geomeans of Enzyme's, shlo_env's and their ratio over the programs both
    were timed on, and how often each is slower or faster than jax.jit beyond the loop's noise."""
    both = [r for r in records if r["variants"].get("enzyme", {}).get("ratios")
            and r["variants"].get("shlo_env", {}).get("ratios")]
    if not both:
        return []

    def geo(label: str) -> float:
        return math.exp(float(np.mean([math.log(summarize(r["variants"][label]["ratios"])[0]) for r in both])))

    b, c = geo("enzyme"), geo("shlo_env")
    out = [f"set of {len(both)} programs timed with both: geomean enzyme {b:.3f}, shlo_env {c:.3f}, "
           f"shlo_env / enzyme {c / b:.3f}"]
    for label in ("enzyme", "shlo_env"):
        signs = [_beyond_noise(r, label) for r in both]
        same = sum(bool(r["variants"][label].get("returned_input")) for r in both)
        out.append(f"{label}: faster than jax.jit beyond the A/A control's spread on {signs.count(-1)}, "
                   f"slower on {signs.count(1)}, within it on {signs.count(0)}"
                   + (f" ({same} returned the original unchanged)" if same else ""))
    return out


def main(argv=None) -> int:
    if argv is None and sys.argv[1:2] == ["--enzyme-child"]:
        return _enzyme_child()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", default="", help="comma-separated peer programs (default: the models; "
                                                   "'bvx' the bench_vs_xla ones, 'all' every one, 'none' none)")
    ap.add_argument("--dataset", default=None, help="also our dataset's programs: zoo or corpus")
    ap.add_argument("--limit", type=int, default=3, help="how many dataset programs (default 3)")
    ap.add_argument("--dataset-programs", default="", help="only these dataset programs (comma-separated names)")
    ap.add_argument("--budget", type=float, default=60.0, help="shlo_env's search budget per search, seconds")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved timing loops per program (default 3)")
    ap.add_argument("--runs", type=int, default=20, help="rounds per loop at least (default 20)")
    ap.add_argument("--min-seconds", type=float, default=2.0, help="each loop runs at least this long (default 2)")
    ap.add_argument("--no-search", action="store_true", help="only the original and Enzyme's pipeline")
    ap.add_argument("--no-search-on-enzyme", action="store_true",
                    help="search the original only (C), not Enzyme's output (D): half the time on a dataset")
    ap.add_argument("--save", default=None, metavar="DIR", help="write each variant's module to DIR")
    ap.add_argument("--retime", default=None, metavar="DIR",
                    help="check and time the variants --save wrote to DIR (no pipeline run, no search)")
    ap.add_argument("--json", default=None, help="write every record here")
    ap.add_argument("--out", default=None, help="write the markdown table here")
    args = ap.parse_args(argv)

    why = enzyme_available()
    if why is not None:
        print(f"vs_enzyme: Enzyme-JAX is not installed ({why}); install it with `pip install -e \".[peer]\"` "
              "(enzyme-ad). Nothing to compare: skipped.")
        return 0

    from shlo_env.execute.worker import Worker

    names = [] if args.programs == "none" else resolve_names(args.programs)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    records = []
    worker = Worker()
    try:
        only = tuple(n for n in args.dataset_programs.split(",") if n)
        for name, program, inputs, reproduces in load_programs(names, args.dataset, args.limit, only):
            try:
                rec = bench_program(name, program, inputs, reproduces, args, worker, log)
            except Exception as e:  # noqa: BLE001 - one program's failure is its row
                rec = {"program": name, "reproduces": reproduces, "variants": {}, "error": f"{type(e).__name__}: {e}"}
                log(f"{name}: error: {rec['error']}\n" + "".join(traceback.format_exc().splitlines(True)[-6:]))
            records.append(rec)
            log(table([rec]).splitlines()[-1])
            if args.json:
                Path(args.json).write_text(json.dumps(records, indent=1, default=str))
    finally:
        worker.close()
    text = table(records)
    header = (f"vs_enzyme: budget {args.budget:g} s, {args.repeats} repeats x >= {args.runs} rounds / "
              f"{args.min_seconds:g} s, jax {__import__('jax').__version__}, enzyme-ad "
              f"{_version('enzyme-ad')}, {os.cpu_count()} CPUs\n"
              "ratios: T(variant) / T(original), median of the repeats (min–max); ops: StableHLO ops in main; "
              "=in: the search returned its input unchanged; A/A control: the original's executable timed "
              "again in the same loop")
    lines = summary(records)
    print(header)
    print(text)
    print("\n".join(lines))
    if args.out:
        Path(args.out).write_text(header + "\n\n" + text + "\n\n" + "\n".join(lines) + "\n")
    return 0


def _version(dist: str) -> str:
    try:
        from importlib.metadata import version

        return version(dist)
    except Exception:  # noqa: BLE001
        return "?"


if __name__ == "__main__":
    sys.exit(main())
