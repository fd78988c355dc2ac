"""The backbone graph of harmonic mixtures (Zhu & Lafferty 2005, Eq. 6; Sec. 3.3).

The lift ``P = blockdiag(I_l, R)`` maps the l labelled nodes to themselves and every other
node i to the supernodes with weights ``R[i, m] = p(m | x_i)``; the backbone Laplacian is
``tilde Delta = P^T Delta P`` (``Delta = D - W``, the combinatorial graph Laplacian), an
``(l + M) x (l + M)`` matrix whose blocks give Eq. (5).  Three ways to form it:

* dense responsibilities, streamed in JAX (:func:`mixture_lift` + :func:`backbone_laplacian`):
  exact, ``O(n d (l + M) + n (l + M)^2)`` work, for moderate n or an accelerator;
* hard clusters (:func:`hard_lift`, Sec. 3.3: ``R_im = 1`` iff i is in cluster m, e.g.
  k-means), exact with one nonzero per row;
* sparse top-k responsibilities (:func:`top_k_responsibilities` + :func:`sparse_lift` +
  :func:`sparse_backbone_laplacian`): each row of R keeps its ``k_R`` largest entries,
  renormalised to sum to one. Work ``O(n k_R (d + k_R))`` and memory ``O(n k_R)`` instead
  of ``O(n M)``.  This is an approximation (ours, not the paper's): row i of R moves by
  ``2 delta_i`` in L1 norm, where ``delta_i = 1 - (kept mass)`` is returned so that callers
  can report it.  Rows still sum to one, so ``tilde Delta 1 = 0`` and ``f_U = R lambda``
  stays in [0, 1]; with ``k_R = M`` the result is exact.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

__all__ = [
    "mixture_lift",
    "hard_lift",
    "backbone_laplacian",
    "top_k_responsibilities",
    "sparse_lift",
    "neighbor_laplacian",
    "sparse_backbone_laplacian",
]

def mixture_lift(mixture, X, labelled_index):
    """Rows of the lift ``P = blockdiag(I_l, R)`` of Eq. (6) as a function of node indices.

    Labelled node ``labelled_index[j]`` maps to the unit vector e_j; every other node i to
    ``[0_l, R_i]``. Returns ``lift(idx) -> float[len(idx), l + M]`` computing R on the fly
    (no ``n x M`` matrix is stored). ``mixture``: any object with ``log_responsibilities(X)``
    (the mixtures of :mod:`graphssl.models.harmonic_mixture`), so this module never imports
    that one (which imports this).
    """
    n, l = X.shape[0], labelled_index.shape[0]
    position = jnp.full((n,), -1, dtype=jnp.int32).at[labelled_index].set(
        jnp.arange(l, dtype=jnp.int32)
    )

    def lift(idx):  # the mixture's own log_responsibilities: no import of its module
        pos = position[idx]
        r = jnp.exp(mixture.log_responsibilities(X[idx])) * (pos < 0)[:, None]
        return jnp.concatenate([jax.nn.one_hot(pos, l, dtype=r.dtype), r], axis=1)

    return lift


def hard_lift(assignments, n_clusters: int, labelled_index, dtype=jnp.float64):
    """Lift for the hard-clustering backbone of Sec. 3.3: ``R_im = 1`` iff i is in cluster m
    (e.g. k-means); then the backbone weights are the summed edge weights between clusters."""
    n, l = assignments.shape[0], labelled_index.shape[0]
    position = jnp.full((n,), -1, dtype=jnp.int32).at[labelled_index].set(
        jnp.arange(l, dtype=jnp.int32)
    )

    def lift(idx):
        pos = position[idx]
        r = jax.nn.one_hot(assignments[idx], n_clusters, dtype=dtype) * (pos < 0)[:, None]
        return jnp.concatenate([jax.nn.one_hot(pos, l, dtype=dtype), r], axis=1)

    return lift


def _padded_rows(n, batch_size):
    n_batches = -(-n // batch_size)
    pad = n_batches * batch_size - n
    idx = jnp.concatenate([jnp.arange(n), jnp.zeros(pad, dtype=jnp.int32)]).astype(jnp.int32)
    return n_batches, pad, idx


def backbone_laplacian(
    lift, neighbor_index, neighbor_weight, *, batch_size=None, max_stored: int = 2**26
):
    """Generalised Laplacian of the backbone graph, Eq. (6): ``P^T Delta P``, ``[l+M, l+M]``.

    ``Delta = D - W`` is the combinatorial Laplacian of the graph given by its padded
    neighbour table (``Graph.padded_neighbors()``: ``neighbor_index int[n, d]``,
    ``neighbor_weight float[n, d]``, padding weight 0). Accumulated over node batches:
    ``sum_i P_i^T (d_i P_i - sum_j w_ij P_j)``. When ``n (l + M) <= max_stored`` the lift
    rows are computed once and gathered; otherwise they are recomputed for each batch
    (memory ``O(batch * d * (l + M))``, never ``n x M``). The first l rows/columns are the
    labelled nodes, the last M the supernodes: ``tilde Delta_UU = R^T Delta_UU R`` and
    ``tilde Delta_UL = R^T Delta_UL``.
    """
    n, d = neighbor_index.shape
    K = lift(jnp.zeros(1, jnp.int32)).shape[1]
    if batch_size is None:
        batch_size = int(max(1, min(n, 2**23 // max(d * K, 1))))
    if n * K <= max_stored:
        nb, _, all_idx = _padded_rows(n, batch_size)
        rows = jax.lax.map(lift, all_idx.reshape(nb, batch_size)).reshape(-1, K)[:n]
        lift = rows.__getitem__
    n_batches, pad, idx = _padded_rows(n, batch_size)
    nbr = jnp.concatenate([neighbor_index, jnp.zeros((pad, d), neighbor_index.dtype)])
    wts = jnp.concatenate([neighbor_weight, jnp.zeros((pad, d), neighbor_weight.dtype)])
    keep = jnp.concatenate([jnp.ones(n), jnp.zeros(pad)]).astype(neighbor_weight.dtype)

    def body(acc, batch):
        b_idx, b_nbr, b_w, b_keep = batch
        P = lift(b_idx) * b_keep[:, None]
        Pn = lift(b_nbr.reshape(-1)).reshape(b_nbr.shape + (K,))
        deg = b_w.sum(1)
        Q = deg[:, None] * P - jnp.einsum("bd,bdk->bk", b_w, Pn)
        return acc + P.T @ Q, None

    batches = (
        idx.reshape(n_batches, batch_size),
        nbr.reshape(n_batches, batch_size, d),
        wts.reshape(n_batches, batch_size, d),
        keep.reshape(n_batches, batch_size),
    )
    acc, _ = jax.lax.scan(body, jnp.zeros((K, K), neighbor_weight.dtype), batches)
    return 0.5 * (acc + acc.T)


# ----------------------------------------------------------------------------- sparse lift


def top_k_responsibilities(mixture, X, k: int, *, batch_size: int = 16384):
    """Sparse responsibilities: the ``k`` largest ``p(m | x_i)`` of each row, renormalised.

    Computed in log space over row batches (``jax.lax.map``: memory ``O(batch * M)``, never
    ``n x M``). Returns ``(index int32[n, k], weight [n, k], dropped [n])`` with
    ``weight[i] = R[i, index[i]] / sum_j R[i, index[i, j]]`` and ``dropped[i] = 1 - sum_j
    R[i, index[i, j]]``, the responsibility mass left out (0 when ``k = M``). ``mixture``:
    any object with ``n_components`` and ``log_responsibilities(X)``.
    """
    M = mixture.n_components
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= M:
        raise ValueError(f"k: the number of responsibilities kept per row must be an integer "
                         f"in [1, n_components = {M}], got {k!r}")
    return _top_k(mixture, X, int(k), int(min(batch_size, X.shape[0])))


@partial(jax.jit, static_argnums=(2, 3))
def _top_k(mixture, X, k, batch_size):
    n = X.shape[0]
    nb, pad, idx = _padded_rows(n, batch_size)

    def one(rows):
        log_r = mixture.log_responsibilities(X[rows])
        top, index = jax.lax.top_k(log_r, k)
        log_kept = jax.scipy.special.logsumexp(top, axis=1)
        weight = jnp.exp(top - log_kept[:, None])
        return index.astype(jnp.int32), weight, -jnp.expm1(jnp.minimum(log_kept, 0.0))

    index, weight, dropped = jax.lax.map(one, idx.reshape(nb, batch_size))
    return index.reshape(-1, k)[:n], weight.reshape(-1, k)[:n], dropped.reshape(-1)[:n]


def sparse_lift(component_index, component_weight, labelled_index, n_components: int):
    """The lift ``P = blockdiag(I_l, R)`` of Eq. (6) as a ``scipy.sparse`` CSR matrix
    ``[n, l + M]`` (float64) from a sparse R given row-wise: ``component_index int[n, k]``,
    ``component_weight [n, k]`` (e.g. :func:`top_k_responsibilities`; hard clusters:
    ``k = 1``, weight 1). Row ``labelled_index[j]`` becomes the unit vector ``e_j``."""
    index = np.asarray(component_index)
    weight = np.asarray(component_weight, np.float64)
    if index.ndim == 1:
        index, weight = index[:, None], np.broadcast_to(weight.reshape(-1, 1), (len(index), 1))
    n, k = index.shape
    lab = np.asarray(labelled_index)
    n_lab = len(lab)
    cols = (index + n_lab).astype(np.int64)
    vals = np.array(weight, np.float64)
    cols[lab] = np.arange(n_lab)[:, None]
    vals[lab] = 0.0
    vals[lab, 0] = 1.0
    P = sp.csr_matrix((vals.ravel(), cols.ravel(), np.arange(0, n * k + 1, k)),
                      shape=(n, n_lab + n_components))
    P.sum_duplicates()
    P.eliminate_zeros()
    return P


def neighbor_laplacian(neighbor_index, neighbor_weight):
    """Combinatorial Laplacian ``Delta = D - W`` (CSR, float64) from the padded neighbour
    table of ``Graph.padded_neighbors()`` (padding: the node itself with weight 0)."""
    nbr = np.asarray(neighbor_index)
    w = np.asarray(neighbor_weight, np.float64)
    n, d = nbr.shape
    # fresh arrays: scipy sorts and merges the CSR buffers in place
    W = sp.csr_matrix((w.ravel().copy(), nbr.ravel().astype(np.int64),
                       np.arange(0, n * d + 1, d)), shape=(n, n))
    W.sum_duplicates()
    W.eliminate_zeros()
    return (sp.diags(w.sum(1)) - W).tocsr()


def sparse_backbone_laplacian(lift, laplacian, *, block_rows: int = 131072):
    """``tilde Delta = P^T Delta P`` of Eq. (6) with a sparse lift (float64 NumPy ``[K, K]``,
    ``K = l + M``), accumulated over blocks of ``block_rows`` graph nodes:
    ``sum_b P_b^T (Delta_b P)``. Work ``O(nnz(Delta) k_R + n k_R^2 (d + 1))`` where ``k_R``
    is the number of nonzeros per lift row; memory ``O(block_rows * d * k_R)`` for the
    products, never dense ``n x K``."""
    P = sp.csr_matrix(lift, dtype=np.float64)
    Lg = sp.csr_matrix(laplacian, dtype=np.float64)
    n, K = P.shape
    if Lg.shape != (n, n):
        raise ValueError(f"laplacian: must be [{n}, {n}] to match the lift, got {Lg.shape}")
    acc = np.zeros((K, K))
    for start in range(0, n, block_rows):
        stop = min(start + block_rows, n)
        acc += (P[start:stop].T @ (Lg[start:stop] @ P)).toarray()
    return 0.5 * (acc + acc.T)
