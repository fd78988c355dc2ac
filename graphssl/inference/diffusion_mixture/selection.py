"""Choosing the graph (k) and diffusion time (tau) of Walder's mixture by leave-one-out.

Walder (Sec. 5) picks ``(k, tau)`` for 100 labels by grid search on the leave-one-out error of
the graph Parzen window on the labelled points (:func:`parzen_loo_error`; ``criterion=
"parzen"`` of :func:`select_k_tau`). That scores the Parzen window, not the mixture, and on
100 labels its error takes only a few values (0.01 steps), so ties and noise decide.

The mixture's own leave-one-out predictive is a second criterion. For a labelled node i,
Gelfand's conditional predictive ordinate

    CPO_i = p(y_i | y_L without i) = 1 / E[ 1 / p(y_i | y_-i, beta_-i) ]

with the expectation over the posterior given *all* labels (Gelfand, Dey & Chang 1992): one
run per setting gives every labelled node's leave-one-out predictive, no refit. The inner
``p(y_i | y_-i, beta_-i)`` is Eq. (7) summed over beta_i
(:func:`graphssl.models.diffusion_mixture.held_out_class_log_probs`), evaluated at states
recorded every ``every`` iterations: the pointwise log-likelihood of ArviZ's
``log_likelihood`` group (:meth:`LeaveOneOut.log_likelihood`). Two estimators of the
expectation: the plain harmonic mean (``criterion="cpo"``, log loss ``-mean_i log CPO_i``),
and PSIS-LOO (``criterion="psis_loo"``: ``az.loo``, whose Pareto-smoothed importance
weights tame the heavy tail of ``1 / p`` and whose Pareto k says, node by node, whether
the estimate can be trusted; :mod:`graphssl.inference.loo`). Both are exact in the limit
(tested against enumeration); ``criterion="mixture"`` is :data:`DEFAULT_MIXTURE_CRITERION`.

Measured (``benchmarks/bench_diffusion_mixture_selection_psis.py``; Digit1 and Text, the
shipped splits 0-3 of 10 and of 100 labels; k = 10, tau in {1, 2.5, 5, 10, 20}, gamma 0.8,
eta uniform, one chain, 40 draws 5 iterations apart after 100; chosen on the labelled
points, test accuracy read once): PSIS-LOO chose the same tau as the harmonic mean of the
same 40 draws in all 16 runs (test accuracy Digit1 0.919 / 0.968 with 10 / 100 labels,
Text 0.699 / 0.749); the former default's 8 draws 25 iterations apart chose otherwise in 3
runs (0.913 / 0.968, 0.698 / 0.749). Both picked the smallest tau = 1 in 10 of 16 runs,
where the best tau by test accuracy was 2.5 to 20, and Pareto k says why: 42-54 % of the
labelled nodes have k above the threshold for 40 draws (0.38), 8-21 % above 0.7, more at
small tau (k > 0.7 at 19-42 % of the nodes at tau = 1, 3-8 % at tau = 20), where a short
chain rarely visits states that predict a label badly and every estimate of its
leave-one-out predictive is optimistic. With 4 chains x 100 draws
(10 times the CPU time; split 0 of 100 labels) the log loss at tau = 1 rose from 0.05 to
0.09 (Digit1) and 0.33 to 0.51 (Text), both criteria moved to tau = 10 / 2.5 (test accuracy
0.978 / 0.754 against 0.959 / 0.737), and k > 0.7 stayed at 36-55 % of the nodes at
tau = 1 only. PSIS-LOO is the default for that diagnostic (its choices equal the harmonic
mean's); :func:`fit_grid` warns with the fix. Averaging the grid classified best
(40 draws: uniform weights 0.952 / 0.980, 0.747 / 0.761; ``az.compare`` stacking 0.919 /
0.970, 0.702 / 0.746; pseudo-BMA 0.952 / 0.973, 0.713 / 0.749; best single tau by test
accuracy 0.972 / 0.983, 0.750 / 0.759).

:func:`fit_grid` runs the mixture at every setting of the grid in one batched call; its
:class:`GridFit` chooses a setting or averages the settings' posterior class marginals
(``average()``: equal weights, an ensemble over the grid; ``average("loo")``: weights
``prod_i CPO_i``, pseudo-Bayesian model averaging; ``average("stacking")``: ``az.compare``'s
stacking weights). Measured earlier with 100 labels, the full (k, tau) grid, 12 splits,
eta known (``benchmarks/bench_diffusion_mixture_selection.py``; Digit1 / Text): Parzen
choice 0.968 / 0.754, harmonic-mean CPO choice (8 draws) 0.970 / 0.724, equal-weight
average 0.983 / 0.775, against GraphLearning Poisson 0.981 / 0.760 in the same run.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from graphssl._progress import StepTimer
from graphssl._warnings import warn_user
from graphssl.graph import knn_graph
from graphssl.inference.diffusion_mixture.sampler import (
    class_marginals,
    n_models,
    sample_mixture,
    stack_models,
)
from graphssl.inference.loo import (
    MIN_DRAWS,
    ParetoKWarning,
    loo_tree,
    max_pareto_k,
    psis_loo,
    stacking_weights,
)
from graphssl.models.diffusion_mixture import (
    DirichletDiffusionMixture,
    diffusion_pmfs_for_taus,
    held_out_class_log_probs,
    parzen_scores,
    with_graph_proportions,
)
from graphssl.validation import (
    check_features,
    check_k,
    check_label_codes,
    check_labels,
    check_scalar,
)

__all__ = ["LeaveOneOut", "GridScore", "GridFit", "parzen_loo_error", "mixture_leave_one_out",
           "fit_grid", "select_k_tau", "select_gamma", "GammaChoice", "GAMMA_CANDIDATES",
           "DEFAULT_MIXTURE_CRITERION"]

K_GRID = (5, 10, 20)
TAU_GRID = (1.0, 2.5, 5.0, 10.0, 20.0)
# what ``criterion="mixture"`` reads: "psis_loo" or "cpo" (module docstring: the comparison);
# with fewer than 25 recorded draws (too few for PSIS) it reads "cpo"
DEFAULT_MIXTURE_CRITERION = "psis_loo"
# Walder's two values of the MRF strength (Sec. 5), in the order ties are broken: 0.8 first
GAMMA_CANDIDATES = (0.8, 0.0)


class LeaveOneOut(NamedTuple):
    """Leave-one-out predictive of the labelled ``nodes`` (int[L]; ``labels`` int[L] their
    classes) from recorded states: ``log_probs`` float[..., states, L, C] =
    ``log p(y_i = c | y_-i, beta_-i)`` at each state (chains x checkpoints)."""

    nodes: np.ndarray
    labels: np.ndarray
    log_probs: np.ndarray
    n_chains: int = 1

    def pointwise(self) -> np.ndarray:
        """``log p_s(y_i)`` at the observed labels, float64[..., states, L]."""
        return np.asarray(self.log_probs, np.float64)[..., np.arange(self.labels.size),
                                                      self.labels]

    def log_likelihood(self) -> np.ndarray:
        """The pointwise log-likelihood of ArviZ's ``log_likelihood`` group, float64[...,
        chains, draws, L] (states are chain-major)."""
        lp = self.pointwise()
        return lp.reshape(lp.shape[:-2] + (int(self.n_chains), -1, lp.shape[-1]))

    def psis_loo(self, warn: bool = True, source: str | None = None):
        """PSIS-LOO (``az.loo``, :func:`graphssl.inference.loo.psis_loo`) of the labelled
        nodes: one ``ELPDDataLOO`` for one model, a list over the leading axis of a batch."""
        ll = self.log_likelihood()
        batch = ll.reshape((-1,) + ll.shape[-3:])
        out = [psis_loo(loo_tree(x, nodes=self.nodes, labels=self.labels), warn=warn,
                        source=source) for x in batch]
        return out[0] if ll.ndim == 3 else out

    def log_cpo(self) -> np.ndarray:
        """``log CPO_i = -log mean_s exp(-log p_s(y_i))``, float[..., L] (harmonic mean)."""
        lp = self.pointwise()
        return np.log(lp.shape[-2]) - np.logaddexp.reduce(-lp, axis=-2)

    def log_loss(self) -> np.ndarray:
        """Leave-one-out log loss ``-mean_i log CPO_i`` (lower is better), float[...]."""
        return -self.log_cpo().mean(axis=-1)

    def error(self) -> np.ndarray:
        """0-1 error of the averaged held-out class probabilities, float[...]. Optimistic:
        the other nodes' states were drawn knowing y_i (the CPO of :meth:`log_loss`
        corrects for that, exactly in the limit of many draws)."""
        mean = np.exp(self.log_probs).mean(axis=-3)
        return (mean.argmax(axis=-1) != self.labels).mean(axis=-1)


def parzen_loo_error(diffusion, labels, class_prior=None) -> float:
    """Walder's Sec. 5 criterion: leave-one-out error of the graph Parzen window
    ``eta_c / |L_c| sum_{l in L_c, l != i} D_tau[i, l]`` on the labelled nodes.

    ``diffusion`` = D_tau float[m, m] (:func:`~graphssl.models.diffusion_mixture.diffusion_pmfs`),
    ``labels`` int[m] with -1 for unlabelled, ``class_prior`` eta (default uniform). A class
    left with no other labelled node cannot be predicted for its last member (counts as an
    error). ``class_prior`` is checked as :meth:`DirichletDiffusionMixture.create` checks it
    (C positive finite proportions; ValueError naming it), and ``labels`` against ``D``."""
    D = np.asarray(diffusion, np.float64)
    if D.ndim != 2 or D.shape[0] != D.shape[1]:
        raise ValueError(f"diffusion: expected a square D_tau [m, m], got shape {D.shape}")
    labels = check_label_codes(labels, D.shape[0], name="labels",
                               against="diffusion has {n} rows")
    if not np.any(labels >= 0):
        raise ValueError("labels: no labelled point (all -1); the Parzen window needs labels")
    idx = np.flatnonzero(labels >= 0)
    C = int(labels.max()) + 1
    eta = _checked_class_prior(class_prior, C)
    onehot = np.eye(C)[labels[idx]]
    sums = D[np.ix_(idx, idx)] @ onehot - D[idx, idx][:, None] * onehot
    counts = onehot.sum(axis=0)[None, :] - onehot
    scores = np.where(counts > 0, sums * eta / np.where(counts > 0, counts, 1.0), -np.inf)
    return float(np.mean(scores.argmax(axis=1) != labels[idx]))


_held_out = jax.jit(jax.vmap(held_out_class_log_probs, in_axes=(None, 0, 0, None)))


def _held_out_batched(model, state, nodes):
    """Held-out log-probs of ``nodes`` at a final state (chains [S * chains, m]):
    [chains, L, C], or [S, chains, L, C] for a stack of S models."""
    if model.labels.ndim == 1:
        return _held_out(model, state.labels, state.beta, nodes)
    S = n_models(model)
    y = state.labels.reshape((S, -1) + state.labels.shape[1:])
    beta = state.beta.reshape((S, -1) + state.beta.shape[1:])
    return jax.vmap(lambda mod, y, b: _held_out(mod, y, b, nodes))(model, y, beta)


def mixture_leave_one_out(model: DirichletDiffusionMixture, key, *, n_checkpoints: int = 8,
                          every: int = 25, burn_in: int = 100, n_chains: int = 1,
                          progress=False, resume=None,
                          why: str = "a sweep costs O(m^2 C) a chain", **sample_kwargs):
    """Run the sampler and record the leave-one-out predictive of every labelled node.

    After ``burn_in`` iterations, the chains run ``n_checkpoints`` chunks of ``every``
    iterations (one :func:`~graphssl.inference.diffusion_mixture.sampler.sample_mixture` run
    continued with ``resume=``, the same draws as one long run with ``thin=every``); at the
    end of each chunk the held-out class log-probs of the labelled nodes are evaluated at
    every chain's state (one per retained draw). ``model`` may be a batch
    (:func:`~graphssl.inference.diffusion_mixture.sampler.stack_models`) whose models share
    the labelled nodes; ``sample_kwargs`` go to ``sample_mixture`` (``moves``,
    ``init_labels``, ``init_beta``...). ``resume``: a previous run of the same model (thin
    ``every``) to continue instead (``key``, ``burn_in``, ``n_chains`` unused); the record
    then covers the new draws only. ``progress``: ``"auto"``, True or False, a bar over
    the checkpoints and one line saying why the run is long (``why``) once it is known to
    be (:class:`graphssl._progress.StepTimer`). Returns ``(samples, LeaveOneOut)``:
    ``samples`` holds every chunk (its class marginals,
    :func:`~graphssl.inference.diffusion_mixture.sampler.class_marginals`, average them).
    """
    if int(n_checkpoints) < 1 or int(every) < 1:
        raise ValueError(f"n_checkpoints, every: must be positive, got {n_checkpoints}, {every}")
    observed = np.asarray(model.observed).reshape(-1, model.n_nodes)
    if not np.all(observed == observed[0]):
        raise ValueError("model: a batch must share its labelled nodes")
    nodes = jnp.asarray(np.flatnonzero(observed[0]), jnp.int32)
    if nodes.size == 0:
        raise ValueError("model: no labelled node to leave out")
    labels = np.asarray(model.labels).reshape(-1, model.n_nodes)[0][np.asarray(nodes)]
    run_kwargs = {k: v for k, v in sample_kwargs.items()
                  if k not in ("init_labels", "init_noise", "init_beta")}
    held, samples = [], resume
    timer = StepTimer(progress, total=int(n_checkpoints), desc="diffusion mixture", why=why)
    if samples is None:  # the first checkpoint runs the burn-in too (and compiles)
        samples = sample_mixture(model, key, n_chains=n_chains, n_iterations=every,
                                 burn_in=burn_in, thin=every, **sample_kwargs)
        held.append(np.asarray(_held_out_batched(model, samples.final_state, nodes)))
        timer.tick()
    for _ in range(int(n_checkpoints) - len(held)):
        samples = sample_mixture(model, None, n_iterations=every, thin=every, resume=samples,
                                 **run_kwargs)
        held.append(np.asarray(_held_out_batched(model, samples.final_state, nodes)))
        timer.tick()
    timer.close()
    # [checkpoints, ..., chains, L, C] -> [..., chains * checkpoints, L, C]
    log_probs = np.moveaxis(np.stack(held), 0, -3)
    chains = log_probs.shape[-4]
    log_probs = log_probs.reshape(log_probs.shape[:-4] + (-1,) + log_probs.shape[-2:])
    return samples, LeaveOneOut(np.asarray(nodes), labels, log_probs, int(chains))


class GridScore(NamedTuple):
    """One grid point of :func:`select_k_tau` / :func:`fit_grid`: its ``k``, ``tau``, the
    Parzen leave-one-out error and (mixture runs) the mixture's leave-one-out log loss by
    the harmonic-mean CPO and by PSIS-LOO (``-elpd_loo / L``), its leave-one-out error and
    the largest Pareto ``k`` of PSIS over the labelled nodes."""

    k: int
    tau: float
    parzen_loo_error: float
    mixture_loo_log_loss: float = float("nan")
    mixture_loo_error: float = float("nan")
    psis_loo_log_loss: float = float("nan")
    pareto_k_max: float = float("nan")


_CRITERIA = {"parzen": "parzen_loo_error", "cpo": "mixture_loo_log_loss",
             "psis_loo": "psis_loo_log_loss"}


class GridFit(NamedTuple):
    """The mixture run at every ``(k, tau)`` of a grid (:func:`fit_grid`): ``scores``
    (one :class:`GridScore` per setting, k-major), ``class_probs`` float[G, m, C] (each
    setting's posterior class marginals), ``loo`` (:class:`LeaveOneOut`, leading axis G),
    ``psis`` (ArviZ's ``ELPDDataLOO`` per setting; None with fewer than 25 draws) and
    ``class_priors`` float[G, C] (each setting's eta, the class prior of its balancing
    potential; None where not recorded)."""

    scores: list
    class_probs: np.ndarray
    loo: LeaveOneOut
    psis: list | None = None
    class_priors: np.ndarray | None = None

    def weights(self, weighting: str = "uniform") -> np.ndarray:
        """Weights of the settings, float[G]: ``"uniform"`` (an ensemble over the grid),
        ``"loo"`` (pseudo-Bayesian model averaging: proportional to the leave-one-out
        predictive of the labels, ``prod_i CPO_i``; Geisser & Eddy 1979) or ``"stacking"``
        (``az.compare``'s stacking of the PSIS-LOO predictives, Yao et al. 2018)."""
        G = len(self.scores)
        if weighting == "uniform":
            return np.full(G, 1.0 / G)
        if weighting == "loo":
            total = self.loo.log_cpo().sum(axis=-1)
            w = np.exp(total - total.max())
            return w / w.sum()
        if weighting == "stacking":
            return stacking_weights(self._psis())
        raise ValueError(f"weighting: use 'uniform', 'loo' or 'stacking', got {weighting!r}")

    def _psis(self) -> list:
        if self.psis is None:
            raise ValueError(f"psis: PSIS-LOO needs at least {MIN_DRAWS} recorded draws per "
                             "setting; fit with n_checkpoints x n_chains >= 25")
        return self.psis

    def average(self, weighting: str = "uniform") -> np.ndarray:
        """Class marginals averaged over the settings, float[m, C] (:meth:`weights`)."""
        return np.tensordot(self.weights(weighting), self.class_probs, axes=1)

    def choose(self, criterion: str = "mixture") -> int:
        """Index of the setting chosen by ``criterion``: ``"psis_loo"`` (largest PSIS-LOO
        elpd of the mixture's predictive of the labelled nodes), ``"cpo"`` (smallest
        harmonic-mean CPO log loss), ``"mixture"`` (the mixture's default,
        :data:`DEFAULT_MIXTURE_CRITERION`; ``"cpo"`` when fewer than 25 draws were recorded,
        too few for PSIS) or ``"parzen"`` (Walder's Parzen leave-one-out error); ties go to
        the first setting. A NaN score is never chosen (ValueError when every score is
        NaN)."""
        if criterion == "mixture":
            criterion = DEFAULT_MIXTURE_CRITERION if self.psis is not None else "cpo"
        if criterion not in _CRITERIA:
            raise ValueError("criterion: use 'mixture', 'psis_loo', 'cpo' or 'parzen', got "
                             f"{criterion!r}")
        if criterion == "psis_loo":
            self._psis()
        values = np.asarray([getattr(score, _CRITERIA[criterion]) for score in self.scores],
                            np.float64)
        if np.all(np.isnan(values)):
            raise ValueError(f"criterion: every setting's {criterion!r} score is NaN; nothing "
                             "to choose from (check the fit's draws, or use another criterion)")
        return int(np.argmin(np.where(np.isnan(values), np.inf, values)))

    def best(self) -> GridScore:
        """The setting of the mixture's default criterion (``choose("mixture")``)."""
        return self.scores[self.choose("mixture")]


def _checked_class_prior(class_prior, n_classes: int) -> np.ndarray:
    """eta as float64[C] (uniform for None): C positive finite proportions, the rule of
    :meth:`DirichletDiffusionMixture.create`; otherwise a ValueError naming ``class_prior``."""
    if class_prior is None:
        return np.full(n_classes, 1.0 / n_classes)
    try:
        eta = np.asarray(class_prior, dtype=np.float64)
    except (TypeError, ValueError):
        eta = None
    if (eta is None or eta.shape != (n_classes,) or not np.all(np.isfinite(eta))
            or np.any(eta <= 0)):
        raise ValueError(f"class_prior: expected {n_classes} positive finite proportions (or "
                         f"None), got {class_prior!r}")
    return eta


def _grid_models(X, labels, k_grid, tau_grid, class_prior, alpha, gamma, dtype, build):
    """GridScores with the Parzen criterion, and (``build``) one model + Parzen start each."""
    X = check_features(X)
    labels = check_labels(labels, X.shape[0], name="labels")
    if not k_grid or not tau_grid:
        raise ValueError("k_grid, tau_grid: give at least one value each")
    C = int(labels.max()) + 1
    from_graph = isinstance(class_prior, str)
    if from_graph and class_prior != "graph":
        raise ValueError(f"class_prior: use None, C proportions or 'graph', got {class_prior!r}")
    eta = None if class_prior is None or from_graph else _checked_class_prior(class_prior, C)
    scores, models, starts = [], [], []
    for k in k_grid:
        graph = knn_graph(X, check_k(k, X.shape[0], name="k_grid"), sigma="walder",
                          on_duplicates="ignore")
        for tau, D in zip(tau_grid, diffusion_pmfs_for_taus(graph, tau_grid), strict=True):
            model = None
            if build or from_graph:
                model = DirichletDiffusionMixture.create(
                    graph, labels, C, alpha=alpha, gamma=gamma, class_prior=eta, diffusion=D,
                    dtype=dtype)
            if from_graph:  # this setting's own graph Parzen proportions
                model = with_graph_proportions(model, labels)
            setting_eta = np.exp(np.asarray(model.log_eta, np.float64)) if from_graph else eta
            scores.append(GridScore(int(k), float(tau), parzen_loo_error(D, labels, setting_eta)))
            if build:
                models.append(model)
                starts.append(np.asarray(parzen_scores(model)).argmax(axis=1))
    return scores, models, starts


def _psis_scores(loo: LeaveOneOut, scores, warn: bool):
    """PSIS-LOO of every setting (None below :data:`MIN_DRAWS` draws), the scores with
    ``psis_loo_log_loss`` and ``pareto_k_max``, and one :class:`ParetoKWarning` naming the
    settings whose labelled nodes have a high Pareto k."""
    if loo.log_probs.shape[-3] < MIN_DRAWS:
        return None, scores
    psis = loo.psis_loo(warn=False)
    L = loo.labels.size
    scores = [s._replace(psis_loo_log_loss=-float(r.elpd) / L,
                         pareto_k_max=max_pareto_k(r.pareto_k))
              for s, r in zip(scores, psis, strict=True)]
    high = [(s, int(np.sum(np.asarray(r.pareto_k) > r.good_k)))
            for s, r in zip(scores, psis, strict=True)]
    high = [(s, n) for s, n in high if n]
    if warn and high:
        worst = ", ".join(f"(k={s.k}, tau={s.tau:g}): {n}" for s, n in high[:5])
        warn_user(
            f"fit_grid: Pareto k > {psis[0].good_k:.2f} (the threshold for "
            f"{loo.log_probs.shape[-3]} draws) at labelled nodes of {len(high)} of "
            f"{len(scores)} settings [{worst}{', ...' if len(high) > 5 else ''}]: their "
            "PSIS-LOO is unreliable and leans towards them. Fix: more draws (n_checkpoints "
            "or n_chains), or average the grid (GridFit.average) rather than choose.",
            ParetoKWarning)
    return psis, scores


def fit_grid(X, labels, *, k_grid=K_GRID, tau_grid=TAU_GRID, class_prior=None,
             alpha: float = 0.5, gamma: float = 0.0, key, n_chains: int = 1,
             n_checkpoints: int = 40, every: int = 5, burn_in: int = 100, moves=(1, 1, 0),
             dtype=np.float32, progress=False, warn: bool = True) -> GridFit:
    """Run the mixture at every ``(k, tau)`` of the grid in one batched sampler call.

    Graphs as Walder's (kNN, ``w = exp(-omega d^2)``, omega = 1 / mean squared distance);
    one model per setting with ``alpha``, ``gamma``, ``class_prior`` (eta: None for uniform,
    C proportions, or ``"graph"``: each setting's own graph Parzen window's proportions,
    :func:`~graphssl.models.diffusion_mixture.with_graph_proportions`); chains start from
    the graph Parzen labels of their own D_tau (centres beta_i = i). Each setting gets its
    leave-one-out predictive (:func:`mixture_leave_one_out`: ``n_checkpoints`` x
    ``n_chains`` draws, ``every`` iterations apart), its CPO and PSIS-LOO scores and its
    posterior class marginals; a :class:`~graphssl.inference.loo.ParetoKWarning` (when
    ``warn``) names the settings whose PSIS is unreliable. ``key``: the PRNG key of the
    chains (required). ``progress``: ``"auto"``, True or False (:mod:`graphssl._progress`).
    Memory: two float[m, m] arrays per setting (15 settings x 1500 nodes in float32:
    270 MB)."""
    scores, models, starts = _grid_models(X, labels, k_grid, tau_grid, class_prior, alpha,
                                          gamma, dtype, build=True)
    samples, loo = mixture_leave_one_out(
        stack_models(models), key, n_checkpoints=n_checkpoints, every=every, burn_in=burn_in,
        n_chains=n_chains, moves=moves, init_beta="self", init_labels=np.stack(starts),
        progress=progress,
        why=(f"{len(models)} settings of (k, tau) sample at once, each sweep re-drawing "
             f"{len(labels)} labels against their centre kernels (O(m^2 C)); fewer settings "
             "in k_grid / tau_grid, or n_checkpoints, shorten it"))
    log_loss, error = loo.log_loss(), loo.error()
    scores = [s._replace(mixture_loo_log_loss=float(ll), mixture_loo_error=float(e))
              for s, ll, e in zip(scores, log_loss, error, strict=True)]
    psis, scores = _psis_scores(loo, scores, warn)
    etas = np.stack([np.exp(np.asarray(model.log_eta, np.float64)) for model in models])
    return GridFit(scores, class_marginals(samples, len(models)), loo, psis, etas)


class GammaChoice(NamedTuple):
    """Outcome of :func:`select_gamma`: the chosen ``gamma``, the ``candidates`` and their
    leave-one-out log losses ``log_loss`` (float[candidates], harmonic-mean CPO, lower is
    better), ``n_iterations`` run per candidate (burn-in included)."""

    gamma: float
    candidates: tuple
    log_loss: np.ndarray
    n_iterations: int


def selection_run_length(n_iterations: int, burn_in: int) -> tuple[int, int, int]:
    """``(burn_in, n_checkpoints, every)`` of :func:`select_gamma`'s run beside a main run of
    ``n_iterations`` after ``burn_in``: the same burn-in (at most 100) and a fifth of the
    main iterations in checkpoints 5 apart, at least 8 (the main default, 1000 after 100:
    100 + 40 x 5 = 300 iterations of one chain per candidate, against 4 chains x 1100 of the
    main run); below 40 main iterations (tests, quick looks) 8 checkpoints 1 apart."""
    every = 5 if int(n_iterations) >= 40 else 1
    return min(int(burn_in), 100), max(8, int(n_iterations) // (5 * every)), every


def select_gamma(model: DirichletDiffusionMixture, key, *, candidates=GAMMA_CANDIDATES,
                 n_iterations: int = 1000, burn_in: int = 100, progress=False,
                 **sample_kwargs) -> GammaChoice:
    """Walder's MRF strength ``gamma`` (Eq. 4) chosen by the mixture's own leave-one-out
    predictive of the labelled nodes.

    Walder tried ``gamma in {0, 0.8}`` (Sec. 5) and found 0.8 best on Digit1 and Text, 0
    far better on USPS with 10 labels; the labelled points say which holds. Every
    candidate (``model`` with its ``gamma`` replaced) runs one chain in one batched call
    (:func:`mixture_leave_one_out`, burn-in and length from :func:`selection_run_length`
    for a main run of ``n_iterations`` after ``burn_in``); each gets the harmonic-mean CPO
    log loss ``-mean_i log CPO_i`` (:meth:`LeaveOneOut.log_loss`), and the smallest wins
    (ties: the first of ``candidates``). ``sample_kwargs`` go to the sampler (``moves``,
    ``init_labels`` int[m] shared by the candidates, ``init_beta``...). Checked against
    full runs (4 chains x 1000 iterations) at both values
    (:class:`~graphssl.estimators.DiffusionMixtureClassifier`'s defaults, shipped splits
    0-2 of 10 labels; test labels read after the choice, nothing chosen from them): the
    full runs' CPO prefers 0.8 on Digit1 and Text by a wide margin (log loss 0.002-0.52
    against 0.43-0.70) and 0 on USPS split 0 (0.58 against 1.44; accuracy 85.2 against
    71.1), where this short run keeps 0.8; on USPS split 2 the full runs nearly tie (0.581
    against 0.560) and this run takes 0 (83.2 against 79.3). Returns a
    :class:`GammaChoice`."""
    if isinstance(candidates, str | bytes) or not np.iterable(candidates) or not len(
            candidates):
        raise ValueError(f"candidates: give a sequence of gamma values (finite, >= 0), e.g. "
                         f"{GAMMA_CANDIDATES}, got {candidates!r}")
    for g in candidates:  # create()'s rule for gamma
        check_scalar(g, "candidates")
    candidates = tuple(float(g) for g in candidates)
    models = [model.replace(gamma=g) for g in candidates]
    selection_burn_in, n_checkpoints, every = selection_run_length(n_iterations, burn_in)
    length = selection_burn_in + n_checkpoints * every
    init = sample_kwargs.pop("init_labels", None)
    if init is not None:
        sample_kwargs["init_labels"] = np.stack([np.asarray(init)] * len(candidates))
    _, loo = mixture_leave_one_out(
        stack_models(models), key, n_checkpoints=n_checkpoints, every=every,
        burn_in=selection_burn_in, n_chains=1, progress=progress,
        why=f"choosing gamma among {candidates}: one chain each, {length} iterations",
        **sample_kwargs)
    log_loss = np.asarray(loo.log_loss(), np.float64).reshape(len(candidates))
    best = int(np.argmin(np.where(np.isfinite(log_loss), log_loss, np.inf)))
    return GammaChoice(candidates[best], candidates, log_loss, length)


def select_k_tau(X, labels, *, k_grid=K_GRID, tau_grid=TAU_GRID, criterion: str = "parzen",
                 class_prior=None, **fit_kwargs):
    """Grid search of Walder Sec. 5 over the kNN graph's ``k`` and the diffusion time ``tau``.

    ``criterion="parzen"``: the paper's leave-one-out error of the graph Parzen window with
    class proportions ``class_prior`` (ties go to the first grid point).
    ``"psis_loo"`` / ``"cpo"`` / ``"mixture"`` (the default of the two,
    :data:`DEFAULT_MIXTURE_CRITERION`): the mixture's own leave-one-out predictive of the
    labelled nodes (:func:`fit_grid`; ``fit_kwargs`` go there, :meth:`GridFit.choose`).
    Returns ``((k, tau), [GridScore, ...])``.
    """
    if criterion not in ("mixture", *_CRITERIA):
        raise ValueError("criterion: use 'parzen' (Walder Sec. 5), 'mixture', 'psis_loo' or "
                         f"'cpo', got {criterion!r}")
    if criterion == "parzen":
        if fit_kwargs:
            raise TypeError(f"select_k_tau: {sorted(fit_kwargs)} only apply to the mixture's "
                            "criteria (criterion='mixture', 'psis_loo' or 'cpo')")
        scores, _, _ = _grid_models(X, labels, k_grid, tau_grid, class_prior, 0.5, 0.0,
                                    np.float32, build=False)
        best = min(scores, key=lambda s: s.parzen_loo_error)
        return (best.k, best.tau), scores
    fit = fit_grid(X, labels, k_grid=k_grid, tau_grid=tau_grid, class_prior=class_prior,
                   **fit_kwargs)
    best = fit.scores[fit.choose(criterion)]
    return (best.k, best.tau), fit.scores
