"""Walder's MRF strength chosen from the labelled points (``gamma="auto"``, issue 25 item 2):
:func:`~graphssl.inference.diffusion_mixture.selection.select_gamma` and the estimator's use
of it."""

import jax
import numpy as np
import pytest

from graphssl.data import mask_labels, random_split, two_moons
from graphssl.estimators import DiffusionMixtureClassifier
from graphssl.graph import knn_graph
from graphssl.inference.diffusion_mixture.selection import (
    GAMMA_CANDIDATES,
    GammaChoice,
    select_gamma,
    selection_run_length,
)
from graphssl.models.diffusion_mixture import DirichletDiffusionMixture, parzen_scores

KW = dict(k=6, n_chains=2, n_iterations=20, burn_in=5, thin=5, random_state=1,
          progress=False)


@pytest.fixture(scope="module")
def moons():
    ds = two_moons(80, seed=0)
    X, y = np.asarray(ds.X), np.asarray(ds.y)
    labels = mask_labels(y, random_split(y, n_labeled=6, seed=0))
    return X, y, labels


def test_selection_run_length_is_a_fraction_of_the_main_run():
    assert selection_run_length(1000, 100) == (100, 40, 5)  # 300 iterations of one chain
    assert selection_run_length(100, 10) == (10, 8, 5)  # CiteSeer's size-aware length
    assert selection_run_length(20, 5) == (5, 8, 1)  # short runs: 8 draws one apart


def test_select_gamma_takes_the_smaller_leave_one_out_loss(moons):
    """On two moons the MRF term carries the labels along each moon: from the Parzen start
    0.8 predicts the held-out labels far better than 0 (log loss 0.010-0.021 against
    0.21-0.56 over seeds 0-2), and the choice does not depend on the order the candidates
    are given in (an argmax, or a choice that ignores the scores, fails here)."""
    X, _, labels = moons
    graph = knn_graph(X, k=6)
    model = DirichletDiffusionMixture.create(graph, labels, 2, tau=5.0, gamma=0.8)
    start = np.asarray(parzen_scores(model)).argmax(axis=1)  # the estimator's start
    choices = [select_gamma(model, jax.random.PRNGKey(0), candidates=c, n_iterations=200,
                            burn_in=20, init_labels=start, init_beta="self")
               for c in (GAMMA_CANDIDATES, GAMMA_CANDIDATES[::-1])]
    for choice in choices:
        assert isinstance(choice, GammaChoice)
        assert choice.log_loss.shape == (2,) and np.all(np.isfinite(choice.log_loss))
        assert choice.gamma == choice.candidates[int(np.argmin(choice.log_loss))]
        assert choice.gamma == 0.8
        assert choice.n_iterations == 20 + 8 * 5
    by_gamma = [dict(zip(c.candidates, c.log_loss, strict=True)) for c in choices]
    assert all(d[0.8] < d[0.0] - 0.1 for d in by_gamma)
    with pytest.raises(ValueError, match="candidates"):
        select_gamma(model, jax.random.PRNGKey(0), candidates=(0.8, -1.0))


def test_auto_gamma_runs_the_chain_a_fixed_gamma_fit_runs(moons, monkeypatch):
    """The main chains at the chosen value draw exactly what a fit with that value fixed
    draws (the choice has its own random stream), for either outcome of the choice."""
    X, _, labels = moons
    auto = DiffusionMixtureClassifier(**KW).fit(X, labels)
    assert auto.gamma_choice_ is not None and auto.gamma_ == auto.gamma_choice_.gamma
    assert type(auto.gamma_) is float
    fixed = DiffusionMixtureClassifier(gamma=auto.gamma_, **KW).fit(X, labels)
    assert fixed.gamma_choice_ is None and fixed.gamma_ == auto.gamma_
    np.testing.assert_array_equal(np.asarray(auto.samples_.labels),
                                  np.asarray(fixed.samples_.labels))
    np.testing.assert_array_equal(auto.transduction_, fixed.transduction_)

    import graphssl.estimators.diffusion_mixture as dm_estimator

    other = 0.0 if auto.gamma_ == 0.8 else 0.8
    monkeypatch.setattr(dm_estimator, "select_gamma", lambda *a, **k: GammaChoice(
        other, GAMMA_CANDIDATES, np.zeros(2), 0))
    forced = DiffusionMixtureClassifier(**KW).fit(X, labels)
    assert forced.gamma_ == other and float(forced.model_.gamma) == pytest.approx(other)
    reference = DiffusionMixtureClassifier(gamma=other, **KW).fit(X, labels)
    np.testing.assert_array_equal(np.asarray(forced.samples_.labels),
                                  np.asarray(reference.samples_.labels))


@pytest.mark.parametrize("gamma", ["best", -0.5])
def test_a_bad_gamma_is_named(moons, gamma):
    X, _, labels = moons
    with pytest.raises(ValueError, match="gamma"):
        DiffusionMixtureClassifier(gamma=gamma, **KW).fit(X, labels)
