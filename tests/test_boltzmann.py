"""Boltzmann-machine MRF of Zhu & Ghahramani (2002): reductions, gradients, samplers, learning.

Monte-Carlo tolerances: sampled gradients are compared with the exact (enumerated) gradient
within ``5 * SE + 0.01`` per component, the standard error taken from the spread of the
per-chain estimates over 8 independent chains (which accounts for autocorrelation).
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from graphssl import data
from graphssl.inference.boltzmann import learning as bl
from graphssl.inference.exact.enumeration import exact_log_partition, exact_map, exact_marginals
from graphssl.models.boltzmann import (
    ExtendedParams,
    clamped_gamma_moment,
    doubled_energy,
    extended_boltzmann,
    f_potential,
    g_potential,
    log_evidence_normaliser,
    pair_geometry,
    unclamped_gamma_moment,
)


def theta_of(alpha0, alphas, betas, gamma):
    return ExtendedParams(
        jnp.asarray(alpha0, float),
        jnp.asarray(alphas, float),
        jnp.asarray(betas, float),
        jnp.asarray(gamma, float),
    )


def paper_arcs(bridge=False):
    """The shared double arcs with the lower arc 1.0 (not 0.6) below the upper one, scaled
    by 2.5: the geometry on which the paper's Table 1 parameters give Table 1 (RMS 0.01)."""
    X = data.double_arcs().X.copy()
    X[8:, 1] -= 0.4
    X *= 2.5
    labels = np.full(16, -1)
    labels[[0, 15]] = [0, 1]
    if bridge:
        X = np.vstack([X, 0.5 * (X[0] + X[8])])
        labels = np.append(labels, -1)
    return X, labels


@pytest.fixture(scope="module")
def ten():
    """A 10-node extended problem with 3 noisy labels, its Theta and exact moments."""
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(10, 2))
    X[:5, 0] -= 0.6
    labels = np.full(10, -1)
    labels[[0, 3, 9]] = [0, 0, 1]
    problem = bl.BoltzmannProblem(pair_geometry(X), labels, 2, "extended")
    theta = theta_of(0.3, [-1.5, -0.5], [0.2, -0.1], 0.8)
    loglik, mc, mu = bl.exact_log_likelihood(problem, theta)
    grad = bl.gradient(theta, problem.template(), problem.geometry, mc, mu)
    return problem, theta, loglik, ravel_pytree(grad)[0]


# --------------------------------------------------------------------------- reductions
def test_f_g_reductions_equal_brute_force_marginalisation_over_o():
    n, C = 4, 3
    X = np.array([[0.0, 0.0], [0.3, 0.1], [1.0, 0.9], [1.2, 1.0]])
    labels = np.array([0, -1, 2, -1])
    theta = theta_of(0.4, [-1.0, 0.2], [0.3, -0.2, 0.1], 0.5)
    model = extended_boltzmann(pair_geometry(X), theta, labels)
    configs = jnp.asarray(list(itertools.product(range(C), repeat=n)), jnp.int32)

    @jax.jit
    def potentials(model):
        H = jax.vmap(lambda o: jax.vmap(lambda y: -doubled_energy(model, o, y))(configs))(configs)
        F = jax.vmap(lambda y: f_potential(model, y))(configs)
        return H, F, jax.vmap(lambda y: g_potential(model, y))(configs)

    H, F, G = (np.asarray(v) for v in potentials(model))  # H[o, y]
    norm = float(log_evidence_normaliser(theta.gamma, C))
    lse = jax.scipy.special.logsumexp
    # Eqs. 48-52: sum over all O of exp(H) = exp(F) (C - 1 + e^{e^gamma})^n
    np.testing.assert_allclose(lse(H, axis=0), F + n * norm, rtol=1e-12)
    # Eqs. 65-66: O_L fixed, sum over O_U of exp(H) = exp(G) (C - 1 + e^{e^gamma})^u
    fixed = np.all(np.asarray(configs)[:, [0, 2]] == [0, 2], axis=1)
    np.testing.assert_allclose(lse(H[fixed], axis=0), G + 2 * norm, rtol=1e-12)
    # Eq. 82 against the brute-force likelihood of O_L
    brute = lse(H[fixed]) - lse(H)
    problem = bl.BoltzmannProblem(pair_geometry(X), labels, C, "extended")
    loglik, mc, mu = bl.exact_log_likelihood(problem, theta)
    np.testing.assert_allclose(loglik, brute, rtol=1e-12)
    # Eqs. 64 and 73: expected d/dgamma of the doubled field in both phases
    match = np.asarray((configs[:, None, :] == configs[None, :, :]).sum(-1))  # [o, y]
    e = np.exp(float(theta.gamma))
    w_u = np.exp(H - lse(H))
    np.testing.assert_allclose((w_u * match * e).sum(), unclamped_gamma_moment(theta.gamma, n, C))
    w_c = np.exp(H[fixed] - lse(H[fixed]))
    matches_l = float(mc.node_marginals[0, 0] + mc.node_marginals[2, 2])
    np.testing.assert_allclose(
        (w_c * match[fixed] * e).sum(), clamped_gamma_moment(theta.gamma, matches_l, 2, C)
    )


# --------------------------------------------------------------------------- enumeration
def test_enumeration_matches_generic_enumerator(ten):
    problem, theta, *_ = ten
    clamped, unclamped, _ = bl.models(problem.template(), problem.geometry, theta)
    basic = bl.BoltzmannProblem(problem.geometry, problem.labels, 2, "basic")
    hard, _, _ = bl.models(basic.template(), basic.geometry, bl.BasicParams(jnp.log(0.4)))
    for model in (clamped, unclamped, hard):
        m = bl.enumerate_moments(model)
        np.testing.assert_allclose(m.log_z, exact_log_partition(model), rtol=1e-12)
        np.testing.assert_allclose(m.node_marginals, exact_marginals(model), atol=1e-12)
        np.testing.assert_array_equal(m.mode, exact_map(model)[0])


def test_exact_gradient_equals_autodiff_and_eqs_41_44(ten):
    problem, theta, loglik, grad = ten
    template = problem.template()

    def loglik_fn(th):
        c, u, off = bl.models(template, problem.geometry, th)
        return exact_log_partition(c) - exact_log_partition(u) + off

    np.testing.assert_allclose(loglik_fn(theta), loglik, rtol=1e-12)
    np.testing.assert_allclose(ravel_pytree(jax.grad(loglik_fn)(theta))[0], grad, atol=1e-10)
    # Eqs. 41-44 (and 64, 73 for gamma) written out from the enumerated moments
    c, u, _ = bl.models(template, problem.geometry, theta)
    mc, mu = bl.enumerate_moments(c), bl.enumerate_moments(u)
    A = np.asarray(c.graph.weights)
    dm = np.asarray(mc.edge_agreement - mu.edge_agreement)
    sq = np.asarray(problem.geometry.sq_diff)
    g_a0 = 0.5 * np.sum(A * dm)
    g_ad = 0.5 * np.sum(
        A[:, None] * sq * np.exp(-np.asarray(theta.log_length_scales)) * dm[:, None], 0
    )
    g_b = np.asarray(mc.node_marginals.sum(0) - mu.node_marginals.sum(0))
    lab = problem.labels
    obs = np.flatnonzero(lab >= 0)
    matches = float(np.sum(np.asarray(mc.node_marginals)[obs, lab[obs]]))
    g_g = clamped_gamma_moment(theta.gamma, matches, 10 - 3, 2) - unclamped_gamma_moment(
        theta.gamma, 10, 2
    )
    np.testing.assert_allclose(grad, np.r_[g_a0, g_ad, g_b, g_g], atol=1e-10)


# --------------------------------------------------------------------------- samplers
@pytest.mark.parametrize("method", ["gibbs", "gibbs_permutation", "swendsen_wang"])
def test_sampled_gradient_matches_exact(ten, method):
    problem, theta, _, exact = ten
    template = problem.template()
    c, u, _ = bl.models(template, problem.geometry, theta)
    settings = bl.ChainSettings(n_chains=8, n_samples=1500, burn_in=100)
    _, sc = bl.chain_moments(c, jax.random.key(1), method, settings)
    _, su = bl.chain_moments(u, jax.random.key(2), method, settings)
    per_chain = np.stack(
        [
            ravel_pytree(
                bl.gradient(
                    theta,
                    template,
                    problem.geometry,
                    bl.sampled_moments(c, sc.labels[k]),
                    bl.sampled_moments(u, su.labels[k]),
                )
            )[0]
            for k in range(settings.n_chains)
        ]
    )
    est = per_chain.mean(0)
    se = per_chain.std(0, ddof=1) / np.sqrt(settings.n_chains)
    assert np.all(np.abs(est - exact) <= 5 * se + 0.01), (method, est, exact, se)


def test_log_likelihood_estimate_eq27(ten):
    problem, theta, loglik, _ = ten
    c, u, off = bl.models(problem.template(), problem.geometry, theta)
    _, su = bl.chain_moments(
        u,
        jax.random.key(3),
        "swendsen_wang",
        bl.ChainSettings(n_chains=8, n_samples=1500, burn_in=100),
    )
    assert abs(float(bl.log_likelihood_estimate(c, off, su.labels)) - float(loglik)) < 0.05


# --------------------------------------------------------------------------- learning
@pytest.fixture(scope="module")
def two_clusters():
    """Basic model, two 5-point clusters with one label each and the prior of Eq. 83."""
    rng = np.random.default_rng(1)
    X = np.r_[rng.normal(0, 0.25, (5, 2)), rng.normal(0, 0.25, (5, 2)) + [2.0, 0.0]]
    labels = np.full(10, -1)
    labels[[0, 5]] = [0, 1]
    problem = bl.BoltzmannProblem(pair_geometry(X), labels, 2, "basic")
    d_max = float(np.sqrt(np.asarray(problem.geometry.sq_dist).max()))
    prior = bl.ExponentialSigmaPrior(rate=2.0, sigma_max=d_max)
    return problem, prior


def test_sw_learning_matches_enumeration_learning(two_clusters):
    problem, prior = two_clusters
    start = bl.BasicParams(jnp.log(jnp.asarray(0.3)))
    exact, info = bl.fit(problem, start, prior=prior, step=0.05, min_step=1e-5)
    assert info["converged"]
    sw, sw_info = bl.fit(
        problem,
        start,
        method="swendsen_wang",
        prior=prior,
        step=0.05,
        key=jax.random.key(4),
        max_iter=30,
        min_step=1e-3,
        chains=bl.ChainSettings(n_chains=4, n_samples=400, burn_in=50),
    )
    s_exact, s_sw = float(jnp.exp(exact.log_sigma)), float(jnp.exp(sw.log_sigma))
    assert 0.3 < s_exact < prior.sigma_max
    assert abs(s_sw - s_exact) / s_exact < 0.1, (s_sw, s_exact)


def test_oracle_is_pure_and_sampling_needs_a_key(two_clusters):
    """The gradient oracle is a pure function of (state, theta): the same state gives the
    same sampled value; the next state continues the persistent chains. Sampled moments
    without a key are refused (no hidden default key)."""
    problem, prior = two_clusters
    chains = bl.ChainSettings(n_chains=4, n_samples=400, burn_in=50)  # as the SW test above
    oracle = bl.GradientOracle(problem, "swendsen_wang", prior, chains)
    theta = bl.BasicParams(jnp.log(jnp.asarray(0.3)))
    for call in (oracle.init, lambda: bl.fit(problem, theta, method="swendsen_wang"),
                 lambda: bl.posterior(problem, theta, method="swendsen_wang")):
        with pytest.raises(ValueError, match="key"):
            call()
    state = oracle.init(jax.random.key(4))
    (s1, v1), (s2, v2) = oracle(state, theta), oracle(state, theta)
    assert v1.objective == v2.objective and s1.n_calls == 1 and state.n_calls == 0
    np.testing.assert_array_equal(v1.gradient.log_sigma, v2.gradient.log_sigma)
    np.testing.assert_array_equal(s1.clamped_labels, s2.clamped_labels)
    assert state.clamped_labels is None and s1.clamped_labels.shape == (4, 10)
    s3, v3 = oracle(s1, theta)  # persistent chains go on: another estimate
    assert s3.n_calls == 2 and v3.objective != v1.objective


def test_optax_ascent_reaches_the_same_sigma(two_clusters):
    import optax

    problem, prior = two_clusters
    start = bl.BasicParams(jnp.log(jnp.asarray(0.3)))
    exact, _ = bl.fit(problem, start, prior=prior, step=0.05, min_step=1e-5)
    opt, info = bl.fit(
        problem, start, prior=prior, optimizer=optax.adam(0.05), max_iter=300, gtol=1e-4
    )
    np.testing.assert_allclose(jnp.exp(opt.log_sigma), jnp.exp(exact.log_sigma), rtol=1e-2)


# --------------------------------------------------------------------------- qualitative
def test_labels_travel_along_the_arcs_table1():
    X, labels = paper_arcs()
    problem = bl.BoltzmannProblem(pair_geometry(X), labels, 2, "extended")
    post = bl.posterior(problem, theta_of(1.1, [0.8, -1.9], [1.0, 1.0], 1.6))
    p = post.marginals[:, 0]
    assert np.all(p[:8] > 0.5) and np.all(p[8:] < 0.5)
    # x_8 follows x_1 along the upper arc although x_16 is nearer
    assert np.linalg.norm(X[7] - X[15]) < np.linalg.norm(X[7] - X[0])
    assert post.posterior_mean_labels[7] == 0


def test_bridge_point_carries_the_label_to_the_other_arc():
    theta = theta_of(1.5, [0.0, 0.0], [0.0, 0.0], 2.0)
    p = {}
    for bridge in (False, True):
        X, labels = paper_arcs(bridge)
        problem = bl.BoltzmannProblem(pair_geometry(X), labels, 2, "extended")
        p[bridge] = bl.posterior(problem, theta).marginals[:, 0]
    gain = p[True][8:15] - p[False][8:15]  # lower arc, unlabelled points x_9..x_15
    assert np.all(gain > 0.05) and gain[0] > 0.15, gain


def test_mislabelled_point_in_dense_cluster_is_corrected_table4():
    ds = data.noisy_label_clusters()
    observed = ds.extra["observed_labels"]
    problem = bl.BoltzmannProblem(pair_geometry(ds.X), observed, 2, "extended")
    post = bl.posterior(problem, theta_of(1.8, [-6.9, 1.1], [1.0, 1.0], 1.0))
    assert 0 in post.suspected_errors and post.marginals[0, 0] > 0.99  # x_1 corrected
    assert post.marginals[1, 0] > 0.5  # x_2 keeps its (wrong) 'o', as in Table 4
    np.testing.assert_array_equal(post.posterior_mean_labels[2:], ds.y[2:])


def test_cube_learns_small_alpha1():
    ds = data.cube_irrelevant()
    keep = np.r_[0:4, 5, 8:12, 14:17]  # 12 of the 20 points (2^12 configurations)
    X, y = ds.X[keep], ds.y[keep]
    labels = y.copy()
    labels[[2, 9]] = -1
    problem = bl.BoltzmannProblem(pair_geometry(X), labels, 2, "extended")
    start = theta_of(0.0, [-2.0, -2.0, -2.0], [0.0, 0.0], 1.0)
    theta, info = bl.fit(problem, start, step=0.05, max_iter=80)
    a = np.asarray(theta.log_length_scales)
    assert a[0] < min(a[1], a[2]) - 1.5, a
    post = bl.posterior(problem, theta)
    np.testing.assert_array_equal(post.posterior_mean_labels, y)


def test_bad_input_raises():
    X = np.zeros((3, 2))
    with pytest.raises(ValueError, match="k must"):
        pair_geometry(X, k=5)
    with pytest.raises(ValueError, match="kind"):
        bl.BoltzmannProblem(pair_geometry(X + np.eye(3, 2)), np.array([0, -1, 1]), 2, "other")
    with pytest.raises(ValueError, match="labels"):
        extended_boltzmann(
            pair_geometry(X + np.eye(3, 2)), theta_of(0, [0, 0], [0, 0], 0), np.array([0, 3, -1])
        )


def test_knn_pairs_are_symmetric_and_hold_nearest_neighbours():
    X = np.random.default_rng(2).normal(size=(30, 3))
    geo = pair_geometry(X, k=3)
    pairs = set(
        zip(np.asarray(geo.senders).tolist(), np.asarray(geo.receivers).tolist(), strict=True)
    )
    assert all((r, s) in pairs for s, r in pairs)
    d = ((X[:, None] - X[None]) ** 2).sum(-1) + np.diag(np.full(30, np.inf))
    assert all((i, int(d[i].argmin())) in pairs for i in range(30))
    np.testing.assert_allclose(geo.sq_dist, d[geo.senders, geo.receivers])
    one_column = pair_geometry(X, k=3, per_feature=False)  # the shared-length-scale form
    assert one_column.sq_diff.shape == (geo.sq_diff.shape[0], 1)
    np.testing.assert_allclose(one_column.sq_dist, geo.sq_dist, rtol=1e-6)
    # a search already done gives the same pairs (the estimator shares it with the widths)
    from sklearn.neighbors import NearestNeighbors

    idx = NearestNeighbors(n_neighbors=4).fit(X).kneighbors(X, return_distance=False)
    given = pair_geometry(X, k=3, neighbours=idx)
    np.testing.assert_array_equal(given.senders, geo.senders)
    np.testing.assert_array_equal(given.receivers, geo.receivers)
    with pytest.raises(ValueError, match="neighbours: expected shape"):
        pair_geometry(X, k=3, neighbours=idx[:, :3])


def test_estimator_corrects_noisy_labels_and_exposes_length_scales():
    from graphssl.estimators.boltzmann import BoltzmannMRFClassifier

    ds = data.noisy_label_clusters()
    clf = BoltzmannMRFClassifier(n_restarts=1, max_iter=30).fit(ds.X, ds.extra["observed_labels"])
    np.testing.assert_array_equal(clf.transduction_, ds.y)
    assert clf.n_iter_ >= 1  # scikit-learn's n_iter check (skipped there: a new shape)
    assert 0 in clf.suspected_label_errors_
    assert clf.length_scales_.shape == (2,) and np.all(clf.length_scales_ > 0)
    np.testing.assert_allclose(clf.length_scales_**2 * 2, np.exp(clf.log_length_scales_))
    assert clf.predict_proba().shape == (16, 2)
    with pytest.raises(ValueError, match="model"):
        BoltzmannMRFClassifier(model="nope").fit(ds.X, ds.extra["observed_labels"])
