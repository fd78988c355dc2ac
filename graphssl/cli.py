"""The ``graphssl`` command: compare every model on one data set (the main job).

    graphssl run [--dataset two_moons|<shared npz name>|path.npz|path.csv]
                 [--label-rate 0.05] [--n-splits 3] [--models all|grf,lgc,...]
                 [--k 10] [--sigma kth_over_3] [--out DIR] [--seed 0] [--restart]
    graphssl list

``run`` builds the kNN graph once, fits every chosen model on the same random labelled
splits (every class present) through :func:`graphssl.suite.compare_models`, and reports per
model accuracy / AMI on the unlabelled points, MAP vs posterior-mean accuracy and their
disagreement, expected calibration error, R-hat / ESS of the energy where sampled, and time.
It writes ``results.json`` plus per-run JSON, ArviZ netCDF and PNG plots into ``--out``; a
run interrupted and restarted resumes from the per-run results. Bad input prints one line
on stderr and exits 2.

New models are added to :data:`MODELS` (name -> (factory, description)); a factory takes no
argument and returns an estimator with ``fit_graph(graph, y)`` (or ``fit(X, y)`` when it sets
``fits_features = True``) and ``label_distributions_``.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import numpy as np

__all__ = ["MODELS", "register_model", "main"]


def _grf():
    from graphssl.estimators.baselines import HarmonicFunctionClassifier

    return HarmonicFunctionClassifier()


def _grf_cmn():
    from graphssl.estimators.baselines import HarmonicFunctionClassifier

    return HarmonicFunctionClassifier(class_mass_normalize=True)


def _lgc():
    from graphssl.estimators.baselines import LGCClassifier

    return LGCClassifier()


def _parzen():
    from graphssl.estimators.baselines import ParzenWindowClassifier

    return ParzenWindowClassifier()


def _knn():
    from graphssl.estimators.baselines import KNNGraphClassifier

    return KNNGraphClassifier()


def _potts_mean_field():
    from graphssl.estimators.potts import PottsClassifier

    return PottsClassifier(inference="mean_field", beta="nmfB")


def _potts_gibbs():
    from graphssl.estimators.potts import PottsClassifier

    return PottsClassifier(inference="gibbs", beta="nmfB", n_chains=4, n_samples=300,
                           burn_in=100)


def _potts_swendsen_wang():
    from graphssl.estimators.potts import PottsClassifier

    return PottsClassifier(inference="swendsen_wang", beta="nmfB", n_chains=4, n_samples=300,
                           burn_in=100)


def _boltzmann():
    from graphssl.estimators.boltzmann import BoltzmannMRFClassifier

    return BoltzmannMRFClassifier(model="basic", n_restarts=1, max_iter=20)


def _diffusion_mixture():
    from graphssl.estimators.diffusion_mixture import DiffusionMixtureClassifier

    # the notebook's moves: component flips mix the labels of boundary groups
    return DiffusionMixtureClassifier(gamma=0.8, init="parzen", n_chains=2, n_iterations=200,
                                      burn_in=50, moves=(20, 1, 0, 4, 0, 0, 10))


def _harmonic_mixture():
    from graphssl.estimators.harmonic_mixture import HarmonicMixtureClassifier

    return HarmonicMixtureClassifier(n_components=36)


def _mincut():
    from graphssl.estimators.mincut import MincutClassifier

    return MincutClassifier()


MODELS = {
    "grf": (_grf, "harmonic function / GRF (Zhu et al. 2003)"),
    "grf_cmn": (_grf_cmn, "GRF with class mass normalisation"),
    "lgc": (_lgc, "local and global consistency, alpha 0.99 (Zhou et al. 2004)"),
    "parzen": (_parzen, "graph Parzen window, heat kernel tau 5 (Walder)"),
    "knn": (_knn, "3 nearest labelled nodes along the graph"),
    "potts_mf": (_potts_mean_field, "Potts naive mean field, beta from Gamma = 1 (B&B nmfB)"),
    "potts_gibbs": (_potts_gibbs, "Potts posterior by chromatic Gibbs, 4 chains x 300"),
    "potts_sw": (_potts_swendsen_wang, "Potts posterior by Swendsen-Wang, 4 chains x 300"),
    "boltzmann": (_boltzmann, "Boltzmann MRF, learned sigma (Zhu & Ghahramani 2002)"),
    "dirichlet_mixture": (_diffusion_mixture,
                          "Dirichlet mixture of diffusions, gamma 0.8, Parzen start (Walder)"),
    "harmonic_mixture": (_harmonic_mixture, "harmonic mixture, M = 36 (Zhu & Lafferty 2005)"),
    "mincut": (_mincut, "s-t graph mincut (Blum & Chawla 2001)"),
}


def register_model(name: str, factory, description: str = "") -> None:
    """Add a model to the ``graphssl run`` registry."""
    MODELS[name] = (factory, description)


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit code 2 (argparse's default prints usage too)
        raise _UsageError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="graphssl", description="Graph-based semi-supervised classification.")
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="fit the models on a data set and compare them")
    run.add_argument("--dataset", default="two_moons",
                     help="generator name, shared .npz name, or a path to .npz / .csv")
    run.add_argument("--label-column", default="-1",
                     help="CSV label column (index or header name; default: last)")
    run.add_argument("--label-rate", type=float, default=0.05,
                     help="fraction of labelled points per split (default 0.05)")
    run.add_argument("--n-splits", type=int, default=3, help="random splits (default 3)")
    run.add_argument("--models", default="all",
                     help=f"comma-separated, from: {', '.join(MODELS)} (or 'all')")
    run.add_argument("--k", type=int, default=10, help="kNN graph neighbours (default 10)")
    run.add_argument("--sigma", default="kth_over_3",
                     help="Gaussian width: a number, 'kth_over_3' or 'walder'")
    run.add_argument("--symmetrize", default="max", choices=["max", "min", "mean"])
    run.add_argument("--out", default="graphssl-output", help="folder for results.json")
    run.add_argument("--seed", type=int, default=0, help="seed of the splits")
    run.add_argument("--data-dir", default=None, help="folder of shared .npz (or GRAPHSSL_DATA)")
    run.add_argument("--restart", action="store_true",
                     help="refit everything instead of resuming from results in --out")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    sub.add_parser("list", help="list the models and data sets")
    return parser


# ----------------------------------------------------------------------------- steps


def _load(args):
    from graphssl import data

    path = pathlib.Path(args.dataset)
    if path.suffix == ".npz":
        if not path.is_file():
            raise ValueError(f"--dataset: file {path} does not exist")
        return data.load_npz(path.stem, path.parent)
    if path.suffix == ".csv":
        column = int(args.label_column) if args.label_column.lstrip("-").isdigit() \
            else args.label_column
        return data.load_csv(path, column)
    if args.dataset not in data.available_datasets(args.data_dir) \
            and args.dataset not in data.NPZ_SOURCES:
        raise ValueError(
            f"--dataset: unknown {args.dataset!r}; use a path to .npz/.csv or one of "
            f"{', '.join(data.available_datasets(args.data_dir))}"
        )
    return data.load_dataset(args.dataset, args.data_dir)


def _models(spec: str) -> list[str]:
    names = list(MODELS) if spec == "all" else [m.strip() for m in spec.split(",") if m.strip()]
    unknown = [m for m in names if m not in MODELS]
    if unknown or not names:
        raise ValueError(f"--models: unknown {unknown or spec!r}; choose from {', '.join(MODELS)}")
    return names


def _sigma(text: str):
    try:
        value = float(text)
    except ValueError:
        return text
    return value


def _splits(dataset, args) -> tuple[np.ndarray, list[np.ndarray], bool]:
    """Labelled index sets; for a CSV with unlabelled rows, its own labels (no truth)."""
    from graphssl import data

    y = dataset.y
    if np.any(y < 0):
        if args.n_splits != 1:
            print("graphssl: the file marks its own unlabelled rows: 1 split, no accuracy",
                  file=sys.stderr)
        return y, [np.flatnonzero(y >= 0)], False
    if not 0 < args.label_rate < 1:
        raise ValueError(f"--label-rate: must lie in (0, 1), got {args.label_rate}")
    if args.n_splits < 1:
        raise ValueError(f"--n-splits: must be >= 1, got {args.n_splits}")
    rows = data.random_splits(y, args.label_rate, n_splits=args.n_splits, seed=args.seed)
    return y, list(rows), True


def _run(args) -> int:
    import jax

    from graphssl import suite
    from graphssl.graph import knn_graph

    jax.config.update("jax_enable_x64", True)
    names = _models(args.models)
    dataset = _load(args)
    y, splits, has_truth = _splits(dataset, args)
    X = np.asarray(dataset.X)
    start = time.perf_counter()
    graph = knn_graph(X, args.k, symmetrize=args.symmetrize, sigma=_sigma(args.sigma),
                      on_duplicates="ignore")
    graph_seconds = time.perf_counter() - start
    print(f"{dataset.name}: n = {dataset.n_samples}, d = {dataset.n_features}, "
          f"C = {dataset.n_classes}, {len(splits)} split(s) of {len(splits[0])} labels; "
          f"kNN graph k = {args.k}: {graph.n_edges} edges in {graph_seconds:.3f} s")
    config = {"dataset": dataset.name, "n": dataset.n_samples, "k": args.k,
              "sigma": args.sigma, "symmetrize": args.symmetrize,
              "label_rate": args.label_rate, "seed": args.seed,
              "splits": [np.asarray(s).tolist() for s in splits]}
    out = pathlib.Path(args.out)
    models = {name: MODELS[name][0] for name in names}
    results = suite.compare_models(models, graph, y, splits, out_dir=out, config=config, X=X,
                                   progress=not args.no_progress, resume=not args.restart)
    summary = suite.summarise(results)
    print(suite.format_table(summary))
    report = {
        "dataset": dataset.name,
        "n_samples": dataset.n_samples,
        "n_features": dataset.n_features,
        "n_classes": dataset.n_classes,
        "has_truth": has_truth,
        "graph": {"k": args.k, "sigma": args.sigma, "symmetrize": args.symmetrize,
                  "n_edges": graph.n_edges, "seconds": graph_seconds},
        "label_rate": args.label_rate,
        "seed": args.seed,
        "splits": config["splits"],
        "models": {name: {"description": MODELS[name][1]} | summary[name] | {"runs": runs}
                   for name, runs in results.items()},
    }
    path = out / "results.json"
    path.write_text(json.dumps(report, indent=1, default=float))
    print(f"wrote {path} (per-run results in {out / 'runs'}, ArviZ data in {out / 'arviz'}, "
          f"plots in {out / 'plots'})")
    failed = [name for name, row in summary.items() if row["errors"]]
    return 1 if failed and len(failed) == len(summary) else 0


def _list(args) -> int:
    from graphssl import data

    print("models:")
    for name, (_, description) in MODELS.items():
        print(f"  {name:<10} {description}")
    print("data sets: " + ", ".join(data.available_datasets()))
    return 0


def main(argv=None) -> int:
    """Entry point of the ``graphssl`` console script; returns the exit code."""
    try:
        args = _parser().parse_args(argv)
        if args.command is None:
            raise _UsageError("choose a command: 'graphssl run' or 'graphssl list' (-h: help)")
        return _run(args) if args.command == "run" else _list(args)
    except (_UsageError, ValueError, OSError) as err:
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        print(f"graphssl: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
