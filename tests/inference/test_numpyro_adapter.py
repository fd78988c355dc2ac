"""numpyro MCMC driving our kernels through NumpyroKernel."""

import jax
import numpy as np
from numpyro.infer import MCMC

from graphssl.inference.mcmc.numpyro_adapter import NumpyroKernel

from .conftest import assert_matches_exact


class _Chains:
    """Adapter: numpyro's grouped draws in the Samples layout the checker expects."""

    def __init__(self, labels):
        self.labels = labels


def test_numpyro_vectorized_matches_enumeration(kernels, models, exact, capsys):
    variant = (True, True)
    kernel = NumpyroKernel(kernels["swendsen_wang"], models[variant])
    mcmc = MCMC(kernel, num_warmup=20, num_samples=300, num_chains=32,
                chain_method="vectorized", progress_bar=False)
    mcmc.run(jax.random.key(3), extra_fields=("energy", "stats"))
    labels = np.asarray(mcmc.get_samples(group_by_chain=True)["labels"])
    assert labels.shape == (32, 300, 8) and labels.dtype == np.int8
    assert_matches_exact(_Chains(labels), exact[variant])
    extra = mcmc.get_extra_fields(group_by_chain=True)
    assert extra["energy"].shape == (32, 300)
    assert np.all(extra["stats"]["n_clusters"] >= 1)
    energies = jax.vmap(models[variant].energy)(labels.reshape(-1, 8).astype(np.int32))
    np.testing.assert_allclose(energies, np.asarray(extra["energy"]).reshape(-1))
    mcmc.print_summary()
    assert "r_hat" in capsys.readouterr().out


def test_numpyro_model_as_run_argument(kernels, models):
    """The model can be a run argument (numpyro jit_model_args) and chains can be vmapped."""
    mcmc = MCMC(NumpyroKernel(kernels["swendsen_wang"]), num_warmup=5, num_samples=10,
                num_chains=2, chain_method=jax.vmap, progress_bar=False)
    mcmc.run(jax.random.key(0), models[(True, True)])
    labels = np.asarray(mcmc.get_samples(group_by_chain=True)["labels"])
    assert labels.shape == (2, 10, 8)
    observed = np.asarray(models[(True, True)].observed)
    assert np.all(labels[:, :, observed] == np.asarray(models[(True, True)].labels)[observed])
