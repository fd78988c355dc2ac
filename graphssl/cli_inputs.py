"""What ``graphssl run`` reads: a data set (generator, shared ``.npz``, user ``.npz`` / CSV)
or a user graph (CSV edge list or GraphML) with optional node features and labels.

File formats (also in ``graphssl run --help``):

* **feature CSV** (``--dataset my.csv``): numeric feature columns and one label column
  (``--label-column``, index or header name; default the last). A row is unlabelled when its
  label cell is empty, ``-1``, ``?`` or the value given by ``--unlabeled-value``. Labels may
  be any strings; predictions are written back in them.
* **edge list** (``--graph edges.csv``): one undirected edge per line, ``source,target`` or
  ``source,target,weight`` (weight >= 0, default 1); node ids are any strings; an optional
  first line ``source,target[,weight]`` is a header. A pair named twice keeps its last
  weight. Nodes are numbered in order of first appearance.
* **GraphML** (``--graph g.graphml``): nodes in the file's order, edge weights from the
  ``weight`` attribute (1 where missing), labels from the node attribute
  ``--label-attribute`` (default ``label``) unless ``--labels`` is given. A directed file is
  symmetrised (``--symmetrize``, reported by a warning).
* **labels** (``--labels labels.csv``): ``node,label`` per line (optional header); nodes not
  listed are unlabelled, as are the unlabelled markers above.
* **node features** (``--features feats.csv``): the node id in the first column, numeric
  features in the others (optional header); every node of the graph needs a row.

Numeric features of user files are standardised per column (zero mean, unit variance;
constant columns only centred) unless ``--no-standardize``: a Gaussian kNN graph on raw
columns of different scales is dominated by the largest one (wine: ~0.65 accuracy raw).
"""

from __future__ import annotations

import dataclasses
import pathlib

import numpy as np

from graphssl.data.loaders import encode_label_strings, is_number, read_csv_rows

UNLABELED = ("", "-1", "?")


@dataclasses.dataclass
class Problem:
    """A loaded input: features ``X`` (or None), labels ``y`` (``-1`` = unlabelled), the
    class names ``classes`` (``classes[k]`` for label ``k``), and for a user graph the
    :class:`graphssl.graph.Graph` and the node ids in graph order."""

    name: str
    X: np.ndarray | None
    y: np.ndarray
    classes: np.ndarray
    graph: object = None
    node_ids: list | None = None
    user_file: bool = False

    @property
    def n_samples(self) -> int:
        """Number of points / nodes."""
        return int(len(self.y))

    @property
    def n_features(self) -> int:
        """Feature count (0 without features)."""
        return 0 if self.X is None else int(self.X.shape[1])

    @property
    def n_classes(self) -> int:
        """Number of classes."""
        return int(len(self.classes))


def standardize(X: np.ndarray) -> np.ndarray:
    """Columns scaled to zero mean and unit variance (constant columns only centred)."""
    X = np.asarray(X, dtype=np.float64)
    scale = X.std(axis=0)
    return (X - X.mean(axis=0)) / np.where(scale > 0, scale, 1.0)


def _rows(path: pathlib.Path, what: str) -> list[list[str]]:
    if not path.is_file():
        raise ValueError(f"{what}: file {path} does not exist")
    rows = [[c.strip() for c in r] for r in read_csv_rows(path)]
    if not rows:
        raise ValueError(f"{what}: {path} holds no rows")
    return rows


def _edge_list(path: pathlib.Path):
    import networkx as nx

    rows = _rows(path, "--graph")
    if [c.lower() for c in rows[0]] in (["source", "target"], ["source", "target", "weight"]):
        rows = rows[1:]
    graph = nx.Graph()
    for lineno, row in enumerate(rows, start=1):
        if len(row) not in (2, 3):
            raise ValueError(f"--graph: line {lineno} of {path} has {len(row)} fields; expected "
                             "source,target or source,target,weight")
        weight = 1.0
        if len(row) == 3:
            if not is_number(row[2]) or not float(row[2]) >= 0 or float(row[2]) == np.inf:
                raise ValueError(f"--graph: line {lineno} of {path}: weight {row[2]!r} is not "
                                 "a finite number >= 0")
            weight = float(row[2])
        graph.add_edge(row[0], row[1], weight=weight)
    return graph


def _read_graph(path: pathlib.Path):
    import networkx as nx

    if path.suffix.lower() == ".csv":
        return _edge_list(path)
    if path.suffix.lower() == ".graphml":
        if not path.is_file():
            raise ValueError(f"--graph: file {path} does not exist")
        try:
            graph = nx.read_graphml(path)
        except Exception as err:  # noqa: BLE001 - networkx raises several kinds
            raise ValueError(f"--graph: cannot read {path} as GraphML ({err})") from None
        return nx.relabel_nodes(graph, {v: str(v) for v in graph.nodes})
    raise ValueError(f"--graph: {path} must end in .csv (edge list) or .graphml")


def _table(path: pathlib.Path, what: str) -> tuple[list[str], list[list[str]]]:
    """Rows keyed by their first cell, an optional header dropped."""
    rows = _rows(path, what)
    width = len(rows[0])
    if width < 2:
        raise ValueError(f"{what}: {path} needs a node id column and at least one more")
    if what == "--features" and not all(is_number(c) for c in rows[0][1:]):
        rows = rows[1:]
    elif what == "--labels" and [c.lower() for c in rows[0]] == ["node", "label"]:
        rows = rows[1:]
    for lineno, row in enumerate(rows, start=1):
        if len(row) != width:
            raise ValueError(f"{what}: a row of {path} has {len(row)} fields, expected {width} "
                             f"(line {lineno} of the data)")
    return [r[0] for r in rows], [r[1:] for r in rows]


def _by_node(ids: list[str], rows, nodes: list[str], what: str, path) -> dict:
    table: dict = {}
    for node, row in zip(ids, rows, strict=True):
        if table.setdefault(node, row) != row:  # a repeated row that agrees is harmless
            raise ValueError(f"{what}: node {node!r} has two different rows in {path} "
                             f"({table[node]} and {row}); keep one")
    unknown = [i for i in ids if i not in set(nodes)]
    if unknown:
        raise ValueError(f"{what}: {len(unknown)} node(s) of {path} are not in the graph "
                         f"(e.g. {unknown[0]!r}); node ids must match the graph's")
    return table


def load_graph_problem(graph_path, *, features=None, labels=None, label_attribute="label",
                       unlabeled=UNLABELED, symmetrize="max", scale=True) -> Problem:
    """Read a user graph with its labels and optional node features (module docstring)."""
    from graphssl import graph as graph_module

    path = pathlib.Path(graph_path)
    nx_graph = _read_graph(path)
    nodes = [str(v) for v in nx_graph.nodes]
    if len(nodes) < 2:
        raise ValueError(f"--graph: {path} has {len(nodes)} node(s); need at least 2")
    if labels is not None:
        ids, rows = _table(pathlib.Path(labels), "--labels")
        table = _by_node(ids, rows, nodes, "--labels", labels)
        label_text = [table[v][0] if v in table else "" for v in nodes]
    else:
        values = [nx_graph.nodes[v].get(label_attribute) for v in nodes]
        if all(v is None for v in values):
            raise ValueError(f"--labels: {path} has no node attribute {label_attribute!r}; give "
                             "--labels FILE (node,label per line) or --label-attribute NAME")
        label_text = ["" if v is None else str(v).strip() for v in values]
    y, classes = encode_label_strings(label_text, unlabeled)
    if len(classes) < 2 and not np.all(y >= 0):
        raise ValueError(f"--labels: found {len(classes)} class(es) among the labelled nodes; "
                         "need at least 2")
    X = None
    if features is not None:
        ids, rows = _table(pathlib.Path(features), "--features")
        table = _by_node(ids, rows, nodes, "--features", features)
        missing = [v for v in nodes if v not in table]
        if missing:
            raise ValueError(f"--features: {len(missing)} node(s) have no row (e.g. "
                             f"{missing[0]!r}); give one row per node of the graph")
        try:
            X = np.array([[float(c) for c in table[v]] for v in nodes], dtype=np.float64)
        except ValueError as err:
            raise ValueError(f"--features: non-numeric feature in {features} ({err})") from None
        from graphssl.validation import check_features

        check_features(X, name=f"--features {pathlib.Path(features).name}")  # before scaling
        X = standardize(X) if scale else X
    as_graph = getattr(graph_module, "as_graph", None)
    if as_graph is not None:
        graph = as_graph(nx_graph, nodelist=nodes, symmetrize=symmetrize)
    else:  # pragma: no cover - older graph module
        graph = graph_module.Graph.from_networkx(nx_graph, nodelist=nodes)
    return Problem(name=path.stem, X=X, y=y, classes=classes, graph=graph, node_ids=nodes,
                   user_file=True)


def load_table_problem(dataset: str, *, data_dir=None, label_column="-1", unlabeled=UNLABELED,
                       scale=None) -> Problem:
    """A generator name, a shared ``.npz`` name, or a path to ``.npz`` / ``.csv``.

    ``scale``: standardise the features (default: for user files only; the built-in and
    shared sets are used as their papers used them)."""
    from graphssl import data

    path = pathlib.Path(dataset)
    user = path.suffix.lower() in (".npz", ".csv")
    if path.suffix.lower() == ".npz":
        if not path.is_file():
            raise ValueError(f"--dataset: file {path} does not exist")
        loaded = data.load_npz(path.stem, path.parent)
    elif path.suffix.lower() == ".csv":
        column = int(label_column) if label_column.lstrip("-").isdigit() else label_column
        loaded = data.load_csv(path, column, unlabeled=tuple(unlabeled))
    else:
        known = data.available_datasets(data_dir)
        if dataset not in known and dataset not in data.NPZ_SOURCES:
            raise ValueError(f"--dataset: unknown {dataset!r}; use a path to .npz/.csv or one "
                             f"of {', '.join(known)} (graphssl list --data-dir DIR lists more)")
        loaded = data.load_dataset(dataset, data_dir)
    X = np.asarray(loaded.X, dtype=np.float64)
    if user:  # before standardising, which would spread one NaN over its column
        from graphssl.validation import check_features

        check_features(X, name=f"--dataset {path.name}")
    if scale if scale is not None else user:
        X = standardize(X)
    return Problem(name=loaded.name, X=X, y=np.asarray(loaded.y), classes=np.asarray(
        loaded.classes), user_file=user)
