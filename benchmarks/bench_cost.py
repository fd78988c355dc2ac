"""Cost at every size: HarmonicFunctionClassifier, LGCClassifier and PottsClassifier with
their defaults beside scikit-learn's LabelSpreading (kNN kernel, k = 10), one process per fit.

Data: 10 Gaussian clusters in d = 32 (centres N(0, 9 I), unit isotropic noise), 1 % of the
points labelled (stratified: 1 % of each cluster, seed 0), n = 10^3 ... 10^6
(``--n``). Each fit runs in a fresh Python process, so its time holds what a user's new
process pays. Per fit: ``cpu_s``, the CPU time (user + system, all threads) of
``fit(X, y)`` alone (kNN search, graph, solve, any JIT compilation; the figure compared,
since the shared machine's load inflates wall time far more), ``fit_s`` its wall time,
``import_s`` / ``import_cpu_s`` the imports before it, ``peak_mb`` the child's ``VmHWM``,
``compiles`` / ``compile_s`` the XLA compilations during the fit and their time,
``cache_hits`` the programs read from the persistent cache. Up to n = 10^5 the same
process then fits a new estimator on new data of the same size (seed 1): ``refit_cpu_s``,
what every fit after the first costs in a notebook or a script that fits many times, once
the process's one-time costs are paid (imports inside the first fit, JAX's back-end start,
threadpoolctl's library scan, scikit-learn's data-frame plugin scan, compilation or loading
of a stored program).

JAX's persistent compilation cache (graphssl.config, on by default): every graphssl model is
run three ways, each with a cache folder of its own per (model, n): ``cold`` (an empty
folder: a user's first process), ``warm`` (the same folder again: every later process) and
``off`` (``GRAPHSSL_JAX_CACHE=0``). ``--states`` picks a subset (``off`` alone for the large
n, where compilation is a rounding error). The peer has no cache (state ``-``).

The table gives, per n and model, CPU seconds, wall seconds, peak MB, the peer's CPU
seconds and ours / peer; then the growth exponent of each series: the least-squares slope
of log(cpu_s) against log(n) (and of wall time).

``--concurrency P``: P processes fit PottsClassifier at once on one empty shared cache
folder, then P again on the warm folder; reports exit codes, cache warnings and times (what
JAX's unlocked cache does with concurrent writers and readers).

Rows are merged into ``benchmarks/results/bench_cost[_TAG].json`` by (model, n, state), so
the long 10^6 fits can run in separate invocations (``--n 1000000 --tag 1e6``, then
``--merge 1e6 --report`` takes their rows into the main file); the file is written
atomically after every fit. Usage::

    python benchmarks/bench_cost.py [--n 1000 10000 100000] [--models ...]
        [--states cold warm off] [--repeats 1] [--timeout 1800] [--tag TAG]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
RESULTS = HERE / "results"
OURS = ("HarmonicFunctionClassifier", "LGCClassifier", "PottsClassifier")
PEER = "LabelSpreading"
STATES = ("cold", "warm", "off")
REFIT_MAX_N = 100_000  # the second fit in the same process is timed up to this n


def make_data(n: int, d: int = 32, clusters: int = 10, seed: int = 0):
    """``(X float64[n, d], y int[n] with -1 unlabelled, truth int[n])``."""
    rng = np.random.default_rng(seed)
    centres = 3.0 * rng.normal(size=(clusters, d))
    truth = rng.integers(0, clusters, n)
    X = centres[truth] + rng.normal(size=(n, d))
    labelled = _stratified(truth, 0.01, seed)
    y = np.full(n, -1)
    y[labelled] = truth[labelled]
    return X, y, truth


def _stratified(truth, rate: float, seed: int) -> np.ndarray:
    """Labelled indices: ``max(1, round(rate * n_c))`` points of each class c, drawn without
    replacement (NumPy only: the peer's process imports neither graphssl nor JAX)."""
    rng = np.random.default_rng([seed, 1])
    picked = [rng.choice(np.flatnonzero(truth == c),
                         max(1, round(rate * int(np.sum(truth == c)))), replace=False)
              for c in np.unique(truth)]
    return np.sort(np.concatenate(picked))


def _peak_mb() -> float:
    with open("/proc/self/status") as fh:
        return int(next(line for line in fh if line.startswith("VmHWM:")).split()[1]) / 1024


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def worker(spec: dict) -> dict:
    """Child process: import, build the data, time one fit."""
    start, cpu = time.perf_counter(), _cpu_s()
    if spec["model"] == PEER:
        from sklearn.semi_supervised import LabelSpreading

        estimator = LabelSpreading(kernel="knn", n_neighbors=10)
    else:
        import graphssl.estimators as estimators

        estimator = getattr(estimators, spec["model"])()
    import_s, import_cpu_s = time.perf_counter() - start, _cpu_s() - cpu
    X, y, truth = make_data(spec["n"])
    counts = _compile_counter()
    start, cpu = time.perf_counter(), _cpu_s()
    estimator.fit(X, y)
    fit_s, cpu = time.perf_counter() - start, _cpu_s() - cpu
    unlabelled = y < 0
    accuracy = float(np.mean(estimator.transduction_[unlabelled] == truth[unlabelled]))
    fresh = {"cpu_s": cpu, "fit_s": fit_s, "import_s": import_s, "import_cpu_s": import_cpu_s,
             "peak_mb": _peak_mb(), "accuracy": accuracy, **counts}
    if spec["n"] <= REFIT_MAX_N:  # a second fit in the same process, on new data
        X, y, _ = make_data(spec["n"], seed=1)
        refit = type(estimator)(**estimator.get_params())
        start, cpu = time.perf_counter(), _cpu_s()
        refit.fit(X, y)
        fresh.update(refit_cpu_s=_cpu_s() - cpu, refit_s=time.perf_counter() - start)
    return fresh


def _compile_counter() -> dict:
    """A dict that JAX's monitoring events fill during the fit: XLA compilations (count,
    seconds) and persistent-cache hits."""
    counts = {"compiles": 0, "compile_s": 0.0, "cache_hits": 0}
    try:
        from jax import monitoring
    except ImportError:
        return counts

    def on_duration(event, seconds, **_):
        if event == "/jax/core/compile/backend_compile_duration":
            counts["compiles"] += 1
            counts["compile_s"] += float(seconds)

    def on_event(event, **_):
        if event == "/jax/compilation_cache/cache_hits":
            counts["cache_hits"] += 1

    monitoring.register_event_duration_secs_listener(on_duration)
    monitoring.register_event_listener(on_event)
    return counts


def run(spec: dict, env: dict, timeout: float) -> dict:
    cmd = [sys.executable, __file__, "--worker", json.dumps(spec)]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **env})
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s (wall)"}
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1][:300]
        return {"error": f"exit {proc.returncode}: {tail}"}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_s"] = time.perf_counter() - start
    out["load_1min"] = os.getloadavg()[0]
    out["cache_warnings"] = proc.stderr.count("persistent compilation cache")
    return out


def slope(ns, seconds) -> float | None:
    """Least-squares slope of log(seconds) against log(n) (None below two points)."""
    pairs = [(n, s) for n, s in zip(ns, seconds, strict=True) if s]
    if len(pairs) < 2:
        return None
    x, y = np.log([p[0] for p in pairs]), np.log([p[1] for p in pairs])
    return float(np.polyfit(x, y, 1)[0])


def write_atomic(path: pathlib.Path, payload: dict) -> None:
    """Write JSON to a temporary file in the same folder, then rename it over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump(payload, fh, indent=2)
    os.replace(tmp, path)


def load(path: pathlib.Path) -> dict:
    if path.exists():
        return json.loads(path.read_text())
    return {"rows": []}


def keyed(rows) -> dict:
    return {(r["model"], r["n"], r["state"]): r for r in rows}


def measure(args, path: pathlib.Path, payload: dict) -> None:
    rows = keyed(payload["rows"])
    ours = [m for m in args.models if m != PEER]
    with tempfile.TemporaryDirectory(prefix="graphssl_cost_") as tmp:
        for _ in range(args.repeats):
            for n in args.n:
                jobs = [(PEER, "-", {})] if PEER in args.models else []
                for model in ours:
                    folder = os.path.join(tmp, f"{model}_{n}")
                    shutil.rmtree(folder, ignore_errors=True)  # cold = an empty folder
                    for state in args.states:
                        setting = "0" if state == "off" else folder
                        jobs.append((model, state, {"GRAPHSSL_JAX_CACHE": setting}))
                for model, state, env in jobs:
                    result = run({"model": model, "n": n}, env, args.timeout)
                    result.update(model=model, n=n, state=state)
                    print(f"n={n:8d} {model:27s} {state:5s} {json.dumps(result)}", flush=True)
                    best = rows.get((model, n, state))
                    if (best is None or "error" in best
                            or ("cpu_s" in result and result["cpu_s"] < best["cpu_s"])):
                        rows[(model, n, state)] = result
                    payload["rows"] = list(rows.values())
                    write_atomic(path, payload)


def concurrency(args, path: pathlib.Path, payload: dict) -> None:
    """P processes at once on one empty cache folder, then P on the warm folder."""
    n, model = args.n[0], "PottsClassifier"
    record = {"processes": args.concurrency, "n": n, "model": model}
    with tempfile.TemporaryDirectory(prefix="graphssl_cache_") as folder:
        for phase in ("cold", "warm"):
            cmd = [sys.executable, __file__, "--worker",
                   json.dumps({"model": model, "n": n})]
            env = {**os.environ, "GRAPHSSL_JAX_CACHE": folder}
            procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, env=env) for _ in range(args.concurrency)]
            outs = [p.communicate(timeout=args.timeout) for p in procs]
            results = []
            for p, (out, err) in zip(procs, outs, strict=True):
                entry = {"exit": p.returncode,
                         "cache_warnings": err.count("persistent compilation cache")}
                if p.returncode == 0:
                    fit = json.loads(out.strip().splitlines()[-1])
                    entry.update({k: fit[k] for k in ("cpu_s", "fit_s", "compiles",
                                                      "cache_hits", "accuracy")})
                results.append(entry)
            record[phase] = results
            record[f"{phase}_entries"] = sum(1 for f in os.scandir(folder) if f.is_file())
            print(f"concurrency {phase}: {json.dumps(results)}", flush=True)
    payload["concurrency"] = record
    write_atomic(path, payload)


def _refit_columns(row: dict, peer: dict, model: str) -> str:
    """``refit s``, the peer's and ours / peer (blank where not measured)."""
    if "refit_cpu_s" not in row:
        return ""
    text = f"{row['refit_cpu_s']:8.3f}"
    if model != PEER and "refit_cpu_s" in peer:
        text += f" {peer['refit_cpu_s']:8.3f} {row['refit_cpu_s'] / peer['refit_cpu_s']:6.2f}"
    return text


def report(payload: dict) -> dict:
    rows = keyed(payload["rows"])
    ns = sorted({n for (_, n, _) in rows})
    print(f"\n{'n':>8s} {'model':27s} {'state':5s} {'cpu s':>8s} {'wall s':>8s} "
          f"{'peak MB':>8s} {'acc':>6s} {'compiles':>8s} {'peer cpu':>8s} {'ours/peer':>9s} "
          f"{'refit s':>8s} {'peer':>8s} {'ratio':>6s}")
    for n in ns:
        peer = rows.get((PEER, n, "-"), {})
        for (model, m, state), r in sorted(rows.items(), key=lambda kv: (
                kv[0][0] == PEER, kv[0][0], STATES.index(kv[0][2]) if kv[0][2] in STATES
                else 9)):
            if m != n:
                continue
            if "error" in r:
                print(f"{n:8d} {model:27s} {state:5s} {r['error']}")
                continue
            ratio = (f"{r['cpu_s'] / peer['cpu_s']:9.2f}" if peer.get("cpu_s") and model != PEER
                     else "")
            peer_cpu = f"{peer['cpu_s']:8.3f}" if peer.get("cpu_s") else f"{'-':>8s}"
            refit = _refit_columns(r, peer, model)
            print(f"{n:8d} {model:27s} {state:5s} {r['cpu_s']:8.3f} {r['fit_s']:8.3f} "
                  f"{r['peak_mb']:8.0f} {r['accuracy']:6.3f} {r.get('compiles', 0):8d} "
                  f"{peer_cpu} {ratio:>9s} {refit}")
    exponents = {}
    for model, state in sorted({(m, s) for (m, _, s) in rows}):
        series = [rows.get((model, n, state), {}) for n in ns]
        exponents[f"{model}/{state}"] = {
            "cpu": slope(ns, [r.get("cpu_s") for r in series]),
            "wall": slope(ns, [r.get("fit_s") for r in series]),
            "n": [n for n, r in zip(ns, series, strict=True) if r.get("cpu_s")],
        }
    print("\ngrowth exponent (least-squares slope of log time against log n):")
    for name, e in exponents.items():
        if e["cpu"] is not None:
            print(f"  {name:33s} cpu {e['cpu']:5.2f}  wall {e['wall']:5.2f}  over n = {e['n']}")
    return exponents


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--models", nargs="+", default=[*OURS, PEER])
    parser.add_argument("--states", nargs="+", default=list(STATES), choices=STATES)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--concurrency", type=int, default=0)
    parser.add_argument("--report", action="store_true", help="print the stored table only")
    parser.add_argument("--merge", nargs="+", default=[], metavar="TAG",
                        help="first take the rows of bench_cost_TAG.json (runs made apart)")
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    path = RESULTS / f"bench_cost{'_' + args.tag if args.tag else ''}.json"
    payload = load(path)
    for tag in args.merge:
        rows = keyed(payload["rows"])
        rows.update(keyed(load(RESULTS / f"bench_cost_{tag}.json")["rows"]))
        payload["rows"] = list(rows.values())
    payload["meta"] = {"device": f"{platform.machine()}, {os.cpu_count()} cores",
                       "python": platform.python_version(), "d": 32, "clusters": 10,
                       "label_rate": 0.01, "time": "CPU seconds of fit (user + system)"}
    if args.concurrency:
        concurrency(args, path, payload)
    elif not args.report:
        measure(args, path, payload)
    payload["growth_exponent"] = report(payload)
    write_atomic(path, payload)
    print(f"wrote {path.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
