"""GRF and LGC from features in ONE XLA program (kNN graph + solve on an accelerator).

:func:`harmonic_function` takes a graph; building that graph on the host and shipping a
sparse matrix to the device costs more than the solve on a GPU (usps_full on an H100: gemm
search 0.137 s of a 0.158 s end-to-end run). Here every stage runs on the default JAX device
inside one jitted function, with nothing coming back to the host until the labels
(usps_full, 2 % labels, H100: 12.4 ms from the host array to the labels, of which the
program 5.2 ms and the kNN search 2.4 ms; scikit-learn LabelSpreading 0.19-0.25 s on the
same machine's 16 cores: ``benchmarks/bench_end_to_end.py``):

1. exact kNN in float32 (full-precision products, :func:`graphssl.neighbors.exact_knn_traced`):
   scores ``2 x.y - |y|^2`` for a block of queries, the query itself masked out, the exact
   grouped top-k; blocks of at most 2^26 scores;
2. Gaussian weights ``exp(-d^2 / (2 sigma^2))`` with ``sigma`` = the mean k-th neighbour
   distance / 3 (Bergamim & Breve Eq. 7; ``sigma="kth_over_3"`` of :func:`knn_graph`) or a
   given number;
3. max-symmetrisation without building a sparse matrix: each directed edge i -> j carries
   ``w_ij`` and is applied both ways; an edge whose reverse is also in the kNN lists
   ("mutual") carries ``w_ij / 2`` so that the pair counts once (``W = max(A, A^T)``, as
   ``symmetrize="max"``); ``W X`` is a gather over the ``[n, k]`` lists plus a scatter-add;
4. optionally the normalised weights ``S = D^-1/2 W D^-1/2`` (``normalize_graph``, the
   ``grf_sym`` of the benchmarks);
5. the harmonic function (Zhu et al. 2003), ``L_UU F_U = W_UL F_L`` for all C columns by
   Jacobi-preconditioned CG (:func:`~graphssl.inference.optimize.baselines.solvers.jax_pcg`) on the
   operator restricted to the unlabelled nodes; unlabelled nodes of a component without a
   label keep an all-zero row and get the uniform distribution (counted in the result);
   or LGC (Zhou et al. 2004), ``(I - alpha S) F = (1 - alpha) Y`` by CG
   (:func:`lgc_from_features`).

The graph matches ``knn_graph(X, k, sigma="kth_over_3", symmetrize="max")`` up to float32
rounding of the distances (ties between equidistant neighbours may be broken differently).
That rounding is relative to the centred points' norms: where they dwarf the neighbours'
spacing (an unscaled 0 / 1e4-coded column beside unit-scale features) float32 swaps
neighbours, which this one-program route does not detect; the host route
(:func:`graphssl.graph.knn_graph`, whose searches certify every row and search again in
float64 where needed) does. Standardise such features first.
Memory on the device: X, one block of scores and O(n k C) for the graph and the solve.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from graphssl._warnings import warn_user
from graphssl.inference.optimize.baselines.common import UnreachedNodesWarning
from graphssl.inference.optimize.baselines.solvers import default_maxiter, jax_pcg
from graphssl.neighbors import exact_knn_traced, query_blocks
from graphssl.validation import check_features, check_k, check_labels

__all__ = ["DeviceSolve", "harmonic_function_from_features", "lgc_from_features"]


class DeviceSolve(NamedTuple):
    """Output of :func:`harmonic_function_from_features` (host arrays): ``scores``
    float[n, C] (rows are distributions; labelled rows one-hot), ``labels`` int[n] (argmax),
    ``iterations`` and ``residual`` of the CG solve, ``unreached`` (unlabelled nodes whose
    component has no label), ``sigma`` (the Gaussian width used)."""

    scores: np.ndarray
    labels: np.ndarray
    iterations: int
    residual: float
    unreached: int
    sigma: float


def _symmetric_product(index, weights):
    """``X -> W X`` for ``W = max(A, A^T)``, A the directed kNN weights (see the docstring)."""
    n, k = index.shape
    rows = jnp.arange(n, dtype=index.dtype)
    mutual = jnp.any(index[index] == rows[:, None, None], axis=2)  # i in kNN(j), j = index[i]
    a = jnp.where(mutual, 0.5, 1.0).astype(weights.dtype) * weights

    def product(X):
        out = jnp.einsum("ik,ikc->ic", a, X[index])
        return out.at[index.reshape(-1)].add((a[:, :, None] * X[:, None, :]).reshape(n * k, -1))

    return product


def _grf_solve(weighted, degree, onehot, labelled, tol, maxiter):
    """Harmonic function: ``L_UU F_U = W_UL F_L`` by Jacobi-PCG on the unlabelled rows."""
    free = (~labelled).astype(onehot.dtype)[:, None]

    def matvec(P):  # L_UU P on the unlabelled rows, zero on the labelled ones
        return free * (degree[:, None] * P - weighted(free * P))

    inv_diag = jnp.where(labelled, 1.0, 1.0 / degree)
    F, iterations, residual = jax_pcg(matvec, free * weighted(onehot), inv_diag, tol, maxiter)
    return jnp.where(labelled[:, None], onehot, F), iterations, residual


def _lgc_solve(weighted, onehot, labelled, alpha, tol, maxiter):
    """LGC (Zhou et al. 2004): ``(I - alpha S) F = (1 - alpha) Y`` by CG (``S_ii = 0``, so the
    Jacobi preconditioner is the identity); labelled rows are not clamped."""
    Y = onehot * labelled[:, None]
    ones = jnp.ones(Y.shape[0], Y.dtype)
    return jax_pcg(lambda P: P - alpha * weighted(P), (1.0 - alpha) * Y, ones, tol, maxiter)


@partial(jax.jit, static_argnames=("k", "n_classes", "n_blocks", "rows", "normalize_graph",
                                   "model"))
def _pipeline(X, labels, sigma, tol, maxiter, alpha, *, k, n_classes, n_blocks, rows,
              normalize_graph, model):
    index, sq = exact_knn_traced(X, k, n_blocks, rows)
    sigma = jnp.where(sigma > 0, sigma, jnp.mean(jnp.sqrt(sq[:, -1])) / 3.0)
    weights = jnp.exp(-sq / (2.0 * sigma * sigma))
    product = _symmetric_product(index, weights)
    ones = jnp.ones((X.shape[0], 1), X.dtype)
    if normalize_graph:
        inv_sqrt = 1.0 / jnp.sqrt(product(ones)[:, 0])
        weighted = lambda F: inv_sqrt[:, None] * product(inv_sqrt[:, None] * F)  # noqa: E731
    else:
        weighted = product
    labelled = labels >= 0
    onehot = (labels[:, None] == jnp.arange(n_classes)[None, :]).astype(X.dtype)
    if model == "grf":
        F, iterations, residual = _grf_solve(weighted, weighted(ones)[:, 0], onehot, labelled,
                                             tol, maxiter)
    else:
        F, iterations, residual = _lgc_solve(weighted, onehot, labelled, alpha, tol, maxiter)
    F = jnp.maximum(F, 0.0)
    total = jnp.sum(F, axis=1, keepdims=True)
    unreached = total[:, 0] <= 0
    F = jnp.where(unreached[:, None], 1.0 / n_classes,
                  F / jnp.where(unreached[:, None], 1.0, total))
    summary = jnp.stack([iterations.astype(F.dtype), residual, jnp.sum(unreached), sigma,
                         jnp.all(jnp.isfinite(X)).astype(F.dtype)])
    return F, jnp.argmax(F, axis=1), summary


def _run(name, X, labels, *, k, sigma, n_classes, normalize_graph, tol, maxiter, model,
         alpha=0.0) -> DeviceSolve:
    """Checks on the host, the program on the device, one fetch, errors and warnings."""
    X = np.asarray(X)
    if X.ndim != 2 or not np.issubdtype(X.dtype, np.number) or X.size == 0:
        check_features(X)  # raises the library's message for the shape / dtype at fault
    n = X.shape[0]
    k = check_k(k, n)
    labels = check_labels(labels, n, n_classes=n_classes)
    n_classes = int(labels.max()) + 1 if n_classes is None else int(n_classes)
    if isinstance(sigma, str):
        if sigma != "kth_over_3":
            raise ValueError(f"sigma: use a positive number or 'kth_over_3', got {sigma!r}")
        sigma_value = 0.0
    elif not float(sigma) > 0:
        raise ValueError(f"sigma: the Gaussian width must be positive, got {sigma}")
    else:
        sigma_value = float(sigma)
    if not 0 < tol < 1:
        raise ValueError(f"tol: a relative residual in (0, 1), got {tol}")
    maxiter = default_maxiter(n) if maxiter is None else int(maxiter)
    n_blocks, rows = query_blocks(n)
    F, pred, summary = jax.device_get(_pipeline(
        jnp.asarray(X, jnp.float32), jnp.asarray(labels, jnp.int32), jnp.float32(sigma_value),
        jnp.float32(tol), maxiter, jnp.float32(alpha), k=k, n_classes=n_classes,
        n_blocks=n_blocks, rows=rows, normalize_graph=bool(normalize_graph), model=model))
    it, res, unreached, used_sigma, finite = (float(v) for v in summary)
    if not finite:  # checked on the device (float32 copy): name the rows on the host
        check_features(X)
        raise ValueError("X: features overflow float32; rescale them")
    if used_sigma <= 0 or not np.isfinite(used_sigma):
        raise ValueError("X: every point's k-th neighbour is at distance 0 (duplicate "
                         "points); remove duplicates or increase k")
    if unreached:
        warn_user(f"{name}: {int(unreached)} unlabelled nodes lie in components without a "
                      "label; they get the uniform distribution (label a point in each "
                      "component or increase k)", UnreachedNodesWarning)
    return DeviceSolve(np.asarray(F, np.float64), np.asarray(pred), int(it), res,
                       int(unreached), used_sigma)


def harmonic_function_from_features(X, labels, *, k: int = 10, sigma="kth_over_3",
                                    n_classes: int | None = None,
                                    normalize_graph: bool = True, tol: float = 1e-3,
                                    maxiter: int | None = None) -> DeviceSolve:
    """kNN graph + harmonic function in one program on the default JAX device (float32).

    Args:
      X: features ``[n, d]`` (finite).
      labels: ``int[n]``, ``0..C-1`` labelled, ``-1`` unlabelled.
      k: neighbours per point (``1 <= k < n``).
      sigma: Gaussian width, a positive number or ``"kth_over_3"`` (Bergamim & Breve Eq. 7).
      n_classes: C (default ``1 + max(labels)``).
      normalize_graph: solve on ``S = D^-1/2 W D^-1/2`` (``harmonic_function``'s option).
      tol, maxiter: CG stopping rule (relative residual of the Jacobi-scaled system, every
        column; the default 1e-3 agrees with a 1e-10 solve on >= 99.98 % of usps_full's
        labels, see ``benchmarks/bench_baselines.py``).

    Returns a :class:`DeviceSolve`. Same outputs as ``harmonic_function(knn_graph(X, k,
    sigma="kth_over_3"), labels, normalize_graph=...)`` up to float32 rounding.
    """
    return _run("harmonic_function_from_features", X, labels, k=k, sigma=sigma,
                n_classes=n_classes, normalize_graph=normalize_graph, tol=tol,
                maxiter=maxiter, model="grf")


def lgc_from_features(X, labels, *, k: int = 10, sigma="kth_over_3", alpha: float = 0.99,
                      n_classes: int | None = None, tol: float = 1e-3,
                      maxiter: int | None = None) -> DeviceSolve:
    """kNN graph + LGC (Zhou et al. 2004) in one program on the default JAX device (float32).

    ``F* = (1 - alpha) (I - alpha S)^{-1} Y`` with ``S = D^-1/2 W D^-1/2`` on the graph of
    :func:`harmonic_function_from_features` (same arguments; ``alpha`` in (0, 1)). Rows are
    normalised to class distributions; labelled rows are not clamped. Same outputs as
    ``lgc(knn_graph(X, k, sigma="kth_over_3"), labels, alpha=alpha)`` up to float32 rounding
    (at small alpha a node far from every label has a row of tiny values whose ratios float32
    keeps only roughly: at alpha = 0.5, up to 1e-3 off the float64 solve; 1e-4 at 0.9).
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha: must lie in (0, 1), got {alpha}")
    return _run("lgc_from_features", X, labels, k=k, sigma=sigma, n_classes=n_classes,
                normalize_graph=True, tol=tol, maxiter=maxiter, model="lgc", alpha=alpha)
