"""`report.explain()`: what changed and where in your source, or why nothing did.

    fast = shlo_env.optimize(f, X, W)
    print(fast.report.explain())

For a rewritten function: the rewrites and their tier, the lines of your source whose ops the
rewrites replaced (jax records each op's Python location; an op a rewrite builds is new, an op
it keeps keeps its location, so the original ops missing from the optimized program are the
ones rewritten), the XLA actions, and a unified diff of the original and the optimized
StableHLO with SSA names canonicalized (`%0`, `%1`, ... in order of definition).

For `jax.jit` kept: why, measured: the reason, the noise band against the acceptance
threshold, what the search tried and why candidates were rejected, and what the budget cut.
"""

from __future__ import annotations

import collections
import difflib
import math
import os
import re
from typing import Any

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_FRAME = re.compile(r'"([^"]+)":(\d+):\d+')
_OP_NAME = re.compile(r'loc\("(?:jit\([^)]*\)/)?([^"(]+)"')
_SSA = re.compile(r"%[A-Za-z0-9_.$-]+(?:#\d+)?")


def source_line(location: Any) -> tuple[str, int] | None:
    """The innermost (file, line) of a location that is the user's: not shlo_env's, not jax's."""
    for file, line in _FRAME.findall(str(location)):
        if file in ("-", "") or file.startswith(_PACKAGE_DIR) or f"{os.sep}jax{os.sep}" in file or f"{os.sep}jax_" in file:
            continue
        return file, int(line)
    return None


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
        (_, i1, _, j1, _), (_, i2, _, j2, _) = group[0], group[-1]
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


def explain(report, original=None, optimized=None, *, diff_lines: int = 60) -> str:
    """The explanation of `report` (an `optimize` Report); `original`/`optimized`: the programs."""
    lines = [str(report).splitlines()[0]]
    if not report.returned_original and optimized is not None:
        lines.append(f"rewrites ({report.numerics} tier): {', '.join(report.applied) or '(none)'}")
        if original is not None:
            sites = rewritten_sites(original, optimized)
            if sites:
                lines.append("where, in your source (the ops the rewrites replaced):")
                for file, line, kinds in sites:
                    code = _line_text(file, line)
                    lines.append(f"  {file}:{line}: {', '.join(kinds)}" + (f"    | {code}" if code else ""))
            else:
                lines.append("where: no source location survives (a program loaded from a file has none)")
        if report.actions:
            lines.append(f"XLA actions: {', '.join(report.action_tokens)}")
        before, after = getattr(report, "baseline_s", math.nan), getattr(report, "optimized_s", math.nan)
        if not math.isnan(before) and not math.isnan(after):
            lines.append(f"time: jax.jit {before * 1e3:.3f} ms -> {after * 1e3:.3f} ms "
                         f"(ratio {report.ratio:.3f}; the machine's noise {report.noise:.3f})")
        elif not math.isnan(getattr(report, "ratio", math.nan)):
            lines.append(f"ratio {report.ratio:.3f} of the original's time (the machine's noise {report.noise:.3f})")
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
    lines.append("  where the time goes: `shlo-env profile` (per XLA kernel, with the patterns that touch it)")
    return "\n".join(lines)


__all__ = ["canonical", "explain", "rewritten_sites", "source_line", "stablehlo_diff"]
