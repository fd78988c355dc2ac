"""The Boltzmann MRF's kNN pairs (``knn_pairs``): the union of the kNN lists (default) or
the mutual pairs with unreached nodes given their union pairs back (``symmetrize="min"``),
each checked against the definition written out pair by pair."""

import warnings

import numpy as np
import pytest
from sklearn.neighbors import NearestNeighbors

from graphssl import data
from graphssl.estimators import BoltzmannMRFClassifier
from graphssl.inference.boltzmann import selection as bs
from graphssl.models.boltzmann import knn_pairs, pair_geometry

K = 4


def _neighbour_lists(X, k=K):
    return NearestNeighbors(n_neighbors=k + 1).fit(X).kneighbors(X, return_distance=False)


def _by_definition(idx, mutual):
    """Pairs (i, j), i != j, both directions: j in kNN(i) or / and i in kNN(j)."""
    lists = [set(row) - {i} for i, row in enumerate(idx)]
    n = len(lists)
    return {(i, j) for i in range(n) for j in range(n) if i != j
            and ((j in lists[i] and i in lists[j]) if mutual
                 else (j in lists[i] or i in lists[j]))}


@pytest.fixture(scope="module")
def blobs():
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(0, 1, (30, 2)), rng.normal(6, 1, (30, 2)),
                        [[20.0, 20.0]]])  # the last point: nobody's neighbour
    return X, _neighbour_lists(X)


def test_union_and_mutual_pairs_match_the_definition(blobs):
    _, idx = blobs
    everyone = np.ones(len(idx), bool)  # every node labelled: nothing to reconnect
    for mutual in (False, True):
        s, r, n_reconnected = knn_pairs(idx, mutual=mutual, observed=everyone)
        assert set(zip(s.tolist(), r.tolist(), strict=True)) == _by_definition(idx, mutual)
        assert np.all(np.diff(s * len(idx) + r) > 0)  # sorted by (sender, receiver), unique
        assert n_reconnected == 0
    assert len(_by_definition(idx, True)) < len(_by_definition(idx, False))


def test_unreached_nodes_get_their_union_pairs_back(blobs):
    _, idx = blobs
    observed = np.zeros(len(idx), bool)
    observed[[0, 30]] = True  # one label in each blob
    s, r, n_reconnected = knn_pairs(idx, mutual=True, observed=observed)
    pairs = set(zip(s.tolist(), r.tolist(), strict=True))
    outlier = len(idx) - 1
    assert not any(i == outlier for i, _ in _by_definition(idx, True))  # no mutual pair
    union_of_outlier = {p for p in _by_definition(idx, False) if outlier in p}
    assert union_of_outlier <= pairs  # given back, both directions
    assert n_reconnected >= 1
    assert _by_definition(idx, True) <= pairs <= _by_definition(idx, False)
    with pytest.raises(ValueError, match="observed"):
        knn_pairs(idx, mutual=True)


def test_pair_geometry_takes_chosen_pairs(blobs):
    X, idx = blobs
    s, r, _ = knn_pairs(idx)
    given = pair_geometry(X, per_feature=False, pairs=(s, r))
    searched = pair_geometry(X, K, per_feature=False)
    np.testing.assert_array_equal(given.senders, searched.senders)
    np.testing.assert_allclose(given.sq_dist, searched.sq_dist)


def test_estimator_mutual_pairs_and_bad_symmetrize():
    ds = data.two_moons(60, noise=0.08, seed=3)
    labels = np.full(60, -1)
    for c in (0, 1):
        labels[np.flatnonzero(ds.y == c)[:3]] = c
    settings = bs.GridSettings(alpha0=(0.0, 1.0), log_scale_offsets=(0.0,), n_folds=3,
                               burn_in=3, n_samples=10, patience=2)
    kw = dict(model="basic", grid=settings, n_chains=2, n_samples=20, burn_in=5,
              progress=False, k=K)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = BoltzmannMRFClassifier(symmetrize="min", **kw).fit(ds.X, labels)
    idx = _neighbour_lists(ds.X)
    s, r, n_reconnected = knn_pairs(idx, mutual=True, observed=labels >= 0)
    np.testing.assert_array_equal(clf.pair_geometry_.senders, s)
    np.testing.assert_array_equal(clf.pair_geometry_.receivers, r)
    assert clf.n_reconnected_ == n_reconnected
    assert clf.pair_geometry_.senders.shape[0] < len(_by_definition(idx, False))
    with pytest.raises(ValueError, match="symmetrize"):
        BoltzmannMRFClassifier(symmetrize=None, **kw).fit(ds.X, labels)
