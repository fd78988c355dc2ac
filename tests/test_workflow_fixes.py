"""Fixes from a workflow fuzz round (fuzz9b): the grid diffusion mixture on ordinary data in
float32, the harmonic mixture's induction far from the data, and a symmetric kernel matrix
read as a directed graph."""

from __future__ import annotations

import warnings

import jax
import numpy as np
import pytest
from sklearn.datasets import load_iris, load_wine, make_moons
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.preprocessing import StandardScaler

from graphssl.estimators import (
    DiffusionMixtureGridClassifier,
    HarmonicFunctionClassifier,
    HarmonicMixtureClassifier,
)
from graphssl.graph import DirectedGraphWarning, as_graph, knn_graph
from graphssl.models.diffusion_mixture import (
    DirichletDiffusionMixture,
    diffusion_pmfs,
    diffusion_pmfs_for_taus,
)


def _few_labels(y, per_class, seed=0):
    rng = np.random.default_rng(seed)
    labels = np.full(len(y), -1)
    for c in np.unique(y):
        labels[rng.permutation(np.flatnonzero(y == c))[:per_class]] = c
    return labels


@pytest.fixture(scope="module")
def wine():
    X, y = load_wine(return_X_y=True)
    return StandardScaler().fit_transform(X), y


# ------------------------------------------------- 1. diffusion p.m.f.s normalised in float64
def test_diffusion_grid_fits_wine_in_float32(wine):
    """Wine, 5 labels a class, float32: the grid's p.m.f.s were normalised in float32 and
    several settings failed the model's 1e-6 column-sum check (up to 1.25e-6)."""
    X, y = wine
    labels = _few_labels(y, 5)
    with jax.enable_x64(False):
        clf = DiffusionMixtureGridClassifier(
            k_grid=(5, 10, 20), tau_grid=(10.0, 20.0), n_checkpoints=2, every=1, burn_in=5,
            progress=False).fit(X, labels)
        proba = clf.predict_proba()
    assert np.all(np.isfinite(proba))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-6)
    assert (clf.predict() == y).mean() > 0.8


def test_diffusion_pmfs_are_float64_columns_summing_to_one(wine):
    X, _ = wine
    with jax.enable_x64(False):
        graph = knn_graph(X, 20, sigma="walder", on_duplicates="ignore")
        assert np.asarray(graph.weights).dtype == np.float32
        pmfs = diffusion_pmfs_for_taus(graph, (1.0, 5.0, 20.0))
    for D in pmfs:
        assert D.dtype == np.float64
        assert np.abs(D.sum(axis=0) - 1.0).max() < 1e-12


def test_given_diffusion_tolerance_follows_dtype_and_size(wine):
    """A float32 matrix normalised in float32 (column sums off by ~sqrt(m) eps) is accepted
    by a float32 model; an unnormalised one is refused with the digits that show it."""
    X, y = wine
    labels = _few_labels(y, 5)
    m = len(y)
    with jax.enable_x64(False):
        graph = knn_graph(X, 10, sigma="walder", on_duplicates="ignore")
        D = diffusion_pmfs(graph, 5.0)
        off = D.copy()
        off[:, 7] *= 1 + 2e-6  # a float32 normalisation's error at m = 178
        model = DirichletDiffusionMixture.create(graph, labels, diffusion=off.astype(np.float32))
        assert model.log_diffusion.shape == (m, m)
        with pytest.raises(ValueError, match=r"column 7 sums to 1\.001\d*, off by 0\.001.*"
                                             r"for a matrix of your own"):
            DirichletDiffusionMixture.create(graph, labels, diffusion=D * np.r_[
                np.ones(7), 1.001, np.ones(m - 8)][None, :])
    # float64 throughout: the 1e-6 floor, as before
    with pytest.raises(ValueError, match="columns must sum to one"):
        DirichletDiffusionMixture.create(graph, labels, diffusion=off, dtype=np.float64)


# ---------------------------------------------- 2. harmonic mixture induction far from the data
@pytest.fixture(scope="module")
def moons():
    X, y = make_moons(120, noise=0.1, random_state=0)
    labels = np.full(120, -1)
    for c in (0, 1):
        labels[np.flatnonzero(y == c)[:5]] = c
    return X, labels


@pytest.mark.parametrize("kwargs", [dict(), dict(covariance_type="full"),
                                    dict(covariance_type="diag"), dict(backbone="kmeans")])
def test_harmonic_mixture_far_points_are_finite_and_continuous(moons, kwargs):
    """From ~1e19 (float32 squared distances overflow) the rows were NaN and predict said
    class 0; now each direction keeps the class distribution it tends to."""
    X, labels = moons
    directions = np.array([[1.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
    with jax.enable_x64(False):
        clf = HarmonicMixtureClassifier(**kwargs).fit(X, labels)
        rows = []
        for scale in (1e8, 1e19, 1e30, 1e150):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                proba = clf.predict_proba(scale * directions)
                predicted = clf.predict(scale * directions)
            assert np.all(np.isfinite(proba))
            np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-15)
            np.testing.assert_array_equal(predicted, clf.classes_[proba.argmax(axis=1)])
            rows.append(proba)
    for proba in rows[1:]:
        np.testing.assert_allclose(proba, rows[0], atol=1e-6)


def test_harmonic_mixture_rows_sum_to_one_and_values_unchanged(moons):
    X, labels = moons
    Xn = np.random.default_rng(0).uniform(-1.5, 2.5, (200, 2))
    with jax.enable_x64(False):
        clf = HarmonicMixtureClassifier().fit(X, labels)
        proba = clf.predict_proba(Xn)
        # the previous formula, exp(float32 log responsibilities) @ lambda
        from graphssl.inference.harmonic_mixture.fit import compiled_log_responsibilities

        log_r = compiled_log_responsibilities(clf.fit_.mixture, clf.scaling_.transform(Xn))
        before = np.exp(np.asarray(log_r, np.float64)) @ clf.fit_.label_probs
    assert proba.dtype == np.float64
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    np.testing.assert_allclose(proba, before, atol=5e-5)
    np.testing.assert_array_equal(clf.predict(Xn), clf.classes_[proba.argmax(axis=1)])


# -------------------------------------------------- 3. symmetric up to rounding is symmetric
def test_kernel_matrix_with_rounding_is_not_directed():
    X, y = load_iris(return_X_y=True)
    labels = np.full(150, -1)
    labels[[0, 1, 50, 51, 100, 101]] = y[[0, 1, 50, 51, 100, 101]]
    K = rbf_kernel(X, gamma=1.0)
    assert 0 < np.abs(K - K.T).max() < 1e-14
    with warnings.catch_warnings():
        warnings.simplefilter("error", DirectedGraphWarning)
        graph = as_graph(K)
        clf = HarmonicFunctionClassifier().fit_graph(K, labels)
    W = graph.to_scipy().toarray()
    np.testing.assert_array_equal(W, W.T)  # made exactly symmetric (the mean)
    np.testing.assert_allclose(W, K - np.diag(np.diag(K)), rtol=1e-14)
    assert clf.predict().shape == (150,)


@pytest.mark.parametrize("mode, others", [("max", "'mean' / 'min'"), ("mean", "'max' / 'min'"),
                                          ("min", "'max' / 'mean'")])
def test_directed_warning_still_given_with_accurate_advice(mode, others):
    W = np.array([[0, 1.0, 0], [1.0 + 1e-9, 0, 1.0], [0, 0, 0]])  # 1e-9: beyond rounding
    with pytest.warns(DirectedGraphWarning) as record:
        as_graph(W, symmetrize=mode)
    message = str(record[0].message)
    assert "1 of 2 edges are given in one direction only and 1 pairs have unequal" in message
    assert f"symmetrised with symmetrize={mode!r}" in message
    assert f"symmetrize={others} combine" in message
    assert "'max' / 'mean' / 'min'" not in message
    # equal within 1e-12 of the larger weight: symmetric, quietly
    with warnings.catch_warnings():
        warnings.simplefilter("error", DirectedGraphWarning)
        near = as_graph(np.array([[0, 1.0], [1.0 + 1e-13, 0]]), symmetrize=mode)
    np.testing.assert_allclose(near.to_scipy().toarray(), [[0, 1.0], [1.0, 0]], rtol=1e-12)
