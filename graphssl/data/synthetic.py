"""Synthetic data sets of the source papers (deterministic functions of ``seed``)."""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import pathlib
from collections.abc import Callable

import numpy as np

from graphssl.data.dataset import Dataset, _check_size, _class_counts, _dataset
from graphssl.data.splits import _rate_splits, random_split, random_splits


# ----------------------------------------------------------------- Bergamim & Breve (2022)
def two_moons(n: int = 1000, *, noise: float = 0.24, seed: int = 0) -> Dataset:
    """Two moons of Bergamim & Breve (2022), Sec. 5 and Fig. 1 (top left).

    Rebuilt from the authors' frozen copy (``ssl_nmf_two_moons.npz``): class 0 has
    ``x1 ~ U(0, 1)``, ``x2 = sin(pi x1) + eps``; class 1 has ``x1 ~ U(0.5, 1.5)``,
    ``x2 = -sin(pi (x1 - 0.5)) + eps``; ``eps ~ N(0, noise^2)`` (the copy's residual std is
    0.24). Each point picks its class with probability 1/2, as in the copy (491 / 509).
    """
    n = _check_size(n, "n", 2)
    rng = np.random.default_rng(seed)
    counts = _class_counts(rng, n, [1, 1])
    u0, u1 = rng.uniform(0.0, 1.0, counts[0]), rng.uniform(0.5, 1.5, counts[1])
    upper = np.column_stack([u0, np.sin(np.pi * u0) + noise * rng.standard_normal(counts[0])])
    lower = np.column_stack(
        [u1, -np.sin(np.pi * (u1 - 0.5)) + noise * rng.standard_normal(counts[1])]
    )
    X, y = np.vstack([upper, lower]), np.repeat([0, 1], counts)
    ds = _dataset(X, y, "two_moons", shuffle_rng=rng, description=two_moons.__doc__)
    return dataclasses.replace(ds, splits=_rate_splits(ds.y, seed))


def three_clusters(n: int = 900, *, seed: int = 0) -> Dataset:
    """Three clusters of Bergamim & Breve (2022), Sec. 5 and Fig. 1 (top right).

    Rebuilt from the authors' copy (``ssl_nmf_three_clusters.npz``): class 0 is uniform on
    the square ``[-0.5, 0.5]^2``; class 1 an upper half ring of radius ``2 + N(0, 0.2^2)``,
    angle ``U(0, pi)``; class 2 a lower half ring of radius ``3 + N(0, 0.1^2)``, angle
    ``U(pi, 2 pi)``. Classes drawn with probability 1/3 each (the copy: 295 / 295 / 310).
    """
    n = _check_size(n, "n", 3)
    rng = np.random.default_rng(seed)
    counts = _class_counts(rng, n, [1, 1, 1])
    square = rng.uniform(-0.5, 0.5, (counts[0], 2))

    def ring(m, radius, spread, lo):
        r = radius + spread * rng.standard_normal(m)
        theta = rng.uniform(lo, lo + np.pi, m)
        return np.column_stack([r * np.cos(theta), r * np.sin(theta)])

    X = np.vstack([square, ring(counts[1], 2.0, 0.2, 0.0), ring(counts[2], 3.0, 0.1, np.pi)])
    y = np.repeat([0, 1, 2], counts)
    ds = _dataset(X, y, "three_clusters", shuffle_rng=rng, description=three_clusters.__doc__)
    return dataclasses.replace(ds, splits=_rate_splits(ds.y, seed))


_FIVE_GAUSSIANS = (  # (proportion, mean, per-axis std), read off ssl_nmf_five_gaussians.npz
    (0.4, (1.0, 1.0), (0.7, 0.7)),
    (0.2, (-1.0, -1.0), (0.2, 0.3)),
    (0.2, (-1.0, 1.0), (0.2, 0.1)),
    (0.1, (1.0, -1.0), (0.1, 0.1)),
    (0.1, (1.0, -2.0), (0.1, 0.1)),
)


def five_gaussians(n: int = 1000, *, seed: int = 0) -> Dataset:
    """Five Gaussians of Bergamim & Breve (2022), Sec. 5 and Fig. 1 (bottom).

    Different locations, standard deviations and proportions (40/20/20/10/10 %), rebuilt
    from the authors' copy ``ssl_nmf_five_gaussians.npz`` (means (1,1), (-1,-1), (-1,1),
    (1,-1), (1,-2); per-axis stds (0.7,0.7), (0.2,0.3), (0.2,0.1), (0.1,0.1), (0.1,0.1)).
    """
    n = _check_size(n, "n", 5)
    rng = np.random.default_rng(seed)
    props = np.array([p for p, _, _ in _FIVE_GAUSSIANS])
    counts = np.floor(props * n).astype(int)
    counts[np.argsort(-(props * n - counts))[: n - counts.sum()]] += 1
    parts = [
        np.asarray(mu) + np.asarray(sd) * rng.standard_normal((c, 2))
        for c, (_, mu, sd) in zip(counts, _FIVE_GAUSSIANS, strict=True)
    ]
    y = np.repeat(np.arange(5), counts)
    ds = _dataset(np.vstack(parts), y, "five_gaussians", shuffle_rng=rng,
                  description=five_gaussians.__doc__)
    return dataclasses.replace(ds, splits=_rate_splits(ds.y, seed))


# ------------------------------------------------------------------ Zhu & Lafferty (2005)
def _spiral(rng, m, t0, t1, noise, scale):
    """Points uniform in arc length on ``(t cos t, t sin t)``, ``t in [t0, t1]``."""
    s = rng.uniform(0.0, 1.0, m)
    t = np.sqrt(t0**2 + s * (t1**2 - t0**2))  # arc length ~ t^2 / 2 for t >> 1
    pts = np.column_stack([t * np.cos(t), t * np.sin(t)]) + noise * rng.standard_normal((m, 2))
    return pts / scale, t


def swiss_roll(
    n_unlabeled: int = 766, n_unseen: int = 384, *, noise: float = 0.3, seed: int = 0
) -> Dataset:
    """Swiss roll with one positive and one negative label, Zhu & Lafferty (2005) Sec. 4.1.

    A 2-D spiral ``(t cos t, t sin t)``, ``t in [1.5 pi, 4.5 pi]``, sampled uniformly in arc
    length with Gaussian noise (std ``noise`` before scaling) and scaled by ``1 / (4.5 pi)``
    so that the paper's weights ``exp(-||xi - xj||^2 / 0.01)`` connect a point to its arm
    only (arms are 0.44 apart). Class = which half of the roll (by arc length) a point lies
    on; the two labelled points sit at the two ends (indices 0 and 1, split
    ``labeled_2``). ``X`` holds L + U = 2 + ``n_unlabeled`` points; the ``n_unseen`` test
    points for induction are ``extra['X_unseen']`` / ``extra['y_unseen']``.
    """
    n_unlabeled = _check_size(n_unlabeled, "n_unlabeled", 1)
    n_unseen = _check_size(n_unseen, "n_unseen", 0)
    rng = np.random.default_rng(seed)
    t0, t1, scale = 1.5 * np.pi, 4.5 * np.pi, 4.5 * np.pi
    t_mid = np.sqrt((t0**2 + t1**2) / 2.0)  # half of the arc length
    ends = np.array([[t0 * np.cos(t0), t0 * np.sin(t0)], [t1 * np.cos(t1), t1 * np.sin(t1)]])
    X_u, t_u = _spiral(rng, n_unlabeled, t0, t1, noise, scale)
    X_new, t_new = _spiral(rng, n_unseen, t0, t1, noise, scale)
    X = np.vstack([ends / scale, X_u])
    y = np.concatenate([[0, 1], (t_u > t_mid).astype(int)])
    return _dataset(
        X, y, "swiss_roll",
        splits={"labeled_2": np.array([[0, 1]])},
        extra={"X_unseen": X_new, "y_unseen": (t_new > t_mid).astype(np.int64)},
        description=swiss_roll.__doc__,
    )


@functools.cache
def _sklearn_digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's bundled 8x8 digits (1797 x 64, values 0..16) and their targets.

    Read straight from ``sklearn/datasets/data/digits.csv.gz`` when present (importing
    ``sklearn.datasets`` costs seconds), else through ``sklearn.datasets.load_digits``.
    """
    spec = importlib.util.find_spec("sklearn")
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = pathlib.Path(root) / "datasets" / "data" / "digits.csv.gz"
        if path.is_file():
            table = np.loadtxt(path, delimiter=",")
            return table[:, :-1], table[:, -1].astype(int)
    from sklearn.datasets import load_digits

    digits = load_digits()
    return digits.data, digits.target


def digits_1v2(n: int | None = None, *, seed: int = 0) -> Dataset:
    """Handwritten '1 vs 2', 8x8 pixels (64 features), Zhu & Lafferty (2005) Sec. 4.2.

    The paper's set (1600 + 600 images) is not public; this uses scikit-learn's 8x8 digits
    (UCI), the 182 ones and 177 twos, pixel values scaled to ``[0, 1]``. Class 0 = digit 1,
    class 1 = digit 2. ``n`` (optional) draws a stratified subset. Split ``labeled_10``:
    20 random stratified trials with l = 10, as in the paper.
    """
    data, target = _sklearn_digits()
    keep = np.isin(target, [1, 2])
    X, y = data[keep] / 16.0, (target[keep] == 2).astype(int)
    if n is not None:
        n = _check_size(n, "n", 2)
        if n > len(y):
            raise ValueError(f"n must be <= {len(y)} (the number of 1s and 2s), got {n}")
        idx = random_split(y, n_labeled=n, seed=seed)
        X, y = X[idx], y[idx]
    return _dataset(
        X, y, "digits_1v2", classes=np.array([1, 2]),
        splits={"labeled_10": random_splits(y, n_labeled=10, n_splits=20, seed=seed)},
        description=digits_1v2.__doc__,
    )


# ------------------------------------------------------------------ Blum & Chawla (2001)
def k_regions(
    n: int = 5050, *, n_regions: int = 8, delta: float = 0.05, n_labeled: int = 50, seed: int = 0
) -> Dataset:
    """The k-regions planes in 3-D, Blum & Chawla (2001) Sec. 5.2 (model of Sec. 4).

    ``n_regions`` unit squares in the (y, z) plane at x = 0, delta, ..., (k-1) delta; labels
    alternate (even planes class 0, odd planes class 1); points uniform on the union. The
    paper does not give delta; 0.05 makes the planes closer than the typical distance to a
    labelled point at 50 labels, the regime of its Fig. 2/3 (5000 unlabelled + 50 labelled
    = the default n). Split ``labeled_<n_labeled>``: 10 random stratified draws.
    """
    n = _check_size(n, "n", 2)
    n_regions = _check_size(n_regions, "n_regions", 2)
    if not delta > 0:
        raise ValueError(f"delta must be > 0 (the gap between planes), got {delta!r}")
    rng = np.random.default_rng(seed)
    region = rng.integers(0, n_regions, n)
    X = np.column_stack([delta * region, rng.uniform(0.0, 1.0, (n, 2))])
    y = region % 2
    splits = {}
    if n_labeled:
        splits[f"labeled_{n_labeled}"] = random_splits(
            y, n_labeled=n_labeled, n_splits=10, seed=seed
        )
    return _dataset(X, y, "k_regions", splits=splits, extra={"region": region},
                    description=k_regions.__doc__)


# ------------------------------------------------------------- Zhu & Ghahramani (2002)
def _arcs(n_per_arc, noise, seed):
    """Two stacked arcs (x_1..x_8 upper, x_9..x_16 lower), left ends x_1, x_9 0.6 apart."""
    theta = np.linspace(5 * np.pi / 6, np.pi / 6, n_per_arc)
    arc = np.column_stack([np.cos(theta), np.sin(theta)])
    X = np.vstack([arc, arc - [0.0, 0.6]])
    if noise:
        X = X + noise * np.random.default_rng(seed).standard_normal(X.shape)
    return X


def double_arcs(n_per_arc: int = 8, *, noise: float = 0.0, seed: int = 0) -> Dataset:
    """Double arcs, Zhu & Ghahramani (2002) Sec. 5.1, dataset 1 (Fig. 1, Table 1).

    Two parallel arcs of ``n_per_arc`` points (unit-circle arc between 30 and 150 degrees,
    the lower one shifted down by 0.6: the figure gives no coordinates). Point 0 = x_1 (upper
    arc, left end, class 0 'o') and point ``2 n_per_arc - 1`` = x_16 (lower arc, right end,
    class 1 '+') are labelled (split ``labeled_2``); x_8 is nearer x_16 than x_1 in Euclidean
    distance but belongs to the upper arc. Optional Gaussian jitter ``noise``.
    """
    n_per_arc = _check_size(n_per_arc, "n_per_arc", 2)
    X = _arcs(n_per_arc, noise, seed)
    y = np.repeat([0, 1], n_per_arc)
    return _dataset(
        X, y, "double_arcs", classes=np.array(["o", "+"]),
        splits={"labeled_2": np.array([[0, 2 * n_per_arc - 1]])},
        description=double_arcs.__doc__,
    )


def connected_arcs(n_per_arc: int = 8, *, noise: float = 0.0, seed: int = 0) -> Dataset:
    """Connected arcs, Zhu & Ghahramani (2002) Sec. 5.1, dataset 2 (Fig. 2, Table 2).

    :func:`double_arcs` plus one bridging point x_17 (the last index) halfway between x_1
    and x_9, the left ends of the two arcs. Its class is set to 'o' (class 0), the label the
    paper's Boltzmann machine gives it (P = 0.923).
    """
    base = double_arcs(n_per_arc, noise=noise, seed=seed)
    X = np.vstack([base.X, 0.5 * (base.X[0] + base.X[n_per_arc])])
    y = np.append(base.y, 0)
    return dataclasses.replace(base, X=X, y=y, name="connected_arcs",
                               description=connected_arcs.__doc__)


# x^1 of the 20 cube points, Table 3 of Zhu & Ghahramani (2002), in the table's order.
_CUBE_X1 = np.array([0.065, 0.097, 0.189, 0.280, 0.355, 0.397, 0.405, 0.425, 0.468, 0.546,
                     0.670, 0.729, 0.733, 0.736, 0.802, 0.817, 0.916, 0.956, 0.961, 0.970])
_CUBE_UNLABELED = (4, 6, 17, 18)  # the four blank o_i entries of Table 3


def cube_irrelevant(n: int = 20, *, seed: int = 0) -> Dataset:
    """Unit cube with two irrelevant dimensions, Zhu & Ghahramani (2002) Sec. 5.1, dataset 3.

    20 points in ``[0, 1]^3``; class 'o' (0) if ``x^1 < 0.5`` else '+' (1). ``x^1`` is the
    paper's Table 3 (all 20 values, in its order); ``x^2, x^3 ~ U(0, 1)`` from ``seed`` (not
    published). Split ``labeled_16``: every point except the table's four unlabelled ones
    (x^1 = 0.355, 0.405, 0.956, 0.961). ``n`` must be 20: the table fixes the points.
    """
    if n != len(_CUBE_X1):
        raise ValueError(f"n must be 20 for cube_irrelevant (Table 3 lists 20 points), got {n!r}")
    rng = np.random.default_rng(seed)
    X = np.column_stack([_CUBE_X1, rng.uniform(0.0, 1.0, (n, 2))])
    y = (_CUBE_X1 >= 0.5).astype(int)
    labeled = np.setdiff1d(np.arange(n), _CUBE_UNLABELED)
    return _dataset(X, y, "cube_irrelevant", classes=np.array(["o", "+"]),
                    splits={"labeled_16": labeled[None, :]},
                    description=cube_irrelevant.__doc__)


def noisy_label_clusters(n_per_cluster: int = 8, *, seed: int = 0) -> Dataset:
    """Two clusters with two flipped labels, Zhu & Ghahramani (2002) Sec. 5.1, dataset 4.

    A dense left cluster (class 'o' = 0; x spread 0.015 around 0.2) and a sparser right one
    (class '+' = 1; x spread 0.03 around 0.8), y spread 0.1 around 0.5; every point is
    labelled (split ``labeled_<2 n_per_cluster>``). ``extra['observed_labels']`` are the
    noisy observations o_i: x_1 (index 0, the centre of the dense cluster) is observed '+'
    and x_2 (index 1, the far right edge of the sparse cluster, x = 0.9) is observed 'o';
    ``y`` holds the true labels. Coordinates are not published; the scales suit the paper's
    alpha_1 = -6.9 (x length scale e^-6.9) and alpha_2 = 1.1.
    """
    m = _check_size(n_per_cluster, "n_per_cluster", 2)
    rng = np.random.default_rng(seed)
    def blob(x0, x_spread):
        return np.column_stack([x0 + x_spread * rng.standard_normal(m),
                                0.5 + 0.1 * rng.standard_normal(m)])

    left, right = blob(0.2, 0.015), blob(0.8, 0.03)
    left[0], right[0] = (0.2, 0.5), (0.9, 0.5)
    order = np.r_[0, m, 1:m, m + 1 : 2 * m]  # x_1, x_2 first
    X = np.vstack([left, right])[order]
    y = np.repeat([0, 1], m)[order]
    observed = y.copy()
    observed[[0, 1]] = 1 - observed[[0, 1]]
    return _dataset(X, y, "noisy_label_clusters", classes=np.array(["o", "+"]),
                    splits={f"labeled_{2 * m}": np.arange(2 * m)[None, :]},
                    extra={"observed_labels": observed},
                    description=noisy_label_clusters.__doc__)


GENERATORS: dict[str, Callable[..., Dataset]] = {
    "two_moons": two_moons,
    "three_clusters": three_clusters,
    "five_gaussians": five_gaussians,
    "swiss_roll": swiss_roll,
    "k_regions": k_regions,
    "double_arcs": double_arcs,
    "connected_arcs": connected_arcs,
    "cube_irrelevant": cube_irrelevant,
    "noisy_label_clusters": noisy_label_clusters,
    "digits_1v2": digits_1v2,
}

