"""Labelled-index splits: random (every class present), shipped fixed splits, masks."""

from __future__ import annotations

import numpy as np

from graphssl.data.dataset import LABEL_RATES, Dataset, _check_size


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
