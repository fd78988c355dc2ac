"""PSIS-LOO of the labelled nodes through ArviZ: pointwise log-likelihoods, Pareto k, stacking.

A sampled label model predicts each labelled node i from the others. With ``theta`` the
latent state of one posterior draw (the unlabelled labels, and for the diffusion mixture the
component centres), the pointwise log-likelihood of draw s is

    log p(y_i | theta_s, y_L without i),

and the leave-one-out predictive ``p(y_i | y_L without i)`` is its harmonic mean over the
posterior given all labels (Gelfand's conditional predictive ordinate). The raw harmonic mean
of a few draws is optimistic (its importance ratios ``1 / p(y_i | theta_s)`` have a heavy
tail). Pareto-smoothed importance sampling (Vehtari, Gelman & Gabry 2017, Stat. Comput. 27;
Vehtari et al. 2024, JMLR 25(72)) smooths the largest ratios by a generalised Pareto fit
and reports its shape ``k`` per node: ``k`` above ``min(1 - 1 / log10 S, 0.7)`` (S draws)
says the estimate of that node cannot be trusted. :func:`psis_loo` runs ``az.loo`` on a
``log_likelihood`` group and turns high ``k`` into a :class:`ParetoKWarning` naming the fix;
:func:`stacking_weights` runs ``az.compare`` (stacking of predictive distributions, Yao et
al. 2018) over several models.

:func:`pairwise_log_likelihood` is the pointwise log-likelihood of a pairwise label model
(Potts, Boltzmann MRF) with clamped labelled nodes: the single-site conditional
``log p(y_i = observed | y_-i)`` of each clamped node in each draw with its clamp released
(Zhu & Ghahramani Eq. 25 with a field). The diffusion mixture's is Eq. (7) summed over the
centre (:func:`graphssl.models.diffusion_mixture.held_out_class_log_probs`).
"""

from __future__ import annotations

import warnings

import numpy as np

from graphssl._warnings import warn_user
from graphssl.models.protocol import pairwise_tables

__all__ = ["ParetoKWarning", "pairwise_log_likelihood", "loo_tree", "psis_loo",
           "stacking_weights", "max_pareto_k", "MIN_DRAWS"]

# ArviZ fits the generalised Pareto to the largest S / 5 ratios (S * r_eff <= 225) and needs
# at least 5 of them.
MIN_DRAWS = 25
_SAMPLE_DIMS = ("chain", "draw")
_VAR = "observed_labels"
_ARVIZ_K_WARNING = "Estimated shape parameter of Pareto distribution"


class ParetoKWarning(UserWarning):
    """PSIS-LOO found labelled nodes whose Pareto ``k`` is above the reliable threshold."""


def pairwise_log_likelihood(labels, model) -> np.ndarray:
    """Pointwise log-likelihood of the clamped nodes of a pairwise label model, per draw.

    ``labels`` int[chains, draws, n] (posterior draws, clamped nodes at their labels),
    ``model`` with ``pairwise_tables()``, ``observed`` and ``labels``. Returns float64
    ``[chains, draws, L]`` (L = clamped nodes in index order): ``log p(y_i = labels_i | y_-i)``
    of law (P) of :mod:`graphssl.models.protocol` with node i's clamp released,
    ``h_i(c) + sum_d J_{i,d} [y_{nbr(i,d)} = c]`` normalised over c. By the Markov property
    it reads i's neighbours only; its harmonic mean over the draws is
    ``p(y_i | y_L without i)``. Computed on the host (no compilation)."""
    tables = pairwise_tables(model)
    nodes = np.flatnonzero(np.asarray(model.observed, dtype=bool))
    observed = np.asarray(model.labels)[nodes].astype(np.int64)
    index = np.asarray(tables.neighbor_index)[nodes]
    weight = np.asarray(tables.coupling, np.float64)[nodes]
    unary = np.asarray(tables.unary, np.float64)[nodes]
    draws = np.asarray(labels)
    if draws.ndim != 3 or draws.shape[-1] != np.shape(model.labels)[0]:
        raise ValueError(f"labels: expected [chains, draws, {np.shape(model.labels)[0]}], "
                         f"got {draws.shape}")
    neighbours = draws[:, :, index]  # [chains, draws, L, d]
    logits = np.stack([unary[:, c] + np.sum(np.where(neighbours == c, weight, 0.0), axis=-1)
                       for c in range(unary.shape[1])], axis=-1)
    top = logits.max(axis=-1, keepdims=True)
    log_norm = top[..., 0] + np.log(np.exp(logits - top).sum(axis=-1))
    return np.take_along_axis(logits, observed[None, None, :, None], axis=-1)[..., 0] - log_norm


def loo_tree(log_likelihood, *, nodes=None, labels=None):
    """A DataTree holding ``log_likelihood`` float[chains, draws, L] as the group
    ``log_likelihood`` (variable ``observed_labels``, dim ``labelled_node`` with coordinates
    ``nodes``) and the labels in ``observed_data``, the layout ``az.loo`` reads."""
    import arviz as az

    ll = np.asarray(log_likelihood, np.float64)
    if ll.ndim != 3:
        raise ValueError(f"log_likelihood: expected [chains, draws, labelled nodes], got "
                         f"{ll.shape}")
    _check_log_likelihood_values(ll, "log_likelihood")
    if nodes is not None and np.shape(nodes) != (ll.shape[-1],):
        raise ValueError(f"nodes: one name per labelled node, {ll.shape[-1]} (the last axis of "
                         f"log_likelihood), got shape {np.shape(nodes)}")
    coords = {"labelled_node": np.arange(ll.shape[-1]) if nodes is None else np.asarray(nodes)}
    data = {"log_likelihood": {_VAR: ll}}
    if labels is not None:
        data["observed_data"] = {_VAR: np.asarray(labels)}
    with warnings.catch_warnings():  # many short chains (checkpoints) are no mistake here
        warnings.filterwarnings("ignore", message="Found chain dimension to be longer")
        return az.from_dict(data, coords=coords, dims={_VAR: ["labelled_node"]})


def _check_log_likelihood_values(ll: np.ndarray, name: str) -> None:
    """Log-likelihoods of labels: ``-inf`` (probability 0) allowed; NaN or ``+inf`` refused
    (a ValueError naming ``name`` and how many)."""
    bad = np.isnan(ll) | (ll == np.inf)
    if bad.any():
        raise ValueError(f"{name}: {int(bad.sum())} entries are NaN or +inf; a pointwise "
                         "log-likelihood is a log-probability (-inf for probability 0)")


def _relative_efficiency(ll: np.ndarray) -> float:
    """r_eff = mean over nodes of ESS(p(y_i | theta_s)) / S (as R's ``loo::relative_eff``);
    1 for one chain (ArviZ's rule)."""
    import arviz as az

    if ll.shape[0] == 1:
        return 1.0
    ratios = np.exp(ll - ll.max(axis=(0, 1), keepdims=True))
    moving = np.ptp(ll, axis=(0, 1)) > 0
    if not moving.any():
        return 1.0
    ess = [float(az.ess(ratios[..., i], method="mean")) for i in np.flatnonzero(moving)]
    value = float(np.nanmean(ess)) / (ll.shape[0] * ll.shape[1])
    return value if np.isfinite(value) and value > 0 else 1.0


def _tail_size(n_draws: int, r_eff: float) -> int:
    """ArviZ's right-tail length of PSIS (``_get_ps_tails``)."""
    if n_draws * r_eff > 225:
        return int(np.floor(3 * np.sqrt(n_draws / r_eff)))
    return int(np.floor(n_draws / 5))


def _smoothed_weights(log_lik, r_eff: float):
    """PSIS log weights and Pareto k of the nodes (``xarray`` [node, chain, draw], [node]).

    A node whose largest ratios are all equal (its log-likelihood takes a few values, e.g. a
    Potts node with one free neighbour; ArviZ refuses to fit a Pareto tail to it) keeps its
    raw ratios, which are then bounded: ``k = -inf``."""
    import xarray as xr

    ll = log_lik.transpose("labelled_node", *_SAMPLE_DIMS)
    flat = -ll.values.reshape(ll.shape[0], -1)
    tail = _tail_size(flat.shape[1], r_eff)
    top = np.sort(flat, axis=1)[:, -tail:]
    flat_tail = (top.max(axis=1) - top.min(axis=1)) < np.finfo(float).tiny
    log_weights = flat - flat.max(axis=1, keepdims=True)
    log_weights -= np.log(np.exp(log_weights).sum(axis=1, keepdims=True))
    log_weights = xr.DataArray(log_weights.reshape(ll.shape), dims=ll.dims, coords=ll.coords)
    k = xr.DataArray(np.full(ll.shape[0], -np.inf), dims=("labelled_node",),
                     coords={"labelled_node": ll.coords["labelled_node"]})
    fit = np.flatnonzero(~flat_tail)
    if fit.size:
        lw, kk = ll.isel(labelled_node=fit).azstats.psislw(r_eff=r_eff, dim=list(_SAMPLE_DIMS))
        log_weights[fit] = lw.transpose(*log_weights.dims).values
        k[fit] = kk.values
    return log_weights, k


def psis_loo(data, *, warn: bool = True, source: str | None = None):
    """PSIS-LOO (``az.loo``, pointwise) of a DataTree's ``log_likelihood`` group, or of an
    array float[chains, draws, L] (:func:`loo_tree`).

    Returns ArviZ's ``ELPDDataLOO``: ``elpd`` (sum over the labelled nodes of the estimated
    ``log p(y_i | y_L without i)``), ``se``, ``p`` (effective number of parameters),
    ``elpd_i`` and ``pareto_k`` per node, ``good_k`` = ``min(1 - 1 / log10 S, 0.7)``.
    ``r_eff``: :func:`_relative_efficiency` of the likelihood values. ``k`` is ``-inf`` where
    the largest ratios tie exactly and NaN where ArviZ's Pareto fit fails (ratios that
    differ by float32 rounding only, p ~ 1): both keep their raw ratios. When a node's ``k``
    exceeds ``good_k`` and ``warn``, a :class:`ParetoKWarning` (prefixed by ``source``)
    says how many and the fix (ArviZ's own generic warning is replaced by it). Needs at
    least :data:`MIN_DRAWS` = 25 draws in all (ArviZ's Pareto fit needs 5 tail draws).

    A node with a draw of log-likelihood ``-inf`` (probability 0) has an infinite
    importance ratio: its harmonic-mean predictive is 0, so its ``elpd_i`` is ``-inf``
    (exact, ``pareto_k`` ``-inf``), ``elpd`` is ``-inf`` and ``se`` and ``p`` are NaN. NaN or
    ``+inf`` log-likelihoods are refused (ValueError naming ``data``)."""
    import arviz as az
    import xarray as xr

    tree = loo_tree(data) if isinstance(data, np.ndarray) else data
    try:
        log_lik = tree["log_likelihood"][_VAR]
    except KeyError as err:
        raise ValueError("data: no log_likelihood group with 'observed_labels'; fit a sampled "
                         "model with clamped labelled nodes, or give float[chains, draws, L]"
                         ) from err
    n_draws = int(log_lik.sizes["chain"] * log_lik.sizes["draw"])
    if n_draws < MIN_DRAWS:
        raise ValueError(f"data: PSIS-LOO needs at least {MIN_DRAWS} draws (chains x draws), "
                         f"got {n_draws}; record more draws (more iterations or chains)")
    values = log_lik.transpose(*_SAMPLE_DIMS, "labelled_node").values
    _check_log_likelihood_values(values, "data")
    impossible = np.any(values == -np.inf, axis=(0, 1))  # [L]: a draw gives probability 0
    if impossible.any():  # weights of the others; those nodes' answer is set below
        values = np.where(impossible[None, None], 0.0, values)
        log_lik = log_lik.transpose(*_SAMPLE_DIMS, "labelled_node").copy(data=values)
    r_eff = _relative_efficiency(values)
    log_weights, k = _smoothed_weights(log_lik, r_eff)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_ARVIZ_K_WARNING)
        warnings.filterwarnings("ignore", message="divide by zero")
        warnings.filterwarnings("ignore", message="invalid value")
        result = az.loo(tree, pointwise=True, var_name=_VAR, reff=r_eff,
                        log_weights=log_weights, pareto_k=k)
    if impossible.any():
        possible = xr.DataArray(~impossible, dims=("labelled_node",),
                                coords={"labelled_node": log_lik.coords["labelled_node"]})
        result.elpd_i = result.elpd_i.where(possible, -np.inf)
        result.elpd, result.se, result.p = -np.inf, np.nan, np.nan
    bad = np.asarray(result.pareto_k) > result.good_k
    if warn and bad.any():
        prefix = f"{source}: " if source else ""
        warn_user(
            f"{prefix}Pareto k > {result.good_k:.2f} (the threshold for {n_draws} draws, "
            f"min(1 - 1/log10 S, 0.7)) at {int(bad.sum())} of {bad.size} labelled nodes (max "
            f"k {max_pareto_k(result.pareto_k):.2f}): PSIS cannot trust their leave-one-out "
            "predictive, so elpd_loo and model weights lean towards this model. Fix: record "
            "more draws (more iterations or chains; for the mixture's grid, n_checkpoints or "
            "n_chains); if k stays above 0.7, those labels are highly influential: compare by "
            "K-fold refits instead.", ParetoKWarning)
    return result


def max_pareto_k(pareto_k) -> float:
    """Largest finite-or-inf Pareto k (NaN entries: fit failed, ignored); -inf if none."""
    k = np.asarray(pareto_k, np.float64)
    k = k[~np.isnan(k)]
    return float(k.max()) if k.size else -np.inf


def stacking_weights(results, method: str = "stacking") -> np.ndarray:
    """Model weights float[G] of ``az.compare`` over :func:`psis_loo` results (one per model,
    same labelled nodes), in the order given: ``"stacking"`` (Yao et al. 2018, the weights
    that maximise the leave-one-out log score of the mixed predictive) or
    ``"pseudo-BMA"`` / ``"BB-pseudo-BMA"``."""
    import arviz as az

    names = [f"model {g}" for g in range(len(results))]
    if len(names) == 1:
        return np.ones(1)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_ARVIZ_K_WARNING)
        table = az.compare(dict(zip(names, results, strict=True)), method=method,
                           round_to="none")
    weights = table.loc[names, "weight"].to_numpy(np.float64)
    return weights / weights.sum()
