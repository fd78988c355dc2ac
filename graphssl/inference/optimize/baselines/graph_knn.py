"""k-nearest-labelled-neighbour vote with shortest-path distances on the graph."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from graphssl.inference.optimize.baselines.common import (
    _adjacency,
    _labelled,
    _unreached_mask,
    normalize_scores,
)

TIE_NUDGE = 1e-6  # added to the winning vote of a tie: fractions move by at most this


def _break_ties_by_nearest(votes, distances, classes) -> None:
    """In place: where several classes share the most votes, nudge (``TIE_NUDGE``) the one
    whose labelled node is nearest. ``distances``, ``classes``: ``[k, n]``, the kept
    labelled neighbours of each node (any order; ``inf`` where fewer were reached)."""
    top = votes.max(axis=1)
    tied = np.flatnonzero((votes == top[:, None]).sum(axis=1) > 1)
    if tied.size == 0:
        return
    order = np.argsort(distances[:, tied], axis=0, kind="stable")
    nearest_first = np.take_along_axis(classes[:, tied], order, axis=0)
    reached = np.isfinite(np.take_along_axis(distances[:, tied], order, axis=0))
    candidate = reached & (votes[tied[None, :], nearest_first] == top[tied][None, :])
    winner = nearest_first[np.argmax(candidate, axis=0), np.arange(tied.size)]
    votes[tied, winner] += TIE_NUDGE


def _edge_lengths(W: sp.csr_matrix, edge_length: str) -> sp.csr_matrix:
    lengths = W.copy()
    if edge_length == "inverse_weight":
        lengths.data = 1.0 / lengths.data
    elif edge_length == "hop":
        lengths.data = np.ones_like(lengths.data)
    else:
        raise ValueError(f"edge_length: use 'inverse_weight' or 'hop', got {edge_length!r}")
    return lengths


def knn_graph_classifier(
    graph,
    labels,
    *,
    k: int = 3,
    observed=None,
    n_classes: int | None = None,
    edge_length: str = "inverse_weight",
    block_size: int = 256,
):
    """k-nearest-labelled-neighbour vote with shortest-path distances on the graph.

    Each node takes the labels of the ``k`` labelled nodes closest to it along the graph
    (Dijkstra; edge length ``1 / w_ij`` -- a resistance -- or 1 per hop) and returns the vote
    fractions. With the kNN graph this is the graph analogue of the 3-NN baseline of
    Blum & Chawla (Table 1). Labelled nodes count themselves (distance 0). Memory is
    O(block_size x n): the labelled sources are processed in blocks, keeping a running top-k.

    Returns:
      ``float64[n, C]`` vote fractions; unreached rows uniform. A tie for the most votes
      goes to the tied class of the nearest labelled node among the ``k`` (its vote nudged
      by ``TIE_NUDGE``): with one label a class and ``k = 3`` every node's vote would
      otherwise tie, and the argmax would give every node the first class.
    """
    if isinstance(k, bool) or not float(k).is_integer() or int(k) < 1:
        raise ValueError(f"k: the number of labelled neighbours must be a positive int, got {k}")
    k = int(k)
    W = _adjacency(graph)
    n = W.shape[0]
    index, classes, n_classes = _labelled(labels, n, observed, n_classes)
    unreached = _unreached_mask(W, index, "knn_graph_classifier")
    lengths = _edge_lengths(W, edge_length)
    best_d = np.full((0, n), np.inf)
    best_c = np.zeros((0, n), dtype=np.int64)
    for start in range(0, index.size, block_size):
        sources = index[start : start + block_size]
        dist = csgraph.dijkstra(lengths, directed=False, indices=sources)
        cand_d = np.vstack([best_d, dist])
        cand_c = np.vstack([best_c, np.repeat(classes[start : start + block_size, None], n, 1)])
        keep = min(k, cand_d.shape[0])
        order = np.argpartition(cand_d, keep - 1, axis=0)[:keep]
        best_d = np.take_along_axis(cand_d, order, axis=0)
        best_c = np.take_along_axis(cand_c, order, axis=0)
    votes = np.zeros((n, n_classes))
    finite = np.isfinite(best_d)
    for row in range(best_d.shape[0]):
        hit = finite[row]
        np.add.at(votes, (np.flatnonzero(hit), best_c[row, hit]), 1.0)
    _break_ties_by_nearest(votes, best_d, best_c)
    scores = normalize_scores(votes)
    scores[unreached] = 1.0 / n_classes
    return scores
