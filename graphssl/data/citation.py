"""Graphs that come with the data: the Planetoid citation-network ``.npz`` layout.

A citation network is a graph given with the data (paper i cites paper j) plus a sparse
bag-of-words row per paper. The shared ``planetoid_citeseer.npz`` (format: the shared
``PROVENANCE.md``) holds

* ``data``, ``indices``, ``indptr``, ``shape``: the CSR feature matrix (n x d);
* ``y``: ``int64[n]`` in ``0..C-1``, ``-1`` for papers without a label in the source;
* ``edges``: ``int[E, 2]`` citation pairs, usually one direction only (``i < j``);
* ``split_train``, ``split_val``, ``split_test``: 0-based node indices of the standard split
  (Yang, Cohen & Salakhutdinov 2016; Kipf & Welling 2017), or boolean masks of length n.

:func:`load_citation` turns that into a :class:`CitationData`: the *symmetrised* graph (a
citation is a similarity in both directions; the count of one-directional input pairs is
reported), scipy CSR features, labels and boolean masks. A user with their own citation data
writes the same five arrays to ``<name>.npz`` (or calls :func:`citation_from_arrays`).
"""

from __future__ import annotations

import dataclasses
import pathlib

import numpy as np
import scipy.sparse as sp

from graphssl._warnings import warn_user
from graphssl.data._npz import checked_csr, csr_from_arrays, index_array, read_npz
from graphssl.graph import Graph, connected_components
from graphssl.validation import check_label_codes

__all__ = ["CitationData", "CITATION_SOURCES", "load_citation", "citation_from_arrays"]

CITATION_SOURCES: dict[str, str] = {
    "planetoid_citeseer": (
        "CiteSeer (Sen et al. 2008) on the split of Yang, Cohen & Salakhutdinov 2016, from "
        "github kimiyoung/planetoid data/ind.citeseer.* (MIT licence), converted to the .npz "
        "layout of graphssl.data.citation (arrays data/indices/indptr/shape, y, edges, "
        "split_train/split_val/split_test)"
    ),
    "planetoid_cora": (
        "Cora (McCallum et al. 2000) on the Planetoid split, github kimiyoung/planetoid "
        "data/ind.cora.*, converted to the same .npz layout"
    ),
    "planetoid_pubmed": (
        "PubMed Diabetes (Namata et al. 2012) on the Planetoid split, github "
        "kimiyoung/planetoid data/ind.pubmed.*, converted to the same .npz layout"
    ),
}


@dataclasses.dataclass(frozen=True, eq=False)
class CitationData:
    """A graph given with the data, node features, labels and the standard split.

    Attributes:
        graph: symmetric :class:`~graphssl.graph.Graph`, unit weights, no self-loops.
        features: ``scipy.sparse.csr_matrix`` (n x d), float64.
        y: ``int64[n]`` in ``0..C-1``; ``-1`` where the source has no label.
        train_mask, val_mask, test_mask: ``bool[n]`` of the standard split.
        n_one_directional: input edges whose reverse was absent (all of them for an
            ``i < j`` list); they were symmetrised.
        n_self_loops: input pairs ``(i, i)`` that were dropped.
        n_components: connected components of ``graph`` (isolated nodes count).
        name, description: where the data come from.
    """

    graph: Graph
    features: sp.csr_matrix
    y: np.ndarray
    train_mask: np.ndarray
    val_mask: np.ndarray
    test_mask: np.ndarray
    n_one_directional: int
    n_self_loops: int
    n_components: int
    name: str = ""
    description: str = ""

    @property
    def n_nodes(self) -> int:
        """Number of nodes n."""
        return int(self.graph.n_nodes)

    @property
    def n_classes(self) -> int:
        """Number of classes C (from the labelled nodes)."""
        return int(self.y.max()) + 1

    def train_labels(self) -> np.ndarray:
        """``int64[n]``: ``y`` on the training nodes, ``-1`` elsewhere (the estimators' ``y``)."""
        return np.where(self.train_mask, self.y, -1)

    def report(self) -> str:
        """One line: sizes, components and what symmetrisation changed."""
        return (
            f"{self.name or 'citation graph'}: {self.n_nodes} nodes, "
            f"{self.graph.n_edges // 2} undirected edges ({self.n_one_directional} input "
            f"edges one-directional, symmetrised; {self.n_self_loops} self-loops dropped), "
            f"{self.n_components} connected components, {self.features.shape[1]} features, "
            f"{self.n_classes} classes, split {int(self.train_mask.sum())}/"
            f"{int(self.val_mask.sum())}/{int(self.test_mask.sum())}"
        )


def _mask(index, n: int, name: str) -> np.ndarray:
    """``bool[n]`` from a split: node indices (whole-valued floats accepted) or a boolean
    mask of length ``n`` (PyG's ``train_mask``); anything else names ``name``."""
    index = np.asarray(index)
    if index.dtype == bool:
        if index.shape != (n,):
            raise ValueError(f"{name}: a boolean mask needs one entry per node ({n}), got shape "
                             f"{index.shape}; or give node indices")
        return index.copy()
    mask = np.zeros(n, dtype=bool)
    mask[index_array(index, n, name).ravel()] = True
    return mask


def _warn_overlaps(train: np.ndarray, others: dict[str, np.ndarray]) -> None:
    """Warn when a validation or test split shares nodes with ``split_train``."""
    for name, mask in others.items():
        shared = np.flatnonzero(train & mask)
        if shared.size:
            warn_user(f"split_train and {name} share {shared.size} node(s) (e.g. "
                      f"{shared[:5].tolist()}); scores on {name} would count training nodes. "
                      "Make the splits disjoint.", UserWarning)


def _features(features) -> sp.csr_matrix:
    """``features`` as float64 CSR, fully checked (a corrupt sparse matrix is refused before
    it is read)."""
    try:
        features = sp.csr_matrix(features, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"features: expected a numeric [n, d] array or scipy sparse matrix "
                         f"({error})") from None
    return checked_csr(features, "features")


def citation_from_arrays(edges, features, y, split_train, split_val=(), split_test=(), *,
                         name: str = "", description: str = "") -> CitationData:
    """Build :class:`CitationData` from arrays (the route for a user's own citation data).

    ``edges``: ``int[E, 2]`` pairs in any direction (duplicates and self-loops are dropped,
    every edge is stored both ways with weight 1); ``features``: dense or scipy sparse
    ``[n, d]``; ``y``: ``int[n]`` with ``-1`` for unknown labels; ``split_*``: node indices,
    or boolean masks of length ``n``. Fractional or out-of-range indices are a
    ``ValueError`` naming the argument; a validation or test split that shares nodes with
    ``split_train`` gives a ``UserWarning``.
    """
    features = _features(features)
    n = features.shape[0]
    y = check_label_codes(y, n, name="y", against="features has {n} rows")
    edges = np.asarray(edges)
    if edges.ndim != 2 or edges.shape[1] != 2:
        raise ValueError(f"edges: expected an int array of shape (E, 2), got {edges.shape}")
    edges = index_array(edges, n, "edges")
    loops = edges[:, 0] == edges[:, 1]
    pairs = edges[~loops]
    A = sp.csr_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    A.data[:] = 1.0  # duplicates count once
    one_way = int((A - A.multiply(A.T)).count_nonzero())
    graph = Graph.from_scipy(A.maximum(A.T))
    train = _mask(split_train, n, "split_train")
    if np.any(y[train] < 0):
        raise ValueError("split_train: a training node has label -1; drop it from the split")
    val, test = _mask(split_val, n, "split_val"), _mask(split_test, n, "split_test")
    _warn_overlaps(train, {"split_val": val, "split_test": test})
    return CitationData(
        graph=graph, features=features, y=y, train_mask=train, val_mask=val, test_mask=test,
        n_one_directional=one_way, n_self_loops=int(loops.sum()),
        n_components=int(connected_components(graph)[0]), name=name, description=description,
    )


def load_citation(name: str = "planetoid_citeseer", data_dir=None) -> CitationData:
    """Read ``<data_dir>/<name>.npz`` in the citation layout of this module.

    ``data_dir`` defaults to ``$GRAPHSSL_DATA``. When the file is absent the ``ValueError``
    says where the set comes from (:data:`CITATION_SOURCES`) and how to point at it; a file
    that is not a readable ``.npz``, lacks an array, holds a corrupt CSR matrix or
    inconsistent arrays (checked by :func:`citation_from_arrays`) is a ``ValueError``
    naming it.
    """
    from graphssl.data.loaders import data_dir_from_env

    folder = pathlib.Path(data_dir) if data_dir is not None else data_dir_from_env()
    path = None if folder is None else folder / f"{name}.npz"
    if path is None or not path.is_file():
        where = ("no data folder was given (data_dir=None and GRAPHSSL_DATA unset)"
                 if path is None else f"{name}.npz is not in the given folder")
        source = CITATION_SOURCES.get(name, "a citation network in the layout of "
                                            "graphssl.data.citation")
        raise ValueError(
            f"cannot load citation set {name!r}: {where}. It comes from {source}. Put "
            f"{name}.npz in a folder and pass it as data_dir or set GRAPHSSL_DATA."
        )
    arrays = read_npz(path)
    needed = {"data", "indices", "indptr", "shape", "y", "edges", "split_train"}
    if not needed <= arrays.keys():
        raise ValueError(f"{path}: missing arrays {sorted(needed - arrays.keys())}; "
                         "expected the layout of graphssl.data.citation")
    features = csr_from_arrays(*(arrays[k] for k in ("data", "indices", "indptr", "shape")),
                               where=str(path))
    try:
        return citation_from_arrays(
            arrays["edges"], features, arrays["y"], arrays["split_train"],
            arrays.get("split_val", ()), arrays.get("split_test", ()), name=name,
            description=CITATION_SOURCES.get(name, f"user file {name}.npz"),
        )
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
