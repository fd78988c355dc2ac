"""Swendsen–Wang (Zhu & Ghahramani Sec. 3.4, Eqs. 28-35) against enumeration and scipy."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.sparse import csgraph, csr_matrix

from graphssl.inference import connected_components, sample_chains
from graphssl.inference.mcmc.swendsen_wang import sample_bonds

from .conftest import (
    BURN_IN,
    N_CHAINS,
    N_SAMPLES,
    VARIANTS,
    assert_matches_exact,
    random_graph,
    small_model,
)


def test_swendsen_wang_matches_enumeration(kernels, models, exact):
    for variant in VARIANTS:
        samples = sample_chains(
            kernels["swendsen_wang"], models[variant], jax.random.key(5), n_chains=N_CHAINS,
            n_samples=N_SAMPLES, burn_in=BURN_IN,
        )
        assert_matches_exact(samples, exact[variant])
        stats = samples.stats
        n = models[variant].n_nodes
        assert np.all((stats["n_clusters"] >= 1) & (stats["n_clusters"] <= n))
        assert np.all(stats["component_rounds"] >= 1)
        assert np.all(stats["max_cluster_size"] * stats["n_clusters"] >= n)


@pytest.mark.parametrize("seed", [0, 1])
def test_components_match_scipy(seed):
    graph = random_graph(300, 0.004, seed=seed)
    rng = np.random.default_rng(seed)
    s, r = np.asarray(graph.senders), np.asarray(graph.receivers)
    active = rng.random(s.size) < 0.4
    root, rounds = connected_components(graph.senders, graph.receivers, jnp.asarray(active), 300)
    root = np.asarray(root)
    n_ref, ref = csgraph.connected_components(
        csr_matrix((np.ones(active.sum()), (s[active], r[active])), shape=(300, 300)),
        directed=False,
    )
    assert len(np.unique(root)) == n_ref
    # same partition: the map ref-component -> root is a bijection, roots are component minima
    pairs = set(zip(ref.tolist(), root.tolist(), strict=True))
    assert len(pairs) == n_ref
    assert np.all(root[root] == root) and np.all(root <= np.arange(300))
    assert int(rounds) >= 1


def test_bond_probability():
    """Eq. (34): each listed pair bonds with 1 - exp(-J) between equal labels, never between
    different ones; the pair list of the tables holds every coupled pair once."""
    from graphssl.models.protocol import bond_list, bond_slots, pairwise_tables

    senders = jnp.asarray([0, 1], jnp.int32)
    receivers = jnp.asarray([1, 2], jnp.int32)
    couplings = jnp.asarray([0.7, 2.0])
    labels = jnp.asarray([0, 0, 1], jnp.int32)
    keys = jax.random.split(jax.random.key(0), 20000)
    bonds = jax.vmap(lambda k: sample_bonds(k, labels, senders, receivers, couplings))(keys)
    bonds = np.asarray(bonds)
    freq = bonds[:, 0].mean()
    p = 1 - np.exp(-0.7)
    assert abs(freq - p) < 4 * np.sqrt(p * (1 - p) / 20000)
    assert not bonds[:, 1].any()
    model = small_model(n=10, q=3)
    tables = pairwise_tables(model)
    W = model.graph.to_scipy().toarray() * float(model.beta)
    assert tables.bond_slots is not None  # PottsModel caches the pair list
    for t, slots in ((tables, None), (tables._replace(bond_slots=None), None),
                     (tables._replace(bond_slots=None), bond_slots(tables.neighbor_index))):
        s, r, j = (np.asarray(a) for a in bond_list(t, slots))
        listed = np.zeros_like(W)
        np.add.at(listed, (s, r), j)
        np.testing.assert_allclose(listed, np.triu(W, 1), rtol=1e-12)


def test_clamped_clusters_keep_labels(kernels, models):
    """A cluster holding a clamped node keeps its (clamped) label: clamped nodes never move,
    and at huge coupling every node joins its clamped neighbours' cluster."""
    model = models[(False, True)].with_beta(60.0)
    samples = sample_chains(kernels["swendsen_wang"], model, jax.random.key(1), n_chains=N_CHAINS,
                            n_samples=N_SAMPLES, burn_in=BURN_IN)
    observed = np.asarray(model.observed)
    assert np.all(np.asarray(samples.labels)[:, :, observed] == np.asarray(model.labels)[observed])
    assert np.all(np.isfinite(samples.energy))
