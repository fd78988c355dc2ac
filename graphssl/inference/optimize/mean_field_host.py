"""The Gauss-Seidel mean-field sweeps in NumPy / scipy, for graphs small enough that JAX's
fixed costs outweigh the sweep (Bergamim & Breve 2022, Eq. 16, Alg. 3.1).

Both Gauss-Seidel orders of :mod:`graphssl.inference.optimize.mean_field_sweeps` update the
nodes in turn, each node reading its neighbours' newest marginals. Nodes that do not read
each other can be updated at once without changing the result, so a sweep is a sequence of
*independent sets* ("stages"), each updated as one block ``h_S = u_S + W_S phi`` (one scipy
sparse product of the stage's rows of the coupling matrix), then ``phi_S = softmax(h_S)``:

* ``"sequential"`` (the node loop of Alg. 3.1, nodes in index order): the stages are the
  *levels* of the order -- ``level(i) = 1 + max level(j)`` over the neighbours ``j < i`` (0
  when there is none), :func:`sequential_levels`. A neighbour ``j < i`` sits in an earlier
  stage (node i reads its new marginals), a neighbour ``j > i`` in a later one (node i reads
  its old marginals): exactly what the node loop reads, so the fields are the node loop's
  (up to the order of the floating-point sums). A kNN graph of points in random order has
  20-30 levels at n = 10^3-10^4; an order that follows the graph (points sorted along a
  curve) can have ~n / k, then the compiled loop is used (``HOST_MAX_STAGES``).
* ``"chromatic"``: the stages are the colour classes.

Log space throughout (``phi = exp(h - max h) / sum``); stop when ``max |Delta h| < tol`` over
the free nodes (Alg. 3.1's ``epsilon``) or after ``max_iter`` sweeps.

Why hand-written and not the compiled sweep: on a graph of 10^3 nodes the sweep itself is
a few milliseconds, while a compiled solve in a new process first pays JAX's back-end start
(~30 ms: its plugin scan over the installed distributions), loading or compiling the
program (~25-40 ms with a warm cache, ~0.3 s cold) and moving the arrays. Measured on 2 CPU
cores (``benchmarks/bench_cost.py`` data: 10 Gaussian clusters, d = 32, k = log2 n, 1 %
labels), sequential order: 19 levels and 20 ms at n = 10^3, 26 levels and 84 ms at 10^4
(levels 12 ms, 6 sweeps), against 48 ms for the compiled node loop at 10^4 once loaded; at
10^5 the compiled sweeps win (0.97 s against 1.3 s), hence ``mean_field.HOST_MAX_NODES`` (10^4).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["HOST_MAX_STAGES", "sequential_levels", "solve_gauss_seidel_host", "stages_of"]

# more stages than this: each costs ~0.1 ms of NumPy call overhead per sweep, and the
# compiled node loop is faster (engine="auto" then compiles)
HOST_MAX_STAGES = 128


def sequential_levels(neighbor_index, max_levels: int | None = None) -> np.ndarray | None:
    """``int[n]`` stage of each node for the sequential (index-order) sweep: ``level(i) =
    1 + max level(j)`` over the nodes ``j < i`` that i reads or that read i (the padded
    table ``int[n, d]``, in either direction; padding slots hold the node itself), 0 when
    there is none. Nodes of one level share no table entry. Computed by relaxation, one
    vectorised pass over the edges per level; None once the order needs more than
    ``max_levels`` levels (the passes stop there)."""
    index = np.asarray(neighbor_index)
    n, d = index.shape
    rows = np.repeat(np.arange(n), d)
    cols = index.reshape(-1)
    keep = rows != cols
    later, earlier = np.maximum(rows[keep], cols[keep]), np.minimum(rows[keep], cols[keep])
    level = np.zeros(n, np.int64)
    passes = 0
    while max_levels is None or passes <= max_levels:
        new = np.zeros(n, np.int64)
        np.maximum.at(new, later, level[earlier] + 1)
        if np.array_equal(new, level):
            return level
        level, passes = new, passes + 1
    return None


def stages_of(labels) -> list[np.ndarray]:
    """The nodes of each stage ``0, 1, ...`` (colour or level), ascending within a stage."""
    labels = np.asarray(labels)
    order = np.argsort(labels, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(labels))])
    return [order[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]


def solve_gauss_seidel_host(unary, neighbor_index, neighbor_weight, clamped, clamp_onehot,
                            fields0, stages, tol: float, max_iter: int):
    """Eqs. 15-16 by stages of mutually independent nodes, in NumPy, in ``unary``'s dtype.

    Args:
      unary: ``u = beta theta``, ``[n, q]``.
      neighbor_index, neighbor_weight: padded coupling table ``J = beta W``, ``[n, d]``
        (padding slots: the node itself with weight 0).
      clamped: ``bool[n]``; clamp_onehot: ``[n, q]`` one-hot labels of the clamped nodes.
      fields0: ``h^(0)`` ``[n, q]``.
      stages: list of ``int[]`` node arrays covering every node once; no two nodes of a
        stage read each other; updated in this order (:func:`sequential_levels` /
        colour classes through :func:`stages_of`).
      tol, max_iter: Alg. 3.1's ``epsilon`` and ``t_max``.
    Returns:
      ``(fields [n, q], sweeps, residual)``: NumPy; the residual is the last sweep's
      ``max |Delta h|`` over the free nodes.
    """
    unary = np.asarray(unary)
    dtype = unary.dtype
    n, q = unary.shape
    # renumber so that every stage is a contiguous block: its rows are slices (views)
    perm = np.concatenate(stages) if stages else np.zeros(0, np.int64)
    rank = np.empty(n, np.int64)
    rank[perm] = np.arange(n)
    index = rank[np.asarray(neighbor_index)[perm]]
    rows = np.repeat(np.arange(n), index.shape[1])
    coupling = sp.csr_matrix((np.asarray(neighbor_weight, dtype)[perm].ravel(),
                              (rows, index.ravel())), shape=(n, n))
    clamped = np.asarray(clamped, bool)[perm]
    onehot = np.asarray(clamp_onehot, dtype)[perm]
    unary = unary[perm]
    fields = np.array(np.asarray(fields0, dtype)[perm])
    phi = np.where(clamped[:, None], onehot, _softmax(fields))
    blocks, start = [], 0
    for nodes in stages:
        stop = start + len(nodes)
        held = np.flatnonzero(clamped[start:stop])
        blocks.append((slice(start, stop), coupling[start:stop], held))
        start = stop
    sweeps, residual = 0, dtype.type(np.inf)
    # a stage is a few dozen rows: the loop body is NumPy call overhead, hence the in-place
    # operations and ufunc reductions (~45 us a stage on 2 CPU cores)
    while sweeps < max_iter and residual >= tol:
        residual = dtype.type(0)
        for block, rows_s, held in blocks:
            h = rows_s @ phi
            h += unary[block]
            change = h - fields[block]
            np.abs(change, out=change)
            fields[block] = h
            phi_s = _softmax_inplace(h)
            if held.size:
                change[held] = 0
                phi_s[held] = onehot[block][held]
            # np.maximum (not max): a NaN change makes the residual NaN, never converged
            residual = np.maximum(residual, np.maximum.reduce(change, axis=None))
            phi[block] = phi_s
        sweeps += 1
    return fields[rank], np.int32(sweeps), np.asarray(residual, dtype)


def _softmax(fields):
    """``exp(h - max h) / sum``, row-wise (Eq. 15; no overflow at any beta)."""
    return _softmax_inplace(np.array(fields))


def _softmax_inplace(fields):
    """:func:`_softmax` overwriting ``fields`` (``[m, q]``), which it returns."""
    fields -= np.maximum.reduce(fields, axis=1)[:, None]
    np.exp(fields, out=fields)
    fields /= np.add.reduce(fields, axis=1)[:, None]
    return fields
