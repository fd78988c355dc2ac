"""Boltzmann-machine learning for the MRF of Zhu & Ghahramani (2002).

Gradient ascent on ``log P(O_L | X, Theta) + log p(Theta)``.  The likelihood gradient is
the clamped minus the unclamped expectation of the gradient of the negative energy,
Eqs. (24), (38).  Since ``-energy(Y; Theta) = sum_{i<j} A_ij(Theta) delta(y_i,y_j) +
sum_i h_i(y_i; Theta)`` is linear in the sufficient statistics, the expectations need only
two moments per phase: the edge agreement probabilities ``m_e = P(y_i = y_j)`` and the node
marginals ``p_ic``.  The gradient is then the ordinary gradient of

    phi(Theta) = 1/2 sum_e A_e(Theta) (m^c_e - m^u_e) + sum_ic h_ic(Theta) p^c_ic
                 - sum_ic h^u_ic(Theta) p^u_ic - l log(C - 1 + e^{e^gamma})

at fixed moments, which reproduces Eqs. (41)-(44) term by term; the last term collects the
summed-out observations of Eqs. (64) and (73) (their ``u`` parts cancel; Eq. 82).

The implementation is split in three modules; this one re-exports their public names
(``from graphssl.inference.boltzmann import learning as bl`` gives everything) and holds
the posterior at learned parameters (Eq. 5):

* ``boltzmann_expectations``: problem data, moments by exact enumeration and by chains,
  the gradient and the log-likelihood (exact Eq. 82, estimate Eq. 27);
* ``boltzmann_optimisation``: priors, the gradient oracle, the adaptive step of Sec. 3.1,
  optax ascent, ``fit`` and restarts (the data-scale start, then Sec. 5.2's random ones).

The estimator's default for sampled problems is not this likelihood ascent but the grid of
:mod:`graphssl.inference.boltzmann.selection` (coupling and length scale chosen by the
model's predictive probability of held-out labelled points; the reasons are stated there).

Symbol map: see ``graphssl.models.boltzmann``.  ``BasicParams.log_sigma = log sigma``;
``ExtendedParams`` = ``(alpha_0, alpha_1..D, beta_1..C, gamma)``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from graphssl.inference.boltzmann.expectations import (
    MAX_ENUMERATION,
    METHODS,
    BasicParams,
    BoltzmannProblem,
    ChainSettings,
    Moments,
    _models_jit,
    chain_moments,
    chain_samples,
    enumerate_moments,
    exact_log_likelihood,
    gradient,
    log_likelihood_estimate,
    models,
    sampled_moments,
)
from graphssl.inference.boltzmann.optimisation import (
    ExponentialSigmaPrior,
    GradientOracle,
    OracleState,
    OracleValue,
    ThetaPrior,
    adaptive_hill_climb,
    data_scale_params,
    fit,
    log_prior,
    optax_ascent,
    random_restarts,
    sample_initial_params,
)

__all__ = [
    "MAX_ENUMERATION",
    "METHODS",
    "BasicParams",
    "BoltzmannPosterior",
    "BoltzmannProblem",
    "ChainSettings",
    "ExponentialSigmaPrior",
    "GradientOracle",
    "Moments",
    "OracleState",
    "OracleValue",
    "ThetaPrior",
    "adaptive_hill_climb",
    "data_scale_params",
    "chain_moments",
    "enumerate_moments",
    "exact_log_likelihood",
    "fit",
    "gradient",
    "log_likelihood_estimate",
    "log_prior",
    "models",
    "optax_ascent",
    "posterior",
    "random_restarts",
    "sample_initial_params",
    "sampled_moments",
]


# --------------------------------------------------------------------------- prediction
class BoltzmannPosterior(NamedTuple):
    """Posterior over the true labels given the observations, at fixed Theta (Eq. 5).

    ``marginals[i, c] = P(y_i = c | O_L, X, Theta)``; ``posterior_mean_labels`` = per-node
    argmax of the marginals (the paper's "MAP labeling", Eq. 5); ``map_labels`` = the single
    most probable joint configuration (the mincut state of Sec. 7; exact by enumeration;
    for chains the lowest energy among the best draw, ICM and alpha-expansion,
    :func:`graphssl.inference.optimize.map_search.map_search`); ``suspected_errors`` =
    indices of observed points whose observed label is not the posterior-mean label;
    ``p_observed`` = ``P(y_i = o_i | O_L)`` (NaN where unobserved); ``samples`` /
    ``model``: the chains (:class:`~graphssl.inference.mcmc.chains.Samples`) and the
    clamped-phase model they sampled, for convergence checks and ArviZ (None under
    enumeration); ``map_search``: the search's record, every candidate's energy side by
    side (:class:`~graphssl.inference.optimize.map_search.MapSearchInfo`; None under
    enumeration, whose mode is exact)."""

    marginals: np.ndarray
    posterior_mean_labels: np.ndarray
    map_labels: np.ndarray
    suspected_errors: np.ndarray
    p_observed: np.ndarray
    samples: object = None
    model: object = None
    map_search: object = None


def posterior(
    problem: BoltzmannProblem,
    theta,
    *,
    method="enumeration",
    key=None,
    chains: ChainSettings | None = None,
    decision=None,
) -> BoltzmannPosterior:
    """Label posterior of the clamped phase (G for the extended model) at ``theta``.
    ``key``: PRNG key of the chains (required unless ``method="enumeration"``);
    ``decision``: the labelling reported as the posterior mean, from the marginals (as
    :func:`~graphssl.inference.boltzmann.selection.grid_posterior`'s), the MAP search's
    posterior-mean candidate (None: the argmax)."""
    template = problem.template()
    clamped, _, _ = _models_jit(template, problem.geometry, theta)
    samples = None
    if method == "enumeration":
        m = enumerate_moments(clamped)
        mode = m.mode
    else:
        chains = (
            ChainSettings(n_chains=4, n_samples=2000, burn_in=200) if chains is None else chains
        )
        if key is None:
            raise ValueError(f"key: method={method!r} samples the posterior; pass a PRNG key "
                             "(key=jax.random.key(seed))")
        samples = chain_samples(clamped, key, method, chains)  # moments: not needed
    if samples is None:
        marg = np.asarray(m.node_marginals)
    else:  # the mean of each draw's conditionals (less variance than the label frequencies)
        from graphssl.inference.mcmc.chains import rao_blackwell_marginals

        marg = np.asarray(rao_blackwell_marginals(clamped, samples))
    labels = np.asarray(problem.labels)
    obs = labels >= 0
    mean_labels = marg.argmax(1)
    search = None
    if samples is not None:  # the lowest energy found, not merely the best draw
        from graphssl.inference.optimize.map_search import map_search

        shown = mean_labels if decision is None else np.asarray(decision(marg), np.int64)
        mode, search = map_search(clamped, samples=samples, posterior_mean=shown)
    p_obs = np.full(len(labels), np.nan)
    p_obs[obs] = marg[obs, labels[obs]]
    wrong = np.flatnonzero(obs & (mean_labels != labels))
    return BoltzmannPosterior(marg, mean_labels, np.asarray(mode), wrong, p_obs, samples,
                              None if samples is None else clamped, search)
