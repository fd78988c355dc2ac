"""BoltzmannMRFClassifier with its DEFAULTS beside the harmonic function on the same graph.

Issue 25 (items 2, 3, 5) for the Boltzmann MRF: ``BoltzmannMRFClassifier().fit(X, y)`` on

* ``two_moons``: ``graphssl.data.two_moons(300, seed=s)`` (Bergamim & Breve's generator,
  noise 0.24), 3 labels per class;
* scikit-learn's ``iris``, ``wine``, ``breast_cancer``, ``digits``: 10 labels per class,
  features standardised (a constant column stays 0);

``--splits`` random splits (seed ``s`` = split index), and beside it, same split:

* ``HF same graph``: the harmonic function on the Boltzmann MRF's own pairs with its chosen
  couplings ``A_ij`` (its zero-noise Gaussian relaxation);
* ``HF default``: ``HarmonicFunctionClassifier().fit(X, y)`` (its own kNN graph).

Each set runs in a fresh worker process: the first fit's CPU seconds include JAX
compilation (what a user pays once per process and shape), the later ones are warm; CPU
seconds are ``time.process_time`` (all threads of the process). ``--n2000`` adds a fresh
process that fits ``two_moons(2000)`` (10 labels per class) once: import and fit CPU seconds
(issue 25 item 5: a default fit on up to 2000 points within 10 s on 2 cores).
``--citeseer`` adds ``fit_graph(citation_graph, y, X=features)`` on CiteSeer's Planetoid
split (needs ``--data-dir``): accuracy on ``split_val`` and, read once, ``split_test``.
``--window`` (a probe of the model, not of the default): for each set and split, after the
default fit, the coupling ``alpha_0`` is forced along ``--window-grid`` at the chosen length
scale and the posterior sampled from random starts (the estimator's chains, no annealing):
posterior-mean and MAP accuracy at each ``alpha_0`` beside HF on the same graph, i.e. how
wide the window of couplings is in which the discrete MRF carries the labels.

Usage::

    python benchmarks/bench_boltzmann_defaults.py [--splits 5] [--sets two_moons wine ...]
        [--n2000] [--citeseer --data-dir ../shared/datasets] [--tag TAG]
    python benchmarks/bench_boltzmann_defaults.py --window --sets breast_cancer --splits 2
        --tag window

Writes ``benchmarks/results/bench_boltzmann_defaults[_TAG].json`` and prints a table.
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

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
SETS = ("two_moons", "iris", "wine", "breast_cancer", "digits")


def load_set(name, seed):
    """``(X, y, labels)`` of one split (labels -1 where unlabelled)."""
    import numpy as np

    if name == "two_moons":
        from graphssl.data import two_moons

        ds = two_moons(300, seed=seed)
        X, y, per_class = np.asarray(ds.X, float), np.asarray(ds.y), 3
    elif name == "two_moons_2000":
        from graphssl.data import two_moons

        ds = two_moons(2000, seed=seed)
        X, y, per_class = np.asarray(ds.X, float), np.asarray(ds.y), 10
    else:
        import sklearn.datasets as skd

        X, y = getattr(skd, f"load_{name}")(return_X_y=True)
        sd = X.std(0)
        X, per_class = (X - X.mean(0)) / np.where(sd > 0, sd, 1.0), 10
    rng = np.random.default_rng(seed)
    labels = np.full(len(y), -1)
    for c in np.unique(y):
        labels[rng.choice(np.flatnonzero(y == c), per_class, replace=False)] = c
    return X, np.asarray(y), labels


# ------------------------------------------------------------------------- worker side
def _accuracy(pred, y, mask):
    import numpy as np

    return float(np.mean(np.asarray(pred)[mask] == y[mask]))


def _hf_same_graph(clf, labels):
    """HF on the Boltzmann MRF's pairs with its chosen couplings."""
    import numpy as np

    from graphssl.estimators import HarmonicFunctionClassifier
    from graphssl.graph import Graph

    model = clf._sampled_model
    g = model.graph
    graph = Graph(g.senders, g.receivers, g.weights, g.n_nodes)
    return np.asarray(HarmonicFunctionClassifier().fit_graph(graph, labels).transduction_)


def run_set(name, splits):
    """Worker: every split of one set in this (fresh) process; one JSON line per split."""
    import warnings

    t_start = time.process_time()

    from graphssl.estimators import BoltzmannMRFClassifier, HarmonicFunctionClassifier

    t_import = time.process_time() - t_start
    for seed in range(splits):
        X, y, labels = load_set(name, seed)
        free = labels < 0
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t0 = time.process_time()
            clf = BoltzmannMRFClassifier().fit(X, labels)
            fit_cpu = time.process_time() - t0
        hf_same = _hf_same_graph(clf, labels)
        hf_default = HarmonicFunctionClassifier().fit(X, labels).transduction_
        g = clf.grid_
        record = dict(
            set=name, split=seed, n=len(y), n_classes=int(y.max() + 1),
            n_labelled=int((~free).sum()),
            boltzmann_pm=_accuracy(clf.transduction_, y, free),
            boltzmann_map=_accuracy(clf.map_labels_, y, free),
            hf_same_graph=_accuracy(hf_same, y, free),
            hf_default=_accuracy(hf_default, y, free),
            fit_cpu_s=fit_cpu, import_cpu_s=t_import if seed == 0 else None,
            first_fit_in_process=seed == 0,
            alpha0=g.alpha0, log_scale_offset=g.log_scale_offset, sigma0=g.sigma0,
            n_sweeps=g.n_sweeps, learning=clf.learning_, method=clf.method_,
            warnings=sorted({f"{w.category.__name__}: {str(w.message).splitlines()[0][:90]}"
                             for w in caught}),
        )
        print("RESULT " + json.dumps(record), flush=True)


def run_window(name, splits, grid):
    """Worker: the default fit, then the posterior at each forced ``alpha_0`` of ``grid``
    (same length scale, random starts); one JSON line per (split, alpha_0)."""
    import jax
    import numpy as np

    from graphssl.estimators import BoltzmannMRFClassifier
    from graphssl.inference.boltzmann import learning as bl
    from graphssl.inference.boltzmann import selection as bs

    for seed in range(splits):
        X, y, labels = load_set(name, seed)
        free = labels < 0
        clf = BoltzmannMRFClassifier().fit(X, labels)
        hf_same = _accuracy(_hf_same_graph(clf, labels), y, free)
        geometry = clf._geometry(None, "knn")
        problem = bl.BoltzmannProblem(geometry, np.asarray(labels), int(max(y.max() + 1, 2)),
                                      clf.model)
        template, theta = problem.template(), clf.theta_
        for a0 in grid:
            forced = theta._replace(alpha0=np.asarray(a0, np.asarray(theta.alpha0).dtype))
            model = bs.grid_model(template, geometry, forced, clf.model == "basic")
            post = bs.grid_posterior(model, labels, jax.random.key(seed), method=clf.method_,
                                     chains=clf._chains())
            print("RESULT " + json.dumps(dict(
                set=name, split=seed, window=True, alpha0=float(a0),
                chosen_alpha0=float(clf.grid_.alpha0),
                log_scale_offset=float(clf.grid_.log_scale_offset),
                default_pm=_accuracy(clf.transduction_, y, free),
                pm=_accuracy(post.posterior_mean_labels, y, free),
                map=_accuracy(post.map_labels, y, free),
                hf_same_graph=hf_same)), flush=True)


def run_n2000():
    """Worker: one default fit on two_moons(2000), 10 labels per class, fresh process."""
    t_start = time.process_time()
    import numpy as np

    from graphssl.estimators import BoltzmannMRFClassifier

    t_import = time.process_time() - t_start
    X, y, labels = load_set("two_moons_2000", 0)
    t0 = time.process_time()
    clf = BoltzmannMRFClassifier().fit(X, labels)
    fit_cpu = time.process_time() - t0
    free = labels < 0
    print("RESULT " + json.dumps(dict(
        set="two_moons_2000", n=len(y), import_cpu_s=t_import, fit_cpu_s=fit_cpu,
        boltzmann_pm=float(np.mean(clf.transduction_[free] == y[free])),
        n_sweeps=clf.grid_.n_sweeps)), flush=True)


def run_citeseer(data_dir):
    """Worker: the graph + features route on CiteSeer (Planetoid split), fresh process."""
    t_start = time.process_time()
    import numpy as np

    from graphssl.data import load_citation
    from graphssl.estimators import BoltzmannMRFClassifier

    t_import = time.process_time() - t_start
    data = load_citation("planetoid_citeseer", data_dir)
    y = np.asarray(data.y)
    labels = np.where(np.asarray(data.train_mask), y, -1)
    t0 = time.process_time()
    clf = BoltzmannMRFClassifier().fit_graph(data.graph, labels, X=data.features)
    fit_cpu = time.process_time() - t0
    val, test = np.asarray(data.val_mask), np.asarray(data.test_mask)
    pred = np.asarray(clf.transduction_)
    print("RESULT " + json.dumps(dict(
        set="citeseer", n=len(y), import_cpu_s=t_import, fit_cpu_s=fit_cpu,
        val=float(np.mean(pred[val] == y[val])), test=float(np.mean(pred[test] == y[test])),
        test_map=float(np.mean(np.asarray(clf.map_labels_)[test] == y[test])),
        alpha0=clf.grid_.alpha0, log_scale_offset=clf.grid_.log_scale_offset,
        n_unreached=int(clf.n_unreached_))), flush=True)


# ------------------------------------------------------------------------- driver side
def _worker(args, timeout):
    """Run this script as a worker in a fresh process; its RESULT lines as dicts."""
    env = dict(os.environ, JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
    cmd = [sys.executable, __file__, *args]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return [dict(error=f"timeout after {timeout} s", args=args)]
    rows = [json.loads(line[7:]) for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if out.returncode != 0:
        rows.append(dict(error=out.stderr.strip().splitlines()[-1:] or ["?"], args=args))
    return rows


def _mean(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return sum(vals) / len(vals) if vals else float("nan")


def print_window(rows):
    print("| set | split | alpha_0 | PM | MAP | default (chosen alpha_0) | HF same graph |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        if r.get("window"):
            mark = " *" if abs(r["alpha0"] - r["chosen_alpha0"]) < 1e-9 else ""
            print(f"| {r['set']} | {r['split']} | {r['alpha0']:+.1f}{mark} | {r['pm']:.3f} | "
                  f"{r['map']:.3f} | {r['default_pm']:.3f} ({r['chosen_alpha0']:+.1f}) | "
                  f"{r['hf_same_graph']:.3f} |")


def print_table(rows):
    print("| set | n | splits | Boltzmann PM | Boltzmann MAP | HF same graph | HF default | "
          "first fit CPU s | warm fit CPU s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in SETS:
        rs = [r for r in rows if r.get("set") == name and "error" not in r]
        if not rs:
            continue
        first = [r for r in rs if r["first_fit_in_process"]]
        warm = [r for r in rs if not r["first_fit_in_process"]]
        print(f"| {name} | {rs[0]['n']} | {len(rs)} | {_mean(rs, 'boltzmann_pm'):.3f} | "
              f"{_mean(rs, 'boltzmann_map'):.3f} | {_mean(rs, 'hf_same_graph'):.3f} | "
              f"{_mean(rs, 'hf_default'):.3f} | {_mean(first, 'fit_cpu_s'):.1f} | "
              f"{_mean(warm, 'fit_cpu_s'):.1f} |")
    for r in rows:
        if r.get("set") == "two_moons_2000":
            print(f"two_moons n=2000, fresh process: import {r['import_cpu_s']:.1f} CPU s, "
                  f"fit {r['fit_cpu_s']:.1f} CPU s, accuracy {r['boltzmann_pm']:.3f}")
        if r.get("set") == "citeseer":
            print(f"CiteSeer fit_graph(G, y, X): val {r['val']:.3f}, test {r['test']:.3f} "
                  f"(MAP {r['test_map']:.3f}); fit {r['fit_cpu_s']:.1f} CPU s")
        if "error" in r:
            print("error:", r)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--sets", nargs="*", default=list(SETS), choices=SETS)
    parser.add_argument("--n2000", action="store_true")
    parser.add_argument("--citeseer", action="store_true")
    parser.add_argument("--data-dir", default=os.environ.get("GRAPHSSL_DATA"))
    parser.add_argument("--timeout", type=int, default=1800)
    parser.add_argument("--tag", default="")
    parser.add_argument("--window", action="store_true")
    parser.add_argument("--window-grid", nargs="+", type=float,
                        default=[-2.5, -2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0])
    parser.add_argument("--worker", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        kind = args.worker[0]
        if kind == "set":
            return run_set(args.worker[1], int(args.worker[2]))
        if kind == "n2000":
            return run_n2000()
        if kind == "window":
            return run_window(args.worker[1], int(args.worker[2]),
                              [float(a) for a in args.worker[3:]])
        return run_citeseer(args.worker[1])
    rows = []
    for name in args.sets:
        if args.window:
            rows += _worker(["--worker", "window", name, str(args.splits),
                             *map(str, args.window_grid)], args.timeout)
            continue
        rows += _worker(["--worker", "set", name, str(args.splits)], args.timeout)
        print(f"{name}: done", flush=True)
    if args.n2000:
        rows += _worker(["--worker", "n2000"], args.timeout)
    if args.citeseer:
        if not args.data_dir:
            raise SystemExit("--citeseer needs --data-dir (or GRAPHSSL_DATA)")
        rows += _worker(["--worker", "citeseer", str(args.data_dir)], args.timeout)
    print_window(rows) if args.window else print_table(rows)
    import jax

    payload = dict(rows=rows, splits=args.splits, machine=platform.machine(),
                   processor=platform.processor(), cpu_count=os.cpu_count(),
                   jax=jax.__version__, python=platform.python_version(),
                   date=time.strftime("%Y-%m-%d %H:%M"))
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"bench_boltzmann_defaults{'_' + args.tag if args.tag else ''}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, indent=1))
    tmp.replace(path)
    print(f"wrote {path.name}")


if __name__ == "__main__":
    main()
