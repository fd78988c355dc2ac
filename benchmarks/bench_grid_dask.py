"""The main job's grid serially and on a local Dask cluster of 2 worker processes, same run.

    python benchmarks/bench_grid_dask.py [--models all] [--n-splits 3] [--workers 2] [--repeats 1]

Runs ``graphssl run``'s grid (two moons, 1000 points, 5 % labels, every model, the default
convergence budget) through :func:`graphssl.suite.compare_models` with ``resume=False`` into
fresh temporary folders: once in this process, once on a ``LocalCluster`` of ``--workers``
single-threaded processes (time with and without starting the cluster), ``--repeats`` times.
Every estimator module is imported in this process and in the workers before either grid
runs, so both run the same code. Checks that the records are identical apart from timings
(and lists any that differ), prints the table and writes
``benchmarks/results/bench_grid_dask_<device>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import tempfile
import time

import jax
import numpy as np

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
REPO = RESULTS.parents[1]


def _grid(models, graph, y, splits, X, **kwargs):
    from graphssl import suite

    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        results = suite.compare_models(models, graph, y, splits, out_dir=out, X=X,
                                       progress=False, resume=False, config={"bench": 1},
                                       **kwargs)
        return time.perf_counter() - start, results


def _strip(results):
    return {name: [{k: v for k, v in r.items() if k not in ("seconds",)} for r in runs]
            for name, runs in results.items()}


def _differences(a, b) -> list[str]:
    """``model[split].key`` of every figure that differs between two grids."""
    a, b = _strip(a), _strip(b)
    return [f"{name}[{i}].{key}" for name in a
            for i, (ra, rb) in enumerate(zip(a[name], b[name], strict=True))
            for key in sorted(set(ra) | set(rb)) if ra.get(key) != rb.get(key)]


def _preload() -> None:
    """Import every estimator module now: the serial run and the workers then run the same
    code even if the working tree changes while the benchmark runs."""
    import importlib

    for module in ("baselines", "potts", "boltzmann", "diffusion_mixture", "harmonic_mixture",
                   "mincut"):
        importlib.import_module(f"graphssl.estimators.{module}")
    importlib.import_module("graphssl.runs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="all")
    parser.add_argument("--n-splits", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out", default=None, help="JSON path (default benchmarks/results/)")
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)
    from dask.distributed import Client, LocalCluster

    from graphssl.cli import MODELS, _models
    from graphssl.data import random_splits, two_moons
    from graphssl.graph import knn_graph

    data = two_moons(1000, seed=0)
    X, y = np.asarray(data.X), np.asarray(data.y)
    graph = knn_graph(X, 10, sigma="kth_over_3")
    splits = list(random_splits(y, 0.05, n_splits=args.n_splits, seed=0))
    models = {name: MODELS[name][0] for name in _models(args.models)}
    rows = []
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for repeat in range(args.repeats):
        start = time.perf_counter()
        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=40)
        client = Client(cluster)
        client.run(_preload)
        _preload()
        startup_s = time.perf_counter() - start
        try:
            serial_s, serial = _grid(models, graph, y, splits, X)
            dask_s, on_dask = _grid(models, graph, y, splits, X, client=client)
        finally:
            client.close()
            cluster.close()
        differ = _differences(serial, on_dask)
        same = not differ
        rows.append({"repeat": repeat, "load_average": os.getloadavg()[0],
                     "serial_s": serial_s, "dask_s": dask_s,
                     "cluster_start_s": startup_s, "speedup": serial_s / dask_s,
                     "speedup_with_start": serial_s / (dask_s + startup_s),
                     "identical_records": same, "differences": differ[:40]})
        print(f"repeat {repeat}: serial {serial_s:.1f} s | {args.workers} workers "
              f"{dask_s:.1f} s (+ {startup_s:.1f} s cluster start) | speedup "
              f"{serial_s / dask_s:.2f}x ({serial_s / (dask_s + startup_s):.2f}x with start) | "
              f"records identical: {same}")
    per_model = {name: float(np.sum([r["seconds"] for r in runs if "seconds" in r]))
                 for name, runs in serial.items()}
    print("serial seconds per model (sum over splits): "
          + ", ".join(f"{k} {v:.1f}" for k, v in sorted(per_model.items(), key=lambda kv: -kv[1])))
    record = {
        "device": f"{os.cpu_count()} CPU cores ({platform.processor() or platform.machine()}), "
                  f"JAX {jax.default_backend()}",
        "versions": {"jax": jax.__version__, "dask": __import__("dask").__version__},
        "settings": {"models": args.models, "n_splits": args.n_splits,
                     "workers": args.workers, "repeats": args.repeats, "n": 1000,
                     "label_rate": 0.05},
        "load_average_at_end": list(os.getloadavg()),
        "rows": rows,
        "serial_seconds_per_model": per_model,
        "median_speedup": float(np.median([r["speedup"] for r in rows])),
    }
    out = pathlib.Path(args.out) if args.out \
        else RESULTS / f"bench_grid_dask_{jax.default_backend()}.json"
    out.write_text(json.dumps(record, indent=1))
    shown = os.path.relpath(out.resolve(), REPO) if out.resolve().is_relative_to(REPO) \
        else out.name
    print(f"wrote {shown}")


if __name__ == "__main__":
    main()
