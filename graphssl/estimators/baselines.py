"""Estimators for the closed-form baselines of :mod:`graphssl.inference.optimize.baselines`.

Each class adds its model's parameters to the graph options of
:class:`~graphssl.estimators.base.GraphSSLClassifier` (``k, symmetrize, weight, sigma``
and ``standardize``).
"""

from __future__ import annotations

import numpy as np

from graphssl._warnings import warn_user
from graphssl.estimators.base import GraphSSLClassifier
from graphssl.estimators.feature_prior import FeaturePriorMixin
from graphssl.inference.mcmc.statistics import ConvergenceWarning
from graphssl.inference.optimize.baselines import (
    harmonic_function,
    knn_graph_classifier,
    lgc,
    parzen_window,
)
from graphssl.inference.optimize.feature_prior import (
    DEFAULT_ETA_GRID,
    DEFAULT_RHO_GRID,
    harmonic_with_prior,
    lgc_with_prior,
)
from graphssl.validation import check_class_mass_rule, check_count, check_flag, check_real

__all__ = [
    "HarmonicFunctionClassifier",
    "LGCClassifier",
    "ParzenWindowClassifier",
    "KNNGraphClassifier",
]

# Parzen's diffusion time: beyond this the heat kernel has mixed on any graph whose spectral
# gap exceeds ~1e-5 (every unlabelled row tends to its component's stationary p.m.f.), the
# sparse path's cost (expm_multiply) grows linearly with tau (166 s at tau = 1e6, n = 600),
# and near 1e12 the dense path's exp(-tau lambda / 2) overflows on roundoff-negative
# eigenvalues (NaN rows, read as uniform)
TAU_MAX = 1e6


def _check_tol(tol) -> float:
    """The CG stopping tolerance: finite in (0, 1) (nan, inf, 2.0 or -1 ran 0 iterations and
    returned unsolved rows; 0 made ``jax_cg`` iterate until its residual was NaN)."""
    try:
        return check_real(tol, "tol", low=0.0, high=1.0, low_open=True, high_open=True)
    except ValueError:
        raise ValueError(f"tol: the CG stopping tolerance (relative residual), a finite number "
                         f"in (0, 1) such as 1e-5 (method='direct' solves exactly), got "
                         f"{tol!r}") from None


def _reported_solve(solve, method, tol, who):
    """``solve(method) -> (scores, SolveInfo)``; a ``ConvergenceWarning`` when the solver did
    not reach ``tol``. A solve that broke down (non-finite residual: its rows are not a
    solution) is redone with ``method="direct"``."""
    scores, info = solve(method)
    if info.converged:
        return scores
    if not np.isfinite(info.residual) and info.method != "direct":
        warn_user(f"{who}: the {info.method!r} solve broke down after {info.iterations} "
                  f"iterations (residual {info.residual}) at tol={tol!r}; re-solved with "
                  "method='direct'. Raise tol (e.g. 1e-5) or pass method='direct'.",
                  ConvergenceWarning)
        return solve("direct")[0]
    warn_user(f"{who}: the {info.method!r} solve stopped after {info.iterations} iterations "
              f"(its maxiter) at relative residual {info.residual:.3g}, above tol={tol!r}; the "
              "class distributions are not fully solved. Raise tol or pass method='direct'.",
              ConvergenceWarning)
    return scores


class HarmonicFunctionClassifier(FeaturePriorMixin, GraphSSLClassifier):
    """Harmonic function / GRF (Zhu, Ghahramani & Lafferty 2003); see
    :func:`graphssl.inference.optimize.baselines.harmonic_function` for ``method``,
    ``class_mass_normalize``, ``normalize_graph`` and ``tol``.

    With node features (``fit_graph(graph, y, X=features)``, ``features="auto"``, the
    default) the feature model's predictions ``h_i`` (:mod:`graphssl.estimators.feature_prior`)
    are an external classifier attached by Zhu et al.'s dongles (Sec. 5 of the paper):
    ``f_U = (I - (1 - eta) P_UU)^-1 ((1 - eta) P_UL f_L + eta h_U)``
    (:func:`~graphssl.inference.optimize.feature_prior.harmonic_with_prior`), so every
    unlabelled value is ``(1 - eta)`` times its neighbours' mean plus ``eta h_i``, and a node
    no label reaches gets ``h_i`` smoothed within its component (degree 0: ``h_i``).
    ``prior_weight``: ``eta`` in (0, 1], or ``"cv"`` (default): chosen from
    ``DEFAULT_ETA_GRID`` by 5-fold cross-validated log likelihood of the labelled nodes
    (``prior_weight_``, ``prior_weight_scores_``). ``class_mass_normalize`` then normalises
    to the feature model's class proportions (mean ``h`` over the unlabelled nodes) instead
    of the labelled frequencies. ``features=None``: the graph-only model. ``random_state``:
    seed of the feature model's cross-validation folds (None, an int or a Generator).

    ``class_mass_normalize=True`` (default since 2026-11-29; Zhu et al.'s Sec. 4 decision
    rule): the unlabelled columns scaled to the labelled frequencies (add-one smoothed,
    :func:`~graphssl.inference.optimize.baselines.propagation.labelled_class_proportions`),
    then each row renormalised. Against False on the same splits (``benchmarks/bench_option.py``,
    paired, 10 splits, ``bench_option_hf_cmn*.json``): panel mean 86.6 -> 87.1 (16 sets;
    Text-10 50.8 -> 59.5, COIL2-10 67.1 -> 69.0; Digit1-10 82.3 -> 78.5), held-out mean
    63.4 -> 65.9 (18 sets, 3 splits; ringnorm 50.9 -> 86.9, ionosphere 77.5 -> 85.8,
    monks3 67.5 -> 73.2; monks2 58.1 -> 53.8). False gives the harmonic function's argmax.
    ``class_mass_normalize="auto"`` (the default since later on 2026-11-29;
    :meth:`~graphssl.estimators.base.GraphSSLClassifier._class_mass_decision`): the same
    rule unless its labelling gives some class more of the reached unlabelled nodes than
    the labelled counts make plausible (the ordered-phase test, :func:`~graphssl.inference.
    ordered_phase.collapsed_classes`); then the column factors under which the argmax gives
    each class its smoothed labelled share (``"counts"``, :func:`~graphssl.inference.
    optimize.baselines.propagation.class_count_scale`). Where few labels leave the
    harmonic function nearly flat far from them, matching masses sends most nodes to the
    class the target favours. Against True (``bench_option_hf_auto.json``, paired, 10
    splits): panel mean 87.3 -> 88.3 (16 sets; Text-10 59.5 -> 68.6, Text-100 71.9 ->
    75.2, Digit1-10 80.8 -> 83.2, USPS-10 82.3 -> 83.8; no set loses); held-out, read
    once (``bench_defaults_heldout_hf_auto.json``, 3 splits): g241n 49.7 -> 54.7, g241c
    52.8 -> 56.1, the other 16 sets unchanged.

    >>> clf = HarmonicFunctionClassifier(k=10).fit(X, y)        # doctest: +SKIP
    >>> clf.transduction_                                       # doctest: +SKIP
    """

    _host_graph = True  # scipy solve (graphssl.estimators.base)

    def __init__(
        self,
        k=10,
        symmetrize="max",
        weight="gaussian",
        sigma="local",
        *,
        method="auto",
        class_mass_normalize="auto",
        normalize_graph=False,
        tol=1e-5,
        features="auto",
        prior_weight="cv",
        random_state=0,
        standardize="auto",
    ):
        super().__init__(k=k, symmetrize=symmetrize, weight=weight, sigma=sigma,
                         standardize=standardize)
        self.method = method
        self.class_mass_normalize = class_mass_normalize
        self.normalize_graph = normalize_graph
        self.tol = tol
        self.features = features
        self.prior_weight = prior_weight
        self.random_state = random_state

    def _label_distributions(self, graph, labels, n_classes):
        tol = _check_tol(self.tol)
        normalize_graph = check_flag(self.normalize_graph, "normalize_graph")
        prior = self._fit_feature_prior(labels, n_classes, weight_range=(0.0, 1.0, False))
        check_class_mass_rule(self.class_mass_normalize)
        if prior is None:
            def solve(method):
                return harmonic_function(graph, labels, n_classes=n_classes, method=method,
                                         normalize_graph=normalize_graph, tol=tol,
                                         return_info=True)

            f = _reported_solve(solve, self.method, tol, type(self).__name__)
            return self._class_mass_decision(f, graph, labels)

        def solve_with_prior(known, h, eta, method=self.method, return_info=False):
            return harmonic_with_prior(graph, known, h, eta, n_classes=n_classes, method=method,
                                       tol=tol, normalize_graph=normalize_graph,
                                       return_info=return_info)

        eta = self._prior_weight(solve_with_prior, labels, prior, DEFAULT_ETA_GRID)
        f = _reported_solve(
            lambda method: solve_with_prior(labels, prior.probs, eta, method, True),
            self.method, tol, type(self).__name__)
        return self._class_mass_decision(f, graph, labels, prior.probs[labels < 0].mean(axis=0))

    def _unreached_mask(self, graph, labels):
        """With a feature prior every node is reached (its dongle holds ``h_i``)."""
        if getattr(self, "feature_prior_", None) is not None:
            return np.zeros(graph.n_nodes, dtype=bool)
        return super()._unreached_mask(graph, labels)


class LGCClassifier(FeaturePriorMixin, GraphSSLClassifier):
    """Local and global consistency (Zhou et al. 2004), ``F* = (1-alpha)(I - alpha S)^-1 Y``;
    see :func:`graphssl.inference.optimize.baselines.lgc`.

    ``alpha=0.9`` by default (Zhou et al. use 0.99): near 1 the solution follows the leading
    eigenvector of ``S``, so the labelled nodes of highest degree take over whole classes.
    Measured on the default panel (``benchmarks/bench_defaults.py``, 10 splits, paired):
    0.9 against 0.99 gained on 10 of 14 sets, Text-10 52.7 -> 63.4, Text-100 58.1 -> 73.7,
    USPS-100 87.5 -> 95.2, wine 86.1 -> 92.7, and lost at most 1.2 points (USPS-10, within its
    standard error).

    With node features (``fit_graph(graph, y, X=features)``, ``features="auto"``, the
    default) Zhou et al.'s fit term also pulls every unlabelled row toward the feature
    model's prediction ``h_i`` (:mod:`graphssl.estimators.feature_prior`), with weight
    ``rho`` relative to a label's: ``(alpha (I - S) + (1 - alpha) C) F = (1 - alpha) C Y``,
    ``Y_U = h_U``, ``C = diag(1 on labels, rho elsewhere)``
    (:func:`~graphssl.inference.optimize.feature_prior.lgc_with_prior`); a node no label
    reaches gets ``h_i`` smoothed within its component (degree 0: ``h_i``).
    ``prior_weight``: ``rho > 0``, or ``"cv"`` (default): chosen from ``DEFAULT_RHO_GRID``
    by 5-fold cross-validated log likelihood of the labelled nodes (``prior_weight_``,
    ``prior_weight_scores_``). ``features=None``: the graph-only model. ``random_state``:
    seed of the feature model's cross-validation folds (None, an int or a Generator).
    """

    _host_graph = True  # scipy solve (graphssl.estimators.base)

    def __init__(
        self,
        k=10,
        symmetrize="max",
        weight="gaussian",
        sigma="kth_over_3",
        *,
        alpha=0.9,
        method="auto",
        tol=1e-5,
        features="auto",
        prior_weight="cv",
        random_state=0,
        standardize="auto",
    ):
        super().__init__(k=k, symmetrize=symmetrize, weight=weight, sigma=sigma,
                         standardize=standardize)
        self.alpha = alpha
        self.method = method
        self.tol = tol
        self.features = features
        self.prior_weight = prior_weight
        self.random_state = random_state

    def _label_distributions(self, graph, labels, n_classes):
        alpha = check_real(self.alpha, "alpha", low=0.0, high=1.0, low_open=True,
                           high_open=True)
        tol = _check_tol(self.tol)
        weight = self.prior_weight
        if not isinstance(weight, str) and not (
                isinstance(weight, (int, float, np.floating, np.integer))
                and not isinstance(weight, bool) and np.isfinite(weight) and weight > 0):
            raise ValueError(f"prior_weight: must be 'cv' or a finite number > 0, got "
                             f"{weight!r}")
        prior = self._fit_feature_prior(labels, n_classes, weight_range=(0.0, np.inf, False))
        if prior is None:
            def solve_lgc(method):
                return lgc(graph, labels, alpha=alpha, n_classes=n_classes, method=method,
                           tol=tol, return_info=True)

            return _reported_solve(solve_lgc, self.method, tol, type(self).__name__)

        def solve_with_prior(known, h, rho, method=self.method, return_info=False):
            return lgc_with_prior(graph, known, h, rho, alpha=alpha, n_classes=n_classes,
                                  method=method, tol=tol, return_info=return_info)

        rho = self._prior_weight(solve_with_prior, labels, prior, DEFAULT_RHO_GRID)
        return _reported_solve(
            lambda method: solve_with_prior(labels, prior.probs, rho, method, True),
            self.method, tol, type(self).__name__)

    def _unreached_mask(self, graph, labels):
        """With a feature prior every node is reached (its fit term pulls it toward ``h_i``)."""
        if getattr(self, "feature_prior_", None) is not None:
            return np.zeros(graph.n_nodes, dtype=bool)
        return super()._unreached_mask(graph, labels)


class ParzenWindowClassifier(GraphSSLClassifier):
    """Graph Parzen window of heat-kernel diffusions (Walder, Sec. 5 baseline); defaults
    follow Walder: k = 10, ``sigma="walder"``, tau = 5, uniform class proportions.

    ``tau``: the diffusion time, a finite number in (0, ``TAU_MAX`` = 1e6]. ``class_prior``:
    None (uniform), ``"labelled"`` (the labelled frequencies) or C non-negative proportions
    summing to 1, in the order of ``classes_``."""

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
        standardize="auto",
    ):
        super().__init__(k=k, symmetrize=symmetrize, weight=weight, sigma=sigma,
                         standardize=standardize)
        self.tau = tau
        self.class_prior = class_prior
        self.method = method

    def _label_distributions(self, graph, labels, n_classes):
        try:
            tau = check_real(self.tau, "tau", low=0.0, high=TAU_MAX, low_open=True)
        except ValueError as error:
            raise ValueError(f"{error}; the diffusion time (Walder: 5). At 0 no label "
                             "diffuses; far beyond the graph's mixing time every row tends "
                             "to uniform") from None
        _check_class_prior(self.class_prior, n_classes)
        return parzen_window(
            graph,
            labels,
            tau=tau,
            n_classes=n_classes,
            class_prior=self.class_prior,
            method=self.method,
        )


def _check_class_prior(class_prior, n_classes: int) -> None:
    """None, ``"labelled"`` or ``n_classes`` finite non-negative proportions summing to 1
    (``[1, 2]`` was normalised silently, ``[1e300, 1e300]`` became uniform rows)."""
    if class_prior is None or (isinstance(class_prior, str) and class_prior == "labelled"):
        return
    wanted = (f"class_prior: None, 'labelled' or {n_classes} non-negative class proportions "
              "summing to 1 (in the order of classes_; divide weights by their sum)")
    if isinstance(class_prior, (str, bytes)):
        raise ValueError(f"{wanted}, got {class_prior!r}")
    try:
        eta = np.asarray(class_prior, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{wanted}, got {class_prior!r}") from None
    if (eta.shape != (n_classes,) or not np.all(np.isfinite(eta)) or np.any(eta < 0)
            or abs(eta.sum() - 1.0) > 1e-6):
        raise ValueError(f"{wanted}, got {class_prior!r}")


class KNNGraphClassifier(GraphSSLClassifier):
    """Vote of the ``n_neighbors`` labelled nodes nearest along the graph (shortest paths);
    see :func:`graphssl.inference.optimize.baselines.knn_graph_classifier`."""

    _host_graph = True  # shortest paths in scipy (graphssl.estimators.base)

    def __init__(
        self,
        k=10,
        symmetrize="max",
        weight="gaussian",
        sigma="local",
        *,
        n_neighbors=3,
        edge_length="inverse_weight",
        standardize="auto",
    ):
        super().__init__(k=k, symmetrize=symmetrize, weight=weight, sigma=sigma,
                         standardize=standardize)
        self.n_neighbors = n_neighbors
        self.edge_length = edge_length

    def _label_distributions(self, graph, labels, n_classes):
        try:
            n_neighbors = check_count(self.n_neighbors, "n_neighbors", least=1)
        except ValueError:
            raise ValueError(f"n_neighbors: the number of labelled nodes that vote, a whole "
                             f"number >= 1 (k is the graph's neighbour count), got "
                             f"{self.n_neighbors!r}") from None
        return knn_graph_classifier(
            graph,
            labels,
            k=n_neighbors,
            n_classes=n_classes,
            edge_length=self.edge_length,
        )
