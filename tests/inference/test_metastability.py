"""The one-class probe of :mod:`graphssl.inference.mcmc.metastability`: on a model with two
macrostates apart, chains started at the labels' domains stay there (and agree), the
probe's merged chains stay merged far below them, and the report says metastable; on the
same graph weakly coupled the probe relaxes and it does not."""

import jax
import numpy as np
import pytest

from graphssl.graph import Graph
from graphssl.inference import sample_chains, swendsen_wang
from graphssl.inference.mcmc.metastability import (
    metastability_report,
    one_class_starts,
)
from graphssl.models.potts import PottsModel

N, HALF, EVIDENCE = 30, 15, 3.0
LABELLED = {0: (0, 1, 2, 3, 4), 1: (15, 16, 17, 18, 19)}  # five soft labels a half


CROSS = 4  # edges from each node of one half to the other


def _model(beta: float) -> tuple[PottsModel, np.ndarray]:
    """Two cliques of 15 nodes (weights 1) joined by ``CROSS`` edges a node, soft labels as
    logits of ``EVIDENCE`` on five nodes of each half (no clamps): the two halves' domains
    cost ``beta 15 CROSS`` of cut coupling, a merged state ``5 EVIDENCE`` of overruled
    labels, and a node leaving its domain ``beta (14 - CROSS)`` or more."""
    dense = np.zeros((N, N))
    dense[:HALF, :HALF] = dense[HALF:, HALF:] = 1.0
    for i in range(HALF):
        for k in range(CROSS):
            dense[i, HALF + (i + k) % HALF] = dense[HALF + (i + k) % HALF, i] = 1.0
    np.fill_diagonal(dense, 0.0)
    labels = np.full(N, -1)
    field = np.zeros((N, 2))
    for c, nodes in LABELLED.items():
        labels[list(nodes)] = c
        field[list(nodes), c] = EVIDENCE / beta  # the model's logits are beta * field
    return PottsModel.create(Graph.from_scipy(dense), 2, beta=beta, field=field), labels


def _report(beta: float):
    model, labels = _model(beta)
    domains = np.r_[np.zeros(HALF, np.int32), np.ones(HALF, np.int32)]
    kernel = swendsen_wang()
    posterior = sample_chains(kernel, model, jax.random.key(0), n_chains=4, n_samples=200,
                              burn_in=20, init_labels=np.tile(domains, (4, 1)))
    probe = sample_chains(kernel, model, jax.random.key(1), n_chains=2, n_samples=100,
                          burn_in=50, init_labels=one_class_starts(N, 2))
    return metastability_report(posterior.energy, probe.labels, probe.energy, labels, 2), \
        posterior


def test_one_class_starts_put_every_node_in_one_class():
    np.testing.assert_array_equal(one_class_starts(3, 2), [[0, 0, 0], [1, 1, 1]])


def test_probe_finds_the_merged_state_the_posterior_chains_never_visit():
    report, posterior = _report(beta=0.5)
    # every posterior chain stays in the domains (a node of a half leaves now and then)
    draws = np.asarray(posterior.labels)
    assert np.all(np.mean(draws[..., :HALF] == 0, axis=(1, 2)) > 0.95)
    assert np.all(np.mean(draws[..., HALF:] == 1, axis=(1, 2)) > 0.95)
    assert report.stays.all() and report.metastable
    # the gap is the cut (0.5 * 15 * 4) less the overruled labels' evidence (5 * 3)
    assert report.gap == pytest.approx(0.5 * HALF * CROSS - 5 * EVIDENCE, rel=0.2)


def test_weak_coupling_lets_the_probe_relax():
    report, _ = _report(beta=0.02)
    assert not report.stays.any() and not report.metastable
    assert abs(report.gap) < 3 * report.posterior_spread  # the probes relax to the same law
