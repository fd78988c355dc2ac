"""The :class:`Graph` pytree: an edge list ``(senders, receivers, weights)`` over
``n_nodes`` nodes, with its conversions (scipy.sparse, networkx) and the padded neighbour
table of the per-node gathers. Re-exported by :mod:`graphssl.graph`."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import scipy.sparse as sp

from graphssl._device import alike, host_array, to_device

__all__ = ["Graph", "bucket_width", "padded_to_bucket", "edge_slots"]

TABLE_BUCKET = 8
# up to this many nodes a table's width rounds up to a power of two (see bucket_width)
POWER_OF_TWO_MAX_NODES = 16_384


@dataclasses.dataclass(frozen=True)
class Graph:
    """Weighted graph as a JAX pytree (data: senders, receivers, weights; static: n_nodes).

    Shapes: ``senders: int32[E]``, ``receivers: int32[E]``, ``weights: float[E]``. Undirected
    graphs hold each edge in both directions. Build with the functions of this module or
    :meth:`from_scipy` / :meth:`from_networkx`.

    The fields are JAX arrays, or, for a *host graph* (``from_scipy(..., on_host=True)``;
    :attr:`on_host`), read-only NumPy arrays of the same dtypes: every function that takes a
    Graph takes either (a JAX program converts NumPy leaves when it is called;
    :meth:`on_device` converts once, for a graph that many programs will take). The
    estimators whose solvers run on the host (harmonic function, LGC, kNN vote, mincut)
    build host graphs, so that a process that fits only those never starts JAX's back end
    (measured on 2 CPU cores, a fresh process fitting 10^3 points with the harmonic function
    or LGC: 0.066 -> 0.054 CPU s).
    """

    senders: jax.Array
    receivers: jax.Array
    weights: jax.Array
    n_nodes: int = dataclasses.field(metadata=dict(static=True))

    @property
    def on_host(self) -> bool:
        """True when the fields are NumPy arrays (a host graph), False for JAX arrays."""
        return not isinstance(self.weights, jax.Array)

    def on_device(self) -> Graph:
        """The same graph with JAX arrays on the default device (itself if it has them)."""
        if not self.on_host:
            return self
        return Graph(senders=to_device(self.senders), receivers=to_device(self.receivers),
                     weights=to_device(self.weights), n_nodes=self.n_nodes)

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
    def from_scipy(cls, matrix, *, dtype=None, on_host: bool = False) -> Graph:
        """Graph from a sparse or dense n x n weight matrix; the diagonal is dropped.
        ``on_host``: keep the fields as NumPy arrays (a host graph, see the class)."""
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
        elif weights.dtype.kind != "f":  # integer or boolean weights: a model's beta and
            weights = weights.astype(np.float64)  # field take the weights' dtype
        convert = host_array if on_host else to_device  # either way nothing is compiled
        return cls(
            senders=convert(rows[keep], np.int32),
            receivers=convert(matrix.indices[keep], np.int32),
            weights=convert(weights),
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
        """Neighbour table for per-node gathers (NumPy arrays for a host graph).

        Returns ``(neighbor_index int32[n, d_max], neighbor_weight float[n, d_max])``; rows
        shorter than the maximum out-degree are padded with the node's own index and weight 0,
        so ``sum_d neighbor_weight[i, d] * f(x[neighbor_index[i, d]])`` is the weighted sum over
        neighbours of node i.
        """
        senders = np.asarray(self.senders)
        slot, counts = edge_slots(senders, self.n_nodes)
        d_max = max(int(counts.max()) if counts.size else 0, 1)
        index = np.repeat(np.arange(self.n_nodes, dtype=np.int32)[:, None], d_max, axis=1)
        weight = np.zeros((self.n_nodes, d_max), dtype=np.asarray(self.weights).dtype)
        index[senders, slot] = np.asarray(self.receivers)
        weight[senders, slot] = np.asarray(self.weights)
        return alike(index, self.weights), alike(weight, self.weights)


def edge_slots(senders, n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """``(slot int64[E], counts int64[n])``: each edge's column in its sender's row of
    :meth:`Graph.padded_neighbors` -- its rank among its sender's edges, in edge order -- and
    every node's out-degree (edge count). Any edge order: the documented one (sorted by
    sender) gives ``slot[e] = e - start(sender)``; an edge list built by hand (pairs ``i < j``,
    then the same pairs reversed) is ranked by a stable sort (before, the ranks assumed the
    sorted order, and such a list silently dropped and duplicated neighbours: a wrong
    energy, partition function and marginals)."""
    senders = np.asarray(senders).astype(np.int64)
    counts = np.bincount(senders, minlength=int(n_nodes))
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    order = np.argsort(senders, kind="stable")  # timsort: linear on sorted input
    slot = np.empty(senders.size, dtype=np.int64)
    slot[order] = np.arange(senders.size) - np.repeat(starts, counts)
    return slot, counts


jax.tree_util.register_dataclass(
    Graph, data_fields=["senders", "receivers", "weights"], meta_fields=["n_nodes"]
)


def bucket_width(n: int, width: int) -> int:
    """The compiled width of an ``n``-row neighbour table of ``width`` columns.

    Up to ``POWER_OF_TWO_MAX_NODES`` rows: the next power of two (at least
    ``TABLE_BUCKET``). The largest degree of a symmetrised kNN graph varies from data set to
    data set of one size (10 Gaussian clusters, n = 10^3, k = 10: 40 and 56 for two draws),
    and every new width compiles a program that gathers through the table anew (the Potts
    mean-field sweep: 0.25-0.4 CPU s at n = 10^3, against ~5 ms of sweeps; the diffusion
    mixture's chain: seconds), so a second data set of that size reuses the program and pays
    at most twice the gathers. Above: a multiple of ``TABLE_BUCKET`` (at most 7 extra
    columns), where the gathers cost more than a compilation."""
    width = max(int(width), 1)
    if n <= POWER_OF_TWO_MAX_NODES:
        return max(TABLE_BUCKET, 1 << (width - 1).bit_length())
    return -(-width // TABLE_BUCKET) * TABLE_BUCKET


def padded_to_bucket(neighbor_index, neighbor_values):
    """A neighbour table widened to :func:`bucket_width` columns (padding: the node's own
    index at value 0, as in :meth:`Graph.padded_neighbors`; no weighted sum changes), so
    graphs of one size whose largest degree differs share one compiled program. Returns the
    inputs unchanged when they already have that width, else NumPy arrays."""
    index = np.asarray(neighbor_index)
    n, d = index.shape
    width = bucket_width(n, d)
    if width == d:
        return neighbor_index, neighbor_values
    values = np.asarray(neighbor_values)
    padded_index = np.repeat(np.arange(n, dtype=index.dtype)[:, None], width, axis=1)
    padded_index[:, :d] = index
    padded_values = np.zeros((n, width), dtype=values.dtype)
    padded_values[:, :d] = values
    return padded_index, padded_values
