"""Operations on a :class:`~graphssl.graph.core.Graph`: symmetrisation, row
normalisation, Laplacians, the heat kernel, connected components and ``W x`` in JAX.
Re-exported by :mod:`graphssl.graph`."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from graphssl._device import alike

if TYPE_CHECKING:
    from graphssl.graph.core import Graph

__all__ = ["symmetrize", "row_normalize", "laplacian", "laplacian_eigh", "heat_kernel",
           "connected_components", "unreached_nodes", "propagate"]


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
    """Symmetrise W: ``"max"`` (union), ``"min"`` (mutual edges only), ``"mean"``; a host
    graph stays on the host."""
    return type(graph).from_scipy(_symmetrized_matrix(graph.to_scipy(), mode),
                                  on_host=graph.on_host)


def row_normalize(graph: Graph) -> Graph:
    """``P_ij = W_ij / sum_j W_ij`` (Bergamim & Breve Eq. 9); the result is directed.

    Rows of isolated nodes stay zero.
    """
    if isinstance(graph.weights, jax.core.Tracer):
        degrees = graph.degrees()
        safe = jnp.where(degrees > 0, degrees, 1.0)
        return dataclasses.replace(graph, weights=graph.weights / safe[graph.senders])
    # on the host: eagerly, the seven JAX primitives above compiled one by one for every
    # new edge count (14 of a PottsClassifier fit's 56 compilations). np.add.at sums in the
    # weights' dtype in edge order, as segment_sum does: the same bits
    weights, senders = np.asarray(graph.weights), np.asarray(graph.senders)
    degrees = np.zeros(graph.n_nodes, dtype=weights.dtype)
    np.add.at(degrees, senders, weights)
    safe = np.where(degrees > 0, degrees, np.ones((), weights.dtype))
    return dataclasses.replace(graph, weights=alike(weights / safe[senders], graph.weights))


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
    can reach them along the graph. ``observed``: ``bool[n]``, True where a label is known
    (a label vector with ``-1`` for unlabelled is refused: read as a mask it marks the
    wrong nodes; pass ``labels >= 0``)."""
    observed = np.asarray(observed)
    if observed.shape != (graph.n_nodes,) or observed.dtype.kind != "b":
        raise ValueError(f"observed: a boolean mask of shape ({graph.n_nodes},), got dtype "
                         f"{observed.dtype} of shape {observed.shape}; for a label vector "
                         "with -1 for unlabelled pass labels >= 0")
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
