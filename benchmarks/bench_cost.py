"""Cost at every size: HarmonicFunctionClassifier, LGCClassifier and PottsClassifier with
their defaults beside scikit-learn's LabelSpreading (kNN kernel, k = 10), one process per fit.

Data: 10 Gaussian clusters in d = 32 (centres N(0, 9 I), unit isotropic noise), 1 % of the
points labelled (graphssl.data.random_splits, stratified, seed 0), n = 10^3, 10^4, 10^5 by
default (``--n``). Each fit runs in a fresh Python process, so its time holds what a user's
new process pays: imports are timed apart (``import_s``), ``fit_s`` is ``fit(X, y)`` alone
(kNN search, graph, solve, and any JIT compilation), ``fit_cpu_s`` the CPU time (user +
system, all threads) the fit took (other processes' load inflates wall time, hardly this),
``process_s`` the child's whole life seen from the driver. Peak memory is the child's
``VmHWM`` (``ru_maxrss`` of a child started by fork + exec would inherit the driver's
high-water mark). The growth exponent is the
least-squares slope of log(fit_s) against log(n).

JAX's persistent compilation cache (:mod:`graphssl.config`): every graphssl fit runs with a
cache folder of its own, filled by one unmeasured run of the same model and n first
(``warm``: the state of a user's second and later processes) and, with ``--cache-compare``,
also with the cache switched off (``GRAPHSSL_JAX_CACHE=0``: what every process paid before);
``--no-cache-only``: ours with the cache off only (no fill run: for the large n, where a
fill run costs as much as the measured one).

Rounds: ``--repeats`` (default 1) interleaved rounds, the best of them is reported; the
1-minute load average is stored with each figure (the machine is shared: compare ratios
within a row, not seconds across runs).

Usage: ``python benchmarks/bench_cost.py [--n 1000 10000 100000] [--cache-compare]
[--repeats 1] [--tag TAG]``; prints the table and writes
``benchmarks/results/bench_cost[_TAG].json``.
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
MODELS = ("HarmonicFunctionClassifier", "LGCClassifier", "PottsClassifier", "LabelSpreading")


def make_data(n: int, d: int = 32, clusters: int = 10, seed: int = 0):
    """``(X float64[n, d], y int[n] with -1 unlabelled, truth int[n])``."""
    rng = np.random.default_rng(seed)
    centres = 3.0 * rng.normal(size=(clusters, d))
    truth = rng.integers(0, clusters, n)
    X = centres[truth] + rng.normal(size=(n, d))
    from graphssl.data import random_splits

    labelled = random_splits(truth, 0.01, n_splits=1, seed=seed)[0]
    y = np.full(n, -1)
    y[labelled] = truth[labelled]
    return X, y, truth


def _peak_mb() -> float:
    with open("/proc/self/status") as fh:
        return int(next(line for line in fh if line.startswith("VmHWM:")).split()[1]) / 1024


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def worker(spec: dict) -> dict:
    """Child process: import, build the data, time one fit."""
    start = time.perf_counter()
    if spec["model"] == "LabelSpreading":
        from sklearn.semi_supervised import LabelSpreading

        estimator = LabelSpreading(kernel="knn", n_neighbors=10)
    else:
        import graphssl.estimators as estimators

        estimator = getattr(estimators, spec["model"])()
    import_s = time.perf_counter() - start
    X, y, truth = make_data(spec["n"])
    start, cpu = time.perf_counter(), _cpu_s()
    estimator.fit(X, y)
    fit_s, cpu = time.perf_counter() - start, _cpu_s() - cpu
    unlabelled = y < 0
    accuracy = float(np.mean(estimator.transduction_[unlabelled] == truth[unlabelled]))
    return {"import_s": import_s, "fit_s": fit_s, "fit_cpu_s": cpu, "peak_mb": _peak_mb(),
            "accuracy": accuracy}


def run(spec: dict, env: dict, timeout: float) -> dict:
    cmd = [sys.executable, __file__, "--worker", json.dumps(spec)]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **env})
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1][:300]}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_s"] = time.perf_counter() - start
    out["load_1min"] = os.getloadavg()[0]
    return out


def slope(ns, seconds) -> float | None:
    pairs = [(n, s) for n, s in zip(ns, seconds, strict=True) if s]
    if len(pairs) < 2:
        return None
    x, y = np.log([p[0] for p in pairs]), np.log([p[1] for p in pairs])
    return float(np.polyfit(x, y, 1)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--cache-compare", action="store_true")
    parser.add_argument("--no-cache-only", action="store_true",
                        help="ours with the cache off only (no unmeasured fill run)")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.n:
            caches = {}
            for model in args.models if not args.no_cache_only else ():
                if model != "LabelSpreading":  # fill a cache of this model's own, unmeasured
                    caches[model] = os.path.join(tmp, f"{model}_{n}")
                    run({"model": model, "n": n}, {"GRAPHSSL_JAX_CACHE": caches[model]},
                        args.timeout)
            for _ in range(args.repeats):
                for model in args.models:
                    settings = {"warm": {"GRAPHSSL_JAX_CACHE": caches.get(model, "0")}}
                    if args.no_cache_only and model != "LabelSpreading":
                        settings = {"no_cache": {"GRAPHSSL_JAX_CACHE": "0"}}
                    elif args.cache_compare and model != "LabelSpreading":
                        settings["no_cache"] = {"GRAPHSSL_JAX_CACHE": "0"}
                    for setting, env in settings.items():
                        result = run({"model": model, "n": n}, env, args.timeout)
                        key = (model, n, setting)
                        best = rows.get(key)
                        if best is None or "error" in best or (
                                "fit_s" in result and result["fit_s"] < best["fit_s"]):
                            rows[key] = result
                        print(f"n={n:8d} {model:28s} {setting:9s} {json.dumps(result)}",
                              flush=True)
    table = [{"model": m, "n": n, "cache": c, **r} for (m, n, c), r in rows.items()]
    print(f"\n{'model':28s} {'cache':9s} {'n':>8s} {'fit s':>8s} {'cpu s':>8s} "
          f"{'process s':>9s} {'peak MB':>8s} {'acc':>6s} {'/peer':>8s} {'cpu/peer':>8s}")
    peer = {n: rows.get(("LabelSpreading", n, "warm"), {}) for n in args.n}
    exponents = {}
    for model in args.models:
        for cache in ("warm", "no_cache"):
            series = [rows.get((model, n, cache)) for n in args.n]
            if all(r is None for r in series):
                continue
            for n, r in zip(args.n, series, strict=True):
                if r is None:
                    continue
                if "error" in r:
                    print(f"{model:28s} {cache:9s} {n:8d} {r['error']}")
                    continue
                ratio = (f"{r['fit_s'] / peer[n]['fit_s']:8.2f} "
                         f"{r['fit_cpu_s'] / peer[n]['fit_cpu_s']:8.2f}"
                         if peer[n].get("fit_s") else "")
                print(f"{model:28s} {cache:9s} {n:8d} {r['fit_s']:8.2f} {r['fit_cpu_s']:8.2f} "
                      f"{r['process_s']:9.2f} {r['peak_mb']:8.0f} {r['accuracy']:6.3f} {ratio}")
            exponents[f"{model}/{cache}"] = slope(
                args.n, [r.get("fit_s") if r else None for r in series])
    print("growth exponent of fit_s (log-log slope): "
          + ", ".join(f"{k} {v:.2f}" for k, v in exponents.items() if v is not None))
    meta = {"device": f"{platform.machine()}, {os.cpu_count()} cores",
            "python": platform.python_version(), "d": 32, "clusters": 10, "label_rate": 0.01}
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"bench_cost{'_' + args.tag if args.tag else ''}.json"
    path.write_text(json.dumps({"meta": meta, "rows": table, "growth_exponent": exponents},
                               indent=2))
    print(f"wrote {path.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
