"""`report.explain()`: what changed and where in your source, or why nothing did.

    fast = shlo_env.optimize(f, X, W)
    print(fast.report.explain())

For a rewritten function, per rewrite taken: the lines of your source it applied to (each op
a rewrite builds carries a fused location of the ops it replaced, named after the pattern:
`shlo_env.ir.locations`), the share of the original's profiled kernel time in the kernels it
touched, and its contribution as the search measured it (`shlo_env.search.attribution`): the
rewrite alone against the program it was taken from, else its region's ratio, else the step
it was part of. Then the XLA actions, the times, and a unified diff of the original and the
optimized StableHLO with SSA names canonicalized (`%0`, `%1`, ... in order of definition).
Without the records (a report from an older cache entry) the lines come from the locations
of the optimized program, else from the original ops it no longer has.

For `jax.jit` kept: why, measured: the reason, the noise band against the acceptance
threshold, the original's time against its roofline floor (when the peak rates are known),
what the search tried and why candidates were rejected, what the budget cut, and, when the
search profiled the original, its hottest kernels with your lines and what each pattern
matched there measured.
"""

from __future__ import annotations

import collections
import difflib
import math
import re

from shlo_env.ir.locations import rewrite_sources, source_line

_SSA = re.compile(r"%[A-Za-z0-9_.$-]+(?:#\d+)?")
HOT_KERNELS = 5  # kernels listed under "where the time goes"


def _ops(program) -> list:
    from shlo_env.rewrite.driver import walk_ops

    return [op for op in walk_ops(program.body) if op.name not in ("func.return", "stablehlo.return")]


def rewritten_sites(original, optimized) -> list[tuple[str, int, list[str]]]:
    """(file, line, op kinds) of the original ops the optimized program no longer has, by line."""
    def signature(op) -> tuple[str, str]:
        return op.name, str(op.location)

    kept = collections.Counter(signature(op) for op in _ops(optimized))
    by_line: dict[tuple[str, int], list[str]] = {}
    for op in _ops(original):
        sig = signature(op)
        if kept[sig] > 0:
            kept[sig] -= 1
            continue
        where = source_line(op.location)
        if where is None or op.name == "stablehlo.constant":
            continue
        by_line.setdefault(where, []).append(op.name.removeprefix("stablehlo."))
    return [(file, line, sorted(set(kinds))) for (file, line), kinds in sorted(by_line.items())]


def canonical(text: str) -> list[str]:
    """StableHLO text with SSA names numbered in order of appearance (`%0`, `%1`, ...)."""
    names: dict[str, str] = {}

    def rename(m: re.Match) -> str:
        return names.setdefault(m.group(0), f"%{len(names)}")

    return [_SSA.sub(rename, line) for line in text.splitlines()]


def stablehlo_diff(original_text: str, optimized_text: str, context: int = 1) -> str:
    """A unified diff of the two programs' canonical text. Lines are matched with their SSA
    names blanked (a new op renumbers every later value: that is not a change); `-` lines are
    in the original's numbering, context and `+` lines in the optimized program's."""
    a, b = canonical(original_text), canonical(optimized_text)
    matcher = difflib.SequenceMatcher(None, [_SSA.sub("%", x) for x in a], [_SSA.sub("%", x) for x in b],
                                      autojunk=False)
    out: list[str] = []
    for group in matcher.get_grouped_opcodes(context):
        if not out:
            out += ["--- original", "+++ optimized"]
        _, i1, _, j1, _ = group[0]
        out.append(f"@@ -{i1 + 1},{group[-1][2] - i1} +{j1 + 1},{group[-1][4] - j1} @@")
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":  # shown as the optimized program has them (its numbering)
                out += [" " + x for x in b[b1:b2]]
                continue
            out += ["-" + x for x in a[a1:a2]] + ["+" + x for x in b[b1:b2]]
    return "\n".join(out)


def _line_text(file: str, line: int) -> str:
    try:
        with open(file) as f:
            for i, text in enumerate(f, 1):
                if i == line:
                    return text.strip()
    except OSError:
        pass
    return ""


def _where(entry: str) -> str:
    """`file:line` with the line's code, when the file can be read."""
    file, _, line = entry.rpartition(":")
    code = _line_text(file, int(line)) if line.isdigit() else ""
    return f"{entry}: {code}" if code else entry


def _ratio_text(ratio, how: str) -> str:
    return f"ratio {ratio:.3f} {how}" if ratio is not None else how


def _rewrite_lines(report, original, optimized) -> list[str]:
    """Per rewrite taken: where in your source, its kernels' share, what it measured."""
    records = [dict(r) for r in getattr(report, "rewrites", ()) or ()]
    located: dict[str, list[str]] = {}
    if optimized is not None:  # the fused locations of the optimized program's ops
        from shlo_env.ir.program import ir_scope

        with ir_scope():
            located = {k: [f"{f}:{n}" for f, n in v] for k, v in rewrite_sources(_ops(optimized)).items()}
    if not records:  # a report without them (an older cache entry): the rewrites by name
        records = [{"pattern": name} for name in dict.fromkeys(report.applied)]
    lines = [f"rewrites ({report.numerics} tier): where in your source, the share of the original's profiled "
             "kernel time in the kernels each touched, and what it measured:"]
    unplaced = False
    for r in records:
        sites = len(r.get("sites", ()))
        head = f"  {r['pattern']}" + (f" (step {r['step'] + 1}, {sites} site{'s' * (sites != 1)})" if sites else "")
        facts = []
        if "measured" in r:
            facts.append(_ratio_text(r.get("ratio"), r["measured"]))
        if r.get("share") is not None:
            facts.append(f"its kernels held {r['share']:.1%} of the time ({r.get('kernel_ms', math.nan):.3f} ms)")
        elif sites:
            facts.append("its kernels: not profiled")
        lines.append(head + (": " + "; ".join(facts) if facts else ""))
        sources = list(r.get("sources") or ()) or located.get(r["pattern"], [])
        unplaced |= not sources
        lines += [f"    {_where(x)}" for x in sources]
    if unplaced and original is not None and optimized is not None:
        lost = rewritten_sites(original, optimized)
        if lost:
            lines.append("where, in your source (the ops the rewrites replaced):")
            for file, line, kinds in lost:
                code = _line_text(file, line)
                lines.append(f"  {file}:{line}: {', '.join(kinds)}" + (f"    | {code}" if code else ""))
        else:
            lines.append("where: no source location survives (a program loaded from a file has none)")
    return lines


def _measured_text(outcome: dict) -> str:
    return f"{outcome['ratio']:.3f} {outcome['how']}" if outcome.get("ratio") is not None else outcome["how"]


def _hotspot_lines(report) -> list[str]:
    """The original's hottest kernels (its profile in the search) with your lines and the
    patterns matched there."""
    hot = list(getattr(report, "hotspots", ()) or ())
    if not hot:
        return []
    lines = ["  where the time goes (the search's profile of the original, hottest kernels first):"]
    for k in hot[:HOT_KERNELS]:
        ops = ", ".join(f"{n.removeprefix('stablehlo.')}x{c}" if c > 1 else n.removeprefix("stablehlo.")
                        for n, c in dict(k.get("ops", {})).items())
        what = f"{k['category']}: {ops}" if ops else f"{k['category']}, made by XLA (no StableHLO op maps to it)"
        lines.append(f"    {k['share']:6.1%} {k['ms']:.3f} ms  {k['kernel']} ({what})")
        lines += [f"           {_where(x)}" for x in k.get("sources") or ()]
        patterns = dict(k.get("patterns") or {})
        if patterns:
            lines.append("           patterns there: " + "; ".join(f"{name} {_measured_text(o)}"
                                                                 for name, o in patterns.items()))
        elif ops:
            lines.append("           no pattern matches its ops")
    return lines


def _roofline_line(report) -> str:
    r = dict(getattr(report, "roofline", {}) or {})
    if "floor_s" in r:
        return (f"  roofline: jax.jit's {r['time_s'] * 1e3:.3f} ms is {r['time_s'] / r['floor_s']:.1f}x its floor of "
                f"{r['floor_s'] * 1e3:.3f} ms (flops/peak + bytes/bandwidth, peak rates: {r['source']}; a loop "
                "body counts once)")
    if "reason" in r:
        return f"  roofline: no floor: {r['reason']}"
    return ""


def explain(report, original=None, optimized=None, *, diff_lines: int = 60) -> str:
    """The explanation of `report` (an `optimize` Report or a `ProgramResult`);
    `original`/`optimized`: the programs."""
    lines = [str(report).splitlines()[0]]
    if not report.returned_original and optimized is not None:
        lines += _rewrite_lines(report, original, optimized)
        if report.actions:
            lines.append(f"XLA actions: {', '.join(report.action_tokens)}")
        before, after = getattr(report, "baseline_s", math.nan), getattr(report, "optimized_s", math.nan)
        if not math.isnan(before) and not math.isnan(after):
            lines.append(f"time: jax.jit {before * 1e3:.3f} ms -> {after * 1e3:.3f} ms "
                         f"(ratio {report.ratio:.3f}; the machine's noise {report.noise:.3f})")
        elif not math.isnan(getattr(report, "ratio", math.nan)):
            lines.append(f"ratio {report.ratio:.3f} of the original's time (the machine's noise {report.noise:.3f})")
        lines += [x.removeprefix("  ") for x in _hotspot_lines(report)]
        if original is not None:
            diff = stablehlo_diff(original.text(), optimized.text()).splitlines()
            lines.append(f"StableHLO diff (SSA names canonicalized; {len(diff)} lines"
                         + (f", first {diff_lines} shown" if len(diff) > diff_lines else "") + "):")
            lines += ["  " + d for d in diff[:diff_lines]]
        return "\n".join(lines)
    lines.append(f"why not faster: {report.reason or 'nothing verified was faster beyond the noise'}")
    if not math.isnan(report.noise):
        lines.append(f"  noise: this machine's timings of jax.jit against itself differ by {report.noise:.1%}; "
                     f"a candidate must measure below {report.threshold:.3f} of jax.jit's time")
    roof = _roofline_line(report)
    if roof:
        lines.append(roof)
    tried = report.candidates_evaluated
    fails = ", ".join(f"{k} {v}" for k, v in sorted(report.failures.items()))
    untimed = ", ".join(f"{k} {v}" for k, v in sorted(report.untimed.items()))
    lines.append(f"  searched: {tried} candidates with {report.strategy}"
                 + (f"; rejected: {fails}" if fails else "") + (f"; verified but not timed: {untimed}" if untimed else ""))
    if report.acceptance:
        lines.append(f"  {report.describe_acceptance()}")
    if report.cuts:
        lines.append(f"  cut short by the budget: {'; '.join(report.cuts)} (a larger budget_s or mode=\"max\" "
                     "gives the search more)")
    if not tried:
        lines.append("  no rewrite matched, or none was affordable: `shlo-env patterns` lists what the search can "
                     "do; docs/guide.md#why-no-speedup")
    hot = _hotspot_lines(report)
    lines += hot or ["  where the time goes: not profiled in this search (the budget did not afford it); "
                     "`shlo-env profile` (per XLA kernel, with the patterns that touch it)"]
    return "\n".join(lines)


__all__ = ["canonical", "explain", "rewritten_sites", "source_line", "stablehlo_diff"]
