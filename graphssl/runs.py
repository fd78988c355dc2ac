"""One (model, split) run of the comparison suite: fit, sample until converged, record.

:func:`run_model` fits one estimator on one labelled split and scores it (accuracy and AMI
on the unlabelled points, MAP vs posterior-mean accuracy and their disagreement, expected
calibration error, time). Where the estimator sampled a posterior (``samples_`` with
``labels [chains, draws, n]`` and ``energy``), it computes R-hat and bulk ESS on
permutation-invariant statistics -- the energy, the sorted class sizes and the co-assignment
``[y_a = y_b]`` of a fixed, documented set of node pairs
(:mod:`graphssl.inference.mcmc.statistics`) -- and, while the largest R-hat is above
``target_rhat`` or the smallest ESS below ``min_ess``, doubles the draws per chain, at most
``max_doublings`` times (:class:`ConvergenceBudget`): through ``sample_more(n)`` where the
estimator can continue its chains, else by refitting with twice ``n_samples`` /
``n_iterations``. The budget counts draws, not seconds, so a run gives the same record on
any machine and in any process. A run that ends unconverged says so (``converged: False``)
and :func:`graphssl.suite.format_table` marks its row.

:func:`run_job` wraps :func:`run_model` for the grid: it never raises (a failing model
becomes an ``error`` record) and returns the files to write as bytes (ArviZ netCDF, PNG
plots), so that only the caller -- one process -- writes into the output folder, whichever
process or machine fitted the model.
"""

from __future__ import annotations

import dataclasses
import io
import os
import tempfile
import threading
import time
import warnings
from collections.abc import Callable

import numpy as np
from sklearn.exceptions import ConvergenceWarning as SklearnConvergenceWarning

from graphssl import metrics
from graphssl._memory_maps import release_executables_near_limit

__all__ = ["ConvergenceBudget", "invariant_diagnostics", "run_model", "run_job", "portable"]

# One fit at a time per process: ``warnings.catch_warnings`` swaps the process-wide warning
# filters and ``showwarning`` (Python 3.12 has no thread-local variant), so two fits on the
# threads of one Dask worker would record each other's warnings (see :func:`run_model`).
_FIT_LOCK = threading.RLock()


@dataclasses.dataclass(frozen=True)
class ConvergenceBudget:
    """When a sampled run counts as converged, and how far it may be extended.

    Attributes:
      target_rhat: largest accepted R-hat on every invariant statistic (Vehtari et al. 2021).
      min_ess: smallest accepted bulk ESS on every invariant statistic.
      max_doublings: the draws per chain may double this many times (``2**max_doublings``
        times the estimator's own setting at most); 0 = never extend, only report.
    """

    target_rhat: float = 1.01
    min_ess: float = 100.0
    max_doublings: int = 3

    def __post_init__(self):
        if not self.target_rhat >= 1.0:
            raise ValueError(f"target_rhat: must be >= 1, got {self.target_rhat}")
        if not self.min_ess >= 0:
            raise ValueError(f"min_ess: must be >= 0, got {self.min_ess}")
        if int(self.max_doublings) != self.max_doublings or self.max_doublings < 0:
            raise ValueError(f"max_doublings: must be an integer >= 0, got {self.max_doublings}")


# ----------------------------------------------------------------------------- convergence


def _chains(estimator):
    """``(labels [chains, draws, n], energy [chains, draws])`` of a sampled fit, else None.

    An energy trace recorded every iteration (longer than the thinned label draws) is read
    at the draws, as the diffusion mixture's ``as_label_samples`` does.
    """
    samples = getattr(estimator, "samples_", None)
    if samples is None or not hasattr(samples, "labels") or not hasattr(samples, "energy"):
        return None
    labels, energy = np.asarray(samples.labels), np.asarray(samples.energy, dtype=np.float64)
    if labels.ndim != 3 or energy.ndim != 2 or energy.shape[0] != labels.shape[0]:
        return None
    n_draws = labels.shape[1]
    if energy.shape[1] != n_draws:
        thin = max(energy.shape[1] // n_draws, 1)
        energy = energy[:, thin - 1::thin][:, :n_draws]
    if energy.shape[1] != n_draws:
        return None
    return labels, energy


def invariant_diagnostics(estimator, observed=None, budget=None) -> dict | None:
    """R-hat / bulk ESS of a sampled fit on permutation-invariant statistics, else ``None``.

    The statistics and the rule are those of :mod:`graphssl.inference.mcmc.statistics`: the
    energy, the sorted class sizes and the co-assignment of the documented node pairs
    (``default_pairs``: 10 pairs of unlabelled nodes, seed 0). An estimator's own report
    (``convergence_``, :func:`graphssl.diagnostics.check_convergence`: the same statistics
    plus any it traces, e.g. the mixture's number of components) is used when its thresholds
    are the budget's. Returns ``rhat_energy``,
    ``ess_energy``, ``rhat_max`` / ``ess_min`` (worst over all statistics), ``converged``
    (R-hat <= ``budget.target_rhat`` and ESS >= ``budget.min_ess`` everywhere), ``failing``
    (what fails, worst first), ``chains``, ``draws`` and ``unsettled_labels`` (the share of
    the unlabelled nodes whose label the chains leave within two standard errors of a tie,
    :func:`graphssl.diagnostics.label_stability`). ``None`` when the fit was not
    sampled or has fewer than 2 chains or 4 draws per chain.
    """
    from graphssl.inference.mcmc import statistics

    budget = ConvergenceBudget() if budget is None else budget
    own = getattr(estimator, "convergence_", None)
    if isinstance(own, statistics.ConvergenceReport) and own.rhat_max == budget.target_rhat \
            and own.ess_min == budget.min_ess and own.n_draws >= 4:
        return _from_report(own)  # the estimator's own judgement (it may trace more)
    chains = _chains(estimator)
    if chains is None:
        return None
    labels, energy = chains
    n_chains, n_draws, n = labels.shape
    if n_chains < 2 or n_draws < 4:
        return None
    if observed is not None and np.asarray(observed).shape != (n,):
        observed = None
    n_classes = max(int(labels.max()) + 1, len(getattr(estimator, "classes_", ())))
    pairs = statistics.default_pairs(n, observed)
    stats = statistics.invariant_statistics(labels, energy, n_classes, pairs)
    report = statistics.convergence_report(stats, rhat_max=budget.target_rhat,
                                           ess_min=budget.min_ess)
    if observed is not None and np.any(observed):  # labels anchor the classes of every chain
        report = report._replace(stability=statistics.label_stability(
            statistics.chain_label_frequencies(statistics.thin_draws(labels, 2000), n_classes),
            free=~np.asarray(observed, dtype=bool)))
    return _from_report(report) | {"draws": int(n_draws)}


def _from_report(report) -> dict:
    """The record's fields from a :class:`~graphssl.inference.mcmc.statistics.ConvergenceReport`
    (``draws`` = draws per chain judged, after its thinning to at most 2000;
    ``unsettled_labels``: the share of the free nodes whose posterior-mean label the chains
    leave within two standard errors of a tie, its ``stability``, or None)."""
    first = lambda d, k: float(np.asarray(d.get(k, [np.nan])).reshape(-1)[0])  # noqa: E731
    return {"rhat_energy": first(report.rhat, "energy"), "ess_energy": first(report.ess, "energy"),
            "rhat_max": report.max_rhat, "ess_min": report.min_ess,
            "converged": bool(report.converged), "failing": list(report.failing[:4]),
            "chains": int(report.n_chains), "draws": int(report.n_draws),
            "unsettled_labels": None if report.stability is None
            else float(report.stability.fraction)}


def _params(estimator) -> dict:
    """The estimator's parameters (``get_params``), or none for an object without them."""
    get = getattr(estimator, "get_params", None)
    return get(deep=False) if callable(get) else {}


def _extend(estimator, fit: Callable) -> str:
    """Double the draws per chain: continue the chains where possible, else refit."""
    if hasattr(estimator, "sample_more"):
        params = _params(estimator)
        n_more = params.get("n_iterations") or params.get("n_samples")
        if n_more is None:
            n_more = int(np.asarray(estimator.samples_.labels).shape[1])
        n_more = int(n_more) * 2 ** getattr(estimator, "_suite_doublings", 0)
        estimator.sample_more(n_more)
        estimator._suite_doublings = getattr(estimator, "_suite_doublings", 0) + 1
        return "continued"
    params = estimator.get_params()
    name = "n_samples" if "n_samples" in params else "n_iterations"
    estimator.set_params(**{name: 2 * int(params[name])})
    fit(estimator)
    return "refitted"


# ----------------------------------------------------------------------------- one run


def _normalised(scores) -> np.ndarray:
    """Rows scaled to sum to one (an all-zero row becomes uniform), so ECE is defined."""
    scores = np.clip(np.asarray(scores, dtype=np.float64), 0.0, None)
    totals = scores.sum(axis=1, keepdims=True)
    uniform = np.full_like(scores, 1.0 / scores.shape[1])
    return np.where(totals > 0, scores / np.where(totals > 0, totals, 1.0), uniform)


def _can_extend(estimator) -> bool:
    if hasattr(estimator, "sample_more"):
        return True
    params = _params(estimator)
    return "n_samples" in params or "n_iterations" in params


def _frozen(estimator) -> bool:
    """Chains in which nothing moved (the estimator's report): more draws of chains that
    never leave their state change nothing (the main job's Boltzmann MRF spent 8x the draws,
    27 s instead of 4, on chains a MAP search showed stuck)."""
    report = getattr(estimator, "convergence_", None)
    return getattr(report, "moved", True) is False


def _sample_until_converged(estimator, fit, budget, observed) -> dict | None:
    diag = invariant_diagnostics(estimator, observed, budget)
    if diag is None:
        return None
    rounds, how = 0, None
    while (not diag["converged"] and rounds < budget.max_doublings and _can_extend(estimator)
           and not _frozen(estimator)):
        how = _extend(estimator, fit)
        rounds += 1
        diag = invariant_diagnostics(estimator, observed, budget) or diag
    return diag | {"doublings": rounds, "extended_by": how}


def run_model(name: str, factory: Callable, graph, y, labelled_idx, *, X=None,
              budget: ConvergenceBudget | None = None, classes=None,
              progress: bool = True) -> tuple[dict, object]:
    """Fit one model on one split; return its record and the fitted estimator.

    Models whose estimator sets ``fits_features = True`` (they learn from the features, e.g.
    the Boltzmann MRF's length scales or the harmonic mixture's components) are fitted with
    ``fit(X, y)``; all others with ``fit_graph(graph, y)`` on the shared graph. Sampled
    fits run until converged or out of ``budget`` (module docstring); every warning raised
    during the fit is kept in ``record["warnings"]`` (first line, at most 5).

    Threads: the warnings are captured with ``warnings.catch_warnings``, which swaps
    process-wide state, so the fit and its extensions run under a process-wide lock: on a
    worker with several threads (``dask worker``'s default, a threaded ``Client``) the fits
    of one process run one at a time and each record holds its own warnings only (a warning
    that another, non-fitting thread of the process issues meanwhile is still recorded). The
    suite's own ``LocalCluster`` uses one thread per process, so it loses no parallelism; a
    thread-aware capture was not chosen because third-party code inside a fit (scikit-learn,
    ArviZ) opens its own ``catch_warnings``, which would still mix the threads' warnings.
    The time in ``record["seconds"]`` excludes any wait for the lock.

    Args:
      name, factory: the model's name and a callable returning an unfitted estimator.
      graph: the shared graph; y: ``int[n]`` labels (``-1`` where unknown: accuracy is
        then not reported and ``predictions`` are recorded instead).
      labelled_idx: the labelled nodes of this split.
      X: features (models with ``fits_features``).
      budget: :class:`ConvergenceBudget` (default: R-hat 1.01, ESS 100, 3 doublings).
      classes: original class names (``classes[k]`` for class ``k``); predictions are
        recorded in these names.
      progress: False silences an estimator whose own ``progress`` is ``"auto"`` (the
        diffusion mixture's and the Boltzmann MRF's bars and their "why it is long" line;
        ``graphssl run --no-progress``); an explicit True or False is kept.
    """
    budget = ConvergenceBudget() if budget is None else budget
    y = np.asarray(y)
    y_masked = np.full(y.shape, -1, dtype=np.int64)
    y_masked[labelled_idx] = y[labelled_idx]
    estimator = factory()
    if not progress and _params(estimator).get("progress") == "auto":
        estimator.set_params(progress=False)

    def fit(est):
        if getattr(est, "fits_features", False):
            if X is None:
                raise ValueError(f"{name}: this model needs the features X")
            est.fit(X, y_masked)
        else:
            est.fit_graph(graph, y_masked)

    with _FIT_LOCK:  # the warnings captured are this fit's alone (docstring)
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fit(estimator)
            convergence = _sample_until_converged(estimator, fit, budget, y_masked >= 0)
        seconds = time.perf_counter() - start
    record = {"model": name, "seconds": seconds, "n_labelled": int(len(labelled_idx))}
    record |= _scores(estimator, y, labelled_idx, classes)
    if convergence is not None:
        record |= convergence
    if convergence is not None and convergence["converged"]:
        # warnings of the shorter runs that the extension cured are no longer true
        caught = [w for w in caught if not issubclass(w.category, SklearnConvergenceWarning)]
    record["warnings"] = sorted({f"{w.category.__name__}: {str(w.message).splitlines()[0]}"
                                 for w in caught})[:5]
    return record, estimator


def _scores(estimator, y, labelled_idx, classes) -> dict:
    proba = _normalised(estimator.label_distributions_)
    fitted_classes = np.asarray(estimator.classes_)
    posterior_mean = fitted_classes[np.argmax(proba, axis=1)]
    map_labels = getattr(estimator, "map_labels_", None)
    map_labels = posterior_mean if map_labels is None else np.asarray(map_labels)
    prediction = np.asarray(estimator.transduction_)
    out = {}
    if np.all(y >= 0):
        encoded_truth = np.searchsorted(fitted_classes, y)
        out |= {
            "accuracy": metrics.accuracy(y, prediction, labelled_idx),
            "ami": metrics.adjusted_mutual_info(y, prediction, labelled_idx),
            "accuracy_map": metrics.accuracy(y, map_labels, labelled_idx),
            "accuracy_posterior_mean": metrics.accuracy(y, posterior_mean, labelled_idx),
            "ece": metrics.expected_calibration_error(encoded_truth, proba, 10, labelled_idx),
        }
    else:
        names = np.asarray(classes) if classes is not None else None
        out["predictions"] = (names[prediction] if names is not None else prediction).tolist()
    out["map_vs_posterior_mean_disagreement"] = metrics.map_posterior_disagreement(
        map_labels, posterior_mean, labelled_idx)
    return out


# ----------------------------------------------------------------------------- artefacts


def inference_data(estimator):
    """The estimator's ArviZ data: ``inference_data_`` or ``to_arviz()`` when it sampled."""
    data = getattr(estimator, "inference_data_", None)
    if data is None and hasattr(estimator, "to_arviz") and hasattr(estimator, "samples_"):
        try:
            data = estimator.to_arviz()
        except Exception:  # noqa: BLE001 - diagnostics are optional, the numbers are not
            data = None
    return data


def _netcdf_bytes(estimator) -> tuple[bytes | None, str | None]:
    data = inference_data(estimator)
    if data is None:
        return None, None
    handle, path = tempfile.mkstemp(suffix=".nc")
    os.close(handle)
    try:
        data.to_netcdf(path)
        with open(path, "rb") as fh:
            return fh.read(), None
    except Exception as err:  # noqa: BLE001 - a failed save must not lose the run's numbers
        return None, f"not written: {type(err).__name__}: {err}"
    finally:
        os.unlink(path)


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=110)
    return buffer.getvalue()


def plot_marginals(X, estimator, labelled_idx, title: str) -> bytes | None:
    """PNG of the marginal-confidence map for 2-D data (colour = label, opacity = its
    probability), or ``None`` for other data."""
    if X is None or np.asarray(X).ndim != 2 or np.asarray(X).shape[1] != 2:
        return None
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    X = np.asarray(X)
    proba = np.asarray(estimator.label_distributions_)
    label = np.argmax(proba, axis=1)
    confidence = proba[np.arange(len(label)), label]
    fig = Figure(figsize=(5, 4))  # no pyplot: never touches the caller's backend
    ax = fig.subplots()
    colours = colormaps["tab10"](label % 10)
    colours[:, 3] = np.clip(confidence, 0.15, 1.0)
    ax.scatter(X[:, 0], X[:, 1], c=colours, s=8, linewidths=0)
    ax.scatter(X[labelled_idx, 0], X[labelled_idx, 1], c="k", marker="x", s=40, label="labelled")
    ax.set_xlabel("feature 0")
    ax.set_ylabel("feature 1")
    ax.set_title(f"{title}: label (colour) and its marginal probability (opacity)", fontsize=8)
    ax.legend(loc="best", fontsize=7)
    return _png(fig)


def plot_energy_trace(estimator, title: str) -> bytes | None:
    """PNG of the energy trace per chain, when the model was sampled."""
    chains = _chains(estimator)
    if chains is None:
        return None
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 3))
    ax = fig.subplots()
    for chain, trace in enumerate(chains[1]):
        ax.plot(trace, lw=0.7, label=f"chain {chain}")
    ax.set_xlabel("draw")
    ax.set_ylabel("energy")
    ax.set_title(f"{title}: energy trace (chains should overlap)", fontsize=8)
    ax.legend(fontsize=6, ncol=4)
    return _png(fig)


def _array_fields(graph) -> list[str]:
    if not dataclasses.is_dataclass(graph) or isinstance(graph, type):
        return []
    return [f.name for f in dataclasses.fields(graph) if not f.metadata.get("static")]


def portable(graph):
    """The graph (a :class:`graphssl.graph.Graph` dataclass) with NumPy arrays in place of
    JAX arrays, to send to another process: a JAX array is rebuilt there under that
    process's ``jax_enable_x64`` at unpickling time (float64 weights would become float32
    before :func:`run_job` could set the caller's precision). Other objects pass as they are."""
    fields = _array_fields(graph)
    return dataclasses.replace(graph, **{f: np.asarray(getattr(graph, f)) for f in fields}) \
        if fields else graph


def _restored(graph):
    fields = [f for f in _array_fields(graph) if isinstance(getattr(graph, f), np.ndarray)]
    if not fields:
        return graph
    import jax.numpy as jnp

    return dataclasses.replace(graph, **{f: jnp.asarray(getattr(graph, f)) for f in fields})


def run_job(name: str, factory: Callable, graph, y, labelled_idx, *, X=None,
            budget: ConvergenceBudget | None = None, classes=None, plots: bool = False,
            x64: bool | None = None, progress: bool = True) -> tuple[dict, dict[str, bytes]]:
    """One grid cell, safe to run in any process: ``(record, files)``.

    ``files`` maps ``"arviz"``, ``"plot"``, ``"trace_plot"`` to the bytes to write (plots
    only with ``plots=True``). A failing fit gives ``{"model": name, "error": "..."}`` and
    no files. ``x64`` sets ``jax_enable_x64`` first (a worker process must compute in the
    caller's precision for its results to equal a serial run's); a :func:`portable` graph
    gets its JAX arrays back after that. ``progress``: as in :func:`run_model`.
    """
    if x64 is not None:
        import jax

        jax.config.update("jax_enable_x64", bool(x64))
    graph = _restored(graph)
    release_executables_near_limit()
    try:
        record, estimator = run_model(name, factory, graph, y, labelled_idx, X=X,
                                      budget=budget, classes=classes, progress=progress)
    except Exception as err:  # noqa: BLE001 - one failing model must not sink the report
        return {"model": name, "error": f"{type(err).__name__}: {err}"}, {}
    files: dict[str, bytes] = {}
    netcdf, problem = _netcdf_bytes(estimator)
    if netcdf is not None:
        files["arviz"] = netcdf
    elif problem is not None:
        record["arviz"] = problem
    if plots:
        for key, png in (("plot", plot_marginals(X, estimator, labelled_idx, name)),
                         ("trace_plot", plot_energy_trace(estimator, name))):
            if png is not None:
                files[key] = png
    return record, files
