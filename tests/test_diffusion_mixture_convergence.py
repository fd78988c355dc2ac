"""Running Walder's sampler until its chains agree: the generic driver
(:func:`graphssl.inference.mcmc.convergence.sample_until_converged`) on the mixture's kernels —
chunks, windows, the stopping rule, resumption and errors."""

import jax
import numpy as np
import pytest

from graphssl.inference.diffusion_mixture import sampler as dms
from graphssl.inference.mcmc import convergence as conv
from graphssl.models import diffusion_mixture as dm


def _model(n=16, gamma=0.8):
    """A path of ``n`` nodes with one labelled node of each class at the two ends."""
    import scipy.sparse as sp

    from graphssl.graph import Graph

    rows = np.r_[np.arange(n - 1), np.arange(1, n)]
    cols = np.r_[np.arange(1, n), np.arange(n - 1)]
    graph = Graph.from_scipy(sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n, n)))
    labels = np.full(n, -1)
    labels[0], labels[-1] = 0, 1
    return dm.DirichletDiffusionMixture.create(graph, labels, 2, tau=2.0, gamma=gamma)


KW = dict(n_chains=3, burn_in=5, thin=2, moves=(1, 1))
CHUNK = 20  # iterations per call: every run here shares the same compilations
DRAWS = CHUNK // KW["thin"]


def _run(model, key, n_chunks):
    """``n_chunks`` chunks of one run (what one run of ``n_chunks * CHUNK`` draws)."""
    s = dms.sample_mixture(model, key, n_iterations=CHUNK, **KW)
    for _ in range(n_chunks - 1):
        s = dms.sample_mixture(model, None, n_iterations=CHUNK, resume=s, **KW)
    return s


def _pairs(model):
    return conv.default_pairs(model.n_nodes, np.asarray(model.observed), n_pairs=20)


def test_stops_at_the_first_check_under_the_target_and_returns_the_last_half():
    model = _model()
    target = 1.2
    s, checks = dms.sample_mixture_until_converged(
        model, jax.random.PRNGKey(0), target_rhat=target, check_every=CHUNK,
        max_iterations=4000, **KW)
    assert checks[-1].max_rhat <= target
    assert all(c.max_rhat > target for c in checks[:-1])
    k = len(checks)
    assert [c.steps for c in checks] == [CHUNK * (i + 1) for i in range(k)]
    assert checks[-1].window == DRAWS * (k - k // 2) == np.asarray(s.energy).shape[-1]
    # the window is the tail of the whole run with the same key
    whole = _run(model, jax.random.PRNGKey(0), k)
    np.testing.assert_array_equal(np.asarray(s.energy),
                                  np.asarray(whole.energy)[:, DRAWS * (k // 2):])
    np.testing.assert_array_equal(np.asarray(s.labels),
                                  np.asarray(whole.labels)[:, DRAWS * (k // 2):])
    assert s.n_steps == whole.n_steps
    rhat = conv.invariant_rhat(s, _pairs(model), dms.TRACE_STATISTICS)
    assert set(rhat) == {"energy", "class_sizes", "coassignment", "n_components",
                         "edge_agreement"}
    assert checks[-1].rhat == pytest.approx(rhat, nan_ok=True)


def test_a_run_that_does_not_converge_says_so():
    model = _model()
    s, checks = dms.sample_mixture_until_converged(
        model, jax.random.PRNGKey(1), target_rhat=1.000001, check_every=CHUNK,
        max_iterations=3 * CHUNK, **KW)
    assert len(checks) == 3 and checks[-1].steps == 3 * CHUNK
    assert checks[-1].max_rhat > 1.000001
    assert np.asarray(s.energy).shape == (3, 2 * DRAWS)


def test_new_chains_from_given_labels_and_resume_as_warm_up():
    model = _model()
    start = np.r_[np.zeros(8, int), np.ones(8, int)]
    s, checks = dms.sample_mixture_until_converged(
        model, jax.random.PRNGKey(5), target_rhat=1.000001, check_every=CHUNK,
        max_iterations=2 * CHUNK, init_labels=start, init_noise=0.2, init_beta="self", **KW)
    assert len(checks) == 2 and s.n_steps == 5 + 2 * CHUNK
    warm = _run(model, jax.random.PRNGKey(2), 1)
    s, checks = dms.sample_mixture_until_converged(
        model, resume=warm, target_rhat=1.000001, check_every=CHUNK,
        max_iterations=2 * CHUNK, **KW)
    assert checks[0].steps == CHUNK and s.n_steps == warm.n_steps + 2 * CHUNK
    longer = _run(model, jax.random.PRNGKey(2), 3)
    np.testing.assert_array_equal(np.asarray(s.energy),
                                  np.asarray(longer.energy)[:, 2 * DRAWS:])
    # the tally (class marginals) covers this call's iterations only
    assert np.all(np.asarray(s.final_state.n_tallied) == 2 * CHUNK)


def test_invariant_rhat_sees_chains_that_disagree():
    model = _model()
    s = _run(model, jax.random.PRNGKey(4), 15)
    agree = conv.invariant_rhat(s, trace_statistics=dms.TRACE_STATISTICS)
    assert agree["energy"] < 1.1
    shifted = np.asarray(s.energy).copy()
    shifted[0] += 10 * shifted.std()
    assert conv.invariant_rhat(s._replace(energy=shifted))["energy"] > 1.5
    flipped = np.asarray(s.labels).copy()
    flipped[0, :, :15] = 0  # chain 0 puts the whole path but its labelled end in class 0
    pairs = np.array([[2, 13], [3, 12], [1, 14]])
    assert conv.invariant_rhat(s._replace(labels=flipped), pairs)["coassignment"] > 1.1
    with pytest.raises(ValueError, match="trace_statistics"):
        conv.invariant_rhat(s, trace_statistics=("no_such_statistic",))


def test_bad_arguments_are_named():
    model = _model()
    key = jax.random.PRNGKey(0)
    until = dms.sample_mixture_until_converged
    with pytest.raises(ValueError, match="target_rhat"):
        until(model, key, target_rhat=1.0)
    with pytest.raises(ValueError, match="check_every"):
        until(model, key, check_every=15, thin=2)
    with pytest.raises(ValueError, match="max_iterations: must be >= check_every"):
        until(model, key, check_every=100, max_iterations=50)
    with pytest.raises(ValueError, match="key"):
        until(model)
    with pytest.raises(ValueError, match="unstacked"):
        until(dms.stack_models([model, model]), key)
    one_chain = dms.sample_mixture(model, key, n_chains=1, n_iterations=8, burn_in=0)
    with pytest.raises(ValueError, match="2 chains"):
        conv.invariant_rhat(one_chain)


def test_estimator_runs_until_converged():
    from graphssl.data import two_moons
    from graphssl.estimators import DiffusionMixtureClassifier

    ds = two_moons(60, seed=0)
    y = -np.ones(60, int)
    for c in (0, 1):
        y[np.flatnonzero(ds.y == c)[:3]] = c
    clf = DiffusionMixtureClassifier(k=6, gamma=0.8, n_chains=3, n_iterations=20, burn_in=5,
                                     thin=2, moves=(1, 1), random_state=0)
    clf.fit(ds.X, y)
    clf.run_until_converged(target_rhat=1.3, check_every=20, max_iterations=2000,
                            progress=False)
    checks = clf.convergence_checks_
    assert checks[-1].max_rhat <= 1.3
    assert np.asarray(clf.samples_.energy).shape[-1] == checks[-1].window
    np.testing.assert_allclose(clf.posterior_mean_, dms.class_marginals(clf.samples_))
    assert clf.predict(ds.X).shape == (60,)
    for kwargs, match in (({"check_every": 0}, "check_every: a multiple of thin=2"),
                          ({"check_every": 20.5}, "check_every: must be a whole number"),
                          ({"max_iterations": 0}, "max_iterations: must be >= check_every"),
                          ({"target_rhat": "a"}, "target_rhat: must be a number > 1")):
        with pytest.raises(ValueError, match=match):  # the estimator's own argument names
            clf.run_until_converged(progress=False, **kwargs)
