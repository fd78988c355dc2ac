"""k-nearest-neighbour search for :mod:`graphssl.graph` (exact and approximate methods).

:func:`knn_search` is re-exported by :mod:`graphssl.graph`, its documented home.
"""

from __future__ import annotations

import numpy as np

from graphssl._distances import (  # noqa: F401 - _squared_norms is used by graphssl.graph
    _FLOAT32_EPS,
    _brute_force_knn,
    _drop_self,
    _exact_distances,
    _squared_norms,
    certified_neighbors,
)
from graphssl._warnings import warn_user
from graphssl.neighbors_approximate import (
    _faiss_knn,
    _installed,
    _nndescent_knn,
    _projected_knn,
    faiss_gpu_available,
)
from graphssl.neighbors_blocked import blocked_knn
from graphssl.validation import check_features, check_k

__all__ = [
    "knn_search",
    "grouped_top_k",
    "exact_knn_traced",
    "query_blocks",
    "faiss_gpu_available",
    "auto_method",
]

_BRUTE_MAX_N = 3_000  # "brute" (scikit-learn's arg-k-min) up to it: measured, see auto_method
_GEMM_MIN_N = 5_000  # accelerators: below it the compiled search's fixed costs dominate
_BLOCKED_MAX_N = 30_000  # CPU: "blocked" up to it, "gemm" above (measured, see auto_method)
_KDTREE_MAX_DIM = 8
# small problems: the KD-tree, which nothing in it scans or compiles (see auto_method)
_SMALL_KDTREE_MAX_N, _SMALL_KDTREE_MAX_DIM = 1_500, 32
_APPROXIMATE_MIN_N = 200_000  # "auto" leaves exact search above it (see auto_method)


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
    X = X - jnp.mean(X, axis=0)  # centred: the float32 scores keep their digits far from 0
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
                # HIGHEST: full float32 products (a GPU's default, TF32, keeps ~10 bits and
                # put true neighbours more than the slack behind: the crowded-curve test)
                scores = jnp.matmul(block_rows, doubled.T,
                                    precision=jax.lax.Precision.HIGHEST) - norms[None, :]
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
    distances are recomputed in float64 and sorted (ties by index); rows whose float32
    rounding could have displaced a true neighbour are searched again in float64
    (:func:`graphssl._distances.certified_neighbors`), so the result is exact. (numpy's
    OpenBLAS products are 1.4x XLA's on this CPU, but with
    numpy's top-k the search took the same 0.28 s on usps_full, so one engine is kept.)
    """
    n = X.shape[0]
    m = min(n, k + 1 + _GEMM_SLACK)
    block = max(1, min(_GEMM_BLOCK, n, 2**27 // n))  # score block <= 2^27 floats (512 MB)
    centred = X - X.mean(axis=0)  # centred (see exact_knn_traced)
    largest = float(np.max(np.abs(centred), initial=0.0))
    if largest > 0.0:  # a power-of-two scale to ~1: float32 neither overflows nor underflows
        centred = np.ldexp(centred, -int(np.frexp(largest)[1]))
    X32 = np.asarray(centred, dtype=np.float32)
    pad = (-n) % block
    queries = np.concatenate([X32, np.zeros((pad, X32.shape[1]), np.float32)]) if pad else X32
    candidates = np.asarray(_gemm_candidates(X32, queries, m, block, _GEMM_GROUP))
    return certified_neighbors(X, candidates[:n], k, _FLOAT32_EPS)


def _kdtree_knn(X: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    from scipy.spatial import cKDTree

    # one thread for small problems: starting the others costs more than they save
    # (n = 1000, d = 16: 6.1 ms against 9.1 ms)
    workers = 1 if X.shape[0] <= _SMALL_KDTREE_MAX_N else -1
    distances, indices = cKDTree(X).query(X, k=k + 1, workers=workers)
    return _drop_self(indices, distances, k)


def auto_method(n: int, d: int) -> str:
    """The search ``knn_search(method="auto")`` runs for ``n`` points in ``d`` dimensions.

    ``"kdtree"`` for d <= 8, and for n <= 1500 points in d <= 32; exact search up to
    n = 200,000: ``"brute"`` up to n = 3000,
    ``"blocked"`` below n = 5000, and on a CPU up to n = 30,000, else ``"gemm"``; above 200,000,
    ``"faiss"`` (HNSW, exact re-rank) when faiss is installed (``"faiss_ivf"`` on the GPU when faiss
    is a GPU build that sees one), else ``"nndescent"`` when pynndescent is, else the exact search
    with a warning that names the ``scale`` extra. Measured on 2 CPU cores (d = 32, CPU
    seconds, which the shared machine's load inflates least): ``"blocked"`` compiles
    nothing, ``"gemm"`` compiles once per shape (or reads the persistent cache,
    :mod:`graphssl.config`), then does the products and top-k in XLA at less cost per pair.
    Up to n = 3000 scikit-learn's brute force costs less than ``"blocked"`` at every d
    (10 Gaussian clusters, CPU ms, best of 3: n = 1000, d = 16 / 64 / 256 / 2000: 9.7 / 11.1 /
    18.5 / 147 against 18.9 / 22.1 / 39.6 / 285; n = 3000: 47 / 59 / 159 / 892 against 70 /
    77 / 161 / 1228), above it the tree's pruning wins (d = 32, n = 4000: 55 against 62 ms).
    A fresh process per search, 10 Gaussian clusters: n = 10^4, ``"blocked"`` 0.18-0.23 s
    (without its tree 0.31 s) against 0.61 s for ``"gemm"`` compiling and 0.40 s cached;
    n = 10^5, 7.5 s against ~10 s. Uniform points (nothing to prune): n = 10^4, 0.34-0.41 s;
    the search without the tree costs 1.13 s against 1.28 s at 2*10^4, 3.90 s against 3.45 s
    at 4*10^4 and 27.7 s against ~10 s at 10^5, hence the limit for points of unknown
    structure. At n = 10^5 the exact gemm search still costs less than faiss HNSW (d = 64
    Gaussian clusters: 12.0 s against 23.8 s, recall 0.965; SecStr, n = 83,679: 7.1 s
    against 14.6 s, recall 0.9999, benchmarks/bench_knn_scale.py), at
    n = 10^6 the exact search costs 1279 s (extrapolated from 10^4 queries).

    Small problems: the first search of a process through scikit-learn builds its
    threadpoolctl controller, which walks every shared library the process has loaded (259
    once JAX is imported: ~30-45 ms CPU, more than the search itself at n = 1000), where
    scipy's KD-tree scans nothing. Past the first call the two cost about the same up to
    n = 1500 in d <= 32 (10 Gaussian clusters, CPU ms, best of 3, one tree thread: n = 1000,
    d = 16 / 32: 6.1 / 13.0 against 8.7 / 12.4; n = 500, d = 32: 4.2 against 3.1), and the
    tree falls behind above (n = 1000, d = 64: 26 against 14; n = 2000, d = 32: 34 against
    34, d = 64: 110 against 52).
    """
    if d <= _KDTREE_MAX_DIM or (n <= _SMALL_KDTREE_MAX_N and d <= _SMALL_KDTREE_MAX_DIM):
        return "kdtree"
    if n <= _BRUTE_MAX_N:
        return "brute"
    blocked = n < _GEMM_MIN_N or (n <= _BLOCKED_MAX_N and not _on_accelerator())
    exact = "blocked" if blocked else "gemm"
    if n <= _APPROXIMATE_MIN_N:
        return exact
    if _installed("faiss"):
        return "faiss_ivf" if faiss_gpu_available() else "faiss"
    if _installed("pynndescent"):
        return "nndescent"
    warn_user(
        f"knn_search: n = {n} points and no approximate back end installed, so the search "
        "is exact, O(n^2 d) (the time grows with the square of n); pip install "
        "'graphssl[scale]' for faiss"
    )
    return exact


def _on_accelerator() -> bool:
    """Whether JAX's default device is an accelerator (GPU / TPU), where ``"gemm"`` runs."""
    import jax

    return jax.default_backend() != "cpu"


def knn_search(
    X, k: int, *, method: str = "auto", seed: int = 0, n_components: int = 64,
    n_candidates: int | None = None,
):
    """k nearest neighbours of every row of ``X`` (Euclidean), the point itself excluded.

    Args:
      X: float[n, d] features.
      k: neighbours per point, ``1 <= k < n``.
      method: ``"brute"`` (exact: scikit-learn's chunked float64 brute force; memory
        O(chunk x n), never n x n), ``"blocked"`` (exact, on the host, nothing to compile:
        leaves of 128 points from median splits, leaves that cannot hold a neighbour skipped
        by the triangle inequality, float32 products against the others, candidates
        re-ranked in float64; :mod:`graphssl.neighbors_blocked`), ``"gemm"``
        (exact: float32 matrix products + top-k in JAX on the default device, candidates
        re-ranked in float64; usps_full on 2 CPU cores: 0.28 s against 0.44 s for ``"brute"``,
        Digit1 (n = 1500): 0.040 s against 0.017 s; the first call of a shape also compiles,
        ~0.2 s), ``"kdtree"`` (exact, scipy cKDTree; fast for d <= 8), ``"faiss"``
        (approximate: a faiss HNSW graph, M = 32, efSearch = max(64, n_candidates); the
        ``n_candidates`` (default k + 8) it returns are re-ranked by exact float64 distances;
        above 20,000 points multi-threaded insertion makes the graph, hence rare
        neighbours, vary from run to run), ``"faiss_ivf"`` (approximate: faiss IVF-Flat,
        4 sqrt(n) k-means cells, 64 searched per query, on the GPU when faiss is a GPU build
        and sees one; same re-ranking), ``"nndescent"``
        (approximate, pynndescent), ``"pca"`` (approximate: the ``n_candidates``
        (default 3k) nearest points on the ``n_components`` leading principal components,
        re-ranked by exact distances; for large d, where the d-dimensional products dominate
        the exact search; brute when d <= n_components) or ``"auto"`` (see
        :func:`auto_method`). faiss and pynndescent come with the ``scale`` extra
        (``pip install 'graphssl[scale]'``). Measured (benchmarks/bench_graph.py): the
        KD-tree degrades to O(n^2.4) on 15-dimensional integer-coded SecStr, hence d <= 8.
      seed: seed of the approximate methods.
      n_components, n_candidates: settings of ``"pca"`` (and ``n_candidates`` of the faiss
        methods); ignored by the other methods.

    Returns:
      ``(indices int64[n, k], distances float64[n, k])``, each row sorted by distance.
    """
    X = check_features(X)
    n, d = X.shape
    k = check_k(k, n)
    if method == "auto":
        method = auto_method(n, d)
    X64 = np.asarray(X, dtype=np.float64)
    if method == "brute":
        return _brute_force_knn(X64, k)
    if method == "blocked":
        return blocked_knn(X64, k)
    if method == "gemm":
        return _gemm_knn(X64, k)
    if method == "kdtree":
        return _kdtree_knn(X64, k)
    if method == "nndescent":
        return _nndescent_knn(np.asarray(X, dtype=np.float32), k, seed)
    if method in ("faiss", "faiss_ivf"):
        m = k + 8 if n_candidates is None else n_candidates
        if not (isinstance(m, int | np.integer) and m >= k):
            raise ValueError(f"n_candidates: an int >= k = {k}, got {n_candidates!r}")
        kind = "hnsw" if method == "faiss" else "ivf"
        return _faiss_knn(X64, k, int(min(m + 1, n)), kind, seed)
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
        f"method: unknown kNN method {method!r}; use 'auto', 'brute', 'blocked', 'gemm', "
        "'kdtree', 'faiss', 'faiss_ivf', 'nndescent' or 'pca'"
    )
