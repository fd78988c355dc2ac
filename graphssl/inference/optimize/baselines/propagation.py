"""Harmonic function / GRF (Zhu, Ghahramani & Lafferty 2003) and LGC (Zhou et al. 2004)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from graphssl.inference.optimize.baselines.common import (
    SolveInfo,
    _adjacency,
    _is_symmetric,
    _labelled,
    _normalized_adjacency,
    _one_hot,
    _unreached_mask,
    normalize_scores,
)
from graphssl.inference.optimize.baselines.solvers import _solve_spd, check_dtype


def class_mass_normalization(scores, labelled_index, class_prior=None,
                             match: str = "masses") -> np.ndarray:
    """Class mass normalisation (Zhu, Ghahramani & Lafferty 2003, Sec. 4).

    Scales column c of the unlabelled scores by ``q_c / sum_{i in U} f_ic`` so that the
    class masses match the prior ``q`` (``class_prior``; default: the labelled class
    frequencies with add-one smoothing, :func:`labelled_class_proportions`), then
    renormalises each unlabelled row. Labelled rows are unchanged. ``match``: ``"masses"``
    (the paper's rule, :func:`class_mass_scale`) or ``"counts"`` (the factors under which the
    argmax gives each class its share of the nodes, :func:`class_count_scale`).
    """
    if match not in ("masses", "counts"):
        raise ValueError(f"match: use 'masses' or 'counts', got {match!r}")
    scores = np.array(scores, dtype=np.float64)
    unl = np.ones(scores.shape[0], dtype=bool)
    unl[labelled_index] = False
    if class_prior is None:
        class_prior = labelled_class_proportions(scores[labelled_index].sum(axis=0))
    scale = class_mass_scale if match == "masses" else class_count_scale
    scores[unl] = normalize_scores(scores[unl] * scale(scores[unl], class_prior))
    return scores


def labelled_class_proportions(class_counts) -> np.ndarray:
    """Class proportions ``q`` from the labelled counts ``n_c`` (``class_counts [C]``) with
    add-one (Laplace) smoothing, ``q_c = (n_c + 1) / (L + C)``: the posterior mean of the
    proportions under a uniform Dirichlet prior, and the estimate of Zhu's own
    harmonic-function code (``q = sum(fl) + 1``). The default target of class mass
    normalisation. Raw frequencies trust a handful of labels too far: with 10 labels in
    all, a 3 : 7 draw from balanced classes pulls the masses to 30 %. Measured against them
    from the same fits (``benchmarks/bench_cmn_prior.py``, paired, the 15 panel sets without
    a graph, 2026-11-29): harmonic function (10 splits) mean 88.25 -> 88.45 (Digit1-10 78.5
    -> 80.8, USPS-10 81.4 -> 82.3; COIL2-10 69.0 -> 68.3), harmonic mixture (10 splits)
    85.80 -> 86.06 (Digit1-10 70.4 -> 73.4), Boltzmann MRF (splits 0-2) 86.13 -> 86.23
    (Digit1-10 +0.8, USPS-10 and Text-100 +0.4, COIL2-10 -0.1); no other set moves by
    more than 0.4."""
    counts = np.asarray(class_counts, dtype=np.float64)
    if counts.ndim != 1 or np.any(counts < 0):
        raise ValueError("class_counts: expected C non-negative labelled counts")
    return (counts + 1.0) / (counts.sum() + counts.size)


def class_mass_scale(unlabelled_scores, class_prior) -> np.ndarray:
    """The column factors of class mass normalisation, float[C]: ``q_c / sum_i f_ic`` over
    the unlabelled rows ``unlabelled_scores [u, C]`` with ``q`` = ``class_prior``
    normalised (0 for a class of no mass). Kept apart so that a fit can store them and scale
    new points' scores the same way (the harmonic mixture's ``class_scale_``)."""
    scores = np.asarray(unlabelled_scores, dtype=np.float64)
    n_classes = scores.shape[1]
    q = np.asarray(class_prior, dtype=np.float64)
    if q.shape != (n_classes,) or np.any(q < 0) or not q.sum() > 0:
        raise ValueError(f"class_prior: expected {n_classes} non-negative proportions")
    mass = scores.sum(axis=0)
    return np.where(mass > 0, q / q.sum() / np.where(mass > 0, mass, 1.0), 0.0)


def class_count_scale(unlabelled_scores, class_prior, max_sweeps: int = 100) -> np.ndarray:
    """Column factors ``e^{b_c}``, float[C], under which the argmax of the scaled unlabelled
    rows (``unlabelled_scores [u, C]``) gives each class ``round(q_c u)`` nodes, ``q`` =
    ``class_prior`` normalised: class mass normalisation's form (columns scaled, rows
    renormalised) with the factors set by the labels' counts instead of the columns'
    masses. Where the scores sit close to uniform (a sampled MRF below its ordered phase)
    the masses match ``q`` while the argmax puts nearly every node in one class; this rule
    keeps the ranking the scores carry. The biases ``b`` are the dual variables of the
    assignment that maximises ``sum_i log f_{i c(i)}`` under those counts, found by cyclic
    coordinate updates in log space (each ``b_c`` set so that exactly its count of nodes
    prefer ``c`` given the others; exact for two classes, a few sweeps for more; ties may
    leave a count off by the tied nodes). Hand-written: a C-variable convex dual solved on
    the host, no library routine for it."""
    scores = np.asarray(unlabelled_scores, dtype=np.float64)
    u, n_classes = scores.shape
    q = np.asarray(class_prior, dtype=np.float64)
    if q.shape != (n_classes,) or np.any(q < 0) or not q.sum() > 0:
        raise ValueError(f"class_prior: expected {n_classes} non-negative proportions")
    bias = np.zeros(n_classes)
    if u == 0:
        return np.ones(n_classes)
    log_f = np.log(np.maximum(scores, 1e-300))
    counts = _rounded_counts(q / q.sum(), u)
    for _ in range(int(max_sweeps)):
        before = bias.copy()
        for c in range(n_classes):
            others = np.delete(log_f + bias, c, axis=1).max(axis=1)
            margin = log_f[:, c] - others  # node i prefers c iff margin_i + b_c > 0
            if counts[c] == 0:
                bias[c] = -np.max(margin) - 1.0
            elif counts[c] >= u:
                bias[c] = -np.min(margin) + 1.0
            else:
                top = np.sort(margin)[::-1]
                bias[c] = -0.5 * (top[counts[c] - 1] + top[counts[c]])
        bias -= bias.max()
        if np.allclose(bias, before, rtol=0.0, atol=1e-12):
            break
    return np.exp(bias)


def _rounded_counts(q, total: int) -> np.ndarray:
    """``int[C]`` summing to ``total``, ``q total`` rounded by largest remainders."""
    raw = q * total
    counts = np.floor(raw).astype(np.int64)
    short = int(total - counts.sum())
    counts[np.argsort(raw - counts)[::-1][:short]] += 1
    return counts


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
    dtype=np.float64,
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
      tol, maxiter: CG stopping rule on the relative residual of every column of the
        Jacobi-scaled system (1e-5 leaves the argmax unchanged on the benchmarks; on
        usps_full 2 % 1e-3 still agrees with a 1e-10 solve on >= 99.98 % of the nodes in
        ~40 % fewer iterations: benchmarks/bench_baselines.py; tighten it for reference
        comparisons).
      dtype: precision of the ``"cg"`` iterations: ``np.float64`` (default) or
        ``np.float32`` (half the bytes per iteration; for ``tol`` >= ~1e-5).
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
        f_u, it, res, used = _solve_spd(L_uu, rhs, method, tol, maxiter, sym,
                                        check_dtype(dtype))
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
    dtype=np.float64,
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
      dtype: precision of the ``"cg"`` iterations, as in :func:`harmonic_function`.

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
        F, it, res, used = _solve_spd(A, (1.0 - alpha) * Y, method, tol, maxiter, sym,
                                      check_dtype(dtype))
        info = SolveInfo(used, int(it), float(res), bool(res <= max(tol, 1e-6)),
                         int(unreached.sum()))
    if normalize:
        F = normalize_scores(F)
        F[unreached] = 1.0 / n_classes
    return (F, info) if return_info else F

