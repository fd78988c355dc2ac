"""Coupling and length scale of the Boltzmann MRF chosen on the labelled points.

Zhu & Ghahramani (2002) learn Theta by gradient ascent on ``log P(O_L | X, Theta)`` from
random starts and ask for a prior on Theta (Sec. 6).  On data sets of a few hundred points
that ascent, with sampled expectations, drifted to couplings ``A_ij ~ 0.03`` (the labels then
reach nobody: chance accuracy) and took minutes.  Two reasons, both fixed here:

* **the scale.**  Eq. (39) sums ``(x_i^d - x_j^d)^2 / e^{alpha_d}`` over all ``D`` features;
  a length scale set per feature to that feature's typical difference makes a typical
  neighbour's coupling ``e^{alpha_0 - D}``.  The data scale used here is one number,
  ``sigma_0`` = the median distance from each point to its 10 nearest paired points (kNN
  pairs: the median kNN distance), and the couplings at the prior's mode are
  ``A_ij = exp(alpha_0 - d_ij^2 / (2 sigma_0^2))``, i.e. ``e^{alpha_d} = 2 sigma_0^2`` for
  every ``d`` (:func:`data_scale_log_length_scales`).  Prior: ``alpha_d ~ N(log(2
  sigma_0^2), s^2)`` (log-normal squared length scales around the data scale, ``s = 1``).
* **the criterion.**  The marginal likelihood of the labels falls as soon as the unclamped
  model orders (all nodes one class makes labels of several classes improbable), so its
  maximum sits at the ordering transition, where the clamped posterior is still diffuse
  (measured on wine, breast_cancer and digits: 2-13 points below the harmonic function on
  the same graph); for ``C >= 5`` the transition is first-order and its sampled estimate
  shows hysteresis.  The criterion here is the model's own predictive probability of each
  labelled point given the others, (CV) of :mod:`graphssl.inference.boltzmann.criteria`
  (``K``-fold, Rao-Blackwellised, through the label-noise channel of Eq. 40).

The search (:func:`select_coupling`): for each length-scale offset (prior mode first), the
chains of every fold anneal along an increasing ``alpha_0`` grid (each grid point starts
from the previous point's states); a path stops once (CV) has not improved for
``patience`` points, or where a class merge lowers the free energy (the model has
degenerated: :func:`~graphssl.inference.boltzmann.criteria.merge_gain`; the chains, which
cannot merge classes, would report a posterior the model does not have).  The choice is the
one-standard-error rule, paired: among the grid points whose per-point (CV) terms fall
short of the best point's by less than one standard error of their mean difference (those
the labelled points cannot tell from the best) and above chance's ``log(1/C)`` by more
than one standard error (those that do carry labels), the one of highest prior density
(``alpha_0 ~ N(0, 3^2)``, ``alpha_d ~ N(log(2 sigma_0^2), 1)``) -- and, before the prior,
one whose chains are not in the ordered phase: a point where some class holds more of the
unobserved nodes than its labelled count makes plausible (above the ``1 - 10^-3 / C``
quantile of its share's posterior ``Beta(n_c + 1, L - n_c + 1)``, the Potts estimator's
check, :func:`~graphssl.inference.ordered_phase.plausible_share_limits`) comes
after every point that is not. (CV) cannot see that sweep: it scores the labelled points
only (breast_cancer, split 1 of 10 labels a class, seed 2: the rule took ``alpha_0 =
-0.5``, where ~91 % of the nodes took one class, test accuracy 0.636).  Past the point where every
held-out label is predicted, (CV) only creeps toward its ceiling ``log(1 - rho)`` as the
coupling grows; the rule stays near the prior's mode instead.  A weak coupling
cannot win: labels that reach nobody predict nothing, and (CV) says so.

Symbol map: see :mod:`graphssl.models.boltzmann`.  ``offset`` = ``alpha_d - log(2
sigma_0^2)`` (the same for every ``d``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from graphssl._device import to_device
from graphssl._progress import StepTimer
from graphssl.inference.boltzmann.criteria import held_out_log_prob, merge_gain
from graphssl.inference.optimize.logistic import stratified_folds
from graphssl.inference.ordered_phase import plausible_share_limits
from graphssl.models.boltzmann import (
    BoltzmannMRF,
    ExtendedParams,
    PairGeometry,
    length_scale_couplings,
)
from graphssl.validation import check_count, check_flag, check_real

__all__ = [
    "GridSettings",
    "GridResult",
    "check_grid_settings",
    "cross_validation_folds",
    "data_scale",
    "data_scale_log_length_scales",
    "neighbour_sq_distance_median",
    "gamma_for_noise",
    "grid_model",
    "grid_posterior",
    "averaged_grid_posterior",
    "averaged_points",
    "averaged_weights",
    "draws_per_point",
    "POSTERIOR_DRAWS",
    "select_coupling",
    "choose_grid_point",
    "prior_choice",
]


CHOICES = ("prior", "weakest", "strongest", "best")


class GridSettings(NamedTuple):
    """The search of :func:`select_coupling`.

    ``alpha0``: the coupling grid (increasing; the chains anneal along it);
    ``log_scale_offsets``: offsets of every ``alpha_d`` from the data scale ``log(2
    sigma_0^2)`` (default: the prior's mode and one prior standard deviation, ``s = 1``, on
    either side), searched in order of distance from the mode; ``scale_prior_std``,
    ``alpha0_prior_std``: the prior ``alpha_d - log(2 sigma_0^2) ~ N(0, s^2)``,
    ``alpha_0 ~ N(0, 3^2)`` (:class:`~graphssl.inference.boltzmann.learning.ThetaPrior`'s),
    which orders the grid points that (CV) cannot tell apart; ``n_folds``: ``K`` (cut to
    the smallest class count, at least 2); ``n_chains``, ``burn_in``, ``n_samples``:
    chains per fold and Swendsen-Wang (or Gibbs) sweeps per grid point; ``patience``: grid
    points without improvement before the path stops; ``tol``: improvement (nats per
    labelled point) that counts; ``choice``: among the grid points the one-standard-error
    rule keeps, ``"prior"`` takes the one of highest prior density, ``"weakest"`` the
    weakest coupling (smallest mean weighted degree), ``"strongest"`` the strongest (the
    labels reach furthest there, short of the ordered phase, whose points come last for
    every rule); ``"best"`` skips the rule and takes the largest (CV). Measured with the
    estimator's defaults (``bench_defaults.py``, paired splits): ``"weakest"`` against
    ``"prior"`` on the 12 panel sets below 2000 points, 10 splits: panel mean 88.8 both
    (iris -0.7, breast_cancer +1.6 +- 1.9, the rest within 0.6); on splits 0-2 of all 16 it
    gains on Text-100 (+4.1) and usps_full (+8.7 +- 5.8) and loses on CiteSeer (-1.7);
    ``"best"`` loses Digit1-10 (-11.8 +- 11.8, panel mean 83.2 -> 82.6). ``"strongest"``
    against ``"prior"`` (``benchmarks/bench_option.py``,
    ``bench_option_boltzmann_strongest.json``, 14 panel sets, 10 splits, 2026-11-29): mean
    85.4 -> 85.5, USPS-100 +1.2 +- 0.6, Text-100 +1.0 +- 0.5, Digit1-10 +1.7 +- 1.2,
    COIL2-10 +1.0 +- 2.6; breast_cancer -2.1 +- 1.4, wine -1.1 +- 0.5: a trade within the
    noise, an option. ``"prior"`` stays the default.

    ``average``: True averages the posterior marginals over the grid points the labels
    support (:func:`averaged_points`: (CV) above chance by more than a standard error,
    chains not in the ordered phase), weighted by their held-out predictive and prior
    (:func:`averaged_weights`), instead of taking the chosen point's alone
    (:func:`averaged_grid_posterior`); the chosen point still gives the MAP search and the
    chains' diagnostics. False (default): the chosen point's posterior only. Measured
    against False (``benchmarks/bench_option.py``, ``{"grid": {"average": true}}``,
    ``bench_option_boltzmann_average.json``, 16 panel sets, 10 splits, paired,
    2026-11-29): mean 85.5 -> 85.7; Digit1-10 76.3 -> 81.4 (+5.1 +- 2.4), USPS-100 89.4
    -> 91.3, usps_full 89.3 -> 91.1 (5 splits), digits 95.5 -> 96.5, USPS-10 73.3 ->
    74.2; COIL2-10 61.4 -> 58.6, breast_cancer 94.2 -> 91.8, CiteSeer 68.6 -> 67.2: a
    trade within the noise, so an option. Re-measured with the later defaults (1500
    posterior draws, a singleton class's label not held out;
    ``bench_option_boltzmann_average_draws_{a,b}.json``, the same panel, 2026-11-29):
    mean 86.0 -> 86.2; Digit1-10 79.2 -> 83.8 (+4.5 +- 2.6, HF's default 83.2), USPS-100
    +1.5 +- 0.9, usps_full +1.3, digits +0.9; breast_cancer -2.6 +- 1.6, COIL2-10 -2.0 +-
    1.5, CiteSeer -0.8: the same trade. With equal weights (the first version,
    ``bench_option_boltzmann_average_equal.json``) the mean went 85.5 -> 86.3 (Digit1-10
    82.5, usps_full 93.7, USPS-100 92.6), but the marginals lost their calibration
    (:func:`averaged_weights`).
    """

    alpha0: tuple = tuple(np.arange(-2.0, 4.01, 0.5).tolist())
    log_scale_offsets: tuple = (0.0, -1.0, 1.0)
    scale_prior_std: float = 1.0
    alpha0_prior_std: float = 3.0
    n_folds: int = 5
    n_chains: int = 1
    burn_in: int = 5
    n_samples: int = 20
    patience: int = 3
    tol: float = 1e-3
    choice: str = "prior"
    average: bool = False


def _finite_numbers(values, name: str, what: str) -> np.ndarray:
    """``values`` as a 1-D float64 array of finite numbers, else a ValueError naming it."""
    if isinstance(values, str | bytes) or not np.iterable(values):
        raise ValueError(f"{name}: give {what}, got {values!r}")
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: give {what}, got {values!r}") from None
    if array.ndim != 1 or array.size == 0 or not np.all(np.isfinite(array)):
        raise ValueError(f"{name}: give {what}, got {values!r}")
    return array


def check_grid_settings(settings: GridSettings) -> GridSettings:
    """Every field of ``settings`` checked (ValueError naming ``settings.<field>``, the value
    and what it must be): NaN in ``alpha0`` passed the increasing-grid test and a NaN ``tol``
    stopped every path at its first point; ``n_samples=0`` / ``n_chains=0`` ended in numpy's
    "All-NaN slice", ``scale_prior_std=0`` in "need at least one array to stack". Returns
    ``settings``."""
    grid = _finite_numbers(settings.alpha0, "settings.alpha0",
                           "an increasing grid of at least 2 finite values")
    if grid.size < 2 or np.any(np.diff(grid) <= 0):
        raise ValueError(f"settings.alpha0: give an increasing grid of at least 2 finite "
                         f"values, got {settings.alpha0!r}")
    _finite_numbers(settings.log_scale_offsets, "settings.log_scale_offsets",
                    "at least one finite offset of the length scale from the data scale "
                    f"(default {GridSettings().log_scale_offsets})")
    check_real(settings.scale_prior_std, "settings.scale_prior_std", low=0.0, low_open=True)
    check_real(settings.alpha0_prior_std, "settings.alpha0_prior_std", low=0.0, low_open=True)
    check_count(settings.n_folds, "settings.n_folds", least=1)
    check_count(settings.n_chains, "settings.n_chains", least=1)
    check_count(settings.burn_in, "settings.burn_in")
    check_count(settings.n_samples, "settings.n_samples", least=1)
    check_count(settings.patience, "settings.patience")
    check_real(settings.tol, "settings.tol", low=0.0)
    if settings.choice not in CHOICES:
        raise ValueError(f"settings.choice: use one of {CHOICES}, got {settings.choice!r}")
    check_flag(settings.average, "settings.average")
    return settings


class GridResult(NamedTuple):
    """Outcome of :func:`select_coupling`.

    ``theta``: the chosen :class:`ExtendedParams` (``class_bias`` 0, ``gamma`` as given, or
    ``inf`` for hard-clamped labels); ``alpha0``, ``log_scale_offset``: its grid
    coordinates; ``cv``: ``float[offsets, grid]``, (CV) per labelled point (NaN where the
    path stopped early); ``terms``: ``float[offsets, grid, l]``, each labelled point's term;
    ``merge_gain``: ``float[offsets, grid]``, the estimated free-energy change of the best
    class merge (:func:`~graphssl.inference.boltzmann.criteria.merge_gain`; negative: the
    model has degenerated there and the path stopped); ``strength``: the mean weighted
    degree ``sum_ij A_ij / n`` of each point;
    ``folds``: ``int[n]`` fold of each labelled point (-1 elsewhere, and for the label of
    a class that has only one, never held out: :func:`cross_validation_folds`);
    ``sigma0``: the data scale; ``n_sweeps``: chain sweeps done (all folds);
    ``start_labels``: ``int[chains, n]`` states of the all-labels fold at the chosen point
    (a warm start for the posterior);
    ``class_shares``: ``float[offsets, grid, C]``, each class's mean share of the unobserved
    nodes in the all-labels fold's draws (NaN where the path stopped before);
    ``ordered``: ``bool[offsets, grid]``, True where some class's share exceeds what the
    labelled counts make plausible
    (:func:`~graphssl.inference.ordered_phase.plausible_share_limits`);
    ``carries_labels``: whether the chosen point's (CV) exceeds chance's ``log(1/C)`` by
    more than one standard error (False: no grid point did, the best one was taken, and
    the labels do not tell a coupling that carries them from none; also False when no
    labelled point was scored: ``terms`` then has no column, ``cv`` is NaN and the point is
    the prior's, :func:`prior_choice`);
    ``averaged``: ``bool[offsets, grid]``, the points whose posteriors
    :func:`averaged_grid_posterior` averages (:func:`averaged_points`);
    ``averaged_theta``: their :class:`ExtendedParams`, and ``averaged_starts``:
    ``int[points, chains, n]``, their all-labels fold's final states (warm starts), both in
    the order of ``np.argwhere(averaged)``; ``averaged_chosen``: the chosen point's index
    in that order (-1: not among them); ``averaged_weights``: ``float[points]``, their
    weights (:func:`averaged_weights`).
    """

    theta: ExtendedParams
    alpha0: float
    log_scale_offset: float
    cv: np.ndarray
    terms: np.ndarray
    merge_gain: np.ndarray
    strength: np.ndarray
    folds: np.ndarray
    sigma0: float
    n_sweeps: int
    start_labels: np.ndarray
    class_shares: np.ndarray | None = None
    ordered: np.ndarray | None = None
    carries_labels: bool = True
    averaged: np.ndarray | None = None
    averaged_theta: tuple = ()
    averaged_starts: np.ndarray | None = None
    averaged_chosen: int = -1
    averaged_weights: np.ndarray | None = None


# --------------------------------------------------------------------------- the scale
DATA_SCALE_NEIGHBOURS = 10


@functools.partial(jax.jit, static_argnames="k")
def neighbour_sq_distance_median(geometry: PairGeometry, k: int = DATA_SCALE_NEIGHBOURS):
    """``sigma_0^2``: the median squared distance from each point to its ``k`` nearest paired
    points (positive distances only; 1 when there are none), a JAX scalar (jit-able): for
    kNN pairs the median kNN distance, for dense pairs that of the ``k`` nearest, not of
    all pairs (which would span the classes). One compiled program: called eagerly, its
    seven operations compiled one by one (0.5 s per new data shape, 2-core CPU)."""
    d2 = geometry.sq_dist
    order = jnp.lexsort((d2, geometry.senders))  # by sender, then distance
    senders = geometry.senders[order]
    first = jnp.searchsorted(senders, senders, side="left")
    rank = jnp.arange(senders.shape[0]) - first
    d2 = d2[order]
    keep = (rank < k) & (d2 > 0)
    median = jnp.nanmedian(jnp.where(keep, d2, jnp.nan))
    return jnp.where(jnp.isfinite(median), median, 1.0)


def data_scale(geometry: PairGeometry, k: int = DATA_SCALE_NEIGHBOURS) -> float:
    """``sigma_0``: the median distance from each point to its ``k`` nearest paired points
    (:func:`neighbour_sq_distance_median`)."""
    return float(np.sqrt(float(neighbour_sq_distance_median(geometry, k))))


def data_scale_log_length_scales(geometry: PairGeometry) -> np.ndarray:
    """The prior's mode, ``alpha_d = log(2 sigma_0^2)`` for every feature: then Eq. (39) is
    ``A_ij = exp(alpha_0 - d_ij^2 / (2 sigma_0^2))``."""
    n_features = int(geometry.sq_diff.shape[1])
    return np.full(n_features, math.log(2.0 * data_scale(geometry) ** 2))


def gamma_for_noise(noise: float, n_classes: int) -> float:
    """``gamma`` of Eq. (40) for a label-noise rate ``rho = P(o != y)``:
    ``e^{e^gamma} = (C - 1)(1 - rho) / rho``."""
    if not 0.0 < noise < (n_classes - 1) / n_classes:
        raise ValueError(f"label_noise: need 0 < rho < (C-1)/C = {(n_classes - 1) / n_classes:.3g}"
                         f", got {noise!r}")
    return math.log(math.log((n_classes - 1) * (1.0 - noise) / noise))


def cross_validation_folds(labels, n_folds: int, seed: int = 0) -> np.ndarray:
    """``int[n]``: fold ``0..K-1`` of each labelled point (stratified: each class's points
    shuffled with ``seed`` and dealt in turn), ``-1`` for unlabelled ones and for the label
    of a class that has only one (a singleton class); ``K`` is cut to the smallest count of
    the other classes (at least 2); the dealing is
    :func:`~graphssl.inference.optimize.logistic.stratified_folds`'s.

    A singleton class's label is never held out: without it no node carries that class,
    the model cannot predict it at any coupling, and its (CV) term would only favour the
    weakest couplings (those that carry no label anywhere). It stays observed in every
    fold and is not scored; when every class is a singleton no labelled point is scored
    (:func:`select_coupling` then takes the prior's choice). Measured against holding it
    out (the estimator's defaults, ad hoc, 2026-11-29, paired): wine with 6 random labels
    (8 draws, 6 with a singleton) 69.2 -> 73.9 (split 5 45.9 -> 65.7, split 3 71.5 ->
    67.4); digits with 20 random labels (8 draws) 68.7 -> 67.6; COIL (6 classes, its 12
    shipped 10-label splits) 33.9 -> 33.2; USPS-10 split 4 (9 : 1) 73.9 -> 78.7; over
    these 29 fits +0.9 a fit. Before, ``K`` was cut to the smallest class count, a
    singleton included (at least 2)."""
    labels = np.asarray(labels)
    counts = np.bincount(labels[labels >= 0]) if np.any(labels >= 0) else np.zeros(0, int)
    scored = np.where(np.isin(labels, np.flatnonzero(counts >= 2)), labels, -1)
    held = counts[counts >= 2]
    k = int(max(2, min(n_folds, held.min() if held.size else 2)))
    return stratified_folds(scored, k, seed)


# --------------------------------------------------------------------------- the engine
def _fold_templates(template: BoltzmannMRF, folds: np.ndarray, hard: bool) -> BoltzmannMRF:
    """The clamped-phase model of every fold, stacked on a leading axis: fold 0 holds every
    observation, fold ``k + 1`` all but those of fold ``k``."""
    observed = np.asarray(template.observed if hard else template.noisy_observed)
    n_folds = int(folds.max()) + 1
    masks = [observed] + [observed & (folds != k) for k in range(n_folds)]
    models = []
    for mask in masks:
        field = "observed" if hard else "noisy_observed"
        models.append(dataclasses.replace(template, **{field: mask}))
    # stacked on the host and moved once (an eager jnp.stack compiles per leaf shape)
    return jax.tree_util.tree_map(lambda *xs: to_device(np.stack([np.asarray(x) for x in xs])),
                                  *models)


@functools.lru_cache(maxsize=1)
def _default_kernel():
    """Swendsen-Wang, built once so that the compiled grid step is reused across fits."""
    from graphssl.inference.mcmc.swendsen_wang import swendsen_wang

    return swendsen_wang()


@functools.lru_cache(maxsize=16)
def _grid_step_fn(kernel, n_burn: int, n_keep: int, hard: bool):
    """The compiled work of one grid point: every fold's chains, ``n_burn + n_keep`` sweeps
    at the given couplings, then each labelled row's (CV) term from its own fold and the
    all-labels fold's merge gain and each class's mean share of the unobserved nodes in
    that fold's draws (the ordered-phase check of :func:`select_coupling`). The (fold,
    chain) runs are a ``lax.scan``, not a ``vmap``:
    on a CPU they cost the same, and a batched Swendsen-Wang (its component search is a
    ``while_loop``) compiled 4x slower (4.4 s vs 1.2 s, 6 folds, 178 nodes)."""

    def chain(model, key, labels):
        def sweep(lab, k):
            state, _ = kernel.step(model, k, kernel_state(lab))
            return state.labels, state.labels

        keys = jax.random.split(key, n_burn + n_keep)
        labels, _ = jax.lax.scan(sweep, labels, keys[:n_burn])
        return jax.lax.scan(sweep, labels, keys[n_burn:])

    @jax.jit
    def run(folds_model, couplings, evidence, key, labels, rows, observed_labels, row_fold):
        n_models, n_chains, n = labels.shape
        zero = jnp.zeros_like(folds_model.class_bias[0])

        def fold_model(f):
            model = jax.tree_util.tree_map(lambda x: x[f], folds_model)
            return model.with_parameters(couplings, zero, None if hard else evidence)

        def body(_, x):
            f, k, lab = x
            return None, chain(fold_model(f), k, lab)

        flat = jnp.repeat(jnp.arange(n_models), n_chains)
        keys = jax.random.split(key, n_models * n_chains)
        _, (labels, draws) = jax.lax.scan(body, None, (flat, keys, labels.reshape(-1, n)))
        draws = draws.reshape(n_models, -1, n)  # [folds, chains * n_keep, n]
        models = jax.vmap(fold_model)(jnp.arange(n_models))
        terms = jax.vmap(lambda m, d: held_out_log_prob(m, d, rows, observed_labels,
                                                           evidence))(models, draws)
        held_out = terms[row_fold + 1, jnp.arange(rows.shape[0])]  # each row from its fold
        merge = merge_gain(fold_model(0), draws[0], rows, observed_labels, evidence, hard,
                            draws.reshape(-1, n))
        # each class's share of the unobserved nodes, all-labels fold, mean over its draws
        free = ~(folds_model.observed[0] if hard else folds_model.noisy_observed[0])
        counts = jnp.sum(jax.nn.one_hot(draws[0], zero.shape[-1], dtype=zero.dtype)
                         * free[None, :, None], axis=(0, 1))
        share = counts / (draws.shape[1] * jnp.maximum(jnp.sum(free), 1))
        return labels.reshape(n_models, n_chains, n), held_out, merge, share

    return run


def _fold_starts(key, fold_masks, labels_start, n_chains: int, n_classes: int) -> np.ndarray:
    """Uniform starting labels ``int32[folds, n_chains, n]``, each fold's observed nodes at
    their labels (clamps hold theirs). Drawn on the host by numpy, seeded from ``key``: the
    same draw compiled by JAX cost 1.0 s per new data shape (2-core CPU, default XLA
    settings), where the grid's own sampling takes ~0.5 s."""
    seed = np.asarray(jax.random.key_data(key)).ravel().tolist()
    masks = np.asarray(fold_masks, dtype=bool)
    n_models, n = masks.shape
    labels = np.random.default_rng(seed).integers(n_classes, size=(n_models, n_chains, n))
    start = np.broadcast_to(np.asarray(labels_start), labels.shape)
    return np.where(masks[:, None, :], start, labels).astype(np.int32)


def kernel_state(labels):
    """The generic label kernels' state (``LabelState``) for ``labels``."""
    from graphssl.inference.mcmc.kernels import LabelState

    return LabelState(labels)


def _offset_order(offsets):
    return sorted(range(len(offsets)), key=lambda i: (abs(offsets[i]), offsets[i]))


def select_coupling(geometry: PairGeometry, template: BoltzmannMRF, key, *, gamma: float,
                    clamp: bool = False, settings: GridSettings | None = None,
                    kernel=None, seed: int = 0, progress=False,
                    why: str = "each point samples every fold's chains") -> GridResult:
    """Choose ``alpha_0`` and a shared length-scale offset by (CV) (module docstring).

    Args:
      geometry: the model's pairs.
      template: the clamped-phase model of :meth:`BoltzmannProblem.template` (extended model:
        observations as evidence; basic model: labels hard-clamped).
      key: PRNG key of the chains.
      gamma: the noise channel of Eq. (40): the evidence strength ``e^gamma`` of the
        extended model and, for both, the channel through which (CV) scores a held-out
        label (:func:`gamma_for_noise`).
      clamp: True for a template with hard-clamped labels (the zero-noise model; only
        (CV)'s score then uses the channel).
      settings: :class:`GridSettings` (default: its defaults; checked by
        :func:`check_grid_settings`).
      kernel: the chains' kernel (default Swendsen-Wang).
      seed: the folds' shuffle.
      progress: ``"auto"``, True or False: a bar over the grid points, with one line on why
        the search is long (``why``) once it is known to be (:mod:`graphssl._progress`).
    """
    settings = check_grid_settings(GridSettings() if settings is None else settings)
    grid = np.asarray(settings.alpha0, dtype=np.float64)
    hard = bool(clamp)
    observed = np.asarray(template.observed if hard else template.noisy_observed)
    labels_all = np.where(observed, np.asarray(template.noisy_labels), -1)
    if observed.sum() < 2:
        raise ValueError("labels: the coupling is chosen on held-out labelled points; give at "
                         "least 2 labelled points")
    folds = cross_validation_folds(labels_all, settings.n_folds, seed)
    rows = np.flatnonzero(observed & (folds >= 0))  # the labels (CV) scores
    folds_model = _fold_templates(template, folds, hard)
    fold_masks = folds_model.observed if hard else folds_model.noisy_observed  # [F, n]
    labels_start = jnp.asarray(np.maximum(labels_all, 0), jnp.int32)
    kernel = _default_kernel() if kernel is None else kernel
    run = _grid_step_fn(kernel, int(settings.burn_in), int(settings.n_samples), hard)
    evidence = jnp.asarray(math.exp(gamma), template.field.dtype)
    sigma0 = data_scale(geometry)
    base = data_scale_log_length_scales(geometry)
    offsets = [float(o) for o in settings.log_scale_offsets]
    n_models, n, C = int(folds.max()) + 2, template.n_nodes, template.n_classes
    terms = np.full((len(offsets), grid.size, rows.size), np.nan)
    strength = np.full((len(offsets), grid.size), np.nan)
    merge_gain = np.full((len(offsets), grid.size), np.nan)
    ordered = np.zeros((len(offsets), grid.size), dtype=bool)
    class_shares = np.full((len(offsets), grid.size, C), np.nan)
    share_limits = plausible_share_limits(labels_all, C)
    starts = {}
    sweeps = 0
    args = (jnp.asarray(rows, jnp.int32), jnp.asarray(labels_all[rows], jnp.int32),
            jnp.asarray(folds[rows], jnp.int32))
    timer = StepTimer(progress, total=len(offsets) * grid.size, desc="coupling grid",
                      why=why)
    for oi in _offset_order(offsets):
        log_ls = jnp.asarray(base + offsets[oi])
        key, k0 = jax.random.split(key)
        labels = _fold_starts(k0, fold_masks, labels_start, int(settings.n_chains), C)
        stale, path_best = 0, -np.inf
        for gi, a0 in enumerate(grid):
            key, k = jax.random.split(key)
            couplings = length_scale_couplings(geometry, jnp.asarray(a0), log_ls)
            labels, held_out, merge, share = run(folds_model, couplings, evidence, k, labels,
                                                 *args)
            sweeps += n_models * int(settings.n_chains) * (settings.burn_in + settings.n_samples)
            merge_gain[oi, gi] = float(merge)
            timer.tick()
            if merge_gain[oi, gi] < 0:  # degenerate here, and more so at stronger couplings
                break
            terms[oi, gi] = np.asarray(held_out, dtype=np.float64)
            strength[oi, gi] = float(np.sum(np.asarray(couplings))) / n  # mean degree
            class_shares[oi, gi] = np.asarray(share, dtype=np.float64)
            ordered[oi, gi] = bool(np.any(class_shares[oi, gi] > share_limits))
            starts[oi, gi] = np.asarray(labels)[0]
            if rows.size == 0:  # nothing to score: the path runs until the model degenerates
                continue
            mean = float(terms[oi, gi].mean())
            if mean > path_best + settings.tol:
                path_best, stale = mean, 0
            else:
                stale += 1
                if stale >= settings.patience:
                    break
    timer.close()
    if np.all(np.isnan(strength)):  # set wherever the model had not degenerated
        raise RuntimeError(
            "select_coupling: the model degenerated (a class merge lowered the energy) at every "
            f"grid point; start the grid at weaker couplings (settings.alpha0[0] = {grid[0]})")
    log_prior = -0.5 * ((np.asarray(offsets)[:, None] / settings.scale_prior_std) ** 2
                        + (grid[None, :] / settings.alpha0_prior_std) ** 2)
    if rows.size:
        oi, gi = choose_grid_point(terms, log_prior, strength, n_classes=C,
                                   choice=settings.choice, ordered=ordered)
        cv = terms.mean(axis=-1)  # NaN where the path stopped before
    else:
        oi, gi = prior_choice(log_prior, strength, ordered)
        cv = np.full(strength.shape, np.nan)
    start = starts[oi, gi]
    dtype = jnp.float64 if jax.config.jax_enable_x64 else jnp.float32

    def theta_at(o, g):
        return ExtendedParams(alpha0=jnp.asarray(grid[g]),
                              log_length_scales=jnp.asarray(base + offsets[o]),
                              class_bias=jnp.zeros(C),
                              gamma=jnp.asarray(np.inf if hard else gamma, dtype))

    supported = averaged_points(terms, ordered, n_classes=C, chosen=(oi, gi))
    weights = averaged_weights(terms, log_prior, supported)
    averaged = weights >= MIN_AVERAGED_WEIGHT
    points = [tuple(int(i) for i in p) for p in np.argwhere(averaged)]
    return GridResult(theta_at(oi, gi), float(grid[gi]), offsets[oi], cv, terms, merge_gain,
                      strength, folds, sigma0, sweeps, start, class_shares, ordered,
                      carries_labels=bool(_carries_labels(terms, C)[oi, gi]),
                      averaged=averaged,
                      averaged_theta=tuple(theta_at(o, g) for o, g in points),
                      averaged_starts=np.stack([starts[p] for p in points]),
                      averaged_chosen=points.index((oi, gi)) if (oi, gi) in points else -1,
                      averaged_weights=weights[averaged] / weights[averaged].sum())


def choose_grid_point(terms: np.ndarray, log_prior: np.ndarray, strength: np.ndarray, *,
                      n_classes: int, choice: str = "prior",
                      ordered: np.ndarray | None = None) -> tuple[int, int]:
    """``(offset index, grid index)`` chosen from the per-point (CV) ``terms [offsets, grid,
    l]`` (NaN where a path stopped) by ``choice`` (:class:`GridSettings`): ``"best"`` the
    largest mean; ``"prior"`` / ``"weakest"`` the one-standard-error rule with the chance
    floor ``log(1/C)`` (:func:`_one_standard_error_choice`), ranking the points it keeps by
    ``ordered`` (``bool [offsets, grid]``, the ordered-phase signature: such points last;
    None: no point is), then by ``log_prior``, by coupling ``strength`` alone (weakest
    first) or, for ``"strongest"``, by ``strength`` strongest first."""
    if choice not in CHOICES:
        raise ValueError(f"settings.choice: use one of {CHOICES}, got {choice!r}")
    if choice == "best":
        o, g = np.unravel_index(np.nanargmax(terms.mean(axis=-1)), strength.shape)
        return int(o), int(g)
    rank = {"prior": log_prior, "weakest": np.zeros_like(log_prior),
            "strongest": np.asarray(strength, dtype=np.float64)}[choice]
    return _one_standard_error_choice(terms, rank, strength, chance=-math.log(n_classes),
                                      ordered=ordered)


def prior_choice(log_prior: np.ndarray, strength: np.ndarray,
                 ordered: np.ndarray) -> tuple[int, int]:
    """``(offset index, grid index)`` of highest prior density among the evaluated points
    (``strength`` not NaN) whose chains are not ``ordered`` (ties: weaker coupling); among
    all evaluated points when every one is. The choice when no labelled point can be
    scored (every class has a single label: :func:`cross_validation_folds`)."""
    order = _ranked(~np.isnan(strength), np.asarray(ordered, bool), log_prior, strength)
    return tuple(int(i) for i in np.unravel_index(order[0], strength.shape))


def _ranked(evaluated: np.ndarray, flagged: np.ndarray, log_prior: np.ndarray,
            strength: np.ndarray) -> np.ndarray:
    """Flat indices of the grid points in the order the choice rules try them: evaluated
    before not, then not ``flagged`` (ordered phase) first, then highest ``log_prior``,
    then weakest ``strength``."""
    return np.lexsort((np.where(evaluated, strength, np.inf).ravel(),
                       np.where(evaluated, -log_prior, np.inf).ravel(),
                       np.where(evaluated, flagged, True).ravel()))


def _one_standard_error_choice(terms: np.ndarray, log_prior: np.ndarray,
                               strength: np.ndarray, chance: float | None = None,
                               ordered: np.ndarray | None = None) -> tuple[int, int]:
    """The one-standard-error rule (Breiman et al. 1984), paired: among the grid points whose
    per-point (CV) terms fall short of the best point's by less than one standard error of
    the mean difference, and exceed ``chance`` (``log(1/C)``, the score of a predictive
    that carries no label; None: no such floor) by more than one standard error, the first
    point not flagged ``ordered`` (True where the chains show the ordered phase; None: none
    is), then of highest prior density ``log_prior`` (ties: weaker coupling, smaller mean
    weighted degree ``strength``); the best point when none qualifies. With 10 labels the standard
    error is wide enough that, without the floor, a coupling whose held-out score is
    chance's (Digit1: -0.695 against ln(1/2) = -0.693, best -0.55) was chosen."""
    means = terms.mean(axis=-1)
    best = terms[np.unravel_index(np.nanargmax(means), means.shape)]
    evaluated = ~np.isnan(means)
    flagged = np.zeros(means.shape, bool) if ordered is None else np.asarray(ordered, bool)
    floor = np.ones(means.shape, bool) if chance is None else _above_chance(terms, chance)
    for flat in _ranked(evaluated, flagged, log_prior, strength):
        o, g = np.unravel_index(flat, means.shape)
        if not evaluated[o, g]:
            break
        short = terms[o, g] - best
        if short.mean() >= -_se(short) and floor[o, g]:
            return int(o), int(g)
    return tuple(int(i) for i in np.unravel_index(np.nanargmax(means), means.shape))


def _se(values: np.ndarray) -> float:
    """Standard error of the mean of ``values`` (0 for a single value)."""
    return float(values.std(ddof=1) / np.sqrt(values.size)) if values.size > 1 else 0.0


def _carries_labels(terms: np.ndarray, n_classes: int) -> np.ndarray:
    """``bool[offsets, grid]``: the evaluated points whose per-point (CV) ``terms [offsets,
    grid, l]`` exceed chance's ``log(1/C)`` by more than one standard error (:func:`_se`:
    0 for a single labelled point)."""
    return _above_chance(terms, -math.log(n_classes))


def _above_chance(terms: np.ndarray, chance: float) -> np.ndarray:
    """``bool[offsets, grid]``: the evaluated points whose per-point ``terms`` exceed
    ``chance`` by more than one standard error of their mean (:func:`_carries_labels`)."""
    if terms.shape[-1] == 0:  # no labelled point was scored
        return np.zeros(terms.shape[:-1], dtype=bool)
    evaluated = ~np.isnan(terms).any(axis=-1)
    above = np.where(evaluated[..., None], terms, 0.0) - chance
    se = np.zeros(evaluated.shape)
    if terms.shape[-1] > 1:
        se = above.std(axis=-1, ddof=1) / math.sqrt(terms.shape[-1])
    return evaluated & (above.mean(axis=-1) > se)


def averaged_points(terms: np.ndarray, ordered: np.ndarray | None, *, n_classes: int,
                    chosen: tuple[int, int]) -> np.ndarray:
    """``bool[offsets, grid]``: the grid points whose posteriors are averaged -- those whose
    per-point (CV) ``terms [offsets, grid, l]`` exceed chance's ``log(1/C)`` by more than one
    standard error (the labels reach someone there) and whose chains are not ``ordered``;
    if none, those that carry labels; if none, the ``chosen`` point alone.

    Why average: with ten labels (CV) cannot rank the couplings that carry them (their
    scores differ by less than their standard errors), and the one taken by the prior's
    favourite decides the posterior; Zhu & Ghahramani's Theta has a prior (Sec. 6), and the
    posterior over labels integrates over it, with the weights of :func:`averaged_weights`."""
    carries = _carries_labels(terms, n_classes)
    flagged = np.zeros_like(carries) if ordered is None else np.asarray(ordered, bool)
    for mask in (carries & ~flagged, carries):
        if mask.any():
            return mask
    only = np.zeros_like(carries)
    only[chosen] = True
    return only


# --------------------------------------------------------------------------- the posterior
def grid_model(template: BoltzmannMRF, geometry: PairGeometry, theta: ExtendedParams,
               hard: bool) -> BoltzmannMRF:
    """The clamped phase at ``theta``: Eq. (39) couplings, class biases and, unless
    ``hard`` (labels clamped, the zero-noise channel), the noise strength ``e^gamma``."""
    couplings = length_scale_couplings(geometry, theta.alpha0, theta.log_length_scales)
    evidence = None if hard else jnp.exp(theta.gamma)
    return template.with_parameters(couplings, theta.class_bias, evidence)


def grid_posterior(model: BoltzmannMRF, labels, key, *, method: str = "swendsen_wang",
                   chains=None, init_labels=None, averaged_with=(), own_weight=1.0,
                   progress: bool = False, decision=None):
    """Label posterior of the clamped-phase ``model`` by chains of ``method`` (started from
    ``init_labels [chains, n]`` when given: then ``chains.persistent_burn_in`` sweeps are
    discarded), marginals Rao-Blackwellised (:func:`~graphssl.inference.mcmc.chains.
    rao_blackwell_marginals`: on breast_cancer, 10 labels a class, 5 splits, 0.895 against
    0.875 from the frequencies of the same draws), MAP by
    :func:`graphssl.inference.optimize.map_search.map_search`; returns a
    :class:`~graphssl.inference.boltzmann.learning.BoltzmannPosterior`.

    ``averaged_with``: ``(weight, marginals float[n, C])`` of other grid points, averaged
    with these chains' own marginals (weight ``own_weight``) into the result's marginals
    (:func:`averaged_grid_posterior`); the chains then still give the MAP search and the
    diagnostics. ``progress``: a bar over the chains' sweeps (the same draws).
    ``decision``: ``marginals float[n, C] -> int[n]``, the labelling reported as the
    posterior mean (an estimator's class-mass rule); the MAP search starts from it and
    scores it, so that the MAP's energy is at or below that labelling's (None: the
    marginals' argmax)."""
    from graphssl.inference.boltzmann.learning import BoltzmannPosterior
    from graphssl.inference.optimize.map_search import map_search

    samples, own = _chain_marginals(model, key, method, chains, init_labels, progress)
    weights = [float(own_weight)] + [float(w) for w, _ in averaged_with]
    parts = [own] + [np.asarray(m) for _, m in averaged_with]
    marginals = np.tensordot(np.asarray(weights) / sum(weights), np.stack(parts), axes=1)
    labels = np.asarray(labels)
    observed = labels >= 0
    mean_labels = marginals.argmax(1)
    shown = mean_labels if decision is None else np.asarray(decision(marginals), np.int64)
    mode, search = map_search(model, samples=samples, posterior_mean=shown)
    p_observed = np.full(labels.shape, np.nan)
    p_observed[observed] = marginals[observed, labels[observed]]
    wrong = np.flatnonzero(observed & (mean_labels != labels))
    return BoltzmannPosterior(marginals, mean_labels, np.asarray(mode), wrong, p_observed,
                              samples, model, search)


def _chain_marginals(model, key, method, chains, init_labels, progress=False):
    """``(samples, marginals float[n, C])``: chains of ``method`` on ``model`` (as
    :func:`grid_posterior`) and their Rao-Blackwellised marginals."""
    from graphssl.inference.boltzmann.expectations import chain_samples
    from graphssl.inference.mcmc.chains import rao_blackwell_marginals

    chains = _posterior_chains(chains)
    if init_labels is not None:  # as many starts as chains, cycling through those given
        init_labels = np.asarray(init_labels).reshape(-1, model.n_nodes)
        init_labels = init_labels[np.arange(chains.n_chains) % init_labels.shape[0]]
    samples = chain_samples(model, key, method, chains, init_labels, progress)
    return samples, np.asarray(rao_blackwell_marginals(model, samples))


MIN_AVERAGED_WEIGHT = 1e-3


def averaged_weights(terms: np.ndarray, log_prior: np.ndarray,
                     supported: np.ndarray) -> np.ndarray:
    """``float[offsets, grid]``: each ``supported`` point's weight in the averaged posterior,
    ``exp(sum_l (CV)_l + log p(Theta))`` normalised over them (0 elsewhere): the labels'
    held-out predictive taken as Theta's likelihood, times the grid's prior (the pseudo-
    posterior of Theta on the grid). Points under ``MIN_AVERAGED_WEIGHT`` are not sampled.

    Equal weights were tried first (ad hoc, the same fits, 14 panel sets, 10 splits, the
    ``"auto"`` decision: mean 87.2 against 87.0 with these, 86.6 at the chosen point alone;
    with the estimator, ``bench_option_boltzmann_average_equal.json``: 16 sets 85.5 -> 86.3)
    and left the marginals badly calibrated: weak couplings whose labels reach few nodes
    got as much say as the ones the labels prefer (expected calibration error of the
    marginals' argmax, chosen point / equal weights / these: digits 3.2 / 51.6 / 2.2 %,
    wine 4.2 / 24.6 / 3.5, breast_cancer 9.9 / 25.1 / 9.3, Digit1-100 2.1 / 21.0 / 1.9)."""
    score = np.where(supported, np.nansum(terms, axis=-1) + log_prior, -np.inf)
    weights = np.exp(score - np.max(score))
    return weights / weights.sum()


POSTERIOR_DRAWS = 1500
"""Draws a chain of the posterior at the chosen coupling (the estimator's ``n_samples``).
Against 300 (``benchmarks/bench_option.py``, ``{"n_samples": 1500}``,
``bench_option_boltzmann_draws_{a,b}.json``, 16 panel sets, 10 splits, paired, 2026-11-29):
mean 85.5 -> 86.0; Digit1-10 76.3 -> 79.2 (+2.9 +- 1.5), COIL2-10 61.4 -> 64.1, Text-10
65.0 -> 66.9 (+1.9 +- 0.9), usps_full +0.7, USPS-10 +0.5; USPS-100 -0.5 +- 0.4, the rest
within 0.2. Where the marginals are nearly flat (weak couplings, few labels) the nodes' small
leanings decide, and 300 draws left them to Monte-Carlo noise. Held-out, read once after the
change (``bench_option_boltzmann_draws_heldout.json``, 18 sets, 3 splits): mean 65.8 ->
66.2. Cost: a fit's CPU time about doubles (Digit1-10 1.3 -> 3.1 s, digits 3.7 -> 7.5 s,
usps_full 24 -> 51 s)."""


def _posterior_chains(chains):
    """``chains``, or the posterior's default ``ChainSettings`` (4 chains of
    ``POSTERIOR_DRAWS`` draws after 50 sweeps) when None."""
    from graphssl.inference.boltzmann.expectations import ChainSettings

    return (ChainSettings(n_chains=4, n_samples=POSTERIOR_DRAWS, burn_in=50) if chains is None
            else chains)


MIN_AVERAGED_DRAWS = 50


def draws_per_point(n_samples: int, n_points: int) -> int:
    """Draws a chain for each of ``n_points`` averaged grid points besides the chosen one:
    ``n_samples / 2^ceil(log2 K)``, at least ``MIN_AVERAGED_DRAWS``. Powers of two, not
    ``n_samples / K``: each count is its own compiled chain program, and halvings give one
    per doubling of ``K`` (for 300 draws: 150, 75, 50) where every ``K`` gave one more (a
    fresh process's fit of bupa, 345 points: 0.3 -> 2.2 CPU s with ``n_samples / K``)."""
    halvings = max(0, math.ceil(math.log2(max(n_points, 1))))
    return max(MIN_AVERAGED_DRAWS, int(n_samples) >> halvings)


def averaged_grid_posterior(template: BoltzmannMRF, geometry: PairGeometry,
                            result: GridResult, labels, key, *, hard: bool,
                            method: str = "swendsen_wang", chains=None, decision=None):
    """The label posterior averaged over the grid points ``result.averaged`` with the
    weights ``result.averaged_weights`` (:func:`averaged_points`, :func:`averaged_weights`).
    Each point other than the chosen one is
    sampled at its clamped phase (:func:`grid_model`) from its warm start with
    :func:`draws_per_point` draws a chain (about ``n_samples / K``, at least
    ``MIN_AVERAGED_DRAWS``), so that the ``K`` points together cost about one posterior's
    draws more; the chosen point keeps its ``n_samples`` and gives the MAP search and the
    diagnostics (:func:`grid_posterior`, its marginals in the average only where it is one
    of the points), drawn with ``key`` itself, so that with the chosen point alone the
    result is :func:`grid_posterior`'s; the others' keys are ``fold_in(key, index + 1)``.
    ``decision``: as :func:`grid_posterior`'s, on the averaged marginals."""
    chains = _posterior_chains(chains)
    n_points = len(result.averaged_theta)
    share = dataclasses.replace(chains, n_samples=draws_per_point(chains.n_samples, n_points))
    others = []
    for index, (theta, start, weight) in enumerate(zip(
            result.averaged_theta, result.averaged_starts, result.averaged_weights, strict=True)):
        if index == result.averaged_chosen:
            continue  # its marginals come from its full chains
        model = grid_model(template, geometry, theta, hard)
        point_key = jax.random.fold_in(key, index + 1)
        others.append((weight, _chain_marginals(model, point_key, method, share, start)[1]))
    chosen_model = grid_model(template, geometry, result.theta, hard)
    own = result.averaged_chosen
    return grid_posterior(chosen_model, labels, key, method=method, chains=chains,
                          init_labels=result.start_labels, averaged_with=others,
                          own_weight=result.averaged_weights[own] if own >= 0 else 0.0,
                          decision=decision)
