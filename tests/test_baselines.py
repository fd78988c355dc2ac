"""Closed-form baselines against dense float64 references
(graphssl.inference.optimize.baselines)."""

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp

from graphssl.graph import Graph, heat_kernel, knn_graph
from graphssl.inference.optimize.baselines import (
    UnreachedNodesWarning,
    batched_pcg,
    class_mass_normalization,
    harmonic_function,
    knn_graph_classifier,
    labelled_class_proportions,
    lgc,
    parzen_window,
)


def _random_graph(n, density, seed):
    rng = np.random.default_rng(seed)
    A = sp.random(
        n, n, density=density, random_state=rng, data_rvs=lambda size: rng.uniform(0.1, 1, size)
    )
    A = A + A.T
    A.setdiag(0)
    # a ring keeps it connected
    ring = sp.csr_matrix((np.full(n, 0.05), (np.arange(n), (np.arange(n) + 1) % n)), (n, n))
    return (A + ring + ring.T).tocsr()


@pytest.fixture(scope="module")
def problem():
    n, C = 60, 3
    W = _random_graph(n, 0.08, 0)
    rng = np.random.default_rng(1)
    labels = np.full(n, -1)
    idx = rng.choice(n, 9, replace=False)
    labels[idx] = np.arange(9) % C
    return W, labels, C


def _dense_harmonic(W, labels, C):
    Wd = W.toarray()
    L = np.diag(Wd.sum(1)) - Wd
    lab = np.flatnonzero(labels >= 0)
    unl = np.flatnonzero(labels < 0)
    fL = np.eye(C)[labels[lab]]
    fU = np.linalg.solve(L[np.ix_(unl, unl)], -L[np.ix_(unl, lab)] @ fL)
    F = np.zeros((len(labels), C))
    F[lab], F[unl] = fL, fU
    return F


@pytest.mark.parametrize("method", ["direct", "cg", "jax_cg"])
def test_harmonic_matches_dense_solve(problem, method):
    W, labels, C = problem
    F, info = harmonic_function(W, labels, method=method, tol=1e-12, return_info=True)
    np.testing.assert_allclose(F, _dense_harmonic(W, labels, C), atol=1e-9)
    assert info.converged and info.method == method


def test_harmonic_property_and_clamping(problem):
    W, labels, C = problem
    F = harmonic_function(Graph.from_scipy(W), labels, tol=1e-12)
    unl = labels < 0
    mean_of_neighbours = (W @ F) / np.asarray(W.sum(1))
    np.testing.assert_allclose(F[unl], mean_of_neighbours[unl], atol=1e-9)
    np.testing.assert_array_equal(F[~unl], np.eye(C)[labels[~unl]])
    np.testing.assert_allclose(F.sum(1), 1.0, atol=1e-9)


def test_harmonic_observed_mask_equals_minus_one_convention(problem):
    W, labels, C = problem
    observed = labels >= 0
    garbage = np.where(observed, labels, 2)
    np.testing.assert_allclose(
        harmonic_function(W, garbage, observed=observed, n_classes=C, tol=1e-12),
        harmonic_function(W, labels, tol=1e-12),
    )


def test_class_mass_normalization(problem):
    W, labels, C = problem
    F = harmonic_function(W, labels, tol=1e-12)
    q = np.array([0.5, 0.3, 0.2])
    G = harmonic_function(W, labels, tol=1e-12, class_mass_normalize=True, class_prior=q)
    unl = labels < 0
    # reference: Zhu et al. (2003) Sec. 4, column c scaled by q_c / sum_U f_c
    ref = F[unl] * q / F[unl].sum(0)
    ref /= ref.sum(1, keepdims=True)
    np.testing.assert_allclose(G[unl], ref, atol=1e-12)
    np.testing.assert_array_equal(G[~unl], F[~unl])
    with pytest.raises(ValueError, match="class_prior"):
        class_mass_normalization(F, np.flatnonzero(~unl), [1.0, 0.0])


def test_class_mass_normalization_default_prior_is_add_one_smoothed(problem):
    """Without ``class_prior`` the masses are the labelled counts plus one, over L + C
    (Zhu's own code: ``q = sum(fl) + 1``); unequal counts (3, 1, 1 of 5 labels) tell it
    from the raw frequencies (0.6, 0.2, 0.2)."""
    W, labels, C = problem
    lab = np.flatnonzero(labels >= 0)[:5]
    uneven = np.full_like(labels, -1)
    uneven[lab] = [0, 0, 0, 1, 2]
    F = harmonic_function(W, uneven, n_classes=C, tol=1e-12)
    unl = uneven < 0
    q = np.array([4.0, 2.0, 2.0]) / 8.0
    G = class_mass_normalization(F, lab)
    ref = F[unl] * q / F[unl].sum(0)
    np.testing.assert_allclose(G[unl], ref / ref.sum(1, keepdims=True), atol=1e-12)
    np.testing.assert_allclose(labelled_class_proportions([3, 1, 1]), q)
    np.testing.assert_allclose(labelled_class_proportions([4, 1, 0]), [5 / 8, 2 / 8, 1 / 8])
    with pytest.raises(ValueError, match="class_counts"):
        labelled_class_proportions([[1, 2]])


def test_harmonic_mixture_cmn_decision_is_the_shared_rule():
    """``harmonic_mixture.fit.class_mass_normalize`` (a decision) is the argmax of the one
    class-mass-normalisation rule over all rows, and a prior moves the decision."""
    from graphssl.inference.harmonic_mixture.fit import class_mass_normalize

    F = np.random.default_rng(3).random((60, 3))
    q = np.array([0.7, 0.2, 0.1])
    ref = np.argmax(F * (q / F.sum(0))[None], axis=1)
    np.testing.assert_array_equal(class_mass_normalize(F, q), ref)
    uniform = class_mass_normalize(F, np.full(3, 1 / 3))
    assert np.sum(class_mass_normalize(F, q) == 0) > np.sum(uniform == 0)


def test_normalize_graph_is_harmonic_on_S(problem):
    W, labels, C = problem
    d = np.asarray(W.sum(1)).ravel()
    S = sp.diags(d**-0.5) @ W @ sp.diags(d**-0.5)
    np.testing.assert_allclose(
        harmonic_function(W, labels, normalize_graph=True, tol=1e-12),
        _dense_harmonic(sp.csr_matrix(S), labels, C),
        atol=1e-9,
    )


@pytest.mark.parametrize("method", ["direct", "cg", "jax_cg", "iterate"])
def test_lgc_closed_form(problem, method):
    W, labels, C = problem
    alpha = 0.9
    Wd = W.toarray()
    d = Wd.sum(1)
    S = Wd / np.sqrt(np.outer(d, d))
    Y = np.zeros((len(labels), C))
    Y[labels >= 0, labels[labels >= 0]] = 1
    ref = (1 - alpha) * np.linalg.solve(np.eye(len(labels)) - alpha * S, Y)
    F, info = lgc(W, labels, alpha=alpha, method=method, tol=1e-13, normalize=False,
                  return_info=True)
    np.testing.assert_allclose(F, ref, atol=1e-10)
    assert info.converged
    P = lgc(W, labels, alpha=alpha, method=method, tol=1e-13)
    np.testing.assert_allclose(P, ref / ref.sum(1, keepdims=True), atol=1e-9)


def test_batched_pcg_solves_each_column():
    rng = np.random.default_rng(3)
    M = rng.normal(size=(30, 30))
    A = M @ M.T + 30 * np.eye(30)
    B = rng.normal(size=(30, 4))
    X, it, res = batched_pcg(lambda P: A @ P, B, 1 / np.diag(A), tol=1e-12)
    np.testing.assert_allclose(X, np.linalg.solve(A, B), atol=1e-9)
    assert res <= 1e-12 and 0 < it <= 60


def test_float32_cg_agrees_with_float64(problem):
    W, labels, C = problem
    F64 = harmonic_function(W, labels, method="cg", tol=1e-12)
    F32, info = harmonic_function(W, labels, method="cg", tol=1e-5, dtype=np.float32,
                                  return_info=True)
    assert info.converged and info.residual <= 1e-5
    np.testing.assert_allclose(F32, F64, atol=1e-4)
    L32 = lgc(W, labels, method="cg", tol=1e-5, dtype="float32")
    np.testing.assert_allclose(L32, lgc(W, labels, method="cg", tol=1e-12), atol=1e-4)
    with pytest.raises(ValueError, match="dtype"):
        harmonic_function(W, labels, dtype=np.int32)


def test_jacobi_scaled_cg_keeps_unscaled_solution():
    # a badly scaled SPD system: Jacobi scaling must not change the solution
    rng = np.random.default_rng(7)
    W = _random_graph(40, 0.15, 8)
    scale = sp.diags(rng.uniform(0.01, 100.0, 40))
    L = (sp.diags(np.asarray(W.sum(1)).ravel()) - W + sp.identity(40)).tocsr()
    A = (scale @ L @ scale).tocsr()
    B = rng.normal(size=(40, 3))
    from graphssl.inference.optimize.baselines.solvers import _solve_spd

    X, it, res, used = _solve_spd(A, B, "cg", 1e-12, None, True)
    np.testing.assert_allclose(A @ X, B, atol=1e-8)
    assert used == "cg" and res <= 1e-12


def test_unreached_component_warns_and_is_uniform():
    # two components: nodes 0-3 (labelled) and 4-6 (no label)
    rows = [0, 1, 2, 4, 5]
    cols = [1, 2, 3, 5, 6]
    W = sp.csr_matrix((np.ones(5), (rows, cols)), shape=(7, 7))
    W = W + W.T
    labels = np.array([0, -1, -1, 1, -1, -1, -1])
    for fn, kw in ((harmonic_function, {}), (lgc, {}), (parzen_window, {}),
                   (knn_graph_classifier, {"k": 1})):
        with pytest.warns(UnreachedNodesWarning, match=r"3 of 7 nodes lie in 1 connected"):
            F = fn(W, labels, **kw)
        np.testing.assert_allclose(F[4:], 0.5)
        assert np.all(np.isfinite(F))
        assert F[1, 0] > 0.5 and F[2, 1] > 0.5


def test_parzen_matches_dense_reference():
    rng = np.random.default_rng(4)
    X = np.vstack([rng.normal(0, 1, (25, 2)), rng.normal(4, 1, (25, 2))])
    graph = knn_graph(X, 6, sigma="walder")
    labels = np.full(50, -1)
    labels[[0, 1, 30]] = [0, 0, 1]
    tau = 3.0
    K = heat_kernel(graph, tau)  # exp(-tau L_sym / 2)
    D = K / K.sum(0, keepdims=True)  # normalised columns: p(xi = i | beta = l)
    eta = np.array([0.7, 0.3])
    dens = np.column_stack([D[:, [0, 1]].mean(1), D[:, [30]].mean(1)]) * eta
    ref = dens / dens.sum(1, keepdims=True)
    for method in ("dense", "expm_multiply"):
        F = parzen_window(graph, labels, tau=tau, class_prior=eta, method=method)
        np.testing.assert_allclose(F, ref, atol=1e-9)
    # uniform eta by default; 'labelled' uses labelled frequencies (2 : 1)
    uni = parzen_window(graph, labels, tau=tau)
    lab = parzen_window(graph, labels, tau=tau, class_prior="labelled")
    assert not np.allclose(uni, lab)
    assert (uni.argmax(1)[:25] == 0).mean() > 0.9 and (uni.argmax(1)[25:] == 1).mean() > 0.7


def test_knn_graph_classifier_shortest_paths():
    # path 0 - 1 - 2 - 3 - 4 - 5 - 6 with labels at both ends and one in the middle
    n = 7
    W = sp.diags([np.ones(n - 1), np.ones(n - 1)], [1, -1], format="csr")
    labels = np.array([0, -1, -1, 1, -1, -1, 0])
    F1 = knn_graph_classifier(W, labels, k=1, edge_length="hop")
    np.testing.assert_array_equal(F1.argmax(1), [0, 0, 1, 1, 1, 0, 0])
    F3 = knn_graph_classifier(W, labels, k=3, edge_length="hop", block_size=1)
    np.testing.assert_allclose(F3[3], [2 / 3, 1 / 3])
    np.testing.assert_allclose(F3[1], [2 / 3, 1 / 3])
    # inverse weights: a heavy edge is short
    W2 = W.tolil()
    W2[2, 1] = W2[1, 2] = W2[0, 1] = W2[1, 0] = 10.0
    F = knn_graph_classifier(W2.tocsr(), np.array([0, -1, -1, 1, -1, -1, -1]), k=1)
    assert F[2].argmax() == 0


def test_knn_graph_classifier_ties_go_to_the_nearest_label():
    # path 0 - ... - 6, one label a class at the ends: with k = 3 both labels vote for every
    # node (1 : 1); the nearer end decides, the middle node (equidistant) keeps class order
    n = 7
    W = sp.diags([np.ones(n - 1), np.ones(n - 1)], [1, -1], format="csr")
    labels = np.array([0, -1, -1, -1, -1, -1, 1])
    F = knn_graph_classifier(W, labels, k=3, edge_length="hop", block_size=1)
    np.testing.assert_array_equal(F.argmax(1), [0, 0, 0, 0, 1, 1, 1])
    np.testing.assert_allclose(F, 0.5, atol=1e-6)  # the fractions stay the votes'
    # the classes' order does not decide: labels swapped, predictions swap
    G = knn_graph_classifier(W, np.array([1, -1, -1, -1, -1, -1, 0]), k=3, edge_length="hop")
    np.testing.assert_array_equal(G.argmax(1)[[0, 1, 5, 6]], [1, 1, 0, 0])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(labels=np.full(60, -1)), "no labelled"),
        (dict(labels=np.zeros(59, int)), "shape"),
        (dict(labels=np.r_[np.zeros(30, int), np.full(30, -1)]), "n_classes"),
    ],
)
def test_bad_input(problem, kwargs, match):
    W, _, _ = problem
    with pytest.raises(ValueError, match=match):
        harmonic_function(W, **kwargs)


def test_bad_parameters(problem):
    W, labels, _ = problem
    with pytest.raises(ValueError, match="alpha"):
        lgc(W, labels, alpha=1.0)
    with pytest.raises(ValueError, match="method"):
        harmonic_function(W, labels, method="inverse")
    with pytest.raises(ValueError, match="tau"):
        parzen_window(W, labels, tau=-1.0)
    with pytest.raises(ValueError, match="k"):
        knn_graph_classifier(W, labels, k=0)
    with pytest.raises(ValueError, match="graph"):
        harmonic_function([[0, 1], [1, 0]], np.array([0, 1]))
    with pytest.raises(ValueError, match="graph"):
        harmonic_function(sp.csr_matrix((0, 0)), np.zeros(0, int))
    directed = sp.csr_matrix(np.triu(np.ones((4, 4)), 1))
    with pytest.raises(ValueError, match="symmetric"):
        harmonic_function(directed, np.array([0, -1, -1, 1]), method="cg")


def test_directed_graph_direct_solve_is_harmonic():
    # random-walk weights (rows sum to 1) are not symmetric: 'auto' uses the sparse LU
    W = _random_graph(20, 0.2, 5)
    P = sp.diags(1 / np.asarray(W.sum(1)).ravel()) @ W
    labels = np.full(20, -1)
    labels[[0, 7]] = [0, 1]
    F = harmonic_function(P.tocsr(), labels, tol=1e-12)
    unl = labels < 0
    np.testing.assert_allclose(F[unl], (P @ F)[unl], atol=1e-10)


def test_scipy_dense_reference_is_float64():
    # guard the reference itself: the dense LGC inverse must be well conditioned here
    W = _random_graph(10, 0.3, 6).toarray()
    d = W.sum(1)
    S = W / np.sqrt(np.outer(d, d))
    assert np.linalg.cond(np.eye(10) - 0.9 * S) < 100
    assert scipy.linalg.norm(S - S.T) < 1e-12


def test_jax_cg_survives_an_underflowed_degree_in_float32():
    """A node whose Gaussian weights nearly underflow (degree ~1e-40) made 1 / diag(A)
    overflow in float32 and the whole JAX solve NaN (GRF accuracy 0.10 at N = 10^6 on a GPU);
    the system is now Jacobi-scaled in float64 on the host first."""
    import jax

    W = _random_graph(40, 0.1, 3).tolil()
    W[0, :] = 0
    W[:, 0] = 0
    W[0, 1] = W[1, 0] = 1e-40
    W = W.tocsr()
    labels = np.full(40, -1)
    labels[[5, 9, 17]] = [0, 1, 1]
    ref = harmonic_function(W, labels, method="direct")
    with jax.enable_x64(False):
        F = harmonic_function(W, labels, method="jax_cg", tol=1e-5)
    assert np.all(np.isfinite(F))
    np.testing.assert_allclose(F, ref, atol=1e-3)


def test_jax_cg_compiles_once_across_labelled_sets():
    """The nnz of ``L_UU`` changes with the labelled set; the JAX solve pads the stored
    entries with zeros to a size bucket (multiples of 1/8 of the largest power of two <= nnz),
    so a new split with the same number of unlabelled nodes reuses the compiled solve (each
    new nnz was a recompilation: 0.15 s a call on Digit1), and the zeros change nothing."""
    from graphssl.inference.optimize.baselines import solvers

    W = _random_graph(300, 0.02, 5)
    rng = np.random.default_rng(7)
    label_sets = []
    for _ in range(4):
        labels = np.full(W.shape[0], -1)
        labels[rng.choice(W.shape[0], 9, replace=False)] = np.arange(9) % 3
        label_sets.append(labels)
    blocks = [W[np.ix_(u, u)] for u in (np.flatnonzero(lab < 0) for lab in label_sets)]
    assert len({b.nnz for b in blocks}) == 4  # every split has its own nnz ...
    assert len({solvers._padded_nnz(b).nnz for b in blocks}) == 1  # ... and one bucket
    padded = solvers._padded_nnz(blocks[0])
    x = rng.normal(size=blocks[0].shape[0])
    np.testing.assert_allclose(padded @ x, blocks[0] @ x, rtol=1e-14)
    harmonic_function(W, label_sets[0], method="jax_cg", tol=1e-10)
    compiled = solvers._JAX_PCG._cache_size()
    for labels in label_sets[1:]:
        F = harmonic_function(W, labels, method="jax_cg", tol=1e-10)
        np.testing.assert_allclose(F, _dense_harmonic(W, labels, 3), atol=1e-6)
    assert solvers._JAX_PCG._cache_size() == compiled  # compiled once


def test_class_count_scale_gives_each_class_its_count():
    """``match="counts"``: the argmax of the scaled rows gives each class round(q_c u)
    nodes, and for two classes exactly the top q_1 u nodes by log-ratio (the ranking the
    scores carry); near-uniform scores, where matching the masses instead sends nearly every
    node to the class q favours."""
    from graphssl.inference.optimize.baselines.propagation import (
        class_count_scale,
        class_mass_scale,
    )

    rng = np.random.default_rng(0)
    for C in (2, 3, 5):
        f = rng.dirichlet(np.full(C, 200.0), size=600)  # within a few % of uniform
        q = rng.dirichlet(np.full(C, 3.0))
        counts = np.bincount((f * class_count_scale(f, q)).argmax(1), minlength=C)
        want = np.floor(q * 600 + 0.5)
        assert np.abs(counts - want).max() <= 1, (C, counts, want)
    f = rng.dirichlet([200.0, 200.0], size=600)
    q = np.array([0.6, 0.4])
    top = np.argsort(np.log(f[:, 1]) - np.log(f[:, 0]))[::-1][:240]
    labels = (f * class_count_scale(f, q)).argmax(1)
    np.testing.assert_array_equal(np.flatnonzero(labels == 1), np.sort(top))
    by_mass = np.bincount((f * class_mass_scale(f, q)).argmax(1), minlength=2)
    assert by_mass[1] < 60  # the masses match q, the counts do not
    G = class_mass_normalization(np.vstack([np.eye(2), f]), [0, 1], q, match="counts")
    assert np.sum(G[2:].argmax(1) == 1) == 240
    with pytest.raises(ValueError, match="match"):
        class_mass_normalization(f, [0], q, match="count")
