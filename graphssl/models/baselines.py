"""Closed-form graph baselines: harmonic function (GRF), LGC, graph Parzen window, graph kNN.

These are the yardsticks every probabilistic model is compared with. Each function takes a
graph (a :class:`graphssl.graph.Graph` or an ``n x n`` scipy.sparse weight matrix ``W``) and
labels (``int[n]``, ``-1`` for unlabelled; or ``labels`` plus an ``observed`` mask) and
returns per-node class scores ``float64[n, C]`` (rows are probability vectors unless stated).

Unlabelled nodes whose connected component holds no labelled node cannot be reached by any
of these methods. They get a :class:`UnreachedNodesWarning` that names how many nodes and
components are affected, and the **uniform** class distribution ``1 / C`` as their output.

Paper symbols -> arguments:

* Zhu, Ghahramani & Lafferty (2003), harmonic function ``f_U = -L_UU^{-1} L_UL f_L``
  (in Zhu & Lafferty 2005, Sec. 2, with ``Delta = L = D - W``): ``f_L`` = one-hot ``labels``;
  class mass normalisation (CMN): ``q`` = ``class_prior``.
* Zhou et al. (2004), LGC ``F* = (1 - alpha) (I - alpha S)^{-1} Y`` with
  ``S = D^-1/2 W D^-1/2`` and the iteration ``F <- alpha S F + (1 - alpha) Y``
  (Bergamim & Breve Alg. 2.2, Eq. 3-4): ``alpha`` = ``alpha``, ``Y`` (their theta) = one-hot.
* Walder, Sec. 2.4 and Sec. 5: graph Parzen window with heat kernel
  ``K_tau = exp(-tau L / 2)`` (``tau``), diffusion p.m.f.s ``D_tau`` (normalised columns of
  ``K_tau``) and class proportions ``eta`` = ``class_prior``.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.sparse import csgraph

__all__ = [
    "UnreachedNodesWarning",
    "SolveInfo",
    "harmonic_function",
    "class_mass_normalization",
    "lgc",
    "parzen_window",
    "knn_graph_classifier",
    "normalize_scores",
    "batched_pcg",
]

_DIRECT_MAX_N = 100  # 'auto': sparse LU up to this many unknowns (or a directed graph), else PCG


class UnreachedNodesWarning(UserWarning):
    """Some unlabelled nodes lie in connected components without any labelled node."""


class SolveInfo(NamedTuple):
    """Convergence record of a solve (DESIGN.md optimiser protocol)."""

    method: str
    iterations: int
    residual: float
    converged: bool
    n_unreached: int


# ----------------------------------------------------------------------------- inputs


def _adjacency(graph) -> sp.csr_matrix:
    """W as float64 CSR from a Graph or a scipy.sparse / dense square matrix."""
    if hasattr(graph, "to_scipy"):
        W = graph.to_scipy()
    elif sp.issparse(graph) or isinstance(graph, np.ndarray):
        W = sp.csr_matrix(graph)
    else:
        raise ValueError(
            f"graph: expected a graphssl.graph.Graph or an n x n scipy.sparse matrix, "
            f"got {type(graph).__name__}"
        )
    if W.ndim != 2 or W.shape[0] != W.shape[1]:
        raise ValueError(f"graph: the weight matrix must be square, got shape {W.shape}")
    if W.shape[0] == 0:
        raise ValueError("graph: the graph is empty (0 nodes); build it from at least 2 points")
    W = W.astype(np.float64).tocsr()
    if W.nnz and (not np.all(np.isfinite(W.data)) or W.data.min() < 0):
        raise ValueError("graph: weights must be finite and non-negative")
    if W.diagonal().any():
        W = W.tolil()
        W.setdiag(0)
        W = W.tocsr()
    W.eliminate_zeros()
    return W


def _labelled(labels, n: int, observed=None, n_classes=None):
    """Indices and classes of the labelled nodes, and the number of classes C."""
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.shape[0] != n:
        raise ValueError(
            f"labels: expected shape ({n},) to match the graph's n_nodes, got {labels.shape}"
        )
    if not np.issubdtype(labels.dtype, np.integer):
        if not np.all(np.equal(np.mod(labels, 1), 0)):
            raise ValueError("labels: must be integers 0..C-1, with -1 for unlabelled")
        labels = labels.astype(np.int64)
    if observed is None:
        observed = labels >= 0
    else:
        observed = np.asarray(observed, dtype=bool)
        if observed.shape != (n,):
            raise ValueError(f"observed: expected a bool mask of shape ({n},)")
    index = np.flatnonzero(observed)
    classes = labels[index].astype(np.int64)
    if index.size == 0:
        raise ValueError("labels: no labelled node (all -1); label at least one node per class")
    if classes.min() < 0:
        raise ValueError("labels: an observed node has a negative label; use 0..C-1")
    if n_classes is None:
        n_classes = int(classes.max()) + 1
    elif classes.max() >= n_classes:
        raise ValueError(f"labels: found label {classes.max()} but n_classes={n_classes}")
    if n_classes < 2:
        raise ValueError("n_classes: need at least 2 classes; label a node of a second class")
    return index, classes, int(n_classes)


def _one_hot(classes: np.ndarray, n_classes: int) -> np.ndarray:
    out = np.zeros((classes.size, n_classes))
    out[np.arange(classes.size), classes] = 1.0
    return out


def _unreached_mask(W: sp.csr_matrix, labelled_index: np.ndarray, method: str) -> np.ndarray:
    """Nodes in components without a labelled node; warns once naming how many."""
    n_comp, comp = csgraph.connected_components(W, directed=True, connection="weak")
    if n_comp == 1:
        return np.zeros(W.shape[0], dtype=bool)
    reached = np.zeros(n_comp, dtype=bool)
    reached[comp[labelled_index]] = True
    mask = ~reached[comp]
    if mask.any():
        warnings.warn(
            f"{method}: {int(mask.sum())} of {W.shape[0]} nodes lie in "
            f"{int((~reached).sum())} connected component(s) with no labelled node; no label "
            "can reach them, so they get the uniform class distribution 1/C. Label a node in "
            "each component or build a more connected graph (larger k).",
            UnreachedNodesWarning,
            stacklevel=3,
        )
    return mask


def normalize_scores(scores) -> np.ndarray:
    """Clip to >= 0 and scale rows to sum 1; all-zero rows become uniform ``1 / C``."""
    scores = np.clip(np.asarray(scores, dtype=np.float64), 0.0, None)
    total = scores.sum(axis=1, keepdims=True)
    uniform = np.full_like(scores, 1.0 / scores.shape[1])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, scores / np.where(total > 0, total, 1.0), uniform)


# ----------------------------------------------------------------------------- solvers


def batched_pcg(matvec, B, inv_diag, *, tol=1e-8, maxiter=1000):
    """Preconditioned conjugate gradients on ``A X = B`` for all columns at once.

    Each column runs its own CG recursion (own step sizes), but the matrix products are
    shared: one ``A @ P`` with ``P`` of shape ``[n, C]`` per iteration. ``A`` must be
    symmetric positive definite; ``inv_diag`` is the Jacobi preconditioner ``1 / diag(A)``.
    Stops when every column has ``||r|| <= tol * ||b||``.

    Returns ``(X, iterations, max relative residual)``.
    """
    B = np.ascontiguousarray(B, dtype=np.float64)
    inv_diag = np.asarray(inv_diag, dtype=np.float64)[:, None]
    X = np.zeros_like(B)
    R = B.copy()
    b_sq = np.einsum("ij,ij->j", B, B)
    b_sq[b_sq == 0] = 1.0
    threshold = tol * tol * b_sq
    Z = inv_diag * R
    P = Z.copy()
    rz = np.einsum("ij,ij->j", R, Z)
    r_sq = b_sq.copy()
    tmp = np.empty_like(B)
    it = 0
    while it < maxiter and np.any(r_sq > threshold):
        AP = matvec(P)
        pap = np.einsum("ij,ij->j", P, AP)
        step = np.divide(rz, pap, out=np.zeros_like(rz), where=pap > 0)
        np.multiply(P, step, out=tmp)
        X += tmp
        np.multiply(AP, step, out=tmp)
        R -= tmp
        np.multiply(inv_diag, R, out=Z)
        rz_new = np.einsum("ij,ij->j", R, Z)
        beta = np.divide(rz_new, rz, out=np.zeros_like(rz), where=rz > 0)
        P *= beta
        P += Z
        rz = rz_new
        r_sq = np.einsum("ij,ij->j", R, R)
        it += 1
    return X, it, float(np.sqrt(np.max(r_sq / b_sq)))


def _jax_batched_pcg(A: sp.csr_matrix, B, inv_diag, tol, maxiter):
    """:func:`batched_pcg` in JAX (``lax.while_loop``, BCOO mat-mat); runs on GPU as is."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import sparse as jsparse

    dtype = jnp.asarray(1.0).dtype  # float64 when x64 is enabled, float32 otherwise
    A_j = jsparse.BCOO.from_scipy_sparse(A.astype(dtype))
    solve = _jax_pcg_kernel()
    X, it, rel = solve(A_j, jnp.asarray(B, dtype), jnp.asarray(inv_diag, dtype), tol, maxiter)
    jax.block_until_ready(X)
    return np.asarray(X, dtype=np.float64), int(it), float(rel)


_JAX_PCG = None


def _jax_pcg_kernel():
    global _JAX_PCG
    if _JAX_PCG is None:
        import jax
        import jax.numpy as jnp

        @jax.jit
        def solve(A, B, inv_diag, tol, maxiter):
            b_norm = jnp.linalg.norm(B, axis=0)
            b_norm = jnp.where(b_norm > 0, b_norm, 1.0)
            Z = inv_diag[:, None] * B
            init = (jnp.zeros_like(B), B, Z, jnp.sum(B * Z, axis=0), 0, 1.0)

            def cond(state):
                return (state[4] < maxiter) & (state[5] > tol)

            def body(state):
                X, R, P, rz, it, _ = state
                AP = A @ P
                pap = jnp.sum(P * AP, axis=0)
                step = jnp.where(pap > 0, rz / jnp.where(pap > 0, pap, 1.0), 0.0)
                X = X + step * P
                R = R - step * AP
                Z = inv_diag[:, None] * R
                rz_new = jnp.sum(R * Z, axis=0)
                beta = jnp.where(rz > 0, rz_new / jnp.where(rz > 0, rz, 1.0), 0.0)
                rel = jnp.max(jnp.linalg.norm(R, axis=0) / b_norm)
                return X, R, Z + beta * P, rz_new, it + 1, rel

            X, _, _, _, it, rel = jax.lax.while_loop(cond, body, init)
            return X, it, rel

        _JAX_PCG = solve
    return _JAX_PCG


def _solve_spd(A: sp.csr_matrix, B: np.ndarray, method: str, tol: float, maxiter, symmetric):
    """Solve ``A X = B`` (A sparse, SPD when symmetric); returns ``(X, iterations, residual)``."""
    n = A.shape[0]
    if method == "auto":
        method = "direct" if (n <= _DIRECT_MAX_N or not symmetric) else "cg"
    if method in ("cg", "jax_cg") and not symmetric:
        raise ValueError(f"method: {method!r} needs a symmetric graph; use method='direct'")
    maxiter = int(maxiter) if maxiter is not None else max(1000, 10 * int(np.sqrt(n)) + 100)
    if method == "direct":
        X = spla.splu(A.tocsc()).solve(B)
        res = np.linalg.norm(A @ X - B) / max(np.linalg.norm(B), 1e-300)
        return X, 1, float(res), method
    inv_diag = 1.0 / A.diagonal()
    if method == "cg":
        X, it, res = batched_pcg(lambda P: A @ P, B, inv_diag, tol=tol, maxiter=maxiter)
        return X, it, res, method
    if method == "jax_cg":
        X, it, res = _jax_batched_pcg(A, B, inv_diag, tol, maxiter)
        return X, it, res, method
    raise ValueError(f"method: unknown solver {method!r}; use 'auto', 'direct', 'cg' or 'jax_cg'")


def _is_symmetric(W: sp.csr_matrix) -> bool:
    diff = abs(W - W.T)
    return diff.nnz == 0 or diff.max() <= 1e-10 * max(abs(W).max(), 1e-300)


# ----------------------------------------------------------------------------- GRF


def class_mass_normalization(scores, labelled_index, class_prior=None) -> np.ndarray:
    """Class mass normalisation (Zhu, Ghahramani & Lafferty 2003, Sec. 4).

    Scales column c of the unlabelled scores by ``q_c / sum_{i in U} f_ic`` so that the
    class masses match the prior ``q`` (``class_prior``; default: the labelled class
    frequencies), then renormalises each unlabelled row. Labelled rows are unchanged.
    """
    scores = np.array(scores, dtype=np.float64)
    n, n_classes = scores.shape
    unl = np.ones(n, dtype=bool)
    unl[labelled_index] = False
    if class_prior is None:
        counts = scores[labelled_index].sum(axis=0)
        class_prior = counts / counts.sum()
    q = np.asarray(class_prior, dtype=np.float64)
    if q.shape != (n_classes,) or np.any(q < 0) or not q.sum() > 0:
        raise ValueError(f"class_prior: expected {n_classes} non-negative proportions")
    mass = scores[unl].sum(axis=0)
    scale = np.where(mass > 0, q / q.sum() / np.where(mass > 0, mass, 1.0), 0.0)
    scores[unl] = normalize_scores(scores[unl] * scale)
    return scores


def harmonic_function(
    graph,
    labels,
    *,
    observed=None,
    n_classes: int | None = None,
    method: str = "auto",
    class_mass_normalize: bool = False,
    class_prior=None,
    normalize_graph: bool = False,
    tol: float = 1e-5,
    maxiter: int | None = None,
    return_info: bool = False,
):
    """Harmonic function / Gaussian random field (Zhu, Ghahramani & Lafferty 2003).

    Solves ``L_UU f_U = -L_UL f_L = W_UL f_L`` with ``L = D - W`` for the class columns of
    the one-hot ``f_L`` at once (Zhu & Lafferty 2005 Sec. 2, "harmonic"); since the rows of
    ``f`` sum to one (``L_UU 1 = W_UL 1``), C - 1 columns are solved and the last is the
    complement. Each unlabelled value is the weighted mean of its neighbours,
    ``f_i = sum_j W_ij f_j / d_i``.

    Args:
      graph: Graph or scipy.sparse ``n x n`` weights ``W`` (non-negative, no self loops).
      labels: ``int[n]``, ``0..C-1`` for labelled nodes, ``-1`` (or anything with
        ``observed=False``) for unlabelled.
      observed: optional bool mask of clamped nodes (model convention); default ``labels >= 0``.
      n_classes: C; default ``max(label) + 1``.
      method: ``"direct"`` (sparse LU, scipy ``splu``), ``"cg"`` (Jacobi-preconditioned CG
        over all class columns at once, NumPy/SciPy), ``"jax_cg"`` (the same in JAX, runs on
        an accelerator) or ``"auto"`` (CG; direct for <= 100 unknowns or a directed graph:
        on kNN graphs LU fill-in makes it 15x slower than CG at n = 9298). Never a dense
        inverse.
      class_mass_normalize: apply :func:`class_mass_normalization` with ``class_prior``.
      normalize_graph: solve on ``S = D^-1/2 W D^-1/2`` instead of ``W`` (the variant that
        Bergamim & Breve's code runs; often more accurate on kNN graphs with a global sigma).
      tol, maxiter: CG stopping rule on the relative residual of every column (1e-5 leaves
        the argmax unchanged on the benchmarks; tighten it for reference comparisons).
      return_info: also return a :class:`SolveInfo`.

    Returns:
      ``float64[n, C]`` class distributions (labelled rows one-hot; unreached rows uniform),
      and the ``SolveInfo`` when ``return_info``.
    """
    W = _adjacency(graph)
    if normalize_graph:
        W = _normalized_adjacency(W)
    n = W.shape[0]
    index, classes, n_classes = _labelled(labels, n, observed, n_classes)
    unreached = _unreached_mask(W, index, "harmonic_function")
    free = np.ones(n, dtype=bool)
    free[index] = False
    free &= ~unreached
    scores = np.zeros((n, n_classes))
    scores[index] = _one_hot(classes, n_classes)
    scores[unreached] = 1.0 / n_classes
    it, res, used = 0, 0.0, method
    if free.any():
        degrees = np.asarray(W.sum(axis=1)).ravel()
        W_free = W[free]
        L_uu = (sp.diags(degrees[free]) - W_free[:, free]).tocsr()
        # rows of f sum to 1 (L_UU 1 = W_UL 1), so C - 1 columns suffice
        rhs = W_free[:, index] @ scores[index, :-1]
        sym = _is_symmetric(W)
        f_u, it, res, used = _solve_spd(L_uu, rhs, method, tol, maxiter, sym)
        f_u = np.column_stack([f_u, 1.0 - f_u.sum(axis=1)])
        scores[free] = normalize_scores(f_u)
    if class_mass_normalize:
        reached = np.flatnonzero(~unreached)
        sub = class_mass_normalization(
            scores[reached], np.searchsorted(reached, index), class_prior
        )
        scores[reached] = sub
    info = SolveInfo(used, int(it), float(res), bool(res <= max(tol, 1e-6)), int(unreached.sum()))
    return (scores, info) if return_info else scores


# ----------------------------------------------------------------------------- LGC


def _normalized_adjacency(W: sp.csr_matrix) -> sp.csr_matrix:
    """``S = D^-1/2 W D^-1/2`` (isolated nodes: zero rows)."""
    degrees = np.asarray(W.sum(axis=1)).ravel()
    with np.errstate(divide="ignore"):
        inv_sqrt = np.where(degrees > 0, 1.0 / np.sqrt(np.where(degrees > 0, degrees, 1.0)), 0.0)
    scale = sp.diags(inv_sqrt)
    return (scale @ W @ scale).tocsr()


def lgc(
    graph,
    labels,
    *,
    alpha: float = 0.99,
    observed=None,
    n_classes: int | None = None,
    method: str = "auto",
    tol: float = 1e-5,
    maxiter: int | None = None,
    normalize: bool = True,
    return_info: bool = False,
):
    """Learning with local and global consistency (Zhou et al. 2004).

    Closed form ``F* = (1 - alpha) (I - alpha S)^{-1} Y`` with ``S = D^-1/2 W D^-1/2``, the
    fixed point of the iteration ``F <- alpha S F + (1 - alpha) Y`` (Bergamim & Breve
    Alg. 2.2 with the normalised W). ``I - alpha S`` is symmetric positive definite with
    eigenvalues in ``[1 - alpha, 1 + alpha]``, so CG converges in O(sqrt(1/(1-alpha))) steps.

    Args:
      graph, labels, observed, n_classes: as in :func:`harmonic_function`.
      alpha: ``0 < alpha < 1`` (Zhou et al. use 0.99).
      method: ``"direct"`` (sparse LU), ``"cg"``, ``"jax_cg"``, ``"iterate"`` (the
        propagation above until ``max |F_new - F| < tol``) or ``"auto"`` (as in
        :func:`harmonic_function`).
      normalize: return rows normalised to class distributions (all-zero rows -> uniform);
        ``False`` returns the raw ``F*`` of the paper (unreached rows stay 0 there).

    Returns:
      ``float64[n, C]`` (+ ``SolveInfo``). Labelled rows are not clamped (LGC may relabel).
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha: must lie in (0, 1), got {alpha}")
    W = _adjacency(graph)
    n = W.shape[0]
    index, classes, n_classes = _labelled(labels, n, observed, n_classes)
    unreached = _unreached_mask(W, index, "lgc")
    Y = np.zeros((n, n_classes))
    Y[index] = _one_hot(classes, n_classes)
    S = _normalized_adjacency(W)
    if method == "iterate":
        maxiter = 10_000 if maxiter is None else int(maxiter)
        F, it, change = Y.copy(), 0, np.inf
        while it < maxiter and change >= tol:
            F_new = alpha * (S @ F) + (1.0 - alpha) * Y
            change = float(np.abs(F_new - F).max())
            F, it = F_new, it + 1
        info = SolveInfo("iterate", it, change, change < tol, int(unreached.sum()))
    else:
        A = (sp.identity(n, format="csr") - alpha * S).tocsr()
        sym = _is_symmetric(W)
        F, it, res, used = _solve_spd(A, (1.0 - alpha) * Y, method, tol, maxiter, sym)
        info = SolveInfo(used, int(it), float(res), bool(res <= max(tol, 1e-6)),
                         int(unreached.sum()))
    if normalize:
        F = normalize_scores(F)
        F[unreached] = 1.0 / n_classes
    return (F, info) if return_info else F


# ----------------------------------------------------------------------------- Parzen


def _class_prior(class_prior, classes: np.ndarray, n_classes: int) -> np.ndarray:
    if class_prior is None:
        return np.full(n_classes, 1.0 / n_classes)
    if isinstance(class_prior, str) and class_prior == "labelled":
        counts = np.bincount(classes, minlength=n_classes).astype(np.float64)
        return counts / counts.sum()
    eta = np.asarray(class_prior, dtype=np.float64)
    if eta.shape != (n_classes,) or np.any(eta < 0) or not eta.sum() > 0:
        raise ValueError(
            f"class_prior: expected None, 'labelled' or {n_classes} non-negative proportions"
        )
    return eta / eta.sum()


def _heat_kernel_columns(W, index, tau, kind, method):
    """``K_tau[:, index]`` and the column sums ``(1^T K_tau)[index]`` (K is symmetric)."""
    from graphssl.graph import Graph, heat_kernel, laplacian

    n = W.shape[0]
    if method == "auto":
        method = "dense" if n <= 500 else "expm_multiply"
    graph = Graph.from_scipy(W)
    if method == "dense":
        K = heat_kernel(graph, tau, kind=kind)
        return K[:, index], K.sum(axis=0)[index]
    if method == "expm_multiply":
        L = laplacian(graph, kind=kind).tocsc()
        basis = np.zeros((n, index.size + 1))
        basis[index, np.arange(index.size)] = 1.0
        basis[:, -1] = 1.0
        out = spla.expm_multiply(-0.5 * tau * L, basis)
        return out[:, :-1], out[index, -1]
    raise ValueError(f"method: unknown {method!r}; use 'auto', 'dense' or 'expm_multiply'")


def parzen_window(
    graph,
    labels,
    *,
    tau: float = 5.0,
    observed=None,
    n_classes: int | None = None,
    class_prior=None,
    laplacian_kind: str = "symmetric",
    method: str = "auto",
):
    """Graph Parzen window classifier (Walder, Sec. 5 baseline; diffusions of Sec. 2.4).

    The heat kernel ``K_tau = exp(-tau L / 2)`` (``L`` the normalised Laplacian) gives one
    diffusion p.m.f. per vertex: ``p(xi = i | beta = l) = (D_tau)_{i,l} = K_il / sum_i' K_i'l``
    (the *normalised columns* of K_tau, as the text of Sec. 2.4 says; the printed
    ``diag(K 1)^-1 K`` normalises rows, which for a symmetric K differs only in which index
    carries the normaliser). Each class-conditional density is the mean of the p.m.f.s
    centred on that class's labelled vertices, re-weighted by the class proportions ``eta``:

        p(y_i = c | xi = i)  propto  eta_c / |L_c| * sum_{l in L_c} (D_tau)_{i,l}.

    Args:
      graph, labels, observed, n_classes: as in :func:`harmonic_function`.
      tau: diffusion time (Walder: 5 for 10 labels).
      class_prior: ``eta``: None (uniform, as Walder for balanced sets), ``"labelled"``
        (labelled frequencies) or an array of C proportions.
      laplacian_kind: passed to :func:`graphssl.graph.laplacian` (Walder: ``"symmetric"``).
      method: ``"dense"`` (:func:`graphssl.graph.heat_kernel`, O(n^2) memory), ``"expm_multiply"``
        (only the labelled columns, ``scipy.sparse.linalg.expm_multiply``; O(n l) memory) or
        ``"auto"`` (dense up to 500 nodes; expm_multiply is ~100x faster at n = 1500 and
        agrees to ~1e-10).

    Returns:
      ``float64[n, C]`` posterior class probabilities (labelled rows not clamped).
    """
    if not tau >= 0:
        raise ValueError(f"tau: the diffusion time must be >= 0, got {tau}")
    W = _adjacency(graph)
    n = W.shape[0]
    index, classes, n_classes = _labelled(labels, n, observed, n_classes)
    unreached = _unreached_mask(W, index, "parzen_window")
    eta = _class_prior(class_prior, classes, n_classes)
    K_cols, col_sums = _heat_kernel_columns(W, index, float(tau), laplacian_kind, method)
    pmf = np.clip(K_cols, 0.0, None) / np.where(col_sums > 0, col_sums, 1.0)
    counts = np.bincount(classes, minlength=n_classes).astype(np.float64)
    density = pmf @ _one_hot(classes, n_classes) / np.where(counts > 0, counts, 1.0)
    scores = normalize_scores(density * eta)
    scores[unreached] = 1.0 / n_classes
    return scores


# ----------------------------------------------------------------------------- kNN


def _edge_lengths(W: sp.csr_matrix, edge_length: str) -> sp.csr_matrix:
    lengths = W.copy()
    if edge_length == "inverse_weight":
        lengths.data = 1.0 / lengths.data
    elif edge_length == "hop":
        lengths.data = np.ones_like(lengths.data)
    else:
        raise ValueError(f"edge_length: use 'inverse_weight' or 'hop', got {edge_length!r}")
    return lengths


def knn_graph_classifier(
    graph,
    labels,
    *,
    k: int = 3,
    observed=None,
    n_classes: int | None = None,
    edge_length: str = "inverse_weight",
    block_size: int = 256,
):
    """k-nearest-labelled-neighbour vote with shortest-path distances on the graph.

    Each node takes the labels of the ``k`` labelled nodes closest to it along the graph
    (Dijkstra; edge length ``1 / w_ij`` -- a resistance -- or 1 per hop) and returns the vote
    fractions. With the kNN graph this is the graph analogue of the 3-NN baseline of
    Blum & Chawla (Table 1). Labelled nodes count themselves (distance 0). Memory is
    O(block_size x n): the labelled sources are processed in blocks, keeping a running top-k.

    Returns:
      ``float64[n, C]`` vote fractions (ties: equal fractions); unreached rows uniform.
    """
    if isinstance(k, bool) or not float(k).is_integer() or int(k) < 1:
        raise ValueError(f"k: the number of labelled neighbours must be a positive int, got {k}")
    k = int(k)
    W = _adjacency(graph)
    n = W.shape[0]
    index, classes, n_classes = _labelled(labels, n, observed, n_classes)
    unreached = _unreached_mask(W, index, "knn_graph_classifier")
    lengths = _edge_lengths(W, edge_length)
    best_d = np.full((0, n), np.inf)
    best_c = np.zeros((0, n), dtype=np.int64)
    for start in range(0, index.size, block_size):
        sources = index[start : start + block_size]
        dist = csgraph.dijkstra(lengths, directed=False, indices=sources)
        cand_d = np.vstack([best_d, dist])
        cand_c = np.vstack([best_c, np.repeat(classes[start : start + block_size, None], n, 1)])
        keep = min(k, cand_d.shape[0])
        order = np.argpartition(cand_d, keep - 1, axis=0)[:keep]
        best_d = np.take_along_axis(cand_d, order, axis=0)
        best_c = np.take_along_axis(cand_c, order, axis=0)
    votes = np.zeros((n, n_classes))
    finite = np.isfinite(best_d)
    for row in range(best_d.shape[0]):
        hit = finite[row]
        np.add.at(votes, (np.flatnonzero(hit), best_c[row, hit]), 1.0)
    scores = normalize_scores(votes)
    scores[unreached] = 1.0 / n_classes
    return scores
