"""Graphs given by the user in any usual form (networkx, scipy / dense affinity, edge list,
:class:`~graphssl.graph.core.Graph`) -> one undirected :class:`Graph` (:func:`as_graph`, the
estimators' ``fit_graph``). Re-exported by :mod:`graphssl.graph`."""

from __future__ import annotations

import jax
import numpy as np
import scipy.sparse as sp

from graphssl._warnings import warn_user
from graphssl.graph.core import Graph
from graphssl.graph.operators import _symmetrized_matrix

__all__ = ["DirectedGraphWarning", "GraphWeightsRescaledWarning", "as_graph"]


class DirectedGraphWarning(UserWarning):
    """A graph given to :func:`as_graph` had one-directional or unequal edges (symmetrised)."""


class GraphWeightsRescaledWarning(UserWarning):
    """A graph given to :func:`as_graph` had weights outside the range its float type holds
    and was divided by its largest weight."""


_SYMMETRIZE_MODES = ("max", "mean", "min", None)
_SYMMETRY_RTOL = 1e-12
"""Relative tolerance of :func:`as_graph`'s symmetry test: ``w_ij`` and ``w_ji`` count as equal
when ``|w_ij - w_ji| <= 1e-12 max(|w_ij|, |w_ji|)`` (a kernel matrix computed in float64,
such as ``sklearn.metrics.pairwise.rbf_kernel(X)``, differs from its transpose by rounding,
~1e-16 relative); such pairs are averaged without a warning."""


def as_graph(obj, n_nodes: int | None = None, *, weight: str = "weight",
             symmetrize: str | None = "max", nodelist=None, on_host: bool = False) -> Graph:
    """A :class:`Graph` from a graph in any of the usual forms (estimators' ``fit_graph``).

    Args:
      obj: a :class:`Graph`; a networkx graph (nodes in the order ``list(G.nodes)``, or
        ``nodelist``; edge weights from the attribute ``weight``, 1 where missing; parallel
        edges of a multigraph add up); a scipy.sparse or dense ``n x n`` affinity matrix
        (any square array is read as a matrix); or an edge list, ``int[E, 2]`` of node
        indices or ``[E, 3]`` with a weight column (repeated pairs add up). Self-loops are
        dropped; weights must be finite and non-negative.
      n_nodes: the expected number of nodes (e.g. ``len(y)``); an edge list may leave the
        last nodes isolated, every other form must match it.
      weight: the networkx edge attribute holding the weight.
      symmetrize: how a directed input becomes undirected: ``"max"`` (default; union,
        ``w_ij = max(w_ij, w_ji)``, right for an edge list that names each edge once, such
        as a citation file's ``i < j`` pairs), ``"mean"``, ``"min"`` (mutual edges only) or
        ``None`` (keep it directed). A symmetrised input gives a
        :class:`DirectedGraphWarning` naming how many edges were one-directional and how
        many pairs had unequal weights. Two weights within a relative 1e-12 of each other
        count as equal (the rounding of a computed kernel): such a matrix is averaged with
        its transpose, without a warning.
      nodelist: node order of a networkx graph.
      on_host: return a host graph (NumPy fields; :class:`Graph`), as the estimators whose
        solvers run on the host do.
    """
    if symmetrize not in _SYMMETRIZE_MODES:
        raise ValueError(
            f"symmetrize: got {symmetrize!r}; use 'max' (union), 'mean', 'min' or None"
        )
    matrix = _affinity_matrix(obj, n_nodes, weight, nodelist)
    if symmetrize is not None:
        matrix = _report_and_symmetrize(matrix, symmetrize)
    matrix = _within_storage_range(matrix)
    graph = Graph.from_scipy(matrix, on_host=on_host)
    if graph.n_nodes < 2 or graph.n_edges == 0:
        raise ValueError(
            f"graph: the graph has {graph.n_nodes} nodes and no edges; give at least one edge"
        )
    return graph


def _affinity_matrix(obj, n_nodes, weight, nodelist) -> sp.csr_matrix:
    if isinstance(obj, Graph):
        matrix = obj.to_scipy()
    elif hasattr(obj, "nodes") and hasattr(obj, "edges") and hasattr(obj, "adj"):
        import networkx as nx

        nodes = list(obj.nodes) if nodelist is None else list(nodelist)
        matrix = nx.to_scipy_sparse_array(obj, nodelist=nodes, weight=weight, format="csr")
    elif sp.issparse(obj):
        matrix = sp.csr_matrix(obj)
    else:
        if hasattr(obj, "to_numpy"):  # a pandas DataFrame of edges or weights
            obj = obj.to_numpy()
        try:
            array = np.asarray(obj, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(
                f"graph: expected a graphssl Graph, a networkx graph, an n x n affinity matrix "
                f"or an edge list [E, 2] / [E, 3], got {type(obj).__name__}"
            ) from None
        if array.ndim == 2 and array.shape[0] == array.shape[1]:
            matrix = sp.csr_matrix(array)
        elif array.ndim == 2 and array.shape[1] in (2, 3):
            matrix = _edge_list_matrix(array, n_nodes)
        else:
            raise ValueError(
                f"graph: an array must be an n x n affinity matrix or an edge list of shape "
                f"[E, 2] or [E, 3], got shape {array.shape}"
            )
    if matrix.shape[0] != matrix.shape[1]:
        raise ValueError(
            f"graph: an affinity matrix must be square (n x n, one row and one column per "
            f"node), got shape {matrix.shape}"
        )
    if n_nodes is not None and matrix.shape[0] != n_nodes:
        raise ValueError(
            f"graph: has {matrix.shape[0]} nodes but y has {n_nodes} entries; give one label "
            "per node (-1 for unlabelled), in the graph's node order"
        )
    matrix = matrix.astype(np.float64)
    if matrix.nnz and (not np.all(np.isfinite(matrix.data)) or matrix.data.min() < 0):
        raise ValueError("graph: edge weights must be finite and non-negative")
    return matrix


def _within_storage_range(matrix: sp.csr_matrix) -> sp.csr_matrix:
    """``matrix`` with weights a graph can store: a graph's weights are JAX's canonical
    float (float32 unless x64 is enabled), so weights below its smallest normal number
    (1.2e-38) would turn to zero after every check had counted them as edges, and weights
    whose degrees could exceed its largest (3.4e38) would overflow. Such a matrix is divided
    by its largest weight (every estimator's graph is then the same up to scale), with a
    warning; weights still below the smallest normal number after that are dropped, and the
    warning counts them."""
    if matrix.nnz == 0:
        return matrix
    storage = np.finfo(jax.dtypes.canonicalize_dtype(np.float64))
    tiny = float(storage.tiny)  # Python floats: comparing 1e39 with a float32 overflows
    weights = matrix.data[matrix.data > 0]
    if weights.size == 0:
        return matrix
    smallest, largest = float(weights.min()), float(weights.max())
    ceiling = float(storage.max) / max(matrix.shape[0], 1)  # no degree can overflow
    if smallest >= tiny and largest <= ceiling:
        return matrix
    matrix = matrix.tocsr(copy=True)
    matrix.data /= largest  # not matrix / largest: scipy multiplies by 1 / largest, inf here
    lost = int(np.count_nonzero((matrix.data > 0) & (matrix.data < tiny)))
    matrix.data[matrix.data < tiny] = 0.0
    matrix.eliminate_zeros()
    warn_user(
        f"graph: edge weights span {smallest:.3g} to {largest:.3g}, outside the range a "
        f"{storage.dtype} graph holds ({tiny:.3g} to {ceiling:.3g} for "
        f"{matrix.shape[0]} nodes); divided by the largest weight"
        + (f", and {lost} edges weaker than {tiny:.3g} times it dropped"
           if lost else "")
        + ". A model whose coupling is the weights' own scale (a fixed beta) reads the "
        "rescaled graph; rescale the weights yourself to choose another scale.",
        GraphWeightsRescaledWarning,
    )
    return matrix


def _edge_list_matrix(edges: np.ndarray, n_nodes) -> sp.csr_matrix:
    pairs = edges[:, :2]
    if not np.all(np.isfinite(pairs)) or np.any(pairs != np.round(pairs)) or np.any(pairs < 0):
        raise ValueError("graph: edge list node indices must be non-negative integers")
    pairs = pairs.astype(np.int64)
    n = int(pairs.max()) + 1 if pairs.size else 0
    if n_nodes is not None:
        if n > n_nodes:
            raise ValueError(
                f"graph: the edge list names node {n - 1} but y has only {n_nodes} entries"
            )
        n = int(n_nodes)
    values = edges[:, 2] if edges.shape[1] == 3 else np.ones(edges.shape[0])
    return sp.csr_matrix((values, (pairs[:, 0], pairs[:, 1])), shape=(n, n))


def _report_and_symmetrize(matrix: sp.csr_matrix, mode: str) -> sp.csr_matrix:
    """``matrix`` made undirected by ``mode``, with a :class:`DirectedGraphWarning` when it
    was directed: edges given in one direction only, or pairs whose two weights differ by
    more than ``_SYMMETRY_RTOL`` (1e-12) of the larger. Pairs equal within that tolerance
    (the rounding of a computed kernel such as ``rbf_kernel(X)``) count as symmetric and are
    averaged quietly, which makes the matrix exactly symmetric."""
    matrix = matrix.tocsr()
    matrix.setdiag(0)
    matrix.eliminate_zeros()
    present = (matrix != 0).astype(np.int8)
    mutual = present.multiply(present.T)
    one_way = int(present.nnz - mutual.nnz)
    difference = abs(matrix - matrix.T).multiply(mutual).tocsr()
    larger = abs(matrix).maximum(abs(matrix.T)).multiply(mutual).tocsr()
    unequal = int(((difference - _SYMMETRY_RTOL * larger) > 0).nnz // 2)
    if one_way == 0 and unequal == 0:
        if difference.nnz == 0:
            return matrix
        return ((matrix + matrix.T) * 0.5).tocsr()  # rounding only: exactly symmetric
    n_edges = int(present.nnz - mutual.nnz // 2)
    rule = {"max": "max(w_ij, w_ji), the union", "mean": "(w_ij + w_ji) / 2",
            "min": "min(w_ij, w_ji), mutual edges only"}[mode]
    others = " / ".join(repr(m) for m in ("max", "mean", "min") if m != mode)
    warn_user(
        f"graph: directed input: {one_way} of {n_edges} edges are given in one direction only"
        + (f" and {unequal} pairs have unequal weights (beyond a relative {_SYMMETRY_RTOL:g})"
           if unequal else "")
        + f"; symmetrised with symmetrize={mode!r} (w_ij = {rule}). To avoid this warning, "
        "give a symmetric graph (each edge in both directions, with equal weights); "
        f"symmetrize={others} combine the two directions by another rule, and None keeps "
        "the graph directed.",
        DirectedGraphWarning
    )
    return _symmetrized_matrix(matrix, mode)
