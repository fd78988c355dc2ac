"""Exact enumeration against a brute-force float64 reference (itertools over all Y)."""

import itertools

import jax.numpy as jnp
import numpy as np
import pytest

from graphssl.inference.exact.enumeration import (
    enumerate_configurations,
    enumerate_model,
    exact_expectation,
    exact_log_partition,
    exact_map,
    exact_marginals,
)

from .conftest import small_model


def same_0_2(y):
    """A user statistic: [y_0 = y_2] (module level, so its compile is cached)."""
    return (y[0] == y[2]).astype(jnp.float64)


def brute_force(model):
    """float64 reference: every configuration consistent with the clamped labels."""
    observed = np.asarray(model.observed)
    clamped = np.asarray(model.labels)
    configs = np.array(
        [
            c
            for c in itertools.product(range(model.n_classes), repeat=model.n_nodes)
            if np.all(np.asarray(c)[observed] == clamped[observed])
        ]
    )
    g = model.graph
    s, r, w = (np.asarray(a) for a in (g.senders, g.receivers, g.weights))
    beta, field = float(model.beta), np.asarray(model.field)
    energy = np.array(
        [
            -beta * (0.5 * np.sum(w * (c[s] == c[r])) + field[np.arange(c.size), c].sum())
            for c in configs
        ]
    )
    logw = -energy
    log_z = np.logaddexp.reduce(logw)
    p = np.exp(logw - log_z)
    marg = np.zeros((model.n_nodes, model.n_classes))
    for c, pc in zip(configs, p, strict=True):
        marg[np.arange(c.size), c] += pc
    return configs, energy, log_z, p, marg


@pytest.mark.parametrize("field", [False, True])
@pytest.mark.parametrize("clamped", [False, True])
def test_matches_brute_force(field, clamped):
    model = small_model(n=6, q=3, field=field, clamped=clamped, seed=7)
    configs, energy, log_z, p, marg = brute_force(model)
    res = enumerate_model(model, same_0_2, block_size=50)
    assert res.n_configurations == len(configs)
    np.testing.assert_allclose(res.log_partition, log_z, rtol=1e-12)
    np.testing.assert_allclose(res.marginals, marg, atol=1e-12)
    np.testing.assert_allclose(res.expectation, p @ (configs[:, 0] == configs[:, 2]), atol=1e-12)
    np.testing.assert_allclose(res.map_energy, energy.min(), rtol=1e-12)
    np.testing.assert_array_equal(res.map_labels, configs[np.argmin(energy)])
    if clamped:
        obs = np.asarray(model.observed)
        np.testing.assert_allclose(np.asarray(res.marginals)[obs].max(1), 1.0, atol=1e-12)


def test_helpers_and_pytree_expectation():
    model = small_model(n=5, q=2, field=True, clamped=False, seed=1)
    res = enumerate_model(model)
    assert res.expectation is None
    np.testing.assert_allclose(exact_log_partition(model), res.log_partition)
    np.testing.assert_allclose(exact_marginals(model), res.marginals)
    labels, energy = exact_map(model)
    np.testing.assert_array_equal(labels, res.map_labels)
    out = exact_expectation(model, lambda y: {"y": y.astype(float), "e": model.energy(y)})
    np.testing.assert_allclose(out["y"], res.marginals[:, 1], atol=1e-12)
    configs = enumerate_configurations(model)
    assert configs.shape == (2**5, 5)
    assert len({tuple(c) for c in np.asarray(configs)}) == 2**5


def test_large_beta_no_nan():
    model = small_model(n=6, q=3, field=True, clamped=True, beta=500.0, seed=2)
    res = enumerate_model(model)
    assert np.all(np.isfinite(res.marginals)) and np.isfinite(res.log_partition)
    np.testing.assert_allclose(res.marginals.sum(1), 1.0, atol=1e-12)


def test_too_many_configurations_raises():
    model = small_model(n=8, q=3, clamped=False)
    with pytest.raises(ValueError, match="max_configurations"):
        enumerate_model(model, max_configurations=100)
    with pytest.raises(ValueError, match="block_size"):
        enumerate_model(model, block_size=0)
