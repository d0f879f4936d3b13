"""Where a program's time goes: time per XLA kernel, mapped back to the StableHLO ops it came from.

How it works (one function per step):
1. `tag_ops`: every StableHLO op of a clone gets a location `shlo_env#<index>` (index = position
   in `driver.walk_ops` order). XLA copies locations into the HLO `op_name` metadata, so each
   instruction of the optimized HLO names the StableHLO ops it was built from.
2. The tagged program is compiled and run under `jax.profiler.trace`. On XLA:CPU (jaxlib 0.10)
   every executed thunk (a fusion, a library call, a while loop, a copy) is a trace event with
   an `hlo_op` stat and its measured duration; on GPU the device plane carries one event per
   kernel with the same stat. These are real per-kernel timings, not estimates.
3. `parse_hlo` reads the optimized HLO: which StableHLO ops and HLO opcodes each top-level
   instruction covers (through its fused/called computations), and which ones run inside loops.

Times are exclusive: a while loop's own time does not include the kernels of its body, which
are listed on their own (flagged `in_loop`). On CPU several kernels can run at once on the
thread pool, so shares are of the summed kernel time, not of the wall clock.
"""

from __future__ import annotations

import collections
import dataclasses
import glob
import json
import re
import tempfile
from collections.abc import Callable, Collection, Sequence
from typing import Any

import numpy as np

from shlo_env import _jax_compat
from shlo_env.execute import runtime
from shlo_env.rewrite.driver import walk_ops
from shlo_env.ir.program import Program, ir_scope, lower
from shlo_env.patterns.base import resolve as resolve_patterns

TAG = "shlo_env#"
MODULE_NAME = "shlo_env_profile"
METHOD = "jax.profiler trace: measured time of each executed XLA thunk/kernel (hlo_op stat)"

# Kernel categories, most specific first (a fusion holding a dot and adds is a "dot" kernel).
DATA_MOVEMENT = {"transpose", "reshape", "broadcast_in_dim", "broadcast", "slice", "dynamic_slice",
                 "dynamic_update_slice", "concatenate", "pad", "gather", "reverse", "iota", "copy",
                 "get_tuple_element", "tuple", "constant", "bitcast_convert", "convert"}
REDUCTIONS = {"reduce", "reduce_window", "select_and_scatter", "scatter", "sort", "reduce_precision"}
HLO_CATEGORY = {"while": "loop", "conditional": "loop", "call": "other", "custom-call": "other",
                "copy": "copy/transpose", "transpose": "copy/transpose", "dot": "dot",
                "convolution": "convolution", "rng-bit-generator": "rng", "rng": "rng",
                "reduce": "reduction", "scatter": "reduction", "sort": "reduction"}
CATEGORIES = ("dot", "convolution", "loop", "rng", "reduction", "copy/transpose", "elementwise", "other")


@dataclasses.dataclass
class Kernel:
    """One XLA kernel (a top-level instruction of the optimized HLO) and its measured time."""

    name: str
    opcode: str
    category: str
    time_s: float  # mean exclusive time per program run
    calls: float  # executions per program run (more than 1 inside loops)
    share: float = 0.0  # of the summed kernel time
    in_loop: bool = False
    ops: tuple[int, ...] = ()  # indices of the StableHLO ops it came from (walk_ops order)
    op_kinds: dict = dataclasses.field(default_factory=dict)  # stablehlo op name -> count
    patterns: tuple[str, ...] = ()  # patterns matching any of its StableHLO ops

    def as_dict(self) -> dict:
        return dataclasses.asdict(self) | {"ops": list(self.ops), "patterns": list(self.patterns)}


@dataclasses.dataclass
class Profile:
    program: str
    platform: str
    runs: int
    method: str
    kernels: list[Kernel]
    wall_s: float  # median wall clock of one run under the profiler

    @property
    def kernel_s(self) -> float:
        return sum(k.time_s for k in self.kernels)

    def by_category(self) -> dict[str, float]:
        """Share of the summed kernel time per category (and `in loops`, overlapping the others)."""
        total = self.kernel_s or 1.0
        out = {c: 0.0 for c in CATEGORIES}
        for k in self.kernels:
            out[k.category] += k.time_s / total
        out["in loops"] = sum(k.time_s for k in self.kernels if k.in_loop) / total
        return out

    def touched_share(self) -> float:
        """Share of the kernel time in kernels where at least one pattern matches one of its ops."""
        total = self.kernel_s or 1.0
        return sum(k.time_s for k in self.kernels if k.patterns) / total

    def as_dict(self) -> dict:
        return {"program": self.program, "platform": self.platform, "runs": self.runs, "method": self.method,
                "wall_s": self.wall_s, "kernel_s": self.kernel_s, "by_category": self.by_category(),
                "touched_share": self.touched_share(), "kernels": [k.as_dict() for k in self.kernels]}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=1)

    def table(self, top: int = 20) -> str:
        head = (f"{self.program} on {self.platform}: {len(self.kernels)} kernels, {self.kernel_s * 1e3:.3f} ms "
                f"kernel time per run, {self.wall_s * 1e3:.3f} ms wall ({self.runs} profiled runs)")
        rows = [("share", "ms/run", "calls", "kernel", "category", "stablehlo ops", "patterns")]
        for k in self.kernels[:top]:
            kinds = ", ".join(f"{n.removeprefix('stablehlo.')}x{c}" if c > 1 else n.removeprefix("stablehlo.")
                              for n, c in sorted(k.op_kinds.items(), key=lambda kv: -kv[1])[:4])
            rows.append((f"{k.share:6.1%}", f"{k.time_s * 1e3:.4f}", f"{k.calls:g}", k.name[:32],
                         k.category + (" (loop)" if k.in_loop else ""), kinds[:48],
                         ",".join(k.patterns)[:40]))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = [head] + ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        if len(self.kernels) > top:
            lines.append(f"... {len(self.kernels) - top} more kernels")
        cats = ", ".join(f"{c} {s:.0%}" for c, s in self.by_category().items() if s >= 0.005)
        lines.append(f"by category: {cats}; touched by a pattern: {self.touched_share():.0%}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


# --- 1. tag the StableHLO ops -------------------------------------------------------------------

def tag_ops(program: Program) -> tuple[Program, list[str]]:
    """A clone whose ops carry `shlo_env#<i>` locations, and the op names by index."""
    from jaxlib.mlir import ir

    tagged = program.clone()
    names = []
    with ir_scope():
        for i, op in enumerate(walk_ops(tagged.body)):
            op.location = ir.Location.name(f"{TAG}{i}")
            names.append(op.name)
        tagged.module.operation.attributes["sym_name"] = ir.StringAttr.get(MODULE_NAME)
    return tagged, names


def pattern_sites(program: Program, patterns=None) -> dict[int, list[str]]:
    """Op index (walk_ops order) -> names of the patterns whose `match` accepts that op."""
    patterns = resolve_patterns(patterns)
    by_root = collections.defaultdict(list)
    for p in patterns:
        for r in p.roots():
            by_root[r].append(p)
    sites: dict[int, list[str]] = {}
    with ir_scope():
        for i, op in enumerate(walk_ops(program.body)):
            for p in by_root.get(op.name, ()):
                try:
                    if p.match(op.opview) is not None:
                        sites.setdefault(i, []).append(p.name)
                except Exception:  # noqa: BLE001 - a broken pattern is the driver's to report
                    continue
    return sites


# --- 3. read the optimized HLO -----------------------------------------------------------------

_COMP = re.compile(r"^(ENTRY )?%?([\w.\-]+) .*\{\s*$")
_INST = re.compile(r"^\s*(?:ROOT )?%?([\w.\-]+) = (.*)$")
_OPCODE = re.compile(r"\s*([\w\-]+)\(")
_CALLED = re.compile(r"(?:calls|to_apply|body|condition|true_computation|false_computation)=%?([\w.\-]+)")
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")
_OP_NAME = re.compile(r'op_name="' + re.escape(TAG) + r'(\d+)')


@dataclasses.dataclass
class HloInfo:
    entry: str
    instructions: dict  # computation -> [(inst name, opcode, called comps, tag or None)]

    def closure(self, comps: Sequence[str]) -> tuple[set[int], collections.Counter]:
        """StableHLO tags and HLO opcodes of everything inside `comps`, transitively."""
        tags: set[int] = set()
        opcodes: collections.Counter[str] = collections.Counter()
        seen: set[str] = set()
        todo = list(comps)
        while todo:
            c = todo.pop()
            if c in seen:
                continue
            seen.add(c)
            for _, opcode, called, tag in self.instructions.get(c, ()):
                opcodes[opcode] += 1
                if tag is not None:
                    tags.add(tag)
                todo.extend(called)
        return tags, opcodes


def _opcode_after_type(rest: str) -> str | None:
    """The opcode in `TYPE opcode(...)`; a tuple TYPE is parenthesized and may nest."""
    i = 0
    if rest.startswith("("):
        depth = 0
        for i, ch in enumerate(rest):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                break
        i += 1
    else:
        i = rest.find(" ")
    m = _OPCODE.match(rest, max(i, 0))
    return m.group(1) if m else None


def parse_hlo(text: str) -> HloInfo:
    instructions: dict[str, list] = {}
    entry, current = "", None
    for line in text.splitlines():
        m = _COMP.match(line)
        if m and " = " not in line.split("{")[0]:
            current = m.group(2)
            instructions[current] = []
            if m.group(1):
                entry = current
            continue
        m = _INST.match(line)
        opcode = _opcode_after_type(m.group(2)) if m else None
        if m is not None and opcode and current is not None:
            called = _CALLED.findall(line)
            for group in _BRANCHES.findall(line):
                called += [c.strip().lstrip("%") for c in group.split(",") if c.strip()]
            tag = _OP_NAME.search(line)
            instructions[current].append((m.group(1), opcode, called, int(tag.group(1)) if tag else None))
    return HloInfo(entry, instructions)


def _kernel_table(info: HloInfo) -> dict[str, tuple[str, set[int], collections.Counter, bool]]:
    """Instruction name -> (opcode, tags, opcodes inside, runs inside a loop) for every
    instruction of the entry computation and of the computations loops and conditionals run."""
    table = {}
    todo = [(info.entry, False)]
    seen = set()
    while todo:
        comp, in_loop = todo.pop()
        if comp in seen:
            continue
        seen.add(comp)
        for name, opcode, called, tag in info.instructions.get(comp, ()):
            if opcode in ("while", "conditional", "call"):
                # The body's instructions are kernels of their own (they appear in the trace).
                todo.extend((c, in_loop or opcode == "while") for c in called)
                tags, opcodes = ({tag} if tag is not None else set()), collections.Counter({opcode: 1})
            else:
                tags, opcodes = info.closure(called)
                opcodes[opcode] += 1
                if tag is not None:
                    tags.add(tag)
            table[name] = (opcode, tags, opcodes, in_loop)
    return table


def categorize(opcode: str, op_kinds: Collection[str], opcodes: Collection[str]) -> str:
    kinds = {k.removeprefix("stablehlo.").removeprefix("chlo.") for k in op_kinds}
    if not kinds:  # an instruction XLA made up (a copy, a library fusion): read its HLO opcodes
        kinds = {o.replace("-", "_") for o in opcodes} - {"parameter", "fusion", "tuple", "get_tuple_element"}
        kinds = {"broadcast_in_dim" if k == "broadcast" else k for k in kinds} | ({"copy"} if "bitcast" in kinds else set())
        kinds.discard("bitcast")
    if opcode in ("while", "conditional"):
        return "loop"
    if "convolution" in kinds or "convolution" in opcodes:
        return "convolution"
    if kinds & {"dot_general", "dot"} or "dot" in opcodes:
        return "dot"
    if kinds & {"rng", "rng_bit_generator"} or ({"xor", "shift_right_logical"} <= kinds):
        return "rng"  # jax's threefry lowers to xor/shift chains
    if kinds & REDUCTIONS or set(opcodes) & {"reduce", "reduce-window", "scatter", "sort"}:
        return "reduction"
    if kinds and kinds <= DATA_MOVEMENT:
        return "copy/transpose"
    if kinds:
        return "elementwise" if not kinds & {"custom_call", "while", "case", "if", "call"} else "other"
    return HLO_CATEGORY.get(opcode, "other")


# --- 2. run under the profiler -----------------------------------------------------------------

def _trace_events(exe, args, runs: int) -> tuple[list[tuple[str, float, float, str]], list[float]]:
    """(hlo_op, start_ns, end_ns, thread line) of every kernel event of `runs` executions."""
    import jax

    walls = []
    with tempfile.TemporaryDirectory() as d:
        jax.profiler.start_trace(d)
        try:
            for _ in range(runs):
                walls.append(runtime._run_once(exe, args)[0])
        finally:
            jax.profiler.stop_trace()
        files = glob.glob(f"{d}/**/*.xplane.pb", recursive=True)
        if not files:
            raise RuntimeError("the profiler wrote no trace")
        data = jax.profiler.ProfileData.from_file(files[0])
        planes = list(data.planes)
        device_planes = [p for p in planes if p.name.startswith("/device:") and "CPU" not in p.name]
        events = []
        # A kernel's event is named after its hlo_op. Reading an event's stats is most of this
        # loop (830k events of an SDE solve: 2.8 s), and the trace holds this one executable's
        # runs: the first event of each name on a line decides for the others.
        ours: dict[tuple[str, str], bool] = {}
        for plane in device_planes or planes:
            for line in plane.lines:
                where = f"{plane.name}/{line.name}"
                for e in line.events:
                    name = e.name
                    keep = ours.get((where, name))
                    if keep is None:
                        stats = dict(e.stats)
                        keep = ours[(where, name)] = (str(stats.get("hlo_op")) == name
                                                      and stats.get("hlo_module", MODULE_NAME) == MODULE_NAME)
                    if keep:
                        events.append((name, e.start_ns, e.end_ns, where))
    return events, walls


def _exclusive(events) -> dict[str, tuple[float, int]]:
    """hlo_op -> (exclusive ns summed, count): nested events on one thread (a loop's body
    inside the while thunk) are subtracted from their parent."""
    out: dict[str, list] = collections.defaultdict(lambda: [0.0, 0])
    by_line = collections.defaultdict(list)
    for name, start, end, line in events:
        by_line[line].append((start, -end, name))
    for evs in by_line.values():
        evs.sort()
        stack: list[list] = []  # [end, name, start, nested ns]
        def close(item):
            end, name, start, child = item
            out[name][0] += (end - start) - child
            out[name][1] += 1
        for start, neg_end, name in evs:
            end = -neg_end
            while stack and stack[-1][0] <= start:
                close(stack.pop())
            if stack:
                stack[-1][3] += end - start
            stack.append([end, name, start, 0.0])
        while stack:
            close(stack.pop())
    return {k: (v[0], v[1]) for k, v in out.items()}


def profile_program(program: Program, inputs: Sequence[np.ndarray] | None = None, *, runs: int = 10,
                    warmup: int = 3, patterns=None) -> Profile:
    """Profile a Program: per-kernel time on the default backend, with the StableHLO ops and
    the patterns (default: all registered) that touch each kernel. Set `patterns=()` to skip."""
    tagged, names = tag_ops(program)
    _jax_compat.init_lapack()
    exe = runtime.compile(tagged.text(debug_info=True))
    if inputs is None:
        inputs = list(program.example_args) if program.example_args else runtime.input_sets(program, 1)[0]
    args = runtime.to_device(inputs)
    for _ in range(warmup):
        runtime._run_once(exe, args)
    events, walls = _trace_events(exe, args, runs)
    if not events:
        raise RuntimeError(f"the profiler reported no kernel events on {runtime.platform()} "
                           "(this jaxlib does not emit per-thunk events)")
    loaded: Any = exe.loaded  # a PJRT LoadedExecutable (typed `object` in runtime)
    hlo = "\n".join(m.to_string() for m in loaded.hlo_modules())
    table = _kernel_table(parse_hlo(hlo))
    sites = pattern_sites(program, patterns) if patterns != () else {}
    kernels = []
    for name, (ns, count) in _exclusive(events).items():
        opcode, tags, opcodes, in_loop = table.get(name, ("?", set(), collections.Counter(), False))
        kinds = collections.Counter(names[t] for t in tags if t < len(names))
        touched = sorted({p for t in tags for p in sites.get(t, ())})
        kernels.append(Kernel(name, opcode, categorize(opcode, kinds, opcodes), ns * 1e-9 / runs, count / runs,
                              in_loop=in_loop, ops=tuple(sorted(tags)), op_kinds=dict(kinds),
                              patterns=tuple(touched)))
    kernels.sort(key=lambda k: -k.time_s)
    total = sum(k.time_s for k in kernels) or 1.0
    for k in kernels:
        k.share = k.time_s / total
    return Profile(program.name, runtime.platform(), runs, METHOD, kernels, float(np.median(walls)))


def profile(fn: Callable | Program | str, *args, runs: int = 10, patterns=None) -> Profile:
    """Per-kernel profile of `fn(*args)` (a JAX function), of a Program, or of a corpus URI/file."""
    if isinstance(fn, str):
        from shlo_env import corpus

        program, inputs = corpus.load(fn), None
    elif isinstance(fn, Program):
        program, inputs = fn, (list(args) or None)
    else:
        program = lower(fn, *args)
        inputs = None
    return profile_program(program, inputs, runs=runs, patterns=patterns)


# --- CLI: shlo-env profile FILE_OR_URI ---------------------------------------------------------

def add_arguments(parser) -> None:
    parser.add_argument("program", help="a .mlir/.mlirbc file or a dataset URI (corpus/linen_cnn_train, inst-10-20/3)")
    parser.add_argument("--runs", type=int, default=10, help="profiled executions (after 3 warm-ups)")
    parser.add_argument("--top", type=int, default=20, help="kernels in the table")
    parser.add_argument("--json", metavar="PATH", help="also write the full profile as JSON ('-' for stdout)")
    parser.add_argument("--no-patterns", action="store_true", help="skip matching the patterns on the program")


def run(args) -> int:
    from shlo_env import corpus
    from shlo_env.ir.program import ProgramError

    try:
        prof = profile(args.program, runs=args.runs, patterns=() if args.no_patterns else None)
    except (corpus.CorpusError, ProgramError, runtime.CompileError) as e:
        print(f"shlo-env profile: {e}")
        return 2
    if args.json == "-":
        print(prof.to_json())
        return 0
    print(prof.table(args.top))
    if args.json:
        with open(args.json, "w") as f:
            f.write(prof.to_json())
    return 0
