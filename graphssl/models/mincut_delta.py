"""Choosing the radius delta of Mincut-delta (Blum & Chawla 2001, Sec. 5.1).

The graph ``w(x, y) = 1 if d(x, y) < delta`` grows with delta; its connected components
change only at the edge lengths of the minimum spanning tree of the distances (Kruskal), so
the rules below scan the MST edges in increasing length with a union-find:

* delta_0: the largest delta whose graph has a cut of value 0 (:func:`delta_zero`);
* delta_1/2: the delta at which the largest component holds half of the points
  (:func:`delta_half`);
* delta_opt: the best delta in hindsight, searched on :func:`delta_grid`.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from graphssl.models.mincut_weights import _check_distances, _check_observed
from graphssl.validation import check_same_length

__all__ = ["delta_zero", "delta_half", "delta_grid"]


def _kruskal(D):
    """MST edges of the complete graph on distances D, in increasing length."""
    mst = csgraph.minimum_spanning_tree(sp.csr_matrix(np.where(D > 0, D, 0.0))).tocoo()
    # zero distances (duplicates) are absent from the sparse input: join them first
    zi, zj = np.nonzero(np.triu(D == 0, k=1))
    rows = np.concatenate([zi, mst.row])
    cols = np.concatenate([zj, mst.col])
    lengths = np.concatenate([np.zeros(zi.size), mst.data])
    order = np.argsort(lengths, kind="stable")
    return rows[order], cols[order], lengths[order]


def _union_find_scan(D, stop):
    """Add MST edges in increasing length; return the first length where ``stop`` holds."""
    n = D.shape[0]
    parent = np.arange(n)

    def root(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    members = {i: {i} for i in range(n)}
    for a, b, length in zip(*_kruskal(D), strict=True):
        ra, rb = root(a), root(b)
        if ra == rb:
            continue
        if len(members[ra]) < len(members[rb]):
            ra, rb = rb, ra
        parent[rb] = ra
        members[ra] |= members.pop(rb)
        if stop(members[ra]):
            return float(length)
    return float("inf")


def delta_zero(distances, labels, observed) -> float:
    """delta_0 (Sec. 5.1): the largest delta whose graph ``d < delta`` has a cut of value 0,
    i.e. the bottleneck (minimax) path length between labelled examples of different
    classes: the MST edge that first joins two of them (L+ and L- when binary).
    """
    D = _check_distances(distances)
    labels = np.asarray(labels)
    check_same_length(D.shape[0], np.atleast_1d(labels), "labels",
                      against="distances has {n} rows")
    observed = _check_observed(observed, D.shape[0])
    label_of = {int(i): int(labels[i]) for i in np.flatnonzero(observed)}

    def mixed(comp):
        return len({label_of[i] for i in comp if i in label_of}) > 1

    return _union_find_scan(D, mixed)


def delta_half(distances, rule: str = "at_least") -> float:
    """delta_1/2 (Sec. 5.1): the delta at which the largest connected component of the graph
    ``d < delta`` holds half of the points.

    Components grow in jumps (at the MST edge that merges two of them), so "half" is met
    exactly only by chance; ``rule="at_least"`` (default) takes the smallest delta whose
    largest component holds at least half (the next float above the merging MST edge),
    ``rule="at_most"`` the largest delta whose largest component holds less than half (the
    merging edge itself, excluded by the strict ``<``). Needs at least 3 points (``ValueError``
    otherwise: with 2, one point is already half).
    """
    if rule not in ("at_least", "at_most"):
        raise ValueError(f"rule: use 'at_least' or 'at_most', got {rule!r}")
    D = _check_distances(distances)
    if D.shape[0] < 3:
        raise ValueError(f"distances: delta_1/2 needs at least 3 points, got {D.shape[0]}: "
                         "with 2 or fewer a single point already makes half, before any "
                         "edge, so no radius is defined; choose delta directly "
                         "(delta_weights(distances, delta))")
    half = (D.shape[0] + 1) // 2
    length = _union_find_scan(D, lambda comp: len(comp) >= half)
    return float(np.nextafter(length, np.inf)) if rule == "at_least" else float(length)


def delta_grid(distances, n: int = 40, *, top: float = 0.6) -> np.ndarray:
    """Candidate deltas for delta_opt: ``n`` quantiles (``top / n`` .. ``top``) of the
    pairwise distances, plus every distinct distance up to that quantile when there are at
    most 256 of them (Hamming-like metrics), each moved to the next float so that
    ``d < delta`` includes the value itself."""
    D = np.asarray(distances)
    upper = D[np.triu_indices(D.shape[0], k=1)]
    qs = np.quantile(upper, np.linspace(0.0, top, n + 1)[1:])
    distinct = np.unique(upper)
    if distinct.size <= 256:
        qs = np.concatenate([qs, distinct[distinct <= qs[-1]]])
    return np.nextafter(np.unique(qs), np.inf)
