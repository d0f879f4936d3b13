"""Host callbacks and tokens: searching around them, and putting them back.

`jax.debug.print`, `jax.debug.callback`, `jax.pure_callback`, `jax.experimental.io_callback` and
Equinox's runtime checks (`eqx.error_if`) lower to a `stablehlo.custom_call` of a Python
callback (jax 0.10: `@xla_ffi_python_cpu_callback` / `..._gpu_callback`, with
`mhlo.backend_config = {index = i}`). The index points into the list of Python functions that
jax hands to XLA when *it* compiles the module, in the process that traced it: the module alone
cannot run anywhere else (compiled without that list, the call segfaults), and `jax.export`
cannot serialize it. Ordered effects (`io_callback(ordered=True)`) also thread a
`!stablehlo.token` through `main`'s arguments and results.

The search never runs such a program. `cut(module)` makes a program without them: every op at
the top level of `main` that holds a host callback anywhere inside it, or reads or makes a
token (the "cut ops": a callback, or a `case`/`while` around one), is taken out; the values it
reads become extra *outputs* of the cut program (so verification compares what each callback
receives, as it compares outputs), the values it makes become extra *inputs* (drawn like any
input: what a callback returns is not ours to know), and token arguments and results are
dropped. Rewrites of the cut program can therefore neither move, duplicate, drop nor reorder a
callback: it is not there. `Cut.stitch(optimized)` puts the cut ops back, unchanged and in their
order, into the optimized program, reading the values the optimized program computes for them,
and restores `main`'s signature (tokens and attributes included), so that the stitched module
replaces the original one in jax's own compile of the user's function (`shlo_env.api.optimize`).

What is not searched: ops inside a cut op (the body of a loop that prints, the branch of an
`eqx.error_if`) stay as they are.
"""

from __future__ import annotations

import dataclasses
import heapq
import re

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func

from shlo_env.ir.ops import as_operation, block_ops, walk
from shlo_env.ir.program import Program, context, find_main, ir_scope, parse_module

__all__ = ["HOST_CALLBACK", "LEGACY_CALLBACK", "Cut", "CutError", "callback_ops", "callback_index",
           "cut", "describe_callbacks", "has_host_callbacks", "is_host_callback", "side_effect_sequence"]

# custom_call targets of Python host callbacks: xla_ffi_python_cpu_callback,
# xla_ffi_partitioned_python_gpu_callback, the pre-FFI xla_python_cpu_callback, ...
HOST_CALLBACK = re.compile(r"^xla_(ffi_)?(partitioned_)?python_\w*callback$")
# the pre-FFI targets carry a pointer to the Python function in `backend_config` (not an index)
LEGACY_CALLBACK = re.compile(r"^xla_python_\w*callback$")
_TARGET_IN_TEXT = re.compile(r"@xla_(?:ffi_)?(?:partitioned_)?python_\w*callback\b")


class CutError(ValueError):
    """The program cannot be cut around its callbacks, or an optimized program not stitched."""


def _target(op) -> str | None:
    op = as_operation(op)
    if op.name != "stablehlo.custom_call":
        return None
    return ir.StringAttr(op.attributes["call_target_name"]).value


def is_host_callback(op) -> bool:
    """Is `op` a `custom_call` of a Python host callback?"""
    target = _target(op)
    return target is not None and bool(HOST_CALLBACK.match(target))


def callback_index(op) -> int | None:
    """The index into jax's list of host callbacks that `op` calls (`mhlo.backend_config`)."""
    op = as_operation(op)
    if "mhlo.backend_config" not in op.attributes:
        return None
    m = re.search(r"index\s*=\s*(\d+)", str(op.attributes["mhlo.backend_config"]))
    return int(m.group(1)) if m else None


def has_host_callbacks(source: Program | ir.Module | str) -> bool:
    """Does the module (any function, any depth) call a Python host callback?"""
    if isinstance(source, str):
        return bool(_TARGET_IN_TEXT.search(source))
    module = source.module if isinstance(source, Program) else source
    return any(is_host_callback(op) for op in walk(module.operation))


def callback_ops(source: Program | ir.Module) -> list[ir.Operation]:
    """The host-callback custom calls of the module, in program order (nested ones included)."""
    module = source.module if isinstance(source, Program) else source
    return [op for op in walk(module.operation) if is_host_callback(op)]


def describe_callbacks(source: Program | ir.Module) -> str:
    """One line: which callbacks the module calls, e.g. `2 host callbacks (@xla_ffi_python_cpu_callback
    index 0, 1)`."""
    ops = callback_ops(source)
    targets = sorted({_target(op) or "" for op in ops})
    indices = ", ".join(str(callback_index(op)) for op in ops if callback_index(op) is not None)
    return (f"{len(ops)} host callback{'s' if len(ops) != 1 else ''} ("
            + ", ".join(f"@{t}" for t in targets) + (f" index {indices}" if indices else "") + ")")


def side_effect_sequence(source: Program | ir.Module) -> list[tuple[str, str]]:
    """Every op of `main` with a side effect, in program order, any depth: (op name, its
    attributes as text). Two programs whose sequences are equal call the same effects in the
    same order (what a rewrite must keep)."""
    from shlo_env.ir.ops import attribute_items, is_effectful_op, TERMINATORS

    module = source.module if isinstance(source, Program) else source
    out = []
    for op in walk(find_main(module)):
        if op.name in TERMINATORS or not is_effectful_op(op):
            continue
        out.append((op.name, ";".join(f"{k}={v}" for k, v in sorted(attribute_items(op)))))
    return out


def _is_token(t: ir.Type) -> bool:
    return "token" in str(t)


def _holds_effect(op: ir.Operation) -> bool:
    """A cut op: a host callback (at any depth inside `op`), or an op that reads or makes a token."""
    if is_host_callback(op) or any(is_host_callback(inner) for inner in walk(op)):
        return True
    return any(_is_token(v.type) for v in op.operands) or any(_is_token(r.type) for r in op.results)


@dataclasses.dataclass
class Cut:
    """A program with its host callbacks taken out (`program`), and how to put them back.

    `program`'s inputs are the original's non-token arguments, then one per value a cut op
    makes that the rest of the program reads (`extra_inputs`); its outputs are the original's
    non-token results, then one per value a cut op reads that the rest of the program makes
    (`extra_outputs`)."""

    original: ir.Module  # the inlined original, callbacks and tokens included
    program: Program  # callback-free and token-free: what the search sees
    positions: tuple[int, ...]  # index of each cut op among main's top-level ops
    kept_args: tuple[int, ...]  # original argument index of each of program's first inputs
    kept_results: tuple[int, ...]  # original result index of each of program's first outputs
    extra_inputs: tuple[tuple[int, int], ...]  # (cut op, result number) per extra input
    operand_sources: tuple[tuple[tuple, ...], ...]  # per cut op, per operand: ("arg", i) | ("cut", k, r) | ("out", m)
    result_sources: tuple[tuple, ...]  # per original result: ("kept", j) | ("arg", i) | ("cut", k, r)

    @property
    def num_cut(self) -> int:
        return len(self.positions)

    def describe(self) -> str:
        return (f"{self.num_cut} op{'s' if self.num_cut != 1 else ''} with host callbacks or tokens kept out "
                f"of the search ({len(self.extra_inputs)} extra inputs, "
                f"{len(self.program.out_specs) - len(self.kept_results)} extra outputs)")

    def extra_input_specs(self):
        return self.program.in_specs[len(self.kept_args):]

    def stitch(self, optimized: Program) -> ir.Module:
        """The original module with its non-cut ops replaced by `optimized`'s (a rewrite of
        `program`): the cut ops unchanged, in their order, each reading what `optimized`
        computes for it. Raises CutError when the optimized program's dependences would put
        a cut op after one that must follow it (a rewrite that made a callback's operand
        depend on a later callback's result)."""
        with ir_scope():
            module = ir.Module.parse(_bytecode(self.original))
            opt = ir.Module.parse(_bytecode(optimized.module))
            main, omain = find_main(module), find_main(opt)
            body, obody = main.regions[0].blocks[0], omain.regions[0].blocks[0]
            top = block_ops(body)
            cut_ops = [top[p] for p in self.positions]
            ret = top[-1]
            oret = block_ops(obody)[-1]
            n_kept_out = len(self.kept_results)
            # the optimized program's inputs: original arguments, and the cut ops' results
            for j, a in enumerate(list(obody.arguments)):
                if j < len(self.kept_args):
                    a.replace_all_uses_with(body.arguments[self.kept_args[j]])
                else:
                    k, r = self.extra_inputs[j - len(self.kept_args)]
                    a.replace_all_uses_with(cut_ops[k].results[r])
            out_values = list(oret.operands)  # after the arguments were replaced
            # the cut ops read what the optimized program computes for them
            for k, sources in enumerate(self.operand_sources):
                reads = _reads(cut_ops[k])
                for j, src in enumerate(sources):
                    if src[0] == "out":
                        _redirect(cut_ops[k], j, reads[j], out_values[n_kept_out + src[1]])
            results = []
            for src in self.result_sources:
                if src[0] == "kept":
                    results.append(out_values[src[1]])
                elif src[0] == "arg":
                    results.append(body.arguments[src[1]])
                else:
                    results.append(cut_ops[src[1]].results[src[2]])
            with ir.InsertionPoint(ret):
                new_ret = func.ReturnOp(results).operation
            ret.erase()
            # the original's other ops go (users first), the optimized program's come in
            keep = set(self.positions)
            for i in reversed(range(len(top) - 1)):
                if i not in keep:
                    _erase(top[i])
            for op in block_ops(obody)[:-1]:
                op.move_before(new_ret)
            _schedule(body, len(cut_ops))  # the cut ops are the body's first ops now
            if not module.operation.verify():
                raise CutError("the stitched module does not verify")
        return module


def _bytecode(module: ir.Module) -> bytes:
    import io

    buf = io.BytesIO()
    module.operation.write_bytecode(buf)
    return buf.getvalue()


def _schedule(body: ir.Block, num_cut: int) -> None:
    """Order `body`'s ops so every op follows what it reads and the cut ops keep their order
    (each as early as its operands allow: a callback fires as soon as its values exist, as in
    the original); the other ops keep their relative order where they can."""
    ops = block_ops(body)[:-1]
    ret = block_ops(body)[-1]
    index = {op: i for i, op in enumerate(ops)}
    deps: dict[int, set[int]] = {i: set() for i in range(len(ops))}

    def producers(op: ir.Operation):
        for inner in [op, *walk(op)]:
            for v in inner.operands:
                owner = v.owner
                if isinstance(owner, ir.Block):
                    continue
                o = _owner_op(v)
                if o is not None and o in index:
                    yield index[o]

    for i, op in enumerate(ops):
        deps[i].update(p for p in producers(op) if p != i)
    cut_idx = list(range(num_cut))
    for a, b in zip(cut_idx, cut_idx[1:]):
        deps[b].add(a)
    users: dict[int, set[int]] = {i: set() for i in deps}
    for i, ds in deps.items():
        for d in ds:
            users[d].add(i)
    cut_set = set(cut_idx)
    key = {i: ((0, i) if i in cut_set else (1, i)) for i in deps}  # a ready cut op goes first
    waiting = {i: len(ds) for i, ds in deps.items()}
    heap = [key[i] for i, n in waiting.items() if n == 0]
    heapq.heapify(heap)
    order: list[int] = []
    while heap:
        _, i = heapq.heappop(heap)
        order.append(i)
        for u in users[i]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(heap, key[u])
    if len(order) != len(ops):
        raise CutError("a rewrite made a callback's operand depend on a later callback's result "
                       "(the callbacks would have to change order)")
    for i in order:
        ops[i].move_before(ret)


def cut(module: ir.Module, *, name: str = "main", example_args=None) -> Cut | None:
    """`module` (inlined, as `program_from_module` leaves it) without its host callbacks and
    tokens (see the module doc); None when it has neither. Raises CutError for what cannot be
    cut: a pre-FFI callback target (a pointer in the module) or a callback outside `main`'s body."""
    from shlo_env.ir.program import program_from_module

    for op in walk(module.operation):
        target = _target(op)
        if target is not None and LEGACY_CALLBACK.match(target):
            raise CutError(f"@{target} holds a pointer to a Python function of the process that lowered it")
    with ir_scope():
        original = ir.Module.parse(_bytecode(module))
        work = ir.Module.parse(_bytecode(module))
        main = find_main(work)
        body = main.regions[0].blocks[0]
        top = block_ops(body)
        ret = top[-1]
        positions = tuple(i for i, op in enumerate(top[:-1]) if _holds_effect(op))
        if not positions and not any(_is_token(a.type) for a in body.arguments) \
                and not any(_is_token(v.type) for v in ret.operands):
            return None
        cut_ops = [top[p] for p in positions]
        where = {op: k for k, op in enumerate(cut_ops)}

        def producer(v) -> tuple | None:
            owner = v.owner
            if isinstance(owner, ir.Block):
                return ("arg", ir.BlockArgument(v).arg_number) if owner == body else None
            o = owner.operation if hasattr(owner, "operation") else owner
            if o in where:
                return ("cut", where[o], ir.OpResult(v).result_number)
            return None

        # what the cut ops read
        extra_out_values: list = []
        operand_sources = []
        for op in cut_ops:
            sources = []
            for v in _reads(op):
                src = producer(v)
                if src is None:
                    m = next((m for m, w in enumerate(extra_out_values) if w == v), None)
                    if m is None:
                        m = len(extra_out_values)
                        extra_out_values.append(v)
                    src = ("out", m)
                sources.append(src)
            operand_sources.append(tuple(sources))
        # main's results
        kept_results: list[int] = []
        result_sources: list[tuple] = []
        kept_out_values: list = []
        for i, v in enumerate(ret.operands):
            src = producer(v)
            if _is_token(v.type):
                if src is None:
                    raise CutError(f"result {i} is a token made outside the ops that were cut")
                result_sources.append(src)
            else:
                result_sources.append(("kept", len(kept_results)))
                kept_results.append(i)
                kept_out_values.append(v)
        # what the cut ops make that the rest reads (or returns): extra inputs
        extra_inputs = []
        for k, op in enumerate(cut_ops):
            for r, res in enumerate(op.results):
                if _is_token(res.type):
                    continue
                if any(u not in where for u in _uses(res)) or any(w == res for w in kept_out_values):
                    extra_inputs.append((k, r))
        loc = ir.Location.unknown(context())
        for k, r in extra_inputs:
            arg = body.add_argument(cut_ops[k].results[r].type, loc)
            old = cut_ops[k].results[r]
            kept_out_values = [arg if w == old else w for w in kept_out_values]
            extra_out_values = [arg if w == old else w for w in extra_out_values]
            old.replace_all_uses_with(arg)
        with ir.InsertionPoint(ret):
            func.ReturnOp(kept_out_values + extra_out_values)
        ret.erase()
        for op in reversed(cut_ops):
            _erase(op)
        for i in reversed(range(len(body.arguments))):
            a = body.arguments[i]
            if _is_token(a.type):
                if next(iter(a.uses), None) is not None:
                    raise CutError(f"argument {i} (a token) is read by an op that was not cut")
                body.erase_argument(i)
        original_arg_types = list(ir.FunctionType(ir.TypeAttr(find_main(original).attributes["function_type"]).value).inputs)
        kept_args = [i for i, t in enumerate(original_arg_types) if not _is_token(t)]
        fn_type = ir.FunctionType.get([a.type for a in body.arguments], [v.type for v in kept_out_values + extra_out_values])
        main.attributes["function_type"] = ir.TypeAttr.get(fn_type)
        for attr in ("arg_attrs", "res_attrs"):
            if attr in main.attributes:
                del main.attributes[attr]
        if not work.operation.verify():
            raise CutError("the program without its callbacks does not verify")
    program = program_from_module(work, name=name, source="jax (host callbacks cut out)", inline=False)
    return Cut(original, program, positions, tuple(kept_args), tuple(kept_results), tuple(extra_inputs),
               tuple(operand_sources), tuple(result_sources))


def _erase(op: ir.Operation) -> None:
    """Erase `op`, which nothing may read any more (erasing an op still read corrupts memory)."""
    for r in op.results:
        if next(iter(r.uses), None) is not None:
            raise CutError(f"{op.name} is still read where it was to be removed")
    op.erase()


def _owner_op(value) -> ir.Operation | None:
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    return owner.operation if hasattr(owner, "operation") else owner


def _reads(op: ir.Operation) -> list:
    """What `op` reads: its operands, then the values its regions use from outside it
    (StableHLO's `case` and `while` regions may capture values), each once, in order."""
    op = as_operation(op)
    inner = list(walk(op))
    if not inner:
        return list(op.operands)
    inside = set(inner)
    blocks = [b for o in [op, *inner] for r in o.regions for b in r.blocks]
    captured: list = []
    for o in inner:
        for v in o.operands:
            owner = v.owner
            if isinstance(owner, ir.Block):
                if any(owner == b for b in blocks):
                    continue
            elif _owner_op(v) in inside:
                continue
            if not any(w == v for w in captured):
                captured.append(v)
    return list(op.operands) + captured


def _redirect(op: ir.Operation, j: int, old, new) -> None:
    """Make `op` read `new` where its `j`-th read (`_reads`) was `old`."""
    if j < len(op.operands):
        op.operands[j] = new
        return
    for inner in walk(op):
        for jj, v in enumerate(list(inner.operands)):
            if v == old:
                inner.operands[jj] = new


def _uses(value):
    for use in value.uses:
        owner = use.owner
        yield owner.operation if hasattr(owner, "operation") else owner



def lower_inlined(fn, *args, name: str | None = None):
    """`jax.jit(fn, keep_unused=True).lower(*args)` and its StableHLO module in our context with
    calls inlined (as `lower` leaves it), callbacks and tokens included: (lowered, module)."""
    import io

    import jax

    from shlo_env.ir.program import ProgramError, _check_call_graph, _inline_calls

    name = name or str(getattr(fn, "__name__", "fn"))
    try:
        lowered = jax.jit(fn, keep_unused=True).lower(*args)
    except Exception as e:  # noqa: BLE001 - user code
        raise ProgramError(f"could not lower {name}: {type(e).__name__}: {e}") from e
    stablehlo = lowered.compiler_ir("stablehlo")
    if stablehlo is None:
        raise ProgramError(f"could not lower {name}: jax gave no StableHLO module")
    buf = io.BytesIO()
    stablehlo.operation.write_bytecode(buf)
    module = parse_module(buf.getvalue(), what=name)
    _check_call_graph(module)
    _inline_calls(module)
    return lowered, module
