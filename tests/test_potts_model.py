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
