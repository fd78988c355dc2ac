"""Input checks shared by every builder, model and estimator.

Each check raises ``ValueError`` naming the offending argument and saying how to fix it.
"""

from __future__ import annotations

import numpy as np

__all__ = ["check_features", "check_labels", "check_k", "check_same_length"]


def check_features(X, *, name: str = "X") -> np.ndarray:
    """A finite, non-empty 2-D float array (sparse input is rejected with a hint)."""
    if hasattr(X, "toarray") and not isinstance(X, np.ndarray):
        raise ValueError(f"{name}: sparse input; pass X.toarray() or use a sparse-aware builder")
    X = np.asarray(X)
    if X.ndim == 1:
        raise ValueError(f"{name}: expected a 2-D array [n_samples, n_features]; reshape(-1, 1)")
    if X.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array [n_samples, n_features], got {X.ndim}-D")
    if X.shape[0] == 0:
        raise ValueError(f"{name}: no samples (the graph would be empty)")
    if not np.issubdtype(X.dtype, np.number):
        raise ValueError(f"{name}: features must be numeric, got dtype {X.dtype}")
    bad = ~np.isfinite(X)
    if bad.any():
        rows = np.unique(np.nonzero(bad)[0])
        raise ValueError(
            f"{name}: {rows.size} rows contain NaN or inf (first: {rows[:5].tolist()}); "
            "impute or drop them"
        )
    return X


def check_same_length(n: int, array, name: str) -> None:
    """``array`` must have ``n`` rows."""
    if len(array) != n:
        raise ValueError(f"{name}: has {len(array)} entries but X has {n} rows; align them")


def check_labels(y, n: int, *, n_classes: int | None = None, name: str = "y") -> np.ndarray:
    """Labels in ``0..C-1`` with ``-1`` for unlabelled; at least one labelled point, two classes.

    Returns an ``int64`` copy.
    """
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D label vector, got shape {y.shape}")
    check_same_length(n, y, name)
    if not (np.issubdtype(y.dtype, np.integer) or np.all(np.equal(np.mod(y, 1), 0))):
        raise ValueError(f"{name}: labels must be integers in 0..C-1, or -1 for unlabelled")
    y = y.astype(np.int64)
    if np.any(y < -1):
        raise ValueError(f"{name}: labels below -1 found; use -1 for unlabelled, 0..C-1 otherwise")
    if n_classes is not None and np.any(y >= n_classes):
        raise ValueError(f"{name}: labels must be < n_classes={n_classes}; found {y.max()}")
    labelled = y[y >= 0]
    if labelled.size == 0:
        raise ValueError(f"{name}: no labelled point (all -1); label at least one per class")
    if np.unique(labelled).size < 2 and n_classes is None:
        raise ValueError(
            f"{name}: only one class ({labelled[0]}) among the labelled points; "
            "label at least one point of a second class"
        )
    return y


def check_k(k, n: int, *, name: str = "k") -> int:
    """Neighbour count ``1 <= k < n``."""
    if isinstance(k, bool) or not float(k).is_integer():
        raise ValueError(f"{name}: must be a positive integer, got {k!r}")
    k = int(k)
    if k < 1:
        raise ValueError(f"{name}: must be >= 1, got {k}")
    if k >= n:
        raise ValueError(f"{name}: k={k} must be smaller than the number of points n={n}")
    return k
