"""Feature scaling of the estimators (issue 25 item 2): the ``standardize`` rule, sparse
input scaled without centring, duplicates, the map applied to new points, the switch."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone

from graphssl.scaling import OFFSET_RATIO, RATIO, fit_feature_scaling


def _mixed_units(n=60, seed=0):
    """Two informative columns in units 1000 apart, plus a noise column."""
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1], n // 2)
    X = np.c_[rng.normal(y, 0.3), rng.normal(0, 1, n) * 1000.0, rng.normal(y, 0.3)]
    labels = np.full(n, -1)
    chosen = np.r_[0:6, n // 2:n // 2 + 6]  # 6 a class (the feature route's 5 folds need 10)
    labels[chosen] = y[chosen]
    return X, y, labels


def test_auto_rule_standardises_only_columns_an_order_of_magnitude_apart():
    X, _, _ = _mixed_units()
    fitted = fit_feature_scaling(X)
    assert fitted.applied and "auto" in fitted.reason
    Z = fitted.transform(X)
    np.testing.assert_allclose(Z.mean(0), 0.0, atol=1e-12)
    np.testing.assert_allclose(Z.std(0), 1.0)
    same_unit = np.random.default_rng(1).normal(size=(40, 5)) * [1, 2, 3, 4, RATIO * 0.9 / 3]
    assert not fit_feature_scaling(same_unit).applied
    assert fit_feature_scaling(same_unit, True).applied
    assert not fit_feature_scaling(X, False).applied
    constant = np.c_[X, np.full(len(X), 7.0)]
    Z = fit_feature_scaling(constant).transform(constant)
    np.testing.assert_allclose(Z[:, -1], 0.0)  # a constant column is centred only


def test_data_far_from_the_origin_is_centred_only():
    """Spreads alike, centre 10^4 spreads out: ``auto`` subtracts the mean and nothing else
    (float32 distances ``|x|^2 - 2 x.y + |y|^2`` would lose every digit of the spread)."""
    from graphssl.estimators import HarmonicMixtureClassifier

    X, y, labels = _mixed_units()
    X = X[:, [0, 2]]
    near = X + 0.5 * OFFSET_RATIO * X.std(0)  # inside the limit: left alone
    assert not fit_feature_scaling(near).applied
    far = X + 1e4
    fitted = fit_feature_scaling(far)
    assert fitted.applied and "centred only" in fitted.reason
    np.testing.assert_array_equal(fitted.scale, 1.0)
    np.testing.assert_allclose(fitted.transform(far), X - X.mean(0), atol=1e-9)
    assert not fit_feature_scaling(sp.csr_matrix(far)).applied  # sparse: never centred
    centred = HarmonicMixtureClassifier(standardize=False).fit(X - X.mean(0), labels)
    shifted = HarmonicMixtureClassifier().fit(far, labels)
    np.testing.assert_allclose(shifted.label_distributions_, centred.label_distributions_,
                               atol=1e-6)
    np.testing.assert_array_equal(shifted.predict(far[:5]), centred.predict(X[:5] - X.mean(0)))


def test_counts_are_one_unit_and_sparse_input_is_scaled_without_centring():
    rng = np.random.default_rng(2)
    counts = rng.poisson(0.05, size=(50, 30)) * rng.integers(1, 100, 30)  # rare, mixed spread
    assert not fit_feature_scaling(counts).applied  # non-negative, mostly zero
    for X in (counts, sp.csr_matrix(counts)):
        assert "one unit" in fit_feature_scaling(X).reason
    S = sp.csr_matrix(counts.astype(float))
    fitted = fit_feature_scaling(S, True)
    Z = fitted.transform(S)
    assert sp.issparse(Z) and Z.nnz == S.nnz  # never centred: stays sparse
    std = np.sqrt(np.asarray(Z.multiply(Z).mean(0)).ravel() - np.asarray(Z.mean(0)).ravel() ** 2)
    varying = counts.std(0) > 0
    np.testing.assert_allclose(std[varying], 1.0)


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_bad_standardize_names_the_option(bad):
    with pytest.raises(ValueError, match="standardize"):
        fit_feature_scaling(np.eye(3), bad)


@pytest.mark.filterwarnings("ignore::graphssl.validation.UnreachedNodesWarning")
def test_estimator_standardises_by_default_and_applies_the_map_to_new_points():
    from graphssl.estimators import PottsClassifier

    X, y, labels = _mixed_units()
    auto = PottsClassifier().fit(X, labels)
    assert auto.scaling_.applied
    raw = PottsClassifier(standardize=False).fit(X, labels)
    assert not raw.scaling_.applied
    free = labels < 0
    assert np.mean(auto.transduction_[free] == y[free]) > 0.9
    assert np.mean(auto.transduction_[free] == y[free]) > np.mean(raw.transduction_[free]
                                                                  == y[free]) + 0.2
    Z = (X - X.mean(0)) / X.std(0)
    by_hand = PottsClassifier(standardize=False).fit(Z, labels)
    np.testing.assert_allclose(auto.label_distributions_, by_hand.label_distributions_)
    new = X[:5] + [0.01, 10.0, 0.01]  # new points, in the raw units
    np.testing.assert_allclose(auto.predict_proba(new), by_hand.predict_proba(Z[:5] + [
        0.01 / X[:, 0].std(), 10.0 / X[:, 1].std(), 0.01 / X[:, 2].std()]))
    np.testing.assert_array_equal(auto.predict(X), auto.transduction_)
    assert clone(raw).get_params()["standardize"] is False


@pytest.mark.filterwarnings("ignore::graphssl.validation.UnreachedNodesWarning")
def test_duplicates_and_sparse_node_features_still_fit():
    from graphssl.estimators import PottsClassifier

    X, y, labels = _mixed_units()
    X2, labels2 = np.r_[X, X[:10]], np.r_[labels, np.full(10, -1)]
    clf = PottsClassifier().fit(X2, labels2)
    np.testing.assert_array_equal(clf.transduction_[60:], clf.transduction_[:10])
    clf = PottsClassifier().fit_graph(clf.graph_, labels2, X=sp.csr_matrix(np.abs(X2)))
    assert clf.transduction_.shape == (70,)
    assert clf.scaling_.applied and not clf.scaling_.center.any()  # sparse: scaled, not centred


@pytest.mark.parametrize("magnitude", [1e-200, 1e-160, 1.0, 1e160, 1e200])
def test_the_auto_rule_reads_the_spreads_at_any_magnitude(magnitude):
    """At 1e160 the squares overflowed: every std was inf, the ratio read 1 and the rule
    said the spreads were alike (columns 77x apart); below ~1e-154 they underflowed to 0
    and every column looked constant. The rule's verdict, the centre and the scale are now
    the same at every magnitude, in units of it."""
    X = np.random.default_rng(0).normal(size=(50, 3)) * np.array([1.0, 1.0, 100.0])
    reference = fit_feature_scaling(X)
    scaling = fit_feature_scaling(X * magnitude)
    assert scaling.applied and scaling.reason == reference.reason
    np.testing.assert_allclose(scaling.scale / magnitude, reference.scale, rtol=1e-12)
    np.testing.assert_allclose(scaling.center / magnitude, reference.center, rtol=1e-12,
                               atol=1e-14)
    if magnitude == 1.0:  # ordinary data: computed exactly as before
        np.testing.assert_array_equal(scaling.scale, X.std(axis=0))
        np.testing.assert_array_equal(scaling.center, X.mean(axis=0))


def test_features_with_nan_are_refused_by_name():
    X = np.random.default_rng(0).normal(size=(20, 2))
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"^X: 1 entries are NaN or inf"):
        fit_feature_scaling(X)
