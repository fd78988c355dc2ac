"""graphssl.suite inputs: warnings of concurrent fits, the stored-result key, model names
and factories that cannot travel to Dask workers."""

import threading
import time
import warnings

import numpy as np
import pytest

from graphssl import suite
from graphssl.data import two_moons
from graphssl.estimators.baselines import HarmonicFunctionClassifier
from graphssl.graph import knn_graph


@pytest.fixture(scope="module")
def moons():
    data = two_moons(120, seed=2)
    X = np.asarray(data.X)
    y = np.asarray(data.y)
    labelled = np.r_[np.flatnonzero(y == 0)[:3], np.flatnonzero(y == 1)[:3]]
    return X, y, knn_graph(X, 8), labelled


class _Counting(HarmonicFunctionClassifier):
    fits = 0

    def _label_distributions(self, graph, labels, n_classes):
        type(self).fits += 1
        return super()._label_distributions(graph, labels, n_classes)


# ----------------------------------------------------------------------------- warnings

_NOISY_STARTED = threading.Event()


class _Noisy(HarmonicFunctionClassifier):
    """Warns 30 times over about 0.3 s during its fit."""

    def _label_distributions(self, graph, labels, n_classes):
        for i in range(30):
            warnings.warn(f"noisy warning {i}", UserWarning, stacklevel=1)
            _NOISY_STARTED.set()
            time.sleep(0.01)
        return super()._label_distributions(graph, labels, n_classes)


class _Quiet(HarmonicFunctionClassifier):
    """Never warns; its fit lasts long enough to overlap the noisy one."""

    def _label_distributions(self, graph, labels, n_classes):
        time.sleep(0.1)
        return super()._label_distributions(graph, labels, n_classes)


def test_concurrent_fits_on_two_threads_keep_their_own_warnings(moons):
    """Two fits on two threads of one process (a multi-threaded Dask worker): the quiet
    model's record holds no warning of the noisy one, and the noisy one keeps its own.
    (``warnings.catch_warnings`` is process-wide: without the fit lock the quiet run, which
    starts while the noisy one is warning, recorded the noisy model's warnings.)"""
    X, y, graph, labelled = moons
    suite.run_model("warm-up", HarmonicFunctionClassifier, graph, y, labelled)  # compile first
    _NOISY_STARTED.clear()
    records = {}

    def run(name, factory):
        records[name] = suite.run_model(name, factory, graph, y, labelled)[0]

    noisy = threading.Thread(target=run, args=("noisy", _Noisy))
    quiet = threading.Thread(target=run, args=("quiet", _Quiet))
    noisy.start()
    assert _NOISY_STARTED.wait(30)
    quiet.start()  # while the noisy fit is warning
    noisy.join(60)
    quiet.join(60)
    assert records["quiet"]["warnings"] == []
    assert records["noisy"]["warnings"]
    assert all(w.startswith("UserWarning: noisy warning") for w in records["noisy"]["warnings"])


# ----------------------------------------------------------------------------- stored results


def test_resume_refits_when_the_splits_data_or_budget_change(moons, tmp_path):
    """A stored record is reused only for the same split, data, budget and config."""
    X, y, graph, labelled = moons
    fit = lambda splits, **kw: suite.compare_models(  # noqa: E731
        {"grf": _Counting}, graph, kw.pop("y", y), splits, out_dir=tmp_path, X=X,
        config={"seed": 0}, progress=False, **kw)["grf"]
    _Counting.fits = 0
    first = fit([labelled])
    assert _Counting.fits == 1 and first[0]["n_labelled"] == 6
    assert fit([labelled])[0]["resumed"] and _Counting.fits == 1  # same inputs: reused
    fewer = fit([labelled[[0, 3]]])[0]  # another split under the same config: refitted
    assert _Counting.fits == 2 and fewer["n_labelled"] == 2 and not fewer.get("resumed")
    two = fit([labelled[[0, 3]], labelled])  # split 0 unchanged, split 1 new
    assert _Counting.fits == 3 and two[0]["resumed"] and not two[1].get("resumed")
    fit([labelled[[0, 3]]], budget=suite.ConvergenceBudget(min_ess=50))
    assert _Counting.fits == 4  # another convergence budget
    relabelled = y.copy()
    relabelled[np.setdiff1d(np.arange(len(y)), labelled)[0]] ^= 1  # one unlabelled point
    fit([labelled[[0, 3]]], y=relabelled)
    assert _Counting.fits == 5  # other data


def test_config_arrays_are_keyed_exactly(moons, tmp_path):
    """Large arrays (``str`` abbreviates them) and floats differing in the last digits are
    different configs."""
    X, y, graph, labelled = moons
    base = np.arange(3000)
    changed = base.copy()
    changed[1500] = -7
    _Counting.fits = 0
    for config in ({"w": base}, {"w": changed}, {"s": np.array([0.1234567891])},
                   {"s": np.array([0.1234567899])}, {"s": 0.1234567899}):
        record = suite.compare_models({"grf": _Counting}, graph, y, [labelled], X=X,
                                      out_dir=tmp_path, config=config, progress=False)["grf"][0]
        assert not record.get("resumed"), config
    assert _Counting.fits == 5
    key = suite.fingerprint
    assert key({"w": base}) != key({"w": changed})
    assert key({"a": 1, "b": [2.5, None]}) == key({"b": [2.5, None], "a": 1})
    assert key(1) != key(1.0) and key([1]) != key((1,)) and key(graph) == key(graph)


# ----------------------------------------------------------------------------- model names


@pytest.mark.parametrize("names, message", [
    (["grf/k=6"], r"'grf/k=6'.*letters, digits.*e\.g\. 'grf_k=6'"),
    (["grf", "../grf"], r"'\.\./grf'.*letters, digits"),
    (["grf", ""], r"''.*letters, digits"),
    (["GRF", "grf"], r"'GRF' and 'grf' would write the same file"),
    (["x", "x_energy"], r"'x' and 'x_energy' would write the same file .*x_energy\.png"),
])
def test_bad_model_names_are_refused_before_any_fit(moons, tmp_path, names, message):
    X, y, graph, labelled = moons
    _Counting.fits = 0
    with pytest.raises(ValueError, match=message):
        suite.compare_models({name: _Counting for name in names}, graph, y, [labelled], X=X,
                             out_dir=tmp_path, progress=False)
    assert _Counting.fits == 0
    assert not (tmp_path / "runs").exists()  # refused before the output folder is made


def test_usual_model_names_pass():
    suite.check_model_names(["grf", "potts_sw", "grf_k=6", "lgc-0.99", "GRF+cmn", "m.v2"])


def test_a_factory_that_cannot_be_pickled_is_refused_before_dask_runs(moons, tmp_path):
    """On Dask a factory that cannot be pickled (here a lambda holding a lock) is refused
    up front with an error naming the model, instead of a TypeError naming neither."""
    pytest.importorskip("cloudpickle")
    X, y, graph, labelled = moons
    lock = threading.Lock()
    models = {"grf": HarmonicFunctionClassifier,
              "locked": lambda: (lock, HarmonicFunctionClassifier())[1]}
    # workers=2: refused before a LocalCluster starts; a client: before anything is sent
    for where in ({"workers": 2}, {"client": object()}):
        with pytest.raises(ValueError, match=r"models\['locked'\].*cannot be pickled.*"
                                             r"module-level function or class"):
            suite.compare_models(models, graph, y, [labelled], X=X, out_dir=tmp_path,
                                 progress=False, **where)
