"""Harmonic mixtures: mixture models whose class memberships are smoothed on a graph.

Zhu & Lafferty (2005), "Harmonic mixtures: combining mixture models and graph-based methods
for inductive and scalable semi-supervised learning". Paper symbols -> names used here:

* component m ~ Mult(gamma): ``log_weights[m] = log gamma_m`` (M components);
* label y ~ Mult(lambda_m): ``log_label_probs[m, c] = log lambda_{m c}`` (the paper's binary
  ``lambda_m = p(y = 1 | m)`` is column 1 of the ``M x C`` matrix ``lambda``);
* features x ~ G(eta_m): Gaussian ``means``/``covariances`` (full, diagonal or spherical) or
  multinomial ``log_word_probs`` for counts (text);
* ``R[i, m] = p(m | x_i)``: the responsibility matrix of Sec. 3.1, ``f_U = R lambda``;
* ``Delta``: the combinatorial graph Laplacian ``D - W``; the backbone Laplacian of Eq. (6)
  ``tilde Delta = P^T Delta P`` with the lift ``P = blockdiag(I_l, R)``.

Everything here is a pure function of (parameters, data, graph, labels); the backbone
graph (dense, hard and sparse top-k lifts) is in :mod:`graphssl.models.harmonic_backbone`
(re-exported here), the EM fit in :mod:`graphssl.inference.optimize.em`, the graph-discriminative
lambda step in :mod:`graphssl.inference.optimize.harmonic_lambda`.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular
from jax.scipy.special import logsumexp

from graphssl.models.harmonic_backbone import (
    backbone_laplacian,
    hard_lift,
    mixture_lift,
    sparse_backbone_laplacian,
    sparse_lift,
    top_k_responsibilities,
)

__all__ = [
    "COVARIANCE_TYPES",
    "GaussianMixture",
    "MultinomialMixture",
    "component_log_densities",
    "log_responsibilities",
    "responsibilities",
    "labelled_log_responsibilities",
    "log_likelihood",
    "log_prior",
    "label_posterior",
    "mixture_lift",
    "hard_lift",
    "backbone_laplacian",
    "top_k_responsibilities",
    "sparse_lift",
    "sparse_backbone_laplacian",
    "graph_energy",
    "labelled_log_likelihood",
    "objective",
    "numpyro_mixture_model",
]

COVARIANCE_TYPES = ("full", "diag", "spherical")
_LOG_2PI = math.log(2.0 * math.pi)


class _MixtureShapes:
    """What both mixtures of Sec. 2 answer alike: their component and class counts (read off
    ``log_weights [M]`` and ``log_label_probs [M, C]``) and ``log p(m | x_i)``."""

    @property
    def n_components(self) -> int:
        return int(self.log_weights.shape[0])

    @property
    def n_classes(self) -> int:
        return int(self.log_label_probs.shape[1])

    def log_responsibilities(self, X) -> jax.Array:
        """``log p(m | x_i)``, float[n, M] (:func:`log_responsibilities`)."""
        return log_responsibilities(self, X)


@dataclasses.dataclass(frozen=True)
class GaussianMixture(_MixtureShapes):
    """Gaussian mixture theta = {(gamma_m, lambda_m, eta_m)} of Sec. 2.1.

    Shapes: ``log_weights [M]``, ``means [M, D]``, ``covariances`` ``[M, D, D]`` (full),
    ``[M, D]`` (diag) or ``[M]`` (spherical: one variance per component, as in Sec. 4.2),
    ``log_label_probs [M, C]``; static ``covariance_type``.
    """

    log_weights: jax.Array
    means: jax.Array
    covariances: jax.Array
    log_label_probs: jax.Array
    covariance_type: str = dataclasses.field(default="full", metadata=dict(static=True))


@dataclasses.dataclass(frozen=True)
class MultinomialMixture(_MixtureShapes):
    """Multinomial (bag-of-words) mixture for count data (Sec. 4.4; Nigam et al. 2000).

    Shapes: ``log_weights [M]``, ``log_word_probs [M, V]`` (rows sum to one in probability),
    ``log_label_probs [M, C]``. The multinomial coefficient of each document is dropped from
    ``p(x | m)``: it does not depend on theta, so responsibilities and every argmax are exact.
    """

    log_weights: jax.Array
    log_word_probs: jax.Array
    log_label_probs: jax.Array


jax.tree_util.register_dataclass(
    GaussianMixture,
    data_fields=["log_weights", "means", "covariances", "log_label_probs"],
    meta_fields=["covariance_type"],
)
jax.tree_util.register_dataclass(
    MultinomialMixture,
    data_fields=["log_weights", "log_word_probs", "log_label_probs"],
    meta_fields=[],
)


# ----------------------------------------------------------------------------- densities


_QUADRATIC_FEATURES_MAX_D = 8


def _full_mahalanobis_small_d(X, mu, inv_chol):
    """``(x - mu_m)^T Sigma_m^-1 (x - mu_m)``, ``[n, M]``, for small D by two matrix products
    over quadratic features (``x x^T`` flattened, D^2 columns): no ``[n, M, D]`` temporary.
    Points and means are centred on the mean of the means first, which keeps the expanded
    form's cancellation error small (relative ``eps * |x - c|^2 / sigma^2``)."""
    c = mu.mean(0)
    Xc, muc = X - c, mu - c
    prec = jnp.einsum("mkd,mke->mde", inv_chol, inv_chol)  # Sigma_m^-1 = L^-T L^-1
    quad = (Xc[:, :, None] * Xc[:, None, :]).reshape(Xc.shape[0], -1)
    Pmu = jnp.einsum("mde,me->md", prec, muc)
    maha = quad @ prec.reshape(prec.shape[0], -1).T - 2.0 * Xc @ Pmu.T + (muc * Pmu).sum(1)
    return jnp.maximum(maha, 0.0)


def _gaussian_log_densities(mixture: GaussianMixture, X) -> jax.Array:
    """log N(x_i | mu_m, Sigma_m), ``[n, M]``, by matrix products (no ``[n, M, D]`` temp
    except for full covariances with D > 8); points and means centred on the means' centre
    first, so a large common offset of the data costs no precision."""
    mu, cov = mixture.means, mixture.covariances
    D = mu.shape[1]
    kind = mixture.covariance_type
    if kind != "full":  # expanded squares about the means' centre: small cancellation error
        c = mu.mean(0)
        X, mu = X - c, mu - c
    if kind == "spherical":
        sq = (X * X).sum(1)[:, None] - 2.0 * X @ mu.T + (mu * mu).sum(1)[None, :]
        maha = jnp.maximum(sq, 0.0) / cov[None, :]
        logdet = D * jnp.log(cov)
    elif kind == "diag":
        prec = 1.0 / cov
        maha = (X * X) @ prec.T - 2.0 * X @ (mu * prec).T + (mu * mu * prec).sum(1)[None, :]
        maha = jnp.maximum(maha, 0.0)
        logdet = jnp.log(cov).sum(1)
    elif kind == "full":
        chol = jnp.linalg.cholesky(cov)
        eye = jnp.broadcast_to(jnp.eye(D, dtype=cov.dtype), cov.shape)
        inv_chol = solve_triangular(chol, eye, lower=True)  # [M, D, D] = L_m^-1
        logdet = 2.0 * jnp.log(jnp.diagonal(chol, axis1=1, axis2=2)).sum(1)
        if D > _QUADRATIC_FEATURES_MAX_D:
            z = jnp.einsum("nd,med->nme", X, inv_chol) - jnp.einsum("md,med->me", mu, inv_chol)
            maha = (z * z).sum(-1)
        else:
            maha = _full_mahalanobis_small_d(X, mu, inv_chol)
    else:
        raise ValueError(
            f"covariance_type: unknown {kind!r}; use one of {', '.join(COVARIANCE_TYPES)}"
        )
    return -0.5 * (D * _LOG_2PI + logdet[None, :] + maha)


def component_log_densities(mixture, X) -> jax.Array:
    """log p(x_i | eta_m) for every point and component, ``[n, M]`` (Eq. 1's p(x | eta_m)).

    ``X``: ``[n, D]`` features (Gaussian) or ``[n, V]`` counts, dense or
    ``jax.experimental.sparse.BCOO`` (multinomial).
    """
    if isinstance(mixture, MultinomialMixture):
        return X @ mixture.log_word_probs.T
    return _gaussian_log_densities(mixture, X)


def log_responsibilities(mixture, X) -> jax.Array:
    """log R[i, m] = log p(m | x_i) = log gamma_m p(x_i|m) - log sum_k gamma_k p(x_i|k)."""
    joint = component_log_densities(mixture, X) + mixture.log_weights[None, :]
    return joint - logsumexp(joint, axis=1, keepdims=True)


def responsibilities(mixture, X) -> jax.Array:
    """R[i, m] = p(m | x_i), ``[n, M]`` (Sec. 3.1)."""
    return jnp.exp(log_responsibilities(mixture, X))


def labelled_log_responsibilities(mixture, X, labels, observed) -> jax.Array:
    """log p(m | x_i, y_i) for observed rows and log p(m | x_i) for the others, ``[n, M]``.

    This is the E-step posterior of Eq. (1): a labelled point also weighs the component by
    ``lambda_{m y_i}``.
    """
    joint = component_log_densities(mixture, X) + mixture.log_weights[None, :]
    lab = jnp.where(observed, labels, 0)
    label_term = mixture.log_label_probs.T[lab]  # [n, M]
    joint = joint + jnp.where(observed[:, None], label_term, 0.0)
    return joint - logsumexp(joint, axis=1, keepdims=True)


def log_likelihood(mixture, X, labels, observed) -> jax.Array:
    """l(theta) of Eq. (1): labelled terms log sum_m gamma_m lambda_{m y_i} p(x_i|m) plus
    unlabelled terms log sum_m gamma_m p(x_i|m). ``labels: int[n]``, ``observed: bool[n]``."""
    joint = component_log_densities(mixture, X) + mixture.log_weights[None, :]
    lab = jnp.where(observed, labels, 0)
    joint = joint + jnp.where(observed[:, None], mixture.log_label_probs.T[lab], 0.0)
    return logsumexp(joint, axis=1).sum()


def log_prior(
    mixture,
    *,
    reg_covar: float = 1e-6,
    prior_weight: float = 1.0,
    label_pseudocount: float = 0.0,
    word_pseudocount: float = 0.0,
) -> jax.Array:
    """log p(theta) (up to a constant) whose mode the regularised EM M-step computes.

    * covariances: ``-(tau/2) log|Sigma_m| - (tau reg/2) tr Sigma_m^-1`` per component
      (an inverse-Wishart kernel, ``tau = prior_weight``, ``reg = reg_covar``), so the M-step
      gives ``Sigma_m = (S_m + tau reg I) / (N_m + tau)``: no component can collapse;
    * lambda and word probabilities: Dirichlet(1 + pseudocount) kernels.
    With this prior, EM increases ``log_likelihood + log_prior`` monotonically.
    """
    total = jnp.asarray(0.0)
    if label_pseudocount > 0:
        total = total + label_pseudocount * mixture.log_label_probs.sum()
    if isinstance(mixture, MultinomialMixture):
        if word_pseudocount > 0:
            total = total + word_pseudocount * mixture.log_word_probs.sum()
        return total
    cov, kind = mixture.covariances, mixture.covariance_type
    D = mixture.means.shape[1]
    tau, reg = prior_weight, reg_covar
    if kind == "spherical":
        logdet, trace_inv = D * jnp.log(cov), D / cov
    elif kind == "diag":
        logdet, trace_inv = jnp.log(cov).sum(1), (1.0 / cov).sum(1)
    else:
        chol = jnp.linalg.cholesky(cov)
        logdet = 2.0 * jnp.log(jnp.diagonal(chol, axis1=1, axis2=2)).sum(1)
        trace_inv = jnp.trace(jnp.linalg.inv(cov), axis1=1, axis2=2)
    return total + (-0.5 * tau * logdet - 0.5 * tau * reg * trace_inv).sum()


def label_posterior(mixture, X, label_probs=None) -> jax.Array:
    """p(y = c | x) = sum_m p(m | x) lambda_{m c}, ``[n, C]``: f_U = R lambda (Sec. 3.1).

    Works for any x (the paper's "unseen data"). ``label_probs``: an ``M x C`` lambda to use
    instead of the mixture's own (e.g. the harmonic mixture's).
    """
    log_r = log_responsibilities(mixture, X)
    if label_probs is None:
        return jnp.exp(logsumexp(log_r[:, :, None] + mixture.log_label_probs[None], axis=1))
    return jnp.exp(log_r) @ label_probs


# ----------------------------------------------------------------------------- objective


def graph_energy(backbone, label_probs, f_labelled) -> jax.Array:
    """E(theta) of Eq. (2) on the backbone: ``g^T tilde Delta g`` with ``g = [f_L; lambda]``
    (summed over class columns for ``M x C`` lambda); equals ``f^T Delta f`` with
    ``f_U = R lambda``. ``f_labelled: [l]`` or ``[l, C]``; ``label_probs: [M]`` or ``[M, C]``."""
    g = jnp.concatenate([f_labelled, label_probs], axis=0)
    return jnp.sum(g * (backbone @ g))


def labelled_log_likelihood(label_probs, labelled_log_resp, labelled_classes) -> jax.Array:
    """The lambda-dependent part l_L of Eq. (1) (Sec. 3.1):
    ``sum_{i in L} log sum_m p(m | x_i) lambda_{m y_i}`` (= l_L minus a lambda-free constant).

    ``label_probs``: ``[M]`` (binary, lambda_m = p(y=1|m)) or ``[M, C]``;
    ``labelled_log_resp``: log p(m | x_i) for labelled points, ``[l, M]``; classes ``[l]``.
    """
    lam = label_probs
    if lam.ndim == 1:
        lam = jnp.stack([1.0 - lam, lam], axis=1)
    lam_y = lam.T[labelled_classes]  # [l, M]
    tiny = jnp.finfo(lam.dtype).tiny
    log_lam = jnp.log(jnp.maximum(lam_y, tiny))
    return logsumexp(labelled_log_resp + log_lam, axis=1).sum()


def objective(label_probs, alpha, backbone, f_labelled, labelled_log_resp, labelled_classes):
    """O_alpha(lambda) = -alpha l(theta) + (1 - alpha) E(theta), Eq. (3), with gamma, eta fixed
    (convex in lambda, Sec. 3.1). Terms constant in lambda are dropped."""
    ll = labelled_log_likelihood(label_probs, labelled_log_resp, labelled_classes)
    return -alpha * ll + (1.0 - alpha) * graph_energy(backbone, label_probs, f_labelled)


# ----------------------------------------------------------------------------- numpyro


def numpyro_mixture_model(
    X,
    labels=None,
    *,
    n_components: int,
    n_classes: int = 2,
    covariance_type: str = "diag",
    weight_concentration: float = 1.0,
    label_concentration: float = 1.0,
):
    """The mixture of Sec. 2.1 as a numpyro model, with priors, components enumerated.

    gamma ~ Dirichlet(weight_concentration); mu_m ~ N(mean(X), std(X)^2); per-dimension
    (diag/full) or per-component (spherical) scales ~ LogNormal(log std(X) - log(M)/D, 1);
    full: ``Sigma_m = diag(s) C C^T diag(s)`` with C ~ LKJCholesky(D, 2); lambda_m ~
    Dirichlet(label_concentration). The component z_i is summed out exactly (the
    ``log sum_m`` of Eq. 1: parallel enumeration done by hand), so NUTS, SVI and MAP
    (``AutoDelta``) all apply. ``labels``: ``int[n]`` with -1 for unlabelled, or None.
    """
    import numpyro
    import numpyro.distributions as dist

    n, D = X.shape
    M, C = n_components, n_classes
    center, spread = X.mean(0), X.std(0) + 1e-12
    gamma = numpyro.sample("weights", dist.Dirichlet(jnp.full(M, weight_concentration)))
    means = numpyro.sample(
        "means", dist.Normal(center, spread).expand([M, D]).to_event(2)
    )
    loc = jnp.log(spread.mean()) - jnp.log(M) / D
    if covariance_type == "spherical":
        s = numpyro.sample("scales", dist.LogNormal(loc, 1.0).expand([M]).to_event(1))
        cov = s**2
    elif covariance_type in ("diag", "full"):
        s = numpyro.sample("scales", dist.LogNormal(loc, 1.0).expand([M, D]).to_event(2))
        cov = s**2
        if covariance_type == "full":
            corr = numpyro.sample(
                "corr_chol", dist.LKJCholesky(D, 2.0).expand([M]).to_event(1)
            )
            tril = s[:, :, None] * corr
            cov = tril @ jnp.swapaxes(tril, 1, 2)
    else:
        raise ValueError(
            f"covariance_type: unknown {covariance_type!r}; use one of "
            f"{', '.join(COVARIANCE_TYPES)}"
        )
    lam = numpyro.sample(
        "label_probs", dist.Dirichlet(jnp.full(C, label_concentration)).expand([M]).to_event(1)
    )
    mixture = GaussianMixture(
        jnp.log(gamma), means, cov, jnp.log(lam), covariance_type=covariance_type
    )
    if labels is None:
        labels = -jnp.ones(n, dtype=jnp.int32)
    observed = labels >= 0
    with numpyro.plate("data", n):
        joint = component_log_densities(mixture, X) + mixture.log_weights
        lab = jnp.where(observed, labels, 0)
        joint = joint + jnp.where(observed[:, None], mixture.log_label_probs.T[lab], 0.0)
        numpyro.factor("obs", logsumexp(joint, axis=1))
