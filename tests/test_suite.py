"""graphssl.suite: per-run records, resume after interruption, failing models isolated."""

import json

import numpy as np
import pytest

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


def test_energy_diagnostics_from_sample_stats():
    rng = np.random.default_rng(0)
    data = {"sample_stats": {"energy": rng.normal(size=(4, 200))}}
    diag = suite._energy_diagnostics(data)
    assert 0.95 < diag["rhat_energy"] < 1.05 and diag["ess_energy"] > 300
    shifted = {"sample_stats": {"energy": rng.normal(size=(4, 200)) + np.arange(4)[:, None]}}
    assert suite._energy_diagnostics(shifted)["rhat_energy"] > 1.5


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
