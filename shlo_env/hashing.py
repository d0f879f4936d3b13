"""The DAG hash (HloEnv's HloDagHash) of a StableHLO program, with xxhash.

An op's hash covers its name, every attribute, its result types, the hashes of its operands
(so the whole upstream DAG), and its nested regions. A block's hash covers its argument types,
its terminator, and its ops that have no results (side effects). SSA names, the order of
independent ops, locations and dead side-effect-free ops do not change it. Values are stable
across processes (no Python `hash`).
"""

from __future__ import annotations

import xxhash
from jaxlib.mlir import ir

from shlo_env.import_ import Program, find_main


def _h(*parts: bytes) -> int:
    return xxhash.xxh3_64_intdigest(b"\x1f".join(parts))


def _int(x: int) -> bytes:
    return x.to_bytes(8, "little", signed=False)


class _Hasher:
    def __init__(self):
        self.values: dict[ir.Value, int] = {}
        self.ops: dict[ir.Operation, int] = {}

    def block(self, block: ir.Block, depth: int) -> int:
        for i, arg in enumerate(block.arguments):
            self.values[arg] = _h(b"arg", _int(depth), _int(i), str(arg.type).encode())
        effects = []
        terminator = 0
        ops = [o.operation for o in block.operations]
        for op in ops:
            h = self.op(op, depth)
            if not len(op.results):
                effects.append(h)
        if ops:
            terminator = self.ops[ops[-1]]
        types = b",".join(str(a.type).encode() for a in block.arguments)
        return _h(b"block", types, _int(terminator), *[_int(e) for e in sorted(effects)])

    def op(self, op: ir.Operation, depth: int) -> int:
        attrs = sorted((name, str(op.attributes[name])) for name in op.attributes)
        parts = [op.name.encode()]
        parts += [f"{k}={v}".encode() for k, v in attrs]
        parts += [b"->" + str(r.type).encode() for r in op.results]
        parts += [_int(self.values[v]) if v in self.values else b"?" + str(v.type).encode()
                  for v in op.operands]
        for region in op.regions:
            parts.append(b"region")
            parts += [_int(self.block(b, depth + 1)) for b in region.blocks]
        h = _h(*parts)
        self.ops[op] = h
        for i, r in enumerate(op.results):
            self.values[r] = _h(_int(h), _int(i))
        return h


def dag_hash(program: Program | ir.Module) -> str:
    """A 16-hex-digit hash of the program's computation graph."""
    module = program.module if isinstance(program, Program) else program
    main = find_main(module)
    hasher = _Hasher()
    h = hasher.block(main.regions[0].blocks[0], 0)
    return f"{h:016x}"


def op_hashes(program: Program) -> dict[ir.Operation, int]:
    """The hash of every op in main (keyed by op): stable node labels for observations."""
    hasher = _Hasher()
    hasher.block(program.body, 0)
    return hasher.ops
