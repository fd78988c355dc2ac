"""GRF and LGC against scikit-learn and GraphLearning on usps_full and Digit1.

Same splits, same run, same process; the machine is shared, so every figure is the best of
``--repeats`` (default 3) interleaved rounds (round r times every method on every split
before round r + 1 starts, so a burst of load hits all methods alike), and the 1-minute
load average is stored beside every timing. Compare ratios, not seconds.

Data: usps_full (9298 x 256, 10 classes), 2 % labels per class with every class present,
5 splits (graphssl.data.random_splits, seed 0); Digit1 (1500 x 241), the 12 SSL-book splits
of 10 and of 100 labels.

What "time per split" means (two definitions, both reported):

(a) ``solve``: the graph is built once per data set and reused; the time of one split is
    one call of the classifier on that graph (ours: the model function on the CSR weights;
    GraphLearning: ``laplace(W).fit_predict`` / ``poisson``; scikit-learn cannot take a graph,
    so its LabelPropagation / LabelSpreading run with a callable kernel that returns its own
    precomputed kNN connectivity matrix: ``fit`` minus the neighbour search). Ours at the
    default CG tolerance (1e-5) and at 1e-3 (``@1e-3``), where the tolerance sweep below
    shows the argmax no longer changes; ``_f32``: the CG iterations in float32.
(b) ``end_to_end``: from the features X to the labels of one split, everything included:
    ours = ``knn_graph`` (exact search: ``method="brute"``, scikit-learn's float64 brute
    force, or ``method="gemm"``, float32 products + an exact two-stage top-k in JAX,
    re-ranked in float64 — the default ``"auto"`` for 5000 <= n <= 50000; or approximate:
    ``method="pca"`` or ``method="nndescent"``) + solve;
    GraphLearning = ``weightmatrix.knn`` (annoy) + solve; scikit-learn = ``fit(X, y)``.

Graphs: ours k = 10, max-symmetrised, Gaussian with sigma = mean 10th-neighbour distance / 3;
GraphLearning's ``weightmatrix.knn(X, 10)`` (self-tuned Gaussian); scikit-learn's kNN
connectivity (k = 10). ``grf_on_gl_graph``: our solver on GraphLearning's graph (the same
linear system as ``gl_laplace``: a like-for-like solver comparison). Recall of each search
against the exact neighbour distances is stored with the graph times, and so is each
builder's first call (imports; JAX compiles the gemm search, numba compiles pynndescent),
which the best-of-repeats times leave out.

``_jax``: the same CG in JAX (``method="jax_cg"``) on the default device; on a GPU machine
(``benchmarks/gpu_session.sh 6``) the gemm search and this solve run on the GPU, the peers on
its CPU, and the device is in the JSON's ``meta``.

Usage: ``python benchmarks/bench_baselines.py [--quick] [--repeats 3] [--datasets usps_full
digit1] [--tag TAG]``; writes ``benchmarks/results/bench_baselines[_TAG].json`` and prints
the tables.
"""

from __future__ import annotations

import argparse
import functools
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
from graphssl.graph import knn_graph, knn_search  # noqa: E402
from graphssl.inference.optimize.baselines import harmonic_function, lgc  # noqa: E402
from graphssl.inference.optimize.baselines.end_to_end import harmonic_function_from_features  # noqa: E402

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
print = functools.partial(print, flush=True)  # noqa: A001 - progress when piped to a log
K = 10
DEVICE_E2E = "ours_device_knn+grf_sym@1e-3_f32"  # one XLA program from X (end_to_end.py)
LOOSE_TOL = 1e-3


def _timed(fn, *args, **kwargs):
    load = os.getloadavg()[0]
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start, load


def _labels(y, lab_idx):
    labels = np.full(y.size, -1)
    labels[lab_idx] = y[lab_idx]
    return labels


def _accuracy(y, pred, lab_idx):
    mask = np.ones(y.size, dtype=bool)
    mask[lab_idx] = False
    return float(np.mean(np.asarray(pred)[mask] == y[mask]))


# ------------------------------------------------------------------------- methods
def _ours(C):
    """name -> fn(W, labels) -> predicted labels."""
    def grf(**kw):
        return lambda W, lab: harmonic_function(W, lab, n_classes=C, **kw).argmax(1)

    def lgc_(**kw):
        return lambda W, lab: lgc(W, lab, n_classes=C, alpha=0.99, **kw).argmax(1)

    return {
        "grf": grf(),
        "grf_cmn": grf(class_mass_normalize=True),
        "grf_sym": grf(normalize_graph=True),
        "lgc": lgc_(),
        f"grf_sym@{LOOSE_TOL:g}": grf(normalize_graph=True, tol=LOOSE_TOL),
        f"lgc@{LOOSE_TOL:g}": lgc_(tol=LOOSE_TOL),
        f"grf_sym@{LOOSE_TOL:g}_f32": grf(normalize_graph=True, tol=LOOSE_TOL, dtype=np.float32),
        f"lgc@{LOOSE_TOL:g}_f32": lgc_(tol=LOOSE_TOL, dtype=np.float32),
        f"grf_sym@{LOOSE_TOL:g}_f32_jax": grf(normalize_graph=True, tol=LOOSE_TOL,
                                               dtype=np.float32, method="jax_cg"),
    }


def _sklearn_classes():
    from sklearn.semi_supervised import LabelPropagation, LabelSpreading

    return {"sklearn_LabelPropagation": (LabelPropagation, {"max_iter": 1000}),
            "sklearn_LabelSpreading": (LabelSpreading, {})}


def _sklearn_fit(cls, options, X, labels, kernel):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cls(kernel=kernel, n_neighbors=K, **options).fit(X, labels).transduction_


def _sklearn_graph(X):
    """scikit-learn's own kNN connectivity (what its kernel='knn' builds inside fit)."""
    from sklearn.neighbors import NearestNeighbors

    nn = NearestNeighbors(n_neighbors=K).fit(X)
    return nn.kneighbors_graph(nn._fit_X, K, mode="connectivity")


def _recall(distances, exact_dist):
    """Fraction of the exact k neighbour distances found among the returned ones (per row;
    distances, not indices, so that ties between equidistant points do not count as misses)."""
    gap = np.abs(distances[:, None, :] - exact_dist[:, :, None])
    return float(np.mean(gap.min(axis=2) <= 1e-6 * (1.0 + exact_dist)))


# ------------------------------------------------------------------------- one data set
def _graphs(X, record, repeats):
    """Build every graph ``repeats`` times (best time kept); recall against exact search."""
    import graphlearning as gl

    builders = {
        "ours_exact": lambda: knn_graph(X, K, sigma="kth_over_3", method="brute").to_scipy(),
        "ours_pca": lambda: knn_graph(X, K, sigma="kth_over_3", method="pca").to_scipy(),
        "ours_gemm": lambda: knn_graph(X, K, sigma="kth_over_3", method="gemm").to_scipy(),
        "ours_nndescent": lambda: knn_graph(X, K, sigma="kth_over_3",
                                            method="nndescent").to_scipy(),
        "graphlearning": lambda: gl.weightmatrix.knn(np.asarray(X, np.float64), K).tocsr(),
        "sklearn": lambda: _sklearn_graph(X),
    }
    graphs, times = {}, {name: [] for name in builders}
    first_call = {}  # imports, JAX compilation (gemm), numba compilation (nndescent)
    for name, build in builders.items():
        graphs[name], first_call[name], _ = _timed(build)
    for _ in range(repeats):
        for name, build in builders.items():
            graphs[name], t, load = _timed(build)
            times[name].append({"seconds": t, "load": load})
    exact = knn_search(X, K, method="brute")[1]
    recall = {"ours_exact": 1.0, "ours_gemm": _recall(knn_search(X, K, method="gemm")[1], exact),
              "ours_pca": _recall(knn_search(X, K, method="pca")[1], exact),
              "ours_nndescent": _recall(knn_search(X, K, method="nndescent")[1], exact)}
    gl_idx, gl_dist = gl.weightmatrix.knnsearch(np.asarray(X, np.float64), K + 1)
    recall["graphlearning"] = _recall(gl_dist[:, 1:], exact)
    record["graphs"] = {name: {"best_seconds": min(r["seconds"] for r in times[name]),
                               "first_call_seconds": first_call[name],
                               "runs": times[name], "recall": recall.get(name)}
                        for name in builders}
    return graphs


def run_dataset(name, X, y, splits, repeats):
    """Accuracy and best-of-``repeats`` seconds of every method on every split."""
    import graphlearning as gl

    C = int(y.max()) + 1
    record = {"dataset": name, "n": int(X.shape[0]), "d": int(X.shape[1]), "C": C,
              "n_splits": len(splits), "n_labelled": int(len(splits[0]))}
    graphs = _graphs(X, record, repeats)
    W, W_gl, W_sk = graphs["ours_exact"], graphs["graphlearning"], graphs["sklearn"]
    solvers = {m: (fn, W) for m, fn in _ours(C).items()}
    solvers["grf_on_gl_graph"] = (_ours(C)["grf"], W_gl)
    solvers[f"grf_on_gl_graph@{LOOSE_TOL:g}"] = (
        lambda A, lab: harmonic_function(A, lab, n_classes=C, tol=LOOSE_TOL).argmax(1), W_gl)
    for m, cls in (("gl_laplace", gl.ssl.laplace), ("gl_poisson", gl.ssl.poisson)):
        solvers[m] = (lambda A, lab, cls=cls: cls(A).fit_predict(
            np.flatnonzero(lab >= 0), lab[lab >= 0]), W_gl)
    for m, (cls, opts) in _sklearn_classes().items():
        solvers[m + "_precomputed"] = (
            lambda A, lab, cls=cls, opts=opts: _sklearn_fit(cls, opts, X, lab,
                                                            lambda a, b, A=A: A.copy()), W_sk)
    end_to_end = {
        "ours_exact+grf_sym@1e-3": ("ours_exact", f"grf_sym@{LOOSE_TOL:g}"),
        "ours_exact+lgc@1e-3": ("ours_exact", f"lgc@{LOOSE_TOL:g}"),
        "ours_pca+grf_sym@1e-3": ("ours_pca", f"grf_sym@{LOOSE_TOL:g}"),
        "ours_pca+grf_sym@1e-3_f32": ("ours_pca", f"grf_sym@{LOOSE_TOL:g}_f32"),
        "ours_exact+grf_sym": ("ours_exact", "grf_sym"),
        "ours_gemm+grf_sym": ("ours_gemm", "grf_sym"),
        "ours_gemm+grf_sym@1e-3": ("ours_gemm", f"grf_sym@{LOOSE_TOL:g}"),
        "ours_gemm+grf_sym@1e-3_f32": ("ours_gemm", f"grf_sym@{LOOSE_TOL:g}_f32"),
        "ours_nndescent+grf_sym@1e-3_f32": ("ours_nndescent", f"grf_sym@{LOOSE_TOL:g}_f32"),
        "ours_gemm+grf_sym@1e-3_f32_jax": ("ours_gemm", f"grf_sym@{LOOSE_TOL:g}_f32_jax"),
        "gl+gl_laplace": ("graphlearning", "gl_laplace"),
    }
    solvers["grf_sym_on_pca_graph@1e-3"] = (_ours(C)[f"grf_sym@{LOOSE_TOL:g}"],
                                            graphs["ours_pca"])
    from_features = {DEVICE_E2E: lambda X, lab: harmonic_function_from_features(
        X, lab, k=K, n_classes=C, tol=LOOSE_TOL).labels}
    for fn, A in solvers.values():  # warm-up: imports, first-call overheads
        fn(A, _labels(y, splits[0]))
    for fn in from_features.values():
        fn(X, _labels(y, splits[0]))
    runs = {m: [[] for _ in splits] for m in solvers}
    natural = {m: [[] for _ in splits] for m in list(_sklearn_classes()) + list(from_features)}
    for _ in range(repeats):
        for s, lab_idx in enumerate(splits):
            labels = _labels(y, lab_idx)
            for m, (fn, A) in solvers.items():
                pred, t, load = _timed(fn, A, labels)
                runs[m][s].append({"seconds": t, "load": load,
                                   "accuracy": _accuracy(y, pred, lab_idx)})
            for m, (cls, opts) in _sklearn_classes().items():
                pred, t, load = _timed(_sklearn_fit, cls, opts, X, labels, "knn")
                natural[m][s].append({"seconds": t, "load": load,
                                      "accuracy": _accuracy(y, pred, lab_idx)})
            for m, fn in from_features.items():
                pred, t, load = _timed(fn, X, labels)
                natural[m][s].append({"seconds": t, "load": load,
                                      "accuracy": _accuracy(y, pred, lab_idx)})
    record["solve"] = {m: _best(r) for m, r in runs.items()}
    record["end_to_end"] = {m: _best(r) for m, r in natural.items()}
    for m, (graph_name, solver) in end_to_end.items():
        g = record["graphs"][graph_name]["best_seconds"]
        record["end_to_end"][m] = [{"seconds": g + r["seconds"], "graph": g,
                                    "solve": r["seconds"], "accuracy": r["accuracy"],
                                    "load": r["load"]} for r in record["solve"][solver]]
    record["ratios"] = _ratios(record)
    return record


def _best(per_split):
    """Per split: the fastest of the repeated runs (accuracy is the same in each)."""
    return [min(reps, key=lambda r: r["seconds"]) for reps in per_split]


def _mean(runs, key):
    return float(np.mean([r[key] for r in runs]))


def _ratios(record):
    solve, e2e = record["solve"], record["end_to_end"]
    out = {"solve (a)": {}, "end_to_end (b)": {}}
    for ours in ("grf_sym", f"grf_sym@{LOOSE_TOL:g}", f"grf_sym@{LOOSE_TOL:g}_f32",
                 f"grf_sym@{LOOSE_TOL:g}_f32_jax", "lgc",
                 f"lgc@{LOOSE_TOL:g}", f"lgc@{LOOSE_TOL:g}_f32", "grf_on_gl_graph",
                 f"grf_on_gl_graph@{LOOSE_TOL:g}"):
        t = _mean(solve[ours], "seconds")
        for peer in ("gl_laplace", "gl_poisson", "sklearn_LabelPropagation_precomputed",
                     "sklearn_LabelSpreading_precomputed"):
            out["solve (a)"][f"{peer} / {ours}"] = _mean(solve[peer], "seconds") / t
    for ours in ("ours_exact+grf_sym", "ours_exact+grf_sym@1e-3", "ours_pca+grf_sym@1e-3",
                 "ours_pca+grf_sym@1e-3_f32", "ours_gemm+grf_sym", "ours_gemm+grf_sym@1e-3",
                 "ours_gemm+grf_sym@1e-3_f32", "ours_nndescent+grf_sym@1e-3_f32",
                 "ours_gemm+grf_sym@1e-3_f32_jax", DEVICE_E2E):
        t = _mean(e2e[ours], "seconds")
        for peer in ("gl+gl_laplace", "sklearn_LabelPropagation", "sklearn_LabelSpreading"):
            out["end_to_end (b)"][f"{peer} / {ours}"] = _mean(e2e[peer], "seconds") / t
    return out


# ------------------------------------------------------------------------- tolerance sweep
def tolerance_sweep(W, y, splits, tols=(1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 1e-4, 1e-5, 1e-7)):
    """Accuracy, CG iterations and argmax agreement with a 1e-10 solve, against ``tol``."""
    C = int(y.max()) + 1
    out = {}
    for model, fn in (("grf_sym", lambda lab, **kw: harmonic_function(
            W, lab, n_classes=C, normalize_graph=True, return_info=True, **kw)),
            ("lgc", lambda lab, **kw: lgc(W, lab, n_classes=C, return_info=True, **kw))):
        refs = [fn(_labels(y, s), tol=1e-10)[0].argmax(1) for s in splits]
        rows = []
        for tol in tols:
            acc, agree, iters, secs = [], [], [], []
            for s, ref in zip(splits, refs, strict=True):
                (F, info), t, _ = _timed(fn, _labels(y, s), tol=tol)
                acc.append(_accuracy(y, F.argmax(1), s))
                agree.append(float(np.mean(F.argmax(1) == ref)))
                iters.append(info.iterations)
                secs.append(t)
            rows.append({"tol": tol, "accuracy": float(np.mean(acc)),
                         "argmax_agreement_min": float(np.min(agree)),
                         "iterations": float(np.mean(iters)), "seconds": float(np.mean(secs))})
        out[model] = rows
    return out


# ------------------------------------------------------------------------- tables
def print_record(record):
    print(f"\n{record['dataset']}: n = {record['n']}, d = {record['d']}, "
          f"{record['n_splits']} splits of {record['n_labelled']} labels")
    print("  graph build (best of repeats):")
    for k, v in record["graphs"].items():
        recall = "-" if v["recall"] is None else f"{v['recall']:.4f}"
        print(f"    {k:<16} {v['best_seconds']:.3f} s  recall {recall}  "
              f"(first call {v['first_call_seconds']:.3f} s)")
    for title, key in (("(a) per-split solve, graph built once", "solve"),
                       ("(b) end to end from X, one split", "end_to_end")):
        print(f"  {title}")
        print(f"    {'method':<42} {'accuracy':>8} {'seconds':>9}")
        for m, runs in record[key].items():
            print(f"    {m:<42} {_mean(runs, 'accuracy'):8.4f} {_mean(runs, 'seconds'):9.4f}")
    for title, ratios in record["ratios"].items():
        print(f"  speed-up, {title} (peer seconds / ours):")
        for k, v in ratios.items():
            print(f"    {k:<62} {v:6.2f}x")


def print_sweep(sweep):
    print("\ntolerance sweep, usps_full 2 % (mean over splits):")
    for model, rows in sweep.items():
        for r in rows:
            print(f"  {model:<8} tol {r['tol']:<7g} acc {r['accuracy']:.4f}  argmax agreement "
                  f">= {r['argmax_agreement_min']:.4f}  {r['iterations']:5.1f} it  "
                  f"{r['seconds']:.4f} s")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="Digit1 only, 3 splits, 1 round")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--datasets", nargs="+", default=["usps_full", "digit1"],
                        choices=["usps_full", "digit1"])
    parser.add_argument("--tag", default="",
                        help="suffix of the JSON name (e.g. gpu: bench_baselines_gpu.json)")
    args = parser.parse_args()
    repeats = 1 if args.quick else args.repeats
    rows, sweep = [], {}
    if not args.quick and "usps_full" in args.datasets:
        usps = load_dataset("usps_full")
        splits = list(random_splits(usps.y, 0.02, n_splits=5, seed=0))
        rows.append(run_dataset("usps_full 2%", usps.X, usps.y, splits, repeats))
        print_record(rows[-1])
        W = knn_graph(usps.X, K, sigma="kth_over_3").to_scipy()
        sweep = tolerance_sweep(W, usps.y, splits)
        print_sweep(sweep)
    if args.quick or "digit1" in args.datasets:
        digit1 = load_dataset("digit1")
        for L in (10, 100):
            splits = list(digit1.splits[f"labeled_{L}"])[: 3 if args.quick else None]
            rows.append(run_dataset(f"digit1 {L} labels", digit1.X, digit1.y, splits, repeats))
            print_record(rows[-1])
    import importlib.metadata as md

    import scipy
    import sklearn

    meta = {"device": str(jax.devices()[0]), "platform": platform.platform(),
            "cpu_count": os.cpu_count(), "python": platform.python_version(),
            "versions": {"jax": jax.__version__, "numpy": np.__version__,
                         "scipy": scipy.__version__, "sklearn": sklearn.__version__,
                         "graphlearning": md.version("graphlearning")},
            "repeats": repeats, "loose_tol": LOOSE_TOL,
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "loadavg_end": os.getloadavg()}
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = "bench_baselines" + ("_quick" if args.quick else "") + (f"_{args.tag}" if args.tag
                                                                   else "")
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"meta": meta, "datasets": rows, "tolerance_sweep": sweep},
                               indent=1))
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
