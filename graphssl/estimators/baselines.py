"""Estimators for the closed-form baselines of :mod:`graphssl.inference.optimize.baselines`.

Each class adds its model's parameters to the graph options of
:class:`~graphssl.estimators.base.GraphSSLClassifier` (``k, symmetrize, weight, sigma``).
"""

from __future__ import annotations

from graphssl.estimators.base import GraphSSLClassifier
from graphssl.inference.optimize.baselines import (
    harmonic_function,
    knn_graph_classifier,
    lgc,
    parzen_window,
)

__all__ = [
    "HarmonicFunctionClassifier",
    "LGCClassifier",
    "ParzenWindowClassifier",
    "KNNGraphClassifier",
]


class HarmonicFunctionClassifier(GraphSSLClassifier):
    """Harmonic function / GRF (Zhu, Ghahramani & Lafferty 2003); see
    :func:`graphssl.inference.optimize.baselines.harmonic_function` for ``method``,
    ``class_mass_normalize``, ``normalize_graph`` and ``tol``.

    >>> clf = HarmonicFunctionClassifier(k=10).fit(X, y)        # doctest: +SKIP
    >>> clf.transduction_                                       # doctest: +SKIP
    """

    def __init__(
        self,
        k=10,
        symmetrize="max",
        weight="gaussian",
        sigma="kth_over_3",
        *,
        method="auto",
        class_mass_normalize=False,
        normalize_graph=False,
        tol=1e-5,
    ):
        super().__init__(k=k, symmetrize=symmetrize, weight=weight, sigma=sigma)
        self.method = method
        self.class_mass_normalize = class_mass_normalize
        self.normalize_graph = normalize_graph
        self.tol = tol

    def _label_distributions(self, graph, labels, n_classes):
        return harmonic_function(
            graph,
            labels,
            n_classes=n_classes,
            method=self.method,
            class_mass_normalize=bool(self.class_mass_normalize),
            normalize_graph=bool(self.normalize_graph),
            tol=self.tol,
        )


class LGCClassifier(GraphSSLClassifier):
    """Local and global consistency (Zhou et al. 2004), ``F* = (1-alpha)(I - alpha S)^-1 Y``;
    see :func:`graphssl.inference.optimize.baselines.lgc`."""

    def __init__(
        self,
        k=10,
        symmetrize="max",
        weight="gaussian",
        sigma="kth_over_3",
        *,
        alpha=0.99,
        method="auto",
        tol=1e-5,
    ):
        super().__init__(k=k, symmetrize=symmetrize, weight=weight, sigma=sigma)
        self.alpha = alpha
        self.method = method
        self.tol = tol

    def _label_distributions(self, graph, labels, n_classes):
        return lgc(
            graph, labels, alpha=self.alpha, n_classes=n_classes, method=self.method, tol=self.tol
        )


class ParzenWindowClassifier(GraphSSLClassifier):
    """Graph Parzen window of heat-kernel diffusions (Walder, Sec. 5 baseline); defaults
    follow Walder: k = 10, ``sigma="walder"``, tau = 5, uniform class proportions."""

    def __init__(
        self,
        k=10,
        symmetrize="max",
        weight="gaussian",
        sigma="walder",
        *,
        tau=5.0,
        class_prior=None,
        method="auto",
    ):
        super().__init__(k=k, symmetrize=symmetrize, weight=weight, sigma=sigma)
        self.tau = tau
        self.class_prior = class_prior
        self.method = method

    def _label_distributions(self, graph, labels, n_classes):
        return parzen_window(
            graph,
            labels,
            tau=self.tau,
            n_classes=n_classes,
            class_prior=self.class_prior,
            method=self.method,
        )


class KNNGraphClassifier(GraphSSLClassifier):
    """Vote of the ``n_neighbors`` labelled nodes nearest along the graph (shortest paths);
    see :func:`graphssl.inference.optimize.baselines.knn_graph_classifier`."""

    def __init__(
        self,
        k=10,
        symmetrize="max",
        weight="gaussian",
        sigma="kth_over_3",
        *,
        n_neighbors=3,
        edge_length="inverse_weight",
    ):
        super().__init__(k=k, symmetrize=symmetrize, weight=weight, sigma=sigma)
        self.n_neighbors = n_neighbors
        self.edge_length = edge_length

    def _label_distributions(self, graph, labels, n_classes):
        return knn_graph_classifier(
            graph,
            labels,
            k=self.n_neighbors,
            n_classes=n_classes,
            edge_length=self.edge_length,
        )
