"""``PottsClassifier``: the Potts model of Bergamim & Breve (2022) behind the sklearn API.

Model (``graphssl.models.potts``): ``P(s) ∝ exp(beta (sum W_ij delta(s_i, s_j) + sum theta_is
delta(s_i, s)))`` on the paper's graph (kNN, Eq. 7 sigma, min-symmetrised Eq. 8, row-normalised
Eq. 9), labelled points held by the unit field of Eq. 4 (or clamped, Eq. 10).
Inference (``graphssl.inference``): naive mean field (Eqs. 15-16, Alg. 3.1), or the
posterior sampled by Gibbs / Swendsen-Wang, which gives posterior-mean marginals and MAP
labels with R-hat / ESS (``to_arviz()``) where mean field is a single over-confident guess.
beta: a number, or tuned by the mode probability (Eq. 27) with ``gamma = (1 + q) / (2 q)``
(``"nmfA"``) or ``gamma = 1`` (``"nmfB"``); the default ``"auto"`` is ``"nmfB"`` checked for
an ordered (collapsed) phase and lowered when held-out labels say so
(:mod:`graphssl.inference.optimize.potts_beta`).
"""

from __future__ import annotations

import dataclasses
import numbers

import jax
import numpy as np

from graphssl._warnings import warn_user
from graphssl.estimators.base import GraphSSLClassifier
from graphssl.estimators.feature_prior import feature_model_folds
from graphssl.graph import row_normalize
from graphssl.inference.optimize.mean_field import (
    HOST_MAX_NODES,
    MeanFieldOptions,
    mean_field_labels,
    naive_mean_field,
)
from graphssl.models.potts import PottsModel, default_k, reconnect_unreached
from graphssl.models.potts_mode_probability import BETA_PRESETS, log_mode_probability, solve_beta
from graphssl.validation import check_count, check_flag, check_real

__all__ = ["PottsClassifier"]

_INFERENCE = ("mean_field", "gibbs", "swendsen_wang")
BETA_MAX = 1e8  # larger beta: the zero-temperature limit (see _resolve_beta)
_NORMALIZE = ("row", "symmetric", None)


class PottsClassifier(GraphSSLClassifier):
    """Potts-model transduction with naive mean field or MCMC (Bergamim & Breve 2022).

    Parameters:
      k: kNN neighbours; None = ``log2 N`` (the paper's choice, Sec. 5).
      symmetrize, weight, sigma: graph options (defaults: the paper's Eqs. 6 and 8, with
        ``sigma="local"``: Eq. 7's width per point, its own k-th neighbour distance / 3,
        instead of the mean over points, ``"kth_over_3"``: better on the default panel,
        see ``GraphSSLClassifier``);
        unreached: ``"reconnect"`` (default) or ``"keep"``: what ``fit(X, y)`` does with
        the points that the mutual kNN graph (``symmetrize="min"``, Eq. 8) leaves in a
        component without a labelled point. ``"keep"`` is the paper's graph (they get the
        class prior); ``"reconnect"`` gives them back their edges of the union kNN graph
        (:func:`graphssl.models.potts.reconnect_unreached`), every other edge stays
        mutual. Measured (mean field, 5 splits, 10 labels a class or the shipped splits):
        iris 90.0 -> 94.3, wine 85.4 -> 92.7, breast_cancer 85.0 -> 90.9, digits
        94.1 -> 95.3, two moons 96.1 -> 97.5; Digit1, COIL2 within 0.1; USPS (10 labels)
        87.9 -> 86.5, where the class prior the unreached points got is its 80 % class.
        standardize: feature scaling (``"auto"``, True, False; :mod:`graphssl.scaling`).
      beta: inverse temperature: ``"auto"`` (default), a positive number, ``"nmfA"`` or
        ``"nmfB"`` (Eq. 27 with gamma = (1+q)/(2q) or 1, solved at the labelled rate of
        ``y``); numbers above ``BETA_MAX = 1e8`` are the zero-temperature limit and are used
        as 1e8 (a warning); a beta so small that every unlabelled marginal comes out
        uniform (the infinite-temperature limit) is a warning too. ``"auto"``: the
        ``"nmfB"`` beta, unless its mean-field solution shows the ordered phase -- some
        class wins a share of the unlabelled nodes above the
        ``1 - 10^-3 / q`` quantile of its share's posterior ``Beta(n_c + 1, L - n_c + 1)``
        given the labelled counts -- and then the beta of ``beta_nmfB * 2^-j`` (j = 0..3)
        with the best 5-fold held-out accuracy on the labelled nodes, if it beats
        ``beta_nmfB`` by more than 2 paired standard errors
        (:mod:`graphssl.inference.optimize.potts_beta`; CiteSeer's cosine kNN graph of its
        word indicators, k = 10: 963 of 1000 test nodes in one class and 20.0 % at
        ``"nmfB"``, 54.7 % at ``"auto"``).
      normalize: ``"row"`` (Eq. 9, default), ``"symmetric"`` (``D^-1/2 W D^-1/2``, as the
        authors' code) or None.
      clamp: False = unit fields on labelled points (Eqs. 11-12, the paper's NMF); True =
        labelled points frozen, zero field (Eq. 10).
      inference: ``"mean_field"``, ``"gibbs"`` (chromatic Gibbs) or ``"swendsen_wang"``.
      order, damping, tol, max_iter: mean-field options (:class:`MeanFieldOptions`);
        ``order="auto"``: sequential (Gauss-Seidel, the node loop of Alg. 3.1) on CPU and,
        up to ``HOST_MAX_NODES`` (10^4) nodes, on any device; chromatic (Gauss-Seidel by
        colour classes, all nodes of a class at once) on accelerators above that;
        ``"parallel"`` is the damped Jacobi update. ``damping`` in (0, 1], ``tol`` > 0,
        ``max_iter`` a whole number >= 1. The Gauss-Seidel orders run in NumPy up
        to 10^4 nodes (the same sweep, level by level:
        :mod:`graphssl.inference.optimize.mean_field_host`): ``fit(X, y)`` then builds a
        host graph, starts no JAX back end and compiles nothing (measured faster in a new
        process); above that they are compiled.
      n_chains, n_samples, burn_in, thin: MCMC options (whole numbers; ``burn_in`` >= 0,
        the others >= 1).
      random_state: None, an int or a ``numpy.random.Generator`` (seed of the chains).
      features: ``"auto"`` (default): when ``fit_graph(graph, y, X=features)`` gives node
        features (``fit(X, y)`` keeps the kNN-graph model), the model is the feature-unary
        Potts CRF of :mod:`graphssl.inference.optimize.feature_potts`: field
        ``(alpha / beta) log p(y_i | x_i)`` from a cross-fitted logistic regression,
        ``alpha`` and ``beta`` learnt by pseudo-likelihood of the labelled nodes (``beta``,
        ``normalize``, ``clamp`` are then unused), labelled nodes clamped; a node no label
        reaches keeps the feature model's prediction (smoothed within its component).
        ``None``: ignore node features (the paper's graph-only model).

    The samplers need a symmetric coupling: a row-normalised W (Eq. 9) is replaced by
    ``(W + W^T) / 2`` for them, whose energy is the one ``PottsModel.energy`` evaluates.

    Attributes after fit (besides the base class's): ``n_reconnected_`` (``fit``: nodes
    given their union-kNN edges by ``unreached="reconnect"``), ``beta_``, ``beta_selection_``
    (``beta="auto"``: a :class:`~graphssl.inference.optimize.potts_beta.BetaSelection`, the
    flagged classes and, when flagged, the held-out accuracies of the grid in
    ``.cross_validation``; None otherwise), ``model_``,
    ``log_mode_probability_`` (``(1/N) ln Gamma`` of the mean-field solution, Eqs. 21-22),
    ``mean_field_`` and ``mean_field_info_`` (mean field), ``samples_``, ``map_labels_``
    (MCMC: the lowest energy found by a MAP search over the chains' best draw, ICM and
    alpha-expansion, energies side by side in ``map_search_``
    (:class:`~graphssl.inference.optimize.map_search.MapSearchInfo`), a verdict on any
    MAP / posterior-mean disagreement in ``map_report_``
    (:class:`~graphssl.inference.optimize.map_search.MapReport`: ``.verdict``,
    ``.explanation``); ``label_distributions_`` are
    then posterior-mean marginals) and ``convergence_``
    (MCMC: R-hat / ESS of the energy, class sizes and co-assignment,
    :func:`graphssl.diagnostics.check_convergence`; a ``ConvergenceWarning`` names the fix
    when R-hat > 1.01 or ESS < 100).
    """

    def __init__(
        self,
        k=None,
        symmetrize="min",
        weight="gaussian",
        sigma="local",
        *,
        beta="auto",
        normalize="row",
        clamp=False,
        inference="mean_field",
        order="auto",
        damping=0.5,
        tol=1e-3,
        max_iter=10_000,
        n_chains=4,
        n_samples=500,
        burn_in=100,
        thin=1,
        random_state=0,
        features="auto",
        standardize="auto",
        unreached="reconnect",
    ):
        super().__init__(k=k, symmetrize=symmetrize, weight=weight, sigma=sigma,
                         standardize=standardize)
        self.features = features
        self.unreached = unreached
        self.beta = beta
        self.normalize = normalize
        self.clamp = clamp
        self.inference = inference
        self.order = order
        self.damping = damping
        self.tol = tol
        self.max_iter = max_iter
        self.n_chains = n_chains
        self.n_samples = n_samples
        self.burn_in = burn_in
        self.thin = thin
        self.random_state = random_state

    # ------------------------------------------------------------------ k = log2 N
    def _default_k(self, n: int) -> int:
        return default_k(n)

    def _graph_from_features(self, X, labels):
        """The kNN graph; with ``symmetrize="min"`` and ``unreached="reconnect"`` the nodes it
        leaves without a label get their union-kNN edges back (``n_reconnected_``)."""
        if self.unreached not in ("reconnect", "keep"):
            raise ValueError(f"unreached: use 'reconnect' or 'keep', got {self.unreached!r}")
        from graphssl.graph import knn_graph, unreached_nodes

        self.n_reconnected_ = 0
        on_host = self._host_mean_field(X.shape[0])
        if self.unreached == "keep" or self.symmetrize != "min":
            return knn_graph(X, self.k_, symmetrize=self.symmetrize, weight=self.weight,
                             sigma=self.sigma, on_host=on_host)
        from graphssl.neighbors import knn_search

        # one neighbour search for both graphs (it is most of the cost of a fit at n >= 10^4)
        neighbors = knn_search(X, self.k_)
        options = dict(weight=self.weight, sigma=self.sigma, neighbors=neighbors,
                       on_host=on_host)
        graph = knn_graph(X, self.k_, symmetrize="min", **options)
        if not unreached_nodes(graph, labels >= 0).any():
            return graph
        union = knn_graph(X, self.k_, symmetrize="max", **options)
        graph, self.n_reconnected_ = reconnect_unreached(graph, union, labels >= 0)
        return graph

    # ------------------------------------------------------------------ checks
    def _check_params(self):
        if self.inference not in _INFERENCE:
            raise ValueError(f"inference: got {self.inference!r}; use one of {_INFERENCE}")
        if self.normalize not in _NORMALIZE:
            raise ValueError(f"normalize: got {self.normalize!r}; use 'row', 'symmetric' or None")
        beta = self.beta
        if isinstance(beta, str):
            if beta not in ("auto", *BETA_PRESETS):
                raise ValueError(f"beta: unknown preset {beta!r}; use 'auto', "
                                 f"{BETA_PRESETS} or a number")
        elif (isinstance(beta, bool) or not isinstance(beta, numbers.Real)
              or not np.isfinite(beta) or beta <= 0):
            raise ValueError(f"beta: must be a positive number or a preset, got {beta!r}")
        if self.order not in ("auto", "sequential", "parallel", "chromatic"):
            raise ValueError(f"order: got {self.order!r}; use 'auto', 'sequential', "
                             "'parallel' or 'chromatic'")
        check_flag(self.clamp, "clamp")
        # the mean-field options (every route starts from mean field), named as parameters
        check_real(self.damping, "damping", low=0.0, high=1.0, low_open=True)
        check_real(self.tol, "tol", low=0.0, low_open=True)
        check_count(self.max_iter, "max_iter", least=1)
        # the MCMC options, checked before any work (n_samples=0 would fail after sampling)
        check_count(self.n_chains, "n_chains", least=1)
        check_count(self.n_samples, "n_samples", least=1)
        check_count(self.burn_in, "burn_in", least=0)
        check_count(self.thin, "thin", least=1)

    def _validate_graph_params(self, n: int) -> int:
        self._check_params()  # fit(X, y): before the graph is built
        return super()._validate_graph_params(n)

    def _resolve_beta(self, labels, n_classes) -> float:
        if isinstance(self.beta, str):
            preset = "nmfB" if self.beta == "auto" else self.beta
            return solve_beta(preset, float(np.mean(labels >= 0)), n_classes)
        if self.beta > BETA_MAX:
            warn_user(
                f"beta: {self.beta:.3g} exceeds {BETA_MAX:.0e}; using {BETA_MAX:.0e}, the same "
                "zero-temperature limit (beta x coupling differences beyond it saturate every "
                "marginal, and float32 cannot hold beta near 1e38)", UserWarning)
            return BETA_MAX
        return float(self.beta)

    def _normalized(self, graph):
        if self.normalize == "row":
            return row_normalize(graph)
        if self.normalize == "symmetric":
            deg = np.asarray(graph.degrees())
            inv = np.where(deg > 0, 1.0 / np.sqrt(np.where(deg > 0, deg, 1.0)), 0.0)
            s, r = np.asarray(graph.senders), np.asarray(graph.receivers)
            return dataclasses.replace(graph, weights=graph.weights * inv[s] * inv[r])
        return graph

    def _host_mean_field(self, n_nodes: int) -> bool:
        """Whether a fit on ``n_nodes`` points is mean field alone, in NumPy (a
        Gauss-Seidel ``order``, at most ``HOST_MAX_NODES``): ``fit(X, y)`` then builds a
        host graph, so the model stays on the host and no JAX back end starts."""
        return (self.inference == "mean_field" and self.order != "parallel"
                and n_nodes <= HOST_MAX_NODES)

    def _mean_field_options(self, host: bool = False) -> MeanFieldOptions:
        """``host``: the graph-only mean field in NumPy (:meth:`_host_mean_field`)."""
        order = self.order
        if order == "auto" and host:
            order = "sequential"  # engine "auto": in NumPy at this size (mean_field_host)
        elif order == "auto":
            order = "sequential" if jax.default_backend() == "cpu" else "chromatic"
        return MeanFieldOptions(
            order=order, damping=check_real(self.damping, "damping", low=0.0, high=1.0,
                                            low_open=True),
            tol=check_real(self.tol, "tol", low=0.0, low_open=True),
            max_iter=check_count(self.max_iter, "max_iter", least=1))

    # ------------------------------------------------------------------ the fit
    def _label_distributions(self, graph, labels, n_classes):
        self._check_params()
        if self.features not in ("auto", None):
            raise ValueError(f"features: use 'auto' or None, got {self.features!r}")
        given_graph = getattr(self, "X_fit_", None) is None  # fit_graph, not fit(X, y)
        if self.features == "auto" and given_graph and getattr(self, "X_graph_", None) is not None:
            n_folds = feature_model_folds(type(self).__name__, labels)
            if n_folds is not None:
                return self._feature_potts(graph, labels, n_classes, n_folds)
        self.feature_fit_ = None
        self.beta_ = self._resolve_beta(labels, n_classes)
        coupling = self._normalized(graph)

        def build(fold_labels, beta):
            # a row-normalised W (Eq. 9) is directed by design: the model's couplings are
            # (W + W^T) / 2, the directed W is kept for the paper's mean field (Eq. 16)
            return PottsModel.from_labels(coupling, fold_labels, n_classes, beta=beta,
                                          clamp=check_flag(self.clamp, "clamp"),
                                          asymmetric="symmetrize")

        model = build(labels, self.beta_)
        host = self._host_mean_field(graph.n_nodes)
        solution, info = naive_mean_field(model, options=self._mean_field_options(host))
        modes = mean_field_labels(solution, model.unary_logits())
        self.beta_selection_ = None
        if self.beta == "auto":
            model, solution, info, modes = self._check_ordered_phase(
                build, labels, n_classes, model, solution, info, modes)
        if not isinstance(self.beta, str):
            _warn_if_uniform(solution.marginals, labels, self.beta_)
        self.model_ = model
        self.mean_field_, self.mean_field_info_ = solution, info
        self.n_iter_ = int(info.iterations)
        self.log_mode_probability_ = float(
            log_mode_probability(solution.log_marginals, modes) / graph.n_nodes
        )
        if self.inference == "mean_field":
            # one-hot at the (tie-aware, Eqs. 18-20) mode where phi ties numerically
            return _with_modes(np.asarray(solution.marginals, dtype=np.float64),
                               np.asarray(modes))
        return self._sample(model, labels, n_classes, modes)

    def _check_ordered_phase(self, build, labels, n_classes, model, solution, info, modes):
        """``beta="auto"``: keep the fit unless its classes show the ordered phase; then the
        held-out-accuracy check of :func:`~graphssl.inference.optimize.potts_beta.
        cross_validated_beta` may lower beta (and the fit is redone there)."""
        from graphssl.inference.optimize.potts_beta import BetaSelection, cross_validated_beta
        from graphssl.inference.ordered_phase import collapsed_classes

        flagged = collapsed_classes(np.asarray(modes), labels, n_classes)
        self.beta_selection_ = BetaSelection(self.beta_, flagged.tolist())
        if flagged.size == 0:
            return model, solution, info, modes
        options = self._mean_field_options(self._host_mean_field(model.n_nodes))
        beta, record = cross_validated_beta(build, labels, self.beta_, options=options,
                                            seed=self._seed())
        self.beta_selection_ = self.beta_selection_._replace(cross_validation=record)
        if beta == self.beta_:
            return model, solution, info, modes
        self.beta_ = beta
        model = build(labels, beta)
        solution, info = naive_mean_field(model, options=options)
        return model, solution, info, mean_field_labels(solution, model.unary_logits())

    def _feature_potts(self, graph, labels, n_classes, n_folds):
        """The route with node features (:func:`~graphssl.inference.optimize.feature_potts.
        fit_feature_potts`); MCMC by :func:`~graphssl.inference.optimize.feature_potts.
        sample_feature_potts` (MAP by ICM from the best draw)."""
        from graphssl.inference.optimize.feature_potts import (
            fit_feature_potts,
            sample_feature_potts,
        )

        fit = fit_feature_potts(graph, self.X_graph_, labels, n_classes, n_folds=n_folds,
                                seed=self._seed(), mean_field_options=self._mean_field_options())
        self.feature_fit_, self.model_ = fit, fit.model
        self.beta_ = float(fit.model.beta)
        self.mean_field_info_ = fit.mean_field_info
        if self.inference == "mean_field":
            return fit.marginals
        kernel = "gibbs" if self.inference == "gibbs" else "swendsen_wang"
        marginals, map_labels, samples = sample_feature_potts(
            fit, kernel=kernel, n_chains=int(self.n_chains), n_samples=int(self.n_samples),
            burn_in=int(self.burn_in), thin=int(self.thin), seed=self._seed())
        self.samples_, self._map_encoded = samples, map_labels
        self._training_labels = np.asarray(labels)
        from graphssl.diagnostics import check_convergence

        self.convergence_ = check_convergence(  # warns (ConvergenceWarning) when unconverged
            samples, model=fit.model, observed_labels=labels, source=type(self).__name__)
        return marginals

    def _unreached_mask(self, graph, labels):
        """With node features every node is reached: its field carries the feature model's
        prediction (an isolated node's marginal is ``softmax(alpha u_i)``; a component
        without labels is that prediction smoothed within the component -- on CiteSeer's
        validation split 4 points better than the raw prediction), so none is overwritten."""
        if getattr(self, "feature_fit_", None) is not None:
            return np.zeros(graph.n_nodes, dtype=bool)
        return super()._unreached_mask(graph, labels)

    def _sample(self, model, labels, n_classes, init_labels):
        from graphssl.inference.mcmc.chains import rao_blackwell_chain_marginals, sample_chains
        from graphssl.inference.mcmc.gibbs import chromatic_gibbs
        from graphssl.inference.mcmc.swendsen_wang import swendsen_wang

        if self.inference == "gibbs":
            kernel = chromatic_gibbs(model.graph)
        else:
            kernel = swendsen_wang()
        samples = sample_chains(
            kernel, model, jax.random.PRNGKey(self._seed()),
            n_chains=int(self.n_chains), n_samples=int(self.n_samples),
            burn_in=int(self.burn_in), thin=int(self.thin), init_labels=init_labels,
        )
        self.samples_ = samples
        self._training_labels = np.asarray(labels)  # observed_data of to_arviz (any clamp)
        # the mean of each draw's conditionals: same expectation as the label frequencies, less
        # variance where the marginals are near flat (rao_blackwell_marginals), per chain: the
        # labels' Monte-Carlo stability is read from them (nodes no label reaches take the
        # class prior, not the chains, and are not counted)
        per_chain = rao_blackwell_chain_marginals(model, samples, n_classes)
        marginals = per_chain.mean(axis=0)
        # the MAP search first: its energy tells chains that never moved at the mode from
        # chains stuck above it
        map_labels, search = self._search_map(model, samples, marginals.argmax(1))
        self._check_chains_with(samples, model, labels, per_chain, model.graph,
                                lowest_energy=search.energy)
        self._map_encoded = self._report_map(map_labels, marginals.argmax(1), labels)
        return marginals

    def _search_map(self, model, samples, posterior_mean):
        """MAP = lowest energy among the chains' best draw, ICM from it and from the
        posterior-mean labels, and alpha-expansion from the best of those
        (:func:`graphssl.inference.optimize.map_search.map_search`); ``map_search_`` (a
        ``MapSearchInfo``) holds the energies side by side. Returns ``(labels, info)``."""
        from graphssl.inference.optimize.map_search import map_search

        map_labels, self.map_search_ = map_search(model, samples=samples,
                                                  posterior_mean=posterior_mean)
        return map_labels, self.map_search_

    def _report_map(self, map_labels, posterior_mean, labels):
        """``map_report_`` (a ``MapReport``): whether a MAP / posterior-mean disagreement
        above 3 % of the unlabelled nodes is the model's, the search's or (unconverged) the
        chains'. Returns ``map_labels``."""
        from graphssl.inference.optimize.map_search import map_report

        report = getattr(self, "convergence_", None)
        self.map_report_ = map_report(map_labels, posterior_mean, self.map_search_,
                                      free=np.asarray(labels) < 0,
                                      converged=None if report is None else report.converged)
        return map_labels

    def to_arviz(self, **kwargs):
        """The MCMC draws as an ArviZ DataTree (:func:`graphssl.diagnostics.to_arviz`):
        energy, sorted class sizes and co-assignment of 10 node pairs in ``posterior`` (what
        ``az.summary`` / ``az.plot_trace`` show), per-node labels in ``posterior_labels``,
        the training labels in ``observed_data``, the Rao-Blackwellised marginals the fit
        predicts with in ``constant_data``; ``kwargs`` go to the converter."""
        from graphssl.diagnostics import to_arviz
        from graphssl.inference.mcmc.chains import rao_blackwell_marginals

        if not hasattr(self, "samples_"):
            raise ValueError("to_arviz: fit with inference='gibbs' or 'swendsen_wang' first")
        kwargs.setdefault("observed_labels", self._training_labels)
        kwargs.setdefault("label_marginals", rao_blackwell_marginals(self.model_, self.samples_))
        if len(getattr(self, "classes_", ())) == int(self.samples_.n_classes):
            kwargs.setdefault("class_names", self.classes_)
        kwargs.setdefault("model", self.model_)
        return to_arviz(self.samples_, **self._reported_labels(kwargs))


def _with_modes(marginals: np.ndarray, modes: np.ndarray) -> np.ndarray:
    """Marginals whose row argmax is ``modes``: rows where phi ties numerically (Eqs. 18-20
    at large beta) become one-hot at the mode; other rows are unchanged."""
    rows = np.flatnonzero(marginals.argmax(1) != modes)
    marginals = marginals.copy()
    marginals[rows] = np.eye(marginals.shape[1])[modes[rows]]
    return marginals


def _warn_if_uniform(marginals, labels, beta: float) -> None:
    """A warning when a user's ``beta`` is so small that every unlabelled node's mean-field
    marginal is uniform (the infinite-temperature limit): the model is right, but the
    predictions are ties, broken towards the first class."""
    free = np.asarray(labels) < 0
    phi = np.asarray(marginals, dtype=np.float64)[free]
    if phi.size and float(np.max(phi.max(axis=1) - phi.min(axis=1))) < 1e-6:
        warn_user(
            f"beta: {beta:.3g} is so small that every unlabelled node's marginal is uniform "
            "(the infinite-temperature limit): the labels carry no information and every "
            "prediction is a tie, given to the first class; use a larger beta or "
            "beta='auto'", UserWarning)
