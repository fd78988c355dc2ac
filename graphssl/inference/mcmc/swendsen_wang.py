"""Swendsen–Wang cluster sampler for pairwise label models (Zhu & Ghahramani 2002, Sec. 3.4).

For the pairwise law (P) of :mod:`graphssl.models.protocol`,
``P(Y) ∝ exp(sum_{i<j} J_ij δ(y_i, y_j) + sum_i h_i(y_i))`` (Eq. (28) with ``A_ij = J_ij``,
plus the field ``h``), one sweep is the two Gibbs steps of the auxiliary-bond model:

1. bonds (Eq. (34)): ``D_ij = 1`` with probability ``1 - exp(-J_ij)`` if ``y_i = y_j``, else 0,
   one draw per unordered pair ``i < j``;
2. labels given bonds (Eq. (35)): every connected component ("cluster") of the bond graph
   takes one label ``∝ exp(sum_{i in cluster} h_i(c))`` (uniform when ``h = 0``), and, in the
   clamped phase, the label of the clamped nodes it holds (end of Sec. 3.4).

Paper symbols -> code: ``A_ij`` (or ``J_ij``) and ``h`` come from ``model.pairwise_tables()``
only (``coupling``, ``unary``; the field is never dropped), the pairs from
:func:`graphssl.models.protocol.bond_list`; the clamped set is ``model.observed``.

A cluster can never hold two different clamped labels: bonds join only equal labels and
clamped nodes always hold their observed labels, so every cluster with a clamped node is
uniformly labelled by that clamped label, and the clamped update is "keep the cluster's
current label". This is the exact conditional ``P(Y_U | D, Y_L)`` of the paper's clamped chain.

Connected components are found on the device by hook-and-jump: each round hooks, for every
bond whose endpoints have different roots, the larger root onto the smaller
(``.at[].min``), then compresses every node to its root by pointer jumping; rounds repeat
(``lax.while_loop``) until no bond joins two roots. Info: :class:`SwendsenWangInfo`.

Pair list. A sweep reads the slots ``(i, d)`` of the padded table with ``i < j``
(``E / 2`` pairs): the model's cached ``PairwiseTables.bond_slots`` (``PottsModel`` keeps
them) or, with ``swendsen_wang(graph)``, the kernel's own list made once on the host. A
model without either has every slot of the ``[n, d]`` table read and the others masked
(padding and mirror slots, about 3.6x the pairs on the benchmark's kNN-like graph).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from graphssl.inference.mcmc.kernels import (
    Kernel,
    label_init,
    pairwise_check,
    sample_categorical,
)
from graphssl.models.protocol import bond_list, bond_slots, is_traced, pairwise_tables

__all__ = ["SwendsenWangInfo", "swendsen_wang", "connected_components", "sample_bonds"]


class SwendsenWangInfo(NamedTuple):
    """Info of a Swendsen–Wang sweep: ``n_clusters`` (components of the bond graph),
    ``component_rounds`` (hook-and-jump rounds), ``max_cluster_size`` (nodes in the largest
    cluster), ``n_bonds`` (bonded unordered pairs). All int32 scalars."""

    n_clusters: jax.Array
    component_rounds: jax.Array
    max_cluster_size: jax.Array
    n_bonds: jax.Array


def sample_bonds(key, labels, senders, receivers, couplings) -> jax.Array:
    """Eq. (34): ``bool[m]``, pair ``e`` bonded with ``1 - exp(-J_e)`` when its two labels
    are equal (each unordered pair listed once, :func:`graphssl.models.protocol.bond_list`)."""
    p_bond = -jnp.expm1(-jnp.maximum(couplings, 0.0))
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

    ``root[i]`` is the smallest node index of ``i``'s component (an edge listed in one
    direction joins both ends). Hook-and-jump rounds in a ``lax.while_loop``; ``rounds``
    counts the hooking rounds (>= 1).
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


def _cluster_labels(key, model, unary, labels, root, n):
    """Eq. (35): one label per cluster from its summed field; clamped clusters keep theirs."""
    cluster_logits = jax.ops.segment_sum(unary, root, num_segments=n)
    new_root = sample_categorical(key, cluster_logits).astype(labels.dtype)
    observed = jnp.asarray(model.observed, dtype=bool)
    has_clamped = jax.ops.segment_max(observed.astype(jnp.int32), root, num_segments=n) > 0
    return jnp.where(has_clamped[root], labels, new_root[root])


def _sw_step(slots, model, key, state):
    key_bond, key_label = jax.random.split(key)
    tables = pairwise_tables(model)
    senders, receivers, coupling = bond_list(tables, slots)
    labels = state.labels
    n = model.n_nodes
    bonds = sample_bonds(key_bond, labels, senders, receivers, coupling)
    root, rounds = connected_components(senders, receivers, bonds, n)
    new_labels = _cluster_labels(key_label, model, tables.unary, labels, root, n)
    is_root = root == jnp.arange(n, dtype=root.dtype)
    sizes = jax.ops.segment_sum(jnp.ones(n, jnp.int32), root, num_segments=n)
    info = SwendsenWangInfo(
        n_clusters=jnp.sum(is_root.astype(jnp.int32)),
        component_rounds=rounds,
        max_cluster_size=jnp.max(sizes),
        n_bonds=jnp.sum(bonds.astype(jnp.int32)),  # bonded unordered pairs
    )
    return state._replace(labels=new_labels), info


def _sw_check(index, model) -> None:
    """``Kernel.check`` of ``swendsen_wang(graph)``: valid tables, non-negative couplings
    and the model's table in the kernel graph's slot order."""
    pairwise_check(model)
    t = pairwise_tables(model)
    if np.any(np.asarray(t.coupling) < 0):
        raise ValueError("pairwise_tables: Swendsen-Wang needs couplings J_ij >= 0 (bond "
                         "probability 1 - exp(-J)); use Gibbs sampling for repulsive pairs")
    if index is not None and not np.array_equal(np.asarray(t.neighbor_index), index):
        raise ValueError("graph: the model's neighbour table differs from that of the graph "
                         "given to swendsen_wang; pass the model's own graph "
                         "(swendsen_wang(model.graph)) or none")


def swendsen_wang(graph=None) -> Kernel:
    """Swendsen–Wang kernel (Eqs. (28)-(35)) for pairwise label models with ``J_ij >= 0``.

    Args:
      graph: optional, the model's own graph (``model.graph``): its bond pairs are listed
        once on the host, so a sweep reads ``E / 2`` pairs even for a model whose tables
        carry no ``bond_slots`` (``benchmarks/bench_samplers.py``); ``check``/``init`` then
        verify that the model's table is this graph's.
    """
    index = slots = None
    if graph is not None:
        index = np.asarray(graph.padded_neighbors()[0])
        slots = jnp.asarray(bond_slots(index))
    check = functools.partial(_sw_check, index)

    def init(model, key, labels=None):
        if not is_traced(model):
            check(model)
        return label_init(model, key, labels)

    step = jax.tree_util.Partial(_sw_step, slots)
    if graph is None:
        return Kernel(_sw_init_plain, step, None, _sw_check_plain)
    return Kernel(init, step, None, check)


def _sw_check_plain(model) -> None:
    _sw_check(None, model)


def _sw_init_plain(model, key, labels=None):
    if not is_traced(model):
        _sw_check_plain(model)
    return label_init(model, key, labels)

