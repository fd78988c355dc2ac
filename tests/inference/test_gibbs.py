"""Gibbs kernels (Zhu & Ghahramani Sec. 3.2) against exact enumeration."""

import jax
import numpy as np
import pytest

from graphssl.inference import chromatic_gibbs, sample_chains
from graphssl.inference.gibbs import color_classes, greedy_coloring

from .conftest import BURN_IN, N_CHAINS, N_SAMPLES, VARIANTS, assert_matches_exact, random_graph


@pytest.mark.parametrize("name", ["sequential", "chromatic"])
def test_gibbs_matches_enumeration(kernels, models, exact, name):
    for variant in VARIANTS:
        samples = sample_chains(
            kernels[name], models[variant], jax.random.key(11), n_chains=N_CHAINS,
            n_samples=N_SAMPLES, burn_in=BURN_IN,
        )
        assert_matches_exact(samples, exact[variant])
        observed = np.asarray(models[variant].observed)
        clamped = np.asarray(models[variant].labels)[observed]
        assert np.all(np.asarray(samples.labels)[:, :, observed] == clamped)


def test_unclamped_phase_frees_labelled_nodes(kernels, models):
    model = models[(True, True)]
    samples = sample_chains(kernels["chromatic"], model.unclamped(), jax.random.key(2),
                            n_chains=N_CHAINS, n_samples=N_SAMPLES, burn_in=BURN_IN)
    observed = np.asarray(model.observed)
    assert len(np.unique(np.asarray(samples.labels)[:, :, observed])) > 1


def test_greedy_coloring_is_proper():
    graph = random_graph(60, 0.15, seed=5)
    s, r = np.asarray(graph.senders), np.asarray(graph.receivers)
    for order in ("largest_first", "natural"):
        colors = greedy_coloring(graph, order=order)
        assert np.all(colors[s] != colors[r])
        assert colors.max() <= np.bincount(s).max()
        classes = color_classes(colors)
        assert sum(c.size for c in classes) == graph.n_nodes
    with pytest.raises(ValueError, match="proper colouring"):
        chromatic_gibbs(graph, colors=np.zeros(graph.n_nodes, int))
