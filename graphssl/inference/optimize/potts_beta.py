"""The Potts default beta: the paper's beta from Gamma, checked for an ordered (collapsed) phase.

Bergamim & Breve tune beta by the mode probability (Eq. 27, ``beta="nmfB"``). On their kNN
graphs that works; on denser user graphs the mean-field solution at that beta can sit in
the ordered phase of the Potts model, where one class takes the whole graph: on a cosine kNN
graph (k = 10) of CiteSeer's word indicators it puts 963 of 1000 test nodes in one class
(test accuracy 20.0 %; the harmonic function on the same graph: 60.4 %).

``beta="auto"`` keeps the paper's beta unless the data show that collapse, by two checks
read on the labelled nodes only:

1. **Signature of the ordered phase** (:func:`collapsed_classes`): some class's share of the
   unlabelled predictions lies above the ``1 - alpha / q`` quantile (``alpha = 1e-3``) of
   its share's posterior given the labelled counts, ``Beta(n_c + 1, L - n_c + 1)``. A class
   that wins far more nodes than its labelled share allows is what the collapse looks like;
   moderate imbalance (breast_cancer: 63 % of the points, 50 % of the labels) is not flagged.
2. **Held-out labelled accuracy** (:func:`cross_validated_beta`), only when 1 flags: the
   labelled nodes are split into ``n_folds`` class-stratified folds; each fold is hidden
   (its fields removed) and predicted by mean field at every beta of the grid
   ``beta_Gamma * 2^-j``, ``j = 0..3``. The paper's beta is replaced by the grid value of
   highest held-out accuracy when that beats the paper's by more than ``z = 2`` paired
   standard errors (over the labelled nodes); otherwise the paper's beta stays.

So the paper's beta is kept wherever its solution is not collapsed (every panel set of
``benchmarks/bench_defaults.py``), and lowered where held-out labels show that a smaller
beta predicts them better. Measured on CiteSeer (graph only, cosine kNN of the word
indicators or of tf-idf, k = 5, 10, 20; test accuracy, split_val likewise; beta chosen from
the training labels only): binary k = 10 20.0 -> 54.7 %, binary k = 20 17.2 -> 58.0 %,
tf-idf k = 20 18.5 -> 51.7 %; binary k = 5 and tf-idf k = 5, 10 not flagged, unchanged.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from graphssl.inference.optimize.mean_field import mean_field_labels, naive_mean_field
from graphssl.inference.ordered_phase import collapsed_classes, plausible_share_limits
from graphssl.validation import check_count

__all__ = ["BetaCrossValidation", "BetaSelection", "collapsed_classes", "class_folds",
           "cross_validated_beta", "plausible_share_limits", "BETA_FACTORS"]

BETA_FACTORS = (1.0, 0.5, 0.25, 0.125)  # the grid beta_Gamma * 2^-j


class BetaCrossValidation(NamedTuple):
    """Check 2's record (:func:`cross_validated_beta`). ``betas``: list of the grid's betas
    (``beta0 * factors``, the paper's first); ``held_out_accuracy``: list, the fraction of
    labelled nodes predicted correctly with their fold hidden, one per beta;
    ``gain_se``: list, each beta's paired accuracy gain over ``beta0`` in standard errors
    (0 for ``beta0``; +-inf when the gain's standard error is 0); ``chosen``: the beta
    returned; ``n_folds``: the number of folds used."""

    betas: list
    held_out_accuracy: list
    gain_se: list
    chosen: float
    n_folds: int


class BetaSelection(NamedTuple):
    """``PottsClassifier(beta="auto").beta_selection_``. ``beta_nmfB``: the paper's beta
    (Eq. 27); ``flagged_classes``: list of the classes check 1 flagged
    (:func:`collapsed_classes`; empty: the paper's beta kept without check 2);
    ``cross_validation``: check 2's :class:`BetaCrossValidation` when classes were
    flagged, else None."""

    beta_nmfB: float
    flagged_classes: list
    cross_validation: BetaCrossValidation | None = None


def class_folds(labels, n_folds: int, seed: int = 0) -> np.ndarray:
    """``int[n]`` fold of every labelled node (``-1`` for unlabelled): each class's nodes
    dealt round-robin in a random order from a random first fold, so every fold gets about
    ``1 / n_folds`` of each class."""
    labels = np.asarray(labels)
    n_folds = check_count(n_folds, "n_folds", least=1)
    rng = np.random.default_rng(seed)
    fold = np.full(labels.size, -1)
    for c in np.unique(labels[labels >= 0]):
        members = rng.permutation(np.flatnonzero(labels == c))
        fold[members] = (np.arange(members.size) + rng.integers(n_folds)) % n_folds
    return fold


def _held_out_correct(build, labels, beta, fold, n_folds, options) -> np.ndarray:
    """``bool[L]``: each labelled node predicted correctly with its fold hidden."""
    correct = np.zeros(labels.size, bool)
    for f in range(n_folds):
        hidden = fold == f
        if not hidden.any():
            continue
        model = build(np.where(hidden, -1, labels), beta)
        solution, _ = naive_mean_field(model, options=options)
        predicted = np.asarray(mean_field_labels(solution, model.unary_logits()))
        correct[hidden] = predicted[hidden] == labels[hidden]
    return correct[labels >= 0]


def cross_validated_beta(build, labels, beta0: float, *, options=None,
                         factors=BETA_FACTORS, n_folds: int = 5, z: float = 2.0,
                         seed: int = 0):
    """Check 2: the grid beta of best held-out labelled accuracy if it beats ``beta0`` by
    more than ``z`` paired standard errors, else ``beta0``.

    Args:
      build: ``(labels int[n], beta) -> PottsModel`` (the estimator's model at those labels).
      labels: ``int[n]``, ``-1`` for unlabelled.
      beta0: the paper's beta (``factors[0]`` must be 1).
      options: :class:`~graphssl.inference.optimize.mean_field.MeanFieldOptions`.
      factors, n_folds, z, seed: the grid ``beta0 * factors``, folds (at most the number
        of labelled nodes), the margin in standard errors, the folds' seed.
    Returns:
      ``(beta, BetaCrossValidation)``: ``betas``, ``held_out_accuracy`` (one per beta),
      ``gain_se`` (paired gain over ``beta0`` in standard errors), ``chosen``, ``n_folds``.
    """
    labels = np.asarray(labels)
    n_folds = int(max(2, min(n_folds, int(np.sum(labels >= 0)))))
    fold = class_folds(labels, n_folds, seed)
    betas = [float(beta0) * float(f) for f in factors]
    base = _held_out_correct(build, labels, betas[0], fold, n_folds, options)
    accuracy, gain_se = [float(base.mean())], [0.0]
    chosen, best_gain = betas[0], 0.0
    for beta in betas[1:]:
        correct = _held_out_correct(build, labels, beta, fold, n_folds, options)
        diff = correct.astype(float) - base
        se = diff.std(ddof=1) / np.sqrt(diff.size) if diff.size > 1 else np.inf
        gain = float(diff.mean())
        accuracy.append(float(correct.mean()))
        gain_se.append(gain / se if se > 0 else (np.inf if gain > 0 else 0.0))
        if gain > z * se and gain > best_gain:
            chosen, best_gain = beta, gain
    return chosen, BetaCrossValidation(betas, accuracy, gain_se, chosen, n_folds)
