"""Facts about the program that matching reads many times, read once per augment pass.

Each Python call into MLIR costs a microsecond or more (`value.owner` about 6, hashing an
`ir.Operation` about 1), and the matching helpers ask the same questions about the same ops
over and over: who defines this value, who uses it, where is it in its block. `augment`
collects every match on an unchanged program, so while it does, `indexed(body)` keeps an
`Index`, a mirror of the program's use-def graph in plain Python integers, and the helpers
answer from it. Outside `indexed(...)` the helpers ask MLIR directly; both give the same
answers (tests/test_match_cache.py checks it).

Only the indexed program is mirrored. Ops a pattern builds while matching (a `FlatBody` copy of
a loop body) are answered directly, and building or erasing such a copy calls `forget_users()`,
since the copy adds uses to program values for a while.
"""

from __future__ import annotations

import bisect
import contextlib
import heapq
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, TypeVar

from jaxlib.mlir import ir

T = TypeVar("T")

_ALTERNATIVES = "shlo_env.alternatives"  # not entered, as driver.walk_ops does not
_OUTSIDE = -1  # the block (or op) number of anything the index does not hold
_MISSING = object()


class Index:
    """The ops and values of one program (nested regions included, alternatives ops not entered).

    Ops and values are numbered; `ops[i]` is op i (in `driver.walk_ops` order), `block[i]` and
    `pos[i]` its block's number and its position there. The bindings may hand out several
    `ir.Operation` objects for one op, and hashing one costs a microsecond, so an op is looked
    up by `id` first (the objects the index holds and hands out), then by value.
    """

    def __init__(self, body: ir.Block):
        self.ops: list[ir.Operation] = []
        self.names: list[str] = []
        self.block: list[int] = []
        self.pos: list[int] = []
        self.results: list[tuple[int, ...]] = []  # op -> its result values
        self.number: dict[ir.Operation, int] = {}
        self._by_id: dict[int, int] = {}  # id(op) -> number, for the objects in `ops` (kept alive)
        self.values: list[ir.Value] = []
        self.value_number: dict[ir.Value, int] = {}
        self.owner: list[int] = []  # value -> the op defining it; _OUTSIDE for a block argument
        self.arg: list[tuple[int, int]] = []  # value -> (block, argument number) for a block argument
        self.block_args: list[list[int]] = []  # block -> its argument values
        self._nested: set[int] = set()  # the ops with regions
        # filled on demand:
        self._operands: dict[int, tuple[int, ...]] = {}
        self._users: dict[int, list[int]] = {}  # value -> the op of each use (_OUTSIDE if not indexed)
        self._user_ops: dict[int, list[ir.Operation]] = {}
        self._views: dict[int, ir.OpView] = {}
        self._input_memo: dict[int, list[int]] = {}
        self._ancestries: dict[int, _Ancestry] = {}
        self._successors: dict[int, list[int]] = {}
        self._arg_users: dict[int, tuple[list[int], list[int]]] = {}  # block -> _argument_users
        self._blocks: dict[int, list[int]] = {}  # block -> its ops by position (`_block_ops`)
        self._searches: dict[tuple[int, int, int], tuple[list[int], bool, int]] = {}  # related_ops
        self._memo: dict[Hashable, dict[int, Any]] = {}  # tag -> {op number: fact}
        self._value_memo: dict[Hashable, dict[int, Any]] = {}  # tag -> {value number: fact}
        self._keyed: dict[Hashable, dict[Hashable, Any]] = {}  # tag -> {key: fact} (`per_key`)
        self._add_block(body)

    # --- building ---

    def _add_value(self, value: ir.Value, owner: int, arg: tuple[int, int]) -> int:
        n = len(self.values)
        self.values.append(value)
        self.value_number[value] = n
        self.owner.append(owner)
        self.arg.append(arg)
        return n

    def _add_block(self, block: ir.Block) -> None:
        b = len(self.block_args)
        self.block_args.append([])
        self.block_args[b] = [self._add_value(a, _OUTSIDE, (b, i)) for i, a in enumerate(block.arguments)]
        for i, view in enumerate(block.operations):
            op = view.operation
            n = len(self.ops)
            name = op.name
            self.ops.append(op)
            self.names.append(name)
            self.block.append(b)
            self.pos.append(i)
            self.number[op] = n
            self._by_id[id(op)] = n
            self.results.append(tuple(self._add_value(r, n, (_OUTSIDE, 0)) for r in op.results))
            regions = op.regions
            if len(regions):
                self._nested.add(n)
                if name != _ALTERNATIVES:
                    for region in regions:
                        for inner in region.blocks:
                            self._add_block(inner)

    # --- lookups ---

    def op_number(self, op: ir.Operation) -> int | None:
        n = self._by_id.get(id(op))
        return n if n is not None else self.number.get(op)

    def value(self, value: ir.Value) -> int:
        """The number of `value`, an operand of an indexed op. One defined outside the index
        (inside an alternatives op) is added, as defined outside: it lives as long as its user."""
        n = self.value_number.get(value)
        if n is None:
            n = self._add_value(value, _OUTSIDE, (_OUTSIDE, 0))
        return n

    def operands(self, i: int) -> tuple[int, ...]:
        got = self._operands.get(i)
        if got is None:
            got = self._operands[i] = tuple(self.value(v) for v in self.ops[i].operands)
        return got

    def users(self, v: int) -> list[int]:
        got = self._users.get(v)
        if got is None:
            got, ops = [], []
            number = self.number
            for use in self.values[v].uses:
                user = use.owner.operation
                n = number.get(user)  # (a use's owner is a new Python object: looked up by value)
                got.append(_OUTSIDE if n is None else n)
                ops.append(user if n is None else self.ops[n])
            self._users[v], self._user_ops[v] = got, ops
        return got

    def operand_producers(self, i: int) -> frozenset[str] | None:
        """The names of the ops defining op i's operands (block arguments add none), or None
        when an operand is defined where the index does not look (inside an alternatives op)."""
        owner, arg, names = self.owner, self.arg, self.names
        out = set()
        for v in self.operands(i):
            o = owner[v]
            if o != _OUTSIDE:
                out.add(names[o])
            elif arg[v][0] == _OUTSIDE:
                return None
        return frozenset(out)

    def user_ops(self, v: int) -> list[ir.Operation]:
        self.users(v)
        return self._user_ops[v]

    def view(self, i: int) -> ir.OpView:
        got = self._views.get(i)
        if got is None:
            got = self._views[i] = self.ops[i].opview
        return got

    def _inputs(self, i: int) -> Sequence[int]:
        """Op i's operands and the operands of the ops directly inside its regions."""
        if i not in self._nested:
            return self.operands(i)
        got = self._input_memo.get(i)
        if got is None:
            inner = [self.value(v) for r in self.ops[i].regions for blk in r.blocks
                     for o in blk.operations for v in o.operation.operands]
            got = self._input_memo[i] = list(self.operands(i)) + inner
        return got

    # --- the searches of patterns/base.py, on numbers (same answers as the MLIR versions) ---

    def ancestors_since(self, values, first: int, limit: int) -> OpSet | None:
        """`base.ancestors_since` for an indexed `first`.

        The same set: the ops of `first`'s block, not before it, that the values' defining ops
        are or read (directly, or through the operands of ops inside their regions). Every such
        path runs through ops at later positions, so each defining op's ancestors are found
        nearest first, and the search is kept for the next question about that op.
        """
        return self._cone(map(self.value_number.get, values), first, limit)

    def operand_ancestors_since(self, j: int, first: int, limit: int) -> OpSet | None:
        """`ancestors_since` of op j's operands."""
        return self._cone(self.operands(j), first, limit)

    def _cone(self, numbers: Iterable[int | None], first: int, limit: int) -> OpSet | None:
        block, pos, owner = self.block, self.pos, self.owner
        b, p = block[first], pos[first]
        cone: set[int] = set()
        for n in numbers:
            if n is None:  # a value the index does not hold is defined in another block
                continue
            i = owner[n]
            if i == _OUTSIDE or block[i] != b or pos[i] < p:
                continue
            found, count = self._nearest(i, p, limit + 1)
            if count > limit:
                return None
            cone.update(found[:count])
            if len(cone) > limit:
                return None
        return OpSet(self, cone)

    def depends_on(self, value: ir.Value, first: int, limit: int) -> bool:
        """`base.depends_on` for an indexed `first`: `first` is in the cone or the cone is too big."""
        n = self.value_number.get(value)
        i = _OUTSIDE if n is None else self.owner[n]
        if i == _OUTSIDE or self.block[i] != self.block[first] or self.pos[i] < self.pos[first]:
            return False
        found, count = self._nearest(i, self.pos[first], limit + 1)
        # the cone is found[:count], nearest first, and `first` is the earliest op it may hold
        return count > limit or found[count - 1] == first

    def _nearest(self, i: int, p: int, k: int) -> tuple[list[int], int]:
        """(found, count): found[:count] are op i and the ops of its block it reads
        (transitively), at positions >= p, nearest first, at most k of them."""
        a = self._ancestries.get(i)
        if a is None:
            a = self._ancestries[i] = _Ancestry(i, self.pos[i])
        block, pos, owner, b = self.block, self.pos, self.owner, self.block[i]
        heap, seen, found, keys = a.heap, a.seen, a.found, a.keys
        while len(found) < k and heap and -heap[0][0] >= p:
            key, j = heapq.heappop(heap)
            found.append(j)
            keys.append(key)
            for v in self._inputs(j):
                o = owner[v]
                if o != _OUTSIDE and o not in seen and block[o] == b:
                    seen.add(o)
                    heapq.heappush(heap, (-pos[o], o))
        return found, min(k, bisect.bisect_right(keys, -p))

    def related_ops(self, first: int, up: int, down: int, budget: int, name: str | None,
                    after: bool = False) -> list[ir.Operation]:
        """`base.related_ops` for an indexed op. The last search from each op is kept: the
        merging and the batching patterns ask about the same op with budgets 64 and 256, and
        the ops found within a budget are the first ones found with a larger one, unless the
        budget sized a window of block arguments."""
        key = (first, up, down)
        got = self._searches.get(key)
        if got is not None:
            found, windowed, searched = got
            if budget == searched or (not windowed and (len(found) < max(searched, 1) or budget <= searched)):
                return self._selected(first, found[:max(budget, 1)], name, after)
        found, windowed = self._search(first, up, down, budget)
        self._searches[key] = (found, windowed, budget)
        return self._selected(first, found, name, after)

    def _search(self, first: int, up: int, down: int, budget: int) -> tuple[list[int], bool]:
        """(the ops `related_ops` finds, in order, at most max(budget, 1); whether a window of
        block arguments was searched). The block arguments next to an argument (a window) are
        kept as one (lo, hi) range: they add no values at a later hop, and the users of a range
        of arguments are one slice of `_argument_users`."""
        block, owner, arg = self.block, self.owner, self.arg
        windowed = False
        b = block[first]
        frontier: Sequence[int | tuple[int, int]] = self.operands(first)
        ancestors: list[int | tuple[int, int]] = []
        seen_vals: set[int] = set()
        for hop in range(up):
            nxt: list[int | tuple[int, int]] = []
            for v in frontier:
                if isinstance(v, tuple):
                    seen_vals.update(self.block_args[b][v[0]:v[1]])
                    ancestors.append(v)
                    continue
                if v in seen_vals:
                    continue
                seen_vals.add(v)
                ancestors.append(v)
                o = owner[v]
                if o != _OUTSIDE:
                    if block[o] == b:
                        nxt.extend(self.operands(o))
                elif hop == 0 and arg[v][0] == b:
                    number = arg[v][1]
                    nxt.append((max(0, number - budget // 2), min(len(self.block_args[b]), number + budget // 2 + 1)))
                    windowed = True
            frontier = nxt
        # (a value seen before adds no users below: these need not be left out)
        ancestors.extend([v for v in frontier if type(v) is tuple or v not in seen_vals])
        # down: the users of the ancestors, then the users of those ops' results, ...; each
        # level is the ops `found` gained in the hop before (found[start:end])
        found: list[int] = []
        visited = {first}
        known_users = self._users
        for v in ancestors if down > 0 else ():
            if isinstance(v, tuple):
                flat, offsets = self._argument_users(b)
                for u in flat[offsets[v[0]]:offsets[v[1]]]:
                    if u not in visited:
                        visited.add(u)
                        found.append(u)
                        if len(found) >= budget:
                            return found, windowed
                continue
            us = known_users.get(v)
            for u in us if us is not None else self.users(v):
                if u not in visited and u != _OUTSIDE and block[u] == b:
                    visited.add(u)
                    found.append(u)
                    if len(found) >= budget:
                        return found, windowed
        successors = self._successors
        start = 0
        for _ in range(down - 1):
            end = len(found)
            for k in range(start, end):
                u = found[k]
                later = successors.get(u)
                for w in later if later is not None else self._successors_of(u):
                    if w not in visited:
                        visited.add(w)
                        found.append(w)
                        if len(found) >= budget:
                            return found, windowed
            start = end
        return found, windowed

    def reaching(self, queries: Sequence[tuple[Sequence[int], Sequence[int]]]) -> set[int]:
        """The numbers of the `queries` (sources, targets: ops of one block) in which some
        target reads some source, through ops of that block (the operands of the ops directly
        inside their regions included), without being that source.

        One pass over each block's ops in order, from a query's first source to its last
        target, carrying per op the queries whose sources it reads as the bits of an int: the
        work is the block's length plus its edges times the queries open at once, divided by
        the word size; no walk per query. A path the index cannot see (a use nested two
        regions deep) is missed: a query is then not reported, never wrongly reported.
        """
        seeds: dict[int, int] = {}  # op -> the queries it is a source of (as bits)
        checks: dict[int, list[int]] = {}  # op -> the queries it is a target of (bit numbers)
        last: dict[int, list[int]] = {}  # op -> the queries whose last target it is
        spans: dict[int, list[int]] = {}  # block -> [first position, last position] to visit
        asked: list[int] = []  # bit number -> query number (only queries a path could answer)
        pos, block = self.pos, self.block
        for n, (sources, targets) in enumerate(queries):
            if not sources:
                continue
            first = min(pos[s] for s in sources)
            later = [t for t in targets if pos[t] > first]
            if not later:
                continue
            b = block[sources[0]]
            q = len(asked)
            asked.append(n)
            bit = 1 << q
            for s in sources:
                seeds[s] = seeds.get(s, 0) | bit
            for t in later:
                checks.setdefault(t, []).append(q)
            end = max(later, key=pos.__getitem__)
            last.setdefault(end, []).append(q)
            span = spans.setdefault(b, [first, pos[end]])
            span[0], span[1] = min(span[0], first), max(span[1], pos[end])
        found: set[int] = set()
        owner = self.owner
        for b, (lo, hi) in spans.items():
            reads: dict[int, int] = {}  # op -> the open queries whose sources it reads
            done = 0  # the queries past their last target
            for i in self._block_ops(b)[lo:hi + 1]:
                got = 0
                for v in self._inputs(i):
                    o = owner[v]
                    if o != _OUTSIDE and block[o] == b:
                        got |= reads.get(o, 0) | seeds.get(o, 0)
                if got:
                    got &= ~done
                    reads[i] = got
                for q in checks.get(i, ()):
                    if got >> q & 1:
                        found.add(asked[q])
                for q in last.get(i, ()):
                    done |= 1 << q
        return found

    def _block_ops(self, b: int) -> list[int]:
        """The ops of block b, by position."""
        got = self._blocks.get(b)
        if got is None:
            for i, k in enumerate(self.block):
                self._blocks.setdefault(k, []).append(i)
            got = self._blocks.setdefault(b, [])
        return got

    def _argument_users(self, b: int) -> tuple[list[int], list[int]]:
        """(flat, offsets): the users in block b of its arguments k, one per use in use-list
        order, are flat[offsets[k]:offsets[k + 1]]."""
        got = self._arg_users.get(b)
        if got is None:
            block = self.block
            flat: list[int] = []
            offsets = [0]
            for a in self.block_args[b]:
                flat.extend(u for u in self.users(a) if u != _OUTSIDE and block[u] == b)
                offsets.append(len(flat))
            got = self._arg_users[b] = (flat, offsets)
        return got

    def _successors_of(self, i: int) -> list[int]:
        """The users of op i's results in its block, one per use, in use-list order."""
        block, b = self.block, self.block[i]
        got = self._successors[i] = [u for r in self.results[i] for u in self.users(r) if u != _OUTSIDE and block[u] == b]
        return got

    def _selected(self, first: int, found: list[int], name: str | None, after: bool) -> list[ir.Operation]:
        """The ops of `found` named `name` (any if None), only those after `first` if `after`."""
        ops, names, pos = self.ops, self.names, self.pos
        p = pos[first] if after else -1
        return [ops[i] for i in found if (name is None or names[i] == name) and pos[i] > p]


class OpSet(AbstractSet):
    """A set of indexed ops held as their numbers: `op in s` costs no hash of `op` (about a
    microsecond each), and making one costs none either. Compares equal to a set of the ops."""

    __slots__ = ("_index", "_numbers")

    def __init__(self, index: Index, numbers: set[int]):
        self._index, self._numbers = index, numbers

    def __contains__(self, op) -> bool:
        n = self._index.op_number(op) if isinstance(op, ir.Operation) else None
        return n is not None and n in self._numbers

    def __iter__(self) -> Iterator[ir.Operation]:
        ops = self._index.ops
        return (ops[i] for i in self._numbers)

    def __len__(self) -> int:
        return len(self._numbers)


class _Ancestry:
    """A search for the ops one op reads, nearest (latest in the block) first, kept to resume:
    `found` so far with `keys` (minus their positions, ascending), and the ops still to visit."""

    __slots__ = ("heap", "seen", "found", "keys")

    def __init__(self, i: int, pos: int):
        self.heap = [(-pos, i)]
        self.seen = {i}
        self.found: list[int] = []
        self.keys: list[int] = []


_active: Index | None = None


@contextlib.contextmanager
def indexed(body: ir.Block) -> Iterator[Index]:
    """While active, the helpers answer from an `Index` of `body`, which must not change."""
    global _active
    previous, _active = _active, Index(body)
    try:
        yield _active
    finally:
        _active = previous


def forget_users() -> None:
    """Drop the cached users of values (call when ops are added or erased while indexed)."""
    if _active is not None:
        _active._users.clear()
        _active._user_ops.clear()
        _active._successors.clear()
        _active._arg_users.clear()
        _active._searches.clear()


def find(op: ir.Operation) -> tuple[Index, int] | None:
    """(the active index, `op`'s number) when `op` is an indexed op, else None."""
    ix = _active
    if ix is not None:
        i = ix._by_id.get(id(op))  # (ix.op_number, inlined: asked very often)
        if i is None:
            i = ix.number.get(op)
        if i is not None:
            return ix, i
    return None


# --- accessors: the same answers as the MLIR calls in each docstring ----------------------------
# (`name` and `is_before` only try the objects the index handed out: asking MLIR costs no more
# than hashing another object.)

def name(op: ir.Operation) -> str:
    """`op.name`."""
    ix = _active
    if ix is not None:
        i = ix._by_id.get(id(op))
        if i is not None:
            return ix.names[i]
    return op.name


def operands(op: ir.Operation) -> Sequence[ir.Value]:
    """`op.operands`."""
    found = find(op)
    if found is None:
        return list(op.operands)
    ix, i = found
    return [ix.values[v] for v in ix.operands(i)]


def results(op: ir.Operation) -> Sequence[ir.Value]:
    """`op.results`."""
    found = find(op)
    if found is None:
        return list(op.results)
    ix, i = found
    return [ix.values[v] for v in ix.results[i]]


def producer(value: ir.Value, names: tuple[str, ...]) -> ir.OpView | None:
    """`value.owner` for an op result (of an op named in `names`, if any), else None."""
    ix = _active
    if ix is not None:
        v = ix.value_number.get(value)
        if v is not None:
            i = ix.owner[v]
            if i != _OUTSIDE:
                return None if names and ix.names[i] not in names else ix.view(i)
            if ix.arg[v][0] != _OUTSIDE:  # a block argument
                return None
    if not isinstance(value, ir.OpResult):
        return None
    op = value.owner
    return None if names and op.operation.name not in names else op


def view(op: ir.Operation) -> ir.OpView:
    """`op.opview`."""
    found = find(op)
    return op.opview if found is None else found[0].view(found[1])


def users(value: ir.Value) -> list[ir.Operation]:
    """The op owning each use of `value`, in use-list order."""
    ix = _active
    if ix is not None:
        v = ix.value_number.get(value)
        if v is not None:
            return list(ix.user_ops(v))
    return [use.owner.operation for use in value.uses]


def num_uses(value: ir.Value) -> int:
    """How many uses `value` has."""
    ix = _active
    if ix is not None:
        v = ix.value_number.get(value)
        if v is not None:
            return len(ix.users(v))
    return sum(1 for _ in value.uses)


def is_before(a: ir.Operation, b: ir.Operation) -> bool:
    """`a.is_before_in_block(b)` for two ops of one block."""
    ix = _active
    if ix is not None:
        i, j = ix._by_id.get(id(a)), ix._by_id.get(id(b))
        if i is not None and j is not None:
            return ix.pos[i] < ix.pos[j]
    return a.is_before_in_block(b)


def memo(op: ir.Operation, tag: Hashable, compute: Callable[[], T]) -> T:
    """`compute()`, a fact about `op`, remembered under `tag` while `op` is an indexed op."""
    ix = _active  # find(op), inlined: the batching and merging patterns ask this very often
    if ix is not None:
        i = ix._by_id.get(id(op))
        if i is None:
            i = ix.number.get(op)
        if i is not None:
            return _remember(ix._memo, tag, i, compute)
    return compute()


def value_memo(value: ir.Value, tag: Hashable, compute: Callable[[], T]) -> T:
    """`compute()`, a fact about `value`, remembered under `tag` while `value` is a value of the index."""
    ix = _active
    if ix is not None:
        v = ix.value_number.get(value)
        if v is not None:
            return _remember(ix._value_memo, tag, v, compute)
    return compute()


def per_key(tag: Hashable, key: Hashable, compute: Callable[[], T]) -> T:
    """`compute()`, a fact about `key` (an MLIR type or attribute: uniqued, so equal ones are
    the same fact), remembered under `tag` while augment indexes a program."""
    ix = _active
    return compute() if ix is None else _remember(ix._keyed, tag, key, compute)


def _remember(tables: dict[Hashable, dict[Any, Any]], tag: Hashable, n: Hashable, compute: Callable[[], T]) -> T:
    table = tables.get(tag)
    if table is None:
        table = tables[tag] = {}
    got = table.get(n, _MISSING)
    if got is _MISSING:
        got = table[n] = compute()
    return got
