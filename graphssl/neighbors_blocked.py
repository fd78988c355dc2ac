"""Exact kNN on the host without compilation: ``knn_search(method="blocked")``.

The points are put in leaves of at most 128 by recursive median splits along their principal
axis (a ball tree's leaves, built in NumPy). For each leaf of queries, the leaves that can
hold a neighbour are found by the triangle inequality: a point of leaf J (centre c_J,
radius r_J) is at least ``|x - c_J| - r_J`` from the query x, so leaf J is skipped when that
bound exceeds, for every query x of the leaf, the distance from x to its ``m``-th nearest
point among the leaves nearest to the query leaf (an upper bound on x's ``m``-th neighbour
distance). The
scores ``2 x.y - |y|^2`` against the kept leaves come from one float32 product (the norms
folded in as an extra column, ``[x, 1] . [2y, -|y|^2]``), the ``m = k + 1 + 6`` best columns
of each row from :func:`grouped_top` (exact), and their float64 distances
(:func:`graphssl._distances.certified_neighbors`) are sorted, ties by index, as
``method="gemm"`` does. A row whose float32 scores could have moved a true neighbour out
of its candidates (the rounding bound exceeds the candidates' spread: far-apart groups,
such as a 0 / 1e4-coded column, where 3999 of 4000 rows had a wrong neighbour) is searched
again in float64, so the result is exact. The pruning bound is widened by 1e-4 of the
squared norms, far above float32 rounding of the scores, so the pruning loses nothing.

Points with structure (clusters, manifolds) skip most leaves; points without it (uniform
noise in many dimensions) skip few, and then the work is the full product plus the tree.
Leaves are processed by up to 8 threads, with single-threaded BLAS throughout (a [128, 33]
product is too small for BLAS's own threads, which then mostly wait: 0.93 against 0.31 CPU s
at n = 10^4 on the loaded 2-core machine). The points are centred first: float32 scores of
points far from the origin (1000 + 0.01 U(0, 1) in 20 dimensions) otherwise lost the order
of the neighbours (distance errors of 0.25 against spacings of 0.06), and scaled by a power
of two to a largest entry near 1 (features of 1e100 are valid float64 but overflow float32).

Measured (d = 32, 2 cores, CPU seconds, k = 10; 10 Gaussian clusters as in
benchmarks/bench_cost.py): n = 10^3 0.03 s, 10^4 0.18-0.23 s (20 % of the pairs scored;
without the tree 0.32-0.35 s), 10^5 7.5 s (without the tree 27.7 s); uniform points at
n = 10^4: 0.34-0.41 s (without the tree 0.30-0.32 s). scikit-learn's brute force at
n = 10^4: ~0.4 s.
"""

from __future__ import annotations

import numpy as np

from graphssl._blas import limited_threads
from graphssl._distances import (
    _FLOAT32_EPS,
    SLACK,
    _squared_norms,
    _threads,
    certified_neighbors,
)

__all__ = ["blocked_knn", "grouped_top", "leaf_order"]

LEAF = 128  # points per leaf (and query rows per product)
GROUP = 16
_MARGIN = 1e-4  # relative widening of the pruning bound (float32 scores)
_PAD_SCORE = np.float32(-np.finfo(np.float32).max)


def grouped_top(scores: np.ndarray, m: int, group: int = GROUP) -> np.ndarray:
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
    columns = (best[:, None, :] + (np.arange(group) * n_groups)[:, None]).reshape(rows, -1)
    width = columns.shape[1]
    if m >= width:
        return columns
    offsets = (np.arange(rows) * n)[:, None]
    kept = np.take(scores, columns + offsets)  # flat gathers: cheaper than along-axis ones
    chosen = np.argpartition(kept, width - m, axis=1)[:, width - m:]
    return np.take(columns, chosen + (np.arange(rows) * width)[:, None])


def leaf_order(X: np.ndarray, leaf: int = LEAF) -> tuple[np.ndarray, np.ndarray]:
    """``(order, bounds)``: a permutation of the rows of ``X`` and leaf boundaries
    (``order[bounds[i]:bounds[i + 1]]`` is leaf i, at most ``leaf`` points), from recursive
    median splits along each segment's principal axis (three power iterations from a fixed
    start: deterministic)."""
    n = X.shape[0]
    order = np.arange(n)
    done, todo = [], [(0, n)]
    while todo:
        start, stop = todo.pop()
        if stop - start <= leaf:
            done.append(start)
            continue
        points = X[order[start:stop]]
        centred = points - points.mean(axis=0)
        axis = np.ones(X.shape[1]) / np.sqrt(X.shape[1])
        for _ in range(3):
            axis = centred.T @ (centred @ axis)
            norm = np.linalg.norm(axis)
            if norm == 0:  # all points equal: any split will do
                axis = np.ones(X.shape[1])
                break
            axis /= norm
        half = (stop - start) // 2
        split = np.argpartition(centred @ axis, half)
        order[start:stop] = order[start:stop][split]
        todo += [(start, start + half), (start + half, stop)]
    return order, np.array(sorted(done) + [n])


def _leaf_columns(X32, order, bounds):
    """``[2y, -|y|^2]^T`` in leaf order (float32, ``[d + 1, n + pad]``: at least one padding
    column, up to a whole number of groups, scoring the lowest float32 against any query),
    leaf centres (float64), radii, and squared norms in leaf order."""
    ordered = X32[order]
    norms = _squared_norms(ordered)
    n = order.size
    columns = np.zeros((X32.shape[1] + 1, -(-(n + 1) // GROUP) * GROUP), dtype=np.float32)
    columns[:-1, :n] = 2.0 * ordered.T
    columns[-1, :n] = -norms
    # padding columns (n and after) score the lowest float32 against any query (not -inf:
    # BLAS multiplies its own zero padding by it, and -inf * 0 is NaN)
    columns[-1, n:] = _PAD_SCORE
    X64 = ordered.astype(np.float64)
    centres = np.add.reduceat(X64, bounds[:-1], axis=0) / np.diff(bounds)[:, None]
    leaf_of = np.repeat(np.arange(bounds.size - 1), np.diff(bounds))
    radii = np.sqrt(np.maximum.reduceat(
        np.sum((X64 - centres[leaf_of]) ** 2, axis=1), bounds[:-1]))
    return columns, centres, radii, norms


def blocked_knn(X: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact ``(indices int64[n, k], distances float64[n, k])`` of each point's k nearest
    other points, nearest first, ties by index (see the module docstring)."""
    with limited_threads(1):  # small products: BLAS threads only wait
        candidates = _candidates(X, min(X.shape[0], k + 1 + SLACK))
    return certified_neighbors(X, candidates, k, _FLOAT32_EPS)


def _candidates(X: np.ndarray, m: int) -> np.ndarray:
    """``int64[n, m]``: each point's m nearest points (itself included) by float32 scores."""
    n, d = X.shape
    centred = X - X.mean(axis=0)  # centred: smaller float32 error
    largest = float(np.max(np.abs(centred), initial=0.0))
    if largest > 0.0:  # a power-of-two scale to ~1: float32 neither overflows nor underflows
        centred = np.ldexp(centred, -int(np.frexp(largest)[1]))
    X32 = np.asarray(centred, dtype=np.float32)
    order, bounds = leaf_order(X32)
    columns, centres, radii, norms = _leaf_columns(X32, order, bounds)
    queries = np.ones((n, d + 1), dtype=np.float32)
    queries[:, :d] = X32[order]
    centre_sq = _squared_norms(centres)
    sizes = np.diff(bounds)
    margin = _MARGIN * 2.0 * float(norms.max(initial=0.0))
    candidates = np.empty((n, m), dtype=np.int64)

    def one_leaf(i: int) -> None:
        rows = slice(bounds[i], bounds[i + 1])
        centre_distance = np.sqrt(np.maximum(
            centre_sq[i] + centre_sq - 2.0 * centres @ centres[i], 0.0))
        nearest = np.argsort(centre_distance, kind="stable")
        enough = np.searchsorted(np.cumsum(sizes[nearest]), m) + 1
        seed = np.zeros(sizes.size, dtype=bool)
        seed[nearest[:max(2, enough)]] = True  # the nearest leaves holding m points
        seed_columns = np.flatnonzero(np.repeat(seed, sizes))
        seed_sq = norms[rows, None] - queries[rows] @ columns[:, seed_columns]
        reach = np.partition(seed_sq, m - 1, axis=1)[:, m - 1] + margin  # per query
        # a point of leaf J is at least |x - c_J| - r_J from the query x
        points = queries[rows, :d].astype(np.float64)
        to_centres = np.sqrt(np.maximum(
            _squared_norms(points)[:, None] + centre_sq - 2.0 * points @ centres.T, 0.0))
        gap = np.maximum(to_centres - radii, 0.0)
        keep = np.any(gap * gap <= reach[:, None], axis=0) | seed
        if keep.all():  # the whole table, padded to whole groups
            kept, scores = None, queries[rows] @ columns
        else:  # the kept columns, padded to whole groups by the padding column n
            kept = np.flatnonzero(np.repeat(keep, sizes))
            kept = np.concatenate([kept, np.full((-kept.size) % GROUP, n)])
            scores = queries[rows] @ columns[:, kept]
        top = grouped_top(scores, m, GROUP)  # at least m finite columns: never a padding
        candidates[order[rows]] = order[top if kept is None else kept[top]]

    n_leaves = bounds.size - 1
    workers = min(_threads(), n_leaves)
    if workers > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(one_leaf, range(n_leaves)))
    else:
        for i in range(n_leaves):
            one_leaf(i)
    return candidates
