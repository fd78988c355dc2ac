"""ID3 decision tree (Quinlan 1986), the tree baseline of Blum & Chawla (2001), Table 1.

Grown top-down on the labelled data: at each node the attribute of largest *information gain*

    gain(S, a) = H(S) - sum_v |S_v| / |S| H(S_v),    H(S) = -sum_c p_c log2 p_c,

is split on. A categorical attribute splits multiway, one child per value seen at the node,
and is not used again below it; a numeric attribute splits in two at the threshold
``x <= t`` of largest gain (``t`` midway between consecutive distinct values, as C4.5 does
for continuous attributes) and may be split again further down. Growth stops when the node is
pure, when no attribute separates its examples, or (optionally) when the best gain is not
above ``min_gain``; there is no pruning (ID3). With ``window`` set, the tree is grown by
Quinlan's *windowing*: first on a random fraction ``window`` of the examples, then again after
adding every training example the current tree misclassifies, until it classifies all of them
(or ``max_windows`` rounds, or no new exception). A leaf predicts its majority class (ties: the
parent's majority, then the smallest class); a categorical value never seen at a node is
predicted with that node's majority class.

Symbols -> arguments: S -> the examples reaching a node; a -> a column of ``X``; the set of
categorical attributes -> ``categorical`` (bool mask, index list, ``"all"`` or ``None`` = all
numeric).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

__all__ = ["ID3Classifier", "entropy", "categorical_gain", "best_threshold"]


def entropy(counts) -> float:
    """``H = -sum_c p_c log2 p_c`` of a vector of class counts (0 for an empty set)."""
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum()
    if total <= 0:
        return 0.0
    p = counts[counts > 0] / total
    return float(-np.sum(p * np.log2(p)))


def _class_counts(y, n_classes):
    return np.bincount(y, minlength=n_classes)


def categorical_gain(x, y, n_classes: int) -> float:
    """Information gain (bits) of the multiway split of ``y`` by the values of ``x``."""
    _, inverse = np.unique(x, return_inverse=True)
    joint = np.zeros((inverse.max() + 1, n_classes))
    np.add.at(joint, (inverse, y), 1.0)
    sizes = joint.sum(axis=1)
    cond = sum(s / y.size * entropy(row) for s, row in zip(sizes, joint, strict=True))
    return entropy(joint.sum(axis=0)) - cond


def best_threshold(x, y, n_classes: int) -> tuple[float, float]:
    """``(gain, t)`` of the best binary split ``x <= t`` (``t`` midway between consecutive
    distinct values); ``(-inf, nan)`` when ``x`` is constant."""
    order = np.argsort(x, kind="stable")
    xs, ys = np.asarray(x, np.float64)[order], y[order]
    onehot = np.eye(n_classes)[ys]
    left = np.cumsum(onehot, axis=0)[:-1]  # counts of the first i+1 examples
    right = left[-1] + onehot[-1] - left if left.size else left
    cut = np.flatnonzero(xs[1:] > xs[:-1])  # split after position i
    if cut.size == 0:
        return -np.inf, float("nan")
    total = entropy(left[-1] + onehot[-1])
    n = ys.size
    gains = [
        total - ((i + 1) * entropy(left[i]) + (n - i - 1) * entropy(right[i])) / n for i in cut
    ]
    best = int(np.argmax(gains))
    i = cut[best]
    return float(gains[best]), float((xs[i] + xs[i + 1]) / 2)


class _Node(NamedTuple):
    counts: np.ndarray  # class counts of the examples reaching the node
    prediction: int  # majority class
    attribute: int = -1  # -1 for a leaf
    threshold: float = float("nan")  # numeric split x <= threshold; nan when categorical
    children: dict | None = None  # value -> node (categorical); {True: <=, False: >} (numeric)


def _majority(counts, parent_prediction):
    top = np.flatnonzero(counts == counts.max())
    return int(parent_prediction) if parent_prediction in top else int(top[0])


def _grow(X, y, candidates, categorical, n_classes, parent_prediction, min_gain, depth, max_depth):
    counts = _class_counts(y, n_classes)
    prediction = _majority(counts, parent_prediction)
    if np.count_nonzero(counts) <= 1 or not candidates or depth >= max_depth:
        return _Node(counts, prediction)
    best = (-np.inf, -1, float("nan"))
    for a in candidates:  # ties: the first attribute in column order
        if categorical[a]:
            if np.unique(X[:, a]).size < 2:
                continue
            gain, t = categorical_gain(X[:, a], y, n_classes), float("nan")
        else:
            gain, t = best_threshold(X[:, a], y, n_classes)
        if gain > best[0] + 1e-12:
            best = (gain, a, t)
    gain, a, t = best
    if a < 0 or gain <= min_gain:
        return _Node(counts, prediction)
    grow = dict(categorical=categorical, n_classes=n_classes, parent_prediction=prediction,
                min_gain=min_gain, depth=depth + 1, max_depth=max_depth)
    if categorical[a]:
        rest = [c for c in candidates if c != a]
        children = {
            _key(v): _grow(X[X[:, a] == v], y[X[:, a] == v], rest, **grow)
            for v in np.unique(X[:, a])
        }
    else:
        below = X[:, a] <= t
        children = {side: _grow(X[m], y[m], candidates, **grow)
                    for side, m in ((True, below), (False, ~below))}
    return _Node(counts, prediction, a, t, children)


def _key(value):
    """A hashable python scalar for a category (numpy scalars and object entries alike)."""
    return value.item() if isinstance(value, np.generic) else value


def _leaf_of(node, x):
    while node.attribute >= 0:
        value = x[node.attribute]
        key = _key(value) if np.isnan(node.threshold) else bool(value <= node.threshold)
        child = node.children.get(key)
        if child is None:  # a value never seen at this node
            return node
        node = child
    return node


class ID3Classifier(ClassifierMixin, BaseEstimator):
    """ID3 (information-gain) decision tree; see the module docstring.

    Parameters:
      categorical: which columns are categorical (multiway splits): a bool mask, a list of
        column indices, ``"all"``, or ``None`` (all numeric: binary threshold splits).
      min_gain: split only when the best gain exceeds this (0: grow until pure, as ID3).
      max_depth: optional depth limit (``None``: unlimited).
      window: ``None`` (grow on all examples) or the initial window fraction in (0, 1] of
        Quinlan's windowing; ``random_state`` seeds the window, ``max_windows`` caps the rounds.
    """

    def __init__(self, categorical=None, min_gain=0.0, max_depth=None, window=None,
                 max_windows=20, random_state=None):
        self.categorical = categorical
        self.min_gain = min_gain
        self.max_depth = max_depth
        self.window = window
        self.max_windows = max_windows
        self.random_state = random_state

    def _mask(self, d):
        c = self.categorical
        if c is None:
            return np.zeros(d, bool)
        if isinstance(c, str):
            if c != "all":
                raise ValueError(f"categorical: use a mask, indices, 'all' or None, got {c!r}")
            return np.ones(d, bool)
        c = np.asarray(c)
        if c.dtype == bool:
            if c.shape != (d,):
                raise ValueError(f"categorical: a mask needs {d} entries, got {c.shape}")
            return c
        mask = np.zeros(d, bool)
        if c.size and (c.min() < 0 or c.max() >= d):
            raise ValueError(f"categorical: column indices must be in 0..{d - 1}")
        mask[c.astype(int)] = True
        return mask

    def fit(self, X, y):
        """Grow the tree on ``X`` (n x d) and labels ``y`` (any hashable class values)."""
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[0] == 0:
            raise ValueError(f"X: expected a non-empty 2-D array, got shape {X.shape}")
        y = np.asarray(y)
        if y.shape != (X.shape[0],):
            raise ValueError(f"y: expected shape ({X.shape[0]},), got {y.shape}")
        if not self.min_gain >= 0:
            raise ValueError(f"min_gain: must be >= 0, got {self.min_gain!r}")
        self.classes_, codes = np.unique(y, return_inverse=True)
        self.categorical_ = self._mask(X.shape[1])
        self.n_features_in_ = X.shape[1]
        depth = np.inf if self.max_depth is None else int(self.max_depth)

        def grow(rows):
            return _grow(X[rows], codes[rows], list(range(X.shape[1])), self.categorical_,
                         self.classes_.size, 0, float(self.min_gain), 0, depth)

        n = X.shape[0]
        if self.window is None:
            self.tree_, self.n_windows_ = grow(np.arange(n)), 0
            return self
        if not 0 < self.window <= 1:
            raise ValueError(f"window: the initial window fraction must be in (0, 1], got "
                             f"{self.window!r}")
        rng = np.random.default_rng(self.random_state)
        inside = np.zeros(n, bool)
        inside[rng.choice(n, max(1, round(self.window * n)), replace=False)] = True
        for rounds in range(1, int(self.max_windows) + 1):
            self.tree_, self.n_windows_ = grow(np.flatnonzero(inside)), rounds
            wrong = np.array([leaf.prediction for leaf in self._leaves(X)]) != codes
            new = wrong & ~inside
            if not new.any():
                break
            inside |= new
        return self

    def _leaves(self, X):
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"X: expected {self.n_features_in_} columns, got shape {X.shape}")
        return [_leaf_of(self.tree_, x) for x in X]

    def predict(self, X):
        """Majority class of the leaf each row reaches."""
        return self.classes_[[leaf.prediction for leaf in self._leaves(X)]]

    def predict_proba(self, X):
        """Class frequencies of the training examples in the leaf each row reaches."""
        counts = np.array([leaf.counts for leaf in self._leaves(X)], dtype=np.float64)
        return counts / counts.sum(axis=1, keepdims=True)

    def depth(self) -> int:
        """Depth of the grown tree (0 for a single leaf)."""

        def d(node):
            return 0 if node.attribute < 0 else 1 + max(d(c) for c in node.children.values())

        return d(self.tree_)
