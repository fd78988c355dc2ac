"""Edge-weighting schemes and distances of Blum & Chawla (2001), Sec. 3 and Sec. 5.1.

Distances: L2 for numeric attributes, L0 (Hamming) for categorical ones, and the
information-gain weighted metric of Sec. 5.1. Weights ``w(x, y)`` (symmetric, scipy CSR):
1-NN (Thm 3.1), locally weighted averaging (Thm 3.2), Mincut-3 and Mincut-delta (Sec. 5.1),
exponential kNN weights (Sec. 5.2). How delta is chosen lives in
:mod:`graphssl.models.mincut_delta`; the cut itself in :mod:`graphssl.models.mincut`.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp

from graphssl.validation import check_same_length

__all__ = [
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
    "exponential_knn_weights",
]

# ----------------------------------------------------------------------------- distances


# |D - D^T| up to this fraction of max |D| is rounding (distances computed row by row)
_SYMMETRY_RTOL = 1e-9


def _check_distances(distances, name: str = "distances") -> np.ndarray:
    """``distances`` as a float64 ``n x n`` array: square, finite, ``>= 0`` and symmetric
    (to ``_SYMMETRY_RTOL`` of its largest entry); ``ValueError`` naming ``name`` otherwise."""
    if sp.issparse(distances):
        raise ValueError(f"{name}: a dense n x n distance matrix is needed; pass "
                         f"{name}.toarray()")
    try:
        D = np.asarray(distances, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name}: distances must be real numbers ({error})") from None
    if D.ndim != 2 or D.shape[0] != D.shape[1]:
        raise ValueError(f"{name}: expected a square n x n distance matrix, got shape "
                         f"{D.shape}; compute it with euclidean_distances(X)")
    if not np.all(np.isfinite(D)):
        raise ValueError(f"{name}: {int(np.sum(~np.isfinite(D)))} entries are NaN or inf; "
                         "impute or drop those points")
    if D.size and D.min() < 0:
        raise ValueError(f"{name}: distances must be >= 0, found {D.min():.6g}")
    scale = float(D.max(initial=0.0))
    if D.size and np.max(np.abs(D - D.T)) > _SYMMETRY_RTOL * scale:
        raise ValueError(f"{name}: the matrix is not symmetric (d(x, y) != d(y, x)); pass the "
                         f"full matrix (not a triangle), e.g. np.maximum({name}, {name}.T)")
    return D


def _check_observed(observed, n: int) -> np.ndarray:
    observed = np.asarray(observed, dtype=bool)
    check_same_length(n, np.atleast_1d(observed), "observed",
                      against="distances has {n} rows")
    return observed


def euclidean_distances(X) -> np.ndarray:
    """Dense L2 distance matrix (Sec. 5.1 for numeric attributes)."""
    X = np.asarray(X, dtype=np.float64)
    sq = np.sum(X * X, axis=1)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * X @ X.T, 0.0)
    np.fill_diagonal(d2, 0.0)
    return np.sqrt(d2)


def _differing(codes, missing=None) -> np.ndarray:
    """``[n, n, attributes]`` bools: where two examples' attribute codes differ; with
    ``missing`` (one code, or one per attribute with -1 for none), an attribute unknown in
    either example counts as agreeing."""
    codes = np.asarray(codes)
    differ = codes[:, None, :] != codes[None, :, :]
    if missing is not None:
        known = codes != missing
        differ &= known[:, None, :] & known[None, :, :]
    return differ


def hamming_distances(codes, *, missing=None) -> np.ndarray:
    """Number of differing categorical attributes, the L0 distance of Sec. 5.1.

    ``missing``: the code of an unknown value (e.g. the ``?`` of the UCI files), one for all
    attributes or an array with one per attribute (-1 where an attribute has none); when
    given, an attribute unknown in either example is not counted (a wildcard). By default an
    unknown value is one more category.
    """
    return np.sum(_differing(codes, missing), axis=2).astype(np.float64)


def _entropy(y) -> float:
    _, counts = np.unique(y, return_counts=True)
    p = counts / counts.sum()
    return float(-np.sum(p * np.log2(p)))


def information_gain(codes, labels, observed) -> np.ndarray:
    """ID3's information gain (bits) of each categorical attribute, on the labelled data only."""
    codes = np.asarray(codes)
    observed = np.asarray(observed, dtype=bool)
    X, y = codes[observed], np.asarray(labels)[observed]
    base = _entropy(y)
    gains = np.empty(codes.shape[1])
    for a in range(codes.shape[1]):
        values, inverse = np.unique(X[:, a], return_inverse=True)
        cond = sum(
            np.mean(inverse == v) * _entropy(y[inverse == v]) for v in range(values.size)
        )
        gains[a] = base - cond
    return gains


def information_gain_distances(codes, gains, *, b: float = 10.0, c: float = 1.0,
                               missing=None) -> np.ndarray:
    """``-log w(x, y)`` for the information-gain weighting of Sec. 5.1:

        w(x, y) = prod_{a : x(a) != y(a)} c / (1 + exp(b gain_a)),

    so the distance is ``sum_{a : x(a) != y(a)} log((1 + exp(b gain_a)) / c)`` and the
    Mincut-delta threshold ``w > exp(-delta)`` is ``distance < delta``. ``c < 2`` keeps each
    term positive; b and c only move the delta at which the variants settle (Sec. 5.1), but
    they do change which examples are nearest (Mincut-3, 3-NN): ``b -> 0`` gives plain Hamming
    order, large ``b`` the gain-weighted Hamming order. ``missing``: as in
    :func:`hamming_distances`.
    """
    if not (b >= 0 and 0 < c < 2):
        raise ValueError(f"b, c: need b >= 0 and 0 < c < 2 (positive distances), got {b}, {c}")
    cost = np.logaddexp(0.0, b * np.asarray(gains, dtype=np.float64)) - np.log(c)
    return np.tensordot(_differing(codes, missing), cost, axes=([2], [0]))


# ----------------------------------------------------------------------------- weights


def neighbors_from_distances(distances, k: int) -> np.ndarray:
    """Indices of the k nearest other points per row, nearest first (stable on ties)."""
    D = np.array(distances, dtype=np.float64)
    n = D.shape[0]
    if not 1 <= k < n:
        raise ValueError(f"k: need 1 <= k < n = {n}, got {k}")
    np.fill_diagonal(D, np.inf)
    return np.argsort(D, axis=1, kind="stable")[:, :k]


def _directed(indices, values, n) -> sp.csr_matrix:
    indices = np.asarray(indices)
    rows = np.repeat(np.arange(indices.shape[0]), indices.shape[1])
    values = np.broadcast_to(values, indices.shape).ravel()
    return sp.csr_matrix((values, (rows, indices.ravel())), shape=(n, n))


def nearest_neighbor_weights(indices) -> sp.csr_matrix:
    """Theorem 3.1: ``w(x, y) = nn_xy + nn_yx`` with ``nn_xy = 1`` iff y is x's nearest
    neighbour (``indices[:, 0]``). Then ``cut(f)`` = number of LOOCV mistakes of 1-NN.
    """
    indices = np.asarray(indices)
    n = indices.shape[0]
    A = _directed(indices[:, :1], 1.0, n)
    return sp.csr_matrix(A + A.T)


def locally_weighted_average_weights(A) -> sp.csr_matrix:
    """Theorem 3.2: ``w(x, y) = w_xy + w_yx`` where row x of ``A`` holds the weights a
    locally weighted averaging algorithm gives each y when classifying x (rows sum to 1, no
    self weight). Then ``cut(f)`` = the L1 LOOCV error of that algorithm.
    """
    A = sp.csr_matrix(A, dtype=np.float64)
    if np.any(A.diagonal() != 0):
        raise ValueError("A: leave-one-out weights must give a point no weight on itself")
    rows = np.asarray(A.sum(axis=1)).ravel()
    if not np.allclose(rows, 1.0):
        raise ValueError("A: each row must sum to 1 (a weighted average); divide by its sum")
    return sp.csr_matrix(A + A.T)


def averaging_knn_weights(indices, k: int) -> sp.csr_matrix:
    """Averaging kNN (Sec. 3): ``w_xy = 1/k`` for the k nearest y of x, symmetrised as in
    Thm 3.2."""
    indices = np.asarray(indices)[:, :k]
    return locally_weighted_average_weights(_directed(indices, 1.0 / k, indices.shape[0]))


def mincut3_weights(distances, observed, *, from_unlabelled_only: bool = False,
                    tie_break=None, directed: bool = False,
                    force_labelled: bool = True) -> sp.csr_matrix:
    """Mincut-3 (Sec. 5.1): every example is joined (weight 1) to its nearest labelled example
    and to the two nearest other examples overall; the union of these edges, undirected.

    ``from_unlabelled_only=True`` draws the three edges from the unlabelled examples only (the
    paper's first sentence, "we connect each unlabeled example ..."). Equal distances are
    broken by index, or by a random order when ``tie_break`` is a ``numpy`` Generator
    (Hamming distances tie a lot). ``directed=True`` returns the un-symmetrised choice
    ``A[i, j] = 1`` iff i chose j (for :func:`graphssl.models.mincut.arc_network`, a protocol
    variant); the undirected weights are ``min(A + A^T, 1)``. ``force_labelled=False`` (a
    protocol variant, against the paper's text) joins each example to its three nearest
    overall, labelled or not, so components without a label can occur.
    """
    D = np.array(_check_distances(distances))  # a copy: its diagonal is overwritten
    n = D.shape[0]
    observed = _check_observed(observed, n)
    if force_labelled and not observed.any():
        raise ValueError("observed: Mincut-3 needs at least one labelled example (each example "
                         "is joined to its nearest labelled one); mark at least one observed "
                         "point, or pass force_labelled=False")
    np.fill_diagonal(D, np.inf)
    order = np.arange(n) if tie_break is None else tie_break.permutation(n)
    Dp = D[:, order]  # columns in tie-break order: argmin / stable argsort pick the first
    rows = np.arange(n)
    if force_labelled:
        nearest_l = order[np.argmin(np.where(observed[order][None, :], Dp, np.inf), axis=1)]
        D[rows, nearest_l] = np.inf
        others = order[np.argsort(D[:, order], axis=1, kind="stable")[:, :2]]
        idx = np.column_stack([nearest_l, others])
    else:
        idx = order[np.argsort(Dp, axis=1, kind="stable")[:, :3]]
    if from_unlabelled_only:
        idx = np.where(observed[:, None], rows[:, None], idx)  # self-loops are dropped below
    A = _directed(idx, 1.0, n)
    if directed:
        A.setdiag(0)
        A.eliminate_zeros()
        A.data[:] = 1.0
        return A
    W = sp.csr_matrix(A + A.T)
    W.setdiag(0)
    W.eliminate_zeros()
    W.data[:] = 1.0
    return W


def delta_weights(distances, delta: float) -> sp.csr_matrix:
    """Mincut-delta (Sec. 5.1): ``w(x, y) = 1`` when ``d(x, y) < delta``, else 0 (``delta`` a
    real number, not NaN; ``inf`` joins every pair)."""
    D = _check_distances(distances)
    if (isinstance(delta, bool | np.bool_) or not isinstance(delta, numbers.Real)
            or np.isnan(delta)):
        raise ValueError(f"delta: the radius must be a real number (not NaN), got {delta!r}")
    W = sp.csr_matrix((D < delta).astype(np.float64))
    W.setdiag(0)
    W.eliminate_zeros()
    return W


def exponential_knn_weights(indices, distances, scale: float) -> sp.csr_matrix:
    """kNN graph with ``w = exp(-d / scale)`` (Sec. 5.2: "an exponentially-decreasing
    function of distance"), symmetrised by max."""
    if not scale > 0:
        raise ValueError(f"scale: the length scale must be positive, got {scale}")
    indices = np.asarray(indices)
    n = indices.shape[0]
    vals = np.maximum(np.exp(-np.asarray(distances, np.float64) / scale), 1e-300)
    A = _directed(indices, vals, n)
    return sp.csr_matrix(A.maximum(A.T))
