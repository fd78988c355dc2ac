"""Leave-one-out selection of (k, tau) for Walder's mixture.

On the 5-node graph of ``test_diffusion_mixture`` (2 labelled nodes) everything is enumerated:
the held-out predictive is checked against differences of the full joint, and the CPO
identity ``p(y_i | y_L without i) = 1 / E[1 / p(y_i | y_-i, beta_-i)]`` (expectation under the
posterior given all labels) against the posterior of the model without i's label. The
sampled CPO is then compared with the exact one within a Monte-Carlo tolerance.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import logsumexp

from graphssl.data import two_moons
from graphssl.graph import knn_graph
from graphssl.inference.diffusion_mixture import selection as sel
from graphssl.inference.optimize.baselines import parzen_window
from graphssl.models import diffusion_mixture as dm
from tests.test_diffusion_mixture import _LOG_JOINT, C, M, _enumerate, _model, _tiny_graph

LABELLED = (0, 4)


def _unlabel(model, i):
    """The same model with node i's label removed."""
    return model.replace(observed=model.observed.at[i].set(False))


def test_held_out_predictive_is_eq7_of_the_joint_summed_over_beta():
    model = _model()
    y = jnp.array([0, 1, 0, 1, 1], jnp.int32)
    beta = jnp.array([0, 0, 3, 3, 4], jnp.int32)
    # NumPy labels at the prompt: the library's function is compiled (jax.jit), one program
    got = np.asarray(dm.held_out_class_log_probs(model, np.asarray(y), np.asarray(beta),
                                                 np.array(LABELLED)))
    for row, i in enumerate(LABELLED):
        ys = np.tile(np.asarray(y), (C * M, 1))
        bs = np.tile(np.asarray(beta), (C * M, 1))
        ys[:, i] = np.repeat(np.arange(C), M)
        bs[:, i] = np.tile(np.arange(M), C)
        full = np.asarray(_LOG_JOINT(model, jnp.asarray(ys), jnp.asarray(bs))).reshape(C, M)
        exact = logsumexp(full, axis=1)
        np.testing.assert_allclose(got[row], exact - logsumexp(exact), atol=1e-10)


@pytest.fixture(scope="module")
def exact_cpo():
    """log p(y_i | the other label) for i in LABELLED, by enumeration of the model without
    i's label, and the same through the CPO identity over the full posterior."""
    model = _model()
    ys, bs, p = _enumerate(model)
    held = np.asarray(jax.jit(jax.vmap(dm.held_out_class_log_probs, in_axes=(None, 0, 0, None)))(
        model, jnp.asarray(ys), jnp.asarray(bs), jnp.array(LABELLED)))
    labels = np.asarray(model.labels)[list(LABELLED)]
    p_true = np.exp(held[:, np.arange(len(LABELLED)), labels])  # [states, L]
    via_identity = -np.log(p @ (1.0 / p_true))
    direct = []
    for i in LABELLED:
        ys_i, _, p_i = _enumerate(_unlabel(model, i))
        direct.append(np.log(np.sum(p_i[ys_i[:, i] == labels[list(LABELLED).index(i)]])))
    return model, np.array(direct), via_identity


def test_cpo_identity_gives_the_leave_one_out_predictive(exact_cpo):
    _, direct, via_identity = exact_cpo
    np.testing.assert_allclose(via_identity, direct, atol=1e-10)


def test_sampled_cpo_matches_enumeration(exact_cpo):
    """32 chains x 100 states, 5 iterations apart (3200 states, as many as 8 x 400 and more
    independent; a quarter of the resumed calls): log CPO within 0.05 of the exact value
    (its Monte-Carlo standard error here is about 0.01)."""
    model, direct, _ = exact_cpo
    _, loo = sel.mixture_leave_one_out(model, jax.random.PRNGKey(3), n_checkpoints=100,
                                       every=5, burn_in=50, n_chains=32)
    assert loo.log_probs.shape == (32 * 100, len(LABELLED), C)
    np.testing.assert_array_equal(loo.nodes, LABELLED)
    np.testing.assert_allclose(loo.log_cpo(), direct, atol=0.05)
    np.testing.assert_allclose(loo.log_loss(), -direct.mean(), atol=0.05)
    assert 0.0 <= float(loo.error()) <= 1.0


def _exact_elpd(model) -> float:
    """sum_i log p(y_i | the other label), by enumeration of the model without i's label."""
    labels = np.asarray(model.labels)
    total = 0.0
    for i in LABELLED:
        ys, _, p = _enumerate(_unlabel(model, i))
        total += np.log(np.sum(p[ys[:, i] == labels[i]]))
    return float(total)


def test_psis_loo_picks_the_tau_of_the_best_exact_leave_one_out_predictive():
    """Three diffusion times on the 5-node graph; the exact leave-one-out predictive of the
    two labels (enumeration) is best at tau = 1 (elpd -0.20 against -0.66 and -0.82 at 10
    and 30). PSIS-LOO of 32 chains x 25 states per tau (the sampler of
    test_sampled_cpo_matches_enumeration, no new compilation) chooses tau = 1, and its elpd
    lies within 0.15 of the exact one (over six keys the estimates spread with s.d. 0.04
    around a slight upward bias, the worst 0.11 off: key 3 at tau = 10, the key used here).
    The ``log_likelihood`` array has ArviZ's [chain, draw, node] layout."""
    taus = (30.0, 10.0, 1.0)
    models = [_model(tau=tau) for tau in taus]
    exact = [_exact_elpd(m) for m in models]
    assert int(np.argmax(exact)) == 2 and exact[2] - max(exact[:2]) > 0.4
    runs = [sel.mixture_leave_one_out(model, jax.random.PRNGKey(3), n_checkpoints=25, every=5,
                                      burn_in=50, n_chains=32)[1] for model in models]
    ll = runs[0].log_likelihood()
    assert ll.shape == (32, 25, len(LABELLED))
    np.testing.assert_array_equal(ll[1, 2], runs[0].pointwise()[25 + 2])
    # the three settings as one grid (leading axis), read by GridFit
    loo = runs[0]._replace(log_probs=np.stack([r.log_probs for r in runs]))
    scores = [sel.GridScore(5, tau, 0.0, mixture_loo_log_loss=float(ll_))
              for tau, ll_ in zip(taus, loo.log_loss(), strict=True)]
    psis, scores = sel._psis_scores(loo, scores, warn=False)
    fit = sel.GridFit(scores, np.ones((3, M, C)) / C, loo, psis)
    elpd = [float(r.elpd) for r in psis]
    assert fit.choose("psis_loo") == fit.choose("cpo") == fit.choose("mixture") == 2
    assert [s.psis_loo_log_loss for s in scores] == pytest.approx([-e / 2 for e in elpd])
    np.testing.assert_allclose(elpd, exact, atol=0.15)
    weights = fit.weights("stacking")
    assert weights.shape == (3,) and weights.sum() == pytest.approx(1.0)
    assert weights[2] == weights.max()


def test_estimator_writes_the_log_likelihood_group_that_az_loo_reads(exact_cpo):
    """DiffusionMixtureClassifier on the 5-node model: to_arviz() holds the leave-one-out
    predictive of both labels per draw (the last draw's equals Eq. 7 at the final state),
    PSIS-LOO of it is the exact leave-one-out predictive within 0.15 (as above), and
    sample_more keeps the record in step with the draws."""
    from graphssl.diagnostics import psis_loo
    from graphssl.estimators import DiffusionMixtureClassifier

    model, direct, _ = exact_cpo
    clf = DiffusionMixtureClassifier(tau=3.0, gamma=0.8, class_prior=[0.6, 0.4], n_chains=32,
                                     n_iterations=125, thin=5, burn_in=50, random_state=3)
    clf.fit_graph(_tiny_graph(), np.where(np.asarray(model.observed), model.labels, -1))
    tree = clf.to_arviz()
    ll = tree["log_likelihood"]["observed_labels"]
    assert ll.dims == ("chain", "draw", "labelled_node") and ll.shape == (32, 25, 2)
    assert list(ll.coords["labelled_node"].values) == list(LABELLED)
    state = clf.samples_.final_state
    last = sel._held_out(clf.model_, state.labels, state.beta, jnp.array(LABELLED))
    expected = np.take_along_axis(np.asarray(last), np.asarray(model.labels)[
        list(LABELLED)][None, :, None], axis=-1)[..., 0]
    np.testing.assert_allclose(ll.values[:, -1], expected, atol=1e-12)
    assert float(psis_loo(tree, warn=False).elpd) == pytest.approx(direct.sum(), abs=0.15)
    clf.sample_more(25)
    assert clf.to_arviz()["log_likelihood"]["observed_labels"].shape == (32, 30, 2)
    assert clf.samples_.labels.shape[:2] == (32, 30)


def test_parzen_loo_error_matches_refitting_without_each_label():
    data = two_moons(60, noise=0.15, seed=0)
    labels = np.full(60, -1)
    idx = np.r_[np.flatnonzero(data.y == 0)[:4], np.flatnonzero(data.y == 1)[:4]]
    labels[idx] = data.y[idx]
    graph = knn_graph(data.X, 6, sigma="walder")
    D = dm.diffusion_pmfs(graph, 2.0)
    wrong = 0
    for i in idx:
        held = labels.copy()
        held[i] = -1
        probs = parzen_window(graph, held, tau=2.0, n_classes=2, method="dense")
        wrong += int(probs[i].argmax() != labels[i])
    assert sel.parzen_loo_error(D, labels) == pytest.approx(wrong / idx.size)


@pytest.fixture(scope="module")
def moons():
    """80 two-moons points with 5 labels per class: ``(data, labels)``."""
    data = two_moons(80, noise=0.12, seed=1)
    labels = np.full(80, -1)
    rng = np.random.default_rng(0)
    for c in (0, 1):
        labels[rng.choice(np.flatnonzero(data.y == c), 5, replace=False)] = c
    return data, labels


def test_select_k_tau_by_parzen_and_by_the_mixture(moons):
    data, labels = moons
    grid = dict(k_grid=(5, 10), tau_grid=(1.0, 5.0))
    best, scores = sel.select_k_tau(data.X, labels, **grid)
    assert len(scores) == 4 and best in {(s.k, s.tau) for s in scores}
    assert min(s.parzen_loo_error for s in scores) == next(
        s.parzen_loo_error for s in scores if (s.k, s.tau) == best)
    small = dict(gamma=0.8, n_checkpoints=3, every=5, burn_in=10, key=jax.random.PRNGKey(0))
    fit = sel.fit_grid(data.X, labels, **grid, **small)
    assert fit.class_probs.shape == (4, 80, 2) and fit.loo.log_probs.shape[:2] == (4, 3)
    losses = [s.mixture_loo_log_loss for s in fit.scores]
    assert np.all(np.isfinite(losses))
    assert [s.parzen_loo_error for s in fit.scores] == [s.parzen_loo_error for s in scores]
    best_m, scores_m = sel.select_k_tau(data.X, labels, criterion="mixture", **grid, **small)
    assert best_m == (fit.best().k, fit.best().tau) == (
        scores_m[int(np.argmin(losses))].k, scores_m[int(np.argmin(losses))].tau)
    assert fit.choose("parzen") == [(s.k, s.tau) for s in scores].index(best)
    np.testing.assert_allclose(fit.weights(), 0.25)
    w = fit.weights("loo")
    total = fit.loo.log_cpo().sum(axis=-1)
    np.testing.assert_allclose(np.log(w) - np.log(w[0]), total - total[0], atol=1e-8)
    avg = fit.average("loo")
    np.testing.assert_allclose(avg, np.tensordot(w, fit.class_probs, axes=1))
    np.testing.assert_allclose(avg.sum(axis=1), 1.0, atol=1e-6)
    test = labels < 0
    assert np.mean(fit.average().argmax(1)[test] == data.y[test]) > 0.8


def test_graph_class_prior_is_each_settings_own_parzen_proportions(moons):
    """class_prior="graph" (the grid classifier's default): every (k, tau) gets eta = the
    class proportions of its own graph Parzen window (labelled nodes at their labels,
    add-one smoothed), in its model and in its Parzen leave-one-out score."""
    data, labels = moons
    taus = (1.0, 5.0)
    scores, models, _ = sel._grid_models(data.X, labels, (5,), taus, "graph", 0.5, 0.8,
                                         np.float64, build=True)
    graph = knn_graph(data.X, 5, sigma="walder", on_duplicates="ignore")
    for D, model, score in zip(dm.diffusion_pmfs_for_taus(graph, taus), models, scores,
                               strict=True):
        uniform = dm.DirichletDiffusionMixture.create(graph, labels, 2, diffusion=D,
                                                      dtype=np.float64)
        parzen = np.asarray(dm.parzen_scores(uniform)).argmax(1)
        counts = np.bincount(np.where(labels >= 0, labels, parzen), minlength=2) + 1.0
        eta = counts / counts.sum()
        np.testing.assert_allclose(np.exp(np.asarray(model.log_eta)), eta, rtol=1e-10)
        assert score.parzen_loo_error == pytest.approx(sel.parzen_loo_error(D, labels, eta))
        assert abs(eta[0] - 0.5) > 0.01  # not the uniform eta that None would give
    no_build, _, _ = sel._grid_models(data.X, labels, (5,), taus, "graph", 0.5, 0.8,
                                      np.float64, build=False)
    assert no_build == scores
    with pytest.raises(ValueError, match="class_prior"):
        sel._grid_models(data.X, labels, (5,), taus, "parzen", 0.5, 0.8, np.float64, False)


def test_selection_bad_input_raises():
    data = two_moons(30, seed=0)
    labels = np.full(30, -1)
    labels[:2] = [0, 1]
    with pytest.raises(ValueError, match="criterion"):
        sel.select_k_tau(data.X, labels, criterion="cv")
    with pytest.raises(TypeError, match="criterion='mixture'"):
        sel.select_k_tau(data.X, labels, gamma=0.8)
    with pytest.raises(ValueError, match="k_grid"):
        sel.select_k_tau(data.X, labels, k_grid=(30,), tau_grid=(1.0,))
    with pytest.raises(ValueError, match="criterion"):
        sel.GridFit([sel.GridScore(5, 1.0, 0.0)], np.ones((1, 2, 2)), None).choose("cv")
    with pytest.raises(ValueError, match="weighting"):
        sel.GridFit([sel.GridScore(5, 1.0, 0.0)], np.ones((1, 2, 2)), None).weights("bma")
    with pytest.raises(ValueError, match="at least 25 recorded draws"):
        sel.GridFit([sel.GridScore(5, 1.0, 0.0)], np.ones((1, 2, 2)), None).choose("psis_loo")
    with pytest.raises(ValueError, match="n_checkpoints"):
        sel.mixture_leave_one_out(_model(), jax.random.PRNGKey(0), n_checkpoints=0)
    unlabelled = dm.DirichletDiffusionMixture.create(_tiny_graph(), np.full(M, -1), C)
    with pytest.raises(ValueError, match="no labelled node"):
        sel.mixture_leave_one_out(unlabelled, jax.random.PRNGKey(0))


def test_grid_classifier_combines_the_grid_fit(moons):
    from graphssl.estimators import DiffusionMixtureGridClassifier

    data, labels = moons
    y = np.where(labels >= 0, labels * 5 + 2, -1)  # classes 2 and 7
    small = dict(k_grid=(5, 10), tau_grid=(1.0, 5.0), n_checkpoints=3, every=5, burn_in=10)
    clf = DiffusionMixtureGridClassifier(k=6, **small).fit(data.X, y)
    np.testing.assert_array_equal(clf.classes_, [2, 7])
    fit = sel.fit_grid(data.X, labels, gamma=0.8, key=jax.random.PRNGKey(0),
                       class_prior="graph", **{k: v for k, v in small.items()})
    np.testing.assert_allclose(clf.label_distributions_, fit.average(), atol=1e-6)
    np.testing.assert_allclose(clf.weights_, 0.25)
    test = y < 0
    assert np.mean(clf.transduction_[test] == data.y[test] * 5 + 2) > 0.8
    assert clf.predict(data.X[:3] + 1e-3).shape == (3,)
    chosen = DiffusionMixtureGridClassifier(combine="parzen", **small).fit(data.X, y)
    g = int(np.argmax(chosen.weights_))
    assert chosen.chosen_ == (fit.scores[g].k, fit.scores[g].tau)
    np.testing.assert_allclose(chosen.label_distributions_, fit.class_probs[g], atol=1e-6)
    with pytest.raises(ValueError, match="combine"):
        DiffusionMixtureGridClassifier(combine="vote", **small).fit(data.X, y)
    with pytest.raises(ValueError, match="fit\\(X, y\\)"):
        DiffusionMixtureGridClassifier().fit_graph(knn_graph(data.X, 5), y)


@pytest.mark.parametrize("kind", ["symmetric", "walder"])
def test_diffusion_pmfs_for_taus_match_the_matrix_exponential(kind):
    """One eigendecomposition for every tau = scipy's expm(-tau L / 2), columns normalised."""
    from scipy.linalg import expm

    graph = knn_graph(two_moons(60, seed=2).X, 6, sigma="walder")
    from graphssl.models.graph_diffusion import _symmetric_normalized_weights

    S = _symmetric_normalized_weights(graph)
    diag = np.eye(60) if kind == "symmetric" else np.diag(S.sum(axis=1))
    taus = (0.0, 1.0, 5.0)
    for tau, D in zip(taus, dm.diffusion_pmfs_for_taus(graph, taus, kind), strict=True):
        K = expm(-0.5 * tau * (diag - S))
        np.testing.assert_allclose(D, K / K.sum(axis=0), atol=1e-12)
        np.testing.assert_allclose(dm.diffusion_pmfs(graph, tau, kind), D, atol=1e-15)
    with pytest.raises(ValueError, match="tau"):
        dm.diffusion_pmfs_for_taus(graph, (1.0, -1.0))
