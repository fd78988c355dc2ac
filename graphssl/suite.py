"""The comparison suite behind ``graphssl run``: every model on one graph, one report.

For each model and labelled split it records accuracy and AMI on the unlabelled points, the
accuracy of MAP labels and of posterior-mean labels and how often they disagree, the expected
calibration error of the class marginals, R-hat / ESS of the energy where the model was
sampled, and the time. Each (model, split) result is written to ``<out>/runs/`` as soon as it
is done, so an interrupted run restarted with the same settings resumes where it stopped;
ArviZ data go to ``<out>/arviz/`` (netCDF) and plots to ``<out>/plots/`` (PNG).

Estimator conventions read here (all optional except the first two):
``fit_graph(graph, y)`` and ``label_distributions_`` (float[n, C], columns = ``classes_``);
``map_labels_`` (values of ``classes_``; MAP labels where the model has a posterior distinct
from its marginals); ``inference_data_`` or a ``to_arviz()`` method (ArviZ DataTree with
``sample_stats.energy``).
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import time
import warnings
from collections.abc import Callable

import numpy as np

from graphssl import metrics

__all__ = ["run_model", "compare_models", "summarise", "format_table"]


def _energy_diagnostics(inference_data) -> dict[str, float]:
    """R-hat and bulk ESS of the sampled energy (permutation-invariant), if present."""
    if inference_data is None:
        return {}
    try:
        import arviz as az

        energy = np.asarray(inference_data["sample_stats"]["energy"])
    except (KeyError, TypeError, ValueError, ImportError):
        return {}
    if energy.ndim != 2 or energy.shape[1] < 4:
        return {}
    out = {"ess_energy": float(az.ess(energy))}
    if energy.shape[0] >= 2:
        out["rhat_energy"] = float(az.rhat(energy))
    return out


def _normalised(scores) -> np.ndarray:
    """Rows scaled to sum to one (an all-zero row becomes uniform), so ECE is defined."""
    scores = np.clip(np.asarray(scores, dtype=np.float64), 0.0, None)
    totals = scores.sum(axis=1, keepdims=True)
    uniform = np.full_like(scores, 1.0 / scores.shape[1])
    return np.where(totals > 0, scores / np.where(totals > 0, totals, 1.0), uniform)


def run_model(
    name: str, factory: Callable, graph, y, labelled_idx, *, X=None
) -> tuple[dict, object]:
    """Fit one model on one split; return its record and the fitted estimator.

    Models whose estimator sets ``fits_features = True`` (they learn from the features, e.g.
    the Boltzmann MRF's length scales or the harmonic mixture's components) are fitted with
    ``fit(X, y)``; all others with ``fit_graph(graph, y)`` on the shared graph.
    """
    y = np.asarray(y)
    y_masked = np.full(y.shape, -1, dtype=np.int64)
    y_masked[labelled_idx] = y[labelled_idx]
    estimator = factory()
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if getattr(estimator, "fits_features", False):
            if X is None:
                raise ValueError(f"{name}: this model needs the features X")
            estimator.fit(X, y_masked)
        else:
            estimator.fit_graph(graph, y_masked)
    seconds = time.perf_counter() - start
    proba = _normalised(estimator.label_distributions_)
    classes = np.asarray(estimator.classes_)
    posterior_mean = classes[np.argmax(proba, axis=1)]
    map_labels = getattr(estimator, "map_labels_", None)
    map_labels = posterior_mean if map_labels is None else np.asarray(map_labels)
    prediction = np.asarray(estimator.transduction_)
    truth_known = np.all(y >= 0)
    record = {"model": name, "seconds": seconds, "n_labelled": int(len(labelled_idx))}
    if truth_known:
        encoded_truth = np.searchsorted(classes, y)
        record |= {
            "accuracy": metrics.accuracy(y, prediction, labelled_idx),
            "ami": metrics.adjusted_mutual_info(y, prediction, labelled_idx),
            "accuracy_map": metrics.accuracy(y, map_labels, labelled_idx),
            "accuracy_posterior_mean": metrics.accuracy(y, posterior_mean, labelled_idx),
            "ece": metrics.expected_calibration_error(encoded_truth, proba, 10, labelled_idx),
        }
    else:
        record["predictions"] = prediction.tolist()
    record["map_vs_posterior_mean_disagreement"] = metrics.map_posterior_disagreement(
        map_labels, posterior_mean, labelled_idx
    )
    record |= _energy_diagnostics(_inference_data(estimator))
    record["warnings"] = sorted({str(w.message).splitlines()[0] for w in caught})[:5]
    return record, estimator


def _inference_data(estimator):
    """The estimator's ArviZ data: ``inference_data_`` or ``to_arviz()`` when it sampled."""
    data = getattr(estimator, "inference_data_", None)
    if data is None and hasattr(estimator, "to_arviz") and hasattr(estimator, "samples_"):
        try:
            data = estimator.to_arviz()
        except Exception:  # noqa: BLE001 - diagnostics are optional, the numbers are not
            data = None
    return data


def _config_key(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _save_arviz(estimator, path: pathlib.Path) -> str | None:
    data = _inference_data(estimator)
    if data is None:
        return None
    try:
        data.to_netcdf(str(path))
    except Exception as err:  # noqa: BLE001 - a failed save must not lose the run's numbers
        return f"not written: {type(err).__name__}: {err}"
    return str(path)


def _plot_marginals(X, estimator, labelled_idx, path: pathlib.Path, title: str) -> str | None:
    """Marginal-confidence map for 2-D data: colour = label, opacity = its probability."""
    if X is None or np.asarray(X).shape[1] != 2:
        return None
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    proba = np.asarray(estimator.label_distributions_)
    label = np.argmax(proba, axis=1)
    confidence = proba[np.arange(len(label)), label]
    fig = Figure(figsize=(5, 4))  # no pyplot: never touches the caller's backend
    ax = fig.subplots()
    cmap = colormaps["tab10"]
    colours = cmap(label % 10)
    colours[:, 3] = np.clip(confidence, 0.15, 1.0)
    ax.scatter(X[:, 0], X[:, 1], c=colours, s=8, linewidths=0)
    ax.scatter(X[labelled_idx, 0], X[labelled_idx, 1], c="k", marker="x", s=40, label="labelled")
    ax.set_title(f"{title}: label (colour) and its marginal probability (opacity)", fontsize=8)
    ax.legend(loc="best", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return str(path)


def _plot_energy_trace(estimator, path: pathlib.Path, title: str) -> str | None:
    """Energy trace per chain, when the model was sampled."""
    data = _inference_data(estimator)
    if data is None:
        return None
    try:
        energy = np.asarray(data["sample_stats"]["energy"])
    except (KeyError, TypeError, ValueError):
        return None
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 3))
    ax = fig.subplots()
    for chain, trace in enumerate(np.atleast_2d(energy)):
        ax.plot(trace, lw=0.7, label=f"chain {chain}")
    ax.set_xlabel("draw")
    ax.set_ylabel("energy")
    ax.set_title(f"{title}: energy trace (chains should overlap)", fontsize=8)
    ax.legend(fontsize=6, ncol=4)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return str(path)


def compare_models(
    models: dict[str, Callable],
    graph,
    y,
    splits: list[np.ndarray],
    *,
    out_dir,
    config: dict | None = None,
    X=None,
    progress: bool = True,
    resume: bool = True,
) -> dict[str, list[dict]]:
    """Fit every model on every split, writing each result as it completes.

    Args:
      models: name -> factory returning an unfitted estimator (see the module docstring).
      graph: the shared :class:`graphssl.graph.Graph`.
      y: true labels (``-1`` where unknown: accuracy is then not reported).
      splits: labelled index arrays, one per split.
      out_dir: folder for ``runs/``, ``arviz/`` and ``plots/``.
      config: settings that identify the run (data set, graph, seed); a stored result is
        reused only when its config matches, so a changed setting never mixes results.
      X: features (for models with ``fits_features`` and for 2-D confidence plots).
      resume: reuse stored results of the same config.
    """
    from tqdm.auto import tqdm

    out = pathlib.Path(out_dir)
    for sub in ("runs", "arviz", "plots"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    key = _config_key(config or {})
    results: dict[str, list[dict]] = {name: [] for name in models}
    jobs = [(name, i) for name in models for i in range(len(splits))]
    bar = tqdm(jobs, disable=not progress, desc="models x splits", leave=False)
    for name, i in bar:
        bar.set_postfix_str(f"{name} split {i}")
        path = out / "runs" / f"{name}__split{i}.json"
        if resume and path.exists():
            stored = json.loads(path.read_text())
            if stored.get("config_key") == key:
                results[name].append(stored | {"resumed": True})
                continue
        try:
            record, estimator = run_model(name, models[name], graph, y, splits[i], X=X)
        except Exception as err:  # noqa: BLE001 - one failing model must not sink the report
            record, estimator = {"model": name, "error": f"{type(err).__name__}: {err}"}, None
        record |= {"split": i, "config_key": key}
        if estimator is not None:
            record["arviz"] = _save_arviz(estimator, out / "arviz" / f"{name}__split{i}.nc")
            if i == 0:
                record["plot"] = _plot_marginals(
                    X, estimator, splits[i], out / "plots" / f"{name}.png", name
                )
                record["trace_plot"] = _plot_energy_trace(
                    estimator, out / "plots" / f"{name}_energy.png", name
                )
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=1, default=float))
        tmp.replace(path)  # atomic: a crash never leaves a half-written result
        results[name].append(record)
    return results


_COLUMNS = [
    ("accuracy", "acc"),
    ("ami", "AMI"),
    ("accuracy_map", "acc MAP"),
    ("accuracy_posterior_mean", "acc PM"),
    ("map_vs_posterior_mean_disagreement", "MAP!=PM"),
    ("ece", "ECE"),
    ("rhat_energy", "R-hat E"),
    ("ess_energy", "ESS E"),
    ("seconds", "time s"),
]


def summarise(results: dict[str, list[dict]]) -> dict[str, dict]:
    """Mean and standard deviation of every recorded figure, per model."""
    summary = {}
    for name, runs in results.items():
        row: dict = {"n_splits": len(runs), "errors": [r["error"] for r in runs if "error" in r]}
        for key, _ in _COLUMNS:
            values = [r[key] for r in runs if r.get(key) is not None]
            if values:
                row[f"{key}_mean"] = float(np.mean(values))
                row[f"{key}_std"] = float(np.std(values))
        summary[name] = row
    return summary


def format_table(summary: dict[str, dict]) -> str:
    """Plain-text table of :func:`summarise` output."""
    header = f"{'model':<16}" + "".join(f"{label:>10}" for _, label in _COLUMNS)
    lines = [header, "-" * len(header)]
    for name, row in summary.items():
        cells = []
        for key, _ in _COLUMNS:
            value = row.get(f"{key}_mean")
            if value is None:
                cells.append(f"{'-':>10}")
            elif key == "ess_energy":
                cells.append(f"{value:>10.0f}")
            else:
                cells.append(f"{value:>10.4f}")
        line = f"{name:<16}" + "".join(cells)
        if row["errors"]:
            line += f"   error: {row['errors'][0][:60]}"
        lines.append(line)
    return "\n".join(lines)
