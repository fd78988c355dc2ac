"""scikit-learn estimator base for graph-based semi-supervised classifiers.

A subclass names its model's parameters in ``__init__`` (sklearn introspects the signature,
so list the graph options ``k, symmetrize, weight, sigma`` too and pass them to
``super().__init__``) and implements one method::

    def _label_distributions(self, graph, labels, n_classes) -> np.ndarray:  # float[n, C]

where ``labels`` is ``int[n]`` in ``0..C-1`` with ``-1`` for unlabelled. Everything else --
input checks, the kNN graph, class encoding, ``transduction_``, ``predict``,
``predict_proba`` and the inductive extension to new points -- lives here.

Inductive extension (``predict(X_new)``): the distribution of a new point is the
graph-weighted mean of the fitted distributions of its ``k`` nearest training points
(Delalleau et al. 2005, as used by Zhu & Lafferty 2005, Sec. 4), with the same weight scheme
as the graph, computed in log space so that far-away points never give NaN. A point equal to
a training point gets that point's fitted distribution.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from graphssl.graph import Graph, knn_graph, sigma_kth_neighbor, walder_omega
from graphssl.validation import check_features, check_k, check_labels

__all__ = ["GraphSSLClassifier"]

_SYMMETRIZE = ("max", "min", "mean", None)
_WEIGHTS = ("gaussian", "binary", "distance", "cosine")
_SIGMA_RULES = ("kth_over_3", "walder")


class GraphSSLClassifier(ClassifierMixin, BaseEstimator):
    """Transductive classifier on a kNN similarity graph (``y = -1`` marks unlabelled).

    Parameters:
      k: neighbours per point of the kNN graph (``1 <= k < n``).
      symmetrize: ``"max"`` (i in kNN(j) or j in kNN(i)), ``"min"`` (mutual), ``"mean"``
        or ``None`` (directed).
      weight: ``"gaussian"``, ``"binary"``, ``"distance"`` or ``"cosine"``.
      sigma: Gaussian width: a positive number, ``"kth_over_3"`` / ``None`` (mean k-th
        neighbour distance / 3, Bergamim & Breve Eq. 7) or ``"walder"``
        (``exp(-omega d^2)``, omega = 1 / mean squared distance).

    Attributes after ``fit`` / ``fit_graph``:
      classes_: the distinct labels seen (sorted); columns of the distributions.
      label_distributions_: ``float[n, C]`` class distribution of every training node.
      transduction_: ``classes_[argmax]`` for every training node.
      graph_: the :class:`graphssl.graph.Graph` used.
      n_features_in_: feature count (``fit`` only).
    """

    def __init__(self, k=10, symmetrize="max", weight="gaussian", sigma="kth_over_3"):
        self.k = k
        self.symmetrize = symmetrize
        self.weight = weight
        self.sigma = sigma

    # ------------------------------------------------------------------ to implement
    def _label_distributions(self, graph, labels, n_classes) -> np.ndarray:
        raise NotImplementedError("subclasses compute float[n, C] class distributions")

    # ------------------------------------------------------------------ validation
    def _validate_graph_params(self, n: int) -> int:
        k = check_k(self.k, n, name="k")
        if self.symmetrize not in _SYMMETRIZE:
            raise ValueError(
                f"symmetrize: got {self.symmetrize!r}; use 'max', 'min', 'mean' or None"
            )
        if self.weight not in _WEIGHTS:
            raise ValueError(
                f"weight: got {self.weight!r}; use 'gaussian', 'binary', 'distance' or 'cosine'"
            )
        sigma = self.sigma
        if isinstance(sigma, str):
            if sigma not in _SIGMA_RULES:
                raise ValueError(
                    f"sigma: unknown rule {sigma!r}; use a positive number, 'kth_over_3', "
                    "'walder' or None"
                )
        elif sigma is not None and (
            isinstance(sigma, bool)
            or not isinstance(sigma, numbers.Real)
            or not np.isfinite(sigma)
            or sigma <= 0
        ):
            raise ValueError(f"sigma: must be a positive finite number or a rule, got {sigma!r}")
        return k

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y):
        """Build the kNN graph of ``X`` and fit on it; ``y`` has ``-1`` for unlabelled."""
        X = check_features(X, name="X")
        if X.shape[1] == 0:
            raise ValueError(
                f"X: 0 feature(s) (shape={X.shape}) while a minimum of 1 is required; "
                "pass at least one feature column"
            )
        if y is None:
            raise ValueError(
                f"y: {type(self).__name__} requires y to be passed, but the target y is None; "
                "give -1 for the unlabelled points"
            )
        y = check_labels(y, X.shape[0], name="y")
        k = self._validate_graph_params(X.shape[0])
        graph = knn_graph(
            X, k, symmetrize=self.symmetrize, weight=self.weight, sigma=self.sigma
        )
        self.n_features_in_ = X.shape[1]
        self.X_fit_ = np.asarray(X, dtype=np.float64)
        self._induction_scale = None
        return self._fit_on_graph(graph, y)

    def fit_graph(self, graph, y):
        """Fit on a precomputed graph (:class:`Graph` or ``n x n`` scipy.sparse weights)."""
        if sp.issparse(graph):
            graph = Graph.from_scipy(graph)
        if not isinstance(graph, Graph):
            raise ValueError(
                f"graph: expected a graphssl.graph.Graph or a scipy.sparse matrix, "
                f"got {type(graph).__name__}"
            )
        if graph.n_nodes < 2 or graph.n_edges == 0:
            raise ValueError("graph: the graph is empty (no edges); build it with knn_graph")
        y = check_labels(y, graph.n_nodes, name="y")
        self.X_fit_ = None
        self._induction_scale = None
        return self._fit_on_graph(graph, y)

    def _fit_on_graph(self, graph, y):
        labelled = y >= 0
        self.classes_ = np.unique(y[labelled])
        encoded = np.full(y.shape, -1, dtype=np.int64)
        encoded[labelled] = np.searchsorted(self.classes_, y[labelled])
        dist = np.asarray(self._label_distributions(graph, encoded, self.classes_.size))
        self.graph_ = graph
        self._set_label_distributions(dist)
        return self

    def _set_label_distributions(self, dist) -> None:
        """``label_distributions_`` and ``transduction_`` (values of ``classes_``)."""
        self.label_distributions_ = dist
        self.transduction_ = self.classes_[np.argmax(dist, axis=1)]

    # ------------------------------------------------------------------ prediction
    def predict_proba(self, X=None):
        """Class distributions ``float[n, C]``: the fitted ones when ``X`` is None or the
        training features, else the inductive extension to the new points."""
        check_is_fitted(self, "label_distributions_")
        if X is None:
            return self.label_distributions_
        if self.X_fit_ is None:
            raise ValueError(
                "X: this model was fitted with fit_graph (no features); call predict_proba() "
                "without X for the transductive labels"
            )
        X = check_features(X, name="X")
        if X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[1]} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input; pass data with the same columns"
            )
        if X.shape == self.X_fit_.shape and np.array_equal(X, self.X_fit_):
            return self.label_distributions_
        return self._induce(np.asarray(X, dtype=np.float64))

    def predict(self, X=None):
        """Labels (values of ``classes_``): ``transduction_`` or induced for new ``X``."""
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

    def _induce(self, X):
        from sklearn.neighbors import NearestNeighbors

        k = min(int(self.k), self.X_fit_.shape[0])
        nn = NearestNeighbors(n_neighbors=k).fit(self.X_fit_)
        distances, indices = nn.kneighbors(X)
        log_w = self._induction_log_weights(distances, nn)
        log_w -= log_w.max(axis=1, keepdims=True)
        w = np.exp(log_w)
        w /= w.sum(axis=1, keepdims=True)
        proba = np.einsum("ik,ikc->ic", w, self.label_distributions_[indices])
        # a new point that coincides with a training point takes that point's distribution,
        # so predictions on (subsets or permutations of) the training data are transductive
        same = distances[:, 0] == 0
        proba[same] = self.label_distributions_[indices[same, 0]]
        return proba

    def _induction_log_weights(self, distances, nn):
        if self.weight != "gaussian":
            return np.zeros_like(distances)
        if self._induction_scale is None:
            if self.sigma == "walder":
                scale = walder_omega(self.X_fit_)
            elif self.sigma in (None, "kth_over_3"):
                k = min(int(self.k) + 1, self.X_fit_.shape[0])
                train_d, _ = nn.kneighbors(self.X_fit_, n_neighbors=k)
                scale = 1.0 / (2.0 * sigma_kth_neighbor(train_d[:, 1:]) ** 2)
            else:
                scale = 1.0 / (2.0 * float(self.sigma) ** 2)
            self._induction_scale = scale
        return -self._induction_scale * distances**2
