"""Sparse SPD solvers of the baselines: batched Jacobi-PCG (NumPy and JAX) and sparse LU."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

_DIRECT_MAX_N = 100  # 'auto': sparse LU up to this many unknowns (or a directed graph), else PCG


def _column_dot(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``sum_i A_ij B_ij`` for every column j (one pass, no temporary)."""
    return np.einsum("ij,ij->j", A, B)


def batched_pcg(matvec, B, inv_diag=None, *, tol=1e-8, maxiter=1000):
    """Preconditioned conjugate gradients on ``A X = B`` for all columns at once.

    Each column runs its own CG recursion (own step sizes), but the matrix products are
    shared: one ``A @ P`` with ``P`` of shape ``[n, C]`` per iteration. ``A`` must be
    symmetric positive definite; ``inv_diag`` is the Jacobi preconditioner ``1 / diag(A)``,
    or ``None`` for plain CG (then ``Z = R`` and each iteration makes 7 passes over ``[n, C]``
    arrays besides the product instead of 10). Stops when every column has
    ``||r|| <= tol * ||b||``. Runs in float32 when ``B`` is float32 (half the bytes moved
    per iteration; relative residuals much below 1e-6 are then out of reach), else float64.

    Returns ``(X, iterations, max relative residual)``.
    """
    dtype = np.float32 if np.asarray(B).dtype == np.float32 else np.float64
    B = np.ascontiguousarray(B, dtype=dtype)
    scale = None if inv_diag is None else np.asarray(inv_diag, dtype=dtype)[:, None]
    X = np.zeros_like(B)
    R = B.copy()
    b_sq = _column_dot(B, B)
    b_sq[b_sq == 0] = 1.0
    threshold = tol * tol * b_sq
    Z = R if scale is None else scale * R
    P = Z.copy()
    rz = _column_dot(R, Z)
    r_sq = b_sq.copy()
    tmp = np.empty_like(B)
    it = 0
    while it < maxiter and np.any(r_sq > threshold):
        AP = matvec(P)
        pap = _column_dot(P, AP)
        step = np.divide(rz, pap, out=np.zeros_like(rz), where=pap > 0)
        np.multiply(P, step, out=tmp)
        X += tmp
        np.multiply(AP, step, out=tmp)
        R -= tmp
        r_sq = _column_dot(R, R)
        if scale is None:
            rz_new = r_sq
        else:
            np.multiply(scale, R, out=Z)
            rz_new = _column_dot(R, Z)
        beta = np.divide(rz_new, rz, out=np.zeros_like(rz), where=rz > 0)
        P *= beta
        P += Z
        rz = rz_new
        it += 1
    return X, it, float(np.sqrt(np.max(r_sq / b_sq)))


def jacobi_scaled(A: sp.csr_matrix) -> tuple[sp.csr_matrix, np.ndarray]:
    """``(M A M, m)`` with ``M = diag(m)``, ``m = diag(A)^-1/2``: symmetric Jacobi scaling.

    CG on ``M A M y = M b`` (then ``x = M y``) makes the same iterates as Jacobi-PCG on
    ``A x = b`` at less work per iteration. The scaled matrix is built in one pass over the
    stored entries (``data * m[row] * m[col]``), not by two sparse products.
    """
    A = sp.csr_matrix(A)
    diag = A.diagonal()
    if np.any(diag <= 0):
        raise ValueError("graph: the system matrix has a non-positive diagonal; every free "
                         "node needs an edge (check for isolated nodes)")
    m = 1.0 / np.sqrt(diag)
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    scaled = sp.csr_matrix((A.data * m[rows] * m[A.indices], A.indices, A.indptr),
                           shape=A.shape)
    return scaled, m


def _jax_batched_pcg(A: sp.csr_matrix, B, inv_diag, tol, maxiter):
    """:func:`batched_pcg` in JAX (``lax.while_loop``, BCOO mat-mat); runs on GPU as is."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import sparse as jsparse

    dtype = jnp.asarray(1.0).dtype  # float64 when x64 is enabled, float32 otherwise
    A_j = jsparse.BCOO.from_scipy_sparse(_padded_nnz(A.astype(dtype)))
    solve = _jax_pcg_kernel()
    X, it, rel = solve(A_j, jnp.asarray(B, dtype), jnp.asarray(inv_diag, dtype), tol, maxiter)
    jax.block_until_ready(X)
    return np.asarray(X, dtype=np.float64), int(it), float(rel)


_JAX_PCG = None


def _padded_nnz(A: sp.csr_matrix) -> sp.coo_matrix:
    """``A`` as COO with its stored entries padded by explicit zeros at (0, 0) up to a size
    bucket (a multiple of 1/8 of the largest power of two <= nnz), so that the jitted solve
    sees the same shapes for every split of a data set (the nnz of ``L_UU`` changes with the
    labelled set; each new nnz was a recompilation: 0.15 s a call on Digit1)."""
    A = A.tocoo()
    step = max(1, 2 ** max(0, int(np.log2(max(A.nnz, 1))) - 3))
    pad = (-A.nnz) % step
    if pad == 0:
        return A
    zeros = np.zeros(pad, dtype=A.row.dtype)
    return sp.coo_matrix((np.concatenate([A.data, np.zeros(pad, A.data.dtype)]),
                          (np.concatenate([A.row, zeros]), np.concatenate([A.col, zeros]))),
                         shape=A.shape)


def jax_pcg(matvec, B, inv_diag, tol, maxiter):
    """:func:`batched_pcg` in JAX, traceable (call it inside ``jit``): ``matvec(P)`` is
    ``A @ P`` for ``P`` of shape ``[n, C]``, ``inv_diag`` the Jacobi preconditioner.

    Stops when every column's preconditioned residual ``sqrt(r.z)`` is at most ``tol`` times
    its start (with ``inv_diag = 1`` that is ``||r|| <= tol ||b||``, the rule of
    :func:`batched_pcg`; otherwise the residual of the Jacobi-scaled system, as ``"cg"``).
    Returns ``(X, iterations, max relative residual)``.
    """
    import jax
    import jax.numpy as jnp

    Z = inv_diag[:, None] * B
    rz0 = jnp.sum(B * Z, axis=0)
    rz0 = jnp.where(rz0 > 0, rz0, 1.0)
    init = (jnp.zeros_like(B), B, Z, jnp.sum(B * Z, axis=0), 0, jnp.ones((), B.dtype))

    def cond(state):
        return (state[4] < maxiter) & (state[5] > tol)

    def body(state):
        X, R, P, rz, it, _ = state
        AP = matvec(P)
        pap = jnp.sum(P * AP, axis=0)
        step = jnp.where(pap > 0, rz / jnp.where(pap > 0, pap, 1.0), 0.0)
        X = X + step * P
        R = R - step * AP
        Z = inv_diag[:, None] * R
        rz_new = jnp.sum(R * Z, axis=0)
        beta = jnp.where(rz > 0, rz_new / jnp.where(rz > 0, rz, 1.0), 0.0)
        rel = jnp.sqrt(jnp.max(jnp.maximum(rz_new, 0.0) / rz0))
        return X, R, Z + beta * P, rz_new, it + 1, rel

    X, _, _, _, it, rel = jax.lax.while_loop(cond, body, init)
    return X, it, rel


def _jax_pcg_kernel():
    global _JAX_PCG
    if _JAX_PCG is None:
        import jax

        @jax.jit
        def solve(A, B, inv_diag, tol, maxiter):
            return jax_pcg(lambda P: A @ P, B, inv_diag, tol, maxiter)

        _JAX_PCG = solve
    return _JAX_PCG


def default_maxiter(n: int) -> int:
    """CG iteration cap for ``n`` unknowns: ``max(1000, 10 sqrt(n) + 100)``."""
    return max(1000, 10 * int(np.sqrt(n)) + 100)


def check_dtype(dtype):
    """``np.float64`` or ``np.float32`` (the precision of the CG iterations), else ValueError."""
    if dtype is None:
        return np.float64
    if np.dtype(dtype) not in (np.float32, np.float64):
        raise ValueError(f"dtype: the CG precision must be float64 or float32, got {dtype!r}")
    return np.dtype(dtype).type


def _solve_spd(A: sp.csr_matrix, B: np.ndarray, method: str, tol: float, maxiter, symmetric,
               dtype=np.float64):
    """Solve ``A X = B`` (A sparse, SPD when symmetric); returns ``(X, iterations, residual)``.

    ``dtype`` is the precision of the ``"cg"`` iterations (the other solvers use float64).
    """
    n = A.shape[0]
    if method == "auto":
        method = "direct" if (n <= _DIRECT_MAX_N or not symmetric) else "cg"
    if method in ("cg", "jax_cg") and not symmetric:
        raise ValueError(f"method: {method!r} needs a symmetric graph; use method='direct'")
    maxiter = int(maxiter) if maxiter is not None else default_maxiter(n)
    if method == "direct":
        X = spla.splu(A.tocsc()).solve(B)
        res = np.linalg.norm(A @ X - B) / max(np.linalg.norm(B), 1e-300)
        return X, 1, float(res), method
    if method == "cg":
        # Jacobi-PCG as plain CG on M A M (residuals are measured in that scaled system)
        A_scaled, m = jacobi_scaled(A)
        A_scaled = A_scaled.astype(dtype, copy=False)
        Y, it, res = batched_pcg(A_scaled.dot, (m[:, None] * B).astype(dtype), tol=tol,
                                 maxiter=maxiter)
        return m[:, None] * Y.astype(np.float64), it, res, method
    if method == "jax_cg":
        # the same Jacobi-scaled system as "cg", scaled on the host in float64: in float32 a
        # node whose Gaussian weights underflow (degree ~ 1e-40) made 1 / diag(A) overflow
        # to inf and the whole solve NaN (GRF accuracy 0.10 at N = 10^6 on the GPU)
        A_scaled, m = jacobi_scaled(A)
        Y, it, res = _jax_batched_pcg(A_scaled, m[:, None] * B, np.ones(n), tol, maxiter)
        return m[:, None] * Y, it, res, method
    raise ValueError(f"method: unknown solver {method!r}; use 'auto', 'direct', 'cg' or 'jax_cg'")

