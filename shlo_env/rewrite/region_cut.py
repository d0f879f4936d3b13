"""Cutting the region a rewrite changes out of a program: pure IR (no compile, no run).

Compiling and timing a 1k-3k-op program per candidate allows about ten candidates a minute. A
rewrite only changes the XLA kernels that hold the ops it touches, so a candidate can be judged
first on those kernels alone, cut out as a small module that compiles and runs in milliseconds
(`shlo_env.measure.region_timing` judges it, on inputs from `shlo_env.measure.region_inputs`).

- **Sites and their ops.** A site is an alternatives op (its index in
  `driver.list_alternatives`). Its *matched ops* are the ops defining its root values plus the ops
  on a path from the values its rewrite reads to those roots (the inner dot of `(A·B)·C`, the
  transpose a folded-transpose pattern removes), plus the producers of values it reads that only
  matched ops read and some choice does not (they die with it: `A·B` in `v·(A·B)`
  reassociated); other alternatives ops are transparent (their region 0 is the identity).
  A matched op that stays alive whatever the choice and is far from the roots (`FAR_SPAN`: a
  forward-pass transpose read by a backward dot) is left out, its value a region input.
- **Op indices.** A profile (`shlo_env.measure.kernel_profile.profile_program`) names ops by their position in
  `driver.walk_ops` order. Here that order is taken over `baseline(program)`: the augmented
  program with every choice 0 and nothing pruned, i.e. the walk of the augmented program without
  its alternatives ops. Profile that program (`profile_program(baseline(program))`); a profile
  of the unaugmented original works too when augment moved no op, and is rejected otherwise.
- **The region** (`cut_region`): with a profile, every op of every kernel that holds a matched
  op; without one, the matched ops plus their fusible elementwise neighbours (two steps out).
  It is closed under paths through the outside (convex; from bitmasks of each op's descendants
  and ancestors, `_Closure`), so it can stand alone, and cut out as
  `func.func @main(values read from outside) -> (values used outside)`; constants defined outside
  are cloned in, so XLA folds them as in the whole program. The cut keeps the alternatives ops,
  so `Region.before()` / `Region.after(choices)` are `driver.apply` on it. A site inside a loop
  body is cut from that body (`Region.in_body`: one iteration; the profile's share is summed
  over the iterations). An outside op that computes a region input from other region inputs is
  pulled in, so random inputs keep before and after comparable. Sites in different blocks, a
  region holding an op with side effects or a `case`/`if`, or one reading a non-tensor value fall
  back to the whole program (`Region.whole`, with `reason`).
- **Bounds** (`site_bounds`, `order_sites`, `skip_negligible`): a rewrite can save at most the
  time of the kernels it touches: its bound is their summed share.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func as func_dialect

from shlo_env.ir import alternatives as alt_dialect
from shlo_env.ir.ops import ancestor_in, block_ops, is_pure, walk, walk_block
from shlo_env.ir.program import Program, ir_scope, program_from_module
from shlo_env.rewrite.driver import apply, list_alternatives

if TYPE_CHECKING:  # a profile is read, never made, here
    from shlo_env.measure.kernel_profile import Profile

#: Sites whose kernels hold less than this share of the profiled time are not worth a candidate.
NEGLIGIBLE_TIME_FRACTION = 0.005
#: How far back from its roots a site's matched ops are looked for (patterns are local).
MATCH_DEPTH = 6
#: A matched op that stays alive whatever the choice (it has readers outside the match) and is
#: this many ops or more from the site's roots by paths through the outside is left out of the
#: region: its value becomes a region input (a forward-pass transpose read by a backward dot).
FAR_SPAN = 32
#: Blocks of up to this many ops get the bitmask closure (`_Closure`); larger ones are scanned.
CLOSURE_OPS = 20_000
#: Steps from the matched ops to fusible neighbours when there is no profile.
NEIGHBOUR_STEPS = 2
#: A region of more ops than this (its matched ops made convex) gets no neighbours: they are for
#: small regions, and finding them costs a scan of the region's span per neighbour taken.
NEIGHBOURS_UP_TO = 300

CONSTANT = "stablehlo.constant"
# Ops XLA fuses into a neighbouring loop fusion (no profile: what joins the matched ops' kernel).
FUSIBLE = frozenset({
    "stablehlo.add", "stablehlo.subtract", "stablehlo.multiply", "stablehlo.divide",
    "stablehlo.maximum", "stablehlo.minimum", "stablehlo.negate", "stablehlo.abs", "stablehlo.exponential",
    "stablehlo.log", "stablehlo.tanh", "stablehlo.logistic", "stablehlo.sqrt", "stablehlo.rsqrt",
    "stablehlo.power", "stablehlo.select", "stablehlo.compare", "stablehlo.convert", "stablehlo.clamp",
    "stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.transpose", "stablehlo.sine",
    "stablehlo.cosine", "stablehlo.and", "stablehlo.or", "stablehlo.not", "stablehlo.xor",
    "stablehlo.exponential_minus_one", "stablehlo.log_plus_one", "stablehlo.floor", "stablehlo.ceil",
    "stablehlo.sign", "stablehlo.remainder", "stablehlo.iota", "chlo.square", "chlo.erf",
})
WHILE_LIKE = frozenset({"stablehlo.while", "stablehlo.case", "stablehlo.if"})


class RegionError(ValueError):
    """Bad sites, choices or profile for a region."""


# --- the graph of one block --------------------------------------------------------------------

class _Graph:
    """The ops of `program`'s main body as integers: who reads whom, and each op's range of
    profile indices (walk order of `baseline(program)`, alternatives ops skipped)."""

    def __init__(self, program: Program, block: ir.Block | None = None, numbering: _Graph | None = None):
        self.program = program
        self.block = block if block is not None else program.body
        self.ops = block_ops(self.block)
        self.pos = {op: i for i, op in enumerate(self.ops)}
        n = len(self.ops)
        self.preds: list[set[int]] = [set() for _ in range(n)]
        self.succs: list[set[int]] = [set() for _ in range(n)]
        self.args_read: list[set[int]] = [set() for _ in range(n)]
        self.defs: dict[ir.Value, int] = {}  # value defined in the block (any depth) -> its op's position
        self.arg_index: dict[ir.Value, int] = {a: j for j, a in enumerate(self.block.arguments)}
        # profile indices count every op of main (walk order, alternatives ops skipped)
        self.names: list[str] = []  # op name by profile index
        self.nested: dict[ir.Operation, int] = {}  # every op nested in main -> its profile index
        if numbering is not None:
            self.names, self.nested = numbering.names, numbering.nested
        else:
            for op in walk_block(program.body, stop=(alt_dialect.ALTERNATIVES,)):
                if op.name != alt_dialect.ALTERNATIVES:
                    self.nested[op] = len(self.names)
                    self.names.append(op.name)
        self._indices: list[list[int]] = []  # position -> profile indices of it and the ops in it
        self.owner_of: dict[int, int] = {}  # profile index (in this block) -> position
        for i, op in enumerate(self.ops):
            for inner in [op] + list(walk_block_of(op)):
                self.defs.update((r, i) for r in inner.results)
                for region in inner.regions:
                    for b in region.blocks:
                        self.defs.update((a, i) for a in b.arguments)
            mine = [self.nested[x] for x in [op] + list(walk(op, stop=(alt_dialect.ALTERNATIVES,)))
                    if x in self.nested]
            self._indices.append(mine)
            self.owner_of.update((k, i) for k in mine)
        # what each op reads, walked once: cutting asks again and again (the derived inputs of
        # a region walked nested ops millions of times: 15 s of an L-BFGS solve's search)
        self._reads = [tuple(self.reads(op)) for op in self.ops]
        for i in range(n):
            for v in self._reads[i]:
                d = self.defs.get(v)
                if d is not None and d != i:
                    self.preds[i].add(d)
                    self.succs[d].add(i)
                elif v in self.arg_index:
                    self.args_read[i].add(self.arg_index[v])

    @functools.cached_property
    def closure(self) -> _Closure | None:
        """Every op's descendants and ancestors as bitmasks, or None for a block of more than
        `CLOSURE_OPS` ops (they take n^2 / 4 bytes)."""
        return _Closure(self.preds, self.succs) if len(self.ops) <= CLOSURE_OPS else None

    def reads(self, op: ir.Operation) -> Iterator[ir.Value]:
        """Values `op` and the ops nested in it read (their own block arguments included)."""
        yield from op.operands
        for inner in walk_block_of(op):
            yield from inner.operands

    def reads_at(self, i: int) -> tuple[ir.Value, ...]:
        """`reads` of the op at position `i`."""
        return self._reads[i]

    def indices(self, i: int) -> list[int]:
        """Profile indices of the op at position `i` and the ops nested in it."""
        return self._indices[i]

    def top(self, value: ir.Value) -> int | None:
        return self.defs.get(value)


class _Closure:
    """Bitmasks of each position's descendants (`below`) and ancestors (`above`). Built once
    per graph (about 20 ms at 6k ops); a region's convex closure is then a few ORs, where
    scanning the positions between its ops took most of cutting a training step's regions
    (its sites span the forward and the backward pass)."""

    def __init__(self, preds: list[set[int]], succs: list[set[int]]):
        n = len(preds)
        self.below = [0] * n
        for i in range(n - 1, -1, -1):  # positions are in topological order
            m = 0
            for j in succs[i]:
                m |= self.below[j] | (1 << j)
            self.below[i] = m
        self.above = [0] * n
        for i in range(n):
            m = 0
            for j in preds[i]:
                m |= self.above[j] | (1 << j)
            self.above[i] = m


def walk_block_of(op: ir.Operation) -> Iterator[ir.Operation]:
    """Every op nested in `op` (any depth); alternatives ops are entered too."""
    for region in op.regions:
        for b in region.blocks:
            yield from walk_block(b)


# --- sites -------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Site:
    index: int
    op: ir.Operation
    block: ir.Block
    choices: int
    labels: tuple[str, ...]
    tiers: tuple[int, ...]


def _sites(program: Program) -> list[_Site]:
    return [_Site(a.index, a.op, a.op.block, a.num_choices, a.labels, a.tiers) for a in list_alternatives(program)]


class _Graphs:
    """The `_Graph` of each block holding a site, made when first asked for."""

    def __init__(self, program: Program):
        self.main = _Graph(program)
        self._made: list[_Graph] = [self.main]

    def of(self, block: ir.Block) -> _Graph:
        for g in self._made:
            if g.block == block:
                return g
        g = _Graph(self.main.program, block, numbering=self.main)
        self._made.append(g)
        return g


def _resolve(g: _Graph, v: ir.Value) -> ir.Value:
    """The value an alternatives op's result stands for with every choice 0 (its root)."""
    while True:
        d = g.defs.get(v)
        owner = _owner_op(v)  # None for a block argument (of main, or of a nested region)
        if d is None or owner is None or g.ops[d].name != alt_dialect.ALTERNATIVES or g.ops[d] != owner:
            return v
        v = g.ops[d].operands[_result_number(v)]


def _owner_op(v: ir.Value) -> ir.Operation | None:
    owner = v.owner
    return None if isinstance(owner, ir.Block) else owner.operation


def _matched(g: _Graph, site: _Site) -> set[int]:
    """Top-level positions of the site's matched ops (see the module docstring) and its own."""
    core = _core(g, site)
    return core | _dying_producers(g, _unread_inputs(g, site), core)


def _core(g: _Graph, site: _Site) -> set[int]:
    """The site's own position, its roots' ops and the ops on paths from its inputs (the values
    its choices read) to them."""
    op = site.op
    nres = len(op.results)
    operands = list(op.operands)
    inputs = {_resolve(g, v) for v in operands[nres:]}
    back: dict[int, None] = {}  # ops between the inputs and the roots (ordered set)
    frontier = [_resolve(g, v) for v in operands[:nres]]
    for _ in range(MATCH_DEPTH):
        nxt: list[ir.Value] = []
        for v in frontier:
            d = g.defs.get(v)
            if v in inputs or d is None or d in back:
                continue
            back[d] = None
            nxt.extend(_resolve(g, u) for u in g.reads_at(d))
        frontier = nxt
    marked = set(inputs)
    on_path: set[int] = set()
    for i in sorted(back):
        if any(_resolve(g, u) in marked for u in g.reads_at(i)):
            on_path.add(i)
            marked.update(g.ops[i].results)
    return _roots(g, site) | on_path


def _roots(g: _Graph, site: _Site) -> set[int]:
    """Positions of the ops defining the site's roots (its original values) and the site's own."""
    nres = len(site.op.results)
    return {g.defs[v] for v in (_resolve(g, v) for v in list(site.op.operands)[:nres]) if v in g.defs} | \
        {g.pos[site.op]}


def _unread_inputs(g: _Graph, site: _Site) -> set[ir.Value]:
    """The site's inputs that some choice does not read (they die when it is taken)."""
    nres = len(site.op.results)
    operands = list(site.op.operands)
    out: set[ir.Value] = set()
    for k in range(1, site.choices):
        args = site.op.regions[k].blocks[0].arguments
        out.update(_resolve(g, operands[j]) for j in range(nres, len(operands)) if not any(True for _ in args[j].uses))
    return out


def _dying_producers(g: _Graph, inputs: set[ir.Value], out: set[int]) -> set[int]:
    """Producers of `inputs` (`_unread_inputs`) read only by matched ops (`out`), and theirs, in turn."""
    # An input whose only readers are matched ops dies with a choice that does not read it
    # (`A @ B` in `v.T @ (A @ B)` reassociated to `(v.T @ A) @ B`): the rewrite can save it too.
    out = set(out)
    found: set[int] = set()
    work = [g.defs[v] for v in inputs if v in g.defs]
    while work:
        d = work.pop()
        if d not in out and g.succs[d] and g.succs[d] <= out and not _unfit(g, {d}):
            out.add(d)
            found.add(d)
            work.extend(g.preds[d])
    return found


def _changed(g: _Graph, site: _Site) -> tuple[set[int], set[int]]:
    """The site's matched ops without the far shared ones (`FAR_SPAN`), and those left out.

    In a training step a rewrite of a backward dot often matches a transpose of the forward
    pass (`dot(transpose(x), dy)`); the transpose stays alive for its forward readers, so the
    rewrite does not change it, but a region holding both would be closed over every op on the
    paths between them: most of the step. Left out, the region is the dot and its neighbours,
    reading both `x` and `transpose(x)` as inputs."""
    core = _core(g, site)
    keep = _roots(g, site)
    far = {m for m in core - keep
           if g.succs[m] - core and len(_convex(g, keep | {m})) > len(keep) + 1 + FAR_SPAN}
    # what is left: the kept ops and the matched ops that reach them without a far one
    left = set(keep)
    work = list(keep)
    while work:
        i = work.pop()
        for u in g.reads_at(i):  # through other sites' alternatives ops, as `_core` walks
            p = g.defs.get(_resolve(g, u))
            if p is not None and p in core and p not in far and p not in left:
                left.add(p)
                work.append(p)
    return left | _dying_producers(g, _unread_inputs(g, site), left), core - left


def _touched_kernels(g: _Graph, positions: Iterable[int], profile: Profile) -> list[int]:
    """Indices (into profile.kernels) of the kernels holding any op of `positions`."""
    idx: set[int] = set()
    for i in positions:
        idx.update(g.indices(i))
    return [k for k, kern in enumerate(profile.kernels) if idx.intersection(kern.ops)]


def check_profile(g_or_program: _Graph | Program, profile: Profile) -> None:
    """Raise RegionError unless `profile` names the ops of `baseline(program)` (by op kinds)."""
    g = g_or_program if isinstance(g_or_program, _Graph) else _Graph(g_or_program)
    for kern in profile.kernels:
        if not kern.op_kinds:
            continue
        seen = collections.Counter(g.names[i] for i in kern.ops if i < len(g.names))
        if any(i >= len(g.names) for i in kern.ops) or dict(seen) != dict(kern.op_kinds):
            raise RegionError(f"the profile does not fit this program (kernel {kern.name}: profiled "
                              f"{dict(kern.op_kinds)}, here {dict(seen)}); profile `region.baseline(program)`")


# --- item 4: bounds ----------------------------------------------------------------------------

def site_kernels(profile: Profile, program: Program) -> dict[int, list[int]]:
    """Site index -> the kernels (indices into `profile.kernels`) its matched ops sit in. A
    site in a loop body touches the kernels of that body, not the loop's own."""
    graphs = _Graphs(program)
    check_profile(graphs.main, profile)
    out: dict[int, list[int]] = {}
    for site in _sites(program):
        g = graphs.of(site.block)
        out[site.index] = _touched_kernels(g, _changed(g, site)[0], profile)
    return out


def site_bounds(profile: Profile, program: Program) -> dict[int, float]:
    """Site index -> the summed time share of the kernels its matched ops sit in: the most its
    rewrite can save. A site in a loop body is bounded by the kernels of that body it touches
    (their time summed over the iterations; the loop's own share is not counted)."""
    return {site: sum(profile.kernels[k].share for k in ks) for site, ks in site_kernels(profile, program).items()}


def order_sites(bounds: Mapping[int, float]) -> list[int]:
    """Sites by decreasing bound; equal bounds keep program order."""
    return sorted(bounds, key=lambda s: (-bounds[s], s))


def skip_negligible(bounds: Mapping[int, float], min_time_fraction: float = NEGLIGIBLE_TIME_FRACTION) -> list[int]:
    """The sites (by decreasing bound) whose kernels hold at least `min_time_fraction` of the time."""
    return [s for s in order_sites(bounds) if bounds[s] >= min_time_fraction]


# --- regions -----------------------------------------------------------------------------------

@dataclasses.dataclass
class Region:
    """A small module holding the ops a set of sites changes (or the whole program: `whole`).

    `program` keeps its alternatives ops; `local` maps a site of the whole program to its
    alternatives index in `program`. `inputs`/`outputs` say which values of the whole program
    the module's arguments and results are: ("arg", j) for main's argument j, else
    (top-level position in the augmented main body, result number). A region cut from a loop
    body (`in_body`) times one iteration; its values change every iteration, so it has no
    boundary values (`boundary_inputs` gives it random ones)."""

    program: Program
    sites: tuple[int, ...]
    local: dict[int, int]
    labels: dict[int, tuple[str, ...]]  # site -> its alternatives' pattern names
    tiers: dict[int, tuple[int, ...]]
    ops: tuple[int, ...] = ()  # top-level positions (augmented main body) in the region
    kernels: tuple[str, ...] = ()
    share: float | None = None  # of the profile's summed kernel time (1.0 for the whole program)
    whole: bool = False
    reason: str = ""  # why it fell back to the whole program
    inputs: tuple[tuple[Any, int], ...] = ()
    outputs: tuple[tuple[Any, int], ...] = ()
    in_body: bool = False  # cut from a loop or conditional body: one iteration, no boundary values
    oversize: bool = False  # not cut: over the `max_ops` asked for (`ops` holds the ops counted so far)

    def before(self) -> Program:
        """The region with every choice 0 (the original computation)."""
        return apply(self.program, [0] * len(list_alternatives(self.program)))

    def after(self, choices: Mapping[int, int]) -> Program:
        """The region with `choices` (site of the whole program -> choice) applied."""
        vec = [0] * len(list_alternatives(self.program))
        for site, choice in choices.items():
            if site not in self.local:
                raise RegionError(f"site {site} is not in this region (sites {sorted(self.local)})")
            vec[self.local[site]] = int(choice)
        return apply(self.program, vec)

    def candidates(self) -> list[Candidate]:
        """Every single-site, single-alternative candidate of this region's own sites."""
        return [Candidate(self, {s: k}) for s in self.sites for k in range(1, len(self.labels[s]))]


class Candidate(NamedTuple):
    region: Region
    choices: dict[int, int]  # site of the whole program -> choice


def baseline(program: Program) -> Program:
    """The program with every alternatives op resolved to its original (choice 0), nothing
    pruned: the program to profile for `cut_region` and `site_bounds` (op indices match)."""
    prog = program.clone()
    with ir_scope():
        for a in list_alternatives(prog):
            alt_dialect.materialize(a.op, 0)
        prog.module.operation.verify()
    return prog


class RegionCutter:
    """Cuts regions of one program, reading its graph once: a search that cuts batch after
    batch of sites keeps one (building the graph of a 2.7k-op program takes about 0.5 s)."""

    def __init__(self, program: Program, profile: Profile | None = None):
        self.program = program
        self.profile = profile
        self.graphs = _Graphs(program)
        if profile is not None:
            check_profile(self.graphs.main, profile)
        self.sites = _sites(program)

    def in_body(self, site: int) -> bool:
        """Whether the site sits in a loop or conditional body (its region would be one
        iteration: `Region.in_body`), known without cutting it."""
        return self.sites[site].block != self.program.body

    def cut(self, site_sets: Sequence[Sequence[int] | int], max_ops: int | None = None) -> list[Region]:
        """The region of each site set; with `max_ops`, one of more ops (its constants not
        counted) is not cut (`Region.oversize`): building a region of hundreds of ops costs
        most of the cutting, and a search that puts such regions off need not pay for it yet."""
        return [_cut(self.graphs, self.sites, [s] if isinstance(s, int) else list(s), self.profile, max_ops)
                for s in site_sets]


def cut_regions(program: Program, site_sets: Sequence[Sequence[int] | int],
                profile: Profile | None = None) -> list[Region]:
    """`cut_region` for many site sets of one program, reading the program's graph once."""
    return RegionCutter(program, profile).cut(site_sets)


def cut_region(program: Program, site_ids: Sequence[int] | int, profile: Profile | None = None) -> Region:
    """The region of the sites `site_ids` (alternatives indices of `program`): see the module
    docstring. Falls back to the whole program (`Region.whole`) where a region cannot stand alone."""
    return cut_regions(program, [site_ids], profile)[0]


def _cut(graphs: _Graphs, sites: list[_Site], ids: list[int], profile: Profile | None,
         max_ops: int | None = None) -> Region:
    if not ids:
        raise RegionError("a region needs at least one site")
    for s in ids:
        if not 0 <= s < len(sites):
            raise RegionError(f"site {s} out of range: the program has {len(sites)} alternatives ops")
    chosen = [sites[s] for s in ids]
    program = graphs.main.program
    if any(s.block != chosen[0].block for s in chosen):
        return _whole(program, sites, ids, "the sites sit in different blocks (main, a loop body, ...)")
    g = graphs.of(chosen[0].block)
    members: set[int] = set()
    for site in chosen:
        members |= _changed(g, site)[0]
    if max_ops is not None and len(members) > max_ops:
        return _oversize(program, ids, members, max_ops)
    kernels: list[int] = []
    if profile is not None:
        kernels = _touched_kernels(g, members, profile)
        for k in kernels:
            members.update(g.owner_of[i] for i in profile.kernels[k].ops if i in g.owner_of)
    else:
        members = _convex_neighbours(g, members)
    ret = len(g.ops) - 1
    members.discard(ret)
    members = _convex(g, members)
    if max_ops is not None and len(members) > max_ops:
        # the derived inputs only add ops, and finding them on a region this large was 96 % of
        # the cutting of a ViT train step's sites along their profiled kernels (15 s for 64)
        return _oversize(program, ids, members, max_ops)
    members = _convex(g, _with_derived_inputs(g, members))
    if max_ops is not None and len(members) > max_ops:  # constants not counted: they compile to nothing
        return _oversize(program, ids, members, max_ops)
    if ret in members:
        return _whole(program, sites, ids, "the region would hold its block's terminator")
    members |= {p for i in members for p in g.preds[i] if g.ops[p].name == CONSTANT}
    problem = _unfit(g, members)
    if problem:
        return _whole(program, sites, ids, problem)
    if profile is not None:
        kernels = _touched_kernels(g, members, profile)
    share = sum(profile.kernels[k].share for k in kernels) if profile is not None else None
    try:
        module, inputs, outputs = _build(g, sorted(members))
        cut = program_from_module(module, name=f"{g.program.name}.region", inline=False)
    except (ir.MLIRError, ValueError) as e:
        return _whole(program, sites, ids, f"the cut does not stand alone: {e}")
    # the cut keeps walk order, so the sites inside it (nested ones too) keep their order
    inside = [s.index for s in sites if g.defs.get(s.op.results[0]) in members]
    local = {s: j for j, s in enumerate(inside)}
    if len(list_alternatives(cut)) != len(inside):
        raise RegionError("the cut lost or gained an alternatives op")
    return Region(cut, tuple(ids), local, {s: sites[s].labels for s in local},
                  {s: sites[s].tiers for s in local}, tuple(sorted(members)),
                  tuple(profile.kernels[k].name for k in kernels) if profile is not None else (), share,
                  inputs=tuple(inputs), outputs=tuple(outputs), in_body=g.block != g.program.body)


def _whole(program: Program, sites: list[_Site], ids: list[int], reason: str) -> Region:
    n = len(program.in_specs)
    nres = len(program.out_specs)
    return Region(program, tuple(ids), {s.index: s.index for s in sites}, {s.index: s.labels for s in sites},
                  {s.index: s.tiers for s in sites}, share=1.0, whole=True, reason=reason,
                  inputs=tuple(("arg", j) for j in range(n)), outputs=tuple(("ret", j) for j in range(nres)))


def _oversize(program: Program, ids: list[int], members: set[int], max_ops: int) -> Region:
    return Region(program, tuple(ids), {}, {}, {}, tuple(sorted(members)), oversize=True,
                  reason=f"over {max_ops} ops ({len(members)} so far)")


def _with_derived_inputs(g: _Graph, members: set[int], rounds: int = 3) -> set[int]:
    """`members` plus the outside ops that compute a region input from other region inputs
    (a transpose of an argument, when a rewrite reads both): otherwise the region would take
    both as independent arguments, and on random inputs before and after would disagree. Not
    one whose other readers lead back into the region by `FAR_SPAN` ops or more (a far shared
    op of `_changed`, a broadcast a merged forward op shares with the backward pass): closing
    the region over those paths would make it most of a training step, and a region's timing
    does not depend on its input values."""
    members = set(members)
    for _ in range(rounds):
        reads = {v for i in members for v in g.reads_at(i)}
        inputs = {v for v in reads if g.defs.get(v) not in members}
        found = set()
        for v in inputs:
            d = g.defs.get(v)
            if d is None or g.ops[d].name in (CONSTANT, alt_dialect.ALTERNATIVES) or not len(g.ops[d].results):
                continue
            outer = [u for u in g.reads_at(d) if g.defs.get(u) != d]
            if outer and all(u in inputs or (g.defs.get(u) is not None and g.ops[g.defs[u]].name == CONSTANT)
                             for u in outer) and len(_convex(g, members | {d})) <= len(members) + 1 + FAR_SPAN:
                found.add(d)
        if not found:
            break
        members |= found
    return members


def _fusible_neighbours(g: _Graph, members: set[int]) -> set[int]:
    out: set[int] = set()
    frontier = set(members)
    for _ in range(NEIGHBOUR_STEPS):
        nxt = set()
        for i in frontier:
            for j in g.preds[i] | g.succs[i]:
                name = g.ops[j].name
                if j not in members and j not in out and (name in FUSIBLE or name == alt_dialect.ALTERNATIVES):
                    nxt.add(j)
        out |= nxt
        frontier = nxt
    return out


def _convex_neighbours(g: _Graph, members: set[int]) -> set[int]:
    """`members` (made convex) plus those fusible neighbours that keep it convex on their own.
    In a training step a forward op's neighbour is often read by the backward pass far below:
    the convex closure of it would pull in everything in between (hundreds of ops).

    Adding j keeps the set convex unless one of j's readers outside it reaches it, or one of
    the ops j reads is reached from it: both sets are found once, again only after an op is
    added (once per candidate made this most of a 2.7k-op program's cutting)."""
    core = _convex(g, members)
    if len(core) > NEIGHBOURS_UP_TO:  # already a large region (a transpose in the forward pass
        return core                     # folded into a dot of the backward pass): they add nothing
    candidates = sorted(_fusible_neighbours(g, members) - core)
    if not candidates:
        return core
    lo, hi = min(candidates[0], min(core)), max(candidates[-1], max(core))
    reaches, reached = _outside_paths(g, core, lo, hi)  # neither holds a member
    for j in candidates:
        if not (_mask(g.succs[j]) & reaches or _mask(g.preds[j]) & reached):
            core.add(j)
            reaches, reached = _outside_paths(g, core, lo, hi)
    return core


def _outside_paths(g: _Graph, core: set[int], lo: int, hi: int) -> tuple[int, int]:
    """Bitmasks of the ops in positions lo..hi outside `core` from which `core` is reachable,
    and of those reachable from `core`."""
    inside = _mask(core)
    span = (1 << (hi + 1)) - (1 << lo)
    if g.closure is not None:  # from each op's descendants and ancestors: no scan
        below = above = 0
        for c in core:
            below |= g.closure.below[c]
            above |= g.closure.above[c]
        return above & span & ~inside, below & span & ~inside
    preds, succs = g.preds, g.succs  # a program too large for the closure: scan the span
    reached, marked = 0, set(core)
    for i in range(min(core), hi + 1):
        if i not in core and not preds[i].isdisjoint(marked):
            reached |= 1 << i
            marked.add(i)
    reaches, marked = 0, set(core)
    for i in range(max(core), lo - 1, -1):
        if i not in core and not succs[i].isdisjoint(marked):
            reaches |= 1 << i
            marked.add(i)
    return reaches, reached


def _mask(positions: Iterable[int]) -> int:
    m = 0
    for i in positions:
        m |= 1 << i
    return m


def _positions(mask: int) -> set[int]:
    out = set()
    while mask:
        low = mask & -mask
        out.add(low.bit_length() - 1)
        mask ^= low
    return out


def _convex(g: _Graph, members: set[int]) -> set[int]:
    """`members` plus every op on a path from one member to another through the outside."""
    reaches, reached = _outside_paths(g, members, min(members), max(members))
    return members | _positions(reaches & reached)


def _is_tensor(t: ir.Type) -> bool:
    return isinstance(t, ir.RankedTensorType)


def _unfit(g: _Graph, members: set[int]) -> str:
    """Why these ops cannot be cut out ('' when they can)."""
    for i in sorted(members):
        op = g.ops[i]
        if not is_pure(op):
            return f"the region would hold {op.name}, which has side effects"
        if op.name in WHILE_LIKE and op.name != "stablehlo.while":
            return f"the region would hold a {op.name}"
        if not all(_is_tensor(v.type) for v in op.operands) or not all(_is_tensor(r.type) for r in op.results):
            return f"{op.name} in the region reads or makes a non-tensor value"
    return ""


def _build(g: _Graph, members: list[int]) -> tuple[ir.Module, list, list]:
    """The module `main(values read from outside) -> (values used outside)` of `members`."""
    inside = set(members)
    params: list[ir.Value] = []
    addrs: list[tuple[Any, int]] = []
    seen: set = set()
    for i in members:
        for v in g.reads_at(i):
            d = g.defs.get(v)
            if (d is not None and d in inside) or v in seen:
                continue
            seen.add(v)
            params.append(v)
            if d is not None:
                addrs.append((d, _result_number(v)))
            else:  # the block's argument, or (in a loop body) a value the body reads from outside
                addrs.append(("arg", g.arg_index[v]) if v in g.arg_index else ("outer", -1))
    outputs: list[ir.Value] = []
    out_addrs: list[tuple[Any, int]] = []
    for i in members:
        for k, r in enumerate(g.ops[i].results):
            if any(u not in inside for u in _users(g, r)):
                outputs.append(r)
                out_addrs.append((i, k))
    if not outputs:
        raise ValueError("the region has no result used outside it")
    module = module_of([g.ops[i] for i in members], params, outputs)
    with ir_scope():
        if not module.operation.verify():
            raise ValueError("the cut module does not verify")
    return module, addrs, out_addrs


def module_of(ops: Sequence[ir.Operation], params: Sequence[ir.Value], outputs: Sequence[ir.Value]) -> ir.Module:
    """A new module `func.func @main(params) -> outputs` holding clones of `ops` (in this order,
    each reading only `params`, earlier ops' results and its own nested values). Not verified."""
    with ir_scope():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            fn = func_dialect.FuncOp("main", ir.FunctionType.get([p.type for p in params],
                                                                 [o.type for o in outputs]))
        body = fn.add_entry_block()  # type: ignore[attr-defined]  # missing from the stubs
        mapping: dict[ir.Value, ir.Value] = dict(zip(params, body.arguments))
        ip = ir.InsertionPoint(body)
        for old in ops:
            new = old.clone(ip=ip)
            for inner in [new] + list(walk_block_of(new)):  # nested ops may read outer values too
                for k, v in enumerate(inner.operands):
                    if v in mapping:
                        inner.operands[k] = mapping[v]
            mapping.update(zip(old.results, new.results))
        with ip:
            func_dialect.ReturnOp([mapping[o] for o in outputs])
    return module


def _result_number(v: ir.Value) -> int:
    return ir.OpResult(v).result_number


def _users(g: _Graph, r: ir.Value) -> Iterator[int]:
    """Top-level positions of the ops using `r` (main's return included)."""
    for use in r.uses:
        top = ancestor_in(g.block, use.owner)
        assert top is not None, "a value of main is used inside main"
        yield g.pos[top]


__all__ = ["CLOSURE_OPS", "Candidate", "NEGLIGIBLE_TIME_FRACTION", "Region", "RegionCutter", "RegionError", "baseline",
           "check_profile", "cut_region", "cut_regions", "module_of", "order_sites", "site_bounds", "site_kernels",
           "skip_negligible", "walk_block_of"]
