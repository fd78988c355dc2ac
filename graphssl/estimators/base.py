"""scikit-learn estimator base for graph-based semi-supervised classifiers.

The base class owns ``fit``, ``fit_graph``, ``predict``, ``predict_proba`` and every input
check; a subclass names its model's parameters in ``__init__`` (sklearn introspects the
signature, so list the graph options ``k, symmetrize, weight, sigma`` and ``standardize``
too and pass them to ``super().__init__``) and implements one hook::

    def _label_distributions(self, graph, labels, n_classes) -> np.ndarray:  # float[n, C]

where ``labels`` is ``int[n]`` in ``0..C-1`` with ``-1`` for unlabelled and ``graph`` a
symmetric :class:`~graphssl.graph.Graph`. The hook may read ``self.X_graph_`` (node features:
``float[n, d]``, a scipy CSR matrix, or None) and ``self.X_fit_`` (dense training features of
``fit``, None after ``fit_graph``), and may set ``self._map_encoded`` (``int[n]`` codes of a
MAP labelling; the base turns it into ``map_labels_``). Optional hooks, each with a default:
``_graph_from_features(X, labels)`` (the graph of ``fit``: the kNN graph),
``_unreached_mask(graph, labels)`` (nodes no label reaches: graph components without a label),
``_unreached_proba(nodes, labels, n_classes)`` (their distribution: the class prior; a model
with a feature model returns its predictions), ``_induce(X)`` (new points) and
``_decision(proba)`` (labels from distributions: argmax).

Labels: any class values (numbers, strings, categories); ``classes_`` and every prediction are
in the user's labels. Unlabelled points are ``-1`` for numeric labels and ``None``, ``""`` or
``NaN`` for labels of other types (:func:`graphssl.validation.encode_labels`).

Unreached nodes: unlabelled nodes in connected components without a labelled node get the
class prior (label frequencies among the labelled nodes), or the feature model's prediction
where the estimator has one, with an :class:`~graphssl.validation.UnreachedNodesWarning`
naming how many.

Feature scaling (``standardize``): every estimator's graph rests on Euclidean distances,
so by default (``"auto"``) ``fit`` standardises the columns of ``X`` when their spreads differ
by more than an order of magnitude (and they are not sparse non-negative counts), centres
them only when their mean lies more than 10 spreads from the origin (float32 distances
would lose the spread), and leaves them as they are otherwise; True always standardises,
False never
(:func:`graphssl.scaling.fit_feature_scaling`, whose docstring gives the rule and the
measurements behind it). The fitted map is ``scaling_``; ``predict(X_new)`` applies it, and
``fit_graph``'s node features get the same rule (sparse ones scaled, never centred). A
subclass lists ``standardize`` in its ``__init__`` and passes it to ``super().__init__`` to
make it a parameter (``get_params`` / ``clone``); one that does not always uses ``"auto"``.

Inductive extension (``predict(X_new)``): a new point equal to a training point gets that
point's fitted distribution; any other gets the graph-weighted mean of the fitted
distributions of its ``k`` nearest training points (Delalleau et al. 2005, as used by Zhu &
Lafferty 2005, Sec. 4), with the same weight scheme as the graph, in log space so that
far-away points never give NaN.
"""

from __future__ import annotations

import contextlib
import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

# imported with the estimators, as scikit-learn's own LabelSpreading does, not inside the
# first fit (0.1 CPU s): prediction uses it, and so does the kNN search of fit() on up to
# 3000 points (scikit-learn's brute force, graphssl.neighbors.auto_method)
from sklearn.neighbors import NearestNeighbors
from sklearn.utils.validation import check_is_fitted, validate_data

from graphssl._warnings import warn_user
from graphssl.graph import (
    as_graph,
    knn_graph,
    local_widths,
    sigma_kth_neighbor,
    unreached_nodes,
    walder_omega,
)
from graphssl.scaling import FeatureScaling, fit_feature_scaling
from graphssl.validation import (
    UnreachedNodesWarning,
    check_features,
    check_k,
    encode_labels,
    labelled_values,
    seed_from_random_state,
    warn_conflicting_duplicates,
)

__all__ = ["GraphSSLClassifier"]

_SYMMETRIZE = ("max", "min", "mean", None)
_WEIGHTS = ("gaussian", "binary", "distance", "cosine")
_SIGMA_RULES = ("kth_over_3", "local", "walder")
NEAR_TRAINING_RTOL = 1e-6
"""A new point this close to a training point (relative to that point's norm) is that point:
it takes the fitted row (float32 rounding of a training point is ~6e-8 of its norm)."""


class GraphSSLClassifier(ClassifierMixin, BaseEstimator):
    """Transductive classifier on a similarity graph (``y = -1`` marks unlabelled).

    Parameters:
      k: neighbours per point of the kNN graph of ``fit`` (``k >= 1``; a ``k`` of ``n`` or
        more points is cut to ``n - 1``, the complete graph, with a warning).
      symmetrize: ``"max"`` (i in kNN(j) or j in kNN(i)), ``"min"`` (mutual), ``"mean"``
        or ``None`` (directed).
      weight: ``"gaussian"``, ``"binary"``, ``"distance"`` or ``"cosine"``.
      sigma: Gaussian width: a positive number, ``"kth_over_3"`` / ``None`` (mean k-th
        neighbour distance / 3, Bergamim & Breve Eq. 7), ``"local"`` (each point's own k-th
        neighbour distance / 3, ``w_ij = exp(-d_ij^2 / (2 sigma_i sigma_j))``: Zelnik-Manor
        & Perona's local scaling) or ``"walder"`` (``exp(-omega d^2)``, omega = 1 / mean
        squared distance). ``"local"`` is the default of HarmonicFunction, Potts, Mincut,
        KNNGraph and HarmonicMixture: on the 11 quick sets of the default panel
        (``benchmarks/bench_defaults.py``, 10 splits) it beat the global width on 9 of 11
        for the harmonic function (breast_cancer 89.5 -> 94.6, COIL2-10 59.8 -> 67.1;
        also usps_full 89.9 -> 95.5, Text-100 62.3 -> 71.1) and lost on two moons (99.3 ->
        98.4), where the density is even; LGC keeps ``"kth_over_3"`` (its degree
        normalisation did worse with it on USPS: 87.5 -> 80.7 with 100 labels).
      standardize: ``"auto"`` (default: standardise the feature columns when
        their spreads differ by more than an order of magnitude), True or False (module
        docstring, :mod:`graphssl.scaling`).

    Attributes after ``fit`` / ``fit_graph``:
      classes_: the distinct labels seen (sorted); columns of the distributions.
      label_distributions_: ``float[n, C]`` class distribution of every training node.
      transduction_: the label of every training node (values of ``classes_``).
      graph_: the :class:`graphssl.graph.Graph` used.
      X_graph_: the node features (``fit``: X; ``fit_graph``: its ``X`` or None).
      n_unreached_: unlabelled nodes no label reaches (given the class prior).
      scaling_: the :class:`~graphssl.scaling.FeatureScaling` applied to the features
        (``scaling_.applied``, ``scaling_.reason``).
      n_features_in_: feature count (``fit`` only).
    """

    _requires_features = False  # True: fit_graph needs node features X

    def __init__(self, k=10, symmetrize="max", weight="gaussian", sigma="kth_over_3",
                 standardize="auto"):
        self.k = k
        self.symmetrize = symmetrize
        self.weight = weight
        self.sigma = sigma
        self.standardize = standardize

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        tags.input_tags.allow_nan = False
        return tags

    # ------------------------------------------------------------------ to implement
    def _label_distributions(self, graph, labels, n_classes) -> np.ndarray:
        raise NotImplementedError("subclasses compute float[n, C] class distributions")

    # ------------------------------------------------------------------ validation
    def _default_k(self, n: int) -> int:
        """``k`` when the parameter is None (subclasses may follow their paper's rule)."""
        return 10

    def _validate_graph_params(self, n: int) -> int:
        k = self._default_k(n) if self.k is None else self.k
        if isinstance(k, numbers.Real) and not isinstance(k, bool) and k >= n >= 2:
            warn_user(
                f"k: k={k} but there are only n={n} points; using k={n - 1} (the complete "
                "graph)", UserWarning
            )
            k = n - 1
        k = check_k(k, n, name="k")
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
                    "'local', 'walder' or None"
                )
        elif sigma is not None and (
            isinstance(sigma, bool)
            or not isinstance(sigma, numbers.Real)
            or not np.isfinite(sigma)
            or sigma <= 0
        ):
            raise ValueError(f"sigma: must be a positive finite number or a rule, got {sigma!r}")
        return k

    def _seed(self) -> int:
        """An int seed from ``random_state`` (None, int or Generator; see
        :func:`graphssl.validation.seed_from_random_state`)."""
        return seed_from_random_state(getattr(self, "random_state", None))

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y):
        """Build the graph of ``X`` (the kNN graph) and fit on it.

        ``y``: labels of any type; ``-1`` (numeric) or ``None`` / ``""`` / ``NaN`` (other
        types) for the unlabelled points.
        """
        if y is None:
            raise ValueError(
                f"y: {type(self).__name__} requires y to be passed, but the target y is None; "
                "give -1 (or None in an object array) for the unlabelled points"
            )
        before = self._forget_fit()
        with self._fit_record(before):
            return self._fit_features(X, y)

    def _fit_features(self, X, y):
        """:meth:`fit` past forgetting the earlier fit."""
        X = validate_data(self, X, reset=True, dtype=np.float64, ensure_all_finite=False,
                          ensure_min_samples=2)
        X = check_features(X, name="X")
        self.scaling_ = fit_feature_scaling(X, self.standardize)
        X = self.scaling_.transform(X)
        self.classes_, encoded = encode_labels(y, X.shape[0], name="y")
        warn_conflicting_duplicates(X, encoded, self.classes_)
        self.k_ = self._validate_graph_params(X.shape[0])
        graph = self._graph_from_features(X, encoded)
        self.X_fit_ = X
        self.X_graph_ = X
        self._induction_scale = None
        # what predict(X_new) weighs neighbours by: the graph of this fit (a set_params
        # after it takes effect at the next fit; before, a new sigma met the old cached
        # widths: a broadcasting error, or LGC's old width silently)
        self._induction_graph = {"sigma": self.sigma, "weight": self.weight}
        return self._fit_on_graph(graph, encoded)

    @contextlib.contextmanager
    def _fit_record(self, before: set):
        """Around a fit: record what it added (:meth:`_remember_fit`); a fit that raises is
        forgotten at once (it had left ``n_features_in_`` and ``scaling_``, so that
        ``check_is_fitted`` passed and ``predict`` raised ``NotFittedError``)."""
        try:
            yield
        except BaseException:
            self._remember_fit(before)
            self._forget_fit()
            raise
        self._remember_fit(before)

    def _forget_fit(self) -> set:
        """Drop what an earlier fit left on the estimator: the fitted attributes (``name_``)
        and the private ones that fit added (listed in ``_fit_attributes``; attributes set
        by others, e.g. scikit-learn's callbacks, stay). A refit by another route (mean
        field after Gibbs) set no ``samples_`` or ``map_labels_`` of its own, and the
        earlier fit's were read as the new one's. Returns the names present now, for
        :meth:`_remember_fit`."""
        added = set(vars(self).get("_fit_attributes", ())) | {"_fit_attributes"}
        for name in [name for name in vars(self)
                     if name in added or (name.endswith("_") and not name.startswith("_"))]:
            delattr(self, name)
        return set(vars(self))

    def _remember_fit(self, before: set) -> None:
        """Record the attributes this fit added (:meth:`_forget_fit`)."""
        self._fit_attributes = tuple(sorted(set(vars(self)) - before))

    # True where the model's solver runs on the host (scipy): ``fit`` then builds a host
    # graph (graphssl.graph.Graph), and a process that fits only such models never starts
    # JAX's back end
    _host_graph = False

    def _graph_from_features(self, X, labels):
        """The graph of ``fit``: the kNN graph of the graph options."""
        return knn_graph(X, self.k_, symmetrize=self.symmetrize, weight=self.weight,
                         sigma=self.sigma, on_host=self._host_graph)

    def fit_graph(self, graph, y, X=None, *, weight="weight", symmetrize="max"):
        """Fit on a given graph, with optional node features.

        Args:
          graph: a :class:`~graphssl.graph.Graph`, a networkx graph (nodes in the order
            ``list(G.nodes)``, weights from the edge attribute ``weight``, 1 where missing),
            a scipy.sparse or dense ``n x n`` affinity matrix, or an edge list ``int[E, 2]``
            (``[E, 3]`` with weights); see :func:`graphssl.graph.as_graph`.
          y: one label per node in the graph's node order (unlabelled: ``-1`` / ``None``).
          X: optional node features ``[n, d]``, dense or scipy.sparse (kept sparse), for the
            models that use features (``self.X_graph_``).
          weight: the networkx edge attribute holding the weights.
          symmetrize: how a directed graph is made undirected (``"max"``: union, default;
            ``"mean"``, ``"min"``); a :class:`~graphssl.graph.DirectedGraphWarning` says how
            many edges were one-directional.
        """
        before = self._forget_fit()
        with self._fit_record(before):
            return self._fit_given_graph(graph, y, X, weight, symmetrize)

    def _fit_given_graph(self, graph, y, X, weight, symmetrize):
        """:meth:`fit_graph` past forgetting the earlier fit."""
        n = _n_labels(y)
        graph = as_graph(graph, n, weight=weight, symmetrize=symmetrize,
                         on_host=self._host_graph)
        self.classes_, encoded = encode_labels(y, graph.n_nodes, name="y")
        if X is not None:
            X = check_features(X, name="X", accept_sparse=True)
            if X.shape[0] != graph.n_nodes:
                raise ValueError(
                    f"X: has {X.shape[0]} rows but the graph has {graph.n_nodes} nodes; give "
                    "one feature row per node, in the graph's node order"
                )
            self.scaling_ = fit_feature_scaling(X, self.standardize)
            X = self.scaling_.transform(X)
        else:
            self.scaling_ = FeatureScaling(False, None, None, "no node features")
            if self._requires_features:
                raise ValueError(
                    f"X: {type(self).__name__} learns from node features; call "
                    "fit_graph(graph, y, X=features) or fit(X, y)"
                )
        self.k_ = None
        self.X_fit_ = None
        self.X_graph_ = X
        self._induction_scale = None
        return self._fit_on_graph(graph, encoded)

    def _fit_on_graph(self, graph, encoded):
        n_classes = self.classes_.size
        self.graph_ = graph
        self._map_encoded = None
        with warnings.catch_warnings():
            # reported once below, for every estimator alike
            warnings.simplefilter("ignore", UnreachedNodesWarning)
            dist = np.array(self._label_distributions(graph, encoded, n_classes),
                            dtype=np.float64)
        unreached = self._unreached_mask(graph, encoded)
        self.n_unreached_ = int(unreached.sum())
        nodes = np.flatnonzero(unreached)
        self._unreached_fill = (nodes, self._unreached_proba(nodes, encoded, n_classes))
        if self.n_unreached_:
            warn_user(
                f"{type(self).__name__}: {self.n_unreached_} of {graph.n_nodes} nodes lie in "
                "connected components without a labelled node; no label reaches them, so they "
                "get the class prior (the labelled nodes' class frequencies, or the feature "
                "model's prediction where fit_graph got node features). Label a node in "
                "each component or connect the graph (larger k).",
                UnreachedNodesWarning
            )
        self._set_label_distributions(dist)
        return self

    def _class_mass_factors(self, dist, graph, labels, class_prior=None, rule=True):
        """The column factors of the class-mass rules over the unlabelled nodes a label
        reaches (labelled rows and unreached ones, which get the class prior after,
        :meth:`_unreached_proba`, neither count nor change). Returns ``(factors float[C],
        rows bool[n], match)``: the rows the factors scale and ``"masses"`` or ``"counts"``.

        ``class_prior``: the proportions wanted (default: the labelled counts with add-one
        smoothing, :func:`~graphssl.inference.optimize.baselines.propagation.
        labelled_class_proportions`, read from ``labels``, not from the rows of ``dist``).
        ``rule``: True matches the class masses (Zhu, Ghahramani & Lafferty 2003, Sec. 4;
        :func:`~graphssl.inference.optimize.baselines.propagation.class_mass_scale`),
        ``"counts"`` the argmax's class counts (:func:`~graphssl.inference.optimize.
        baselines.propagation.class_count_scale`), ``"auto"`` the masses unless their
        labelling gives some class more of those nodes than the labelled counts make
        plausible (:func:`~graphssl.inference.ordered_phase.collapsed_classes`, the
        ordered-phase test), then the counts."""
        from graphssl.inference.optimize.baselines.propagation import (
            class_count_scale,
            class_mass_scale,
            labelled_class_proportions,
        )
        from graphssl.inference.ordered_phase import collapsed_classes

        dist = np.asarray(dist, dtype=np.float64)
        labels = np.asarray(labels)
        n_classes = dist.shape[1]
        if class_prior is None:
            counts = np.bincount(labels[labels >= 0], minlength=n_classes)
            class_prior = labelled_class_proportions(counts)
        reached = ~self._unreached_mask(graph, labels)
        rows = (labels < 0) & reached
        if rule == "counts":
            return class_count_scale(dist[rows], class_prior), rows, "counts"
        factors = class_mass_scale(dist[rows], class_prior)
        if rule == "auto" and collapsed_classes(np.argmax(dist * factors, axis=1)[reached],
                                                labels[reached], n_classes).size:
            return class_count_scale(dist[rows], class_prior), rows, "counts"
        return factors, rows, "masses"

    def _class_mass_normalized(self, dist, graph, labels, class_prior=None,
                               match: str = "masses") -> np.ndarray:
        """``dist`` with the rows a label reaches scaled by :meth:`_class_mass_factors`
        (``match``: ``"masses"`` or ``"counts"``) and renormalised, as
        :func:`~graphssl.inference.optimize.baselines.propagation.class_mass_normalization`
        does."""
        if match not in ("masses", "counts"):
            raise ValueError(f"match: use 'masses' or 'counts', got {match!r}")
        factors, rows, _ = self._class_mass_factors(dist, graph, labels, class_prior,
                                                    True if match == "masses" else "counts")
        return _scaled_rows(dist, rows, factors)

    def _class_mass_decision(self, dist, graph, labels, proportions=None) -> np.ndarray:
        """The ``class_mass_normalize`` option (``"auto"``, True, ``"counts"`` or False) on
        ``dist`` (:meth:`_class_mass_factors`); False returns it unchanged.
        ``class_mass_match_`` records ``"masses"``, ``"counts"`` or None."""
        from graphssl.validation import check_class_mass_rule

        rule = check_class_mass_rule(self.class_mass_normalize)
        self.class_mass_match_ = None
        self._class_mass_scaling = None
        if rule is False:
            return dist
        factors, rows, self.class_mass_match_ = self._class_mass_factors(
            dist, graph, labels, proportions, rule)
        self._class_mass_scaling = (factors, rows)
        return _scaled_rows(dist, rows, factors)

    def _class_mass_rescaled(self, dist) -> np.ndarray:
        """``dist`` through the column factors of the last :meth:`_class_mass_decision`
        (e.g. one chain's marginals on the decision's scale); unchanged when it applied
        none."""
        scaling = getattr(self, "_class_mass_scaling", None)
        return np.array(dist, dtype=np.float64) if scaling is None else _scaled_rows(
            dist, scaling[1], scaling[0])

    def _check_chains_with(self, samples, model, labels, per_chain, graph,
                           lowest_energy=None) -> None:
        """``convergence_`` of ``samples`` (:func:`graphssl.diagnostics.check_convergence`:
        a warning when they fail, or leave many labels open), the labels' Monte-Carlo
        stability read from ``per_chain`` (``float[chains, n, C]``, each chain's marginals
        on the scale the labels are decided on); nodes no label reaches take the class
        prior, not the chains, and are not counted as open (their rows set to one decided
        class in every chain: an exact tie counts as open). ``lowest_energy``: the MAP
        search's, which fails chains that never moved above it."""
        from graphssl.diagnostics import check_convergence

        per_chain = np.array(per_chain, dtype=np.float64)
        unreached = self._unreached_mask(graph, np.asarray(labels))
        per_chain[:, unreached] = 0.0
        per_chain[:, unreached, 0] = 1.0
        self.convergence_ = check_convergence(
            samples, model=model, observed_labels=labels, label_marginals=per_chain,
            source=type(self).__name__, lowest_energy=lowest_energy)

    def _unreached_mask(self, graph, labels) -> np.ndarray:
        """``bool[n]``: unlabelled nodes in graph components without a labelled node."""
        return unreached_nodes(graph, labels >= 0)

    def _unreached_proba(self, nodes, labels, n_classes) -> np.ndarray:
        """Distribution of unreached ``nodes``: the class prior (labelled frequencies)."""
        prior = np.bincount(labels[labels >= 0], minlength=n_classes).astype(np.float64)
        return np.broadcast_to(prior / prior.sum(), (len(nodes), n_classes))

    def _set_label_distributions(self, dist) -> None:
        """``label_distributions_`` (unreached nodes filled in), ``transduction_`` and
        ``map_labels_`` (where the hook set ``_map_encoded``), in the values of ``classes_``;
        also called by estimators that update a fit (more draws)."""
        dist = np.array(dist, dtype=np.float64)
        nodes, fill = self._unreached_fill
        dist[nodes] = fill  # unreached nodes: the class prior (or the feature model's)
        dist = _normalized_rows(dist, type(self).__name__)
        self.label_distributions_ = dist
        self._decided_codes = np.asarray(self._decision(dist), dtype=np.int64)
        self.transduction_ = self.classes_[self._decided_codes]
        map_encoded = getattr(self, "_map_encoded", None)
        self._map_codes = None
        if map_encoded is not None:
            map_encoded = np.array(map_encoded, dtype=np.int64)
            map_encoded[nodes] = np.argmax(dist[nodes], axis=1)
            self._map_codes = map_encoded
            self.map_labels_ = self.classes_[map_encoded]

    def _reported_labels(self, kwargs: dict) -> dict:
        """``kwargs`` of :func:`graphssl.diagnostics.to_arviz` with ``constant_data``'s
        ``map_labels`` and ``posterior_mean_labels`` defaulting to what the fit reports
        (``map_labels_`` after the MAP search, ``transduction_`` after its decision rule, as
        class codes): the chains' best state and the marginals' argmax were stored instead
        (10 of 12 nodes apart after a search; 13 of 150 under class-mass normalisation)."""
        if getattr(self, "_map_codes", None) is not None:
            kwargs.setdefault("map_labels", self._map_codes)
        if getattr(self, "_decided_codes", None) is not None:
            kwargs.setdefault("posterior_mean_labels", self._decided_codes)
        return kwargs

    def score(self, X, y, sample_weight=None) -> float:
        """Accuracy of :meth:`predict` on the points of ``X`` that ``y`` labels; its
        unlabelled points (``-1`` / ``None`` / ``""`` / ``NaN``, as in :meth:`fit`) are not
        targets (scikit-learn's default scored them as misses, so ``cross_val_score`` of a
        semi-supervised split could never pass the labelled fraction)."""
        from sklearn.metrics import accuracy_score

        predicted = self.predict(X)
        rows, truth = labelled_values(y, len(predicted))
        if rows.size == 0:
            raise ValueError("y: no labelled point to score (every one is -1 / None / '' / "
                             "NaN); score against the true labels of some points")
        weights = None if sample_weight is None else np.asarray(sample_weight)[rows]
        return float(accuracy_score(truth, predicted[rows], sample_weight=weights))

    # ------------------------------------------------------------------ prediction
    def _decision(self, proba) -> np.ndarray:
        """Class codes from distributions (argmax)."""
        return np.argmax(proba, axis=1)

    def predict_proba(self, X=None):
        """Class distributions ``float[n, C]``: the fitted ones when ``X`` is None or the
        training features, else the inductive extension to the new points (a point within
        ``NEAR_TRAINING_RTOL`` = 1e-6 of a training point's norm, float32 rounding of it
        included, takes that point's fitted row). A new array each call: editing it leaves
        the model as it is."""
        check_is_fitted(self, "label_distributions_")
        if X is None:
            return self.label_distributions_.copy()
        if self.X_fit_ is None:
            raise ValueError(
                "X: this model was fitted with fit_graph (no feature graph); call "
                "predict_proba() without X for the transductive labels"
            )
        X = validate_data(self, X, reset=False, dtype=np.float64, ensure_all_finite=False)
        X = self.scaling_.transform(check_features(X, name="X"))
        if X.shape == self.X_fit_.shape and np.array_equal(X, self.X_fit_):
            return self.label_distributions_.copy()
        return self._predict_new(X)

    def predict(self, X=None):
        """Labels (values of ``classes_``): ``transduction_``, or induced for new ``X``."""
        if X is None:
            check_is_fitted(self, "label_distributions_")
            return self.transduction_.copy()
        codes = self._decision(self.predict_proba(X))
        return self.classes_[codes]

    def _predict_new(self, X):
        """Training points keep their fitted distribution (within ``NEAR_TRAINING_RTOL``
        of their norm: ``X.astype(np.float32)`` or ``X + 1e-9`` were induced from their
        neighbours instead, and Parzen then changed 6 of 120 training labels); the others
        are induced."""
        nn = NearestNeighbors(n_neighbors=1).fit(self.X_fit_)
        distances, indices = nn.kneighbors(X)
        norms = np.linalg.norm(self.X_fit_[indices[:, 0]], axis=1)
        same = distances[:, 0] <= NEAR_TRAINING_RTOL * norms
        proba = np.empty((X.shape[0], self.classes_.size))
        proba[same] = self.label_distributions_[indices[same, 0]]
        if not same.all():
            proba[~same] = self._induce(X[~same])
        return proba

    def _induce(self, X):
        k = min(int(self.k_ or 10), self.X_fit_.shape[0])
        nn = NearestNeighbors(n_neighbors=k).fit(self.X_fit_)
        distances, indices = nn.kneighbors(X)
        with np.errstate(over="ignore", divide="ignore"):  # sigma far from the distances
            log_w = self._induction_log_weights(distances, nn, k, indices)
        top = log_w.max(axis=1, keepdims=True)
        # every weight underflowed (sigma far below the distances): the limit is the nearest
        nearest = distances == distances.min(axis=1, keepdims=True)
        log_w = np.where(np.isfinite(top), log_w - np.where(np.isfinite(top), top, 0.0),
                         np.where(nearest, 0.0, -np.inf))
        w = np.exp(log_w)
        w /= w.sum(axis=1, keepdims=True)
        return np.einsum("ik,ikc->ic", w, self.label_distributions_[indices])

    def _induction_log_weights(self, distances, nn, k, indices):
        options = getattr(self, "_induction_graph", {"sigma": self.sigma,
                                                     "weight": self.weight})
        weight, sigma = options["weight"], options["sigma"]
        if weight != "gaussian":
            return np.zeros_like(distances)
        if sigma == "local":  # a new point's own width and its neighbours' (fit's rule)
            if self._induction_scale is None:
                k1 = min(k + 1, self.X_fit_.shape[0])
                train_d, _ = nn.kneighbors(self.X_fit_, n_neighbors=k1)
                self._induction_scale = local_widths(train_d[:, 1:])
            widths = local_widths(distances)
            return -distances**2 / (2.0 * widths[:, None] * self._induction_scale[indices])
        if self._induction_scale is None:
            if sigma == "walder":
                scale = walder_omega(self.X_fit_)
            elif sigma in (None, "kth_over_3"):
                k1 = min(k + 1, self.X_fit_.shape[0])
                train_d, _ = nn.kneighbors(self.X_fit_, n_neighbors=k1)
                try:
                    scale = 1.0 / (2.0 * sigma_kth_neighbor(train_d[:, 1:]) ** 2)
                except ValueError:  # every neighbour a duplicate: weigh them equally
                    scale = 0.0
            else:  # a number: exp(-(d / sigma)^2 / 2), kept as the width (1 / (2 sigma^2)
                # under- or overflows for sigma near 1e+-160)
                return -0.5 * (distances / float(sigma)) ** 2
            self._induction_scale = scale
        return -self._induction_scale * distances**2


def _n_labels(y) -> int:
    shape = np.shape(y)
    if len(shape) == 0:
        raise ValueError("y: expected one label per node, got a scalar")
    return int(shape[0])


def _normalized_rows(dist: np.ndarray, who: str) -> np.ndarray:
    """Rows clipped to >= 0 and scaled to sum 1 (rounding); a row that is not finite or
    sums to 0 is a defect of the model's inference and raises."""
    if dist.ndim != 2:
        raise RuntimeError(f"{who}: the model returned distributions of shape {dist.shape}")
    dist = np.clip(dist, 0.0, None)
    total = dist.sum(axis=1, keepdims=True)
    bad = ~np.isfinite(total[:, 0]) | (total[:, 0] <= 0)
    if bad.any():
        raise RuntimeError(
            f"{who}: {int(bad.sum())} label distributions are not finite or are all zero "
            "(an inference defect; please report it with the parameters used)"
        )
    return dist / total


def _scaled_rows(dist, rows, factors) -> np.ndarray:
    """``dist`` (float64 copy) with ``rows`` multiplied column by column by ``factors`` and
    renormalised (class mass normalisation's last step)."""
    from graphssl.inference.optimize.baselines.common import normalize_scores

    out = np.array(dist, dtype=np.float64)
    out[rows] = normalize_scores(out[rows] * factors)
    return out
