"""Approximate neighbours at scale: recall@k and time of faiss (HNSW / IVF-Flat, exact
re-rank), pynndescent and exact search, at n = 10^5 and 10^6 (and any other n).

Data: ``synthetic`` = 10 Gaussian clusters in d = 64 (centres N(0, 9 I), unit isotropic
noise: no low-dimensional structure, the hard case for every approximate index), generated
from a seed; ``secstr`` (83,679 x 15) read from ``--data-dir`` / ``GRAPHSSL_DATA``.

For each data set and method, in a fresh subprocess (its imports, JIT and thread pools are
its own): wall time and CPU time (user + system of the process: the machine is shared, and
CPU time is the part other processes' load does not inflate) of ``knn_search(X, k,
method=...)`` on all n points; then recall@k on a sample of ``--queries`` points (default
10^4) against exact search: the share of returned neighbours no farther (float64 distance,
recomputed here from the indices) than the exact k-th neighbour (ties make indices
ambiguous). The exact answer for the sample comes from a blocked float64 GEMM in the driver
process (``--truth gemm``: from graphssl's exact ``gemm`` search of the sample, float32
candidates re-ranked in float64 — twice as fast; it scores recall 1.0 against the float64
answer at n = 10^5 on both sets). ``gemm (extrapolated)``: graphssl's exact ``gemm``
search run for the sampled queries only (compiled beforehand), its time scaled by
n / queries: the cost of a full exact search where that is not run (above
``--full-exact-max``, default 10^5); pynndescent runs up to ``--nndescent-max`` (10^5).
Peak memory is the child's ``VmHWM``.

``--accuracy``: GRF (harmonic function, k = 10, max-symmetrised, sigma = mean 10th-neighbour
distance / 3) accuracy on the unlabelled points of SecStr (split labeled_1000 #0) and usps_full
(2 % labels per class, graphssl.data.random_splits seed 0) with the exact graph and with the
faiss graph.

Usage: ``python benchmarks/bench_knn_scale.py [--n 100000 1000000] [--sets synthetic secstr]
[--methods faiss faiss_ivf nndescent gemm] [--accuracy] [--tag TAG]``; prints the table and
writes ``benchmarks/results/bench_knn_scale[_TAG].json``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
RESULTS = HERE / "results"


def synthetic(n: int, d: int = 64, clusters: int = 10, seed: int = 0) -> np.ndarray:
    """``float32[n, d]``: 10 Gaussian clusters, centres N(0, 9 I), unit isotropic noise."""
    rng = np.random.default_rng(seed)
    centres = 3.0 * rng.normal(size=(clusters, d))
    X = rng.normal(size=(n, d)).astype(np.float32)
    X += centres[rng.integers(0, clusters, n)].astype(np.float32)
    return X


def load(name: str, n: int, d: int, data_dir) -> np.ndarray:
    if name == "synthetic":
        return synthetic(n, d)
    from graphssl.data import load_dataset

    return np.asarray(load_dataset(name, data_dir).X, dtype=np.float32)


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_mb() -> float:
    """This process's peak resident memory (``VmHWM``: unlike ``ru_maxrss`` it is not
    inherited from the parent across fork + exec)."""
    try:
        with open("/proc/self/status") as fh:
            line = next(line for line in fh if line.startswith("VmHWM:"))
        return int(line.split()[1]) / 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _gemm_queries(X, queries, k):
    """graphssl's exact ``gemm`` search (float32 JAX GEMM + exact grouped top-k) for the
    sampled query rows only: the time of a full search is this times n / len(queries)."""
    from graphssl import neighbors

    X32 = np.ascontiguousarray(X, dtype=np.float32)
    n = X32.shape[0]
    block = max(1, min(neighbors._GEMM_BLOCK, 2**27 // n))
    Q = X32[queries]
    Q = np.concatenate([Q, np.zeros(((-len(Q)) % block, Q.shape[1]), np.float32)])
    m = k + 1 + neighbors._GEMM_SLACK
    candidates = np.asarray(neighbors._gemm_candidates(X32, Q, m, block, neighbors._GEMM_GROUP))
    candidates = candidates[: len(queries)].astype(np.int64)
    X64 = X.astype(np.float64)
    diff = X64[candidates] - X64[queries][:, None]
    sq = np.einsum("qmd,qmd->qm", diff, diff)
    sq[candidates == queries[:, None]] = np.inf
    order = np.argsort(sq, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(candidates, order, axis=1)


def worker(spec: dict) -> dict:
    """Child process: search all points, save the sampled rows' neighbour indices."""
    from graphssl.neighbors import knn_search

    X = load(spec["set"], spec["n"], spec["d"], spec["data_dir"])
    queries = np.load(spec["queries"])
    if spec["method"] == "gemm_queries":  # compile first: the scaled time is search only
        _gemm_queries(X, queries, spec["k"])
    wall, cpu = time.perf_counter(), _cpu_seconds()
    if spec["method"] == "gemm_queries":
        found = _gemm_queries(X, queries, spec["k"])
    else:
        found = knn_search(X, spec["k"], method=spec["method"], seed=0)[0][queries]
    wall, cpu = time.perf_counter() - wall, _cpu_seconds() - cpu
    np.save(spec["out"], found)
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mb": peak_rss_mb()}


def exact_sample(X: np.ndarray, queries: np.ndarray, k: int, block: int = 20_000):
    """Exact float64 squared distances to the k nearest other points of ``X[queries]``
    (blocked GEMM over columns, running top-k; memory ``len(queries) x block``)."""
    Q = X[queries].astype(np.float64)
    q_norms = np.einsum("ij,ij->i", Q, Q)
    best = np.full((len(queries), k), np.inf)
    for start in range(0, X.shape[0], block):
        C = X[start:start + block].astype(np.float64)
        sq = q_norms[:, None] + np.einsum("ij,ij->i", C, C)[None] - 2.0 * Q @ C.T
        own = (queries[:, None] == np.arange(start, start + C.shape[0])[None])
        sq[own] = np.inf
        merged = np.concatenate([best, np.maximum(sq, 0.0)], axis=1)
        best = np.partition(merged, k - 1, axis=1)[:, :k]
    return np.sort(best, axis=1)


def recall(X, queries, indices, exact_sq) -> float:
    diff = X[indices].astype(np.float64) - X[queries][:, None].astype(np.float64)
    sq = np.einsum("qkd,qkd->qk", diff, diff)
    return float(np.mean(sq <= exact_sq[:, -1:] * (1 + 1e-9) + 1e-12))


def run_one(spec: dict, timeout: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        np.save(os.path.join(tmp, "queries.npy"), spec["queries"])
        spec = dict(spec, out=os.path.join(tmp, "indices.npy"),
                    queries=os.path.join(tmp, "queries.npy"))
        cmd = [sys.executable, __file__, "--worker", json.dumps(spec)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout:.0f} s"}
        if proc.returncode != 0:
            return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1][:300]}
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        out["indices"] = np.load(spec["out"])
        return out


def grf_accuracy(name: str, data_dir, methods) -> dict:
    """GRF accuracy on the unlabelled points with the graph of each search method."""
    from graphssl.data import load_dataset, random_splits
    from graphssl.graph import knn_graph
    from graphssl.inference.optimize.baselines import harmonic_function
    from graphssl.metrics import accuracy

    data = load_dataset(name, data_dir)
    if name == "secstr":
        labelled = data.splits["labeled_1000"][0]
    else:
        labelled = random_splits(data.y, 0.02, n_splits=1, seed=0)[0]
    labels = np.full(data.y.shape, -1)
    labels[labelled] = data.y[labelled]
    out = {}
    for method in methods:
        start = time.perf_counter()
        graph = knn_graph(data.X, 10, sigma="kth_over_3", method=method, on_duplicates="ignore")
        scores = harmonic_function(graph, labels)
        out[method] = {
            "accuracy": accuracy(data.y, np.argmax(scores, axis=1), labelled),
            "seconds": time.perf_counter() - start,
        }
    return out


def _machine() -> str:
    cpu = platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if "model name" in line)
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} cores"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--sets", nargs="+", default=["synthetic", "secstr"])
    parser.add_argument("--methods", nargs="+",
                        default=["faiss", "faiss_ivf", "nndescent", "gemm"])
    parser.add_argument("--full-exact-max", type=int, default=100_000)
    parser.add_argument("--nndescent-max", type=int, default=100_000)
    parser.add_argument("--truth", choices=["float64", "gemm"], default="float64",
                        help="exact answer of the sample: blocked float64 GEMM (default) or "
                        "graphssl's exact gemm search (float32 candidates, float64 re-rank)")
    parser.add_argument("--data-dir", default=None, help="folder of secstr.npz (GRAPHSSL_DATA)")
    parser.add_argument("--timeout", type=float, default=3000.0)
    parser.add_argument("--accuracy", action="store_true", help="GRF accuracy exact vs faiss")
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    rows, accuracy_rows = [], {}
    for name in args.sets:
        for n in (args.n if name == "synthetic" else [None]):
            try:
                X = load(name, n or 0, args.d, args.data_dir)
            except (FileNotFoundError, ValueError) as error:
                print(f"{name}: skipped ({error})")
                break
            n_rows = X.shape[0]
            queries = np.sort(np.random.default_rng(1).choice(
                n_rows, min(args.queries, n_rows), replace=False))
            start = time.perf_counter()
            if args.truth == "float64":
                exact_sq = exact_sample(X, queries, args.k)
            else:  # graphssl's exact gemm search of the sample, distances in float64
                truth_run = run_one({"set": name, "n": n_rows, "d": args.d, "k": args.k,
                                     "method": "gemm_queries", "data_dir": args.data_dir,
                                     "queries": queries}, args.timeout)
                found = truth_run["indices"]
                diff = X[found].astype(np.float64) - X[queries][:, None].astype(np.float64)
                exact_sq = np.sort(np.einsum("qkd,qkd->qk", diff, diff), axis=1)
            exact_s = time.perf_counter() - start
            base = {"set": name, "n": n_rows, "d": X.shape[1], "k": args.k,
                    "queries": len(queries)}
            print(f"{name} n={n_rows}: exact answer of the sample {exact_s:.1f} s", flush=True)
            for method in ["gemm_queries", *args.methods]:
                if method == "gemm" and n_rows > args.full_exact_max or (
                        method == "nndescent" and n_rows > args.nndescent_max):
                    continue
                spec = {"set": name, "n": n_rows, "d": args.d, "k": args.k, "method": method,
                        "data_dir": args.data_dir, "queries": queries}
                if method == "gemm_queries" and args.truth == "gemm":
                    result = dict(truth_run)
                else:
                    result = run_one(spec, args.timeout)
                if "indices" in result:
                    result["recall"] = recall(X, queries, result.pop("indices"), exact_sq)
                if method == "gemm_queries" and "wall_s" in result:
                    scale = n_rows / len(queries)
                    method = "gemm (extrapolated)"
                    result["note"] = (f"exact gemm search of the {len(queries)} sampled "
                                      f"queries ({result['wall_s']:.1f} s) x n / queries")
                    result["wall_s"] *= scale
                    result["cpu_s"] *= scale
                rows.append({**base, "method": method, **result})
                print(f"  {method:10s} " + json.dumps(rows[-1] | {"set": None}), flush=True)
            del X
    if args.accuracy:
        for name in ("secstr", "usps_full"):
            try:
                accuracy_rows[name] = grf_accuracy(name, args.data_dir, ["gemm", "faiss"])
            except (FileNotFoundError, ValueError) as error:
                accuracy_rows[name] = {"error": str(error)[:200]}
    print(f"\n{'set':10s} {'n':>8s} {'method':22s} {'recall':>7s} {'wall s':>8s} "
          f"{'cpu s':>8s} {'peak MB':>8s}")
    for row in rows:
        if "error" in row:
            print(f"{row['set']:10s} {row['n']:8d} {row['method']:22s} {row['error']}")
            continue
        cpu = f"{row['cpu_s']:8.1f}" if row.get("cpu_s") is not None else f"{'':8s}"
        peak = f"{row['peak_rss_mb']:8.0f}" if "peak_rss_mb" in row else ""
        print(f"{row['set']:10s} {row['n']:8d} {row['method']:22s} {row['recall']:7.4f} "
              f"{row['wall_s']:8.1f} {cpu} {peak}")
    for name, result in accuracy_rows.items():
        print(f"GRF accuracy on {name}: {json.dumps(result)}")
    meta = {"device": _machine(), "load_avg_1min_end": os.getloadavg()[0],
            "python": platform.python_version()}
    for module in ("faiss", "pynndescent", "jax", "numpy"):
        try:
            meta[module] = __import__(module).__version__
        except ImportError:
            meta[module] = None
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"bench_knn_scale{'_' + args.tag if args.tag else ''}.json"
    path.write_text(json.dumps({"meta": meta, "rows": rows, "grf_accuracy": accuracy_rows},
                               indent=2))
    print(f"wrote {path.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
