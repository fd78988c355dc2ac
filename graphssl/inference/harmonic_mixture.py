"""Graph-discriminative training of harmonic mixtures (Zhu & Lafferty 2005, Sec. 3).

Step 2 of Fig. 2: with gamma and eta fixed by EM, re-estimate lambda to minimise the convex
O_alpha(lambda) = -alpha l(theta) + (1 - alpha) E(theta) (Eq. 3) over the backbone graph:

* alpha = 0: the harmonic mixture, Eq. (5) ``lambda* = -(R^T Delta_UU R)^+ R^T Delta_UL f_L``
  (pseudo-inverse when R^T Delta_UU R is singular); when it leaves [0, 1] it is clipped and a
  box-constrained convex solve (L-BFGS-B, then an active-set polish on the KKT system) finishes
  (footnote 1);
* alpha > 0: start from the best interpolation ``eps lambda_EM + (1 - eps) lambda_HM``, then
  L-BFGS-B with bounds (Sec. 3.4);
* C > 2 classes: lambda is ``M x C`` with rows on the simplex (projected gradient with
  Nesterov momentum and backtracking).

Also the baselines of Sec. 4 ('sample' with the Delalleau et al. extension, 'EM') and the
decision rules (median(f) thresholding, class mass normalisation).
"""

from __future__ import annotations

import dataclasses
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg as sla
from scipy.optimize import minimize, minimize_scalar

from graphssl.inference.em import (
    DEFAULT_OPTIONS,
    EMOptions,
    fit_em,
    init_gaussian_mixture,
    init_multinomial_mixture,
    kmeans,
    kmeans_assign,
)
from graphssl.models.harmonic_mixture import (
    backbone_laplacian,
    hard_lift,
    log_responsibilities,
    mixture_lift,
)

__all__ = [
    "LambdaInfo",
    "HarmonicMixtureFit",
    "split_backbone",
    "closed_form_lambda",
    "kkt_residual",
    "solve_box_qp",
    "solve_lambda",
    "fit_harmonic_mixture",
    "predict_proba",
    "sample_baseline",
    "median_threshold",
    "class_mass_normalize",
]


class LambdaInfo(NamedTuple):
    """How lambda was obtained: ``method`` ('closed_form', 'box_qp', 'simplex_pg',
    'lbfgsb'), ``iterations``, ``converged``, ``residual`` (KKT residual: the projected
    gradient's max-norm), ``objective`` (O_alpha up to a lambda-free constant),
    ``n_clipped`` (components of Eq. 5 outside [0, 1]), ``epsilon`` (Sec. 3.4 interpolation)."""

    method: str
    iterations: int
    converged: bool
    residual: float
    objective: float
    n_clipped: int = 0
    epsilon: float = float("nan")


def split_backbone(backbone, n_labelled: int):
    """``(A, B)`` = (tilde Delta_UU, tilde Delta_UL) of Eq. (6) as float64 NumPy arrays."""
    Lt = np.asarray(backbone, dtype=np.float64)
    return Lt[n_labelled:, n_labelled:], Lt[n_labelled:, :n_labelled]


def closed_form_lambda(A, b, *, rcond: float = 1e-10):
    """Unconstrained minimiser of ``lambda^T A lambda + 2 lambda^T b``: Eq. (5),
    ``lambda* = -A^+ b`` (b = R^T Delta_UL f_L, one column per class). Cholesky when A is
    well conditioned, else the symmetric pseudo-inverse (footnote 1)."""
    A = np.asarray(A, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    w = np.linalg.eigvalsh(A)
    if w[0] > rcond * max(w[-1], 1e-300):
        return sla.solve(A, -b, assume_a="pos")
    return -sla.pinvh(A, rtol=rcond) @ b


def _energy(lam, A, b):
    return float(lam @ (A @ lam) + 2.0 * lam @ b)


def kkt_residual(lam, grad, lo=0.0, hi=1.0):
    """Max-norm of the projected gradient ``lam - clip(lam - grad)``: zero iff the KKT
    conditions of the box-constrained problem hold (interior: grad = 0; at 0: grad >= 0;
    at 1: grad <= 0)."""
    return float(np.max(np.abs(lam - np.clip(lam - grad, lo, hi)), initial=0.0))


def _active_set_polish(lam, A, b, tol, max_rounds=50):
    """Refine a near-optimal box-QP point: fix the variables at a bound whose gradient pushes
    outward, solve the free block exactly, repeat while the KKT residual improves."""
    best = lam.copy()
    best_res = kkt_residual(lam, 2 * (A @ lam + b))
    for _ in range(max_rounds):
        g = 2 * (A @ lam + b)
        at_lo = (lam <= 1e-12) & (g > 0)
        at_hi = (lam >= 1 - 1e-12) & (g < 0)
        free = ~(at_lo | at_hi)
        if not free.any():
            break
        fixed = np.where(at_hi, 1.0, 0.0)
        rhs = b[free] + A[np.ix_(free, ~free)] @ fixed[~free]
        new = fixed.copy()
        new[free] = closed_form_lambda(A[np.ix_(free, free)], rhs)
        new = np.clip(new, 0.0, 1.0)
        res = kkt_residual(new, 2 * (A @ new + b))
        if res >= best_res:
            break
        best, best_res, lam = new, res, new
        if res < tol:
            break
    return best, best_res


def solve_box_qp(A, b, init, *, tol: float = 1e-9, max_iter: int = 20000):
    """``min lambda^T A lambda + 2 lambda^T b`` s.t. ``0 <= lambda <= 1`` (A PSD): the
    constrained alpha = 0 problem of footnote 1, from ``init`` (the clipped Eq. 5)."""
    scale = max(float(np.abs(A).max()), 1e-300)

    def fun(x):
        Ax = A @ x
        return float(x @ Ax + 2 * x @ b) / scale, (2 * (Ax + b)) / scale

    res = minimize(
        fun, np.clip(init, 0.0, 1.0), jac=True, method="L-BFGS-B",
        bounds=[(0.0, 1.0)] * len(b),
        options=dict(maxiter=max_iter, maxfun=2 * max_iter, ftol=1e-16, gtol=tol * 1e-3),
    )
    lam, resid = _active_set_polish(np.clip(res.x, 0.0, 1.0), A, b, tol * scale)
    return lam, int(res.nit), resid / scale


def _project_simplex_rows(V):
    """Euclidean projection of each row onto the probability simplex (Duchi et al. 2008)."""
    U = -np.sort(-V, axis=1)
    css = np.cumsum(U, axis=1) - 1.0
    k = np.arange(1, V.shape[1] + 1)
    cond = U - css / k > 0
    rho = cond.shape[1] - 1 - np.argmax(cond[:, ::-1], axis=1)
    theta = css[np.arange(V.shape[0]), rho] / (rho + 1)
    return np.maximum(V - theta[:, None], 0.0)


def _projected_gradient(fun_grad, init, project, *, tol, max_iter):
    """Accelerated projected gradient (FISTA with backtracking) for a convex smooth function."""
    x = project(init)
    y, t, step = x.copy(), 1.0, 1.0
    f_x, _ = fun_grad(x)
    it, resid = 0, np.inf
    for it in range(1, max_iter + 1):  # noqa: B007
        f_y, g_y = fun_grad(y)
        while True:
            z = project(y - step * g_y)
            f_z, _ = fun_grad(z)
            d = z - y
            if f_z <= f_y + np.sum(g_y * d) + np.sum(d * d) / (2 * step) + 1e-15 * abs(f_y):
                break
            step *= 0.5
        t_new = 0.5 * (1 + np.sqrt(1 + 4 * t * t))
        if f_z > f_x:  # restart momentum: keep monotone
            y, t = x.copy(), 1.0
            step *= 2.0
            continue
        y = z + ((t - 1) / t_new) * (z - x)
        _, g_z = fun_grad(z)
        resid = float(np.max(np.abs(z - project(z - g_z))))
        x, f_x, t = z, f_z, t_new
        step *= 1.5
        if resid < tol:
            break
    return x, it, resid


def _binary_objective(alpha, A, b, r, y):
    """O_alpha for binary lambda = p(y=1|m) and its gradient (Sec. 3.4)."""
    tiny = 1e-300
    pos, neg = (None, None) if r is None else (r[y == 1], r[y != 1])

    def fun_grad(lam):
        e = lam @ (A @ lam) + 2 * lam @ b
        ge = 2 * (A @ lam + b)
        if alpha == 0:
            return float(e), ge
        sp = np.maximum(pos @ lam, tiny)
        sn = np.maximum(neg @ (1 - lam), tiny)
        ll = np.log(sp).sum() + np.log(sn).sum()
        gl = (pos / sp[:, None]).sum(0) - (neg / sn[:, None]).sum(0)
        return float(-alpha * ll + (1 - alpha) * e), -alpha * gl + (1 - alpha) * ge

    return fun_grad


def _multiclass_objective(alpha, A, Bf, r, y):
    tiny = 1e-300

    def fun_grad(Lam):
        e = np.sum(Lam * (A @ Lam)) + 2 * np.sum(Lam * Bf)
        ge = 2 * (A @ Lam + Bf)
        if alpha == 0:
            return float(e), ge
        s = np.maximum(np.einsum("im,mi->i", r, Lam[:, y]), tiny)
        gl = np.zeros_like(Lam)
        np.add.at(gl.T, y, r / s[:, None])
        return float(-alpha * np.log(s).sum() + (1 - alpha) * e), -alpha * gl + (1 - alpha) * ge

    return fun_grad


def solve_lambda(
    A,
    B,
    f_labelled,
    *,
    alpha: float = 0.0,
    labelled_log_resp=None,
    lambda_em=None,
    tol: float = 1e-9,
    max_iter: int = 20000,
):
    """Minimise O_alpha over lambda with gamma, eta fixed (Fig. 2 step 2; Eqs. 3-5).

    Args:
      A, B: ``tilde Delta_UU [M, M]`` and ``tilde Delta_UL [M, l]`` (:func:`split_backbone`).
      f_labelled: one-hot labels of the labelled nodes, ``[l, C]``.
      alpha: weight of the likelihood term in Eq. (3), in [0, 1).
      labelled_log_resp: log p(m | x_i) of the labelled points ``[l, M]`` (needed if alpha > 0).
      lambda_em: EM's ``[M, C]`` lambda, the other end of the Sec. 3.4 interpolation.
    Returns:
      ``(lambda [M, C], LambdaInfo)``.
    """
    if not 0.0 <= alpha < 1.0:
        raise ValueError(f"alpha: must lie in [0, 1), got {alpha}")
    F = np.asarray(f_labelled, dtype=np.float64)
    C = F.shape[1]
    Bf = np.asarray(B) @ F
    if alpha > 0 and (labelled_log_resp is None or lambda_em is None):
        raise ValueError("labelled_log_resp, lambda_em: both are needed when alpha > 0")
    y = F.argmax(1)
    r = None if labelled_log_resp is None else np.exp(np.asarray(labelled_log_resp, np.float64))
    Lam0 = closed_form_lambda(A, Bf)  # Eq. (5), all class columns at once
    n_clipped = int(np.sum((Lam0 < -1e-10) | (Lam0 > 1 + 1e-10)))
    if C == 2:
        return _solve_binary(A, Bf[:, 1], Lam0[:, 1], alpha, r, y, lambda_em, tol, max_iter,
                             n_clipped)
    project = _project_simplex_rows
    if alpha == 0 and n_clipped == 0:
        fg = _multiclass_objective(0.0, A, Bf, r, y)
        f, g = fg(Lam0)
        return Lam0, LambdaInfo("closed_form", 0, True, _simplex_resid(Lam0, g), f, 0)
    start = project(np.clip(Lam0, 0, None))
    fg = _multiclass_objective(alpha, A, Bf, r, y)
    eps = float("nan")
    if alpha > 0:
        start, eps = _interpolate(fg, np.asarray(lambda_em, np.float64), start)
    Lam, it, resid = _projected_gradient(fg, start, project, tol=tol, max_iter=max_iter)
    return Lam, LambdaInfo("simplex_pg", it, resid < 1e3 * tol, resid, fg(Lam)[0], n_clipped,
                           eps)


def _simplex_resid(Lam, g):
    return float(np.max(np.abs(Lam - _project_simplex_rows(Lam - g))))


def _interpolate(fun_grad, lam_em, lam_hm):
    """Sec. 3.4: ``eps* = argmin_eps O(eps lambda_EM + (1 - eps) lambda_HM)``, eps in [0, 1]."""
    res = minimize_scalar(
        lambda e: fun_grad(e * lam_em + (1 - e) * lam_hm)[0], bounds=(0.0, 1.0),
        method="bounded", options=dict(xatol=1e-6),
    )
    eps = float(res.x)
    return eps * lam_em + (1 - eps) * lam_hm, eps


def _solve_binary(A, b, lam0, alpha, r, y, lambda_em, tol, max_iter, n_clipped):
    fg = _binary_objective(alpha, A, b, r, y)
    if alpha == 0:
        if n_clipped == 0:
            f, g = fg(lam0)
            lam, info = lam0, LambdaInfo("closed_form", 0, True, kkt_residual(lam0, g), f, 0)
        else:
            lam, it, resid = solve_box_qp(A, b, np.clip(lam0, 0, 1), tol=tol, max_iter=max_iter)
            info = LambdaInfo("box_qp", it, resid < 1e3 * tol, resid, fg(lam)[0], n_clipped)
        return np.stack([1 - lam, lam], 1), info
    start, eps = _interpolate(fg, np.asarray(lambda_em, np.float64)[:, 1], np.clip(lam0, 0, 1))
    scale = max(abs(fg(start)[0]), 1.0)
    res = minimize(
        lambda x: tuple(v / scale for v in fg(x)), start, jac=True, method="L-BFGS-B",
        bounds=[(0.0, 1.0)] * len(b),
        options=dict(maxiter=max_iter, maxfun=2 * max_iter, ftol=1e-16, gtol=tol * 1e-3),
    )
    lam = np.clip(res.x, 0, 1)
    f, g = fg(lam)
    resid = kkt_residual(lam, g / scale)
    info = LambdaInfo("lbfgsb", int(res.nit), resid < 1e3 * tol, resid, f, n_clipped, eps)
    return np.stack([1 - lam, lam], 1), info


# ----------------------------------------------------------------------------- pipeline


@dataclasses.dataclass
class HarmonicMixtureFit:
    """Result of :func:`fit_harmonic_mixture`: the mixture with the graph-discriminative
    lambda (``mixture.log_label_probs = log lambda``), EM's lambda, the backbone Laplacian,
    the convergence records and wall-clock times (seconds) of the EM and the M x M solve."""

    mixture: object
    label_probs: np.ndarray
    label_probs_em: np.ndarray
    backbone: np.ndarray
    em_info: object
    lambda_info: LambdaInfo
    times: dict
    centers: object = None


_BACKBONE_CACHE: dict = {}


def _compiled_backbone(kind, batch_size, n_clusters=None):
    key = (kind, batch_size, n_clusters)
    if key not in _BACKBONE_CACHE:
        if kind == "kmeans":
            def run(assign, lab_idx, nbr, w):
                lift = hard_lift(assign, n_clusters, lab_idx, dtype=w.dtype)
                return backbone_laplacian(lift, nbr, w, batch_size=batch_size)
        else:
            def run(mixture, X, lab_idx, nbr, w):
                lift = mixture_lift(mixture, X, lab_idx)
                return backbone_laplacian(lift, nbr, w, batch_size=batch_size)
        _BACKBONE_CACHE[key] = jax.jit(run)
    return _BACKBONE_CACHE[key]


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
    key=None,
    em_options: EMOptions = DEFAULT_OPTIONS,
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
        clusters, Sec. 3.3; then the mixture is still fitted for prediction).
    """
    labels = np.asarray(labels)
    observed = labels >= 0
    lab_idx = np.flatnonzero(observed)
    C = int(labels.max()) + 1 if n_classes is None else n_classes
    key = jax.random.PRNGKey(0) if key is None else key
    y = jnp.asarray(np.where(observed, labels, 0), jnp.int32)
    obs = jnp.asarray(observed)
    t0 = time.perf_counter()
    if mixture == "multinomial":
        mix0 = init_multinomial_mixture(X, y, obs, n_components, C, key, options=em_options)
        Xj = jnp.asarray(X.todense() if hasattr(X, "todense") else X)
    elif mixture == "gaussian":
        Xj = jnp.asarray(X)
        mix0 = init_gaussian_mixture(Xj, y, obs, n_components, C, key,
                                     covariance_type=covariance_type, options=em_options)
    else:
        raise ValueError(f"mixture: unknown {mixture!r}; use 'gaussian' or 'multinomial'")
    mix, em_info = fit_em(mix0, Xj, y, obs, max_iter=max_iter, tol=tol, options=em_options)
    jax.block_until_ready(mix)
    t_em = time.perf_counter() - t0

    t0 = time.perf_counter()
    nbr, w = graph.padded_neighbors() if neighbors is None else neighbors
    w = jnp.asarray(w, Xj.dtype)
    centers = None
    if backbone == "kmeans":
        centers, assign, _ = kmeans(Xj, n_components, key)
        Lt = _compiled_backbone("kmeans", batch_size, n_components)(
            assign, jnp.asarray(lab_idx), nbr, w)
    elif backbone == "mixture":
        Lt = _compiled_backbone("mixture", batch_size)(mix, Xj, jnp.asarray(lab_idx), nbr, w)
    else:
        raise ValueError(f"backbone: unknown {backbone!r}; use 'mixture' or 'kmeans'")
    Lt = np.asarray(jax.block_until_ready(Lt), dtype=np.float64)
    t_backbone = time.perf_counter() - t0

    t0 = time.perf_counter()
    A, B = split_backbone(Lt, len(lab_idx))
    F = np.eye(C)[labels[lab_idx]]
    lam_em = np.exp(np.asarray(mix.log_label_probs, np.float64))
    log_r_lab = np.asarray(log_responsibilities(mix, Xj[lab_idx])) if alpha > 0 else None
    lam, info = solve_lambda(A, B, F, alpha=alpha, labelled_log_resp=log_r_lab,
                             lambda_em=lam_em)
    t_solve = time.perf_counter() - t0
    dt = mix.log_label_probs.dtype
    log_lam = jnp.log(jnp.clip(jnp.asarray(lam, dt), jnp.finfo(dt).tiny, 1.0))
    fitted = dataclasses.replace(mix, log_label_probs=log_lam)
    times = {"em": t_em, "backbone": t_backbone, "solve": t_solve}
    return HarmonicMixtureFit(fitted, lam, lam_em, Lt, em_info, info, times, centers)


def predict_proba(fit: HarmonicMixtureFit, X):
    """Inductive p(y | x) = sum_m p(m | x) lambda_m for any points (Sec. 3.2, "unseen data");
    with the k-means backbone, the nearest centre's lambda row."""
    if fit.centers is not None:
        a, _ = kmeans_assign(jnp.asarray(X), fit.centers)
        return fit.label_probs[np.asarray(a)]
    Xj = jnp.asarray(X.todense() if hasattr(X, "todense") else X)
    log_r = np.asarray(_log_resp_jit(fit.mixture, Xj), np.float64)
    return np.exp(log_r) @ fit.label_probs


_log_resp_jit = jax.jit(log_responsibilities)


# ----------------------------------------------------------------------------- baselines


def sample_baseline(X, labels, n_samples: int, *, sigma: float, graph_builder, key=0,
                    X_eval=None, harmonic=None):
    """'sample' of Sec. 4: draw M unlabelled points, solve the harmonic function on the
    (l + M)-node graph ``graph_builder(X_small)``, extend to other points by the Delalleau et
    al. (2005) formula ``f_j = sum_i w_ij f_i / sum_i w_ij`` over the l + M nodes with
    ``w_ij = exp(-||x_i - x_j||^2 / (2 sigma^2))`` (computed as a softmax: no underflow).

    ``harmonic(graph, labels, n_classes)`` solves the small graph (default: a dense
    least-squares harmonic function, robust to numerically disconnected samples; pass
    ``graphssl.models.baselines.harmonic_function`` for the sparse solver).
    Returns ``(f on all n training points [n, C], f on X_eval or None)``.
    """
    if harmonic is None:
        harmonic = _dense_harmonic
    labels = np.asarray(labels)
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
    ``f``: ``[n]`` scores p(y=1|x) or ``[n, 2]``. Returns ``(labels int[n], threshold)``."""
    f = np.asarray(f, np.float64)
    if f.ndim == 2:
        f = f[:, 1]
    t = float(np.median(f)) if threshold is None else float(threshold)
    return (f > t).astype(int), t


def class_mass_normalize(F, class_prior):
    """Class mass normalisation (Zhu et al. 2003): scale column c by ``q_c / sum_i F_ic`` then
    take the argmax. ``F [n, C]``, ``class_prior [C]``. Returns ``int[n]``."""
    F = np.asarray(F, np.float64)
    mass = F.sum(0)
    q = np.asarray(class_prior, np.float64)
    return np.argmax(F * (q / np.maximum(mass, 1e-300))[None], axis=1)
