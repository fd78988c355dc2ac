"""Ordinary workflows around a fitted estimator (fuzz report 9b): what ``predict`` returns,
training points given again in another precision, ``set_params`` after a fit, and a refit
that fails."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from graphssl.estimators import (
    HarmonicFunctionClassifier,
    LGCClassifier,
    ParzenWindowClassifier,
)


@pytest.fixture(scope="module")
def moons():
    from sklearn.datasets import make_moons

    X, truth = make_moons(120, noise=0.12, random_state=0)
    y = np.full(120, -1)
    y[:10] = truth[:10]
    return X, y, truth


def test_editing_what_predict_returns_leaves_the_model_as_it_is(moons):
    """``predict_proba()`` returned ``label_distributions_`` itself and ``predict()``
    ``transduction_``: ``proba[proba < 0.9] = 0`` changed the model (Potts' score 1.0 ->
    0.675, rows summing to 0)."""
    X, y, truth = moons
    clf = HarmonicFunctionClassifier().fit(X, y)
    fitted = clf.label_distributions_.copy()
    for proba in (clf.predict_proba(), clf.predict_proba(X)):
        proba[:] = 0.0
    clf.predict()[:] = 0
    np.testing.assert_array_equal(clf.label_distributions_, fitted)
    assert np.array_equal(clf.transduction_, clf.classes_[fitted.argmax(1)])


@pytest.mark.parametrize("estimator", [ParzenWindowClassifier, LGCClassifier])
def test_training_points_in_another_precision_keep_their_fitted_rows(moons, estimator):
    """A training point was recognised only bit for bit: ``X.astype(np.float32)`` or
    ``X + 1e-9`` went through induction, and Parzen relabelled 6 of 120 training points."""
    X, y, _ = moons
    clf = estimator().fit(X, y)
    for again in (X.astype(np.float32), X + 1e-9):
        np.testing.assert_allclose(clf.predict_proba(again), clf.label_distributions_)
    far = X[:3] + 0.05  # new points: induced from their neighbours, not a training row
    assert not np.allclose(clf.predict_proba(far), clf.label_distributions_[:3])


@pytest.mark.parametrize("estimator", [HarmonicFunctionClassifier, LGCClassifier])
def test_set_params_after_a_fit_takes_effect_at_the_next_fit(moons, estimator):
    """``predict(X_new)`` read ``self.sigma`` but reused widths cached from the fit's:
    after ``set_params(sigma=0.3)`` a broadcasting error (local widths) or, for LGC, the old
    width silently. Prediction now uses the fitted graph until the next fit."""
    X, y, _ = moons
    new = X[:5] + 0.05
    clf = estimator(sigma="local").fit(X, y)
    before = clf.predict_proba(new)
    clf.set_params(sigma=0.3)
    np.testing.assert_array_equal(clf.predict_proba(new), before)
    refit = clf.fit(X, y).predict_proba(new)
    np.testing.assert_allclose(refit, estimator(sigma=0.3).fit(X, y).predict_proba(new))


def test_a_refit_that_fails_leaves_no_fitted_state(moons):
    """A refit that raised left ``n_features_in_`` and ``scaling_``: ``check_is_fitted``
    passed and ``predict`` raised ``NotFittedError``."""
    X, y, _ = moons
    clf = HarmonicFunctionClassifier().fit(X, y)
    with pytest.raises(ValueError, match="y: no labelled point"):
        clf.fit(X, np.full(120, -1))
    with pytest.raises(NotFittedError):
        check_is_fitted(clf)
    assert not [name for name in vars(clf) if name.endswith("_") and not name.startswith("_")]
    assert clf.fit(X, y).score(X, y) == 1.0  # and it fits again
