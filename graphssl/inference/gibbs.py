"""Gibbs samplers over node labels (Zhu & Ghahramani 2002, Sec. 3.2, Eq. (25)).

Both kernels draw ``y_i ~ P(y_i = c | Y_{-i}) ∝ exp(logits_ic)`` with
``logits = model.conditional_logits(labels, nodes)`` (Eq. (25): ``logits_ic = sum_{j != i,
y_j = c} A_ij`` for the basic model, plus any field). Clamped nodes (``model.observed``) keep
their labels; the unclamped phase of Boltzmann learning is ``model.unclamped()``.

* :func:`sequential_gibbs`: single-site updates in a fixed node order (``lax.scan``), the
  paper's scheme, exact for any model whose conditionals change after each update.
* :func:`chromatic_gibbs`: the graph is coloured once (greedy, host side); nodes of one colour
  share no edge, so their conditionals are independent given the rest and a whole colour
  class is drawn at once. One step = one sweep over all colours.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from graphssl.inference.kernels import Kernel, label_init, sample_categorical

__all__ = ["sequential_gibbs", "chromatic_gibbs", "greedy_coloring", "color_classes"]


def _csr(graph) -> tuple[np.ndarray, np.ndarray]:
    senders = np.asarray(graph.senders, dtype=np.int64)
    receivers = np.asarray(graph.receivers, dtype=np.int64)
    # colour the undirected version so that both directions of an interaction separate nodes
    s = np.concatenate([senders, receivers])
    r = np.concatenate([receivers, senders])
    keep = s != r
    s, r = s[keep], r[keep]
    order = np.lexsort((r, s))
    s, r = s[order], r[order]
    indptr = np.zeros(graph.n_nodes + 1, dtype=np.int64)
    np.add.at(indptr, s + 1, 1)
    return np.cumsum(indptr), r


def greedy_coloring(graph, order: str = "largest_first") -> np.ndarray:
    """Greedy proper colouring ``int32[n]`` (adjacent nodes get different colours).

    Args:
      graph: a ``graphssl.graph.Graph`` holding every interaction of the model.
      order: ``"largest_first"`` (Welsh–Powell: fewer colours) or ``"natural"``.
    Uses at most ``max_degree + 1`` colours.
    """
    if order not in ("largest_first", "natural"):
        raise ValueError(f"order must be 'largest_first' or 'natural', got {order!r}")
    indptr, nbrs = _csr(graph)
    n = graph.n_nodes
    degree = np.diff(indptr)
    visit = np.argsort(-degree, kind="stable") if order == "largest_first" else np.arange(n)
    colors = np.full(n, -1, dtype=np.int64)
    indptr_l, nbrs_l = indptr.tolist(), nbrs.tolist()
    colors_l = colors.tolist()
    for node in visit.tolist():
        used = {colors_l[j] for j in nbrs_l[indptr_l[node] : indptr_l[node + 1]]}
        c = 0
        while c in used:
            c += 1
        colors_l[node] = c
    return np.asarray(colors_l, dtype=np.int32)


def color_classes(colors: np.ndarray) -> list[np.ndarray]:
    """Node indices of each colour, ``[int32[n_c] for c in colours]`` (sorted)."""
    colors = np.asarray(colors)
    return [np.flatnonzero(colors == c).astype(np.int32) for c in range(int(colors.max()) + 1)]


def _update(model, key, labels, nodes):
    logits = model.conditional_logits(labels, nodes)
    draw = sample_categorical(key, logits).astype(labels.dtype)
    observed = jnp.asarray(model.observed, dtype=bool)[nodes]
    new = jnp.where(observed, labels[nodes], draw)
    return labels.at[nodes].set(new, indices_are_sorted=True, unique_indices=True)


def sequential_gibbs(order: np.ndarray | None = None) -> Kernel:
    """Single-site Gibbs, one sweep per step in ``order`` (default ``0..n-1``), Eq. (25).

    Each node's conditional is recomputed after every single update (``lax.scan`` over the
    nodes), so it is exact for any model; cost per sweep is ``n`` calls of
    ``conditional_logits`` on one node.
    """

    def step(model, key, state):
        idx = (
            jnp.arange(model.n_nodes, dtype=jnp.int32)
            if order is None
            else jnp.asarray(order, dtype=jnp.int32)
        )
        keys = jax.random.split(key, idx.shape[0])

        def body(labels, xs):
            node, k = xs
            return _update(model, k, labels, node[None]), None

        labels, _ = jax.lax.scan(body, state.labels, (idx, keys))
        return state._replace(labels=labels), {}

    return Kernel(label_init, step)


def chromatic_gibbs(graph, colors: np.ndarray | None = None) -> Kernel:
    """Chromatic (colour-class block) Gibbs: one sweep updates each colour class at once.

    Args:
      graph: the interaction graph (every pair with a coupling must be an edge), coloured once
        by :func:`greedy_coloring` unless ``colors`` (a proper colouring, ``int[n]``) is given.
    Exact for pairwise models: nodes of one colour are conditionally independent.
    """
    if colors is None:
        colors = greedy_coloring(graph)
    colors = np.asarray(colors)
    if colors.shape != (graph.n_nodes,):
        raise ValueError(f"colors must have shape ({graph.n_nodes},), got {colors.shape}")
    indptr, nbrs = _csr(graph)
    if np.any(colors[np.repeat(np.arange(graph.n_nodes), np.diff(indptr))] == colors[nbrs]):
        raise ValueError("colors is not a proper colouring of graph; pass colors=None")
    classes = [jnp.asarray(c) for c in color_classes(colors) if c.size]

    def step(model, key, state):
        labels = state.labels
        for nodes, k in zip(classes, jax.random.split(key, len(classes)), strict=False):
            labels = _update(model, k, labels, nodes)
        return state._replace(labels=labels), {}

    kernel = Kernel(label_init, step)
    return kernel
