"""The comparison suite behind ``graphssl run``: every model on one graph, one report.

Each (model, split) cell of the grid is one :func:`graphssl.runs.run_job` (fit, sample until
converged or out of budget, score). Cells run one after the other in this process, or on
Dask (``dask.distributed``, the ``scale`` extra): a ``LocalCluster`` of ``workers``
processes, or a running cluster at ``scheduler``. Results are the same to the bit either
way (the same function on the same inputs; timings aside).

Files: this process alone writes ``<out>/runs/<model>__split<i>.json`` (the record),
``<out>/arviz/<model>__split<i>.nc`` (ArviZ netCDF) and, for split 0, ``<out>/plots/``
(PNG), each through a temporary file renamed over the target (atomic: a crash leaves the
old file or the new one, never half of one). The run's JSON is written last and is the
mark that the cell is done: an interrupted grid restarted with the same settings refits
only the missing cells. "The same settings" is the record's ``config_key``, a
:func:`fingerprint` of everything that decides the cell's result: the caller's ``config``,
the graph, ``y``, ``X``, ``classes``, the convergence budget, the JAX precision and the
split's labelled indices (the estimator is known by its name only). A stored record that
cannot be read (damaged, or from other settings) is reported on stderr with the reason and
refitted. A model's name is part of its file names, so it is checked up front
(:func:`check_model_names`). A worker that dies mid-fit
loses only that fit, which Dask runs again elsewhere; nothing is written twice, since the
writes happen here and only for results that came back.

Estimator conventions read here (all optional except the first two):
``fit_graph(graph, y)`` and ``label_distributions_`` (float[n, C], columns = ``classes_``);
``map_labels_`` (values of ``classes_``; MAP labels where the model has a posterior distinct
from its marginals); ``samples_`` (``labels [chains, draws, n]``, ``energy``) for the
convergence diagnostics, and ``sample_more(n)`` to continue the chains; ``inference_data_``
or ``to_arviz()`` (ArviZ DataTree).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import pathlib
import sys
import uuid
from collections.abc import Callable, Iterator

import numpy as np

from graphssl.records import (
    atomic_write,
    check_model_names,
    fingerprint,
    read_run,
    strict_json,
)
from graphssl.runs import ConvergenceBudget, portable, run_job, run_model

__all__ = ["run_model", "compare_models", "summarise", "format_table", "atomic_write",
           "read_run", "fingerprint", "check_model_names", "ConvergenceBudget"]


def _tqdm():
    """``tqdm.auto`` where it can draw a widget (ipywidgets installed), else the text bar:
    ``tqdm.auto`` without ipywidgets warns (TqdmWarning) in every notebook cell."""
    if importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.auto import tqdm
    else:
        from tqdm import tqdm
    return tqdm


def _run_key(config, graph, y, X, classes, budget: ConvergenceBudget, x64: bool) -> str:
    """The part of every cell's key shared by all cells (:func:`compare_models`)."""
    return fingerprint(config or {}, graph, y, X, classes, budget, x64)


def _cell_key(run_key: str, labelled) -> str:
    """A cell's ``config_key``: the run's key and the split's labelled indices."""
    return fingerprint(run_key, np.asarray(labelled))


def _check_picklable(cells) -> None:
    """Refuse, before anything runs on Dask, a factory that cannot travel to the workers."""
    import cloudpickle

    factories = {name: factory for (name, _), (factory, _) in cells}
    for name, factory in factories.items():
        try:
            cloudpickle.dumps(factory)
        except Exception as err:  # noqa: BLE001 - TypeError, PicklingError, ...: all say it
            raise ValueError(
                f"models[{name!r}]: its factory {factory!r} cannot be pickled to send to the "
                f"Dask workers ({type(err).__name__}: {err}); give a picklable factory: a "
                "module-level function or class (or functools.partial of one), not a lambda "
                "or local function holding a lock, open file, client or the like") from None


def _x64() -> bool:
    import jax

    return bool(jax.config.jax_enable_x64)


def _serial(cells, shared, common) -> Iterator[tuple[tuple[str, int], dict, dict]]:
    graph, y, X = shared
    for cell, (factory, labelled) in cells:
        record, files = run_job(cell[0], factory, graph, y, labelled, X=X, **common(cell))
        yield cell, record, files


_BLAS_THREADS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def same_blas_threads() -> dict[str, str]:
    """Worker environment with this process's BLAS thread counts. Dask starts workers with
    one BLAS thread each (``distributed.nanny.pre-spawn-environ``); NumPy products summed by
    another number of threads differ in the last bits (measured: the Dirichlet mixture's
    ECE, 0.02649699755717914 vs ...181174), so local workers get ours."""
    return {name: os.environ.get(name, str(os.cpu_count() or 1)) for name in _BLAS_THREADS}


def _client(workers: int, scheduler: str | None):
    """A dask.distributed client: the cluster at ``scheduler``, or a LocalCluster of
    ``workers`` single-threaded processes. Returns ``(client, closer)``."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise ValueError("workers/scheduler: Dask is not installed; pip install "
                         "'graphssl[scale]' (dask[distributed])") from None
    if scheduler is not None:
        client = Client(scheduler)
        return client, client.close
    import dask

    spawn_env = dict(dask.config.get("distributed.nanny.pre-spawn-environ", {}))
    with dask.config.set({"distributed.nanny.pre-spawn-environ":
                          spawn_env | same_blas_threads()}):
        cluster = LocalCluster(n_workers=int(workers), threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=logging.ERROR)
    client = Client(cluster)

    def close():
        client.close()
        cluster.close()

    return client, close


def _shared_value(value):
    return value


def _shared_future(client, value):
    """A future holding ``value`` for every cell: the result of a task that carries the value,
    fetched by each worker once. Unlike ``client.scatter``, the scheduler can compute it again
    when the workers holding it die -- scattered data held only by a killed worker is lost
    for good, and every cell still waiting for it fails (seen in CI: the data was scattered
    before the second worker of a fresh LocalCluster had joined, then that one worker was
    killed). The value travels once, inside the task (the large-graph warning is for graphs
    re-sent per task, not this)."""
    import dask

    with dask.config.set({"distributed.admin.large-graph-warning-threshold": "4GB"}):
        return client.submit(_shared_value, value, pure=False,
                             key=f"graphssl-shared-{uuid.uuid4().hex}")


def _on_dask(cells, shared, common, client) -> Iterator[tuple[tuple[str, int], dict, dict]]:
    from dask.distributed import as_completed

    graph, y, X = shared
    graph, y, X = (_shared_future(client, value) if value is not None else None
                   for value in (portable(graph), y, X))  # once per worker, not per cell
    futures = {}
    for cell, (factory, labelled) in cells:
        name, i = cell
        future = client.submit(run_job, name, factory, graph, y, labelled, X=X, **common(cell),
                               pure=False, key=f"graphssl-{name}-split{i}-{uuid.uuid4().hex}")
        futures[future] = cell
    try:
        for future in as_completed(futures):
            cell = futures[future]
            try:
                record, files = future.result()
            except Exception as err:  # noqa: BLE001 - e.g. KilledWorker: not stored, retried
                yield cell, {"model": cell[0], "error": f"{type(err).__name__}: {err}",
                             "transient": True}, {}
                continue
            yield cell, record, files
    finally:
        client.cancel(list(futures))


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
    budget: ConvergenceBudget | None = None,
    classes=None,
    workers: int = 1,
    scheduler: str | None = None,
    client=None,
) -> dict[str, list[dict]]:
    """Fit every model on every split, writing each result as it completes.

    Args:
      models: name -> factory returning an unfitted estimator (see the module docstring).
        The names become file names (:func:`check_model_names`; checked before any fit).
        On Dask the factories travel to the workers by pickle (cloudpickle); one that
        cannot be pickled is refused up front with a ``ValueError`` naming the model.
      graph: the shared graph; y: true labels (``-1`` where unknown: accuracy is then not
        reported and predictions are recorded in ``classes``' names).
      splits: labelled index arrays, one per split.
      out_dir: folder for ``runs/``, ``arviz/`` and ``plots/``.
      config: settings that identify the run (data set, graph, seed); a stored result is
        reused only when its config matches -- and the data, the split, ``classes``, the
        budget and the precision (module docstring) -- so a change never mixes results.
      X: features (for models with ``fits_features`` and for 2-D confidence plots).
      progress: the grid's bar; False also silences the estimators' own ``"auto"`` bars
        (:func:`~graphssl.runs.run_model`).
      resume: reuse stored results of the same config.
      budget: the convergence criteria and budget of sampled models
        (:class:`~graphssl.runs.ConvergenceBudget`).
      classes: original class names, for the predictions of unlabelled rows.
      workers: > 1 runs the cells on a Dask LocalCluster of that many processes.
      scheduler: address of a running Dask scheduler (``tcp://host:8786``) to run on.
      client: a ``dask.distributed.Client`` to run on (overrides the two above).

    Returns ``{model: [record per split]}`` in split order.
    """
    check_model_names(models)
    tqdm = _tqdm()
    out = pathlib.Path(out_dir)
    for sub in ("runs", "arviz", "plots"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    budget = ConvergenceBudget() if budget is None else budget
    x64 = _x64()
    run_key = _run_key(config, graph, np.asarray(y), None if X is None else np.asarray(X),
                       classes, budget, x64)
    keys = [_cell_key(run_key, labelled) for labelled in splits]
    done: dict[tuple[str, int], dict] = {}
    todo = []
    for name in models:
        for i in range(len(splits)):
            stored, problem = read_run(out / "runs" / f"{name}__split{i}.json", keys[i]) \
                if resume else (None, None)
            if stored is not None:
                done[(name, i)] = stored | {"resumed": True}
                continue
            if problem is not None and not problem.startswith("from other"):
                print(f"graphssl: {out / 'runs' / f'{name}__split{i}.json'} is {problem}; "
                      "refitting it", file=sys.stderr)
            todo.append(((name, i), (models[name], np.asarray(splits[i]))))

    def common(cell):
        return {"budget": budget, "classes": classes, "plots": cell[1] == 0, "x64": x64,
                "progress": bool(progress)}

    closer = None
    if todo and (client is not None or scheduler is not None or int(workers) > 1):
        _check_picklable(todo)
    if todo and client is None and (scheduler is not None or int(workers) > 1):
        client, closer = _client(workers, scheduler)
    bar = tqdm(total=len(todo), disable=not progress or not todo, desc="models x splits",
               leave=False)
    try:
        shared = (graph, np.asarray(y), None if X is None else np.asarray(X))
        stream = _on_dask(todo, shared, common, client) if client is not None \
            else _serial(todo, shared, common)
        for (name, i), record, files in stream:
            done[(name, i)] = _store(out, name, i, keys[i], record, files)
            bar.update(1)
            bar.set_postfix_str(f"{name} split {i}")
    finally:
        bar.close()
        if closer is not None:
            closer()
    return {name: [done[(name, i)] for i in range(len(splits))] for name in models}


def _store(out: pathlib.Path, name: str, i: int, key: str, record: dict, files: dict) -> dict:
    """Write a cell's files, then its record (the mark that the cell is done)."""
    record = record | {"split": i, "config_key": key}
    targets = {"arviz": out / "arviz" / f"{name}__split{i}.nc",
               "plot": out / "plots" / f"{name}.png",
               "trace_plot": out / "plots" / f"{name}_energy.png"}
    for kind, data in files.items():
        atomic_write(targets[kind], data)
        record[kind] = str(targets[kind].relative_to(out))
    if not record.get("transient"):
        atomic_write(out / "runs" / f"{name}__split{i}.json",
                     json.dumps(strict_json(record), indent=1, allow_nan=False))
    return record


_COLUMNS = [
    ("accuracy", "acc"),
    ("ami", "AMI"),
    ("accuracy_map", "acc MAP"),
    ("accuracy_posterior_mean", "acc PM"),
    ("map_vs_posterior_mean_disagreement", "MAP!=PM"),
    ("ece", "ECE"),
    ("rhat_max", "R-hat"),
    ("ess_min", "ESS"),
    ("unsettled_labels", "unsettled"),
    ("seconds", "time s"),
]
_EXTRA = ["rhat_energy", "ess_energy", "draws"]


def summarise(results: dict[str, list[dict]]) -> dict[str, dict]:
    """Mean and standard deviation of every recorded figure, per model.

    ``converged`` is ``None`` for models that were not sampled, else whether every split
    converged; ``unconverged_splits`` lists those that did not.
    """
    summary = {}
    for name, runs in results.items():
        row: dict = {"n_splits": len(runs), "errors": [r["error"] for r in runs if "error" in r]}
        for key in [k for k, _ in _COLUMNS] + _EXTRA:
            values = [r[key] for r in runs if r.get(key) is not None
                      and np.isfinite(r[key])]
            if values:
                row[f"{key}_mean"] = float(np.mean(values))
                row[f"{key}_std"] = float(np.std(values))
        sampled = [r for r in runs if "converged" in r]
        row["converged"] = all(r["converged"] for r in sampled) if sampled else None
        row["unconverged_splits"] = [r["split"] for r in sampled if not r["converged"]]
        row["warnings"] = _warnings_by_text(runs)
        summary[name] = row
    return summary


def _warnings_by_text(runs: list[dict]) -> dict[str, list[int]]:
    """``{warning's first line: [splits]}`` over a model's runs; convergence warnings left
    out (the table's ``*`` reports them)."""
    found: dict[str, list[int]] = {}
    for i, run in enumerate(runs):
        for text in run.get("warnings", ()):
            if not text.startswith("ConvergenceWarning"):
                found.setdefault(text, []).append(run.get("split", i))
    return found


def format_table(summary: dict[str, dict], budget: ConvergenceBudget | None = None) -> str:
    """Plain-text table of :func:`summarise` output; rows whose chains did not converge
    are marked ``*`` and explained below the table, and every other warning of a fit
    (unreached nodes, an ordered phase, ...) follows as a line ``! model, split(s): text``.
    R-hat is the largest and ESS the smallest over the invariant statistics (energy, class
    sizes, co-assignment)."""
    budget = ConvergenceBudget() if budget is None else budget
    width = max([20] + [len(name) + 3 for name in summary])
    header = f"{'model':<{width}}" + "".join(f"{label:>10}" for _, label in _COLUMNS)
    lines = [header, "-" * len(header)]
    for name, row in summary.items():
        cells = []
        for key, _ in _COLUMNS:
            value = row.get(f"{key}_mean")
            if value is None:
                cells.append(f"{'-':>10}")
            elif key == "ess_min":
                cells.append(f"{value:>10.0f}")
            else:
                cells.append(f"{value:>10.4f}")
        mark = " *" if row.get("converged") is False else ""
        line = f"{name + mark:<{width}}" + "".join(cells)
        if row["errors"]:
            line += f"   error: {row['errors'][0][:60]}"
        lines.append(line)
    unconverged = [n for n, row in summary.items() if row.get("converged") is False]
    if unconverged:
        lines.append(
            f"* not converged (R-hat > {budget.target_rhat} or ESS < {budget.min_ess:.0f} on "
            f"an invariant statistic after up to {2 ** budget.max_doublings}x the draws) on "
            "split(s) "
            + "; ".join(f"{n}: {summary[n]['unconverged_splits']}" for n in unconverged)
            + " -- read those rows' posterior figures with care")
    frozen = [n for n, row in summary.items()
              if row.get("converged") and row.get("rhat_max_mean") is None]
    if frozen:
        lines.append(
            f"R-hat '-' on a sampled row ({', '.join(frozen)}): no statistic moved in any "
            "chain, so R-hat is undefined: a posterior that sharp, or chains that never left "
            "their start")
    stuck = [n for n, row in summary.items()
             if row.get("converged") is False and row.get("rhat_max_mean") is None]
    if stuck:
        lines.append(
            f"R-hat '-' on a row marked * ({', '.join(stuck)}): no statistic moved in any "
            "chain, and the MAP search found a lower energy than the chains': stuck chains "
            "(their draws were not multiplied; more cannot help), not a sharp posterior")
    for name, row in summary.items():  # unreached nodes, ordered phases, rescaled graphs...
        for text, splits in row.get("warnings", {}).items():
            short = text if len(text) <= 160 else text[:157] + "..."
            lines.append(f"! {name}, split(s) {', '.join(map(str, splits))}: {short}")
    return "\n".join(lines)
