"""Getting programs in and out: `lower(fn, *args)`, StableHLO text/bytecode files, and `Program`.

A `Program` is a StableHLO module plus what is needed to call it like the JAX function it came
from: flat input/output specs, the pytree structures, and example inputs. All modules share the
one MLIR context returned by `context()`.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import os
import re
from pathlib import Path
from typing import Any

import jax
import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir import passmanager

from shlo_env import _jax_compat
from shlo_env.ir.ops import callee_name, functions, splice_block
from shlo_env.ir.tensor_types import UnsupportedType, dtype_of, shape_of

BYTECODE_MAGIC = b"ML\xefR"


class ProgramError(ValueError):
    """A module that cannot be parsed, is not valid StableHLO, or uses what we cannot run."""


@functools.cache
def context() -> ir.Context:
    """The one MLIR context of the package (stablehlo/chlo/func registered, unregistered ops allowed)."""
    return _jax_compat.make_ir_context()


def ir_scope():
    """`with ir_scope():` activates our context and an unknown location for building IR."""
    return _Scope()


class _Scope:
    def __enter__(self):
        self._ctx = context().__enter__()
        self._loc = ir.Location.unknown(context())
        self._loc.__enter__()
        return self._ctx

    def __exit__(self, *exc):
        self._loc.__exit__(*exc)
        context().__exit__(*exc)
        return False


@dataclasses.dataclass(eq=False)
class Program:
    """A StableHLO module with its calling convention.

    `in_specs`/`out_specs` are flat (one per module argument/result). `in_tree`/`out_tree` are
    pytree definitions when the program came from a Python function, else None.
    """

    module: ir.Module
    in_specs: tuple[jax.ShapeDtypeStruct, ...]
    out_specs: tuple[jax.ShapeDtypeStruct, ...]
    in_tree: Any = None
    out_tree: Any = None
    example_args: tuple[np.ndarray, ...] | None = None
    name: str = "main"
    source: str = ""
    applied: tuple[str, ...] = ()  # pattern names applied so far, in order
    numerics: int = 0  # loosest numerics tier among applied patterns (see numerics.Numerics)
    # the search's random input sets are small perturbations of `example_args` instead of
    # N(0,1) draws (`runtime.input_sets`): for a module whose random inputs mean nothing
    # (weights as arguments, a batch-norm variance), given its inputs by the user
    perturb_examples: bool = False

    @property
    def main(self) -> ir.Operation:
        return find_main(self.module)

    @property
    def body(self) -> ir.Block:
        """The entry block of `main`, where the whole computation lives after inlining."""
        return self.main.regions[0].blocks[0]

    def text(self, debug_info: bool = False) -> str:
        return str(self.module.operation.get_asm(enable_debug_info=debug_info))  # typed `object`: bytes if binary

    def bytecode(self) -> bytes:
        buf = io.BytesIO()
        self.module.operation.write_bytecode(buf)
        return buf.getvalue()

    def portable(self) -> bytes:
        """The StableHLO portable artifact (versioned VHLO bytecode) that `jax.export` stores.

        jax emits `chlo` ops (`jnp.square`, `erfc`, ...) that have no VHLO form, so a copy is
        legalized to plain StableHLO first; the program itself keeps its ops. Locations are
        kept: XLA's metadata of a rewritten op (`op_name` in dumps and profiles) then names
        the jax ops it replaced."""
        module = legalize_chlo(self.clone().module)
        return _jax_compat.serialize_portable(str(module.operation.get_asm(enable_debug_info=True)))

    def checked_example_args(self, arrays, what: str = "example_args") -> tuple[np.ndarray, ...]:
        """`arrays` as this program's example inputs: one per input, each of its shape, cast to
        its dtype when numpy does so without loss (`same_kind`); ProgramError otherwise."""
        arrays = [np.asarray(a) for a in arrays]
        if len(arrays) != len(self.in_specs):
            raise ProgramError(f"{what}: {len(arrays)} arrays for the {len(self.in_specs)} inputs of {self.name}")
        out = []
        for i, (a, s) in enumerate(zip(arrays, self.in_specs)):
            if tuple(a.shape) != tuple(s.shape) or not np.can_cast(a.dtype, s.dtype, casting="same_kind"):
                raise ProgramError(f"{what}: input {i} is {a.dtype}{list(a.shape)}, the module takes "
                                   f"{np.dtype(s.dtype)}{list(s.shape)}")
            out.append(a.astype(s.dtype, copy=False))
        return tuple(out)

    def with_module(self, module: ir.Module) -> "Program":
        return dataclasses.replace(self, module=module)

    def clone(self) -> "Program":
        """Deep copy of the module (via bytecode, the fastest round trip); specs are shared."""
        with ir_scope():
            module = ir.Module.parse(self.bytecode())
        return self.with_module(module)

    def num_ops(self) -> int:
        count = 0

        def visit(op):
            nonlocal count
            count += 1
            return ir.WalkResult.ADVANCE

        self.main.walk(visit)
        return count - 1  # not the func itself

    def __reduce__(self):
        # Pickle/deepcopy through the bytecode round trip (MLIR objects are not picklable).
        return program_from_state, (program_state(self),)

    def __repr__(self) -> str:
        ins = ", ".join(f"{s.dtype}{list(s.shape)}" for s in self.in_specs[:4])
        if len(self.in_specs) > 4:
            ins += f", ... ({len(self.in_specs)} inputs)"
        return f"Program({self.name!r}, inputs=[{ins}], ops={self.num_ops()})"


def program_state(p: Program) -> dict:
    """A picklable dict for a Program: the module as MLIR bytecode plus its calling convention."""
    return {
        "bytecode": p.bytecode(),
        "in_specs": [(tuple(s.shape), np.dtype(s.dtype).str) for s in p.in_specs],
        "out_specs": [(tuple(s.shape), np.dtype(s.dtype).str) for s in p.out_specs],
        "in_tree": p.in_tree, "out_tree": p.out_tree,
        "example_args": p.example_args, "name": p.name, "source": p.source,
        "applied": tuple(p.applied), "numerics": int(p.numerics), "perturb_examples": p.perturb_examples,
    }


def program_from_state(state: dict) -> Program:
    import ml_dtypes  # noqa: F401  (registers bfloat16 and friends with numpy)

    module = parse_module(state["bytecode"], what=state.get("name", "program"))
    specs = lambda xs: tuple(jax.ShapeDtypeStruct(tuple(s), np.dtype(d)) for s, d in xs)  # noqa: E731
    return Program(module, specs(state["in_specs"]), specs(state["out_specs"]), state["in_tree"],
                   state["out_tree"], state["example_args"], state["name"], state["source"],
                   tuple(state["applied"]), int(state["numerics"]), bool(state.get("perturb_examples", False)))


def legalize_chlo(module: ir.Module) -> ir.Module:
    """Rewrite `chlo` ops into StableHLO in place (what XLA does when it compiles them)."""
    _jax_compat.register_stablehlo_passes()
    try:
        with ir_scope():
            passmanager.PassManager.parse("builtin.module(func.func(chlo-legalize-to-stablehlo))").run(
                module.operation)
    except Exception as e:  # noqa: BLE001 - MLIRError carries the diagnostics
        raise ProgramError(f"could not legalize chlo ops to StableHLO: {e}") from e
    return module


def find_main(module: ir.Module) -> ir.Operation:
    """The entry function: `@main`, else the only public function."""
    funcs = [op for op in module.body.operations if op.operation.name == "func.func"]
    for f in funcs:
        if ir.StringAttr(f.attributes["sym_name"]).value == "main":
            return f.operation
    public = [
        f for f in funcs
        if "sym_visibility" not in f.attributes
        or ir.StringAttr(f.attributes["sym_visibility"]).value == "public"
    ]
    if len(public) == 1:
        return public[0].operation
    raise ProgramError("module has no @main function (and not exactly one public function)")


def _specs(types) -> tuple[jax.ShapeDtypeStruct, ...]:
    return tuple(jax.ShapeDtypeStruct(shape_of(t), dtype_of(t)) for t in types)


def _signature(module: ir.Module):
    main = find_main(module)
    fn_type = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    try:
        return _specs(fn_type.inputs), _specs(fn_type.results)
    except UnsupportedType as e:
        raise ProgramError(f"unsupported program signature: {e}") from e


def _check_static(module: ir.Module) -> None:
    """Reject dynamic shapes anywhere in main: XLA needs static shapes and so do our patterns."""
    problems: list[str] = []

    def visit(op):
        for r in op.results:
            if isinstance(r.type, ir.RankedTensorType) and not ir.RankedTensorType(r.type).has_static_shape:
                problems.append(f"{op.name} produces {r.type}")
        return ir.WalkResult.ADVANCE

    find_main(module).walk(visit)
    if problems:
        raise ProgramError("dynamic shapes are not supported: " + "; ".join(problems[:3]))


def _inline_calls(module: ir.Module) -> None:
    """Inline every `func.call` into main so patterns see the whole computation.

    MLIR's `inline` pass does not inline StableHLO bodies in jax's context, so this is done
    by hand: clone the callee, splice its body in place of the call, repeat until no call is left.
    """
    funcs = functions(module)
    with context(), ir.Location.unknown(context()):
        while True:  # ends: the call graph has no cycle
            call = _first_call(find_main(module))
            if call is None:
                break
            clone = funcs[callee_name(call)].clone(ip=ir.InsertionPoint(module.body))
            splice_block(clone.regions[0].blocks[0], call)
            clone.erase()
        passmanager.PassManager.parse("builtin.module(symbol-dce)").run(module.operation)


def _calls(func: ir.Operation) -> list[str]:
    """Names of the functions `func` calls, in order."""
    names: list[str] = []

    def visit(op):
        if op.name == "func.call":
            names.append(callee_name(op))
        return ir.WalkResult.ADVANCE

    func.walk(visit)
    return names


def _check_call_graph(module: ir.Module) -> None:
    """Every call must reach a defined function, and no function may reach itself: inlining a
    recursive call never ends, and XLA crashes on recursion."""
    funcs = functions(module)
    state: dict[str, str] = {}  # name -> "open" while its callees are explored, then "done"

    def visit(name: str, path: list[str]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "open":
            cycle = path[path.index(name):] + [name]
            raise ProgramError("recursive call: " + " -> ".join(f"@{n}" for n in cycle)
                               + " (recursion cannot be inlined and XLA does not support it)")
        if name not in funcs or not funcs[name].regions[0].blocks:
            raise ProgramError(f"call to @{name}, which the module does not define")
        state[name] = "open"
        for callee in _calls(funcs[name]):
            visit(callee, path + [name])
        state[name] = "done"

    visit(ir.StringAttr(find_main(module).attributes["sym_name"]).value, [])


def _first_call(main: ir.Operation) -> ir.Operation | None:
    found = []

    def visit(op):
        if op.name == "func.call":
            found.append(op.operation)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    main.walk(visit)
    return found[0] if found else None


def parse_module(data: str | bytes, what: str = "module") -> ir.Module:
    """Parse StableHLO text, MLIR bytecode, or a StableHLO portable artifact into our context."""
    if isinstance(data, str):
        _check_elided_constants(data, what)
    elif not data.startswith(BYTECODE_MAGIC):
        _check_elided_constants(data.decode("utf-8", errors="replace"), what)
    try:
        with ir_scope():
            module = ir.Module.parse(data)
    except Exception as e:  # noqa: BLE001 - MLIRError carries the diagnostics
        module, error = None, e
    if isinstance(data, bytes) and data.startswith(BYTECODE_MAGIC) and (module is None or not _has_func(module)):
        try:  # a portable artifact parses as VHLO ops: deserialize to StableHLO first
            with ir_scope():
                return ir.Module.parse(_jax_compat.deserialize_portable(data))
        except Exception:  # noqa: BLE001
            pass
    if module is None:
        raise ProgramError(f"could not parse {what}: {error}") from None
    return module


def _has_func(module: ir.Module) -> bool:
    return any(op.operation.name == "func.func" for op in module.body.operations)


ELIDED = "dense_resource<__elided__>"  # how MLIR prints an elements attribute it was told to elide


def _check_elided_constants(text: str, name: str) -> None:
    """Reject attributes printed without their values (`large_elements_limit`): the text parses,
    but XLA cannot compile it ("Only dense elements attr are supported"). Only printed text can
    hold them (bytecode keeps the values), so the text is scanned, not the parsed module."""
    if ELIDED not in text:
        return
    found: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if ELIDED in line:
            op = re.search(r'=\s*"?([A-Za-z_]\w*\.[\w.]+)', line)
            kind = re.search(r"(tensor<[^>]*>)\s*$", line.rstrip().rstrip(")"))
            found.append(f"{op.group(1) if op else 'an op'} at line {number}"
                         + (f" ({kind.group(1)})" if kind else ""))
    shown = "; ".join(found[:3]) + (f"; and {len(found) - 3} more" if len(found) > 3 else "")
    raise ProgramError(
        f"{name}: {len(found)} constant{'s were' if len(found) > 1 else ' was'} saved without "
        f"{'their' if len(found) > 1 else 'its'} values (`{ELIDED}`, as MLIR prints with "
        f"`large_elements_limit`), so the module cannot run: {shown}. Save the module with its "
        f"constants: `jax.jit(f).lower(*args).as_text()`, or `module.operation.get_asm()` / "
        f"`.print(file=f)` without `large_elements_limit`, or as bytecode "
        f"(`module.operation.write_bytecode(f)`, `shlo_env.save(program, 'model.mlirbc')`).")


def program_from_module(module: ir.Module, *, name: str = "main", source: str = "",
                        in_tree=None, out_tree=None, example_args=None, inline: bool = True) -> Program:
    """Wrap a parsed module as a Program after checking it is something we can run."""
    _check_call_graph(module)
    if inline:
        _inline_calls(module)
    _check_static(module)
    if not module.operation.verify():
        raise ProgramError(f"{name}: module does not verify")
    in_specs, out_specs = _signature(module)
    return Program(module, in_specs, out_specs, in_tree, out_tree, example_args, name, source)


def lower(fn, *args, name: str | None = None, inline: bool = True) -> Program:
    """Lower `fn(*args)` with `jax.jit(fn, keep_unused=True)` into a Program.

    Args may be arrays, scalars, pytrees of them, or `jax.ShapeDtypeStruct`s (then the program
    has no example inputs).
    """
    name = name or str(getattr(fn, "__name__", "fn"))
    try:
        lowered = jax.jit(fn, keep_unused=True).lower(*args)
    except Exception as e:  # noqa: BLE001 - user code; report it as an input error
        raise ProgramError(f"could not lower {name}: {type(e).__name__}: {e}") from e
    stablehlo_module = lowered.compiler_ir("stablehlo")
    if stablehlo_module is None:  # jax's answer for a dialect it cannot emit
        raise ProgramError(f"could not lower {name}: jax gave no StableHLO module")
    buf = io.BytesIO()
    stablehlo_module.operation.write_bytecode(buf)
    module = parse_module(buf.getvalue(), what=name)
    leaves = jax.tree_util.tree_leaves(args)
    example = None
    if not any(isinstance(x, jax.ShapeDtypeStruct) for x in leaves):
        example = tuple(np.asarray(x) for x in leaves)
    program = program_from_module(module, name=name, source="jax", in_tree=lowered.in_tree,
                                  out_tree=lowered.out_tree, inline=inline)
    if example is not None:
        if len(example) != len(program.in_specs):
            raise ProgramError(f"{name}: {len(example)} argument leaves but the module takes "
                               f"{len(program.in_specs)} inputs")
        program.example_args = tuple(np.asarray(x, dtype=s.dtype).reshape(s.shape)
                                     for x, s in zip(example, program.in_specs))
    return program


def load(source: str | bytes | os.PathLike, *, name: str | None = None, example_args=None) -> Program:
    """Load a StableHLO module from a `.mlir` (text) or `.mlirbc` (bytecode) file, or from text/bytes.

    `example_args` (one array per input) are the module's inputs: the search verifies on them
    and on small perturbations of them (`Program.perturb_examples`) instead of N(0,1) draws."""
    data: str | bytes
    origin = "<memory>"
    if isinstance(source, (str, bytes)) and not source.strip():
        raise ProgramError("load() got an empty string: pass a file path or the module's text/bytecode")
    if isinstance(source, os.PathLike) or (isinstance(source, str) and "\n" not in source
                                           and not source.lstrip().startswith(("module", "func"))):
        path = Path(source)
        if not path.exists():
            raise ProgramError(f"no such file: {path}")
        data = path.read_bytes()
        origin = str(path)
        name = name or path.name.split(".")[0]
        if not data.startswith(BYTECODE_MAGIC):
            data = data.decode("utf-8", errors="replace")
    else:
        data = source
    module = parse_module(data, what=origin)
    program = program_from_module(module, name=name or "main", source=origin)
    if example_args is not None:
        program.example_args = program.checked_example_args(example_args)
        program.perturb_examples = True
    return program


def save(program: Program, path: str | os.PathLike) -> Path:
    """Write text (`.mlir`) or bytecode (`.mlirbc`), chosen by the file's extension."""
    path = Path(path)
    if path.suffix == ".mlirbc":
        path.write_bytes(program.bytecode())
    else:
        path.write_text(program.text(debug_info=False))
    return path
