"""Host-side utilities: graphssl's own against the library call that does the same thing.

Each pair is checked to give the same result, then timed (best of ``--repeats`` interleaved
calls, default 3) on the same input:

* Laplacians of a kNN graph (n = 20,000, k = 10, max-symmetrised Gaussian weights):
  ``graphssl.graph.laplacian(kind)`` against ``scipy.sparse.csgraph.laplacian`` (``normed``
  for the symmetric one; the random-walk one as ``D^-1`` times scipy's ``D - W``);
* metrics on n = 10^5 labels, 10 classes, 10 % of the predictions -1: ``accuracy``,
  ``confusion_matrix`` (and ``normalize="true"``), ``per_class_accuracy`` against
  ``sklearn.metrics.accuracy_score``, ``confusion_matrix(labels=range(C))``,
  ``recall_score(average=None, zero_division=nan)``;
* the float64 re-ranking distances of 20,000 x 17 (point, candidate) pairs in d = 64
  (``graphssl._distances._exact_distances``) against
  ``sklearn.metrics.pairwise.paired_euclidean_distances`` on the gathered rows.

Usage: ``python benchmarks/bench_host_utilities.py [--repeats 3]``; prints the table and
writes ``benchmarks/results/bench_host_utilities.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import time

import numpy as np

RESULTS = pathlib.Path(__file__).resolve().parent / "results"


def best_of(functions: dict, repeats: int) -> dict:
    best = {name: float("inf") for name in functions}
    for _ in range(repeats):
        for name, function in functions.items():
            start = time.perf_counter()
            function()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def laplacians(repeats):
    import scipy.sparse as sp
    from scipy.sparse import csgraph

    from graphssl.graph import knn_graph, laplacian

    X = np.random.default_rng(0).normal(size=(20_000, 10))
    graph = knn_graph(X, 10)
    W = graph.to_scipy()
    degrees = np.asarray(W.sum(axis=1)).ravel()

    def scipy_random_walk():
        return (sp.diags(1.0 / degrees) @ csgraph.laplacian(W)).tocsr()

    pairs = {
        "combinatorial": (lambda: laplacian(graph, "combinatorial"),
                          lambda: csgraph.laplacian(W).tocsr()),
        "symmetric": (lambda: laplacian(graph, "symmetric"),
                      lambda: csgraph.laplacian(W, normed=True).tocsr()),
        "random_walk": (lambda: laplacian(graph, "random_walk"), scipy_random_walk),
    }
    return compare("laplacian", pairs, repeats, "scipy.sparse.csgraph.laplacian")


def metrics(repeats):
    from sklearn import metrics as sk

    from graphssl import metrics as ours

    rng = np.random.default_rng(0)
    n, C = 100_000, 10
    truth = rng.integers(0, C, n)
    pred = np.where(rng.random(n) < 0.1, -1, rng.integers(0, C, n))
    labels = np.arange(C)
    pairs = {
        "accuracy": (lambda: ours.accuracy(truth, pred),
                     lambda: sk.accuracy_score(truth, pred)),
        "confusion_matrix": (lambda: ours.confusion_matrix(truth, pred, C),
                             lambda: sk.confusion_matrix(truth, pred, labels=labels)),
        "confusion_matrix_true": (
            lambda: ours.confusion_matrix(truth, pred, C, normalize="true"),
            lambda: sk.confusion_matrix(truth, pred, labels=labels, normalize="true")),
        "per_class_accuracy": (
            lambda: ours.per_class_accuracy(truth, pred, C),
            lambda: sk.recall_score(truth, pred, labels=labels, average=None,
                                    zero_division=np.nan)),
    }
    return compare("metrics", pairs, repeats, "sklearn.metrics")


def distances(repeats):
    from sklearn.metrics.pairwise import paired_euclidean_distances

    from graphssl._distances import _exact_distances

    rng = np.random.default_rng(0)
    X = rng.normal(size=(20_000, 64))
    candidates = rng.integers(0, 20_000, size=(20_000, 17))
    rows = np.repeat(np.arange(20_000), 17)

    def library():
        return paired_euclidean_distances(X[rows], X[candidates.ravel()]).reshape(-1, 17)

    pairs = {"paired_distances": (lambda: _exact_distances(X, candidates), library)}
    return compare("distances", pairs, repeats, "sklearn paired_euclidean_distances")


def compare(group, pairs, repeats, library_name):
    rows = []
    for name, (ours, library) in pairs.items():
        a, b = ours(), library()
        a = a.toarray() if hasattr(a, "toarray") else np.asarray(a, dtype=np.float64)
        b = b.toarray() if hasattr(b, "toarray") else np.asarray(b, dtype=np.float64)
        same = bool(np.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True))
        times = best_of({"ours": ours, "library": library}, repeats)
        rows.append({"group": group, "what": name, "library": library_name, "same": same,
                     "ours_s": times["ours"], "library_s": times["library"]})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows = laplacians(args.repeats) + metrics(args.repeats) + distances(args.repeats)
    print(f"{'what':24s} {'library':36s} {'same':>5s} {'ours ms':>9s} {'library ms':>11s} "
          f"{'ratio':>7s}")
    for row in rows:
        print(f"{row['what']:24s} {row['library']:36s} {str(row['same']):>5s} "
              f"{1e3 * row['ours_s']:9.2f} {1e3 * row['library_s']:11.2f} "
              f"{row['library_s'] / row['ours_s']:7.1f}")
    meta = {"device": f"{platform.machine()}, {os.cpu_count()} cores",
            "load_avg_1min": os.getloadavg()[0], "python": platform.python_version()}
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "bench_host_utilities.json"
    path.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    print(f"wrote benchmarks/results/{path.name}")


if __name__ == "__main__":
    main()
