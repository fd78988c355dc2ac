"""kNN graph construction: graphssl.graph against scikit-learn (and GraphLearning) on CPU.

Data: ``usps_full`` (9298 x 256) and ``secstr`` (83,679 x 15) from ``GRAPHSSL_DATA`` (or
``--data-dir``). For each method, in a fresh subprocess (so that peak memory is its own):

* wall time of the call alone (data already loaded, libraries imported, JAX warmed up);
* peak resident memory above the process's level before the call (``ru_maxrss`` delta);
* peak of traced allocations (``tracemalloc``, a second run: NumPy arrays are traced, so an
  n x n float32/64 array would show as >= 4 n^2 bytes; native trees in C++ are not traced),
  and again on a random n/4 subset: the growth exponent s (peak ~ n^s) is 2 for an n x n
  array and <= 1 for blocked / O(n k) methods;
* recall@k against the exact neighbour *distances* (ties make indices ambiguous: SecStr's
  features are categorical codes with many duplicate points).

Prints a table (time ratio vs scikit-learn ``kneighbors_graph`` in the same run) and writes
``benchmarks/results/bench_graph.json``. The JAX blocked top-k (``jax_blocked``) runs on any
JAX device, so the same script measures it on a GPU when one is present.

Usage: ``python benchmarks/bench_graph.py [--sets usps_full secstr] [--k 10] [--quick]``;
``--sets secstr --sweep 5000 10000 20000`` times the searches against n (growth exponents).
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
import tracemalloc

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
RESULTS = HERE / "results"
DEFAULT_DATA = HERE.parent.parent / "shared" / "datasets"

# name -> (description, exact?)
METHODS = {
    "sklearn_kneighbors_graph": ("scikit-learn kneighbors_graph(mode='distance'), n_jobs=-1", True),
    "graphssl_brute": ("graphssl knn_search(method='brute'): blocked exact", True),
    "graphssl_gemm": ("graphssl knn_search(method='gemm'): float32 GEMM + exact two-stage "
                      "top-k in JAX, float64 re-rank", True),
    "graphssl_kdtree": ("graphssl knn_search(method='kdtree'): scipy cKDTree", True),
    "graphssl_nndescent": ("graphssl knn_search(method='nndescent'): pynndescent", False),
    "graphssl_pca": ("graphssl knn_search(method='pca'): exact search of 3k candidates on 64 "
                     "principal components, exact re-ranking", False),
    "graphssl_knn_graph_pca": ("graphssl knn_graph(method='pca', gaussian kth/3, max-sym.)",
                               None),
    "graphssl_auto": ("graphssl knn_search(method='auto')", None),
    "graphssl_knn_graph": ("graphssl knn_graph(auto, gaussian kth/3, max-sym.) -> Graph", None),
    "graphlearning_knnsearch": ("GraphLearning knnsearch (annoy for d > 5)", False),
    "jax_blocked": ("JAX blocked top-k (jit, lax.top_k over query blocks)", True),
}


# ------------------------------------------------------------------------ the methods
def _sklearn(X, k):
    from sklearn.neighbors import kneighbors_graph

    A = kneighbors_graph(X, k, mode="distance", include_self=False, n_jobs=-1)
    A.sort_indices()
    # rows hold exactly k entries; order them by distance for the recall check
    dist = A.data.reshape(-1, k)
    ind = A.indices.reshape(-1, k)
    order = np.argsort(dist, axis=1, kind="stable")
    return np.take_along_axis(ind, order, 1), np.take_along_axis(dist, order, 1)


def _graphssl(method):
    def run(X, k):
        from graphssl.graph import knn_search

        return knn_search(X, k, method=method)

    return run


def _graphssl_graph(X, k):
    from graphssl.graph import knn_graph

    g = knn_graph(X, k, on_duplicates="ignore")
    g.weights.block_until_ready()
    return None, None


def _graphssl_graph_pca(X, k):
    from graphssl.graph import knn_graph

    g = knn_graph(X, k, on_duplicates="ignore", method="pca")
    g.weights.block_until_ready()
    return None, None


def _graphlearning(X, k):
    import graphlearning as gl

    ind, dist = gl.weightmatrix.knnsearch(X, k + 1)
    return ind[:, 1:], dist[:, 1:]


def _jax_blocked(X, k, block_bytes=64 * 2**20):
    import jax
    import jax.numpy as jnp

    n = X.shape[0]
    block = int(max(1, min(n, block_bytes // (4 * n))))
    n_pad = -(-n // block) * block
    Xj = jnp.asarray(X, dtype=jnp.float32)
    norms = jnp.sum(Xj * Xj, axis=1)
    Xq = jnp.pad(Xj, ((0, n_pad - n), (0, 0)))

    @jax.jit
    def one_block(start):
        q = jax.lax.dynamic_slice_in_dim(Xq, start, block)
        sq = jnp.sum(q * q, axis=1)[:, None] + norms[None, :] - 2.0 * q @ Xj.T
        rows = start + jnp.arange(block)
        sq = jnp.where(rows[:, None] == jnp.arange(n)[None, :], jnp.inf, sq)
        neg, idx = jax.lax.top_k(-sq, k)
        return idx, jnp.sqrt(jnp.maximum(-neg, 0.0))

    outs = [one_block(s) for s in range(0, n_pad, block)]
    ind = np.concatenate([np.asarray(i) for i, _ in outs])[:n]
    dist = np.concatenate([np.asarray(d) for _, d in outs])[:n]
    return ind, dist


RUNNERS = {
    "sklearn_kneighbors_graph": _sklearn,
    "graphssl_brute": _graphssl("brute"),
    "graphssl_gemm": _graphssl("gemm"),
    "graphssl_kdtree": _graphssl("kdtree"),
    "graphssl_nndescent": _graphssl("nndescent"),
    "graphssl_auto": _graphssl("auto"),
    "graphssl_knn_graph": _graphssl_graph,
    "graphssl_pca": _graphssl("pca"),
    "graphssl_knn_graph_pca": _graphssl_graph_pca,
    "graphlearning_knnsearch": _graphlearning,
    "jax_blocked": _jax_blocked,
}


# ---------------------------------------------------------------------- worker side
def _load(name, data_dir, quick, fraction=1.0):
    from graphssl.data import load_dataset

    X = np.asarray(load_dataset(name, data_dir=data_dir).X, dtype=np.float64)
    m = min(len(X), 3000) if quick else len(X)
    m = max(2 * 10 + 2, int(round(m * fraction)))
    if m < len(X):
        X = X[np.sort(np.random.default_rng(0).choice(len(X), m, replace=False))]
    return np.ascontiguousarray(X)


def _rss_now_kb() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def worker(spec: dict) -> dict:
    X = _load(spec["set"], spec["data_dir"], spec["quick"], spec.get("fraction", 1.0))
    k, method = spec["k"], spec["method"]
    run = RUNNERS[method]
    run(X[:200], k)  # warm-up: imports, numba/JAX compiles on a small problem
    if method == "jax_blocked":  # compile the full-size block shape too
        run(X[: min(len(X), 2 * k + 2)], k)
    if spec["trace"]:
        tracemalloc.start()
        run(X, k)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return {"traced_peak_bytes": int(peak), "n": int(X.shape[0])}
    base_kb = _rss_now_kb()
    times, loads = [], []
    for _ in range(spec["repeats"]):
        loads.append(os.getloadavg()[0])
        t0 = time.perf_counter()
        ind, dist = run(X, k)
        times.append(time.perf_counter() - t0)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if ind is not None:
        np.save(spec["out"], np.asarray(dist, dtype=np.float64))
    return {"seconds": min(times), "seconds_median": float(np.median(times)), "times": times,
            "loadavg_1min": loads,
            "rss_delta_bytes": max(0, (peak_kb - base_kb) * 1024),
            "n": int(X.shape[0]), "d": int(X.shape[1])}


def _spawn(spec: dict, timeout: float) -> dict:
    cmd = [sys.executable, __file__, "--worker", json.dumps(spec)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1][:200]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------- driver side
def _recall(dist, exact_dist, rtol=1e-5):
    """Share of returned neighbours no farther than the exact k-th neighbour."""
    kth = exact_dist[:, -1:]
    return float(np.mean(dist <= kth * (1 + rtol) + 1e-6))


def _versions() -> dict:
    out = {"python": platform.python_version()}
    for mod in ("numpy", "scipy", "sklearn", "pynndescent", "jax", "graphlearning"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - report what is missing, do not fail
            out[mod] = None
    return out


def _device() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if "model name" in line)
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} cores"


def run_benchmark(sets, k, methods, data_dir, quick, timeout, repeats, scaling=True):
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in sets:
            exact = None
            for method in methods:
                spec = {"set": name, "k": k, "method": method, "data_dir": str(data_dir),
                        "quick": quick, "trace": False, "repeats": repeats,
                        "out": f"{tmp}/{name}_{method}.npy"}
                res = _spawn(spec, timeout)
                if "error" not in res:
                    traced = _spawn({**spec, "trace": True}, timeout)
                    if "error" in traced:
                        traced = {"traced_error": traced["error"]}
                    res.update(traced)
                    if scaling:  # traced peak at n / 4: slope 2 = quadratic, <= 1 = linear
                        quarter = _spawn({**spec, "trace": True, "fraction": 0.25}, timeout)
                        if "traced_peak_bytes" in quarter and res.get("traced_peak_bytes"):
                            res["traced_peak_quarter_bytes"] = quarter["traced_peak_bytes"]
                            res["memory_slope"] = float(np.log(
                                res["traced_peak_bytes"] / max(quarter["traced_peak_bytes"], 1)
                            ) / np.log(res["n"] / quarter["n"]))
                    if os.path.exists(spec["out"]):
                        dist = np.load(spec["out"])
                        if method in ("graphssl_kdtree", "graphssl_brute") and exact is None:
                            exact = dist
                        res["_dist_file"] = spec["out"]
                        if exact is not None:
                            res["recall"] = _recall(dist, exact)
                rows.append({"set": name, "method": method, **res})
                print(_row_text(rows[-1]), flush=True)
            for r in rows:  # recall of methods that ran before the exact reference
                f = r.pop("_dist_file", None)
                if r["set"] == name and f and "recall" not in r and exact is not None:
                    r["recall"] = _recall(np.load(f), exact)
    _add_ratios(rows)
    return rows


def _add_ratios(rows):
    ref = {r["set"]: r.get("seconds") for r in rows if r["method"] == "sklearn_kneighbors_graph"}
    for r in rows:
        r.pop("_dist_file", None)
        if r.get("seconds") and ref.get(r["set"]):
            r["time_vs_sklearn"] = r["seconds"] / ref[r["set"]]
        n = r.get("n")
        if n and "traced_peak_bytes" in r:  # below a float32 n x n; the slope confirms
            r["no_nxn_array"] = bool(r["traced_peak_bytes"] < 4 * n * n
                                     or r.get("memory_slope", 2.0) < 1.5)


def _mb(x):
    return "-" if x is None else f"{x / 2**20:8.1f}"


def _row_text(r):
    if "error" in r:
        return f"{r['set']:10s} {r['method']:26s} ERROR {r['error']}"
    return (f"{r['set']:10s} {r['method']:26s} {r['seconds']:9.3f} s"
            f"  rss+ {_mb(r.get('rss_delta_bytes'))} MB"
            f"  traced {_mb(r.get('traced_peak_bytes'))} MB"
            f"  recall {r.get('recall', float('nan')):.4f}")


def print_table(rows, k):
    head = (f"| set | n x d | method | exact | time (s, min) | x sklearn | peak RSS + (MB) | "
            f"traced peak (MB) | memory ~ n^s | no n x n | recall@{k} |")
    print(head)
    print("|" + "---|" * 11)
    for r in rows:
        exact = METHODS[r["method"]][1]
        if "error" in r:
            print(f"| {r['set']} | | {r['method']} | {exact} | {r['error']} | | | | | | |")
            continue
        ratio = r.get("time_vs_sklearn")
        cells = [r["set"], f"{r['n']} x {r['d']}", r["method"], exact, f"{r['seconds']:.3f}",
                 "-" if ratio is None else f"{ratio:.2f}", _mb(r.get("rss_delta_bytes")).strip(),
                 _mb(r.get("traced_peak_bytes")).strip(),
                 f"{r['memory_slope']:.2f}" if "memory_slope" in r else "-",
                 r.get("no_nxn_array", "-"),
                 f"{r.get('recall', float('nan')):.4f}"]
        print("| " + " | ".join(str(c) for c in cells) + " |")


SWEEP_METHODS = ("graphssl_kdtree", "graphssl_brute", "graphssl_nndescent",
                 "sklearn_kneighbors_graph", "graphlearning_knnsearch")


def size_sweep(name, sizes, k, data_dir) -> list[dict]:
    """Search time vs n on random subsets, one process, sequential (growth exponents)."""
    X = _load(name, data_dir, quick=False)
    for method in SWEEP_METHODS:
        RUNNERS[method](X[:300], k)  # warm-up
    rows = []
    for n in sizes:
        A = np.ascontiguousarray(
            X[np.sort(np.random.default_rng(0).choice(len(X), min(n, len(X)), replace=False))]
        )
        for method in SWEEP_METHODS:
            t0 = time.perf_counter()
            RUNNERS[method](A, k)
            rows.append({"n": len(A), "method": method, "seconds": time.perf_counter() - t0})
            print(f"n={len(A):6d} {method:26s} {rows[-1]['seconds']:8.3f} s", flush=True)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=["usps_full", "secstr"])
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--data-dir", default=os.environ.get("GRAPHSSL_DATA", str(DEFAULT_DATA)))
    parser.add_argument("--quick", action="store_true", help="3000-point subsets (smoke test)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per method run")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per method (min)")
    parser.add_argument("--no-scaling", action="store_true",
                        help="skip the n/4 traced run (memory growth exponent)")
    parser.add_argument("--out", default=None, help="JSON file (default results/bench_graph.json)")
    parser.add_argument("--sweep", nargs="+", type=int, default=None,
                        help="instead: time vs n on subsets of the first --sets entry")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    if args.sweep:
        rows = size_sweep(args.sets[0], args.sweep, args.k, args.data_dir)
        out = RESULTS / f"bench_graph_{args.sets[0]}_sweep.json"
        out.write_text(json.dumps({"k": args.k, "device": _device(), "rows": rows}, indent=2))
        print(f"wrote {out}")
        return
    rows = run_benchmark(args.sets, args.k, args.methods, args.data_dir, args.quick,
                         args.timeout, args.repeats, not args.no_scaling)
    print()
    print_table(rows, args.k)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = pathlib.Path(args.out) if args.out else \
        RESULTS / ("bench_graph_quick.json" if args.quick else "bench_graph.json")
    out.write_text(json.dumps({
        "benchmark": "kNN graph construction", "k": args.k, "device": _device(),
        "versions": _versions(), "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "methods": {m: METHODS[m][0] for m in args.methods}, "rows": rows,
    }, indent=2))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
