"""scikit-learn classifier over Walder's Dirichlet mixture of graph diffusions."""

from __future__ import annotations

import jax
import numpy as np

from graphssl._progress import check_progress
from graphssl.estimators.base import GraphSSLClassifier
from graphssl.estimators.feature_prior import FeaturePriorMixin
from graphssl.inference.diffusion_mixture.sampler import (
    ENGINES,
    MOVES,
    class_marginals,
    map_search_mixture,
    move_counts,
    sample_mixture,
    sample_mixture_until_converged,
)
from graphssl.inference.diffusion_mixture.selection import (
    GAMMA_CANDIDATES,
    mixture_leave_one_out,
    select_gamma,
)
from graphssl.inference.optimize.baselines.propagation import labelled_class_proportions
from graphssl.inference.optimize.feature_prior import fit_harmonic_with_prior
from graphssl.models.diffusion_mixture import (
    DirichletDiffusionMixture,
    parzen_scores,
    with_graph_proportions,
)
from graphssl.validation import check_count, check_flag, check_real

__all__ = ["DiffusionMixtureClassifier", "DiffusionMixtureGridClassifier"]

_COMBINE = ("average", "loo_average", "stacking", "parzen", "mixture", "psis_loo", "cpo")
_GRID_EXAMPLE = {"k_grid": (5, 10, 20), "tau_grid": (1.0, 5.0, 10.0)}
# alpha and gamma reach the samplers in float32: far larger values overflow it (alpha's
# log-gamma table, gamma's MRF energy; 1e300 ended in "no state after burn-in")
PARAMETER_MAX = 1e30
# exp(-tau L / 2) is the stationary diffusion long before tau = 1e6 (a spectral gap of 1e-5
# is already exp(-5)), while the Laplacian's rounding errors (about 1e-16 on its zero
# eigenvalue) times tau stop being negligible beyond ~1e12 (tau = 1e20 broke the chains)
TAU_MAX = 1e6


def _check_tau(tau, name: str = "tau") -> float:
    return check_real(tau, name, low=0.0, high=TAU_MAX)


def _check_alpha_gamma(alpha, gamma) -> None:
    """alpha in (0, 1e30]; gamma in [0, 1e30] unless ``"auto"`` (:func:`_gamma_option`)."""
    check_real(alpha, "alpha", low=0.0, high=PARAMETER_MAX, low_open=True)
    if not _gamma_option(gamma):
        check_real(gamma, "gamma", low=0.0, high=PARAMETER_MAX)


def _check_moves(moves) -> tuple[int, ...]:
    """``moves``: 2 to 7 attempt counts (whole numbers >= 0; bools as 0 / 1), as a tuple."""
    wanted = (f"moves: a tuple of 2 to {len(MOVES)} attempt counts per iteration "
              f"({', '.join(MOVES)}), e.g. (1, 1, 0)")
    if isinstance(moves, str | bytes) or not isinstance(moves, tuple | list | np.ndarray):
        raise ValueError(f"{wanted}, got {moves!r}")
    if not 2 <= len(moves) <= len(MOVES):
        raise ValueError(f"{wanted}, got {len(moves)} entries: {moves!r}")
    return tuple(int(m) if isinstance(m, bool | np.bool_)
                 else check_count(m, f"moves[{i}]", least=0) for i, m in enumerate(moves))


def _class_prior(class_prior, labels, n_classes, graph_ok: bool = False):
    """eta from the estimator option: None (uniform), "labelled" (smoothed labelled
    frequencies) or C numbers; with ``graph_ok`` also "auto" / "graph" (returned as "graph":
    the graph Parzen window's proportions, read once the model exists)."""
    if class_prior is None:
        return None
    if isinstance(class_prior, str):
        if graph_ok and class_prior in ("auto", "graph"):
            return "graph"
        if class_prior != "labelled":
            raise ValueError(f"class_prior: got {class_prior!r}; use None, 'labelled', 'auto', "
                             "'graph' or C proportions")
        return labelled_class_proportions(np.bincount(labels[labels >= 0],
                                                      minlength=n_classes))
    return class_prior


def _gamma_option(gamma) -> bool:
    """True for ``gamma="auto"`` (chosen from the data); a number is checked by
    :func:`_check_alpha_gamma`."""
    if isinstance(gamma, str) and gamma != "auto":
        raise ValueError(f"gamma: use 'auto' or a number >= 0 (Walder's 0 or 0.8), got "
                         f"{gamma!r}")
    return isinstance(gamma, str)


def _reads_psis(combine: str, default: str) -> bool:
    """Whether a combination of the grid reads PSIS-LOO (then its Pareto k is reported)."""
    return combine in ("stacking", "psis_loo") or (combine == "mixture" and default == "psis_loo")


class DiffusionMixtureClassifier(FeaturePriorMixin, GraphSSLClassifier):
    """Dirichlet mixture of graph diffusions with MRF and class-balancing potentials.

    Walder, Sec. 3.5 (model), Sec. 4 (MCMC), Sec. 5 (protocol: kNN graph with k = 10,
    ``w = exp(-omega d^2)``, omega from the mean squared distance, tau = 5, alpha = 0.5,
    gamma in {0, 0.8}, eta known).

    Parameters (besides the graph options ``k, symmetrize, weight, sigma`` and ``standardize``
    of the base; ``sigma="local"`` by default, each point's own k-th neighbour distance / 3,
    where Walder uses one global omega, ``sigma="walder"``: on splits 0-2 of the default
    panel, 12 sets, the local widths gained 1.7 points on average, COIL2-10 56.6 -> 65.8,
    COIL2-100 89.4 -> 94.9, USPS-100 81.8 -> 84.9, and lost on iris 93.6 -> 92.5 and wine
    94.8 -> 93.5):
      tau: diffusion time of ``K_tau = exp(-tau L / 2)``, in [0, 1e6] (:data:`TAU_MAX`:
        the stationary diffusion before it, the Laplacian's rounding errors matter beyond).
      alpha: Dirichlet concentration (Eq. 3), in (0, 1e30] (:data:`PARAMETER_MAX`: the
        chains run in float32).
      gamma: MRF strength (Eq. 4): a number in [0, 1e30], or ``"auto"`` (default): Walder's two
        values, 0.8 (his best on Digit1 and Text; benchmarks/bench_diffusion_mixture.py,
        Digit1 with 10 labels: 0.932 against 0.634 at 0) and 0 (his best on USPS with 10
        labels), chosen by the mixture's own leave-one-out predictive of the labelled nodes
        from a short run of each (:func:`~graphssl.inference.diffusion_mixture.selection.
        select_gamma`: one chain each, 300 iterations at the default length, batched;
        measured +17 to +29 % of a fit's time in a warm process, +33 to +37 % in a fresh
        one, Digit1-10 and USPS-100 split 0, 2-core CPU); the main chains then run at the
        chosen value with the draws a fit at that fixed value gives. On splits 0-2 of the
        defaults panel it chose 0 on USPS only (USPS-10 75.0 -> 76.3, USPS-100 87.0 ->
        90.8; no other cell moved; 11 held-out sets: mean 59.2 both ways). ``gamma_``
        holds the value used, ``gamma_choice_`` the candidates' scores (None when gamma
        was given or no node is labelled).
      class_prior: eta: ``"auto"`` (default), ``"graph"``, None (uniform), ``"labelled"``
        (labelled frequencies, smoothed) or C numbers. ``"graph"``: the class proportions of
        the graph Parzen window on the model's own D_tau (labelled nodes at their labels,
        add-one smoothed; ``class_prior_`` holds them): an estimate from all m nodes where
        the labelled counts come from 10 points. ``"auto"``: the feature model's expected
        proportions when ``fit_graph`` got node features (below), else ``"graph"``.
        Measured against uniform eta (split 0, 10 labels a class or the shipped splits):
        USPS-10 0.687 -> 0.831 (split 1: 0.660 -> 0.721; 80 % of USPS is one class),
        USPS-100 0.685 -> 0.790, breast_cancer 0.883 -> 0.923 (split 1: 0.883 -> 0.914),
        Text-10 0.738 -> 0.741, wine and Digit1-10 unchanged, digits 0.982 -> 0.975,
        COIL2-10 0.589 -> 0.577.
      balance: include p_BAL (Eq. 5); False is the Fig. 2 ablation.
      laplacian_kind: ``"symmetric"`` (I - S) or ``"walder"`` (diag(S 1) - S).
      n_chains, n_iterations, burn_in, thin: MCMC settings (one iteration = Gibbs sweep +
        one attempt of each Metropolis–Hastings move). ``n_iterations="auto"`` (default):
        size-aware, a sweep costs O(m^2 C) (each node's conditional is over C classes x m
        centres): ``1000 x (1500^2 x 2) / (m^2 C)`` iterations clipped to [100, 1000], i.e.
        1000 up to Walder's sets (m = 1500, two classes) and 100 on CiteSeer (m = 3327,
        C = 6; measured 0.19 CPU s an iteration of 4 chains there, 2-core CPU);
        ``burn_in="auto"``: a tenth of the ``"auto"`` iterations (100 at 1000), else 100.
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
      class_mass_normalize: False (default) or True: with ``estimate="mean"``, scale the
        unlabelled nodes' marginals column by column so that the class masses match eta
        (``class_prior_``), then renormalise each row (class mass normalisation, Zhu,
        Ghahramani & Lafferty 2003, Sec. 4); ``posterior_mean_`` keeps the marginals and
        the chains are the same. The posterior's class sizes sit between eta and an even
        split (USPS, eta 0.73-0.75 for its 80 % class: 62-66 % of the nodes). Measured on
        the same chains (``benchmarks/bench_dm_decision.py``, splits 0-2): USPS-100 90.8
        -> 93.3, USPS-10 76.3 -> 76.7, Text-10 73.7 -> 72.7 (eta from the graph, 0.55-0.57
        for an even split), the other panel sets within 0.4 points; panel mean 86.7 ->
        86.8, held-out mean 59.2 -> 58.9 (monks2 +2.6, monks3 +1.1; monks1 and tae -1.7,
        musk1 -1.3). With eta known (the true proportions as ``class_prior``) it adds
        little: USPS-100 93.1 -> 93.8, USPS-10 77.4 -> 76.9. Not the default: it trusts
        eta, and the posterior's own class sizes were the better bet off USPS.
      init: ``"random"`` (chains start apart: labels ~ eta, random centres), ``"parzen"``
        (labels from the graph Parzen window on the same D_tau, a fraction ``init_noise``
        redrawn per chain so that chains still start apart; centres beta_i = i),
        ``"features"`` (the same from the labels of the harmonic function with the feature
        prior, :class:`~graphssl.estimators.baselines.HarmonicFunctionClassifier`'s route;
        needs node features) or ``"auto"`` (default: ``"features"`` when ``fit_graph`` got
        node features, else ``"parzen"``). Random starts settle in label-swapped states that
        800 iterations do not leave (``notebooks/dirichlet_diffusion_mixture.ipynb``):
        Digit1, 10 labels, splits 0-1 of the defaults panel, random start 0.709 / 0.563,
        Parzen start 0.973 / 0.954 (``benchmarks/bench_defaults.py``).
      features: ``"auto"`` (default) or None. With node features (``fit_graph(graph, y,
        X=features)``) the feature model of :mod:`graphssl.estimators.feature_prior` gives
        (1) the class prior eta of p_BAL (Eq. 5) when ``class_prior`` is ``"auto"`` or
        None: the expected class proportions, the mean over all nodes of the one-hot labels
        and the feature model's predictions ``h_i`` of the unlabelled nodes; (2) with
        ``init="auto"``, the chains' start (above); (3) the distribution of every node that
        no label reaches (a component without a labelled node): ``h_i``. The joint itself
        keeps Walder's global eta (no per-node prior term). On CiteSeer's split_val the
        start moves the posterior mean from 0.61 (Parzen start) to 0.64-0.65 and eta from
        the features adds about a point (benchmarks/bench_citation.py).
      random_state: None, an int or a ``numpy.random.Generator``.
      engine: the Gibbs sweep's implementation, ``"auto"`` (one fused kernel per chain on a
        GPU, ``lax.scan`` elsewhere), ``"scan"`` or ``"pallas"`` (same draws either way; see
        :func:`~graphssl.inference.diffusion_mixture.kernels.resolve_engine`).
      pointwise_loo: record, at every retained draw, the leave-one-out predictive of each
        labelled node (Eq. 7 summed over its centre: ``log p(y_i | y_-i, beta_-i)``, the
        pointwise log-likelihood of ``to_arviz()``'s ``log_likelihood`` group that ``az.loo``
        reads); the chains run in chunks of ``thin`` iterations, the same draws as one run
        (:func:`~graphssl.inference.diffusion_mixture.selection.mixture_leave_one_out`;
        measured 8 % more CPU time at thin = 10). False: one sampler call, no group.
      progress: ``"auto"`` (default), True or False. ``"auto"``: once the first checkpoints
        show that the chains need more than 10 s more, one line on stderr says so and why
        (a sweep re-draws m labels against C x m centre kernels, O(m^2 C) a chain), with
        the setting that shortens it, and a progress bar follows
        (:mod:`graphssl._progress`; with ``pointwise_loo=False`` the run is one sampler
        call: a bar only when True).

    Attributes after ``fit``: those of the base, plus ``model_``, ``class_prior_`` (eta),
    ``samples_``
    (the :class:`~graphssl.inference.mcmc.chains.Samples` of
    :func:`~graphssl.inference.diffusion_mixture.sampler.sample_mixture`),
    ``posterior_mean_`` (float[n, C]), ``map_labels_`` (int[n], values of ``classes_``: the
    lowest energy ``-log p(y, beta)`` found among the chains' refined best state and the
    posterior-mean labels before and after refinement, energies side by side in
    ``map_search_``, a :class:`~graphssl.inference.diffusion_mixture.sampler.MixtureMapSearch`),
    ``map_log_joint_``, ``acceptance_`` (mean acceptance rate of each move attempted),
    ``log_likelihood_`` (float[chains, draws, L] of ``pointwise_loo``, or None).
    :meth:`sample_more` continues the chains of a fitted model, :meth:`run_until_converged`
    continues them until R-hat says they agree.
    """

    def __init__(self, k=10, symmetrize="max", weight="gaussian", sigma="local", tau=5.0,
                 alpha=0.5, gamma="auto", class_prior="auto", balance=True,
                 laplacian_kind="symmetric", n_chains=4, n_iterations="auto", burn_in="auto",
                 thin=10, max_components=2, moves=(1, 1, 0), estimate="mean", init="auto",
                 init_noise=0.1, random_state=0, engine="auto", block_size=24,
                 standardize="auto", pointwise_loo=True, features="auto", progress="auto",
                 class_mass_normalize=False):
        super().__init__(k=k, symmetrize=symmetrize, weight=weight, sigma=sigma,
                         standardize=standardize)
        self.progress = progress
        self.class_mass_normalize = class_mass_normalize
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
        self.pointwise_loo = pointwise_loo
        self.features = features

    def _check_params(self) -> None:
        """The numbers and flags, before any graph, model or chain (the run's counts: whole
        numbers; tau up to :data:`TAU_MAX`, alpha and gamma up to :data:`PARAMETER_MAX`)."""
        _check_tau(self.tau)
        _check_alpha_gamma(self.alpha, self.gamma)
        check_flag(self.balance, "balance")
        check_flag(self.pointwise_loo, "pointwise_loo")
        check_flag(self.class_mass_normalize, "class_mass_normalize")
        check_count(self.n_chains, "n_chains", least=1)
        if not (isinstance(self.n_iterations, str) and self.n_iterations == "auto"):
            if isinstance(self.n_iterations, str):
                raise ValueError(f"n_iterations: use 'auto' or a positive integer, got "
                                 f"{self.n_iterations!r}")
            check_count(self.n_iterations, "n_iterations", least=1)
        if not (isinstance(self.burn_in, str) and self.burn_in == "auto"):
            if isinstance(self.burn_in, str):
                raise ValueError(f"burn_in: use 'auto' or an integer >= 0, got "
                                 f"{self.burn_in!r}")
            check_count(self.burn_in, "burn_in", least=0)
        check_count(self.thin, "thin", least=1)
        check_count(self.max_components, "max_components", least=1)
        check_count(self.block_size, "block_size", least=1)
        _check_moves(self.moves)
        check_real(self.init_noise, "init_noise", low=0.0, high=1.0)

    def _validate_graph_params(self, n: int) -> int:
        self._check_params()  # fit(X, y): before the graph is built
        return super()._validate_graph_params(n)

    def _eta(self, labels, n_classes, prior=None):
        """eta for ``create``: proportions, None (uniform) or ``"graph"`` (read from the
        model's Parzen window once it exists,
        :func:`~graphssl.models.diffusion_mixture.with_graph_proportions`)."""
        class_prior = self.class_prior
        if isinstance(class_prior, str) and class_prior == "auto":
            class_prior = None if prior is not None else "graph"
        if class_prior is None and prior is not None:  # expected class proportions
            expected = prior.probs.copy()
            rows = np.flatnonzero(labels >= 0)
            expected[rows] = np.eye(n_classes)[labels[rows]]
            return expected.mean(axis=0)
        if isinstance(class_prior, str) and class_prior == "graph":
            return "graph"
        return _class_prior(class_prior, labels, n_classes)

    def _run_length(self, n_nodes, n_classes):
        """``(n_iterations, burn_in)``: the parameters, or the size-aware ``"auto"`` rules."""
        n_iterations, burn_in = self.n_iterations, self.burn_in
        if isinstance(n_iterations, str):
            if n_iterations != "auto":
                raise ValueError(f"n_iterations: use 'auto' or a positive integer, got "
                                 f"{n_iterations!r}")
            budget = 1000.0 * 1500**2 * 2 / (float(n_nodes) ** 2 * n_classes)
            n_iterations = int(np.clip(round(budget), 100, 1000))
        if isinstance(burn_in, str):
            if burn_in != "auto":
                raise ValueError(f"burn_in: use 'auto' or an integer >= 0, got {burn_in!r}")
            burn_in = int(n_iterations) // 10 if self.n_iterations == "auto" else 100
        return int(n_iterations), int(burn_in)

    def _start(self, graph, labels, n_classes, prior):
        """Initial labels of the chains (``init``), or None for random starts."""
        init = self.init
        if init not in ("auto", "random", "parzen", "features"):
            raise ValueError(f"init: got {init!r}; use 'auto', 'random', 'parzen' or "
                             "'features'")
        if init == "auto":
            init = "features" if prior is not None else "parzen"
        if init == "parzen":
            return np.asarray(parzen_scores(self.model_)).argmax(axis=1)
        if init == "features":
            if prior is None:
                raise ValueError("init: 'features' needs node features; call "
                                 "fit_graph(graph, y, X=features) or use init='parzen'")
            f, _, _ = fit_harmonic_with_prior(graph, labels, prior, n_classes=n_classes)
            return f.argmax(axis=1)
        return None

    def _label_distributions(self, graph, labels, n_classes) -> np.ndarray:
        if self.estimate not in ("mean", "map"):
            raise ValueError(f"estimate: got {self.estimate!r}; use 'mean' or 'map'")
        self._check_params()
        if self.engine not in ENGINES:
            raise ValueError(f"engine: got {self.engine!r}; use one of {ENGINES}")
        prior = self._fit_feature_prior(labels, n_classes)
        n_iterations, burn_in = self._run_length(graph.n_nodes, n_classes)
        eta = self._eta(labels, n_classes, prior)
        from_graph = isinstance(eta, str)
        choose_gamma = _gamma_option(self.gamma)
        self.model_ = DirichletDiffusionMixture.create(
            graph, labels, n_classes, tau=self.tau, alpha=self.alpha,
            gamma=GAMMA_CANDIDATES[0] if choose_gamma else self.gamma,
            class_prior=None if from_graph else eta, balance=bool(self.balance),
            laplacian_kind=self.laplacian_kind)
        if from_graph:
            self.model_ = with_graph_proportions(self.model_, labels)
        self.class_prior_ = np.exp(np.asarray(self.model_.log_eta, dtype=np.float64))
        thin = min(int(self.thin), n_iterations)
        start = self._start(graph, labels, n_classes, prior)
        warm = start is not None
        run = dict(max_components=int(self.max_components), moves=_check_moves(self.moves),
                   engine=self.engine, block_size=int(self.block_size))
        start_kwargs = dict(init_beta="self" if warm else "random", init_labels=start,
                            init_noise=float(self.init_noise) if warm else 0.0)
        key = jax.random.PRNGKey(self._seed())
        self.log_likelihood_ = None
        check_progress(self.progress)
        self.gamma_choice_ = None
        if choose_gamma and np.any(labels >= 0):
            # its own stream: the main chains' draws are those of a fit with gamma fixed
            self.gamma_choice_ = select_gamma(
                self.model_, jax.random.fold_in(key, 1), n_iterations=n_iterations,
                burn_in=burn_in, progress=self.progress, init_beta=start_kwargs["init_beta"],
                init_labels=start, **run)
            self.model_ = self.model_.replace(gamma=self.gamma_choice_.gamma)
        self.gamma_ = (self.gamma_choice_.gamma if self.gamma_choice_ is not None
                       else GAMMA_CANDIDATES[0] if choose_gamma else float(self.gamma))
        if bool(self.pointwise_loo) and np.any(labels >= 0):
            why = (f"each iteration re-draws the labels of {graph.n_nodes} nodes against "
                   f"{n_classes} classes x {graph.n_nodes} centre kernels (O(m^2 C)) in "
                   f"{self.n_chains} chains, {n_iterations} iterations; n_iterations or "
                   "n_chains shortens it")
            self.samples_, loo = mixture_leave_one_out(
                self.model_, key, n_checkpoints=n_iterations // thin, every=thin,
                burn_in=burn_in, n_chains=int(self.n_chains), progress=self.progress, why=why,
                **run, **start_kwargs)
            self.log_likelihood_ = loo.log_likelihood()
        else:
            self.samples_ = sample_mixture(
                self.model_, key, n_chains=int(self.n_chains), n_iterations=n_iterations,
                burn_in=burn_in, thin=thin, progress=self.progress is True, **run,
                **start_kwargs)
        return self._summarise(n_classes)

    def _summarise(self, n_classes) -> np.ndarray:
        """Posterior mean, MAP and acceptance rates from ``samples_``; the label
        distributions that ``estimate`` asks for."""
        self.posterior_mean_ = class_marginals(self.samples_)
        map_labels, self.map_log_joint_, self.map_search_ = map_search_mixture(
            self.model_, self.samples_, np.asarray(self.posterior_mean_).argmax(axis=1),
            engine=self.engine)
        attempts = dict(zip(MOVES, move_counts(self.moves), strict=True))
        self.acceptance_ = {name: float(np.mean(self.samples_.stats[f"{name}_accepted"]))
                            for name, n in attempts.items() if n > 0}
        self._map_encoded = np.asarray(map_labels)  # map_labels_ set by the base
        self._check_convergence()
        if self.estimate == "map":
            return np.eye(n_classes)[self._map_encoded]
        if self.class_mass_normalize:
            observed = np.asarray(self.model_.observed)
            labels = np.where(observed, np.asarray(self.model_.labels), -1)
            return self._class_mass_normalized(self.posterior_mean_, self.graph_, labels,
                                               self.class_prior_)
        return self.posterior_mean_

    def sample_more(self, n_iterations: int):
        """Continue the fitted chains for ``n_iterations`` more iterations (no new burn-in)
        and update every fitted attribute; the result equals a fit with the iterations
        added up (``sample_mixture(resume=...)``). Returns ``self``."""
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self, "samples_")
        thin = int(self.samples_.thin)
        n_iterations = check_count(n_iterations, "n_iterations", least=1)
        if n_iterations < thin:
            raise ValueError(f"n_iterations: must be >= thin={thin}, got {n_iterations}")
        run = dict(max_components=self.max_components, moves=tuple(self.moves),
                   engine=self.engine, block_size=int(self.block_size))
        if getattr(self, "log_likelihood_", None) is not None:
            self.samples_, loo = mixture_leave_one_out(
                self.model_, None, n_checkpoints=int(n_iterations) // thin, every=thin,
                resume=self.samples_, **run)
            self.log_likelihood_ = np.concatenate([self.log_likelihood_,
                                                   loo.log_likelihood()], axis=1)
        else:
            self.samples_ = sample_mixture(
                self.model_, jax.random.PRNGKey(self._seed()), n_iterations=int(n_iterations),
                thin=thin, resume=self.samples_, **run)
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
        target was met). The window's draws carry no pointwise log-likelihood
        (``log_likelihood_`` becomes None; ``to_arviz()`` then has no ``log_likelihood``
        group). Returns ``self``."""
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self, "samples_")
        self.samples_, self.convergence_checks_ = sample_mixture_until_converged(
            self.model_, target_rhat=target_rhat, check_every=check_every,
            max_iterations=max_iterations, resume=self.samples_, pairs=pairs,
            progress=progress, thin=int(self.samples_.thin), max_components=self.max_components,
            moves=tuple(self.moves), engine=self.engine, block_size=int(self.block_size))
        self.log_likelihood_ = None
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
        the fix (more iterations, :meth:`sample_more`, :meth:`run_until_converged`) and how
        many posterior-mean labels the chains' spread leaves within two standard errors of a
        tie (``convergence_.stability``, from each chain's Rao-Blackwellised marginals)."""
        from graphssl.diagnostics import check_convergence

        self.convergence_ = check_convergence(
            self.samples_, model=self.model_, extra=self._invariant_traces(),
            source=type(self).__name__,
            label_marginals=class_marginals(self.samples_, per_chain=True))

    def to_arviz(self, **kwargs):
        """The chains as an ArviZ DataTree (:func:`graphssl.diagnostics.to_arviz`):
        ``posterior`` holds the energy ``-log p(y, beta)``, sorted class sizes, co-assignment
        of 10 node pairs, ``n_components`` and ``edge_agreement``; ``posterior_labels`` the
        per-node draws; ``constant_data`` the Rao-Blackwellised class marginals and the
        refined MAP labels; ``sample_stats`` the move acceptances; ``log_likelihood`` the
        leave-one-out predictive of each labelled node per draw (``pointwise_loo``; read by
        ``az.loo`` or :func:`graphssl.diagnostics.psis_loo`). ``kwargs`` go to the
        converter."""
        from sklearn.utils.validation import check_is_fitted

        from graphssl.diagnostics import to_arviz
        from graphssl.inference.diffusion_mixture.sampler import class_marginals

        check_is_fitted(self, "samples_")
        kwargs.setdefault("extra_posterior", self._invariant_traces())
        kwargs.setdefault("label_marginals", class_marginals(self.samples_))
        self._reported_labels(kwargs)  # map_labels_ and transduction_ as class codes
        recorded = getattr(self, "log_likelihood_", None)
        kwargs.setdefault("log_likelihood", False if recorded is None else recorded)
        if len(getattr(self, "classes_", ())) == int(self.samples_.n_classes):
            kwargs.setdefault("class_names", self.classes_)
        kwargs.setdefault("model", self.model_)
        # the labels the log-likelihood is of, also when the caller drops the model
        clamped = np.asarray(self.model_.observed, dtype=bool)
        kwargs.setdefault("observed_labels",
                          np.where(clamped, np.asarray(self.model_.labels), -1).astype(np.int64))
        return to_arviz(self.samples_, **kwargs)


class DiffusionMixtureGridClassifier(GraphSSLClassifier):
    """Walder's mixture at every ``(k, tau)`` of a grid, combined (Sec. 5 with 100 labels).

    The mixture runs at each setting of ``k_grid x tau_grid`` (one batched sampler call,
    :func:`~graphssl.inference.diffusion_mixture.selection.fit_grid`; graphs as Walder's:
    kNN with ``w = exp(-omega d^2)``) and the settings are combined by ``combine``:

      ``"average"``: the posterior class marginals averaged with equal weights (an ensemble
        over the grid);
      ``"loo_average"``: weights proportional to the leave-one-out predictive of the labels
        ``prod_i CPO_i`` (pseudo-Bayesian model averaging);
      ``"stacking"``: ``az.compare``'s stacking weights of the settings' PSIS-LOO predictives;
      ``"parzen"``: the one setting of smallest leave-one-out Parzen error (Walder's choice);
      ``"psis_loo"`` / ``"cpo"``: the one setting of largest PSIS-LOO elpd / smallest
        harmonic-mean CPO log loss of the mixture's predictive of the labelled nodes;
      ``"mixture"``: the mixture's default criterion of the two
        (:data:`~graphssl.inference.diffusion_mixture.selection.DEFAULT_MIXTURE_CRITERION`).

    PSIS-LOO needs ``n_checkpoints x n_chains >= 25`` draws; a
    :class:`~graphssl.inference.loo.ParetoKWarning` names settings whose Pareto k is high.

    ``class_prior``: eta, ``"auto"`` (default; ``"graph"``: each setting's own graph Parzen
    window's class proportions, as :class:`DiffusionMixtureClassifier`'s default), None
    (uniform, Walder's eta for balanced sets), ``"labelled"`` or C proportions. Measured
    against uniform eta (``benchmarks/bench_defaults.py``, splits 0-2, paired): USPS-10
    70.6 -> 74.0, USPS-100 68.3 -> 83.5 (80 % of USPS is one class), COIL2-10 55.7 ->
    59.1, breast_cancer 91.0 -> 93.1, wine 93.7 -> 93.9; iris 95.6 -> 93.9, Text-10 73.0
    -> 72.4, Digit1-10 94.6 -> 94.3.

    ``k_grid``: whole numbers >= 1 (each below the number of points); ``tau_grid``: numbers
    in [0, 1e6] (:data:`TAU_MAX`). Other parameters: alpha as
    :class:`DiffusionMixtureClassifier`; gamma a number in [0, 1e30]
    (default 0.8: every setting of the grid shares it); n_chains, burn_in; n_checkpoints x
    every iterations after burn-in (the leave-one-out predictive is read at each
    checkpoint); moves; random_state; progress (``"auto"``, True or False, as
    :class:`DiffusionMixtureClassifier`'s). ``k`` is the graph of the
    inductive extension to new points only (``predict_proba(X_new)``). Needs features:
    ``fit_graph`` is not available (each k builds its own graph).

    ``class_mass_normalize``: False (default) or True: scale the combined marginals of the
    unlabelled nodes column by column so that the class masses match ``class_prior_`` (the
    settings' etas averaged with ``weights_``), then renormalise each row (Zhu, Ghahramani
    & Lafferty 2003, Sec. 4; :class:`DiffusionMixtureClassifier`'s option). The chains
    and ``grid_`` are the same with and without it. Measured on the same fits
    (``benchmarks/bench_dm_decision.py --estimator grid``, splits 0-2, 2026-11-29):
    USPS-10 74.0 -> 79.1, USPS-100 83.5 -> 85.5, COIL2-10 59.1 -> 59.6, the other 11
    panel sets within 0.3 points; panel mean 87.4 -> 87.9 (14 sets), but held-out mean
    58.0 -> 57.7 (11 sets; monks3 -2.2, pima -0.8, tae +1.4): not the default.

    Attributes after ``fit``: those of the base, plus ``grid_``
    (:class:`~graphssl.inference.diffusion_mixture.selection.GridFit`), ``scores_`` (one
    ``GridScore`` per setting), ``weights_`` (float[G], one-hot for a choice),
    ``chosen_`` (``(k, tau)`` of the largest weight) and ``class_prior_`` (float[C], the
    settings' etas averaged with ``weights_``).
    """

    def __init__(self, k=10, k_grid=(5, 10, 20), tau_grid=(1.0, 2.5, 5.0, 10.0, 20.0),
                 combine="average", alpha=0.5, gamma=0.8, class_prior="auto", n_chains=1,
                 n_checkpoints=40, every=5, burn_in=100, moves=(1, 1, 0), random_state=0,
                 standardize="auto", progress="auto", class_mass_normalize=False):
        super().__init__(k=k, symmetrize="max", weight="gaussian", sigma="walder",
                         standardize=standardize)
        self.progress = progress
        self.class_mass_normalize = class_mass_normalize
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

    def _check_params(self) -> tuple[tuple, tuple]:
        """The numbers and flags, before any graph or chain; returns ``(k_grid, tau_grid)``
        as tuples of checked values."""
        grids = []
        for name, grid in (("k_grid", self.k_grid), ("tau_grid", self.tau_grid)):
            if isinstance(grid, str | bytes) or not np.iterable(grid) or len(grid) == 0:
                raise ValueError(f"{name}: give a non-empty tuple of values, e.g. "
                                 f"{_GRID_EXAMPLE[name]}, got {grid!r}")
            grids.append(grid)
        k_grid = tuple(check_count(k, "k_grid", least=1) for k in grids[0])
        tau_grid = tuple(_check_tau(tau, "tau_grid") for tau in grids[1])
        if isinstance(self.gamma, str):
            raise ValueError(f"gamma: DiffusionMixtureGridClassifier shares one number >= 0 "
                             f"across the grid (default 0.8), got {self.gamma!r}; 'auto' is "
                             "DiffusionMixtureClassifier's option")
        _check_alpha_gamma(self.alpha, self.gamma)
        check_flag(self.class_mass_normalize, "class_mass_normalize")
        check_count(self.n_chains, "n_chains", least=1)
        check_count(self.n_checkpoints, "n_checkpoints", least=1)
        check_count(self.every, "every", least=1)
        check_count(self.burn_in, "burn_in", least=0)
        _check_moves(self.moves)
        return k_grid, tau_grid

    def _validate_graph_params(self, n: int) -> int:
        self._check_params()  # fit(X, y): before the graph is built
        return super()._validate_graph_params(n)

    def _label_distributions(self, graph, labels, n_classes) -> np.ndarray:
        from graphssl.inference.diffusion_mixture.selection import (
            DEFAULT_MIXTURE_CRITERION,
            fit_grid,
        )

        if self.X_fit_ is None:
            raise ValueError("graph: DiffusionMixtureGridClassifier builds one graph per k of "
                             "k_grid from the features; call fit(X, y), or "
                             "DiffusionMixtureClassifier().fit_graph(graph, y)")
        if self.combine not in _COMBINE:
            raise ValueError(f"combine: got {self.combine!r}; use one of {_COMBINE}")
        k_grid, tau_grid = self._check_params()
        check_progress(self.progress)
        self.grid_ = fit_grid(
            self.X_fit_, labels, k_grid=k_grid, tau_grid=tau_grid,
            class_prior=_class_prior(self.class_prior, labels, n_classes, graph_ok=True),
            alpha=self.alpha,
            gamma=self.gamma, key=jax.random.PRNGKey(self._seed()),
            n_chains=int(self.n_chains), n_checkpoints=int(self.n_checkpoints),
            every=int(self.every), burn_in=int(self.burn_in), moves=_check_moves(self.moves),
            warn=_reads_psis(self.combine, DEFAULT_MIXTURE_CRITERION),
            progress=self.progress)
        self.scores_ = self.grid_.scores
        weighting = {"average": "uniform", "loo_average": "loo", "stacking": "stacking"}
        if self.combine in weighting:
            self.weights_ = self.grid_.weights(weighting[self.combine])
        else:
            self.weights_ = np.eye(len(self.scores_))[self.grid_.choose(self.combine)]
        top = self.scores_[int(np.argmax(self.weights_))]
        self.chosen_ = (top.k, top.tau)
        eta = self.weights_ @ self.grid_.class_priors
        self.class_prior_ = eta / eta.sum()
        dist = np.tensordot(self.weights_, self.grid_.class_probs, axes=1)
        dist = dist / dist.sum(axis=1, keepdims=True)
        if self.class_mass_normalize:
            return self._class_mass_normalized(dist, graph, labels, self.class_prior_)
        return dist
