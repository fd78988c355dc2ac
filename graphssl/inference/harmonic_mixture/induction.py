"""Harmonic mixtures on new points (Zhu & Lafferty 2005, Sec. 3.2, "unseen data"):
``p(y | x) = sum_m p(m | x) lambda_m``, with far points recomputed on the host in float64."""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np

from graphssl.inference.optimize.em import kmeans_assign
from graphssl.models.harmonic_mixture import MultinomialMixture, log_responsibilities

if TYPE_CHECKING:
    from graphssl.inference.harmonic_mixture.fit import HarmonicMixtureFit

__all__ = ["predict_proba", "compiled_log_responsibilities"]

compiled_log_responsibilities = jax.jit(log_responsibilities)
"""``log_responsibilities(mixture, X)`` as one compiled program (run op by op, each of its
operations is an XLA compilation of its own on the first call)."""


def predict_proba(fit: HarmonicMixtureFit, X):
    """Inductive p(y | x) = sum_m p(m | x) lambda_m for any points (Sec. 3.2, "unseen data");
    with the k-means backbone, the nearest centre's lambda row. float64[n, C].

    The log responsibilities come from the compiled program (the mixture's dtype, float32
    unless x64 is on); they are exponentiated and normalised in float64, and so is each
    row of the result: rows sum to one to float64 rounding. A point whose compiled values
    are not finite (far from the data: from ~1e19 in float32 squared distances overflow),
    or that lies beyond the compiled program's resolution (:func:`_beyond_resolution`), is
    recomputed on the host in float64 (:func:`_host_log_responsibilities`,
    :func:`_nearest_centers`): far out, p(m | x) goes to the component nearest in
    Mahalanobis distance, and the point gets that component's class distribution."""
    dense = X.todense() if hasattr(X, "todense") else X
    with np.errstate(over="ignore"):  # beyond the float32 range: inf, recomputed below
        Xj = jnp.asarray(dense)
    if fit.centers is not None:
        a, d2 = kmeans_assign(Xj, fit.centers)
        a = np.array(a)
        far = ~np.isfinite(np.asarray(d2)) | _beyond_resolution(dense, fit.centers, Xj.dtype)
        if far.any():
            a[far] = _nearest_centers(np.asarray(dense)[far], fit.centers)
        return np.asarray(fit.label_probs, np.float64)[a]
    log_r = np.asarray(compiled_log_responsibilities(fit.mixture, Xj), np.float64)
    far = ~np.all(np.isfinite(log_r), axis=1)
    if not isinstance(fit.mixture, MultinomialMixture):
        far |= _beyond_resolution(dense, fit.mixture.means, Xj.dtype)
    if far.any():
        log_r[far] = _host_log_responsibilities(fit.mixture, np.asarray(dense)[far])
    R = np.exp(log_r - log_r.max(axis=1, keepdims=True))
    P = (R / R.sum(axis=1, keepdims=True)) @ np.asarray(fit.label_probs, np.float64)
    total = P.sum(axis=1, keepdims=True)  # 0 where lambda's rows are 0: left as they are
    return np.where(total > 0, P / np.where(total > 0, total, 1.0), P)


def _scaled_about(X, center):
    """``((X - center) / s, s)`` with ``s = max(1, max_d |x_d - center_d|)`` per row: points
    of any size (up to float64's range) in a box of side 2, and their scales."""
    X = np.asarray(X, np.float64) - center
    s = np.maximum(1.0, np.abs(X).max(axis=1))
    return X / s[:, None], s


def _beyond_resolution(X, centers, dtype) -> np.ndarray:
    """``bool[n]``: points farther from the centres' mean than ``1 / eps`` (of ``dtype``)
    times the centres' spread (at least 1). There the compiled expanded squares
    (``|x|^2 - 2 x.mu + |mu|^2``, rounding error ``eps |x|^2``) can no longer tell the
    centres apart (their differences are ``~ |x| spread``): 8e6 spreads in float32."""
    if not np.issubdtype(np.dtype(dtype), np.floating) or np.shape(X)[0] == 0:
        return np.zeros(np.shape(X)[0], dtype=bool)
    centers = np.asarray(centers, np.float64)
    c = centers.mean(axis=0)
    spread = max(1.0, float(np.abs(centers - c).max(initial=0.0)))
    reach = np.abs(np.asarray(X, np.float64) - c).max(axis=1)
    return reach * float(np.finfo(np.dtype(dtype)).eps) > spread


def _nearest_centers(X, centers) -> np.ndarray:
    """Index of each row's nearest centre, in float64 (the k-means backbone's assignment for
    points too far for the compiled one). With ``x - c = s z`` (:func:`_scaled_about`, c the
    centres' mean) and ``u_m = centre_m - c``, ``|x - centre_m|^2 = s^2 |z|^2 - 2 s z.u_m +
    |u_m|^2``: the first term is common, and the rest keeps the centres apart however far x
    is (``x - centre_m`` itself would round every centre away)."""
    centers = np.asarray(centers, np.float64)
    c = centers.mean(axis=0)
    Z, s = _scaled_about(X, c)
    U = centers - c
    return np.argmin((U * U).sum(axis=1)[None, :] - 2.0 * s[:, None] * (Z @ U.T), axis=1)


def _host_log_responsibilities(mixture, X) -> np.ndarray:
    """``log p(m | x)``, float64[n, M], on the host for points whose compiled values are not
    finite (a few rows, far from the data).

    Gaussian: with ``x - c = s z`` (:func:`_scaled_about`, c the means' centre),
    ``u_m = mu_m - c`` and ``P_m = Sigma_m^-1``, the Mahalanobis distance is
    ``s^2 A_m - 2 s B_m + C_m`` (``A_m = z'P_m z``, ``B_m = z'P_m u_m``, ``C_m = u_m'P_m u_m``).
    The term ``s^2 min_k A_k`` is common to every component and left out before anything
    is added, so nothing overflows or rounds away: components of equal shape stay apart by
    ``B_m`` (the nearest mean along x's direction wins) however far x is. Multinomial: the
    float64 log joint ``x . log p_m + log gamma_m`` directly."""
    X = np.asarray(X, np.float64)
    log_w = np.asarray(mixture.log_weights, np.float64)
    if isinstance(mixture, MultinomialMixture):
        joint = X @ np.asarray(mixture.log_word_probs, np.float64).T + log_w[None, :]
    else:
        mu = np.asarray(mixture.means, np.float64)
        cov = np.asarray(mixture.covariances, np.float64)
        D = mu.shape[1]
        c = mu.mean(axis=0)
        Z, s = _scaled_about(X, c)
        U = mu - c
        kind = mixture.covariance_type
        if kind == "spherical":
            A = (Z * Z).sum(axis=1)[:, None] / cov[None, :]
            B = (Z @ U.T) / cov[None, :]
            C = (U * U).sum(axis=1) / cov
            logdet = D * np.log(cov)
        elif kind == "diag":
            A = (Z * Z) @ (1.0 / cov).T
            B = Z @ (U / cov).T
            C = (U * U / cov).sum(axis=1)
            logdet = np.log(cov).sum(axis=1)
        else:
            chol = np.linalg.cholesky(cov)  # [M, D, D]
            inv_chol = np.linalg.inv(chol)  # L_m^-1, P_m = L_m^-T L_m^-1
            Y = np.einsum("mde,ne->nmd", inv_chol, Z)
            V = np.einsum("mde,me->md", inv_chol, U)
            A = (Y * Y).sum(axis=-1)
            B = (Y * V[None]).sum(axis=-1)
            C = (V * V).sum(axis=1)
            logdet = 2.0 * np.log(np.diagonal(chol, axis1=1, axis2=2)).sum(axis=1)
        b = log_w - 0.5 * (D * np.log(2.0 * np.pi) + logdet + C)
        with np.errstate(over="ignore"):  # -inf: a component far narrower along x
            excess = s[:, None] * (s[:, None] * (A - A.min(axis=1, keepdims=True)))
            joint = b[None, :] + s[:, None] * B - 0.5 * excess
    top = joint.max(axis=1, keepdims=True)
    shifted = joint - top
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
