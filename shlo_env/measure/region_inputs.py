"""Inputs for a region cut out of a program (`shlo_env.rewrite.region_cut`).

- **Inputs.** `boundary_inputs` runs the original once on its example inputs with every region's
  inputs as extra outputs (one compile for all regions of a program): exact values, so gathers
  and dynamic slices index as in the program (seeded random whole-program inputs when it has no
  example inputs). `random_inputs` skips that compile: N(0,1) floats and integers in [-8, 8]
  (XLA clamps gather and dynamic-slice indices, so a random index cannot fault, but it can read
  other rows than the program would). A region cut
  from a loop body always gets random inputs: its values change every iteration.
  Floats of 32 bits or less are cut from one block of N(0,1) draws, at a random offset: a region
  is timed on them, not verified, and a convolution region of the haiku ResNet18 train step has
  130 inputs of 70-100 MB in all, 0.2 s a region to draw afresh (4.4 s of a 60 s search).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import ml_dtypes
import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func as func_dialect

from shlo_env.execute import runtime
from shlo_env.execute.runners import Runner
from shlo_env.ir import alternatives as alt_dialect
from shlo_env.ir.ops import block_ops
from shlo_env.ir.program import Program, ir_scope, program_from_module
from shlo_env.rewrite.driver import list_alternatives
from shlo_env.rewrite.region_cut import Region, RegionError
# --- inputs ------------------------------------------------------------------------------------

#: Values in the block floats are cut from (16 MB of float32): a longer input repeats it.
BLOCK = 1 << 22


@functools.lru_cache(maxsize=1)
def _normal_block(seed: int) -> np.ndarray:
    block = np.random.default_rng(seed).standard_normal(BLOCK, dtype=np.float32)
    block.flags.writeable = False  # float32 inputs are views of it
    return block


def _block_float(dtype: np.dtype) -> bool:
    """A real float of 32 bits or less (bfloat16 and the float8 types too)."""
    try:
        return dtype.itemsize <= 4 and ml_dtypes.finfo(dtype).bits <= 32
    except ValueError:  # not inexact: integers, booleans, int4
        return False


def random_inputs(region: Region, seed: int = 0) -> list[np.ndarray]:
    """N(0,1) floats, integers in [-8, 8], random booleans for the region's arguments (floats
    of 32 bits or less cut from `BLOCK` draws at a random offset, see the module docstring)."""
    rng = np.random.default_rng(seed)
    block = _normal_block(seed)
    out = []
    for spec in region.program.in_specs:
        dtype = np.dtype(spec.dtype)
        if not _block_float(dtype):
            out.extend(runtime.random_inputs([spec], int(rng.integers(1 << 31))))
            continue
        n, start = math.prod(spec.shape), int(rng.integers(BLOCK))
        flat = block[start:start + n] if start + n <= BLOCK else np.resize(np.roll(block, -start), n)
        out.append(flat.astype(dtype, copy=False).reshape(spec.shape))
    return out


def boundary_program(program: Program, regions: Sequence[Region]) -> tuple[Program, list[tuple[int, int]]]:
    """`baseline(program)` with every region's inputs and outputs as extra results; returns it
    and, per region, the (start, end) of its inputs among the extra results (its outputs follow)."""
    body = [r.sites for r in regions if r.in_body]
    if body:
        raise RegionError(f"the region of sites {body[0]} is cut from a loop body: the original's values there "
                          "change every iteration (use random_inputs)")
    prog = program.clone()
    with ir_scope():
        main = prog.main
        ops = block_ops(prog.body)
        args = list(prog.body.arguments)
        ret = ops[-1]
        extra: list[ir.Value] = []
        spans = []
        for region in regions:
            start = len(extra)
            for where, k in list(region.inputs) + list(region.outputs):
                if where == "arg":
                    extra.append(args[k])
                elif where == "ret":
                    extra.append(ret.operands[k])
                else:
                    extra.append(ops[where].results[k])
            spans.append((start, start + len(region.inputs)))
        values = list(ret.operands) + extra
        func_dialect.ReturnOp(values, ip=ir.InsertionPoint(ret))
        ret.erase()
        fn_type = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
        main.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(list(fn_type.inputs), [v.type for v in values]))
        if "res_attrs" in main.attributes:
            del main.attributes["res_attrs"]
        for a in list_alternatives(prog):
            alt_dialect.materialize(a.op, 0)
        if not prog.module.operation.verify():
            raise RegionError("the boundary program does not verify")
    out = program_from_module(prog.module, name=f"{program.name}.boundary", inline=False)
    return out, spans


def boundary_values(runner: Runner, program: Program, regions: Sequence[Region],
                    inputs: Sequence[np.ndarray] | None = None) -> list[tuple[list[np.ndarray], list[np.ndarray]]]:
    """Per region, (its inputs, its outputs) as the original computes them on `inputs` (default:
    the program's example inputs, else seeded random ones): one compile and run of the whole
    program with the region boundaries as extra outputs."""
    if inputs is None:
        inputs = list(program.example_args) if program.example_args is not None \
            else runtime.random_inputs(program.in_specs, 0)
    prog, spans = boundary_program(program, regions)
    runner.set_inputs("region.boundary", list(inputs))
    outs = runner.run(prog.text(), "region.boundary")
    base = len(program.out_specs)
    result = []
    for region, (start, end) in zip(regions, spans):
        vals = outs[base + start: base + end + len(region.outputs)]
        result.append((list(vals[: end - start]), list(vals[end - start:])))
    return result


def boundary_inputs(runner: Runner, program: Program, regions: Sequence[Region],
                    inputs: Sequence[np.ndarray] | None = None) -> list[list[np.ndarray]]:
    """Per region, its inputs as the original computes them (see `boundary_values`); random
    ones (`random_inputs`) for a region cut from a loop body."""
    outer = [r for r in regions if not r.in_body]
    found = iter(boundary_values(runner, program, outer, inputs) if outer else [])
    return [random_inputs(r) if r.in_body else next(found)[0] for r in regions]


__all__ = ["boundary_inputs", "boundary_program", "boundary_values", "random_inputs"]
