"""Small Potts models (<= 12 nodes, 2-3 labels) shared by the inference tests."""

import numpy as np
import pytest

from graphssl.graph import Graph
from graphssl.inference.exact.enumeration import enumerate_model
from graphssl.models.potts import PottsModel


def random_graph(n: int, density: float, seed: int) -> Graph:
    """A connected-ish random weighted graph (a ring plus random chords), both directions."""
    rng = np.random.default_rng(seed)
    upper = np.triu(rng.uniform(0.3, 1.2, (n, n)) * (rng.random((n, n)) < density), 1)
    ring = np.arange(n)
    upper[ring[:-1], ring[1:]] = rng.uniform(0.3, 1.2, n - 1)
    return Graph.from_scipy(upper + upper.T)


def small_model(n=8, q=3, field=True, clamped=True, beta=1.2, seed=0) -> PottsModel:
    """Potts model on ``random_graph``; clamps nodes 1 and 4 (labels 2 and 1) if asked."""
    rng = np.random.default_rng(seed + 100)
    graph = random_graph(n, 0.35, seed)
    labels = np.full(n, -1)
    if clamped:
        labels[1], labels[4] = 2 % q, 1
    theta = rng.normal(0.0, 0.7, (n, q)) if field else None
    return PottsModel.create(graph, q, beta=beta, field=theta, labels=labels)


VARIANTS = [(False, False), (False, True), (True, False), (True, True)]


@pytest.fixture(scope="session")
def models():
    """Four variants keyed (field?, clamped?) on ONE 8-node graph with 3 classes, so every
    kernel compiles once for all of them (same shapes)."""
    return {(f, c): small_model(field=f, clamped=c, seed=0) for f, c in VARIANTS}


@pytest.fixture(scope="session")
def exact(models):
    """Exact enumeration of each variant."""
    return {key: enumerate_model(m) for key, m in models.items()}


def mc_z_scores(samples, exact_marginals) -> np.ndarray:
    """|empirical - exact| / MC standard error, per (node, class).

    The s.e. comes from independent chains: the spread of the per-chain marginal estimates
    divided by sqrt(n_chains) (honest for any within-chain autocorrelation). Cells whose
    exact marginal is 0 or 1 (clamped nodes) must match exactly and get z = 0 or inf.
    """
    labels = np.asarray(samples.labels)
    q = exact_marginals.shape[1]
    per_chain = np.stack([(labels == c).mean(axis=1) for c in range(q)], axis=-1)
    mean = per_chain.mean(axis=0)
    se = per_chain.std(axis=0, ddof=1) / np.sqrt(per_chain.shape[0])
    err = np.abs(mean - np.asarray(exact_marginals))
    degenerate = se < 1e-12
    scaled = err / np.where(degenerate, 1.0, se)
    return np.where(degenerate, np.where(err < 1e-9, 0.0, np.inf), scaled)


def assert_matches_exact(samples, exact_result, n_se: float = 4.0):
    """Every per-node marginal within ``n_se`` Monte-Carlo standard errors of enumeration."""
    z = mc_z_scores(samples, exact_result.marginals)
    assert np.all(z < n_se), f"max z = {z.max():.2f} at {np.unravel_index(z.argmax(), z.shape)}"


@pytest.fixture(scope="session")
def kernels(models):
    """One instance of each kernel, shared by all test modules (compiled scans are cached
    per kernel object, so sharing them keeps the compile count small)."""
    from graphssl.inference import (
        chromatic_gibbs,
        compose,
        permutation_move,
        sequential_gibbs,
        swendsen_wang,
    )

    graph = models[(False, False)].graph
    chromatic = chromatic_gibbs(graph)
    return {
        "sequential": sequential_gibbs(),
        "chromatic": chromatic,
        "swendsen_wang": swendsen_wang(),
        "chromatic+perm": compose(chromatic, permutation_move()),
        "sw+perm_barker": compose(swendsen_wang(), permutation_move(rule="barker")),
    }


N_CHAINS, N_SAMPLES, BURN_IN = 64, 300, 20
