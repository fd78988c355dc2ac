"""Harmonic mixture training pipeline (Zhu & Lafferty 2005, Figs. 2-3) and Sec. 4 baselines.

Step 1: EM for the mixture (:mod:`graphssl.inference.optimize.em`); the backbone Laplacian of
Eq. (6)
(dense responsibilities, sparse top-k responsibilities, or k-means hard clusters, see
:mod:`graphssl.models.harmonic_backbone`); step 2: the convex lambda step of Eqs. (3)-(5)
(:mod:`graphssl.inference.optimize.harmonic_lambda`, re-exported here). Re-exported too:
prediction on new points (:mod:`.induction`), the baselines of Sec. 4 ('sample' with the
Delalleau et al. extension) and the decision rules (median(f) thresholding, class mass
normalisation; :mod:`.baselines`).
"""

from __future__ import annotations

import dataclasses
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from graphssl._warnings import warn_user
from graphssl.inference.harmonic_mixture.baselines import (
    class_mass_normalize,
    median_threshold,
    sample_baseline,
)
from graphssl.inference.harmonic_mixture.induction import (
    compiled_log_responsibilities,
    predict_proba,
)
from graphssl.inference.optimize.em import (
    DEFAULT_OPTIONS,
    EMOptions,
    fit_em,
    init_gaussian_mixture,
    init_multinomial_mixture,
    kmeans,
)
from graphssl.inference.optimize.harmonic_lambda import (
    LambdaInfo,
    closed_form_lambda,
    kkt_residual,
    solve_box_qp,
    solve_lambda,
    split_backbone,
)
from graphssl.models.harmonic_backbone import (
    backbone_laplacian,
    mixture_lift,
    neighbor_laplacian,
    sparse_backbone_laplacian,
    sparse_lift,
    top_k_responsibilities,
)
from graphssl.validation import check_count, check_label_codes

__all__ = [
    "LambdaInfo",
    "compiled_log_responsibilities",
    "HarmonicMixtureFit",
    "split_backbone",
    "closed_form_lambda",
    "kkt_residual",
    "solve_box_qp",
    "solve_lambda",
    "fit_harmonic_mixture",
    "mixture_backbone",
    "predict_proba",
    "sample_baseline",
    "median_threshold",
    "class_mass_normalize",
]


# ----------------------------------------------------------------------------- pipeline


class HarmonicMixtureFit(NamedTuple):
    """Result of :func:`fit_harmonic_mixture` (an immutable record): the mixture with the
    graph-discriminative lambda (``mixture.log_label_probs = log lambda``), EM's lambda, the
    backbone Laplacian, the convergence records, wall-clock times (seconds) of the EM, the
    backbone and the M x M solve, and ``backbone_info`` (how the backbone was formed:
    ``method`` 'dense', 'top_k' or 'hard'; for 'top_k' ``k`` and the dropped responsibility
    mass per row, ``max_dropped`` / ``mean_dropped``)."""

    mixture: object
    label_probs: np.ndarray
    label_probs_em: np.ndarray
    backbone: np.ndarray
    em_info: object
    lambda_info: LambdaInfo
    times: dict
    centers: object = None
    backbone_info: dict | None = None


_BACKBONE_CACHE: dict = {}


def _compiled_backbone(kind, batch_size):
    """Jitted dense backbone ``(mixture, X, labelled_index, nbr, w) -> [l+M, l+M]``."""
    key = (kind, batch_size)
    if key not in _BACKBONE_CACHE:
        def run(mixture, X, lab_idx, nbr, w):
            lift = mixture_lift(mixture, X, lab_idx)
            return backbone_laplacian(lift, nbr, w, batch_size=batch_size)
        _BACKBONE_CACHE[key] = jax.jit(run)
    return _BACKBONE_CACHE[key]


def mixture_backbone(mixture, X, labelled_index, neighbors, *, top_k=None, batch_size=None):
    """Backbone Laplacian of Eq. (6) from a fitted mixture: ``(tilde Delta [l+M, l+M]
    float64, info)``. ``top_k=None``: dense responsibilities (exact, streamed in JAX);
    ``top_k = k_R``: each row of R keeps its k_R largest responsibilities, renormalised
    (see :mod:`graphssl.models.harmonic_backbone`; ``info`` reports the dropped mass).
    ``neighbors``: the ``(index, weight)`` table of ``Graph.padded_neighbors()``."""
    nbr, w = neighbors
    lab_idx = np.asarray(labelled_index)
    if top_k is None:
        w = jnp.asarray(w, X.dtype)
        Lt = _compiled_backbone("mixture", batch_size)(mixture, X, jnp.asarray(lab_idx), nbr, w)
        return np.asarray(jax.block_until_ready(Lt), np.float64), {"method": "dense"}
    index, weight, dropped = top_k_responsibilities(mixture, X, top_k,
                                                    batch_size=batch_size or 16384)
    dropped = np.asarray(dropped, np.float64)
    unl = np.ones(len(dropped), bool)
    unl[lab_idx] = False
    P = sparse_lift(index, weight, lab_idx, mixture.n_components)
    Lt = sparse_backbone_laplacian(P, neighbor_laplacian(nbr, w))
    info = {"method": "top_k", "k": int(top_k),
            "max_dropped": float(dropped[unl].max(initial=0.0)),
            "mean_dropped": float(dropped[unl].mean()) if unl.any() else 0.0}
    return Lt, info


def _initial_mixture(X, y, obs, n_components, C, key, mixture, covariance_type, em_options):
    if mixture == "multinomial":
        mix0 = init_multinomial_mixture(X, y, obs, n_components, C, key, options=em_options)
        return mix0, jnp.asarray(X.todense() if hasattr(X, "todense") else X)
    if mixture == "gaussian":
        Xj = jnp.asarray(X)
        return init_gaussian_mixture(Xj, y, obs, n_components, C, key,
                                     covariance_type=covariance_type, options=em_options), Xj
    raise ValueError(f"mixture: unknown {mixture!r}; use 'gaussian' or 'multinomial'")


def _run_em(mix0, Xj, y, obs, max_iter, tol, em_options):
    """EM of Fig. 2 step 1 (:func:`~graphssl.inference.optimize.em.fit_em`, whose M-step
    floors degenerate full covariances). A mixture that still comes out non-finite is a
    ``LinAlgError`` (a ``ValueError``) naming EM and the fixes, not a later step's input."""
    mix, info = fit_em(mix0, Xj, y, obs, max_iter=max_iter, tol=tol, options=em_options)
    if not all(bool(jnp.all(jnp.isfinite(leaf))) for leaf in jax.tree_util.tree_leaves(mix)):
        raise np.linalg.LinAlgError(
            f"em_options: EM's mixture became non-finite within {int(info.iterations)} "
            f"iterations (reg_covar={em_options.reg_covar:.3g}); use a larger reg_covar, fewer "
            "components or covariance_type='spherical'")
    return mix, info


def _mean_feature_variance(X) -> float:
    """``mean_d var(X[:, d])`` of dense features (1.0 when it is 0 or not finite)."""
    v = float(np.mean(np.var(np.asarray(X, np.float64), axis=0)))
    return v if np.isfinite(v) and v > 0 else 1.0


def _em_options(X, mixture, em_options):
    """The EM settings: ``em_options`` as given, or (``None``) the defaults with the Gaussian
    covariance prior ``reg_covar`` RELATIVE to the mean feature variance, the rule of
    :class:`~graphssl.estimators.HarmonicMixtureClassifier`. Warns when a given ``reg_covar``
    is comparable to that variance (the prior then swamps every covariance)."""
    if mixture != "gaussian":
        return DEFAULT_OPTIONS if em_options is None else em_options
    variance = _mean_feature_variance(X)
    if em_options is None:
        return DEFAULT_OPTIONS._replace(reg_covar=DEFAULT_OPTIONS.reg_covar * variance)
    if em_options.reg_covar * em_options.prior_weight > 0.1 * variance:
        warn_user(
            f"em_options: reg_covar={em_options.reg_covar:.3g} is not small against the mean "
            f"feature variance {variance:.3g}; the covariance prior swamps the components "
            "(every component covers every point). Pass em_options=None (reg_covar relative "
            "to the variance) or scale reg_covar with the features.", UserWarning)
    return em_options


def _check_fit_inputs(X, labels, graph, neighbors, n_components, n_classes):
    """``(labels int64[n], C)`` after the checks of :func:`fit_harmonic_mixture`."""
    n = X.shape[0] if hasattr(X, "shape") else len(X)
    labels = check_label_codes(labels, n, name="labels")
    if not np.any(labels >= 0):
        raise ValueError("labels: no labelled point (all -1); label at least one point per "
                         "class")
    check_count(n_components, "n_components", least=1)
    top = int(labels.max()) + 1
    if n_classes is None:
        n_classes = top
    else:
        n_classes = check_count(n_classes, "n_classes", least=1)
        if n_classes < top:
            raise ValueError(f"n_classes: {n_classes} is fewer than the labels need (their "
                             f"largest code is {top - 1}); pass n_classes >= {top} or None")
    if neighbors is None:
        size = getattr(graph, "n_nodes", None)
        if size is not None and int(size) != n:
            raise ValueError(f"graph: has {int(size)} nodes but X has {n} rows; build the "
                             "graph over the same points as X")
    elif np.shape(neighbors[0])[0] != n:
        raise ValueError(f"neighbors: the table has {np.shape(neighbors[0])[0]} rows but X has "
                         f"{n}; pass graph.padded_neighbors() of a graph over X's points")
    return labels, n_classes


def fit_harmonic_mixture(
    X,
    labels,
    graph,
    *,
    n_components: int,
    n_classes: int | None = None,
    mixture: str = "gaussian",
    covariance_type: str = "full",
    alpha: float = 0.0,
    backbone: str = "mixture",
    responsibility_top_k: int | None = None,
    key,
    em_options: EMOptions | None = None,
    max_iter: int = 200,
    tol: float = 1e-7,
    batch_size: int | None = None,
    neighbors=None,
):
    """Harmonic mixture training (Figs. 2-3): EM, the backbone Laplacian (Eq. 6), lambda.

    Args:
      X: ``[n, D]`` features, or counts ``[n, V]`` for ``mixture="multinomial"``.
      labels: ``int[n]``, ``-1`` for unlabelled.
      graph: :class:`graphssl.graph.Graph` over the same n points (or pass ``neighbors``,
        the ``padded_neighbors()`` table, directly).
      backbone: ``"mixture"`` (soft R from the fitted mixture) or ``"kmeans"`` (hard
        clusters, Sec. 3.3, exact through the sparse lift; the mixture is still fitted for
        prediction).
      responsibility_top_k: with ``backbone="mixture"``, keep only the k_R largest
        responsibilities per row (renormalised): backbone cost ``O(n k_R d)`` instead of
        ``O(n M (d + M))``; ``None`` (default) = exact dense R.
      key: PRNG key of the mixture's (and k-means') initialisation (required).
      em_options: EM's settings (:class:`~graphssl.inference.optimize.em.EMOptions`, its
        ``reg_covar`` absolute; a warning when it is not small against the mean feature
        variance). ``None`` (default): the defaults with ``reg_covar`` = 1e-6 times the mean
        per-feature variance of ``X``, so the fit does not depend on the features' units
        (an absolute 1e-6 swamped features of scale 1e-6: chance accuracy).

    Degenerate components: a full-covariance component that collapses onto a few points
    keeps eigenvalues of at least the exact M-step's bound or the working precision's
    resolution of its scatter (:func:`graphssl.inference.optimize.em.fit_em`; in float32
    rounding drove such a covariance indefinite: EM's objective fell, then went NaN). A
    mixture that still goes non-finite raises a ``LinAlgError`` (a ``ValueError``) naming
    ``em_options``.
    Raises ValueError for a graph over another number of points than ``X``, labels that
    are not codes ``-1, 0..C-1`` (or need more than ``n_classes``), no labelled point, or
    ``n_components < 1``.
    """
    if backbone not in ("mixture", "kmeans"):
        raise ValueError(f"backbone: unknown {backbone!r}; use 'mixture' or 'kmeans'")
    labels, C = _check_fit_inputs(X, labels, graph, neighbors, n_components, n_classes)
    em_options = _em_options(X, mixture, em_options)
    observed = labels >= 0
    lab_idx = np.flatnonzero(observed)
    y = jnp.asarray(np.where(observed, labels, 0), jnp.int32)
    obs = jnp.asarray(observed)
    t0 = time.perf_counter()
    mix0, Xj = _initial_mixture(X, y, obs, n_components, C, key, mixture, covariance_type,
                                em_options)
    mix, em_info = _run_em(mix0, Xj, y, obs, max_iter, tol, em_options)
    t_em = time.perf_counter() - t0

    t0 = time.perf_counter()
    nbr, w = graph.padded_neighbors() if neighbors is None else neighbors
    centers = None
    if backbone == "kmeans":
        centers, assign, _ = kmeans(Xj, n_components, key)
        P = sparse_lift(np.asarray(assign)[:, None], np.ones((len(labels), 1)), lab_idx,
                        n_components)
        Lt = sparse_backbone_laplacian(P, neighbor_laplacian(nbr, w))
        bb_info = {"method": "hard"}
    else:
        Lt, bb_info = mixture_backbone(mix, Xj, lab_idx, (nbr, w),
                                       top_k=responsibility_top_k, batch_size=batch_size)
    t_backbone = time.perf_counter() - t0

    t0 = time.perf_counter()
    A, B = split_backbone(Lt, len(lab_idx))
    F = np.eye(C)[labels[lab_idx]]
    lam_em = np.exp(np.asarray(mix.log_label_probs, np.float64))
    log_r_lab = (np.asarray(compiled_log_responsibilities(mix, Xj[lab_idx])) if alpha > 0
                 else None)
    lam, info = solve_lambda(A, B, F, alpha=alpha, labelled_log_resp=log_r_lab,
                             lambda_em=lam_em)
    t_solve = time.perf_counter() - t0
    dt = mix.log_label_probs.dtype
    log_lam = jnp.log(jnp.clip(jnp.asarray(lam, dt), jnp.finfo(dt).tiny, 1.0))
    fitted = dataclasses.replace(mix, log_label_probs=log_lam)
    times = {"em": t_em, "backbone": t_backbone, "solve": t_solve}
    return HarmonicMixtureFit(fitted, lam, lam_em, Lt, em_info, info, times, centers, bb_info)
