"""The ordered phase's signature, read against the labelled counts.

A Potts-family model whose coupling is past its ordering transition puts most nodes in one
class whatever the labels say. The check used by the Potts estimator's ``beta="auto"``
(:mod:`graphssl.inference.optimize.potts_beta`) and by the Boltzmann MRF's coupling grid
(:mod:`graphssl.inference.boltzmann.selection`): a class whose share of the unlabelled
nodes lies above the ``1 - alpha / q`` quantile of ``Beta(n_c + 1, L - n_c + 1)`` -- the
posterior of its share under a uniform prior, given ``n_c`` of the ``L`` labels -- holds
more than the labels make plausible. Moderate imbalance (breast_cancer: 63 % of the points,
50 % of the labels) is not flagged. NumPy and scipy only.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import beta as beta_distribution

from graphssl.validation import check_count, check_label_codes, check_real

__all__ = ["collapsed_classes", "plausible_share_limits", "unlabelled_shares"]


def collapsed_classes(predicted, labels, n_classes: int, alpha: float = 1e-3) -> np.ndarray:
    """Classes whose share of the unlabelled predictions is implausibly large (check 1 of
    :mod:`graphssl.inference.optimize.potts_beta`).

    Args:
      predicted: ``int[n]`` predicted classes of every node.
      labels: ``int[n]`` with ``-1`` for unlabelled.
      n_classes: ``q``.
      alpha: family-wise level; each class is tested at ``alpha / q``.
    Returns:
      ``int[...]``: the flagged classes (empty when the solution looks disordered enough).
    Raises ValueError for ``alpha`` outside (0, 1], labels that are not codes
    ``-1, 0..q-1``, or predictions that are not classes ``0..q-1`` (one per node).
    """
    labels = _checked_labels(labels, n_classes)
    _check_alpha(alpha)
    predicted = np.asarray(predicted)
    if predicted.shape != labels.shape:
        raise ValueError(f"predicted: one class per node, shape {labels.shape} like labels, "
                         f"got {predicted.shape}")
    check_label_codes(predicted, labels.size, n_classes=n_classes, name="predicted",
                      against="labels has {n} nodes")
    if np.any(predicted < 0):
        raise ValueError("predicted: every node needs a class in 0..q-1; found -1")
    if not np.any(labels < 0):
        return np.zeros(0, np.int64)
    share = unlabelled_shares(predicted, labels, n_classes)
    return np.flatnonzero(share > plausible_share_limits(labels, n_classes, alpha))


def unlabelled_shares(predicted, labels, n_classes: int) -> np.ndarray:
    """``float[q]``: each class's share of the unlabelled nodes' predictions (zeros when
    every node is labelled)."""
    free = np.asarray(labels) < 0
    counts = np.bincount(np.asarray(predicted)[free], minlength=n_classes)
    return counts / max(int(free.sum()), 1)


def plausible_share_limits(labels, n_classes: int, alpha: float = 1e-3) -> np.ndarray:
    """``float[q]``: the largest share of the unlabelled nodes each class can plausibly hold
    given the labelled counts ``n_c`` (of ``L``): the ``1 - alpha / q`` quantile of
    ``Beta(n_c + 1, L - n_c + 1)``, the posterior of the class's share under a uniform prior.
    A larger share is the ordered phase's signature (:func:`collapsed_classes`).
    Raises ValueError for ``alpha`` outside (0, 1] (NaN limits would flag nothing)."""
    labels = _checked_labels(labels, n_classes)
    _check_alpha(alpha)
    counts = np.bincount(labels[labels >= 0], minlength=n_classes).astype(float)
    total = counts.sum()
    return beta_distribution.isf(alpha / n_classes, counts + 1.0, total - counts + 1.0)


def _checked_labels(labels, n_classes) -> np.ndarray:
    """``labels`` as ``int64[n]`` codes ``-1, 0..q-1`` with ``q = n_classes >= 1``."""
    check_count(n_classes, "n_classes", least=1)
    labels = np.asarray(labels)
    n = labels.shape[0] if labels.ndim == 1 else -1
    return check_label_codes(labels, n, n_classes=n_classes, name="labels",
                             against="{n} nodes")


def _check_alpha(alpha) -> None:
    """The family-wise level: a number in (0, 1]."""
    check_real(alpha, "alpha", low=0.0, high=1.0, low_open=True)
