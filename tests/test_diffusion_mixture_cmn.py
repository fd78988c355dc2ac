"""The diffusion mixture's class mass normalisation (``class_mass_normalize``): a decision
rule read from the same chains, the posterior-mean marginals scaled column by column to the
model's eta (Zhu, Ghahramani & Lafferty 2003, Sec. 4)."""

import numpy as np
import pytest

from graphssl.data import mask_labels, random_split, two_moons
from graphssl.estimators import DiffusionMixtureClassifier

KW = dict(k=6, n_chains=2, n_iterations=20, burn_in=5, thin=5, random_state=1,
          progress=False, gamma=0.8)
# eta far from the two moons' even split: the rule must move predictions towards it
ETA = (0.8, 0.2)


def _moons():
    """80 two-moons points and 6 labels (3 a class)."""
    ds = two_moons(80, seed=0)
    X, y = np.asarray(ds.X), np.asarray(ds.y)
    return X, mask_labels(y, random_split(y, n_labeled=6, seed=0))


def _assert_moves_towards_eta(labels, plain, cmn):
    """The rule gives class 0 at least 2 points more of the unlabelled nodes, and its
    share is nearer eta's."""
    unlabelled = labels < 0
    share_plain = np.mean(plain.transduction_[unlabelled] == 0)
    share_cmn = np.mean(cmn.transduction_[unlabelled] == 0)
    assert share_cmn >= share_plain + 0.02
    assert abs(share_cmn - ETA[0]) < abs(share_plain - ETA[0])


@pytest.fixture(scope="module")
def fits():
    X, labels = _moons()
    plain = DiffusionMixtureClassifier(class_prior=ETA, **KW).fit(X, labels)
    cmn = DiffusionMixtureClassifier(class_prior=ETA, class_mass_normalize=True,
                                     **KW).fit(X, labels)
    return labels, plain, cmn


def _reference(posterior, unlabelled, eta):
    """Zhu et al.'s rule written out: column c of the unlabelled rows times
    eta_c / (column mass), rows renormalised; labelled rows kept."""
    out = np.array(posterior, dtype=np.float64)
    scaled = out[unlabelled] * (np.asarray(eta) / out[unlabelled].sum(axis=0))
    out[unlabelled] = scaled / scaled.sum(axis=1, keepdims=True)
    return out


def test_same_chains_only_the_decision_differs(fits):
    _, plain, cmn = fits
    np.testing.assert_array_equal(plain.posterior_mean_, cmn.posterior_mean_)
    np.testing.assert_allclose(plain.label_distributions_, plain.posterior_mean_)
    np.testing.assert_array_equal(plain.map_labels_, cmn.map_labels_)


def test_marginals_scaled_to_eta(fits):
    labels, _, cmn = fits
    unlabelled = labels < 0
    np.testing.assert_allclose(cmn.class_prior_, ETA / np.sum(ETA))
    expected = _reference(cmn.posterior_mean_, unlabelled, cmn.class_prior_)
    np.testing.assert_allclose(cmn.label_distributions_, expected, atol=1e-6)
    np.testing.assert_allclose(cmn.label_distributions_.sum(axis=1), 1.0, atol=1e-6)
    labelled = ~unlabelled
    np.testing.assert_array_equal(cmn.transduction_[labelled], labels[labelled])


def test_predictions_move_towards_eta(fits):
    """The posterior mean gives class 0 70 % of the unlabelled points where eta says 80 %;
    the rule gives it more (74 %; a rule scaled to the labelled frequencies, 3 and 3 here,
    moves the other way, and no rule not at all: both fail this)."""
    labels, plain, cmn = fits
    _assert_moves_towards_eta(labels, plain, cmn)


def test_sample_more_keeps_the_rule(fits):
    labels, _, cmn = fits
    cmn.sample_more(10)
    expected = _reference(cmn.posterior_mean_, labels < 0, cmn.class_prior_)
    np.testing.assert_allclose(cmn.label_distributions_, expected, atol=1e-6)


def test_bad_value_names_the_argument():
    X = np.random.default_rng(0).normal(size=(20, 2))
    y = np.r_[0, 1, np.full(18, -1)]
    with pytest.raises(ValueError, match="class_mass_normalize"):
        DiffusionMixtureClassifier(class_mass_normalize="yes", **KW).fit(X, y)


# ----------------------------------------------------------------- the grid's option

GRID_KW = dict(k=6, k_grid=(5, 10), tau_grid=(1.0, 5.0), n_checkpoints=3, every=5,
               burn_in=10, progress=False)


@pytest.fixture(scope="module")
def grid_fits():
    from graphssl.estimators import DiffusionMixtureGridClassifier

    X, labels = _moons()
    plain = DiffusionMixtureGridClassifier(class_prior=ETA, **GRID_KW).fit(X, labels)
    cmn = DiffusionMixtureGridClassifier(class_prior=ETA, class_mass_normalize=True,
                                         **GRID_KW).fit(X, labels)
    graph_eta = DiffusionMixtureGridClassifier(combine="loo_average", **GRID_KW).fit(X, labels)
    return labels, plain, cmn, graph_eta


def test_grid_same_chains_marginals_scaled_to_eta(grid_fits):
    labels, plain, cmn, _ = grid_fits
    np.testing.assert_array_equal(plain.grid_.class_probs, cmn.grid_.class_probs)
    np.testing.assert_allclose(cmn.grid_.class_priors, np.tile(ETA, (4, 1)), atol=1e-6)
    np.testing.assert_allclose(cmn.class_prior_, ETA, atol=1e-6)
    expected = _reference(plain.label_distributions_, labels < 0, cmn.class_prior_)
    np.testing.assert_allclose(cmn.label_distributions_, expected, atol=1e-6)
    _assert_moves_towards_eta(labels, plain, cmn)


def test_grid_class_prior_is_the_weighted_eta(grid_fits):
    """With each setting's graph eta (the default) ``class_prior_`` is the settings' etas
    averaged with the combination's own weights."""
    _, _, _, fit = grid_fits
    etas = fit.grid_.class_priors
    assert etas.shape == (4, 2) and not np.allclose(etas, 0.5)
    np.testing.assert_allclose(etas.sum(axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(fit.class_prior_, fit.weights_ @ etas / np.sum(fit.weights_ @ etas))


def test_grid_bad_value_names_the_argument():
    from graphssl.estimators import DiffusionMixtureGridClassifier

    X = np.random.default_rng(0).normal(size=(20, 2))
    y = np.r_[0, 1, np.full(18, -1)]
    with pytest.raises(ValueError, match="class_mass_normalize"):
        DiffusionMixtureGridClassifier(class_mass_normalize=1, **GRID_KW).fit(X, y)


def test_unreached_nodes_neither_count_nor_change():
    """The estimators' rule (``GraphSSLClassifier._class_mass_normalized``) scales over the
    unlabelled nodes a label reaches: a component without a label (its nodes get the class
    prior afterwards) does not move the masses and keeps its rows."""
    import scipy.sparse as sp

    from graphssl.estimators import DiffusionMixtureClassifier
    from graphssl.graph import Graph

    edges = [(0, 1), (1, 2), (2, 3), (3, 4), (5, 6)]  # nodes 5-6: no label reaches them
    rows, cols = zip(*edges, strict=True)
    W = sp.coo_matrix((np.ones(5), (rows, cols)), shape=(7, 7))
    graph = Graph.from_scipy((W + W.T).tocsr())
    labels = np.array([0, -1, -1, -1, 1, -1, -1])
    rng = np.random.default_rng(0)
    dist = rng.dirichlet((1.0, 1.0), size=7)
    out = DiffusionMixtureClassifier()._class_mass_normalized(dist, graph, labels, ETA)
    np.testing.assert_array_equal(out[[0, 4, 5, 6]], dist[[0, 4, 5, 6]])
    reached = [1, 2, 3]
    np.testing.assert_allclose(out[reached], _reference(dist, np.isin(np.arange(7), reached),
                                                        ETA)[reached])


def test_default_target_is_read_from_the_labels():
    """Without a class prior the rule's target is the labelled counts add-one smoothed,
    read from ``labels``: neither the rows of the labelled nodes (soft under label noise) nor
    those of a component no label reaches move it. (The rule once summed those rows: on
    COIL2-10, 274 unreached nodes of 1500 then set the Boltzmann MRF's target.)"""
    import scipy.sparse as sp

    from graphssl.estimators import DiffusionMixtureClassifier
    from graphssl.graph import Graph

    edges = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (6, 7), (7, 8)]  # 6-8: unreached
    rows, cols = zip(*edges, strict=True)
    W = sp.coo_matrix((np.ones(len(edges)), (rows, cols)), shape=(9, 9))
    graph = Graph.from_scipy((W + W.T).tocsr())
    labels = np.array([0, -1, -1, -1, 1, 1, -1, -1, -1])  # counts 1 : 2
    dist = np.random.default_rng(1).dirichlet((1.0, 1.0), size=9)
    dist[[6, 7, 8]] = [0.99, 0.01]  # an unreached component leaning to class 0
    dist[[0, 4, 5]] = [[0.6, 0.4], [0.3, 0.7], [0.45, 0.55]]  # soft labelled rows
    out = DiffusionMixtureClassifier()._class_mass_normalized(dist, graph, labels)
    q = np.array([2.0, 3.0]) / 5.0  # (1 + 1, 2 + 1) / (3 + 2)
    reached = np.isin(np.arange(9), [1, 2, 3])
    np.testing.assert_allclose(out[reached], _reference(dist, reached, q)[reached])
