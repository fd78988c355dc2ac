"""Exact float64 distances shared by the kNN back ends of :mod:`graphssl.neighbors` and
:mod:`graphssl.neighbors_approximate`."""

from __future__ import annotations

import numpy as np

_PRODUCTS_PER_THREAD = 2**22  # re-ranking: another thread per 4M multiply-adds


def _squared_norms(X: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", X, X)


_FLOAT32_EPS = float(np.finfo(np.float32).eps)
_FLOAT64_EPS = float(np.finfo(np.float64).eps)
SLACK = 6  # candidates kept beyond the k + 1 nearest by an inexact score


def _brute_force_knn(X: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact kNN by scikit-learn's chunked brute force (parallel arg-k-min over row blocks).

    The search runs in float64 on the centred points (a common offset, such as Unix times
    in one column, otherwise cost the expansion ``|x|^2 + |y|^2 - 2 x.y`` its digits: a
    distance error of 29 against a median distance of 110 at an offset of 1.7e9); its
    ``k + 1 + SLACK`` candidates are re-ranked by :func:`certified_neighbors`, so the
    distances are exact and a neighbour the expansion's rounding could have displaced is
    searched again. scikit-learn's float32 path upcasts each chunk to float64 for the
    products anyway. Its working memory is bounded
    (``sklearn.get_config()["working_memory"]``, 1 GiB by default), so no n x n distance
    matrix is ever built.
    """
    from sklearn.neighbors import NearestNeighbors

    X = np.ascontiguousarray(X, dtype=np.float64)
    centred = X - X.mean(axis=0)
    m = min(X.shape[0], k + 1 + SLACK)
    search = NearestNeighbors(n_neighbors=m, algorithm="brute").fit(centred)
    candidates = search.kneighbors(centred, return_distance=False)
    return certified_neighbors(X, candidates, k, _FLOAT64_EPS)


def certified_neighbors(X: np.ndarray, candidates: np.ndarray, k: int,
                        eps: float) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` nearest other points ``(indices int64[n, k], distances float64[n, k])``,
    nearest first, ties by index, from ``candidates int[n, m]``: each row's ``m`` nearest
    points (itself included) by a score that rounding at relative precision ``eps`` may
    have perturbed (float32 products: ``eps`` of float32).

    The candidates' distances are recomputed exactly (:func:`_exact_distances`). A row is
    certified when no point outside its candidates can be among its ``k + 1`` nearest: such
    a point scored at least as far as every candidate, so its squared distance is at least
    the farthest candidate's minus twice the scores' error bound, ``2 (d + 4) eps (|x|^2 +
    max |y|^2)`` on the centred points (a dot product's worst-case rounding, doubled for the
    inputs' own rounding). Rows that are not (far-apart groups, a 0 / 1e4-coded column in
    float32) are searched again by float64 products on the centred points, and rows still
    uncertified by exact differences. So the result is the exact kNN whatever the score's
    precision; the re-search costs ``O(rows n d)``.
    """
    X = np.asarray(X, dtype=np.float64)
    candidates = np.array(candidates, dtype=np.int64)
    distances = _exact_distances(X, candidates)
    centred = X - X.mean(axis=0)
    norms = _squared_norms(centred)
    rows = np.arange(X.shape[0])
    for tier_eps, exact in ((eps, False), (_FLOAT64_EPS, True)):
        rows = rows[_uncertified(distances[rows], norms, rows, k, X.shape[1], tier_eps)]
        if rows.size == 0:
            break
        if exact or eps > _FLOAT64_EPS:  # float64 products, then exact differences
            candidates[rows] = _rows_candidates(centred, norms, rows, candidates.shape[1],
                                                exact)
            distances[rows] = _exact_distances_rows(X, candidates, rows)
    order = np.lexsort((candidates, distances), axis=1)[:, : k + 1]
    indices = np.take_along_axis(candidates, order, axis=1)
    return _drop_self(indices, np.take_along_axis(distances, order, axis=1), k)


def _uncertified(distances, norms, rows, k: int, d: int, eps: float) -> np.ndarray:
    """Mask over ``rows``: those whose ``k + 1`` nearest could lie outside their candidates
    (``distances float[rows, m]``; see :func:`certified_neighbors`). None when the
    candidates are all the points."""
    if distances.shape[1] >= norms.size:
        return np.zeros(rows.size, dtype=bool)
    sq = distances * distances
    kth = np.partition(sq, k, axis=1)[:, k]
    bound = 2.0 * (d + 4) * eps * (norms[rows] + norms.max())
    return sq.max(axis=1) - 2.0 * bound <= kth


def _rows_candidates(centred, norms, rows, m: int, exact: bool) -> np.ndarray:
    """The ``m`` nearest points of ``rows`` over all points: by float64 products on the
    centred points, or (``exact``) by squared differences, in blocks of ~16 MB."""
    n, d = centred.shape
    out = np.empty((rows.size, m), dtype=np.int64)
    block = max(1, 2**21 // max(n * (d if exact else 1), 1))
    for start in range(0, rows.size, block):
        chunk = rows[start:start + block]
        if exact:
            sq = np.einsum("bnd,bnd->bn", centred[None] - centred[chunk, None],
                           centred[None] - centred[chunk, None])
        else:
            sq = norms[chunk, None] + norms[None] - 2.0 * centred[chunk] @ centred.T
        out[start:start + chunk.size] = np.argpartition(sq, m - 1, axis=1)[:, :m]
    return out


def _exact_distances_rows(X, candidates, rows) -> np.ndarray:
    """:func:`_exact_distances` of ``rows`` only (their candidates; the other rows' values
    are not needed)."""
    sub = candidates[rows]
    return np.sqrt(np.einsum("bmd,bmd->bm", X[sub] - X[rows, None], X[sub] - X[rows, None]))


def _exact_distances(X: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Euclidean distances ``||x_i - x_{indices[i, j]}||`` in float64.

    ``|x|^2 + |y|^2 - 2 x.y`` over blocks of rows (the gathered neighbour rows of a block take
    at most ~16 MB: memory O(n d), never n x k x d), the row range split over up to 8 threads
    (the gathers and products release the GIL); pairs where that difference has lost more
    than 4 of its 16 digits to cancellation (below 1e-4 of ``|x|^2 + |y|^2``: points close
    together relative to their norms) are recomputed from ``x - y``, so the relative error
    stays ~1e-12 (1e-10 at worst: the products' rounding amplified at most 1e4 times) and a
    duplicate is at exactly 0. usps_full, 17 candidates, 2 cores: 0.018 s (one thread 0.04 s,
    a loop over columns 0.15 s); 20,000 x 17 pairs in d = 64: 0.31 s against 1.03 s for
    scikit-learn's ``paired_euclidean_distances`` on the gathered rows
    (benchmarks/bench_host_utilities.py).
    """
    n, d = X.shape
    width = indices.shape[1]
    norms = _squared_norms(X)
    distances = np.empty(indices.shape, dtype=np.float64)
    block = max(1, 2**21 // max(width * d, 1))

    def rows_from(start: int, stop: int) -> None:
        for first in range(start, stop, block):
            rows = slice(first, min(first + block, stop))
            dots = np.matmul(X[indices[rows]], X[rows, :, None])[:, :, 0]
            distances[rows] = norms[rows, None] + norms[indices[rows]] - 2.0 * dots

    workers = min(_threads(), max(1, n * width * d // _PRODUCTS_PER_THREAD))
    if workers > 1:
        from concurrent.futures import ThreadPoolExecutor

        bounds = np.linspace(0, n, workers + 1).astype(int)
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(rows_from, bounds[:-1], bounds[1:]))
    else:
        rows_from(0, n)
    scale = norms[:, None] + norms[indices]
    row, col = np.nonzero(distances <= 1e-4 * scale)
    differences = X[indices[row, col]] - X[row]
    distances[row, col] = np.einsum("ij,ij->i", differences, differences)
    return np.sqrt(np.maximum(distances, 0.0))


def _threads() -> int:
    """Worker threads for the memory-bound re-ranking: the usable cores, at most 8."""
    import os

    try:
        return max(1, min(8, len(os.sched_getaffinity(0))))
    except AttributeError:  # not on Linux
        return max(1, min(8, os.cpu_count() or 1))


def _drop_self(indices: np.ndarray, distances: np.ndarray, k: int):
    """Remove each query's own index from k+1 returned neighbours (ties with duplicates)."""
    n = indices.shape[0]
    is_self = indices == np.arange(n)[:, None]
    has_self = is_self.any(axis=1)
    # rows without self (duplicates pushed it out): drop the last column instead
    is_self[~has_self, -1] = True
    keep = ~is_self
    return indices[keep].reshape(n, k), distances[keep].reshape(n, k)

