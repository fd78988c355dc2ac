"""The Boltzmann MRF's grid route: data scale, (CV) on the labelled points, the degeneracy
test, numerics at extreme scales, and the default estimator on a small two-moons set.

One fit (module fixture) is shared; the other tests use the same compiled grid step
(same node count, folds and chain settings) or no chains at all.
"""

import contextlib
import dataclasses
import io
import itertools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from graphssl import data
from graphssl.estimators import BoltzmannMRFClassifier, HarmonicFunctionClassifier
from graphssl.graph import Graph
from graphssl.inference.boltzmann import criteria
from graphssl.inference.boltzmann import learning as bl
from graphssl.inference.boltzmann import selection as bs
from graphssl.models.boltzmann import (
    ExtendedParams,
    length_scale_couplings,
    locally_scaled,
    pair_geometry,
)

SETTINGS = bs.GridSettings(alpha0=(-1.0, 0.0, 1.0, 2.0, 3.0), log_scale_offsets=(0.0, 1.0),
                           n_folds=3, burn_in=3, n_samples=10, patience=2)


@pytest.fixture(scope="module")
def moons():
    ds = data.two_moons(60, noise=0.08, seed=3)
    labels = np.full(60, -1)
    for c in (0, 1):
        labels[np.flatnonzero(ds.y == c)[:3]] = c
    return ds.X, ds.y, labels


def _small_fit(X, labels, **kwargs):
    """A grid-route fit at the shared settings (the module's compiled programs) and the
    warnings it raised, as strings."""
    clf = BoltzmannMRFClassifier(model="basic", grid=SETTINGS, n_chains=2, n_samples=60,
                                 burn_in=10, progress=False, **kwargs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf.fit(X, labels)
    return clf, [str(w.message) for w in caught]


@pytest.fixture(scope="module")
def zero_noise_fit(moons):
    X, _, labels = moons
    clf = BoltzmannMRFClassifier(model="basic", grid=SETTINGS, n_chains=2, n_samples=60,
                                 burn_in=10, progress=True)
    stderr = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stderr(stderr):
        warnings.simplefilter("ignore")  # a convergence note on 2 short chains is not the point
        clf.fit(X, labels)
    clf.stderr_for_test = stderr.getvalue()
    return clf


def test_progress_true_reports_the_grid_and_why(zero_noise_fit):
    (line,) = [text for text in zero_noise_fit.stderr_for_test.splitlines()
               if text.startswith("coupling grid: about ")]  # the bar's lines besides
    assert "folds' chains on" in line
    assert "GridSettings(alpha0=" in line  # the setting that shortens it
    (line,) = [text for text in zero_noise_fit.stderr_for_test.splitlines()
               if text.startswith("posterior: about ")]  # then the posterior's chains
    assert "2 chains x 70 sweeps" in line and "n_samples (now 60)" in line


def nearest_pair_values(geo, values, k=10):
    """``values`` of each point's ``k`` nearest paired points (NumPy reference)."""
    s, d2, values = np.asarray(geo.senders), np.asarray(geo.sq_dist), np.asarray(values)
    return np.concatenate([values[s == i][np.argsort(d2[s == i], kind="stable")[:k]]
                           for i in range(geo.n_nodes)])


def test_grid_learning_beats_chance_and_equals_hf_at_zero_noise(moons, zero_noise_fit):
    X, y, labels = moons
    clf = zero_noise_fit
    assert clf.learning_ == "grid" and clf.method_ == "swendsen_wang"
    free = labels < 0
    assert np.mean(clf.transduction_[free] == y[free]) >= 0.9  # chance: 0.5; 51 of 54 here
    # the harmonic function on the same pairs with the chosen couplings (its zero-noise,
    # Gaussian relaxation) gives the same labels, both read by argmax (no class masses)
    geo = clf.pair_geometry_
    theta = clf.theta_
    A = length_scale_couplings(geo, theta.alpha0, theta.log_length_scales)
    hf = HarmonicFunctionClassifier(class_mass_normalize=False).fit_graph(
        Graph(geo.senders, geo.receivers, A, 60), labels)
    np.testing.assert_array_equal(np.argmax(clf.posterior_mean_, axis=1)[free],
                                  np.searchsorted(hf.classes_, hf.transduction_)[free])
    assert np.isinf(float(theta.gamma))  # clamped labels: the zero-noise channel


def test_weights_as_sq_distances_give_back_a_gaussian_kernels_distances():
    from graphssl.estimators.boltzmann import weights_as_sq_distances

    d2 = np.array([0.5, 1.0, 2.0, 4.0])
    sq = weights_as_sq_distances(np.exp(-d2 / (2 * 0.7**2)))
    assert sq.shape == (4, 1)
    np.testing.assert_allclose(sq[:, 0], (d2 - d2.min()) / (2 * 0.7**2), rtol=1e-12)
    np.testing.assert_array_equal(weights_as_sq_distances(np.full(5, 3.0)), 0.0)


@pytest.fixture(scope="module")
def moons_graph(moons):
    """The harmonic function's kNN graph of the moons (60 nodes)."""
    X, _, labels = moons
    return HarmonicFunctionClassifier().fit(X, labels).graph_


def _bare_graph_fit(graph, labels):
    clf = BoltzmannMRFClassifier(model="basic", grid=SETTINGS, n_chains=2, n_samples=60,
                                 burn_in=10, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 2 short chains: convergence notes are not the point
        return clf.fit_graph(graph, labels)


def test_bare_graph_couples_its_edges_by_their_weights(moons, moons_graph):
    # fit_graph(graph, y) without features: A_ij = e^alpha_0 (w_ij / max w)^(e^-alpha)
    _, y, labels = moons
    clf = _bare_graph_fit(moons_graph, labels)
    w = np.asarray(moons_graph.weights)
    geo = clf.pair_geometry_
    np.testing.assert_array_equal(np.asarray(geo.senders), np.asarray(moons_graph.senders))
    np.testing.assert_array_equal(np.asarray(geo.receivers), np.asarray(moons_graph.receivers))
    theta = clf.theta_
    A = np.asarray(length_scale_couplings(geo, theta.alpha0, theta.log_length_scales))
    expected = np.exp(float(theta.alpha0)) * (w / w.max()) ** np.exp(
        -float(theta.log_length_scales[0]))
    np.testing.assert_allclose(A, expected, rtol=1e-4)
    free = labels < 0
    assert np.mean(clf.transduction_[free] == y[free]) >= 0.9  # chance 0.5


def test_unweighted_bare_graph_searches_the_coupling_alone(moons, moons_graph):
    # every edge alike: the length-scale offsets would repeat one coupling, so one is kept
    _, y, labels = moons
    unweighted = dataclasses.replace(moons_graph, weights=np.ones_like(moons_graph.weights))
    clf = _bare_graph_fit(unweighted, labels)
    assert clf.grid_.cv.shape[0] == 1 and clf.grid_.log_scale_offset == 0.0
    A = np.asarray(length_scale_couplings(clf.pair_geometry_, clf.theta_.alpha0,
                                          clf.theta_.log_length_scales))
    np.testing.assert_allclose(A, np.exp(float(clf.theta_.alpha0)), rtol=1e-6)
    free = labels < 0
    assert np.mean(clf.transduction_[free] == y[free]) >= 0.8


def test_flat_posterior_reports_its_open_labels_on_the_decisions_scale(moons):
    # couplings e^-6: the labels reach nobody, the marginals are flat and the decision rests
    # on Monte-Carlo noise; the chains pass R-hat and ESS, and the warning says so
    from graphssl.diagnostics import UnsettledLabelsWarning, label_stability
    from graphssl.inference.mcmc.chains import rao_blackwell_chain_marginals

    X, _, labels = moons
    weak = SETTINGS._replace(alpha0=(-6.0, -5.5))
    clf = BoltzmannMRFClassifier(model="basic", grid=weak, progress=False)  # 4 x 300 draws
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "no coupling carries the labels"
        with pytest.warns(UnsettledLabelsWarning, match="pass R-hat and ESS, but leave") as rec:
            clf.fit(X, labels)
    assert {w.filename for w in rec if w.category is UnsettledLabelsWarning} == {__file__}
    assert clf.convergence_.converged
    # read from each chain's marginals through the decision's class-mass factors
    per_chain = rao_blackwell_chain_marginals(clf._sampled_model, clf.samples_)[..., :2]
    expected = label_stability(np.stack([clf._class_mass_rescaled(p) for p in per_chain]),
                               free=labels < 0)
    np.testing.assert_array_equal(clf.convergence_.stability.unsettled, expected.unsettled)
    assert expected.fraction > 0.05


def test_grid_record_is_consistent(moons, zero_noise_fit):
    X, _, labels = moons
    g = zero_noise_fit.grid_
    geo = zero_noise_fit.pair_geometry_
    near = nearest_pair_values(geo, geo.sq_dist)
    assert g.sigma0 == pytest.approx(float(np.sqrt(np.median(near[near > 0]))))
    o = SETTINGS.log_scale_offsets.index(g.log_scale_offset)
    i = SETTINGS.alpha0.index(g.alpha0)
    assert np.isfinite(g.cv[o, i]) and g.merge_gain[o, i] >= 0
    evaluated = np.isfinite(g.cv)
    assert np.all(np.isfinite(g.terms[evaluated])) and np.all(g.terms[evaluated] <= 0)
    # the chosen point is within one paired standard error of the best one
    best = g.terms[np.unravel_index(np.nanargmax(g.cv), g.cv.shape)]
    diff = g.terms[o, i] - best
    assert diff.mean() >= -diff.std(ddof=1) / np.sqrt(diff.size) - 1e-12
    # no point of higher prior density is as good (alpha_0 ~ N(0, 3^2), offset ~ N(0, 1))
    density = -(np.asarray(SETTINGS.alpha0)[None, :] / 3.0) ** 2 - np.asarray(
        SETTINGS.log_scale_offsets)[:, None] ** 2
    for oo, ii in zip(*np.nonzero(evaluated & (density > density[o, i])), strict=True):
        d = g.terms[oo, ii] - best
        assert d.mean() < -d.std(ddof=1) / np.sqrt(d.size)
    assert np.all(np.diff(g.strength[o][np.isfinite(g.strength[o])]) > 0)
    folds = g.folds[labels >= 0]
    assert set(folds) == {0, 1, 2} and np.all(g.folds[labels < 0] == -1)
    # the ordered-phase record: class shares of the unobserved nodes where evaluated, flagged
    # where a share exceeds its plausible limit given the labelled counts (3 of each class)
    from graphssl.inference.ordered_phase import plausible_share_limits

    np.testing.assert_allclose(g.class_shares[evaluated].sum(-1), 1.0, atol=1e-6)
    assert np.all(np.isnan(g.class_shares[~evaluated]))
    limits = plausible_share_limits(labels, 2)
    np.testing.assert_array_equal(g.ordered, np.any(g.class_shares > limits, axis=-1))
    assert not g.ordered[o, i]  # two balanced moons: the chosen point is not ordered


def test_local_widths_scale_the_model_pairs(moons, zero_noise_fit):
    """``sigma="local"`` (default): each pair's squared distance times ``median(w)^2 / (w_i
    w_j)``, ``w_i`` = the point's 10th-neighbour distance / 3; the grid route keeps one
    column (one length scale shared by the features)."""
    from sklearn.neighbors import NearestNeighbors

    X = moons[0]
    geo = zero_noise_fit.pair_geometry_
    assert zero_noise_fit.sigma == "local" and geo.sq_diff.shape[1] == 1
    dist = NearestNeighbors(n_neighbors=11).fit(X).kneighbors(X)[0]
    w = dist[:, 10] / 3.0
    s, r = np.asarray(geo.senders), np.asarray(geo.receivers)
    raw = ((X[s] - X[r]) ** 2).sum(1)
    np.testing.assert_allclose(geo.sq_dist, raw * np.median(w) ** 2 / (w[s] * w[r]), rtol=1e-5)
    assert zero_noise_fit.log_length_scales_.shape == (2,)  # the shared scale, per feature
    with pytest.raises(ValueError, match="widths"):
        locally_scaled(geo, np.zeros(geo.n_nodes))


def test_an_ordered_posterior_is_reported(moons, zero_noise_fit, monkeypatch):
    """A posterior that sweeps one class over the unlabelled nodes, beyond what the labelled
    counts make plausible, is named (``collapsed_classes_``) and warned about; the balanced
    moons fit is not. The collapse is forced by replacing the chains' posterior-mean
    labels (the check reads those), so the test does not hinge on a coupling's phase."""
    assert zero_noise_fit.collapsed_classes_.size == 0
    X, _, labels = moons
    real = bs.grid_posterior

    def swept(*args, **kwargs):
        post = real(*args, **kwargs)
        return post._replace(posterior_mean_labels=np.ones_like(post.posterior_mean_labels))

    monkeypatch.setattr(bs, "grid_posterior", swept)
    clf, caught = _small_fit(X, labels)
    messages = [text for text in caught if "ordered phase" in text]
    assert len(messages) == 1, caught
    assert "class 1 100 %" in messages[0] and "GridSettings(alpha0" in messages[0]
    np.testing.assert_array_equal(clf.collapsed_classes_, [1])


def test_metastable_posterior_chains_are_reported(moons, zero_noise_fit, monkeypatch):
    """Every sampled fit probes its posterior from the one-class states
    (``metastability_``); on the balanced moons the merged states lie above the
    posterior's energies. When the probe
    finds a merged state far below the posterior's draws, a ``MetastableChainsWarning``
    names it at the caller's line (the verdict is forced here, so that the test does not
    hinge on a coupling's phase; ``tests/inference/test_metastability.py`` checks the
    verdict on a model with both macrostates)."""
    from graphssl.inference.mcmc import metastability
    from graphssl.inference.mcmc.statistics import ConvergenceWarning

    report = zero_noise_fit.metastability_
    assert report.probe_energy.shape == (2,) and not report.metastable
    assert report.gap < 0  # the merged states the probes keep lie above the posterior
    X, _, labels = moons
    real = metastability.metastability_report

    def merged(*args, **kwargs):
        found = real(*args, **kwargs)
        return found._replace(stays=np.array([False, True]), probe_share=np.array([0.5, 0.97]),
                              probe_energy=np.array([-10.0, -99.0]), gap=42.0,
                              metastable=True)

    monkeypatch.setattr(metastability, "metastability_report", merged)
    clf = BoltzmannMRFClassifier(model="basic", grid=SETTINGS, n_chains=2, n_samples=60,
                                 burn_in=10, progress=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf.fit(X, labels)
    found = [w for w in caught if issubclass(w.category, metastability.MetastableChainsWarning)]
    assert len(found) == 1, [str(w.message) for w in caught]
    assert issubclass(found[0].category, ConvergenceWarning)
    assert found[0].filename == __file__
    text = str(found[0].message)
    assert "class 1 stays merged" in text and "97 %" in text and "42.0 nats" in text
    assert "replica_exchange" in text and clf.metastability_.metastable


def test_labels_that_choose_no_coupling_are_reported(moons, zero_noise_fit):
    """Labels that contradict the geometry (each moon's three labelled points carry both
    classes) predict no held-out label above chance at any coupling: the fit says so, with
    the scores, and ``grid_.carries_labels`` is False; the consistent labels of the shared
    fit raise no such warning."""
    X, y, labels = moons
    assert zero_noise_fit.grid_.carries_labels
    scrambled = labels.copy()
    for c in (0, 1):
        scrambled[np.flatnonzero(labels == c)[1]] = 1 - c
    clf, caught = _small_fit(X, scrambled)
    messages = [text for text in caught if "better than chance" in text]
    assert not clf.grid_.carries_labels
    assert len(messages) == 1, caught
    assert "grid_.cv" in messages[0] and "HarmonicFunctionClassifier" in messages[0]


def test_class_mass_normalize_rescales_the_same_marginals(moons, zero_noise_fit):
    """``class_mass_normalize=True`` (default): the same chains (same seed) as ``False``,
    the unlabelled marginals scaled column by column to the labelled frequencies (add-one
    smoothed) and renormalised (Zhu et al.'s rule written out); a value that is not a bool
    is refused by name."""
    X, _, labels = moons
    clf = zero_noise_fit  # the default rule
    unscaled, _ = _small_fit(X, labels, class_mass_normalize=False)
    plain = np.asarray(unscaled.label_distributions_, np.float64)
    np.testing.assert_array_equal(clf.posterior_mean_, unscaled.posterior_mean_)
    unlabelled = labels < 0
    frequencies = (np.bincount(labels[~unlabelled], minlength=2) + 1) / (np.sum(~unlabelled) + 2)
    scaled = plain[unlabelled] * frequencies / plain[unlabelled].sum(axis=0)
    expected = plain.copy()
    expected[unlabelled] = scaled / scaled.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(clf.label_distributions_, expected, atol=1e-6)
    np.testing.assert_array_equal(clf.map_labels_, unscaled.map_labels_)
    with pytest.raises(ValueError, match="class_mass_normalize"):
        BoltzmannMRFClassifier(class_mass_normalize="yes").fit(X, labels)


@pytest.mark.parametrize("k", [5, None])  # kNN pairs; dense pairs (the 10 nearest count)
def test_data_scale_prior_mode_gives_a_typical_neighbour_coupling_e_to_minus_half(k):
    X = np.random.default_rng(0).normal(size=(120, 20))
    geo = pair_geometry(X, k)
    A = np.asarray(length_scale_couplings(geo, 0.0, bs.data_scale_log_length_scales(geo)))
    np.testing.assert_allclose(np.median(nearest_pair_values(geo, A)), np.exp(-0.5), rtol=1e-7)


def test_gamma_for_noise_and_folds():
    for C, rho in ((2, 0.01), (10, 0.2)):
        e = np.exp(bs.gamma_for_noise(rho, C))
        np.testing.assert_allclose(np.exp(e) / (C - 1 + np.exp(e)), 1 - rho)
    with pytest.raises(ValueError, match="label_noise"):
        bs.gamma_for_noise(0.6, 2)
    labels = np.array([0, 0, 0, 1, 1, -1, 1, 0, -1])
    folds = bs.cross_validation_folds(labels, 5)
    assert folds.max() == 2  # cut to the smallest class count (3)
    for c in (0, 1):  # stratified: every fold holds a point of each class
        assert set(folds[labels == c]) == {0, 1, 2}
    np.testing.assert_array_equal(folds[labels < 0], -1)


def test_a_singleton_class_label_is_never_held_out():
    # class 2 has one label: held out, no node would carry class 2 and its (CV) term could
    # only favour couplings that carry nothing; it stays observed in every fold, unscored
    labels = np.array([0, 0, 0, 1, 1, -1, 1, 0, -1, 2])
    folds = bs.cross_validation_folds(labels, 5)
    assert folds[9] == -1 and folds.max() == 2  # K cut to the smallest other class (3)
    for c in (0, 1):
        assert set(folds[labels == c]) == {0, 1, 2}
    np.testing.assert_array_equal(bs.cross_validation_folds(np.array([0, -1, 1, 2]), 5), -1)


def test_every_class_a_singleton_takes_the_priors_coupling():
    X = np.array([[0.0, 0.0], [0.3, 0.0], [0.6, 0.1], [2.0, 0.0], [2.3, 0.1], [2.6, 0.0]])
    labels = np.array([0, -1, -1, 1, -1, -1])
    geo = pair_geometry(X)
    template = bl.BoltzmannProblem(geo, labels, 2, "basic").template()
    result = bs.select_coupling(geo, template, jax.random.key(0), gamma=bs.gamma_for_noise(
        0.01, 2), clamp=True, settings=SETTINGS)
    assert result.terms.shape[-1] == 0 and np.all(np.isnan(result.cv))
    assert not result.carries_labels
    # the whole path is searched (no (CV) to stop it), and the prior's mode is taken
    evaluated = ~np.isnan(result.strength)
    assert evaluated[0].sum() > SETTINGS.patience + 1
    log_prior = -0.5 * ((np.array(SETTINGS.log_scale_offsets)[:, None]) ** 2
                        + (np.array(SETTINGS.alpha0)[None, :] / 3.0) ** 2)
    o, g = bs.prior_choice(log_prior, result.strength, result.ordered)
    assert (result.log_scale_offset, result.alpha0) == (SETTINGS.log_scale_offsets[o],
                                                         SETTINGS.alpha0[g])
    # short of the ordered phase (here alpha_0 = 0 at the mode's length scale sweeps one
    # class over this 6-node graph), and no such point has a higher prior density
    unordered = evaluated & ~result.ordered
    assert unordered[o, g] and log_prior[o, g] == log_prior[unordered].max()


def test_estimator_says_when_every_class_has_a_single_label(moons):
    X, y, _ = moons
    one_each = np.full(60, -1)
    one_each[[np.flatnonzero(y == c)[0] for c in (0, 1)]] = (0, 1)
    clf, messages = _small_fit(X, one_each)
    assert clf.grid_.terms.shape[-1] == 0
    assert any("every class has a single label" in m for m in messages)


def _tiny_model(hard):
    X = np.array([[0.0, 0.0], [0.3, 0.0], [0.6, 0.1], [2.0, 0.0], [2.3, 0.1], [2.6, 0.0]])
    labels = np.array([0, -1, -1, 1, -1, -1])
    geo = pair_geometry(X)
    problem = bl.BoltzmannProblem(geo, labels, 2, "basic" if hard else "extended")
    template = problem.template()
    theta = ExtendedParams(jnp.asarray(1.5), jnp.zeros(2), jnp.zeros(2), jnp.asarray(0.3))
    return bs.grid_model(template, geo, theta, hard), labels


@pytest.mark.parametrize("hard", [False, True])
def test_merge_gain_is_the_energy_change_of_the_best_merge(hard):
    """Frozen draws (no entropy): the reported gain equals the smallest energy change over
    every free merge (and, with soft evidence, full merge) of a class region holding an
    observation, computed by the model's own energy."""
    model, labels = _tiny_model(hard)
    y = np.array([0, 0, 0, 1, 1, 1])
    draws = jnp.asarray(np.tile(y, (3, 1)), jnp.int32)
    rows = jnp.asarray(np.flatnonzero(labels >= 0), jnp.int32)
    obs = jnp.asarray(labels[labels >= 0], jnp.int32)
    evidence = float(model.evidence_strength) if not hard else 1.0
    merge = jax.jit(criteria.merge_gain, static_argnames="hard")
    gain = float(merge(model, draws, rows, obs, evidence, hard=hard, entropy_draws=draws))
    energies = jax.jit(jax.vmap(lambda z: model.energy(z)))
    free = labels < 0
    merged = []
    for a, b in itertools.permutations(range(2)):
        region = y == a
        merged.append(np.where(region & free, b, y))  # free merge
        if not hard:
            merged.append(np.where(region, b, y))  # full merge
    e = np.asarray(energies(jnp.asarray(np.stack([y, *merged]), jnp.int32)))
    np.testing.assert_allclose(gain, (e[1:] - e[0]).min(), rtol=1e-9, atol=1e-9)


def test_held_out_term_is_the_noise_channel_of_the_conditional():
    """Against the model's own energy: ``P(y_i = c | rest) ∝ exp(-energy(y with y_i = c))``,
    averaged over the draws, then ``P(o | y)`` of Eq. (40)."""
    model, _ = _tiny_model(False)
    draws = np.array([[0, 1, 0, 1, 1, 0], [1, 0, 0, 1, 0, 1]])
    rows, obs = np.array([0, 3]), np.array([0, 1])
    free = dataclasses.replace(model, noisy_observed=jnp.zeros(6, bool)).with_parameters()
    E = 2.0
    terms = np.asarray(jax.jit(criteria.held_out_log_prob)(
        free, jnp.asarray(draws, jnp.int32), jnp.asarray(rows, jnp.int32),
        jnp.asarray(obs, jnp.int32), E))
    variants = np.array([np.where(np.arange(6) == i, c, y) for i in rows for y in draws
                         for c in (0, 1)])
    energy = np.asarray(jax.jit(jax.vmap(free.energy))(jnp.asarray(variants, jnp.int32)))
    energy = energy.reshape(len(rows), len(draws), 2)
    p = np.exp(-energy) / np.exp(-energy).sum(-1, keepdims=True)  # [row, draw, class]
    p_obs = p[np.arange(len(rows)), :, obs].mean(-1)
    want = np.log((p_obs * np.exp(E) + 1 - p_obs) / (1 + np.exp(E)))
    np.testing.assert_allclose(terms, want, rtol=1e-9)


def test_no_nan_or_overflow_at_extreme_length_scales_and_couplings(moons):
    X, _, labels = moons
    geo = pair_geometry(X, 10)
    template = bl.BoltzmannProblem(geo, labels, 2, "basic").template()
    settings = SETTINGS._replace(alpha0=(-30.0, 0.0, 45.0, 400.0), log_scale_offsets=(-60.0, 60.0),
                                 patience=9)  # chains as in the fixture: its compiled step
    g = bs.select_coupling(geo, template, jax.random.key(0), gamma=bs.gamma_for_noise(0.01, 2),
                           clamp=True, settings=settings)
    assert np.all(np.isfinite(g.cv[:, 0]))  # the weakest point is evaluated on both paths
    evaluated = ~np.isnan(g.merge_gain)
    assert np.all(np.isfinite(g.strength[np.isfinite(g.cv)]))
    assert not np.any(np.isnan(g.merge_gain[evaluated]))
    A = length_scale_couplings(geo, 400.0, jnp.full(2, -60.0))
    assert np.all(np.isfinite(np.asarray(A))) and float(jnp.sum(A)) < np.inf


def test_estimator_options_are_checked(moons):
    X, _, labels = moons
    with pytest.raises(ValueError, match="learning"):
        BoltzmannMRFClassifier(learning="nope").fit(X, labels)
    with pytest.raises(ValueError, match="label_noise"):
        BoltzmannMRFClassifier(label_noise=0.9).fit(X, labels)
    with pytest.raises(ValueError, match="grid"):
        BoltzmannMRFClassifier(grid=[0, 1]).fit(X, labels)  # a dict is taken
    with pytest.raises(ValueError, match="progress"):
        BoltzmannMRFClassifier(progress="yes").fit(X, labels)


def test_one_standard_error_rule_refuses_a_coupling_that_scores_as_chance():
    """Digit1 with 10 labels: the weakest coupling's held-out score was chance's (-0.695 vs
    ln(1/2)), within one standard error of the best (-0.55), and the prior preferred it."""
    from graphssl.inference.boltzmann.selection import _one_standard_error_choice

    rng = np.random.default_rng(0)
    chance = np.log(0.5)
    noise = rng.normal(0.0, 0.05, 10)
    weak = chance - 0.002 + noise - noise.mean()  # carries no label
    strong = -0.55 + 0.6 * np.array([1.0, -1.0] * 5)  # better, but noisy over 10 labels
    terms = np.stack([weak, strong])[None]  # [offsets 1, grid 2, labelled 10]
    log_prior = np.array([[0.0, -1.0]])  # the prior prefers the weak coupling
    strength = np.array([[1.0, 2.0]])
    diff = weak - strong
    assert diff.mean() >= -diff.std(ddof=1) / np.sqrt(10)  # within one SE of the best
    assert _one_standard_error_choice(terms, log_prior, strength) == (0, 0)  # no floor
    assert _one_standard_error_choice(terms, log_prior, strength, chance=chance) == (0, 1)
    # a weak coupling that does carry the labels is still preferred by the prior
    carried = -0.60 + rng.normal(0.0, 0.05, 10)
    terms = np.stack([carried, strong])[None]
    assert _one_standard_error_choice(terms, log_prior, strength, chance=chance) == (0, 0)


def test_choose_grid_point_rules():
    """Three points that the labelled points cannot tell apart (within one SE of the best),
    all above chance: "prior" takes the prior's favourite, "weakest" the weakest coupling,
    "strongest" the strongest, "best" the largest mean; a NaN point (a stopped path) is
    never chosen."""
    from graphssl.inference.boltzmann.selection import choose_grid_point

    rng = np.random.default_rng(1)
    spread = rng.normal(0.0, 0.3, 10)
    terms = np.stack([-0.30 + spread, -0.28 + spread, -0.29 + spread,
                      np.full(10, np.nan)])[None]
    jitter = rng.normal(0.0, 0.1, (3, 10))
    terms[0, :3] += jitter - jitter.mean(axis=1, keepdims=True)  # means stay -0.30/-0.28/-0.29
    log_prior = np.array([[-2.0, -1.0, 0.0, 1.0]])  # prefers the third (and the NaN one)
    strength = np.array([[1.0, 2.0, 3.0, 4.0]])
    assert choose_grid_point(terms, log_prior, strength, n_classes=2) == (0, 2)
    assert choose_grid_point(terms, log_prior, strength, n_classes=2, choice="weakest") == (0, 0)
    assert choose_grid_point(terms, log_prior, strength, n_classes=2, choice="best") == (0, 1)
    log_prior = np.array([[0.0, -1.0, -2.0, 1.0]])  # now prefers the weakest: "strongest"
    assert choose_grid_point(terms, log_prior, strength, n_classes=2, choice="strongest") == (
        0, 2)  # ignores it
    assert choose_grid_point(terms, log_prior, strength, n_classes=2, choice="strongest",
                             ordered=np.array([[False, False, True, False]])) == (0, 1)
    log_prior = np.array([[-2.0, -1.0, 0.0, 1.0]])
    with pytest.raises(ValueError, match="choice"):
        choose_grid_point(terms, log_prior, strength, n_classes=2, choice="max")
    # the ordered phase: among the points the rule keeps, unflagged ones come first (then the
    # prior); a flagged point is still chosen when every point the rule keeps is flagged
    flagged = np.array([[False, False, True, False]])
    assert choose_grid_point(terms, log_prior, strength, n_classes=2, ordered=flagged) == (0, 1)
    flagged = np.array([[True, True, True, False]])
    assert choose_grid_point(terms, log_prior, strength, n_classes=2, ordered=flagged) == (0, 2)
    flagged = np.array([[False, True, True, False]])
    assert choose_grid_point(terms, log_prior, strength, n_classes=2, ordered=flagged) == (0, 0)
    assert choose_grid_point(terms, log_prior, strength, n_classes=2, choice="weakest",
                             ordered=np.array([[True, False, False, False]])) == (0, 1)


def test_plausible_share_limits_are_the_beta_posterior_quantile():
    """Each class's limit is the ``1 - alpha / q`` quantile of ``Beta(n_c + 1, L - n_c + 1)``:
    checked against a Monte-Carlo quantile of that law; with 10 labels of each of two classes
    a 63 % share is plausible and a 91 % share is not (breast_cancer, 10 labels a class)."""
    from graphssl.inference.ordered_phase import plausible_share_limits

    labels = np.array([0] * 10 + [1] * 10 + [-1] * 50)
    limits = plausible_share_limits(labels, 2)
    draws = np.random.default_rng(0).beta(11, 11, 2_000_000)
    np.testing.assert_allclose(limits, np.quantile(draws, 1 - 1e-3 / 2), atol=2e-3)
    assert limits[0] > 0.63 and limits[0] < 0.91
    skewed = plausible_share_limits(np.array([0] * 18 + [1] * 2 + [2] * 0 + [-1] * 5), 3)
    assert skewed[0] > skewed[1] > skewed[2] > 0


def test_grid_given_as_a_dict_overrides_those_fields():
    """``grid={"choice": "strongest"}`` is the default settings with that field changed;
    an unknown field or another type is refused by name before any work."""
    settings = BoltzmannMRFClassifier(grid={"choice": "strongest", "n_folds": 3})._grid_settings()
    assert settings == bs.GridSettings(choice="strongest", n_folds=3)
    assert BoltzmannMRFClassifier()._grid_settings() == bs.GridSettings()
    X = np.random.default_rng(0).normal(size=(30, 2))
    y = np.r_[np.zeros(3, int), np.ones(3, int), np.full(24, -1)]
    with pytest.raises(ValueError, match=r"grid: unknown field\(s\) \['folds'\]"):
        BoltzmannMRFClassifier(grid={"folds": 3}).fit(X, y)
    with pytest.raises(ValueError, match="grid: give"):
        BoltzmannMRFClassifier(grid=(0.0, 1.0)).fit(X, y)


def test_class_mass_normalize_counts_matches_the_labelled_counts(moons, zero_noise_fit):
    """``class_mass_normalize="counts"``: the same chains, the unlabelled nodes a label
    reaches split between the classes as the add-one smoothed labelled counts say (3 : 3
    here, so 27 : 27 of the 54), by the marginals' ranking; another string is refused."""
    X, _, labels = moons
    clf, _ = _small_fit(X, labels, class_mass_normalize="counts")
    np.testing.assert_array_equal(clf.posterior_mean_, zero_noise_fit.posterior_mean_)
    unlabelled = labels < 0
    assert np.bincount(clf.transduction_[unlabelled], minlength=2).tolist() == [27, 27]
    ratio = np.log(clf.posterior_mean_[unlabelled, 1] / clf.posterior_mean_[unlabelled, 0])
    ones = clf.transduction_[unlabelled] == 1
    assert ratio[ones].min() >= ratio[~ones].max()
    with pytest.raises(ValueError, match="class_mass_normalize"):
        BoltzmannMRFClassifier(class_mass_normalize="masses").fit(X, labels)


@pytest.mark.parametrize("estimator", ["BoltzmannMRFClassifier", "HarmonicFunctionClassifier"])
def test_auto_rule_matches_counts_only_where_masses_give_an_implausible_labelling(estimator):
    """``class_mass_normalize="auto"`` (default of both estimators; the base class's
    ``_class_mass_decision``): the masses rule, unless its labelling gives
    a class a share of the reached unlabelled nodes that the labelled counts make
    implausible; then the counts rule. Near-uniform marginals (0.5 +- 0.01) with labels
    4 : 2 (target 5/8 : 3/8) all go to class 0 by masses: counts take over (25 : 15 of 40,
    the ranking kept); confident marginals keep the masses."""
    import scipy.sparse as sp

    from graphssl.graph import Graph

    n = 46
    ring = sp.coo_matrix((np.ones(n), (np.arange(n), (np.arange(n) + 1) % n)), shape=(n, n))
    graph = Graph.from_scipy((ring + ring.T).tocsr())
    labels = np.full(n, -1)
    labels[:6] = [0, 0, 0, 0, 1, 1]
    rng = np.random.default_rng(0)
    lean = 0.5 + rng.uniform(-0.01, 0.01, n)
    flat = np.column_stack([lean, 1 - lean])

    import graphssl.estimators as est

    def decide(rule, marginals):
        clf = getattr(est, estimator)(class_mass_normalize=rule)
        clf._pair_graph = graph  # what a fit sets: the model's pairs as a graph
        return clf, clf._class_mass_decision(marginals, graph, labels)[6:].argmax(1)

    clf, out = decide("auto", flat)
    assert clf.class_mass_match_ == "counts"
    assert np.bincount(out, minlength=2).tolist() == [25, 15]
    assert lean[6:][out == 0].min() > lean[6:][out == 1].max()
    _, by_masses = decide(True, flat)
    assert np.all(by_masses == 0)
    confident = np.where(rng.random(n)[:, None] < 0.5, [0.9, 0.1], [0.1, 0.9])
    clf, out = decide("auto", confident)
    assert clf.class_mass_match_ == "masses"


def test_harmonic_mixture_auto_decision_falls_back_to_counts():
    """``HarmonicMixtureClassifier(decision="auto")`` (default): near-uniform scores with
    labels 4 : 2 keep the masses' factors only while their labelling is plausible; here it
    is not (every point to class 0), so ``class_scale_`` gives the counts 25 : 15."""
    from graphssl.estimators import HarmonicMixtureClassifier

    labels = np.full(46, -1)
    labels[:6] = [0, 0, 0, 0, 1, 1]
    lean = 0.5 + np.random.default_rng(0).uniform(-0.01, 0.01, 46)
    dist = np.column_stack([lean, 1 - lean])
    auto = HarmonicMixtureClassifier()
    auto._set_class_scale(dist, labels, 2)
    assert auto.class_mass_match_ == "counts"
    assert np.bincount(auto._decision(dist[6:]), minlength=2).tolist() == [25, 15]
    cmn = HarmonicMixtureClassifier(decision="cmn")
    cmn._set_class_scale(dist, labels, 2)
    assert cmn.class_mass_match_ == "masses" and np.all(cmn._decision(dist[6:]) == 0)


def test_averaged_points_are_those_that_carry_labels_and_are_not_ordered():
    """The averaged set: (CV) above chance by more than a standard error and not ordered;
    then, if none, every point that carries labels; then the chosen point alone. A point
    whose mean is above chance but within its standard error does not carry labels."""
    chance = -np.log(2.0)
    wiggle = np.array([-0.01, 0.01, -0.02, 0.02, 0.0, 0.0])
    terms = np.full((2, 3, 6), np.nan)
    terms[0, 0] = chance + 0.3 + wiggle  # carries
    terms[0, 1] = chance + 0.4 + wiggle  # carries, ordered
    terms[0, 2] = chance - 0.1 + wiggle  # below chance
    terms[1, 1] = chance + 0.2 + wiggle  # carries
    terms[1, 2] = chance + np.array([2.0, -1.9, 2.0, -1.9, 0.1, 0.0])  # mean above, within se
    ordered = np.zeros((2, 3), bool)
    ordered[0, 1] = True
    mask = bs.averaged_points(terms, ordered, n_classes=2, chosen=(0, 0))
    assert set(map(tuple, np.argwhere(mask))) == {(0, 0), (1, 1)}
    every_carrier_ordered = ordered | np.array([[True, False, False], [False, True, False]])
    mask = bs.averaged_points(terms, every_carrier_ordered, n_classes=2, chosen=(0, 0))
    assert set(map(tuple, np.argwhere(mask))) == {(0, 0), (0, 1), (1, 1)}
    none_carry = np.where(np.isnan(terms), np.nan, chance - 0.1)
    mask = bs.averaged_points(none_carry, None, n_classes=2, chosen=(1, 2))
    assert set(map(tuple, np.argwhere(mask))) == {(1, 2)}


def test_averaged_weights_are_the_supported_points_pseudo_posterior():
    """``exp(sum (CV) + log prior)`` over the supported points, normalised; 0 elsewhere."""
    terms = np.log(np.array([[[0.6, 0.7], [0.8, 0.9]], [[0.5, 0.5], [np.nan, np.nan]]]))
    log_prior = np.array([[0.0, -1.0], [-0.5, 0.0]])
    supported = np.array([[True, True], [True, False]])
    w = bs.averaged_weights(terms, log_prior, supported)
    raw = np.array([0.6 * 0.7, 0.8 * 0.9 * np.exp(-1.0), 0.25 * np.exp(-0.5)])
    np.testing.assert_allclose(w[supported], raw / raw.sum(), rtol=1e-12)
    assert w[1, 1] == 0.0


def test_draws_per_point_halve_down_to_the_floor():
    assert [bs.draws_per_point(300, k) for k in (1, 2, 3, 4, 5, 9, 30)] == [
        300, 150, 75, 75, 50, 50, 50]
    assert bs.draws_per_point(1000, 3) == 250


def test_averaged_posterior_is_the_weighted_mean_of_the_points_posteriors(
        moons, zero_noise_fit):
    """Two grid points averaged: the result's marginals are the weighted mean of the chosen
    point's chains' marginals and the other point's (its own key and warm start, fewer
    draws), the MAP search runs on the chosen point's model; with the chosen point alone it
    is exactly :func:`grid_posterior`'s result. Equal weights, swapped weights or a
    one-sided average fail it."""
    from graphssl.inference.boltzmann.expectations import ChainSettings

    _, _, labels = moons
    clf = zero_noise_fit
    geometry = clf.pair_geometry_
    template = bl.BoltzmannProblem(geometry, labels, 2, "basic").template()
    result = clf.grid_
    chains = ChainSettings(n_chains=2, n_samples=60, burn_in=10)
    other = result.theta._replace(alpha0=result.theta.alpha0 - 1.0)
    pair = result._replace(averaged_theta=(result.theta, other),
                           averaged_starts=np.stack([result.start_labels] * 2),
                           averaged_chosen=0, averaged_weights=np.array([0.25, 0.75]))
    key = jax.random.key(7)
    post = bs.averaged_grid_posterior(template, geometry, pair, labels, key, hard=True,
                                      chains=chains)
    chosen_model = bs.grid_model(template, geometry, result.theta, True)
    other_model = bs.grid_model(template, geometry, other, True)
    _, own = bs._chain_marginals(chosen_model, key, "swendsen_wang", chains,
                                 result.start_labels)
    share = dataclasses.replace(chains, n_samples=bs.draws_per_point(60, 2))
    _, theirs = bs._chain_marginals(other_model, jax.random.fold_in(key, 2), "swendsen_wang",
                                    share, result.start_labels)
    assert not np.allclose(own, theirs, atol=1e-3)  # the two points differ
    np.testing.assert_allclose(post.marginals, 0.25 * own + 0.75 * theirs, rtol=1e-6,
                               atol=1e-9)
    assert post.model is not None
    np.testing.assert_array_equal(np.asarray(post.model.graph.weights),
                                  np.asarray(chosen_model.graph.weights))
    np.testing.assert_array_equal(post.posterior_mean_labels, post.marginals.argmax(1))
    alone = result._replace(averaged_theta=(result.theta,),
                            averaged_starts=result.start_labels[None], averaged_chosen=0,
                            averaged_weights=np.ones(1))
    single = bs.averaged_grid_posterior(template, geometry, alone, labels, key, hard=True,
                                        chains=chains)
    plain = bs.grid_posterior(chosen_model, labels, key, chains=chains,
                              init_labels=result.start_labels)
    np.testing.assert_array_equal(single.marginals, plain.marginals)
