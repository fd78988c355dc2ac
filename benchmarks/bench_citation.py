"""Graphs that come with the data: every model on CiteSeer (Planetoid split), beside the papers.

``python benchmarks/bench_citation.py [--data-dir DIR] [--seeds 10] [--timeout 180]``

Data: ``planetoid_citeseer.npz`` from ``--data-dir`` or ``$GRAPHSSL_DATA`` (layout:
:mod:`graphssl.data.citation`); 120 labels, ``split_val`` (500) for choices, ``split_test``
(1000) read once per row for the report. Rows (graph = the symmetrised citation graph):

* ``feature model``: logistic regression with a Gaussian prior on unit-norm word rows, prior
  precision by 5-fold CV on the 120 labels (:mod:`graphssl.inference.optimize.logistic`);
* ``HF`` / ``LGC`` / ``Potts MF (graph only)``: the estimators' ``fit_graph`` without
  features; nodes no label reaches get the feature model's prediction (``fill_unreached``);
* ``feature Potts MF``: ``PottsClassifier().fit_graph(G, y, X=features)`` with its defaults
  -- the recommended model (feature unary, alpha and beta by pseudo-likelihood, mean field);
* ``feature Potts MF + kNN 10``: the same CRF on citations joined with a cosine kNN graph;
* ``feature Potts SW`` / ``Gibbs``: the learned CRF sampled (posterior mean; MAP = ICM from the
  best draw);
* ``Boltzmann MRF`` (on 10 SVD components of the word rows: it learns one length scale per
  feature and needs dense X), ``harmonic mixture`` (``mixture="multinomial"`` on the word
  counts), ``diffusion mixture`` (graph only): each estimator's ``fit_graph`` with its other
  defaults in a subprocess under ``--timeout`` seconds (what happens is recorded: accuracy, an
  error, or the time-out); nodes no label reaches get the feature model's prediction.

Stochastic parts (CV folds of the feature model, MCMC chains) run over ``--seeds`` seeds:
mean and standard deviation. Fit time: the first fit in the process (JIT compilation
included) and the median of the others, on this machine's CPU. Also timed: the feature
model's value-and-gradient on the host (scipy CSR) against the jitted BCOO one, and a whole
fit by each route (``feature_model_routes`` in the JSON). Writes
``benchmarks/results/bench_citation.json`` and prints a table beside the published figures
(Kipf & Welling 2017, Table 2; GMNN: Qu, Bengio & Tang 2019).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import time
import warnings

import numpy as np

PUBLISHED = {"LP": 45.3, "ManiReg": 60.1, "SemiEmb": 59.6, "DeepWalk": 43.2, "ICA": 69.1,
             "Planetoid": 64.7, "GCN": 70.3, "GMNN": 72.9}
RESULTS = pathlib.Path(__file__).resolve().parent / "results"
HEAVY = ("boltzmann", "harmonic_mixture", "diffusion_mixture")


def _scores(data, proba, map_labels=None):
    from graphssl.metrics import expected_calibration_error

    proba = np.asarray(proba, dtype=np.float64)
    proba = proba / proba.sum(axis=1, keepdims=True)
    pred = proba.argmax(1)
    out = {}
    for split, mask in (("val", data.val_mask), ("test", data.test_mask)):
        out[f"{split}_acc"] = float(np.mean(pred[mask] == data.y[mask]))
        if map_labels is not None:
            out[f"{split}_acc_map"] = float(np.mean(map_labels[mask] == data.y[mask]))
    out["test_ece"] = expected_calibration_error(data.y[data.test_mask], proba[data.test_mask])
    return out


def _timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def _feature_probs(data, seed=0):
    from graphssl.inference.optimize.logistic import cross_fitted_log_probabilities
    from graphssl.models.feature_model import normalize_rows

    fit = cross_fitted_log_probabilities(normalize_rows(data.features), data.train_labels(),
                                         data.n_classes, seed=seed)
    return np.exp(fit.log_probs), fit


def run_seeded(name, data, fn, seeds):
    """``fn(seed) -> (proba, map_labels or None)``; scores and times over seeds."""
    runs, times = [], []
    for seed in seeds:
        (proba, map_labels), seconds = _timed(lambda s=seed: fn(s))
        runs.append(_scores(data, proba, map_labels))
        times.append(seconds)
        print(f"  {name} seed {seed}: {runs[-1]} ({seconds:.1f} s)", flush=True)
    keys = runs[0].keys()
    row = {"model": name, "n_seeds": len(seeds),
           "fit_s_first": times[0], "fit_s_median": float(np.median(times[1:] or times))}
    for k in keys:
        vals = np.array([r[k] for r in runs])
        row[k], row[k + "_sd"] = float(vals.mean()), float(vals.std(ddof=1) if vals.size > 1 else 0)
    return row


def time_feature_routes(data, repeats=20):
    """Host scipy-CSR value-and-gradient of Eq. (2) vs the jitted BCOO one (same inputs: all
    rows, soft targets), and a whole MAP fit on the 120 labels by each route."""
    import jax
    import jax.numpy as jnp

    from graphssl.inference.optimize.logistic import _host_objective, fit_feature_model
    from graphssl.models.feature_model import (
        FeatureModelParams,
        as_feature_matrix,
        feature_log_posterior,
        normalize_rows,
    )

    X = normalize_rows(data.features)
    n, d, C = X.shape[0], X.shape[1], data.n_classes
    rng = np.random.default_rng(0)
    T, w = rng.dirichlet(np.ones(C), size=n), np.ones(n)
    flat = rng.normal(size=d * C + C) * 0.01
    host = _host_objective(X, T, w, 1.0)
    Xb, Tj, wj = as_feature_matrix(X), jnp.asarray(T), jnp.asarray(w)

    @jax.jit
    def bcoo(flat):
        def f(flat):
            params = FeatureModelParams(flat[: d * C].reshape(d, C), flat[d * C:])
            return -feature_log_posterior(params, Xb, Tj, wj, 1.0) / n
        return jax.value_and_grad(f)(flat)

    jax.block_until_ready(bcoo(jnp.asarray(flat)))
    _, host_s = _timed(lambda: [host(flat) for _ in range(repeats)])
    _, bcoo_s = _timed(lambda: [jax.block_until_ready(bcoo(jnp.asarray(flat)))
                                for _ in range(repeats)])
    labels = data.train_labels()
    fits = {}
    for method in ("scipy", "optax"):
        fit_feature_model(X, labels, prior_precision=1.0, method=method)  # compile / warm up
        _, fits[method] = _timed(lambda m=method: jax.block_until_ready(
            fit_feature_model(X, labels, prior_precision=1.0, method=m)[0]))
    out = {"host_csr_eval_ms": 1e3 * host_s / repeats, "bcoo_jit_eval_ms": 1e3 * bcoo_s / repeats,
           "fit_scipy_s": fits["scipy"], "fit_optax_bcoo_s": fits["optax"]}
    print("feature model routes:", {k: round(v, 3) for k, v in out.items()}, flush=True)
    return out


def graph_only(data, estimator, feature_probs):
    from graphssl.inference.optimize.feature_potts import fill_unreached

    labels = data.train_labels()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = estimator.fit_graph(data.graph, labels)
    return fill_unreached(clf.label_distributions_, data.graph, labels, feature_probs), None


def heavy(data, name):
    """One default fit of a heavy estimator (run in a subprocess by ``main``)."""
    from sklearn.decomposition import TruncatedSVD

    from graphssl.estimators import (
        BoltzmannMRFClassifier,
        DiffusionMixtureClassifier,
        HarmonicMixtureClassifier,
    )
    from graphssl.inference.optimize.feature_potts import fill_unreached
    from graphssl.models.feature_model import normalize_rows

    # the Boltzmann MRF learns one length scale per feature and wants dense X: 10 SVD
    # components of the unit-norm rows; the harmonic mixture's multinomial mixture takes counts
    X = {"boltzmann": lambda: TruncatedSVD(10, random_state=0).fit_transform(
            normalize_rows(data.features)),
         "harmonic_mixture": lambda: data.features,
         "diffusion_mixture": lambda: None}[name]()
    make = {"boltzmann": BoltzmannMRFClassifier,
            "harmonic_mixture": lambda: HarmonicMixtureClassifier(mixture="multinomial"),
            "diffusion_mixture": DiffusionMixtureClassifier}[name]
    labels = data.train_labels()
    probs, _ = _feature_probs(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf, seconds = _timed(lambda: make().fit_graph(data.graph, labels, X=X))
    dist = fill_unreached(clf.label_distributions_, data.graph, labels, probs)
    return {"model": name, "fit_s_first": seconds, **_scores(data, dist)}


def _heavy_subprocess(name, data_dir, timeout):
    cmd = [sys.executable, __file__, "--only", name]
    if data_dir:
        cmd += ["--data-dir", str(data_dir)]
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"model": name, "status": f"no result within {timeout} s (killed)"}
    seconds = time.perf_counter() - start
    for line in done.stdout.splitlines()[::-1]:
        if line.startswith("{"):
            return {**json.loads(line), "status": "ok", "process_s": seconds}
    error = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return {"model": name, "status": f"failed: {error[:200]}", "process_s": seconds}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--mcmc-seeds", type=int, default=None,
                        help="seeds of the sampled rows (default: --seeds)")
    parser.add_argument("--timeout", type=int, default=180)
    parser.add_argument("--skip-heavy", action="store_true")
    parser.add_argument("--only", choices=HEAVY, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    from graphssl.data import load_citation

    data = load_citation("planetoid_citeseer", data_dir=args.data_dir)
    if args.only:
        print(json.dumps(heavy(data, args.only)))
        return
    print(data.report())
    routes = time_feature_routes(data)
    from graphssl.estimators import HarmonicFunctionClassifier, LGCClassifier, PottsClassifier
    from graphssl.inference.optimize.feature_potts import fit_feature_potts, sample_feature_potts

    seeds = list(range(args.seeds))
    mcmc_seeds = list(range(args.mcmc_seeds if args.mcmc_seeds is not None else args.seeds))
    probs, _ = _feature_probs(data)
    rows = [run_seeded("feature model (logistic, CV prior)", data,
                       lambda s: (_feature_probs(data, s)[0], None), seeds)]
    for name, est in (("HF (citations)", HarmonicFunctionClassifier()),
                      ("LGC (citations)", LGCClassifier()),
                      ("Potts MF, graph only (citations)", PottsClassifier(features=None))):
        rows.append(run_seeded(name, data, lambda s, e=est: graph_only(data, e, probs), [0]))
    labels = data.train_labels()
    rows.append(run_seeded(
        "feature Potts MF (PottsClassifier defaults)", data,
        lambda s: (PottsClassifier(random_state=s).fit_graph(
            data.graph, labels, X=data.features).label_distributions_, None), seeds))
    rows.append(run_seeded(
        "feature Potts MF + cosine kNN 10", data,
        lambda s: (fit_feature_potts(data.graph, data.features, labels, knn=10,
                                     seed=s).marginals, None), seeds))
    fit = fit_feature_potts(data.graph, data.features, labels, seed=0)
    for kernel in ("swendsen_wang", "gibbs"):
        rows.append(run_seeded(
            f"feature Potts {kernel} (PM / MAP by ICM)", data,
            lambda s, k=kernel: sample_feature_potts(fit, kernel=k, n_chains=2, n_samples=100,
                                                     burn_in=50, seed=s)[:2], mcmc_seeds))
    if not args.skip_heavy:
        for name in HEAVY:
            print(f"  {name}: subprocess, timeout {args.timeout} s", flush=True)
            rows.append(_heavy_subprocess(name, args.data_dir, args.timeout))
    _report(rows, data, args, routes)


def _report(rows, data, args, routes):
    print(f"\n{'model':48s} {'val':>6s} {'test':>13s} {'MAP':>6s} {'ECE':>6s} "
          f"{'fit s (1st/med)':>16s}")
    for r in rows:
        if "test_acc" not in r:
            print(f"{r['model']:48s} {r.get('status', '')}")
            continue
        sd = f"±{r['test_acc_sd']:.3f}" if r.get("test_acc_sd") else "      "
        mp = f"{r['test_acc_map']:.3f}" if "test_acc_map" in r else "   -  "
        print(f"{r['model']:48s} {r['val_acc']:6.3f} {r['test_acc']:6.3f}{sd:7s} {mp:>6s} "
              f"{r['test_ece']:6.3f} {r['fit_s_first']:7.1f}/{r.get('fit_s_median', 0):<7.1f}")
    print("published (test, %): " + ", ".join(f"{k} {v}" for k, v in PUBLISHED.items()))
    RESULTS.mkdir(exist_ok=True)
    out = {"benchmark": "bench_citation", "data": "planetoid_citeseer", "report": data.report(),
           "published_test_accuracy_percent": PUBLISHED, "rows": rows,
           "feature_model_routes": routes,
           "settings": {"seeds": args.seeds, "mcmc_seeds": args.mcmc_seeds,
                        "timeout_s": args.timeout},
           "machine": {"platform": platform.platform(), "python": platform.python_version(),
                       "cpu_count": os.cpu_count()},
           "selection_rule": "choices on split_val only; the kNN join is kept only if it beats "
                             "the given graph by more than one standard error on split_val"}
    path = RESULTS / "bench_citation.json"
    path.write_text(json.dumps(out, indent=1))
    print(f"wrote benchmarks/results/{path.name}")


if __name__ == "__main__":
    main()
