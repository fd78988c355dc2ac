"""Graphs that come with the data: loader, feature model, pseudo-likelihood, feature Potts CRF.

Everything but the last test runs on small synthetic data (no shared data needed), in float64
(``tests/conftest.py`` enables x64) against independent references: ``jax.grad`` of the model's
log posterior, finite differences, the optax route, a direct refit of one fold, and a
pseudo-likelihood whose maximiser is known.
"""

from __future__ import annotations

import os
import pathlib
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

from graphssl.data import citation_from_arrays, load_citation
from graphssl.graph import unreached_nodes
from graphssl.inference.optimize.feature_potts import (
    cosine_knn_graph,
    fill_unreached,
    fit_feature_potts,
)
from graphssl.inference.optimize.logistic import (
    _host_objective,
    cross_fitted_log_probabilities,
    fit_feature_model,
    stratified_folds,
)
from graphssl.inference.optimize.pseudo_likelihood import (
    fit_pseudo_likelihood,
    neighbor_beliefs,
    pseudo_log_likelihood,
)
from graphssl.models.feature_model import (
    FeatureModelParams,
    feature_log_posterior,
    feature_log_probabilities,
    normalize_rows,
)


def _planted(n=90, C=3, d=60, p_in=0.12, p_out=0.01, seed=0):
    """A planted-partition graph with bag-of-words features that are weakly class-specific;
    nodes 0 and 1 are isolated (no edge), so no label reaches them."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % C
    prob = np.where(y[:, None] == y[None, :], p_in, p_out)
    upper = np.triu(rng.random((n, n)) < prob, 1)
    upper[:2, :] = upper[:, :2] = False
    edges = np.argwhere(upper)
    words = rng.random((C, d)) < 0.08
    X = (rng.random((n, d)) < 0.05) | (words[y] & (rng.random((n, d)) < 0.5))
    train = np.concatenate([np.flatnonzero(y == c)[1:7] for c in range(C)])
    return edges, sp.csr_matrix(X.astype(float)), y, train


@pytest.fixture(scope="module")
def planted():
    return _planted()


# ------------------------------------------------------------------------- loader
def test_loader_symmetrises_and_reports(tmp_path):
    edges = np.array([[0, 1], [1, 2], [2, 1], [3, 3], [0, 1]])
    X = sp.random(5, 4, density=0.5, random_state=0, format="csr")
    coo = X.tocoo()
    csr = sp.csr_matrix(X)
    np.savez(tmp_path / "toy.npz", data=csr.data, indices=csr.indices, indptr=csr.indptr,
             shape=np.array(csr.shape), y=np.array([0, 1, 0, -1, 1]), edges=edges,
             split_train=np.array([0, 1]), split_val=np.array([2]), split_test=np.array([4]))
    data = load_citation("toy", data_dir=tmp_path)
    W = data.graph.to_scipy().toarray()
    assert np.array_equal(W, W.T) and W[0, 1] == W[1, 0] == 1 and W[1, 2] == 1
    assert np.diag(W).sum() == 0 and data.graph.n_edges == 4
    assert data.n_one_directional == 1 and data.n_self_loops == 1
    assert data.n_components == 3  # {0, 1, 2}, {3}, {4}
    assert sp.issparse(data.features) and np.allclose(data.features.toarray(), coo.toarray())
    assert data.train_mask.sum() == 2 and data.val_mask[2] and data.test_mask[4]
    assert list(data.train_labels()) == [0, 1, -1, -1, -1]
    assert "5 nodes" in data.report()


def test_loader_names_the_source_when_absent(tmp_path):
    with pytest.raises(ValueError, match="kimiyoung/planetoid.*GRAPHSSL_DATA"):
        load_citation("planetoid_citeseer", data_dir=tmp_path)
    with pytest.raises(ValueError, match="split_train: a training node has label -1"):
        citation_from_arrays([[0, 1]], np.eye(3), [0, -1, 1], [0, 1])


# ------------------------------------------------------------------------- feature model
def test_host_gradient_matches_jax_log_posterior(planted):
    _, X, y, train = planted
    rng = np.random.default_rng(1)
    Xn = normalize_rows(X)
    T = rng.dirichlet(np.ones(3), size=X.shape[0])
    w = rng.random(X.shape[0])
    W, b = rng.normal(size=(X.shape[1], 3)), rng.normal(size=3)
    value, grad = _host_objective(Xn, T, w, 0.7)(np.concatenate([W.ravel(), b]))

    def reference(W, b):
        params = FeatureModelParams(W, b)
        return -feature_log_posterior(params, jnp.asarray(Xn.toarray()), T, w, 0.7) / w.sum()

    ref_value = reference(W, b)
    gW, gb = jax.grad(reference, argnums=(0, 1))(W, b)
    assert value == pytest.approx(float(ref_value), rel=1e-12)
    np.testing.assert_allclose(grad, np.concatenate([np.ravel(gW), gb]), rtol=1e-9, atol=1e-12)


def test_fit_is_the_map_and_routes_agree(planted):
    _, X, y, train = planted
    labels = np.full(y.size, -1)
    labels[train] = y[train]
    Xn = normalize_rows(X)
    params, info = fit_feature_model(Xn, labels, prior_precision=0.5, tol=1e-9)
    assert info.converged
    dense = jnp.asarray(Xn.toarray())
    onehot = np.eye(3)[np.maximum(labels, 0)]
    weights = (labels >= 0).astype(float)
    # stationarity of Eq. (2) by jax.grad (d = 60 > 4 x 18 labelled rows: row-space basis)
    g = jax.grad(feature_log_posterior)(params, dense, onehot, weights, 0.5)
    assert max(float(jnp.abs(g.weights).max()), float(jnp.abs(g.bias).max())) < 1e-6 * 18
    other, _ = fit_feature_model(dense, labels, prior_precision=0.5, method="optax", tol=1e-9)
    np.testing.assert_allclose(feature_log_probabilities(params, dense),
                               feature_log_probabilities(other, dense), atol=1e-5)


def test_cross_fitting_is_out_of_fold(planted):
    _, X, y, train = planted
    labels = np.full(y.size, -1)
    labels[train] = y[train]
    Xn = normalize_rows(X)
    fit = cross_fitted_log_probabilities(Xn, labels, 3, precisions=(0.01, 0.1), n_folds=3,
                                         seed=0)
    assert fit.cv_log_lik.shape == (2,) and fit.prior_precision in (0.01 * 18, 0.1 * 18)
    fold = stratified_folds(labels[train], 3, seed=0)
    assert sorted(np.bincount(fold)) == [6, 6, 6]
    held = train[fold == 0]
    kept = labels.copy()
    kept[held] = -1
    params, _ = fit_feature_model(Xn, kept, prior_precision=fit.prior_precision, n_classes=3,
                                  tol=1e-10)
    expect = feature_log_probabilities(params, jnp.asarray(Xn[held].toarray()))
    np.testing.assert_allclose(fit.log_probs[held], expect, atol=1e-4)  # fits to tol 1e-6
    with pytest.raises(ValueError, match="n_folds"):
        cross_fitted_log_probabilities(Xn, labels, 3, n_folds=10, seed=0)


# ------------------------------------------------------------------------- pseudo-likelihood
def test_pseudo_likelihood_gradient_and_value():
    rng = np.random.default_rng(2)
    u, m = rng.normal(size=(7, 4)), rng.random((2, 7, 4))
    y = rng.integers(0, 4, 7)
    theta = np.array([0.8, 1.3, 0.4])
    logits = theta[0] * u + theta[1] * m[0] + theta[2] * m[1]
    direct = sum(logits[i, y[i]] - np.log(np.exp(logits[i]).sum()) for i in range(7))
    assert float(pseudo_log_likelihood(theta, u, m, y, 0.5)) == pytest.approx(
        direct - 0.25 * np.sum(theta**2), rel=1e-12)
    grad = jax.grad(pseudo_log_likelihood)(jnp.asarray(theta), u, m, y, 0.5)
    eps = 1e-6
    for k in range(3):
        e = np.eye(3)[k] * eps
        fd = (pseudo_log_likelihood(theta + e, u, m, y, 0.5)
              - pseudo_log_likelihood(theta - e, u, m, y, 0.5)) / (2 * eps)
        assert float(grad[k]) == pytest.approx(float(fd), rel=1e-6)


def test_pseudo_likelihood_recovers_known_parameters():
    rng = np.random.default_rng(3)
    n, C, truth = 4000, 4, np.array([0.7, 1.8])
    u = np.log(rng.dirichlet(np.ones(C), size=n))
    m = rng.poisson(1.0, size=(1, n, C)).astype(float)
    logits = truth[0] * u + truth[1] * m[0]
    p = np.exp(logits - logits.max(1, keepdims=True))
    y = np.array([rng.choice(C, p=row / row.sum()) for row in p])
    fit = fit_pseudo_likelihood(u, m, y, prior_precision=0.0)
    assert fit.converged
    np.testing.assert_allclose(fit.theta, truth, atol=0.12)  # ~4 standard errors at n = 4000
    beliefs = np.eye(3)[[0, 1, 2, 1]]
    W = sp.csr_matrix(np.array([[0, 1, 1, 0], [1, 0, 0, 0], [1, 0, 0, 1], [0, 0, 1, 0.5]]))
    np.testing.assert_allclose(neighbor_beliefs([W], beliefs, [0, 2])[0],
                               [[0, 1, 1], [1, 1, 0]])


# ------------------------------------------------------------------------- the CRF
@pytest.fixture(scope="module")
def crf(planted):
    edges, X, y, train = planted
    data = citation_from_arrays(edges, X, y, train)
    return data, fit_feature_potts(data.graph, data.features, data.train_labels(), 3, rounds=2,
                                   n_folds=3, seed=0)


def test_feature_potts_beats_features_and_reaches_everyone(crf):
    data, fit = crf
    test = ~data.train_mask
    feature_acc = np.mean(fit.feature.log_probs[test].argmax(1) == data.y[test])
    crf_acc = np.mean(fit.marginals[test].argmax(1) == data.y[test])
    assert crf_acc > feature_acc + 0.05, (crf_acc, feature_acc)
    assert fit.theta.shape == (2,) and np.all(fit.theta >= 0) and fit.theta[1] > 0
    assert fit.theta_history.shape == (2, 2)
    assert np.allclose(fit.marginals.sum(1), 1)
    # isolated nodes 0, 1: the feature model's prediction (softmax(alpha u), same argmax)
    for i in (0, 1):
        assert fit.marginals[i].argmax() == fit.feature.log_probs[i].argmax()
    labels = data.train_labels()
    lost = unreached_nodes(data.graph, labels >= 0)
    assert lost[0] and lost[1]
    uniform = np.full((data.n_nodes, 3), 1 / 3)
    filled = fill_unreached(uniform, data.graph, labels, np.exp(fit.feature.log_probs))
    assert np.allclose(filled[0], np.exp(fit.feature.log_probs[0]))
    assert np.allclose(filled[~lost], 1 / 3)


def test_cosine_knn_graph_is_symmetric_with_cosine_weights(planted):
    _, X, _, _ = planted
    K = cosine_knn_graph(X, 3, block=32)
    assert (abs(K - K.T)).max() == 0 and K.diagonal().sum() == 0
    Xn = normalize_rows(X)
    i, j = K.nonzero()
    np.testing.assert_allclose(K[i, j].A1, np.asarray(Xn[i].multiply(Xn[j]).sum(1)).ravel())
    assert np.all((K > 0).sum(1).A1 >= 3)


def test_potts_classifier_uses_the_features(crf):
    from graphssl.estimators import PottsClassifier

    data, fit = crf
    y = data.train_labels()
    clf = PottsClassifier().fit_graph(data.graph, y, X=data.features)
    assert clf.feature_fit_ is not None and clf.n_unreached_ == 0
    assert clf.beta_ == pytest.approx(float(clf.feature_fit_.model.beta))
    assert clf.transduction_[0] == fit.feature.log_probs[0].argmax()
    plain = PottsClassifier(features=None).fit_graph(data.graph, y, X=data.features)
    assert plain.feature_fit_ is None


def test_potts_feature_route_with_few_labels(crf):
    """Fewer than 10 labels: the feature model's folds shrink to ``L // 2`` (as in every
    estimator's feature prior); under 4 labels the features go unused, with a warning."""
    from graphssl.estimators import PottsClassifier

    data, _ = crf
    y = data.train_labels()
    few = np.full_like(y, -1)
    keep = np.concatenate([np.flatnonzero(y == c)[:2] for c in range(3)])  # 6 labels
    few[keep] = y[keep]
    clf = PottsClassifier().fit_graph(data.graph, few, X=data.features)
    assert clf.feature_fit_ is not None and clf.feature_fit_.feature.log_probs.shape[1] == 3
    three = np.full_like(y, -1)
    three[keep[::2]] = y[keep[::2]]
    with pytest.warns(UserWarning, match="PottsClassifier: the feature model needs at least 4"):
        clf = PottsClassifier().fit_graph(data.graph, three, X=data.features)
    assert clf.feature_fit_ is None


# ------------------------------------------------------------------------- the shared data
def test_citeseer_loads_as_documented():
    folder = os.environ.get("GRAPHSSL_DATA", "")
    if not folder or not (pathlib.Path(folder) / "planetoid_citeseer.npz").is_file():
        pytest.skip("planetoid_citeseer.npz not in GRAPHSSL_DATA (shared data absent)")
    data = load_citation("planetoid_citeseer")
    assert data.n_nodes == 3327 and data.graph.n_edges == 2 * 4552
    assert data.n_one_directional == 4552 and data.n_components == 438
    assert data.features.shape == (3327, 3703) and data.n_classes == 6
    assert (data.train_mask.sum(), data.val_mask.sum(), data.test_mask.sum()) == (120, 500, 1000)



# ------------------------------------------------------------------------- feature prior
def _prior_fixture(planted):
    from graphssl.inference.optimize.feature_prior import fit_feature_prior

    edges, X, y, train = planted
    data = citation_from_arrays(edges, X, y, train)
    labels = data.train_labels()
    return data, labels, fit_feature_prior(data.features, labels, 3, n_folds=3, seed=0)


def test_harmonic_with_prior_is_zhu_et_al_dongle_solution(planted):
    from graphssl.inference.optimize.feature_prior import harmonic_with_prior, lgc_with_prior

    data, labels, prior = _prior_fixture(planted)
    W = data.graph.to_scipy().toarray()
    h, eta = prior.probs, 0.3
    f = harmonic_with_prior(data.graph, labels, h, eta, n_classes=3, method="direct")
    # Sec. 5 of Zhu, Ghahramani & Lafferty (2003), dense: f_U = (I - (1-eta) P_UU)^-1 (...)
    deg = W.sum(1)
    U = np.flatnonzero((labels < 0) & (deg > 0))
    L = np.flatnonzero(labels >= 0)
    P = W / np.where(deg > 0, deg, 1)[:, None]
    f_L = np.eye(3)[labels[L]]
    f_U = np.linalg.solve(np.eye(U.size) - (1 - eta) * P[np.ix_(U, U)],
                          (1 - eta) * P[np.ix_(U, L)] @ f_L + eta * h[U])
    np.testing.assert_allclose(f[U], f_U / f_U.sum(1, keepdims=True), atol=1e-10)
    np.testing.assert_allclose(f[[0, 1]], h[[0, 1]])  # degree 0: the dongle alone
    np.testing.assert_allclose(f[L], f_L)
    # eta = 1: the feature model
    np.testing.assert_allclose(harmonic_with_prior(data.graph, labels, h, 1.0, n_classes=3)[U],
                               h[U], atol=1e-10)
    # LGC, rho = 1: Zhou et al.'s (I - alpha S) F = (1 - alpha) Y with Y_U = h_U (dense);
    # rho -> infinity: the feature model
    Y = h.copy()
    Y[L] = f_L
    inv = np.where(deg > 0, 1 / np.sqrt(np.where(deg > 0, deg, 1)), 0)
    S = inv[:, None] * W * inv[None, :]
    F = np.linalg.solve(np.eye(W.shape[0]) - 0.9 * S, 0.1 * Y)
    np.testing.assert_allclose(
        lgc_with_prior(data.graph, labels, h, 1.0, alpha=0.9, n_classes=3, method="direct"),
        F / F.sum(1, keepdims=True), atol=1e-10)
    np.testing.assert_allclose(lgc_with_prior(data.graph, labels, h, 1e9, n_classes=3)[U],
                               h[U], atol=1e-5)
    with pytest.raises(ValueError, match="eta"):
        harmonic_with_prior(data.graph, labels, h, 0.0)


def test_prior_weight_cross_validation_hides_each_fold(planted):
    from graphssl.inference.optimize.feature_prior import choose_prior_weight

    data, labels, prior = _prior_fixture(planted)
    seen = []

    def solve(known, h, weight):
        seen.append(np.flatnonzero((known < 0) & (labels >= 0)))
        out = np.full((labels.size, 3), 1e-3)
        out[np.arange(labels.size), np.maximum(labels, 0)] = weight  # 'weight' = confidence
        return out / out.sum(1, keepdims=True)

    weight, scores = choose_prior_weight(solve, labels, prior, (0.1, 0.5, 0.9))
    assert weight == 0.9 and scores.shape == (3,) and np.all(np.diff(scores) > 0)
    hidden = np.concatenate(seen[::3])  # one grid value per fold: the folds partition the labels
    assert np.array_equal(np.sort(hidden), np.flatnonzero(labels >= 0))
    assert all(np.array_equal(np.sort(prior.folds[s]), np.full(s.size, prior.folds[s][0]))
               for s in seen)


def test_graph_models_take_the_feature_model_as_prior():
    from graphssl.estimators import HarmonicFunctionClassifier, LGCClassifier

    # sparser graph, weaker words than `planted`: neither the graph nor the words alone suffice
    data = citation_from_arrays(*_planted(n=150, p_in=0.04, p_out=0.01, seed=2))
    labels = data.train_labels()
    for est in (HarmonicFunctionClassifier(), LGCClassifier()):
        clf = est.fit_graph(data.graph, labels, X=data.features)
        assert clf.feature_prior_ is not None and clf.n_unreached_ == 0
        assert clf.prior_weight_scores_.shape[0] > 1
        h = clf.feature_prior_.probs
        assert all(clf.transduction_[i] == h[i].argmax() for i in (0, 1))  # isolated nodes
        plain = type(est)(features=None).fit_graph(data.graph, labels, X=data.features)
        assert plain.feature_prior_ is None and plain.n_unreached_ >= 2
        test = ~data.train_mask
        acc = [np.mean(p[test] == data.y[test])
               for p in (clf.transduction_, h.argmax(1), plain.transduction_)]
        assert acc[0] >= max(acc[1:]) and acc[0] > min(acc[1:]), acc
    fixed = LGCClassifier(prior_weight=0.5).fit_graph(data.graph, labels, X=data.features)
    assert fixed.prior_weight_ == 0.5 and fixed.prior_weight_scores_ is None
    with pytest.raises(ValueError, match="prior_weight"):
        HarmonicFunctionClassifier(prior_weight=1.5).fit_graph(data.graph, labels,
                                                               X=data.features)


@pytest.mark.parametrize("name", ["HarmonicFunctionClassifier", "LGCClassifier"])
def test_the_feature_prior_route_reports_an_unfinished_cg_solve(planted, name, monkeypatch):
    """With node features the graph models' solve went unreported: a CG solve cut off by its
    maxiter gave unsolved rows without a word (the graph-only route warned). The final solve
    now warns; the cross-validation's solves use the same cap."""
    import graphssl.estimators as estimators
    from graphssl.inference.mcmc.statistics import ConvergenceWarning
    from graphssl.inference.optimize.baselines import solvers

    data = citation_from_arrays(*planted)
    labels = data.train_labels()
    estimator = getattr(estimators, name)
    exact = estimator(method="direct", prior_weight=0.3).fit_graph(data.graph, labels,
                                                                   X=data.features)
    monkeypatch.setattr(solvers, "default_maxiter", lambda n: 2)
    with pytest.warns(ConvergenceWarning, match=r"'cg' solve stopped after 2 iterations .*tol="):
        estimator(method="cg", tol=1e-12, prior_weight=0.3).fit_graph(data.graph, labels,
                                                                      X=data.features)
    monkeypatch.undo()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        solved = estimator(method="cg", tol=1e-10, prior_weight=0.3).fit_graph(
            data.graph, labels, X=data.features)
    np.testing.assert_allclose(solved.label_distributions_, exact.label_distributions_,
                               atol=1e-6)


@pytest.mark.parametrize("name", ["HarmonicFunctionClassifier", "LGCClassifier"])
def test_the_feature_prior_route_redoes_a_broken_down_solve(planted, name, monkeypatch):
    """A CG solve whose residual went NaN gave NaN rows, clipped to uniform-by-default rows,
    silently; it is redone directly, with a warning for the final solve and quietly inside the
    weight's cross-validation (whose choice is then the direct solves' choice)."""
    import graphssl.estimators as estimators
    from graphssl.inference.mcmc.statistics import ConvergenceWarning
    from graphssl.inference.optimize.baselines import solvers

    data = citation_from_arrays(*planted)
    labels = data.train_labels()
    estimator = getattr(estimators, name)
    exact = estimator(method="direct").fit_graph(data.graph, labels, X=data.features)

    def broken(A, B, inv_diag, tol, maxiter):
        return np.full(np.shape(B), np.nan), 342, float("nan")

    monkeypatch.setattr(solvers, "_jax_batched_pcg", broken)
    with pytest.warns(ConvergenceWarning, match=r"'jax_cg' solve broke down .*'direct'"):
        clf = estimator(method="jax_cg").fit_graph(data.graph, labels, X=data.features)
    assert clf.prior_weight_ == exact.prior_weight_
    np.testing.assert_allclose(clf.prior_weight_scores_, exact.prior_weight_scores_,
                               rtol=1e-9)
    np.testing.assert_allclose(clf.label_distributions_, exact.label_distributions_,
                               atol=1e-12)


def test_diffusion_pmfs_block_diagonal_on_components(planted):
    from graphssl.graph import heat_kernel
    from graphssl.models.graph_diffusion import diffusion_pmfs_for_taus

    data = citation_from_arrays(*planted)  # isolated nodes 0 and 1: three components
    assert data.n_components >= 3
    for kind in ("symmetric", "walder"):
        blocks = diffusion_pmfs_for_taus(data.graph, [0.0, 2.5], kind)
        assert np.allclose(blocks[0], np.eye(data.n_nodes), atol=1e-12)  # tau = 0: no spread
        if kind == "symmetric":  # against one dense decomposition of the whole Laplacian
            K = np.maximum(heat_kernel(data.graph, 2.5), 1e-30)
            np.testing.assert_allclose(blocks[1], K / K.sum(0), rtol=1e-8, atol=1e-12)
        np.testing.assert_allclose(blocks[1][:, 0], np.eye(data.n_nodes)[0], atol=1e-12)


def test_harmonic_mixture_prior_reduces_to_the_dongle_harmonic_function(planted):
    from graphssl.inference.optimize.feature_prior import (
        harmonic_mixture_with_prior,
        harmonic_with_prior,
    )

    data, labels, prior = _prior_fixture(planted)
    # one component per node (R = I): f_U = lambda_U is free, so the backbone + dongle
    # energy's minimiser is the harmonic function with dongles (nodes of degree > 0)
    f, lam, info = harmonic_mixture_with_prior(data.graph, labels, np.eye(labels.size),
                                               prior.probs, 0.3, n_classes=3)
    ref = harmonic_with_prior(data.graph, labels, prior.probs, 0.3, n_classes=3,
                              method="direct")
    linked = np.asarray(data.graph.to_scipy().sum(1)).ravel() > 0
    np.testing.assert_allclose(f[linked], ref[linked], atol=1e-8)
    assert lam.shape == (labels.size, 3) and info.converged


def test_harmonic_mixture_takes_the_feature_prior():
    from graphssl.estimators import HarmonicMixtureClassifier

    data = citation_from_arrays(*_planted(n=150, p_in=0.04, p_out=0.01, seed=2))
    labels, test = data.train_labels(), ~data.train_mask
    # both read by argmax: the point is what the prior adds, not the decision rule
    hm = HarmonicMixtureClassifier(n_components=10, decision="argmax").fit_graph(
        data.graph, labels, X=data.features)
    alone = HarmonicMixtureClassifier(n_components=10, features=None,
                                      decision="argmax").fit_graph(
        data.graph, labels, X=data.features)
    assert hm._mixture_kind(data.features) == "multinomial" and hm.prior_lambda_.shape == (10, 3)
    assert hm.prior_weight_scores_.shape == (9,)  # DEFAULT_ETA_GRID
    acc = [np.mean(p[test] == data.y[test]) for p in (hm.transduction_, alone.transduction_)]
    assert acc[0] > acc[1] + 0.2, acc  # one lambda row per component: the prior lifts it


def test_diffusion_mixture_reads_the_feature_prior(planted):
    from graphssl.estimators import DiffusionMixtureClassifier
    from graphssl.inference.optimize.feature_prior import fit_harmonic_with_prior
    from graphssl.models.diffusion_mixture import DirichletDiffusionMixture, parzen_scores

    data, labels, prior = _prior_fixture(planted)
    dm = DiffusionMixtureClassifier()
    expected = prior.probs.copy()
    expected[labels >= 0] = np.eye(3)[labels[labels >= 0]]
    np.testing.assert_allclose(dm._eta(labels, 3, prior), expected.mean(0))  # eta of Eq. 5
    # no features: the graph Parzen window's proportions ("auto"); None: uniform
    assert dm._eta(labels, 3, None) == "graph"
    assert DiffusionMixtureClassifier(class_prior=None)._eta(labels, 3, None) is None
    from graphssl.models.diffusion_mixture import with_graph_proportions

    model = DirichletDiffusionMixture.create(data.graph, labels, 3, tau=dm.tau)
    predicted = np.where(labels >= 0, labels, np.asarray(parzen_scores(model)).argmax(1))
    counts = np.bincount(predicted, minlength=3) + 1.0
    np.testing.assert_allclose(np.exp(np.asarray(with_graph_proportions(model, labels).log_eta)),
                               counts / counts.sum(), rtol=1e-6)
    start = dm._start(data.graph, labels, 3, prior)  # init="auto" with features
    f, _, _ = fit_harmonic_with_prior(data.graph, labels, prior, n_classes=3)
    np.testing.assert_array_equal(start, f.argmax(1))
    # no feature model: the Parzen start on the mixture's own D_tau
    dm.model_ = DirichletDiffusionMixture.create(data.graph, labels, 3, tau=dm.tau)
    np.testing.assert_array_equal(dm._start(data.graph, labels, 3, None),
                                  np.asarray(parzen_scores(dm.model_)).argmax(1))
    assert DiffusionMixtureClassifier(init="random")._start(data.graph, labels, 3, None) is None
    dm.feature_prior_ = prior  # unreached nodes get the feature model's prediction
    np.testing.assert_allclose(dm._unreached_proba(np.array([0, 1]), labels, 3),
                               prior.probs[[0, 1]])
    # size-aware run length: Walder's sets keep 1000 (+ 100 burn-in); CiteSeer's size 100 + 10
    assert dm._run_length(1500, 2) == (1000, 100) and dm._run_length(3327, 6) == (100, 10)
    assert DiffusionMixtureClassifier(n_iterations=50)._run_length(3327, 6) == (50, 100)
