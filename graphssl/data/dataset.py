"""The :class:`Dataset` record shared by the generators and loaders of :mod:`graphssl.data`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
import scipy.sparse as sp

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


def _check_size(n, name, minimum):
    if not isinstance(n, int | np.integer) or n < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {n!r}")
    return int(n)


def _class_counts(rng, n, proportions):
    return rng.multinomial(n, np.asarray(proportions, dtype=float) / np.sum(proportions))

