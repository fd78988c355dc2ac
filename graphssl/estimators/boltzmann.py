"""scikit-learn classifier for the Boltzmann-machine MRF of Zhu & Ghahramani (2002)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from graphssl.estimators.base import GraphSSLClassifier
from graphssl.graph import Graph, unreached_nodes
from graphssl.inference.boltzmann import learning as bl
from graphssl.models.boltzmann import PairGeometry, pair_geometry

__all__ = ["BoltzmannMRFClassifier"]

AUTO_ENUMERATION_MAX = 2**16  # method="auto": enumeration up to C^n configurations

_MODELS = ("extended", "basic")
_METHODS = ("auto",) + bl.METHODS


class BoltzmannMRFClassifier(GraphSSLClassifier):
    """Boltzmann-machine MRF with learned length scales, class priors and label noise.

    Learns Theta by gradient ascent on ``log P(O_L | X, Theta) + log p(Theta)`` from
    ``n_restarts`` random starts (Sec. 5.2) and returns the posterior label marginals
    ``P(y_i | O_L, X, Theta*)`` (Eq. 5) as ``label_distributions_``.

    Parameters:
      model: ``"extended"`` (Eq. 40: ``alpha_0``, one length scale per feature, class biases,
        label noise ``gamma``; observed labels may be corrected) or ``"basic"`` (Eq. 2: one
        ``sigma``, labels clamped).
      pairs: ``"dense"`` (fully connected, as in the paper), ``"knn"`` (the ``k`` nearest
        neighbours, symmetrised by union) or ``"auto"`` (dense up to 200 points).
      method: expectations by ``"enumeration"`` (exact, ``C^n`` configurations: tiny sets),
        ``"gibbs"``, ``"gibbs_permutation"``, ``"swendsen_wang"``, or ``"auto"``
        (enumeration while ``C^n <= 2^16``, the unclamped phase leaving all n nodes free,
        else Swendsen-Wang); ``method_`` records the choice.
      prior: ``"default"`` (:class:`~graphssl.inference.boltzmann.learning.ThetaPrior` for the
        extended model; the exponential prior of Eq. 83 with rate ``sigma_rate`` on
        ``[0, max d_ij]`` for the basic one), ``None`` (flat, as in the paper's Sec. 5) or a
        prior object.
      n_restarts, max_iter, step: hill climbing (Sec. 3.1) from random starts.
      n_chains, n_samples, burn_in: chain settings per phase and gradient step.
      k, symmetrize, weight, sigma: the kNN graph of the base class, used for ``pairs="knn"``
        and for the inductive extension of ``predict(X_new)``.
      random_state: None, an int or a ``numpy.random.Generator``.

    ``fit_graph(graph, y, X=features)`` learns the length scales on the given graph's edges
    (``pairs`` is then ignored); features are required (dense).

    Attributes (besides the base class's):
      theta_: learned parameters (``ExtendedParams`` or ``BasicParams``).
      log_length_scales_: ``alpha_d`` of Eq. 39 (extended); ``length_scales_``:
        ``sqrt(e^{alpha_d} / 2)``, the Gaussian-kernel length scale per feature
        (``exp(-dx^2 / (2 l^2))``); ``sigma_`` for the basic model.
      log_likelihood_: ``log P(O_L | X, Theta*)`` (exact or the estimate of Eq. 27).
      suspected_label_errors_: indices of labelled points whose posterior disagrees with
        their observed label; ``map_labels_``: the most probable joint labelling found.
      fit_info_, restarts_: the optimiser records.
    """

    fits_features = True  # learns from X itself: graphssl.suite calls fit(X, y)
    _requires_features = True

    def __init__(
        self,
        model="extended",
        pairs="auto",
        method="auto",
        prior="default",
        sigma_rate=1.0,
        n_restarts=3,
        max_iter=100,
        step=0.05,
        n_chains=4,
        n_samples=300,
        burn_in=50,
        random_state=0,
        k=10,
        symmetrize="max",
        weight="gaussian",
        sigma="kth_over_3",
    ):
        super().__init__(k=k, symmetrize=symmetrize, weight=weight, sigma=sigma)
        self.model = model
        self.pairs = pairs
        self.method = method
        self.prior = prior
        self.sigma_rate = sigma_rate
        self.n_restarts = n_restarts
        self.max_iter = max_iter
        self.step = step
        self.n_chains = n_chains
        self.n_samples = n_samples
        self.burn_in = burn_in
        self.random_state = random_state

    def _check(self, n: int, n_classes: int) -> tuple[str, str]:
        if self.model not in _MODELS:
            raise ValueError(f"model: got {self.model!r}; use 'extended' or 'basic'")
        if self.pairs not in ("auto", "dense", "knn"):
            raise ValueError(f"pairs: got {self.pairs!r}; use 'auto', 'dense' or 'knn'")
        if self.method not in _METHODS:
            raise ValueError(f"method: got {self.method!r}; use one of {_METHODS}")
        for name in ("n_restarts", "max_iter", "n_chains", "n_samples"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name}: must be a positive integer")
        method = self.method
        if method == "auto":
            # the unclamped phase (and the extended model's clamped one) leaves all n nodes
            # free: enumeration only while C^n stays small
            method = "enumeration" if n_classes**n <= AUTO_ENUMERATION_MAX else "swendsen_wang"
        pairs = ("dense" if n <= 200 else "knn") if self.pairs == "auto" else self.pairs
        return method, pairs

    def _prior(self, problem):
        if self.prior != "default":
            return self.prior
        if self.model == "extended":
            return bl.ThetaPrior()
        d_max = float(np.sqrt(np.asarray(problem.geometry.sq_dist).max()))
        return bl.ExponentialSigmaPrior(rate=float(self.sigma_rate), sigma_max=d_max)

    def _geometry(self, graph, pairs):
        """Pairs of the model: those of the given graph (``fit_graph``), else dense or kNN."""
        X = self.X_graph_
        if sp.issparse(X):
            raise ValueError(
                "X: BoltzmannMRFClassifier learns one length scale per feature and needs dense "
                "features of moderate dimension; pass X.toarray() (or a PCA of it)"
            )
        X = np.asarray(X, dtype=np.float64)
        if self.X_fit_ is None:  # fit_graph: the pairs are the given graph's edges
            s, r = np.asarray(graph.senders), np.asarray(graph.receivers)
            return PairGeometry(jnp.asarray(s, jnp.int32), jnp.asarray(r, jnp.int32),
                                jnp.asarray((X[s] - X[r]) ** 2), X.shape[0])
        return pair_geometry(X, None if pairs == "dense" else int(self.k_))

    def _unreached_mask(self, graph, labels):
        """Unreached along the model's pairs (dense pairs reach every node)."""
        return unreached_nodes(self._pair_graph, labels >= 0)

    def to_arviz(self, **kwargs):
        """The chains of the label posterior at the learned Theta as an ArviZ DataTree
        (:func:`graphssl.diagnostics.to_arviz`: energy, sorted class sizes and co-assignment
        in ``posterior``, training labels in ``observed_data``); only for a sampled method
        (enumeration is exact: no chains). ``kwargs`` go to the converter."""
        from sklearn.utils.validation import check_is_fitted

        from graphssl.diagnostics import to_arviz

        check_is_fitted(self, "samples_")
        if self.samples_ is None:
            raise ValueError("to_arviz: this fit enumerated the posterior exactly (no chains);"
                             " fit with method='gibbs' or 'swendsen_wang' for MCMC draws")
        kwargs.setdefault("observed_labels", self._training_labels)
        return to_arviz(self.samples_, model=self._sampled_model, **kwargs)

    def _label_distributions(self, graph, labels, n_classes):
        n = graph.n_nodes
        method, pairs = self._check(n, int(max(n_classes, 2)))
        geometry = self._geometry(graph, pairs)
        self._pair_graph = Graph(geometry.senders, geometry.receivers,
                                 jnp.ones(geometry.senders.shape[0]), n)
        self.method_ = method
        problem = bl.BoltzmannProblem(
            geometry, np.asarray(labels), int(max(n_classes, 2)), self.model
        )
        prior = self._prior(problem)
        chains = bl.ChainSettings(
            n_chains=int(self.n_chains), n_samples=int(self.n_samples), burn_in=int(self.burn_in)
        )
        key = jax.random.key(self._seed())
        k_fit, k_post = jax.random.split(key)
        theta, info, trials = bl.random_restarts(
            problem,
            k_fit,
            int(self.n_restarts),
            method=method,
            prior=prior,
            chains=chains,
            step=float(self.step),
            max_iter=int(self.max_iter),
        )
        post = bl.posterior(problem, theta, method=method, key=k_post)
        self.theta_ = theta
        self.fit_info_ = info
        self.restarts_ = trials
        self.log_likelihood_ = float(info["log_likelihood"])
        self.n_iter_ = int(info["iterations"])
        self.suspected_label_errors_ = post.suspected_errors
        self._map_encoded = np.asarray(post.map_labels)  # map_labels_ set by the base
        self.samples_, self._sampled_model = post.samples, post.model  # None: enumeration
        if post.samples is not None:  # R-hat / ESS of the final posterior's chains
            from graphssl.diagnostics import check_convergence

            self._training_labels = np.asarray(labels)
            self.convergence_ = check_convergence(
                post.samples, model=post.model, observed_labels=labels,
                source=type(self).__name__, stacklevel=3)
        if isinstance(theta, bl.BasicParams):
            self.sigma_ = float(jnp.exp(theta.log_sigma))
        else:
            self.log_length_scales_ = np.asarray(theta.log_length_scales)
            self.length_scales_ = np.sqrt(np.exp(self.log_length_scales_) / 2.0)
        return post.marginals[:, :n_classes]
