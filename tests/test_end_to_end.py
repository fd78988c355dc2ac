"""The kNN + harmonic-function pipeline in one XLA program (baselines/end_to_end.py).

Checked against the host pipeline it mirrors, ``harmonic_function(knn_graph(X, k,
sigma="kth_over_3"), normalize_graph=...)``: the same neighbours as brute force, the same
sigma, class distributions within the CG tolerance and (nearly) the same labels.
"""

import warnings

import jax.numpy as jnp
import numpy as np
import pytest

from graphssl.graph import knn_graph, knn_search
from graphssl.inference.optimize.baselines import UnreachedNodesWarning, harmonic_function, lgc
from graphssl.inference.optimize.baselines.end_to_end import (
    harmonic_function_from_features,
    lgc_from_features,
)
from graphssl.neighbors import exact_knn_traced, query_blocks


def _data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0, 0.0], [3.0, 0.0, 1.0], [0.0, 3.0, -1.0]])
    y = rng.integers(0, 3, n)
    X = centres[y] + rng.normal(size=(n, 3))
    labels = -np.ones(n, int)
    for c in range(3):
        labels[np.flatnonzero(y == c)[:4]] = c
    return X, y, labels


@pytest.mark.parametrize("n_blocks", [1, 3])
def test_device_knn_equals_brute_force(n_blocks):
    X, _, _ = _data(301)
    rows = -(-301 // n_blocks)
    index, sq = exact_knn_traced(jnp.asarray(X), 7, n_blocks, rows)
    ref_index, ref_dist = knn_search(X, 7, method="brute")
    np.testing.assert_array_equal(np.asarray(index), ref_index)
    np.testing.assert_allclose(np.sqrt(np.asarray(sq)), ref_dist, atol=1e-9)


@pytest.mark.parametrize("normalize_graph", [True, False])
def test_pipeline_matches_the_host_harmonic_function(normalize_graph):
    X, y, labels = _data()
    ours = harmonic_function_from_features(X, labels, k=8, normalize_graph=normalize_graph,
                                           tol=1e-8)
    W = knn_graph(X, 8, sigma="kth_over_3")
    ref = harmonic_function(W, labels, normalize_graph=normalize_graph, tol=1e-10)
    np.testing.assert_allclose(ours.scores, ref, atol=1e-5)
    np.testing.assert_array_equal(ours.labels, ref.argmax(1))
    assert ours.unreached == 0 and ours.iterations > 1 and ours.residual <= 1e-8
    np.testing.assert_allclose(ours.scores.sum(axis=1), 1.0, atol=1e-6)  # float32
    assert np.all(ours.labels[labels >= 0] == labels[labels >= 0])


@pytest.mark.parametrize("alpha", [0.99, 0.9])
def test_lgc_pipeline_matches_the_host_lgc(alpha):
    X, y, labels = _data(seed=2)
    ours = lgc_from_features(X, labels, k=8, alpha=alpha, tol=1e-7)
    ref = lgc(knn_graph(X, 8, sigma="kth_over_3"), labels, alpha=alpha, tol=1e-10)
    np.testing.assert_allclose(ours.scores, ref, atol=1e-4)
    np.testing.assert_array_equal(ours.labels, ref.argmax(1))
    assert ours.unreached == 0 and ours.residual <= 1e-7
    with pytest.raises(ValueError, match="alpha"):
        lgc_from_features(X, labels, alpha=1.0)


def test_pipeline_with_a_given_sigma_and_loose_tolerance():
    X, y, labels = _data(seed=1)
    ours = harmonic_function_from_features(X, labels, k=6, sigma=0.7, tol=1e-3)
    ref = harmonic_function(knn_graph(X, 6, sigma=0.7), labels, normalize_graph=True, tol=1e-10)
    assert ours.sigma == pytest.approx(0.7)
    assert np.mean(ours.labels == ref.argmax(1)) > 0.99


def test_unreached_component_gets_uniform_rows_and_a_warning():
    X, _, _ = _data(60)
    far = X[:20] + 1000.0
    X = np.concatenate([X, far])
    labels = -np.ones(80, int)
    labels[[0, 1, 2]] = [0, 1, 2]  # none in the far cluster
    labels[labels < 0] = -1
    with pytest.warns(UnreachedNodesWarning, match="20 unlabelled nodes"):
        out = harmonic_function_from_features(X, labels, k=5, n_classes=3)
    assert out.unreached == 20
    np.testing.assert_allclose(out.scores[60:], 1.0 / 3)
    with pytest.warns(UnreachedNodesWarning, match="lgc_from_features: 20 unlabelled"):
        out = lgc_from_features(X, labels, k=5, n_classes=3)
    np.testing.assert_allclose(out.scores[60:], 1.0 / 3)


def test_bad_input_raises():
    X, _, labels = _data(50)
    with pytest.raises(ValueError, match="k"):
        harmonic_function_from_features(X, labels, k=50)
    with pytest.raises(ValueError, match="sigma"):
        harmonic_function_from_features(X, labels, sigma="median")
    with pytest.raises(ValueError, match="sigma"):
        harmonic_function_from_features(X, labels, sigma=-1.0)
    with pytest.raises(ValueError, match="tol"):
        harmonic_function_from_features(X, labels, tol=0.0)
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        harmonic_function_from_features(bad, labels)
    with pytest.raises(ValueError, match="no labelled"):
        harmonic_function_from_features(X, -np.ones(50, int))
    with pytest.raises(ValueError, match="duplicate"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            harmonic_function_from_features(np.zeros((30, 2)), np.r_[0, 1, -np.ones(28, int)],
                                            k=3)


def test_query_blocks_cover_the_rows_within_the_budget():
    for n in (1, 7, 9298, 100_000, 1_000_000):
        n_blocks, rows = query_blocks(n)
        assert n_blocks * rows >= n and (n_blocks - 1) * rows < n
        assert rows * n <= max(1 << 26, n)


@pytest.mark.parametrize("shape,m,group", [((5, 64), 3, 16), ((4, 48), 10, 16), ((3, 32), 9, 4)])
def test_grouped_top_k_equals_a_full_top_k(shape, m, group):
    from graphssl.neighbors import grouped_top_k

    rng = np.random.default_rng(shape[1])
    scores = rng.normal(size=shape)
    scores[:, -3:] = -np.inf  # padding columns never win
    values, index = grouped_top_k(jnp.asarray(scores), m, group)
    ref = np.argsort(-scores, axis=1)[:, :m]
    np.testing.assert_array_equal(np.asarray(index), ref)
    np.testing.assert_array_equal(np.asarray(values), np.take_along_axis(scores, ref, axis=1))
