"""graphssl.suite: per-run records, resume after interruption, failing models isolated."""

import json
import warnings
from typing import NamedTuple

import numpy as np
import pytest
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning

from graphssl import suite
from graphssl.data import two_moons
from graphssl.estimators.baselines import HarmonicFunctionClassifier
from graphssl.graph import knn_graph


@pytest.fixture(scope="module")
def moons():
    data = two_moons(200, seed=1)
    X = np.asarray(data.X)
    return X, np.asarray(data.y), knn_graph(X, 8)


class _Counting(HarmonicFunctionClassifier):
    fits = 0

    def _label_distributions(self, graph, labels, n_classes):
        type(self).fits += 1
        return super()._label_distributions(graph, labels, n_classes)


class _WithMap(HarmonicFunctionClassifier):
    def _fit_on_graph(self, graph, y):
        super()._fit_on_graph(graph, y)
        self.map_labels_ = np.zeros_like(self.transduction_)  # a deliberately poor MAP
        return self


class _Broken(HarmonicFunctionClassifier):
    def _label_distributions(self, graph, labels, n_classes):
        raise RuntimeError("boom")


class _WithProgress(HarmonicFunctionClassifier):
    """An estimator with its own ``progress`` parameter (as the diffusion mixture and the
    Boltzmann MRF have); records the setting it was fitted with."""

    seen = []

    def __init__(self, progress="auto"):
        super().__init__()
        self.progress = progress

    def _label_distributions(self, graph, labels, n_classes):
        type(self).seen.append(self.progress)
        return super()._label_distributions(graph, labels, n_classes)


def test_no_progress_silences_the_estimators_auto_bars(moons, tmp_path):
    """``compare_models(progress=False)`` (``graphssl run --no-progress``) fits an estimator
    whose ``progress`` is ``"auto"`` with ``progress=False``; a grid with its bar keeps
    ``"auto"``, and an explicit setting is never changed."""
    from functools import partial

    X, y, graph = moons
    splits = [np.r_[np.flatnonzero(y == 0)[:2], np.flatnonzero(y == 1)[:2]]]
    _WithProgress.seen = []
    for progress, factory in ((False, _WithProgress), (True, _WithProgress),
                              (False, partial(_WithProgress, progress=True))):
        suite.compare_models({"grf": factory}, graph, y, splits, X=X, progress=progress,
                             out_dir=tmp_path / f"{progress}{len(_WithProgress.seen)}")
    assert _WithProgress.seen == [False, "auto", True]


class _Warns(HarmonicFunctionClassifier):
    def _label_distributions(self, graph, labels, n_classes):
        warnings.warn("3 nodes are unreached", UserWarning, stacklevel=1)
        warnings.warn("chains drift", ConvergenceWarning, stacklevel=1)
        return super()._label_distributions(graph, labels, n_classes)


def test_fit_warnings_are_listed_below_the_table(moons, tmp_path):
    """A warning of a fit (say unreached nodes) reaches the printed table, not only the run
    records; convergence warnings stay with the table's ``*``."""
    X, y, graph = moons
    splits = [np.r_[np.flatnonzero(y == 0)[:s], np.flatnonzero(y == 1)[:2]] for s in (2, 3)]
    results = suite.compare_models({"warns": _Warns, "grf": HarmonicFunctionClassifier},
                                   graph, y, splits, X=X, progress=False, out_dir=tmp_path)
    summary = suite.summarise(results)
    assert summary["warns"]["warnings"] == {"UserWarning: 3 nodes are unreached": [0, 1]}
    assert summary["grf"]["warnings"] == {}
    table = suite.format_table(summary)
    assert table.splitlines()[-1] == "! warns, split(s) 0, 1: UserWarning: 3 nodes are unreached"
    frozen = suite.format_table({"sampler": {"converged": True, "errors": []}})
    assert "R-hat '-' on a sampled row (sampler): no statistic moved" in frozen


def test_records_and_resume(moons, tmp_path):
    X, y, graph = moons
    splits = [np.array([0, 1, 2, 3, 100, 101, 150, 160]), np.arange(0, 200, 20)]
    splits = [s[np.isin(s, np.flatnonzero(y == 0))][:2].tolist() +
              s[np.isin(s, np.flatnonzero(y == 1))][:2].tolist() for s in splits]
    splits = [np.array(s) for s in splits]
    models = {"grf": _Counting, "map": _WithMap, "broken": _Broken}
    first = suite.compare_models(models, graph, y, splits, out_dir=tmp_path, config={"a": 1},
                                 X=X, progress=False)
    assert _Counting.fits == 2
    assert all(0.5 < r["accuracy"] <= 1 for r in first["grf"])
    assert all("error" in r and "boom" in r["error"] for r in first["broken"])
    assert (tmp_path / "plots" / "grf.png").is_file()
    again = suite.compare_models(models, graph, y, splits, out_dir=tmp_path, config={"a": 1},
                                 X=X, progress=False)
    assert _Counting.fits == 2 and all(r.get("resumed") for r in again["grf"])
    assert again["grf"][0]["accuracy"] == first["grf"][0]["accuracy"]
    suite.compare_models(models, graph, y, splits, out_dir=tmp_path, config={"a": 2},
                         X=X, progress=False)
    assert _Counting.fits == 4  # a changed config never reuses stored results
    stored = json.loads((tmp_path / "runs" / "grf__split0.json").read_text())
    assert stored["config_key"] != first["grf"][0]["config_key"]
    summary = suite.summarise(again)
    table = suite.format_table(summary)
    assert "grf" in table and "error: RuntimeError" in table
    assert summary["grf"]["accuracy_mean"] == pytest.approx(
        np.mean([r["accuracy"] for r in first["grf"]]))


class _Samples(NamedTuple):
    labels: np.ndarray
    energy: np.ndarray


class _FakeSampler(BaseEstimator):
    """Chains that agree only from ``converges_at`` draws per chain on (a known answer)."""

    fits = 0

    def __init__(self, n_samples=100, converges_at=400):
        self.n_samples = n_samples
        self.converges_at = converges_at

    def fit_graph(self, graph, y):
        type(self).fits += 1
        rng = np.random.default_rng(self.n_samples)
        n, draws = graph.n_nodes, self.n_samples
        labels = rng.integers(0, 2, size=(4, draws, n)).astype(np.int8)
        energy = rng.normal(size=(4, draws))
        if draws < self.converges_at:
            energy += np.arange(4)[:, None]  # chains stuck at different levels
        self.samples_ = _Samples(labels, energy)
        self.classes_ = np.array([0, 1])
        self.label_distributions_ = np.full((n, 2), 0.5)
        self.transduction_ = np.zeros(n, dtype=int)
        warnings.warn("fake chains not converged", ConvergenceWarning, stacklevel=1)
        return self


def test_sampled_runs_extend_until_converged_or_budget(moons):
    X, y, graph = moons
    labelled = np.r_[np.flatnonzero(y == 0)[:3], np.flatnonzero(y == 1)[:3]]
    record, estimator = suite.run_model("fake", _FakeSampler, graph, y, labelled)
    assert record["converged"] and record["doublings"] == 2 and record["draws"] == 400
    assert record["rhat_max"] <= 1.01 and record["ess_min"] >= 100
    assert record["extended_by"] == "refitted" and estimator.n_samples == 400
    assert not any("ConvergenceWarning" in w for w in record["warnings"])  # cured
    short = suite.ConvergenceBudget(max_doublings=1)
    record, _ = suite.run_model("fake", _FakeSampler, graph, y, labelled, budget=short)
    assert not record["converged"] and record["draws"] == 200 and record["rhat_max"] > 1.5
    assert any("energy: R-hat" in f for f in record["failing"])
    assert any("ConvergenceWarning" in w for w in record["warnings"])
    summary = suite.summarise({"fake": [record | {"split": 0}]})
    assert summary["fake"]["converged"] is False and summary["fake"]["unconverged_splits"] == [0]
    table = suite.format_table(summary, short)
    assert "fake *" in table and "* not converged" in table and "fake: [0]" in table
    # each chain's draws are coin flips: every label sits within its standard error of a tie
    # (label_stability over the chains' own frequencies), reported beside R-hat and ESS
    assert 0.7 <= record["unsettled_labels"] <= 1.0
    assert "unsettled" in table.splitlines()[0]
    assert summary["fake"]["unsettled_labels_mean"] == pytest.approx(record["unsettled_labels"])


def test_map_and_posterior_mean_are_compared(moons):
    X, y, graph = moons
    labelled = np.r_[np.flatnonzero(y == 0)[:3], np.flatnonzero(y == 1)[:3]]
    record, estimator = suite.run_model("map", _WithMap, graph, y, labelled)
    unlabelled = np.setdiff1d(np.arange(len(y)), labelled)
    posterior_mean = estimator.classes_[np.argmax(estimator.label_distributions_, axis=1)]
    assert record["map_vs_posterior_mean_disagreement"] == pytest.approx(
        np.mean(posterior_mean[unlabelled] != 0))
    assert record["accuracy_map"] == pytest.approx(np.mean(y[unlabelled] == 0))
    assert record["accuracy_posterior_mean"] == record["accuracy"]
    assert 0 <= record["ece"] < 0.5


def test_a_sampled_run_writes_its_arviz_netcdf(moons, tmp_path):
    """The run's ArviZ record is written and reads back (h5netcdf 1.8 dropped h5py from its
    requirements, and every record then said "not written: ImportError")."""
    import arviz as az

    from graphssl.estimators import PottsClassifier

    X, y, graph = moons
    splits = [np.r_[np.flatnonzero(y == 0)[:3], np.flatnonzero(y == 1)[:3]]]
    factory = {"potts_sw": lambda: PottsClassifier(inference="swendsen_wang", n_chains=2,
                                                   n_samples=20, burn_in=5)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # 20 draws: about the file only
        [record] = suite.compare_models(factory, graph, y, splits, X=X, progress=False,
                                        out_dir=tmp_path)["potts_sw"]
    assert "not written" not in str(record.get("arviz", "")), record.get("arviz")
    [path] = (tmp_path / "arviz").glob("potts_sw__split0.nc")
    tree = az.from_netcdf(path)
    chains, draws = tree.posterior["energy"].shape[:2]
    assert chains == 2 and draws >= 20  # the suite doubles the draws toward convergence


def test_run_records_are_strict_json(tmp_path):
    """A record's NaN (an undefined R-hat) is written as null, which strict parsers read and
    ``summarise`` skips; Python's ``NaN`` token is not JSON."""
    def refuse(token):
        raise AssertionError(f"non-strict JSON token {token}")

    (tmp_path / "runs").mkdir()
    suite._store(tmp_path, "m", 0, "key", {"model": "m", "rhat_max": float("nan"),
                                           "accuracy": np.float32(0.5)}, {})
    stored = json.loads((tmp_path / "runs" / "m__split0.json").read_text(),
                        parse_constant=refuse)
    assert stored["rhat_max"] is None and stored["accuracy"] == 0.5
    assert "rhat_max_mean" not in suite.summarise({"m": [stored]})["m"]


class _FrozenSampler(_FakeSampler):
    """Chains that never move, shown stuck by a search: more draws cannot help."""

    def fit_graph(self, graph, y):
        from types import SimpleNamespace

        super().fit_graph(graph, y)
        self.convergence_ = SimpleNamespace(moved=False, converged=False)
        return self


def test_frozen_chains_are_not_given_more_draws(moons):
    """The main job's Boltzmann MRF doubled its draws three times (27 s instead of 4) on
    chains that never left their state: more draws of frozen chains change nothing."""
    X, y, graph = moons
    labelled = np.r_[np.flatnonzero(y == 0)[:3], np.flatnonzero(y == 1)[:3]]
    _FrozenSampler.fits = 0
    record, _ = suite.run_model("frozen", _FrozenSampler, graph, y, labelled)
    assert record["doublings"] == 0 and _FrozenSampler.fits == 1
    stuck = record | {"rhat_max": None, "rhat_energy": None, "converged": False, "split": 0}
    table = suite.format_table(suite.summarise({"frozen": [stuck]}), suite.ConvergenceBudget())
    assert "frozen *" in table and "(frozen): no statistic moved" in table
    assert "stuck chains" in table
