"""Building StableHLO ops from Python: the `b` a pattern's `rewrite(b, m)` receives.

Every method creates one op at the builder's insertion point and returns its result value(s).
Result types are computed here (not by per-version generated op classes), so patterns stay the
same across jaxlib releases.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from shlo_env.ir.ops import as_operation, attribute_items, block_ops, callee, dense_literal, is_complex, walk
from shlo_env.ir.tensor_types import dtype_of, element_type, element_type_of, shape_of, tensor_type


def _i64s(values) -> ir.Attribute:
    return ir.DenseI64ArrayAttr.get([int(v) for v in values])


def shape(value: ir.Value) -> tuple[int, ...]:
    return shape_of(value.type)


# Discardable attributes (`dialect.name`) that mean the same on an op of another shape. Others
# (`mhlo.sharding` and `sdy.sharding` tile each dimension, layouts name dimensions) describe the
# original shape, and XLA rejects them on an op of another rank, so `like` drops them then.
# Inherent attributes (no dialect prefix: comparison_direction, result_accuracy, ...) are the
# op's own semantics and are always kept.
_SHAPE_INDEPENDENT = frozenset({"mhlo.frontend_attributes"})


def _shape_independent(name: str) -> bool:
    return "." not in name or name in _SHAPE_INDEPENDENT


class Builder:
    """Creates ops before `ip`'s position. Use `Builder.at(block)` or `Builder.before(op)`."""

    def __init__(self, ip: ir.InsertionPoint, loc: ir.Location | None = None):
        self.ip = ip
        self.loc = loc

    @classmethod
    def at_end(cls, block: ir.Block, loc=None) -> "Builder":
        return cls(ir.InsertionPoint(block), loc)

    @classmethod
    def before(cls, op, loc=None) -> "Builder":
        return cls(ir.InsertionPoint(as_operation(op)), loc)

    # --- generic -------------------------------------------------------------------------

    def op(self, name: str, operands: Sequence[ir.Value], result_types: Sequence[ir.Type],
           attributes: dict | None = None, regions: int = 0) -> ir.Operation:
        # the location the caller entered (the driver's fused location of the matched ops)
        loc = self.loc or ir.Location.current or ir.Location.unknown()
        return ir.Operation.create(name, results=list(result_types), operands=list(operands),
                                   attributes=attributes or {}, regions=regions, loc=loc, ip=self.ip)

    def clone(self, op, operands: Sequence[ir.Value], result_types: Sequence[ir.Type] | None = None):
        """A copy of `op` (attributes and regions) on new operands; returns its results."""
        op = as_operation(op)
        new = op.clone(ip=self.ip)
        for i, v in enumerate(operands):
            new.operands[i] = v
        if result_types is not None:
            for r, t in zip(new.results, result_types):
                r.set_type(t)
        return new.results[0] if len(new.results) == 1 else list(new.results)

    def elementwise(self, name: str, *operands: ir.Value, result_elem: ir.Type | None = None) -> ir.Value:
        t = operands[0].type
        if result_elem is not None:
            t = tensor_type(shape(operands[0]), result_elem)
        return self.op(name, operands, [t]).result

    # --- arithmetic ----------------------------------------------------------------------

    def add(self, x, y): return self.elementwise("stablehlo.add", x, y)
    def sub(self, x, y): return self.elementwise("stablehlo.subtract", x, y)
    def mul(self, x, y): return self.elementwise("stablehlo.multiply", x, y)
    def div(self, x, y): return self.elementwise("stablehlo.divide", x, y)
    def max(self, x, y): return self.elementwise("stablehlo.maximum", x, y)
    def min(self, x, y): return self.elementwise("stablehlo.minimum", x, y)
    def neg(self, x): return self.elementwise("stablehlo.negate", x)

    def select(self, pred, on_true, on_false):
        return self.op("stablehlo.select", [pred, on_true, on_false], [on_true.type]).result

    def compare(self, x, y, direction: str):
        attrs = {"comparison_direction": stablehlo.ComparisonDirectionAttr.get(direction)}
        t = tensor_type(shape(x), ir.IntegerType.get_signless(1))
        return self.op("stablehlo.compare", [x, y], [t], attrs).result

    # --- constants -----------------------------------------------------------------------

    def constant(self, value, like: ir.Type) -> ir.Value:
        """A constant of type `like`: a scalar is splatted, an array must match the shape."""
        t = ir.RankedTensorType(like)
        arr = np.asarray(value)
        if is_complex(t):  # the bindings cannot build complex attributes: parse the op instead
            op = ir.Operation.parse(f"%0 = stablehlo.constant {dense_literal(arr, t)}")
            self.ip.insert(op)
            return op.result
        if arr.ndim == 0:
            elem = t.element_type
            scalar: ir.Attribute
            if isinstance(elem, ir.IntegerType):
                scalar = ir.IntegerAttr.get(elem, int(arr))
            else:
                scalar = ir.FloatAttr.get(elem, float(arr))
            attr = ir.DenseElementsAttr.get_splat(t, scalar)
        else:
            arr = np.ascontiguousarray(arr.astype(dtype_of(t)).reshape(shape_of(t)))
            # an ndarray has the buffer protocol; the stub's `Buffer` does not know numpy's
            attr = ir.DenseElementsAttr.get(arr, type=t.element_type, shape=list(arr.shape))  # type: ignore[call-overload]
        return self.op("stablehlo.constant", [], [t], {"value": attr}).result

    def zeros(self, like: ir.Type) -> ir.Value:
        return self.constant(0, like)

    # --- data movement -------------------------------------------------------------------

    def transpose(self, x, perm: Sequence[int]) -> ir.Value:
        perm = list(perm)
        if perm == list(range(len(perm))):
            return x
        s = shape(x)
        t = tensor_type([s[p] for p in perm], element_type_of(x))
        return self.op("stablehlo.transpose", [x], [t], {"permutation": _i64s(perm)}).result

    def reshape(self, x, new_shape: Sequence[int]) -> ir.Value:
        if tuple(new_shape) == shape(x):
            return x
        return self.op("stablehlo.reshape", [x], [tensor_type(new_shape, element_type_of(x))]).result

    def broadcast_in_dim(self, x, new_shape: Sequence[int], dims: Sequence[int]) -> ir.Value:
        t = tensor_type(new_shape, element_type_of(x))
        return self.op("stablehlo.broadcast_in_dim", [x], [t], {"broadcast_dimensions": _i64s(dims)}).result

    def slice(self, x, start: Sequence[int], limit: Sequence[int], strides: Sequence[int] | None = None):
        strides = list(strides) if strides is not None else [1] * len(start)
        if list(start) == [0] * len(start) and tuple(limit) == shape(x) and set(strides) <= {1}:
            return x
        out = [-(-(hi - lo) // st) for lo, hi, st in zip(start, limit, strides)]
        attrs = {"start_indices": _i64s(start), "limit_indices": _i64s(limit), "strides": _i64s(strides)}
        return self.op("stablehlo.slice", [x], [tensor_type(out, element_type_of(x))], attrs).result

    def slice_dim(self, x, dim: int, lo: int, hi: int) -> ir.Value:
        """x[..., lo:hi, ...] along one dimension."""
        s = shape(x)
        start = [0] * len(s)
        limit = list(s)
        start[dim], limit[dim] = lo, hi
        return self.slice(x, start, limit)

    def concat(self, xs: Sequence[ir.Value], dim: int) -> ir.Value:
        xs = list(xs)
        if len(xs) == 1:
            return xs[0]
        out = list(shape(xs[0]))
        out[dim] = sum(shape(x)[dim] for x in xs)
        attrs = {"dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim)}
        return self.op("stablehlo.concatenate", xs, [tensor_type(out, element_type_of(xs[0]))], attrs).result

    def convert(self, x, elem: ir.Type | np.dtype) -> ir.Value:
        if not isinstance(elem, ir.Type):
            elem = element_type(elem)
        if elem == element_type_of(x):
            return x
        return self.op("stablehlo.convert", [x], [tensor_type(shape(x), elem)]).result

    # --- linear algebra ------------------------------------------------------------------

    def dot(self, lhs, rhs, contract: tuple[Sequence[int], Sequence[int]],
            batch: tuple[Sequence[int], Sequence[int]] = ((), ()), *,
            result_elem: ir.Type | None = None, like=None) -> ir.Value:
        """dot_general; result dims are batch, lhs free, rhs free (StableHLO's order).

        `like` (an existing dot_general) supplies precision config, algorithm and result dtype.
        """
        (lc, rc), (lb, rb) = contract, batch
        ls, rs = shape(lhs), shape(rhs)
        lfree = [d for d in range(len(ls)) if d not in lc and d not in lb]
        rfree = [d for d in range(len(rs)) if d not in rc and d not in rb]
        out = [ls[d] for d in lb] + [ls[d] for d in lfree] + [rs[d] for d in rfree]
        attrs: dict[str, ir.Attribute] = {"dot_dimension_numbers": stablehlo.DotDimensionNumbers.get(
            lhs_batching_dimensions=list(lb), rhs_batching_dimensions=list(rb),
            lhs_contracting_dimensions=list(lc), rhs_contracting_dimensions=list(rc))}
        if like is not None:
            like_op = as_operation(like)
            for key in ("precision_config", "algorithm"):
                if key in like_op.attributes:
                    attrs[key] = like_op.attributes[key]
            result_elem = result_elem or element_type_of(like_op.results[0])
        elem = result_elem or element_type_of(lhs)
        return self.op("stablehlo.dot_general", [lhs, rhs], [tensor_type(out, elem)], attrs).result

    def matmul(self, a, b, like=None) -> ir.Value:
        """Contract a's last dim with b's first (rank-2 or vector operands)."""
        return self.dot(a, b, ((len(shape(a)) - 1,), (0,)), like=like)

    # --- reductions ----------------------------------------------------------------------

    def reduce(self, x, init, dims: Sequence[int], body: str = "stablehlo.add") -> ir.Value:
        """Reduce `x` over `dims` with a binary elementwise `body` op and scalar `init`."""
        s = shape(x)
        out = [n for d, n in enumerate(s) if d not in dims]
        elem = element_type_of(x)
        op = self.op("stablehlo.reduce", [x, init], [tensor_type(out, elem)],
                     {"dimensions": _i64s(dims)}, regions=1)
        scalar = tensor_type([], elem)
        block = op.regions[0].blocks.append(scalar, scalar)
        inner = Builder.at_end(block, self.loc)
        r = inner.op(body, [block.arguments[0], block.arguments[1]], [scalar]).result
        inner.op("stablehlo.return", [r], [])
        return op.result

    def reduce_sum(self, x, dims: Sequence[int]) -> ir.Value:
        init = self.constant(0, tensor_type([], element_type_of(x)))
        return self.reduce(x, init, dims, "stablehlo.add")

    # --- added for the pattern library (issue 6) -----------------------------------------

    def unary(self, name: str, x) -> ir.Value:
        """A unary elementwise op by name, e.g. `b.unary("stablehlo.abs", x)`."""
        return self.elementwise(name, x)

    def abs(self, x): return self.elementwise("stablehlo.abs", x)
    def not_(self, x): return self.elementwise("stablehlo.not", x)

    def pad(self, x, value, low: Sequence[int], high: Sequence[int], interior: Sequence[int]) -> ir.Value:
        s = shape(x)
        out = [lo + hi + n + max(n - 1, 0) * it for n, lo, hi, it in zip(s, low, high, interior)]
        attrs = {"edge_padding_low": _i64s(low), "edge_padding_high": _i64s(high),
                 "interior_padding": _i64s(interior)}
        return self.op("stablehlo.pad", [x, value], [tensor_type(out, element_type_of(x))], attrs).result

    def optimization_barrier(self, xs: Sequence[ir.Value]) -> list[ir.Value]:
        """`stablehlo.optimization_barrier` over `xs`: XLA may not move computation across it."""
        xs = list(xs)
        return list(self.op("stablehlo.optimization_barrier", xs, [x.type for x in xs]).results)

    def like(self, op, operands: Sequence[ir.Value], result_shape: Sequence[int] | None = None,
             result_elem: ir.Type | None = None) -> ir.Value:
        """A copy of single-result, region-free `op` (name and attributes) on new operands,
        with result shape `result_shape` and element type `result_elem` (default: op's own).
        When the shape changes, attributes that describe the old shape (shardings) are dropped."""
        op = as_operation(op)
        res = op.results[0]
        new_shape = shape(res) if result_shape is None else tuple(result_shape)
        t = tensor_type(new_shape, result_elem or element_type_of(res))
        attrs = {name: op.attributes[name] for name, _ in attribute_items(op)
                 if new_shape == shape(res) or _shape_independent(name)}
        return self.op(op.name, list(operands), [t], attrs).result

    def inline(self, block: ir.Block, args: Sequence[ir.Value], mapping: dict | None = None,
               overrides: dict | None = None) -> list[ir.Value]:
        """Copy `block`'s ops here with its arguments bound to `args`; return what its
        terminator yields.

        `mapping` binds values defined outside `block` (what its ops capture); `overrides`
        replaces chosen results of `block`'s ops (those ops are not copied). Calls to functions
        of the module (`func.call`) are inlined, so loop bodies lowered by JAX come out flat.
        """
        env = dict(mapping or {})
        env.update(zip(block.arguments, args))
        ops = block_ops(block)
        self.copy_ops(ops[:-1], env, overrides)
        return [env.get(v, v) for v in ops[-1].operands]

    def copy_ops(self, ops: Sequence[ir.Operation], env: dict, overrides: dict | None = None) -> dict:
        """Copy `ops` (in order) here, reading operands through `env` and recording each copied
        result in `env` (updated in place and returned). See `inline` for `overrides` and calls."""
        for op in ops:
            op = as_operation(op)
            if overrides and any(r in overrides for r in op.results):
                for r in op.results:
                    env[r] = overrides.get(r, r)
                continue
            if op.name == "func.call":
                f = callee(op)
                if f is not None and len(f.regions[0].blocks) == 1:
                    outs = self.inline(f.regions[0].blocks[0], [env.get(v, v) for v in op.operands],
                                       overrides=overrides)
                    env.update(zip(op.results, outs))
                    continue
            new = op.clone(ip=self.ip)
            for i, v in enumerate(op.operands):
                if v in env:
                    new.operands[i] = env[v]
            _remap_nested(new, env)
            env.update(zip(op.results, new.results))
        return env

    def while_(self, inits: Sequence[ir.Value], cond, body) -> list[ir.Value]:
        """A `stablehlo.while`; `cond(b, args) -> pred` and `body(b, args) -> values` build its
        regions with a builder placed in each."""
        inits = list(inits)
        types = [v.type for v in inits]
        op = self.op("stablehlo.while", inits, types, regions=2)
        for region, fn in zip(op.regions, (cond, body)):
            blk = region.blocks.append(*types)
            inner = Builder.at_end(blk, self.loc)
            out = fn(inner, list(blk.arguments))
            out = [out] if isinstance(out, ir.Value) else list(out)
            inner.op("stablehlo.return", out, [])
        return list(op.results)


def _remap_nested(op: ir.Operation, env: dict) -> None:
    """Rebind operands of ops nested in `op` that read values remapped in `env` (captures)."""
    for inner in walk(op):
        for i, v in enumerate(inner.operands):
            if v in env:
                inner.operands[i] = env[v]
