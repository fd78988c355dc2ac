"""PottsModel: energy, conditionals and couplings (all derived from its pairwise tables)
agree with a dense float64 reference."""

import itertools

import jax.numpy as jnp
import numpy as np
import pytest

from graphssl.graph import Graph
from graphssl.models.potts import PottsModel
from graphssl.models.protocol import pairwise_conditional_logits


@pytest.fixture(scope="module")
def small_model():
    rng = np.random.default_rng(3)
    W = np.triu(rng.uniform(0, 1, size=(6, 6)) * (rng.uniform(size=(6, 6)) < 0.6), 1)
    W = W + W.T
    field = rng.normal(size=(6, 3))
    labels = np.array([0, -1, 2, -1, -1, -1])
    model = PottsModel.create(Graph.from_scipy(W), 3, beta=1.7, field=field, labels=labels)
    return model, W, field


def _reference_energy(W, field, beta, s):
    pair = sum(W[i, j] for i in range(len(s)) for j in range(i + 1, len(s)) if s[i] == s[j])
    return -beta * (pair + sum(field[i, s[i]] for i in range(len(s))))


def test_energy_matches_reference(small_model):
    """On the clamped support the energy is beta H (Eq. 11); off it (a clamped node moved)
    it is +inf."""
    model, W, field = small_model
    n_on = n_off = 0
    for s in itertools.islice(itertools.product(range(3), repeat=6), 0, 729, 7):
        energy = float(model.energy(jnp.array(s)))
        if s[0] == 0 and s[2] == 2:
            np.testing.assert_allclose(energy, _reference_energy(W, field, 1.7, s), rtol=1e-12)
            n_on += 1
        else:
            assert energy == np.inf
            n_off += 1
    assert n_on > 5 and n_off > 5
    free = model.unclamped()
    for s in itertools.islice(itertools.product(range(3), repeat=6), 0, 729, 37):
        np.testing.assert_allclose(free.energy(jnp.array(s)), _reference_energy(W, field, 1.7, s),
                                   rtol=1e-12)


def test_conditional_logits_are_energy_differences(small_model):
    model, W, field = small_model
    s = np.array([0, 1, 2, 2, 0, 1])
    logits = np.asarray(pairwise_conditional_logits(model, jnp.array(s), jnp.arange(6)))
    for i in range(6):
        energies = []
        for c in range(3):
            t = s.copy()
            t[i] = c
            energies.append(_reference_energy(W, field, 1.7, t))
            if i not in (0, 2):  # the energy differences the conditionals must reproduce
                energies[-1] = float(model.unclamped().energy(jnp.array(t)))
        expected = -np.array(energies)
        np.testing.assert_allclose(logits[i] - logits[i, 0], expected - expected[0], rtol=1e-10)


def test_couplings_field_and_clamping(small_model):
    model, W, field = small_model
    tables = model.pairwise_tables()
    J = np.zeros((6, 6))
    np.add.at(J, (np.repeat(np.arange(6), tables.neighbor_index.shape[1]),
                  np.asarray(tables.neighbor_index).ravel()), np.asarray(tables.coupling).ravel())
    np.testing.assert_allclose(J, 1.7 * W, rtol=1e-12)
    np.testing.assert_allclose(tables.unary, 1.7 * field)
    np.testing.assert_allclose(model.unary_logits(), tables.unary)
    assert tables.directed_coupling is None  # symmetric input
    assert model.observed.tolist() == [True, False, True, False, False, False]
    assert not np.any(model.unclamped().observed)
    assert float(model.with_beta(0.5).beta) == 0.5


def test_bad_arguments():
    graph = Graph.from_scipy(np.ones((3, 3)))
    with pytest.raises(ValueError, match="labels"):
        PottsModel.create(graph, 2, labels=[0, 2, -1])
    with pytest.raises(ValueError, match="n_classes"):
        PottsModel.create(graph, 1)
    with pytest.raises(ValueError, match="field"):
        PottsModel.create(graph, 2, field=np.zeros((3, 3)))
    with pytest.raises(ValueError, match="asymmetric"):
        PottsModel.create(graph, 2, asymmetric="ignore")


def _pairs_then_reversed():
    """A 6-node weighted graph built the natural way: each pair ``i < j``, then the same
    pairs reversed (senders not sorted), and the same W in the sorted order."""
    i = np.array([0, 1, 2, 3, 4, 0, 0])
    j = np.array([1, 2, 3, 4, 5, 5, 3])
    w = np.array([1.0, 0.5, 1.5, 0.7, 1.2, 0.9, 0.4])
    by_hand = Graph(jnp.asarray(np.r_[i, j], jnp.int32), jnp.asarray(np.r_[j, i], jnp.int32),
                    jnp.asarray(np.r_[w, w]), 6)
    return by_hand, Graph.from_scipy(by_hand.to_scipy())


def test_an_edge_list_in_any_order_gives_the_same_model():
    """``padded_neighbors`` ranked each edge within its sender as if the edges were sorted
    by sender: a hand-built list (pairs, then reversed) dropped the 0-1 edge from the
    table and doubled others; energy, log Z and marginals were silently wrong (fuzz report
    8: log Z 8.367 for 8.633, marginals off by 0.024)."""
    from graphssl.inference import enumerate_model

    by_hand, sorted_graph = _pairs_then_reversed()
    W = sorted_graph.to_scipy().toarray()
    for graph in (by_hand, sorted_graph):
        index, weight = (np.asarray(a) for a in graph.padded_neighbors())
        table = np.zeros((6, 6))
        np.add.at(table, (np.repeat(np.arange(6), index.shape[1]), index.ravel()),
                  weight.ravel())
        np.testing.assert_allclose(table, W)  # every edge once, in its sender's row
    field = np.random.default_rng(0).normal(0, 0.7, (6, 3))
    models = [PottsModel.create(g, 3, beta=1.0, field=field) for g in (by_hand, sorted_graph)]
    y = np.array([0, 0, 1, 0, 2, 1])
    direct = -(0.5 * np.sum(W * (y[:, None] == y[None, :])) + field[np.arange(6), y].sum())
    for model in models:
        assert float(model.energy(y)) == pytest.approx(direct, rel=1e-12)
    exact = [enumerate_model(m) for m in models]
    assert float(exact[0].log_partition) == pytest.approx(float(exact[1].log_partition),
                                                          rel=1e-12)
    np.testing.assert_allclose(exact[0].marginals, exact[1].marginals, atol=1e-12)


def test_the_boltzmann_mrf_of_shuffled_pairs_is_the_same_law():
    from graphssl.inference import enumerate_model
    from graphssl.models.boltzmann import basic_boltzmann, knn_pairs, pair_geometry

    rng = np.random.default_rng(4)
    X = rng.normal(size=(7, 2))
    order = np.argsort(((X[:, None] - X[None]) ** 2).sum(-1), axis=1)[:, 1:3]
    s, r, _ = knn_pairs(order)
    shuffle = rng.permutation(s.size)
    labels = np.array([0, -1, 1, -1, -1, -1, 1])
    laws = [enumerate_model(basic_boltzmann(pair_geometry(X, pairs=pairs), 0.8, labels, 2))
            for pairs in ((s, r), (s[shuffle], r[shuffle]))]
    assert float(laws[0].log_partition) == pytest.approx(float(laws[1].log_partition),
                                                         rel=1e-12)
    np.testing.assert_allclose(laws[0].marginals, laws[1].marginals, atol=1e-12)


def test_a_float32_energy_that_fits_does_not_overflow_on_the_way():
    """The coupling sum added both stored directions of each edge before halving: couplings
    near 3e37 gave -inf in float32 where the energy, -2.36e38, fits (a MAP of -inf in the
    chains, without a word)."""
    import jax

    W = np.zeros((7, 7))
    rng = np.random.default_rng(5)
    for i, j in [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 0), (0, 3), (2, 5)]:
        W[i, j] = W[j, i] = (0.5 + rng.random()) * 3e37
    with jax.enable_x64(False):
        model = PottsModel.create(Graph.from_scipy(W, dtype=np.float32), 3, beta=1.0)
        energy = float(model.energy(np.zeros(7, np.int32)))
    assert energy == pytest.approx(-0.5 * W.sum(), rel=1e-6)
