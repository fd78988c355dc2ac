"""Swendsen–Wang cluster sampler for Potts-family models (Zhu & Ghahramani 2002, Sec. 3.4).

For ``P(Y) ∝ exp(sum_{i<j} J_ij δ(y_i, y_j) + sum_i h_i(y_i))`` (Eq. (28) with ``A_ij = J_ij``,
plus an optional field ``h``) one sweep is the two Gibbs steps of the auxiliary-bond model:

1. bonds (Eq. (34)): ``D_ij = 1`` with probability ``1 - exp(-J_ij)`` if ``y_i = y_j``, else 0;
2. labels given bonds (Eq. (35)): every connected component ("cluster") of the bond graph
   takes one label — uniformly without a field; ``∝ exp(sum_{i in cluster} h_i(c))`` with
   one; and, in the clamped phase, the label of the clamped nodes it holds (end of Sec. 3.4).

Paper symbols -> code: ``A_ij`` (or ``J_ij``) = ``model.coupling_graph().weights`` (both
directions stored; each direction bonds with ``1 - exp(-J/2)``, so the pair bonds with
``1 - exp(-J)``, see :func:`sample_bonds`); ``h`` = ``model.unary_logits()`` (``None`` or
zeros = no field); the clamped set is ``model.observed``.

A cluster can never hold two different clamped labels: bonds join only equal labels and
clamped nodes always hold their observed labels, so every cluster with a clamped node is
uniformly labelled by that clamped label, and the clamped update is "keep the cluster's
current label". This is the exact conditional ``P(Y_U | D, Y_L)`` of the paper's clamped chain.

Connected components are found on the device by hook-and-jump: each round hooks, for every
bond whose endpoints have different roots, the larger root onto the smaller
(``.at[].min``), then compresses every node to its root by pointer jumping; rounds repeat
(``lax.while_loop``) until no bond joins two roots. Info: ``n_clusters``,
``component_rounds``, ``max_cluster_size``, ``n_bonds``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from graphssl.inference.mcmc.kernels import Kernel, label_init, sample_categorical

__all__ = ["swendsen_wang", "connected_components", "sample_bonds"]


def sample_bonds(key, labels, senders, receivers, couplings) -> jax.Array:
    """Eq. (34): ``bool[E]``, each stored (directed) edge bonded with ``1 - exp(-J_e / 2)``
    between equal labels.

    The pair ``{i, j}`` is joined if either stored direction bonds, which happens with
    ``1 - exp(-(J_ij + J_ji) / 2)``: exactly ``1 - exp(-J_ij)`` for a symmetric coupling graph
    (both directions stored, CONTRIBUTING.md), and the right effective coupling
    ``(J_ij + J_ji) / 2`` when the stored weights are asymmetric (an energy summing
    ``J_e / 2`` over stored edges).
    """
    p_bond = -jnp.expm1(-0.5 * jnp.maximum(couplings, 0.0))
    u = jax.random.uniform(key, couplings.shape, dtype=p_bond.dtype)
    same = labels[senders] == labels[receivers]
    return same & (u < p_bond)


def _compress(parent: jax.Array) -> jax.Array:
    """Pointer jumping until every node points at its root."""

    def cond(p):
        return jnp.any(p[p] != p)

    return jax.lax.while_loop(cond, lambda p: p[p], parent)


def connected_components(senders, receivers, active, n_nodes: int) -> tuple[jax.Array, jax.Array]:
    """Components of the graph of ``active`` edges: ``(root int32[n], rounds int32)``.

    ``root[i]`` is the smallest node index of ``i``'s component. Hook-and-jump rounds in a
    ``lax.while_loop``; ``rounds`` counts the hooking rounds (>= 1).
    """
    parent = jnp.arange(n_nodes, dtype=jnp.int32)
    dummy = jnp.int32(n_nodes)  # scatter target for inactive edges (dropped: out of range)

    def body(carry):
        parent, _, rounds = carry
        rs, rr = parent[senders], parent[receivers]
        hi = jnp.where(active & (rs != rr), jnp.maximum(rs, rr), dummy)
        parent = parent.at[hi].min(jnp.minimum(rs, rr), mode="drop")
        parent = _compress(parent)
        pending = jnp.any(active & (parent[senders] != parent[receivers]))
        return parent, pending, rounds + 1

    parent, _, rounds = jax.lax.while_loop(
        lambda c: c[1], body, (parent, jnp.any(active), jnp.int32(0))
    )
    return parent, jnp.maximum(rounds, 1)


def _cluster_labels(key, model, labels, root, n):
    field = model.unary_logits() if hasattr(model, "unary_logits") else None
    q = model.n_classes
    if field is None:
        new_root = jax.random.randint(key, (n,), 0, q, dtype=labels.dtype)
    else:
        cluster_logits = jax.ops.segment_sum(field, root, num_segments=n)
        new_root = sample_categorical(key, cluster_logits).astype(labels.dtype)
    observed = jnp.asarray(model.observed, dtype=bool)
    has_clamped = jax.ops.segment_max(observed.astype(jnp.int32), root, num_segments=n) > 0
    return jnp.where(has_clamped[root], labels, new_root[root])


def swendsen_wang() -> Kernel:
    """Swendsen–Wang kernel (Eqs. (28)-(35)) for models with ``coupling_graph()``
    (``J_ij >= 0``, both directions stored) and optionally ``unary_logits()``."""

    def step(model, key, state):
        key_bond, key_label = jax.random.split(key)
        graph = model.coupling_graph()
        labels = state.labels
        n = model.n_nodes
        bonds = sample_bonds(key_bond, labels, graph.senders, graph.receivers, graph.weights)
        root, rounds = connected_components(graph.senders, graph.receivers, bonds, n)
        new_labels = _cluster_labels(key_label, model, labels, root, n)
        is_root = root == jnp.arange(n, dtype=root.dtype)
        sizes = jax.ops.segment_sum(jnp.ones(n, jnp.int32), root, num_segments=n)
        info = {
            "n_clusters": jnp.sum(is_root.astype(jnp.int32)),
            "component_rounds": rounds,
            "max_cluster_size": jnp.max(sizes),
            "n_bonds": jnp.sum(bonds.astype(jnp.int32)),  # bonded stored (directed) edges
        }
        return state._replace(labels=new_labels), info

    return Kernel(label_init, step)
