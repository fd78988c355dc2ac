"""Zhu & Lafferty's (2005) Sec. 4 baselines and decision rules: 'sample' (the harmonic function
on a sample, extended by Delalleau et al.'s formula), median(f) thresholding and class mass
normalisation."""

from __future__ import annotations

import numpy as np

from graphssl.inference.optimize.baselines.propagation import class_mass_normalization
from graphssl.validation import check_count, check_label_codes, check_real

__all__ = ["sample_baseline", "median_threshold", "class_mass_normalize"]


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
