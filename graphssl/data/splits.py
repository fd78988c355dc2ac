"""Labelled-index splits: random (every class present), shipped fixed splits, masks."""

from __future__ import annotations

import numpy as np

from graphssl.data.dataset import LABEL_RATES, Dataset, _check_size
from graphssl.validation import check_count, check_real, is_whole


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


def _n_labeled(n: int, label_rate, n_labeled, name: str | None) -> int:
    """The label count ``L`` from exactly one of ``label_rate`` / ``n_labeled`` (``0`` is
    possible for a small rate: :func:`_too_few` words that); errors call the argument
    ``name`` when given."""
    if (label_rate is None) == (n_labeled is None):
        raise ValueError("give exactly one of label_rate (fraction in (0, 1]) or n_labeled (count)")
    if label_rate is not None:
        rate = check_real(label_rate, name or "label_rate", low=0.0, high=1.0, low_open=True)
        return int(np.floor(rate * n + 1e-9))
    return check_count(n_labeled, name or "n_labeled", least=1, most=n)


def _rate_at_least(count: int, n: int) -> str:
    """The smallest rate (two significant digits, rounded up) with ``floor(rate * n) >= count``."""
    rate = count / n
    digits = max(1, 1 - int(np.floor(np.log10(rate))))
    return f"{np.ceil(rate * 10**digits - 1e-9) / 10**digits:g}"


def _too_few(n: int, n_lab: int, need: int, label_rate, name: str | None) -> ValueError:
    """The error for fewer labels than classes, in the terms of the argument the caller gave."""
    if label_rate is not None:
        name = name or "label_rate"
        return ValueError(
            f"{name}={label_rate:g} of {n} points gives {n_lab} labelled point(s), below the "
            f"number of classes ({need}); raise {name} to at least {_rate_at_least(need, n)} "
            "so that every class can be present"
        )
    return ValueError(f"{name or 'n_labeled'} = {n_lab} is below the number of classes "
                      f"({need}); raise it to at least {need} so that every class can be present")


def _allocate(counts: np.ndarray, n_labeled: int) -> np.ndarray:
    """Per-class quotas nearest to ``n_labeled * counts / n``, at least one per class
    (``n_labeled`` is at least the number of classes present)."""
    present = counts > 0
    share = n_labeled * counts / counts.sum()
    quota = np.where(present, np.minimum(np.maximum(1, np.floor(share)), counts), 0).astype(int)
    while quota.sum() > n_labeled:  # the "at least one" floor overshot: trim the most over
        quota[np.argmax(np.where(quota > 1, quota - share, -np.inf))] -= 1
    while quota.sum() < n_labeled:  # hand out the rest, most under-served class first
        quota[np.argmax(np.where(quota < counts, share - quota, -np.inf))] += 1
    return quota


_SEEDS = ("None, a non-negative int, a sequence of them, a numpy.random.SeedSequence or a "
          "numpy.random.Generator")


def _rng(seed) -> np.random.Generator:
    """``numpy.random.default_rng(seed)``; a ``ValueError`` naming ``seed`` otherwise."""
    try:
        return np.random.default_rng(seed)
    except (TypeError, ValueError) as error:
        raise ValueError(f"seed: use {_SEEDS}; got {seed!r} ({error})") from None


def random_split(
    y, label_rate=None, *, n_labeled=None, seed=0, stratify: bool = True, name: str | None = None
) -> np.ndarray:
    """Random labelled indices (sorted ``int64[L]``) with every class present.

    ``L = floor(label_rate * n)`` or ``n_labeled``. ``stratify=True`` draws per class in
    proportion to its size (at least one each); ``stratify=False`` draws uniformly and
    redraws until every class is present (ValueError after 1000 tries).
    ``seed`` is anything ``numpy.random.default_rng`` accepts. ``name``: what errors call
    the label-count argument (default ``"label_rate"`` or ``"n_labeled"``, whichever was
    given; a command line passes its option, e.g. ``"--label-rate"``).
    """
    y = _check_y(y)
    n_lab = _n_labeled(len(y), label_rate, n_labeled, name)
    counts = np.bincount(y)
    need = np.count_nonzero(counts)
    if n_lab < need:
        raise _too_few(len(y), n_lab, need, label_rate, name)
    rng = _rng(seed)
    if stratify:
        quota = _allocate(counts, n_lab)
        picked = [rng.choice(np.flatnonzero(y == c), q, replace=False)
                  for c, q in enumerate(quota) if q]
        return np.sort(np.concatenate(picked)).astype(np.int64)
    for _ in range(1000):
        idx = rng.choice(len(y), n_lab, replace=False)
        if np.unique(y[idx]).size == need:
            return np.sort(idx).astype(np.int64)
    raise ValueError("could not draw a split with every class present in 1000 tries; "
                     "use stratify=True or more labels")


def _split_seeds(seed, n_splits: int) -> list:
    """One seed per split. An int or a sequence of ints gives ``[*seed, i]`` (the same splits
    every call); ``None`` (fresh entropy), a ``SeedSequence`` or a ``Generator`` (entropy
    drawn from it, so it advances) give the children of one ``SeedSequence``."""
    if seed is None or isinstance(seed, np.random.SeedSequence):
        return (seed if seed is not None else np.random.SeedSequence()).spawn(n_splits)
    if isinstance(seed, np.random.Generator | np.random.BitGenerator):
        entropy = np.random.default_rng(seed).integers(0, 2**32, size=4)
        return np.random.SeedSequence(entropy.tolist()).spawn(n_splits)
    base = (seed.ravel().tolist() if isinstance(seed, np.ndarray)
            else list(seed) if isinstance(seed, tuple | list) else [seed])
    _rng(seed)  # refuse a negative or non-integer seed before drawing
    return [[*base, i] for i in range(n_splits)]


def random_splits(y, label_rate=None, *, n_labeled=None, n_splits: int = 10, seed=0,
                  stratify: bool = True, name: str | None = None) -> np.ndarray:
    """``n_splits`` independent :func:`random_split` draws, ``int64[n_splits, L]``.

    ``seed``: an int or a sequence of ints seeds split ``i`` with ``[*seed, i]`` (the same
    splits every call); ``None`` (fresh entropy), a ``numpy.random.SeedSequence`` or a
    ``numpy.random.Generator`` (which advances) seed them with the children of one
    ``SeedSequence`` (``spawn``). ``name`` as in :func:`random_split`.
    """
    n_splits = _check_size(n_splits, "n_splits", 1)
    return np.stack([
        random_split(y, label_rate, n_labeled=n_labeled, seed=child, stratify=stratify,
                     name=name)
        for child in _split_seeds(seed, n_splits)
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


def _labeled_row(labeled_idx, n: int) -> np.ndarray:
    """One split row: a 1-D integer array in ``0..n-1`` (an empty list is no point); a
    boolean mask, fractional or out-of-range indices are a ``ValueError`` naming
    ``labeled_idx``, never wrapped, truncated or read as the indices 0 and 1."""
    idx = np.asarray(labeled_idx)
    if idx.ndim == 1 and idx.size == 0:
        return idx.astype(np.int64)
    if idx.dtype == bool:
        raise ValueError("labeled_idx must be a 1-D integer array (one split row), got a "
                         "boolean mask; pass numpy.flatnonzero(mask)")
    if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer):
        raise ValueError("labeled_idx must be a 1-D integer array (one split row), got shape "
                         f"{idx.shape} of dtype {idx.dtype}")
    if idx.min() < 0 or idx.max() >= n:
        raise ValueError(f"labeled_idx must lie in [0, {n}); got values "
                         f"{idx.min()}..{idx.max()}")
    return idx.astype(np.int64)


def mask_labels(y, labeled_idx) -> np.ndarray:
    """Copy of ``y`` with ``-1`` everywhere except at ``labeled_idx`` (estimator input)."""
    y = np.asarray(y)
    idx = _labeled_row(labeled_idx, len(y))
    out = np.full(len(y), -1, dtype=np.int64)
    out[idx] = y[idx]
    return out


def subsample(dataset: Dataset, n: int, *, seed=0, stratify: bool = True) -> Dataset:
    """A random ``n``-point subset of ``dataset`` (class proportions kept, every class present).

    E.g. Walder's parameter study: 100 points of Digit1, 20 repeats. The shipped splits refer
    to the full set and are dropped; ``extra['subset_idx']`` holds the chosen rows (sorted).
    """
    idx = random_split(dataset.y, n_labeled=n, seed=seed, stratify=stratify, name="n")
    X = dataset.X[idx]
    sparse = None if dataset.sparse is None else dataset.sparse[idx]
    return Dataset(X=X, y=dataset.y[idx], name=f"{dataset.name}[{n}]", classes=dataset.classes,
                   sparse=sparse, extra={"subset_idx": idx},
                   description=f"{n}-point subset of {dataset.name} (seed {seed})")


def unlabeled_indices(n: int, labeled_idx) -> np.ndarray:
    """The complement of ``labeled_idx`` in ``0..n-1`` (sorted); ``labeled_idx`` is checked
    as in :func:`mask_labels`."""
    if not is_whole(n, 0):
        raise ValueError(f"n must be a non-negative integer (the number of points), got {n!r}")
    mask = np.ones(int(n), dtype=bool)
    mask[_labeled_row(labeled_idx, int(n))] = False
    return np.flatnonzero(mask)
