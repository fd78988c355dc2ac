"""Permutation-invariant statistics of label draws, and the convergence rule applied to them.

Raw per-node labels are poor convergence diagnostics for label models: a clamped node never
changes (R-hat NaN, ESS = draws), and a move that permutes the class labels (Zhu & Ghahramani
Sec. 3.3; Walder's re-labelling) scrambles them between draws, so healthy chains show
R-hat >> 1 on label indicators. The statistics here do not change when the classes are
renamed, so their R-hat and ESS mean what they say:

- the energy ``-log p(y) + const`` of each draw (computed by the sampler);
- the class sizes sorted decreasingly, ``int[..., q]`` (``size_rank`` 0 = the largest class);
- the co-assignment ``[y_i = y_j]`` of a fixed set of node pairs (:func:`default_pairs`).

:func:`convergence_report` applies the rule every sampled fit uses: rank-normalised split
R-hat (Vehtari et al. 2021) at most ``rhat_max = 1.01`` and bulk ESS at least
``ess_min = 100`` for every statistic that moves (a statistic constant over all draws has no
R-hat and is skipped; when none moves, nothing is judged: ``moved`` is False, and
``check_convergence`` fails the report when a search found a lower energy).
Long traces are thinned to at most ``max_draws`` draws per chain first (cheap: R-hat of a
handful of scalars). Thinning is not conservative: the thinned estimates carry their own
Monte-Carlo error, and on autocorrelated AR(1) chains the thinned ESS came out above the
all-draws one on 33 of 40 seeds, and one R-hat of 1.0102 on all draws read 1.0098 thinned
(pass ``max_draws=None`` to judge every draw). ``graphssl.diagnostics.check_convergence``
turns a failed report into a :class:`ConvergenceWarning`; drivers that run until
convergence use the same report.
"""

from __future__ import annotations

import numbers
import warnings
from typing import NamedTuple

import numpy as np
from sklearn.exceptions import ConvergenceWarning as _SklearnConvergenceWarning

__all__ = [
    "ConvergenceWarning",
    "UNSETTLED_WARN_FRACTION",
    "UnsettledLabelsWarning",
    "ConvergenceReport",
    "DEFAULT_N_PAIRS",
    "default_pairs",
    "class_sizes",
    "coassignment",
    "invariant_statistics",
    "thin_draws",
    "rhat_ess",
    "convergence_report",
    "LabelStability",
    "chain_label_frequencies",
    "label_stability",
]

DEFAULT_N_PAIRS = 10
UNSETTLED_WARN_FRACTION = 0.05  # converged chains that leave more of the labels open: warned


class ConvergenceWarning(_SklearnConvergenceWarning):
    """Chains that do not agree (R-hat too high) or are too short (ESS too low).

    A subclass of :class:`sklearn.exceptions.ConvergenceWarning`, so filters on scikit-learn's
    warning catch it too."""


class UnsettledLabelsWarning(ConvergenceWarning):
    """Chains that pass R-hat and ESS but leave many labels within their Monte-Carlo error of
    a tie (more than ``UNSETTLED_WARN_FRACTION`` of the unlabelled nodes,
    :func:`label_stability`): the posterior is nearly flat there, and another seed may label
    those nodes otherwise. A :class:`ConvergenceWarning`, so its filters catch it too."""


def default_pairs(n_nodes: int, observed=None, n_pairs: int = DEFAULT_N_PAIRS,
                  seed: int = 0) -> np.ndarray:
    """The documented node pairs whose co-assignment is traced: ``int[P, 2]``, ``i < j``.

    ``n_pairs`` distinct pairs of distinct *unclamped* nodes (``observed[i]`` False; all nodes
    when ``observed`` is None), drawn uniformly by ``numpy.random.default_rng(seed)``, sorted
    row by row. Fewer when fewer exist (every pair when ``F (F - 1) / 2 <= n_pairs`` for
    ``F`` unclamped nodes; none when ``F < 2``). The same arguments give the same pairs.
    """
    if int(n_pairs) != n_pairs or n_pairs < 0:
        raise ValueError(f"n_pairs must be an integer >= 0, got {n_pairs!r}")
    free = np.arange(int(n_nodes))
    if observed is not None:
        observed = np.asarray(observed, dtype=bool)
        if observed.shape != (int(n_nodes),):
            raise ValueError(f"observed must have shape ({n_nodes},), got {observed.shape}")
        free = free[~observed]
    n_free = free.size
    if n_free < 2 or n_pairs == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if n_free * (n_free - 1) // 2 <= n_pairs:
        i, j = np.triu_indices(n_free, k=1)
        return np.stack([free[i], free[j]], axis=1).astype(np.int64)
    rng = np.random.default_rng(seed)
    chosen: set[tuple[int, int]] = set()
    while len(chosen) < n_pairs:
        a, b = rng.choice(n_free, size=2, replace=False)
        chosen.add((int(min(a, b)), int(max(a, b))))
    pairs = np.array(sorted(chosen), dtype=np.int64)
    return free[pairs]


def _labels_of(samples) -> np.ndarray:
    return np.asarray(samples.labels if hasattr(samples, "labels") else samples)


def class_sizes(labels, n_classes: int) -> np.ndarray:
    """Sizes of the classes of each draw, sorted decreasingly: ``int[..., q]`` for labels
    ``int[..., n]`` in ``0..q-1`` (permutation invariant)."""
    labels = _labels_of(labels)
    q = int(n_classes)
    flat = labels.reshape(-1, labels.shape[-1])
    if flat.size and (flat.min() < 0 or flat.max() >= q):
        raise ValueError(f"labels must lie in 0..{q - 1} (n_classes={q})")
    sizes = np.zeros((flat.shape[0], q), dtype=np.int64)
    rows = max(1, (1 << 22) // max(flat.shape[1], 1))  # blocks of ~4M labels: bounded memory
    for begin in range(0, flat.shape[0], rows):
        block = flat[begin:begin + rows].astype(np.int64)
        block += np.arange(block.shape[0], dtype=np.int64)[:, None] * q
        sizes[begin:begin + rows] = np.bincount(
            block.ravel(), minlength=block.shape[0] * q).reshape(-1, q)
    return -np.sort(-sizes, axis=-1).reshape(*labels.shape[:-1], q)


def coassignment(labels, pairs) -> np.ndarray:
    """``[y_i = y_j]`` of each draw for node ``pairs int[P, 2]``: ``int8[..., P]`` (0 / 1;
    invariant under label permutations)."""
    labels = _labels_of(labels)
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if pairs.size and (pairs.min() < 0 or pairs.max() >= labels.shape[-1]):
        raise ValueError(f"pairs must hold node indices in 0..{labels.shape[-1] - 1}")
    return (labels[..., pairs[:, 0]] == labels[..., pairs[:, 1]]).astype(np.int8)


def thin_draws(x, max_draws: int | None):
    """``x[:, ::step]`` with the smallest step leaving at most ``max_draws`` draws per chain
    (axis 1); ``x`` unchanged when ``max_draws`` is None or not exceeded."""
    x = np.asarray(x)
    if max_draws is not None and (isinstance(max_draws, bool) or int(max_draws) < 1):
        raise ValueError(f"max_draws: must be None or an integer >= 1, got {max_draws!r}")
    if max_draws is None or x.shape[1] <= max_draws:
        return x
    step = -(-x.shape[1] // int(max_draws))
    return x[:, ::step]


def invariant_statistics(labels, energy, n_classes: int, pairs) -> dict[str, np.ndarray]:
    """``{"energy": float[chains, draws], "class_sizes": int[chains, draws, q],
    "coassignment": int8[chains, draws, P]}`` of draws ``labels int[chains, draws, n]``."""
    labels = _labels_of(labels)
    energy = np.asarray(energy, dtype=np.float64)
    if energy.shape != labels.shape[:2]:
        raise ValueError(f"energy must have shape {labels.shape[:2]} (chains, draws), got "
                         f"{energy.shape}")
    return {"energy": energy, "class_sizes": class_sizes(labels, n_classes),
            "coassignment": coassignment(labels, pairs)}


def rhat_ess(x) -> tuple[np.ndarray, np.ndarray]:
    """Rank-normalised split R-hat and bulk ESS (ArviZ) of ``x [chains, draws, k]`` per
    column; NaN for a column that never changes (it cannot show disagreement)."""
    import arviz as az

    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 2:
        x = x[:, :, None]
    rhat = np.full(x.shape[2], np.nan)
    ess = np.full(x.shape[2], np.nan)
    flat = x.reshape(-1, x.shape[2])
    moves = np.all(np.isfinite(flat), axis=0) & (np.ptp(flat, axis=0) > 0)
    if moves.any() and x.shape[1] >= 4:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            sub = x[:, :, moves]
            rhat[moves] = np.asarray(az.rhat(sub, chain_axis=0, draw_axis=1), dtype=float)
            ess[moves] = np.asarray(az.ess(sub, chain_axis=0, draw_axis=1), dtype=float)
    return rhat, ess


class LabelStability(NamedTuple):
    """How much of a posterior-mean labelling the chains' Monte-Carlo error leaves open
    (:func:`label_stability`).

    Attributes:
      unsettled: ``bool[n]``, nodes whose top class leads the runner-up by at most ``z``
        between-chain standard errors (another seed or more draws may swap them).
      fraction: the unsettled share of the free nodes (NaN with one chain: no spread to
        measure).
      chains_disagree: the share of the free nodes whose own-chain posterior-mean labels are
        not the same in every chain.
      n_chains: chains compared; z: the multiple of the standard error.
    """

    unsettled: np.ndarray
    fraction: float
    chains_disagree: float
    n_chains: int
    z: float

    def sentence(self) -> str:
        """The clause a convergence warning appends (empty when nothing is unsettled)."""
        if not np.isfinite(self.fraction) or self.fraction <= 0:
            return ""
        return (f"; the chains leave {100 * self.fraction:.1f} % of the unlabelled nodes' "
                f"posterior-mean labels within {self.z:g} standard errors of a tie (their own "
                f"labels differ on {100 * self.chains_disagree:.1f} %): another random_state "
                "may change those labels (convergence_.stability.unsettled marks them)")

    def converged_advice(self) -> str:
        """The warning for converged chains that leave more than ``UNSETTLED_WARN_FRACTION``
        of the labels open (empty otherwise)."""
        if not np.isfinite(self.fraction) or self.fraction <= UNSETTLED_WARN_FRACTION:
            return ""
        return (f"the chains pass R-hat and ESS, but leave {100 * self.fraction:.1f} % of the "
                f"unlabelled nodes' labels within {self.z:g} Monte-Carlo standard errors of a "
                "tie (convergence_.stability.unsettled marks them): the posterior is nearly "
                "flat there, and another random_state may label them otherwise; more draws "
                "(n_samples) settle those that are not truly tied")


def chain_label_frequencies(labels, n_classes: int) -> np.ndarray:
    """``float[chains, n, C]``: each chain's label frequencies over its draws
    ``labels int[chains, draws, n]`` (the per-chain posterior marginals where no
    Rao-Blackwellised ones are kept)."""
    labels = _labels_of(labels)
    if labels.shape[1] == 0:
        raise ValueError("labels holds no draws; run the sampler with n_samples >= 1")
    return np.stack([(labels == c).mean(axis=1) for c in range(int(n_classes))], axis=-1)


def label_stability(per_chain_marginals, free=None, z: float = 2.0) -> LabelStability:
    """Which posterior-mean labels lie within the chains' Monte-Carlo error of a tie.

    ``per_chain_marginals``: ``float[K, n, C]``, each chain's estimate of the posterior
    class marginals (label frequencies or Rao-Blackwellised conditionals); their mean over
    chains is the estimator's labelling. For node i with top class ``a`` and runner-up ``b``
    of the mean, the per-chain leads ``d_k = p_k[i, a] - p_k[i, b]`` give the lead ``mean_k
    d_k`` and its standard error ``sd_k(d_k) / sqrt(K)`` (the chains as independent
    replicates, Gelman et al.'s between-chain view); the label is unsettled when the lead is
    at most ``z`` standard errors. Chains stuck in different modes (high R-hat) spread the
    ``d_k`` and unsettle the labels they disagree on; converged chains leave only the nodes
    that are truly near a tie. Meaningful where observed labels anchor the classes (a chain
    free to rename its classes has per-chain marginals in its own naming). ``free``:
    ``bool[n]``, the nodes counted (default all). Returns a :class:`LabelStability`.
    """
    p = np.asarray(per_chain_marginals, dtype=np.float64)
    if p.ndim != 3:
        raise ValueError(f"per_chain_marginals: expected float[chains, nodes, classes], got "
                         f"shape {p.shape}")
    n_chains, n, n_classes = p.shape
    free = np.ones(n, bool) if free is None else np.asarray(free, dtype=bool)
    if free.shape != (n,):
        raise ValueError(f"free: expected bool[{n}], got shape {free.shape}")
    if n_chains < 2 or n_classes < 2:
        return LabelStability(np.zeros(n, bool), float("nan") if n_chains < 2 else 0.0,
                              0.0, n_chains, float(z))
    mean = p.mean(axis=0)
    order = np.argsort(-mean, axis=1, kind="stable")
    rows = np.arange(n)
    lead = p[:, rows, order[:, 0]] - p[:, rows, order[:, 1]]  # [K, n]
    se = lead.std(axis=0, ddof=1) / np.sqrt(n_chains)
    # open: the lead within z standard errors, or an exact tie in every chain (lead and se
    # 0: a node whose neighbours are all clamped, one of each class, read as settled)
    mean_lead = lead.mean(axis=0)
    unsettled = ((se > 0) & (mean_lead <= z * se)) | ((se == 0) & (mean_lead == 0))
    own = p.argmax(axis=2)
    disagree = np.any(own != own[:1], axis=0)
    count = max(int(free.sum()), 1)
    return LabelStability(unsettled & free, float(np.sum(unsettled & free)) / count,
                          float(np.sum(disagree & free)) / count, n_chains, float(z))


class ConvergenceReport(NamedTuple):
    """What :func:`convergence_report` found.

    Attributes:
      converged: every moving statistic has R-hat <= ``rhat_max`` and ESS >= ``ess_min``
        (False when there are fewer than 4 draws per chain, or when no statistic moved in
        any chain: nothing can be judged).
      max_rhat, min_ess: the worst values over the moving statistics (NaN when none moves).
      rhat, ess: ``{name: float[k]}`` per statistic column (NaN where it never changes).
      failing: ``("energy: R-hat 1.08", "class_sizes[1]: ESS 40", ...)``, worst first.
      n_chains, n_draws: the draws judged (after thinning); rhat_max, ess_min: the rule.
      stability: the :class:`LabelStability` of the labelling (None where no per-chain
        marginals were judged); an unconverged report's advice says how many labels it
        leaves open.
      moved: False when no statistic moved in any chain: nothing could be judged (a
        posterior concentrated on one labelling, or chains that cannot leave their start);
        :func:`graphssl.diagnostics.check_convergence` fails such a report when a search
        found a lower energy than the chains' (:data:`FROZEN`).
    """

    converged: bool
    max_rhat: float
    min_ess: float
    rhat: dict
    ess: dict
    failing: tuple
    n_chains: int
    n_draws: int
    rhat_max: float
    ess_min: float
    stability: LabelStability | None = None
    moved: bool = True

    def advice(self) -> str:
        """One sentence naming the fix (empty when converged)."""
        if self.converged:
            return ""
        if self.n_draws < 4:
            return (f"only {self.n_draws} draws per chain: nothing to judge; sample at least "
                    "a few hundred draws per chain")
        found = "; ".join(self.failing[:4]) + (" ..." if len(self.failing) > 4 else "")
        fixes = ["more draws (n_samples / n_iterations)", "a longer burn_in"]
        if self.n_chains < 4:
            fixes.append("n_chains >= 4")
        return (f"chains not converged on the permutation-invariant statistics "
                f"(R-hat <= {self.rhat_max:g} and ESS >= {self.ess_min:g} wanted; {found}; "
                f"{self.n_chains} chains x {self.n_draws} draws): run {', '.join(fixes)}, or "
                "continue the chains (sample_more / run_until_converged where the estimator "
                "has them)" + ("" if self.stability is None else self.stability.sentence()))


FROZEN = ("no traced statistic moved in any chain (energy, class sizes and co-assignments "
          "constant over every draw), and a search found a labelling {gap:.3g} below the "
          "chains' energy: the chains are stuck in their start, not at a concentrated "
          "posterior; sample with swendsen_wang or from other starts")
"""The ``failing`` entry of a frozen report below whose energy a search found a state."""


def _moves(value) -> bool:
    """Whether some column of ``[chains, draws, ...]`` takes two values over its draws."""
    x = np.asarray(value, dtype=np.float64)
    x = x.reshape(x.shape[0], x.shape[1], -1)
    return bool(np.any(np.ptp(x, axis=(0, 1)) > 0))


def _rhat_text(trace, rhat: float) -> str:
    """``"R-hat 1.08"``, or what an unbounded R-hat means: every chain constant at its own
    value (no within-chain spread; rank-normalised R-hat then comes out near 1e16)."""
    if np.all(np.ptp(trace, axis=1) == 0):
        return f"each of the {trace.shape[0]} chains stuck at its own value (R-hat unbounded)"
    return f"R-hat {rhat:.3g}"


def _finite_at_least(value, least: float) -> bool:
    """A real number (not a bool), finite and ``>= least``."""
    return (isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)
            and bool(np.isfinite(value)) and value >= least)


def convergence_report(statistics: dict, *, rhat_max: float = 1.01, ess_min: float = 100.0,
                       max_draws: int | None = 2000,
                       column_names: dict | None = None) -> ConvergenceReport:
    """R-hat / ESS rule over ``statistics = {name: [chains, draws] or [chains, draws, k]}``
    (e.g. :func:`invariant_statistics`, plus any continuous parameters).

    A column constant over every draw is skipped (a report in which none moved says so:
    ``moved``); one holding NaN or inf fails, named. One
    chain never passes: R-hat compares chains, and without a second one it cannot be
    computed. Traces longer than ``max_draws`` per chain are thinned first
    (:func:`thin_draws`). ``column_names = {name: [str] * k}`` names the columns in
    ``failing`` (default their index, e.g. ``class_sizes[1]``).
    """
    if not _finite_at_least(rhat_max, 1.0):
        raise ValueError(f"rhat_max: a finite bound >= 1 (R-hat is at least about 1), got "
                         f"{rhat_max!r}")
    if not _finite_at_least(ess_min, 0.0):
        raise ValueError(f"ess_min: a finite number of effective draws >= 0, got {ess_min!r}")
    column_names = column_names or {}
    rhat, ess, failing = {}, {}, []
    n_chains = n_draws = 0
    for name, value in statistics.items():
        if np.ndim(value) < 2 or np.shape(value)[1] == 0:
            raise ValueError(f"{name}: expected [chains, draws, ...] with at least one draw, "
                             f"got shape {np.shape(value)}")
        x = thin_draws(value, max_draws)
        n_chains, n_draws = x.shape[0], x.shape[1]
        x = x.reshape(x.shape[0], x.shape[1], -1)
        r, e = rhat_ess(x)
        rhat[name], ess[name] = r, e
        for k in range(x.shape[2]):
            names = column_names.get(name)
            label = name if x.shape[2] == 1 and names is None else (
                f"{name}[{k if names is None else names[k]}]")
            bad = int(np.count_nonzero(~np.isfinite(x[:, :, k])))
            if bad:  # R-hat skips such a column as if it never moved: say what it holds
                failing.append((np.inf, f"{label}: {bad} NaN / inf values of "
                                        f"{x.shape[0] * x.shape[1]}"))
                continue
            if np.isfinite(r[k]) and r[k] > rhat_max:
                failing.append((r[k] - rhat_max, f"{label}: {_rhat_text(x[:, :, k], r[k])}"))
            if np.isfinite(e[k]) and e[k] < ess_min:
                failing.append(((ess_min - e[k]) / ess_min, f"{label}: ESS {e[k]:.0f}"))
    if statistics and n_chains < 2:  # ArviZ's R-hat is NaN on one chain: nothing judged
        failing.append((np.inf, f"R-hat needs at least 2 chains, got {n_chains}"))
    moved = not statistics or any(_moves(value) for value in statistics.values())
    finite_r = np.concatenate([v for v in rhat.values()] or [np.zeros(0)])
    finite_e = np.concatenate([v for v in ess.values()] or [np.zeros(0)])
    finite_r, finite_e = finite_r[np.isfinite(finite_r)], finite_e[np.isfinite(finite_e)]
    failing.sort(key=lambda item: -item[0])
    return ConvergenceReport(
        converged=bool(n_draws >= 4 and not failing),
        max_rhat=float(finite_r.max()) if finite_r.size else float("nan"),
        min_ess=float(finite_e.min()) if finite_e.size else float("nan"),
        rhat=rhat,
        ess=ess,
        failing=tuple(text for _, text in failing),
        n_chains=int(n_chains),
        n_draws=int(n_draws),
        rhat_max=float(rhat_max),
        ess_min=float(ess_min),
        moved=bool(moved),
    )
