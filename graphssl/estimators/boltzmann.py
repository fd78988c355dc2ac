"""scikit-learn classifier for the Boltzmann-machine MRF of Zhu & Ghahramani (2002)."""

from __future__ import annotations

import dataclasses
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from graphssl._progress import check_progress
from graphssl._warnings import warn_user
from graphssl.estimators.base import GraphSSLClassifier
from graphssl.estimators.feature_prior import FeaturePriorMixin
from graphssl.graph import Graph, unreached_nodes
from graphssl.graph.weights import local_widths
from graphssl.inference.boltzmann import learning as bl
from graphssl.inference.boltzmann import selection as bs
from graphssl.inference.boltzmann.expectations import _kernel as chain_kernel
from graphssl.models.boltzmann import (
    PairGeometry,
    knn_pairs,
    locally_scaled,
    pair_geometry,
    pair_sq_distances,
)
from graphssl.validation import COUNT_MAX, check_class_mass_rule, check_real, is_whole

__all__ = ["BoltzmannMRFClassifier", "weights_as_sq_distances"]

PROBE_BURN_IN = 50  # sweeps of each one-class probe chain discarded (metastability_)
PROBE_DRAWS = 50  # and kept
AUTO_ENUMERATION_MAX = 2**16  # method="auto": enumeration up to C^n configurations
PER_FEATURE_MAX = 5_000_000  # per-feature squared differences kept up to pairs x features
_MODELS = ("extended", "basic")
_METHODS = ("auto",) + bl.METHODS
_LEARNING = ("auto", "grid", "likelihood")


class BoltzmannMRFClassifier(FeaturePriorMixin, GraphSSLClassifier):
    """Boltzmann-machine MRF with learned coupling, length scales and label noise.

    The model (Zhu & Ghahramani 2002, Eq. 40): ``p(O, Y) ∝ exp(sum_{i<j} A_ij [y_i = y_j]
    + sum_i beta_{y_i} + e^gamma sum_i [o_i = y_i])`` with ``A_ij = exp(alpha_0 - sum_d
    (x_i^d - x_j^d)^2 / e^{alpha_d})`` (Eq. 39); the label posterior ``P(y_i | O_L, X,
    Theta)`` (Eq. 5) is ``label_distributions_``, from Swendsen-Wang chains (or exact
    enumeration on tiny problems).

    How Theta is chosen (``learning``):

    * ``"grid"`` (default for sampled problems,
      :func:`graphssl.inference.boltzmann.selection.select_coupling`): the data scale
      ``sigma_0`` = the median distance from each point to its 10 nearest paired points (the
      median kNN distance); ``e^{alpha_d} = 2 sigma_0^2
      e^{offset}`` with ``offset`` in {0, -1, +1} (the mode and one standard deviation of a
      log-normal prior on the squared length scales around the data scale), ``alpha_0`` on
      a grid from -2 to 4 (step 0.5), ``beta = 0`` (uniform class prior: a per-class bias
      multiplies by a class region's size), ``gamma`` from ``label_noise``.  The point is
      chosen by the model's predictive probability of each labelled point given the others
      (5-fold, one-standard-error rule toward the weaker coupling); couplings at which a
      class merge lowers the free energy (the model degenerates) are refused.  It cannot
      collapse to chance: a coupling that carries no label predicts no held-out label.
    * ``"likelihood"`` (default under enumeration: the paper's method): gradient ascent on
      ``log P(O_L | X, Theta) + log p(Theta)`` (Eqs. 6, 37) from ``n_restarts`` random starts
      (Sec. 5.2), with ``prior``.

    Parameters:
      model: ``"extended"`` (observed labels are noisy copies of the true ones, noise rate
        ``label_noise``; observed labels may be corrected) or ``"basic"`` (labels clamped:
        the zero-noise limit; with ``learning="likelihood"`` the one-``sigma`` model of
        Eq. 2).
      pairs: ``"dense"`` (fully connected, as in the paper), ``"knn"`` (the ``k`` nearest
        neighbours, symmetrised by union) or ``"auto"`` (dense when enumerating, else kNN).
      method: expectations by ``"enumeration"`` (exact, ``C^n`` configurations: tiny sets),
        ``"gibbs"``, ``"gibbs_permutation"``, ``"swendsen_wang"``, or ``"auto"``
        (enumeration while ``C^n <= 2^16``, else Swendsen-Wang); ``method_`` records it.
      learning: ``"auto"``, ``"grid"`` or ``"likelihood"`` (above); ``learning_`` records it.
      label_noise: the noise rate ``rho = P(o_i != y_i)`` of the grid route: ``gamma`` of
        Eq. (40) by ``e^{e^gamma} = (C - 1)(1 - rho) / rho``, also the channel through which
        a held-out label is scored.
      grid: a :class:`~graphssl.inference.boltzmann.selection.GridSettings`, a dict of the
        fields to change (``{"choice": "strongest"}``) or None (its defaults). With
        ``{"average": True}`` (an option) the posterior marginals are averaged over the
        grid points the labels support (held-out score above chance by a standard error,
        chains not ordered; :func:`~graphssl.inference.boltzmann.selection.
        averaged_points`), weighted by the labels' held-out predictive times the prior
        (:func:`~graphssl.inference.boltzmann.selection.averaged_weights`), not taken at
        the chosen point alone: with ten labels the scores cannot rank those couplings,
        and the one the prior favours decides the posterior. The chosen point (``theta_``)
        still gives the MAP search, ``samples_`` and the convergence checks. Measured
        against the chosen point alone (the default; ``GridSettings``): panel mean 85.5 ->
        85.7, Digit1-10 76.3 -> 81.4, USPS-100 89.4 -> 91.3; breast_cancer 94.2 -> 91.8,
        COIL2-10 61.4 -> 58.6.
      prior: the likelihood route's prior: ``"default"``
        (:class:`~graphssl.inference.boltzmann.learning.ThetaPrior`, length scales log-normal
        around the data scale, for the extended model; the exponential prior of Eq. 83 with
        rate ``sigma_rate`` on ``[0, max d_ij]`` for the basic one), ``None`` (flat) or a
        prior object.
      sigma_rate: that exponential prior's rate, a finite number > 0.
      n_restarts, max_iter, step: the likelihood route's hill climbing (Sec. 3.1); ``step``
        a finite number > 0.
      n_chains, n_samples, burn_in: chains of the posterior (and per gradient step of the
        likelihood route). ``n_samples`` defaults to 1500
        (:data:`~graphssl.inference.boltzmann.selection.POSTERIOR_DRAWS`; 300 before
        2026-11-29): near-flat marginals are decided by small leanings, which 300 draws
        left to Monte-Carlo noise (16 panel sets, 10 splits, paired: mean 85.5 -> 86.0,
        Digit1-10 +2.9, COIL2-10 +2.7, Text-10 +1.9; USPS-100 -0.5), at about twice the
        CPU time of a fit. The likelihood route with sampled expectations draws as many per
        gradient step (5x the earlier cost); pass ``n_samples=300`` there for the
        earlier steps.
      features: ``"auto"`` (default): with ``fit_graph(graph, y, X=features)`` a feature model
        (:mod:`graphssl.estimators.feature_prior`) gives every node the class prior
        ``log h_i`` (Eq. 40's ``beta_c`` per node: ``node_field``), and a node no label
        reaches gets ``h_i``; ``None``: no feature model.
      k, symmetrize, weight, sigma: the kNN graph of the base class, used for the inductive
        extension of ``predict(X_new)``; ``k``, ``symmetrize`` and ``sigma`` also make the
        model's pairs under ``pairs="knn"`` (``weight`` does not: the couplings are Eq. 39's).
        ``symmetrize``: ``"max"`` (default) or ``"mean"``, the union of the kNN lists;
        ``"min"``, the mutual pairs (Bergamim & Breve's Eq. 8, ``PottsClassifier``'s default),
        a node they leave without a path to a label given its union pairs back
        (``n_reconnected_``; :func:`~graphssl.models.boltzmann.knn_pairs`). Measured against
        the union on splits 0-2 of the defaults panel (14 sets, paired,
        ``benchmarks/bench_option.py``, 2026-11-29), so not the default: Digit1-10 81.1 ->
        85.8, USPS-100 89.7 -> 93.7, Text-100 63.5 -> 70.6; Text-10 57.1 -> 50.7, USPS-10
        72.8 -> 68.7, COIL2-10 60.6 -> 56.8, wine 94.1 -> 91.4, digits 96.2 -> 93.6; mean
        85.3 -> 84.8. ``sigma="local"`` (default)
        also scales the model's pairs (:func:`~graphssl.models.boltzmann.locally_scaled`):
        ``A_ij = exp(alpha_0 - d_ij^2 sigma_ref^2 / (sigma_i sigma_j e^{alpha}))`` with each
        point's own width ``sigma_i`` (its k-th neighbour distance / 3, the other
        estimators' local widths) and their median ``sigma_ref``; any other value keeps
        Eq. (39) on the raw differences. ``fit_graph`` pairs are never rescaled.
      random_state: None, an int or a ``numpy.random.Generator``.
      class_mass_normalize: ``"auto"`` (default), True, ``"counts"`` or False: the decision
        on the marginals of the unlabelled nodes a label reaches (``posterior_mean_`` keeps
        the marginals; the chains are the same for every value). True: class mass
        normalisation (Zhu, Ghahramani & Lafferty 2003, Sec. 4;
        :class:`~graphssl.estimators.baselines.HarmonicFunctionClassifier`'s rule): columns
        scaled so that the class masses match the labelled counts, add-one smoothed (with a
        feature model: its class proportions), rows renormalised. The coupling the labels
        choose sits below the ordered phase, where the marginals of nodes a few hops from a
        label are near uniform and their small leanings follow the graph's class sizes; the
        rule puts the class sizes back. Measured against False (``benchmarks/
        bench_option.py``, paired, splits 0-2, 2026-11-29): panel mean 85.3 -> 85.8 (14
        sets; USPS-10 72.8 -> 80.4, Text-100 63.5 -> 70.7; Digit1-10 81.1 -> 76.0),
        held-out mean 60.4 -> 62.7 (11 sets; ionosphere 74.6 -> 90.3). ``"counts"``: the
        columns scaled so that the argmax gives each class its share of those nodes
        (:func:`~graphssl.inference.optimize.baselines.propagation.class_count_scale`): where
        the marginals are nearly uniform, matching masses sends almost every node to the
        class the target favours (Digit1-10 split 5, labels 6 : 4: 98.6 % of the nodes in
        one class, 52.4 %; by the marginals' ranking 84.9 %), while matching counts keeps
        the ranking; but it forces the labelled shares on confident marginals too
        (``bench_option_boltzmann_counts.json``, 10 sets, 10 splits: three clusters 100 ->
        87.6, breast_cancer 94.2 -> 84.2; Digit1-10 65.8 -> 78.1, Text-10 57.7 -> 65.7).
        ``"auto"``: masses, unless their labelling gives some class more of those nodes
        than the labelled counts make plausible (the ordered-phase test of
        :func:`~graphssl.inference.ordered_phase.collapsed_classes`); then counts.
        ``class_mass_match_`` says which was used. Against True on the same chains
        (``bench_option_boltzmann_auto.json``, 14 panel sets, 10 splits, 2026-11-29): mean
        85.4 -> 86.4; Digit1-10 65.8 -> 76.3, Text-10 57.7 -> 65.0, Text-100 72.2 -> 74.6;
        USPS-10 80.4 -> 73.3 (the masses put nearly every node in the 80 % class, which
        the test calls implausible, and the marginals' ranking is weak there), USPS-100
        -0.5; held-out, read once (``bench_defaults_heldout_boltzmann_auto.json``, 3
        splits): COIL 27.1 -> 34.5, g241n +2.4, g241c +2.1, BCI +1.0, satimage -0.2, 13
        sets unchanged.
      progress: ``"auto"`` (default), True or False: the grid route's coupling search.
        ``"auto"``: once its first grid points show that the search needs more than 10 s
        more, one line on stderr says so and why (every grid point samples the chains of
        every cross-validation fold on all pairs), with the settings that shorten it, and
        a progress bar follows (:mod:`graphssl._progress`). Then the posterior's chains:
        when the search and their sweeps at the search's rate together pass 10 s, one line
        says how long they will take and that ``n_samples`` shortens it, and a bar follows
        (the same draws; ``True`` always shows both).

    ``fit_graph(graph, y, X=features)`` couples the given graph's edges (``pairs`` is then
    ignored), with ``A_ij`` from the features' distances; sparse or high-dimensional
    features (more than ``PER_FEATURE_MAX`` pair-feature entries) use one shared length
    scale on the distances between unit-norm rows (sparse) or the rows as given (dense).
    ``fit_graph(graph, y)`` without features couples each edge of positive weight by that
    weight: ``A_ij = e^{alpha_0} (w_ij / max w)^{e^{-alpha}}``, Eq. (39) on the squared
    distances ``-log(w_ij / max w)`` (:func:`weights_as_sq_distances`; a Gaussian kNN graph
    gives back its own distances); on an unweighted graph every edge has the coupling
    ``e^{alpha_0}`` and the grid searches ``alpha_0`` alone (one length-scale offset).

    Attributes (besides the base class's):
      theta_: the parameters (``ExtendedParams``; ``BasicParams`` for the basic model's
        likelihood route; ``gamma = inf`` for clamped labels on the grid route).
      log_length_scales_: ``alpha_d`` of Eq. 39 (the grid route: one value shared by every
        feature); ``length_scales_``: ``sqrt(e^{alpha_d} / 2)``, the Gaussian-kernel length
        scale per feature; ``sigma_`` for the basic model's likelihood route.
      n_reconnected_: nodes given their union pairs back under ``symmetrize="min"`` (0
        otherwise).
      posterior_mean_: ``float[n, C]``, the label posterior's marginals (Eq. 5) as
        computed (with ``grid={"average": True}`` averaged over ``grid_.averaged``), before
        ``class_mass_normalize`` (``label_distributions_`` after it);
      class_mass_match_: ``"masses"`` or ``"counts"``, the rule ``class_mass_normalize``
        applied (None when it is False).
      pair_geometry_: the model's pairs and their squared differences
        (:class:`~graphssl.models.boltzmann.PairGeometry`; locally scaled with
        ``sigma="local"``; one column on the grid route).
      grid_: the :class:`~graphssl.inference.boltzmann.selection.GridResult` (grid route);
        when its ``carries_labels`` is False (no coupling predicted the held-out labelled
        points better than chance by a standard error) a warning says so, with the scores.
      log_likelihood_: ``log P(O_L | X, Theta*)`` (likelihood route: exact or Eq. 27).
      suspected_label_errors_: indices of labelled points whose posterior disagrees with
        their observed label; ``map_labels_``: the most probable joint labelling found
        (exact under enumeration; for chains the lowest energy among the best draw, ICM and
        alpha-expansion); ``map_search_``: that search's energies side by side
        (``MapSearchInfo``, None under enumeration); ``map_report_``: a ``MapReport`` saying
        whether a MAP / posterior-mean disagreement above 3 % of the unlabelled nodes is the
        model's mode or the search's (None under enumeration).
      collapsed_classes_: the classes (values of ``classes_``) that hold more of the
        unlabelled nodes in the posterior-mean labelling than their labelled counts make
        plausible (:func:`~graphssl.inference.ordered_phase.collapsed_classes`): the ordered
        phase, warned about when not empty.
      metastability_: a :class:`~graphssl.inference.mcmc.metastability.MetastabilityReport`
        (None under enumeration): one short chain from each one-class state at the
        posterior's parameters; when one settles well below the posterior draws' energies,
        the posterior's chains (all started near the labels, so R-hat may not see it) sit
        in a metastable state, and a ``MetastableChainsWarning`` says so.
      fit_info_, restarts_: the likelihood route's optimiser records.
    """

    fits_features = True  # learns from X itself: graphssl.suite calls fit(X, y)

    def __init__(
        self,
        model="extended",
        pairs="auto",
        method="auto",
        learning="auto",
        label_noise=0.01,
        grid=None,
        prior="default",
        sigma_rate=1.0,
        n_restarts=3,
        max_iter=100,
        step=0.05,
        n_chains=4,
        n_samples=bs.POSTERIOR_DRAWS,
        burn_in=50,
        features="auto",
        random_state=0,
        k=10,
        symmetrize="max",
        weight="gaussian",
        sigma="local",
        progress="auto",
        class_mass_normalize="auto",
    ):
        super().__init__(k=k, symmetrize=symmetrize, weight=weight, sigma=sigma)
        self.model = model
        self.pairs = pairs
        self.method = method
        self.learning = learning
        self.label_noise = label_noise
        self.grid = grid
        self.prior = prior
        self.sigma_rate = sigma_rate
        self.n_restarts = n_restarts
        self.max_iter = max_iter
        self.step = step
        self.n_chains = n_chains
        self.n_samples = n_samples
        self.burn_in = burn_in
        self.features = features
        self.random_state = random_state
        self.progress = progress
        self.class_mass_normalize = class_mass_normalize

    # ------------------------------------------------------------------ checks
    def _check(self, n: int, n_classes: int) -> tuple[str, str, str]:
        if self.model not in _MODELS:
            raise ValueError(f"model: got {self.model!r}; use 'extended' or 'basic'")
        if self.pairs not in ("auto", "dense", "knn"):
            raise ValueError(f"pairs: got {self.pairs!r}; use 'auto', 'dense' or 'knn'")
        if self.method not in _METHODS:
            raise ValueError(f"method: got {self.method!r}; use one of {_METHODS}")
        if self.learning not in _LEARNING:
            raise ValueError(f"learning: got {self.learning!r}; use one of {_LEARNING}")
        for name, least in (("n_restarts", 1), ("max_iter", 1), ("n_chains", 1),
                            ("n_samples", 1), ("burn_in", 0)):
            value = getattr(self, name)
            if not is_whole(value, least):
                raise ValueError(f"{name}: must be an integer >= {least}, got {value!r}")
            if value > COUNT_MAX:
                raise ValueError(f"{name}: must be an integer <= {COUNT_MAX}, got {value!r}")
        # the likelihood route's step and prior (checked whichever route runs: a typo shows)
        check_real(self.step, "step", low=0.0, low_open=True)
        check_real(self.sigma_rate, "sigma_rate", low=0.0, low_open=True)
        _check_prior(self.prior)
        check_progress(self.progress)
        check_class_mass_rule(self.class_mass_normalize)
        self._grid_settings()  # checked before any work
        method = self.method
        if method == "auto":
            # the unclamped phase (and the extended model's clamped one) leaves all n nodes
            # free: enumeration only while C^n stays small
            method = "enumeration" if n_classes**n <= AUTO_ENUMERATION_MAX else "swendsen_wang"
        learning = self.learning
        if learning == "auto":
            learning = "likelihood" if method == "enumeration" else "grid"
        if learning == "grid" and method == "enumeration":
            raise ValueError("learning: the grid route samples its folds; use "
                             "method='swendsen_wang' or 'gibbs', or learning='likelihood'")
        if learning == "grid":  # the noise channel must be valid for this C
            check_real(self.label_noise, "label_noise", low=0.0, high=1.0, low_open=True,
                       high_open=True)
            bs.gamma_for_noise(float(self.label_noise), n_classes)
        pairs = self.pairs
        if pairs == "auto":
            pairs = "dense" if method == "enumeration" else "knn"
        if pairs == "knn" and self.symmetrize is None:
            raise ValueError("symmetrize: the model's kNN pairs are undirected (Eq. 2 sums "
                             "over pairs i < j); use 'max' (the union, default) or 'min' "
                             "(mutual neighbours)")
        return method, pairs, learning

    def _prior(self, problem):
        if self.prior != "default":
            return self.prior
        if self.model == "extended":
            return bl.ThetaPrior()
        d_max = float(np.sqrt(np.asarray(problem.geometry.sq_dist).max()))
        return bl.ExponentialSigmaPrior(rate=float(self.sigma_rate), sigma_max=d_max)

    # ------------------------------------------------------------------ geometry
    def _geometry(self, graph, pairs, labels, per_feature=True):
        """Pairs of the model: those of the given graph (``fit_graph``), else dense or kNN
        (the union, or with ``symmetrize="min"`` the mutual pairs, a node they leave
        unreached by ``labels`` given its union pairs back: ``n_reconnected_``; one
        squared-distance column unless ``per_feature``: the grid route shares one length
        scale), locally scaled with ``sigma="local"`` (:func:`locally_scaled`)."""
        self.n_reconnected_ = 0
        X = self.X_graph_
        if self.X_fit_ is None:  # fit_graph: the pairs are the given graph's edges
            s, r = np.asarray(graph.senders), np.asarray(graph.receivers)
            if X is None:  # no node features: the couplings follow the edge weights
                weights = np.asarray(graph.weights, dtype=np.float64)
                s, r = s[weights > 0], r[weights > 0]
                sq_diff = weights_as_sq_distances(weights[weights > 0])
            else:
                sq_diff = _pair_sq_diff(X, s, r)
            return PairGeometry(jnp.asarray(s, jnp.int32), jnp.asarray(r, jnp.int32),
                                jnp.asarray(sq_diff), graph.n_nodes)
        X = np.asarray(X, dtype=np.float64)
        if pairs == "dense" and self.sigma != "local":
            return pair_geometry(X, None, per_feature)
        distances, indices = _neighbours(X, int(self.k_))  # one search: pairs and widths
        chosen = None
        if pairs != "dense":
            *chosen, self.n_reconnected_ = knn_pairs(
                indices, mutual=self.symmetrize == "min", observed=np.asarray(labels) >= 0)
        geometry = pair_geometry(X, per_feature=per_feature, pairs=chosen)
        if self.sigma != "local":
            return geometry
        return locally_scaled(geometry, local_widths(distances[:, 1:]))

    def _unreached_mask(self, graph, labels):
        """Unreached along the model's pairs (dense pairs reach every node); with a feature
        model none is: its class prior is every node's field."""
        if getattr(self, "feature_prior_", None) is not None:
            return np.zeros(graph.n_nodes, dtype=bool)
        return unreached_nodes(self._pair_graph, labels >= 0)

    def to_arviz(self, **kwargs):
        """The chains of the label posterior at the chosen Theta as an ArviZ DataTree
        (:func:`graphssl.diagnostics.to_arviz`: energy, sorted class sizes and co-assignment
        in ``posterior``, training labels in ``observed_data``, these chains' own
        Rao-Blackwellised marginals; with ``grid={"average": True}`` ``posterior_mean_``
        averages the grid points of ``grid_.averaged``); only for a sampled method
        (enumeration is exact: no chains). ``kwargs`` go to the converter."""
        from sklearn.utils.validation import check_is_fitted

        from graphssl.diagnostics import to_arviz
        from graphssl.inference.mcmc.chains import rao_blackwell_marginals

        check_is_fitted(self, "samples_")
        if self.samples_ is None:
            raise ValueError("to_arviz: this fit enumerated the posterior exactly (no chains);"
                             " fit with method='gibbs' or 'swendsen_wang' for MCMC draws")
        kwargs.setdefault("observed_labels", self._training_labels)
        kwargs.setdefault("label_marginals",  # the chosen Theta's chains' marginals
                          rao_blackwell_marginals(self._sampled_model, self.samples_))
        if len(self.classes_) == int(self.samples_.n_classes):
            kwargs.setdefault("class_names", self.classes_)
        kwargs.setdefault("model", self._sampled_model)
        return to_arviz(self.samples_, **self._reported_labels(kwargs))

    # ------------------------------------------------------------------ the fit
    def _chains(self) -> bl.ChainSettings:
        return bl.ChainSettings(n_chains=int(self.n_chains), n_samples=int(self.n_samples),
                                burn_in=int(self.burn_in))

    def _label_distributions(self, graph, labels, n_classes):
        n = graph.n_nodes
        C = int(max(n_classes, 2))
        method, pairs, learning = self._check(n, C)
        prior = self._fit_feature_prior(labels, n_classes)
        geometry = self._geometry(graph, pairs, labels, per_feature=learning != "grid")
        self.pair_geometry_ = geometry
        self._pair_graph = Graph(geometry.senders, geometry.receivers,
                                 jnp.ones(geometry.senders.shape[0]), n)
        self.method_, self.learning_ = method, learning
        problem = bl.BoltzmannProblem(geometry, np.asarray(labels), C, self.model)
        key = jax.random.key(self._seed())
        k_fit, k_post = jax.random.split(key)
        labels = np.asarray(labels)
        # HF's rule: the labelled counts (add-one smoothed), or the feature model's class
        # proportions
        proportions = None if prior is None else prior.probs[labels < 0].mean(axis=0)

        def decided(marginals):  # the reported labelling's distributions (transduction_)
            return self._class_mass_decision(np.asarray(marginals)[:, :n_classes], graph,
                                             labels, proportions)

        def shown(marginals):  # the MAP search's posterior-mean candidate: that labelling
            return decided(marginals).argmax(1)

        if learning == "grid":
            post = self._fit_grid(problem, labels, prior, k_fit, k_post, method, shown)
        else:
            post = self._fit_likelihood(problem, k_fit, k_post, method, shown)
        marginals = np.asarray(post.marginals)[:, :n_classes]
        distributions = decided(marginals)
        self.suspected_label_errors_ = post.suspected_errors
        self._map_encoded = np.asarray(post.map_labels)  # map_labels_ set by the base
        self.map_search_ = post.map_search
        self._report_ordered_phase(post.posterior_mean_labels, labels, n_classes)
        if learning == "grid":
            self._report_uncarried_labels(marginals, labels)
        self.samples_, self._sampled_model = post.samples, post.model  # None: enumeration
        theta = self.theta_
        if isinstance(theta, bl.BasicParams):
            self.sigma_ = float(jnp.exp(theta.log_sigma))
        else:
            self.log_length_scales_ = np.asarray(theta.log_length_scales)
            if self.X_fit_ is not None and self.log_length_scales_.size == 1:
                # the grid route's one length scale, shared by every feature
                self.log_length_scales_ = np.full(self.X_fit_.shape[1],
                                                  float(self.log_length_scales_[0]))
            self.length_scales_ = np.sqrt(np.exp(self.log_length_scales_) / 2.0)
        self.posterior_mean_ = marginals
        self.metastability_ = None
        if post.samples is not None:  # R-hat / ESS of the final posterior's chains
            self._check_chains(post, graph, labels, n_classes)
            self._probe_metastability(post, labels, jax.random.fold_in(k_post, 1))
        self.map_report_ = None
        if post.map_search is not None:  # why MAP and posterior mean differ, if they do
            from graphssl.inference.optimize.map_search import map_report

            converged = None if post.samples is None else self.convergence_.converged
            self.map_report_ = map_report(post.map_labels, distributions.argmax(1),
                                          post.map_search, free=labels < 0,
                                          converged=converged)
        return distributions

    def _probe_metastability(self, post, labels, key) -> None:
        """``metastability_``: chains from every one-class state at the posterior's
        parameters (:mod:`graphssl.inference.mcmc.metastability`), ``PROBE_BURN_IN`` sweeps
        discarded and ``PROBE_DRAWS`` kept; a :class:`~graphssl.inference.mcmc.
        metastability.MetastableChainsWarning` when one settles well below the posterior's
        energies (the posterior's chains, all started near the labels, may agree with one
        another and pass R-hat there)."""
        from graphssl.inference.boltzmann.expectations import ChainSettings, chain_samples
        from graphssl.inference.mcmc.metastability import (
            MetastableChainsWarning,
            metastability_report,
            one_class_starts,
        )

        model = post.model
        C = int(model.n_classes)
        settings = ChainSettings(n_chains=C, n_samples=PROBE_DRAWS, burn_in=0,
                                 persistent_burn_in=PROBE_BURN_IN)
        probe = chain_samples(model, key, self.method_, settings,
                              one_class_starts(model.n_nodes, C))
        report = metastability_report(post.samples.energy, probe.labels, probe.energy,
                                      labels, C)
        self.metastability_ = report
        if not report.metastable:
            return
        lowest = int(np.argmin(report.probe_energy))
        kind = "stays merged" if report.stays[lowest] else "settles"
        named = (repr(self.classes_[lowest].tolist()) if lowest < len(self.classes_)
                 else "(the model's second class, no label's)")
        warn_user(
            f"{type(self).__name__}: a chain started with every node in class "
            f"{named} {kind} (one class holds "
            f"{100 * report.probe_share[lowest]:.0f} % of the unlabelled nodes after "
            f"{PROBE_BURN_IN} sweeps) at a mean energy {report.gap:.1f} nats below the "
            f"posterior's draws (their spread {report.posterior_spread:.1f}): the model at "
            "the chosen parameters has states its posterior's chains never visit, so the "
            "marginals are those of the labels' domains, a metastable state, not of the "
            "whole posterior (metastability_ holds the probe). A weaker coupling "
            "(grid=GridSettings(alpha0=...)) stays below the ordering transition; "
            "graphssl.inference.replica_exchange samples both states",
            MetastableChainsWarning)

    def _check_chains(self, post, graph, labels, n_classes) -> None:
        """``convergence_`` of the final posterior's chains (a warning when they fail), with
        the labels' Monte-Carlo stability read on the decision's own scale: each chain's
        Rao-Blackwellised marginals through the same class-mass factors (a node is open when
        the chains' decisions for it are within two standard errors of a tie); nodes no
        label reaches take the class prior, not the chains, and are not counted."""
        from graphssl.inference.mcmc.chains import rao_blackwell_chain_marginals

        self._training_labels = labels
        per_chain = rao_blackwell_chain_marginals(post.model, post.samples)[..., :n_classes]
        per_chain = np.stack([self._class_mass_rescaled(p) for p in per_chain])
        lowest = None if post.map_search is None else post.map_search.energy
        self._check_chains_with(post.samples, post.model, labels, per_chain, graph,
                                lowest_energy=lowest)

    def _grid_settings(self) -> bs.GridSettings:
        """``grid`` as a :class:`~graphssl.inference.boltzmann.selection.GridSettings`: None
        gives the defaults, a dict overrides the fields it names."""
        if self.grid is None:
            return bs.GridSettings()
        if isinstance(self.grid, bs.GridSettings):
            settings = self.grid
        elif isinstance(self.grid, dict):
            unknown = sorted(set(self.grid) - set(bs.GridSettings._fields))
            if unknown:
                raise ValueError(f"grid: unknown field(s) {unknown}; GridSettings has "
                                 f"{list(bs.GridSettings._fields)}")
            settings = bs.GridSettings()._replace(**self.grid)
        else:
            raise ValueError("grid: give a graphssl.inference.boltzmann.selection.GridSettings, "
                             "a dict of its fields to override, or None")
        offsets = settings.log_scale_offsets
        if isinstance(offsets, str | bytes) or not np.iterable(offsets) or len(offsets) == 0:
            raise ValueError(f"grid: log_scale_offsets is {offsets!r}; give at least one offset "
                             "of the length scale from the data scale (default "
                             f"{bs.GridSettings().log_scale_offsets})")
        return settings

    def _report_ordered_phase(self, predicted, labels, n_classes) -> None:
        """``collapsed_classes_``: the classes that hold more of the unlabelled nodes than
        their labelled counts make plausible
        (:func:`~graphssl.inference.ordered_phase.collapsed_classes`, the Potts estimator's
        check); a warning names them, since such a posterior is the model's ordered phase
        (the coupling sweeps a class over the graph), not what the labels say."""
        from graphssl.inference.ordered_phase import (
            collapsed_classes,
            plausible_share_limits,
            unlabelled_shares,
        )

        labels = np.asarray(labels)
        predicted = np.asarray(predicted)
        flagged = collapsed_classes(predicted, labels, n_classes)
        self.collapsed_classes_ = self.classes_[flagged]
        if flagged.size == 0:
            return
        share = unlabelled_shares(predicted, labels, n_classes)
        limits = plausible_share_limits(labels, n_classes)
        what = ", ".join(f"{self.classes_[c].tolist()!r} {_percent_pair(share[c], limits[c])}"
                         for c in flagged)
        theta = self.theta_
        at = (f"alpha_0 = {float(np.asarray(theta.alpha0)):.3g}" if hasattr(theta, "alpha0")
              else f"sigma = {float(np.exp(np.asarray(theta.log_sigma))):.3g}")
        fix = ("grid_.ordered and grid_.class_shares show the phase along the coupling grid; "
               "grid=GridSettings(alpha0=...) with weaker couplings avoids it"
               if getattr(self, "grid_", None) is not None else
               "a weaker coupling (a prior that keeps alpha_0 lower) avoids it")
        warn_user(
            f"{type(self).__name__}: the posterior puts more of the unlabelled nodes in "
            f"class {what} than the labelled counts make plausible: at the chosen coupling "
            f"({at}) the model is in its ordered phase, one class swept over the graph; "
            f"{fix}", UserWarning)

    def _report_uncarried_labels(self, marginals, labels) -> None:
        """Warn when no coupling of the grid predicted the held-out labelled points better
        than chance (``grid_.carries_labels`` False): the labels did not choose the
        coupling, and the posterior at the one taken may carry them nowhere."""
        if self.grid_.carries_labels:
            return
        C = marginals.shape[1]
        unlabelled = np.asarray(labels) < 0
        flat = float(np.mean(marginals[unlabelled].max(axis=1) < 1.0 / C + 0.1))
        if self.grid_.terms.shape[-1] == 0:
            warn_user(
                f"{type(self).__name__}: every class has a single label, so none can be held "
                "out with its class kept and the labels cannot choose the coupling; it is the "
                f"prior's mode short of the ordered phase (alpha_0 = "
                f"{float(self.grid_.alpha0):.3g}), and "
                f"{100 * flat:.0f} % of the unlabelled nodes have a largest marginal within "
                "0.1 of uniform. Two labels of some class let the labels choose it",
                UserWarning)
            return
        best = float(np.nanmax(self.grid_.cv))
        warn_user(
            f"{type(self).__name__}: no coupling of the grid predicts the held-out labelled "
            f"points better than chance by a standard error (best (CV) {best:.3f} per point "
            f"against log(1/C) = {-np.log(C):.3f}; grid_.cv holds them): the labels do not "
            f"choose the coupling, and at the one taken (alpha_0 = "
            f"{float(self.grid_.alpha0):.3g}) {100 * flat:.0f} % of the unlabelled nodes have "
            f"a largest marginal within 0.1 of uniform. More labels (of every class), or an "
            "estimator that needs no coupling from them (HarmonicFunctionClassifier, "
            "PottsClassifier), avoid it", UserWarning)

    def _fit_grid(self, problem, labels, prior, k_fit, k_post, method, decision=None):
        """The grid route (class docstring); sets ``theta_`` and ``grid_``."""
        C = problem.n_classes
        clamp = self.model == "basic"
        gamma = bs.gamma_for_noise(float(self.label_noise), C)
        template = problem.template()
        if prior is not None:  # the feature model's log-probabilities as each node's prior
            log_h = np.log(np.clip(prior.probs, 1e-12, None))
            pad = np.full((problem.geometry.n_nodes, C), np.log(1e-12))
            pad[:, : log_h.shape[1]] = log_h
            template = dataclasses.replace(
                template, node_field=jnp.asarray(pad, template.field.dtype)).with_parameters()
        kernel = None if method == "swendsen_wang" else chain_kernel(method, template)
        settings = self._grid_settings()
        if not np.any(np.asarray(problem.geometry.sq_dist) > 0):
            # every edge coupled alike (an unweighted graph, no features): a length scale
            # has nothing to act on, so its other offsets would repeat the same couplings
            settings = settings._replace(log_scale_offsets=(0.0,))
        why = (f"every point samples {settings.n_folds} folds' chains on "
               f"{int(problem.geometry.senders.shape[0])} pairs "
               f"({settings.burn_in + settings.n_samples} sweeps each); a shorter "
               "grid=GridSettings(alpha0=..., log_scale_offsets=(0.0,)) shortens it")
        started = time.perf_counter()
        result = bs.select_coupling(problem.geometry, template, k_fit, gamma=gamma, clamp=clamp,
                                    settings=settings, kernel=kernel, seed=self._seed(),
                                    progress=self.progress, why=why)
        searched = time.perf_counter() - started
        self.grid_, self.theta_ = result, result.theta
        self.log_likelihood_ = float("nan")
        self.fit_info_, self.restarts_, self.n_iter_ = None, None, int(result.n_sweeps)
        if settings.average:
            return bs.averaged_grid_posterior(template, problem.geometry, result, labels,
                                              k_post, hard=clamp, method=method,
                                              chains=self._chains(), decision=decision)
        model = bs.grid_model(template, problem.geometry, result.theta, clamp)
        chains = self._chains()
        return bs.grid_posterior(model, labels, k_post, method=method, chains=chains,
                                 init_labels=result.start_labels,
                                 progress=self._posterior_progress(searched, result, chains),
                                 decision=decision)

    def _posterior_progress(self, searched: float, result, chains) -> bool:
        """Whether the posterior's chains show a bar: ``progress=True``, or ``"auto"`` when
        the coupling search (``searched`` s for ``result.n_sweeps`` sweeps of the same
        nodes) and the posterior's sweeps at its rate together pass
        :data:`graphssl._progress.LONG_RUN_SECONDS`; then one line on stderr says so first,
        with the setting that shortens it."""
        from graphssl._progress import LONG_RUN_SECONDS

        if self.progress is not True and self.progress != "auto":
            return False
        sweeps = chains.n_chains * (chains.persistent_burn_in + chains.n_samples)
        estimate = searched / max(int(result.n_sweeps), 1) * sweeps
        if self.progress == "auto" and searched + estimate <= LONG_RUN_SECONDS:
            return False
        sys.stderr.write(
            f"posterior: about {estimate:.0f} s more after {searched:.0f} s of coupling "
            f"search; {chains.n_chains} chains x {sweeps // chains.n_chains} sweeps at the "
            f"chosen coupling, every draw's conditionals averaged into the marginals; a "
            f"smaller n_samples (now {chains.n_samples}) shortens it and leaves near-flat "
            "marginals noisier\n")
        sys.stderr.flush()
        return True

    def _fit_likelihood(self, problem, k_fit, k_post, method, decision=None):
        """The paper's route: random restarts of the hill climbing (Sec. 3.1, 5.2)."""
        theta, info, trials = bl.random_restarts(
            problem, k_fit, int(self.n_restarts), method=method, prior=self._prior(problem),
            chains=self._chains(), step=float(self.step), max_iter=int(self.max_iter))
        self.theta_, self.grid_ = theta, None
        self.fit_info_ = info
        self.restarts_ = trials
        self.log_likelihood_ = float(info["log_likelihood"])
        self.n_iter_ = int(info["iterations"])
        kwargs = {} if method == "enumeration" else {"key": k_post, "chains": self._chains()}
        return bl.posterior(problem, theta, method=method, decision=decision, **kwargs)


def _check_prior(prior) -> None:
    """``prior``: ``"default"``, None (flat) or an object with a ``log_prob`` method."""
    if prior is None or (isinstance(prior, str) and prior == "default"):
        return
    if isinstance(prior, str) or not callable(getattr(prior, "log_prob", None)):
        raise ValueError(
            f"prior: use 'default' (ThetaPrior for the extended model, ExponentialSigmaPrior "
            "with rate sigma_rate for the basic one), None (flat) or a prior object with a "
            "log_prob method (graphssl.inference.boltzmann.learning.ThetaPrior or "
            f"ExponentialSigmaPrior), got {prior!r}")


def _neighbours(X: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Distances and indices ``[n, k + 1]`` of each row's ``k + 1`` nearest rows (itself
    first), ``k`` cut to ``n - 1``: the kNN pairs of :func:`pair_geometry` and the
    ``sigma="local"`` widths (:func:`graphssl.graph.weights.local_widths` of the k-th
    neighbour distance) from one search."""
    from sklearn.neighbors import NearestNeighbors

    k = max(1, min(int(k), X.shape[0] - 1))
    return NearestNeighbors(n_neighbors=k + 1).fit(X).kneighbors(X)


def weights_as_sq_distances(weights) -> np.ndarray:
    """``[E, 1]``: ``-log(w_ij / max w)``, the squared distance (over ``2 sigma^2``) under
    which Eq. (2)'s Gaussian coupling ``exp(-d_ij^2 / (2 sigma^2))`` is proportional to the
    given weight: ``fit_graph(graph, y)`` without node features couples each edge by
    ``A_ij = exp(alpha_0 - (-log(w_ij / max w)) / e^{alpha})``, i.e. ``e^{alpha_0}
    (w_ij / max w)^{e^{-alpha}}``. A Gaussian kNN graph gives back its own distances; an
    unweighted graph (every ``w_ij`` equal) gives zeros, one coupling ``e^{alpha_0}`` for
    every edge, and the length scale has nothing to act on. ``weights`` must be positive."""
    w = np.asarray(weights, dtype=np.float64)
    return np.maximum(-np.log(w / w.max()), 0.0)[:, None]


def _pair_sq_diff(X, senders, receivers) -> np.ndarray:
    """Per-feature squared differences of the paired rows ``[E, D]``, or, for sparse or
    high-dimensional features (``E * D > PER_FEATURE_MAX``), the squared distance as one
    column ``[E, 1]`` (one shared length scale): between unit-norm rows when sparse."""
    if sp.issparse(X):
        from graphssl.models.feature_model import normalize_rows

        Xn = normalize_rows(X)
        dots = np.asarray(Xn[senders].multiply(Xn[receivers]).sum(axis=1)).ravel()
        norms = np.asarray(Xn.multiply(Xn).sum(axis=1)).ravel()
        d2 = np.maximum(norms[senders] + norms[receivers] - 2.0 * dots, 0.0)
        return d2[:, None]
    X = np.asarray(X, dtype=np.float64)
    if senders.size * X.shape[1] > PER_FEATURE_MAX:
        return pair_sq_distances(X, senders, receivers)[:, None]
    return (X[senders] - X[receivers]) ** 2


def _percent_pair(share: float, limit: float) -> str:
    """``"99.8 % (plausible up to 99.6 %)"``: the fewest decimals (up to 4) at which the
    share and its limit print apart, so the message never reads "100 % (up to 100 %)"."""
    for digits in range(5):
        a, b = f"{100 * share:.{digits}f}", f"{100 * limit:.{digits}f}"
        if a != b:
            break
    return f"{a} % (plausible up to {b} %)"
