"""Proper graph colourings for chromatic sweeps (Gibbs, ICM, mean field).

Nodes of one colour share no edge, so a chromatic sweep updates a whole colour class at once
(their conditionals are independent given the rest). The colouring is a one-off host cost.

Back ends (``order=``):

* ``"igraph"``: python-igraph's compiled greedy colouring
  (``Graph.vertex_coloring_greedy``, ``COLORED_NEIGHBORS``: the node with the most
  distinctly coloured neighbours goes next);
* ``"jones_plassmann"``: the greedy rule in the order degree-then-random, computed in
  rounds of vectorised NumPy (no per-node Python);
* ``"largest_first"`` / ``"natural"``: the sequential greedy pass in those orders (a host
  loop over the nodes, ~3 us a node at mean degree 18: small graphs only).

``"auto"`` picks by size and degree from ``benchmarks/bench_coloring.py`` (10^6 nodes,
kNN-like, k = 10, 2 CPU cores; figures in its JSON): see :func:`greedy_coloring`.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "ORDERS",
    "check_coloring",
    "color_classes",
    "csr_coloring",
    "greedy_coloring",
    "table_coloring",
    "undirected_csr",
]

ORDERS = ("auto", "igraph", "jones_plassmann", "largest_first", "natural")


def undirected_csr(graph) -> tuple[np.ndarray, np.ndarray]:
    """Undirected neighbour lists (CSR ``indptr, indices``; each neighbour once, sorted, no
    self-loops): colour the undirected version so that both directions of an interaction
    separate nodes. scipy's COO -> CSR conversion is linear in the edges (no comparison sort
    over them), which matters at 10^7 nodes."""
    import scipy.sparse as sp

    n = graph.n_nodes
    senders = np.asarray(graph.senders)
    receivers = np.asarray(graph.receivers)
    keep = senders != receivers
    s, r = senders[keep], receivers[keep]
    A = sp.coo_matrix((np.ones(s.size, dtype=bool), (s, r)), shape=(n, n)).tocsr()
    A = (A + A.T).tocsr()
    A.sort_indices()
    return A.indptr.astype(np.int64), A.indices.astype(np.int64)


_JP_MIN_NODES = 200_000
_PYTHON_MAX_NEIGHBOURS = 2_000_000


def greedy_coloring(graph, order: str = "auto", seed: int = 0) -> np.ndarray:
    """Greedy proper colouring ``int32[n]`` (adjacent nodes get different colours).

    Args:
      graph: a ``graphssl.graph.Graph`` holding every interaction of the model (directions
        are merged: both directions of an interaction separate nodes).
      order: ``"igraph"`` (python-igraph's compiled greedy, ``COLORED_NEIGHBORS``),
        ``"jones_plassmann"`` (the greedy rule in the order degree-then-random, in rounds of
        vectorised NumPy: a node takes the smallest colour free among its neighbours once
        every neighbour ahead of it in the order has one -- the colouring the sequential
        pass in that order gives; maximum degree < 64), ``"largest_first"`` (Welsh–Powell,
        a host loop), ``"natural"`` or ``"auto"``: jones_plassmann from 2*10^5 nodes when
        the maximum degree is < 64, largest_first below that up to 2*10^6 stored
        neighbours, igraph otherwise. Measured at 10^6 nodes, mean degree 18, 2 CPU cores
        (``benchmarks/bench_coloring.py``, CPU seconds): igraph 5.3 (of which building its
        graph from the edge list in Python is the larger part), jones_plassmann 1.6,
        largest_first 1.8; so igraph only takes the cases the other two handle badly
        (dense graphs: jones_plassmann's colour bitmask is one 64-bit word, and the Python
        loop's cost grows with the edges).
      seed: tie-breaking seed of ``"jones_plassmann"``.
    Uses at most ``max_degree + 1`` colours.
    """
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    return csr_coloring(*undirected_csr(graph), order=order, seed=seed)


def csr_coloring(indptr, nbrs, order: str = "auto", seed: int = 0) -> np.ndarray:
    """:func:`greedy_coloring` of the undirected graph in CSR form (``indptr, indices``;
    each neighbour once in both rows, no self-loops: :func:`undirected_csr`)."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    n = indptr.size - 1
    degree = np.diff(indptr)
    max_degree = int(degree.max()) if n else 0
    if order == "auto":
        if max_degree < 64 and n >= _JP_MIN_NODES:
            order = "jones_plassmann"
        else:
            order = "largest_first" if nbrs.size <= _PYTHON_MAX_NEIGHBOURS else "igraph"
    if order == "igraph":
        return _igraph_coloring(indptr, nbrs)
    if order == "jones_plassmann":
        if max_degree >= 64:
            raise ValueError("order: 'jones_plassmann' needs a maximum degree < 64 (colours "
                             "are kept as bits of one word); use 'igraph'")
        return _jones_plassmann(indptr, nbrs, degree, seed)
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


def _igraph_coloring(indptr, nbrs) -> np.ndarray:
    """python-igraph's greedy colouring (C) of the undirected CSR graph."""
    import igraph

    n = indptr.size - 1
    owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    upper = owner < nbrs
    edges = np.stack([owner[upper], nbrs[upper]], axis=1)
    g = igraph.Graph(n=n, edges=edges)
    return np.asarray(g.vertex_coloring_greedy(method="COLORED_NEIGHBORS"), dtype=np.int32)


def table_coloring(neighbor_index, order: str = "auto") -> np.ndarray:
    """A proper colouring ``int32[n]`` of the undirected structure of a padded neighbour
    table ``int[n, d]`` (padding slots hold the node itself and are skipped): no node reads,
    in either direction, a node of its own colour."""
    import scipy.sparse as sp

    index = np.asarray(neighbor_index)
    n, d = index.shape
    rows = np.repeat(np.arange(n), d)
    cols = index.reshape(-1)
    keep = rows != cols
    A = sp.coo_matrix((np.ones(int(keep.sum()), bool), (rows[keep], cols[keep])),
                      shape=(n, n)).tocsr()
    A = (A + A.T).tocsr()
    A.sort_indices()
    return csr_coloring(A.indptr.astype(np.int64), A.indices.astype(np.int64), order)


def check_coloring(colors, neighbor_index, coupling=None) -> None:
    """``ValueError`` unless ``colors`` is proper for the table: no slot ``(i, d)`` with a
    (non-zero, if ``coupling`` is given) interaction joins two nodes of one colour."""
    index = np.asarray(neighbor_index)
    colors = np.asarray(colors)
    n, d = index.shape
    if colors.shape != (n,):
        raise ValueError(f"colors: expected one colour per node, shape ({n},), got "
                         f"{colors.shape}")
    rows = np.repeat(np.arange(n), d)
    cols = index.reshape(-1)
    bad = (colors[rows] == colors[cols]) & (rows != cols)
    if coupling is not None:
        bad &= np.asarray(coupling).reshape(-1) != 0
    if np.any(bad):
        raise ValueError("colors: two interacting nodes share a colour (the colouring does "
                         "not cover the model's couplings); colour the model's own graph "
                         "(chromatic_gibbs(model.graph)) or pass colors=None")


def _rows(indptr, nodes):
    """Positions in the CSR arrays of the neighbour lists of ``nodes`` and each one's owner."""
    starts, lengths = indptr[nodes], np.diff(indptr)[nodes]
    owner = np.repeat(np.arange(nodes.size), lengths)
    positions = np.arange(owner.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return starts[owner] + positions, owner, lengths


def _jones_plassmann(indptr, nbrs, degree, seed):
    """Greedy colouring in rounds: priority = (degree, random); a node whose higher-priority
    neighbours are all coloured takes the smallest colour none of its neighbours holds."""
    n = degree.size
    priority = np.argsort(np.lexsort((np.random.default_rng(seed).random(n), degree)))
    src = np.repeat(np.arange(n), degree)
    waiting = np.bincount(src[priority[nbrs] > priority[src]], minlength=n)
    colors = np.full(n, -1, dtype=np.int64)
    ready = np.flatnonzero(waiting == 0)
    while ready.size:
        pos, owner, lengths = _rows(indptr, ready)
        nb = nbrs[pos]
        nc = colors[nb]
        bits = np.where(nc >= 0, np.left_shift(np.uint64(1), np.maximum(nc, 0).astype(
            np.uint64)), np.uint64(0))
        used = np.zeros(ready.size, dtype=np.uint64)
        np.bitwise_or.at(used, owner, bits)
        free = ~used & (used + np.uint64(1))  # lowest zero bit
        colors[ready] = np.log2(free.astype(np.float64)).astype(np.int64)
        later = priority[nb] < priority[ready[owner]]
        waiting -= np.bincount(nb[later], minlength=n)
        waiting[ready] = -1  # coloured: never ready again
        ready = np.flatnonzero(waiting == 0)
    return colors.astype(np.int32)


def color_classes(colors: np.ndarray) -> list[np.ndarray]:
    """Node indices of each colour, ``[int32[n_c] for c in colours]`` (sorted); an empty
    colouring (a graph without nodes) has no classes."""
    colors = np.asarray(colors)
    if colors.ndim != 1 or (colors.size and (not np.issubdtype(colors.dtype, np.integer)
                                             or colors.min() < 0)):
        raise ValueError(f"colors: expected one integer colour >= 0 per node, int[n], got "
                         f"dtype {colors.dtype} and shape {colors.shape}")
    if colors.size == 0:
        return []
    return [np.flatnonzero(colors == c).astype(np.int32) for c in range(int(colors.max()) + 1)]


