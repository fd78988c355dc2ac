"""Mode probability Gamma (Eqs. 21-22), its approximation (Eqs. 23-26), beta tuning (Eq. 27)."""

import itertools

import jax
import numpy as np
import pytest
import scipy.sparse as sp

jax.config.update("jax_enable_x64", True)

from graphssl.graph import Graph, row_normalize  # noqa: E402
from graphssl.inference.optimize.mean_field import MeanFieldOptions, naive_mean_field  # noqa: E402
from graphssl.models.potts import PottsModel, label_field  # noqa: E402
from graphssl.models.potts_mode_probability import (  # noqa: E402
    approx_log_mode_probability,
    gamma_preset,
    log_mode_probability,
    log_mode_probability_from_fields,
    solve_beta,
)

SEQ = MeanFieldOptions(order="sequential", tol=1e-13, max_iter=5000)


@pytest.mark.parametrize("preset", ["nmfA", "nmfB", 0.7])
@pytest.mark.parametrize("q", [2, 3, 5, 10])
@pytest.mark.parametrize("rate", [0.0, 0.02, 0.1, 0.5, 1.0])
def test_root_of_eq_27_solves_it(preset, q, rate):
    gamma = gamma_preset(preset, q) if isinstance(preset, str) else preset
    if gamma <= 1.0 / q:
        pytest.skip("gamma must exceed 1/q")
    beta = solve_beta(preset, rate, q)
    assert beta > 0
    assert abs(float(approx_log_mode_probability(beta, rate, q)) - np.log(gamma)) < 1e-10
    # unique positive root: Eq. 26 - ln gamma changes sign there, negative below
    assert float(approx_log_mode_probability(0.5 * beta, rate, q)) < np.log(gamma)


def test_presets_match_paper_and_authors_code():
    assert gamma_preset("nmfA", 10) == pytest.approx(0.55)
    assert gamma_preset("nmfB", 10) == 1.0
    # the authors' code on usps_full with 2 % labels (185 of 9298): beta 24.7 and 31.1
    assert solve_beta("nmfA", 185 / 9298, 10) == pytest.approx(24.7, abs=0.05)
    assert solve_beta("nmfB", 185 / 9298, 10) == pytest.approx(31.1, abs=0.05)
    # nmfA gives the smaller beta (Fig. 7), beta grows with q and shrinks with r_l
    for q, r in itertools.product([2, 5, 10], [0.02, 0.2]):
        assert solve_beta("nmfA", r, q) < solve_beta("nmfB", r, q)
    assert solve_beta("nmfB", 0.02, 2) < solve_beta("nmfB", 0.02, 10)
    assert solve_beta("nmfB", 0.2, 5) < solve_beta("nmfB", 0.02, 5)


@pytest.mark.parametrize(
    "args, word",
    [(("nmfC", 0.1, 3), "preset"), ((0.3, 0.1, 3), "gamma"), ((1.2, 0.1, 3), "gamma"),
     (("nmfA", 1.5, 3), "labeled_rate"), (("nmfA", 0.1, 1), "n_classes")],
)
def test_solve_beta_rejects_bad_input(args, word):
    with pytest.raises(ValueError, match=word):
        solve_beta(*args)


def test_eq_26_equals_eq_24_summed_node_by_node():
    """Eq. 24 summed over nodes with an explicit theta equals the closed form Eq. 25/26."""
    rng = np.random.default_rng(1)
    n, q = 200, 4
    labels = np.where(rng.uniform(size=n) < 0.15, rng.integers(0, q, n), -1)
    theta = label_field(labels, q)
    mode = np.where(labels >= 0, labels, 0)  # labelled nodes keep their labels (Eqs. 18-20)
    for beta in (0.01, 0.7, 5.0):
        eq24 = sum(
            beta * (theta[i, mode[i]] + 1.0 / q) - np.log(q + beta * (theta[i].sum() + 1.0))
            for i in range(n)
        )
        rate = np.mean(labels >= 0)
        assert eq24 / n == pytest.approx(float(approx_log_mode_probability(beta, rate, q)),
                                         rel=1e-12)


@pytest.fixture(scope="module")
def small_model():
    rng = np.random.default_rng(2)
    n = 7
    W = np.triu(rng.uniform(0.1, 1.0, (n, n)) * (rng.uniform(size=(n, n)) < 0.7), 1)
    W = W + W.T
    W[np.arange(n), (np.arange(n) + 1) % n] = W[(np.arange(n) + 1) % n, np.arange(n)] = 0.6
    graph = row_normalize(Graph.from_scipy(sp.csr_matrix(W)))
    labels = np.array([0, -1, 1, -1, -1, 2, -1])
    return graph, labels


@pytest.mark.parametrize("beta", [0.5, 4.0, 50.0])
def test_exact_log_gamma_vs_brute_force_mode_of_product(small_model, beta):
    """ln Gamma (Eqs. 21-22) is the log-probability of the most probable configuration of
    Phi(s) = prod_i phi_i(s_i): check against all 3^7 configurations."""
    graph, labels = small_model
    model = PottsModel.from_labels(graph, labels, 3, beta=beta)
    sol, _ = naive_mean_field(model, options=SEQ)
    phi = np.asarray(sol.marginals)
    brute = max(
        np.prod(phi[np.arange(len(s)), s]) for s in itertools.product(range(3), repeat=7)
    )
    lg = float(log_mode_probability_from_fields(sol.fields))
    assert lg == pytest.approx(np.log(brute), rel=1e-10)
    assert float(log_mode_probability(sol.log_marginals)) == pytest.approx(lg, rel=1e-12)
    # Eq. 22 written out: sum_i h_{i,y_i} - ln Z_i
    h = np.asarray(sol.fields)
    y = phi.argmax(1)
    eq22 = np.sum(h[np.arange(7), y] - np.log(np.exp(h).sum(1)))
    assert lg == pytest.approx(eq22, rel=1e-10)


def test_log_gamma_is_finite_at_beta_1e3(small_model):
    graph, labels = small_model
    model = PottsModel.from_labels(graph, labels, 3, beta=1e3)
    sol, _ = naive_mean_field(model, options=SEQ._replace(tol=1e-6))
    lg = float(log_mode_probability_from_fields(sol.fields))
    assert np.isfinite(lg) and lg <= 0.0


def test_approximation_is_exact_to_second_order_at_small_beta(small_model):
    """Eq. 26 is the first-order expansion of the exact (1/N) ln Gamma of the mean-field
    solution: its error shrinks at least quadratically as beta -> 0."""
    graph, labels = small_model
    n, rate = 7, np.mean(labels >= 0)
    errors = []
    for beta in (0.02, 0.04):
        model = PottsModel.from_labels(graph, labels, 3, beta=beta)
        sol, _ = naive_mean_field(model, options=SEQ)
        # modes of the labelled nodes are their labels; Eq. 24 uses h at the mode
        y = np.where(labels >= 0, labels, np.asarray(sol.marginals).argmax(1))
        exact = float(log_mode_probability(sol.log_marginals, y)) / n
        errors.append(abs(exact - float(approx_log_mode_probability(beta, rate, 3))))
    assert errors[0] < 1e-3
    assert errors[1] / errors[0] > 3.0


# ----------------------------------------------------------------------------- estimator


@pytest.fixture(scope="module")
def moons():
    from sklearn.datasets import make_moons

    X, y = make_moons(80, noise=0.08, random_state=0)
    y_masked = np.full(80, -1)
    rng = np.random.default_rng(0)
    for c in (0, 1):
        y_masked[rng.choice(np.flatnonzero(y == c), 3, replace=False)] = c
    return X, y, y_masked


def test_classifier_tunes_beta_and_keeps_labels(moons):
    from graphssl.estimators.potts import PottsClassifier

    X, y, y_masked = moons
    clf = PottsClassifier(beta="nmfB").fit(X, y_masked)
    assert clf.k_ == 6  # log2 80
    assert clf.beta_ == pytest.approx(solve_beta("nmfB", 6 / 80, 2))
    assert bool(clf.mean_field_info_.converged)
    labelled = y_masked >= 0
    np.testing.assert_array_equal(clf.transduction_[labelled], y_masked[labelled])
    assert np.mean(clf.transduction_ == y) > 0.9
    assert -np.log(2) < clf.log_mode_probability_ <= 0.0
    np.testing.assert_allclose(clf.predict_proba().sum(1), 1.0)
    assert clf.predict(X[:3] + 1e-3).shape == (3,)


def test_classifier_sampler_gives_posterior_marginals(moons):
    """Wiring of inference='swendsen_wang' (the Gibbs path shares it; both kernels are
    checked against enumeration in tests/inference)."""
    from graphssl.estimators.potts import PottsClassifier

    X, y, y_masked = moons
    clf = PottsClassifier(beta=4.0, clamp=True, inference="swendsen_wang", n_chains=2,
                          n_samples=30, burn_in=10).fit(X, y_masked)
    proba = clf.predict_proba()
    np.testing.assert_allclose(proba.sum(1), 1.0)
    labelled = y_masked >= 0
    np.testing.assert_array_equal(proba[labelled].max(1), 1.0)  # clamped
    assert clf.samples_.labels.shape == (2, 30, 80)
    assert clf.map_labels_.shape == (80,)


@pytest.mark.parametrize(
    "params, word",
    [({"beta": "nmfC"}, "beta"), ({"beta": -1.0}, "beta"), ({"inference": "vb"}, "inference"),
     ({"normalize": "col"}, "normalize"), ({"order": "random"}, "order")],
)
def test_classifier_rejects_bad_params(moons, params, word):
    from graphssl.estimators.potts import PottsClassifier

    X, _, y_masked = moons
    with pytest.raises(ValueError, match=word):
        PottsClassifier(**params).fit(X, y_masked)


def test_paper_graph_and_isolated_points(moons):
    from graphssl.models.potts import bergamim_breve_graph

    X, _, _ = moons
    X = np.vstack([X, [[5.0, 5.0]]])  # an outlier: nobody's mutual neighbour
    W = bergamim_breve_graph(X, normalize=None)
    assert W.is_symmetric() and float(W.degrees()[-1]) == 0.0
    P = bergamim_breve_graph(X)  # row-normalised, Eq. 9
    deg = np.asarray(P.degrees())
    np.testing.assert_allclose(deg[deg > 0], 1.0)
    linked = bergamim_breve_graph(X, normalize=None, isolated="nearest")
    assert linked.is_symmetric() and np.all(np.asarray(linked.degrees()) > 0)
    nearest = np.argmin(np.linalg.norm(X[:-1] - X[-1], axis=1))
    A = linked.to_scipy()
    assert A[len(X) - 1, nearest] > 0 and A.nnz == W.n_edges + 2 * int(
        np.sum(np.asarray(W.degrees()) == 0))


# ----------------------------------------------------------------------------- beta="auto"


def _documents(topic, n=150, q=3, vocabulary=200, words=12, seed=0):
    """Word indicators: each word from the class's own block with probability ``topic``,
    else from a block shared by all classes; 5 labels a class."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(q), n // q)
    block = vocabulary // (q + 1)
    own = rng.integers(0, block, (n, words)) + block * y[:, None]
    shared = rng.integers(q * block, vocabulary, (n, words))
    cols = np.where(rng.uniform(size=(n, words)) < topic, own, shared).ravel()
    F = sp.csr_matrix((np.ones(cols.size), (np.repeat(np.arange(n), words), cols)),
                      shape=(n, vocabulary))
    F.data[:] = 1.0
    labels = np.full(n, -1)
    for c in range(q):
        chosen = rng.choice(np.flatnonzero(y == c), 5, replace=False)
        labels[chosen] = c
    return F, y, labels


@pytest.mark.parametrize("topic, collapses", [(0.5, True), (0.7, False)])
def test_auto_beta_leaves_the_ordered_phase_and_nothing_else(topic, collapses):
    """On a cosine kNN graph of weakly separated word indicators the paper's beta puts every
    node in one class (the ordered phase); "auto" flags it and the held-out labels choose a
    smaller beta. Where the paper's solution is not collapsed, "auto" is the paper's fit."""
    from graphssl.estimators.potts import PottsClassifier
    from graphssl.inference.optimize.feature_potts import cosine_knn_graph

    F, y, labels = _documents(topic)
    W = cosine_knn_graph(F, 20)
    free = labels < 0
    paper = PottsClassifier(beta="nmfB").fit_graph(W, labels)
    auto = PottsClassifier().fit_graph(W, labels)
    largest = np.bincount(paper.transduction_[free]).max() / free.sum()
    assert (largest > 0.95) == collapses
    assert auto.beta_selection_.beta_nmfB == pytest.approx(paper.beta_)
    if collapses:
        assert auto.beta_selection_.flagged_classes
        assert auto.beta_ < paper.beta_
        record = auto.beta_selection_.cross_validation
        chosen = record.betas.index(auto.beta_)
        held_out = record.held_out_accuracy
        assert held_out[chosen] > held_out[0] and record.gain_se[chosen] > 2
        assert np.mean(auto.transduction_[free] == y[free]) > 0.75
    else:
        assert not auto.beta_selection_.flagged_classes
        assert auto.beta_selection_.cross_validation is None
        assert auto.beta_ == paper.beta_
        np.testing.assert_array_equal(auto.transduction_, paper.transduction_)
        assert np.mean(auto.transduction_[free] == y[free]) > 0.95


def test_collapse_check_and_folds():
    from graphssl.inference.optimize.potts_beta import class_folds
    from graphssl.inference.ordered_phase import collapsed_classes

    labels = np.full(600, -1)
    labels[:60] = np.repeat([0, 1, 2], 20)
    balanced = np.tile([0, 1, 2], 200)
    assert collapsed_classes(balanced, labels, 3).size == 0
    imbalanced = np.where(np.arange(600) % 10 < 5, 0, balanced)  # class 0 at 0.67 vs 0.33
    np.testing.assert_array_equal(collapsed_classes(imbalanced, labels, 3), [0])
    mild = np.where(np.arange(600) % 10 < 1, 1, balanced)  # class 1 at 0.40: plausible
    assert collapsed_classes(mild, labels, 3).size == 0
    fold = class_folds(labels, 5, seed=1)
    assert np.all(fold[60:] == -1)
    for c in range(3):
        np.testing.assert_array_equal(np.bincount(fold[labels == c], minlength=5), 4)


@pytest.mark.filterwarnings("ignore::graphssl.validation.UnreachedNodesWarning")
def test_unreached_points_get_their_union_edges_back(moons):
    """The mutual kNN graph leaves a far pair of points label-free; "reconnect" gives exactly
    those nodes their union-kNN edges, every other edge stays mutual."""
    from graphssl.estimators.potts import PottsClassifier

    X, y, y_masked = moons
    X = np.vstack([X, [[4.0, 4.0], [4.05, 4.0]]])  # a far pair: each other's only mutual
    labels = np.r_[y_masked, -1, -1]
    keep = PottsClassifier(unreached="keep").fit(X, labels)
    back = PottsClassifier().fit(X, labels)
    assert keep.n_unreached_ >= 2 and back.n_unreached_ == 0
    assert back.n_reconnected_ == keep.n_unreached_
    A, B = keep.graph_.to_scipy().toarray(), back.graph_.to_scipy().toarray()
    assert np.all(B >= A) and np.all((B[-2:] > 0).sum(1) > (A[-2:] > 0).sum(1))
    changed = np.flatnonzero((B != A).any(1))
    assert set(changed) >= {len(X) - 2, len(X) - 1}
    np.testing.assert_array_equal(B == B.T, True)
    assert back.transduction_[-1] in (0, 1)
