"""Graph mincut benchmarks (Blum & Chawla 2001).

1. ``speed``: one minimum cut on kNN graphs (k = 10, w = exp(-d / scale)) of two overlapping
   Gaussian classes in 3-D with N = 10^4, 10^5, 10^6 nodes and N / 100 labels; each max-flow library
   in the same run (PyMaxflow BK float64, scipy Dinic int32, networkx preflow-push). networkx
   is skipped where its extrapolated time exceeds 2 minutes. Goal: N = 10^6 under 30 s (CPU).
2. ``table1``: Table 1 of the paper on the shared UCI sets, ``--trials`` random L/U draws
   per set (``graphssl.estimators.mincut.table1_trial``), noisy "*" variants included.

    .venv/bin/python benchmarks/bench_mincut.py speed [--sizes 10000 100000 1000000]
    .venv/bin/python benchmarks/bench_mincut.py table1 [--trials 10]

Each prints a table and writes JSON to ``benchmarks/results/``. Max-flow runs on the CPU
(no GPU max-flow library is used); on a GPU machine only the JAX parts would move.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


INSTANCES = {
    "regions_noisy": "8 k-regions planes 4 spacings apart, 5 % of the labels flipped",
    "regions_touching": "8 k-regions planes 0.5 spacing apart (classes touch)",
    "gaussians": "two unit Gaussians in 3-D, means 2 apart (classes overlap)",
}


def knn_problem(n: int, kind: str = "regions_noisy", *, k: int = 10, seed: int = 0):
    """One benchmark instance (see ``INSTANCES``): kNN graph (k = 10, max-symmetrised)
    with ``w = exp(-d / scale)``, scale = mean k-th neighbour distance, N / 100 labels."""
    from scipy.spatial import cKDTree

    from graphssl.data import k_regions
    from graphssl.models.mincut import exponential_knn_weights

    rng = np.random.default_rng(seed)
    spacing = 1.0 / np.sqrt(n / 8)  # mean in-plane spacing of the k-regions points
    if kind == "gaussians":
        y = rng.integers(0, 2, n)
        X = rng.normal(size=(n, 3))
        X[:, 0] += 2.0 * y
    else:
        gap = 4.0 * spacing if kind == "regions_noisy" else 0.5 * spacing
        data = k_regions(n, n_labeled=0, delta=gap, seed=seed)
        X, y = data.X, data.y
    t0 = time.perf_counter()
    dist, idx = cKDTree(X).query(X, k=k + 1, workers=-1)
    W = exponential_knn_weights(idx[:, 1:], dist[:, 1:], float(np.mean(dist[:, -1])))
    t_graph = time.perf_counter() - t0
    labels = -np.ones(n, dtype=np.int64)
    picked = rng.choice(n, max(n // 100, 2), replace=False)
    labels[picked] = y[picked]
    if kind == "regions_noisy":
        flip = picked[: max(len(picked) // 20, 1)]
        labels[flip] = 1 - labels[flip]
    return W, labels, y, t_graph


def run_speed(sizes, methods, kind, limits=None):
    """Time each method per size; a method whose extrapolated time at the next size (x20
    for 10x more nodes, as measured) exceeds its limit (networkx 120 s, others 600 s) is
    skipped there and the reason recorded."""
    from graphssl.inference.maxflow import minimum_cut
    from graphssl.models.mincut import cut_network

    limits = {"networkx": 120.0, **(limits or {})}
    rows = []
    estimate = dict.fromkeys(methods, 0.0)
    for n in sizes:
        W, labels, y, t_graph = knn_problem(n, kind)
        t0, c0 = time.perf_counter(), time.process_time()
        net = cut_network(W, labels)
        t_net, c_net = time.perf_counter() - t0, time.process_time() - c0
        reference = None
        for method in methods:
            row = {"n": n, "kind": kind, "edges": int(W.nnz // 2), "method": method,
                   "graph_s": t_graph, "network_s": t_net, "network_cpu_s": c_net}
            limit = limits.get(method, 600.0)
            if estimate[method] > limit:
                row.update(skipped=f"extrapolated {estimate[method]:.0f} s > {limit:.0f} s")
                rows.append(row)
                print(_fmt(row), flush=True)
                continue
            result = minimum_cut(net, method)
            side = result.source_side
            acc = float(np.mean(np.where(labels >= 0, labels, side)[labels < 0] == y[labels < 0]))
            if reference is None:
                reference = result
            row.update(
                solve_s=result.info["seconds"],
                solve_cpu_s=result.info["cpu_seconds"],
                cut_value=result.cut_value,
                relative_gap=(result.cut_value - reference.cut_value)
                / max(reference.cut_value, 1e-300),
                same_labels=bool(np.array_equal(side, reference.source_side)),
                accuracy=acc,
                rounding_bound=result.info.get("rounding_bound"),
            )
            estimate[method] = result.info["seconds"] * 20  # next size 10x; measured ~20x
            rows.append(row)
            print(_fmt(row), flush=True)
    for n in sizes:
        base = [r for r in rows if r["n"] == n and r["method"] == methods[0] and "solve_s" in r]
        for r in rows:
            if r["n"] == n and "solve_s" in r and base:
                r["ratio_vs_first"] = r["solve_s"] / base[0]["solve_s"]
    return rows


def _fmt(row):
    if "skipped" in row:
        return f"{row['kind']} N={row['n']:>8} {row['method']:>10}: skipped ({row['skipped']})"
    bound = row.get("rounding_bound")
    extra = f" rounding bound {bound:.3g}" if bound else ""
    return (
        f"{row['kind']} N={row['n']:>8} E={row['edges']:>9} {row['method']:>10}: "
        f"solve {row['solve_s']:7.2f} s (cpu {row['solve_cpu_s']:6.2f} s)"
        f" graph {row['graph_s']:.2f} s, network {row['network_s']:.2f} s"
        f" (cpu {row['network_cpu_s']:.2f} s) cut "
        f"{row['cut_value']:.6g} gap {row['relative_gap']:+.2e} same={row['same_labels']}"
        f" acc {row['accuracy']:.3f}{extra}"
    )


def run_table1(trials: int, seed: int = 0):
    from graphssl.data import data_dir_from_env
    from graphssl.estimators.mincut import TABLE1, table1_dataset, table1_trial

    data_dir = data_dir_from_env() or Path(__file__).resolve().parents[2] / "shared" / "datasets"
    out = []
    for spec in TABLE1:
        data = table1_dataset(spec["data"], data_dir)
        accs = [table1_trial(data, spec, seed=seed + t) for t in range(trials)]
        mean = {key: float(np.mean([a[key] for a in accs])) for key in accs[0]}
        std = {key: float(np.std([a[key] for a in accs])) for key in accs[0]}
        out.append({"name": spec["name"], "mean": mean, "std": std, "paper": spec["paper"],
                    "trials": trials})
        cells = "  ".join(f"{k}={100 * mean[k]:5.1f} ({v:5.1f})" for k, v in spec["paper"].items())
        print(f"{spec['name']:>7} {spec['L']:>4}+{spec['U']:<5} {cells}", flush=True)
    return out


def environment():
    import maxflow
    import networkx
    import scipy

    return {
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average_1_5_15": os.getloadavg(),
        "scipy": scipy.__version__,
        "networkx": networkx.__version__,
        "pymaxflow": maxflow.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    speed = sub.add_parser("speed")
    speed.add_argument("--sizes", type=int, nargs="+", default=[10**4, 10**5, 10**6])
    speed.add_argument("--methods", nargs="+", default=["pymaxflow", "scipy", "networkx"])
    speed.add_argument("--kinds", nargs="+", default=list(INSTANCES))
    speed.add_argument("--tag", default="", help="suffix of the JSON file name")
    table = sub.add_parser("table1")
    table.add_argument("--trials", type=int, default=10)
    args = parser.parse_args(argv)
    RESULTS.mkdir(parents=True, exist_ok=True)
    if args.what == "speed":
        rows = [r for kind in args.kinds for r in run_speed(args.sizes, args.methods, kind)]
        path = RESULTS / f"mincut_speed{'_' + args.tag if args.tag else ''}.json"
    else:
        rows = run_table1(args.trials)
        path = RESULTS / "mincut_table1.json"
    path.write_text(json.dumps({"environment": environment(), "rows": rows}, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
