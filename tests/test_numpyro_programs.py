"""The papers' numpyro programs under numpyro MCMC with the library's discrete moves, checked
against exact enumeration (continuous sites: conjugate integrals or quadrature on a grid) and
against the library's direct samplers for the same model (``sample_chains``, or the library's
harmonic-mixture fit: there is no harmonic-mixture sampler).

Monte-Carlo error: every run has ``N_CHAINS`` independent chains; the standard error of a
posterior mean is the spread of the per-chain means over sqrt(chains) (honest under any
autocorrelation); two Monte-Carlo estimates are compared with their standard errors combined.
A quantity passes when ``|a - b| <= Z_MAX * s.e. + SLACK`` (the slack absorbs standard errors
that are themselves noisy and the zero s.e. of clamped nodes); :func:`agree` returns the
largest ``z = |a - b| / s.e.`` for the record.

Cost: every compiled sampler is built once (module fixtures, 8-node graphs); the numpyro runs
compile with XLA's backend optimisation off (:func:`jit_vmap`): these runs are a few hundred
steps on 8 nodes, so compiling dominates their cost.
"""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.handlers import condition
from numpyro.infer import MCMC, NUTS

from graphssl.graph import Graph
from graphssl.inference.exact.enumeration import enumerate_model
from graphssl.inference.mcmc.chains import sample_chains
from graphssl.inference.mcmc.gibbs import chromatic_gibbs
from graphssl.inference.mcmc.kernels import compose
from graphssl.inference.mcmc.numpyro_gibbs import MixtureFieldGibbs, ProgramGibbs, label_field_gibbs
from graphssl.inference.mcmc.swendsen_wang import swendsen_wang
from graphssl.models.boltzmann import (
    ExtendedParams,
    basic_boltzmann,
    extended_boltzmann,
    pair_geometry,
)
from graphssl.models.diffusion_mixture import DirichletDiffusionMixture
from graphssl.models.numpyro import (
    MixtureClassField,
    PolyaCentres,
    PottsField,
    boltzmann_program,
    diffusion_mixture_program,
    harmonic_mixture_program,
    hidden_potts_program,
    potts_program,
)
from graphssl.models.potts import PottsModel

N_CHAINS = 16
Z_MAX = 5.0
SLACK = 0.01
LABELS_FIELD = "block_states.0.labels"
FAST_COMPILE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


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
    """numpyro chain method: all chains in one compiled program (init included), compiled
    without XLA's backend optimisations (a third less CPU for these short runs)."""
    return jax.jit(jax.vmap(f), compiler_options=FAST_COMPILE)


def run(kernel, *args, samples=400, warmup=100, key=0, extra=(), **kwargs):
    mcmc = MCMC(kernel, num_warmup=warmup, num_samples=samples, num_chains=N_CHAINS,
                chain_method=jit_vmap, progress_bar=False)
    mcmc.run(jax.random.key(key), *args, extra_fields=(LABELS_FIELD, *extra), **kwargs)
    return mcmc


def chain_labels(mcmc):
    return np.asarray(mcmc.get_extra_fields(group_by_chain=True)[LABELS_FIELD])


def estimate(per_chain_values):
    """``[chains, draws, ...]`` -> (posterior mean, its standard error over chains)."""
    per_chain = np.asarray(per_chain_values, dtype=float).mean(axis=1)
    return per_chain.mean(axis=0), per_chain.std(axis=0, ddof=1) / np.sqrt(per_chain.shape[0])


def onehot(labels, q=2):
    return np.stack([np.asarray(labels) == c for c in range(q)], axis=-1)


def agree(a, b, what):
    """``a``, ``b``: (mean, s.e.) pairs (an exact value has s.e. 0). Asserts agreement
    within Monte-Carlo error and returns the largest z (entries with s.e. 0 and equal means,
    e.g. clamped nodes, excluded)."""
    (ma, sa), (mb, sb) = a, b
    se = np.sqrt(np.square(sa) + np.square(sb))
    err = np.abs(np.asarray(ma) - np.asarray(mb))
    assert np.all(err <= Z_MAX * se + SLACK), (what, ma, mb, se)
    z = np.where(se > 0, err / np.where(se > 0, se, 1.0), 0.0)
    print(f"max z {float(np.max(z)):.2f}: {what}")
    return float(np.max(z))


def exact(values):
    return np.asarray(values), 0.0


def enumerate_all(n, q=2):
    return np.array(np.meshgrid(*[np.arange(q)] * n, indexing="ij")).reshape(n, -1).T


# ----------------------------------------------------------------------------- Potts field


def direct_marginals(kernel, model, key=1, samples=400, **kwargs):
    """(mean, s.e.) of the label marginals from the library's own driver."""
    draws = sample_chains(kernel, model, jax.random.key(key), n_chains=N_CHAINS,
                          n_samples=samples, burn_in=100, **kwargs)
    return estimate(onehot(draws.labels, model.n_classes))


@pytest.fixture(scope="module")
def potts_run():
    kernel = label_field_gibbs(potts_program, chromatic_gibbs(GRAPH), continuous=False)
    return run(kernel, GRAPH, LABELS, 2, beta=1.5)


def test_potts_program_matches_enumeration_and_sample_chains(potts_run):
    model = PottsModel.from_labels(GRAPH, LABELS, 2, beta=1.5)
    labels = chain_labels(potts_run)
    assert labels.shape == (N_CHAINS, 400, 8)
    marginals = estimate(onehot(labels))
    agree(marginals, exact(enumerate_model(model).marginals), "Potts: program vs enumeration")
    agree(marginals, direct_marginals(swendsen_wang(), model),
          "Potts: program (chromatic Gibbs) vs sample_chains (Swendsen-Wang)")
    energy = np.asarray(potts_run.get_samples()["label_energy"])
    flat = labels.reshape(-1, 8).astype(np.int32)
    np.testing.assert_allclose(energy, np.asarray(jax.vmap(model.energy)(flat)), rtol=1e-12)


def test_posterior_holds_no_per_node_variable(potts_run):
    import arviz as az

    samples = potts_run.get_samples()
    assert "labels" not in samples and set(samples) >= {"label_energy", "class_sizes",
                                                        "co_assignment"}
    tree = az.from_numpyro(potts_run)
    assert all(tree.posterior[v].size <= N_CHAINS * 400 * 8 for v in tree.posterior.data_vars)
    assert "labels" not in tree.posterior.data_vars


# ----------------------------------------------------------------------------- hidden Potts

X_FEATURES = np.array([-1.1, -0.6, -0.9, 0.2, 1.0, 0.7, 1.3, -0.2])
SIGMA, MEAN_SCALE, BETA_H = 0.6, 1.5, 0.8
FIXED_MEANS = np.array([[-0.8], [0.9]])


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
               mean_scale=MEAN_SCALE, samples=300)


def test_hidden_potts_matches_conjugate_enumeration(hidden_run):
    marginals, means = hidden_potts_exact()
    agree(estimate(onehot(chain_labels(hidden_run))), exact(marginals),
          "hidden Potts (NUTS on means): labels vs conjugate enumeration")
    draws = np.asarray(hidden_run.get_samples(group_by_chain=True)["means"])[..., 0]
    agree(estimate(draws), exact(means), "hidden Potts (NUTS on means): means vs enumeration")


def test_hidden_potts_at_fixed_means_is_the_potts_field_with_evidence():
    """Means fixed: the labels' posterior is a Potts model whose field is the Gaussian
    log-likelihood ``U[i, c] = log N(x_i | mu_c, sigma)`` (``PottsModel`` scales its field by
    beta). The program runs a composed move (chromatic Gibbs then Swendsen-Wang)."""
    program = condition(hidden_potts_program, data={"means": FIXED_MEANS})
    kernel = label_field_gibbs(program, compose(chromatic_gibbs(GRAPH), swendsen_wang()),
                               continuous=False)
    mcmc = run(kernel, X_FEATURES, GRAPH, LABELS, 2, beta=BETA_H, sigma=SIGMA)
    U = np.asarray(dist.Normal(FIXED_MEANS[:, 0], SIGMA).log_prob(X_FEATURES[:, None]))
    model = PottsModel.create(GRAPH, 2, beta=BETA_H, field=U / BETA_H, labels=LABELS)
    marginals = estimate(onehot(chain_labels(mcmc)))
    agree(marginals, exact(enumerate_model(model).marginals),
          "hidden Potts (means fixed): program vs enumeration")
    agree(marginals, direct_marginals(swendsen_wang(), model),
          "hidden Potts (means fixed): program vs sample_chains Potts with field")


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
SIGMA_B, FIXED_NOISE = 0.7, 0.15


def boltzmann_field():
    return basic_boltzmann(pair_geometry(X_POINTS, k=2), SIGMA_B, np.full(8, -1), 2)


def test_boltzmann_noise_rate_matches_quadrature():
    field = boltzmann_field()
    mcmc = run(label_field_gibbs(boltzmann_program, swendsen_wang()), field, NOISY, samples=300)
    ys = enumerate_all(8)
    log_field = -np.asarray(jax.vmap(field.energy)(jnp.asarray(ys)))
    grid = (np.arange(2000) + 0.5) / 2000
    seen = NOISY >= 0
    agree_ = (ys[:, seen] == NOISY[seen]).sum(1)
    log_joint = (log_field[None, :] + dist.Beta(1.0, 9.0).log_prob(grid)[:, None]
                 + agree_[None, :] * np.log1p(-grid)[:, None]
                 + (seen.sum() - agree_)[None, :] * np.log(grid)[:, None])
    w = np.exp(log_joint - log_joint.max())
    w /= w.sum()
    eps_mean = (w.sum(1) * grid).sum()
    marginals = np.stack([(w.sum(0)[:, None] * (ys == c)).sum(0) for c in range(2)], axis=1)
    agree(estimate(onehot(chain_labels(mcmc))), exact(marginals),
          "Boltzmann (NUTS on noise): labels vs quadrature x enumeration")
    agree(estimate(mcmc.get_samples(group_by_chain=True)["noise_rate"]), exact(eps_mean),
          "Boltzmann (NUTS on noise): noise rate vs quadrature")


def test_boltzmann_at_fixed_noise_is_the_extended_model():
    """Noise rate fixed: the labels' posterior is Zhu & Ghahramani's extended model in its
    clamped phase G (Eq. 46) with ``e^gamma = log((1 - eps)(C - 1) / eps)``, zero class
    bias and ``A_ij = exp(-d^2 / e^{alpha_1})``, ``alpha_1 = log(2 sigma^2)`` (Eq. 39),
    sampled by the library's Swendsen-Wang through ``sample_chains``."""
    program = condition(boltzmann_program, data={"noise_rate": FIXED_NOISE})
    mcmc = run(label_field_gibbs(program, swendsen_wang(), continuous=False), boltzmann_field(),
               NOISY)
    strength = np.log((1 - FIXED_NOISE) / FIXED_NOISE)
    params = ExtendedParams(0.0, np.array([np.log(2 * SIGMA_B**2)]), np.zeros(2),
                            np.log(strength))
    model = extended_boltzmann(pair_geometry(X_POINTS, k=2), params, NOISY)
    marginals = estimate(onehot(chain_labels(mcmc)))
    agree(marginals, exact(enumerate_model(model).marginals),
          "Boltzmann (noise fixed): program vs enumeration of the extended model")
    agree(marginals, direct_marginals(swendsen_wang(), model),
          "Boltzmann (noise fixed): program vs sample_chains extended model")


# ----------------------------------------------------------------------------- exchange

BETA_PRIOR = (0.1, 2.5)
LABELS_X = np.array([0, 0, -1, -1, 1, 1, -1, -1])


def test_exchange_matches_doubly_intractable_enumeration():
    kernel = label_field_gibbs(potts_program, swendsen_wang(), exchange=("beta",),
                               continuous=False, exchange_scale=0.6, aux_steps=10)
    mcmc = run(kernel, GRAPH, LABELS_X, 2, clamp=True,
               beta_prior=dist.Uniform(*BETA_PRIOR), samples=600,
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
    agree(estimate(mcmc.get_samples(group_by_chain=True)["beta"]), exact(beta_mean),
          "Potts with exchange on beta: beta vs quadrature x enumeration")
    agree(estimate(onehot(chain_labels(mcmc))), exact(marginals),
          "Potts with exchange on beta: labels vs quadrature x enumeration")
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


def test_label_block_refuses_a_kernel_of_another_graph_and_a_signed_beta_prior():
    """A chromatic kernel coloured for a 5-node graph left nodes 5..7 of the 8-node field
    unsampled (``sample_chains`` refuses it; the label block did not); a ``beta`` prior with
    mass below 0 makes Swendsen-Wang's bond probabilities no probabilities."""
    small = Graph.from_scipy(np.diag(np.ones(4), 1) + np.diag(np.ones(4), -1))
    mcmc = MCMC(label_field_gibbs(potts_program, chromatic_gibbs(small), continuous=False),
                num_warmup=1, num_samples=1, progress_bar=False)
    with pytest.raises(ValueError, match="colors: expected one colour per node"):
        mcmc.run(jax.random.key(0), GRAPH, LABELS, 2, beta=0.7)
    mcmc = MCMC(label_field_gibbs(potts_program, swendsen_wang(), exchange=("beta",),
                                  continuous=False), num_warmup=1, num_samples=1,
                progress_bar=False)
    with pytest.raises(ValueError, match=r"beta_prior: its support must lie in \[0, inf\)"):
        mcmc.run(jax.random.key(0), GRAPH, LABELS, 2, clamp=True, beta_prior=dist.Normal(0, 1))
    plain = MCMC(label_field_gibbs(potts_program, swendsen_wang(), continuous=False),
                 num_warmup=1, num_samples=1, progress_bar=False)
    with pytest.raises(ValueError, match="beta: a finite coupling >= 0"):
        plain.run(jax.random.key(0), GRAPH, LABELS, 2, beta=float("nan"))
    with pytest.raises(ValueError, match=r"pairs: int\[P, 2\] pairs of two different node"):
        plain.run(jax.random.key(0), GRAPH, LABELS, 2, beta=0.7, pairs=np.array([[0, 99]]))


# ----------------------------------------------------------------------------- diffusion mixture


def test_diffusion_mixture_program_matches_enumeration_and_sample_chains():
    from graphssl.inference.diffusion_mixture.kernels import mixture_energy, mixture_kernel

    graph = ring_graph(4, chord=0.8, seed=3)
    labels = np.array([0, -1, 1, -1])
    model = DirichletDiffusionMixture.create(graph, labels, 2, tau=1.0, alpha=1.0, gamma=0.5)
    kernel = ProgramGibbs([(MixtureFieldGibbs(diffusion_mixture_program), ["labels", "centres"])])
    mcmc = run(kernel, model)
    free = np.flatnonzero(labels < 0)
    ys = np.tile(np.maximum(labels, 0), (2 ** free.size, 1))
    ys[:, free] = enumerate_all(free.size)
    betas = enumerate_all(4, 4)
    yy, bb = np.repeat(ys, len(betas), 0), np.tile(betas, (len(ys), 1))
    log_p = np.asarray(jax.vmap(model.log_joint)(jnp.asarray(yy), jnp.asarray(bb)))
    w = np.exp(log_p - log_p.max())
    w /= w.sum()
    marginals = estimate(onehot(chain_labels(mcmc)))
    agree(marginals, exact(np.stack([(w[:, None] * (yy == c)).sum(0) for c in range(2)], 1)),
          "diffusion mixture: program vs enumeration")
    agree(marginals, direct_marginals(mixture_kernel((1, 1)), model, energy=mixture_energy),
          "diffusion mixture: program vs sample_chains mixture_kernel")


# ----------------------------------------------------------------------------- harmonic mixture

X_HM = np.concatenate([X_POINTS, X_POINTS + 0.1])
LABELS_HM = np.array([0, -1, -1, -1, 1, -1, -1, -1] * 2)
ALPHA_HM = 0.5
COMPONENTS = {"weights": np.array([0.45, 0.55]), "means": np.array([[0.8], [3.6]]),
              "scales": np.array([[0.9], [1.0]])}


@pytest.fixture(scope="module")
def harmonic():
    """The program conditioned on fixed components (only ``label_probs``, lambda, stays
    latent), its log density in lambda (compiled once), the mixture, the Laplacian, and the
    library's lambda step at ALPHA_HM (the step 2 of ``fit_harmonic_mixture``: the backbone of
    Eq. 6 from the mixture, then ``solve_lambda``)."""
    from numpyro.infer.util import log_density

    from graphssl.inference.harmonic_mixture.fit import (
        mixture_backbone,
        solve_lambda,
        split_backbone,
    )
    from graphssl.models.harmonic_mixture import GaussianMixture, log_responsibilities

    graph = ring_graph(16)
    W = np.asarray(graph.to_scipy().toarray())
    laplacian = np.diag(W.sum(1)) - W
    program = condition(harmonic_mixture_program, data=COMPONENTS)
    kw = dict(n_components=2, alpha=ALPHA_HM)

    @jax.jit
    def log_p(lam):
        probs = {"label_probs": jnp.stack([1 - lam, lam], 1)}
        return log_density(program, (X_HM, LABELS_HM, laplacian), kw, probs)[0]

    mixture = GaussianMixture(jnp.log(COMPONENTS["weights"]), jnp.asarray(COMPONENTS["means"]),
                              jnp.asarray(COMPONENTS["scales"]) ** 2,
                              jnp.log(jnp.full((2, 2), 0.5)), "diag")
    seen = np.flatnonzero(LABELS_HM >= 0)
    backbone, _ = mixture_backbone(mixture, jnp.asarray(X_HM), seen, graph.padded_neighbors())
    A, B = split_backbone(backbone, seen.size)
    lam, _ = solve_lambda(A, B, np.eye(2)[LABELS_HM[seen]], alpha=ALPHA_HM,
                          labelled_log_resp=np.asarray(log_responsibilities(mixture, X_HM[seen])),
                          lambda_em=np.full((2, 2), 0.5))
    return program, log_p, mixture, laplacian, lam[:, 1]


def harmonic_lambda_density(mixture, laplacian, lam):
    """log p(lambda | components) up to a constant, straight from Eqs. 1-3: labelled
    log-likelihood ``sum_i log sum_m R_im lambda_{m, y_i}`` minus ``(1 - alpha) / alpha``
    times ``E = f^T Delta f`` (Eq. 2, ``f = p(y = 1)``: labels on L, ``R lambda`` on U);
    ``lam``: float[..., M] = lambda_{m, 1} (flat Dirichlet(1, 1) prior)."""
    from graphssl.models.harmonic_mixture import responsibilities

    R = np.asarray(responsibilities(mixture, jnp.asarray(X_HM)))
    seen = LABELS_HM >= 0
    p1 = lam @ R.T  # [..., n]: p(y_i = 1) under the mixture
    like = np.where(LABELS_HM[seen] == 1, p1[..., seen], 1.0 - p1[..., seen])
    f = np.where(seen, LABELS_HM, p1)
    energy = np.einsum("...i,ij,...j->...", f, laplacian, f)
    return np.log(like).sum(-1) - (1.0 - ALPHA_HM) / ALPHA_HM * energy


def test_harmonic_mixture_program_density_is_eq3(harmonic):
    """All sites free: log density = mixture log density (Eq. 1 with priors) minus
    ``(1 - alpha) / alpha`` times Eq. 2, ``1/2 sum_ij w_ij (f_i - f_j)^2``. Components fixed:
    the log density in lambda is the direct formula of :func:`harmonic_lambda_density`."""
    from numpyro.infer.util import log_density

    from graphssl.models.harmonic_mixture import numpyro_mixture_model, responsibilities

    _, log_p, mixture, laplacian, _ = harmonic
    W = np.diag(np.diag(laplacian)) - laplacian
    label_probs = np.array([[0.9, 0.1], [0.2, 0.8]])
    params = {**COMPONENTS, "label_probs": label_probs}
    def density(program, args, kwargs):  # one program each (op by op: ~120 compilations)
        return jax.jit(lambda p: log_density(program, args, kwargs, p)[0])(params)

    lp = density(harmonic_mixture_program, (X_HM, LABELS_HM, laplacian),
                 dict(n_components=2, alpha=ALPHA_HM))
    lp_mix = density(numpyro_mixture_model, (X_HM, LABELS_HM), dict(n_components=2))
    f = np.asarray(responsibilities(mixture, jnp.asarray(X_HM))) @ label_probs[:, 1]
    f = np.where(LABELS_HM >= 0, LABELS_HM, f)
    energy = 0.5 * np.sum(W * (f[:, None] - f[None, :]) ** 2)
    np.testing.assert_allclose(float(lp), float(lp_mix) - energy, rtol=1e-10)
    lams = np.array([[0.2, 0.7], [0.6, 0.3]])
    direct = harmonic_lambda_density(mixture, laplacian, lams)
    np.testing.assert_allclose(float(log_p(lams[1]) - log_p(lams[0])), direct[1] - direct[0],
                               rtol=1e-10)


def test_harmonic_mixture_map_is_the_library_lambda_step(harmonic):
    """With the components fixed, the program's MAP in lambda (flat prior) is the minimiser
    of Eq. 3 that the library's fit computes in its lambda step."""
    from scipy.optimize import minimize

    _, log_p, _, _, library_lambda = harmonic
    value_and_grad = jax.jit(jax.value_and_grad(lambda lam: -log_p(lam)))

    def fun(v):
        value, grad = value_and_grad(v)
        return float(value), np.asarray(grad)

    res = minimize(fun, np.full(2, 0.5), jac=True, method="L-BFGS-B",
                   bounds=[(1e-9, 1 - 1e-9)] * 2, options=dict(ftol=1e-15, gtol=1e-10))
    np.testing.assert_allclose(res.x, library_lambda, atol=1e-5)


def test_harmonic_mixture_program_nuts_matches_quadrature(harmonic):
    program, _, mixture, laplacian, _ = harmonic
    mcmc = MCMC(NUTS(program), num_warmup=200, num_samples=300, num_chains=N_CHAINS,
                chain_method=jit_vmap, progress_bar=False)
    mcmc.run(jax.random.key(2), X_HM, LABELS_HM, laplacian, n_components=2, alpha=ALPHA_HM)
    lam = np.asarray(mcmc.get_samples(group_by_chain=True)["label_probs"])[..., 1]
    side = (np.arange(400) + 0.5) / 400
    grid = np.stack(np.meshgrid(side, side, indexing="ij"), -1)
    log_p = harmonic_lambda_density(mixture, laplacian, grid)
    w = np.exp(log_p - log_p.max())
    w /= w.sum()
    agree(estimate(lam), exact(np.einsum("ab,abm->m", w, grid)),
          "harmonic mixture (NUTS on lambda): lambda vs quadrature")


@pytest.mark.parametrize("program, args, kwargs, message", [
    (potts_program, (GRAPH, LABELS.astype(str), 2), {}, "labels: labels must be integers"),
    (potts_program, (GRAPH, LABELS + 0.5, 2), {}, r"got dtype float64"),
    (potts_program, (GRAPH, LABELS[:5], 2), {}, "labels: has 5 entries but the graph has 8"),
    (potts_program, (GRAPH, np.where(LABELS >= 0, 5, -1), 2), {}, "n_classes=2; found 5"),
    (hidden_potts_program, (np.zeros(5), GRAPH, LABELS, 2), {},
     "x: has 5 entries but the graph has 8 nodes"),
    (hidden_potts_program, (np.zeros(8), GRAPH, LABELS.astype(str), 2), {},
     "labels: labels must be integers"),
    (harmonic_mixture_program, (X_HM, np.where(LABELS_HM >= 0, 3, -1), np.eye(16)),
     {"n_components": 2}, "n_classes=2; found 3"),
    (harmonic_mixture_program, (X_HM, LABELS_HM, np.eye(16)), {"n_components": 0},
     "n_components: a whole number >= 1"),
    (harmonic_mixture_program, (X_HM, LABELS_HM, np.eye(8)), {"n_components": 2},
     r"laplacian: expected the dense float\[16, 16\]"),
    (harmonic_mixture_program, (X_HM[:8], LABELS_HM, np.eye(16)), {"n_components": 2},
     "labels: has 16 entries but X has 8 rows"),
])
def test_programs_name_bad_labels_and_shapes(program, args, kwargs, message):
    """String or fractional labels, labels of another length or past ``n_classes``, features
    or a Laplacian of another size, and ``n_components=0`` are named by the program instead of
    failing inside JAX (an IndexError, a broadcasting error, an MLIR verifier error)."""
    seeded = numpyro.handlers.seed(program, 0)
    with pytest.raises(ValueError, match=message):
        numpyro.handlers.trace(seeded).get_trace(*args, **kwargs)


def test_boltzmann_program_names_the_field_model_size():
    field = basic_boltzmann(pair_geometry(X_POINTS, 3), 0.5, np.full(8, -1), 2)
    with pytest.raises(ValueError, match="labels: has 7 entries but field_model has 8 nodes"):
        numpyro.handlers.trace(numpyro.handlers.seed(boltzmann_program, 0)).get_trace(
            field, LABELS[:7])


def test_the_mixture_program_refuses_a_signed_alpha_prior_and_its_densities_out_of_range():
    """Under ``alpha_prior=Normal(0, 1)`` NUTS sampled alpha = -0.004 in every draw (the
    Polya density's ``gammaln`` is finite at negative alpha); a class past ``n_classes`` was
    dropped from the Polya counts, and a label 5 of a 3-class field read a finite density."""
    model = DirichletDiffusionMixture.create(GRAPH, LABELS, 2, tau=1.0, alpha=1.0, gamma=0.5)
    with pytest.raises(ValueError, match=r"^alpha_prior: its support must lie in \[0, inf\)"):
        numpyro.handlers.seed(diffusion_mixture_program, 0)(model,
                                                            alpha_prior=dist.Normal(0, 1))
    classes, centres = jnp.array([0, 1, 0]), jnp.array([0, 1, 2])
    assert np.isfinite(float(PolyaCentres(classes, 1.0, 2).log_prob(centres)))
    for alpha in (-0.5, 0.0):
        polya = PolyaCentres(classes, alpha, 2, validate_args=False)  # as under NUTS: traced
        assert float(polya.log_prob(centres)) == -np.inf
    assert float(PolyaCentres(jnp.array([0, 3, 0]), 1.0, 2).log_prob(centres)) == -np.inf
    field = MixtureClassField(model)
    y = np.where(LABELS >= 0, LABELS, 0)
    assert np.isfinite(float(field.log_prob(jnp.asarray(y))))
    assert float(field.log_prob(jnp.asarray(np.where(np.arange(8) == 2, 5, y)))) == -np.inf


def test_the_hidden_potts_program_names_non_finite_features():
    x = np.linspace(0.0, 1.0, 8)
    x[3] = np.nan
    with pytest.raises(ValueError, match=r"^x: 1 feature values are NaN or inf"):
        numpyro.handlers.seed(hidden_potts_program, 0)(x, GRAPH, LABELS, 2)


def test_the_hidden_potts_priors_keep_a_scale_for_constant_features():
    """Constant ``x`` made the priors' scale ``std(x) + 1e-12``: sigma ~ HalfNormal(1e-12),
    and NUTS kept sigma at one value in every draw. Constant features now read as scale 1."""
    x = np.full(8, 3.0)
    trace = numpyro.handlers.trace(numpyro.handlers.seed(hidden_potts_program, 0)).get_trace(
        x, GRAPH, LABELS, 2)
    assert float(trace["sigma"]["fn"].scale) == 1.0
    assert float(np.min(trace["means"]["fn"].base_dist.base_dist.scale)) == 2.0
    varying = numpyro.handlers.trace(numpyro.handlers.seed(hidden_potts_program, 0)).get_trace(
        np.linspace(0.0, 1.0, 8), GRAPH, LABELS, 2)
    assert float(varying["sigma"]["fn"].scale) == pytest.approx(np.std(np.linspace(0, 1, 8)))
