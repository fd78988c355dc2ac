"""Gibbs samplers over node labels (Zhu & Ghahramani 2002, Sec. 3.2, Eq. (25)).

Both kernels draw ``y_i ~ P(y_i = c | Y_{-i}) ∝ exp(logits_ic)`` with the conditionals of the
pairwise law (P) of :mod:`graphssl.models.protocol`, derived from ``model.pairwise_tables()``
only (Eq. (25): ``logits_ic = h_i(c) + sum_{j != i, y_j = c} J_ij``). Clamped nodes
(``model.observed``) keep their labels; the unclamped phase of Boltzmann learning is
``model.unclamped()``. ``init`` and ``Kernel.check`` refuse a model whose tables are not a
valid (symmetric) description of (P).

* :func:`sequential_gibbs`: single-site updates in a fixed node order (``lax.scan``), the
  paper's scheme, exact for any model whose conditionals change after each update.
* :func:`chromatic_gibbs`: the graph is coloured once (:mod:`graphssl.inference.coloring`,
  host side); nodes of one colour
  share no edge, so their conditionals are independent given the rest and a whole colour
  class is drawn at once. One step = one sweep over all colours.

Chromatic layouts (``layout=``). ``"padded"`` computes the conditionals of each colour class
from the tables at their full width ``d_max`` (33 on the benchmark's kNN-like graph of mean
degree 18). ``"bucketed"`` (default on CPU) splits each colour class by degree into a few
buckets (:func:`degree_buckets`), each read only up to its own maximum degree, transposed
slot-major so the per-class sums vectorise over nodes, with labels held as int8 during the
sweep and the draw unrolled over classes
(:func:`~graphssl.inference.mcmc.kernels.sample_categorical_columns`). Both layouts draw from
the same conditionals (Eq. (25)); ``benchmarks/bench_samplers.py`` compares their speed.
``"stacked"`` (default on CPU for graphs of at most :data:`STACKED_MAX_NODES` nodes) pads every
colour class to the largest one and loops over the colours in one ``lax.fori_loop`` with the
bucketed layout's slot-major arithmetic at the full width: one compiled body whatever the
number of colours, where the two layouts above unroll one body per colour (and bucket), so
their programs, and their compilation time, grow with the graph's colouring.
"""

from __future__ import annotations

import functools
import itertools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from graphssl.inference.coloring import (
    check_coloring,
    color_classes,
    greedy_coloring,
    undirected_csr,
)
from graphssl.inference.mcmc.kernels import (
    Kernel,
    label_init,
    pairwise_check,
    pairwise_init,
    sample_categorical,
    sample_categorical_columns,
)
from graphssl.models.protocol import (
    conditional_logits_from_tables,
    is_traced,
    pairwise_tables,
)

__all__ = [
    "GibbsInfo",
    "sequential_gibbs",
    "chromatic_gibbs",
    "greedy_coloring",
    "color_classes",
    "degree_buckets",
]
LAYOUTS = ("auto", "bucketed", "padded", "stacked")
# "auto" on a CPU: stacked up to this many nodes, bucketed above. Measured by
# benchmarks/bench_samplers.py --only gibbs --n 300 / 2000 (2 CPU cores, XLA's default
# optimisation, kNN-like graph of mean degree 18, 9-10 colours; results/bench_samplers_gibbs_n*):
# first call (compilation + 200 sweeps) stacked 1.2-1.4 s against bucketed 4.4-7.1 s; sweeps at
# N = 300 x1.05 (q = 10) and x0.78 (q = 2) the bucketed rate, at N = 2000 x0.78 and x0.39. The
# compilation saved pays for ~2e5 slower sweeps at N = 300 but only ~2.4e4 at N = 2000, q = 2:
# hence the switch at 1024 nodes.
STACKED_MAX_NODES = 1024


class GibbsInfo(NamedTuple):
    """Info of a Gibbs sweep (sequential or chromatic): no fields, a Gibbs draw is always
    taken (no move statistics to record)."""


def _update(tables, observed, key, labels, nodes):
    """Draw ``nodes`` (no two interacting) from their conditionals; clamped nodes kept."""
    logits = conditional_logits_from_tables(tables, labels, nodes)
    draw = sample_categorical(key, logits).astype(labels.dtype)
    new = jnp.where(observed[nodes], labels[nodes], draw)
    return labels.at[nodes].set(new, indices_are_sorted=True, unique_indices=True)


def _sweep_label_dtype(q: int):
    """The narrowest integer type holding ``q`` classes: labels are held in it during a
    bucketed or stacked sweep (fewer bytes per neighbour label read)."""
    return jnp.int8 if q <= 127 else (jnp.int16 if q <= 32767 else jnp.int32)


def _stacked_classes(colors: np.ndarray) -> np.ndarray:
    """Colour classes as rows of ``int32[n_colours, width]``, ``width`` the largest class;
    short rows are padded with ``n, n + 1, ...`` (past the last node: read clipped, written
    never), so every row stays sorted and free of repeats."""
    classes = [c for c in color_classes(colors) if c.size]
    n = colors.shape[0]
    width = max(c.size for c in classes)
    pads = n + np.arange(width)
    return np.stack([np.concatenate([nodes, pads[:width - nodes.size]])
                     for nodes in classes]).astype(np.int32)


def _stacked_layout(tables, observed, classes):
    """The tables of :func:`_stacked_sweep`, per colour and slot-major like a bucket of
    :func:`degree_buckets` (at the full width ``d_max``): ``index_t int32[K, d, W]``,
    ``weight_t [K, d, W]``, ``unary_t [K, q, W]`` and ``keep bool[K, W]`` (clamped nodes and
    pad entries keep their label)."""
    n = tables.unary.shape[0]
    safe = jnp.minimum(classes, n - 1)
    index_t = jnp.swapaxes(tables.neighbor_index[safe], 1, 2)
    weight_t = jnp.swapaxes(tables.coupling[safe], 1, 2)
    unary_t = jnp.swapaxes(tables.unary[safe], 1, 2)
    keep = observed[safe] | (classes >= n)
    return index_t, weight_t, unary_t, keep


def _stacked_sweep(layout, key, labels, classes):
    """One chromatic sweep with the colour classes stacked (:func:`_stacked_classes`): a
    ``fori_loop`` over the K colours, each class drawn at once from its slot-major tables
    (``layout``, :func:`_stacked_layout`; the bucketed layout's arithmetic, int8 labels);
    pad entries read node ``n - 1`` and their writes are dropped."""
    index_t, weight_t, unary_t, keep = layout
    n, q = labels.shape[0], unary_t.shape[1]
    small = _sweep_label_dtype(q)
    keys = jax.random.split(key, classes.shape[0])

    def colour(c, lab):
        nodes = classes[c]
        old = lab[jnp.minimum(nodes, n - 1)]
        logits = _bucket_logits_t(lab, weight_t[c], unary_t[c], index_t[c])
        draw = sample_categorical_columns(keys[c], logits).astype(small)
        return lab.at[nodes].set(jnp.where(keep[c], old, draw), mode="drop",
                                 indices_are_sorted=True, unique_indices=True)

    lab = jax.lax.fori_loop(0, classes.shape[0], colour, labels.astype(small))
    return lab.astype(labels.dtype)


def _sequential_step(order, model, key, state):
    tables = pairwise_tables(model)  # once per sweep, outside the node loop
    observed = jnp.asarray(model.observed, dtype=bool)
    idx = (jnp.arange(model.n_nodes, dtype=jnp.int32) if order is None
           else jnp.asarray(order, dtype=jnp.int32))
    keys = jax.random.split(key, idx.shape[0])

    def body(labels, xs):
        node, k = xs
        return _update(tables, observed, k, labels, node[None]), None

    labels, _ = jax.lax.scan(body, state.labels, (idx, keys))
    return state._replace(labels=labels), GibbsInfo()


def sequential_gibbs(order: np.ndarray | None = None) -> Kernel:
    """Single-site Gibbs, one sweep per step in ``order`` (default ``0..n-1``), Eq. (25).

    Each node's conditional is recomputed after every single update (``lax.scan`` over the
    nodes), so it is exact for any pairwise model; cost per sweep is ``n`` single-node
    conditionals from the tables.
    """
    if order is None:
        return Kernel(pairwise_init, jax.tree_util.Partial(_sequential_step, None), None,
                      pairwise_check)
    values = np.asarray(order)
    if values.ndim != 1 or values.dtype.kind not in "iu":
        raise ValueError(f"order: a 1-D array of node indices, got shape {values.shape} of "
                         f"dtype {values.dtype}")
    order = values.astype(np.int32)
    step = jax.tree_util.Partial(_sequential_step, order)
    return Kernel(pairwise_init, step, None, functools.partial(_check_order, order))


def _check_order(order: np.ndarray, model) -> None:
    """A sweep visits every node once: ``order`` must be a permutation of ``0..n-1`` (an
    index past ``n`` was dropped and a missing node never updated, both silently)."""
    pairwise_check(model)
    n = int(model.n_nodes)
    if order.shape != (n,) or not np.array_equal(np.sort(order), np.arange(n)):
        raise ValueError(f"order: must be a permutation of 0..{n - 1} (every node of the "
                         f"model once), got {order.size} indices in "
                         f"[{order.min() if order.size else '-'}, "
                         f"{order.max() if order.size else '-'}]")


def degree_buckets(
    graph, colors: np.ndarray, n_buckets: int = 6, min_bucket_size: int = 2048
) -> list[list[tuple[np.ndarray, np.ndarray]]]:
    """Per colour class, its nodes split by degree into ``<= n_buckets`` equal-count buckets
    of at least ``min_bucket_size`` nodes (a bucket costs a fixed overhead per sweep, so small
    classes stay whole).

    Returns ``[[(rows int32[m] sorted, neighbours int32[width, m]), ...] per colour]``:
    ``neighbours[:, i]`` is the first ``width`` entries of row ``rows[i]`` of
    ``graph.padded_neighbors()`` (slot-major), ``width`` the largest out-degree in the bucket
    (at least 1), so every neighbour is included. The mean ``width`` over nodes is the table
    entries read per update.
    """
    if int(n_buckets) < 1:
        raise ValueError(f"n_buckets must be a positive integer, got {n_buckets!r}")
    index = np.asarray(graph.padded_neighbors()[0])
    degree = np.bincount(np.asarray(graph.senders), minlength=graph.n_nodes)
    plan = []
    for nodes in color_classes(colors):
        if nodes.size == 0:
            continue
        by_degree = nodes[np.argsort(degree[nodes], kind="stable")]
        buckets = []
        count = max(1, min(int(n_buckets), nodes.size // max(int(min_bucket_size), 1)))
        for part in np.array_split(by_degree, count):
            rows = np.sort(part).astype(np.int32)
            width = max(int(degree[rows].max()), 1)
            buckets.append((rows, np.ascontiguousarray(index[rows, :width].T)))
        plan.append(buckets)
    return plan


def bucket_logits(labels, coupling, unary, rows, neighbours) -> jax.Array:
    """Conditional logits of Eq. (25) for nodes ``rows``, class-major ``[q, len(rows)]``.

    ``(_, coupling, unary) = model.pairwise_tables()``; ``neighbours`` (``int32[width, m]``,
    from :func:`degree_buckets`) names the first ``width`` slots of each row, so only those
    columns of ``coupling`` are read: ``logits_ci = unary_ic + sum_d coupling_id
    [labels[neighbours_di] = c]``. The sum over slots is a loop of elementwise ``[q, m]``
    updates (vectorises over nodes on CPU; one fused reduction was 2.5x slower).
    """
    return _bucket_logits_t(labels, *_bucket_layout(coupling, unary, rows, neighbours),
                            neighbours)


def _bucket_layout(coupling, unary, rows, neighbours):
    """A bucket's couplings and fields, class-major: ``coupling[rows, :width].T``
    (``width`` = the bucket's neighbour slots) and ``unary[rows].T``."""
    rows = jnp.asarray(rows)
    return coupling[rows, :neighbours.shape[0]].T, unary[rows].T


@jax.tree_util.register_pytree_node_class
class PreparedModel:
    """A model with one chromatic kernel's per-bucket tables attached (``Kernel.prepare``):
    every attribute is the wrapped model's, so any kernel can still use it."""

    def __init__(self, model, tables, token: int):
        self.model, self.tables, self.token = model, tables, token

    def __getattr__(self, name):
        if name in ("model", "tables", "token"):
            raise AttributeError(name)
        return getattr(self.model, name)

    def tree_flatten(self):
        return (self.model, self.tables), self.token

    @classmethod
    def tree_unflatten(cls, token, children):
        return cls(*children, token)


def _own_tables(model, token):
    """The tables a kernel's ``prepare`` attached (None if the model was not prepared)."""
    while isinstance(model, PreparedModel):
        if model.token == token:
            return model.tables
        model = model.model
    return None


def _chromatic_prepare(tables, model, *, token):
    """Once per run instead of once per sweep: the padded layout computes the model's tables;
    the bucketed one gathers couplings and fields into each bucket's class-major layout
    (:func:`_bucket_layout`), the stacked one into each colour's (:func:`_stacked_layout`)."""
    plan, _, stacked = tables
    t = pairwise_tables(model)
    if stacked is not None:
        observed = jnp.asarray(model.observed, dtype=bool)
        return PreparedModel(model, _stacked_layout(t, observed, stacked), token)
    if plan is None:
        return PreparedModel(model, t, token)
    observed = jnp.asarray(model.observed, dtype=bool)
    gathered = [(*_bucket_layout(t.coupling, t.unary, rows, neighbours), observed[rows])
                for colour in plan for rows, neighbours in colour]
    return PreparedModel(model, gathered, token)


def _bucket_logits_t(labels, weight_t, unary_t, neighbours) -> jax.Array:
    """:func:`bucket_logits` on tables already in bucket layout: ``weight_t [width, m]``,
    ``unary_t [q, m]``."""
    neighbour_labels = labels[jnp.asarray(neighbours)]  # [width, m]
    classes = jnp.arange(unary_t.shape[0], dtype=labels.dtype)[:, None]

    def add_slot(d, total):
        slot_labels = jax.lax.dynamic_index_in_dim(neighbour_labels, d, keepdims=False)
        slot_weight = jax.lax.dynamic_index_in_dim(weight_t, d, keepdims=False)
        return total + jnp.where(slot_labels[None, :] == classes, slot_weight[None, :], 0.0)

    return jax.lax.fori_loop(0, neighbours.shape[0], add_slot, unary_t.astype(weight_t.dtype))


def _bucketed_sweep(model, key, labels, plan, d_max, token=None):
    tables = pairwise_tables(model)
    coupling, unary = tables.coupling, tables.unary
    if coupling.shape[1] != d_max:
        raise ValueError(
            f"graph: the model's neighbour table has width {coupling.shape[1]} but the graph "
            f"given to chromatic_gibbs has maximum degree {d_max}; build the kernel from the "
            "model's own graph (chromatic_gibbs(model.graph))"
        )
    q = unary.shape[1]
    small = _sweep_label_dtype(q)
    lab = labels.astype(small)
    observed = jnp.asarray(model.observed, dtype=bool)
    buckets = [b for colour in plan for b in colour]
    gathered = _own_tables(model, token)
    for b, ((rows, neighbours), k) in enumerate(
            zip(buckets, jax.random.split(key, len(buckets)), strict=True)):
        if gathered is None:
            logits = bucket_logits(lab, coupling, unary, rows, neighbours)
            observed_rows = observed[rows]
        else:
            weight_t, unary_t, observed_rows = gathered[b]
            logits = _bucket_logits_t(lab, weight_t, unary_t, neighbours)
        draw = sample_categorical_columns(k, logits).astype(small)
        new = jnp.where(observed_rows, lab[rows], draw)
        lab = lab.at[rows].set(new, indices_are_sorted=True, unique_indices=True)
    return lab.astype(labels.dtype)


def _chromatic_check(colors, index, model) -> None:
    """``Kernel.check`` of :func:`chromatic_gibbs`: valid tables (:func:`pairwise_check`),
    a colouring that separates every coupled pair of the model, and (bucketed layout,
    ``index`` given) the model's table in the kernel graph's slot order."""
    pairwise_check(model)
    t = pairwise_tables(model)
    model_index = np.asarray(t.neighbor_index)
    if index is not None and not np.array_equal(model_index, index):
        raise ValueError(
            "graph: the model's neighbour table differs from that of the graph given to "
            "chromatic_gibbs; build the kernel from the model's own graph "
            "(chromatic_gibbs(model.graph)) or pass layout='padded'"
        )
    check_coloring(colors, model_index, t.coupling)


def chromatic_gibbs(
    graph, colors: np.ndarray | None = None, *, layout: str = "auto", n_buckets: int = 6
) -> Kernel:
    """Chromatic (colour-class block) Gibbs: one sweep updates each colour class at once.

    Args:
      graph: the interaction graph (every pair with a coupling must be an edge), coloured once
        by :func:`~graphssl.inference.coloring.greedy_coloring` unless ``colors`` (a proper
        colouring, ``int[n]``) is given. Use the model's own graph (``model.graph``).
      layout: ``"bucketed"``: degree buckets of :func:`degree_buckets` read from
        ``model.pairwise_tables()`` (the model's table must be ``graph``'s);
        ``"padded"``: the conditionals of each colour class from the full-width tables;
        ``"stacked"``: the colour classes padded to one width and looped over in one
        ``fori_loop``, each drawn with the bucketed layout's slot-major arithmetic at the full
        width ``d_max`` (a program of one size whatever the colouring);
        ``"auto"`` (default): on a CPU stacked up to :data:`STACKED_MAX_NODES` nodes and
        bucketed above (2.5x the padded rate at N = 10^5, q = 10); padded on an accelerator
        (there the per-bucket launches cost more than the padding saves: 1.2e9 vs 0.42e9
        updates/s at N = 10^7, q = 10 on an H100, ``bench_samplers_gpu.json``).
      n_buckets: degree buckets per colour class (bucketed layout; 6: 2.05-2.11e7 vs 4:
        1.88e7 updates/s at N = 10^5, q = 10 on 2 CPU cores, same run).
    Exact for pairwise models: nodes of one colour are conditionally independent. ``init``
    (when not traced) and ``Kernel.check`` refuse a model whose coupled pairs the colouring
    does not separate, or whose tables are invalid (:func:`_chromatic_check`).
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if isinstance(n_buckets, bool) or int(n_buckets) != n_buckets or n_buckets < 1:
        raise ValueError(f"n_buckets must be a positive integer, got {n_buckets!r}")
    if layout == "auto":
        on_cpu = jax.default_backend() == "cpu"
        layout = ("padded" if not on_cpu else
                  "stacked" if graph.n_nodes <= STACKED_MAX_NODES else "bucketed")
    if colors is None:
        colors = greedy_coloring(graph)
    colors = np.asarray(colors)
    if colors.shape != (graph.n_nodes,):
        raise ValueError(f"colors must have shape ({graph.n_nodes},), got {colors.shape}")
    indptr, nbrs = undirected_csr(graph)
    if np.any(colors[np.repeat(np.arange(graph.n_nodes), np.diff(indptr))] == colors[nbrs]):
        raise ValueError("colors is not a proper colouring of graph; pass colors=None")
    classes = [jnp.asarray(c) for c in color_classes(colors) if c.size]
    plan = degree_buckets(graph, colors, n_buckets) if layout == "bucketed" else None
    index = np.asarray(graph.padded_neighbors()[0]) if plan is not None else None
    d_max = index.shape[1] if plan is not None else 0
    check = functools.partial(_chromatic_check, colors, index)

    def init(model, key, labels=None):
        if not is_traced(model):
            check(model)
        return label_init(model, key, labels)

    # the tables are the step's bound arguments (pytree leaves), not constants of the program
    stacked = jnp.asarray(_stacked_classes(colors)) if layout == "stacked" else None
    tables = (None if plan is None else
              [[(jnp.asarray(rows), jnp.asarray(nb)) for rows, nb in colour] for colour in plan],
              classes, stacked)
    token = next(_TOKENS)
    step = jax.tree_util.Partial(functools.partial(_chromatic_step, d_max=d_max, token=token),
                                 tables)
    prepare = jax.tree_util.Partial(functools.partial(_chromatic_prepare, token=token), tables)
    return Kernel(init, step, prepare, check)


_TOKENS = itertools.count()


def _chromatic_step(tables, model, key, state, *, d_max, token):
    plan, classes, stacked = tables
    if plan is not None:
        labels = _bucketed_sweep(model, key, state.labels, plan, d_max, token)
        return state._replace(labels=labels), GibbsInfo()
    t = _own_tables(model, token)
    observed = jnp.asarray(model.observed, dtype=bool)
    if stacked is not None:
        layout = t if t is not None else _stacked_layout(pairwise_tables(model), observed,
                                                          stacked)
        labels = _stacked_sweep(layout, key, state.labels, stacked)
        return state._replace(labels=labels), GibbsInfo()
    t = pairwise_tables(model) if t is None else t
    labels = state.labels
    for nodes, k in zip(classes, jax.random.split(key, len(classes)), strict=False):
        labels = _update(t, observed, k, labels, nodes)
    return state._replace(labels=labels), GibbsInfo()
