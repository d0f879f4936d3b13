"""jraph graph networks on a random batch of graphs: the full `jraph.GraphNetwork` (edge, node and
global updates) in a train step, and `jraph.GAT` attention layers for inference."""

from __future__ import annotations

import haiku as hk
import jax
import jax.numpy as jnp
import jraph
import numpy as np
import optax

from shlo_env.zoo.programs import optax_step, program


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _graph(seed: int, n_graphs: int, nodes_per: int, edges_per: int, node_f: int, edge_f: int) -> jraph.GraphsTuple:
    """A batch of random graphs as one padded-free GraphsTuple."""
    r = _rng(seed)
    n, e = n_graphs * nodes_per, n_graphs * edges_per
    offsets = np.repeat(np.arange(n_graphs) * nodes_per, edges_per)
    senders = (r.integers(0, nodes_per, size=e) + offsets).astype(np.int32)
    receivers = (r.integers(0, nodes_per, size=e) + offsets).astype(np.int32)
    return jraph.GraphsTuple(
        nodes=r.standard_normal((n, node_f)).astype(np.float32),
        edges=r.standard_normal((e, edge_f)).astype(np.float32),
        senders=senders, receivers=receivers,
        globals=r.standard_normal((n_graphs, 8)).astype(np.float32),
        n_node=np.full((n_graphs,), nodes_per, np.int32), n_edge=np.full((n_graphs,), edges_per, np.int32))


def _mlp(sizes):
    return lambda *xs: hk.nets.MLP(sizes, activate_final=False)(jnp.concatenate(xs, axis=-1))


@program("jraph_graphnet_train", library="jraph", kind="train_step", uses=("dm-haiku", "optax"),
         description="jraph.GraphNetwork (haiku MLP edge/node/global updates, 2 message-passing steps, "
                     "segment sums) regressing per-graph targets, optax.adam; 16 graphs x 32 nodes x 96 edges")
def jraph_graphnet_train():
    def f(g):
        for _ in range(2):
            g = jraph.GraphNetwork(update_edge_fn=_mlp([64, 32]), update_node_fn=_mlp([64, 32]),
                                   update_global_fn=_mlp([64, 8]))(g)
        return g.globals

    net = hk.without_apply_rng(hk.transform(f))
    g = _graph(0, 16, 32, 96, 16, 8)
    target = _rng(1).standard_normal((16, 8)).astype(np.float32)
    params = net.init(jax.random.PRNGKey(0), g)
    tx = optax.adam(1e-3)
    step = optax_step(lambda p, g, t: jnp.mean((net.apply(p, g) - t) ** 2), tx)
    return step, (params, tx.init(params), g, target), {
        "graphs": 16, "nodes_per_graph": 32, "edges_per_graph": 96, "steps": 2, "optimizer": "adam(1e-3)"}


@program("jraph_gat_infer", library="jraph", kind="inference", uses=("dm-haiku",),
         description="three jraph.GAT layers (haiku Linear queries, edge softmax by segment ops) on "
                     "8 graphs x 64 nodes x 256 edges, 32 features")
def jraph_gat_infer():
    def attention_logit(sender, receiver, edges):
        del edges
        return hk.Linear(1)(jnp.concatenate([sender, receiver], axis=-1))

    def f(g):
        for _ in range(3):
            g = jraph.GAT(attention_query_fn=hk.Linear(32), attention_logit_fn=attention_logit,
                          node_update_fn=jax.nn.elu)(g)
        return g.nodes

    net = hk.without_apply_rng(hk.transform(f))
    g = _graph(2, 8, 64, 256, 32, 4)
    params = net.init(jax.random.PRNGKey(1), g)
    return net.apply, (params, g), {"graphs": 8, "nodes_per_graph": 64, "edges_per_graph": 256, "layers": 3}
