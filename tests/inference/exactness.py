"""The exactness check shared by the sampler tests and the mutation tests.

A sampler passes when, on a small model enumerated exactly, three families of statistics
agree with their exact values within ``Z_MAX`` Monte-Carlo standard errors:

* node marginals ``P(y_i = c)``;
* the energy mean ``E[E(y)]``;
* pairwise co-assignment probabilities ``P(y_i = y_j)`` for every pair ``i < j``.

The standard error of each statistic comes from ``C`` independent chains: the spread of the
per-chain estimates divided by ``sqrt(C)`` (honest under any within-chain autocorrelation).
``z = (mean of the per-chain estimates - exact) / s.e.``; cells whose exact value is 0 or 1
(clamped nodes) have zero spread and must match exactly. With ``C = 64`` chains ``z`` is
Student-t with 63 degrees of freedom, ``P(|t| > 5) ~ 5e-6`` per statistic, so with ~75
statistics per run a correct sampler fails at a given seed with probability ~4e-4; the
seeds are fixed, so every run of the suite gives the same verdict.

The main model (9 nodes, q = 4, a field, two clamped nodes, beta = 2) is strongly coupled
enough that the faults of ``mutants.py`` move the statistics by many standard errors:
measured max |z| at seeds 0-2 with 1000 draws: logits x 0.97: 9.4-9.7, skipped colour class:
11.6-13.2, synchronous updates: 80-89, bonds with 1 - exp(-0.97 J): 4.7-7.9 (hence 3000
draws: z grows as sqrt(draws)), no Hastings ratio: 69-74; the real kernels 1.2-3.4.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from graphssl.graph import Graph, row_normalize
from graphssl.inference import enumerate_model
from graphssl.models.potts import PottsModel

Z_MAX = 5.0
N_CHAINS, N_DRAWS, BURN_IN = 64, 3000, 30


def ring_graph(n: int = 9, seed: int = 0) -> Graph:
    """A ring with chords, both directions stored; weights U(0.5, 1.3)."""
    rng = np.random.default_rng(seed)
    upper = np.zeros((n, n))
    for i in range(n):
        upper[min(i, (i + 1) % n), max(i, (i + 1) % n)] = rng.uniform(0.5, 1.3)
    for i, j in ((0, 4), (2, 6), (3, 8), (1, 5)):
        upper[i, j] = rng.uniform(0.5, 1.3)
    return Graph.from_scipy(upper + upper.T)


def clamped_labels(n: int) -> np.ndarray:
    """Nodes 1 and 5 clamped to classes 0 and 1 (q = 4: classes 2 and 3 stay free, so the
    permutation move can swap them while nodes are clamped)."""
    labels = np.full(n, -1)
    labels[1], labels[5] = 0, 1
    return labels


def main_model(beta: float = 2.0, q: int = 4, seed: int = 0) -> PottsModel:
    """9 nodes, q = 4, a random field, two clamped nodes."""
    graph = ring_graph(seed=seed)
    field = np.random.default_rng(seed + 1).normal(0.0, 0.6, (graph.n_nodes, q))
    return PottsModel.create(graph, q, beta=beta, field=field,
                             labels=clamped_labels(graph.n_nodes))


def asymmetric_model(beta: float = 5.0) -> PottsModel:
    """The main graph row-normalised (directed, Bergamim & Breve Eq. 9): ``create``
    symmetrises it (with a warning). Same table shape as the main model."""
    import warnings

    graph = row_normalize(ring_graph())
    field = np.random.default_rng(1).normal(0.0, 0.6, (graph.n_nodes, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return PottsModel.create(graph, 4, beta=beta, field=field,
                                 labels=clamped_labels(graph.n_nodes))


def exact_statistics(model) -> dict:
    """Exact node marginals, energy mean and co-assignment matrix by enumeration."""

    def fn(y):
        return {"co": (y[:, None] == y[None, :]).astype(jnp.float64),
                "energy": model.energy(y)}

    res = enumerate_model(model, fn)
    return {"marginals": np.asarray(res.marginals), "energy": float(res.expectation["energy"]),
            "co": np.asarray(res.expectation["co"])}


def per_chain_statistics(labels, energy, q: int) -> dict:
    """Per-chain estimates from draws ``labels [C, S, n]``, ``energy [C, S]``."""
    labels = np.asarray(labels).astype(np.int32)
    marginals = np.stack([(labels == c).mean(axis=1) for c in range(q)], axis=-1)  # C, n, q
    n = labels.shape[-1]
    iu = np.triu_indices(n, 1)
    co = (labels[:, :, iu[0]] == labels[:, :, iu[1]]).mean(axis=1)  # C, pairs
    return {"marginals": marginals, "energy": np.asarray(energy, np.float64).mean(axis=1),
            "co": co}


def _z(per_chain, exact):
    mean = per_chain.mean(axis=0)
    se = per_chain.std(axis=0, ddof=1) / np.sqrt(per_chain.shape[0])
    err = np.abs(mean - exact)
    degenerate = se < 1e-12
    return np.where(degenerate, np.where(err < 1e-9, 0.0, np.inf),
                    err / np.where(degenerate, 1.0, se))


def z_scores(samples, exact: dict, q: int) -> dict:
    """Max |z| per family: ``{"marginals", "energy", "co"}``."""
    est = per_chain_statistics(samples.labels, samples.energy, q)
    n = exact["co"].shape[0]
    iu = np.triu_indices(n, 1)
    return {
        "marginals": float(_z(est["marginals"], exact["marginals"]).max()),
        "energy": float(_z(est["energy"], np.asarray(exact["energy"]))),
        "co": float(_z(est["co"], exact["co"][iu]).max()),
    }


def run(kernel, model, seed: int, n_draws: int = N_DRAWS, thin: int = 1):
    """``sample_chains`` with the module's settings."""
    from graphssl.inference import sample_chains

    return sample_chains(kernel, model, jax.random.key(seed), n_chains=N_CHAINS,
                         n_samples=n_draws, burn_in=BURN_IN, thin=thin)


def assert_exact(kernel, model, exact: dict, seed: int, **kwargs) -> dict:
    """Run and assert every family within ``Z_MAX``; returns the z-scores."""
    z = z_scores(run(kernel, model, seed, **kwargs), exact, model.n_classes)
    assert max(z.values()) < Z_MAX, f"exactness check failed: max |z| per family {z}"
    return z
