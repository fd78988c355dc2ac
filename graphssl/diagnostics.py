"""Results of label samplers as ArviZ data, convergence checks, MAP vs posterior mean, plots.

Raw per-node label indicators are poor convergence diagnostics for label models: a clamped
node never changes (R-hat NaN, ESS = draws), and a label-permutation move (Zhu & Ghahramani
Sec. 3.3) scrambles labels between draws, so healthy chains show R-hat >> 1 on indicators.
What is judged instead are permutation-invariant statistics
(:mod:`graphssl.inference.mcmc.statistics`): the energy, the sorted class sizes and the
co-assignment ``[y_i = y_j]`` of a fixed, documented set of node pairs
(:func:`~graphssl.inference.mcmc.statistics.default_pairs`: 10 pairs of unlabelled nodes drawn
by ``numpy.random.default_rng(0)``). :func:`to_arviz` puts exactly these in the ``posterior``
group, so ``az.summary(idata)`` and ``az.plot_trace(idata)`` with their defaults show them;
:func:`check_convergence` applies the rule (R-hat <= 1.01, ESS >= 100) and warns with a
:class:`ConvergenceWarning` naming the fix.

Inputs are :class:`graphssl.inference.Samples` (``labels [chains, draws, n]``, ``energy``,
``stats``, ``map_labels``, ``n_classes``) or any record with those fields.

Model comparison: :func:`to_arviz` writes the pointwise log-likelihood of the labelled nodes
in the ``log_likelihood`` group, and :func:`psis_loo` (``az.loo`` with a
:class:`ParetoKWarning` naming the fix when Pareto k is high) reads it
(:mod:`graphssl.inference.loo`).
"""

from __future__ import annotations

import numpy as np

from graphssl._warnings import warn_user
from graphssl.inference.loo import ParetoKWarning, pairwise_log_likelihood, psis_loo
from graphssl.inference.mcmc.statistics import (
    DEFAULT_N_PAIRS,
    FROZEN,
    ConvergenceReport,
    ConvergenceWarning,
    UnsettledLabelsWarning,
    chain_label_frequencies,
    convergence_report,
    default_pairs,
    invariant_statistics,
    label_stability,
    rhat_ess,
    thin_draws,
)
from graphssl.inference.mcmc.statistics import class_sizes as _class_sizes
from graphssl.inference.mcmc.statistics import coassignment as _coassignment
from graphssl.validation import (
    check_label_codes,
    check_pairs,
    check_state_codes,
    is_whole,
)

__all__ = [
    "ConvergenceWarning",
    "UnsettledLabelsWarning",
    "ConvergenceReport",
    "ParetoKWarning",
    "to_arviz",
    "psis_loo",
    "pairwise_log_likelihood",
    "check_convergence",
    "label_stability",
    "default_pairs",
    "posterior_mean_labels",
    "map_vs_posterior_mean",
    "coassignment",
    "class_sizes",
    "convergence_summary",
    "plot_energy_trace",
    "plot_rank",
    "plot_marginal_confidence",
]


def _marginals(labels: np.ndarray, n_classes: int) -> np.ndarray:
    flat = labels.reshape(-1, labels.shape[-1])
    if flat.shape[0] == 0:
        raise ValueError("samples holds no draws; run the sampler with n_samples >= 1")
    return np.stack([(flat == c).mean(axis=0) for c in range(n_classes)], axis=1)


def _training_labels(n: int, model, observed_labels):
    """``int[n]`` training labels (-1 = unlabelled) from the argument, else the model's
    clamped nodes; None when neither says anything."""
    if observed_labels is not None:
        y = np.asarray(observed_labels)
        if y.shape != (n,) or not np.issubdtype(y.dtype, np.integer):
            raise ValueError(f"observed_labels must be int[{n}] with -1 for unlabelled nodes, "
                             f"got {y.dtype}{list(y.shape)}")
        return y.astype(np.int64)
    if model is not None and hasattr(model, "observed"):
        observed = np.asarray(model.observed, dtype=bool)
        return np.where(observed, np.asarray(model.labels), -1).astype(np.int64)
    return None


def _pairs(n: int, model, observed_labels, pairs, n_pairs: int) -> np.ndarray:
    """Explicit ``pairs``, or :func:`default_pairs` over the nodes without a training label."""
    if pairs is not None:
        return check_pairs(pairs, n)
    y = _training_labels(n, model, observed_labels)
    return default_pairs(n, None if y is None else y >= 0, n_pairs=n_pairs, seed=0)


# the posterior's own variables: an extra of one of these names replaced it silently
_RESERVED = ("energy", "class_sizes", "coassignment", "labels")


def _extras(extra_posterior, shape) -> dict:
    out = {}
    for name, value in (extra_posterior or {}).items():
        if name in _RESERVED:
            raise ValueError(f"extra_posterior: {name!r} is one of the posterior's own "
                             f"variables ({', '.join(_RESERVED)}); give it another name")
        value = np.asarray(value)
        if value.shape[:2] != shape:
            raise ValueError(f"extra_posterior[{name!r}] must have leading shape {shape} "
                             f"(chains, draws), got {value.shape}")
        out[name] = value
    return out


def to_arviz(samples, *, model=None, observed_labels=None, pairs=None,
             n_pairs: int = DEFAULT_N_PAIRS, extra_posterior=None, extra_dims=None,
             extra_coords=None, label_marginals=None, map_labels=None, node_names=None,
             class_names=None, log_likelihood=None, posterior_mean_labels=None):
    """ArviZ 1.x ``DataTree`` of a sampler run, laid out for ArviZ's defaults.

    Groups:
      ``posterior`` (what ``az.summary`` / ``az.plot_trace`` show; all permutation invariant):
        ``energy [chain, draw]`` (``-log p(y) + const``), ``class_sizes [chain, draw,
        size_rank]`` (sorted decreasingly: rank 0 = the largest class), ``coassignment
        [chain, draw, pair]`` (``[y_i = y_j]``, pair coordinate ``"i-j"``) and every entry
        of ``extra_posterior`` (a model's sampled continuous parameters or other invariant
        statistics, ``{name: array [chain, draw, ...]}``; dims by ``extra_dims = {name:
        [dim, ...]}``, coordinates by ``extra_coords``).
      ``posterior_labels``: ``labels [chain, draw, node]``, the raw per-node draws.
      ``sample_stats``: ``energy`` (also here, ArviZ's usual place for it) and every move
        statistic of the sampler (acceptance, cluster counts, component rounds, ...) except
        those named in ``extra_posterior`` (they move to the posterior).
      ``observed_data``: ``observed_labels [labelled_node]``, the training labels: from
        ``observed_labels`` (``int[n]``, -1 = unlabelled; give it when the labels enter
        through a field, ``clamp=False``), else the clamped nodes of ``model``.
      ``constant_data``: ``label_marginals [node, class]`` (posterior mean of the one-hot
        labels, or the ``label_marginals`` given, e.g. Rao-Blackwellised ones),
        ``posterior_mean_labels [node]`` (their argmax, or the ``posterior_mean_labels``
        given: an estimator's decided labels, e.g. after class-mass normalisation),
        ``map_labels [node]`` (the sampler's best state, or the ``map_labels`` given, e.g.
        refined by ICM; the estimators pass their ``map_labels_``),
        ``coassignment_pairs [pair, pair_end]`` (node indices of each traced pair) and
        ``clamped [node]`` when ``model`` is given.
      ``log_likelihood`` (what ``az.loo`` / :func:`psis_loo` read): ``observed_labels
        [chain, draw, labelled_node]``, the pointwise log-likelihood of each labelled node's
        observed label in each draw, ``log p(y_i | theta_draw, y_L without i)``. From the
        ``log_likelihood`` argument (float[chains, draws, L], nodes in the order of
        ``observed_data``; the diffusion mixture's estimator records its Eq. (7) predictive),
        else, for a pairwise model (Potts, Boltzmann MRF) whose labelled nodes are clamped,
        :func:`~graphssl.inference.loo.pairwise_log_likelihood`: the conditional of the
        node's label given its neighbours in the draw, with its clamp released. No group
        for labels held by a field (``clamp=False``: the labels are then a prior, not
        observed data) or with ``log_likelihood=False``.

    Labels are class codes ``0..C-1`` everywhere (``labels``, ``observed_labels``,
    ``map_labels``, ``posterior_mean_labels``): the index of the ``class`` coordinate, which
    ``class_names`` names (an estimator's ``to_arviz`` passes its ``classes_``, so code ``c``
    is ``classes_[c]``).

    ``pairs``: ``int[P, 2]`` node pairs; default :func:`default_pairs` with ``n_pairs`` pairs
    of nodes without a training label (seed 0), the same pairs :func:`check_convergence`
    judges.
    """
    import arviz as az

    labels = np.asarray(samples.labels)
    if labels.ndim != 3:
        raise ValueError(f"samples.labels must be [chains, draws, nodes], got {labels.shape}")
    n_chains, n_draws, n = labels.shape
    q = int(samples.n_classes)
    nodes = np.arange(n) if node_names is None else np.asarray(node_names)
    classes = np.arange(q) if class_names is None else np.asarray(class_names)
    if nodes.shape != (n,) or classes.shape != (q,):
        raise ValueError(f"node_names needs {n} entries and class_names {q}")
    for name, values in (("node_names", nodes), ("class_names", classes)):
        if np.unique(values).size != values.size:
            raise ValueError(f"{name}: the names must differ (they index the "
                             "DataTree's coordinates)")
    pairs = _pairs(n, model, observed_labels, pairs, n_pairs)
    stats = invariant_statistics(labels, samples.energy, q, pairs)
    posterior = {"energy": stats["energy"], "class_sizes": stats["class_sizes"]}
    if pairs.shape[0]:
        posterior["coassignment"] = stats["coassignment"]
    posterior |= _extras(extra_posterior, (n_chains, n_draws))
    marginals = _marginals(labels, q) if label_marginals is None else np.asarray(
        label_marginals, dtype=float)
    map_labels = np.asarray(samples.map_labels if map_labels is None else map_labels)
    decided = (marginals.argmax(axis=1) if posterior_mean_labels is None
               else np.asarray(posterior_mean_labels))
    if marginals.shape != (n, q) or map_labels.shape != (n,) or decided.shape != (n,):
        raise ValueError(f"label_marginals must be float[{n}, {q}], map_labels and "
                         f"posterior_mean_labels int[{n}], got {marginals.shape}, "
                         f"{map_labels.shape} and {decided.shape}")
    sample_stats = {"energy": stats["energy"]}
    sample_stats.update({k: np.asarray(v) for k, v in samples.stats.items()
                         if k not in posterior})
    constant = {
        "label_marginals": marginals,
        "posterior_mean_labels": decided,
        "map_labels": map_labels,
        "coassignment_pairs": pairs,
    }
    coords = {"node": nodes, "class": classes, "size_rank": np.arange(q),
              "pair": np.array(_pair_names(nodes[pairs] if pairs.size else pairs), dtype=str),
              "pair_end": np.array(["i", "j"])}
    dims = {"class_sizes": ["size_rank"], "coassignment": ["pair"], "labels": ["node"],
            "label_marginals": ["node", "class"], "posterior_mean_labels": ["node"],
            "map_labels": ["node"], "coassignment_pairs": ["pair", "pair_end"],
            "clamped": ["node"], "observed_labels": ["labelled_node"]}
    data = {"posterior": posterior, "posterior_labels": {"labels": labels},
            "sample_stats": sample_stats, "constant_data": constant}
    if model is not None and hasattr(model, "observed"):
        constant["clamped"] = np.asarray(model.observed, dtype=bool)
    y = _training_labels(n, model, observed_labels)
    if y is not None:
        data["observed_data"] = {"observed_labels": y[y >= 0]}
        coords["labelled_node"] = nodes[y >= 0]
    pointwise = _log_likelihood(labels, model, y, log_likelihood)
    if pointwise is not None:
        data["log_likelihood"] = {"observed_labels": pointwise}
    dims |= dict(extra_dims or {})
    coords |= dict(extra_coords or {})
    return az.from_dict(data, coords=coords, dims=dims)


def _log_likelihood(labels, model, y, given):
    """The ``log_likelihood`` group's array float[chains, draws, L] (:func:`to_arviz`), or
    None for no group."""
    if given is False:
        return None
    if given is True:
        raise ValueError("log_likelihood: an array float[chains, draws, labelled nodes], "
                         "None (the pairwise model's own, when it has one) or False (none)")
    if given is not None:
        ll = np.asarray(given, dtype=np.float64)
        n_labelled = None if y is None else int(np.sum(y >= 0))
        if n_labelled is None or ll.shape != labels.shape[:2] + (n_labelled,):
            raise ValueError(f"log_likelihood must be float[chains, draws, labelled nodes] = "
                             f"{list(labels.shape[:2]) + [n_labelled]} (give the training "
                             f"labels through model or observed_labels), got {list(ll.shape)}")
        return ll
    if model is None or not hasattr(model, "pairwise_tables") or y is None:
        return None
    clamped = np.asarray(model.observed, dtype=bool)
    if not clamped.any() or not np.array_equal(clamped, y >= 0):
        return None
    return pairwise_log_likelihood(labels, model)


def _pair_names(pairs) -> list[str]:
    return [f"{i}-{j}" for i, j in np.asarray(pairs)]


def _statistics_of(data, model, observed_labels, pairs, n_pairs, extra, max_draws):
    """Invariant statistics ``{name: [chains, draws, ...]}`` of samples or of a DataTree's
    posterior group, thinned to ``max_draws`` draws per chain, and their column names."""
    names = {}
    if hasattr(data, "labels") and hasattr(data, "energy"):
        labels = thin_draws(np.asarray(data.labels), max_draws)
        energy = thin_draws(np.asarray(data.energy), max_draws)
        n = labels.shape[-1]
        pairs = _pairs(n, model, observed_labels, pairs, n_pairs)
        out = invariant_statistics(labels, energy, int(data.n_classes), pairs)
        names["coassignment"] = _pair_names(pairs)
        if not pairs.shape[0]:
            del out["coassignment"]
    else:
        try:
            posterior = data["posterior"]
        except (KeyError, TypeError) as err:
            raise ValueError("check_convergence: give a Samples record (labels, energy, "
                             "n_classes) or a DataTree with a posterior group") from err
        out = {name: np.asarray(posterior[name]) for name in posterior.data_vars}
        if "coassignment" in out and "pair" in posterior["coassignment"].coords:
            names["coassignment"] = [str(p) for p in posterior["coassignment"].coords["pair"]]
    shape = np.shape(next(iter(out.values())))[:2] if out else None
    for name, value in (extra or {}).items():
        value = np.asarray(value)
        if value.shape[:2] != shape:
            raise ValueError(f"extra[{name!r}]: expected [chains, draws, ...] = {list(shape)} "
                             f"leading, like the samples, got shape {list(value.shape)}")
        out[name] = value
    out = {name: thin_draws(value, max_draws) for name, value in out.items()
           if np.issubdtype(value.dtype, np.number) or value.dtype == bool}
    return out, names


def check_convergence(data, *, model=None, observed_labels=None, pairs=None,
                      n_pairs: int = DEFAULT_N_PAIRS, extra=None, rhat_max: float = 1.01,
                      ess_min: float = 100.0, max_draws: int | None = 2000, warn: bool = True,
                      source: str | None = None,
                      label_marginals=None, lowest_energy=None) -> ConvergenceReport:
    """R-hat and ESS of the permutation-invariant statistics; warn when the chains fail.

    ``data``: a :class:`~graphssl.inference.Samples` record (energy, sorted class sizes and
    the co-assignment of ``pairs`` — default the pairs of :func:`to_arviz` — are computed
    from it, plus ``extra = {name: [chains, draws, ...]}``, e.g. sampled parameters) or a
    DataTree of :func:`to_arviz` (every variable of its ``posterior`` group is judged).
    Rule (:func:`~graphssl.inference.mcmc.statistics.convergence_report`): rank-normalised
    R-hat <= ``rhat_max`` and bulk ESS >= ``ess_min`` for every statistic that moves, on at
    most ``max_draws`` draws per chain (thinned). When it fails and ``warn``, a
    :class:`ConvergenceWarning` (a ``sklearn.exceptions.ConvergenceWarning``) names the
    failing statistics and the fix, prefixed by ``source`` (e.g. the estimator's name). When
    the chains pass but leave more than ``UNSETTLED_WARN_FRACTION`` (5 %) of the unlabelled
    nodes' labels within two standard errors of a tie (``stability`` below), an
    :class:`UnsettledLabelsWarning` says so. ``lowest_energy``: the energy of the best
    labelling a search found (a MAP search's); chains in which no statistic moved fail when
    it lies below their energy (:data:`~graphssl.inference.mcmc.statistics.FROZEN`).

    The report's ``stability``
    (:func:`~graphssl.inference.mcmc.statistics.label_stability`) says which posterior-mean
    labels of the unlabelled nodes lie within two between-chain standard errors of a tie,
    from ``label_marginals`` (``float[chains, n, C]``, e.g. Rao-Blackwellised per chain) or,
    for a Samples record, each chain's label frequencies; the warning gives their share.
    Returns the :class:`~graphssl.inference.mcmc.statistics.ConvergenceReport`.
    """
    statistics, names = _statistics_of(data, model, observed_labels, pairs, n_pairs, extra,
                                       max_draws)
    report = convergence_report(statistics, rhat_max=rhat_max, ess_min=ess_min,
                                max_draws=None, column_names=names)
    report = _judge_frozen(report, data, lowest_energy)
    stability = _label_stability_of(data, model, observed_labels, label_marginals, max_draws)
    if stability is not None:
        report = report._replace(stability=stability)
    prefix = f"{source}: " if source else ""
    if warn and not report.converged:
        warn_user(prefix + report.advice(), ConvergenceWarning)
    elif warn and report.stability is not None and report.stability.converged_advice():
        warn_user(prefix + report.stability.converged_advice(), UnsettledLabelsWarning)
    return report


def _judge_frozen(report, data, lowest_energy):
    """A report whose statistics never moved, failed when ``lowest_energy`` (a MAP search's)
    lies below the chains' constant energy: they are stuck, not at a concentrated posterior
    (frozen Gibbs chains sat 6.8 nats above the mode of a 12-node trap and read converged).
    Without a lower state the report stands (a posterior that sharp and chains that never
    left their start look alike; ``report.moved`` says nothing moved)."""
    if report.moved or lowest_energy is None or not hasattr(data, "energy"):
        return report
    chains = float(np.min(np.asarray(data.energy, dtype=np.float64)))
    gap = chains - float(lowest_energy)
    if not gap > 1e-9 * max(1.0, abs(chains)):
        return report
    return report._replace(converged=False, failing=(FROZEN.format(gap=gap),))


def _label_stability_of(data, model, observed_labels, label_marginals, max_draws):
    """:func:`label_stability` over the unlabelled nodes, from ``label_marginals`` or a
    Samples record's per-chain label frequencies; None when neither is there, or when no
    training label anchors the classes (each chain's marginals are then in its own naming)."""
    held = np.shape(data.labels)[-1] if hasattr(data, "labels") else None
    n = None if label_marginals is None else np.shape(label_marginals)[1]
    if n is not None and held is not None and n != held:
        raise ValueError(f"label_marginals: expected float[chains, {held}, C], one row per "
                         f"node of the samples, got shape {np.shape(label_marginals)}")
    n = n if n is not None else held
    y = None if n is None else _training_labels(n, model, observed_labels)
    if y is None or not np.any(y >= 0):
        return None
    if label_marginals is None and hasattr(data, "labels") and hasattr(data, "n_classes"):
        label_marginals = chain_label_frequencies(thin_draws(np.asarray(data.labels), max_draws),
                                                  int(data.n_classes))
    if label_marginals is None:
        return None
    return label_stability(label_marginals, free=y < 0)


def posterior_mean_labels(samples) -> np.ndarray:
    """Per-node mode of the posterior marginals (Walder's "posterior mean" labels)."""
    return _marginals(np.asarray(samples.labels), int(samples.n_classes)).argmax(axis=1)
def map_vs_posterior_mean(samples, *, model=None, true_labels=None, map_labels=None) -> dict:
    """Compare MAP labels (best state visited, or ``map_labels`` e.g. after ICM) with
    posterior-mean labels (Walder Sec. 5, Fig. 1: posterior mean vs starred m.a.p.).

    Returns a dict: ``agreement`` (fraction of nodes where they agree), ``map_energy`` and
    ``posterior_mean_energy`` (if ``model``), ``map_accuracy`` / ``posterior_mean_accuracy``
    on unclamped nodes with a true label >= 0 (if ``true_labels``), and the mean marginal
    confidence of each choice.
    """
    q = int(samples.n_classes)
    marginals = _marginals(np.asarray(samples.labels), q)
    mean_labels = marginals.argmax(axis=1)
    n = mean_labels.size
    map_labels = np.asarray(samples.map_labels if map_labels is None else map_labels)
    check_state_codes(map_labels, n, q, "map_labels", "class")
    if true_labels is not None:
        check_label_codes(true_labels, n, name="true_labels", against="the samples have {n} "
                          "nodes")
    report = {
        "agreement": float(np.mean(map_labels == mean_labels)),
        "posterior_mean_confidence": float(marginals[np.arange(n), mean_labels].mean()),
        "map_confidence": float(marginals[np.arange(n), map_labels].mean()),
    }
    if model is not None and not hasattr(model, "pairwise_tables"):
        raise ValueError(f"model: the energy of a labelling alone needs a pairwise label model "
                         f"(Potts, Boltzmann MRF); a {type(model).__name__}'s energy needs its "
                         "whole state (the diffusion mixture's centres too): pass model=None, "
                         "or compare its map_search_ energies")
    if model is not None:
        import jax.numpy as jnp

        report["map_energy"] = float(model.energy(jnp.asarray(map_labels, jnp.int32)))
        report["posterior_mean_energy"] = float(model.energy(jnp.asarray(mean_labels, jnp.int32)))
    if true_labels is not None:
        truth = np.asarray(true_labels)
        mask = truth >= 0
        if model is not None:
            mask &= ~np.asarray(model.observed, dtype=bool)
        if not mask.any():
            raise ValueError("true_labels has no labelled unclamped node to score")
        report["map_accuracy"] = float(np.mean(map_labels[mask] == truth[mask]))
        report["posterior_mean_accuracy"] = float(np.mean(mean_labels[mask] == truth[mask]))
    return report


def coassignment(samples, pairs) -> np.ndarray:
    """``[y_i = y_j]`` per draw for node ``pairs int[P, 2]``: ``int8[chains, draws, P]``
    (0 / 1; invariant under label permutations, so its R-hat is meaningful with permutation
    moves). ``samples``: a record with ``labels`` or a label array ``[..., n]``."""
    return _coassignment(samples, pairs)


def class_sizes(samples, n_classes: int | None = None) -> np.ndarray:
    """Sizes of the label classes per draw, sorted decreasingly: ``[chains, draws, q]``
    (permutation invariant); ``n_classes`` defaults to ``samples.n_classes``."""
    q = n_classes if n_classes is not None else getattr(samples, "n_classes", None)
    if q is None:
        raise ValueError("n_classes is required when samples is a plain label array")
    return _class_sizes(samples, int(q))


def convergence_summary(samples, *, pairs=None, n_pairs: int = 20, max_nodes: int = 50,
                        seed: int = 0) -> dict:
    """R-hat / ESS on energy, co-assignment of node pairs, sorted class sizes, and label
    indicators ``[y_i = argmax marginal]`` of up to ``max_nodes`` nodes that move.

    ``pairs`` defaults to :func:`default_pairs` ``(n, n_pairs=n_pairs, seed=seed)`` over all
    nodes. Returns ``{quantity: {"rhat": ..., "ess": ...}}`` with arrays (one entry per
    moving pair / class / node; constant ones are dropped) and scalars for energy. For the
    pass / fail rule with a warning, use :func:`check_convergence`.
    """
    labels = np.asarray(samples.labels)
    n_chains, n_draws, n = labels.shape
    if n_chains < 2 or n_draws < 4:
        raise ValueError("convergence diagnostics need n_chains >= 2 and >= 4 draws per chain")
    pairs = (default_pairs(n, None, n_pairs=n_pairs, seed=seed) if pairs is None
             else check_pairs(pairs, n))
    stats = invariant_statistics(labels, samples.energy, int(samples.n_classes), pairs)
    out = {}
    for name in ("energy", "coassignment", "class_sizes"):
        if stats[name].size == 0:  # no pairs asked for
            out[name] = {"rhat": np.zeros(0), "ess": np.zeros(0)}
            continue
        rhat, ess = rhat_ess(stats[name].reshape(n_chains, n_draws, -1))
        keep = np.isfinite(rhat)
        out[name] = {"rhat": rhat[keep], "ess": ess[keep]}
    e_rhat, e_ess = out["energy"]["rhat"], out["energy"]["ess"]
    out["energy"] = {"rhat": float(e_rhat[0]) if e_rhat.size else float("nan"),
                     "ess": float(e_ess[0]) if e_ess.size else float("nan")}
    moving = np.flatnonzero(labels.reshape(-1, n).std(axis=0) > 0)
    nodes = moving[:max_nodes]
    mode = _marginals(labels, int(samples.n_classes)).argmax(axis=1)
    indicators = (labels[:, :, nodes] == mode[nodes]).astype(float)
    rhat, ess = rhat_ess(indicators) if nodes.size else (np.array([]),) * 2
    out["label_indicators"] = {"rhat": rhat, "ess": ess, "nodes": nodes}
    return out


def plot_energy_trace(samples, ax=None):
    """Energy per retained draw, one line per chain (legend: chains)."""
    import matplotlib.pyplot as plt

    ax = ax if ax is not None else plt.subplots(figsize=(6, 3))[1]
    energy = np.asarray(samples.energy)
    for c in range(energy.shape[0]):
        ax.plot(energy[c], lw=0.7, label=f"chain {c}")
    ax.set_xlabel("retained draw")
    ax.set_ylabel("energy  (-log p + const)")
    ax.set_title("energy trace", fontsize="small")
    ax.legend(fontsize="small", ncol=max(1, energy.shape[0] // 8))
    return ax


def plot_rank(samples, quantity=None, ax=None, bins: int = 20, name: str = "energy"):
    """Rank plot (Vehtari et al. 2021) of ``quantity [chains, draws]`` (default: the energy):
    histogram of each chain's pooled ranks, stacked per chain; bars level with the dashed
    line (the uniform count) = chains mixing over the same distribution."""
    import matplotlib.pyplot as plt
    from scipy.stats import rankdata

    if not is_whole(bins, 1):
        raise ValueError(f"bins: a whole number of rank bins >= 1, got {bins!r}")
    x = np.asarray(samples.energy if quantity is None else quantity, dtype=float)
    if x.ndim != 2 or x.size == 0:
        raise ValueError(f"quantity: expected float[chains, draws] with at least one draw, "
                         f"got shape {x.shape}")
    if bins > x.shape[1]:  # 10^6 bins over 200 draws took minutes and gigabytes
        raise ValueError(f"bins: at most the draws per chain ({x.shape[1]}), got {bins}")
    ax = ax if ax is not None else plt.subplots(figsize=(6, 3))[1]
    ranks = rankdata(x.reshape(-1)).reshape(x.shape)
    edges = np.linspace(0, x.size, bins + 1)
    counts = np.stack([np.histogram(ranks[c], bins=edges)[0] for c in range(x.shape[0])])
    offset = max(counts.max(), 1) * 1.2
    for c in range(x.shape[0]):
        ax.bar(np.arange(bins), counts[c], bottom=c * offset, width=1.0, alpha=0.8,
               edgecolor="white", label=f"chain {c}")
        ax.axhline(c * offset + x.shape[1] / bins, color="k", lw=0.5, ls="--",
                   label="uniform" if c == 0 else None)
    ax.set_xlabel(f"rank bin of {name} (pooled over chains)")
    ax.set_yticks([c * offset for c in range(x.shape[0])], [str(c) for c in range(x.shape[0])])
    ax.set_ylabel("chain")
    ax.legend(fontsize="small", loc="upper right", ncol=max(1, (x.shape[0] + 1) // 8))
    return ax


def _observed_mask(observed, n: int) -> np.ndarray:
    """``bool[n]`` from a mask or from node indices; a label vector (``-1`` for unlabelled)
    is refused: cast to bool it marks every unlabelled node and no node of class 0."""
    observed = np.asarray(observed)
    if observed.dtype == bool:
        if observed.shape != (n,):
            raise ValueError(f"observed: a bool[{n}] mask, got shape {observed.shape}")
        return observed
    if (observed.ndim != 1 or observed.dtype.kind not in "iu"
            or (observed.size and (observed.min() < 0 or observed.max() >= n))):
        raise ValueError(f"observed: a bool[{n}] mask or the labelled nodes' indices in "
                         f"0..{n - 1}; for a label vector with -1 for unlabelled pass "
                         "labels >= 0")
    mask = np.zeros(n, dtype=bool)
    mask[observed] = True
    return mask


def plot_marginal_confidence(X, marginals, *, observed=None, ax=None, cmap="tab10",
                             class_names=None):
    """Marginal-confidence map for 2-D data: colour = posterior-mean label, opacity and size =
    its marginal probability; labelled nodes (``observed``: a ``bool[n]`` mask or their
    indices) drawn as black-edged stars. Legend: one entry per class (``class_names``, one
    per column of ``marginals``; default the class index) and the stars."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    X = np.asarray(X)
    p = np.asarray(marginals)
    if X.ndim != 2 or X.shape[1] != 2 or X.shape[0] != p.shape[0]:
        raise ValueError("X must be float[n, 2] matching marginals float[n, C]")
    names = np.arange(p.shape[1]) if class_names is None else np.asarray(class_names)
    if names.shape != (p.shape[1],):
        raise ValueError(f"class_names: one name per column of marginals ({p.shape[1]}), got "
                         f"{names.shape[0] if names.ndim else 'a scalar'}")
    obs = None if observed is None else _observed_mask(observed, X.shape[0])
    ax = ax if ax is not None else plt.subplots(figsize=(4.5, 4))[1]
    label = p.argmax(axis=1)
    conf = p.max(axis=1)
    palette = plt.get_cmap(cmap)
    colors = palette(label % 10)
    chance = 1.0 / p.shape[1]
    colors[:, 3] = 0.15 + 0.85 * np.clip((conf - chance) / (1.0 - chance), 0.0, 1.0)
    ax.scatter(X[:, 0], X[:, 1], c=colors, s=8 + 30 * conf, linewidths=0)
    handles = [Line2D([], [], ls="", marker="o", color=palette(c % 10), label=f"class {names[c]}")
               for c in np.unique(label)]
    if obs is not None:
        ax.scatter(X[obs, 0], X[obs, 1], c=palette(label[obs] % 10), marker="*",
                   s=120, edgecolors="k")
        handles.append(Line2D([], [], ls="", marker="*", markersize=10, color="w",
                              markeredgecolor="k", label="labelled"))
    ax.set_xlabel("feature 0")
    ax.set_ylabel("feature 1")
    ax.legend(handles=handles, fontsize="small", loc="best")
    ax.set_title("posterior-mean label (opacity = marginal probability)", fontsize="small")
    return ax
