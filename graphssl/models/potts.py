"""The Potts model on a similarity graph, with external field and clamped labels.

Bergamim & Breve Eqs. 10-12: with couplings ``W`` (a symmetric :class:`~graphssl.graph.Graph`,
``W_ij`` stored in both directions), field ``theta`` and inverse temperature ``beta``,

    H(s) = - sum_{i<j} W_ij delta(s_i, s_j) - sum_i theta_{i, s_i},
    P(s) = exp(-beta H(s)) / Z_H,

conditioned on the labelled nodes (``observed``) holding ``labels``. Without a field this is the
zero-field form (Eq. 10) whose clamped MAP relates to GRF / mincut. Symbols to arguments:
``W`` -> ``graph.weights``, ``theta`` -> ``field`` (float[n, q]), ``beta`` -> ``beta``,
``q`` -> ``n_classes``.

The class is a pairwise label model of :mod:`graphssl.models.protocol`: its one description
is :meth:`PottsModel.pairwise_tables` (``J = beta W``, ``h = beta theta``); the energy
(``= beta H``), the conditionals (Eq. 16 with point masses) and the Swendsen–Wang bonds are
derived from it by the protocol's functions.

Symmetry. ``H`` sums over unordered pairs, so only ``(W_ij + W_ji) / 2`` enters the law.
:meth:`PottsModel.create` given an asymmetric ``graph`` (e.g. ``graph.row_normalize``'s
output, Bergamim & Breve Eq. 9) symmetrises the couplings to ``(W_ij + W_ji) / 2`` (the pair
weight ``energy`` has always used) and warns, naming ``graphssl.graph.symmetrize`` as the
explicit route; the directed ``W`` is kept only for the paper's mean field (Eq. 16 reads
``W_ij`` along out-edges; ``PairwiseTables.directed_coupling``).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from graphssl._device import alike
from graphssl._warnings import warn_user
from graphssl.graph import Graph
from graphssl.graph.core import edge_slots
from graphssl.models.protocol import PairwiseTables, pairwise_energy
from graphssl.validation import (
    check_label_codes,
    check_same_length,
    check_scalar,
    check_state_codes,
    is_whole,
)

ASYMMETRIC = ("warn", "symmetrize", "raise")

__all__ = ["PottsModel", "bergamim_breve_graph", "label_field", "default_k",
           "reconnect_unreached"]


@dataclasses.dataclass(frozen=True)
class PottsModel:
    """Potts energy with field and clamped nodes; an immutable JAX pytree.

    Build with :meth:`create`. Fields: ``graph`` (couplings W), ``beta`` (scalar), ``field``
    (float[n, q]), ``observed`` (bool[n]), ``labels`` (int32[n]; meaningful where observed),
    ``neighbor_index`` / ``neighbor_weight`` (padded neighbour table of ``graph``),
    ``directed_weight`` (None, or the directed W the model was built from, in the same
    slots: read only by mean field), ``bond_slots`` (the table's slots ``i < j``, a cache for
    Swendsen–Wang), static ``n_classes``. ``graph`` is always symmetric.
    """

    graph: Graph
    beta: jax.Array
    field: jax.Array
    observed: jax.Array
    labels: jax.Array
    neighbor_index: jax.Array
    neighbor_weight: jax.Array
    n_classes: int = dataclasses.field(metadata=dict(static=True))
    directed_weight: jax.Array | None = None
    bond_slots: jax.Array | None = None

    @classmethod
    def create(
        cls,
        graph: Graph,
        n_classes: int,
        *,
        beta: float = 1.0,
        field=None,
        labels=None,
        observed=None,
        asymmetric: str = "warn",
    ) -> PottsModel:
        """Potts model on ``graph`` with ``n_classes`` states.

        ``labels`` may use -1 for unlabelled nodes; then ``observed`` defaults to
        ``labels >= 0``. ``field`` defaults to zero (Eq. 10).

        ``asymmetric``: what to do when ``W_ij != W_ji`` (a directed graph such as
        ``graph.row_normalize``'s output). ``"warn"`` (default): couplings become
        ``(W_ij + W_ji) / 2`` (``graphssl.graph.symmetrize(graph, "mean")``; the energy is
        unchanged, it always used that pair weight) with a ``UserWarning``;
        ``"symmetrize"``: the same, silently (you asked for it); ``"raise"``: ``ValueError``.
        The directed W is kept as ``directed_weight`` for the paper's mean field only.
        """
        if asymmetric not in ASYMMETRIC:
            raise ValueError(f"asymmetric: use one of {ASYMMETRIC}, got {asymmetric!r}")
        n = graph.n_nodes
        if not is_whole(n_classes, 2):
            raise ValueError(f"n_classes: a Potts model needs a whole number >= 2 of states, "
                             f"got {n_classes!r}")
        check_scalar(beta, "beta")
        nodes = "the graph has {n} nodes"
        labels = np.full(n, -1) if labels is None else check_label_codes(
            labels, n, n_classes=n_classes, name="labels", against=nodes)
        if observed is None:
            observed = labels >= 0
        else:
            observed = np.asarray(observed, dtype=bool)
            if observed.ndim != 1:
                raise ValueError(f"observed: expected a 1-D bool[{n}] mask, got shape "
                                 f"{observed.shape}")
            check_same_length(n, observed, "observed", against=nodes)
        if np.any(observed & (labels < 0)):
            raise ValueError("observed: an observed node has label -1; give its label")
        if field is None:
            field = np.zeros((n, n_classes))
        # host-side conversions (nothing compiled); a host graph's model stays on the host
        field = alike(field, graph.weights, graph.weights.dtype)
        if field.shape != (n, n_classes):
            raise ValueError(f"field: expected shape ({n}, {n_classes}), got {field.shape}")
        graph, directed_weight = _symmetric(graph, asymmetric)
        index, weight = graph.padded_neighbors()
        if directed_weight is not None:
            directed_weight = _in_slots(directed_weight, graph)
        return cls(
            graph=graph,
            beta=alike(beta, graph.weights, graph.weights.dtype),
            field=field,
            observed=alike(observed, graph.weights),
            labels=alike(np.maximum(labels, 0), graph.weights, np.int32),
            neighbor_index=index,
            neighbor_weight=weight,
            n_classes=int(n_classes),
            directed_weight=directed_weight,
            bond_slots=_graph_bond_slots(graph),
        )

    @property
    def n_nodes(self) -> int:
        return self.graph.n_nodes

    def pairwise_tables(self) -> PairwiseTables:
        """The one description of the law (:mod:`graphssl.models.protocol`):
        ``(neighbor_index, coupling = beta W, unary = beta theta)`` in the padded slots of
        ``graph``, plus ``directed_coupling = beta W_directed`` when the model was built from a
        directed W (mean field only). Energy, conditionals and Swendsen–Wang bonds all derive
        from it; a subclass changes the law by overriding this method alone.
        """
        directed = None if self.directed_weight is None else _scaled(self.beta,
                                                                      self.directed_weight)
        return PairwiseTables(self.neighbor_index, _scaled(self.beta, self.neighbor_weight),
                              _scaled(self.beta, self.field), directed, self.bond_slots)

    def energy(self, labels: jax.Array) -> jax.Array:
        """``beta H(s)`` of Eq. 11 (pairs i < j), ``+inf`` if a clamped node is off its label:
        :func:`~graphssl.models.protocol.pairwise_energy` of :meth:`pairwise_tables`.

        ``labels``: int[n] in ``0..q-1``; concrete values out of that range give a
        ``ValueError`` (a traced array, under ``jit`` or ``vmap``, is checked for its shape
        only)."""
        check_state_codes(labels, self.n_nodes, self.n_classes, "labels", "class")
        return pairwise_energy(self, labels)

    def unary_logits(self) -> jax.Array:
        """The field in logit units, ``beta theta``, ``[n, q]``: ``pairwise_tables().unary``
        (a convenience; inference reads the tables)."""
        return self.pairwise_tables().unary

    def unclamped(self) -> PottsModel:
        """The same model with no node clamped."""
        return dataclasses.replace(self, observed=jnp.zeros_like(self.observed))

    @classmethod
    def from_labels(
        cls, graph: Graph, labels, n_classes: int | None = None, *, beta: float = 1.0,
        clamp: bool = False, asymmetric: str = "warn",
    ) -> PottsModel:
        """The paper's two ways of holding the labelled data (Sec. 3.1).

        ``clamp=False`` (default, Bergamim & Breve Eqs. 11-12): no node is clamped; every
        labelled node carries the unit field theta of Eq. 4 (``label_field``), scaled by beta.
        On a row-normalised W (Eq. 9) mean field cannot flip those labels (Eqs. 18-20).
        ``clamp=True`` (Eq. 10): zero field, labelled nodes frozen at their labels (the form
        equivalent to GRF).

        ``labels``: int[n] with -1 for unlabelled; ``n_classes`` defaults to max label + 1.
        ``asymmetric``: as in :meth:`create` (a row-normalised W is directed).
        """
        labels = np.asarray(labels)
        if n_classes is None:
            n_classes = int(labels.max()) + 1
        if clamp:
            return cls.create(graph, n_classes, beta=beta, labels=labels, asymmetric=asymmetric)
        field = label_field(labels, n_classes)
        return cls.create(graph, n_classes, beta=beta, field=field,
                          labels=np.maximum(labels, -1), observed=np.zeros(labels.shape, bool),
                          asymmetric=asymmetric)

    def with_beta(self, beta) -> PottsModel:
        """The same model at another inverse temperature ``beta`` (a finite number >= 0; a
        traced one, e.g. a numpyro program's sample, is checked for its shape only)."""
        check_scalar(beta, "beta")
        return dataclasses.replace(self, beta=jnp.asarray(beta, dtype=self.beta.dtype))


def _scaled(beta, table) -> jax.Array:
    """``beta * table``: on the host for concrete arrays (the same IEEE products; run eagerly
    in JAX, each product is compiled for every new shape), in JAX for traced ones."""
    if isinstance(beta, jax.core.Tracer) or isinstance(table, jax.core.Tracer):
        return beta * table
    return alike(np.asarray(beta) * np.asarray(table), table)


def _symmetric(graph: Graph, asymmetric: str) -> tuple[Graph, Graph | None]:
    """``(symmetric graph, directed graph or None)`` following ``asymmetric``."""
    if graph.is_symmetric():
        return graph, None
    message = ("graph: the weights are not symmetric (W_ij != W_ji, e.g. graph.row_normalize's "
               "output); the Potts couplings are symmetrised to (W_ij + W_ji) / 2, the pair "
               "weight of the energy. Pass graphssl.graph.symmetrize(graph, 'mean') (or "
               "asymmetric='symmetrize') to do this explicitly")
    if asymmetric == "raise":
        raise ValueError(message)
    if asymmetric == "warn":
        warn_user(message, UserWarning)
    from graphssl.graph import symmetrize

    sym = symmetrize(graph, "mean")
    sym = dataclasses.replace(sym, weights=alike(sym.weights, graph.weights,
                                                 graph.weights.dtype))
    return sym, graph


def _graph_bond_slots(graph: Graph) -> np.ndarray:
    """``bond_slots(graph.padded_neighbors()[0])`` from the edge list on the host (NumPy
    only, so ``create`` also works while a caller traces: ``jnp`` arrays are then tracers):
    the slot of edge ``e`` is its rank among its sender's edges, as ``padded_neighbors``
    lays them out; pairs with ``receiver > sender`` are kept."""
    senders = np.asarray(graph.senders).astype(np.int64)
    receivers = np.asarray(graph.receivers)
    slot, counts = edge_slots(senders, graph.n_nodes)
    d_max = max(int(counts.max()) if counts.size else 0, 1)
    flat = np.sort((senders * d_max + slot)[receivers > senders])
    return flat.astype(np.int32 if graph.n_nodes * d_max < 2**31 else np.int64)


def _in_slots(graph: Graph, table_graph: Graph) -> jax.Array:
    """The weights of ``graph`` laid out in the slots of ``table_graph.padded_neighbors()``
    (whose edges include ``graph``'s; built in NumPy from the edge list, as there); 0 where
    ``graph`` has no edge i -> j."""
    senders = np.asarray(table_graph.senders).astype(np.int64)
    n = table_graph.n_nodes
    slot, counts = edge_slots(senders, n)
    d = max(int(counts.max()) if counts.size else 0, 1)
    index = np.repeat(np.arange(n)[:, None], d, axis=1)
    index[senders, slot] = np.asarray(table_graph.receivers)
    W = graph.to_scipy().tocsr()
    rows = np.repeat(np.arange(n), d)
    values = np.asarray(W[rows, index.reshape(-1)]).reshape(n, d)
    values[index == np.arange(n)[:, None]] = 0.0
    return alike(values, graph.weights, np.asarray(graph.weights).dtype)


def _link_isolated(X, k, graph, method, knn_search, sigma_kth_neighbor) -> Graph:
    """Add an edge (both directions) from every isolated node to its nearest neighbour."""
    lonely = np.flatnonzero(np.asarray(graph.degrees()) == 0)
    if lonely.size == 0:
        return graph
    index, distance = knn_search(X, k, method=method)
    sigma = sigma_kth_neighbor(distance)
    near, d = index[lonely, 0], distance[lonely, 0]
    w = np.maximum(np.exp(-(d**2) / (2.0 * sigma**2)), np.finfo(np.float64).tiny)
    W = graph.to_scipy().tolil()
    W[lonely, near] = w
    W[near, lonely] = np.maximum(np.asarray(W[near, lonely].toarray()).ravel(), w)
    return Graph.from_scipy(W.tocsr())


def reconnect_unreached(graph: Graph, union: Graph, observed) -> tuple[Graph, int]:
    """``graph`` plus the edges of ``union`` at the nodes ``graph`` leaves unreached.

    The mutual kNN graph of Eq. 8 keeps an edge only when each end is among the other's
    neighbours; a point without a mutual neighbour, or a small clique of them, ends up in a
    connected component without a labelled node, where no label reaches it (on wine with 10
    labels a class: 21 of 148 unlabelled points; breast_cancer 57). Such a node gets back its
    edges of ``union`` (the union kNN graph, ``symmetrize="max"``, same weights), so the
    labels reach it; every other edge stays mutual. A node still unreached in ``union`` stays
    so (its whole union component is unlabelled).

    Args:
      graph: the symmetric (mutual kNN) graph.
      union: a symmetric graph on the same nodes whose edges include ``graph``'s.
      observed: ``bool[n]`` labelled nodes.
    Returns:
      ``(graph, n_reconnected)``: the graph (``graph`` itself when nothing was unreached)
      and how many nodes were unreached in it.
    """
    from graphssl.graph import unreached_nodes

    unreached = unreached_nodes(graph, np.asarray(observed, bool))
    if not unreached.any():
        return graph, 0
    W, U = graph.to_scipy().tocsr(), union.to_scipy().tocoo()
    keep = unreached[U.row] | unreached[U.col]
    extra = sp.csr_matrix((U.data[keep], (U.row[keep], U.col[keep])), shape=W.shape)
    return (Graph.from_scipy(sp.csr_matrix(W.maximum(extra)), on_host=graph.on_host),
            int(unreached.sum()))


def label_field(labels, n_classes: int) -> np.ndarray:
    """The field theta of Eq. 4: ``theta_{i,s} = 1`` if node i is labelled ``s``, else 0.

    ``labels``: int[n] with -1 for unlabelled. Returns float64[n, n_classes].
    """
    labels = np.asarray(labels)
    if labels.ndim != 1 or np.any(labels < -1) or np.any(labels >= n_classes):
        raise ValueError(
            f"labels: expected a 1-D array of -1 (unlabelled) or 0..{n_classes - 1}"
        )
    theta = np.zeros((labels.size, n_classes))
    rows = np.flatnonzero(labels >= 0)
    theta[rows, labels[rows]] = 1.0
    return theta


def default_k(n_samples: int) -> int:
    """The paper's neighbour count ``k = log2 N`` (Sec. 5), rounded down, at least 2."""
    return max(2, int(np.log2(n_samples)))


def bergamim_breve_graph(X, k: int | None = None, *, normalize: str | None = "row",
                         isolated: str = "keep", method: str = "auto",
                         on_duplicates: str = "ignore") -> Graph:
    """The similarity graph of Bergamim & Breve Sec. 2.2, composed from ``graphssl.graph``.

    kNN with ``k`` (default ``log2 N``), Gaussian weights (Eq. 6) with
    ``sigma = mean k-th neighbour distance / 3`` (Eq. 7), min-symmetrisation ``W_ij <-
    min(W_ij, W_ji)`` (Eq. 8, mutual kNN), then

    * ``normalize="row"``: ``W_ij / sum_l W_il`` (Eq. 9; directed result) — the paper;
    * ``normalize="symmetric"``: ``D^-1/2 W D^-1/2`` — what the authors' released
      ``rbf_similarity.py`` does (symmetric, rows do not sum to 1);
    * ``normalize=None``: the symmetric W of Eq. 8.

    Min-symmetrisation keeps mutual neighbours only, so points without one are isolated
    (8 % of twonorm, 27 % of KEEL's ringnorm at k = log2 N): no label reaches them and every
    method leaves them uniform. ``isolated="keep"`` is the paper's graph;
    ``isolated="nearest"`` (beyond the paper) links each isolated point to its nearest
    neighbour with the Gaussian weight of Eq. 6.
    """
    from graphssl.graph import knn_graph, knn_search, row_normalize, sigma_kth_neighbor

    X = np.asarray(X)
    k = default_k(X.shape[0]) if k is None else k
    if isolated not in ("keep", "nearest"):
        raise ValueError(f"isolated: use 'keep' or 'nearest', got {isolated!r}")
    graph = knn_graph(X, k, symmetrize="min", weight="gaussian", sigma="kth_over_3",
                      method=method, on_duplicates=on_duplicates)
    if isolated == "nearest":
        graph = _link_isolated(X, k, graph, method, knn_search, sigma_kth_neighbor)
    if normalize == "row":
        return row_normalize(graph)
    if normalize == "symmetric":
        deg = np.asarray(graph.degrees())
        inv = np.where(deg > 0, 1.0 / np.sqrt(np.where(deg > 0, deg, 1.0)), 0.0)
        w = graph.weights * inv[np.asarray(graph.senders)] * inv[np.asarray(graph.receivers)]
        return dataclasses.replace(graph, weights=jnp.asarray(w))
    if normalize is None:
        return graph
    raise ValueError(f"normalize: use 'row', 'symmetric' or None, got {normalize!r}")


POTTS_DATA_FIELDS = (
    "graph",
    "beta",
    "field",
    "observed",
    "labels",
    "neighbor_index",
    "neighbor_weight",
    "directed_weight",
    "bond_slots",
)  # subclasses (e.g. BoltzmannMRF) register these plus their own

jax.tree_util.register_dataclass(
    PottsModel,
    data_fields=list(POTTS_DATA_FIELDS),
    meta_fields=["n_classes"],
)
