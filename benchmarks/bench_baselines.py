"""GRF and LGC against scikit-learn and GraphLearning on usps_full and Digit1.

Same splits, same run, same process (the machine is shared: compare ratios, not seconds):

* usps_full (9298 x 256, 10 classes): 2 % labels per class (every class present), 5 splits
  (graphssl.data.random_splits, seed 0);
* Digit1 (1500 x 241): the 12 SSL-book splits of 10 and of 100 labels.

Methods and what their time covers:

* ours (graphssl.models.baselines on graphssl.graph.knn_graph, k = 10, max-symmetrised,
  sigma = mean k-th neighbour distance / 3): ``graph`` = kNN graph build, once per data set;
  ``solve`` = one call of the model function per split; ``full`` = graph + solve (what one
  user run pays). Variants: grf (plain harmonic function, Zhu et al. 2003), grf_cmn (class
  mass normalisation), grf_sym (harmonic function on D^-1/2 W D^-1/2), lgc (alpha 0.99).
* scikit-learn LabelPropagation / LabelSpreading (kernel='knn', n_neighbors=10): the whole
  ``fit`` (their graph included) = ``full``.
* GraphLearning (gl.weightmatrix.knn(X, 10), its own self-tuned Gaussian kNN graph; annoy
  kNN): ``graph`` once per data set, ``solve`` = ``laplace`` / ``poisson`` fit + predict.
  ``grf_on_gl_graph`` / ``lgc_on_gl_graph``: our solvers on GraphLearning's graph (the same
  linear system as ``gl_laplace``: a like-for-like solver comparison).

Usage: ``python benchmarks/bench_baselines.py [--quick]``; writes
``benchmarks/results/bench_baselines.json`` and prints the tables. On a GPU machine the
``jax_cg`` solver row runs on the accelerator.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import time
import warnings

import numpy as np

os.environ.setdefault("OMP_NUM_THREADS", str(os.cpu_count()))

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

from graphssl.data import load_dataset, random_splits  # noqa: E402
from graphssl.graph import knn_graph  # noqa: E402
from graphssl.models.baselines import harmonic_function, lgc  # noqa: E402

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
K = 10


def _timed(fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def _ours(C):
    return {
        "grf": lambda W, lab: harmonic_function(W, lab, n_classes=C),
        "grf_cmn": lambda W, lab: harmonic_function(W, lab, n_classes=C,
                                                    class_mass_normalize=True),
        "grf_sym": lambda W, lab: harmonic_function(W, lab, n_classes=C, normalize_graph=True),
        "lgc": lambda W, lab: lgc(W, lab, n_classes=C, alpha=0.99),
    }


def _sklearn_models():
    from sklearn.semi_supervised import LabelPropagation, LabelSpreading

    return {
        "sklearn_LabelPropagation": lambda: LabelPropagation(kernel="knn", n_neighbors=K,
                                                             max_iter=1000),
        "sklearn_LabelSpreading": lambda: LabelSpreading(kernel="knn", n_neighbors=K),
    }


def _accuracy(y, pred, labelled):
    mask = np.ones(y.size, dtype=bool)
    mask[labelled] = False
    return float(np.mean(np.asarray(pred)[mask] == y[mask]))


def run_dataset(name, X, y, splits, rows, with_peers=True):
    """Accuracy and seconds of every method on every split of one data set."""
    C = int(y.max()) + 1
    record = {"dataset": name, "n": int(X.shape[0]), "d": int(X.shape[1]), "C": C,
              "n_splits": len(splits), "n_labelled": int(len(splits[0])), "methods": {}}
    graph, t_graph = _timed(knn_graph, X, K, sigma="kth_over_3", symmetrize="max")
    W, t_conv = _timed(graph.to_scipy)
    record["graph_seconds"] = {"ours": t_graph + t_conv}
    methods = _ours(C)
    for lab_idx in splits[:1]:  # warm-up (imports, first-call overheads), untimed
        labels = np.full(y.size, -1)
        labels[lab_idx] = y[lab_idx]
        for fn in methods.values():
            fn(W, labels)
    for m, fn in methods.items():
        runs = []
        for lab_idx in splits:
            labels = np.full(y.size, -1)
            labels[lab_idx] = y[lab_idx]
            F, t = _timed(fn, W, labels)
            runs.append({"accuracy": _accuracy(y, F.argmax(1), lab_idx), "solve": t,
                         "full": t + t_graph + t_conv})
        record["methods"][m] = runs
    if with_peers:
        for m, factory in _sklearn_models().items():
            runs = []
            for lab_idx in splits:
                labels = np.full(y.size, -1)
                labels[lab_idx] = y[lab_idx]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model, t = _timed(factory().fit, X, labels)
                runs.append({"accuracy": _accuracy(y, model.transduction_, lab_idx),
                             "solve": None, "full": t})
            record["methods"][m] = runs
        record.update(_graphlearning(X, y, splits, record))
    rows.append(record)
    return record


def _graphlearning(X, y, splits, record):
    try:
        import graphlearning as gl
    except ImportError:
        return {"graphlearning": "not installed"}
    W_gl, t_graph = _timed(gl.weightmatrix.knn, np.asarray(X, np.float64), K)
    record["graph_seconds"]["graphlearning"] = t_graph
    for m, cls in (("gl_laplace", gl.ssl.laplace), ("gl_poisson", gl.ssl.poisson)):
        runs = []
        cls(W_gl).fit_predict(splits[0], y[splits[0]])  # warm-up
        for lab_idx in splits:
            model = cls(W_gl)
            pred, t = _timed(model.fit_predict, lab_idx, y[lab_idx])
            runs.append({"accuracy": _accuracy(y, pred, lab_idx), "solve": t,
                         "full": t + t_graph})
        record["methods"][m] = runs
    # our solver on GraphLearning's graph: the same linear system as gl_laplace
    C = int(y.max()) + 1
    W_gl = W_gl.tocsr()
    for m, fn in (("grf_on_gl_graph", harmonic_function), ("lgc_on_gl_graph", lgc)):
        labels = np.full(y.size, -1)
        labels[splits[0]] = y[splits[0]]
        fn(W_gl, labels, n_classes=C)  # warm-up
        runs = []
        for lab_idx in splits:
            labels = np.full(y.size, -1)
            labels[lab_idx] = y[lab_idx]
            F, t = _timed(fn, W_gl, labels, n_classes=C)
            runs.append({"accuracy": _accuracy(y, F.argmax(1), lab_idx), "solve": t,
                         "full": t + t_graph})
        record["methods"][m] = runs
    return {}


def solver_comparison(X, y, splits):
    """GRF and LGC solve alone with each solver on one split (same graph)."""
    C = int(y.max()) + 1
    W = knn_graph(X, K, sigma="kth_over_3").to_scipy()
    labels = np.full(y.size, -1)
    labels[splits[0]] = y[splits[0]]
    out = {}
    for model, fn in (("grf", harmonic_function), ("lgc", lgc)):
        for method in ("direct", "cg", "jax_cg"):
            fn(W, labels, n_classes=C, method=method)  # warm-up / JIT compile
            times = []
            for _ in range(3):
                (F, info), t = _timed(fn, W, labels, n_classes=C, method=method,
                                      return_info=True)
                times.append(t)
            out[f"{model}/{method}"] = {"seconds_min": min(times), "iterations": info.iterations,
                                        "accuracy": _accuracy(y, F.argmax(1), splits[0])}
    return out


def _stats(runs, key):
    vals = [r[key] for r in runs if r.get(key) is not None]
    return (float(np.mean(vals)), float(np.std(vals))) if vals else (None, None)


def print_table(record):
    print(f"\n{record['dataset']}: n = {record['n']}, {record['n_splits']} splits of "
          f"{record['n_labelled']} labels; graph build: "
          + ", ".join(f"{k} {v:.3f} s" for k, v in record["graph_seconds"].items()))
    print(f"{'method':<26} {'accuracy':>16} {'solve (s)':>10} {'full (s)':>10}")
    for m, runs in record["methods"].items():
        acc, sd = _stats(runs, "accuracy")
        solve, full = _stats(runs, "solve")[0], _stats(runs, "full")[0]
        solve_s = f"{solve:.4f}" if solve is not None else "-"
        print(f"{m:<26} {acc:.4f} +- {sd:.4f} {solve_s:>10} {full:>10.4f}")
    ratios = _ratios(record)
    record["ratios"] = ratios
    for k, v in ratios.items():
        print(f"  {k}: {v:.2f}x")


def _ratios(record):
    meth = record["methods"]
    out = {}
    for ours in ("grf", "grf_sym", "lgc", "grf_on_gl_graph"):
        if ours not in meth:
            continue
        s, f = _stats(meth[ours], "solve")[0], _stats(meth[ours], "full")[0]
        for peer in ("sklearn_LabelPropagation", "sklearn_LabelSpreading"):
            if peer in meth:
                pf = _stats(meth[peer], "full")[0]
                out[f"{peer} full / {ours} full"] = pf / f
                out[f"{peer} full / {ours} solve"] = pf / s
        for peer in ("gl_laplace", "gl_poisson"):
            if peer in meth:
                out[f"{peer} solve / {ours} solve"] = _stats(meth[peer], "solve")[0] / s
                out[f"{peer} full / {ours} full"] = _stats(meth[peer], "full")[0] / f
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="Digit1 only, 3 splits")
    args = parser.parse_args()
    rows = []
    usps = load_dataset("usps_full")
    usps_splits = random_splits(usps.y, 0.02, n_splits=5, seed=0)
    digit1 = load_dataset("digit1")
    if not args.quick:
        print_table(run_dataset("usps_full 2%", usps.X, usps.y, list(usps_splits), rows))
    for L in (10, 100):
        splits = list(digit1.splits[f"labeled_{L}"])[: 3 if args.quick else None]
        print_table(run_dataset(f"digit1 {L} labels", digit1.X, digit1.y, splits, rows))
    solvers = {}
    if not args.quick:
        solvers = solver_comparison(usps.X, usps.y, list(usps_splits))
        print("\nsolver comparison, usps_full 2 %, split 0 (solve alone, min of 3):")
        for k, v in solvers.items():
            print(f"  {k:<14} {v['seconds_min']:.4f} s  {v['iterations']:>4} it  "
                  f"acc {v['accuracy']:.4f}")
    import graphlearning
    import scipy
    import sklearn

    meta = {"device": str(jax.devices()[0]), "platform": platform.platform(),
            "cpu_count": os.cpu_count(), "python": platform.python_version(),
            "versions": {"jax": jax.__version__, "numpy": np.__version__,
                         "scipy": scipy.__version__, "sklearn": sklearn.__version__,
                         "graphlearning": getattr(graphlearning, "__version__", "?")},
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "bench_baselines.json"
    path.write_text(json.dumps({"meta": meta, "datasets": rows, "solvers": solvers}, indent=1))
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
