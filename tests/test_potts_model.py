"""PottsModel: energy, conditionals and couplings agree with a dense float64 reference."""

import itertools

import jax.numpy as jnp
import numpy as np
import pytest

from graphssl.graph import Graph
from graphssl.models.potts import PottsModel


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
    model, W, field = small_model
    for s in itertools.islice(itertools.product(range(3), repeat=6), 0, 729, 37):
        np.testing.assert_allclose(
            model.energy(jnp.array(s)), _reference_energy(W, field, 1.7, s), rtol=1e-12
        )


def test_conditional_logits_are_energy_differences(small_model):
    model, W, field = small_model
    s = np.array([0, 1, 2, 2, 0, 1])
    logits = np.asarray(model.conditional_logits(jnp.array(s), jnp.arange(6)))
    for i in range(6):
        energies = []
        for c in range(3):
            t = s.copy()
            t[i] = c
            energies.append(_reference_energy(W, field, 1.7, t))
        expected = -np.array(energies)
        np.testing.assert_allclose(logits[i] - logits[i, 0], expected - expected[0], rtol=1e-10)


def test_couplings_field_and_clamping(small_model):
    model, W, field = small_model
    np.testing.assert_allclose(model.coupling_graph().to_scipy().toarray(), 1.7 * W)
    np.testing.assert_allclose(model.unary_logits(), 1.7 * field)
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
