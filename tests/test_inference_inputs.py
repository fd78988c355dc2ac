"""Input checks and numerical fixes of the model-specific inference (fuzz report 7):
harmonic mixture, Boltzmann likelihood ascent and grid, diffusion-mixture selection,
PSIS-LOO and the ordered-phase check."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import logsumexp

from graphssl.graph import knn_graph
from graphssl.inference import loo, ordered_phase
from graphssl.inference.boltzmann import learning as bl
from graphssl.inference.boltzmann import selection as bs
from graphssl.inference.diffusion_mixture import selection as ds
from graphssl.inference.harmonic_mixture import fit as hm
from graphssl.models.boltzmann import ExtendedParams, pair_geometry
from graphssl.models.diffusion_mixture import DirichletDiffusionMixture


def _blobs(scale=1.0):
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 50)
    X = np.array([[0, 0], [4, 0], [2, 4]], float)[y] + rng.normal(size=(150, 2)) * 0.7
    lab = np.full(150, -1)
    for c in range(3):
        lab[np.flatnonzero(y == c)[:3]] = c
    return X * scale, y, lab


# ----------------------------------------------------------------------------- harmonic mixture


@pytest.mark.parametrize(("perm_seed", "key"), [(7, 0), (1, 2), (2, 3)])
def test_harmonic_mixture_em_stays_finite_in_float32(perm_seed, key):
    """A component collapsing onto two points: in float32 the M-step's scatter rounding
    drove its covariance indefinite (EM objective fell, then NaN; the error blamed the
    backbone Laplacian). The covariance floor keeps EM finite and nearly monotone."""
    X, y, lab = _blobs()
    p = np.random.default_rng(perm_seed).permutation(150)
    with jax.enable_x64(False):
        fit = hm.fit_harmonic_mixture(X[p], lab[p], knn_graph(X[p], 10), n_components=9,
                                      key=jax.random.key(key), max_iter=50)
        proba = hm.predict_proba(fit, X[p])
    assert np.all(np.isfinite(proba))
    assert (proba.argmax(1) == y[p]).mean() > 0.95
    obj = np.asarray(fit.em_info.objective, np.float64)
    obj = obj[np.isfinite(obj)]
    assert np.diff(obj).min() > -1e-3 * np.abs(obj).max()


def test_harmonic_mixture_tiny_feature_scale_matches_unit_scale():
    X, y, lab = _blobs()
    for scale in (1.0, 1e-6):
        fit = hm.fit_harmonic_mixture(X * scale, lab, knn_graph(X * scale, 10), n_components=9,
                                      key=jax.random.key(0), max_iter=50)
        assert (hm.predict_proba(fit, X * scale).argmax(1) == y).mean() > 0.95


def test_harmonic_mixture_warns_when_reg_covar_swamps_the_features():
    X, _, lab = _blobs(1e-6)
    with pytest.warns(UserWarning, match="em_options: reg_covar"):
        hm.fit_harmonic_mixture(X, lab, knn_graph(X, 10), n_components=3,
                                key=jax.random.key(0), max_iter=5,
                                em_options=hm.EMOptions(reg_covar=1e-6))


@pytest.mark.parametrize("n_graph", [100, 190])
def test_harmonic_mixture_graph_of_another_size_is_refused(n_graph):
    X, _, lab = _blobs()
    Z = np.random.default_rng(1).normal(size=(n_graph, 2))
    with pytest.raises(ValueError, match=rf"graph: has {n_graph} nodes but X has 150"):
        hm.fit_harmonic_mixture(X, lab, knn_graph(Z, 5), n_components=3,
                                key=jax.random.key(0), max_iter=5)


@pytest.mark.parametrize(("kwargs", "labels", "pattern"), [
    ({"n_classes": 2}, None, "n_classes: 2 is fewer"),
    ({}, np.full(150, -1), "labels: no labelled point"),
    ({"n_components": 0}, None, "n_components"),
])
def test_harmonic_mixture_bad_arguments_are_named(kwargs, labels, pattern):
    X, _, lab = _blobs()
    options = {"n_components": 3, **kwargs}
    with pytest.raises(ValueError, match=pattern):
        hm.fit_harmonic_mixture(X, lab if labels is None else labels, knn_graph(X, 10),
                                key=jax.random.key(0), max_iter=5, **options)


def test_harmonic_helpers_refuse_bad_input():
    from graphssl.graph import dense_graph

    X, _, lab = _blobs()
    with pytest.raises(ValueError, match="sigma"):
        hm.sample_baseline(X, lab, 20, sigma=0.0,
                           graph_builder=lambda Z: dense_graph(Z, sigma=1.0), key=0)
    with pytest.raises(ValueError, match="f: median thresholding is binary"):
        hm.median_threshold(np.full((5, 3), 1 / 3))
    with pytest.raises(ValueError, match="F: finite scores"):
        hm.class_mass_normalize(np.array([[np.nan, np.nan], [0.3, 0.7]]), [0.5, 0.5])
    labels, t = hm.median_threshold(np.array([[0.9, 0.1], [0.2, 0.8], [0.4, 0.6]]))
    assert labels.tolist() == [0, 1, 0] and t == pytest.approx(0.6)
    assert hm.class_mass_normalize(np.array([[0.6, 0.4], [0.3, 0.7]]), [0.5, 0.5]).tolist() \
        == [0, 1]


# ----------------------------------------------------------------------------- Boltzmann


def _boltzmann_problem(kind="extended"):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(7, 2))
    labels = np.full(7, -1)
    labels[[0, 4]] = [0, 1]
    return X, labels, bl.BoltzmannProblem(pair_geometry(X), labels, 2, kind)


def test_boltzmann_ascent_refuses_a_non_finite_start():
    _, _, prob = _boltzmann_problem()
    start = bl.data_scale_params(prob)
    nan_start = start._replace(alpha0=jnp.asarray(np.nan))
    with pytest.raises(ValueError, match="theta0: the objective at the start is nan"):
        bl.fit(prob, nan_start, max_iter=5)
    import optax

    with pytest.raises(ValueError, match="theta0"):
        bl.fit(prob, nan_start, optimizer=optax.adam(0.1), max_iter=5)
    with pytest.raises(ValueError, match="gamma_std"):
        bl.ThetaPrior(gamma_std=0.0)


@pytest.mark.parametrize("step", [0.0, -0.1, np.nan])
def test_boltzmann_ascent_step_must_be_positive(step):
    _, _, prob = _boltzmann_problem()
    with pytest.raises(ValueError, match="step"):
        bl.fit(prob, bl.data_scale_params(prob), max_iter=5, step=step)


def test_boltzmann_ascent_max_iter_zero_and_restarts():
    import optax

    _, _, prob = _boltzmann_problem()
    start = bl.data_scale_params(prob)
    for options in ({}, {"optimizer": optax.adam(0.1)}):
        theta, info = bl.fit(prob, start, max_iter=0, **options)
        assert info["iterations"] == 0 and not info["converged"]
        assert np.isfinite(info["objective"])
    with pytest.raises(ValueError, match="n_restarts"):
        bl.random_restarts(prob, jax.random.key(0), 0)
    theta, info = bl.fit(prob, start, max_iter=20)
    assert np.isfinite(info["objective"]) and info["iterations"] == 20


def test_boltzmann_initial_params_on_identical_points():
    prob = bl.BoltzmannProblem(pair_geometry(np.zeros((4, 2))), np.array([0, -1, 1, -1]), 2,
                               "basic")
    assert np.isfinite(float(bl.sample_initial_params(prob, jax.random.key(0)).log_sigma))


def test_exact_log_likelihood_is_stable_at_large_gamma_in_float32():
    X, labels, _ = _boltzmann_problem()

    def brute(g, C=2):
        d = ((X[:, None] - X[None]) ** 2).sum(-1)
        A = np.exp(-d)
        np.fill_diagonal(A, 0)
        Y = np.array(list(itertools.product(range(C), repeat=7)))
        F = 0.5 * ((Y[:, :, None] == Y[:, None, :]) * A).sum((1, 2))
        E = np.exp(g)
        lnorm = E + np.log1p((C - 1) * np.exp(-E))
        L = labels >= 0
        lp = np.where((Y == labels)[:, L], E - lnorm, -lnorm).sum(1)
        return logsumexp(F + lp) - logsumexp(F)

    with jax.enable_x64(False):
        prob = bl.BoltzmannProblem(pair_geometry(X), labels, 2, "extended")
        for g in (2.0, 15.0, 30.0, 100.0):
            th = ExtendedParams(jnp.asarray(0.0), jnp.zeros(2), jnp.zeros(2), jnp.asarray(g))
            value = float(bl.exact_log_likelihood(prob, th)[0])
            assert value == pytest.approx(brute(g), rel=1e-5)


@pytest.mark.parametrize(("field", "value"), [
    ("tol", np.nan), ("alpha0", (0.0, np.nan)), ("n_samples", 0), ("n_chains", 0),
    ("scale_prior_std", 0.0), ("log_scale_offsets", ()),
])
def test_grid_settings_are_checked(field, value):
    with pytest.raises(ValueError, match=f"settings.{field}"):
        bs.check_grid_settings(bs.GridSettings()._replace(**{field: value}))
    _, _, prob = _boltzmann_problem()
    with pytest.raises(ValueError, match=f"settings.{field}"):
        bs.select_coupling(prob.geometry, prob.template(), jax.random.key(0), gamma=1.0,
                           settings=bs.GridSettings()._replace(**{field: value}))


def test_grid_settings_defaults_pass():
    assert bs.check_grid_settings(bs.GridSettings()) == bs.GridSettings()


# ----------------------------------------------------------------------------- diffusion mixture


def _mixture_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    X[:20] += 3
    lab = np.full(40, -1)
    lab[[0, 1, 2, 20, 21, 22]] = [0, 0, 0, 1, 1, 1]
    return X, lab


@pytest.mark.parametrize("candidates", [(np.inf,), 0.8, (), (-1.0,)])
def test_select_gamma_candidates_are_checked(candidates):
    X, lab = _mixture_data()
    model = DirichletDiffusionMixture.create(knn_graph(X, 5), lab, 2, tau=2.0)
    with pytest.raises(ValueError, match="candidates"):
        ds.select_gamma(model, jax.random.key(0), candidates=candidates, n_iterations=20,
                        burn_in=5)


@pytest.mark.parametrize("prior", [[-1.0, 1.0], [0.0, 1.0], [np.nan, 1.0], [1.0, 1.0, 1.0]])
def test_parzen_class_prior_is_checked(prior):
    X, lab = _mixture_data()
    with pytest.raises(ValueError, match="class_prior"):
        ds.select_k_tau(X, lab, k_grid=(5,), tau_grid=(1.0,), class_prior=prior)
    with pytest.raises(ValueError, match="class_prior"):
        ds.parzen_loo_error(np.full((40, 40), 1 / 40), lab, prior)
    best, scores = ds.select_k_tau(X, lab, k_grid=(5,), tau_grid=(1.0,), class_prior=[0.5, 0.5])
    assert scores[0].parzen_loo_error == 0.0


def test_grid_fit_choose_never_picks_nan():
    scores = [ds.GridScore(5, 1.0, np.nan), ds.GridScore(5, 2.0, 0.3),
              ds.GridScore(5, 3.0, 0.1)]
    assert _choose(scores) == 2
    with pytest.raises(ValueError, match="NaN"):
        _choose([ds.GridScore(5, 1.0, np.nan)])


def _choose(scores):
    return ds.GridFit(scores, None, None).choose("parzen")


# ----------------------------------------------------------------------------- PSIS-LOO


def test_psis_loo_minus_inf_draw_gives_minus_inf_elpd():
    ll = np.random.default_rng(0).normal(-0.5, 0.2, size=(2, 50, 4))
    bad = ll.copy()
    bad[0, 0, 0] = -np.inf
    with pytest.warns(loo.ParetoKWarning):
        ok = loo.psis_loo(ll)
    result = loo.psis_loo(bad, warn=False)
    assert result.elpd == -np.inf
    elpd_i = np.asarray(result.elpd_i)
    assert elpd_i[0] == -np.inf
    np.testing.assert_allclose(elpd_i[1:], np.asarray(ok.elpd_i)[1:])


def test_psis_loo_refuses_nan_and_loo_tree_checks_nodes():
    ll = np.random.default_rng(0).normal(-0.5, 0.2, size=(2, 50, 4))
    ll[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        loo.psis_loo(ll)
    with pytest.raises(ValueError, match="nodes: one name per labelled node, 4"):
        loo.loo_tree(np.zeros((2, 50, 4)), nodes=[10, 20])


# ----------------------------------------------------------------------------- ordered phase


def test_ordered_phase_checks():
    lab = np.array([0, 0, 1, -1, -1, -1, -1, -1])
    for alpha in (5.0, np.nan, 0.0):
        with pytest.raises(ValueError, match="alpha"):
            ordered_phase.plausible_share_limits(lab, 2, alpha)
    with pytest.raises(ValueError, match="predicted"):
        ordered_phase.collapsed_classes(np.array([0, 0, 1, -1, 0, 0, 0, 0]), lab, 2)
    with pytest.raises(ValueError, match="predicted"):
        ordered_phase.collapsed_classes(np.array([0, 0, 1, 5, 0, 0, 0, 0]), lab, 2)
    assert ordered_phase.collapsed_classes(np.zeros(8, int), lab, 2).tolist() == [0]


def test_mixture_sampler_refuses_fractional_moves_and_init_labels():
    """``moves=(1.5, 1)`` ran one resample attempt and ``init_labels=0.7`` started every
    chain at class 0, both by silent truncation."""
    from graphssl.graph import Graph
    from graphssl.inference.diffusion_mixture.kernels import move_counts
    from graphssl.inference.diffusion_mixture.sampler import sample_mixture

    W = np.zeros((6, 6))
    for i, j in [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0), (0, 3)]:
        W[i, j] = W[j, i] = 1.0
    model = DirichletDiffusionMixture.create(Graph.from_scipy(W), np.array([0, -1, -1, 2, -1, -1]),
                                             3, tau=2.0, gamma=0.5)
    key = jax.random.key(0)
    with pytest.raises(ValueError, match=r"^moves: give 2 to 7 non-negative whole"):
        sample_mixture(model, key, n_chains=2, n_iterations=4, burn_in=1, moves=(1.5, 1))
    with pytest.raises(ValueError, match=r"^init_labels: whole class codes in 0..2"):
        sample_mixture(model, key, n_chains=2, n_iterations=4, burn_in=1,
                       init_labels=np.full(6, 0.7))
    assert move_counts((True, 2.0, 0)) == (1, 2, 0, 0, 0, 0, 0)
