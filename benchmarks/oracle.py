"""How much of the available gain does the search find? Time every single action alone against
the original, side by side, and compare the best with what `shlo-env bench` found (issue 31,
item 7).

    python benchmarks/oracle.py [--dataset zoo] [--programs NAME ...] [--limit N] [--budget 120]
        [--rounds 3] [--max-sites 4] [--bench-csv results/bench.csv] [--out FILE.md] [--json FILE]

For each program (a seeded `--limit` sample of the dataset, or `--programs`), within `--budget`
seconds of wall clock, the actions are, in this order:

1. every pattern at all its sites at once (one action per pattern that matches);
2. every value-preserving XLA option alone (`shlo_env.execute.xla_options.candidate_options()`);
3. every pattern at one site, at most `--max-sites` sites per pattern (spread over the program),
   taken round-robin over the patterns.

Patterns are those the search uses by default (numerics tier up to REASSOCIATE; `--approx` adds
the APPROX ones). A pattern action whose optimized HLO is the original's (after renaming, as
`benchmarks/pattern_effectiveness.py` compares them) is "same executable", ratio 1, not timed.
Every other action is verified like a search candidate (`shlo_env.measure.verify.Verifier`, at the
tier its alternatives or option claim) and, if it passes, timed against the original in a
worker process: `--rounds` rounds of interleaved A, B, A, B, ... (`--seconds` of pairs each),
one median-of-pair-ratios per round, the action's ratio being the median over rounds. The
original is also timed against itself the same way (the A/A control: its spread is the noise).
The `--confirm` best actions below 1 then go to the search's own acceptance test, the
sequential paired test (`shlo_env.measure.paired_timing.time_until_decided`, alpha 1 %, minimum gain
`--min-gain`, at most `--paired-s` seconds each), and the oracle's best is the accepted action
with the lowest estimate (the minimum over hundreds of noisy ratios is biased low: the paired
test is what keeps the maximum honest, and it is the test the search's result has to pass).

Each program also gets T/roofline: the original's measured time over its roofline floor
(`shlo_env.measure.roofline`: XLA's flop and byte counts at this machine's peaks, `zoo_gap.peak_rates`:
the best of `--peak-repeats` measurements over several matmul sizes; set SHLO_ENV_PEAK_FLOPS /
SHLO_ENV_PEAK_BANDWIDTH to skip it).

With `--bench-csv` (the per-program CSV that `shlo-env bench --dataset zoo` writes), the table
adds the search's ratio and the share of the oracle's gain it reached: (1 - search) / (1 - oracle)
where the paired test accepted the oracle's best. `--json` is written after each program, and
`--resume` skips the programs an earlier `--json` file already holds. The table is Markdown on stdout (and `--out`); `--json` keeps every
action's ratios, and `--from-json FILE --bench-csv CSV` prints the table again against another
bench run without measuring anything.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import pattern_effectiveness as pe  # noqa: E402
import zoo_gap  # noqa: E402

from shlo_env import corpus
from shlo_env.rewrite import driver
from shlo_env.measure import roofline
from shlo_env.execute import runtime, xla_options  # noqa: E402
from shlo_env.bench.datasets import _sample  # noqa: E402 - the bench's seeded sample, so --limit matches bench's
from shlo_env.measure.numerics import Numerics  # noqa: E402
from shlo_env.measure.paired_timing import time_until_decided  # noqa: E402
from shlo_env.search.acceptance import ACCEPT_ALPHA  # noqa: E402
from shlo_env.measure.sequential_test import Decision, SequentialRatioTest  # noqa: E402
from shlo_env.measure.timing_policy import TimingPolicy  # noqa: E402
from shlo_env.measure.verify import Verifier  # noqa: E402
from shlo_env.execute.worker import CandidateError, Worker  # noqa: E402


@dataclasses.dataclass
class Action:
    kind: str  # "all sites", "one site", "option"
    name: str  # pattern name or option token
    sites: int = 0
    decisions: list[int] | None = None  # for patterns: the decision vector over the alternatives
    options: tuple[str, ...] = ()
    numerics: Numerics = Numerics.EXACT
    status: str = "pending"  # same executable | rejected | error | timed | not reached
    ratios: list[float] = dataclasses.field(default_factory=list)
    detail: str = ""
    paired: dict | None = None  # the paired test: decision, ratio, lower, upper, pairs, seconds

    @property
    def accepted(self) -> bool:
        return self.paired is not None and self.paired["decision"] == Decision.ACCEPT

    @property
    def ratio(self) -> float | None:
        if self.status == "same executable":
            return 1.0
        return statistics.median(self.ratios) if self.ratios else None

    @property
    def label(self) -> str:
        return f"{self.name} ({self.kind}{f', {self.sites} sites' if self.kind == 'all sites' else ''})"

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["numerics"] = self.numerics.name
        d["ratio"] = self.ratio
        return d


@dataclasses.dataclass
class ProgramResult:
    name: str
    library: str
    kind: str
    ops: int
    base_ms: float = float("nan")
    floor_ms: float | None = None
    control: list[float] = dataclasses.field(default_factory=list)
    actions: list[Action] = dataclasses.field(default_factory=list)
    confirmed: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    load: tuple[float, float] = (float("nan"), float("nan"))
    error: str = ""

    @property
    def t_over_floor(self) -> float | None:
        return self.base_ms / self.floor_ms if self.floor_ms else None

    def best(self) -> Action | None:
        """The action the paired test accepted with the lowest estimate (None when it accepted none)."""
        accepted = [a for a in self.actions if a.accepted]
        return min(accepted, key=lambda a: a.paired["ratio"]) if accepted else None  # type: ignore[index]

    def best_ratio(self) -> float:
        best = self.best()
        return best.paired["ratio"] if best else 1.0  # type: ignore[index]

    @classmethod
    def from_dict(cls, d: dict) -> "ProgramResult":
        """Back from `as_dict` (for --from-json)."""
        fields = {f.name for f in dataclasses.fields(cls)}
        r = cls(**{k: v for k, v in d.items() if k in fields and k != "actions"})
        action_fields = {f.name for f in dataclasses.fields(Action)}
        r.actions = [Action(**{k: v for k, v in a.items() if k in action_fields and k != "numerics"},
                            numerics=Numerics[a["numerics"]]) for a in d["actions"]]
        r.load = tuple(r.load)  # type: ignore[assignment]
        return r

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["actions"] = [a.as_dict() for a in self.actions]
        d["t_over_floor"] = self.t_over_floor
        best = self.best()
        d["best"] = best.as_dict() if best else None
        return d


# --- the actions ----------------------------------------------------------------------------------

def pattern_actions(aug, max_sites: int) -> list[Action]:
    """All-sites actions (one per pattern) and up to `max_sites` one-site actions per pattern."""
    alts = driver.list_alternatives(aug)
    picks: dict[str, list[tuple[int, int]]] = {}
    tiers: dict[str, int] = {}
    for i, a in enumerate(alts):
        for k in range(1, a.num_choices):
            if a.labels[k] not in [lab for lab in a.labels[1:k]]:  # one choice per pattern and site
                picks.setdefault(a.labels[k], []).append((i, k))
                tiers[a.labels[k]] = max(tiers.get(a.labels[k], 0), a.tiers[k])
    out = []
    for label, sites in sorted(picks.items(), key=lambda kv: -len(kv[1])):
        vec = [0] * len(alts)
        for i, k in sites:
            vec[i] = k
        out.append(Action("all sites", label, len(sites), vec, numerics=Numerics(tiers[label])))
    singles = {label: pe._spread(sites, max_sites) for label, sites in picks.items()
               if len(sites) > 1 and max_sites > 0}
    for j in range(max(map(len, singles.values()), default=0)):  # round-robin over patterns
        for label, sites in singles.items():
            if j < len(sites):
                i, k = sites[j]
                vec = [0] * len(alts)
                vec[i] = k
                out.append(Action("one site", label, 1, vec, numerics=Numerics(alts[i].tiers[k])))
    return out


def option_actions(approx: bool) -> list[Action]:
    return [Action("option", t, options=(t,), numerics=xla_options.numerics((t,)))
            for t in xla_options.candidate_options(approx=approx)]


# --- measuring ------------------------------------------------------------------------------------

def time_pair(worker: Worker, base: str, cand: str, options: tuple[str, ...], key: str, rounds: int,
              seconds: float) -> list[float]:
    """`rounds` median-of-pair ratios of `cand` (compiled with `options`) over `base`, interleaved."""
    policy = TimingPolicy(runs=10, warmup=2, min_seconds=seconds)
    out = []
    for _ in range(rounds):
        t_base, t_cand = worker.time_each([(base, ()), (cand, options)], key, policy)
        out.append(runtime.median_ratio(t_base.samples, t_cand.samples))
    return out


def paired_test(worker: Worker, base: str, cand: str, options: tuple[str, ...], key: str, allowance_s: float,
                min_gain: float) -> dict:
    """The search's acceptance test of `cand` (with `options`) against `base`, as a dict for the JSON."""
    p = time_until_decided(worker, base, cand, key, allowance_s, passes_b=options,
                           test=SequentialRatioTest(alpha=ACCEPT_ALPHA, min_gain=min_gain))
    return {"decision": str(p.decision), "ratio": p.ratio, "lower": p.lower, "upper": p.upper, "pairs": p.pairs,
            "seconds": round(p.seconds, 1)}


def measure_program(entry, worker: Worker, *, budget_s: float, rounds: int, seconds: float, max_sites: int,
                    confirm: int, approx: bool, peaks: tuple[float | None, float | None], paired_s: float = 20.0,
                    min_gain: float = 0.01, log=sys.stderr) -> ProgramResult:
    start = time.perf_counter()
    m = entry.metadata
    res = ProgramResult(entry.name, m.get("library", "?"), m.get("kind", "?"), m.get("ops", 0))
    load0 = os.getloadavg()[0]
    prog = corpus.load(entry.uri)
    base_text = prog.text()
    key = f"oracle/{entry.name}"
    worker.set_inputs(key, runtime.random_inputs(prog.in_specs, 0))
    try:
        base_hlo = pe.canonical_hlo(worker.optimized_hlo(base_text))
        t_base, t_again = worker.time_each([(base_text, ()), (base_text, ())], key,
                                           TimingPolicy(runs=10, warmup=2, min_seconds=seconds))
        res.base_ms = t_base.full * 1e3
        res.control = [runtime.median_ratio(t_base.samples, t_again.samples)]
        res.control += time_pair(worker, base_text, base_text, (), key, rounds - 1, seconds)
        floor = roofline.floor_s(worker.cost(base_text), *peaks)
        res.floor_ms = floor * 1e3 if floor else None
    except CandidateError as e:
        res.error = f"original: {e}"
        return res
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        patterns = [p for p in pe.select_patterns() if approx or p.numerics <= Numerics.REASSOCIATE]
        aug = driver.augment(prog, patterns)
    base = driver.strip(aug)
    verifier = Verifier(base, worker, num_random=2)
    actions = pattern_actions(aug, max_sites)
    res.actions = actions[: sum(a.kind == "all sites" for a in actions)] + option_actions(approx) + \
        [a for a in actions if a.kind == "one site"]
    print(f"{entry.name}: {m.get('ops')} ops, {res.base_ms:.2f} ms, {len(res.actions)} actions "
          f"(augment and original {time.perf_counter() - start:.0f} s)", file=log, flush=True)
    per_action = 0.0
    for n, a in enumerate(res.actions):
        elapsed = time.perf_counter() - start
        if elapsed + per_action > budget_s:
            break
        t0 = time.perf_counter()
        try:
            if a.decisions is not None:
                text = driver.apply(aug, a.decisions).text()
                if pe.canonical_hlo(worker.optimized_hlo(text)) == base_hlo:
                    a.status = "same executable"
                    continue
            else:
                text = base_text
            cmp = verifier.check(text, a.options, a.numerics)
            if not cmp.ok:
                a.status, a.detail = "rejected", cmp.detail[:120]
                continue
            a.ratios = time_pair(worker, base_text, text, a.options, key, rounds, seconds)
            a.status = "timed"
        except (CandidateError, driver.ApplyError) as e:
            a.status, a.detail = "error", str(e).splitlines()[0][:120] if str(e) else type(e).__name__
        finally:
            took = time.perf_counter() - t0
            per_action = max(per_action * 0.7 + took * 0.3, took if n == 0 else 0.0)
    for a in res.actions:
        if a.status == "pending":
            a.status = "not reached"
    # Confirm the best few by the search's acceptance test (the paired sequential test).
    best = sorted((a for a in res.actions if a.status == "timed" and (a.ratio or 1.0) < 1.0),
                  key=lambda a: a.ratio or 1.0)[:confirm]
    for a in best:
        text = driver.apply(aug, a.decisions).text() if a.decisions is not None else base_text
        try:
            a.paired = paired_test(worker, base_text, text, a.options, key, paired_s, min_gain)
            res.confirmed.append(a.label)
        except CandidateError as e:
            a.detail = f"confirmation failed: {e}"
    worker.drop_inputs([key])
    res.seconds = time.perf_counter() - start
    res.load = (load0, os.getloadavg()[0])
    return res


# --- reporting ------------------------------------------------------------------------------------

def read_bench_csv(path: str | None) -> dict[str, float]:
    """name -> the search's final ratio, from `shlo-env bench`'s per-program CSV."""
    if not path:
        return {}
    out = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row.get("ratio") not in (None, ""):
                out[row["name"]] = float(row["ratio"])
    return out


def _fmt(x: float | None, spec: str = ".3f") -> str:
    return "-" if x is None else format(x, spec)


def table(results: list[ProgramResult], search: dict[str, float]) -> str:
    lines = ["| program | library | kind | ops | ms | T/roofline | actions timed / same / rejected / not reached "
             "| A/A control | oracle best | paired test (bounds) | best action | search | share of gain |",
             "|---|---|---|---:|---:|---:|---|---|---:|---|---|---:|---:|"]
    for r in results:
        if r.error:
            lines.append(f"| {r.name} | {r.library} | {r.kind} | {r.ops} | - | - | {r.error[:60]} | | | | | | |")
            continue
        count = {s: sum(a.status == s for a in r.actions) for s in ("timed", "same executable", "rejected",
                                                                        "error", "not reached")}
        best = r.best()
        oracle = r.best_ratio()
        s = search.get(r.name)
        share = (1.0 - s) / (1.0 - oracle) if s is not None and best else None
        tested = [a for a in r.actions if a.paired]
        shown = best or min(tested, key=lambda a: a.paired["ratio"], default=None)  # type: ignore[index]
        test = (f"{shown.paired['decision']} {shown.paired['ratio']:.3f} ({shown.paired['lower']:.3f}-"
                f"{shown.paired['upper']:.3f})" if shown and shown.paired else "-")
        control = " ".join(f"{c:.3f}" for c in r.control)
        lines.append(
            f"| {r.name} | {r.library} | {r.kind} | {r.ops} | {r.base_ms:.2f} | {_fmt(r.t_over_floor, '.1f')} | "
            f"{count['timed']} / {count['same executable']} / {count['rejected'] + count['error']} / "
            f"{count['not reached']} | {control} | {oracle:.3f} | {test} | "
            f"{shown.label if shown else '(none below 1)'}{'' if best or not shown else ' (not accepted)'} | "
            f"{_fmt(s)} | {_fmt(share, '.0%')} |")
    return "\n".join(lines)


def detail(results: list[ProgramResult], top: int = 5) -> str:
    """Per program, the `top` actions by ratio with every round."""
    out = []
    for r in results:
        timed = sorted((a for a in r.actions if a.ratios), key=lambda a: a.ratio or 1.0)[:top]
        if not timed:
            continue
        out.append(f"\n{r.name} (load {r.load[0]:.1f}-{r.load[1]:.1f}, {r.seconds:.0f} s):")
        out += [f"- {a.label}: {a.ratio:.3f} (rounds {' '.join(f'{x:.3f}' for x in a.ratios)})"
                + (f"; paired test {a.paired['decision']} {a.paired['ratio']:.3f} ({a.paired['lower']:.3f}-"
                   f"{a.paired['upper']:.3f}, {a.paired['pairs']} pairs)" if a.paired else "") for a in timed]
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="zoo", help="a corpus dataset name (default: zoo)")
    ap.add_argument("--programs", nargs="*", help="programs by name (default: all, or --limit of them)")
    ap.add_argument("--limit", type=int, help="a seeded sample of this many programs (bench's sample)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--budget", type=float, default=120.0, help="wall seconds per program (default 120)")
    ap.add_argument("--rounds", type=int, default=3, help="timing rounds per action (default 3)")
    ap.add_argument("--seconds", type=float, default=0.5, help="seconds of A,B pairs per round (default 0.5)")
    ap.add_argument("--max-sites", type=int, default=4, help="one-site actions per pattern (default 4)")
    ap.add_argument("--confirm", type=int, default=3, help="best actions given the paired test (default 3)")
    ap.add_argument("--paired-s", type=float, default=20.0, help="seconds per paired test at most (default 20)")
    ap.add_argument("--min-gain", type=float, default=0.01, help="the paired test's minimum gain (default 0.01)")
    ap.add_argument("--approx", action="store_true", help="include APPROX patterns and options")
    ap.add_argument("--peak-repeats", type=int, default=20, help="roofline peak measurements, best kept")
    ap.add_argument("--bench-csv", help="per-program CSV of `shlo-env bench` on the same dataset")
    ap.add_argument("--out", help="also write the Markdown here")
    ap.add_argument("--json", help="write every action's ratios here (after each program)")
    ap.add_argument("--resume", action="store_true", help="keep the programs --json already holds; measure the rest")
    ap.add_argument("--from-json", help="measure nothing: print the table of an earlier --json run "
                                        "(with --bench-csv, against that bench run)")
    args = ap.parse_args(argv)
    if args.budget <= 0 or args.rounds < 1:
        ap.error("--budget must be > 0 and --rounds >= 1")
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text())
        kept = [ProgramResult.from_dict(d) for d in saved["programs"]]
        print("\n".join([saved["header"], "", table(kept, read_bench_csv(args.bench_csv)), detail(kept), ""]))
        return 0
    entries = corpus.entries(args.dataset)
    if args.programs:
        known = {e.name for e in entries}
        missing = sorted(set(args.programs) - known)
        if missing:
            ap.error(f"unknown programs {missing} in {args.dataset}")
        entries = [e for e in entries if e.name in args.programs]
    entries = _sample(entries, args.limit, args.seed)
    flops, bandwidth, source = zoo_gap.peak_rates(args.peak_repeats)
    print(f"peaks: {flops or 0:.3g} flop/s, {bandwidth or 0:.3g} B/s ({source})", file=sys.stderr)
    search = read_bench_csv(args.bench_csv)
    results: list[ProgramResult] = []
    if args.resume and args.json and Path(args.json).exists():
        results = [ProgramResult.from_dict(d) for d in json.loads(Path(args.json).read_text())["programs"]]
        done = {r.name for r in results}
        entries = [e for e in entries if e.name not in done]
        print(f"resuming: {len(done)} programs kept from {args.json}, {len(entries)} to measure", file=sys.stderr)

    def header() -> str:
        loads = [x for r in results for x in r.load]
        return (f"Oracle on {args.dataset}: {len(results)} programs, budget {args.budget:g} s each, {args.rounds} "
                f"rounds of {args.seconds:g} s per action, the {args.confirm} best given the paired test (alpha "
                f"{ACCEPT_ALPHA:g}, min gain {args.min_gain:g}, {args.paired_s:g} s), {runtime.platform()}, peaks "
                f"{flops or 0:.3g} flop/s and {bandwidth or 0:.3g} B/s ({source}); load average "
                f"{min(loads, default=0):.1f}-{max(loads, default=0):.1f}.")

    with Worker(timeout_s=300) as worker:
        for e in entries:
            r = measure_program(e, worker, budget_s=args.budget, rounds=args.rounds, seconds=args.seconds,
                                max_sites=args.max_sites, confirm=args.confirm, approx=args.approx,
                                peaks=(flops, bandwidth), paired_s=args.paired_s, min_gain=args.min_gain)
            best = r.best()
            print(f"  -> {r.name}: oracle {r.best_ratio():.3f} "
                  f"({best.label if best else 'none accepted'}), {r.seconds:.0f} s", file=sys.stderr, flush=True)
            results.append(r)
            if args.json:  # after each program: a long run stopped early keeps what it measured
                Path(args.json).write_text(json.dumps({"header": header(), "programs": [x.as_dict() for x in results]},
                                                      indent=1, default=str))
    text = "\n".join([header(), "", table(results, search), detail(results), ""])
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
