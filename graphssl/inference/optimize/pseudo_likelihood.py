"""Learned Potts potentials by maximum pseudo-likelihood (Besag 1975).

The conditional random field over node labels with a feature unary and K coupling graphs,

    log p(y) = sum_i alpha u_{i, y_i} + sum_k beta_k sum_{i<j} W^k_ij [y_i = y_j] - log Z,   (1)

(``u_i = log p(y_i | x_i)`` from the feature model of :mod:`graphssl.models.feature_model`;
``alpha`` the field weight; ``beta_k`` the coupling strength of graph k, e.g. the citation
graph and a kNN graph of the features), has Gibbs conditionals

    log p(y_i = c | y_-i) = alpha u_ic + sum_k beta_k m^k_ic - log-sum-exp_c(...),          (2)
    m^k_ic = sum_j W^k_ij [y_j = c].

The pseudo-likelihood of the labelled nodes ``L``, ``PL(theta) = sum_{i in L} log p(y_i |
y_N(i))`` with ``theta = (alpha, beta_1..beta_K)``, is concave in ``theta`` (Eq. 2 is a
multinomial logit in theta): one small convex fit, jit-able. Most neighbours of a labelled node
are unlabelled, so ``[y_j = c]`` is replaced by a belief ``q_jc`` -- one-hot for labelled
neighbours, the current marginal (first the feature model's prediction, then the mean-field
posterior) for the others -- and the fit is repeated with the new beliefs
(:func:`graphssl.inference.optimize.feature_potts.fit_feature_potts`). The labelled nodes' own
``u_i`` must be out-of-fold (:func:`~graphssl.inference.optimize.logistic.
cross_fitted_log_probabilities`): an in-sample fit is near-certain on them and would push
``alpha`` up and ``beta`` down. A Gaussian prior ``theta ~ N(0, tau^-1 I)`` restricted to
``theta >= 0`` (attractive couplings, as Swendsen-Wang needs) regularises the fit.

Symbols to arguments: ``u`` -> ``unary`` [m, C], ``m^k`` -> ``messages`` [K, m, C], ``y``
-> ``labels`` [m], ``tau`` -> ``prior_precision``, ``theta`` -> ``theta`` [1 + K].
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

__all__ = [
    "PseudoLikelihoodFit",
    "pseudo_log_likelihood",
    "neighbor_beliefs",
    "fit_pseudo_likelihood",
]


class PseudoLikelihoodFit(NamedTuple):
    """``theta`` = (alpha, beta_1..beta_K) at the maximum; ``log_pl`` there (without the
    prior); ``iterations``; ``converged``."""

    theta: np.ndarray
    log_pl: float
    iterations: int
    converged: bool


def pseudo_log_likelihood(theta, unary, messages, labels, prior_precision=0.0):
    """Eq. (2) summed over the rows, plus the Gaussian log prior ``-tau/2 ||theta||^2``.

    ``theta`` float[1 + K]; ``unary`` float[m, C]; ``messages`` float[K, m, C]; ``labels``
    int[m]. Pure JAX: jit-, grad- and vmap-able.
    """
    logits = theta[0] * unary + jnp.einsum("k,kmc->mc", theta[1:], messages)
    log_p = jax.nn.log_softmax(logits, axis=-1)
    picked = jnp.take_along_axis(log_p, labels[:, None], axis=1)[:, 0]
    return jnp.sum(picked) - 0.5 * prior_precision * jnp.sum(theta**2)


_value_and_grad = jax.jit(jax.value_and_grad(
    lambda theta, u, m, y, tau: -pseudo_log_likelihood(theta, u, m, y, tau)))


def neighbor_beliefs(graphs, beliefs, rows) -> np.ndarray:
    """``m^k_ic = sum_j W^k_ij q_jc`` for the given rows: float[K, len(rows), C].

    ``graphs``: scipy sparse matrices or :class:`~graphssl.graph.Graph` (n x n);
    ``beliefs``: float[n, C] (one-hot rows for labelled nodes).
    """
    out = []
    for W in graphs:
        W = W if sp.issparse(W) else W.to_scipy()
        out.append(np.asarray(sp.csr_matrix(W)[rows] @ beliefs))
    return np.stack(out)


def fit_pseudo_likelihood(unary, messages, labels, *, prior_precision: float = 1.0,
                          init=None, max_iter: int = 200,
                          tol: float = 1e-8) -> PseudoLikelihoodFit:
    """Maximise the pseudo-likelihood of Eq. (2) over ``theta >= 0`` (L-BFGS-B).

    scipy's L-BFGS-B on the host (``1 + K`` parameters, bounds ``theta >= 0``: no
    bound-constrained L-BFGS among our JAX dependencies) over the jitted value and gradient
    of Eq. (2); a pure function of its arguments (``init`` warm-starts it).

    Args:
        unary: float[m, C], the labelled nodes' out-of-fold feature log-probabilities.
        messages: float[K, m, C] (:func:`neighbor_beliefs`) or float[m, C] for K = 1.
        labels: int[m] in 0..C-1.
        prior_precision: tau of the Gaussian prior on theta (>= 0).
        init: starting theta (default all ones).
    """
    from scipy.optimize import minimize

    unary = np.asarray(unary, dtype=np.float64)
    messages = np.asarray(messages, dtype=np.float64)
    if messages.ndim == 2:
        messages = messages[None]
    labels = np.asarray(labels)
    if unary.ndim != 2:
        raise ValueError(f"unary: expected the labelled rows' log-probabilities float[m, C], "
                         f"got shape {unary.shape}")
    m, C = unary.shape
    if messages.shape[1:] != (m, C) or labels.shape != (m,):
        raise ValueError(f"messages: expected shape (K, {m}, {C}) and labels ({m},); got "
                         f"{messages.shape} and {labels.shape}")
    if not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"labels: integer classes in 0..{C - 1} (labelled rows only), got "
                         f"dtype {labels.dtype}; encode them with "
                         "graphssl.validation.encode_labels")
    if np.any(labels < 0) or np.any(labels >= C):
        raise ValueError(f"labels: values must lie in 0..{C - 1} (labelled rows only)")
    if not np.isfinite(prior_precision) or prior_precision < 0:
        raise ValueError(f"prior_precision: must be >= 0, got {prior_precision}")
    n_params = 1 + messages.shape[0]
    theta0 = np.ones(n_params) if init is None else np.asarray(init, dtype=np.float64)
    if theta0.shape != (n_params,) or not np.all(np.isfinite(theta0)):
        raise ValueError(f"init: a finite starting theta = (alpha, beta_1..beta_K) of shape "
                         f"({n_params},) for K = {n_params - 1} graphs, got shape "
                         f"{theta0.shape}; pass one value per parameter, or None")
    args = (jnp.asarray(unary), jnp.asarray(messages), jnp.asarray(labels),
            jnp.asarray(float(prior_precision)))

    def fun(theta):
        value, grad = _value_and_grad(jnp.asarray(theta, args[0].dtype), *args)
        return float(value), np.asarray(grad, dtype=np.float64)

    res = minimize(fun, theta0, jac=True, method="L-BFGS-B", bounds=[(0.0, None)] * n_params,
                   options=dict(maxiter=max_iter, gtol=tol))
    log_pl = float(pseudo_log_likelihood(jnp.asarray(res.x, args[0].dtype), *args[:3]))
    return PseudoLikelihoodFit(np.asarray(res.x), log_pl, int(res.nit), bool(res.success))
