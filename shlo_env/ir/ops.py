"""Facts about MLIR ops and values that every other module reads the same way.

The bottom layer of the package (it imports only `tensor_types`, which imports nothing of ours):
ops and their blocks (`as_operation`, `block_ops`, `walk`), calls and the functions they call
(`callee`), replacing an op by a block's ops (`splice_block`), which ops have side effects
(`is_pure`, the one definition every module uses), element types, and attribute values of any
element type. jaxlib's Python bindings cannot hand out a dense attribute of complex numbers as
an object (reading one raises, and `NamedAttribute.attr` aborts the process), so attributes are
read here as text and complex constants parsed from it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator

import numpy as np
from jaxlib.mlir import ir

from shlo_env.ir.tensor_types import dtype_of, element_type_of, shape_of

__all__ = [
    "as_operation", "block_ops", "terminator", "ancestor_in", "walk", "walk_block",
    "callee_name", "functions", "callee", "splice_block",
    "EFFECTFUL_OPS", "TERMINATORS", "is_effectful_op", "is_pure",
    "element_type_of", "is_complex",
    "attribute_items", "attribute_text", "complex_constant", "dense_literal",
]

# --- ops and blocks ----------------------------------------------------------------------------

def as_operation(op) -> ir.Operation:
    """The `ir.Operation` of `op`: the bindings hand out typed views (`OpView`) of most ops,
    which lack some of `Operation`'s methods and do not compare equal to it."""
    return op.operation if hasattr(op, "operation") else op


def block_ops(block: ir.Block) -> list[ir.Operation]:
    """The ops of `block` in order, terminator included."""
    return [o.operation for o in block.operations]


def terminator(block: ir.Block) -> ir.Operation:
    """The last op of `block` (its return or yield)."""
    return block_ops(block)[-1]


def ancestor_in(block: ir.Block, op) -> ir.Operation | None:
    """`op` itself, or the op enclosing it, that sits directly in `block`; None when `op` is not
    inside `block` (the search stops at the enclosing function)."""
    current: ir.Operation | None = as_operation(op)
    while current is not None:
        if current.block == block:
            return current
        parent = current.parent
        current = parent.operation if parent is not None else None
        if current is not None and current.name == "func.func":
            return None
    return None


def walk_block(block: ir.Block, stop: Collection[str] = ()) -> Iterator[ir.Operation]:
    """Every op in `block` and its nested regions, in program order. Ops named in `stop` are
    yielded but not entered."""
    for view in block.operations:
        op = view.operation
        yield op
        if op.name in stop:
            continue
        for region in op.regions:
            for inner in region.blocks:
                yield from walk_block(inner, stop)


def walk(op, stop: Collection[str] = ()) -> Iterator[ir.Operation]:
    """Every op nested in `op`'s regions (any depth, not `op` itself), in program order. Ops
    named in `stop` are yielded but not entered."""
    for region in as_operation(op).regions:
        for block in region.blocks:
            yield from walk_block(block, stop)


# --- calls -------------------------------------------------------------------------------------

def callee_name(call) -> str:
    """The name of the function a `func.call` calls."""
    return ir.FlatSymbolRefAttr(as_operation(call).attributes["callee"]).value


def functions(module: ir.Module | ir.Operation) -> dict[str, ir.Operation]:
    """The `func.func`s of a module by name."""
    body = module.body if isinstance(module, ir.Module) else module.regions[0].blocks[0]
    return {ir.StringAttr(f.attributes["sym_name"]).value: f
            for f in block_ops(body) if f.name == "func.func"}


def callee(call) -> ir.Operation | None:
    """The `func.func` a `func.call` calls, looked up in the enclosing module (None when the
    module does not define it)."""
    call = as_operation(call)
    name = callee_name(call)
    op: ir.Operation | None = call
    while op is not None and op.name != "builtin.module":
        parent = op.parent
        op = parent.operation if parent is not None else None
    return functions(op).get(name) if op is not None else None


def splice_block(block: ir.Block, op) -> None:
    """Replace `op` by the ops of `block` (moved, not copied): the block's arguments read `op`'s
    operands and `op`'s results become what the block's terminator returns. `op` is erased;
    `block` keeps only its terminator."""
    op = as_operation(op)
    for arg, operand in zip(block.arguments, op.operands):
        arg.replace_all_uses_with(operand)
    body = block_ops(block)
    for inner in body[:-1]:
        inner.move_before(op)
    for result, value in zip(op.results, body[-1].operands):
        result.replace_all_uses_with(value)
    op.erase()


# --- side effects ------------------------------------------------------------------------------

# Ops that do more than compute their results: they talk to other devices or the host, draw
# from hidden random state, order other effects, or run code we cannot see. They must stay even
# when their results are unused, and must not be moved, duplicated or merged.
# `stablehlo.rng_bit_generator` is not here: its state is an operand and the new state a result,
# so it is a deterministic function of its operands (XLA treats it so too).
EFFECTFUL_OPS = frozenset({
    "stablehlo.custom_call",  # opaque: may write memory, call the host, ...
    "stablehlo.rng",  # draws from the backend's hidden generator state
    "stablehlo.send", "stablehlo.recv", "stablehlo.infeed", "stablehlo.outfeed",
    "stablehlo.after_all", "stablehlo.create_token",
    "stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.all_to_all", "stablehlo.reduce_scatter",
    "stablehlo.collective_permute", "stablehlo.collective_broadcast",
    "func.call",  # unknown body unless the caller resolves the callee (see is_pure)
})

# Block terminators: control flow, never moved or dropped on their own.
TERMINATORS = frozenset({"func.return", "stablehlo.return", "shlo_env.yield"})

# The alternatives op is a choice between computations: as pure as its regions (region 0 is the
# original), like any op with regions.


def is_effectful_op(op: ir.Operation) -> bool:
    """Does `op` itself (not counting nested regions) have side effects or control flow?"""
    return op.name in EFFECTFUL_OPS or op.name in TERMINATORS


def is_pure(op, callee: Callable[[ir.Operation], ir.Operation | None] | None = None) -> bool:
    """No side effects anywhere in `op` or its regions: it may be moved, duplicated or dropped.

    `callee(call_op)` may resolve a `func.call` to its function; a call is then as pure as the
    callee's body (recursion counts as impure). Without it, every call is assumed impure.
    """
    return _pure(as_operation(op), callee, set())


def _pure(op: ir.Operation, callee, calling: set) -> bool:
    if op.name == "func.call" and callee is not None:
        fn = callee(op)
        if fn is None or fn in calling or not fn.regions[0].blocks:
            return False
        calling.add(fn)
        try:
            body = block_ops(fn.regions[0].blocks[0])[:-1]  # not its return
            return all(_pure(o, callee, calling) for o in body)
        finally:
            calling.discard(fn)
    if is_effectful_op(op):
        return False
    for region in op.regions:
        for block in region.blocks:
            for inner in block_ops(block):
                if inner.name in TERMINATORS:
                    continue  # a nested region's own terminator is part of its op
                if not _pure(inner, callee, calling):
                    return False
    return True


# --- element types ----------------------------------------------------------------------------

# `element_type_of` (a value's, a tensor type's, or a bare element type) lives in tensor_types,
# below this module; it is imported above and listed in __all__ for callers that read ops.

def is_complex(value_or_type) -> bool:
    return isinstance(element_type_of(value_or_type), ir.ComplexType)


# --- attributes --------------------------------------------------------------------------------

def attribute_items(op) -> Iterator[tuple[str, str]]:
    """(name, printed value) of each attribute of `op`, for attributes of any element type."""
    attributes = as_operation(op).attributes
    for i in range(len(attributes)):
        named = attributes[i]
        name = named.name
        # str(NamedAttribute) is "NamedAttribute(name=<value>)"; it prints without downcasting.
        yield name, str(named)[len("NamedAttribute(") + len(name) + 1:-1]


def attribute_text(op, name: str) -> str | None:
    for key, text in attribute_items(op):
        if key == name:
            return text
    return None


_NUMBER = re.compile(r"0x[0-9A-Fa-f]+|[-+]?(?:inf|nan|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)")


def complex_constant(op) -> np.ndarray | None:
    """The value of a `stablehlo.constant` of complex numbers, parsed from its printed form."""
    op = as_operation(op)
    result_type = op.results[0].type
    dtype, shape = dtype_of(result_type), shape_of(result_type)
    text = attribute_text(op, "value")
    if text is None or not text.startswith("dense<"):
        return None
    body = text[len("dense<"):text.rindex(">")] if " : " not in text else text[len("dense<"):text.rindex("> : ")]
    part = np.float32 if dtype == np.complex64 else np.float64  # the type of each half
    if body.startswith('"0x'):  # large constants print as their raw little-endian bytes
        raw = np.frombuffer(bytes.fromhex(body[3:-1]), dtype=dtype)
        return np.broadcast_to(raw, shape).copy() if raw.size == 1 else raw.reshape(shape).copy()
    parts = [_float_token(t, part) for t in _NUMBER.findall(body)]
    values = np.empty(len(parts) // 2, dtype)
    values.real, values.imag = parts[0::2], parts[1::2]  # not re + 1j*im: that loses -0.0
    if values.size == 1:
        return np.full(shape, values[0], dtype)
    return values.reshape(shape)


def _float_token(token: str, part) -> float:
    if token.startswith("0x"):  # NaN payloads and other non-round-trippable values print as bits
        bits = np.array(int(token, 16), np.uint32 if part == np.float32 else np.uint64)
        return bits.view(part).item()
    return float(token)


def dense_literal(values, t: ir.Type) -> str:
    """A `dense<"0x..."> : type` literal (raw little-endian bytes: exact for every value) of
    `values` cast to `t`'s element type; a scalar is splatted."""
    arr = np.asarray(values).astype(dtype_of(t))
    if arr.ndim:
        arr = arr.reshape(shape_of(t))
    return f'dense<"0x{np.ascontiguousarray(arr).tobytes().hex().upper()}"> : {t}'
