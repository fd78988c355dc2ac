"""Harmonic mixture training pipeline (Zhu & Lafferty 2005, Figs. 2-3) and Sec. 4 baselines.

Step 1: EM for the mixture (:mod:`graphssl.inference.optimize.em`); the backbone Laplacian of
Eq. (6)
(dense responsibilities, sparse top-k responsibilities, or k-means hard clusters, see
:mod:`graphssl.models.harmonic_backbone`); step 2: the convex lambda step of Eqs. (3)-(5)
(:mod:`graphssl.inference.optimize.harmonic_lambda`, re-exported here). Also the baselines of Sec. 4
('sample' with the Delalleau et al. extension, 'EM') and the decision rules (median(f)
thresholding, class mass normalisation).
"""

from __future__ import annotations

import dataclasses
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from graphssl._warnings import warn_user
from graphssl.inference.optimize.baselines.propagation import class_mass_normalization
from graphssl.inference.optimize.em import (
    DEFAULT_OPTIONS,
    EMOptions,
    fit_em,
    init_gaussian_mixture,
    init_multinomial_mixture,
    kmeans,
    kmeans_assign,
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
from graphssl.models.harmonic_mixture import MultinomialMixture, log_responsibilities
from graphssl.validation import check_count, check_label_codes, check_real

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
    return P / P.sum(axis=1, keepdims=True)


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


compiled_log_responsibilities = jax.jit(log_responsibilities)
"""``log_responsibilities(mixture, X)`` as one compiled program (run op by op, each of its
operations is an XLA compilation of its own on the first call)."""


# ----------------------------------------------------------------------------- baselines


def sample_baseline(X, labels, n_samples: int, *, sigma: float, graph_builder, key,
                    X_eval=None, harmonic=None):
    """'sample' of Sec. 4: draw M unlabelled points, solve the harmonic function on the
    (l + M)-node graph ``graph_builder(X_small)`` (the M drawn with the numpy seed ``key``,
    required), extend to other points by the Delalleau et
    al. (2005) formula ``f_j = sum_i w_ij f_i / sum_i w_ij`` over the l + M nodes with
    ``w_ij = exp(-||x_i - x_j||^2 / (2 sigma^2))`` (computed as a softmax: no underflow).

    ``harmonic(graph, labels, n_classes)`` solves the small graph (default: a dense
    least-squares harmonic function, robust to numerically disconnected samples; pass
    ``graphssl.inference.optimize.baselines.harmonic_function`` for the sparse solver).
    Returns ``(f on all n training points [n, C], f on X_eval or None)``.
    Raises ValueError for ``sigma <= 0`` (every weight would be ``0 / 0``), a negative
    ``n_samples``, or labels that are not codes ``-1, 0..C-1`` with one labelled point.
    """
    if harmonic is None:
        harmonic = _dense_harmonic
    check_real(sigma, "sigma", low=0.0, low_open=True)
    check_count(n_samples, "n_samples")
    labels = check_label_codes(labels, np.shape(X)[0], name="labels")
    if not np.any(labels >= 0):
        raise ValueError("labels: no labelled point (all -1); label at least one point per "
                         "class")
    rng = np.random.default_rng(key)
    lab = np.flatnonzero(labels >= 0)
    unl = np.flatnonzero(labels < 0)
    picked = rng.choice(unl, size=min(n_samples, len(unl)), replace=False)
    nodes = np.concatenate([lab, picked])
    small_labels = np.concatenate([labels[lab], -np.ones(len(picked), int)])
    C = int(labels.max()) + 1
    f_small = harmonic(graph_builder(np.asarray(X)[nodes]), small_labels, n_classes=C)
    f_small = np.asarray(f_small, np.float64)

    def extend(Z):
        Z = np.asarray(Z, np.float64)
        S = np.asarray(X, np.float64)[nodes]
        d2 = (Z * Z).sum(1)[:, None] - 2 * Z @ S.T + (S * S).sum(1)[None]
        logits = -np.maximum(d2, 0) / (2 * sigma**2)
        P = np.exp(logits - logits.max(1, keepdims=True))
        return (P / P.sum(1, keepdims=True)) @ f_small

    f_train = extend(X)
    f_train[nodes] = f_small
    return f_train, (None if X_eval is None else extend(X_eval))


def _dense_harmonic(graph, labels, n_classes):
    """Harmonic function on a small graph by a least-squares solve of
    ``L_UU f_U = W_UL f_L``: robust to (numerically) disconnected sampled graphs, where a
    sparse LU reports an exactly singular factor; unreached nodes get the uniform vector."""
    W = graph.to_scipy().toarray() if hasattr(graph, "to_scipy") else np.asarray(graph)
    lab = labels >= 0
    F = np.zeros((len(labels), n_classes))
    F[lab] = np.eye(n_classes)[labels[lab]]
    L = np.diag(W.sum(1)) - W
    rhs = W[np.ix_(~lab, lab)] @ F[lab]
    f_u = np.linalg.lstsq(L[np.ix_(~lab, ~lab)], rhs, rcond=1e-12)[0]
    f_u = np.clip(f_u, 0.0, None)
    total = f_u.sum(1, keepdims=True)
    F[~lab] = np.where(total > 1e-12, f_u / np.maximum(total, 1e-300), 1.0 / n_classes)
    return F


def median_threshold(f, threshold=None):
    """Binary decision at median(f) (Sec. 4.1: classes assumed about equal in size).
    ``f``: ``[n]`` scores p(y=1|x) or ``[n, 2]``. Returns ``(labels int[n], threshold)``.
    Raises ValueError for scores of another shape (median thresholding is binary; use
    :func:`class_mass_normalize` or an argmax for more classes) or non-finite scores."""
    f = np.asarray(f, np.float64)
    if f.ndim == 2 and f.shape[1] == 2:
        f = f[:, 1]
    elif f.ndim != 1:
        raise ValueError(f"f: median thresholding is binary and needs scores [n] or [n, 2], "
                         f"got shape {f.shape}; use class_mass_normalize or an argmax for "
                         "more classes")
    if not np.all(np.isfinite(f)):
        raise ValueError(f"f: {int(np.sum(~np.isfinite(f)))} scores are NaN or inf; "
                         "threshold finite scores only")
    t = float(np.median(f)) if threshold is None else float(threshold)
    return (f > t).astype(int), t


def class_mass_normalize(F, class_prior):
    """Class mass normalisation (Zhu et al. 2003) as a decision: the argmax of each row of
    ``F [n, C]`` after :func:`~graphssl.inference.optimize.baselines.propagation.\
class_mass_normalization` (the library's one implementation) with every row unlabelled
    and ``class_prior [C]``.
    Returns ``int[n]``. Raises ValueError for scores that are not a finite ``[n, C]`` array
    (an all-NaN row has no argmax)."""
    F = np.asarray(F, np.float64)
    if F.ndim != 2 or not np.all(np.isfinite(F)):
        raise ValueError(f"F: finite scores [n, C] needed, got shape {F.shape}"
                         + ("" if F.ndim != 2 else
                            f" with {int(np.sum(~np.all(np.isfinite(F), axis=1)))} rows "
                            "holding NaN or inf"))
    scores = class_mass_normalization(F, np.zeros(0, dtype=np.int64), class_prior)
    return np.argmax(scores, axis=1)
