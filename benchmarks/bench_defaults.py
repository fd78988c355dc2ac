"""Every public estimator with its DEFAULTS on a public panel, beside the peers, same splits.

Issue 25 ("defaults that win"): a user calls ``Estimator().fit(X, y)``; this script measures
what that gives. Nothing here is tuned: each estimator is built with no argument at all.

Panel (``--sets``; a set whose data is absent is skipped with the reason recorded):

* scikit-learn's iris, wine, breast_cancer, digits: ``--splits`` random splits (seed 0) with
  10 labels per class; wine and breast_cancer standardised (their feature scales differ by
  orders of magnitude), iris and digits as they are. Every method gets the same X.
* Bergamim & Breve's two moons and three clusters (``ssl_nmf_*``, their 2 % / 10 % splits).
* SSL-book Digit1, USPS, Text, COIL2 with the shipped splits of 10 and of 100 labels.
* usps_full with 2 % labels per class (``graphssl.data.random_splits``, seed 0).
* ``--sets heldout``: the sets of ../shared that no default was chosen on (``HELDOUT``), for
  reporting only.
* CiteSeer (Planetoid split) through the graph + features route:
  ``Estimator().fit_graph(citation_graph, y, X=features)``; accuracy on ``split_test``.

Peers in the same run: scikit-learn ``LabelSpreading`` / ``LabelPropagation`` (kernel
``knn``, k = 10) and, when installed (``pip install -e '.[peers]'``), GraphLearning
``laplace`` / ``poisson`` on its own kNN graph (k = 10). On CiteSeer the scikit-learn peers
see the features and GraphLearning the citation graph.

Each (set, method) runs in a worker process of its own (one for all splits, so compiled
functions are reused as in a notebook session); a fit that uses more than ``--timeout`` CPU
seconds (all its threads; ``--wall-timeout`` wall seconds, default ten times that) is
recorded as a timeout and the cell ends there. Recorded per split: posterior-mean
(``transduction_``) accuracy and, where the estimator has one, MAP (``map_labels_``)
accuracy on the unlabelled points, fit seconds (wall and the worker's CPU seconds, all its
threads), and every warning raised (category and the
first line of its message). Results go to ``benchmarks/results/bench_defaults[_TAG].json``
after every cell (atomically), so an interrupted run resumes where it stopped
(``--restart`` refits).

Usage::

    python benchmarks/bench_defaults.py --data-dir ../shared/datasets [--quick]
        [--sets iris wine ...] [--methods PottsClassifier sklearn_LabelSpreading ...]
        [--splits 10] [--timeout 300 (CPU s)] [--tag TAG]
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import functools
import json
import os
import pathlib
import platform
import re
import time
import traceback
import warnings

import numpy as np

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
print = functools.partial(print, flush=True)  # noqa: A001 - progress when piped to a log
K_PEERS = 10
SKLEARN_SETS = ("iris", "wine", "breast_cancer", "digits")
STANDARDISE = ("wine", "breast_cancer")
SSLBOOK_SETS = ("digit1", "usps", "text", "coil2")
PANEL = (*SKLEARN_SETS, "two_moons", "three_clusters",
         *(f"{s}_{n}" for s in SSLBOOK_SETS for n in (10, 100)), "usps_full_2pct", "citeseer")
# Held-out panel (``--sets heldout``): sets of ../shared that no default was chosen on, for
# checking that the defaults carry over (never used to choose one). UCI sets: 10 labels a
# class, random splits; SSL-book style sets: their shipped splits; the large KEEL / UCI sets:
# 1 % labels a class. Features standardised where the column spreads differ by more than an
# order of magnitude (graphssl.scaling's rule), for every method alike, as the panel does.
HELDOUT_UCI = ("bupa", "house_votes_84", "ionosphere", "monks1", "monks2", "monks3", "musk1",
               "pima", "tae", "newsgroups_pc_vs_mac_small")
HELDOUT_SHIPPED = ("bci", "g241c", "g241n", "coil")
HELDOUT_LARGE = ("ringnorm_keel", "twonorm_keel", "satimage_keel", "mushroom")
HELDOUT = (*HELDOUT_UCI, *(f"{s}_10" for s in HELDOUT_SHIPPED),
           *(f"{s}_1pct" for s in HELDOUT_LARGE))
PEERS = ("sklearn_LabelSpreading", "sklearn_LabelPropagation", "gl_laplace", "gl_poisson")


# ------------------------------------------------------------------------- the panel
def _per_class_splits(y, per_class, n_splits, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_splits):
        idx = [rng.choice(np.flatnonzero(y == c), per_class, replace=False)
               for c in np.unique(y)]
        out.append(np.sort(np.concatenate(idx)))
    return out


def load_panel_set(name, data_dir, n_splits):
    """``dict(X, y, splits, eval_mask=None, graph=None)`` for one panel entry."""
    from graphssl.data import fixed_splits, load_dataset, random_splits

    if name in SKLEARN_SETS:
        import sklearn.datasets as skd

        X, y = getattr(skd, f"load_{name}")(return_X_y=True)
        X = np.asarray(X, float)
        if name in STANDARDISE:
            X = (X - X.mean(0)) / X.std(0)
        return dict(X=X, y=np.asarray(y), splits=_per_class_splits(y, 10, n_splits))
    if name in ("two_moons", "three_clusters"):
        data = load_dataset(f"ssl_nmf_{name}", data_dir)
        splits = [*fixed_splits(data, "labeled_pct02")[:n_splits],
                  *fixed_splits(data, "labeled_pct10")[:n_splits]]
        return dict(X=np.asarray(data.X, float), y=np.asarray(data.y), splits=splits)
    if name.rsplit("_", 1)[0] in SSLBOOK_SETS:
        base, n_labels = name.rsplit("_", 1)
        data = load_dataset(base, data_dir)
        return dict(X=np.asarray(data.X, float), y=np.asarray(data.y),
                    splits=list(fixed_splits(data, int(n_labels))[:n_splits]))
    if name == "usps_full_2pct":
        data = load_dataset("usps_full", data_dir)
        y = np.asarray(data.y)
        return dict(X=np.asarray(data.X, float), y=y,
                    splits=list(random_splits(y, 0.02, n_splits=min(n_splits, 5), seed=0)))
    if name == "citeseer":
        from graphssl.data import load_citation

        data = load_citation("planetoid_citeseer", data_dir)
        return dict(X=data.features, y=np.asarray(data.y),
                    splits=[np.flatnonzero(data.train_mask)],
                    eval_mask=np.asarray(data.test_mask), graph=data.graph)
    if name in HELDOUT:
        return _load_heldout_set(name, data_dir, n_splits)
    raise ValueError(f"unknown panel set {name!r}; choose from {PANEL} or {HELDOUT}")


def _load_heldout_set(name, data_dir, n_splits):
    """A held-out set (``HELDOUT``), in the dict of :func:`load_panel_set`."""
    from graphssl.data import fixed_splits, load_dataset, random_splits
    from graphssl.scaling import fit_feature_scaling

    base = name.rsplit("_", 1)[0] if name not in HELDOUT_UCI else name
    data = load_dataset(base, data_dir)
    X, y = np.asarray(data.X, float), np.asarray(data.y)
    X = fit_feature_scaling(X, "auto").transform(X)
    if name in HELDOUT_UCI:
        splits = _per_class_splits(y, 10, n_splits)
    elif name.endswith("_1pct"):
        splits = list(random_splits(y, 0.01, n_splits=n_splits, seed=0))
    else:
        splits = list(fixed_splits(data, 10)[:n_splits])
    return dict(X=X, y=y, splits=splits)


# ------------------------------------------------------------------------- methods
def _estimator_names():
    import graphssl.estimators as est

    return [n for n in est.__all__ if n != "GraphSSLClassifier"]


def _fit_ours(name, X, labels, graph):
    import graphssl.estimators as est

    clf = getattr(est, name)()
    if graph is not None:
        clf.fit_graph(graph, labels, X=X)
    else:
        clf.fit(X, labels)
    pm = np.asarray(clf.transduction_)
    map_labels = getattr(clf, "map_labels_", None)
    return pm, None if map_labels is None else np.asarray(map_labels)


def _fit_peer(name, X, labels, graph):
    if name.startswith("sklearn_"):
        from sklearn.semi_supervised import LabelPropagation, LabelSpreading

        cls = {"sklearn_LabelSpreading": LabelSpreading,
               "sklearn_LabelPropagation": LabelPropagation}[name]
        extra = {"max_iter": 1000} if cls is LabelPropagation else {}
        Xd = X.toarray() if hasattr(X, "toarray") else X
        return cls(kernel="knn", n_neighbors=K_PEERS, **extra).fit(Xd, labels).transduction_, None
    import graphlearning as gl

    if graph is not None:
        W = _as_scipy(graph)
    else:
        W = gl.weightmatrix.knn(np.asarray(X, np.float64), K_PEERS)
    model = {"gl_laplace": gl.ssl.laplace, "gl_poisson": gl.ssl.poisson}[name](W)
    train = np.flatnonzero(labels >= 0)
    return model.fit_predict(train, labels[train]), None


def _as_scipy(graph):
    import networkx as nx
    import scipy.sparse as sp

    if isinstance(graph, nx.Graph):
        return nx.to_scipy_sparse_array(graph, format="csr")
    if sp.issparse(graph):
        return graph.tocsr()
    return graph.to_scipy()


def _limit_cpu(seconds):
    """Let this worker use ``seconds`` more CPU seconds (all threads); past that the kernel
    sends SIGXCPU and the worker dies, which the driver records as a CPU timeout. CPU time,
    not wall time: a loaded machine slows a fit down without making it time out."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = int(used + seconds) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (soft if hard < 0 else min(soft, hard), hard))


def run_cell(method, name, data_dir, n_splits, split_ids, cpu_limit=None):
    """Worker: fit ``method`` on the given splits of panel set ``name``; one record a split."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    data = load_panel_set(name, data_dir, n_splits)
    X, y, graph = data["X"], data["y"], data.get("graph")
    out = []
    for s in split_ids:
        if cpu_limit is not None:
            _limit_cpu(cpu_limit)
        labelled = np.asarray(data["splits"][s])
        labels = np.full(y.size, -1)
        labels[labelled] = y[labelled]
        mask = data.get("eval_mask")
        if mask is None:
            mask = np.ones(y.size, bool)
            mask[labelled] = False
        record = {"split": int(s)}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            start, cpu_start = time.perf_counter(), time.process_time()
            try:
                fit = _fit_peer if method in PEERS else _fit_ours
                pm, map_labels = fit(method, X, labels, graph)
                record["seconds"] = time.perf_counter() - start
                record["cpu_seconds"] = time.process_time() - cpu_start
                record["accuracy"] = float(np.mean(np.asarray(pm)[mask] == y[mask]))
                if map_labels is not None:
                    record["map_accuracy"] = float(np.mean(map_labels[mask] == y[mask]))
            except Exception as err:  # recorded, the panel goes on
                record["seconds"] = time.perf_counter() - start
                record["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"
                record["traceback"] = _portable_traceback()
        record["warnings"] = sorted({_warning_line(w) for w in caught})
        out.append(record)
    return out


def _portable_traceback(limit: int = 3, keep: int = 600) -> str:
    """The current exception's last ``keep`` characters of traceback, each file named by its
    base name only: the results are committed, and must not name this machine's paths."""
    text = traceback.format_exc(limit=limit)
    return re.sub(r'File "[^"]*[\\/]([^"\\/]+)"', r'File "\1"', text)[-keep:]


def _warning_line(w):
    first = (str(w.message).splitlines() or [""])[0]
    return f"{w.category.__name__}: {first}"[:160]


# ------------------------------------------------------------------------- driver
def _write_atomic(path, payload):
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=1))
    os.replace(tmp, path)


def _summary(records):
    ok = [r for r in records if "accuracy" in r]
    row = {"n_ok": len(ok), "n_runs": len(records)}
    if ok:
        row["accuracy"] = float(np.mean([r["accuracy"] for r in ok]))
        row["seconds"] = float(np.median([r["seconds"] for r in ok]))
        if all("cpu_seconds" in r for r in ok):
            row["cpu_seconds"] = float(np.median([r["cpu_seconds"] for r in ok]))
        maps = [r["map_accuracy"] for r in ok if "map_accuracy" in r]
        if maps:
            row["map_accuracy"] = float(np.mean(maps))
    errors = sorted({r.get("error", "") for r in records} - {""})
    if errors:
        row["errors"] = errors
    row["warnings"] = sorted({w for r in records for w in r.get("warnings", [])})
    return row


def _cell(method, name, args, n_splits_available):
    """One worker process (spawned: no forked JAX threads) for all splits of a cell; the
    first split past the CPU limit (or the wall limit) ends the cell."""
    import multiprocessing as mp
    import signal

    split_ids = list(range(n_splits_available))
    wall = args.wall_timeout or 10 * args.timeout
    with cf.ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn")) as pool:
        records = []
        for s in split_ids:
            future = pool.submit(run_cell, method, name, args.data_dir, args.splits, [s],
                                 args.timeout)
            procs, start = set(), time.monotonic()
            while not future.done() and time.monotonic() - start < wall:
                procs |= set(getattr(pool, "_processes", {}).values())  # for the exit code
                cf.wait([future], timeout=1.0)
            try:
                records += future.result(timeout=0 if future.done() else 1.0)
            except cf.TimeoutError:
                records.append({"split": s, "error": f"wall timeout after {wall:.0f} s"})
                for proc in list(getattr(pool, "_processes", {}).values()):
                    proc.kill()
                break  # the next split would time out too: record once, move on
            except Exception as err:
                for proc in procs:
                    proc.join(timeout=10)
                codes = {getattr(proc, "exitcode", None) for proc in procs}
                if -signal.SIGXCPU in codes:
                    records.append({"split": s,
                                    "error": f"timeout: over {args.timeout:.0f} CPU s"})
                else:
                    records.append({"split": s,
                                    "error": f"worker died: {type(err).__name__} {codes}"})
                break
    return records


def print_table(results):
    methods = sorted({m for cells in results.values() for m in cells})
    ours = [m for m in methods if m not in PEERS]
    head = f"{'set':<18}" + "".join(f"{m[:14]:>16}" for m in [*ours, *PEERS])
    print(head)
    for name, cells in results.items():
        line = f"{name:<18}"
        for m in [*ours, *PEERS]:
            row = cells.get(m, {}).get("summary")
            if not row:
                line += f"{'-':>16}"
            elif "accuracy" not in row:
                line += f"{'fail':>16}"
            else:
                text = f"{100 * row['accuracy']:.1f}"
                if "map_accuracy" in row:
                    text += f"/{100 * row['map_accuracy']:.1f}"
                line += f"{text:>16}"
        print(line)


def _merged(tags):
    """Results of several runs (``bench_defaults_TAG.json``), a later tag's cell winning."""
    merged = {}
    for tag in tags:
        path = RESULTS / f"bench_defaults{'_' + tag if tag else ''}.json"
        for name, cells in json.loads(path.read_text()).get("results", {}).items():
            merged.setdefault(name, {}).update(
                {m: c for m, c in cells.items() if not m.startswith("_")})
    return merged


def _first_splits(results, n_splits):
    """Every cell summarised again over its runs on split ids ``< n_splits`` only: methods
    run on fewer splits (the sampled estimators, ``--splits 3``) are then compared with the
    peers on the same splits."""
    out = {}
    for name, cells in results.items():
        out[name] = {}
        for method, cell in cells.items():
            runs = [r for r in cell.get("runs", []) if r.get("split", 0) < n_splits]
            out[name][method] = {"runs": runs, "summary": _summary(runs) if runs else {}}
    return out


def _cell_text(row):
    if not row:
        return "–"
    if "accuracy" not in row:
        return "fail: " + "; ".join(row.get("errors", ["?"]))[:40]
    text = f"{100 * row['accuracy']:.1f}"
    if "map_accuracy" in row:
        text += f" / {100 * row['map_accuracy']:.1f}"
    seconds = row.get("cpu_seconds", row.get("seconds"))
    if seconds is not None:
        text += f" ({seconds:.2g} s)"
    if row.get("n_ok", 0) < row.get("n_runs", 0):
        text += f" [{row['n_ok']}/{row['n_runs']}]"
    return text


def markdown_table(results, sets=PANEL):
    """The README table: accuracy (posterior mean / MAP) and median CPU seconds per fit of
    every method on every set, the best peer and the best graphssl estimator per set, and
    each method's panel mean over the sets where every method has a result."""
    methods = sorted({m for cells in results.values() for m in cells})
    ours = [m for m in methods if m not in PEERS]
    peers = [m for m in PEERS if m in methods]
    short = {m: m.replace("Classifier", "").replace("sklearn_", "") for m in methods}
    lines = ["| set | best peer | best graphssl | " + " | ".join(short[m] for m in
                                                                   [*ours, *peers]) + " |",
             "|---" * (3 + len(ours) + len(peers)) + "|"]
    per_set = {}
    for name in [s for s in sets if s in results]:
        cells = results[name]
        acc = {m: cells[m]["summary"]["accuracy"] for m in methods
               if "accuracy" in cells.get(m, {}).get("summary", {})}
        per_set[name] = acc
        bp = max((m for m in peers if m in acc), key=acc.get, default=None)
        bo = max((m for m in ours if m in acc), key=acc.get, default=None)
        best = [f"{short[b]} {100 * acc[b]:.1f}" if b else "–" for b in (bp, bo)]
        row = [_cell_text(cells.get(m, {}).get("summary")) for m in [*ours, *peers]]
        lines.append(f"| {name} | {best[0]} | {best[1]} | " + " | ".join(row) + " |")
    complete = [n for n, acc in per_set.items() if all(m in acc for m in [*ours, *peers])]
    means = {m: float(np.mean([per_set[n][m] for n in complete])) for m in [*ours, *peers]}
    if complete:
        lines.append(f"| panel mean ({len(complete)} sets) | | | " + " | ".join(
            f"{100 * means[m]:.1f}" for m in [*ours, *peers]) + " |")
    return "\n".join(lines), means, complete


def gaps_table(results, sets=PANEL, margin=0.01):
    """Every (set, graphssl estimator) more than ``margin`` under the set's best peer, with
    the paired difference over the splits both ran (mean +- standard error, in points) and
    whether it is more than two standard errors from zero: a gap that the splits cannot
    tell from noise is marked as such, not explained away."""
    methods = sorted({m for cells in results.values() for m in cells})
    ours = [m for m in methods if m not in PEERS]
    lines = ["| set | estimator | accuracy | best peer | paired difference (points) | "
             "beyond 2 SE |", "|---|---|---|---|---|---|"]
    for name in [s for s in sets if s in results]:
        cells = results[name]
        acc = {m: cells[m]["summary"]["accuracy"] for m in methods
               if "accuracy" in cells.get(m, {}).get("summary", {})}
        peer = max((m for m in PEERS if m in acc), key=acc.get, default=None)
        if peer is None:
            continue
        peer_runs = {r["split"]: r["accuracy"] for r in cells[peer]["runs"] if "accuracy" in r}
        for m in ours:
            if m not in acc or acc[m] >= acc[peer] - margin:
                continue
            diffs = np.array([r["accuracy"] - peer_runs[r["split"]] for r in cells[m]["runs"]
                              if "accuracy" in r and r["split"] in peer_runs])
            se = float(diffs.std(ddof=1) / np.sqrt(diffs.size)) if diffs.size > 1 else np.nan
            mean = float(diffs.mean()) if diffs.size else np.nan
            beyond = "yes" if np.isfinite(se) and abs(mean) > 2 * se else "no"
            short = m.replace("Classifier", "")
            lines.append(f"| {name} | {short} | {100 * acc[m]:.1f} | "
                         f"{peer.replace('sklearn_', '')} {100 * acc[peer]:.1f} | "
                         f"{100 * mean:+.1f} +- {100 * se:.1f} ({diffs.size} splits) | "
                         f"{beyond} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=os.environ.get("GRAPHSSL_DATA"))
    parser.add_argument("--sets", nargs="+", default=list(PANEL),
                        help="set names, or 'panel' / 'heldout' for every set of either")
    parser.add_argument("--methods", nargs="+", default=None)
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="3 splits, 120 s timeout")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="CPU seconds (all threads) a fit may use")
    parser.add_argument("--wall-timeout", type=float, default=None,
                        help="wall seconds a fit may take (default 10 x --timeout)")
    parser.add_argument("--tag", default="")
    parser.add_argument("--restart", action="store_true")
    parser.add_argument("--table", nargs="+", metavar="TAG", default=None,
                        help="fit nothing: print the Markdown table of these runs' JSON "
                             "(later tags win; '' is the untagged file)")
    parser.add_argument("--table-splits", type=int, default=None,
                        help="with --table: summarise every cell over split ids < N only")
    parser.add_argument("--gaps", action="store_true",
                        help="with --table: list the estimators more than a point under the "
                             "best peer, with the paired difference over splits")
    args = parser.parse_args(argv)
    # "panel" and "heldout" name the two sets of sets
    args.sets = [m for s in args.sets for m in {"panel": PANEL, "heldout": HELDOUT}.get(s, (s,))]
    if args.table is not None:
        results = _merged(args.table)
        if args.table_splits is not None:
            results = _first_splits(results, args.table_splits)
        if args.methods:  # the table's columns: these methods and the peers
            keep = {*args.methods, *PEERS}
            results = {name: {m: c for m, c in cells.items() if m in keep}
                       for name, cells in results.items()}
        if args.gaps:
            print(gaps_table(results, args.sets))
            return
        table, means, complete = markdown_table(results, args.sets)
        print(table)
        return
    if args.quick:
        args.splits, args.timeout = 3, min(args.timeout, 120.0)
    methods = args.methods or [*_estimator_names(), *PEERS]
    out = RESULTS / f"bench_defaults{'_' + args.tag if args.tag else ''}.json"
    payload = {"meta": {"machine": platform.machine(), "cpus": os.cpu_count(),
                        "python": platform.python_version(), "splits": args.splits},
               "results": {}}
    if out.exists() and not args.restart:
        payload["results"] = json.loads(out.read_text()).get("results", {})
    for name in args.sets:
        try:
            n_available = len(load_panel_set(name, args.data_dir, args.splits)["splits"])
        except Exception as err:
            print(f"{name}: skipped ({type(err).__name__}: {err})")
            payload["results"].setdefault(name, {})["_skipped"] = str(err)
            continue
        cells = payload["results"].setdefault(name, {})
        cells.pop("_skipped", None)  # loads now
        for method in methods:
            if method in cells and not args.restart:
                continue
            records = _cell(method, name, args, n_available)
            cells[method] = {"runs": records, "summary": _summary(records)}
            row = cells[method]["summary"]
            print(f"{name:<18} {method:<32} acc={row.get('accuracy', float('nan')):.3f} "
                  f"map={row.get('map_accuracy', float('nan')):.3f} "
                  f"t={row.get('seconds', float('nan')):.2f}s "
                  f"{'; '.join(row.get('errors', []))[:80]}")
            _write_atomic(out, payload)
    print_table({k: {m: v for m, v in cells.items() if not m.startswith("_")}
                 for k, cells in payload["results"].items()})
    print(f"wrote {out.relative_to(RESULTS.parent.parent)}")


if __name__ == "__main__":
    main()
