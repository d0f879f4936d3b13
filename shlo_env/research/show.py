"""Pictures of a program and its alternatives: Graphviz DOT and SVG (the HloEnv paper's Figure 2).

    shlo-env show prog.mlir --augment                    # every match, no choice made yet
    shlo-env show prog.mlir --augment --decisions 1,0    # the chosen path against the original
    shlo-env show inst-10-20/3 --augment --decisions pick-first -o fig.svg

Each alternatives op is a yellow hexagon. Its region 0 is the original path (the ops already in
the graph), drawn into it with blue edges; each other region is a box of its own ops, labelled
with its pattern. With `--decisions`, the chosen replacement is green, the original ops it makes
dead are red and dashed, and the regions not taken are grey. Ops inside reduce/while bodies are
folded into their op's label.

A search's result is drawn from its report: the decisions it took, step by step.

    shlo-env optimize model.mlir -o out.mlirbc --report       # writes out.mlirbc.report.json
    shlo-env show out.mlirbc.report.json                      # its first step, on the input program
    shlo-env show out.mlirbc.report.json --step 2 -o step2.svg
    shlo-env show DUMP_DIR                                    # a dump folder (original.mlir, report.json)

Python: `to_dot(program, decisions)` returns the DOT text; `render(program, path, decisions)`
writes `.dot` and runs Graphviz's `dot` for SVG/PNG/PDF (if `dot` is missing, it writes the
`.dot` and says how to get Graphviz); `to_graphviz(...)` gives a `graphviz.Source` for notebooks.
`report_step(program, report, step)` gives the augmented program and the decisions of one step
of a report (an `optimize` Report, a `ProgramResult` or their JSON record), so
`render(*report_step(fast.original, fast.report), "result.svg")` draws what `optimize` did.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from shlo_env.rewrite import driver
from shlo_env.learn import observe
from shlo_env.ir.program import Program

# colours (Material palette: readable on screen and in print)
_C = {
    "edge": "#616161", "param": "#e3f2fd", "const": "#f5f5f5", "op": "#ffffff", "return": "#eeeeee",
    "alt": "#fff59d", "alt_border": "#f9a825",
    "open_fill": "#ffe0b2", "open_border": "#ef6c00",  # undecided alternative regions
    "chosen_fill": "#c8e6c9", "chosen_border": "#2e7d32",
    "replaced_fill": "#ffcdd2", "replaced_border": "#c62828",
    "unchosen": "#9e9e9e", "original": "#1565c0",
}

MISSING_DOT = ("Graphviz's `dot` program was not found, so only the DOT file was written. Install "
               "Graphviz (Debian/Ubuntu: `apt-get install graphviz`; macOS: `brew install graphviz`; "
               "conda: `conda install graphviz`) and rerun, or render the .dot file with any Graphviz viewer.")


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _short(name: str) -> str:
    for prefix in ("stablehlo.", "shlo_env.", "func."):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def _attrs(**kw) -> str:
    parts = []
    for k, v in kw.items():
        if v is None:
            continue
        parts.append(f"{k}={v if isinstance(v, (int, float)) else _q(str(v))}")
    return "[" + ", ".join(parts) + "]"


def _visible(g: observe.Graph) -> list[bool]:
    """Nodes drawn: the main body and alternatives regions; bodies of other ops are folded."""
    vis = [True] * g.num_nodes
    for i in range(g.num_nodes):
        p = int(g.node_parent[i])
        while p >= 0:
            if not g.node_is_alternative[p]:
                vis[i] = False
                break
            p = int(g.node_parent[p])
    return vis


def _folded(g: observe.Graph, vis: list[bool]) -> dict[int, list[str]]:
    """For each drawn op with a folded body: the op names in that body."""
    out: dict[int, list[str]] = {}
    for i in range(g.num_nodes):
        if vis[i]:
            continue
        p = int(g.node_parent[i])
        while p >= 0 and not vis[p]:
            p = int(g.node_parent[p])
        name = g.node_name[i]
        if p >= 0 and name not in ("parameter", "stablehlo.return") and _short(name) not in out.setdefault(p, []):
            out[p].append(_short(name))
    return out


def to_dot(program: Program, decisions: Sequence[int] | None = None, *, title: str | None = None,
           legend: bool = True) -> str:
    """DOT text for `program`; `decisions` (one per alternatives op) marks the chosen path."""
    g = observe.graph(program, uids=False)
    k = g.num_alternatives
    if decisions is not None:
        decisions = driver.normalize_decisions(driver.list_alternatives(program), decisions)
    chosen = {int(n): int(d) for n, d in zip(g.alternative_indices, decisions)} if decisions is not None else {}
    live = observe.live_nodes(g, decisions)
    live_all_original = observe.live_nodes(g, None)
    vis = _visible(g)
    folded = _folded(g, vis)
    arg_no = 0
    lines = [
        "digraph shlo_env {",
        '  graph [rankdir=TB, fontname="Helvetica", fontsize=12, nodesep=0.25, ranksep=0.35, '
        'labelloc=t, compound=true' + (f", label={_q(title)}" if title else "") + "];",
        '  node [fontname="Helvetica", fontsize=10, shape=box, style="rounded,filled", '
        f'fillcolor="{_C["op"]}", color="#424242", margin="0.12,0.04", height=0.3];',
        f'  edge [color="{_C["edge"]}", arrowsize=0.6, fontname="Helvetica", fontsize=9];',
    ]

    def node_line(i: int) -> str:
        nonlocal arg_no
        name, typ = g.node_name[i], g.node_type[i]
        attrs: dict = {}
        if name == "parameter":
            label = f"arg{arg_no}\n{typ}"
            arg_no += 1
            attrs = dict(shape="ellipse", style="filled", fillcolor=_C["param"])
        elif g.node_is_alternative[i]:
            a = int(g.node_num_choices[i])
            idx = list(g.alternative_indices).index(i)
            label = f"alternatives #{idx}\n{a} choices"
            if i in chosen:
                label += f" · took {chosen[i]}"
            attrs = dict(shape="hexagon", style="filled,bold", fillcolor=_C["alt"], color=_C["alt_border"],
                         penwidth=2)
        elif name == "func.return":
            label = "return"
            attrs = dict(shape="box", style="filled", fillcolor=_C["return"])
        else:
            label = _short(name)
            if i in folded:
                label += " {" + ", ".join(folded[i][:4]) + (", ..." if len(folded[i]) > 4 else "") + "}"
            if typ:
                label += f"\n{typ}"
            if name == "stablehlo.constant":
                attrs = dict(fillcolor=_C["const"], fontsize=9)
        alt = int(g.node_alt[i])
        if alt >= 0:  # inside an alternatives region
            owner = int(g.alternative_indices[alt])
            if decisions is None:
                attrs.update(fillcolor=_C["open_fill"], color=_C["open_border"])
            elif chosen.get(owner) == int(g.node_choice[i]) and live[i]:
                attrs.update(fillcolor=_C["chosen_fill"], color=_C["chosen_border"], penwidth=1.8)
            else:
                attrs.update(style="rounded,dashed", fontcolor=_C["unchosen"], color=_C["unchosen"],
                             fillcolor="#ffffff")
        elif decisions is not None and live_all_original[i] and not live[i]:
            attrs.update(style="rounded,filled,dashed", fillcolor=_C["replaced_fill"],
                         color=_C["replaced_border"], penwidth=1.5)
        return f"  n{i} {_attrs(label=label, **attrs)};"

    # main-body nodes, then one cluster per (alternatives op, choice)
    regions: dict[tuple[int, int], list[int]] = {}
    for i in range(g.num_nodes):
        if not vis[i]:
            continue
        if g.node_alt[i] >= 0:
            regions.setdefault((int(g.node_alt[i]), int(g.node_choice[i])), []).append(i)
        else:
            lines.append(node_line(i))
    for (a, c), members in sorted(regions.items()):
        owner = int(g.alternative_indices[a])
        label = g.alternative_labels[a][c]
        if decisions is None:
            style = dict(style="rounded,dashed", color=_C["open_border"], fontcolor=_C["open_border"])
            caption = f"#{a} choice {c}: {label}"
        elif chosen.get(owner) == c:
            style = dict(style="rounded,filled", color=_C["chosen_border"], fillcolor="#f1f8e9",
                         fontcolor=_C["chosen_border"], penwidth="2")
            caption = f"#{a} choice {c}: {label} (chosen)"
        else:
            style = dict(style="rounded,dashed", color=_C["unchosen"], fontcolor=_C["unchosen"])
            caption = f"#{a} choice {c}: {label} (not taken)"
        lines.append(f"  subgraph cluster_alt{a}_{c} {{")
        lines.append("    graph " + _attrs(label=caption, fontsize=10, **style) + ";")
        lines += ["  " + node_line(i) for i in members]
        lines.append("  }")

    # edges (to drawn nodes; an edge from a folded node comes from its drawn ancestor)
    def drawn(i: int) -> int:
        while not vis[i]:
            i = int(g.node_parent[i])
        return i

    seen_edges = set()
    for e in range(g.num_edges):
        s, d = int(g.edge_src[e]), int(g.edge_dst[e])
        if not vis[d]:
            continue
        s = drawn(s)
        c = int(g.edge_choice[e])
        key = (s, d, c)
        if key in seen_edges:
            continue
        seen_edges.add(key)
        attrs: dict = {}
        if c >= 0:  # a value of choice c flowing into its alternatives op
            took = chosen.get(d)
            attrs["label"] = f" {c}"
            if decisions is None:
                attrs.update(color=_C["original"] if c == 0 else _C["open_border"], penwidth=1.8,
                             fontcolor=_C["original"] if c == 0 else _C["open_border"],
                             style=None if c == 0 else "dashed")
            elif took == c:
                colour = _C["original"] if c == 0 else _C["chosen_border"]
                attrs.update(color=colour, fontcolor=colour, penwidth=2.6)
            elif c == 0:
                attrs.update(color=_C["replaced_border"], fontcolor=_C["replaced_border"], style="dashed")
            else:
                attrs.update(color=_C["unchosen"], fontcolor=_C["unchosen"], style="dashed")
        elif decisions is not None and g.node_alt[d] >= 0 and not live[d]:
            attrs.update(color=_C["unchosen"], style="dashed")
        elif decisions is not None and g.node_alt[d] >= 0 and live[d]:
            attrs.update(color=_C["chosen_border"], penwidth=1.6)
        elif decisions is not None and live_all_original[d] and not live[d]:
            attrs.update(color=_C["replaced_border"], style="dashed")
        lines.append(f"  n{s} -> n{d} {_attrs(**attrs)};")

    if legend and k:
        lines += _legend(decisions is not None)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _legend(decided: bool) -> list[str]:
    items = [("original path (kept)", dict(fillcolor=_C["op"], color="#424242"))]
    if decided:
        items += [("chosen replacement", dict(fillcolor=_C["chosen_fill"], color=_C["chosen_border"])),
                  ("original, replaced (pruned)", dict(fillcolor=_C["replaced_fill"], color=_C["replaced_border"],
                                                       style="rounded,filled,dashed")),
                  ("alternative not taken", dict(fillcolor="#ffffff", color=_C["unchosen"],
                                                 fontcolor=_C["unchosen"], style="rounded,dashed"))]
    else:
        items += [("alternative (undecided)", dict(fillcolor=_C["open_fill"], color=_C["open_border"]))]
    items += [("alternatives op", dict(shape="hexagon", fillcolor=_C["alt"], color=_C["alt_border"], style="filled"))]
    out = ["  subgraph cluster_legend {",
           "    graph " + _attrs(label="legend", fontsize=10, style="rounded", color="#bdbdbd") + ";"]
    for j, (text, attrs) in enumerate(items):
        out.append(f"    legend{j} {_attrs(label=text, fontsize=9, **attrs)};")
    for j in range(len(items) - 1):
        out.append(f"    legend{j} -> legend{j + 1} [style=invis];")
    out.append("  }")
    return out


@dataclasses.dataclass
class Rendered:
    dot_path: Path
    output: Path | None  # None when Graphviz's `dot` is missing (or format is "dot")
    message: str = ""


def dot_binary() -> str | None:
    return shutil.which("dot")


def render(program: Program, path: str | Path, decisions: Sequence[int] | None = None, *,
           title: str | None = None, fmt: str | None = None) -> Rendered:
    """Write `path` (its suffix picks svg/png/pdf; `.dot` writes only DOT) and the `.dot` next
    to it. Without Graphviz's `dot` binary only the `.dot` is written and `message` says why."""
    path = Path(path)
    fmt = (fmt or path.suffix.lstrip(".") or "svg").lower()
    text = to_dot(program, decisions, title=title)
    dot_path = path if fmt == "dot" else path.with_suffix(".dot")
    dot_path.parent.mkdir(parents=True, exist_ok=True)
    dot_path.write_text(text)
    if fmt == "dot":
        return Rendered(dot_path, None, f"wrote {dot_path}")
    exe = dot_binary()
    if exe is None:
        return Rendered(dot_path, None, f"wrote {dot_path}. {MISSING_DOT}")
    out = path if path.suffix else path.with_suffix("." + fmt)
    proc = subprocess.run([exe, f"-T{fmt}", str(dot_path), "-o", str(out)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"dot -T{fmt} failed: {proc.stderr.strip()}")
    return Rendered(dot_path, out, f"wrote {out} (and {dot_path})")


def to_graphviz(program: Program, decisions: Sequence[int] | None = None, **kwargs):
    """A `graphviz.Source` (displays inline in Jupyter). Needs `pip install graphviz` and the
    Graphviz binaries."""
    try:
        import graphviz
    except ImportError as e:
        raise ImportError("to_graphviz needs the graphviz Python package (pip install graphviz); "
                          "to_dot() and render() do not") from e
    return graphviz.Source(to_dot(program, decisions, **kwargs))


# --- a search's result, from its report -------------------------------------------------------

class ReportError(ValueError):
    """A report that names no decisions, or decisions this program does not offer."""


def _field(report: Any, name: str, default: Any = ()) -> Any:
    return report.get(name, default) if isinstance(report, Mapping) else getattr(report, name, default)


def report_steps(report: Any) -> list[list[tuple[int, int, str]]]:
    """The rewrites a report took, per step of its decision path: (alternatives index, choice,
    pattern) each. Read from its `rewrites` records; a report without them (an older one)
    gives its `decisions` vectors, with no pattern names to check."""
    steps: dict[int, list[tuple[int, int, str]]] = {}
    for r in _field(report, "rewrites") or ():
        for site, choice in r.get("sites", ()):
            steps.setdefault(int(r["step"]), []).append((int(site), int(choice), str(r["pattern"])))
    if steps:
        return [sorted(steps.get(k, [])) for k in range(max(steps) + 1)]
    return [[(i, int(c), "") for i, c in enumerate(vec) if c] for vec in _field(report, "decisions") or ()]


def report_step(program: Program, report: Any, step: int = 0, patterns=None) -> tuple[Program, list[int]]:
    """The program augmented at `step` (0: the original) of the report's decision path, with
    the steps before it applied, and the decisions the search took there. `patterns`: the
    search's (default: the value-preserving set, as `optimize`'s default). ReportError when the
    report took no rewrite or this program and pattern set do not offer what it took."""
    steps = report_steps(report)
    if not steps:
        raise ReportError("the report took no rewrite (jax.jit was kept, or it holds no decisions): nothing to draw")
    if not 0 <= step < len(steps):
        raise ReportError(f"step {step + 1} asked, the report has {len(steps)} step{'s' * (len(steps) != 1)}")
    current = program
    for k in range(step + 1):
        augmented = driver.augment(current, patterns)
        alts = driver.list_alternatives(augmented)
        vec = [0] * len(alts)
        for site, choice, label in steps[k]:
            if not label and site >= len(alts):
                continue  # a decision vector's XLA action toggles come after its rewrites
            there = site < len(alts) and choice < alts[site].num_choices
            if not there or (label and alts[site].labels[choice] != label):
                offered = alts[site].labels[choice] if there else "nothing"
                raise ReportError(f"step {k + 1} took {label or 'choice ' + str(choice)} at alternatives #{site}, "
                                  f"but this program offers {offered} there: it is not the program searched, or "
                                  "the search had another pattern set (pass it with --patterns)")
            vec[site] = choice
        if k == step:
            return augmented, vec
        current = driver.apply(augmented, vec)
    raise AssertionError("unreachable")


def read_report(path: str | Path) -> dict:
    """A report's record from its JSON file or a dump folder (its `report.json`)."""
    path = Path(path)
    file = path / "report.json" if path.is_dir() else path
    try:
        record = json.loads(file.read_text())
    except (OSError, ValueError) as e:
        raise ReportError(f"cannot read the report {file}: {e}") from None
    if not isinstance(record, dict):
        raise ReportError(f"{file} is not a report (a JSON object written by `shlo-env optimize --report`)")
    return record


def searched_program(path: str | Path, record: dict) -> Path:
    """The file of the program a report (at `path`) was searched on: its `input`, as given or
    next to the report, else a dump folder's `original.mlir`."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    candidates = [folder / "original.mlir"]
    if record.get("input") and record["input"] != "-":
        candidates = [Path(record["input"]), folder / record["input"]] + candidates
    for c in candidates:
        if c.is_file():
            return c
    raise ReportError(f"{path}: the program it was searched on is not found (tried {', '.join(map(str, candidates))}); "
                      "give it: shlo-env show PROGRAM --report REPORT")


# --- CLI: shlo-env show -----------------------------------------------------------------------

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a .mlir/.mlirbc file or a corpus URI (e.g. inst-10-20/3); or a search's report "
                                "JSON (`shlo-env optimize --report`) or dump folder, to draw its decisions")
    p.add_argument("--augment", action="store_true",
                   help="record every pattern match as an alternatives op first (dry mode)")
    p.add_argument("--patterns", default=None,
                   help="comma-separated pattern names for --augment (default: the value-preserving set)")
    p.add_argument("--decisions", default=None,
                   help="one choice per alternatives op, comma-separated (e.g. 1,0,2), or 'pick-first'; "
                        "marks the chosen path against the original")
    p.add_argument("--report", default=None, metavar="REPORT",
                   help="draw the decisions of this search report (JSON) on FILE, the program it searched")
    p.add_argument("--step", type=int, default=1,
                   help="with a report: which step of its decision path to draw (1: from the original)")
    p.add_argument("-o", "--output", default=None,
                   help="output file; its suffix picks the format: .svg (default), .png, .pdf, .dot")
    p.add_argument("--title", default=None, help="a caption (default: the program's name)")


def _parse_decisions(spec: str | None, alts) -> list[int] | None:
    if spec is None:
        return None
    if spec.strip() in ("pick-first", "pick_first", "first"):
        return driver.pick_first(None, alts)
    try:
        vec = [int(x) for x in spec.replace(" ", "").split(",") if x != ""]
    except ValueError:
        raise SystemExit(f"--decisions: expected integers like 1,0,2 or 'pick-first', got {spec!r}") from None
    try:
        return driver.normalize_decisions(alts, vec)
    except driver.ApplyError as e:
        listing = "; ".join(f"#{a.index}: {', '.join(f'{k}={lab}' for k, lab in enumerate(a.labels))}" for a in alts)
        raise SystemExit(f"--decisions: {e}. The alternatives ops: {listing or 'none'}") from None


def _is_report(path: str) -> bool:
    p = Path(path)
    return p.suffix == ".json" or (p.is_dir() and (p / "report.json").is_file())


def _run_report(args: argparse.Namespace, program: Program, record: dict) -> int:
    """Draw one step of a report's decisions."""
    patterns = [s for s in args.patterns.split(",") if s] if args.patterns else None
    steps = report_steps(record)
    try:
        augmented, decisions = report_step(program, record, args.step - 1, patterns)
    except (ReportError, KeyError) as e:
        print(f"shlo-env show: {e}", file=sys.stderr)
        return 2
    name = str(record.get("name") or program.name or "program")
    taken = ", ".join(dict.fromkeys(label for _, _, label in steps[args.step - 1] if label)) or "decisions"
    print(f"{name}: step {args.step} of {len(steps)}: {taken}")
    for a in driver.list_alternatives(augmented):
        if decisions[a.index]:
            print(f"alternatives #{a.index}: took {decisions[a.index]}={a.labels[decisions[a.index]]}")
    output = Path(args.output) if args.output else Path(f"{name}.step{args.step}.svg")
    title = args.title or f"{name}: step {args.step} of {len(steps)} ({taken})"
    print(render(augmented, output, decisions, title=title).message)
    return 0


def run(args: argparse.Namespace) -> int:
    from shlo_env.research.env import resolve_program
    from shlo_env.ir.program import ProgramError

    record = None
    source = args.file
    try:
        if args.report is not None:
            record = read_report(args.report)
        elif _is_report(args.file):
            record = read_report(args.file)
            source = str(searched_program(args.file, record))
    except ReportError as e:
        print(f"shlo-env show: {e}", file=sys.stderr)
        return 2
    try:
        if record is not None:  # read as `shlo-env optimize` read it (compressed files too)
            from shlo_env.api.optimize_file import read_program

            return _run_report(args, read_program(str(source)), record)
        program, uri = resolve_program(source)
    except (ProgramError, TypeError) as e:
        print(f"shlo-env show: {e}", file=sys.stderr)
        return 2
    if args.augment:
        patterns = [s for s in args.patterns.split(",") if s] if args.patterns else None
        try:
            program = driver.augment(program, patterns)
        except KeyError as e:
            print(f"shlo-env show: {e}", file=sys.stderr)
            return 2
    alts = driver.list_alternatives(program)
    decisions = _parse_decisions(args.decisions, alts)
    if not alts:
        hint = "" if args.augment else " (pass --augment to record the pattern matches)"
        print(f"{program.name}: no alternatives ops{hint}")
    for a in alts:
        took = f"  -> {decisions[a.index]}" if decisions is not None else ""
        print(f"alternatives #{a.index}: " + ", ".join(f"{k}={lab}" for k, lab in enumerate(a.labels)) + took)
    name = (program.name if uri else Path(str(source)).name.split(".")[0]) or "program"
    output = Path(args.output) if args.output else Path(f"{name}.svg")
    result = render(program, output, decisions, title=args.title or program.name)
    print(result.message)
    return 0
