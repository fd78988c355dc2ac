"""Approximate kNN back ends of :func:`graphssl.neighbors.knn_search`: faiss (HNSW, IVF-Flat;
GPU when a GPU build sees one), pynndescent, and a PCA projection; each re-ranks its
candidates by exact float64 distances. faiss and pynndescent are the ``scale`` extra
(``pip install 'graphssl[scale]'``); they are imported only when a method needs them.
"""

from __future__ import annotations

import numpy as np

from graphssl._blas import limited_threads
from graphssl._distances import _brute_force_knn, _drop_self, _exact_distances, _squared_norms

_HNSW_M = 32
_HNSW_EF_CONSTRUCTION = 40
_HNSW_EF_SEARCH = 64
_IVF_NPROBE = 64
_FAISS_SERIAL_MAX_N = 20_000


def _nndescent_knn(X: np.ndarray, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    NNDescent = _optional("pynndescent", "NNDescent", "nndescent")
    index = NNDescent(X, n_neighbors=k + 1, random_state=seed, n_jobs=-1)
    indices, distances = index.neighbor_graph
    return _drop_self(indices, distances, k)


def _optional(module: str, attribute: str | None, method: str):
    """Import an optional back end of the ``scale`` extra, or say how to install it."""
    import importlib

    try:
        found = importlib.import_module(module)
    except ImportError as error:
        raise ImportError(
            f"method={method!r} needs the optional package {module!r}: "
            "pip install 'graphssl[scale]' (or choose method='auto', 'gemm' or 'brute')"
        ) from error
    return getattr(found, attribute) if attribute else found


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def faiss_gpu_available() -> bool:
    """True when the installed faiss is a GPU build and sees at least one GPU."""
    if not _installed("faiss"):
        return False
    import faiss

    return hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0


def _faiss_index(X32: np.ndarray, kind: str, ef_search: int, seed: int):
    """A filled faiss index over the rows of ``X32`` (``kind``: ``"hnsw"`` or ``"ivf"``).

    HNSW-Flat (Malkov & Yashunin 2018): ``M = 32`` links per node, ``efConstruction = 40``,
    ``efSearch = ef_search``. IVF-Flat: ``nlist = 4 sqrt(n)`` k-means cells trained on at
    most ``64 nlist`` sampled rows (seeded), ``nprobe = min(nlist, 64)`` cells searched per
    query (work per query ~ 16 sqrt(n) points: O(n^1.5) in all); on a GPU build with a
    visible GPU the IVF index is moved to GPU 0.
    """
    import os

    # OpenMP threads that spin while waiting: on a loaded 2-core machine HNSW on 3000 points
    # took 2.5-3.2 s with the default policy against 0.62-0.75 s with passive waiting
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    faiss = _optional("faiss", None, "faiss")
    n, d = X32.shape
    if kind == "hnsw":
        index = faiss.IndexHNSWFlat(d, _HNSW_M)
        index.hnsw.efConstruction = _HNSW_EF_CONSTRUCTION
        index.add(X32)
        index.hnsw.efSearch = int(ef_search)
        return index
    nlist = max(1, min(int(4 * np.sqrt(n)), n // 39))
    index = faiss.IndexIVFFlat(faiss.IndexFlatL2(d), d, nlist)
    index.cp.seed = int(seed)
    if faiss_gpu_available():
        index = faiss.index_cpu_to_gpu(faiss.StandardGpuResources(), 0, index)
    sample = np.random.default_rng(seed).permutation(n)[: 64 * nlist]
    index.train(np.ascontiguousarray(X32[np.sort(sample)]))
    index.add(X32)
    index.nprobe = int(min(nlist, _IVF_NPROBE))
    return index


def _faiss_knn(X: np.ndarray, k: int, m: int, kind: str, seed: int):
    """Approximate kNN by a faiss index, candidates re-ranked exactly in float64.

    The index returns each point's ``m`` (>= k + 1) nearest candidates by float32 distance;
    their distances are recomputed in float64 (:func:`_exact_distances`) and the ``k``
    nearest other points kept (ties by index). A row whose candidates hold fewer than ``k``
    other points (the index found too few) is searched exactly instead. Below n = 20,000
    faiss runs on one thread (a 300-point search on the loaded 2-core machine: 0.3-2.3 s
    wall for 0.06-0.25 s of CPU with two threads), which also makes the HNSW graph, and so
    the result, the same from run to run.
    """
    n = X.shape[0]
    X32 = np.ascontiguousarray(X, dtype=np.float32)
    faiss = _optional("faiss", None, "faiss")
    threads = faiss.omp_get_max_threads()
    if n < _FAISS_SERIAL_MAX_N:  # one thread: no waits for a busy core, a reproducible graph
        faiss.omp_set_num_threads(1)
    try:
        index = _faiss_index(X32, kind, ef_search=max(_HNSW_EF_SEARCH, m), seed=seed)
        candidates = index.search(X32, m)[1].astype(np.int64)
    finally:
        faiss.omp_set_num_threads(threads)
    invalid = (candidates < 0) | (candidates == np.arange(n)[:, None])
    candidates[invalid] = 0
    distances = _exact_distances(X, candidates)
    distances[invalid] = np.inf
    order = np.lexsort((candidates, distances), axis=1)[:, :k]
    indices = np.take_along_axis(candidates, order, axis=1)
    distances = np.take_along_axis(distances, order, axis=1)
    short = np.flatnonzero(~np.isfinite(distances[:, -1]))
    if short.size:
        indices[short], distances[short] = _exact_rows(X, short, k)
    return indices, distances


def _exact_rows(X: np.ndarray, rows: np.ndarray, k: int):
    """Exact ``(indices, distances)`` of the k nearest other points of ``X[rows]``."""
    from sklearn.neighbors import NearestNeighbors

    search = NearestNeighbors(n_neighbors=k + 1, algorithm="brute").fit(X)
    distances, indices = search.kneighbors(X[rows])
    is_self = indices == rows[:, None]
    is_self[~is_self.any(axis=1), -1] = True
    keep = ~is_self
    return indices[keep].reshape(-1, k), distances[keep].reshape(-1, k)


def _principal_projection(X: np.ndarray, r: int, seed: int) -> np.ndarray:
    """Coordinates ``float64[n, r]`` of the centred ``X`` on its ``r`` leading principal axes.

    Eigenvectors of the d x d scatter matrix for d <= 2048 (O(n d^2)), else a randomized SVD.
    BLAS runs on one thread here: on a loaded 2-core machine a threaded OpenBLAS ``eigh`` of
    a 256 x 256 matrix took 2.7-3.6 s against 0.014-0.05 s single-threaded (busy-waiting
    threads), and the scatter matrix 0.58 s against 0.04 s.
    """
    Xc = X - X.mean(axis=0)
    d = X.shape[1]
    with limited_threads(1, user_api=None):
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
    X32 = np.asarray(X - X.mean(axis=0), dtype=np.float32)  # centred: float32 keeps the spread
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
