"""Graph mincut (Blum & Chawla 2001): exactness against brute force, the smallest-V+ rule,
Lemma 3.4, Theorems 3.1 / 3.2, the MRF-MAP view, weighting schemes and the estimator."""

import itertools

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from graphssl.inference.optimize.maxflow import (
    METHODS,
    alpha_expansion,
    iterative_relabelling,
    mincut_classify,
    mincut_labels,
    mincut_map,
    mincut_networkx,
    minimum_cut,
)
from graphssl.models import mincut as mc


def _random_problem(rng, n, *, integer=False, density=0.5, n_labelled=3):
    A = rng.integers(0, 4, (n, n)) if integer else rng.exponential(1.0, (n, n))
    A = A * (rng.random((n, n)) < density)
    W = np.triu(A, 1)
    W = (W + W.T).astype(float)
    labels = -np.ones(n, dtype=np.int64)
    picked = rng.choice(n, n_labelled, replace=False)
    labels[picked] = rng.integers(0, 2, n_labelled)
    labels[picked[0]], labels[picked[1]] = 1, 0
    return W, labels


def _brute_force(W, labels, n_classes=2):
    """All minimisers of the cut over the labellings of U (exhaustive, vectorised)."""
    free = np.flatnonzero(labels < 0)
    Y = np.tile(labels, (n_classes**free.size, 1))
    Y[:, free] = np.array(list(itertools.product(range(n_classes), repeat=free.size)))
    onehot = (Y[:, :, None] == np.arange(n_classes)).astype(float)  # [M, n, C]
    same = np.einsum("mic,ij,mjc->m", onehot, W, onehot)
    values = 0.5 * (W.sum() - same)
    best = values.min()
    return best, Y[values <= best + 1e-9]


@pytest.fixture(scope="module")
def problems():
    rng = np.random.default_rng(0)
    out = [_random_problem(rng, int(rng.integers(5, 15))) for _ in range(12)]
    out += [_random_problem(rng, int(rng.integers(5, 15)), integer=True) for _ in range(12)]
    out.append(_random_problem(rng, 16, density=0.3))
    return [(W, y, *_brute_force(W, y)) for W, y in out]


@pytest.mark.parametrize("method", METHODS)
def test_cut_equals_brute_force_minimum(problems, method):
    for W, y, best, _ in problems:
        out, result = mincut_labels(W, y, method=method)
        assert result.cut_value == pytest.approx(best, rel=1e-9, abs=1e-9)
        assert mc.cut_value(W, out) == pytest.approx(best, rel=1e-9, abs=1e-9)
        assert result.flow_value == pytest.approx(best, rel=1e-6, abs=1e-6)
        assert np.array_equal(out[y >= 0], y[y >= 0])


@pytest.mark.parametrize("method", METHODS)
def test_smallest_positive_side_among_minimum_cuts(problems, method):
    """Sec. 2 step 4: V+ is the intersection of the V+ of all minimum cuts (integer weights
    give many ties); also checked on a graph whose unlabelled part is disconnected."""
    for W, y, _, solutions in problems:
        out, _ = mincut_labels(W, y, method=method)
        assert np.array_equal(out == 1, np.all(solutions == 1, axis=0))
    # an isolated unlabelled pair can take either label at no cost: smallest V+ says 0
    W = np.zeros((5, 5))
    W[0, 1] = W[1, 0] = W[3, 4] = W[4, 3] = 1.0
    out, result = mincut_labels(W, np.array([1, -1, 0, -1, -1]), method=method)
    assert result.cut_value == 0.0
    assert out.tolist() == [1, 1, 0, 0, 0]


@pytest.mark.parametrize("method", METHODS)
def test_lemma_3_4_on_every_output(problems, method):
    """f(x) = Sgn(sum_u w(x,u) f(u)) for every unlabelled x, Sgn(0) = -1 (smallest V+)."""
    for W, y, _, _ in problems:
        out, _ = mincut_labels(W, y, method=method)
        vote = mc.weighted_vote(W, out)
        free = y < 0
        assert np.all((vote[free] > 0) == (out[free] == 1))


def test_terminal_capacity_never_cut(problems):
    for W, y, best, _ in problems:
        net = mc.cut_network(W, y)
        assert net.terminal_capacity > mc.potts_energy(W, np.where(y == 1, 1, 0)) >= best - 1e-9
        result = minimum_cut(net)
        assert result.cut_value < net.terminal_capacity


def test_methods_agree_on_a_knn_graph():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 2))
    idx = mc.neighbors_from_distances(mc.euclidean_distances(X), 6)
    W = mc.exponential_knn_weights(idx, np.take_along_axis(
        mc.euclidean_distances(X), idx, 1), scale=0.3)
    y = -np.ones(300, dtype=np.int64)
    y[:10] = (X[:10, 0] > 0).astype(int)
    outs = [mincut_labels(W, y, method=m) for m in METHODS]
    values = [r.cut_value for _, r in outs]
    assert values[0] == pytest.approx(values[2], rel=1e-12)
    assert values[1] <= values[0] + outs[1][1].info.rounding_bound
    assert np.array_equal(outs[0][0], outs[2][0])


def test_theorem_3_1_one_nn_cut_is_loocv_error():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(10, 2))
    D = mc.euclidean_distances(X)
    nn = mc.neighbors_from_distances(D, 1)[:, 0]
    W = mc.nearest_neighbor_weights(nn[:, None])
    for bits in itertools.product((0, 1), repeat=10):
        f = np.array(bits)
        assert mc.cut_value(W, f) == np.sum(f != f[nn])


def test_theorem_3_2_cut_is_l1_loocv_error_of_averaging_knn():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(9, 3))
    idx = mc.neighbors_from_distances(mc.euclidean_distances(X), 3)
    W = mc.averaging_knn_weights(idx, 3)
    for bits in itertools.product((0, 1), repeat=9):
        f = np.array(bits)
        prediction = f[idx].mean(axis=1)  # averaging 3-NN, leave-one-out
        assert mc.cut_value(W, f) == pytest.approx(np.sum(np.abs(f - prediction)))
    with pytest.raises(ValueError, match="sum to 1"):
        mc.locally_weighted_average_weights(np.ones((3, 3)) - np.eye(3))


def test_mincut_is_map_of_clamped_potts_model():
    """Sec. 4: the cut labelling has the exhaustive minimum energy of PottsModel (beta = 1),
    energy = cut - sum w; a Gibbs chain's best state never beats it."""
    from graphssl.inference.exact.enumeration import exact_map

    rng = np.random.default_rng(5)
    n = 12
    for _ in range(3):
        A = np.triu(rng.exponential(1.0, (n, n)), 1)
        W = A + A.T
        y = -np.ones(n, dtype=np.int64)
        y[:3] = [1, 0, 1]
        model = mc.potts_model(W, y)
        out, result = mincut_labels(W, y)
        _, map_energy = exact_map(model)
        energy = float(model.energy(np.asarray(out, dtype=np.int32)))
        assert energy == pytest.approx(float(map_energy), abs=1e-9)
        assert energy == pytest.approx(result.cut_value - np.triu(W, 1).sum(), abs=1e-9)
        solution, info = mincut_map(model)
        assert np.array_equal(solution, out) and info.exact
    _assert_sampler_never_beats(model, energy, rng)  # one JAX compile: the last graph only


def _assert_sampler_never_beats(model, energy, rng):
    """The package's Gibbs sampler (graphssl.inference.mcmc.gibbs + chains): its lowest-energy
    draw is never below the cut's energy."""
    import jax

    from graphssl.inference.mcmc.chains import sample_chains
    from graphssl.inference.mcmc.gibbs import sequential_gibbs

    key = jax.random.key(int(rng.integers(2**31)))
    samples = sample_chains(sequential_gibbs(), model, key, n_chains=2, n_samples=60, burn_in=5)
    assert float(samples.map_energy) >= energy - 1e-9
    assert float(samples.map_energy) <= energy + 5.0  # the chains did reach low energies


def test_mincut_map_with_field_matches_enumeration():
    from graphssl.inference.exact.enumeration import exact_map

    rng = np.random.default_rng(6)
    n = 10
    A = np.triu(rng.exponential(1.0, (n, n)), 1)
    W = A + A.T
    y = -np.ones(n, dtype=np.int64)
    y[:2] = [1, 0]
    field = rng.normal(size=(n, 2))
    model = mc.potts_model(W, y)
    import dataclasses

    import jax.numpy as jnp

    model = dataclasses.replace(model, field=jnp.asarray(field), beta=jnp.asarray(0.7))
    solution, _ = mincut_map(model)
    _, map_energy = exact_map(model)
    assert float(model.energy(jnp.asarray(solution, jnp.int32))) == pytest.approx(
        float(map_energy), abs=1e-9
    )


def test_alpha_expansion_multiclass_within_factor_two():
    rng = np.random.default_rng(7)
    for _ in range(5):
        n = 9
        A = np.triu(rng.exponential(1.0, (n, n)) * (rng.random((n, n)) < 0.6), 1)
        W = A + A.T
        y = -np.ones(n, dtype=np.int64)
        y[:3] = [0, 1, 2]
        best, _ = _brute_force(W, y, n_classes=3)
        out, info = alpha_expansion(W, y, n_classes=3)
        assert info.converged
        assert info.energy == pytest.approx(mc.potts_energy(W, out))
        assert best - 1e-9 <= info.energy <= 2 * best + 1e-9
        assert np.array_equal(out[:3], [0, 1, 2])
        same, _ = mincut_classify(W, y)
        assert np.array_equal(same, out)


def test_hill_climber_reaches_a_local_optimum_no_better_than_mincut(problems):
    for W, y, best, _ in problems:
        out, info = iterative_relabelling(W, y, seed=1)
        assert info.converged and info.energy >= best - 1e-9
        vote = mc.weighted_vote(W, out)
        free = y < 0  # local optimum: no single flip lowers the cut
        sign = np.where(out == 1, 1.0, -1.0)
        assert np.all(sign[free] * vote[free] >= 0)


def test_infos_are_named_tuples_with_documented_fields(problems):
    """Issue 23: every host-side solver's info is a NamedTuple (attribute access, fields
    named in its docstring); fields a back end does not produce are None."""
    from graphssl.inference.optimize import maxflow

    W, y, best, _ = problems[0]
    net = mc.cut_network(W, y)
    scipy_info = minimum_cut(net, "scipy").info
    assert isinstance(scipy_info, maxflow.CutInfo) and scipy_info.method == "scipy"
    assert scipy_info.rounding_bound > 0 and scipy_info.reordered is None
    bk_info = minimum_cut(net, "pymaxflow").info
    assert bk_info.reordered is False and bk_info.scale is None and bk_info.seconds >= 0
    three = y.copy()
    three[np.flatnonzero(y < 0)[0]] = 2
    _, expansion = alpha_expansion(W, three)
    assert expansion._fields == ("energy", "sweeps", "moves", "converged")
    _, relabel = iterative_relabelling(W, y, seed=0)
    assert relabel._fields == ("energy", "sweeps", "flips", "converged")
    _, binary = mincut_classify(W, y)
    assert binary.energy == pytest.approx(best) and binary.expansion is None
    assert binary.cut.method in METHODS
    _, multi = mincut_classify(W, three)
    assert multi.cut is None and multi.energy == multi.expansion.energy
    _, info = mincut_map(mc.potts_model(W, y))
    assert {"iterations", "residual", "converged", "exact", "energy", "sweeps",
            "moves"} <= set(info._fields)
    assert info.iterations == info.sweeps and info.exact
    for name in ("CutInfo", "ExpansionInfo", "RelabelInfo", "MincutInfo", "MincutMapInfo"):
        assert name in maxflow.__all__ and getattr(maxflow, name).__doc__

def test_networkx_in_and_out():
    g = nx.path_graph(6)
    nx.set_edge_attributes(g, 1.0, "weight")
    g[2][3]["weight"] = 0.25
    g.nodes[0]["label"], g.nodes[5]["label"] = 1, 0
    h = mincut_networkx(g)
    assert [h.nodes[v]["mincut_label"] for v in h] == [1, 1, 1, 0, 0, 0]
    assert h.graph["cut_value"] == 0.25
    net = mc.cut_network(nx.to_scipy_sparse_array(g), np.array([1, -1, -1, -1, -1, 0]))
    value, _ = nx.minimum_cut(net.to_networkx(), "v+", "v-")
    assert value == 0.25


def test_alpha_scaling_of_unlabelled_edges():
    W = sp.csr_matrix(np.array([[0, 1, 2.0], [1, 0, 4], [2, 4, 0]]))
    scaled = mc.scale_unlabelled_edges(W, np.array([True, False, False]), 0.5).toarray()
    assert scaled[1, 2] == 2.0 and scaled[0, 1] == 1.0 and scaled[0, 2] == 2.0
    with pytest.raises(ValueError, match="alpha"):
        mc.scale_unlabelled_edges(W, np.array([True, False, False]), -1.0)


def test_delta_rules_and_weights():
    rng = np.random.default_rng(8)
    X = np.concatenate([rng.normal(0, 0.1, (20, 2)), rng.normal(3, 0.1, (20, 2))])
    D = mc.euclidean_distances(X)
    y = -np.ones(40, dtype=np.int64)
    y[[0, 20]] = [1, 0]
    d0 = mc.delta_zero(D, y, y >= 0)
    _, r0 = mincut_labels(mc.delta_weights(D, d0), y)
    _, r1 = mincut_labels(mc.delta_weights(D, np.nextafter(d0, np.inf)), y)
    assert r0.cut_value == 0 and r1.cut_value > 0
    dh = mc.delta_half(D)
    comps = sp.csgraph.connected_components(mc.delta_weights(D, dh))[1]
    assert np.bincount(comps).max() >= 20
    comps = sp.csgraph.connected_components(mc.delta_weights(D, np.nextafter(dh, 0)))[1]
    assert np.bincount(comps).max() < 20
    W3 = mc.mincut3_weights(D, y >= 0)
    assert W3[5, 0] == 1 and W3[25, 20] == 1 and (W3 != W3.T).nnz == 0


def test_information_gain_distance():
    codes = np.array([[0, 0], [0, 1], [1, 0], [1, 1]])
    y = np.array([0, 0, 1, 1])
    gains = mc.information_gain(codes, y, np.ones(4, bool))
    assert gains == pytest.approx([1.0, 0.0])
    D = mc.information_gain_distances(codes, gains, b=2.0, c=1.0)
    assert D[0, 1] == pytest.approx(np.log(2.0))
    assert D[0, 2] == pytest.approx(np.log1p(np.exp(2.0)))
    assert mc.hamming_distances(codes)[0, 3] == 2


def test_missing_values_as_wildcards():
    """``missing``: an attribute unknown in either example is not counted; per-attribute
    codes (-1: the attribute has no unknown value) leave the other attributes' code 0 alone."""
    codes = np.array([[0, 2, 0], [1, 2, 1], [2, 0, 0]])
    assert mc.hamming_distances(codes).tolist() == [[0, 2, 2], [2, 0, 3], [2, 3, 0]]
    assert mc.hamming_distances(codes, missing=0).tolist() == [[0, 0, 0], [0, 0, 1],
                                                               [0, 1, 0]]
    per_attribute = np.array([0, -1, -1])  # only the first attribute's 0 means "?"
    assert mc.hamming_distances(codes, missing=per_attribute).tolist() == [[0, 1, 1],
                                                                           [1, 0, 3],
                                                                           [1, 3, 0]]
    gains = np.array([0.5, 1.0, 0.0])
    cost = np.logaddexp(0.0, 10.0 * gains)
    D = mc.information_gain_distances(codes, gains, missing=per_attribute)
    np.testing.assert_allclose(D[1], [cost[2], 0.0, cost[0] + cost[1] + cost[2]])


def test_information_gain_b_reorders_nearest_examples():
    """Sec. 5.1 says b and c only move the delta at which the Mincut-delta variants settle;
    they do change which example is nearest: at small b the order is Hamming's, at large b
    the gain-weighted one."""
    codes = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 1]])
    gains = np.array([0.9, 0.1, 0.1])
    small = mc.information_gain_distances(codes, gains, b=0.1)
    large = mc.information_gain_distances(codes, gains, b=100.0)
    assert small[0, 1] < small[0, 2]  # one differing attribute beats two
    assert large[0, 1] > large[0, 2]  # one high-gain attribute costs more than two low-gain


def test_bad_input_is_rejected():
    W = np.array([[0, 1.0], [2.0, 0]])
    with pytest.raises(ValueError, match="symmetric"):
        mc.cut_network(W, np.array([1, 0]))
    with pytest.raises(ValueError, match="labels"):
        mc.cut_network(np.array([[0, 1.0], [1.0, 0]]), np.array([2, 0]))
    with pytest.raises(ValueError, match="method"):
        minimum_cut(mc.cut_network(np.array([[0, 1.0], [1.0, 0]]), np.array([1, 0])), "x")


def test_estimator_schemes_and_errors():
    from graphssl.estimators.mincut import MincutClassifier

    rng = np.random.default_rng(9)
    X = np.concatenate([rng.normal(0, 0.3, (30, 2)), rng.normal(4, 0.3, (30, 2))])
    truth = np.repeat([0, 1], 30)
    y = -np.ones(60, dtype=np.int64)
    y[[0, 1, 30, 31]] = truth[[0, 1, 30, 31]]
    for scheme in ("knn", "mincut3", "delta_zero"):
        clf = MincutClassifier(k=5, scheme=scheme).fit(X, y)
        assert np.array_equal(clf.transduction_, truth), scheme
        assert clf.cut_value_ >= 0
    assert np.array_equal(clf.predict(np.array([[0.1, 0.0], [4.1, 3.9]])), [0, 1])
    three = np.where(y >= 0, y, -1)
    three[[2, 3]] = 2  # a third class: alpha-expansion path
    clf = MincutClassifier(scheme="mincut3").fit(X, three)
    assert clf.label_distributions_.shape == (60, 3)
    with pytest.raises(ValueError, match="scheme"):
        MincutClassifier(scheme="bogus").fit(X, y)
    with pytest.raises(ValueError, match="delta"):
        MincutClassifier(scheme="delta").fit(X, y)
    with pytest.raises(ValueError, match="metric"):
        MincutClassifier(scheme="mincut3", metric="cosine").fit(X, y)


def test_bk_locality_reordering_changes_nothing(problems):
    from graphssl.inference.optimize.maxflow import _pymaxflow

    for W, y, best, solutions in problems:
        net = mc.cut_network(W, y)
        side, flow, info = _pymaxflow(net, reorder=True)
        assert info["reordered"] and flow == pytest.approx(best, abs=1e-9)
        assert np.array_equal(side | ((y == 1) & (y >= 0)), np.all(solutions == 1, axis=0))


def test_arc_network_cut_is_the_directed_minimum():
    """arc_network (a Table 1 protocol variant): the minimum cut over directed arcs equals
    the exhaustive minimum of sum_{i in V+, j in V-} arcs[i, j] with the clamps respected; with
    symmetric arcs it is the undirected network of Sec. 2 (same cut, same smallest V+)."""
    rng = np.random.default_rng(5)
    for _ in range(10):
        n = int(rng.integers(5, 12))
        A = rng.exponential(1.0, (n, n)) * (rng.random((n, n)) < 0.5)
        np.fill_diagonal(A, 0.0)
        _, labels = _random_problem(rng, n)
        free = np.flatnonzero(labels < 0)
        Y = np.tile(labels, (2**free.size, 1))
        Y[:, free] = np.array(list(itertools.product((0, 1), repeat=free.size)))
        values = np.einsum("mi,ij,mj->m", (Y == 1).astype(float), A, (Y == 0).astype(float))
        result = minimum_cut(mc.arc_network(sp.csr_matrix(A), labels))
        assert result.cut_value == pytest.approx(values.min(), rel=1e-9, abs=1e-12)
        side = result.source_side.astype(np.int64)
        assert np.array_equal(side[labels >= 0], labels[labels >= 0])
        W = A + A.T
        undirected, _ = mincut_labels(W, labels)
        symmetric = minimum_cut(mc.arc_network(sp.csr_matrix(W), labels)).source_side
        assert np.array_equal(np.where(labels >= 0, labels, symmetric), undirected)
    with pytest.raises(ValueError, match="arcs"):
        mc.arc_network(-np.eye(3), np.array([1, 0, -1]))


def test_degenerate_cut_is_reported():
    """Issue 25: a minimum cut that only cuts labelled nodes off is the model's minimum (the
    CiteSeer cosine-kNN case): reported in info and by the estimator, not hidden."""
    import warnings

    from graphssl.estimators import MincutClassifier
    from graphssl.inference.optimize.maxflow import mincut_classify

    # a clique of 6 unlabelled nodes; labelled nodes 6 (class 0, strong edges), 7 and 8
    # (classes 1 and 2, one weak edge each): the cut isolates 7 and 8 (cost 0.2)
    n = 9
    W = np.zeros((n, n))
    W[:6, :6] = 1.0
    W[6, :6] = W[:6, 6] = 1.0
    W[7, 0] = W[0, 7] = 0.1
    W[8, 1] = W[1, 8] = 0.1
    np.fill_diagonal(W, 0.0)
    labels = np.array([-1] * 6 + [0, 1, 2])
    out, info = mincut_classify(W, labels)
    assert np.all(out[:6] == 0) and info.energy == pytest.approx(0.2)
    np.testing.assert_array_equal(info.degenerate_classes, [1, 2])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf = MincutClassifier().fit_graph(W, labels)
    np.testing.assert_array_equal(clf.degenerate_classes_, [1, 2])
    assert any("no unlabelled node" in str(w.message) for w in caught)
    two = np.kron(np.eye(2), np.ones((4, 4))) + 0.01  # two cliques, weakly joined
    np.fill_diagonal(two, 0.0)
    _, info = mincut_classify(two, np.array([0, -1, -1, -1, 1, -1, -1, -1]))
    assert info.degenerate_classes.size == 0
