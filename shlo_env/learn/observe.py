"""Graph observations of a program, as numpy arrays in CSR form (HloEnv's `HloGraph` layout).

    g = observe.graph(program)          # a Graph: node/edge arrays + CSR offsets
    g.alternative_indices, g.alternative_num_choices
    observe.to_pyg(g)                   # {"x", "edge_index" (2 x E), "edge_attr", ...}
    observe.to_jraph(g)                 # {"nodes", "edges", "senders", "receivers", "n_node", "n_edge", "globals"}
    observe.to_networkx(g)              # networkx.MultiDiGraph (needs networkx)
    observe.summary(g)                  # fixed-size float32 vector for agents that cannot take graphs

Nodes, in topological order: one per argument of `main` ("parameter"), one per op, and one per
block argument of a nested region that is not an alternatives region (a reduce or while body:
"parameter" nodes of that region). `shlo_env.yield` is not a node.

Alternatives regions are inlined the way HloEnv inlines fused computations: a region's block
argument i *is* the alternatives op's operand i, so the ops of choice k read straight from the
producers in the main graph, and each value that choice k yields is an edge into the alternatives
node with `edge_choice == k`. Region 0 yields the original roots, so the original path and every
replacement path meet at the alternatives node, as in the HloEnv paper's Figure 2.

Edges: one per operand use (a multigraph: `x * x` gives two edges), in CSR order by destination
(`operand_offsets`), with the tensor's size, bytes, dtype and shape. `user_offsets`/`user_indices`
give the same edges by source (`user_edges` maps them back to edge ids).

Op-kind ids come from `OP_VOCAB`, a fixed list: ids never change; new names are only appended;
anything not in it is id 0, "other".
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence

import numpy as np
from jaxlib.mlir import ir

from shlo_env.ir import alternatives as alt_dialect
from shlo_env.rewrite.driver import is_pure
from shlo_env.ir.program import Program
from shlo_env.ir.ops import block_ops

MAX_RANK = 8  # shapes are padded (with -1) or cut to this many dimensions, as in HloEnv

_STABLEHLO_OPS = """
abs add after_all all_gather all_reduce all_to_all and atan2 batch_norm_grad batch_norm_inference
batch_norm_training bitcast_convert broadcast broadcast_in_dim case cbrt ceil cholesky clamp
collective_broadcast collective_permute compare complex composite concatenate constant convert
convolution cosine count_leading_zeros create_token cross-replica-sum custom_call divide dot
dot_general dynamic_broadcast_in_dim dynamic_conv dynamic_gather dynamic_iota dynamic_pad
dynamic_reshape dynamic_slice dynamic_update_slice einsum exponential exponential_minus_one fft
floor gather get_dimension_size get_tuple_element if imag infeed iota is_finite log log_plus_one
logistic map maximum minimum multiply negate not optimization_barrier or outfeed pad partition_id
popcnt power real real_dynamic_slice recv reduce reduce_precision reduce_scatter reduce_window
remainder replica_id reshape return reverse rng rng_bit_generator round_nearest_afz
round_nearest_even rsqrt scatter select select_and_scatter send shift_left shift_right_arithmetic
shift_right_logical sign sine slice sort sqrt subtract tan tanh torch_index_select transpose
triangular_solve tuple unary_einsum uniform_dequantize uniform_quantize while xor
""".split()

#: The op-kind vocabulary. Append only: an id, once given, never changes.
OP_VOCAB: tuple[str, ...] = (
    "other", "parameter", "func.return", alt_dialect.ALTERNATIVES, alt_dialect.YIELD, "func.call",
    *("stablehlo." + n for n in _STABLEHLO_OPS),
)
OP_IDS: dict[str, int] = {name: i for i, name in enumerate(OP_VOCAB)}

#: Element-type vocabulary (same rule: append only; 0 is "other": tokens, tuples, unknown types).
DTYPE_VOCAB: tuple[str, ...] = (
    "other", "f32", "f16", "bf16", "f64", "i1", "i8", "i16", "i32", "i64", "ui8", "ui16", "ui32",
    "ui64", "complex<f32>", "complex<f64>", "f8E4M3FN", "f8E5M2", "i4", "ui4", "f8E4M3FNUZ",
    "f8E5M2FNUZ", "f8E4M3B11FNUZ", "f8E4M3", "f8E3M4", "f4E2M1FN", "f6E2M3FN", "f6E3M2FN", "f8E8M0FNU",
)
DTYPE_IDS: dict[str, int] = {name: i for i, name in enumerate(DTYPE_VOCAB)}

#: Columns of `Graph.node_feature_matrix()` (after the optional one-hot op kind).
NODE_FEATURES: tuple[str, ...] = (
    "log2_size", "log2_bytes", "rank", *(f"log2_dim{i}" for i in range(MAX_RANK)), "num_results",
    "num_operands", "num_users", "is_alternative", "num_choices", "in_region", "in_alternative",
    "choice", "log2_in_bytes",
)
#: Columns of `Graph.edge_feature_matrix()`.
EDGE_FEATURES: tuple[str, ...] = (
    "log2_size", "log2_bytes", "dtype", "rank", *(f"log2_dim{i}" for i in range(MAX_RANK)),
    "operand_index", "result_index", "is_choice", "choice",
)
#: Entries of `summary(g)` after the op-kind histogram (len(OP_VOCAB) counts).
SUMMARY_FIELDS: tuple[str, ...] = (
    "num_nodes", "num_edges", "num_alternatives", "num_choices", "max_choices",
    "log2_total_bytes", "log2_max_bytes", "log2_input_bytes", "log2_output_bytes",
    "log2_total_elements",
)
SUMMARY_SIZE = len(OP_VOCAB) + len(SUMMARY_FIELDS)


def op_id(name: str) -> int:
    return OP_IDS.get(name, 0)


# --- types ------------------------------------------------------------------------------------

_BITS = re.compile(r"^(?:ui|i|bf|f)(\d+)")


def _bits(name: str) -> int:
    """Storage bits per element of an MLIR element type name (i1 is stored as a byte)."""
    if name.startswith("complex<"):
        return 2 * _bits(name[len("complex<"):-1])
    m = _BITS.match(name)
    if not m:
        return 0
    return max(int(m.group(1)), 8) if name == "i1" else int(m.group(1))


@dataclasses.dataclass(frozen=True)
class _TypeInfo:
    shape: tuple[int, ...]
    dtype: int
    elements: int
    nbytes: int
    text: str

    @property
    def rank(self) -> int:
        return len(self.shape)


_TYPE_CACHE: dict[str, _TypeInfo] = {}


def type_info(t: ir.Type) -> _TypeInfo:
    """Shape, dtype id, element count and bytes of a type (0s for tokens, tuples, dynamic dims)."""
    key = str(t)
    info = _TYPE_CACHE.get(key)
    if info is not None:
        return info
    try:
        rt = ir.RankedTensorType(t)
    except (ValueError, TypeError):  # tokens, tuples, unranked tensors
        rt = None
    if rt is not None:
        shape = tuple(int(d) if d >= 0 else -1 for d in rt.shape)
        elem = str(rt.element_type)
        static = all(d >= 0 for d in shape)
        elements = int(np.prod(shape, dtype=np.int64)) if static else 0
        bits = _bits(elem)
        nbytes = (elements * bits + 7) // 8
        text = "x".join(str(d) if d >= 0 else "?" for d in shape)
        text = f"{text}x{elem}" if shape else elem
        info = _TypeInfo(shape, DTYPE_IDS.get(elem, 0), elements, nbytes, text)
    else:
        info = _TypeInfo((), 0, 0, 0, key)
    _TYPE_CACHE[key] = info
    return info


def _log2(x) -> np.ndarray:
    return np.log2(1.0 + np.maximum(np.asarray(x, dtype=np.float64), 0.0))


# --- the graph --------------------------------------------------------------------------------

@dataclasses.dataclass
class Graph:
    """A program as arrays. N nodes, E edges, K alternatives ops. See the module docstring."""

    # nodes (N)
    node_opcode: np.ndarray        # int32 id in OP_VOCAB
    node_name: list[str]           # op name ("parameter" for block arguments)
    node_type: list[str]           # first result's type as text, "4x8xf32" ("" if none)
    node_uid: np.ndarray           # uint64 structural hash of the op (hashing.op_hashes); 0 for parameters
    node_gid: np.ndarray           # int32 region id: 0 = main body, 1.. = nested regions in visit order
    node_alt: np.ndarray           # int32 index of the alternatives op whose region holds the node, -1 none
    node_choice: np.ndarray        # int32 choice (region number) within that op, -1 none
    node_is_alternative: np.ndarray  # bool
    node_num_choices: np.ndarray   # int32 regions of an alternatives node, else 0
    node_num_results: np.ndarray   # int32
    node_num_operands: np.ndarray  # int32 in-edges
    node_num_users: np.ndarray     # int32 out-edges
    node_shape: np.ndarray         # int64 (N, MAX_RANK), first result's dims, -1 padded
    node_rank: np.ndarray          # int32 rank of the first result (0 for scalars and tokens)
    node_dtype: np.ndarray         # int32 id in DTYPE_VOCAB of the first result
    node_size: np.ndarray          # int64 elements over all results
    node_bytes: np.ndarray         # int64 bytes over all results
    node_in_bytes: np.ndarray      # int64 bytes over all in-edges
    node_parent: np.ndarray        # int32 node of the op owning the node's region (-1: main body)
    node_pure: np.ndarray          # bool: `driver.prune` may erase it when unused (no side effects)
    # edges (E), sorted by destination then operand slot
    edge_src: np.ndarray           # int32 producer node
    edge_dst: np.ndarray           # int32 consumer node
    edge_operand: np.ndarray       # int32 operand slot at the consumer (for alternatives: value index)
    edge_result: np.ndarray        # int32 result index at the producer (multi-result ops)
    edge_choice: np.ndarray        # int32 -1, or k for an edge carrying choice k into an alternatives node
    edge_size: np.ndarray          # int64 elements
    edge_bytes: np.ndarray         # int64
    edge_dtype: np.ndarray         # int32 id in DTYPE_VOCAB
    edge_shape: np.ndarray         # int64 (E, MAX_RANK), -1 padded
    edge_rank: np.ndarray          # int32
    # CSR
    operand_offsets: np.ndarray    # int64 (N+1): node i's in-edges are edges[operand_offsets[i]:operand_offsets[i+1]]
    operand_indices: np.ndarray    # int32 (E): their source nodes (== edge_src)
    user_offsets: np.ndarray       # int64 (N+1): node i's out-edges in user_edges[user_offsets[i]:...]
    user_indices: np.ndarray       # int32 (E): destination node of each out-edge, grouped by source
    user_edges: np.ndarray         # int32 (E): edge id of each out-edge
    # alternatives (K), in driver.list_alternatives order
    alternative_indices: np.ndarray      # int32 node index of each alternatives op
    alternative_num_choices: np.ndarray  # int32
    alternative_labels: list[tuple[str, ...]]
    # graph
    root_index: int                # the func.return node
    input_bytes: int
    output_bytes: int

    @property
    def num_nodes(self) -> int:
        return len(self.node_opcode)

    @property
    def num_edges(self) -> int:
        return len(self.edge_src)

    @property
    def num_alternatives(self) -> int:
        return len(self.alternative_indices)

    @property
    def edge_index(self) -> np.ndarray:
        """(2, E) int64 [senders; receivers]: PyTorch Geometric's layout."""
        return np.stack([self.edge_src, self.edge_dst]).astype(np.int64)

    def node_feature_matrix(self, one_hot_opcode: bool = False) -> np.ndarray:
        """(N, F) float32, columns NODE_FEATURES (preceded by len(OP_VOCAB) one-hot columns)."""
        shape = np.where(self.node_shape >= 0, _log2(self.node_shape), 0.0)
        cols = [
            _log2(self.node_size)[:, None], _log2(self.node_bytes)[:, None], self.node_rank[:, None],
            shape, self.node_num_results[:, None], self.node_num_operands[:, None],
            self.node_num_users[:, None], self.node_is_alternative[:, None],
            self.node_num_choices[:, None], (self.node_gid > 0)[:, None], (self.node_alt >= 0)[:, None],
            self.node_choice[:, None], _log2(self.node_in_bytes)[:, None],
        ]
        x = np.concatenate([np.asarray(c, dtype=np.float64).reshape(self.num_nodes, -1) for c in cols], axis=1)
        if one_hot_opcode:
            x = np.concatenate([one_hot(self.node_opcode, len(OP_VOCAB)), x], axis=1)
        return x.astype(np.float32)

    def edge_feature_matrix(self) -> np.ndarray:
        """(E, F) float32, columns EDGE_FEATURES."""
        shape = np.where(self.edge_shape >= 0, _log2(self.edge_shape), 0.0)
        cols = [
            _log2(self.edge_size)[:, None], _log2(self.edge_bytes)[:, None], self.edge_dtype[:, None],
            self.edge_rank[:, None], shape, self.edge_operand[:, None], self.edge_result[:, None],
            (self.edge_choice >= 0)[:, None], self.edge_choice[:, None],
        ]
        x = np.concatenate([np.asarray(c, dtype=np.float64).reshape(self.num_edges, -1) for c in cols], axis=1)
        return x.astype(np.float32)

    def __repr__(self) -> str:
        return (f"Graph(nodes={self.num_nodes}, edges={self.num_edges}, "
                f"alternatives={self.num_alternatives})")


def one_hot(ids: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros((len(ids), n), dtype=np.float32)
    out[np.arange(len(ids)), ids] = 1.0
    return out


class _Builder:
    def __init__(self):
        self.nodes: list[dict] = []
        self.edges: list[tuple[int, int, int, int, _TypeInfo, int]] = []  # (src, dst, slot, choice, type, result)
        self.value_node: dict[ir.Value, tuple[int, int]] = {}  # value -> (node, result index)
        self.alias: dict[ir.Value, ir.Value] = {}  # alternatives block argument -> outer operand
        self.next_gid = 1
        self.alternatives: list[tuple[int, tuple[str, ...]]] = []
        self.uids: dict = {}

    def resolve(self, v: ir.Value) -> ir.Value:
        while v in self.alias:
            v = self.alias[v]
        return v

    def add_node(self, name: str, types: Sequence[ir.Type], gid: int, alt: int, choice: int,
                 parent: int, uid: int = 0, **extra) -> int:
        infos = [type_info(t) for t in types]
        self.nodes.append(dict(name=name, infos=infos, gid=gid, alt=alt, choice=choice, uid=uid,
                               parent=parent, **extra))
        return len(self.nodes) - 1

    def edge_from(self, value: ir.Value, dst: int, slot: int, choice: int = -1) -> None:
        v = self.resolve(value)
        src = self.value_node.get(v)
        if src is None:  # a value we never saw (should not happen in a verified module)
            return
        self.edges.append((src[0], dst, slot, choice, type_info(v.type), src[1]))

    def block(self, block: ir.Block, gid: int, alt: int, choice: int, parent: int, params: bool) -> list[int]:
        """Add the block's nodes; returns the indices of those directly in it."""
        mine = []
        if params:
            for a in block.arguments:
                node = self.add_node("parameter", [a.type], gid, alt, choice, parent)
                self.value_node[a] = (node, 0)
                mine.append(node)
        for op in block_ops(block):
            name = op.name
            if name == alt_dialect.YIELD:
                continue
            if name == alt_dialect.ALTERNATIVES:
                mine.append(self.alternative(op, gid, alt, choice, parent))
                continue
            node = self.add_node(name, [r.type for r in op.results], gid, alt, choice, parent,
                                 self.uids.get(op, 0), pure=is_pure(op))
            mine.append(node)
            for slot, v in enumerate(op.operands):
                self.edge_from(v, node, slot)
            for k, r in enumerate(op.results):
                self.value_node[r] = (node, k)
            for region in op.regions:
                for b in region.blocks:
                    g = self.next_gid
                    self.next_gid += 1
                    self.block(b, g, alt, choice, node, params=True)
        return mine

    def alternative(self, op: ir.Operation, gid: int, alt: int, choice: int, parent: int) -> int:
        view = alt_dialect.view(op, len(self.alternatives))
        k_index = len(self.alternatives)
        self.alternatives.append((-1, view.labels))
        yields, inner = [], []
        for k, region in enumerate(op.regions):
            b = region.blocks[0]
            for arg, operand in zip(b.arguments, op.operands):
                self.alias[arg] = operand
            g = self.next_gid
            self.next_gid += 1
            inner += self.block(b, g, k_index, k, -1, params=False)
            terminator = list(b.operations)[-1].operation
            yields.append(list(terminator.operands))
        node = self.add_node(op.name, [r.type for r in op.results], gid, alt, choice, parent,
                             self.uids.get(op, 0), num_choices=len(op.regions))
        for i in inner:  # created before their owner (topological order)
            self.nodes[i]["parent"] = node
        for k, values in enumerate(yields):
            for j, v in enumerate(values):
                self.edge_from(v, node, j, choice=k)
        for k, r in enumerate(op.results):
            self.value_node[r] = (node, k)
        self.alternatives[k_index] = (node, view.labels)
        return node


def graph(program: Program, *, uids: bool = True) -> Graph:
    """The observation of `program` (with or without alternatives ops)."""
    from shlo_env.ir.hashing import op_hashes

    b = _Builder()
    if uids:
        b.uids = op_hashes(program)
    b.block(program.body, 0, -1, -1, -1, params=True)
    return _finish(b, program)


def _finish(b: _Builder, program: Program) -> Graph:
    n = len(b.nodes)
    # edges sorted by (dst, choice, slot): the CSR by destination
    order = sorted(range(len(b.edges)), key=lambda e: (b.edges[e][1], b.edges[e][3], b.edges[e][2]))
    edges = [b.edges[e] for e in order]
    e = len(edges)
    src = np.array([x[0] for x in edges], dtype=np.int32)
    dst = np.array([x[1] for x in edges], dtype=np.int32)
    etype = [x[4] for x in edges]

    def padded(shapes) -> np.ndarray:
        out = np.full((len(shapes), MAX_RANK), -1, dtype=np.int64)
        for i, s in enumerate(shapes):
            s = s[:MAX_RANK]
            out[i, : len(s)] = s
        return out

    num_operands = np.bincount(dst, minlength=n).astype(np.int32) if e else np.zeros(n, np.int32)
    num_users = np.bincount(src, minlength=n).astype(np.int32) if e else np.zeros(n, np.int32)
    operand_offsets = np.zeros(n + 1, dtype=np.int64)
    operand_offsets[1:] = np.cumsum(num_operands)
    by_src = np.argsort(src, kind="stable").astype(np.int32) if e else np.zeros(0, np.int32)
    user_offsets = np.zeros(n + 1, dtype=np.int64)
    user_offsets[1:] = np.cumsum(num_users)
    edge_bytes = np.array([t.nbytes for t in etype], dtype=np.int64)
    in_bytes = np.bincount(dst, weights=edge_bytes, minlength=n).astype(np.int64) if e else np.zeros(n, np.int64)

    first = [nd["infos"][0] if nd["infos"] else type_info_none() for nd in b.nodes]
    root = next((i for i in range(n - 1, -1, -1) if b.nodes[i]["name"] == "func.return"), n - 1)
    input_bytes = sum(type_info(a.type).nbytes for a in program.body.arguments)
    output_bytes = int(in_bytes[root]) if n else 0
    return Graph(
        node_opcode=np.array([op_id(nd["name"]) for nd in b.nodes], dtype=np.int32),
        node_name=[nd["name"] for nd in b.nodes],
        node_type=[t.text for t in first],
        node_uid=np.array([nd["uid"] for nd in b.nodes], dtype=np.uint64),
        node_gid=np.array([nd["gid"] for nd in b.nodes], dtype=np.int32),
        node_alt=np.array([nd["alt"] for nd in b.nodes], dtype=np.int32),
        node_choice=np.array([nd["choice"] for nd in b.nodes], dtype=np.int32),
        node_is_alternative=np.array([nd["name"] == alt_dialect.ALTERNATIVES for nd in b.nodes], dtype=bool),
        node_num_choices=np.array([nd.get("num_choices", 0) for nd in b.nodes], dtype=np.int32),
        node_num_results=np.array([len(nd["infos"]) for nd in b.nodes], dtype=np.int32),
        node_num_operands=num_operands,
        node_num_users=num_users,
        node_shape=padded([t.shape for t in first]),
        node_rank=np.array([t.rank for t in first], dtype=np.int32),
        node_dtype=np.array([t.dtype for t in first], dtype=np.int32),
        node_size=np.array([sum(t.elements for t in nd["infos"]) for nd in b.nodes], dtype=np.int64),
        node_bytes=np.array([sum(t.nbytes for t in nd["infos"]) for nd in b.nodes], dtype=np.int64),
        node_in_bytes=in_bytes,
        node_parent=np.array([nd["parent"] for nd in b.nodes], dtype=np.int32),
        node_pure=np.array([nd.get("pure", True) for nd in b.nodes], dtype=bool),
        edge_src=src,
        edge_dst=dst,
        edge_operand=np.array([x[2] for x in edges], dtype=np.int32),
        edge_result=np.array([x[5] for x in edges], dtype=np.int32),
        edge_choice=np.array([x[3] for x in edges], dtype=np.int32),
        edge_size=np.array([t.elements for t in etype], dtype=np.int64),
        edge_bytes=edge_bytes,
        edge_dtype=np.array([t.dtype for t in etype], dtype=np.int32),
        edge_shape=padded([t.shape for t in etype]),
        edge_rank=np.array([t.rank for t in etype], dtype=np.int32),
        operand_offsets=operand_offsets,
        operand_indices=src.copy(),
        user_offsets=user_offsets,
        user_indices=dst[by_src] if e else np.zeros(0, np.int32),
        user_edges=by_src,
        alternative_indices=np.array([a[0] for a in b.alternatives], dtype=np.int32),
        alternative_num_choices=np.array([len(a[1]) for a in b.alternatives], dtype=np.int32),
        alternative_labels=[a[1] for a in b.alternatives],
        root_index=int(root),
        input_bytes=int(input_bytes),
        output_bytes=output_bytes,
    )


def type_info_none() -> _TypeInfo:
    return _TypeInfo((), 0, 0, 0, "")


# --- fixed-size summary -----------------------------------------------------------------------

def summary(g: Graph) -> np.ndarray:
    """(SUMMARY_SIZE,) float32: op-kind counts (OP_VOCAB order), then SUMMARY_FIELDS.

    Counts are raw; byte and element totals are log2(1 + x) so the vector stays in a small range.
    """
    hist = np.bincount(g.node_opcode, minlength=len(OP_VOCAB)).astype(np.float64)
    extra = [
        g.num_nodes, g.num_edges, g.num_alternatives, int(g.alternative_num_choices.sum()),
        int(g.alternative_num_choices.max()) if g.num_alternatives else 0,
        math.log2(1 + int(g.node_bytes.sum())), math.log2(1 + int(g.node_bytes.max(initial=0))),
        math.log2(1 + g.input_bytes), math.log2(1 + g.output_bytes),
        math.log2(1 + int(g.node_size.sum())),
    ]
    return np.concatenate([hist, np.array(extra, dtype=np.float64)]).astype(np.float32)


# --- converters -------------------------------------------------------------------------------

def to_pyg(g: Graph, *, one_hot_opcode: bool = True, as_data: bool = False):
    """Arrays for PyTorch Geometric: x (N, F), edge_index (2, E) int64, edge_attr (E, Fe), plus
    `opcode` (N,), `alternatives` (K,) node indices and `num_choices` (K,).

    `as_data=True` returns a `torch_geometric.data.Data` (needs torch and torch_geometric).
    """
    out = {
        "x": g.node_feature_matrix(one_hot_opcode=one_hot_opcode),
        "edge_index": g.edge_index,
        "edge_attr": g.edge_feature_matrix(),
        "opcode": g.node_opcode.astype(np.int64),
        "alternatives": g.alternative_indices.astype(np.int64),
        "num_choices": g.alternative_num_choices.astype(np.int64),
        "num_nodes": g.num_nodes,
    }
    if not as_data:
        return out
    try:
        import torch
        from torch_geometric.data import Data
    except ImportError as e:
        raise ImportError("to_pyg(as_data=True) needs torch and torch_geometric "
                          "(pip install torch torch_geometric); without as_data it returns numpy arrays") from e
    return Data(**{k: torch.as_tensor(v) if isinstance(v, np.ndarray) else v for k, v in out.items()})


def to_jraph(g: Graph, *, one_hot_opcode: bool = True, as_graphs_tuple: bool = False):
    """Arrays for jraph: nodes, edges, senders, receivers, n_node (1,), n_edge (1,), globals (1, S).

    `as_graphs_tuple=True` returns a `jraph.GraphsTuple` (needs jraph).
    """
    out = {
        "nodes": g.node_feature_matrix(one_hot_opcode=one_hot_opcode),
        "edges": g.edge_feature_matrix(),
        "senders": g.edge_src.astype(np.int32),
        "receivers": g.edge_dst.astype(np.int32),
        "n_node": np.array([g.num_nodes], dtype=np.int32),
        "n_edge": np.array([g.num_edges], dtype=np.int32),
        "globals": summary(g)[None, :],
    }
    if not as_graphs_tuple:
        return out
    try:
        import jraph
    except ImportError as e:
        raise ImportError("to_jraph(as_graphs_tuple=True) needs jraph (pip install jraph); "
                          "without it this returns a dict of numpy arrays") from e
    return jraph.GraphsTuple(**out)


def to_networkx(g: Graph):
    """A `networkx.MultiDiGraph`: node attributes name/type/gid/alt/choice/..., edge attributes
    operand/choice/size/bytes/dtype. Needs networkx (`pip install networkx`)."""
    try:
        import networkx as nx
    except ImportError as e:
        raise ImportError("to_networkx needs networkx (pip install networkx)") from e
    G = nx.MultiDiGraph()
    for i in range(g.num_nodes):
        G.add_node(i, name=g.node_name[i], type=g.node_type[i], opcode=int(g.node_opcode[i]),
                   gid=int(g.node_gid[i]), alt=int(g.node_alt[i]), choice=int(g.node_choice[i]),
                   is_alternative=bool(g.node_is_alternative[i]), size=int(g.node_size[i]),
                   bytes=int(g.node_bytes[i]), dtype=DTYPE_VOCAB[int(g.node_dtype[i])])
    for j in range(g.num_edges):
        G.add_edge(int(g.edge_src[j]), int(g.edge_dst[j]), key=j, operand=int(g.edge_operand[j]),
                   choice=int(g.edge_choice[j]), size=int(g.edge_size[j]), bytes=int(g.edge_bytes[j]),
                   dtype=DTYPE_VOCAB[int(g.edge_dtype[j])])
    G.graph["alternatives"] = [int(a) for a in g.alternative_indices]
    G.graph["num_choices"] = [int(c) for c in g.alternative_num_choices]
    return G


# --- liveness (for pictures and analyses) -----------------------------------------------------

def live_nodes(g: Graph, decisions: Sequence[int] | None = None) -> np.ndarray:
    """Which nodes the program still computes with `decisions` (default: all originals): what
    `driver.apply` keeps after pruning.

    Every block's anchors stay (its terminator, ops without results, ops with side effects) and
    so does everything they read. An alternatives node only reads its chosen region's values,
    and only those of the results that are used; the chosen region's ops land in the
    alternatives op's block. A nested block (a reduce or while body) is live when its op is.
    """
    decisions = [0] * g.num_alternatives if decisions is None else list(decisions)
    chosen = {int(node): int(d) for node, d in zip(g.alternative_indices, decisions)}
    kids: dict[int, list[int]] = {}
    for i, p in enumerate(g.node_parent):
        kids.setdefault(int(p), []).append(i)

    def anchor(i: int) -> bool:
        return not g.node_is_alternative[i] and (not g.node_pure[i] or g.node_num_results[i] == 0)

    def block_anchors(owner: int) -> list[int]:
        """Anchors of the blocks owned by `owner` (-1: main), alternatives regions resolved."""
        out = []
        for c in kids.get(owner, []):
            if g.node_name[c] == "parameter":
                continue
            if g.node_is_alternative[c]:
                out += [x for x in kids.get(c, []) if g.node_choice[x] == chosen[c] and anchor(x)]
            elif anchor(c):
                out.append(c)
        return out

    live = np.zeros(g.num_nodes, dtype=bool)
    needed: dict[int, set[int]] = {node: set() for node in chosen}  # used results per alternatives node
    stack: list[tuple[int, int]] = [(i, 0) for i in block_anchors(-1)]
    while stack:
        i, result = stack.pop()
        if i in chosen:
            if result in needed[i]:
                continue
            needed[i].add(result)
            live[i] = True
            for e in range(g.operand_offsets[i], g.operand_offsets[i + 1]):
                if g.edge_choice[e] == chosen[i] and g.edge_operand[e] == result:
                    stack.append((int(g.edge_src[e]), int(g.edge_result[e])))
            continue
        if live[i]:
            continue
        live[i] = True
        stack += [(c, 0) for c in block_anchors(i)]
        for e in range(g.operand_offsets[i], g.operand_offsets[i + 1]):
            stack.append((int(g.edge_src[e]), int(g.edge_result[e])))
    return live
