"""Node features as the class prior of the graph models' estimators.

When ``fit_graph(graph, y, X=features)`` gets node features and the estimator's ``features``
parameter is ``"auto"`` (the default), the estimators of this mixin fit one feature model --
multinomial logistic regression with a Gaussian prior on unit-norm rows, its precision by
5-fold cross-validation on the labels, out-of-fold predictions on the labelled nodes
(:func:`graphssl.inference.optimize.feature_prior.fit_feature_prior`; the same model is the
field of the feature Potts CRF) -- and use its predictions ``h_i = p(y_i | x_i)`` as their
class prior. How each model uses it is stated in its class docstring; common to all: a node
that no label reaches gets ``h_i`` (never the labelled class frequencies), and the fitted
:class:`~graphssl.inference.optimize.feature_prior.FeaturePrior` is ``feature_prior_``.
``fit(X, y)`` (the kNN graph of X) and ``features=None`` keep the graph-only model
(``feature_prior_ = None``), and so do fewer than 4 labelled nodes (too few for the
cross-validated prior; a ``UserWarning`` says so).
"""

from __future__ import annotations

import numpy as np

from graphssl._warnings import warn_user
from graphssl.inference.optimize.feature_prior import choose_prior_weight, fit_feature_prior

__all__ = ["FeaturePriorMixin", "feature_model_folds"]


def feature_model_folds(estimator: str, labels) -> int | None:
    """Folds of the feature model's cross-validation: ``min(5, L // 2)`` for ``L`` labelled
    nodes, or None (with a warning that the features go unused) when fewer than 4 are
    labelled (two folds of two)."""
    n_labelled = int(np.sum(np.asarray(labels) >= 0))
    n_folds = min(5, n_labelled // 2)
    if n_folds >= 2:
        return n_folds
    warn_user(
        f"{estimator}: the feature model needs at least 4 labelled nodes for its "
        f"cross-validated prior (got {n_labelled}); the node features are not used. "
        "Label more nodes, or pass features=None to silence this.",
        UserWarning)
    return None


class FeaturePriorMixin:
    """Mixin for a :class:`~graphssl.estimators.base.GraphSSLClassifier` (listed first among
    the bases) with a ``features`` parameter (``"auto"`` or None)."""

    def _fit_feature_prior(self, labels, n_classes, *, weight_range=None):
        """``feature_prior_``: the feature model on ``X_graph_`` (``fit_graph`` with node
        features and ``features="auto"``), else None. Returns it. ``weight_range``:
        ``(low, high, closed_low)`` of a numeric ``prior_weight``, checked first."""
        features = getattr(self, "features", "auto")
        if features not in ("auto", None):
            raise ValueError(f"features: use 'auto' or None, got {features!r}")
        if weight_range is not None:
            self._check_prior_weight(*weight_range)
        X = getattr(self, "X_graph_", None)
        self.feature_prior_ = None
        if features is None or X is None or getattr(self, "X_fit_", None) is not None:
            return None
        n_folds = feature_model_folds(type(self).__name__, labels)
        if n_folds is None:
            return None
        seed = self._seed()  # random_state: the folds of the feature model's CV
        self.feature_prior_ = fit_feature_prior(X, labels, n_classes, n_folds=n_folds,
                                                seed=seed)
        return self.feature_prior_

    def _check_prior_weight(self, low, high, closed_low):
        weight = getattr(self, "prior_weight", "cv")
        if isinstance(weight, str):
            if weight != "cv":
                raise ValueError(f"prior_weight: use 'cv' or a number, got {weight!r}")
            return
        ok = (isinstance(weight, (int, float, np.floating, np.integer))
              and not isinstance(weight, bool) and np.isfinite(weight) and weight <= high
              and (weight >= low if closed_low else weight > low))
        if not ok:
            bracket = "[" if closed_low else "("
            raise ValueError(f"prior_weight: must be 'cv' or a number in {bracket}{low}, "
                             f"{high}], got {weight!r}")

    def _prior_weight(self, solve, labels, prior, grid):
        """The prior's weight: the ``prior_weight`` parameter, or (``"cv"``) chosen by
        :func:`~graphssl.inference.optimize.feature_prior.choose_prior_weight` over ``grid``;
        sets ``prior_weight_`` and ``prior_weight_scores_`` (None when given)."""
        weight = getattr(self, "prior_weight", "cv")
        if isinstance(weight, str):
            self.prior_weight_, self.prior_weight_scores_ = choose_prior_weight(
                solve, labels, prior, grid)
        else:
            self.prior_weight_, self.prior_weight_scores_ = float(weight), None
        return self.prior_weight_

    def _unreached_proba(self, nodes, labels, n_classes):
        """Unreached nodes: the feature model's prediction when there is one, else the base's
        class prior."""
        prior = getattr(self, "feature_prior_", None)
        if prior is None:
            return super()._unreached_proba(nodes, labels, n_classes)
        return prior.probs[nodes]
