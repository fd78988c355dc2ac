"""A feature model for node labels: multinomial logistic regression with a Gaussian prior.

The unary potentials of a graph model that comes with node features. For features
``x_i in R^d`` (row ``i`` of ``X``, dense or a ``jax.experimental.sparse.BCOO``), weights
``W in R^{d x C}`` and biases ``b in R^C``,

    p(y_i = c | x_i, W, b) = softmax(x_i W + b)_c,                                     (1)
    log p(W, b | D) = sum_i sum_c t_ic w_i log p(y_i = c | x_i) - (lambda / 2) ||W||_F^2
                      + const,                                                        (2)

the log posterior under an isotropic Gaussian prior ``W ~ N(0, lambda^-1 I)`` (the bias is
not penalised), with one-hot or soft targets ``t_ic`` and row weights ``w_i`` (0 leaves a row
out: cross-fitting folds). Symbols to arguments: ``X`` -> ``features``, ``t`` -> ``targets``,
``w`` -> ``weights``, ``lambda`` -> ``prior_precision``. The fit (L-BFGS on the negative of
(2)) is :func:`graphssl.inference.optimize.logistic.fit_feature_model`.

:func:`normalize_rows` is the feature map used for bag-of-words data: rows scaled to unit
Euclidean norm, so that ``x_i . x_j`` is the cosine similarity and one prior precision suits
documents of any length.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

__all__ = [
    "FeatureModelParams",
    "feature_logits",
    "feature_log_probabilities",
    "feature_log_posterior",
    "normalize_rows",
    "as_feature_matrix",
]


class FeatureModelParams(NamedTuple):
    """Parameters of Eq. (1): ``weights float[d, C]`` and ``bias float[C]``."""

    weights: jax.Array
    bias: jax.Array


def feature_logits(params: FeatureModelParams, features) -> jax.Array:
    """``X W + b``, shape [n, C] (``features`` dense or BCOO, [n, d])."""
    return features @ params.weights + params.bias


def feature_log_probabilities(params: FeatureModelParams, features) -> jax.Array:
    """``log p(y_i = c | x_i)`` of Eq. (1), shape [n, C], normalised in log space."""
    return jax.nn.log_softmax(feature_logits(params, features), axis=-1)


def feature_log_posterior(params: FeatureModelParams, features, targets, weights,
                          prior_precision) -> jax.Array:
    """Eq. (2): weighted log likelihood of ``targets`` (float[n, C], rows summing to 1 where
    ``weights > 0``) plus the Gaussian log prior on ``params.weights`` (up to a constant)."""
    log_p = feature_log_probabilities(params, features)
    log_lik = jnp.sum(weights[:, None] * targets * log_p)
    return log_lik - 0.5 * prior_precision * jnp.sum(params.weights**2)


def normalize_rows(features) -> sp.csr_matrix:
    """Rows scaled to unit L2 norm (all-zero rows stay zero), as float64 CSR."""
    X = sp.csr_matrix(features, dtype=np.float64)
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    scale = np.where(norms > 0, 1.0 / np.where(norms > 0, norms, 1.0), 0.0)
    return sp.csr_matrix(sp.diags(scale) @ X)


def as_feature_matrix(features, dtype=None):
    """A scipy sparse matrix as ``jax.experimental.sparse.BCOO``, anything else as a dense
    ``jax.Array``; ``dtype`` defaults to JAX's default float."""
    from jax.experimental import sparse as jsparse

    dtype = dtype or jnp.zeros(()).dtype
    if sp.issparse(features):
        coo = sp.coo_matrix(features)
        index = np.stack([coo.row, coo.col], axis=1).astype(np.int32)
        return jsparse.BCOO((jnp.asarray(coo.data, dtype=dtype), jnp.asarray(index)),
                            shape=coo.shape, indices_sorted=False, unique_indices=True)
    return jnp.asarray(features, dtype=dtype)
