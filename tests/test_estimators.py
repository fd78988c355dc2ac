"""sklearn-style estimators over the baselines (graphssl.estimators.base / .baselines)."""

import numpy as np
import pytest
from sklearn.base import clone

from graphssl.estimators.base import GraphSSLClassifier
from graphssl.estimators.baselines import (
    HarmonicFunctionClassifier,
    KNNGraphClassifier,
    LGCClassifier,
    ParzenWindowClassifier,
)
from graphssl.graph import knn_graph
from graphssl.inference.optimize.baselines import harmonic_function, lgc

ESTIMATORS = [
    HarmonicFunctionClassifier,
    LGCClassifier,
    ParzenWindowClassifier,
    KNNGraphClassifier,
]


@pytest.fixture(scope="module")
def blobs():
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(0, 0.5, (40, 2)), rng.normal(3, 0.5, (40, 2))])
    y_true = np.repeat([3, 7], 40)  # arbitrary class values
    y = np.full(80, -1)
    y[[0, 1, 2, 40, 41, 42]] = y_true[[0, 1, 2, 40, 41, 42]]
    return X, y, y_true


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_fit_predict_api(cls, blobs):
    X, y, y_true = blobs
    clf = cls(k=8).fit(X, y)
    np.testing.assert_array_equal(clf.classes_, [3, 7])
    assert clf.label_distributions_.shape == (80, 2)
    np.testing.assert_allclose(clf.label_distributions_.sum(1), 1.0, atol=1e-8)
    assert (clf.transduction_ == y_true).mean() > 0.95
    np.testing.assert_array_equal(clf.predict(X), clf.transduction_)
    np.testing.assert_array_equal(clf.predict(), clf.transduction_)
    assert clf.score(X, y_true) > 0.95
    assert clf.n_features_in_ == 2
    # inductive extension to new points, far points included (log-space weights: no NaN)
    # a subset / permutation of the training points gets their transductive distributions
    np.testing.assert_allclose(clf.predict_proba(X[::-3]), clf.label_distributions_[::-3])
    new = np.array([[0.1, -0.2], [3.2, 2.9], [1e3, -1e3]])
    proba = clf.predict_proba(new)
    assert np.all(np.isfinite(proba)) and np.allclose(proba.sum(1), 1.0)
    np.testing.assert_array_equal(clf.predict(new[:2]), [3, 7])


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_clone_and_params(cls):
    clf = cls(k=5, sigma=0.7)
    params = clf.get_params()
    assert params["k"] == 5 and params["sigma"] == 0.7
    twin = clone(clf)
    assert twin.get_params() == params and twin is not clf
    clf.set_params(k=4)
    assert clf.k == 4
    assert "GraphSSLClassifier" not in repr(clf)


def test_fit_graph_matches_model_function(blobs):
    X, y, _ = blobs
    graph = knn_graph(X, 8)
    encoded = np.where(y == 7, 1, np.where(y == 3, 0, -1))
    clf = HarmonicFunctionClassifier(tol=1e-12).fit_graph(graph, encoded)
    ref = harmonic_function(graph, encoded, tol=1e-12)
    np.testing.assert_allclose(clf.label_distributions_, ref)
    # the same as fit(X, y) with the same graph options
    fitted = HarmonicFunctionClassifier(k=8, tol=1e-12).fit(X, y)
    np.testing.assert_allclose(fitted.label_distributions_, ref, atol=1e-12)
    # scipy input is accepted; predicting on new X is not possible without features
    clf2 = LGCClassifier().fit_graph(graph.to_scipy(), y)
    with pytest.raises(ValueError, match="fit_graph"):
        clf2.predict(X)


def test_lgc_and_cmn_options(blobs):
    X, y, y_true = blobs
    a = LGCClassifier(k=8, alpha=0.5, tol=1e-12).fit(X, y)
    encoded = np.where(y == 7, 1, np.where(y == 3, 0, -1))
    ref = lgc(knn_graph(X, 8), encoded, alpha=0.5, tol=1e-12)
    np.testing.assert_allclose(a.label_distributions_, ref, atol=1e-12)
    c = HarmonicFunctionClassifier(k=8, class_mass_normalize=True).fit(X, y)
    assert (c.transduction_ == y_true).mean() > 0.95


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(k=0), "k"),
        (dict(k=2.5), "k"),
        (dict(symmetrize="both"), "symmetrize"),
        (dict(weight="rbf"), "weight"),
        (dict(sigma=-1.0), "sigma"),
        (dict(sigma="median"), "sigma"),
    ],
)
def test_graph_params_validated_in_fit(blobs, params, match):
    X, y, _ = blobs
    clf = HarmonicFunctionClassifier(**params)  # construction never validates (sklearn rule)
    with pytest.raises(ValueError, match=match):
        clf.fit(X, y)


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda X, y: (np.where(np.arange(80)[:, None] == 5, np.nan, X), y), "NaN"),
        (lambda X, y: (X, np.full(80, -1)), "no labelled"),
        (lambda X, y: (X, np.where(y == 7, 3, y)), "one class"),
        (lambda X, y: (X, np.where(y == 7, 0.5, y)), "Unknown label type"),
        (lambda X, y: (X[:-1], y), "rows"),
        (lambda X, y: (X[:, 0], y), "2D|2-D"),
        (lambda X, y: (np.vstack([X[:1]] * 80), y), "duplicate"),
        (lambda X, y: (X, None), "None"),
        (lambda X, y: (X[:, :0], y), "0 feature"),
    ],
)
def test_bad_input(blobs, mutate, match):
    X, y, _ = blobs
    Xb, yb = mutate(X, y)
    with pytest.raises(ValueError, match=match):
        HarmonicFunctionClassifier(k=5).fit(Xb, yb)


def test_model_parameters_validated(blobs):
    X, y, _ = blobs
    with pytest.raises(ValueError, match="alpha"):
        LGCClassifier(alpha=2.0).fit(X, y)
    with pytest.raises(ValueError, match="tau"):
        ParzenWindowClassifier(tau=-1).fit(X, y)
    with pytest.raises(ValueError, match="k"):
        KNNGraphClassifier(n_neighbors=0).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        HarmonicFunctionClassifier(k=5).fit(X, y).predict(np.ones((2, 3)))


def test_base_is_abstract(blobs):
    X, y, _ = blobs
    with pytest.raises(NotImplementedError):
        GraphSSLClassifier(k=5).fit(X, y)


def test_k_not_below_n_uses_the_complete_graph(blobs):
    X, y, y_true = blobs
    with pytest.warns(UserWarning, match="k=79"):
        clf = HarmonicFunctionClassifier(k=80).fit(X, y)
    assert clf.k_ == 79 and clf.graph_.n_edges == 80 * 79
