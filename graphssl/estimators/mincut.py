"""``MincutClassifier`` and the Table 1 protocol of Blum & Chawla (2001), Sec. 5.1.

The estimator labels the unlabelled points by a minimum cut (binary, Sec. 2) or by
alpha-expansion (more than two classes; see :mod:`graphssl.inference.maxflow`). The graph is
the base class's kNN graph (``scheme="knn"``) or one of the paper's weighting schemes built
from a distance matrix: ``"nn"`` (Thm 3.1), ``"mincut3"``, ``"delta_zero"``,
``"delta_half"`` or ``"delta"`` (a given radius), with ``metric`` ``"euclidean"``,
``"hamming"`` (X holds categorical codes) or ``"infogain"`` (Sec. 5.1's weighted metric).

:func:`table1_trial` runs one random L/U draw of a Table 1 row: Mincut-3, Mincut-delta_opt
(best delta on a grid *in hindsight*, as the paper does), Mincut-delta_0, Mincut-delta_1/2,
ID3 (stand-in: scikit-learn's ``DecisionTreeClassifier(criterion="entropy")``; ID3 splits a
categorical attribute into all its values, the CART stand-in splits binary on the one-hot or
ordinal columns) and 3-NN under the same metric as the mincut graph.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from graphssl.estimators.base import GraphSSLClassifier
from graphssl.graph import Graph
from graphssl.inference.maxflow import mincut_classify
from graphssl.models import mincut as mc
from graphssl.validation import check_features, check_labels

__all__ = ["MincutClassifier", "TABLE1", "table1_dataset", "table1_trial", "distance_matrix"]

_SCHEMES = ("knn", "nn", "mincut3", "delta_zero", "delta_half", "delta")
_METRICS = ("euclidean", "hamming", "infogain")
_DENSE_MAX_N = 20_000


def distance_matrix(X, metric: str, labels=None, observed=None) -> np.ndarray:
    """Dense distances under ``metric``; ``"infogain"`` needs the labelled data."""
    if metric == "euclidean":
        return mc.euclidean_distances(X)
    if metric == "hamming":
        return mc.hamming_distances(X)
    if metric == "infogain":
        gains = mc.information_gain(X, labels, observed)
        return mc.information_gain_distances(X, gains)
    raise ValueError(f"metric: unknown {metric!r}; use one of {_METRICS}")


def _scheme_weights(D, scheme, labels, observed, delta):
    if scheme == "nn":
        return mc.nearest_neighbor_weights(mc.neighbors_from_distances(D, 1))
    if scheme == "mincut3":
        return mc.mincut3_weights(D, observed)
    if scheme == "delta_zero":
        return mc.delta_weights(D, mc.delta_zero(D, labels, observed))
    if scheme == "delta_half":
        return mc.delta_weights(D, mc.delta_half(D))
    if delta is None or not delta > 0:
        raise ValueError(f"delta: scheme='delta' needs a positive radius, got {delta!r}")
    return mc.delta_weights(D, delta)


class MincutClassifier(GraphSSLClassifier):
    """Graph mincut classifier (Blum & Chawla 2001).

    Parameters (beyond the kNN graph options ``k, symmetrize, weight, sigma``):
      scheme: ``"knn"`` (the kNN graph), ``"nn"``, ``"mincut3"``, ``"delta_zero"``,
        ``"delta_half"`` or ``"delta"`` (Sec. 3 / Sec. 5.1 weightings).
      metric: ``"euclidean"``, ``"hamming"`` or ``"infogain"`` (schemes other than knn).
      delta: radius for ``scheme="delta"``.
      alpha: factor on unlabelled-unlabelled edges (Fig. 1); 1 = plain mincut.
      method: max-flow back end, ``"auto"`` (default), ``"pymaxflow"``, ``"scipy"`` or
        ``"networkx"``.

    ``label_distributions_`` are one-hot (the cut is a hard labelling); ``cut_value_`` holds
    the energy of the returned labelling.

    >>> clf = MincutClassifier(scheme="mincut3").fit(X, y)   # doctest: +SKIP
    """

    def __init__(
        self,
        k=10,
        symmetrize="max",
        weight="gaussian",
        sigma="kth_over_3",
        *,
        scheme="knn",
        metric="euclidean",
        delta=None,
        alpha=1.0,
        method="auto",
    ):
        super().__init__(k=k, symmetrize=symmetrize, weight=weight, sigma=sigma)
        self.scheme = scheme
        self.metric = metric
        self.delta = delta
        self.alpha = alpha
        self.method = method

    def fit(self, X, y):
        """Fit on features ``X`` with ``y = -1`` for unlabelled points."""
        if self.scheme not in _SCHEMES:
            raise ValueError(f"scheme: unknown {self.scheme!r}; use one of {_SCHEMES}")
        if self.scheme == "knn":
            return super().fit(X, y)
        if self.metric not in _METRICS:
            raise ValueError(f"metric: unknown {self.metric!r}; use one of {_METRICS}")
        X = check_features(X, name="X")
        y = check_labels(y, X.shape[0], name="y")
        if X.shape[0] > _DENSE_MAX_N:
            raise ValueError(
                f"X: scheme={self.scheme!r} builds an n x n distance matrix; n={X.shape[0]} is "
                "too large, use scheme='knn'"
            )
        observed = y >= 0
        D = distance_matrix(X, self.metric, y, observed)
        W = _scheme_weights(D, self.scheme, y, observed, self.delta)
        self.n_features_in_ = X.shape[1]
        self.X_fit_ = np.asarray(X, dtype=np.float64)
        self._induction_scale = None
        return self._fit_on_graph(Graph.from_scipy(W), y)

    def _label_distributions(self, graph, labels, n_classes):
        if not (np.isfinite(self.alpha) and self.alpha >= 0):
            raise ValueError(f"alpha: must be finite and >= 0, got {self.alpha!r}")
        out, info = mincut_classify(
            graph.to_scipy(), labels, labels >= 0, alpha=float(self.alpha), method=self.method
        )
        self.cut_value_ = float(info["energy"])
        return np.eye(n_classes)[out]


# ----------------------------------------------------------------------------- Table 1

# Paper numbers (accuracy, %) in the order Mincut-3, delta_opt, delta_0, delta_1/2, ID3, 3-NN.
_COLUMNS = ("mincut3", "delta_opt", "delta_0", "delta_half", "id3", "knn3")


def _row(name, data, L, U, metric, numbers, noise=0.0):
    return {"name": name, "data": data, "L": L, "U": U, "metric": metric, "noise": noise,
            "paper": dict(zip(_COLUMNS, numbers, strict=True))}


TABLE1 = [
    _row("Mush", "mushroom", 20, 1000, "infogain", (82.1, 97.7, 97.7, 97.0, 93.3, 91.1)),
    _row("Mush*", "mushroom", 20, 1000, "infogain", (74.2, 88.7, 56.9, 97.0, 80.8, 83.3), 0.1),
    _row("Tae", "tae", 10, 100, "hamming", (86.0, 99.0, 96.0, 97.0, 86.0, 80.0)),
    _row("Tae*", "tae", 10, 100, "hamming", (76.0, 96.0, 86.0, 94.0, 76.0, 62.0), 0.1),
    _row("Voting", "house_votes_84", 45, 390, "infogain", (89.1, 91.3, 66.1, 83.3, 86.4, 89.6)),
    _row("Musk", "musk1", 40, 200, "euclidean", (73.0, 92.5, 91.0, 92.5, 83.5, 87.0)),
    _row("Pima", "pima", 50, 718, "euclidean", (63.8, 72.3, 48.8, 72.3, 70.0, 68.1)),
    _row("Iono", "ionosphere", 50, 300, "euclidean", (71.0, 81.6, 78.0, 77.6, 88.6, 69.6)),
    _row("Bupa", "bupa", 45, 300, "euclidean", (53.3, 59.3, 48.0, 41.7, 55.3, 52.7)),
    _row("MI", "monks1", 124, 432, "hamming", (70.0, 64.4, 64.4, 64.4, 98.6, 81.1)),
    _row("MII", "monks2", 160, 432, "hamming", (69.6, 67.2, 57.2, 67.2, 67.0, 62.6)),
    _row("MIII*", "monks3", 122, 432, "hamming", (79.1, 80.6, 64.8, 80.6, 94.4, 83.6)),
]


def table1_dataset(name: str, data_dir) -> dict:
    """Load a shared UCI set: ``X`` for the metric (codes for categorical sets), ``X_tree``
    for the decision tree, ``y``, and the fixed train/test blocks of the MONK's problems."""
    z = np.load(Path(data_dir) / f"{name}.npz")
    y = z["y"].astype(np.int64)
    if "X_codes" in z.files:
        codes = z["X_codes"].astype(np.int64)
        tree = z["X_onehot"] if "X_onehot" in z.files else z["X"]
    elif name == "tae":
        codes = z["X"].astype(np.int64)  # 5 attributes, mostly categorical: Hamming on codes
        tree = z["X"]
    else:
        codes = None
        tree = z["X"]
    X = codes if codes is not None else z["X"].astype(np.float64)
    out = {"name": name, "X": X, "X_tree": np.asarray(tree, np.float64), "y": y}
    if "train_idx" in z.files and name.startswith("monks"):
        out["train_idx"], out["test_idx"] = z["train_idx"], z["test_idx"]
    return out


def _draw(data, spec, rng):
    """L and U index sets of one trial (MONK's: the official training block and test set)."""
    n = data["y"].size
    if "train_idx" in data:
        train = data["train_idx"]
        L = rng.choice(train, spec["L"], replace=False) if spec["L"] < train.size else train
        return np.sort(L), data["test_idx"]
    while True:
        picked = rng.choice(n, spec["L"] + spec["U"], replace=False)
        L, U = picked[: spec["L"]], picked[spec["L"]:]
        if np.unique(data["y"][L]).size == np.unique(data["y"]).size:
            return L, U


def _mincut_accuracy(W, labels, y_true, U):
    out, _ = mincut_classify(W, labels, labels >= 0)
    return float(np.mean(out[U] == y_true[U]))


def table1_trial(data, spec, seed=0, n_deltas: int = 40) -> dict:
    """Accuracies (fractions) of the six Table 1 columns on one random L/U draw.

    ``spec["noise"]`` flips that fraction of the training labels (at least one) for the "*"
    rows; accuracy is always measured against the true labels of U.
    """
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.tree import DecisionTreeClassifier

    rng = np.random.default_rng(seed)
    L, U = _draw(data, spec, rng)
    idx = np.concatenate([L, U])
    y_true = data["y"][idx]
    y_train = y_true[: L.size].copy()
    if spec["noise"] > 0:
        flip = rng.choice(L.size, max(1, round(spec["noise"] * L.size)), replace=False)
        classes = np.unique(data["y"])
        for i in flip:  # a different class, uniformly
            y_train[i] = rng.choice(classes[classes != y_train[i]])
    labels = np.concatenate([y_train, -np.ones(U.size, dtype=np.int64)])
    observed = labels >= 0
    u = np.arange(L.size, idx.size)
    D = distance_matrix(data["X"][idx], spec["metric"], labels, observed)
    acc = {"mincut3": _mincut_accuracy(mc.mincut3_weights(D, observed), labels, y_true, u)}
    d0, dh = mc.delta_zero(D, labels, observed), mc.delta_half(D)
    acc["delta_0"] = _mincut_accuracy(mc.delta_weights(D, d0), labels, y_true, u)
    acc["delta_half"] = _mincut_accuracy(mc.delta_weights(D, dh), labels, y_true, u)
    grid = mc.delta_grid(D, n_deltas)
    path = [_mincut_accuracy(mc.delta_weights(D, d), labels, y_true, u) for d in grid]
    acc["delta_opt"] = max([*path, acc["delta_0"], acc["delta_half"]])
    tree = DecisionTreeClassifier(criterion="entropy", random_state=seed)
    tree.fit(data["X_tree"][L], y_train)
    acc["id3"] = float(np.mean(tree.predict(data["X_tree"][U]) == y_true[u]))
    knn = KNeighborsClassifier(3, metric="precomputed").fit(D[: L.size, : L.size], y_train)
    acc["knn3"] = float(np.mean(knn.predict(D[L.size:, : L.size]) == y_true[u]))
    return acc
