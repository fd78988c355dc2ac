"""Similarity graphs as JAX pytrees: builders, weight schemes, Laplacians, conversions.

A :class:`Graph` is an edge list ``(senders, receivers, weights)`` over ``n_nodes`` nodes.
Undirected graphs store both directions of every edge, sorted by ``(senders, receivers)``,
without self-loops, so memory is O(n k) for a k-nearest-neighbour graph.

Weight schemes (all return ``w_ij`` from distances ``d_ij``):

* Gaussian ``exp(-d^2 / (2 sigma^2))`` (Bergamim & Breve Eq. 6), ``sigma`` given, or
  ``sigma = (1 / 3N) sum_i d_{i,k(i)}`` (Bergamim & Breve Eq. 7, ``sigma="kth_over_3"``);
* Walder's ``exp(-omega d^2)`` with ``omega = 1 / mean squared pairwise distance``
  (``sigma="walder"``; Walder Sec. 2 and Sec. 5 — the paper's "omega set to the mean squared
  distance" read as the inverse, so that the exponent is scale-free);
* cosine ``exp(-(1 - cos(x_i, x_j)) / t)`` for text (``weight="cosine"``);
* per-dimension length scales ``exp(alpha_0 - sum_d (x_i^d - x_j^d)^2 / exp(alpha_d))``
  (Zhu & Ghahramani Eq. 39, :func:`length_scale_weights`).
"""

from __future__ import annotations

import dataclasses
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from graphssl.neighbors import _squared_norms, knn_search
from graphssl.validation import check_features

__all__ = [
    "Graph",
    "as_graph",
    "DirectedGraphWarning",
    "unreached_nodes",
    "knn_search",
    "knn_graph",
    "epsilon_graph",
    "dense_graph",
    "gaussian_weights",
    "sigma_kth_neighbor",
    "walder_omega",
    "length_scale_weights",
    "symmetrize",
    "row_normalize",
    "laplacian",
    "heat_kernel",
    "laplacian_eigh",
    "connected_components",
    "propagate",
]


@dataclasses.dataclass(frozen=True)
class Graph:
    """Weighted graph as a JAX pytree (data: senders, receivers, weights; static: n_nodes).

    Shapes: ``senders: int32[E]``, ``receivers: int32[E]``, ``weights: float[E]``. Undirected
    graphs hold each edge in both directions. Build with the functions of this module or
    :meth:`from_scipy` / :meth:`from_networkx`.
    """

    senders: jax.Array
    receivers: jax.Array
    weights: jax.Array
    n_nodes: int = dataclasses.field(metadata=dict(static=True))

    @property
    def n_edges(self) -> int:
        """Number of stored (directed) edges E."""
        return int(self.senders.shape[0])

    def degrees(self) -> jax.Array:
        """Weighted out-degrees d_i = sum_j W_ij, shape [n]."""
        return jax.ops.segment_sum(self.weights, self.senders, num_segments=self.n_nodes)

    def to_scipy(self) -> sp.csr_matrix:
        """The weight matrix W as ``scipy.sparse.csr_matrix`` (n x n).

        Edges in the documented order (sorted by (senders, receivers), no repeats) map to
        CSR arrays directly; any other order goes through a COO conversion (duplicates summed).
        """
        n = self.n_nodes
        senders, receivers = np.asarray(self.senders), np.asarray(self.receivers)
        weights = np.array(self.weights)  # a writable copy: callers may scale W.data in place
        key = senders.astype(np.int64) * n + receivers
        if key.size == 0 or np.all(key[1:] > key[:-1]):
            indptr = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(np.bincount(senders, minlength=n), out=indptr[1:])
            return sp.csr_matrix((weights, receivers.copy(), indptr), shape=(n, n))
        return sp.csr_matrix((weights, (senders, receivers)), shape=(n, n))

    @classmethod
    def from_scipy(cls, matrix, *, dtype=None) -> Graph:
        """Graph from a sparse or dense n x n weight matrix; the diagonal is dropped."""
        matrix = sp.csr_matrix(matrix, copy=True)
        if matrix.shape[0] != matrix.shape[1]:
            raise ValueError(
                f"matrix: expected a square n x n weight matrix, got shape {matrix.shape}"
            )
        # canonical CSR is sorted by (row, column): the edge order of a Graph, no lexsort
        matrix.sum_duplicates()
        rows = np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))
        keep = (rows != matrix.indices) & (matrix.data != 0)  # drop the diagonal and zeros
        weights = matrix.data[keep]
        if np.any(~np.isfinite(weights)) or np.any(weights < 0):
            raise ValueError("matrix: weights must be finite and non-negative")
        if dtype is not None:
            weights = weights.astype(dtype)
        return cls(
            senders=jnp.asarray(rows[keep], dtype=jnp.int32),
            receivers=jnp.asarray(matrix.indices[keep], dtype=jnp.int32),
            weights=jnp.asarray(weights),
            n_nodes=int(matrix.shape[0]),
        )

    def to_networkx(self):
        """An undirected ``networkx.Graph`` (or DiGraph if not symmetric) with ``weight`` data."""
        import networkx as nx

        create_using = nx.Graph if self.is_symmetric() else nx.DiGraph
        graph = nx.from_scipy_sparse_array(self.to_scipy(), create_using=create_using)
        return graph

    @classmethod
    def from_networkx(cls, graph, *, weight: str = "weight", nodelist=None) -> Graph:
        """Graph from a networkx graph; missing edge weights count as 1."""
        import networkx as nx

        matrix = nx.to_scipy_sparse_array(graph, nodelist=nodelist, weight=weight, format="csr")
        return cls.from_scipy(matrix)

    def is_symmetric(self, *, rtol: float = 1e-6) -> bool:
        """True when W equals its transpose (to ``rtol``)."""
        matrix = self.to_scipy()
        difference = abs(matrix - matrix.T)
        scale = abs(matrix).max() if matrix.nnz else 0.0
        return bool(difference.nnz == 0 or difference.max() <= rtol * max(scale, 1e-300))

    def padded_neighbors(self) -> tuple[jax.Array, jax.Array]:
        """Neighbour table for per-node gathers.

        Returns ``(neighbor_index int32[n, d_max], neighbor_weight float[n, d_max])``; rows
        shorter than the maximum out-degree are padded with the node's own index and weight 0,
        so ``sum_d neighbor_weight[i, d] * f(x[neighbor_index[i, d]])`` is the weighted sum over
        neighbours of node i.
        """
        senders = np.asarray(self.senders)
        counts = np.bincount(senders, minlength=self.n_nodes)
        d_max = max(int(counts.max()) if counts.size else 0, 1)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        slot = np.arange(senders.size) - np.repeat(starts, counts)
        index = np.repeat(np.arange(self.n_nodes, dtype=np.int32)[:, None], d_max, axis=1)
        weight = np.zeros((self.n_nodes, d_max), dtype=np.asarray(self.weights).dtype)
        index[senders, slot] = np.asarray(self.receivers)
        weight[senders, slot] = np.asarray(self.weights)
        return jnp.asarray(index), jnp.asarray(weight)


jax.tree_util.register_dataclass(
    Graph, data_fields=["senders", "receivers", "weights"], meta_fields=["n_nodes"]
)


# ----------------------------------------------------------------------------- inputs


class DirectedGraphWarning(UserWarning):
    """A graph given to :func:`as_graph` had one-directional or unequal edges (symmetrised)."""


_SYMMETRIZE_MODES = ("max", "mean", "min", None)


def as_graph(obj, n_nodes: int | None = None, *, weight: str = "weight",
             symmetrize: str | None = "max", nodelist=None) -> Graph:
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
        :class:`DirectedGraphWarning` naming how many edges were one-directional.
      nodelist: node order of a networkx graph.
    """
    if symmetrize not in _SYMMETRIZE_MODES:
        raise ValueError(
            f"symmetrize: got {symmetrize!r}; use 'max' (union), 'mean', 'min' or None"
        )
    matrix = _affinity_matrix(obj, n_nodes, weight, nodelist)
    if symmetrize is not None:
        matrix = _report_and_symmetrize(matrix, symmetrize)
    graph = Graph.from_scipy(matrix)
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
    if n_nodes is not None and matrix.shape[0] != n_nodes:
        raise ValueError(
            f"graph: has {matrix.shape[0]} nodes but y has {n_nodes} entries; give one label "
            "per node (-1 for unlabelled), in the graph's node order"
        )
    matrix = matrix.astype(np.float64)
    if matrix.nnz and (not np.all(np.isfinite(matrix.data)) or matrix.data.min() < 0):
        raise ValueError("graph: edge weights must be finite and non-negative")
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
    matrix = matrix.tocsr()
    matrix.setdiag(0)
    matrix.eliminate_zeros()
    present = (matrix != 0).astype(np.int8)
    mutual = present.multiply(present.T)
    one_way = int(present.nnz - mutual.nnz)
    unequal = int((abs(matrix - matrix.T).multiply(mutual) != 0).nnz // 2)
    if one_way == 0 and unequal == 0:
        return matrix
    n_edges = int(present.nnz - mutual.nnz // 2)
    rule = {"max": "max(w_ij, w_ji), the union", "mean": "(w_ij + w_ji) / 2",
            "min": "min(w_ij, w_ji), mutual edges only"}[mode]
    warnings.warn(
        f"graph: directed input: {one_way} of {n_edges} edges are given in one direction only"
        + (f" and {unequal} pairs have unequal weights" if unequal else "")
        + f"; symmetrised with symmetrize={mode!r} (w_ij = {rule}). Give both directions, or "
        "choose symmetrize='max' / 'mean' / 'min' (None keeps it directed).",
        DirectedGraphWarning,
        stacklevel=3,
    )
    return _symmetrized_matrix(matrix, mode)


# ----------------------------------------------------------------------------- weights


def gaussian_weights(sq_dist, sigma):
    """Gaussian weights ``exp(-d^2 / (2 sigma^2))`` (Bergamim & Breve Eq. 6)."""
    if not np.all(np.asarray(sigma) > 0):
        raise ValueError(f"sigma: the Gaussian width must be positive, got {sigma}")
    return np.exp(-np.asarray(sq_dist) / (2.0 * np.asarray(sigma) ** 2))


def sigma_kth_neighbor(distances) -> float:
    """``sigma = (1 / 3N) sum_i d_{i,k(i)}``: mean distance to the k-th neighbour over 3.

    Bergamim & Breve Eq. 7; ``distances`` is the ``[n, k]`` output of :func:`knn_search`.
    """
    distances = np.asarray(distances)
    sigma = float(np.mean(distances[:, -1]) / 3.0)
    if sigma <= 0:
        # every point has k exact duplicates: fall back on the non-zero distances of the table
        positive = distances[distances > 0]
        if positive.size == 0:
            raise ValueError(
                "X: every point's k nearest neighbours are exact duplicates (distance 0), so "
                "the Gaussian width is undefined; give sigma as a number or increase k"
            )
        sigma = float(np.mean(positive) / 3.0)
    return sigma


def walder_omega(X) -> float:
    """``omega = 1 / mean squared distance over all pairs i != j`` in O(n d), no n x n array.

    Uses ``sum_{i,j} ||x_i - x_j||^2 = 2 n sum_i ||x_i||^2 - 2 ||sum_i x_i||^2`` (Walder Sec. 5).
    """
    X = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    total = 2.0 * n * _squared_norms(X).sum() - 2.0 * np.sum(X.sum(axis=0) ** 2)
    mean_sq = total / (n * (n - 1))
    if mean_sq <= 0:
        raise ValueError("X: all points coincide; the graph weights are undefined")
    return float(1.0 / mean_sq)


def length_scale_weights(X, senders, receivers, alpha0, log_length_scales):
    """Per-dimension length-scale weights (Zhu & Ghahramani Eq. 39), in JAX.

    ``A_ij = exp(alpha_0 - sum_d (x_i^d - x_j^d)^2 / exp(alpha_d))``; ``alpha0`` is alpha_0 and
    ``log_length_scales[d]`` is alpha_d. Differentiable in both.
    """
    X = jnp.asarray(X)
    diff = X[senders] - X[receivers]
    return jnp.exp(alpha0 - jnp.sum(diff**2 * jnp.exp(-jnp.asarray(log_length_scales)), axis=-1))


def _cosine_similarity_rows(X, rows, cols):
    X = np.asarray(X, dtype=np.float64)
    norms = np.sqrt(_squared_norms(X))
    norms[norms == 0] = 1.0
    return np.einsum("ij,ij->i", X[rows], X[cols]) / (norms[rows] * norms[cols])


def _edge_weights(X, rows, cols, distances, weight, sigma, t, knn_distances=None):
    """Weights of the edges ``rows -> cols`` with Euclidean ``distances`` under a scheme."""
    if weight == "binary":
        return np.ones_like(distances)
    if weight == "distance":
        return distances.copy()
    if weight == "cosine":
        return np.exp(-(1.0 - _cosine_similarity_rows(X, rows, cols)) / t)
    if weight != "gaussian":
        raise ValueError(
            f"weight: unknown scheme {weight!r}; use 'gaussian', 'binary', 'distance' or 'cosine'"
        )
    sq = distances**2
    if sigma is None or sigma == "kth_over_3":
        if knn_distances is None:
            raise ValueError("sigma: 'kth_over_3' needs a kNN graph; give sigma as a number")
        return gaussian_weights(sq, sigma_kth_neighbor(knn_distances))
    if sigma == "walder":
        return np.exp(-walder_omega(X) * sq)
    if isinstance(sigma, str):
        raise ValueError(
            f"sigma: unknown rule {sigma!r}; use a positive number, 'kth_over_3' or 'walder'"
        )
    return gaussian_weights(sq, float(sigma))


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


# ----------------------------------------------------------------------------- builders


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
    """
    indices, distances = knn_search(X, k, method=method, seed=seed)
    _check_duplicates(distances, on_duplicates)
    n = indices.shape[0]
    rows = np.repeat(np.arange(n), indices.shape[1])
    cols = indices.ravel()
    vals = _edge_weights(X, rows, cols, distances.ravel(), weight, sigma, t, distances)
    # keep exact zeros as tiny positive weights so that sparsity does not lose the edge
    vals = np.maximum(vals, np.finfo(np.float64).tiny).reshape(n, -1)
    # CSR straight from the kNN table: each row's k columns sorted, no COO conversion
    order = np.argsort(indices, axis=1)
    directed = sp.csr_matrix(
        (np.take_along_axis(vals, order, 1).ravel(), np.take_along_axis(indices, order, 1).ravel(),
         np.arange(0, n * indices.shape[1] + 1, indices.shape[1])),
        shape=(n, n),
    )
    return Graph.from_scipy(_symmetrized_matrix(directed, symmetrize))


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
        warnings.warn(
            f"epsilon_graph: no pair of points is within eps={eps}; the graph is empty",
            stacklevel=2,
        )
    rows = np.concatenate([pairs[:, 0], pairs[:, 1]])
    cols = np.concatenate([pairs[:, 1], pairs[:, 0]])
    dist = np.linalg.norm(np.asarray(X, np.float64)[rows] - np.asarray(X, np.float64)[cols], axis=1)
    if sigma in (None, "kth_over_3"):
        raise ValueError("sigma: give a number or 'walder' for an epsilon graph")
    vals = _edge_weights(X, rows, cols, dist, weight, sigma, t)
    return _from_coo(rows, cols, np.maximum(vals, np.finfo(np.float64).tiny), X.shape[0])


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
    return _from_coo(rows, cols, np.maximum(vals, np.finfo(np.float64).tiny), n)


def _symmetrized_matrix(matrix: sp.csr_matrix, mode: str | None) -> sp.csr_matrix:
    if mode is None:
        return matrix
    if mode == "max":
        return matrix.maximum(matrix.T).tocsr()
    if mode == "min":
        return matrix.minimum(matrix.T).tocsr()
    if mode == "mean":
        return ((matrix + matrix.T) * 0.5).tocsr()
    raise ValueError(f"symmetrize: unknown mode {mode!r}; use 'max', 'min', 'mean' or None")


def symmetrize(graph: Graph, mode: str = "max") -> Graph:
    """Symmetrise W: ``"max"`` (union), ``"min"`` (mutual edges only), ``"mean"``."""
    return Graph.from_scipy(_symmetrized_matrix(graph.to_scipy(), mode))


def row_normalize(graph: Graph) -> Graph:
    """``P_ij = W_ij / sum_j W_ij`` (Bergamim & Breve Eq. 9); the result is directed.

    Rows of isolated nodes stay zero.
    """
    degrees = graph.degrees()
    safe = jnp.where(degrees > 0, degrees, 1.0)
    return dataclasses.replace(graph, weights=graph.weights / safe[graph.senders])


# ----------------------------------------------------------------------------- operators


def laplacian(graph: Graph, kind: str = "combinatorial") -> sp.csr_matrix:
    """Graph Laplacian as ``scipy.sparse.csr_matrix``.

    ``"combinatorial"``: L = D - W (``scipy.sparse.csgraph.laplacian``, D the out-degrees);
    ``"symmetric"``: I - D^-1/2 W D^-1/2; ``"random_walk"``: I - D^-1 W. Isolated nodes get a
    zero row (symmetric/random walk: 0 on the diagonal too, so their row is empty). The two
    normalised forms stay hand-written, measured faster on a 20,000-node kNN graph
    (benchmarks/bench_host_utilities.py, 2 CPU cores): scipy's ``normed=True`` took 1.0 s
    against 0.10 s here, and the random-walk form (not in scipy) as ``D^-1`` times scipy's
    ``D - W`` 43 ms against 22 ms.
    """
    W = graph.to_scipy()
    if kind == "combinatorial":
        return csgraph.laplacian(W, use_out_degree=True).tocsr()
    degrees = np.asarray(W.sum(axis=1)).ravel()
    with np.errstate(divide="ignore"):
        inv = np.where(degrees > 0, 1.0 / degrees, 0.0)
    identity = sp.diags((degrees > 0).astype(W.dtype))
    if kind == "symmetric":
        scale = sp.diags(np.sqrt(inv))
        return (identity - scale @ W @ scale).tocsr()
    if kind == "random_walk":
        return (identity - sp.diags(inv) @ W).tocsr()
    raise ValueError(
        f"kind: unknown Laplacian {kind!r}; use 'combinatorial', 'symmetric' or 'random_walk'"
    )


def laplacian_eigh(graph: Graph, kind: str = "symmetric") -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues and eigenvectors ``(w float[n], V float[n, n])`` of the dense Laplacian of
    ``kind`` (a directed graph is symmetrised by the mean first), so that
    ``f(L) = V diag(f(w)) V^T``: one O(n^3) decomposition serves every diffusion time."""
    if graph.n_nodes > 10_000:
        raise ValueError(
            f"graph: the dense heat kernel of n={graph.n_nodes} nodes needs n^2 memory; "
            "use n <= 10000"
        )
    L = laplacian(symmetrize(graph, "mean") if not graph.is_symmetric() else graph, kind)
    return np.linalg.eigh(L.toarray())


def heat_kernel(graph: Graph, tau: float, kind: str = "symmetric", eigh=None) -> np.ndarray:
    """Dense heat kernel ``K_tau = exp(-tau L / 2)`` by eigendecomposition (Walder Sec. 2.4).

    For n up to a few thousand (O(n^2) memory, O(n^3) time). ``kind`` picks the Laplacian
    (Walder uses the normalised one); ``eigh`` = :func:`laplacian_eigh` of the graph, when
    several ``tau`` share it.
    """
    if not tau >= 0:
        raise ValueError(f"tau: the diffusion time must be non-negative, got {tau}")
    eigenvalues, eigenvectors = laplacian_eigh(graph, kind) if eigh is None else eigh
    return (eigenvectors * np.exp(-0.5 * tau * eigenvalues)) @ eigenvectors.T


def connected_components(graph: Graph) -> tuple[int, np.ndarray]:
    """``(n_components, component_of_node int[n])`` of the undirected graph (weak components)."""
    n_components, labels = csgraph.connected_components(graph.to_scipy(), directed=False)
    return int(n_components), labels


def unreached_nodes(graph: Graph, observed) -> np.ndarray:
    """``bool[n]``: nodes in a (weakly) connected component with no observed node; no label
    can reach them along the graph."""
    observed = np.asarray(observed, dtype=bool)
    n_components, component = connected_components(graph)
    if n_components == 1:
        return np.zeros(graph.n_nodes, dtype=bool)
    reached = np.zeros(n_components, dtype=bool)
    reached[component[observed]] = True
    return ~reached[component]


def propagate(graph: Graph, x: jax.Array) -> jax.Array:
    """``(W x)_i = sum_j W_ij x_j`` by segment_sum; ``x`` is ``[n]`` or ``[n, c]``."""
    messages = graph.weights.reshape((-1,) + (1,) * (x.ndim - 1)) * x[graph.receivers]
    return jax.ops.segment_sum(messages, graph.senders, num_segments=graph.n_nodes)

