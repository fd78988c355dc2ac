"""k-nearest-neighbour search for :mod:`graphssl.graph` (exact and approximate methods).

:func:`knn_search` is re-exported by :mod:`graphssl.graph`, its documented home.
"""

from __future__ import annotations

import numpy as np

from graphssl.validation import check_features, check_k

__all__ = ["knn_search", "grouped_top_k", "exact_knn_traced", "query_blocks"]

_EXACT_BRUTE_FORCE_MAX_N = 50_000
_PRODUCTS_PER_THREAD = 2**22  # re-ranking: another thread per 4M multiply-adds
_GEMM_MIN_N = 5_000  # below it the compiled search's fixed costs exceed brute force's
_KDTREE_MAX_DIM = 8


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


_GEMM_BLOCK = 256
_GEMM_GROUP = 16
_GEMM_SLACK = 6
_TRACED_MAX_SCORES = 1 << 26  # floats in one block of query scores (256 MB in float32)


def grouped_top_k(scores, m: int, group: int):
    """Exact ``(values, column indices)`` of the ``m`` largest entries of each row of
    ``scores [rows, n]`` (traceable; ``n`` a multiple of ``group``), largest first.

    The columns are dealt into ``n / group`` groups of ``group`` (group ``g`` holds columns
    ``g, g + n_groups, ...``: the group maxima are a reduction over a strided axis, no
    transposition); the ``m`` groups with the largest maxima are kept and the top ``m`` of
    their ``m * group`` entries taken. Exact because every one of the ``m`` largest entries
    lies in a group whose maximum is at least the ``m``-th largest, and at most ``m`` groups
    have such a maximum. One reduction pass over the scores plus two small top-k's, instead
    of a top-k over all n columns.
    """
    import jax
    import jax.numpy as jnp

    rows, n = scores.shape
    n_groups = n // group
    m_groups = min(m, n_groups)
    grouped = scores.reshape(rows, group, n_groups)
    best_groups = jax.lax.top_k(grouped.max(axis=1), m_groups)[1]
    kept = jnp.take_along_axis(grouped, best_groups[:, None, :], axis=2)
    columns = best_groups[:, None, :] + jnp.arange(group)[:, None] * n_groups
    values, best = jax.lax.top_k(kept.reshape(rows, group * m_groups), m)
    return values, jnp.take_along_axis(columns.reshape(rows, group * m_groups), best, axis=1)


def query_blocks(n: int) -> tuple[int, int]:
    """``(n_blocks, rows)``: the fewest equal blocks of query rows within the score budget."""
    max_rows = max(1, min(n, _TRACED_MAX_SCORES // max(n, 1)))
    n_blocks = -(-n // max_rows)
    return n_blocks, -(-n // n_blocks)


def exact_knn_traced(X, k: int, n_blocks: int, rows: int, group: int = _GEMM_GROUP):
    """Traceable exact kNN on the device: ``(indices int32[n, k], squared distances [n, k])``
    of each point's k nearest *other* points, nearest first (float32 scores at full
    precision; ``n_blocks * rows >= n`` query rows from :func:`query_blocks`, padded here).
    The columns are padded to a multiple of ``group`` for :func:`grouped_top_k` (on an H100
    it took usps_full's search from 8.0 ms with one ``lax.top_k`` over all columns to
    2.4 ms). Everything stays on the device: call it inside ``jit``.
    """
    import jax
    import jax.numpy as jnp

    n, d = X.shape
    norms = jnp.sum(X * X, axis=1)
    pad = (-n) % group
    column_norms = jnp.concatenate([norms, jnp.full((pad,), jnp.inf, X.dtype)])
    columns = jnp.pad(2.0 * X, ((0, pad), (0, 0)))
    queries = jnp.pad(X, ((0, n_blocks * rows - n), (0, 0))).reshape(n_blocks, rows, d)
    first_rows = jnp.arange(n_blocks) * rows

    def one(block):
        Q, first = block
        scores = jnp.matmul(Q, columns.T, precision=jax.lax.Precision.HIGHEST)
        scores = scores - column_norms[None]
        own = (first + jnp.arange(rows))[:, None] == jnp.arange(n + pad)[None, :]
        best, index = grouped_top_k(jnp.where(own, -jnp.inf, scores), k, group)
        return index.astype(jnp.int32), best

    index, best = jax.lax.map(one, (queries, first_rows))
    index, best = index.reshape(-1, k)[:n], best.reshape(-1, k)[:n]
    return index, jnp.maximum(norms[:, None] - best, 0.0)


def _gemm_candidates(X32, queries, m: int, block: int, group: int):
    """Indices of the ``m`` nearest rows of ``X32`` for each query row (float32, blocked, JAX).

    Per block of ``block`` queries: scores ``2 x.y - |y|^2`` from one matrix product, then the
    exact two-stage :func:`grouped_top_k`. Measured on usps_full (2 CPU cores): 0.22 s
    against 0.40 s for one ``lax.top_k`` over all n columns (0.25 s with contiguous groups
    of 32). Working memory ``block x n`` floats; compiled once per shape.
    """
    global _GEMM_JIT
    if _GEMM_JIT is None:
        import functools

        import jax
        import jax.numpy as jnp

        @functools.partial(jax.jit, static_argnames=("m", "block", "group"))
        def run(X32, queries, m, block, group):
            n, d = X32.shape
            pad = (-n) % group
            padding = jnp.full((pad,), jnp.inf, X32.dtype)  # padded columns never win
            norms = jnp.concatenate([jnp.sum(X32 * X32, axis=1), padding])
            doubled = jnp.concatenate([2.0 * X32, jnp.zeros((pad, d), X32.dtype)])

            def one(block_rows):
                scores = block_rows @ doubled.T - norms[None, :]
                return grouped_top_k(scores, m, group)[1]

            return jax.lax.map(one, queries.reshape(-1, block, queries.shape[1]))

        _GEMM_JIT = run
    return _GEMM_JIT(X32, queries, m=m, block=block, group=group).reshape(-1, m)


_GEMM_JIT = None


def _gemm_knn(X: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact kNN through float32 matrix products on the default JAX device, re-ranked exactly.

    Candidates: the ``k + 1 + slack`` nearest by float32 distances (one ``[block, n]`` product
    and top-k per block of queries; on a CPU XLA's float32 GEMM is ~2.5x the float64 work of
    ``"brute"``, on a GPU it is the blocked top-k of the accelerator); then the candidates'
    distances are recomputed in float64 and sorted (ties by index). A true neighbour is lost
    only if float32 rounding (relative ~1e-6 of the squared norms) moves more than ``slack``
    = 6 points ahead of it. (numpy's OpenBLAS products are 1.4x XLA's on this CPU, but with
    numpy's top-k the search took the same 0.28 s on usps_full, so one engine is kept.)
    """
    n = X.shape[0]
    m = min(n, k + 1 + _GEMM_SLACK)
    block = max(1, min(_GEMM_BLOCK, n, 2**27 // n))  # score block <= 2^27 floats (512 MB)
    X32 = np.asarray(X, dtype=np.float32)
    pad = (-n) % block
    queries = np.concatenate([X32, np.zeros((pad, X32.shape[1]), np.float32)]) if pad else X32
    candidates = np.asarray(_gemm_candidates(X32, queries, m, block, _GEMM_GROUP))
    candidates = candidates[:n].astype(np.int64)
    distances = _exact_distances(X, candidates)
    order = np.lexsort((candidates, distances), axis=1)[:, : k + 1]
    indices = np.take_along_axis(candidates, order, axis=1)
    return _drop_self(indices, np.take_along_axis(distances, order, axis=1), k)


def _exact_distances(X: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Euclidean distances ``||x_i - x_{indices[i, j]}||`` in float64.

    ``|x|^2 + |y|^2 - 2 x.y`` over blocks of rows (the gathered neighbour rows of a block take
    at most ~16 MB: memory O(n d), never n x k x d), the row range split over up to 8 threads
    (the gathers and products release the GIL); pairs where that difference has lost more
    than 4 of its 16 digits to cancellation (below 1e-4 of ``|x|^2 + |y|^2``: points close
    together relative to their norms) are recomputed from ``x - y``, so the relative error
    stays ~1e-12 (1e-10 at worst: the products' rounding amplified at most 1e4 times) and a
    duplicate is at exactly 0. usps_full, 17 candidates, 2 cores: 0.018 s (one thread 0.04 s,
    a loop over columns 0.15 s).
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


def _kdtree_knn(X: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    from scipy.spatial import cKDTree

    distances, indices = cKDTree(X).query(X, k=k + 1, workers=-1)
    return _drop_self(indices, distances, k)


def _drop_self(indices: np.ndarray, distances: np.ndarray, k: int):
    """Remove each query's own index from k+1 returned neighbours (ties with duplicates)."""
    n = indices.shape[0]
    is_self = indices == np.arange(n)[:, None]
    has_self = is_self.any(axis=1)
    # rows without self (duplicates pushed it out): drop the last column instead
    is_self[~has_self, -1] = True
    keep = ~is_self
    return indices[keep].reshape(n, k), distances[keep].reshape(n, k)


def _nndescent_knn(X: np.ndarray, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    from pynndescent import NNDescent

    index = NNDescent(X, n_neighbors=k + 1, random_state=seed, n_jobs=-1)
    indices, distances = index.neighbor_graph
    return _drop_self(indices, distances, k)


def _principal_projection(X: np.ndarray, r: int, seed: int) -> np.ndarray:
    """Coordinates ``float64[n, r]`` of the centred ``X`` on its ``r`` leading principal axes.

    Eigenvectors of the d x d scatter matrix for d <= 2048 (O(n d^2)), else a randomized SVD.
    BLAS runs on one thread here: on a loaded 2-core machine a threaded OpenBLAS ``eigh`` of
    a 256 x 256 matrix took 2.7-3.6 s against 0.014-0.05 s single-threaded (busy-waiting
    threads), and the scatter matrix 0.58 s against 0.04 s.
    """
    from threadpoolctl import threadpool_limits

    Xc = X - X.mean(axis=0)
    d = X.shape[1]
    with threadpool_limits(1):
        if d <= 2048:
            axes = np.linalg.eigh(Xc.T @ Xc)[1][:, ::-1][:, :r]
        else:
            from sklearn.utils.extmath import randomized_svd

            axes = randomized_svd(Xc, r, random_state=seed)[2].T
        return Xc @ axes


def _projected_knn(X: np.ndarray, k: int, n_components: int, n_candidates: int, seed: int):
    """Approximate kNN: exact search on a PCA projection, exact re-ranking in the full space.

    1. project the centred points on their ``n_components`` leading principal directions;
    2. take each point's ``n_candidates`` nearest projected neighbours (exact blocked
       search: its cost falls with the dimension, so it is cheaper than in full d);
    3. re-rank the candidates by their full-space distances and keep the ``k`` nearest.

    The projection never lengthens a distance, so a true neighbour is missed only when
    more than ``n_candidates`` points look closer in projection. Measured on usps_full
    (256 -> 64 dimensions, k = 10; benchmarks/bench_graph.py): recall 0.99+ with 3k
    candidates.
    """
    n, d = X.shape
    r = min(int(n_components), d)
    m = min(max(int(n_candidates), k), n - 1)
    Y = _principal_projection(X, r, seed)
    candidates, _ = _brute_force_knn(Y, m)
    X32 = np.asarray(X, dtype=np.float32)
    norms = _squared_norms(X32)
    sq = np.empty(candidates.shape, dtype=np.float32)
    block = max(1, 2**22 // max(m * d, 1))  # ~16 MB of gathered float32 rows per block
    for start in range(0, n, block):
        rows = slice(start, start + block)
        gathered = X32[candidates[rows]]  # [b, m, d]
        dots = np.einsum("bd,bmd->bm", X32[rows], gathered)
        sq[rows] = norms[rows, None] + norms[candidates[rows]] - 2.0 * dots
    keep = np.argpartition(sq, k - 1, axis=1)[:, :k] if m > k else np.arange(k)[None, :]
    indices = np.take_along_axis(candidates, np.broadcast_to(keep, (n, k)), axis=1)
    distances = _exact_distances(X, indices)
    order = np.argsort(distances, axis=1, kind="stable")
    return np.take_along_axis(indices, order, axis=1), np.take_along_axis(distances, order, 1)


def knn_search(
    X, k: int, *, method: str = "auto", seed: int = 0, n_components: int = 64,
    n_candidates: int | None = None,
):
    """k nearest neighbours of every row of ``X`` (Euclidean), the point itself excluded.

    Args:
      X: float[n, d] features.
      k: neighbours per point, ``1 <= k < n``.
      method: ``"brute"`` (exact, chunked: memory O(chunk x n), never n x n), ``"gemm"``
        (exact: float32 matrix products + top-k in JAX on the default device, candidates
        re-ranked in float64; usps_full on 2 CPU cores: 0.28 s against 0.44 s for ``"brute"``,
        Digit1 (n = 1500): 0.040 s against 0.017 s; the first call of a shape also compiles,
        ~0.2 s), ``"kdtree"``
        (exact, scipy cKDTree; fast for d <= 8), ``"nndescent"`` (approximate, pynndescent;
        for large n in high dimension), ``"pca"`` (approximate: the ``n_candidates``
        (default 3k) nearest points on the ``n_components`` leading principal components,
        re-ranked by exact distances; for large d, where the d-dimensional products dominate
        the exact search; brute when d <= n_components) or ``"auto"`` (kdtree for d <= 8,
        brute below n = 5000, gemm up to n = 50000, nndescent above). Measured
        (benchmarks/bench_graph.py): the KD-tree degrades to O(n^2.4) on 15-dimensional
        integer-coded SecStr, hence d <= 8.
      seed: seed of the approximate methods.
      n_components, n_candidates: settings of ``"pca"``; ignored by the other methods.

    Returns:
      ``(indices int64[n, k], distances float64[n, k])``, each row sorted by distance.
    """
    X = check_features(X)
    n, d = X.shape
    k = check_k(k, n)
    if method == "auto":
        if d <= _KDTREE_MAX_DIM:
            method = "kdtree"
        elif n < _GEMM_MIN_N:
            method = "brute"
        elif n <= _EXACT_BRUTE_FORCE_MAX_N:
            method = "gemm"
        else:
            method = "nndescent"
    X64 = np.asarray(X, dtype=np.float64)
    if method == "brute":
        return _brute_force_knn(X64, k)
    if method == "gemm":
        return _gemm_knn(X64, k)
    if method == "kdtree":
        return _kdtree_knn(X64, k)
    if method == "nndescent":
        return _nndescent_knn(np.asarray(X, dtype=np.float32), k, seed)
    if method == "pca":
        if not (isinstance(n_components, int | np.integer) and n_components >= 1):
            raise ValueError(f"n_components: a positive int, got {n_components!r}")
        m = 3 * k if n_candidates is None else n_candidates
        if not (isinstance(m, int | np.integer) and m >= k):
            raise ValueError(f"n_candidates: an int >= k = {k}, got {n_candidates!r}")
        if d <= n_components:
            return _brute_force_knn(X64, k)
        return _projected_knn(X64, k, n_components, m, seed)
    raise ValueError(
        f"method: unknown kNN method {method!r}; use 'auto', 'brute', 'gemm', 'kdtree', "
        "'nndescent' or 'pca'"
    )
