"""The diagnostics say what they cannot judge (fuzz report 10): chains that never move,
labels tied exactly in every chain, a MAP report on unconverged chains, and the labels
``to_arviz`` stores."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from graphssl.estimators import PottsClassifier
from graphssl.inference.mcmc.statistics import (
    ConvergenceWarning,
    convergence_report,
    label_stability,
)


def _trap():
    """A 10-node clique, node 10 (label 0) tied to all of it at 0.6, node 11 (label 1) to two
    of it at 1.3: the mode puts the clique in class 0 (cut 2.6 against 6.0), mean field -- the
    chains' start -- puts it in class 1, and no single-site move can leave that state at
    beta = 2."""
    m = 10
    W = np.zeros((m + 2, m + 2))
    W[:m, :m] = 1.0
    np.fill_diagonal(W, 0.0)
    W[m, :m] = W[:m, m] = 0.6
    W[m + 1, :2] = W[:2, m + 1] = 1.3
    y = np.full(m + 2, -1)
    y[m], y[m + 1] = 0, 1
    return sp.csr_matrix(W), y


@pytest.fixture(scope="module")
def frozen_fit():
    W, y = _trap()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf = PottsClassifier(inference="gibbs", beta=2.0, normalize=None, clamp=True,
                              n_chains=4, n_samples=300, burn_in=50).fit_graph(W, y)
    return clf, caught


def test_statistics_that_never_move_are_said_to_be_unjudged():
    """Every statistic constant: each column is skipped and nothing judged; the report says
    so (``moved``), and a search's lower energy fails it (test below)."""
    stats = {"energy": np.full((4, 300), -95.2), "class_sizes": np.tile([11.0, 1.0], (4, 300, 1))}
    report = convergence_report(stats)
    assert report.converged and not report.moved and report.failing == ()
    moving = dict(stats, energy=np.random.default_rng(0).normal(size=(4, 300)))
    assert convergence_report(moving).moved


def test_frozen_gibbs_chains_are_reported(frozen_fit):
    """The Gibbs chains stay at the mean-field start, 6.8 nats above the mode (exact
    marginal P(clique in class 1) = 0.001, reported 1.0): now a ConvergenceWarning, and the
    MAP report puts the disagreement on the chains, not on the model."""
    clf, caught = frozen_fit
    assert np.ptp(np.asarray(clf.samples_.energy)) == 0.0
    assert not clf.convergence_.converged
    assert any(issubclass(w.category, ConvergenceWarning) and "no traced statistic moved"
               in str(w.message) and "search found a labelling 6.8 below" in str(w.message)
               for w in caught)
    assert clf.map_report_.verdict == "chains"
    assert clf.map_search_.energy < clf.map_search_.energies["chains_best"] - 6


def test_chains_frozen_at_the_mode_stand():
    """A posterior concentrated on one labelling (the search finds nothing lower) keeps its
    converged report: the Boltzmann MRF of the README's two moons, 50 labels."""
    from types import SimpleNamespace

    from graphssl.diagnostics import check_convergence

    frozen = SimpleNamespace(labels=np.zeros((4, 300, 5), np.int8),
                             energy=np.full((4, 300), -12.0), n_classes=2)
    assert check_convergence(frozen, lowest_energy=-12.0, warn=False).converged
    stuck = check_convergence(frozen, lowest_energy=-13.5, warn=False)
    assert not stuck.converged and "1.5 below" in stuck.failing[0]


def test_labels_tied_exactly_in_every_chain_are_open():
    """Lead 0 and standard error 0 (a node whose neighbours are clamped, one of each class)
    counted as settled: 20 of 21 open labels read 0 %."""
    tied = np.full((4, 3, 2), 0.5)
    assert label_stability(tied).fraction == 1.0
    decided = np.tile([[0.9, 0.1]], (4, 3, 1))
    assert label_stability(decided).fraction == 0.0


def test_to_arviz_stores_the_labels_the_fit_reports(frozen_fit):
    """``constant_data`` held the chains' best state and the marginals' argmax, not
    ``map_labels_`` (after the MAP search) and ``transduction_``."""
    clf, _ = frozen_fit
    constant = clf.to_arviz()["constant_data"]
    codes = {value: code for code, value in enumerate(clf.classes_)}
    stored_map = np.asarray(constant["map_labels"])
    stored_decided = np.asarray(constant["posterior_mean_labels"])
    assert np.array_equal(stored_map, [codes[v] for v in clf.map_labels_])
    assert np.array_equal(stored_decided, [codes[v] for v in clf.transduction_])
    assert not np.array_equal(stored_map, np.asarray(clf.samples_.map_labels))
