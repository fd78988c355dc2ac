"""The generic run-until-converged driver on a generic kernel (chromatic Gibbs on a Potts
model): it stops at the first check under the target, returns the last half of its chunks,
and those draws are the tail of one uninterrupted ``sample_chains`` run."""

import jax
import numpy as np
import pytest

from graphssl.inference import sample_chains
from graphssl.inference.mcmc.convergence import invariant_rhat, sample_until_converged

CHUNK = 40


def test_generic_kernel_runs_until_its_chains_agree(kernels, models):
    kernel, model = kernels["chromatic"], models[(True, True)]
    s, checks = sample_until_converged(kernel, model, jax.random.key(11), target_rhat=1.05,
                                       check_every=CHUNK, max_steps=40 * CHUNK, n_chains=4,
                                       burn_in=10)
    assert checks[-1].max_rhat <= 1.05 and all(c.max_rhat > 1.05 for c in checks[:-1])
    k = len(checks)
    assert checks[-1].window == CHUNK * (k - k // 2) == np.asarray(s.energy).shape[1]
    whole = sample_chains(kernel, model, jax.random.key(11), n_chains=4, burn_in=10,
                          n_samples=k * CHUNK, chunk_size=CHUNK)
    np.testing.assert_array_equal(np.asarray(s.labels),
                                  np.asarray(whole.labels)[:, CHUNK * (k // 2):])
    assert set(checks[-1].rhat) == {"energy", "class_sizes", "coassignment"}
    assert checks[-1].rhat == pytest.approx(invariant_rhat(s, checks_pairs(model)), nan_ok=True)


def checks_pairs(model):
    from graphssl.inference.mcmc.statistics import default_pairs

    return default_pairs(model.n_nodes, np.asarray(model.observed), n_pairs=20)
