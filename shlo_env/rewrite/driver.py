"""augment (dry mode) -> decide -> apply, and the loop of the HloEnv paper's Algorithm 1.

`augment` records every match of every pattern as an alternatives op without changing what the
program computes; `apply` materializes one region per alternatives op, prunes dead ops and
verifies. Programs are cloned unless `inplace=True`, so one augmented program can be applied
with many decision vectors.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import gc
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence

from jaxlib.mlir import ir

from shlo_env.ir import alternatives as alt_dialect
from shlo_env.ir.builder import Builder
from shlo_env.ir.locations import rewrite_location
from shlo_env.ir.program import Program, ir_scope
from shlo_env.ir.ops import ancestor_in, block_ops, is_pure, walk_block
from shlo_env.measure.numerics import Numerics
from shlo_env.patterns import match_cache
from shlo_env.patterns.base import Match, Pattern, resolve


class PatternWarning(UserWarning):
    """A pattern raised or built invalid IR; that pattern or alternative was skipped."""


class ApplyError(ValueError):
    """Bad decisions, or a materialized program that fails to verify."""


@dataclasses.dataclass
class AugmentStats:
    matches: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    recorded: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    dropped: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    cycles: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    errors: dict[str, str] = dataclasses.field(default_factory=dict)
    # ops looked at for matches, of all: fewer when `augment`'s deadline came first
    scanned: int = 0
    ops: int = 0
    unrecorded: int = 0  # matched root sets left unrecorded when the deadline came first

    @property
    def cut(self) -> bool:
        return self.scanned < self.ops or self.unrecorded > 0


# --- walking ----------------------------------------------------------------------------------

def walk_ops(block: ir.Block) -> Iterator[ir.Operation]:
    """Every op in `block` and its nested regions, in program order; alternatives are not entered."""
    return walk_block(block, stop=(alt_dialect.ALTERNATIVES,))


_PLAIN = frozenset({str, int, float, bool, type(None)})  # most of what a Match holds (a chain's structure)


def _map_values(obj, mapping: Mapping):
    if type(obj) in _PLAIN:
        return obj
    if isinstance(obj, ir.Value):
        return mapping.get(obj, obj)
    if isinstance(obj, list):
        return [x if type(x) in _PLAIN else _map_values(x, mapping) for x in obj]
    if isinstance(obj, tuple):
        return tuple([x if type(x) in _PLAIN else _map_values(x, mapping) for x in obj])
    if isinstance(obj, dict):
        return type(obj)({k: v if type(v) in _PLAIN else _map_values(v, mapping) for k, v in obj.items()})
    return obj


def _values_in(obj, out: list) -> list:
    if isinstance(obj, ir.Value):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            if type(x) not in _PLAIN:
                _values_in(x, out)
    elif isinstance(obj, dict):
        for x in obj.values():
            if type(x) not in _PLAIN:
                _values_in(x, out)
    return out


# --- augment ----------------------------------------------------------------------------------

#: Matches recorded whatever the deadline: matching may take the whole of it on a large
#: program, and a search with no alternatives has nothing to search (3 of the science zoo's
#: ODE and MCMC programs came back "no pattern matched" with 677 matches found).
MIN_RECORDED = 64


def augment(program: Program, patterns=None, *, inplace: bool = False,
            stats: AugmentStats | None = None, deadline: float | None = None) -> Program:
    """Record every match of every pattern as an alternatives op (dry mode).

    `deadline` (a `time.perf_counter()` value): a search's budget bounds augment. Matching takes
    the first half of the time left (`stats.scanned` of `stats.ops` ops looked at), recording
    the matches (building each alternative) the rest, the first `MIN_RECORDED` whatever the
    time; what the deadline leaves unrecorded is counted in `stats.unrecorded`.

    Matches are collected on the unchanged program first, so overlapping matches all count.
    Several patterns matching the same roots share one alternatives op. A pattern that raises
    is skipped with a `PatternWarning`; an alternative whose IR is invalid is dropped; a match
    that would create a cycle is rejected.
    """
    patterns = resolve(patterns)
    stats = stats if stats is not None else AugmentStats()
    prog = program if inplace else program.clone()
    matching = None if deadline is None else time.perf_counter() + 0.5 * (deadline - time.perf_counter())
    with ir_scope(), _collector_paused():
        groups, cyclic = _collect_matches(prog, patterns, stats, matching)
        redirect: dict[ir.Value, ir.Value] = {}
        orders = _Orders()
        for n, (roots, members) in enumerate(groups.items()):
            if deadline is not None and n >= MIN_RECORDED and time.perf_counter() >= deadline:
                stats.unrecorded = len(groups) - n
                break
            _record(list(roots), members, redirect, stats, orders, roots in cyclic)
    return prog


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector: augment makes millions of short-lived objects,
    and the collections they trigger each walk every live object (the whole match index), about
    a tenth of augment's time. Reference counting still frees them; cycles wait for the next pass."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _collect_matches(prog: Program, patterns: Sequence[Pattern], stats: AugmentStats,
                     deadline: float | None = None):
    by_op: dict[str, list[Pattern]] = collections.defaultdict(list)
    for p in patterns:
        for name in p.roots():
            by_op[name].append(p)
    needs = {p: p.operand_producers() for p in patterns}
    # the patterns to try on an op, by (op name, names of its operands' producers)
    tried: dict[tuple[str, frozenset[str] | None], list[Pattern]] = {}
    broken: set[str] = set()
    groups: dict[tuple, list[tuple[Pattern, Match]]] = {}
    with match_cache.indexed(prog.body) as index:  # matching never changes the program
        stats.ops = stats.scanned = len(index.ops)
        for i, (op, name) in enumerate(zip(index.ops, index.names)):
            if deadline is not None and i % 64 == 0 and time.perf_counter() >= deadline:
                stats.scanned = i
                break
            if name not in by_op:
                continue
            key = (name, index.operand_producers(i))
            candidates = tried.get(key)
            if candidates is None:
                made = key[1]
                candidates = tried[key] = [p for p in by_op[name] if made is None or not needs[p]
                                           or not needs[p].isdisjoint(made)]
            if candidates:
                _match_op(op, candidates, broken, groups, stats)
        cyclic = _cyclic_groups(index, groups)
    return groups, cyclic


def _cyclic_groups(index: match_cache.Index, groups: dict[tuple, list[tuple[Pattern, Match]]]) -> set[tuple]:
    """The groups (by roots) whose alternatives op would close a cycle in the unchanged
    program: a value it reads (a root or an input) is computed from one of its roots.

    Recording only adds paths (an alternatives op reads what the roots' users read through
    it), so each of these would still close a cycle when `_place` comes to it, and is
    rejected without a walk. A walk per match, over the ops between its roots, made augment
    quadratic where a pattern pairs ops far apart (a weight shared by every layer of a
    stack). `_place` still checks the others: earlier records may have added the path.
    """
    keys, queries = [], []
    numbers, owner, block = index.value_number, index.owner, index.block
    for roots, members in groups.items():
        sources = [o for o in (owner[n] for n in map(numbers.get, roots) if n is not None) if o >= 0]
        if not sources or not any(len(roots) > 1 or _values_in(m, []) for _, m in members):
            continue
        b = block[sources[0]]
        targets = {o for _, m in members for n in map(numbers.get, _values_in(m, list(roots)))
                   if n is not None and (o := owner[n]) >= 0 and block[o] == b}
        keys.append(roots)
        queries.append(([s for s in sources if block[s] == b], sorted(targets)))
    return {keys[q] for q in index.reaching(queries)}


def _match_op(op: ir.Operation, candidates: list[Pattern], broken: set[str],
              groups: dict[tuple, list[tuple[Pattern, Match]]], stats: AugmentStats) -> None:
    """Try each pattern on `op`; add its matches to `groups` (by roots), disable the ones that raise."""
    view = match_cache.view(op)
    for p in candidates:
        if p.name in broken:
            continue
        try:
            m = p.match(view)
        except Exception as e:  # noqa: BLE001 - a pattern bug must not stop the others
            broken.add(p.name)
            stats.errors[p.name] = f"{type(e).__name__}: {e}"
            warnings.warn(f"pattern {p.name!r} raised in match on {op.name}: {type(e).__name__}: {e}; "
                          "pattern skipped", PatternWarning, stacklevel=4)
            continue
        if m is None:
            continue
        m = m if isinstance(m, Match) else Match(m)
        roots = tuple(m.pop("roots", None) or op.results)
        stats.matches[p.name] += 1
        groups.setdefault(roots, []).append((p, m))


def _record(roots: list[ir.Value], members, redirect: dict, stats: AugmentStats, orders: _Orders,
            cyclic: bool = False) -> None:
    """Build each member's alternative and place them in one op; `cyclic`: known to close a cycle."""
    original_roots = roots
    roots = [redirect.get(r, r) for r in roots]
    mapped, captured = members, [_values_in(m, []) for _, m in members]
    if any(v in redirect for values in captured for v in values):  # a value an earlier op replaced
        mapped = [(p, _map_values(m, redirect)) for p, m in members]
        captured = [[redirect.get(v, v) for v in values] for values in captured]
    inputs: list[ir.Value] = []
    seen = set(roots)  # a set: comparing two Values is a call into MLIR
    for values in captured:
        for v in values:
            if v not in seen:
                seen.add(v)
                inputs.append(v)
    operands = roots + inputs

    scratch = ir.Operation.create("shlo_env.scratch", regions=len(mapped))
    blocks, labels, tiers = [], [], []
    for (p, m), region, values in zip(mapped, scratch.regions, captured):
        block = alt_dialect.new_block(region, operands)
        local = _map_values(m, dict(zip(operands, block.arguments)))
        # the ops it builds point at the ops it replaces (`shlo_env.ir.locations`)
        with rewrite_location(p.name, original_roots, values):
            problem = _build_choice(p, block, local, len(roots))
        if problem == "no-op":
            continue
        if problem:
            stats.dropped[p.name] += 1
            warnings.warn(f"pattern {p.name!r}: {problem}; alternative dropped", PatternWarning, stacklevel=4)
            continue
        blocks.append(block)
        labels.append(p.name)
        tiers.append(int(max(p.numerics, m.get("numerics", p.numerics))))  # a match may only loosen it
    if blocks:
        op = None if cyclic else _place(roots, inputs, blocks, labels, tiers, orders)
        if op is None:
            for name in labels:
                stats.cycles[name] += 1
        else:
            for name in labels:
                stats.recorded[name] += 1
            for orig, new in zip(original_roots, op.results):
                redirect[orig] = new
    scratch.erase()


def _build_choice(p: Pattern, block: ir.Block, m: Match, num_roots: int) -> str | None:
    """Run the pattern's rewrite into `block`; return a problem description, "no-op", or None."""
    try:
        out = p.rewrite(Builder.at_end(block), m)
    except Exception as e:  # noqa: BLE001
        return f"rewrite raised {type(e).__name__}: {e}"
    out = [out] if isinstance(out, ir.Value) else list(out or [])
    args = list(block.arguments)
    if len(out) != num_roots:
        return f"rewrite returned {len(out)} values for {num_roots} roots"
    for i, (v, root) in enumerate(zip(out, args)):
        if not isinstance(v, ir.Value):
            return f"rewrite returned {type(v).__name__}, not a Value"
        if v.type != root.type:
            return f"replacement {i} has type {v.type}, the original {root.type}"
    top = built = [view.operation for view in block.operations]
    defined: set[ir.Value] = set(args)
    if any(len(op.regions) for op in top):  # the ops in nested regions, and their blocks' arguments
        built = list(walk_ops(block))
        for op in built:
            for r in op.regions:
                for b in r.blocks:
                    defined.update(b.arguments)
    for op in built:
        defined.update(op.results)
    for op in built:
        for v in op.operands:
            if v not in defined:
                return f"{op.name} reads a value from outside its region (use values from the Match)"
    if any(v not in defined for v in out):
        return "returned a value from outside its region (use values from the Match)"
    end = alt_dialect.yield_(block, out)
    if all(v == a for v, a in zip(out, args[:num_roots])):
        return "no-op"
    try:
        for op in top + [end]:  # (each verifies the ops nested in it)
            op.verify()
    except ir.MLIRError as e:
        return f"built invalid IR: {e}"
    return None


def _owner_in(block: ir.Block, value: ir.Value) -> ir.Operation | None:
    """The op of `block` that defines `value` (directly), or None if defined elsewhere."""
    if isinstance(value, ir.OpResult):
        op = value.owner.operation
        return op if op.block == block else None
    return None


class _Order:
    """The order of one block's ops, kept up to date as `_place` inserts and moves ops.

    MLIR forgets a block's order whenever an op in it moves, and renumbers the whole block at
    the next `is_before_in_block`: once per match whose users had to move, which made augment
    quadratic. Here each op has a float key; an op put after another takes a key between that
    op's and the next one's (the block is renumbered only when such a gap runs out). The ops
    are linked to their neighbours (`after`, `before`), so an insert costs the same in any block.
    """

    def __init__(self, block: ir.Block):
        handles = [_Handle.of(o.operation) for o in block.operations]  # in block order
        self.first = handles[0] if handles else None
        self.after = dict(zip(handles, handles[1:]))  # op -> the next op (none for the last)
        self.before = dict(zip(handles[1:], handles))
        self.key = {h: float(i) for i, h in enumerate(handles)}

    def position(self, op: ir.Operation) -> float:
        """A number that orders `op` among the block's ops."""
        return self.key[_Handle.of(op)]

    def is_before(self, a: ir.Operation, b: ir.Operation) -> bool:
        return self.key[_Handle.of(a)] < self.key[_Handle.of(b)]

    def sort(self, ops) -> list[ir.Operation]:
        return sorted(ops, key=lambda op: self.key[_Handle.of(op)])

    def inserted_after(self, op: ir.Operation, anchor: ir.Operation) -> None:
        """Record that `op` now sits right after `anchor`."""
        a = _Handle.of(anchor)
        k = self.key[a]
        nxt = self.after.get(a)
        limit = self.key[nxt] if nxt is not None else k + 2.0
        new = (k + limit) / 2
        if not k < new < limit:  # the gap ran out: renumber
            self._renumber()
            return self.inserted_after(op, anchor)
        handle = _Handle.of(op)
        self.key[handle] = new
        self.after[a], self.before[handle] = handle, a
        if nxt is not None:
            self.after[handle], self.before[nxt] = nxt, handle

    def removed(self, op: ir.Operation) -> None:
        """Record that `op` left the block (erased, or about to move)."""
        handle = _Handle.of(op)
        del self.key[handle]
        prev, nxt = self.before.pop(handle, None), self.after.pop(handle, None)
        if prev is None:
            self.first = nxt
        elif nxt is None:
            del self.after[prev]
        else:
            self.after[prev] = nxt
        if nxt is not None:
            if prev is None:
                del self.before[nxt]
            else:
                self.before[nxt] = prev

    def _renumber(self) -> None:
        handle, i = self.first, 0
        while handle is not None:
            self.key[handle] = float(i)
            handle, i = self.after.get(handle), i + 1


class _Handle:
    """A dict key for an op that stays valid while augment edits the program.

    `ir.Operation` hashes its operands, which change as uses are redirected; an op's first
    result hashes by address. Ops without results (a block's terminator) share one bucket.
    """

    __slots__ = ("op",)

    def __init__(self, op: ir.Operation):
        self.op = op

    @staticmethod
    def of(op: ir.Operation):
        results = op.results
        return results[0] if len(results) else _Handle(op)

    def __hash__(self) -> int:
        return 0

    def __eq__(self, other) -> bool:
        return isinstance(other, _Handle) and self.op == other.op


class _Orders(dict):
    """An `_Order` per block, made when a block is first edited."""

    def __missing__(self, block: ir.Block) -> _Order:
        order = self[block] = _Order(block)
        return order


def _place(roots, inputs, blocks, labels, tiers, orders: _Orders) -> ir.Operation | None:
    """Insert the alternatives op after every operand's definition and redirect the roots' uses.

    Users of a root that sit before that point are moved after it, together with everything
    that depends on them; if one of them feeds an operand, the match would create a cycle and
    is rejected (None).
    """
    block = roots[0].owner.operation.block
    order = orders[block]
    anchors = [o for o in (_owner_in(block, v) for v in roots + inputs) if o is not None]
    anchor = max(anchors, key=order.position)  # the last one (the first of equals)
    op = alt_dialect.create(ir.InsertionPoint.after(anchor), roots, inputs, blocks, labels, tiers)
    order.inserted_after(op, anchor)

    early = []
    here = order.position(op)
    for r in roots:
        for use in r.uses:
            user = ancestor_in(block, use.owner)
            if user is not None and user != op and order.position(user) < here:
                early.append(user)
    if early:
        moved = _forward_cone(block, early, op, order)
        operand_defs = {o for o in anchors}
        if any(m in operand_defs for m in moved):
            order.removed(op)
            op.erase()
            return None
        after = op
        for m in moved:
            m.move_after(after)
            order.removed(m)
            order.inserted_after(m, after)
            after = m
    for i, r in enumerate(roots):
        r.replace_all_uses_except(op.results[i], op)
    return op


def _forward_cone(block: ir.Block, early: list[ir.Operation], stop: ir.Operation,
                  order: _Order) -> list[ir.Operation]:
    """Ops before `stop` in `block` that are early users or depend on one, in block order.

    Follows uses forward from the early users (visiting only the cone, not the whole block).
    """
    cone: set = set()
    todo = list(early)
    while todo:
        op = todo.pop()
        if op in cone:
            continue
        cone.add(op)
        for result in op.results:
            for use in result.uses:
                user = ancestor_in(block, use.owner)
                if user is not None and user not in cone and user != stop and order.is_before(user, stop):
                    todo.append(user)
    return order.sort(cone)


# --- apply ------------------------------------------------------------------------------------

def list_alternatives(program: Program) -> list[alt_dialect.Alternatives]:
    return alt_dialect.list_alternatives(program.main)


def normalize_decisions(alts, decisions) -> list[int]:
    """A full decision vector from a list (one per alternatives op) or {index: choice}."""
    if isinstance(decisions, Mapping):
        vec = [0] * len(alts)
        for k, v in decisions.items():
            if not 0 <= int(k) < len(alts):
                raise ApplyError(f"decision for alternatives #{k}, but the program has {len(alts)}")
            vec[int(k)] = int(v)
    else:
        vec = [int(d) for d in decisions]
        if len(vec) != len(alts):
            raise ApplyError(f"{len(vec)} decisions for {len(alts)} alternatives ops")
    for a, d in zip(alts, vec):
        if not 0 <= d < a.num_choices:
            raise ApplyError(f"decision {d} out of range for alternatives #{a.index} "
                             f"with {a.num_choices} choices")
    return vec


def apply(program: Program, decisions, *, inplace: bool = False) -> Program:
    """Materialize one choice per alternatives op, prune dead ops, verify.

    The result records what was applied in `applied` and its loosest tier in `numerics`.
    """
    prog = program if inplace else program.clone()
    with ir_scope():
        alts = list_alternatives(prog)
        vec = normalize_decisions(alts, decisions)
        applied = list(prog.applied)
        tier = Numerics(prog.numerics)
        for a, d in zip(alts, vec):
            if d:
                applied.append(a.labels[d])
                tier = max(tier, Numerics(a.tiers[d]))
            alt_dialect.materialize(a.op, d)
        prune(prog)
        try:
            prog.module.operation.verify()
        except ir.MLIRError as e:
            raise ApplyError(f"program does not verify after apply: {e}") from e
    prog.applied = tuple(applied)
    prog.numerics = tier
    return prog


def strip(program: Program, *, inplace: bool = False) -> Program:
    """Remove every alternatives op, keeping the originals (all decisions 0)."""
    return apply(program, [0] * len(list_alternatives(program)), inplace=inplace)


def prune(program: Program) -> int:
    """Erase ops whose results are unused and that have no side effects. Returns how many."""
    return _prune_block(program.body)


def _prune_block(block: ir.Block) -> int:
    erased = 0
    for op in reversed(block_ops(block)):
        for region in op.regions:
            for inner in region.blocks:
                erased += _prune_block(inner)
        if len(op.results) and all(next(iter(r.uses), None) is None for r in op.results) and is_pure(op):
            op.erase()
            erased += 1
    return erased


# --- Algorithm 1 ------------------------------------------------------------------------------

Policy = Callable[[Program, list], Sequence[int]]


@dataclasses.dataclass
class LoopStep:
    step: int
    num_alternatives: int
    decisions: list[int]
    applied: list[str]
    state_hash: str


def pick_first(program: Program | None, alts) -> list[int]:
    """The paper's pick-first heuristic: the first non-original choice at every alternatives op."""
    from shlo_env.rewrite.decisions import pick_first as first_choices  # the one rule (shlo_env.rewrite.decisions)

    return first_choices(a.num_choices for a in alts)


def run_loop(program: Program, patterns=None, policy: Policy = pick_first, *,
             max_steps: int = 8) -> tuple[Program, list[LoopStep]]:
    """augment -> decide -> apply until no alternatives remain, the policy keeps every original,
    a state repeats, or `max_steps` is reached."""
    from shlo_env.ir.hashing import dag_hash

    patterns = resolve(patterns)
    current = program
    seen = {dag_hash(program)}
    trace: list[LoopStep] = []
    for step in range(max_steps):
        augmented = augment(current, patterns)
        alts = list_alternatives(augmented)
        if not alts:
            break
        decisions = normalize_decisions(alts, policy(augmented, alts))
        if not any(decisions):
            break
        nxt = apply(augmented, decisions, inplace=True)
        h = dag_hash(nxt)
        trace.append(LoopStep(step, len(alts), decisions,
                              [a.labels[d] for a, d in zip(alts, decisions) if d], h))
        if h in seen:
            break
        seen.add(h)
        current = nxt
    return current, trace
