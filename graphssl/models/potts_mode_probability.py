"""Mode probability of the naive-mean-field Potts model and beta tuning.

Bergamim & Breve (2022), "On tuning a mean-field model for semi-supervised
classification", Sec. 5 and 5.1.

Paper symbols -> argument names:

* ``Gamma`` (Eq. 21), the probability of the most probable configuration of the
  product distribution ``Phi(s) = prod_i phi_i(s_i)``: ``log_mode_probability``.
* ``h_i(s)`` (Eq. 16), the mean fields: ``fields`` ``[n, q]``.
* ``beta``: ``beta``; ``q``: ``n_classes``; ``r_l = N_l / N``: ``labeled_rate``.
* ``gamma`` (Eq. 27), the target per-node mode probability: ``gamma``; presets
  ``"nmfA"`` = ``(1 + q) / (2 q)`` and ``"nmfB"`` = ``1`` (Sec. 6).

Everything here is a pure function of numbers or arrays (no inference).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq

__all__ = [
    "BETA_PRESETS",
    "approx_log_mode_probability",
    "approx_log_mode_probability_grad",
    "gamma_preset",
    "log_mode_probability",
    "log_mode_probability_from_fields",
    "solve_beta",
]

BETA_PRESETS = ("nmfA", "nmfB")


def _check_rate_and_classes(labeled_rate: float, n_classes: int) -> None:
    if not (0.0 <= float(labeled_rate) <= 1.0):
        raise ValueError(
            f"labeled_rate must lie in [0, 1] (N_l / N), got {labeled_rate!r}."
        )
    if int(n_classes) != n_classes or n_classes < 2:
        raise ValueError(f"n_classes must be an integer >= 2, got {n_classes!r}.")


def approx_log_mode_probability(beta, labeled_rate: float, n_classes: int):
    """Low-beta approximation of ``(1/N) ln Gamma``, Eq. (26) of Bergamim & Breve.

    ``(1/N) ln Gamma ~ beta (r_l + 1/q) - r_l ln(q + 2 beta) - (1 - r_l) ln(q + beta)``

    It follows from a first-order Taylor expansion of ``Z_i`` (Eq. 23) on a
    row-normalised graph (Eq. 9) with unit fields on the labelled nodes (Eq. 4).
    Valid at small beta only: it diverges as ``beta -> inf``.

    Args:
        beta: inverse temperature ``beta >= 0`` (scalar or array).
        labeled_rate: ``r_l = N_l / N``.
        n_classes: ``q``.
    Returns:
        ``(1/N) ln Gamma`` (same shape as ``beta``).
    """
    _check_rate_and_classes(labeled_rate, n_classes)
    beta = np.asarray(beta, dtype=np.float64)
    r, q = float(labeled_rate), float(n_classes)
    return beta * (r + 1.0 / q) - r * np.log(q + 2.0 * beta) - (1.0 - r) * np.log(q + beta)


def approx_log_mode_probability_grad(beta, labeled_rate: float, n_classes: int):
    """d/d beta of Eq. (26): ``r_l + 1/q - 2 r_l/(q + 2 beta) - (1 - r_l)/(q + beta)``."""
    beta = np.asarray(beta, dtype=np.float64)
    r, q = float(labeled_rate), float(n_classes)
    return r + 1.0 / q - 2.0 * r / (q + 2.0 * beta) - (1.0 - r) / (q + beta)


def gamma_preset(beta_spec: str, n_classes: int) -> float:
    """Target ``gamma`` of the paper's two presets (Sec. 5.1 and 6).

    ``"nmfA"``: ``gamma = (1 + q) / (2 q)`` (midpoint between the equiprobable
    ``1/q`` and certainty); ``"nmfB"``: ``gamma = 1``.
    """
    if beta_spec == "nmfA":
        return (1.0 + n_classes) / (2.0 * n_classes)
    if beta_spec == "nmfB":
        return 1.0
    raise ValueError(
        f"beta preset must be one of {BETA_PRESETS}, got {beta_spec!r}; "
        "pass a float for a fixed beta."
    )


def solve_beta(gamma, labeled_rate: float, n_classes: int, *, xtol: float = 1e-12) -> float:
    """Root ``beta*_gamma`` of Eq. (27), ``(1/N) ln Gamma = ln gamma``, with Eq. (26).

    ``f(beta) = Eq.26(beta) - ln gamma`` is convex in beta (``f'' > 0``), has
    ``f(0) = -ln q - ln gamma < 0`` for ``gamma > 1/q`` and ``f'(0) = r_l (1 - 1/q)
    >= 0``, so it has exactly one positive root. We bracket it by doubling and
    polish with Brent's method (the paper used Newton from beta = 1 with
    tolerance 1e-3; Brent cannot diverge).

    Args:
        gamma: target in ``(1/q, 1]``, or a preset name ``"nmfA"`` / ``"nmfB"``.
        labeled_rate: ``r_l = N_l / N`` in ``[0, 1]``.
        n_classes: ``q >= 2``.
        xtol: absolute tolerance on beta.
    Returns:
        ``beta*`` as a Python float.
    """
    _check_rate_and_classes(labeled_rate, n_classes)
    if isinstance(gamma, str):
        gamma = gamma_preset(gamma, n_classes)
    gamma = float(gamma)
    if not (1.0 / n_classes < gamma <= 1.0):
        raise ValueError(
            f"gamma must lie in (1/q, 1] = ({1.0 / n_classes:.4g}, 1], got {gamma!r}: "
            "at gamma <= 1/q the root is beta <= 0 (the equiprobable state)."
        )
    log_gamma = math.log(gamma)

    def f(b: float) -> float:
        return float(approx_log_mode_probability(b, labeled_rate, n_classes)) - log_gamma

    hi = 1.0
    while f(hi) <= 0.0:
        hi *= 2.0
        if hi > 1e12:  # pragma: no cover - impossible for gamma <= 1
            raise ValueError("no root of Eq. (27) below beta = 1e12.")
    return float(brentq(f, 0.0, hi, xtol=xtol, rtol=4 * np.finfo(float).eps, maxiter=500))


def log_mode_probability_from_fields(fields, labels=None):
    """Exact ``ln Gamma`` of a mean-field solution from its fields, Eq. (22).

    ``ln Gamma = sum_i (h_{i, y_i} - ln Z_i)`` with ``Z_i = sum_s exp h_i(s)``
    (Eq. 15) and ``y_i = argmax_s phi_i(s)`` (Eq. 17) unless ``labels`` is given.
    Computed with log-sum-exp, finite at any beta.

    Args:
        fields: ``h`` ``[n, q]`` (may be a JAX or NumPy array).
        labels: optional ``int[n]``; defaults to the per-node mode.
    Returns:
        scalar ``ln Gamma`` (sum over nodes; divide by ``n`` for Eq. 27).
    """
    import jax.numpy as jnp
    from jax.scipy.special import logsumexp

    fields = jnp.asarray(fields)
    log_phi = fields - logsumexp(fields, axis=-1, keepdims=True)
    return log_mode_probability(log_phi, labels)


def log_mode_probability(log_marginals, labels=None):
    """``ln Gamma = sum_i ln phi_i(y_i)`` (Eq. 21) from log-marginals ``[n, q]``.

    ``y_i`` is the per-node mode (Eq. 17) unless ``labels`` is given. Hard-clamped
    nodes (one-hot, ``ln phi = 0`` at the label) contribute zero. Concrete arrays are
    summed on the host (a NumPy float64: run eagerly in JAX, each primitive compiled for
    every new shape); traced ones in JAX.
    """
    import jax
    import jax.numpy as jnp

    if isinstance(log_marginals, jax.core.Tracer) or isinstance(labels, jax.core.Tracer):
        log_marginals = jnp.asarray(log_marginals)
        if labels is None:
            return jnp.sum(jnp.max(log_marginals, axis=-1))
        labels = jnp.asarray(labels)
        return jnp.sum(jnp.take_along_axis(log_marginals, labels[:, None], axis=-1))
    log_marginals = np.asarray(log_marginals, dtype=np.float64)
    if labels is None:
        return np.sum(np.max(log_marginals, axis=-1))
    labels = np.asarray(labels)
    return np.sum(np.take_along_axis(log_marginals, labels[:, None], axis=-1))
