"""Fitting the feature model (multinomial logistic regression, Gaussian prior) by L-BFGS.

The MAP of Eq. (2) of :mod:`graphssl.models.feature_model` is found by L-BFGS. Default route
(``method="scipy"``): scipy's L-BFGS-B on host scipy-CSR products, in the row-space basis of
the labelled rows when they are few (:func:`_row_space_basis`: CiteSeer's 120 x 3703 problem
has 726 instead of 22 224 unknowns); 7x faster per fit on CiteSeer than the other route
(``benchmarks/bench_citation.py``; figures in :func:`_host_objective`). ``method="optax"``:
``optax.lbfgs`` (zoom line search) inside one ``lax.while_loop`` on BCOO features, so a grid of
fits -- cross-fitting folds times prior precisions -- runs as one ``vmap`` of one compiled
program (the route for an accelerator).

* :func:`fit_feature_model`: one MAP fit (soft or one-hot targets, row weights).
* :func:`cross_fitted_log_probabilities`: K-fold out-of-fold ``log p(y_i | x_i)`` for the
  labelled nodes (so that a model learnt on top of them -- e.g. the pseudo-likelihood of the
  Potts coupling -- does not see the over-confident in-sample fit) and the full-data fit for
  every other node; the prior precision is chosen by the cross-validated log likelihood of
  the labelled nodes over a grid (the stated rule: argmax, ties to the larger precision).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import scipy.sparse as sp

from graphssl._blas import limited_threads
from graphssl.models.feature_model import (
    FeatureModelParams,
    as_feature_matrix,
    feature_log_posterior,
    feature_log_probabilities,
)

__all__ = [
    "LogisticFitInfo",
    "FeatureFit",
    "fit_feature_model",
    "stratified_folds",
    "cross_fitted_log_probabilities",
    "DEFAULT_PRECISIONS",
]

DEFAULT_PRECISIONS = (1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1)
"""Prior precisions tried by :func:`cross_fitted_log_probabilities` (per labelled node:
``lambda = precision * n_labelled``), for unit-norm feature rows."""


class LogisticFitInfo(NamedTuple):
    """Convergence record: ``iterations``, ``grad_norm`` (of the scaled objective),
    ``converged`` (``grad_norm <= tol``), ``objective`` (negative log posterior / sum w)."""

    iterations: jax.Array
    grad_norm: jax.Array
    converged: jax.Array
    objective: jax.Array


class FeatureFit(NamedTuple):
    """Result of :func:`cross_fitted_log_probabilities`.

    ``log_probs float[n, C]`` (out-of-fold on the labelled nodes, full fit elsewhere),
    ``params`` (full fit), ``prior_precision`` (chosen), ``cv_log_lik float[len(grid)]``
    (mean held-out log likelihood per labelled node), ``grid``, ``info`` (full fit).
    """

    log_probs: np.ndarray
    params: FeatureModelParams
    prior_precision: float
    cv_log_lik: np.ndarray
    grid: np.ndarray
    info: LogisticFitInfo


def _minimize(fun, x0, max_iter: int, tol: float):
    """L-BFGS (optax) until the gradient norm is at most ``tol`` or ``max_iter`` steps."""
    solver = optax.lbfgs()
    value_and_grad = optax.value_and_grad_from_state(fun)

    def body(carry):
        x, state, _ = carry
        value, grad = value_and_grad(x, state=state)
        updates, state = solver.update(grad, state, x, value=value, grad=grad, value_fn=fun)
        return optax.apply_updates(x, updates), state, optax.tree.norm(grad)

    def cond(carry):
        _, state, grad_norm = carry
        it = optax.tree.get(state, "count")
        return (it == 0) | ((it < max_iter) & (grad_norm > tol))

    init = (x0, solver.init(x0), jnp.asarray(jnp.inf, dtype=jnp.result_type(float)))
    x, state, _ = jax.lax.while_loop(cond, body, init)
    grad_norm = optax.tree.norm(optax.tree.get(state, "grad"))
    info = LogisticFitInfo(optax.tree.get(state, "count"), grad_norm, grad_norm <= tol,
                           optax.tree.get(state, "value"))
    return x, info


@functools.partial(jax.jit, static_argnames=("max_iter",))
def _fit(features, targets, weights, prior_precision, max_iter, tol):
    d, C = features.shape[1], targets.shape[1]
    scale = jnp.maximum(jnp.sum(weights), 1.0)

    def objective(params):
        return -feature_log_posterior(params, features, targets, weights, prior_precision) / scale

    x0 = FeatureModelParams(jnp.zeros((d, C), targets.dtype), jnp.zeros(C, targets.dtype))
    return _minimize(objective, x0, max_iter, tol)


def _host_objective(features, targets, weights, prior_precision):
    """Negative Eq. (2) / sum w and its gradient on the host: scipy CSR (or numpy) products
    ``X W`` and ``X^T (w (P - T))``, rows of weight 0 dropped first.

    Measured (``benchmarks/bench_citation.py``, CiteSeer, loaded 2-core CPU): one evaluation
    on all 3327 x 3703 rows takes 5.6 ms here (float64) against 4.2 ms for the jitted BCOO
    value-and-gradient (JAX default float32); but a whole MAP fit on the 120 labels takes
    0.04 s by this route (row-space basis, nothing to compile) against 0.29 s by the
    optax/BCOO while-loop (warm, compilation excluded).
    """
    X = features
    T = np.asarray(targets, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    keep = np.flatnonzero(w > 0)
    if keep.size < w.size:  # rows of weight 0 contribute nothing: drop them up front
        X, T, w = X[keep], T[keep], w[keep]
    d, C = X.shape[1], T.shape[1]
    scale = max(float(w.sum()), 1.0)
    lam = float(prior_precision)
    wT = w[:, None] * T

    def fun(flat):
        W, b = flat[: d * C].reshape(d, C), flat[d * C:]
        Z = np.asarray(X @ W) + b
        Z -= Z.max(axis=1, keepdims=True)
        log_norm = np.log(np.exp(Z).sum(axis=1, keepdims=True))
        log_p = Z - log_norm
        value = -(np.sum(wT * log_p) - 0.5 * lam * np.sum(W**2)) / scale
        R = w[:, None] * np.exp(log_p) * T.sum(axis=1, keepdims=True) - wT
        grad_W = (np.asarray(X.T @ R) + lam * W) / scale
        return value, np.concatenate([grad_W.ravel(), R.sum(axis=0) / scale])

    return fun


def _row_space_basis(X):
    """``(Z, P)`` with ``Z = U S^1/2`` (m x r) and ``P = X^T U S^-1/2`` (d x r) from the
    eigendecomposition ``X X^T = U S U^T`` of the m used rows (r = numerical rank).

    Representer theorem: with an L2 penalty the MAP ``W`` lies in the span of the rows, and
    ``W = P B`` turns Eq. (2) into the same regression on ``Z`` with ``||W|| = ||B||``
    (``X W = Z B``): the same minimiser with r x C instead of d x C unknowns (CiteSeer: 120
    labelled rows, 3703 words -- 726 instead of 22 224 parameters).
    """
    K = np.asarray((X @ X.T).toarray() if sp.issparse(X) else X @ X.T, dtype=np.float64)
    s, U = np.linalg.eigh(K)
    keep = s > max(s.max(), 1e-300) * 1e-10
    s, U = s[keep], U[:, keep]
    Z = U * np.sqrt(s)
    P = np.asarray(X.T @ U) / np.sqrt(s)
    return Z, P


def _fit_scipy(features, targets, weights, prior_precision, max_iter, tol):
    """scipy L-BFGS-B on the host objective (:func:`_host_objective`), in the row-space
    basis of :func:`_row_space_basis` when fewer rows than features are used."""
    from scipy.optimize import minimize

    d, C = features.shape[1], targets.shape[1]
    used = np.flatnonzero(np.asarray(weights) > 0)
    P = None
    if 4 * used.size <= d:  # few rows: the row-space basis (an m x m eigh) is the cheaper
        Z, P = _row_space_basis(features[used])
        features, targets, weights = Z, np.asarray(targets)[used], np.asarray(weights)[used]
    r = features.shape[1]
    fun = _host_objective(features, targets, weights, prior_precision)
    res = minimize(fun, np.zeros(r * C + C), jac=True, method="L-BFGS-B",
                   options=dict(maxiter=max_iter, gtol=tol, ftol=min(2.2e-9, 1e-3 * tol),
                                maxcor=10))
    W = res.x[: r * C].reshape(r, C)
    W = W if P is None else P @ W
    params = FeatureModelParams(jnp.asarray(W), jnp.asarray(res.x[r * C:]))
    grad_norm = float(np.linalg.norm(fun(res.x)[1]))
    info = LogisticFitInfo(res.nit, grad_norm, bool(grad_norm <= tol or res.success),
                           float(res.fun))
    return params, info


def fit_feature_model(features, targets, weights=None, prior_precision: float = 1.0, *,
                      max_iter: int = 500, tol: float = 1e-6, method: str = "scipy",
                      n_classes: int | None = None):
    """MAP of Eq. (2) of :mod:`graphssl.models.feature_model` by L-BFGS.

    Args:
        features: ``[n, d]`` dense array, scipy sparse matrix (converted to BCOO) or BCOO.
        targets: ``int[n]`` labels (``-1`` = no label, weight 0) or ``float[n, C]`` soft
            targets.
        weights: ``float[n]`` row weights (default: 1 on labelled rows).
        prior_precision: ``lambda`` of the Gaussian prior (> 0).
        n_classes: C for integer targets (default: max label + 1).
        max_iter, tol: L-BFGS limits (``tol`` on the gradient of the objective / sum w).
        method: ``"scipy"`` (L-BFGS-B on the host, scipy CSR products; the faster on CPU,
            see :func:`_host_objective`) or
            ``"optax"`` (``optax.lbfgs`` inside ``lax.while_loop``: one compiled program,
            vmappable).

    Returns ``(FeatureModelParams, LogisticFitInfo)``.
    """
    if not np.isfinite(prior_precision) or prior_precision <= 0:
        raise ValueError(f"prior_precision: must be a positive number, got {prior_precision}")
    if method not in ("scipy", "optax"):
        raise ValueError(f"method: use 'scipy' or 'optax', got {method!r}")
    if method == "scipy":
        X = sp.csr_matrix(features, dtype=np.float64) if sp.issparse(features) \
            else np.asarray(features, dtype=np.float64)
        _, targets, weights = _inputs(np.zeros((X.shape[0], 0)), targets, weights, n_classes)
        # one BLAS thread: the small dense steps (eigh of 120 x 120, L-BFGS-B updates of 726
        # unknowns) ran 30-100x slower with OpenBLAS threads on a loaded 2-core machine
        with limited_threads(1):
            return _fit_scipy(X, targets, weights, prior_precision, int(max_iter), float(tol))
    features, targets, weights = _inputs(features, targets, weights, n_classes)
    dtype = features.dtype
    return _fit(features, jnp.asarray(targets, dtype), jnp.asarray(weights, dtype),
                jnp.asarray(prior_precision, dtype), int(max_iter), float(tol))


def _inputs(features, targets, weights, n_classes=None):
    from jax.experimental import sparse as jsparse

    if not isinstance(features, jsparse.BCOO | jax.Array):
        features = as_feature_matrix(features)
    n = features.shape[0]
    targets = np.asarray(targets)
    if targets.ndim == 1:
        if targets.shape != (n,):
            raise ValueError(f"targets: expected shape ({n},), got {targets.shape}")
        C = int(targets.max()) + 1 if n_classes is None else int(n_classes)
        if C < 2:
            raise ValueError("targets: need labelled nodes of at least 2 classes")
        labelled = targets >= 0
        onehot = np.zeros((n, C))
        onehot[np.flatnonzero(labelled), targets[labelled]] = 1.0
        if weights is None:
            weights = labelled.astype(float)
        targets = onehot
    elif targets.ndim != 2 or targets.shape[0] != n:
        raise ValueError(f"targets: expected int[{n}] or float[{n}, C], got {targets.shape}")
    weights = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    if weights.shape != (n,) or np.any(weights < 0):
        raise ValueError(f"weights: expected non-negative float[{n}], got shape {weights.shape}")
    return features, np.asarray(targets, dtype=np.float64), weights


def _log_softmax_host(features, params) -> np.ndarray:
    """Eq. (1) on the host: ``log softmax(X W + b)`` as float64[n, C] (scipy CSR product)."""
    Z = np.asarray(features @ np.asarray(params.weights, np.float64)) + np.asarray(params.bias)
    Z -= Z.max(axis=1, keepdims=True)
    return Z - np.log(np.exp(Z).sum(axis=1, keepdims=True))


def stratified_folds(labels, n_folds: int, seed: int) -> np.ndarray:
    """``int[n]`` fold of each labelled node (``-1`` for unlabelled): each class's nodes are
    shuffled (``seed``) and dealt round-robin, so every fold holds every class it can."""
    labels = np.asarray(labels)
    fold = np.full(labels.shape, -1, dtype=np.int64)
    rng = np.random.default_rng(seed)
    offset = 0
    for c in np.unique(labels[labels >= 0]):
        members = rng.permutation(np.flatnonzero(labels == c))
        fold[members] = (offset + np.arange(members.size)) % n_folds
        offset += members.size
    return fold


@functools.partial(jax.jit, static_argnames=("max_iter",))
def _grid_fits(features, targets, fold_weights, precisions, max_iter, tol):
    """All (fold, precision) fits in one vmap: log-probs [P, K, n, C]."""
    def one(weights, precision):
        params, _ = _fit(features, targets, weights, precision, max_iter, tol)
        return feature_log_probabilities(params, features)

    per_fold = jax.vmap(one, in_axes=(0, None))
    return jax.vmap(per_fold, in_axes=(None, 0))(fold_weights, precisions)


def cross_fitted_log_probabilities(features, labels, n_classes: int | None = None, *,
                                   precisions=DEFAULT_PRECISIONS, n_folds: int = 5,
                                   seed: int, max_iter: int = 500,
                                   tol: float = 1e-6, method: str = "scipy") -> FeatureFit:
    """Out-of-fold feature log-probabilities for the labelled nodes, with the prior
    precision chosen by K-fold cross-validated log likelihood.

    ``labels``: ``int[n]`` with ``-1`` for unlabelled. ``precisions``: grid of
    ``lambda / n_labelled`` (the prior's weight per labelled node). For each grid value and
    fold the model is fitted without that fold (``K x P`` fits); the held-out log likelihood
    summed over folds scores the value (``method``: as in :func:`fit_feature_model`;
    ``"optax"`` runs the ``K x P`` fits as one vmap). The chosen value's out-of-fold
    log-probabilities are returned for the labelled nodes and a fit on all labelled nodes
    for the others. Needs at least 2 labelled nodes per fold.
    """
    labels = np.asarray(labels)
    labelled = labels >= 0
    n_lab = int(labelled.sum())
    if n_folds < 2 or n_lab < 2 * n_folds:
        raise ValueError(f"n_folds: need 2 <= n_folds <= n_labelled / 2 (n_labelled = "
                         f"{n_lab}), got {n_folds}")
    grid = np.asarray(precisions, dtype=float)
    if grid.ndim != 1 or grid.size == 0 or np.any(grid <= 0):
        raise ValueError("precisions: give a non-empty 1-D grid of positive numbers")
    rows = np.flatnonzero(labelled)
    # only the labelled rows enter a fit: fit on that sub-matrix (n_lab x d, not n x d)
    sub = features[rows] if sp.issparse(features) else np.asarray(features)[rows]
    sub = sp.csr_matrix(sub, dtype=np.float64) if sp.issparse(sub) else sub
    _, targets, _ = _inputs(np.zeros((n_lab, 0)), labels[rows], None, n_classes)
    fold = stratified_folds(labels[rows], n_folds, seed)
    fold_weights = np.stack([fold != k for k in range(n_folds)]).astype(float)
    if method == "optax":
        dtype = jnp.zeros(()).dtype
        log_p = _grid_fits(as_feature_matrix(sub, dtype), jnp.asarray(targets, dtype),
                           jnp.asarray(fold_weights, dtype),
                           jnp.asarray(grid * n_lab, dtype), int(max_iter), float(tol))
    else:
        log_p = [[_log_softmax_host(sub, fit_feature_model(
            sub, targets, w, float(g * n_lab), max_iter=max_iter, tol=tol)[0])
            for w in fold_weights] for g in grid]
    log_p = np.asarray(log_p)  # [P, K, n_lab, C]
    oof = log_p[:, fold, np.arange(n_lab), :]  # [P, n_lab, C]
    held_out = oof[:, np.arange(n_lab), labels[rows]].sum(axis=1) / n_lab
    best = int(np.flatnonzero(held_out >= held_out.max() - 1e-9).max())
    params, info = fit_feature_model(sub, targets, np.ones(n_lab),
                                     float(grid[best] * n_lab), max_iter=max_iter, tol=tol,
                                     method=method)
    out = _log_softmax_host(features, params)
    out[rows] = oof[best]
    return FeatureFit(out, params, float(grid[best] * n_lab), held_out, grid, info)
