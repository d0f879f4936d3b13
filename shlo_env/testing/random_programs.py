"""Random valid JAX programs, drawn from an op table, as hypothesis strategies.

    from hypothesis import given
    from shlo_env.testing.random_programs import programs, jax_programs, OP_TABLE

    @given(programs(max_ops=8))
    def test_my_patterns(program):          # a lowered `shlo_env.ir.program.Program`
        ...

    @given(jax_programs(dtypes=("float32",)))
    def test_jax_side(fn_and_args):
        fn, args = fn_and_args              # fn: a Python function of jax ops; args: numpy arrays
        ...

Public API
----------
- `OP_TABLE`: a tuple of `OpKind(name, rule, weight, motif)`. Each rule is one small function
  `rule(g)` that asks the generator `g` (a `Gen`) for operands that fit the op, draws the op's
  parameters, and emits the jax/lax call with `g.emit(...)`. Plain entries cover one op kind
  each (dot_general as a plain and a batched matmul, broadcast_in_dim, reshape, transpose,
  reduce sum/max, slice, concatenate, convert, compare+select, clamp, pad, reverse, elementwise
  unary and binary, divide). Entries with `motif=True` emit a small cluster of ops that the
  rewrite patterns look for (dot chains, x@(W + A@B), x@W + x@V, sum(x@W), slice(concat),
  transpose(transpose), reshape(reshape), x*1, x+(-0.0), select(p, x, x), two dots sharing an
  operand, ...), so that patterns fire on most drawn programs.
  `OP_KINDS` maps each name to its entry.
- `jax_programs(max_ops=8, dtypes=DEFAULT_DTYPES, kinds=None, motifs=True, min_ops=1)`: strategy
  of `(fn, args)`, with `min_ops..max_ops` table steps (a motif counts as one); `kinds` restricts
  the table to those names, `motifs=False` leaves the motifs out. `fn` is a `RandomFunction`:
  callable like any JAX function, and its `repr` is the program as readable pseudo-Python
  (hypothesis prints it for a failing example). `args` are numpy arrays (N(0,1) floats, small
  integers).
- `programs(...)`: the same, lowered with `shlo_env.ir.program.lower` into `Program`s.
- `recipes(...)`: the underlying strategy of `RandomFunction`s (no arguments drawn).
- `sample(n, seed=0, ...)`: `n` distinct `(fn, args)` drawn deterministically (the same list
  on every run for a given seed), e.g. to parametrize a test with one item per program.
- `fire_rate(n, patterns=None, ...)`: how often `driver.augment` records at least one
  alternative on `n` drawn programs (deterministic), with a count per pattern.

How a program is drawn
----------------------
The generator keeps a pool of live values (`Var`: shape, dtype and `mag`). A rule asks for an
operand with `g.operand(shape=..., rank=..., want=...)`: a live value that fits (recent ones
preferred, so programs grow deep rather than wide) or else a fresh program input of exactly the
shape the op needs. So every op's constraints hold by construction, whatever was drawn before.
Dimensions are 1..8 and ranks at most 4, so the StableHLO reference interpreter stays fast.

`mag` is a rough upper bound on |value| for the N(0,1) inputs the checks use. Rules that grow
values (exp, mul, dot, sums) only take operands small enough that the result stays well inside
the dtype's range: a random program that overflows to Inf would make every float comparison
meaningless. Values nothing reads are the program's outputs, so no op is dead code. An op
identical to an earlier one (same kind, operands and parameters) is not emitted twice.

Adding an op kind: write one rule and add it to `OP_TABLE`, e.g.

    def reverse(g: Gen):
        # reverse along a non-empty set of dimensions
        x = g.operand(want=lambda v: v.rank >= 1,             # a live value of rank >= 1, or
                      fresh=lambda: g.shape(g.dim(1, 3)))   # a new input of rank 1..3
        dims = tuple(g.subset(x.rank))
        g.emit("reverse", f"reverse({x}, dims={dims})", lambda a: lax.rev(a, dims), [x],
               [(x.shape, x.dtype, x.mag)])                 # (shape, dtype, mag) of each result

The emitted function is traced by jax, and `RandomFunction` checks that every result has the
shape and dtype the rule declared, so a wrong rule fails loudly rather than drawing nonsense.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st
from jax import lax

__all__ = [
    "OP_TABLE", "OpKind", "CONFORMANCE_FAMILIES", "conformance_programs", "SHARDED_TEXT", "Gen", "Var", "Step", "RandomFunction", "DEFAULT_DTYPES", "MAX_DIM",
    "recipes", "jax_programs", "programs", "sample", "fire_rate",
]

MAX_DIM = 8
MAX_RANK = 4
DEFAULT_DTYPES = ("float32", "int32", "float16")

INPUT_MAG = 6.0  # N(0,1) samples of these sizes stay below this; integer inputs lie in [-8, 8]
INT_INPUT_MAG = 8.0
# |values| are kept below these (f16 overflows at 65504; f32 -> int32 converts need < 2**31).
MAG_LIMIT = {np.dtype("float32"): 1e7, np.dtype("float16"): 1e4, np.dtype("int32"): 1e7}


# --- the pool of values -------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True, eq=False)
class Var:
    """One live value of the program being drawn."""

    id: int
    shape: tuple[int, ...]
    dtype: np.dtype
    mag: float  # rough bound on |value| for N(0,1) inputs

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def is_float(self) -> bool:
        return np.issubdtype(self.dtype, np.floating)

    @property
    def limit(self) -> float:
        return MAG_LIMIT[self.dtype]

    def type_str(self) -> str:
        short = {"float32": "f32", "float16": "f16", "int32": "i32"}.get(self.dtype.name, self.dtype.name)
        return f"{short}[{','.join(map(str, self.shape))}]"

    def __str__(self) -> str:
        return f"v{self.id}"


@dataclasses.dataclass
class Step:
    """One table entry's emission: `outs = fn(*ins)`, shown as `text`."""

    kind: str
    text: str
    fn: Callable
    ins: tuple[Var, ...]
    outs: tuple[Var, ...]


class RandomFunction:
    """A drawn program: call it like a JAX function; `repr` shows it as pseudo-Python."""

    def __init__(self, inputs: Sequence[Var], steps: Sequence[Step]):
        self.inputs = tuple(inputs)
        self.steps = tuple(steps)
        read = {v.id for s in self.steps for v in s.ins}
        self.outputs = tuple(v for s in self.steps for v in s.outs if v.id not in read)
        self.__name__ = "random_program"

    @property
    def kinds(self) -> Counter:
        """How many times each table entry was used."""
        return Counter(s.kind for s in self.steps)

    def specs(self):
        import jax

        return [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in self.inputs]

    def __call__(self, *args):
        if len(args) != len(self.inputs):
            raise TypeError(f"random_program takes {len(self.inputs)} arguments, got {len(args)}")
        env = {v.id: a for v, a in zip(self.inputs, args)}
        for s in self.steps:
            results = s.fn(*(env[v.id] for v in s.ins))
            results = results if isinstance(results, tuple) else (results,)
            for v, r in zip(s.outs, results, strict=True):
                if tuple(r.shape) != v.shape or np.dtype(r.dtype) != v.dtype:
                    raise AssertionError(f"generator bug in {s.kind!r}: `{s.text}` made "
                                         f"{r.dtype}{list(r.shape)}, expected {v.type_str()}")
                env[v.id] = r
        return tuple(env[v.id] for v in self.outputs)

    def __repr__(self) -> str:
        params = ", ".join(f"{v}: {v.type_str()}" for v in self.inputs)
        lines = [f"def random_program({params}):"]
        for s in self.steps:
            types = ", ".join(v.type_str() for v in s.outs)
            lines.append(f"    {s.text:<70} # {s.kind}: {types}")
        lines.append(f"    return ({', '.join(map(str, self.outputs))},)")
        return "\n".join(lines)


class Gen:
    """Drawing state of one program: the pool of live values and the steps emitted so far."""

    def __init__(self, draw, dtypes: Sequence[str]):
        self.draw = draw
        self.dtypes = [np.dtype(d) for d in dtypes]
        self.inputs: list[Var] = []
        self.pool: list[Var] = []
        self.steps: list[Step] = []
        self._texts: dict[str, Step] = {}
        self._next = 0

    # --- drawing parameters -----------------------------------------------------------------

    def dim(self, lo: int = 1, hi: int = MAX_DIM) -> int:
        return self.draw(st.integers(lo, hi))

    def shape(self, rank: int | None = None, max_rank: int = 3) -> tuple[int, ...]:
        rank = self.draw(st.integers(0 if rank is None else rank, max_rank if rank is None else rank))
        return tuple(self.dim() for _ in range(rank))

    def choice(self, options: Sequence):
        return options[self.draw(st.integers(0, len(options) - 1))]

    def coin(self, percent: int = 50) -> bool:
        """True with about `percent`% probability (shrinks towards False)."""
        return self.draw(st.integers(0, 99)) >= 100 - percent

    def dtype(self) -> np.dtype:
        """Mostly the first dtype of the table's list, sometimes another one."""
        return self.dtypes[0] if len(self.dtypes) == 1 or not self.coin(20) else self.choice(self.dtypes)

    def subset(self, n: int, min_size: int = 1) -> list[int]:
        """A sorted, non-empty subset of range(n)."""
        picked = self.draw(st.lists(st.integers(0, n - 1), min_size=min_size, max_size=n, unique=True))
        return sorted(picked)

    # --- operands -----------------------------------------------------------------------------

    def input(self, shape: Sequence[int], dtype: np.dtype | None = None) -> Var:
        """A fresh program argument."""
        dtype = np.dtype(dtype) if dtype is not None else self.dtype()
        mag = INPUT_MAG if np.issubdtype(dtype, np.floating) else INT_INPUT_MAG
        v = self._new(tuple(shape), dtype, mag)
        self.inputs.append(v)
        self.pool.append(v)
        return v

    def operand(self, *, shape: Sequence[int] | None = None, rank: int | None = None,
                dtype: np.dtype | str | None = None, floats: bool = False, max_mag: float | None = None,
                want: Callable[[Var], bool] | None = None, fresh: Callable[[], tuple] | None = None) -> Var:
        """A live value that fits every given constraint (recent ones preferred), else a new input.

        `fresh()` gives the new input's shape when `shape` is not fixed (default: a random shape of
        `rank`). `floats` asks for a floating dtype; `max_mag` bounds the value's `mag`.
        """
        dtype = np.dtype(dtype) if dtype is not None else None

        def fits(v: Var) -> bool:
            return ((shape is None or v.shape == tuple(shape)) and (rank is None or v.rank == rank)
                    and (dtype is None or v.dtype == dtype) and (not floats or v.is_float)
                    and (max_mag is None or v.mag <= max_mag) and (want is None or want(v)))

        found = [v for v in reversed(self.pool) if fits(v)]
        if found and not self.coin(15):
            # the smaller of two draws: favours recent values, so programs grow deep
            i = min(self.draw(st.integers(0, len(found) - 1)), self.draw(st.integers(0, len(found) - 1)))
            return found[i]
        if dtype is None:
            dtype = self.dtype()
            if floats and not np.issubdtype(dtype, np.floating):
                dtype = np.dtype("float32")
        if shape is None:
            shape = fresh() if fresh is not None else self.shape(rank)
        return self.input(shape, dtype)

    # --- emitting -----------------------------------------------------------------------------

    def emit(self, kind: str, text: str, fn: Callable, ins: Sequence[Var], outs: Sequence[tuple]):
        """Record `outs = fn(*ins)`; `outs` lists (shape, dtype, mag) per result. Returns the Vars.

        `text` is the call as it reads (operands by name, parameters inline); an identical
        earlier step is reused rather than emitted twice.
        """
        if text in self._texts:
            found = self._texts[text].outs
            return found if len(found) > 1 else found[0]
        out_vars = tuple(self._new(tuple(s), np.dtype(d), float(m)) for s, d, m in outs)
        lhs = ", ".join(map(str, out_vars))
        step = Step(kind, f"{lhs} = {text}", fn, tuple(ins), out_vars)
        self._texts[text] = step
        self.steps.append(step)
        self.pool.extend(out_vars)
        return out_vars if len(out_vars) > 1 else out_vars[0]

    def _new(self, shape, dtype, mag) -> Var:
        v = Var(self._next, shape, dtype, mag)
        self._next += 1
        return v

    def function(self) -> RandomFunction:
        return RandomFunction(self.inputs, self.steps)


# --- small jax helpers ----------------------------------------------------------------------------

def _full(x, value):
    """A splat constant like `x` (lowers to broadcast_in_dim of a scalar constant)."""
    return lax.full_like(x, value)


def _mm(a, b):
    """A plain matmul (or matrix-vector product): dot_general contracting a's last dim with b's first."""
    return lax.dot_general(a, b, (((a.ndim - 1,), (0,)), ((), ())))


def _mm_shape(a: tuple, b: tuple) -> tuple:
    return a[:-1] + b[1:]


def _moving_perm(g: Gen, rank: int) -> tuple[int, ...]:
    """A permutation other than the identity (jax drops identity transposes)."""
    perm = tuple(g.draw(st.permutations(range(rank))))
    return perm if perm != tuple(range(rank)) else perm[1:] + perm[:1]


# --- plain op kinds: one small rule each ---------------------------------------------------------

UNARY = {  # name -> (lax function, float only, mag of the result given the operand's mag, max operand mag)
    "neg": (lax.neg, False, lambda m: m, None),
    "abs": (lax.abs, False, lambda m: m, None),
    "sign": (lax.sign, False, lambda m: 1.0, None),
    "tanh": (lax.tanh, True, lambda m: 1.0, None),
    "exp": (lax.exp, True, math.exp, "log"),
    "sin": (lax.sin, True, lambda m: 1.0, 1e4),
    "floor": (lax.floor, True, lambda m: m + 1, None),
    "logistic": (lax.logistic, True, lambda m: 1.0, None),
}


def unary(g: Gen):
    """neg, abs, sign, tanh, exp, sin, floor, logistic of one value."""
    name = g.choice(sorted(UNARY))
    fn, float_only, out_mag, bound = UNARY[name]
    if bound == "log":
        x = g.operand(floats=True, want=lambda v: v.mag <= math.log(v.limit))
    else:
        x = g.operand(floats=float_only, max_mag=None if bound is None else float(bound))
    g.emit("unary", f"{name}({x})", fn, [x], [(x.shape, x.dtype, out_mag(x.mag))])


BINARY = {"add": lax.add, "sub": lax.sub, "mul": lax.mul, "max": lax.max, "min": lax.min}


def binary(g: Gen):
    """add, sub, mul, max, min of two values of one shape and dtype."""
    name = g.choice(sorted(BINARY))
    if name == "mul":
        x = g.operand(want=lambda v: v.mag <= math.sqrt(v.limit))
        y = g.operand(shape=x.shape, dtype=x.dtype, max_mag=x.limit / max(x.mag, 1.0))
        mag = x.mag * y.mag
    else:
        x = g.operand(want=lambda v: v.mag <= v.limit / 2)
        y = g.operand(shape=x.shape, dtype=x.dtype, max_mag=x.limit / 2)
        mag = x.mag + y.mag if name in ("add", "sub") else max(x.mag, y.mag)
    g.emit("binary", f"{name}({x}, {y})", BINARY[name], [x, y], [(x.shape, x.dtype, mag)])


def divide(g: Gen):
    """x / c for a constant c, or x / (|y| + 1): the divisor stays away from zero."""
    x = g.operand(floats=True)
    if g.coin():
        c = g.choice([2.0, 0.5, -4.0, 3.0, 1.0])
        g.emit("divide", f"div({x}, {c})", lambda a: lax.div(a, _full(a, c)), [x],
               [(x.shape, x.dtype, x.mag / abs(c))])
    else:
        y = g.operand(shape=x.shape, dtype=x.dtype)
        g.emit("divide", f"div({x}, abs({y}) + 1)",
               lambda a, b: lax.div(a, lax.add(lax.abs(b), _full(b, 1))), [x, y], [(x.shape, x.dtype, x.mag)])


def compare_select(g: Gen):
    """select(compare(a, b, direction), x, y)."""
    x = g.operand()
    y = g.operand(shape=x.shape, dtype=x.dtype)
    a = g.operand(shape=x.shape)
    b = g.operand(shape=x.shape, dtype=a.dtype)
    direction = g.choice(["LT", "LE", "GT", "GE", "EQ", "NE"])
    cmp = {"LT": lax.lt, "LE": lax.le, "GT": lax.gt, "GE": lax.ge, "EQ": lax.eq, "NE": lax.ne}[direction]
    g.emit("compare_select", f"select(compare({a}, {b}, {direction}), {x}, {y})",
           lambda a_, b_, x_, y_: lax.select(cmp(a_, b_), x_, y_), [a, b, x, y],
           [(x.shape, x.dtype, max(x.mag, y.mag))])


def clamp(g: Gen):
    """clamp(lo, x, hi) with scalar constant bounds."""
    x = g.operand()
    lo = g.choice([-2, -1, 0])
    hi = lo + g.choice([1, 2, 3])
    g.emit("clamp", f"clamp({lo}, {x}, {hi})",
           lambda a: lax.clamp(np.asarray(lo, a.dtype), a, np.asarray(hi, a.dtype)), [x],
           [(x.shape, x.dtype, max(abs(lo), abs(hi)))])


def matmul(g: Gen):
    """dot_general as a plain matmul: [m,k]·[k,n], or a matrix-vector product [m,k]·[k]."""
    x = g.operand(rank=2, want=lambda v: v.mag <= math.sqrt(v.limit / MAX_DIM))
    k = x.shape[1]
    rhs_shape = (k,) if g.coin(25) else (k, g.dim())
    w = g.operand(shape=rhs_shape, dtype=x.dtype, max_mag=x.limit / (k * max(x.mag, 1.0)))
    g.emit("matmul", f"matmul({x}, {w})", _mm, [x, w],
           [(_mm_shape(x.shape, w.shape), x.dtype, k * x.mag * w.mag)])


def batched_matmul(g: Gen):
    """dot_general with one batch dimension: [b,m,k]·[b,k,n] -> [b,m,n]."""
    x = g.operand(rank=3, want=lambda v: v.mag <= math.sqrt(v.limit / MAX_DIM))
    bsz, m, k = x.shape
    w = g.operand(shape=(bsz, k, g.dim()), dtype=x.dtype, max_mag=x.limit / (k * max(x.mag, 1.0)))
    dims = (((2,), (1,)), ((0,), (0,)))
    g.emit("batched_matmul", f"dot_general({x}, {w}, contract=((2,), (1,)), batch=((0,), (0,)))",
           lambda a, b: lax.dot_general(a, b, dims), [x, w],
           [((bsz, m, w.shape[2]), x.dtype, k * x.mag * w.mag)])


def broadcast_in_dim(g: Gen):
    """broadcast_in_dim: add new dimensions, and stretch size-1 dimensions."""
    x = g.operand(want=lambda v: v.rank < MAX_RANK)
    out_rank = g.draw(st.integers(x.rank + 1, min(MAX_RANK, x.rank + 2)))
    dims = sorted(g.draw(st.lists(st.integers(0, out_rank - 1), min_size=x.rank, max_size=x.rank, unique=True)))
    dim_sizes = [g.dim(1, 4) for _ in range(out_rank)]
    for i, d in enumerate(dims):
        dim_sizes[d] = x.shape[i] if x.shape[i] != 1 else g.dim(1, 4)
    shape = tuple(dim_sizes)
    g.emit("broadcast_in_dim", f"broadcast_in_dim({x}, shape={shape}, dims={tuple(dims)})",
           lambda a: lax.broadcast_in_dim(a, shape, tuple(dims)), [x], [(shape, x.dtype, x.mag)])


def _factor_shape(g: Gen, size: int) -> tuple[int, ...]:
    """A random shape with `size` elements (rank 1..3, or 0 for size 1)."""
    rank = g.draw(st.integers(0 if size == 1 else 1, 3))
    shape, rest = [], size
    for _ in range(rank - 1):
        d = g.choice([d for d in range(1, rest + 1) if rest % d == 0])
        shape.append(d)
        rest //= d
    return tuple(shape + [rest]) if rank else ()


def reshape(g: Gen):
    """reshape to another shape with the same number of elements."""
    x = g.operand()
    shape = _factor_shape(g, x.size)
    g.emit("reshape", f"reshape({x}, {shape})", lambda a: lax.reshape(a, shape), [x], [(shape, x.dtype, x.mag)])


def transpose(g: Gen):
    """transpose by a random permutation other than the identity (rank >= 2)."""
    x = g.operand(want=lambda v: v.rank >= 2, fresh=lambda: g.shape(g.draw(st.integers(2, 3))))
    perm = _moving_perm(g, x.rank)
    g.emit("transpose", f"transpose({x}, {perm})", lambda a: lax.transpose(a, perm), [x],
           [(tuple(x.shape[p] for p in perm), x.dtype, x.mag)])


def reduce_sum(g: Gen):
    """reduce (add) over a non-empty set of dimensions."""
    x = g.operand(want=lambda v: v.rank >= 1 and v.mag * v.size <= v.limit, fresh=lambda: g.shape(g.dim(1, 3)))
    axes = tuple(g.subset(x.rank))
    shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    n = math.prod(x.shape[i] for i in axes)
    g.emit("reduce_sum", f"reduce_sum({x}, axes={axes})", lambda a: lax.reduce_sum(a, axes), [x],
           [(shape, x.dtype, n * x.mag)])


def reduce_max(g: Gen):
    """reduce (max) over a non-empty set of dimensions."""
    x = g.operand(want=lambda v: v.rank >= 1, fresh=lambda: g.shape(g.dim(1, 3)))
    axes = tuple(g.subset(x.rank))
    shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    g.emit("reduce_max", f"reduce_max({x}, axes={axes})", lambda a: lax.reduce_max(a, axes), [x],
           [(shape, x.dtype, x.mag)])


def _slice_params(g: Gen, shape):
    start, limit, strides = [], [], []
    for d in shape:
        lo = g.draw(st.integers(0, d - 1))
        start.append(lo)
        limit.append(g.draw(st.integers(lo + 1, d)))
        strides.append(g.choice([1, 1, 2, 3]))
    out = tuple(-(-(hi - lo) // s) for lo, hi, s in zip(start, limit, strides))
    return tuple(start), tuple(limit), tuple(strides), out


def slice_(g: Gen):
    """slice with random start, limit and stride per dimension."""
    x = g.operand(want=lambda v: v.rank >= 1, fresh=lambda: g.shape(g.dim(1, 3)))
    start, limit, strides, shape = _slice_params(g, x.shape)
    g.emit("slice", f"slice({x}, start={start}, limit={limit}, strides={strides})",
           lambda a: lax.slice(a, start, limit, strides), [x], [(shape, x.dtype, x.mag)])


def concatenate(g: Gen):
    """concatenate 2-3 values along one dimension (the other dimensions agree)."""
    x = g.operand(want=lambda v: v.rank >= 1, fresh=lambda: g.shape(g.dim(1, 3)))
    dim = g.draw(st.integers(0, x.rank - 1))

    def like_x(v: Var) -> bool:
        return v.rank == x.rank and all(a == b for i, (a, b) in enumerate(zip(v.shape, x.shape)) if i != dim)

    def fresh():
        return x.shape[:dim] + (g.dim(),) + x.shape[dim + 1:]

    parts = [x] + [g.operand(dtype=x.dtype, want=like_x, fresh=fresh) for _ in range(g.draw(st.integers(1, 2)))]
    shape = x.shape[:dim] + (sum(p.shape[dim] for p in parts),) + x.shape[dim + 1:]
    names = ", ".join(map(str, parts))
    g.emit("concatenate", f"concatenate([{names}], dim={dim})", lambda *a: lax.concatenate(a, dim), parts,
           [(shape, x.dtype, max(p.mag for p in parts))])


def convert(g: Gen):
    """convert to another of the table's dtypes (only values that fit the target's range)."""
    x = g.operand()
    targets = [d for d in g.dtypes if d != x.dtype and x.mag <= MAG_LIMIT[d]] or [x.dtype]
    to = g.choice(targets)
    mag = x.mag + 1 if np.issubdtype(to, np.integer) else x.mag
    g.emit("convert", f"convert({x}, {to.name})", lambda a: lax.convert_element_type(a, to), [x],
           [(x.shape, to, mag)])


def pad(g: Gen):
    """pad with a constant: low/high edges (sometimes negative) and interior padding."""
    x = g.operand(want=lambda v: v.rank >= 1, fresh=lambda: g.shape(g.dim(1, 3)))
    value = g.choice([0, 0, 1, -2])
    edges, sizes = [], []
    for d in x.shape:
        lo, hi, interior = g.choice([0, 0, 1, 2, -1]), g.choice([0, 0, 1, 2, -1]), g.choice([0, 0, 1])
        size = d + lo + hi + (d - 1) * interior
        if size < 1:
            lo, hi, size = 0, 0, d + (d - 1) * interior
        edges.append((lo, hi, interior))
        sizes.append(size)
    config, shape = tuple(edges), tuple(sizes)
    g.emit("pad", f"pad({x}, {value}, {config})", lambda a: lax.pad(a, np.asarray(value, a.dtype), config), [x],
           [(shape, x.dtype, max(x.mag, abs(value)))])


def reverse(g: Gen):
    """reverse along a non-empty set of dimensions."""
    x = g.operand(want=lambda v: v.rank >= 1, fresh=lambda: g.shape(g.dim(1, 3)))
    dims = tuple(g.subset(x.rank))
    g.emit("reverse", f"reverse({x}, dims={dims})", lambda a: lax.rev(a, dims), [x], [(x.shape, x.dtype, x.mag)])


# --- motifs: small clusters the rewrite patterns look for ----------------------------------------

def _small(dtype) -> float:
    """Operand bound for motifs: about three chained products of MAX_DIM-long sums stay in range."""
    return max(INPUT_MAG, MAG_LIMIT[np.dtype(dtype)] ** (1 / 3) / MAX_DIM)


def _matrix(g: Gen, rows: int | None = None, cols: int | None = None, dtype=None, max_mag=None) -> Var:
    """A rank-2 operand with the given rows/cols (either may be free), small enough to multiply
    (`mag` at most `max_mag`, by default `_small` of its dtype)."""
    def want(v: Var) -> bool:
        return ((rows is None or v.shape[0] == rows) and (cols is None or v.shape[1] == cols)
                and v.mag <= (max_mag if max_mag is not None else _small(v.dtype)))

    return g.operand(rank=2, dtype=dtype, want=want, fresh=lambda: (rows or g.dim(), cols or g.dim()))


def dot_chain(g: Gen):
    """(A·B)·C or A·(B·C), mostly in the order that needs more flops, so reassociation pays."""
    a = _matrix(g)
    m, k = a.shape
    n = g.dim()
    b = _matrix(g, rows=k, cols=n, dtype=a.dtype)
    c_shape = (n,) if g.coin(25) else (n, g.dim())
    c = g.operand(shape=c_shape, dtype=a.dtype, max_mag=_small(a.dtype))
    p = c_shape[1] if len(c_shape) == 2 else 1
    left_flops, right_flops = m * k * n + m * n * p, k * n * p + m * k * p
    left = left_flops > right_flops if not g.coin(20) else g.coin()
    out = _mm_shape((m, n), c_shape)
    mag = k * n * a.mag * b.mag * c.mag
    if left:
        g.emit("dot_chain", f"matmul(matmul({a}, {b}), {c})", lambda x, y, z: _mm(_mm(x, y), z),
               [a, b, c], [(out, a.dtype, mag)])
    else:
        g.emit("dot_chain", f"matmul({a}, matmul({b}, {c}))", lambda x, y, z: _mm(x, _mm(y, z)),
               [a, b, c], [(out, a.dtype, mag)])


def low_rank_update(g: Gen):
    """x·(W + A·B) with a thin A·B (distributivity), or (W + V)·x."""
    x = _matrix(g)
    m, d = x.shape
    e = g.dim()
    w = _matrix(g, rows=d, cols=e, dtype=x.dtype)
    r = g.dim(1, 3)
    a = _matrix(g, rows=d, cols=r, dtype=x.dtype)
    b = _matrix(g, rows=r, cols=e, dtype=x.dtype)
    mag = d * x.mag * (w.mag + r * a.mag * b.mag)
    if g.coin(70):
        g.emit("low_rank_update", f"matmul({x}, add({w}, matmul({a}, {b})))",
               lambda x_, w_, a_, b_: _mm(x_, lax.add(w_, _mm(a_, b_))), [x, w, a, b], [((m, e), x.dtype, mag)])
    else:  # (W + A·B)·y with y [e, p]
        y = _matrix(g, rows=e, dtype=x.dtype)
        mag = e * y.mag * (w.mag + r * a.mag * b.mag)
        g.emit("low_rank_update", f"matmul(add({w}, matmul({a}, {b})), {y})",
               lambda w_, a_, b_, y_: _mm(lax.add(w_, _mm(a_, b_)), y_), [w, a, b, y],
               [((d, y.shape[1]), x.dtype, mag)])


def shared_dot_sum(g: Gen):
    """x·W + x·V (a common left factor) or W·x + V·x (a common right factor)."""
    x = _matrix(g)
    if g.coin():
        n = g.dim()
        w = _matrix(g, rows=x.shape[1], cols=n, dtype=x.dtype)
        v = _matrix(g, rows=x.shape[1], cols=n, dtype=x.dtype)
        mag = x.shape[1] * x.mag * (w.mag + v.mag)
        g.emit("shared_dot_sum", f"add(matmul({x}, {w}), matmul({x}, {v}))",
               lambda x_, w_, v_: lax.add(_mm(x_, w_), _mm(x_, v_)), [x, w, v], [((x.shape[0], n), x.dtype, mag)])
    else:
        m = g.dim()
        w = _matrix(g, rows=m, cols=x.shape[0], dtype=x.dtype)
        v = _matrix(g, rows=m, cols=x.shape[0], dtype=x.dtype)
        mag = x.shape[0] * x.mag * (w.mag + v.mag)
        g.emit("shared_dot_sum", f"add(matmul({w}, {x}), matmul({v}, {x}))",
               lambda x_, w_, v_: lax.add(_mm(w_, x_), _mm(v_, x_)), [x, w, v], [((m, x.shape[1]), x.dtype, mag)])


def reduce_of_dot(g: Gen):
    """sum(x·W) over rows, columns, or both."""
    x = _matrix(g)
    w = _matrix(g, rows=x.shape[1], dtype=x.dtype)
    axes = g.choice([(0,), (1,), (0, 1)])
    full = (x.shape[0], w.shape[1])
    shape = tuple(d for i, d in enumerate(full) if i not in axes)
    mag = math.prod(full) * x.shape[1] * x.mag * w.mag
    g.emit("reduce_of_dot", f"reduce_sum(matmul({x}, {w}), axes={axes})",
           lambda a, b: lax.reduce_sum(_mm(a, b), axes), [x, w], [(shape, x.dtype, mag)])


def slice_of_concat(g: Gen):
    """slice(concatenate([x, y], d)) reading only x or only y (or straddling both)."""
    x = g.operand(want=lambda v: v.rank >= 1, fresh=lambda: g.shape(g.dim(1, 3)))
    dim = g.draw(st.integers(0, x.rank - 1))
    y_shape = x.shape[:dim] + (g.dim(),) + x.shape[dim + 1:]
    y = g.operand(shape=y_shape, dtype=x.dtype)
    cat_shape = x.shape[:dim] + (x.shape[dim] + y.shape[dim],) + x.shape[dim + 1:]
    start, limit, strides, _ = _slice_params(g, cat_shape)
    # along `dim`, read inside x, inside y, or anywhere
    lo, hi = g.choice([(0, x.shape[dim]), (x.shape[dim], cat_shape[dim]), (0, cat_shape[dim])])
    s0 = g.draw(st.integers(lo, hi - 1))
    start = start[:dim] + (s0,) + start[dim + 1:]
    limit = limit[:dim] + (g.draw(st.integers(s0 + 1, hi)),) + limit[dim + 1:]
    shape = tuple(-(-(b - a) // s) for a, b, s in zip(start, limit, strides))
    g.emit("slice_of_concat",
           f"slice(concatenate([{x}, {y}], dim={dim}), start={start}, limit={limit}, strides={strides})",
           lambda a, b: lax.slice(lax.concatenate([a, b], dim), start, limit, strides), [x, y],
           [(shape, x.dtype, max(x.mag, y.mag))])


def transpose_of_transpose(g: Gen):
    """transpose(transpose(x, p), q): sometimes the identity, sometimes one transpose."""
    x = g.operand(want=lambda v: v.rank >= 2, fresh=lambda: g.shape(g.draw(st.integers(2, 3))))
    p = _moving_perm(g, x.rank)
    q = tuple(np.argsort(p).tolist()) if g.coin() else _moving_perm(g, x.rank)
    mid = tuple(x.shape[i] for i in p)
    g.emit("transpose_of_transpose", f"transpose(transpose({x}, {p}), {q})",
           lambda a: lax.transpose(lax.transpose(a, p), q), [x], [(tuple(mid[i] for i in q), x.dtype, x.mag)])


def reshape_of_reshape(g: Gen):
    """reshape(reshape(x)): sometimes back to x's own shape."""
    x = g.operand()
    mid = _factor_shape(g, x.size)
    out = x.shape if g.coin() else _factor_shape(g, x.size)
    g.emit("reshape_of_reshape", f"reshape(reshape({x}, {mid}), {out})",
           lambda a: lax.reshape(lax.reshape(a, mid), out), [x], [(out, x.dtype, x.mag)])


IDENTITIES = {  # name -> (jax function, text template, float only)
    "x*1": (lambda a: lax.mul(a, _full(a, 1)), "mul({x}, 1)", False),
    "1*x": (lambda a: lax.mul(_full(a, 1), a), "mul(1, {x})", False),
    "x+(-0.0)": (lambda a: lax.add(a, _full(a, -0.0)), "add({x}, -0.0)", True),
    "x+0": (lambda a: lax.add(a, _full(a, 0)), "add({x}, 0)", False),
    "x-0": (lambda a: lax.sub(a, _full(a, 0)), "sub({x}, 0)", False),
    "x/1": (lambda a: lax.div(a, _full(a, 1)), "div({x}, 1)", True),
    "-(-x)": (lambda a: lax.neg(lax.neg(a)), "neg(neg({x}))", False),
}


def identity_arith(g: Gen):
    """x*1, 1*x, x+(-0.0), x+0, x-0, x/1, -(-x)."""
    name = g.choice(sorted(IDENTITIES))
    fn, template, float_only = IDENTITIES[name]
    x = g.operand(floats=float_only)
    g.emit("identity_arith", template.format(x=x), fn, [x], [(x.shape, x.dtype, x.mag)])


def select_same(g: Gen):
    """select(compare(a, b), x, x)."""
    x = g.operand()
    a = g.operand(shape=x.shape)
    b = g.operand(shape=x.shape, dtype=a.dtype)
    g.emit("select_same", f"select(compare({a}, {b}, LT), {x}, {x})",
           lambda a_, b_, x_: lax.select(lax.lt(a_, b_), x_, x_), [a, b, x], [(x.shape, x.dtype, x.mag)])


def dots_sharing_operand(g: Gen):
    """x·W1 and x·W2 (a shared left operand), or A1·W and A2·W (a shared right one): two results."""
    x = _matrix(g)
    lim = x.limit / (MAX_DIM * max(x.mag, 1.0))
    if g.coin():
        w1 = _matrix(g, rows=x.shape[1], dtype=x.dtype, max_mag=lim)
        w2 = g.operand(rank=2, dtype=x.dtype, max_mag=lim, want=lambda v: v.shape[0] == x.shape[1] and v is not w1,
                       fresh=lambda: (x.shape[1], g.dim()))
        k = x.shape[1]
        g.emit("dots_sharing_operand", f"matmul({x}, {w1}), matmul({x}, {w2})",
               lambda a, b, c: (_mm(a, b), _mm(a, c)), [x, w1, w2],
               [((x.shape[0], w1.shape[1]), x.dtype, k * x.mag * w1.mag),
                ((x.shape[0], w2.shape[1]), x.dtype, k * x.mag * w2.mag)])
    else:
        a1 = _matrix(g, cols=x.shape[0], dtype=x.dtype, max_mag=lim)
        a2 = g.operand(rank=2, dtype=x.dtype, max_mag=lim, want=lambda v: v.shape[1] == x.shape[0] and v is not a1,
                       fresh=lambda: (g.dim(), x.shape[0]))
        k = x.shape[0]
        g.emit("dots_sharing_operand", f"matmul({a1}, {x}), matmul({a2}, {x})",
               lambda w, a, b: (_mm(a, w), _mm(b, w)), [x, a1, a2],
               [((a1.shape[0], x.shape[1]), x.dtype, k * x.mag * a1.mag),
                ((a2.shape[0], x.shape[1]), x.dtype, k * x.mag * a2.mag)])


def dot_of_concat(g: Gen):
    """x·[W1 W2] (weights concatenated by columns) or [A1; A2]·W (rows)."""
    x = _matrix(g)
    lim = x.limit / (MAX_DIM * max(x.mag, 1.0))
    if g.coin():
        k = x.shape[1]
        w1 = _matrix(g, rows=k, dtype=x.dtype, max_mag=lim)
        w2 = _matrix(g, rows=k, dtype=x.dtype, max_mag=lim)
        shape = (x.shape[0], w1.shape[1] + w2.shape[1])
        g.emit("dot_of_concat", f"matmul({x}, concatenate([{w1}, {w2}], dim=1))",
               lambda a, b, c: _mm(a, lax.concatenate([b, c], 1)), [x, w1, w2],
               [(shape, x.dtype, k * x.mag * max(w1.mag, w2.mag))])
    else:
        k = x.shape[0]
        a1 = _matrix(g, cols=k, dtype=x.dtype, max_mag=lim)
        a2 = _matrix(g, cols=k, dtype=x.dtype, max_mag=lim)
        shape = (a1.shape[0] + a2.shape[0], x.shape[1])
        g.emit("dot_of_concat", f"matmul(concatenate([{a1}, {a2}], dim=0), {x})",
               lambda w, a, b: _mm(lax.concatenate([a, b], 0), w), [x, a1, a2],
               [(shape, x.dtype, k * x.mag * max(a1.mag, a2.mag))])


def slice_of_dot(g: Gen):
    """(A·B)[rows, cols]: only part of a product is read."""
    a = _matrix(g)
    b = _matrix(g, rows=a.shape[1], dtype=a.dtype)
    start, limit, strides, shape = _slice_params(g, (a.shape[0], b.shape[1]))
    g.emit("slice_of_dot", f"slice(matmul({a}, {b}), start={start}, limit={limit}, strides={strides})",
           lambda x, y: lax.slice(_mm(x, y), start, limit, strides), [a, b],
           [(shape, a.dtype, a.shape[1] * a.mag * b.mag)])


# --- the table --------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class OpKind:
    name: str
    rule: Callable[[Gen], None]
    weight: int = 1
    motif: bool = False


OP_TABLE: tuple[OpKind, ...] = (
    # motifs: small clusters of ops that patterns look for
    OpKind("identity_arith", identity_arith, 2, motif=True),
    OpKind("dot_chain", dot_chain, 3, motif=True),
    OpKind("low_rank_update", low_rank_update, 2, motif=True),
    OpKind("shared_dot_sum", shared_dot_sum, 2, motif=True),
    OpKind("reduce_of_dot", reduce_of_dot, 2, motif=True),
    OpKind("slice_of_concat", slice_of_concat, 2, motif=True),
    OpKind("transpose_of_transpose", transpose_of_transpose, 2, motif=True),
    OpKind("reshape_of_reshape", reshape_of_reshape, 2, motif=True),
    OpKind("select_same", select_same, 2, motif=True),
    OpKind("dots_sharing_operand", dots_sharing_operand, 2, motif=True),
    OpKind("dot_of_concat", dot_of_concat, 2, motif=True),
    OpKind("slice_of_dot", slice_of_dot, 2, motif=True),
    # plain op kinds
    OpKind("unary", unary, 3),
    OpKind("binary", binary, 3),
    OpKind("divide", divide, 2),
    OpKind("compare_select", compare_select, 2),
    OpKind("clamp", clamp, 2),
    OpKind("matmul", matmul, 3),
    OpKind("batched_matmul", batched_matmul, 2),
    OpKind("broadcast_in_dim", broadcast_in_dim, 2),
    OpKind("reshape", reshape, 2),
    OpKind("transpose", transpose, 2),
    OpKind("reduce_sum", reduce_sum, 2),
    OpKind("reduce_max", reduce_max, 2),
    OpKind("slice", slice_, 2),
    OpKind("concatenate", concatenate, 2),
    OpKind("convert", convert, 2),
    OpKind("pad", pad, 2),
    OpKind("reverse", reverse, 2),
)

OP_KINDS: dict[str, OpKind] = {k.name: k for k in OP_TABLE}


# --- strategies -------------------------------------------------------------------------------

def _table(kinds: Sequence[str] | None, motifs: bool) -> list[OpKind]:
    table = [OP_KINDS[k] for k in kinds] if kinds is not None else list(OP_TABLE)
    if not motifs:
        table = [k for k in table if not k.motif]
    if not table:
        raise ValueError("no op kinds to draw from")
    return table


def recipes(max_ops: int = 8, dtypes: Sequence[str] = DEFAULT_DTYPES, kinds: Sequence[str] | None = None,
            motifs: bool = True, min_ops: int = 1) -> st.SearchStrategy[RandomFunction]:
    """Strategy of `RandomFunction`s with `min_ops..max_ops` table steps (a motif is one step)."""
    table = _table(kinds, motifs)
    # Motifs first: hypothesis often draws its simplest choice (index 0) and shrinks towards it.
    weighted = [k for k in sorted(table, key=lambda k: not k.motif) for _ in range(k.weight)]

    @st.composite
    def draw_function(draw) -> RandomFunction:
        g = Gen(draw, dtypes)
        for _ in range(draw(st.integers(min_ops, max_ops))):
            kind = weighted[draw(st.integers(0, len(weighted) - 1))]
            kind.rule(g)
        return g.function()

    return draw_function()


def jax_programs(max_ops: int = 8, dtypes: Sequence[str] = DEFAULT_DTYPES, kinds: Sequence[str] | None = None,
                 motifs: bool = True, min_ops: int = 1) -> st.SearchStrategy:
    """Strategy of `(fn, args)`: a random JAX function and numpy arguments for it."""
    from shlo_env.execute import runtime

    def with_args(fn_seed):
        fn, seed = fn_seed
        return fn, tuple(runtime.random_inputs(fn.specs(), seed))

    return st.tuples(recipes(max_ops, dtypes, kinds, motifs, min_ops), st.integers(0, 2**16)).map(with_args)


def programs(max_ops: int = 8, dtypes: Sequence[str] = DEFAULT_DTYPES, kinds: Sequence[str] | None = None,
             motifs: bool = True, min_ops: int = 1) -> st.SearchStrategy:
    """Strategy of lowered `shlo_env.ir.program.Program`s (with the drawn arguments as example inputs).

    The drawn function stays reachable as `program.fn` (its repr is the program as pseudo-Python).
    """
    from shlo_env.ir.program import lower

    def lowered(fn_args):
        fn, args = fn_args
        program = lower(fn, *args, name="random_program")
        program.fn = fn
        return program

    return jax_programs(max_ops, dtypes, kinds, motifs, min_ops).map(lowered)


def sample(n: int, *, seed: int = 0, **strategy_kwargs) -> list[tuple[RandomFunction, tuple[np.ndarray, ...]]]:
    """`n` distinct `(fn, args)` drawn by `jax_programs(**strategy_kwargs)`: a fixed list per seed.

    Hypothesis draws them outside any test from `seed`; programs it draws twice are kept once.
    Handy for parametrized tests (one test item per program) and fixed benchmark sets.
    """
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    drawn: dict[str, tuple] = {}

    class Enough(Exception):
        pass

    @hypothesis_seed(seed)
    @settings(max_examples=10 * n, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), print_blob=False, report_multiple_bugs=False)
    @given(jax_programs(**strategy_kwargs))
    def collect(fn_args):
        if len(drawn) >= n:
            raise Enough  # stops hypothesis early
        drawn.setdefault(repr(fn_args[0]), fn_args)

    try:
        collect()
    except Enough:
        pass
    return list(drawn.values())[:n]


def fire_rate(n: int = 200, patterns=None, **strategy_kwargs) -> tuple[float, Counter]:
    """Fraction of `n` drawn programs on which `augment` records at least one alternative, and
    how many alternatives each pattern recorded (deterministic: hypothesis is derandomized)."""
    from hypothesis import HealthCheck, given, settings

    from shlo_env.rewrite.driver import augment, list_alternatives
    from shlo_env.patterns import all_patterns

    patterns = all_patterns() if patterns is None else patterns
    fired, total, per_pattern = 0, 0, Counter[str]()

    @settings(max_examples=n, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(programs(**strategy_kwargs))
    def measure(program):
        nonlocal fired, total
        total += 1
        alts = list_alternatives(augment(program, patterns))
        fired += bool(alts)
        for a in alts:
            per_pattern.update(a.labels[1:])

    measure()
    return (fired / total if total else 0.0), per_pattern


# --- conformance families -----------------------------------------------------------------------
# What third-party programs contain and the op table above does not draw: complex, f64,
# bf16/f16, unsigned and i1 types, 0-sized tensors, while/cond with patterns inside and around
# them, chlo ops, multiply-add chains (checked compiled by XLA, which contracts them into FMAs).
# Each family is a function of a dtype; `conformance_programs()` lowers every (family, dtype)
# pair on seeded inputs. Sharding attributes need hand-written text: see `SHARDED_TEXT`.

def _madd_chain(x, y):
    a = x * y + x
    b = a * 2 + y
    return jnp.concatenate([a * b + x, (b * x - a)[::-1]]), jnp.sum(a * y) * 1 + 0


def _loop_and_cond(x, y):
    def body(i, c):
        return (c * 1 + y) * x - c
    z = lax.fori_loop(0, 3, body, x * y + x)
    w = lax.cond(jnp.sum(jnp.abs(z)) > 0, lambda v: v * y + x, lambda v: -(-v), z)
    return w.reshape(w.shape[::-1]).T if w.ndim == 2 else w + 0, z


def _shape_moves(x, y):
    t = jnp.transpose(jnp.transpose(x))
    return (jnp.broadcast_to(jnp.sum(x, axis=0), x.shape) + y).reshape(-1)[::2], jnp.concatenate([t, y])[: x.shape[0]]


def _chlo_ops(x, y):  # float only: square, erf, erfc, lgamma, digamma, atan, sinh lower to chlo
    return jnp.square(x) + jax.scipy.special.erf(y) * 1, jax.scipy.special.erfc(x) + jnp.sinh(y * 0.1) \
        + jnp.arctan(x) + jax.lax.lgamma(jnp.abs(y) + 1) + jax.lax.digamma(jnp.abs(x) + 1)


def _bool_ops(x, y):
    p, q = x > 0, y > 0
    return jnp.logical_and(p, q) | jnp.logical_not(jnp.logical_not(p)), jnp.where(p, x, x) * 1 + 0


CONFORMANCE_FAMILIES: dict[str, tuple[Callable, tuple[str, ...]]] = {
    "madd_chain": (_madd_chain, ("float32", "float64", "bfloat16", "float16", "complex64", "complex128")),
    "loop_and_cond": (_loop_and_cond, ("float32", "float64", "complex64", "int32", "uint8", "uint32")),
    "shape_moves": (_shape_moves, ("float32", "bfloat16", "complex64", "uint8", "int8")),
    "chlo_ops": (_chlo_ops, ("float32", "float64", "float16")),
    "bool_ops": (_bool_ops, ("float32", "int32")),
}
CONFORMANCE_SHAPES = ((4, 3), (0, 3))  # 0-sized tensors too


def conformance_inputs(dtype, shape, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    import ml_dtypes  # noqa: F401  (bfloat16)

    from shlo_env.execute.runtime import random_inputs

    spec = jax.ShapeDtypeStruct(shape, np.dtype(dtype))
    a, b = random_inputs([spec, spec], seed)
    return a, b


def conformance_programs(seed: int = 0) -> list[tuple[str, Any]]:
    """(id, Program) for every conformance family, dtype and shape, lowered with 64-bit types on."""
    from shlo_env._jax_compat import enable_x64
    from shlo_env.ir.program import lower

    out = []
    with enable_x64():
        for name, (fn, dtypes) in CONFORMANCE_FAMILIES.items():
            for dtype in dtypes:
                for shape in CONFORMANCE_SHAPES:
                    pid = f"{name}-{dtype}-{'x'.join(map(str, shape))}"
                    out.append((pid, lower(fn, *conformance_inputs(dtype, shape, seed), name=pid)))
    return out


SHARDED_TEXT = """
func.func @main(%x: tensor<4xf32>, %c: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  %b = stablehlo.broadcast_in_dim %x, dims = [0] : (tensor<4xf32>) -> tensor<4x8xf32>
  %k = stablehlo.constant dense<1.0> : tensor<4x8xf32>
  %m = stablehlo.multiply %b, %k {mhlo.sharding = "{devices=[1,2]<=[2]}"} : tensor<4x8xf32>
  %y = stablehlo.add %m, %c {mhlo.sharding = "{devices=[1,2]<=[2]}", mhlo.frontend_attributes = {t = "a"}} : tensor<4x8xf32>
  %e = stablehlo.exponential %x {mhlo.sharding = "{devices=[2]<=[2]}"} : tensor<4xf32>
  %f = stablehlo.exponential %e {mhlo.sharding = "{devices=[2]<=[2]}"} : tensor<4xf32>
  return %y, %f : tensor<4x8xf32>, tensor<4xf32>
}
"""
