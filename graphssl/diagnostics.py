"""Results of label samplers as ArviZ data, MAP vs posterior-mean reports, convergence, plots.

Raw per-node label indicators are poor convergence diagnostics for label models (DESIGN.md,
"Known facts"): a clamped node never changes (R-hat NaN, ESS = draws), and the global
label-permutation move (Zhu & Ghahramani Sec. 3.3) scrambles labels between draws, so healthy
chains show R-hat >> 1 on indicators. :func:`convergence_summary` therefore also reports
R-hat / ESS on permutation-invariant quantities: the energy, the co-assignment
``[y_i = y_j]`` of node pairs and the sorted class sizes ("cluster sizes").

Inputs are :class:`graphssl.inference.Samples` (``labels [chains, draws, n]``, ``energy``,
``stats``, ``map_labels``).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "to_arviz",
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


def to_arviz(samples, *, model=None, node_names=None, class_names=None):
    """ArviZ 1.x ``DataTree`` of a sampler run.

    Groups: ``posterior`` (``labels [chain, draw, node]``), ``sample_stats`` (``energy`` and
    every move statistic: acceptance, cluster counts, component rounds, ...),
    ``observed_data`` (``observed_labels`` of the clamped nodes, when ``model`` is given)
    and ``constant_data`` (``label_marginals [node, class]`` — the posterior mean of the
    one-hot labels — plus ``map_labels`` and ``posterior_mean_labels [node]``).
    """
    import arviz as az

    labels = np.asarray(samples.labels)
    n_chains, n_draws, n = labels.shape
    q = int(samples.n_classes)
    nodes = np.arange(n) if node_names is None else np.asarray(node_names)
    classes = np.arange(q) if class_names is None else np.asarray(class_names)
    if nodes.shape != (n,) or classes.shape != (q,):
        raise ValueError(f"node_names needs {n} entries and class_names {q}")
    marginals = _marginals(labels, q)
    stats = {"energy": np.asarray(samples.energy)}
    stats.update({k: np.asarray(v) for k, v in samples.stats.items()})
    data = {
        "posterior": {"labels": labels},
        "sample_stats": stats,
        "constant_data": {
            "label_marginals": marginals,
            "map_labels": np.asarray(samples.map_labels),
            "posterior_mean_labels": marginals.argmax(axis=1),
        },
    }
    coords = {"node": nodes, "class": classes}
    dims = {
        "labels": ["node"],
        "label_marginals": ["node", "class"],
        "map_labels": ["node"],
        "posterior_mean_labels": ["node"],
    }
    if model is not None:
        observed = np.asarray(model.observed, dtype=bool)
        data["observed_data"] = {"observed_labels": np.asarray(model.labels)[observed]}
        coords["observed_node"] = nodes[observed]
        dims["observed_labels"] = ["observed_node"]
    return az.from_dict(data, coords=coords, dims=dims)


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
    marginals = _marginals(np.asarray(samples.labels), int(samples.n_classes))
    mean_labels = marginals.argmax(axis=1)
    map_labels = np.asarray(samples.map_labels if map_labels is None else map_labels)
    n = mean_labels.size
    report = {
        "agreement": float(np.mean(map_labels == mean_labels)),
        "posterior_mean_confidence": float(marginals[np.arange(n), mean_labels].mean()),
        "map_confidence": float(marginals[np.arange(n), map_labels].mean()),
    }
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
    """``[y_i = y_j]`` per draw for node ``pairs int[P, 2]``: ``float[chains, draws, P]``.

    Invariant under label permutations, so its R-hat is meaningful with permutation moves.
    """
    labels = np.asarray(samples.labels if hasattr(samples, "labels") else samples)
    pairs = np.asarray(pairs, dtype=int).reshape(-1, 2)
    if pairs.size and (pairs.min() < 0 or pairs.max() >= labels.shape[-1]):
        raise ValueError(f"pairs must hold node indices in 0..{labels.shape[-1] - 1}")
    return (labels[..., pairs[:, 0]] == labels[..., pairs[:, 1]]).astype(float)


def class_sizes(samples, n_classes: int | None = None) -> np.ndarray:
    """Sizes of the label classes per draw, sorted decreasingly: ``[chains, draws, q]``
    (permutation invariant)."""
    labels = np.asarray(samples.labels if hasattr(samples, "labels") else samples)
    q = int(n_classes if n_classes is not None else samples.n_classes)
    sizes = np.stack([(labels == c).sum(axis=-1) for c in range(q)], axis=-1)
    return -np.sort(-sizes, axis=-1)


def _rhat_ess(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rank-normalised R-hat and bulk ESS of ``x [chains, draws, k]`` per column."""
    import arviz as az

    rhat = np.array([az.rhat(x[:, :, k]) for k in range(x.shape[2])], dtype=float)
    ess = np.array([az.ess(x[:, :, k]) for k in range(x.shape[2])], dtype=float)
    return rhat, ess


def convergence_summary(samples, *, pairs=None, n_pairs: int = 20, max_nodes: int = 50,
                        seed: int = 0) -> dict:
    """R-hat / ESS on energy, co-assignment of node pairs, sorted class sizes, and label
    indicators ``[y_i = argmax marginal]`` of up to ``max_nodes`` unclamped-looking nodes.

    ``pairs`` defaults to ``n_pairs`` random pairs. Returns ``{quantity: {"rhat": ...,
    "ess": ...}}`` with arrays (one entry per pair / class / node) and scalars for energy;
    nodes whose label never changes are skipped for the indicators (their R-hat is NaN).
    """
    labels = np.asarray(samples.labels)
    n_chains, n_draws, n = labels.shape
    if n_chains < 2 or n_draws < 4:
        raise ValueError("convergence diagnostics need n_chains >= 2 and >= 4 draws per chain")
    rng = np.random.default_rng(seed)
    if pairs is None:
        pairs = rng.integers(0, n, size=(n_pairs, 2))
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    energy = np.asarray(samples.energy, dtype=float)[:, :, None]
    out = {}
    for name, x in (("energy", energy), ("coassignment", coassignment(labels, pairs)),
                    ("class_sizes", class_sizes(labels, samples.n_classes).astype(float))):
        varies = x.reshape(-1, x.shape[2]).std(axis=0) > 0
        rhat, ess = _rhat_ess(x[:, :, varies]) if varies.any() else (np.array([]),) * 2
        out[name] = {"rhat": rhat, "ess": ess}
    out["energy"] = {k: float(v[0]) for k, v in out["energy"].items()}
    moving = np.flatnonzero(labels.reshape(-1, n).std(axis=0) > 0)
    nodes = moving[: max_nodes]
    mode = _marginals(labels, int(samples.n_classes)).argmax(axis=1)
    indicators = (labels[:, :, nodes] == mode[nodes]).astype(float)
    rhat, ess = _rhat_ess(indicators) if nodes.size else (np.array([]),) * 2
    out["label_indicators"] = {"rhat": rhat, "ess": ess, "nodes": nodes}
    return out


def plot_energy_trace(samples, ax=None):
    """Energy per retained draw, one line per chain."""
    import matplotlib.pyplot as plt

    ax = ax if ax is not None else plt.subplots(figsize=(6, 3))[1]
    energy = np.asarray(samples.energy)
    for c in range(energy.shape[0]):
        ax.plot(energy[c], lw=0.7, label=f"chain {c}")
    ax.set_xlabel("draw")
    ax.set_ylabel("energy")
    if energy.shape[0] <= 8:
        ax.legend(fontsize="small")
    return ax


def plot_rank(samples, quantity=None, ax=None, bins: int = 20):
    """Rank plot (Vehtari et al. 2021) of ``quantity [chains, draws]`` (default: energy):
    histogram of each chain's pooled ranks; flat bars = chains mixing over the same
    distribution."""
    import matplotlib.pyplot as plt
    from scipy.stats import rankdata

    x = np.asarray(samples.energy if quantity is None else quantity, dtype=float)
    ax = ax if ax is not None else plt.subplots(figsize=(6, 3))[1]
    ranks = rankdata(x.reshape(-1)).reshape(x.shape)
    edges = np.linspace(0, x.size, bins + 1)
    for c in range(x.shape[0]):
        counts, _ = np.histogram(ranks[c], bins=edges)
        ax.bar(np.arange(bins), counts, bottom=c * counts.max() * 1.2, width=1.0,
               alpha=0.8, edgecolor="white")
        ax.axhline(c * counts.max() * 1.2 + x.shape[1] / bins, color="k", lw=0.5, ls="--")
    ax.set_xlabel("rank bin")
    ax.set_yticks([])
    ax.set_ylabel("chains")
    return ax


def plot_marginal_confidence(X, marginals, *, observed=None, ax=None, cmap="tab10"):
    """Marginal-confidence map for 2-D data: colour = posterior-mean label, opacity and size =
    its marginal probability; clamped nodes (``observed``) drawn as black-edged stars."""
    import matplotlib.pyplot as plt

    X = np.asarray(X)
    p = np.asarray(marginals)
    if X.ndim != 2 or X.shape[1] != 2 or X.shape[0] != p.shape[0]:
        raise ValueError("X must be float[n, 2] matching marginals float[n, C]")
    ax = ax if ax is not None else plt.subplots(figsize=(4.5, 4))[1]
    label = p.argmax(axis=1)
    conf = p.max(axis=1)
    colors = plt.get_cmap(cmap)(label % 10)
    chance = 1.0 / p.shape[1]
    colors[:, 3] = 0.15 + 0.85 * np.clip((conf - chance) / (1.0 - chance), 0.0, 1.0)
    ax.scatter(X[:, 0], X[:, 1], c=colors, s=8 + 30 * conf, linewidths=0)
    if observed is not None:
        obs = np.asarray(observed, dtype=bool)
        ax.scatter(X[obs, 0], X[obs, 1], c=plt.get_cmap(cmap)(label[obs] % 10), marker="*",
                   s=120, edgecolors="k")
    ax.set_title("posterior-mean label (opacity = marginal probability)", fontsize="small")
    return ax
