"""The feature model as the class prior of the graph-only models (GRF/HF and LGC).

A graph that comes with node features gets one feature model -- multinomial logistic
regression with a Gaussian prior on unit-norm rows, cross-fitted
(:func:`~graphssl.inference.optimize.logistic.cross_fitted_log_probabilities`; the field of the
feature Potts CRF, :mod:`graphssl.inference.optimize.feature_potts`) -- whose predictions
``h_i = p(y_i | x_i)`` enter the graph models as a prior term:

* **harmonic function** (Zhu, Ghahramani & Lafferty 2003, Sec. 5, "incorporating external
  classifiers"): every unlabelled node ``i`` gets a labelled "dongle" node holding ``h_i``,
  reached with transition probability ``eta`` (the other transitions scaled by ``1 - eta``),
  so that the harmonic solution is

      f_U = (I - (1 - eta) P_UU)^-1 ((1 - eta) P_UL f_L + eta h_U),   P = D^-1 W,

  solved as ``(D_UU - (1 - eta) W_UU) f_U = (1 - eta) W_UL f_L + eta D_UU h_U`` (symmetric
  positive definite for ``eta > 0``): each unlabelled value is ``(1 - eta)`` times the mean of
  its neighbours plus ``eta h_i``. A node of degree 0 has only its dongle: ``f_i = h_i``; a
  component that no label reaches gets the feature predictions smoothed within it.
* **LGC** (Zhou et al. 2004): the fit term of Zhou et al.'s cost also pulls every unlabelled
  row toward ``h_i``, with weight ``rho`` relative to a label's:
  ``(alpha (I - S) + (1 - alpha) C) F = (1 - alpha) C Y`` with ``Y_U = h_U``,
  ``C = diag(1 on labels, rho elsewhere)`` (``C = I``, ``Y_U = 0`` is plain LGC); an isolated
  node's row is ``h_i``.

* **harmonic mixture** (Zhu & Lafferty 2005): the same dongle energy, restricted to the
  mixture's form ``f_U = R_U lambda`` (``R`` the responsibilities ``p(m | x_i)``): lambda
  minimises ``E(f) + sum_{i in U} (eta / (1 - eta)) d_i ||f_i - h_i||^2``, the harmonic
  energy of the graph with Zhu et al.'s dongles (:func:`harmonic_mixture_with_prior`).

The weight (``eta``, ``rho``) is chosen from the labelled nodes alone
(:func:`choose_prior_weight`): K-fold cross-validation over the labelled nodes with the feature
model's own folds (a held-out node's ``h_i`` is its out-of-fold prediction), scored by the
held-out log likelihood ``sum log f_i[y_i]`` (ties to the larger weight).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from graphssl.inference.optimize.baselines.common import (
    SolveInfo,
    _adjacency,
    _is_symmetric,
    _normalized_adjacency,
)
from graphssl.inference.optimize.baselines.solvers import _solve_spd
from graphssl.inference.optimize.logistic import (
    DEFAULT_PRECISIONS,
    FeatureFit,
    cross_fitted_log_probabilities,
    stratified_folds,
)
from graphssl.models.feature_model import normalize_rows
from graphssl.validation import check_count, check_label_codes

__all__ = [
    "FeaturePrior",
    "fit_feature_prior",
    "harmonic_with_prior",
    "lgc_with_prior",
    "choose_prior_weight",
    "fit_harmonic_with_prior",
    "harmonic_mixture_with_prior",
    "harmonic_mixture_prior_solver",
    "DEFAULT_ETA_GRID",
    "DEFAULT_RHO_GRID",
]

DEFAULT_ETA_GRID = (0.01, 0.03, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 0.97)
"""Dongle transition probabilities ``eta`` tried by the harmonic function's cross-validation."""
DEFAULT_RHO_GRID = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0)
"""Prior scales ``rho`` tried by LGC's cross-validation (labelled rows have weight 1)."""


class FeaturePrior(NamedTuple):
    """The feature model as a class prior: ``probs float64[n, C]`` (``h``: out-of-fold on
    the labelled nodes, the fit on all labels elsewhere), ``fit`` (the
    :class:`~graphssl.inference.optimize.logistic.FeatureFit`), ``folds int[n]`` (the
    feature model's cross-validation fold of each labelled node, -1 elsewhere)."""

    probs: np.ndarray
    fit: FeatureFit
    folds: np.ndarray


def fit_feature_prior(features, labels, n_classes: int, *, seed: int, n_folds: int = 5,
                      precisions=DEFAULT_PRECISIONS) -> FeaturePrior:
    """The feature model of :mod:`graphssl.inference.optimize.feature_potts` (rows scaled to
    unit norm, prior precision by K-fold CV; ``seed`` deals the folds) as a
    :class:`FeaturePrior`."""
    n_classes = check_count(n_classes, "n_classes", least=1)
    labels = check_label_codes(labels, np.shape(features)[0], n_classes=n_classes,
                               name="labels", against="features has {n} rows")
    fit = cross_fitted_log_probabilities(normalize_rows(features), labels, int(n_classes),
                                         precisions=precisions, n_folds=int(n_folds),
                                         seed=int(seed))
    folds = np.full(labels.shape, -1, dtype=np.int64)
    rows = np.flatnonzero(labels >= 0)
    folds[rows] = stratified_folds(labels[rows], int(n_folds), int(seed))  # the fit's folds
    probs = np.exp(fit.log_probs)
    return FeaturePrior(probs / probs.sum(axis=1, keepdims=True), fit, folds)


def _check_prior(prior, n, n_classes):
    h = np.asarray(prior, dtype=np.float64)
    if h.shape != (n, n_classes) or np.any(h < 0) or not np.all(np.isfinite(h)):
        raise ValueError(f"prior: expected non-negative float[{n}, {n_classes}] class "
                         f"probabilities, got shape {h.shape}")
    return h / np.maximum(h.sum(axis=1, keepdims=True), 1e-300)


def _labels_and_prior(labels, prior, n, n_classes):
    """``(labels int64[n], C, prior h float[n, C] checked, labelled indices)``: what the
    solvers with a prior start from (``C`` = max label + 1 unless ``n_classes``)."""
    labels = np.asarray(labels, dtype=np.int64)
    C = int(labels.max()) + 1 if n_classes is None else int(n_classes)
    return labels, C, _check_prior(prior, n, C), np.flatnonzero(labels >= 0)


def _solve_prior_system(A, rhs, method, tol, symmetric, return_info):
    """``A X = rhs`` by ``_solve_spd``, and its :class:`SolveInfo` (converged when the
    relative residual is within ``max(tol, 1e-6)``, the baselines' rule). Without
    ``return_info`` a solve that broke down (non-finite residual: its rows are no solution; a
    cross-validation's solves) is redone with ``method="direct"``; with it the caller sees the
    record and decides (the estimators warn and redo it)."""
    sol, iterations, residual, used = _solve_spd(A, rhs, method, tol, None, symmetric)
    if not return_info and not np.isfinite(residual) and used != "direct":
        sol, iterations, residual, used = _solve_spd(A, rhs, "direct", tol, None, symmetric)
    info = SolveInfo(used, int(iterations), float(residual),
                     bool(residual <= max(tol, 1e-6)), 0)
    return sol, info


def harmonic_with_prior(graph, labels, prior, eta: float, *, n_classes: int | None = None,
                        method: str = "auto", tol: float = 1e-8,
                        normalize_graph: bool = False, return_info: bool = False):
    """Harmonic function with a dongle per unlabelled node (Zhu, Ghahramani & Lafferty 2003,
    Sec. 5): ``f_U = (I - (1 - eta) P_UU)^-1 ((1 - eta) P_UL f_L + eta h_U)``.

    Args:
      graph: :class:`~graphssl.graph.Graph` or scipy sparse ``n x n`` weights (symmetric).
      labels: ``int[n]``, ``-1`` for unlabelled.
      prior: ``h``, float[n, C] class probabilities of the external classifier.
      eta: the dongle's transition probability, in (0, 1].
      method, tol: the sparse SPD solve (``"auto"``: CG above 100 unknowns).
      normalize_graph: use ``S = D^-1/2 W D^-1/2`` as the weights (as
        :func:`~graphssl.inference.optimize.baselines.harmonic_function`).
      return_info: also return the solve's
        :class:`~graphssl.inference.optimize.baselines.SolveInfo` (without it, a CG solve that
        broke down is redone directly).

    Returns ``float64[n, C]``: labelled rows one-hot, unlabelled rows ``f_U`` (rows sum to 1);
    and the ``SolveInfo`` when ``return_info``.
    """
    if not 0.0 < float(eta) <= 1.0:
        raise ValueError(f"eta: the dongle's transition probability must lie in (0, 1], got "
                         f"{eta}")
    W = _adjacency(graph)
    if normalize_graph:
        W = _normalized_adjacency(W)
    labels, C, h, lab = _labels_and_prior(labels, prior, W.shape[0], n_classes)
    degrees = np.asarray(W.sum(axis=1)).ravel()
    f = h.copy()  # degree-0 unlabelled nodes: only their dongle, f = h
    f[lab] = np.eye(C)[labels[lab]]
    free = (labels < 0) & (degrees > 0)
    info = SolveInfo("direct", 0, 0.0, True, 0)  # nothing to solve
    if free.any():
        W_free = W[free]
        A = (sp.diags(degrees[free]) - (1.0 - eta) * W_free[:, free]).tocsr()
        rhs = (1.0 - eta) * (W_free[:, lab] @ f[lab]) + eta * degrees[free, None] * h[free]
        sol, info = _solve_prior_system(A, rhs, method, tol, _is_symmetric(W), return_info)
        f[free] = np.clip(np.nan_to_num(sol, nan=0.0), 0.0, None)
    f = f / np.maximum(f.sum(axis=1, keepdims=True), 1e-300)
    return (f, info) if return_info else f


def lgc_with_prior(graph, labels, prior, rho: float, *, alpha: float = 0.99,
                   n_classes: int | None = None, method: str = "auto",
                   tol: float = 1e-8, return_info: bool = False):
    """LGC (Zhou et al. 2004) whose fit term also pulls each unlabelled row toward its prior:
    the minimiser of

        Q(F) = sum_ij W_ij ||F_i / sqrt(d_i) - F_j / sqrt(d_j)||^2 / 2
               + mu sum_i c_i ||F_i - Y_i||^2,   mu = (1 - alpha) / alpha,

    with ``Y_i`` one-hot and ``c_i = 1`` on labelled nodes, ``Y_i = h_i`` and ``c_i = rho`` on
    unlabelled ones: ``(alpha (I - S) + (1 - alpha) C) F = (1 - alpha) C Y``,
    ``S = D^-1/2 W D^-1/2``, ``C = diag(c)`` (``c = 1`` everywhere is Zhou et al.'s
    ``(I - alpha S) F = (1 - alpha) Y``). Rows normalised. ``rho > 0`` is the prior's weight
    against a label: large ``rho`` returns ``h``, small ``rho`` lets the labels propagate.
    ``method``: as :func:`~graphssl.inference.optimize.baselines.lgc` (``"iterate"`` solves
    the same linear system by ``"auto"``). ``return_info``: also return the solve's
    :class:`~graphssl.inference.optimize.baselines.SolveInfo`, as
    :func:`harmonic_with_prior`.
    """
    if not 0.0 < float(alpha) < 1.0:
        raise ValueError(f"alpha: must lie in (0, 1), got {alpha}")
    if not float(rho) > 0.0:
        raise ValueError(f"rho: the prior's weight must be > 0, got {rho}")
    method = "auto" if method == "iterate" else method
    W = _adjacency(graph)
    n = W.shape[0]
    labels, C, h, lab = _labels_and_prior(labels, prior, n, n_classes)
    Y = h.copy()
    Y[lab] = np.eye(C)[labels[lab]]
    c = np.full(n, float(rho))
    c[lab] = 1.0
    S = _normalized_adjacency(W)
    A = (alpha * (sp.identity(n, format="csr") - S) + (1.0 - alpha) * sp.diags(c)).tocsr()
    F, info = _solve_prior_system(A, (1.0 - alpha) * c[:, None] * Y, method, tol,
                                  _is_symmetric(W), return_info)
    F = np.clip(np.nan_to_num(F, nan=0.0), 0.0, None)
    total = F.sum(axis=1, keepdims=True)
    F = np.where(total > 0, F / np.maximum(total, 1e-300), 1.0 / C)
    return (F, info) if return_info else F


def choose_prior_weight(solve, labels, prior: FeaturePrior, grid):
    """The prior weight of ``solve(labels, h, weight) -> float[n, C]`` by K-fold
    cross-validation over the labelled nodes (the feature model's folds).

    For each fold k the fold's labels are hidden and every weight of ``grid`` solved; a
    hidden node's prior is its out-of-fold feature prediction (fitted without fold k). Score:
    the held-out log likelihood ``sum_i log f_i[y_i]`` summed over folds (floored at
    ``log 1e-12``); the best weight, ties to the larger. Returns ``(weight, scores
    float[len(grid)])``.
    """
    labels = np.asarray(labels, dtype=np.int64)
    grid = np.asarray(grid, dtype=np.float64)
    if grid.ndim != 1 or grid.size == 0:
        raise ValueError("grid: give a non-empty 1-D grid of prior weights")
    scores = np.zeros(grid.size)
    for k in range(int(prior.folds.max()) + 1):
        held = np.flatnonzero(prior.folds == k)
        kept = labels.copy()
        kept[held] = -1
        for g, weight in enumerate(grid):
            f = solve(kept, prior.probs, float(weight))
            scores[g] += np.sum(np.log(np.maximum(f[held, labels[held]], 1e-12)))
    best = int(np.flatnonzero(scores >= scores.max() - 1e-9).max())
    return float(grid[best]), scores


def fit_harmonic_with_prior(graph, labels, prior: FeaturePrior, *, n_classes: int,
                            eta="cv", grid=DEFAULT_ETA_GRID, method: str = "auto",
                            tol: float = 1e-5, normalize_graph: bool = False):
    """:func:`harmonic_with_prior` with ``eta`` given or (``"cv"``) chosen by
    :func:`choose_prior_weight` over ``grid``. Returns ``(f float64[n, C], eta, scores or
    None)``."""
    def solve(known, h, weight):
        return harmonic_with_prior(graph, known, h, weight, n_classes=n_classes, method=method,
                                   tol=tol, normalize_graph=normalize_graph)

    scores = None
    if isinstance(eta, str):
        if eta != "cv":
            raise ValueError(f"eta: use 'cv' or a number in (0, 1], got {eta!r}")
        eta, scores = choose_prior_weight(solve, labels, prior, grid)
    return solve(labels, prior.probs, float(eta)), float(eta), scores


def harmonic_mixture_with_prior(graph, labels, responsibilities, prior, eta: float, *,
                                n_classes: int | None = None):
    """lambda of a harmonic mixture (Zhu & Lafferty 2005, Eqs. 3-6 at alpha = 0) with the
    dongle energy of Zhu, Ghahramani & Lafferty (2003, Sec. 5) added:

        min_lambda  f^T Delta f + sum_{i in U} c d_i ||f_i - h_i||^2,
        f_L = labels, f_U = R_U lambda, rows of lambda on the simplex, c = eta / (1 - eta),

    (a dongle of weight ``c d_i`` gives node i the transition probability ``eta`` to its
    prior; a node of degree 0 gets the graph's smallest positive degree as ``d_i``, so that
    a component of isolated nodes follows their priors) i.e. the backbone problem of
    :func:`~graphssl.inference.optimize.harmonic_lambda.solve_lambda` with
    ``A = R_U^T (Delta_UU + c D_U) R_U`` and ``b = R_U^T Delta_UL f_L - c R_U^T D_U h_U``.

    Args:
      graph: Graph or scipy sparse weights (symmetric); ``Delta = D - W``.
      labels: ``int[n]``, -1 for unlabelled.
      responsibilities: ``R``, float[n, M] (``p(m | x_i)``).
      prior: ``h``, float[n, C]; eta: in (0, 1).

    Returns ``(f float64[n, C] (labelled rows one-hot, the others R lambda), lambda [M, C],
    LambdaInfo)``; a component with no responsibility among the unlabelled nodes does not
    enter ``f_U`` and gets a uniform row.
    """
    return harmonic_mixture_prior_solver(graph, responsibilities, n_classes)(
        labels, prior, eta, full=True)


def harmonic_mixture_prior_solver(graph, responsibilities, n_classes: int | None = None):
    """``solve(labels, h, eta, full=False)`` of :func:`harmonic_mixture_with_prior` that keeps
    the backbone terms of the last ``labels`` (a cross-validation solves every ``eta`` of a
    fold on one backbone); returns ``f``, or ``(f, lambda, info)`` with ``full``."""
    from graphssl.inference.optimize.harmonic_lambda import solve_lambda

    W = _adjacency(graph)
    n = W.shape[0]
    R = np.asarray(responsibilities, dtype=np.float64)
    if R.ndim != 2 or R.shape[0] != n:
        raise ValueError(f"responsibilities: expected float[{n}, M], got shape {R.shape}")
    degrees = np.asarray(W.sum(axis=1)).ravel()
    lap = (sp.diags(degrees) - W).tocsr()
    # dongle weights c d_i; a node of degree 0 gets the smallest positive degree, so that a
    # component made of isolated nodes is held by their priors (with weight 0 its lambda row
    # is undetermined: on CiteSeer such a row made the box-constrained solve run 20 000
    # projected-gradient steps unconverged, 1.8 CPU s a solve)
    positive = degrees[degrees > 0]
    dongle = np.maximum(degrees, positive.min() if positive.size else 1.0)
    cache = {}

    def terms(labels):
        key = labels.tobytes()
        if key not in cache:
            cache.clear()
            lab, unl = np.flatnonzero(labels >= 0), np.flatnonzero(labels < 0)
            # a component without responsibility among the unlabelled nodes (EM can empty
            # one: mass 5e-41 on CiteSeer) leaves lambda's row free and the closed form's
            # pseudo-inverse outside the simplex; it does not enter f_U, so it is left out
            used = np.flatnonzero(R[unl].sum(axis=0) > 1e-9)
            R_U = R[np.ix_(unl, used)]
            A = R_U.T @ np.asarray(lap[unl][:, unl] @ R_U)  # the backbone's Delta_UU block
            B = np.asarray(lap[unl][:, lab].T @ R_U).T  # R_U^T Delta_UL, [M, l]
            P = R_U.T @ (dongle[unl, None] * R_U)  # R_U^T D_U R_U (dongle weights)
            cache[key] = (lab, unl, used, R_U, A, B, P)
        return cache[key]

    def solve(labels, prior, eta, full=False):
        if not 0.0 < float(eta) < 1.0:
            raise ValueError(f"eta: the dongle's transition probability must lie in (0, 1), "
                             f"got {eta}")
        labels = np.asarray(labels, dtype=np.int64)
        C = int(labels.max()) + 1 if n_classes is None else int(n_classes)
        h = _check_prior(prior, n, C)
        lab, unl, used, R_U, A, B, P = terms(labels)
        c = float(eta) / (1.0 - float(eta))
        F = np.eye(C)[labels[lab]]
        linear = -c * R_U.T @ (dongle[unl, None] * h[unl])  # [M, C]
        # solve_lambda reads b = B F: the prior's linear term enters as C extra columns of B
        # with identity rows in F (alpha = 0: F is read through B F only)
        lam_used, info = solve_lambda(0.5 * ((A + c * P) + (A + c * P).T),
                                      np.hstack([B, linear]), np.vstack([F, np.eye(C)]))
        lam = np.full((R.shape[1], C), 1.0 / C)  # left-out components: uniform rows
        lam[used] = lam_used
        f = np.clip(R @ lam, 0.0, None)
        f[lab] = F
        f = f / np.maximum(f.sum(axis=1, keepdims=True), 1e-300)
        return (f, lam, info) if full else f

    return solve
