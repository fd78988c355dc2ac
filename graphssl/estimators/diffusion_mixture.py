"""scikit-learn classifier over Walder's Dirichlet mixture of graph diffusions."""

from __future__ import annotations

import jax
import numpy as np

from graphssl.estimators.base import GraphSSLClassifier
from graphssl.inference.diffusion_mixture.sampler import (
    ENGINES,
    MOVES,
    class_marginals,
    map_estimate,
    move_counts,
    sample_mixture,
    sample_mixture_until_converged,
)
from graphssl.models.diffusion_mixture import DirichletDiffusionMixture, parzen_scores

__all__ = ["DiffusionMixtureClassifier", "DiffusionMixtureGridClassifier"]


def _class_prior(class_prior, labels, n_classes):
    """eta from the estimator option: None (uniform), "labelled" (smoothed labelled
    frequencies) or C numbers."""
    if class_prior is None:
        return None
    if isinstance(class_prior, str):
        if class_prior != "labelled":
            raise ValueError("class_prior: use None, 'labelled' or C proportions")
        counts = np.bincount(labels[labels >= 0], minlength=n_classes) + 1.0
        return counts / counts.sum()
    return class_prior


class DiffusionMixtureClassifier(GraphSSLClassifier):
    """Dirichlet mixture of graph diffusions with MRF and class-balancing potentials.

    Walder, Sec. 3.5 (model), Sec. 4 (MCMC), Sec. 5 (protocol: kNN graph with k = 10,
    ``w = exp(-omega d^2)``, omega from the mean squared distance, tau = 5, alpha = 0.5,
    gamma in {0, 0.8}, eta known).

    Parameters (besides the graph options ``k, symmetrize, weight, sigma`` of the base):
      tau: diffusion time of ``K_tau = exp(-tau L / 2)``.
      alpha: Dirichlet concentration (Eq. 3); gamma: MRF strength (Eq. 4); default 0.8,
        Walder's best on Digit1 and Text (benchmarks/bench_diffusion_mixture.py, Digit1 with
        10 labels: 0.932 at gamma = 0.8 vs 0.634 at 0).
      class_prior: eta: None (uniform), ``"labelled"`` (labelled frequencies) or C numbers.
      balance: include p_BAL (Eq. 5); False is the Fig. 2 ablation.
      laplacian_kind: ``"symmetric"`` (I - S) or ``"walder"`` (diag(S 1) - S).
      n_chains, n_iterations, burn_in, thin: MCMC settings (one iteration = Gibbs sweep +
        one attempt of each Metropolis–Hastings move).
      max_components: R of the re-labelling move (Sec. 4.2).
      moves: attempts per iteration of the (re-sampling, re-labelling, split-merge,
        centred split-merge, cluster-flip, neighbourhood block, component flip) moves;
        ``(1, 1, 0)`` is the paper's iteration, the last five are ours (see
        :func:`~graphssl.inference.diffusion_mixture.kernels.mixture_kernel`);
        ``(20, 1, 0, 4, 0, 0, 10)`` is what the notebook uses: on Digit1 its chains agree
        (every R-hat < 1.01) after 5 x 10^4 iterations, the paper's after 3 x 10^5.
      block_size: nodes re-drawn by one neighbourhood block move.
      estimate: ``"mean"`` (posterior class marginals) or ``"map"`` (most probable visited
        state refined by conditional maximisation, one-hot).
      init: ``"random"`` (chains start apart: labels ~ eta, random centres) or ``"parzen"``
        (labels from the graph Parzen window on the same D_tau, a fraction ``init_noise``
        redrawn per chain so that chains still start apart; centres beta_i = i).
      random_state: None, an int or a ``numpy.random.Generator``.
      engine: the Gibbs sweep's implementation, ``"auto"`` (one fused kernel per chain on a
        GPU, ``lax.scan`` elsewhere), ``"scan"`` or ``"pallas"`` (same draws either way; see
        :func:`~graphssl.inference.diffusion_mixture.kernels.resolve_engine`).

    Attributes after ``fit``: those of the base, plus ``model_``, ``samples_``
    (the :class:`~graphssl.inference.mcmc.chains.Samples` of
    :func:`~graphssl.inference.diffusion_mixture.sampler.sample_mixture`),
    ``posterior_mean_`` (float[n, C]), ``map_labels_`` (int[n], values of ``classes_``),
    ``map_log_joint_``, ``acceptance_`` (mean acceptance rate of each move attempted).
    :meth:`sample_more` continues the chains of a fitted model, :meth:`run_until_converged`
    continues them until R-hat says they agree.
    """

    def __init__(self, k=10, symmetrize="max", weight="gaussian", sigma="walder", tau=5.0,
                 alpha=0.5, gamma=0.8, class_prior=None, balance=True,
                 laplacian_kind="symmetric", n_chains=4, n_iterations=1000, burn_in=100,
                 thin=10, max_components=2, moves=(1, 1, 0), estimate="mean", init="random",
                 init_noise=0.1, random_state=0, engine="auto", block_size=24):
        super().__init__(k=k, symmetrize=symmetrize, weight=weight, sigma=sigma)
        self.tau = tau
        self.alpha = alpha
        self.gamma = gamma
        self.class_prior = class_prior
        self.balance = balance
        self.laplacian_kind = laplacian_kind
        self.n_chains = n_chains
        self.n_iterations = n_iterations
        self.burn_in = burn_in
        self.thin = thin
        self.max_components = max_components
        self.moves = moves
        self.estimate = estimate
        self.init = init
        self.init_noise = init_noise
        self.random_state = random_state
        self.engine = engine
        self.block_size = block_size

    def _eta(self, labels, n_classes):
        return _class_prior(self.class_prior, labels, n_classes)

    def _label_distributions(self, graph, labels, n_classes) -> np.ndarray:
        if self.estimate not in ("mean", "map"):
            raise ValueError(f"estimate: got {self.estimate!r}; use 'mean' or 'map'")
        if self.engine not in ENGINES:
            raise ValueError(f"engine: got {self.engine!r}; use one of {ENGINES}")
        self.model_ = DirichletDiffusionMixture.create(
            graph, labels, n_classes, tau=self.tau, alpha=self.alpha, gamma=self.gamma,
            class_prior=self._eta(labels, n_classes), balance=self.balance,
            laplacian_kind=self.laplacian_kind)
        if self.init not in ("random", "parzen"):
            raise ValueError(f"init: got {self.init!r}; use 'random' or 'parzen'")
        thin = min(int(self.thin), int(self.n_iterations))
        warm = self.init == "parzen"
        start = np.asarray(parzen_scores(self.model_)).argmax(axis=1) if warm else None
        self.samples_ = sample_mixture(
            self.model_, jax.random.PRNGKey(self._seed()), n_chains=self.n_chains,
            n_iterations=self.n_iterations, burn_in=self.burn_in, thin=thin,
            max_components=self.max_components, moves=tuple(self.moves),
            init_beta="self" if warm else "random",
            init_labels=start, init_noise=float(self.init_noise) if warm else 0.0,
            engine=self.engine, block_size=int(self.block_size))
        return self._summarise(n_classes)

    def _summarise(self, n_classes) -> np.ndarray:
        """Posterior mean, MAP and acceptance rates from ``samples_``; the label
        distributions that ``estimate`` asks for."""
        self.posterior_mean_ = class_marginals(self.samples_)
        map_labels, self.map_log_joint_, _ = map_estimate(self.model_, self.samples_,
                                                          engine=self.engine)
        attempts = dict(zip(MOVES, move_counts(self.moves), strict=True))
        self.acceptance_ = {name: float(np.mean(self.samples_.stats[f"{name}_accepted"]))
                            for name, n in attempts.items() if n > 0}
        self._map_encoded = np.asarray(map_labels)  # map_labels_ set by the base
        self._check_convergence()
        if self.estimate == "map":
            return np.eye(n_classes)[self._map_encoded]
        return self.posterior_mean_

    def sample_more(self, n_iterations: int):
        """Continue the fitted chains for ``n_iterations`` more iterations (no new burn-in)
        and update every fitted attribute; the result equals a fit with the iterations
        added up (``sample_mixture(resume=...)``). Returns ``self``."""
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self, "samples_")
        thin = int(self.samples_.thin)
        if int(n_iterations) < thin:
            raise ValueError(f"n_iterations: must be >= thin={thin}, got {n_iterations}")
        self.samples_ = sample_mixture(
            self.model_, jax.random.PRNGKey(self._seed()),
            n_iterations=int(n_iterations), thin=thin, max_components=self.max_components,
            moves=tuple(self.moves), resume=self.samples_, engine=self.engine,
            block_size=int(self.block_size))
        self._set_label_distributions(self._summarise(len(self.classes_)))
        return self

    def run_until_converged(self, target_rhat: float = 1.01, check_every: int = 2000,
                            max_iterations: int = 50_000, pairs=None, progress: bool = True):
        """Continue the fitted chains in chunks of ``check_every`` iterations until every
        R-hat on the permutation-invariant statistics is at most ``target_rhat`` (checked on
        the last half of the chunks; the fit and the first half are warm-up), or
        ``max_iterations`` have run
        (:func:`~graphssl.inference.diffusion_mixture.sampler.sample_mixture_until_converged`
        on the generic :func:`graphssl.inference.mcmc.convergence.sample_until_converged`).
        ``samples_`` becomes the checked window (its class marginals cover every iteration
        of this call) and every fitted attribute is updated from it; ``convergence_checks_``
        lists the checks (``[-1].max_rhat`` says whether the
        target was met). Returns ``self``."""
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self, "samples_")
        self.samples_, self.convergence_checks_ = sample_mixture_until_converged(
            self.model_, target_rhat=target_rhat, check_every=int(check_every),
            max_iterations=int(max_iterations), resume=self.samples_, pairs=pairs,
            progress=progress, thin=int(self.samples_.thin), max_components=self.max_components,
            moves=tuple(self.moves), engine=self.engine, block_size=int(self.block_size))
        self._set_label_distributions(self._summarise(len(self.classes_)))
        return self

    def _invariant_traces(self) -> dict:
        """The mixture's own permutation-invariant per-draw statistics (``n_components``,
        ``edge_agreement``), judged and shown beside the energy, class sizes and pairs."""
        from graphssl.inference.diffusion_mixture.sampler import TRACE_STATISTICS

        stats = self.samples_.stats
        return {name: np.asarray(stats[name]) for name in TRACE_STATISTICS if name in stats}

    def _check_convergence(self) -> None:
        """``convergence_``: R-hat / ESS of the invariant statistics
        (:func:`graphssl.diagnostics.check_convergence`); a ``ConvergenceWarning`` names
        the fix (more iterations, :meth:`sample_more`, :meth:`run_until_converged`)."""
        from graphssl.diagnostics import check_convergence

        self.convergence_ = check_convergence(
            self.samples_, model=self.model_, extra=self._invariant_traces(),
            source=type(self).__name__, stacklevel=4)

    def to_arviz(self, **kwargs):
        """The chains as an ArviZ DataTree (:func:`graphssl.diagnostics.to_arviz`):
        ``posterior`` holds the energy ``-log p(y, beta)``, sorted class sizes, co-assignment
        of 10 node pairs, ``n_components`` and ``edge_agreement``; ``posterior_labels`` the
        per-node draws; ``constant_data`` the Rao-Blackwellised class marginals and the
        refined MAP labels; ``sample_stats`` the move acceptances. ``kwargs`` go to the
        converter."""
        from sklearn.utils.validation import check_is_fitted

        from graphssl.diagnostics import to_arviz
        from graphssl.inference.diffusion_mixture.sampler import class_marginals

        check_is_fitted(self, "samples_")
        kwargs.setdefault("extra_posterior", self._invariant_traces())
        kwargs.setdefault("label_marginals", class_marginals(self.samples_))
        kwargs.setdefault("map_labels", self._map_encoded)
        if len(getattr(self, "classes_", ())) == int(self.samples_.n_classes):
            kwargs.setdefault("class_names", self.classes_)
        return to_arviz(self.samples_, model=self.model_, **kwargs)


class DiffusionMixtureGridClassifier(GraphSSLClassifier):
    """Walder's mixture at every ``(k, tau)`` of a grid, combined (Sec. 5 with 100 labels).

    The mixture runs at each setting of ``k_grid x tau_grid`` (one batched sampler call,
    :func:`~graphssl.inference.diffusion_mixture.selection.fit_grid`; graphs as Walder's:
    kNN with ``w = exp(-omega d^2)``) and the settings are combined by ``combine``:

      ``"average"``: the posterior class marginals averaged with equal weights (an ensemble
        over the grid);
      ``"loo_average"``: weights proportional to the leave-one-out predictive of the labels
        ``prod_i CPO_i`` (pseudo-Bayesian model averaging);
      ``"parzen"``: the one setting of smallest leave-one-out Parzen error (Walder's choice);
      ``"mixture"``: the one setting of smallest leave-one-out log loss of the mixture.

    Other parameters: alpha, gamma, class_prior as :class:`DiffusionMixtureClassifier`;
    n_chains, burn_in; n_checkpoints x every iterations after burn-in (the leave-one-out
    predictive is read at each checkpoint); moves; random_state. ``k`` is the graph of the
    inductive extension to new points only (``predict_proba(X_new)``). Needs features:
    ``fit_graph`` is not available (each k builds its own graph).

    Attributes after ``fit``: those of the base, plus ``grid_``
    (:class:`~graphssl.inference.diffusion_mixture.selection.GridFit`), ``scores_`` (one
    ``GridScore`` per setting), ``weights_`` (float[G], one-hot for a choice) and
    ``chosen_`` (``(k, tau)`` of the largest weight).
    """

    def __init__(self, k=10, k_grid=(5, 10, 20), tau_grid=(1.0, 2.5, 5.0, 10.0, 20.0),
                 combine="average", alpha=0.5, gamma=0.8, class_prior=None, n_chains=1,
                 n_checkpoints=8, every=25, burn_in=100, moves=(1, 1, 0), random_state=0):
        super().__init__(k=k, symmetrize="max", weight="gaussian", sigma="walder")
        self.k_grid = k_grid
        self.tau_grid = tau_grid
        self.combine = combine
        self.alpha = alpha
        self.gamma = gamma
        self.class_prior = class_prior
        self.n_chains = n_chains
        self.n_checkpoints = n_checkpoints
        self.every = every
        self.burn_in = burn_in
        self.moves = moves
        self.random_state = random_state

    def _label_distributions(self, graph, labels, n_classes) -> np.ndarray:
        from graphssl.inference.diffusion_mixture.selection import fit_grid

        if self.X_fit_ is None:
            raise ValueError("graph: DiffusionMixtureGridClassifier builds one graph per k of "
                             "k_grid from the features; call fit(X, y), or "
                             "DiffusionMixtureClassifier().fit_graph(graph, y)")
        if self.combine not in ("average", "loo_average", "parzen", "mixture"):
            raise ValueError(f"combine: got {self.combine!r}; use 'average', 'loo_average', "
                             "'parzen' or 'mixture'")
        self.grid_ = fit_grid(
            self.X_fit_, labels, k_grid=tuple(self.k_grid), tau_grid=tuple(self.tau_grid),
            class_prior=_class_prior(self.class_prior, labels, n_classes), alpha=self.alpha,
            gamma=self.gamma, key=jax.random.PRNGKey(self._seed()),
            n_chains=int(self.n_chains), n_checkpoints=int(self.n_checkpoints),
            every=int(self.every), burn_in=int(self.burn_in), moves=tuple(self.moves))
        self.scores_ = self.grid_.scores
        if self.combine in ("average", "loo_average"):
            self.weights_ = self.grid_.weights("uniform" if self.combine == "average" else "loo")
        else:
            self.weights_ = np.eye(len(self.scores_))[self.grid_.choose(self.combine)]
        top = self.scores_[int(np.argmax(self.weights_))]
        self.chosen_ = (top.k, top.tau)
        dist = np.tensordot(self.weights_, self.grid_.class_probs, axes=1)
        return dist / dist.sum(axis=1, keepdims=True)
