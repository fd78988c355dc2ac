"""The lambda step of harmonic mixtures (Zhu & Lafferty 2005, Sec. 3; Fig. 2 step 2).

With gamma and eta fixed by EM, re-estimate lambda to minimise the convex
O_alpha(lambda) = -alpha l(theta) + (1 - alpha) E(theta) (Eq. 3) over the backbone graph:

* alpha = 0: the harmonic mixture, Eq. (5) ``lambda* = -(R^T Delta_UU R)^+ R^T Delta_UL f_L``
  (pseudo-inverse when R^T Delta_UU R is singular); when it leaves [0, 1] it is clipped and a
  box-constrained convex solve (L-BFGS-B, then an active-set polish on the KKT system) finishes
  (footnote 1);
* alpha > 0: start from the best interpolation ``eps lambda_EM + (1 - eps) lambda_HM``, then
  L-BFGS-B with bounds (Sec. 3.4);
* C > 2 classes: lambda is ``M x C`` with rows on the simplex (projected gradient with
  Nesterov momentum and backtracking).

Everything here works on the small ``(l + M) x (l + M)`` backbone Laplacian (NumPy/SciPy,
float64); the pipeline that builds it is :mod:`graphssl.inference.harmonic_mixture.fit`.
Host functions on purpose: the problem has ``M`` (tens to hundreds) unknowns, so a
compiled program would cost more to build than to run, and the bounded solve uses scipy's
L-BFGS-B (no bound-constrained L-BFGS among our JAX dependencies). Every solver is a pure
function of ``(A, b, init, options) -> (lambda, info)``; the FISTA loop's state lives in
local variables only.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.linalg as sla
from scipy.optimize import minimize, minimize_scalar

__all__ = [
    "LambdaInfo",
    "split_backbone",
    "closed_form_lambda",
    "kkt_residual",
    "solve_box_qp",
    "solve_lambda",
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
    A, B, F = _check_lambda_inputs(A, B, f_labelled)
    C = F.shape[1]
    Bf = B @ F
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
    # converged: the loop's own stopping test (resid < tol) was met, not max_iter
    return Lam, LambdaInfo("simplex_pg", it, resid < tol, resid, fg(Lam)[0], n_clipped, eps)


def _check_lambda_inputs(A, B, f_labelled):
    """``(A [M, M], B [M, l], F [l, C])`` as float64 arrays: shapes that agree, finite
    values, ``F`` one-hot rows of at least two classes; ``ValueError`` naming the argument
    otherwise."""
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    F = np.asarray(f_labelled, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A: expected the square block tilde Delta_UU [M, M], got shape "
                         f"{A.shape}; build it with split_backbone")
    if B.ndim != 2 or B.shape[0] != A.shape[0]:
        raise ValueError(f"B: expected tilde Delta_UL [M, l] with M = {A.shape[0]} rows (as A), "
                         f"got shape {B.shape}; build it with split_backbone")
    if F.ndim != 2 or F.shape[0] != B.shape[1]:
        raise ValueError(f"f_labelled: expected one-hot labels [l, C] with l = {B.shape[1]} "
                         f"rows (B's columns), got shape {F.shape}; one-hot encode integer "
                         "labels y with np.eye(C)[y]")
    if F.shape[1] < 2:
        raise ValueError(f"f_labelled: need at least 2 classes (columns), got {F.shape[1]}; "
                         "with one class lambda is 1 everywhere and needs no solve")
    for name, value in (("A", A), ("B", B), ("f_labelled", F)):
        if not np.all(np.isfinite(value)):
            raise ValueError(f"{name}: {int(np.sum(~np.isfinite(value)))} entries are NaN or "
                             "inf; the backbone Laplacian and labels must be finite")
    return A, B, F


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
