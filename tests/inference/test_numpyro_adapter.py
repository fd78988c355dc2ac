"""numpyro MCMC driving our kernels: NumpyroKernel (a bare label model) and label_gibbs_fn
(the label site of a program under numpyro.infer.HMCGibbs)."""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.infer import MCMC, NUTS, HMCGibbs

from graphssl.graph import Graph
from graphssl.inference.mcmc.numpyro_adapter import NumpyroKernel
from graphssl.inference.mcmc.numpyro_gibbs import label_gibbs_fn
from graphssl.inference.mcmc.swendsen_wang import swendsen_wang
from graphssl.models.numpyro import PottsField
from graphssl.models.potts import PottsModel

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


def test_chain_map_gives_the_same_draws(kernels, models):
    """Chains mapped one after another (the CPU default) or vmapped: identical draws."""
    draws = []
    for chain_map in ("sequential", "vmap"):
        mcmc = MCMC(NumpyroKernel(kernels["swendsen_wang"], chain_map=chain_map), num_warmup=3,
                    num_samples=5, num_chains=2, chain_method="vectorized", progress_bar=False)
        mcmc.run(jax.random.key(5), models[(True, True)])
        draws.append(np.asarray(mcmc.get_samples()["labels"]))
    np.testing.assert_array_equal(draws[0], draws[1])
    with pytest.raises(ValueError, match="chain_map"):
        NumpyroKernel(kernels["swendsen_wang"], chain_map="parallel")


def _mu_program(x, graph, labels):
    """A program for HMCGibbs: one continuous site (a shared mean shift) and a Potts field."""
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    y = numpyro.sample("labels", PottsField.create(graph, 2, beta=0.7, labels=labels))
    with numpyro.plate("nodes", graph.n_nodes):
        numpyro.sample("x", dist.Normal(jnp.where(y == 1, mu, -mu), 0.8), obs=x)


def test_gibbs_fn_under_hmcgibbs_matches_quadrature():
    """label_gibbs_fn as HMCGibbs' gibbs_fn: posterior of mu and of the labels against a grid
    over mu times enumeration of the labels (z <= 4.5 with the between-chain s.e.)."""
    n = 6
    W = np.zeros((n, n))
    for i in range(n):
        W[i, (i + 1) % n] = W[(i + 1) % n, i] = 1.0
    graph = Graph.from_scipy(W)
    labels = np.array([0, -1, -1, 1, -1, -1])
    x = np.array([-0.9, -0.4, 0.3, 1.1, 0.6, -0.2])
    fn = label_gibbs_fn(_mu_program, swendsen_wang(), (x, graph, labels))
    mcmc = MCMC(HMCGibbs(NUTS(_mu_program), gibbs_fn=fn, gibbs_sites=["labels"]),
                num_warmup=150, num_samples=500, num_chains=8,
                chain_method=lambda f: jax.jit(jax.vmap(f)), progress_bar=False)
    mcmc.run(jax.random.key(0), x, graph, labels)
    samples = mcmc.get_samples(group_by_chain=True)
    ys = np.array(np.meshgrid(*[np.arange(2)] * n, indexing="ij")).reshape(n, -1).T
    ys = ys[np.all((labels < 0) | (ys == labels), axis=1)]
    energy = np.asarray(jax.vmap(PottsModel.create(graph, 2, beta=0.7).energy)(jnp.asarray(ys)))
    grid = np.linspace(-4, 4, 1601)
    means = np.where(ys[None] == 1, grid[:, None, None], -grid[:, None, None])
    log_w = (-energy[None] + dist.Normal(0, 1).log_prob(grid)[:, None]
             + dist.Normal(means, 0.8).log_prob(x).sum(-1))
    w = np.exp(log_w - log_w.max())
    w /= w.sum()
    exact = {"mu": (w.sum(1) * grid).sum(), "y": (w.sum(0)[:, None] * ys).sum(0)}
    for name, draws in (("mu", np.asarray(samples["mu"])),
                        ("y", np.asarray(samples["labels"]).astype(float))):
        per_chain = draws.mean(axis=1)
        se = per_chain.std(axis=0, ddof=1) / np.sqrt(per_chain.shape[0])
        assert np.all(np.abs(per_chain.mean(0) - exact[name]) <= 4.5 * se + 0.01), name
