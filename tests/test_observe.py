"""Graph observations: CSR layout, features, converters, liveness against driver.apply."""

import itertools

import jax.numpy as jnp
import numpy as np
import pytest

from shlo_env.rewrite import driver
from shlo_env.learn import observe
from shlo_env.ir.hashing import op_hashes
from shlo_env.ir.program import lower


def low_rank_update(x, W, A, B):
    return x @ (W + A @ B)


def qkv(x, Wq, Wk, Wv):
    return x @ Wq, x @ Wk, x @ Wv


def column_sums(X, W):
    return jnp.sum(X @ W, axis=0)


def matmul_chain(A, B, v):
    return (A @ B) @ v


def _args(rng, *shapes):
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


@pytest.fixture(scope="module")
def programs():
    rng = np.random.default_rng(0)
    return {
        "low_rank_update": lower(low_rank_update, *_args(rng, (8, 32), (32, 32), (32, 8), (8, 32))),
        "qkv": lower(qkv, *_args(rng, (16, 32), (32, 32), (32, 32), (32, 32))),
        "column_sums": lower(column_sums, *_args(rng, (32, 16), (16, 16))),
        "matmul_chain": lower(matmul_chain, *_args(rng, (32, 32), (32, 32), (32, 1))),
    }


def _check_csr(g: observe.Graph):
    n, e = g.num_nodes, g.num_edges
    assert g.operand_offsets.shape == (n + 1,) and g.user_offsets.shape == (n + 1,)
    assert g.operand_offsets[0] == 0 and g.operand_offsets[-1] == e
    assert g.user_offsets[-1] == e
    for i in range(n):
        ins = range(g.operand_offsets[i], g.operand_offsets[i + 1])
        assert all(g.edge_dst[j] == i for j in ins)
        assert g.node_num_operands[i] == len(ins)
        outs = range(g.user_offsets[i], g.user_offsets[i + 1])
        assert all(g.edge_src[g.user_edges[j]] == i for j in outs)
        assert [g.user_indices[j] for j in outs] == [g.edge_dst[g.user_edges[j]] for j in outs]
        assert g.node_num_users[i] == len(outs)
    assert sorted(g.user_edges.tolist()) == list(range(e))
    assert np.array_equal(g.operand_indices, g.edge_src)
    # topological: every edge goes forward
    assert np.all(g.edge_src < g.edge_dst)


def test_plain_program_layout(programs):
    p = programs["low_rank_update"]
    g = observe.graph(p)
    _check_csr(g)
    # 4 parameters, 3 ops, return
    assert g.node_name == ["parameter"] * 4 + ["stablehlo.dot_general", "stablehlo.add",
                                               "stablehlo.dot_general", "func.return"]
    assert g.num_alternatives == 0 and not g.node_is_alternative.any()
    assert g.root_index == g.num_nodes - 1
    assert g.node_type[0] == "8x32xf32" and g.node_shape[0].tolist() == [8, 32] + [-1] * 6
    assert g.node_size[0] == 256 and g.node_bytes[0] == 1024
    assert g.input_bytes == 4 * (8 * 32 + 32 * 32 + 32 * 8 + 8 * 32)
    assert g.output_bytes == 4 * 8 * 32
    assert observe.DTYPE_VOCAB[g.node_dtype[0]] == "f32"
    # uids are the structural op hashes
    hashes = set(op_hashes(p).values())
    assert {int(u) for u in g.node_uid[4:]} <= hashes


def test_alternatives_are_inlined_with_choice_edges(programs):
    aug = driver.augment(programs["low_rank_update"], ["distribute_left"])
    g = observe.graph(aug)
    _check_csr(g)
    assert g.num_alternatives == 1
    a = int(g.alternative_indices[0])
    assert g.node_is_alternative[a] and g.node_name[a] == "shlo_env.alternatives"
    assert g.alternative_num_choices.tolist() == [2] and g.node_num_choices[a] == 2
    assert g.alternative_labels == [("original", "distribute_left")]
    ins = range(g.operand_offsets[a], g.operand_offsets[a + 1])
    choices = sorted(int(g.edge_choice[j]) for j in ins)
    assert choices == [0, 1]  # one value per choice
    # the choice-0 edge comes from the original root (a main-body dot), choice 1 from the region
    for j in ins:
        src = int(g.edge_src[j])
        if g.edge_choice[j] == 0:
            assert g.node_alt[src] == -1 and g.node_name[src] == "stablehlo.dot_general"
        else:
            assert g.node_alt[src] == 0 and g.node_choice[src] == 1 and g.node_parent[src] == a
    region = np.flatnonzero(g.node_alt == 0)
    assert len(region) == 4 and set(g.node_gid[region]) == {int(g.node_gid[region[0]])}
    assert g.node_gid[region[0]] > 0
    # region ops read the main graph's producers directly (block arguments are inlined)
    assert all(g.node_name[int(g.edge_src[j])] != "parameter" or g.node_alt[int(g.edge_src[j])] == -1
               for j in range(g.num_edges))
    # non-choice edges carry -1
    assert set(g.edge_choice.tolist()) == {-1, 0, 1}


def test_nested_regions_get_their_own_gid_and_parent(programs):
    aug = driver.augment(programs["column_sums"], ["reduce_through_dot"])
    g = observe.graph(aug)
    _check_csr(g)
    reduces = [i for i, n in enumerate(g.node_name) if n == "stablehlo.reduce"]
    assert len(reduces) == 2  # the original and the one in the alternative
    for r in reduces:
        body = np.flatnonzero(g.node_parent == r)
        names = sorted(g.node_name[i] for i in body)
        assert names == ["parameter", "parameter", "stablehlo.add", "stablehlo.return"]
        assert len(set(g.node_gid[body])) == 1 and g.node_gid[body[0]] > 0


def test_features_and_summary_shapes(programs):
    g = observe.graph(driver.augment(programs["qkv"]))
    x = g.node_feature_matrix()
    assert x.shape == (g.num_nodes, len(observe.NODE_FEATURES)) and x.dtype == np.float32
    xo = g.node_feature_matrix(one_hot_opcode=True)
    assert xo.shape == (g.num_nodes, len(observe.OP_VOCAB) + len(observe.NODE_FEATURES))
    assert np.array_equal(xo[:, : len(observe.OP_VOCAB)].argmax(1), g.node_opcode)
    col = observe.NODE_FEATURES.index("is_alternative")
    assert np.array_equal(x[:, col] == 1, g.node_is_alternative)
    ef = g.edge_feature_matrix()
    assert ef.shape == (g.num_edges, len(observe.EDGE_FEATURES))
    s = observe.summary(g)
    assert s.shape == (observe.SUMMARY_SIZE,) and s.dtype == np.float32
    hist = s[: len(observe.OP_VOCAB)]
    assert hist[observe.op_id("stablehlo.dot_general")] == sum(n == "stablehlo.dot_general" for n in g.node_name)
    extra = dict(zip(observe.SUMMARY_FIELDS, s[len(observe.OP_VOCAB):]))
    assert extra["num_nodes"] == g.num_nodes and extra["num_alternatives"] == g.num_alternatives
    assert extra["num_choices"] == g.alternative_num_choices.sum()
    assert np.isfinite(s).all() and (s >= 0).all()


def test_vocabulary_is_stable():
    # ids are part of saved datasets and trained models: they must never move
    assert observe.OP_VOCAB[:6] == ("other", "parameter", "func.return", "shlo_env.alternatives",
                                    "shlo_env.yield", "func.call")
    assert observe.op_id("stablehlo.abs") == 6
    assert observe.op_id("stablehlo.add") == 7
    assert observe.op_id("stablehlo.dot_general") == 41
    assert observe.op_id("stablehlo.xor") == len(observe.OP_VOCAB) - 1
    assert observe.op_id("mhlo.something_new") == 0
    assert len(set(observe.OP_VOCAB)) == len(observe.OP_VOCAB)
    assert observe.DTYPE_VOCAB[:3] == ("other", "f32", "f16")


def test_converters(programs):
    g = observe.graph(driver.augment(programs["qkv"]))
    pyg = observe.to_pyg(g)
    assert pyg["edge_index"].shape == (2, g.num_edges) and pyg["edge_index"].dtype == np.int64
    assert pyg["x"].shape[0] == g.num_nodes and pyg["edge_attr"].shape[0] == g.num_edges
    assert np.array_equal(pyg["alternatives"], g.alternative_indices)
    jr = observe.to_jraph(g)
    assert jr["n_node"].tolist() == [g.num_nodes] and jr["n_edge"].tolist() == [g.num_edges]
    assert np.array_equal(jr["senders"], g.edge_src) and np.array_equal(jr["receivers"], g.edge_dst)
    assert jr["globals"].shape == (1, observe.SUMMARY_SIZE)
    nx = pytest.importorskip("networkx")
    G = observe.to_networkx(g)
    assert isinstance(G, nx.MultiDiGraph)
    assert G.number_of_nodes() == g.num_nodes and G.number_of_edges() == g.num_edges
    assert nx.is_directed_acyclic_graph(G)
    a = int(g.alternative_indices[0])
    assert G.nodes[a]["is_alternative"] and G.graph["num_choices"] == g.alternative_num_choices.tolist()


@pytest.mark.parametrize("name", ["low_rank_update", "qkv", "column_sums", "matmul_chain"])
def test_live_nodes_match_what_apply_keeps(programs, name):
    aug = driver.augment(programs[name])
    alts = driver.list_alternatives(aug)
    assert alts, f"no pattern fired on {name}"
    g = observe.graph(aug)
    vectors = list(itertools.islice(itertools.product(*[range(a.num_choices) for a in alts]), 16))
    for vec in vectors:
        live = observe.live_nodes(g, vec)
        expected = driver.apply(aug, list(vec)).num_ops()
        counted = sum(1 for i in range(g.num_nodes)
                      if live[i] and g.node_name[i] != "parameter" and not g.node_is_alternative[i])
        assert counted == expected, (name, vec)


def test_live_nodes_match_apply_on_random_programs():
    """Property: on drawn programs, the nodes `live_nodes` keeps are exactly what apply keeps,
    and the observation's CSR invariants hold, for several decision vectors each."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from shlo_env.testing.random_programs import programs as random_programs

    checked = {"alternatives": 0}

    @settings(max_examples=25, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(random_programs(max_ops=6, dtypes=("float32",)), st.integers(0, 2**16))
    def check(program, seed):
        aug = driver.augment(program)
        alts = driver.list_alternatives(aug)
        g = observe.graph(aug, uids=False)
        _check_csr(g)
        assert g.num_alternatives == len(alts)
        assert [tuple(a.labels) for a in alts] == g.alternative_labels
        checked["alternatives"] += len(alts)
        rng = np.random.default_rng(seed)
        vectors = [[0] * len(alts), [1 if a.num_choices > 1 else 0 for a in alts]]
        vectors += [[int(rng.integers(a.num_choices)) for a in alts] for _ in range(3)]
        for vec in vectors:
            live = observe.live_nodes(g, vec)
            counted = sum(1 for i in range(g.num_nodes)
                          if live[i] and g.node_name[i] != "parameter" and not g.node_is_alternative[i])
            assert counted == driver.apply(aug, vec).num_ops(), vec

    check()
    assert checked["alternatives"] > 10  # the drawn programs did exercise alternatives


@pytest.mark.parametrize("name", ["linen_mlp_train", "linen_cnn_train", "lj_md_verlet", "kalman_filter_scan"])
def test_live_nodes_match_apply_on_corpus_programs(name):
    """Real programs: loops with dead code in their bodies, side-effecting ops, overlapping
    alternatives. Needs the corpus data (skipped without it)."""
    corpus = pytest.importorskip("shlo_env.corpus")
    try:
        program = corpus.load(f"corpus/{name}")
    except LookupError as e:
        pytest.skip(f"corpus data not available: {e}")
    aug = driver.augment(program)
    alts = driver.list_alternatives(aug)
    g = observe.graph(aug, uids=False)
    _check_csr(g)
    rng = np.random.default_rng(0)
    for vec in ([1 if a.num_choices > 1 else 0 for a in alts],
                [int(rng.integers(a.num_choices)) for a in alts]):
        live = observe.live_nodes(g, vec)
        counted = sum(1 for i in range(g.num_nodes)
                      if live[i] and g.node_name[i] != "parameter" and not g.node_is_alternative[i])
        assert counted == driver.apply(aug, vec).num_ops()
