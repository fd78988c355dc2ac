"""Edge-weight schemes (Gaussian, Walder's, cosine, per-dimension length scales) on
distances or features; pure array functions. Re-exported by :mod:`graphssl.graph`, whose
docstring lists the schemes with their equations."""

from __future__ import annotations

import numbers

import jax.numpy as jnp
import numpy as np

from graphssl._warnings import warn_user
from graphssl.neighbors import _squared_norms

__all__ = ["GraphWeightsUnderflowWarning", "gaussian_weights", "sigma_kth_neighbor",
           "local_widths", "local_gaussian_weights", "walder_omega", "length_scale_weights"]


class GraphWeightsUnderflowWarning(UserWarning):
    """A fixed Gaussian width ``sigma`` far below the data's distances: most edge weights
    underflow to 0 in the graph's float32 storage, so the graph is no longer the one asked
    for (with all of them gone, no label reaches anything)."""


_STORED_TINY = float(np.finfo(np.float32).tiny)  # the graph's weights are float32 on device


def _warn_if_vanishing(weights, distances, sigma) -> None:
    """:class:`GraphWeightsUnderflowWarning` when more than half of the edges' weights
    under a numeric ``sigma`` lie below float32's smallest normal number."""
    weights = np.asarray(weights)
    share = float(np.mean(weights < _STORED_TINY)) if weights.size else 0.0
    if share > 0.5:
        warn_user(
            f"sigma={sigma:g}: {100 * share:.0f} % of the edges' Gaussian weights "
            f"exp(-d^2 / (2 sigma^2)) underflow to 0 in float32 (median edge distance "
            f"{float(np.median(distances)):.3g}); give a width near the data's distances, "
            "use sigma='local' or 'kth_over_3' (kNN graphs) or 'walder', or standardise X",
            GraphWeightsUnderflowWarning)


def gaussian_weights(sq_dist, sigma):
    """Gaussian weights ``exp(-d^2 / (2 sigma^2))`` (Bergamim & Breve Eq. 6)."""
    if not np.all(np.asarray(sigma) > 0):
        raise ValueError(f"sigma: the Gaussian width must be positive, got {sigma}")
    sigma = np.asarray(sigma, dtype=np.float64)
    with np.errstate(over="ignore", under="ignore"):
        width = 2.0 * sigma**2
    if np.all(np.isfinite(width)) and np.all(width > 0):
        return np.exp(-np.asarray(sq_dist) / width)
    with np.errstate(over="ignore"):  # sigma near 1e+-160: d^2 / sigma / sigma, no sigma^2
        return np.exp(-0.5 * (np.asarray(sq_dist) / sigma) / sigma)


def _neighbor_distances(distances) -> np.ndarray:
    """``float64[n, k]`` neighbour distances, ``k >= 1`` (the table of :func:`knn_search`;
    a 1-D array is no such table: its last entry would be read as every point's)."""
    distances = np.asarray(distances, dtype=np.float64)
    if distances.ndim != 2 or distances.shape[1] < 1:
        raise ValueError(f"distances: expected the float[n, k] neighbour distances of "
                         f"knn_search (k >= 1), got shape {distances.shape}")
    return distances


def sigma_kth_neighbor(distances) -> float:
    """``sigma = (1 / 3N) sum_i d_{i,k(i)}``: mean distance to the k-th neighbour over 3.

    Bergamim & Breve Eq. 7; ``distances`` is the ``[n, k]`` output of :func:`knn_search`.
    """
    distances = _neighbor_distances(distances)
    sigma = float(np.mean(distances[:, -1]) / 3.0)
    if sigma <= 0:
        # every point has k exact duplicates: fall back on the non-zero distances of the table
        positive = distances[distances > 0]
        if positive.size == 0:
            raise ValueError(
                "X: every point's k nearest neighbours are exact duplicates (distance 0), so "
                "the Gaussian width is undefined; give sigma as a number or increase k"
            )
        sigma = float(np.mean(positive) / 3.0)
    return sigma


def local_widths(distances) -> np.ndarray:
    """``sigma_i = d_{i,k(i)} / 3``: each point's own distance to its k-th neighbour over 3
    (Bergamim & Breve's Eq. 7 rule per point instead of averaged; the local scaling of
    Zelnik-Manor & Perona 2004), ``float[n]``. A point whose k neighbours are all exact
    duplicates (width 0) gets the global width of :func:`sigma_kth_neighbor`."""
    distances = _neighbor_distances(distances)
    widths = distances[:, -1] / 3.0
    if np.any(widths <= 0):
        widths = np.where(widths > 0, widths, sigma_kth_neighbor(distances))
    return widths


def local_gaussian_weights(sq_dist, width_i, width_j):
    """``exp(-d_ij^2 / (2 sigma_i sigma_j))``: the Gaussian weight with the geometric mean of
    the two end points' widths (:func:`local_widths`), symmetric in i and j."""
    return np.exp(-np.asarray(sq_dist) / (2.0 * np.asarray(width_i) * np.asarray(width_j)))


def walder_omega(X) -> float:
    """``omega = 1 / mean squared distance over all pairs i != j`` in O(n d), no n x n array.

    Uses ``sum_{i,j} ||x_i - x_j||^2 = 2 n sum_i ||x_i||^2 - 2 ||sum_i x_i||^2`` (Walder Sec. 5).
    """
    X = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    total = 2.0 * n * _squared_norms(X).sum() - 2.0 * np.sum(X.sum(axis=0) ** 2)
    mean_sq = total / (n * (n - 1))
    if mean_sq <= 0:
        raise ValueError("X: all points coincide; the graph weights are undefined")
    return float(1.0 / mean_sq)


def length_scale_weights(X, senders, receivers, alpha0, log_length_scales):
    """Per-dimension length-scale weights (Zhu & Ghahramani Eq. 39), in JAX.

    ``A_ij = exp(alpha_0 - sum_d (x_i^d - x_j^d)^2 / exp(alpha_d))``; ``alpha0`` is alpha_0 and
    ``log_length_scales[d]`` is alpha_d. Differentiable in both.
    """
    X = jnp.asarray(X)
    diff = X[senders] - X[receivers]
    return jnp.exp(alpha0 - jnp.sum(diff**2 * jnp.exp(-jnp.asarray(log_length_scales)), axis=-1))


def _cosine_similarity_rows(X, rows, cols):
    X = np.asarray(X, dtype=np.float64)
    norms = np.sqrt(_squared_norms(X))
    norms[norms == 0] = 1.0
    return np.einsum("ij,ij->i", X[rows], X[cols]) / (norms[rows] * norms[cols])


def _edge_weights(X, rows, cols, distances, weight, sigma, t, knn_distances=None):
    """Weights of the edges ``rows -> cols`` with Euclidean ``distances`` under a scheme."""
    if weight == "binary":
        return np.ones_like(distances)
    if weight == "distance":
        return distances.copy()
    if weight == "cosine":
        if isinstance(t, bool) or not isinstance(t, numbers.Real) or not 0 < t < np.inf:
            raise ValueError(f"t: the cosine weights' temperature exp(-(1 - cos) / t) must be "
                             f"a positive number, got {t!r}")
        return np.exp(-(1.0 - _cosine_similarity_rows(X, rows, cols)) / t)
    if weight != "gaussian":
        raise ValueError(
            f"weight: unknown scheme {weight!r}; use 'gaussian', 'binary', 'distance' or 'cosine'"
        )
    sq = distances**2
    if not (sigma is None or isinstance(sigma, str | numbers.Real)) or isinstance(sigma, bool):
        raise ValueError(f"sigma: one positive number or a rule ('kth_over_3', 'local', "
                         f"'walder'), got {type(sigma).__name__} {np.shape(sigma)}")
    if sigma is None or sigma in ("kth_over_3", "local"):
        if knn_distances is None:
            raise ValueError(f"sigma: {sigma!r} needs a kNN graph; give sigma as a number")
        if sigma == "local":
            widths = local_widths(knn_distances)
            return local_gaussian_weights(sq, widths[rows], widths[cols])
        return gaussian_weights(sq, sigma_kth_neighbor(knn_distances))
    if sigma == "walder":
        return np.exp(-walder_omega(X) * sq)
    if isinstance(sigma, str):
        raise ValueError(
            f"sigma: unknown rule {sigma!r}; use a positive number, 'kth_over_3', 'local' or "
            "'walder'"
        )
    weights = gaussian_weights(sq, float(sigma))
    _warn_if_vanishing(weights, distances, float(sigma))
    return weights
