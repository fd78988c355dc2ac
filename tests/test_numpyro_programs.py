"""The papers' numpyro programs under numpyro MCMC with the library's discrete moves, checked
against exact enumeration (continuous sites: conjugate integrals or quadrature on a grid) and
the library's direct samplers.

Monte-Carlo error: every run has ``N_CHAINS`` independent chains; the standard error of a
posterior mean is the spread of the per-chain means over sqrt(chains) (honest under any
autocorrelation). A quantity passes when ``|MC - exact| <= Z_MAX * s.e. + 0.01`` (the 0.01
absorbs s.e. estimates that are themselves noisy with 8 chains).
"""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.infer import MCMC

from graphssl.graph import Graph
from graphssl.inference.exact.enumeration import enumerate_model
from graphssl.inference.mcmc.chains import label_marginals, sample_chains
from graphssl.inference.mcmc.gibbs import chromatic_gibbs
from graphssl.inference.mcmc.kernels import compose
from graphssl.inference.mcmc.numpyro_gibbs import MixtureFieldGibbs, ProgramGibbs, label_field_gibbs
from graphssl.inference.mcmc.swendsen_wang import swendsen_wang
from graphssl.models.boltzmann import basic_boltzmann, pair_geometry
from graphssl.models.diffusion_mixture import DirichletDiffusionMixture
from graphssl.models.numpyro import (
    PottsField,
    boltzmann_program,
    diffusion_mixture_program,
    harmonic_mixture_program,
    hidden_potts_program,
    potts_program,
)
from graphssl.models.potts import PottsModel

N_CHAINS = 8
Z_MAX = 4.5
LABELS_FIELD = "block_states.0.labels"


def ring_graph(n=8, chord=0.6, seed=0):
    rng = np.random.default_rng(seed)
    W = np.zeros((n, n))
    for i in range(n):
        W[i, (i + 1) % n] = W[(i + 1) % n, i] = rng.uniform(0.6, 1.2)
    W[0, n // 2] = W[n // 2, 0] = chord
    return Graph.from_scipy(W)


GRAPH = ring_graph()
LABELS = np.array([0, -1, -1, -1, 1, -1, -1, -1])


def jit_vmap(f):
    """numpyro chain method: all chains in one compiled program (init included)."""
    return jax.jit(jax.vmap(f))


def run(kernel, *args, samples=600, warmup=150, key=0, extra=(), **kwargs):
    mcmc = MCMC(kernel, num_warmup=warmup, num_samples=samples, num_chains=N_CHAINS,
                chain_method=jit_vmap, progress_bar=False)
    mcmc.run(jax.random.key(key), *args, extra_fields=(LABELS_FIELD, *extra), **kwargs)
    return mcmc


def chain_labels(mcmc):
    return np.asarray(mcmc.get_extra_fields(group_by_chain=True)[LABELS_FIELD])


def check_means(per_chain_values, exact, what):
    """``per_chain_values``: [chains, draws, ...]; compares the posterior mean with ``exact``."""
    per_chain = np.asarray(per_chain_values, dtype=float).mean(axis=1)
    mean = per_chain.mean(axis=0)
    se = per_chain.std(axis=0, ddof=1) / np.sqrt(per_chain.shape[0])
    err = np.abs(mean - np.asarray(exact))
    assert np.all(err <= Z_MAX * se + 0.01), (what, mean, exact, se)


def check_marginals(labels, exact_marginals, what):
    q = exact_marginals.shape[1]
    onehot = np.stack([labels == c for c in range(q)], axis=-1)
    check_means(onehot, exact_marginals, what)


def enumerate_all(n, q=2):
    return np.array(np.meshgrid(*[np.arange(q)] * n, indexing="ij")).reshape(n, -1).T


# ----------------------------------------------------------------------------- Potts field


@pytest.fixture(scope="module")
def potts_run():
    kernel = label_field_gibbs(potts_program, chromatic_gibbs(GRAPH), continuous=False)
    return run(kernel, GRAPH, LABELS, 2, beta=1.5, samples=800)


def test_potts_program_matches_enumeration_and_sample_chains(potts_run):
    model = PottsModel.from_labels(GRAPH, LABELS, 2, beta=1.5)
    exact = enumerate_model(model)
    labels = chain_labels(potts_run)
    assert labels.shape == (N_CHAINS, 800, 8)
    check_marginals(labels, np.asarray(exact.marginals), "potts vs enumeration")
    direct = sample_chains(chromatic_gibbs(GRAPH), model, jax.random.key(1), n_chains=N_CHAINS,
                           n_samples=800, burn_in=100)
    check_marginals(labels, np.asarray(label_marginals(direct)), "potts vs sample_chains")
    energy = np.asarray(potts_run.get_samples()["label_energy"])
    flat = labels.reshape(-1, 8).astype(np.int32)
    np.testing.assert_allclose(energy, np.asarray(jax.vmap(model.energy)(flat)), rtol=1e-12)


def test_posterior_holds_no_per_node_variable(potts_run):
    import arviz as az

    samples = potts_run.get_samples()
    assert "labels" not in samples and set(samples) >= {"label_energy", "class_sizes",
                                                        "co_assignment"}
    tree = az.from_numpyro(potts_run)
    assert all(tree.posterior[v].size <= N_CHAINS * 800 * 8 for v in tree.posterior.data_vars)
    assert "labels" not in tree.posterior.data_vars


# ----------------------------------------------------------------------------- hidden Potts

X_FEATURES = np.array([-1.1, -0.6, -0.9, 0.2, 1.0, 0.7, 1.3, -0.2])
SIGMA, MEAN_SCALE, BETA_H = 0.6, 1.5, 0.8


def hidden_potts_exact():
    """p(y | x) and E[mu_c | x] with the class means integrated analytically (Normal prior
    N(m0, s0^2), known sigma), over all labelings consistent with the clamps."""
    model = PottsModel.create(GRAPH, 2, beta=BETA_H, labels=LABELS)
    ys = enumerate_all(8)
    ys = ys[np.all((LABELS < 0) | (ys == LABELS), axis=1)]
    m0, s0, s2 = X_FEATURES.mean(), MEAN_SCALE, SIGMA**2
    log_w = -np.asarray(jax.vmap(model.energy)(jnp.asarray(ys)))
    post_means = np.zeros((len(ys), 2))
    for c in range(2):
        member = ys == c
        n_c, S, Q = member.sum(1), (member * X_FEATURES).sum(1), (member * X_FEATURES**2).sum(1)
        var = 1.0 / (1.0 / s0**2 + n_c / s2)
        mu = var * (m0 / s0**2 + S / s2)
        log_w += (-0.5 * n_c * np.log(2 * np.pi * s2) + 0.5 * np.log(var / s0**2)
                  + mu**2 / (2 * var) - Q / (2 * s2) - m0**2 / (2 * s0**2))
        post_means[:, c] = mu
    w = np.exp(log_w - log_w.max())
    w /= w.sum()
    marginals = np.stack([(w[:, None] * (ys == c)).sum(0) for c in range(2)], axis=1)
    return marginals, w @ post_means


@pytest.fixture(scope="module")
def hidden_run():
    kernel = label_field_gibbs(hidden_potts_program, swendsen_wang())
    return run(kernel, X_FEATURES, GRAPH, LABELS, 2, beta=BETA_H, sigma=SIGMA,
               mean_scale=MEAN_SCALE, samples=500, warmup=100)


def test_hidden_potts_matches_conjugate_enumeration(hidden_run):
    marginals, means = hidden_potts_exact()
    check_marginals(chain_labels(hidden_run), marginals, "hidden Potts labels")
    draws = np.asarray(hidden_run.get_samples(group_by_chain=True)["means"])[..., 0]
    check_means(draws, means, "hidden Potts class means")


def test_arviz_summary_and_trace_plot(hidden_run):
    import arviz as az
    import matplotlib

    matplotlib.use("Agg")
    tree = az.from_numpyro(hidden_run)
    assert set(tree.posterior.data_vars) == {"means", "label_energy", "class_sizes",
                                             "co_assignment"}
    summary = az.summary(tree)
    assert np.all(np.isfinite(summary.loc["means[0, 0]"].to_numpy(dtype=float)))
    az.plot_trace(tree)
    assert LABELS_FIELD in tree.sample_stats.data_vars  # per-node labels outside posterior


# ----------------------------------------------------------------------------- Boltzmann

X_POINTS = np.array([[0.0], [0.4], [0.9], [1.3], [3.0], [3.5], [3.9], [4.6]])
NOISY = np.array([0, 0, -1, 1, 1, -1, 1, -1])  # node 3 is a mislabelled point
SIGMA_B = 0.7


def test_boltzmann_noise_rate_matches_quadrature():
    field = basic_boltzmann(pair_geometry(X_POINTS, k=2), SIGMA_B, np.full(8, -1), 2)
    kernel = label_field_gibbs(boltzmann_program, compose(swendsen_wang(), swendsen_wang()))
    mcmc = run(kernel, field, NOISY, samples=500, warmup=100)
    ys = enumerate_all(8)
    log_field = -np.asarray(jax.vmap(field.energy)(jnp.asarray(ys)))
    grid = (np.arange(2000) + 0.5) / 2000
    seen = NOISY >= 0
    agree = (ys[:, seen] == NOISY[seen]).sum(1)
    log_joint = (log_field[None, :] + dist.Beta(1.0, 9.0).log_prob(grid)[:, None]
                 + agree[None, :] * np.log1p(-grid)[:, None]
                 + (seen.sum() - agree)[None, :] * np.log(grid)[:, None])
    w = np.exp(log_joint - log_joint.max())
    w /= w.sum()
    eps_mean = (w.sum(1) * grid).sum()
    marginals = np.stack([(w.sum(0)[:, None] * (ys == c)).sum(0) for c in range(2)], axis=1)
    check_marginals(chain_labels(mcmc), marginals, "Boltzmann labels")
    check_means(mcmc.get_samples(group_by_chain=True)["noise_rate"], eps_mean, "noise rate")


# ----------------------------------------------------------------------------- exchange

BETA_PRIOR = (0.1, 2.5)
LABELS_X = np.array([0, 0, -1, -1, 1, 1, -1, -1])


def test_exchange_matches_doubly_intractable_enumeration():
    kernel = label_field_gibbs(potts_program, swendsen_wang(), exchange=("beta",),
                               continuous=False, exchange_scale=0.6, aux_steps=10)
    mcmc = run(kernel, GRAPH, LABELS_X, 2, clamp=True,
               beta_prior=dist.Uniform(*BETA_PRIOR), samples=1000,
               extra=("block_states.0.stats",))
    H = -np.asarray(jax.vmap(PottsModel.create(GRAPH, 2).energy)(jnp.asarray(enumerate_all(8))))
    ys = enumerate_all(8)
    consistent = np.all((LABELS_X < 0) | (ys == LABELS_X), axis=1)
    grid = np.linspace(*BETA_PRIOR, 801)[:-1] + (BETA_PRIOR[1] - BETA_PRIOR[0]) / 1600
    log_z = np.logaddexp.reduce(grid[:, None] * H[None, :], axis=1)  # Z(beta), unclamped
    log_joint = grid[:, None] * H[None, consistent] - log_z[:, None]  # p(beta, y_U | y_L)
    w = np.exp(log_joint - log_joint.max())
    w /= w.sum()
    beta_mean = (w.sum(1) * grid).sum()
    marginals = np.stack([(w.sum(0)[:, None] * (ys[consistent] == c)).sum(0)
                          for c in range(2)], axis=1)
    check_means(mcmc.get_samples(group_by_chain=True)["beta"], beta_mean, "beta (exchange)")
    check_marginals(chain_labels(mcmc), marginals, "labels (exchange)")
    accept = np.asarray(mcmc.get_extra_fields()["block_states.0.stats"]["exchange_accept_prob"])
    assert 0.1 < accept.mean() < 0.95


def normaliser_violation(x, graph, labels):
    beta = numpyro.sample("beta", dist.Uniform(0.1, 2.0))
    y = numpyro.sample("labels", PottsField.create(graph, 2, beta=beta, labels=labels))
    with numpyro.plate("nodes", graph.n_nodes):
        numpyro.sample("x", dist.Normal(jnp.where(y == 1, 1.0, -1.0), 1.0), obs=x)


def class_size_site(graph, labels):
    y = numpyro.sample("labels", PottsField.create(graph, 2, labels=labels))
    numpyro.sample("size", dist.Poisson(1.0 + jnp.sum(y)), obs=3)


def test_rule_refuses_nuts_on_normaliser_and_non_separable_sites():
    mcmc = MCMC(label_field_gibbs(normaliser_violation, swendsen_wang()), num_warmup=1,
                num_samples=1, progress_bar=False)
    with pytest.raises(ValueError, match="exchange="):
        mcmc.run(jax.random.key(0), X_FEATURES, GRAPH, LABELS)
    mcmc = MCMC(label_field_gibbs(normaliser_violation, swendsen_wang()), num_warmup=1,
                num_samples=1, num_chains=2, chain_method=jit_vmap, progress_bar=False)
    with pytest.raises(ValueError, match="exchange="):  # checked on a prototype under jit
        mcmc.run(jax.random.key(0), X_FEATURES, GRAPH, LABELS)
    mcmc = MCMC(label_field_gibbs(class_size_site, swendsen_wang(), continuous=False),
                num_warmup=1, num_samples=1, progress_bar=False)
    with pytest.raises(ValueError, match="node by node"):
        mcmc.run(jax.random.key(0), GRAPH, LABELS)


# ----------------------------------------------------------------------------- diffusion mixture


def test_diffusion_mixture_program_matches_enumeration():
    graph = ring_graph(4, chord=0.8, seed=3)
    labels = np.array([0, -1, 1, -1])
    model = DirichletDiffusionMixture.create(graph, labels, 2, tau=1.0, alpha=1.0, gamma=0.5)
    kernel = ProgramGibbs([(MixtureFieldGibbs(diffusion_mixture_program), ["labels", "centres"])])
    mcmc = run(kernel, model, samples=800)
    free = np.flatnonzero(labels < 0)
    ys = np.tile(np.maximum(labels, 0), (2 ** free.size, 1))
    ys[:, free] = enumerate_all(free.size)
    betas = enumerate_all(4, 4)
    yy, bb = np.repeat(ys, len(betas), 0), np.tile(betas, (len(ys), 1))
    log_p = np.asarray(jax.vmap(model.log_joint)(jnp.asarray(yy), jnp.asarray(bb)))
    w = np.exp(log_p - log_p.max())
    w /= w.sum()
    marginals = np.stack([(w[:, None] * (yy == c)).sum(0) for c in range(2)], axis=1)
    check_marginals(chain_labels(mcmc), marginals, "diffusion mixture labels")


# ----------------------------------------------------------------------------- harmonic mixture


def test_harmonic_mixture_program_density_is_eq3():
    from numpyro.infer.util import log_density

    from graphssl.models.harmonic_mixture import numpyro_mixture_model

    X = np.concatenate([X_POINTS, X_POINTS + 0.1])
    labels = np.array([0, -1, -1, -1, 1, -1, -1, -1] * 2)
    W = np.asarray(ring_graph(16).to_scipy().toarray())
    lap = np.diag(W.sum(1)) - W
    params = {"weights": jnp.array([0.4, 0.6]), "means": jnp.array([[0.5], [3.8]]),
              "scales": jnp.array([[0.7], [0.8]]),
              "label_probs": jnp.array([[0.9, 0.1], [0.2, 0.8]])}
    kw = dict(n_components=2, n_classes=2)
    lp, tr = log_density(harmonic_mixture_program, (X, labels, lap), dict(alpha=0.25, **kw),
                         params)
    lp_mix, _ = log_density(numpyro_mixture_model, (X, jnp.asarray(labels)), kw, params)
    energy = float(tr["graph_energy"]["value"])
    np.testing.assert_allclose(float(lp), float(lp_mix) - 3.0 * energy, rtol=1e-10)
    assert energy > 0
