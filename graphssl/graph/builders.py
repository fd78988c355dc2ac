"""Similarity-graph builders from features: k-nearest-neighbour, epsilon and dense graphs,
weighted by a scheme of :mod:`graphssl.graph.weights`. Re-exported by
:mod:`graphssl.graph`."""

from __future__ import annotations

import jax
import numpy as np
import scipy.sparse as sp

from graphssl._warnings import warn_user
from graphssl.graph.core import Graph
from graphssl.graph.operators import _symmetrized_matrix
from graphssl.graph.weights import _edge_weights
from graphssl.neighbors import knn_search
from graphssl.validation import check_features

__all__ = ["knn_graph", "epsilon_graph", "dense_graph"]


def _kept_as_edges(weights) -> np.ndarray:
    """``weights`` with exact (or underflowed) zeros raised to the smallest normal number of
    the graph's storage dtype (JAX's canonical float: float32 unless x64 is enabled), so that
    sparsity keeps the edge: ``weight="distance"`` gives a duplicate point weight 0, and
    float64's floor (2.2e-308) turned into an explicit 0.0 in a float32 graph."""
    floor = float(np.finfo(jax.dtypes.canonicalize_dtype(np.float64)).tiny)
    return np.maximum(weights, floor)


def _check_duplicates(distances, on_duplicates):
    if on_duplicates == "ignore":
        return
    if on_duplicates != "raise":
        raise ValueError("on_duplicates: use 'ignore' (default) or 'raise'")
    n_zero = int(np.sum(distances[:, 0] == 0))
    if n_zero:
        raise ValueError(
            f"X: {n_zero} points have an exact duplicate (distance 0) and on_duplicates='raise'; "
            "remove duplicates (e.g. np.unique(X, axis=0)) or keep the default 'ignore'"
        )


def _from_coo(rows, cols, vals, n) -> Graph:
    matrix = sp.csr_matrix((vals, (rows, cols)), shape=(n, n))
    matrix.sum_duplicates()
    return Graph.from_scipy(matrix)


def knn_graph(
    X,
    k: int,
    *,
    symmetrize: str | None = "max",
    weight: str = "gaussian",
    sigma=None,
    t: float = 1.0,
    method: str = "auto",
    on_duplicates: str = "ignore",
    seed: int = 0,
    neighbors=None,
    on_host: bool = False,
) -> Graph:
    """k-nearest-neighbour graph.

    Args:
      X: float[n, d] features (dense).
      k: neighbours per point (k < n).
      symmetrize: ``"max"`` (edge if i in kNN(j) or j in kNN(i)), ``"min"`` (mutual kNN,
        Bergamim & Breve Eq. 8), ``"mean"`` ((W + W^T) / 2) or ``None`` (directed kNN).
      weight: ``"gaussian"`` (see ``sigma``), ``"binary"``, ``"distance"`` or ``"cosine"``
        (``exp(-(1 - cos) / t)``).
      sigma: Gaussian width: a number, ``"kth_over_3"`` / ``None`` (Bergamim & Breve Eq. 7)
        or ``"walder"`` (``exp(-omega d^2)``, omega = 1 / mean squared distance).
      method: neighbour search, see :func:`knn_search`.
      on_duplicates: ``"ignore"`` (default: duplicate points are neighbours at distance 0,
        Gaussian weight 1, a legitimate affinity) or ``"raise"`` (refuse them).
      neighbors: ``(indices, distances)`` of ``knn_search(X, k, ...)`` already computed (then
        ``method`` and ``seed`` are unused): two graphs of the same points, such as the
        mutual and the union kNN graph, need one search.
      on_host: return a host graph (NumPy fields, :class:`Graph`): for host-side solvers.
    """
    if neighbors is None:
        indices, distances = knn_search(X, k, method=method, seed=seed)
    else:
        indices, distances = (np.asarray(a) for a in neighbors)
        if indices.shape != distances.shape or indices.shape[0] != np.shape(X)[0]:
            raise ValueError(
                f"neighbors: expected (indices, distances) of shape ({np.shape(X)[0]}, k) each, "
                f"got {indices.shape} and {distances.shape}; pass knn_search(X, k)")
        n_points = np.shape(X)[0]
        if (indices.ndim != 2 or indices.dtype.kind not in "iu" or indices.size and (
                indices.min() < 0 or indices.max() >= n_points)):
            raise ValueError(
                f"neighbors: indices must be integers in [0, {n_points}) (rows of X), got "
                f"dtype {indices.dtype} in [{indices.min() if indices.size else '-'}, "
                f"{indices.max() if indices.size else '-'}]; pass knn_search(X, k)")
        if not np.all(np.isfinite(distances)) or np.any(distances < 0):
            raise ValueError("neighbors: distances must be finite and >= 0; pass "
                             "knn_search(X, k)")
        if indices.shape[1] != k:
            raise ValueError(f"neighbors: a table of {indices.shape[1]} neighbours a point for "
                             f"k={k}; pass knn_search(X, {k}) or k={indices.shape[1]}")
        if np.any(np.diff(distances, axis=1) < 0):
            raise ValueError("neighbors: each row nearest first (the width rules read the last "
                             "column as the k-th neighbour); pass knn_search(X, k) as returned")
    _check_duplicates(distances, on_duplicates)
    n = indices.shape[0]
    rows = np.repeat(np.arange(n), indices.shape[1])
    cols = indices.ravel()
    vals = _edge_weights(X, rows, cols, distances.ravel(), weight, sigma, t, distances)
    vals = _kept_as_edges(vals).reshape(n, -1)
    # CSR straight from the kNN table: each row's k columns sorted, no COO conversion
    order = np.argsort(indices, axis=1)
    directed = sp.csr_matrix(
        (np.take_along_axis(vals, order, 1).ravel(), np.take_along_axis(indices, order, 1).ravel(),
         np.arange(0, n * indices.shape[1] + 1, indices.shape[1])),
        shape=(n, n),
    )
    return Graph.from_scipy(_symmetrized_matrix(directed, symmetrize), on_host=on_host)


def epsilon_graph(X, eps: float, *, weight: str = "gaussian", sigma=1.0, t: float = 1.0) -> Graph:
    """Epsilon (delta) graph: an edge between every pair at distance <= ``eps``.

    Uses a KD-tree pair query, so memory is O(number of edges).
    """
    from scipy.spatial import cKDTree

    X = check_features(X)
    if not eps > 0:
        raise ValueError(f"eps: the radius must be positive, got {eps}")
    pairs = cKDTree(np.asarray(X, np.float64)).query_pairs(r=eps, output_type="ndarray")
    if pairs.size == 0:
        warn_user(
            f"epsilon_graph: no pair of points is within eps={eps}; the graph is empty"
        )
    rows = np.concatenate([pairs[:, 0], pairs[:, 1]])
    cols = np.concatenate([pairs[:, 1], pairs[:, 0]])
    dist = np.linalg.norm(np.asarray(X, np.float64)[rows] - np.asarray(X, np.float64)[cols], axis=1)
    if sigma in (None, "kth_over_3"):
        raise ValueError("sigma: give a number or 'walder' for an epsilon graph")
    vals = _edge_weights(X, rows, cols, dist, weight, sigma, t)
    return _from_coo(rows, cols, _kept_as_edges(vals), X.shape[0])


def dense_graph(X, *, weight: str = "gaussian", sigma=1.0, t: float = 1.0) -> Graph:
    """Fully connected graph (Zhu & Ghahramani's basic Boltzmann machine); O(n^2) memory."""
    X = check_features(X)
    n = X.shape[0]
    if n > 20_000:
        raise ValueError(f"X: a dense graph on n={n} points has n^2 edges; use knn_graph")
    rows, cols = np.nonzero(~np.eye(n, dtype=bool))
    Xd = np.asarray(X, np.float64)
    dist = np.linalg.norm(Xd[rows] - Xd[cols], axis=1)
    if sigma in (None, "kth_over_3"):
        raise ValueError("sigma: give a number or 'walder' for a dense graph")
    vals = _edge_weights(X, rows, cols, dist, weight, sigma, t)
    return _from_coo(rows, cols, _kept_as_edges(vals), n)
