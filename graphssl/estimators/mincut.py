"""``MincutClassifier``: graph mincut classification (Blum & Chawla 2001).

The estimator labels the unlabelled points by a minimum cut (binary, Sec. 2) or by
alpha-expansion (more than two classes; see :mod:`graphssl.inference.optimize.maxflow`).
The graph is
the base class's kNN graph (``scheme="knn"``) or one of the paper's weighting schemes built
from a distance matrix: ``"nn"`` (Thm 3.1), ``"mincut3"``, ``"delta_zero"``,
``"delta_half"`` or ``"delta"`` (a given radius), with ``metric`` ``"euclidean"``,
``"hamming"`` (X holds categorical codes) or ``"infogain"`` (Sec. 5.1's weighted metric).

:func:`table1_trial` (one random L/U draw of a Table 1 row: Mincut-3, Mincut-delta_opt /
delta_0 / delta_1/2, ID3 and 3-NN) lives in :mod:`graphssl.reproductions.mincut_table1` and is
re-exported here.
"""

from __future__ import annotations

import numpy as np

from graphssl._warnings import warn_user
from graphssl.estimators.base import GraphSSLClassifier
from graphssl.graph import Graph
from graphssl.inference.optimize.maxflow import METHODS, mincut_classify
from graphssl.models import mincut as mc
from graphssl.reproductions.mincut_table1 import (  # re-exported: the Table 1 protocol
    TABLE1,
    distance_matrix,
    table1_dataset,
    table1_trial,
)
from graphssl.validation import check_real

__all__ = ["MincutClassifier", "TABLE1", "table1_dataset", "table1_trial", "distance_matrix"]

_SCHEMES = ("knn", "nn", "mincut3", "delta_zero", "delta_half", "delta")
_METRICS = ("euclidean", "hamming", "infogain")  # see distance_matrix
_DENSE_MAX_N = 20_000


def _scheme_weights(D, scheme, labels, observed, delta):
    if scheme == "nn":
        return mc.nearest_neighbor_weights(mc.neighbors_from_distances(D, 1))
    if scheme == "mincut3":
        return mc.mincut3_weights(D, observed)
    if scheme == "delta_zero":
        return mc.delta_weights(D, mc.delta_zero(D, labels, observed))
    if scheme == "delta_half":
        return mc.delta_weights(D, mc.delta_half(D))
    return mc.delta_weights(D, _checked_delta(delta))


def _checked_delta(delta) -> float:
    """``scheme="delta"``'s radius: a finite number > 0 (not a string, a bool or None)."""
    try:
        return check_real(delta, "delta", low=0.0, low_open=True)
    except ValueError:
        raise ValueError(f"delta: scheme='delta' needs a positive finite radius, got "
                         f"{delta!r}") from None


class MincutClassifier(GraphSSLClassifier):
    """Graph mincut classifier (Blum & Chawla 2001).

    Parameters (beyond the kNN graph options ``k, symmetrize, weight, sigma`` and
    ``standardize`` of the base):
      scheme: ``"knn"`` (the kNN graph), ``"nn"``, ``"mincut3"``, ``"delta_zero"``,
        ``"delta_half"`` or ``"delta"`` (Sec. 3 / Sec. 5.1 weightings).
      metric: ``"euclidean"``, ``"hamming"`` or ``"infogain"`` (schemes other than knn).
      delta: radius for ``scheme="delta"``.
      alpha: factor on unlabelled-unlabelled edges (Fig. 1); 1 = plain mincut.
      method: max-flow back end, ``"auto"`` (default), ``"pymaxflow"``, ``"scipy"`` or
        ``"networkx"``.

    ``label_distributions_`` are one-hot (the cut is a hard labelling); ``cut_value_`` holds
    the energy of the returned labelling; ``degenerate_classes_`` the classes (codes) that
    received (almost) no unlabelled node -- a degenerate minimum cut, warned about
    (:func:`graphssl.inference.optimize.maxflow.degenerate_classes`). More than two classes:
    alpha-expansion (Boykov, Veksler & Zabih 2001), a local minimum within a factor 2.

    >>> clf = MincutClassifier(scheme="mincut3").fit(X, y)   # doctest: +SKIP
    """

    _host_graph = True  # max-flow in PyMaxflow on the host (graphssl.estimators.base)

    def __init__(
        self,
        k=10,
        symmetrize="max",
        weight="gaussian",
        sigma="local",
        *,
        scheme="knn",
        metric="euclidean",
        delta=None,
        alpha=1.0,
        method="auto",
        standardize="auto",
    ):
        super().__init__(k=k, symmetrize=symmetrize, weight=weight, sigma=sigma,
                         standardize=standardize)
        self.scheme = scheme
        self.metric = metric
        self.delta = delta
        self.alpha = alpha
        self.method = method

    def _check_params(self) -> float:
        """``alpha`` (returned as a float), ``method`` and, for ``scheme="delta"``, ``delta``;
        checked before any graph is built."""
        alpha = check_real(self.alpha, "alpha", low=0.0)
        if not (isinstance(self.method, str) and self.method in ("auto", *METHODS)):
            raise ValueError(f"method: the max-flow back end, one of {('auto', *METHODS)}, "
                             f"got {self.method!r}")
        if isinstance(self.scheme, str) and self.scheme == "delta":
            _checked_delta(self.delta)
        return alpha

    def _graph_from_features(self, X, labels):
        """The kNN graph (``scheme="knn"``) or the scheme's graph from a distance matrix."""
        self._check_params()
        if self.scheme not in _SCHEMES:
            raise ValueError(f"scheme: unknown {self.scheme!r}; use one of {_SCHEMES}")
        if self.scheme == "knn":
            return super()._graph_from_features(X, labels)
        if self.metric not in _METRICS:
            raise ValueError(f"metric: unknown {self.metric!r}; use one of {_METRICS}")
        if X.shape[0] > _DENSE_MAX_N:
            raise ValueError(
                f"X: scheme={self.scheme!r} builds an n x n distance matrix; n={X.shape[0]} is "
                "too large, use scheme='knn'"
            )
        observed = labels >= 0
        D = distance_matrix(X, self.metric, labels, observed)
        W = _scheme_weights(D, self.scheme, labels, observed, self.delta)
        return Graph.from_scipy(W)

    def _label_distributions(self, graph, labels, n_classes):
        alpha = self._check_params()
        out, info = mincut_classify(
            graph.to_scipy(), labels, labels >= 0, alpha=alpha, method=self.method
        )
        self.cut_value_ = float(info.energy)
        self.degenerate_classes_ = info.degenerate_classes
        if self.degenerate_classes_.size:
            warn_user(
                f"{type(self).__name__}: the minimum cut gives (almost) no unlabelled node to "
                f"{self.degenerate_classes_.size} of {n_classes} classes (under a tenth of their "
                "labelled share: it cuts their labelled nodes off, as the graph's edges around "
                "the labels weigh less than any "
                "cut between the classes). This is the model's minimum, not a search failure; "
                "a denser graph (larger k), more labels or the harmonic function suit this "
                "graph better.", UserWarning)
        return np.eye(n_classes)[out]
