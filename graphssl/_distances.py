"""Exact float64 distances shared by the kNN back ends of :mod:`graphssl.neighbors` and
:mod:`graphssl.neighbors_approximate`."""

from __future__ import annotations

import numpy as np

_PRODUCTS_PER_THREAD = 2**22  # re-ranking: another thread per 4M multiply-adds


def _squared_norms(X: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", X, X)


def _brute_force_knn(X: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact kNN by scikit-learn's chunked brute force (parallel arg-k-min over row blocks).

    The search runs in float64: scikit-learn's float32 path upcasts each chunk to float64
    for the products anyway, and float32 input then needed a float64 re-computation of the
    kept distances (measured on usps_full: float64 without it is ~25 % faster, same
    neighbours, distances equal to 6e-14). Distances come from ``|x|^2 + |y|^2 - 2 x.y`` in
    float64, as :func:`_exact_distances` computes them.

    Its working memory is bounded (``sklearn.get_config()["working_memory"]``, 1 GiB by
    default), so no n x n distance matrix is ever built.
    """
    from sklearn.neighbors import NearestNeighbors

    X = np.ascontiguousarray(X, dtype=np.float64)
    search = NearestNeighbors(n_neighbors=k + 1, algorithm="brute").fit(X)
    distances, indices = search.kneighbors(X)
    return _drop_self(indices, distances, k)


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


_BLOCK_ROWS = 128  # query rows per product: a [128, n] float32 score block per thread
_BLOCK_GROUP = 16
_BLOCK_SLACK = 6


def _grouped_top(scores: np.ndarray, m: int, group: int) -> np.ndarray:
    """Column indices of the ``m`` largest entries of each row of ``scores [rows, n]``
    (``n`` a multiple of ``group``; unordered): NumPy's form of
    :func:`graphssl.neighbors.grouped_top_k` (columns dealt into ``n / group`` strided groups,
    the ``m`` groups with the largest maxima kept, the top ``m`` of their ``m * group``
    entries taken; exact for the same reason)."""
    rows, n = scores.shape
    n_groups = n // group
    m_groups = min(m, n_groups)
    grouped = scores.reshape(rows, group, n_groups)
    maxima = grouped.max(axis=1)
    if m_groups < n_groups:
        best = np.argpartition(maxima, n_groups - m_groups, axis=1)[:, n_groups - m_groups:]
    else:
        best = np.broadcast_to(np.arange(n_groups), (rows, n_groups))
    kept = np.take_along_axis(grouped, best[:, None, :], axis=2).reshape(rows, -1)
    columns = (best[:, None, :] + (np.arange(group) * n_groups)[:, None]).reshape(rows, -1)
    width = kept.shape[1]
    if m < width:
        chosen = np.argpartition(kept, width - m, axis=1)[:, width - m:]
        return np.take_along_axis(columns, chosen, axis=1)
    return columns


def _blocked_knn(X: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact kNN on the host: float32 products over blocks of query rows, re-ranked in float64.

    The scores ``2 x.y - |y|^2`` come out of one product per block of 128 queries, with the
    norms folded in as an extra column (``[x, 1] . [2y, -|y|^2]``); the ``k + 1 + 6`` best
    columns of each row are found by :func:`_grouped_top`, and their exact float64 distances
    (:func:`_exact_distances`) sorted, ties by index, as ``"gemm"`` does: a true neighbour is
    lost only if float32 rounding moves more than 6 points ahead of it. The blocks are split
    over up to 8 threads with single-threaded BLAS in each (one product of a [128, 33] block
    is too small for BLAS's own threads, which then mostly wait: 0.93 against 0.31 CPU s at
    n = 10^4 on the loaded 2-core machine). No compilation, so a new process or a new ``n``
    pays nothing extra. d = 32, a fresh process per search, 2 cores, CPU seconds: n = 10^3:
    0.02 s against 0.29 s for the first ``"gemm"`` call (compiling) and 0.16 s for
    scikit-learn's brute force (1.3 s with its first import); n = 10^4: 0.31 s against
    0.61 s and 0.41 s. Its cost grows with n^2 faster than ``"gemm"``'s (n = 10^5: 27.7 s
    against ~10 s), hence ``auto_method``'s limit. Working memory: ``threads x 128 x n``
    float32 scores.
    """
    n, d = X.shape
    m = min(n, k + 1 + _BLOCK_SLACK)
    X32 = np.asarray(X, dtype=np.float32)
    pad = (-n) % _BLOCK_GROUP
    columns = np.zeros((d + 1, n + pad), dtype=np.float32)  # [2y, -|y|^2]^T, padding -inf
    columns[:d, :n] = 2.0 * X32.T
    columns[d, :n] = -_squared_norms(X32)
    columns[d, n:] = -np.inf
    queries = np.ones((n, d + 1), dtype=np.float32)
    queries[:, :d] = X32
    candidates = np.empty((n, m), dtype=np.int64)

    def rows_from(start: int, stop: int) -> None:
        for first in range(start, stop, _BLOCK_ROWS):
            last = min(first + _BLOCK_ROWS, stop)
            candidates[first:last] = _grouped_top(queries[first:last] @ columns, m,
                                                  _BLOCK_GROUP)

    n_blocks = -(-n // _BLOCK_ROWS)
    workers = min(_threads(), n_blocks)
    if workers > 1:
        from concurrent.futures import ThreadPoolExecutor

        from threadpoolctl import threadpool_limits

        bounds = [min(n, (n_blocks * i // workers) * _BLOCK_ROWS) for i in range(workers + 1)]
        with threadpool_limits(1, user_api="blas"), ThreadPoolExecutor(workers) as pool:
            list(pool.map(rows_from, bounds[:-1], bounds[1:]))
    else:
        rows_from(0, n)
    distances = _exact_distances(np.asarray(X, dtype=np.float64), candidates)
    order = np.lexsort((candidates, distances), axis=1)[:, : k + 1]
    indices = np.take_along_axis(candidates, order, axis=1)
    return _drop_self(indices, np.take_along_axis(distances, order, axis=1), k)
