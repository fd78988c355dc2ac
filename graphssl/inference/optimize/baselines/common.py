"""Shared input checks and outputs of the closed-form baselines."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from graphssl._warnings import warn_user
from graphssl.validation import UnreachedNodesWarning  # defined there, shared by every layer


class SolveInfo(NamedTuple):
    """Convergence record of a solve (DESIGN.md optimiser protocol)."""

    method: str
    iterations: int
    residual: float
    converged: bool
    n_unreached: int


# ----------------------------------------------------------------------------- inputs


def _adjacency(graph) -> sp.csr_matrix:
    """W as float64 CSR from a Graph or a scipy.sparse / dense square matrix."""
    if hasattr(graph, "to_scipy"):
        W = graph.to_scipy()
    elif sp.issparse(graph) or isinstance(graph, np.ndarray):
        W = sp.csr_matrix(graph)
    else:
        raise ValueError(
            f"graph: expected a graphssl.graph.Graph or an n x n scipy.sparse matrix, "
            f"got {type(graph).__name__}"
        )
    if W.ndim != 2 or W.shape[0] != W.shape[1]:
        raise ValueError(f"graph: the weight matrix must be square, got shape {W.shape}")
    if W.shape[0] == 0:
        raise ValueError("graph: the graph is empty (0 nodes); build it from at least 2 points")
    W = W.astype(np.float64).tocsr()
    if W.nnz and (not np.all(np.isfinite(W.data)) or W.data.min() < 0):
        raise ValueError("graph: weights must be finite and non-negative")
    if W.diagonal().any():
        W = W.tolil()
        W.setdiag(0)
        W = W.tocsr()
    W.eliminate_zeros()
    return W


def _labelled(labels, n: int, observed=None, n_classes=None):
    """Indices and classes of the labelled nodes, and the number of classes C."""
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.shape[0] != n:
        raise ValueError(
            f"labels: expected shape ({n},) to match the graph's n_nodes, got {labels.shape}"
        )
    if not np.issubdtype(labels.dtype, np.integer):
        if not np.all(np.equal(np.mod(labels, 1), 0)):
            raise ValueError("labels: must be integers 0..C-1, with -1 for unlabelled")
        labels = labels.astype(np.int64)
    if observed is None:
        observed = labels >= 0
    else:
        observed = np.asarray(observed, dtype=bool)
        if observed.shape != (n,):
            raise ValueError(f"observed: expected a bool mask of shape ({n},)")
    index = np.flatnonzero(observed)
    classes = labels[index].astype(np.int64)
    if index.size == 0:
        raise ValueError("labels: no labelled node (all -1); label at least one node per class")
    if classes.min() < 0:
        raise ValueError("labels: an observed node has a negative label; use 0..C-1")
    if n_classes is None:
        n_classes = int(classes.max()) + 1
    elif classes.max() >= n_classes:
        raise ValueError(f"labels: found label {classes.max()} but n_classes={n_classes}")
    if n_classes < 2:
        raise ValueError("n_classes: need at least 2 classes; label a node of a second class")
    return index, classes, int(n_classes)


def _one_hot(classes: np.ndarray, n_classes: int) -> np.ndarray:
    out = np.zeros((classes.size, n_classes))
    out[np.arange(classes.size), classes] = 1.0
    return out


def _unreached_mask(W: sp.csr_matrix, labelled_index: np.ndarray, method: str) -> np.ndarray:
    """Nodes in components without a labelled node; warns once naming how many."""
    n_comp, comp = csgraph.connected_components(W, directed=True, connection="weak")
    if n_comp == 1:
        return np.zeros(W.shape[0], dtype=bool)
    reached = np.zeros(n_comp, dtype=bool)
    reached[comp[labelled_index]] = True
    mask = ~reached[comp]
    if mask.any():
        warn_user(
            f"{method}: {int(mask.sum())} of {W.shape[0]} nodes lie in "
            f"{int((~reached).sum())} connected component(s) with no labelled node; no label "
            "can reach them, so they get the uniform class distribution 1/C. Label a node in "
            "each component or build a more connected graph (larger k).",
            UnreachedNodesWarning
        )
    return mask


def normalize_scores(scores) -> np.ndarray:
    """Clip to >= 0 and scale rows to sum 1; all-zero rows become uniform ``1 / C``."""
    scores = np.clip(np.asarray(scores, dtype=np.float64), 0.0, None)
    total = scores.sum(axis=1, keepdims=True)
    uniform = np.full_like(scores, 1.0 / scores.shape[1])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, scores / np.where(total > 0, total, 1.0), uniform)



def _is_symmetric(W: sp.csr_matrix) -> bool:
    """W equals W^T to 1e-10 of its largest weight (one transpose, no sparse subtraction)."""
    T = W.T.tocsr()
    scale = 1e-10 * max(float(np.abs(W.data).max()) if W.nnz else 0.0, 1e-300)
    W.sort_indices()
    T.sort_indices()
    if np.array_equal(W.indptr, T.indptr) and np.array_equal(W.indices, T.indices):
        return bool(W.nnz == 0 or np.abs(W.data - T.data).max() <= scale)
    diff = abs(W - T)  # same values, different stored pattern (explicit zeros)
    return bool(diff.nnz == 0 or diff.max() <= scale)


def _normalized_adjacency(W: sp.csr_matrix) -> sp.csr_matrix:
    """``S = D^-1/2 W D^-1/2`` (isolated nodes: zero rows), scaling the stored entries once."""
    degrees = np.asarray(W.sum(axis=1)).ravel()
    with np.errstate(divide="ignore"):
        inv_sqrt = np.where(degrees > 0, 1.0 / np.sqrt(np.where(degrees > 0, degrees, 1.0)), 0.0)
    rows = np.repeat(np.arange(W.shape[0]), np.diff(W.indptr))
    data = W.data * inv_sqrt[rows] * inv_sqrt[W.indices]
    return sp.csr_matrix((data, W.indices.copy(), W.indptr.copy()), shape=W.shape)
