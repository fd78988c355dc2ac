"""Graph mincut classification (Blum & Chawla 2001): the cut network, its energy, edge weights.

What is believed (Sec. 2 and Sec. 4 of Blum & Chawla): similar examples should share a label,
so a labelling ``f`` of the unlabelled examples U is scored by the weight of the edges it cuts,

    cut(f) = sum_{i<j} w(x_i, x_j) [f(x_i) != f(x_j)],

with the labelled examples L held at their labels. ``cut`` is, up to the constant
``sum_{i<j} w_ij``, the energy ``beta H`` of the zero-field Potts/Ising model at ``beta = 1``
(``graphssl.models.potts.PottsModel``, Bergamim & Breve Eq. 11), so the minimum cut is the MAP
labelling of the clamped binary Potts model (Sec. 4: "when you take the log, you get the
mincut objective"). How the minimum is found (max-flow) lives in
``graphssl.inference.optimize.maxflow``.

Paper symbols -> arguments: ``v+`` / ``v-`` -> the source / sink of :class:`CutNetwork`;
``L+`` / ``L-`` -> ``observed & (labels == 1)`` / ``observed & (labels == 0)``;
``w(x, y)`` -> the weight matrix ``W`` (a :class:`~graphssl.graph.Graph`, a scipy sparse or a
dense symmetric array); ``alpha`` -> the factor on unlabelled-unlabelled edges (Fig. 1);
``delta`` -> the radius of the Mincut-delta graph (Sec. 5.1).

The module is split in three (public names stay importable from here):

* this module: the cut network (Sec. 2, steps 1-3), alpha-expansion moves, cut / Potts
  energies, Lemma 3.4's weighted vote, the clamped Potts model;
* :mod:`graphssl.models.mincut_weights`: distances (L2, Hamming, the information-gain metric
  of Sec. 5.1) and edge weights (1-NN Thm 3.1, averaging Thm 3.2, Mincut-3, Mincut-delta,
  exponential kNN of Sec. 5.2);
* :mod:`graphssl.models.mincut_delta`: the delta_0 / delta_1/2 rules and the delta_opt grid.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp

from graphssl.models.mincut_delta import delta_grid, delta_half, delta_zero
from graphssl.models.mincut_weights import (
    averaging_knn_weights,
    delta_weights,
    euclidean_distances,
    exponential_knn_weights,
    hamming_distances,
    information_gain,
    information_gain_distances,
    locally_weighted_average_weights,
    mincut3_weights,
    nearest_neighbor_weights,
    neighbors_from_distances,
)

__all__ = [
    "CutNetwork",
    "as_weight_matrix",
    "scale_unlabelled_edges",
    "cut_network",
    "arc_network",
    "expansion_network",
    "cut_value",
    "potts_energy",
    "weighted_vote",
    "potts_model",
    # re-exported from mincut_weights / mincut_delta
    "euclidean_distances",
    "hamming_distances",
    "information_gain",
    "information_gain_distances",
    "neighbors_from_distances",
    "nearest_neighbor_weights",
    "locally_weighted_average_weights",
    "averaging_knn_weights",
    "mincut3_weights",
    "delta_weights",
    "delta_zero",
    "delta_half",
    "delta_grid",
    "exponential_knn_weights",
]


# ----------------------------------------------------------------------------- the network


@dataclasses.dataclass(frozen=True)
class CutNetwork:
    """A directed s-t network over example nodes ``0..n-1`` plus ``v+`` (source), ``v-`` (sink).

    Arc ``senders[e] -> receivers[e]`` has capacity ``capacities[e]`` and the opposite arc
    ``reverse_capacities[e]`` (equal for the undirected example edges of Sec. 2). Terminal arcs:
    ``v+ -> i`` with ``source_capacity[i]`` (paid when i ends on the ``v-`` side) and
    ``i -> v-`` with ``sink_capacity[i]`` (paid when i ends on the ``v+`` side). A cut's value
    is ``constant`` plus the capacities of the arcs leaving the ``v+`` side.
    ``terminal_capacity`` is the "infinite" capacity M used for clamped nodes (see
    :func:`cut_network` for why it is never cut).
    """

    n_nodes: int
    senders: np.ndarray
    receivers: np.ndarray
    capacities: np.ndarray
    reverse_capacities: np.ndarray
    source_capacity: np.ndarray
    sink_capacity: np.ndarray
    terminal_capacity: float
    constant: float = 0.0

    def cut_value(self, source_side) -> float:
        """Value of the cut whose ``v+`` side holds the example nodes where ``source_side``."""
        s = np.asarray(source_side, dtype=bool)
        i, j = self.senders, self.receivers
        pair = np.sum(self.capacities[s[i] & ~s[j]]) + np.sum(self.reverse_capacities[s[j] & ~s[i]])
        return float(
            self.constant + pair + np.sum(self.source_capacity[~s]) + np.sum(self.sink_capacity[s])
        )

    def to_networkx(self):
        """The network as a ``networkx.DiGraph`` with ``capacity`` on arcs; nodes
        ``0..n-1``, ``"v+"`` and ``"v-"``.
        """
        import networkx as nx

        g = nx.DiGraph()
        g.add_nodes_from(range(self.n_nodes))
        g.add_nodes_from(["v+", "v-"])
        for i, j, c, r in zip(
            self.senders.tolist(),
            self.receivers.tolist(),
            self.capacities.tolist(),
            self.reverse_capacities.tolist(),
            strict=True,
        ):
            for u, v, cap in ((i, j, c), (j, i, r)):
                if cap > 0:
                    old = g.get_edge_data(u, v, {"capacity": 0.0})["capacity"]
                    g.add_edge(u, v, capacity=old + cap)
        for i in np.flatnonzero(self.source_capacity > 0).tolist():
            g.add_edge("v+", i, capacity=float(self.source_capacity[i]))
        for i in np.flatnonzero(self.sink_capacity > 0).tolist():
            g.add_edge(i, "v-", capacity=float(self.sink_capacity[i]))
        return g


def as_weight_matrix(graph) -> sp.csr_matrix:
    """``W`` as a float64 CSR matrix with zero diagonal from a Graph, sparse or dense array.

    Raises ``ValueError`` when W is not square, not symmetric, negative or non-finite.
    Linear in the number of edges (no sparse products), so it is cheap at 10^7 edges.
    """
    if hasattr(graph, "senders") and hasattr(graph, "n_nodes"):
        W = graph.to_scipy()
    elif sp.issparse(graph):
        W = graph
    else:
        W = np.asarray(graph)
        if W.ndim != 2:
            raise ValueError(f"graph: expected an n x n weight matrix, got shape {W.shape}")
    if W.shape[0] != W.shape[1]:
        raise ValueError(f"graph: expected a square weight matrix, got shape {W.shape}")
    W = sp.csr_matrix(W, dtype=np.float64)
    W.sum_duplicates()
    n = W.shape[0]
    rows = np.repeat(np.arange(n), np.diff(W.indptr))
    keep = (rows != W.indices) & (W.data != 0)
    if not keep.all():  # drop the diagonal and explicit zeros, staying in CSR order
        counts = np.bincount(rows[keep], minlength=n)
        indptr = np.concatenate([[0], np.cumsum(counts)])
        W = sp.csr_matrix((W.data[keep], W.indices[keep], indptr), shape=(n, n))
    if W.nnz and (not np.all(np.isfinite(W.data)) or W.data.min() < 0):
        raise ValueError("graph: edge weights must be finite and >= 0 (a cut needs capacities)")
    # symmetry: W r == W^T r for a random r (an asymmetric W fails with probability 1)
    r = np.random.default_rng(0).random(n)
    left, right = W @ r, W.T @ r
    if not np.allclose(left, right, rtol=1e-9, atol=1e-12 * max(float(np.max(left, initial=0)), 1)):
        raise ValueError("graph: W must be symmetric (undirected); symmetrize it, e.g. (W + W.T)")
    return W


def _check_binary(labels, observed, n):
    labels = np.asarray(labels)
    if labels.shape != (n,):
        raise ValueError(f"labels: expected shape ({n},), got {labels.shape}")
    observed = labels >= 0 if observed is None else np.asarray(observed, dtype=bool)
    if observed.shape != (n,):
        raise ValueError(f"observed: expected shape ({n},), got {observed.shape}")
    if np.any(~np.isin(labels[observed], (0, 1))):
        raise ValueError(
            "labels: a binary cut needs labels 0 (negative, v-) or 1 (positive, v+) on the "
            "observed nodes; use the multi-class solver for more classes"
        )
    return labels.astype(np.int64), observed


def scale_unlabelled_edges(graph, observed, alpha: float) -> sp.csr_matrix:
    """Multiply the weight of every unlabelled-unlabelled edge by ``alpha`` (Fig. 1).

    ``alpha = 1`` is plain mincut; ``alpha = 0`` ignores the unlabelled data's own structure
    (each unlabelled point then follows its labelled neighbours alone).
    """
    return _scale(as_weight_matrix(graph), observed, alpha)


def _scale(W: sp.csr_matrix, observed, alpha: float) -> sp.csr_matrix:
    if not (np.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"alpha: the unlabelled-edge scale must be finite and >= 0, got {alpha}")
    if alpha == 1.0:
        return W
    free = ~np.asarray(observed, dtype=bool)
    rows = np.repeat(np.arange(W.shape[0]), np.diff(W.indptr))
    both = free[rows] & free[W.indices]
    data = np.where(both, alpha * W.data, W.data)
    W = sp.csr_matrix((data, W.indices.copy(), W.indptr.copy()), shape=W.shape)
    W.eliminate_zeros()
    return W


def _terminal_capacity(total: float, what: str = "graph") -> float:
    """``M = 2 total + 1``, the "infinite" capacity of the clamped nodes' terminal arcs; a
    ``ValueError`` naming ``what`` when it overflows float64 (weights near 1e308: the max-flow
    back ends then return an infinite or no cut)."""
    big = 2.0 * total + 1.0
    if not np.isfinite(big):
        raise ValueError(
            f"{what}: the capacities sum to {total:.6g}, too large for a cut network in "
            "float64 (its terminal capacity 2 x sum + 1 overflows); divide the weights (and "
            "unary costs) by their largest value or by a power of two: the minimum cut does "
            "not change"
        )
    return big


def _upper_edges(W: sp.csr_matrix):
    rows = np.repeat(np.arange(W.shape[0], dtype=np.int64), np.diff(W.indptr))
    upper = rows < W.indices
    return rows[upper], W.indices[upper].astype(np.int64), W.data[upper].astype(np.float64)


def cut_network(graph, labels, observed=None, *, alpha: float = 1.0) -> CutNetwork:
    """The network of Sec. 2, steps 1-3, for a binary problem.

    Example edges carry ``w(x, y)`` in both directions; ``v+`` is joined to every node of
    ``L+`` (observed, label 1) and every node of ``L-`` (observed, label 0) is joined to ``v-``
    by the capacity ``M = 2 W_tot + 1``, where ``W_tot = sum_{i<j} w_ij`` (after the ``alpha``
    scaling of Fig. 1).

    Why M is never cut (the paper's "infinite" weight, exactly): the cut whose ``v+`` side is
    ``{v+} u L+`` cuts only example edges, so its value is at most ``W_tot``; hence every
    minimum cut has value ``<= W_tot < M`` and contains no terminal arc. Any ``M > W_tot``
    would do; ``2 W_tot + 1`` keeps the strict inequality through float rounding of
    ``W_tot`` and also when all weights are tiny or zero.
    """
    W = as_weight_matrix(graph)
    n = W.shape[0]
    labels, observed = _check_binary(labels, observed, n)
    W = _scale(W, observed, alpha)
    i, j, w = _upper_edges(W)
    with np.errstate(over="ignore"):  # an overflowing sum is named just below
        total = float(np.sum(w))
    big = _terminal_capacity(total)
    positive = observed & (labels == 1)
    negative = observed & (labels == 0)
    return CutNetwork(
        n_nodes=n,
        senders=i,
        receivers=j,
        capacities=w,
        reverse_capacities=w.copy(),
        source_capacity=np.where(positive, big, 0.0),
        sink_capacity=np.where(negative, big, 0.0),
        terminal_capacity=big,
    )


def arc_network(arcs, labels, observed=None) -> CutNetwork:
    """The network of Sec. 2 with *directed* example arcs: capacity ``arcs[i, j]`` on the arc
    ``i -> j`` only (paid when i is on the ``v+`` side and j on the ``v-`` side). A protocol
    variant, not the paper's algorithm (whose edges are undirected, :func:`cut_network`): it
    is what a max-flow code computes when each example's neighbour list is entered as one arc
    per neighbour, measured in ``benchmarks/mincut_gaps.py`` against Table 1's Mincut-3.
    Terminal arcs as in :func:`cut_network`, ``M = 2 sum(arcs) + 1`` (above any cut that
    avoids the terminal arcs).
    """
    A = sp.csr_matrix(arcs, dtype=np.float64)
    n = A.shape[0]
    if A.shape != (n, n) or (A.nnz and (A.data.min() < 0 or not np.all(np.isfinite(A.data)))):
        raise ValueError("arcs: a square matrix of finite, non-negative capacities")
    labels, observed = _check_binary(labels, observed, n)
    both = (A + A.T).tocoo()
    upper = both.row < both.col
    i, j = both.row[upper].astype(np.int64), both.col[upper].astype(np.int64)
    forward = np.asarray(A[i, j]).ravel()
    backward = np.asarray(A[j, i]).ravel()
    big = _terminal_capacity(float(A.sum()), "arcs")
    return CutNetwork(
        n_nodes=n,
        senders=i,
        receivers=j,
        capacities=forward,
        reverse_capacities=backward,
        source_capacity=np.where(observed & (labels == 1), big, 0.0),
        sink_capacity=np.where(observed & (labels == 0), big, 0.0),
        terminal_capacity=big,
    )


def expansion_network(graph, labels, observed, alpha_label: int, unary=None) -> CutNetwork:
    """Binary network of one alpha-expansion move for the Potts energy (Boykov et al. 2001).

    The ``v+`` side switches to label ``alpha_label``; the ``v-`` side keeps ``labels``.
    For an edge (i, j) with weight w the move energy is E(keep, keep) = w [f_i != f_j],
    E(switch, switch) = 0, E(switch, keep) = w [alpha != f_j], E(keep, switch) =
    w [f_i != alpha]; it is submodular because the Potts distance is a metric, and it is
    written as a cut by the decomposition of Kolmogorov & Zabih (2004). ``unary`` (float[n, C],
    costs, optional) adds a field. Clamped nodes (``observed``) whose label is not
    ``alpha_label`` get the capacity M on ``i -> v-`` so they never switch.
    """
    W = as_weight_matrix(graph)
    n = W.shape[0]
    f = np.asarray(labels, dtype=np.int64)
    observed = np.asarray(observed, dtype=bool)
    i, j, w = _upper_edges(W)
    a = w * (f[i] != f[j])  # E(0,0), 0 = keep
    b = w * (f[i] != alpha_label)  # E(0,1): i keeps, j switches
    c = w * (alpha_label != f[j])  # E(1,0): i switches, j keeps
    # E = a + (c - a) x_i + (0 - c) x_j + (b + c - a) (1 - x_i) x_j, with x = 1 on the v+ side.
    switch_cost = np.zeros(n)  # cost paid when x_i = 1
    np.add.at(switch_cost, i, c - a)
    np.add.at(switch_cost, j, -c)
    constant = float(np.sum(a))
    if unary is not None:
        unary = np.asarray(unary, dtype=np.float64)
        rows = np.arange(n)
        keep_u, switch_u = unary[rows, f], unary[:, alpha_label]
        constant += float(np.sum(keep_u))
        switch_cost += switch_u - keep_u
    # x_i = 1 pays max(cost, 0) via i -> v-; a negative cost is paid as -cost when x_i = 0.
    sink_cap = np.maximum(switch_cost, 0.0)
    source_cap = np.maximum(-switch_cost, 0.0)
    constant += float(np.sum(np.minimum(switch_cost, 0.0)))
    pair = b + c - a  # >= 0 by the triangle inequality; arc j -> i (cut when x_j=1, x_i=0)
    with np.errstate(over="ignore", invalid="ignore"):  # named by _terminal_capacity
        total = float(np.sum(pair) + np.sum(sink_cap) + np.sum(source_cap))
    big = _terminal_capacity(total, "graph" if unary is None else "graph, unary")
    frozen = observed & (f != alpha_label)
    constant += float(np.sum(source_cap[frozen]))  # a frozen node always pays its keep cost
    sink_cap = np.where(frozen, big, sink_cap)
    source_cap = np.where(frozen, 0.0, source_cap)
    return CutNetwork(
        n_nodes=n,
        senders=i,
        receivers=j,
        capacities=np.zeros_like(pair),
        reverse_capacities=pair,
        source_capacity=source_cap,
        sink_capacity=sink_cap,
        terminal_capacity=big,
        constant=constant,
    )


# ----------------------------------------------------------------------------- energies


def potts_energy(graph, labels, unary=None) -> float:
    """``sum_{i<j} w_ij [y_i != y_j] (+ sum_i unary[i, y_i])``: the cut value for C >= 2."""
    W = as_weight_matrix(graph)
    y = np.asarray(labels)
    i, j, w = _upper_edges(W)
    value = float(np.sum(w[y[i] != y[j]]))
    if unary is not None:
        value += float(np.sum(np.asarray(unary)[np.arange(y.size), y]))
    return value


def cut_value(graph, labels, observed=None, *, alpha: float = 1.0) -> float:
    """Cut value of a complete labelling (Sec. 2): the weight of edges between the classes.

    With ``observed`` given, the unlabelled-unlabelled edges are scaled by ``alpha`` first.
    """
    W = as_weight_matrix(graph)
    if observed is not None:
        W = scale_unlabelled_edges(W, observed, alpha)
    return potts_energy(W, labels)


def weighted_vote(graph, labels) -> np.ndarray:
    """``sum_{u != x} w(x, u) f(u)`` with ``f = +1`` for label 1 and ``-1`` for label 0.

    Lemma 3.4: every unlabelled x of the mincut labelling has ``f(x) = Sgn(vote)`` with
    ``Sgn(0) = -1``.
    """
    W = as_weight_matrix(graph)
    f = np.where(np.asarray(labels) == 1, 1.0, -1.0)
    return np.asarray(W @ f).ravel()


def potts_model(graph, labels, observed=None, *, alpha: float = 1.0, n_classes: int = 2):
    """The clamped zero-field Potts model whose MAP is the minimum cut (Sec. 4).

    ``PottsModel(W, beta=1)`` has ``energy(y) = cut(y) - sum_{i<j} w_ij`` (Bergamim & Breve
    Eq. 11 at beta = 1, theta = 0), so both have the same minimisers.
    """
    from graphssl.graph import Graph
    from graphssl.models.potts import PottsModel

    labels = np.asarray(labels)
    observed = labels >= 0 if observed is None else np.asarray(observed, dtype=bool)
    W = scale_unlabelled_edges(graph, observed, alpha)
    clamped = np.where(observed, labels, -1)
    return PottsModel.create(Graph.from_scipy(W), n_classes, beta=1.0, labels=clamped)

