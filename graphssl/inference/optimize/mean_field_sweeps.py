"""The sweeps of the naive mean field (Bergamim & Breve 2022, Eq. 16, Alg. 3.1): the
compiled fixed-point loops behind :func:`graphssl.inference.optimize.mean_field.solve_mean_field`
and the node orderings they use. Each solver is a pure function of its arrays,
``(unary, neighbor_index, neighbor_weight, clamped, clamp_onehot, fields0, ...) ->
(fields, sweeps, residual)``; the loop state (fields, and for the Gauss-Seidel orders the
marginals) lives in the ``lax.while_loop`` carry only.

Three update orders, all JIT-compiled, in log space (``phi = exp(h - logsumexp h)``, so no
overflow or NaN at any beta):

* ``"sequential"`` (Gauss-Seidel): a ``lax.fori_loop`` over nodes; node i reads the
  already-updated marginals of nodes < i through the padded neighbour table. This order
  never shows the period-2 cycles of the synchronous update.
* ``"parallel"`` (Jacobi) with damping: ``h <- h + damping (F(h) - h)``. ``damping = 1`` is
  the paper's synchronous Alg. 3.1 (which the authors' C/OpenMP code runs, and which can
  oscillate with period 2 at large beta); ``damping = 0.5`` damps most of those cycles away.
  Not all: at nmfB's beta (34.6) on a row-normalised 5000-node manifold kNN graph, 14
  nodes at a boundary between two label domains kept |Delta h| up to 19.5 after 2000
  damped sweeps, and halving the step whenever the residual stalled did not remove it (a
  limit cycle of the non-symmetric coupling), while the sequential sweep converged in 10.
* ``"chromatic"`` (Gauss-Seidel by colour classes): the nodes are coloured once (greedy
  colouring of the undirected neighbour structure, :func:`mean_field_coloring`) so that no
  two nodes of a class read each other; one sweep updates the classes in turn, each class
  all at once. Updating a class at once equals updating its nodes one after another (none
  reads another's marginals), so a chromatic sweep *is* a sequential Gauss-Seidel sweep in
  the node order "class by class": it keeps the sequential sweep's convergence (no period-2
  cycles) with the parallel update's data parallelism -- the order for accelerators. Its
  fixed point may differ from the natural-order sweep's at large beta (visiting order).

The gather of neighbour rows ``phi[nbr[i, d]]`` misses the cache at nearly every step when the
nodes come in random order (a kNN graph of shuffled points). ``options.reorder = True``
renumbers the nodes by reverse Cuthill-McKee (scipy) before solving and back afterwards, so
neighbours sit close in memory: the gather of Eq. 16 ran 3.0-3.7x faster at N = 10^6, k = 19,
q = 10 (``benchmarks/bench_potts_sweep.py``), but a whole sweep only 0.7-1.2x (two runs):
XLA's CPU while loop, not memory traffic, dominates it today (1.1-1.3 s against 0.46-0.53 s
for the same sweep jitted on its own). The parallel update computes the same numbers in
either numbering. The sequential sweep is not renumbered: its visiting order decides which
fixed point it reaches at large beta (a band order from RCM reached another one on a
2*10^4-node kNN graph), so ``reorder`` applies to ``order="parallel"`` only.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

__all__ = ["locality_order", "mean_field_coloring", "mean_field_fields"]

_UNROLL_MAX_DEGREE = 64


def locality_order(neighbor_index) -> np.ndarray:
    """A node order that puts graph neighbours close in memory: reverse Cuthill-McKee of the
    (symmetrised) pattern of the padded neighbour table ``int[n, d]``. Returns ``perm`` with
    ``new node t = old node perm[t]``."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    index = np.asarray(neighbor_index)
    n, d = index.shape
    rows = np.repeat(np.arange(n, dtype=np.int32), d)
    pattern = csr_matrix((np.ones(n * d, np.int8), (rows, index.ravel())), shape=(n, n))
    return np.asarray(reverse_cuthill_mckee(pattern, symmetric_mode=False))


def _log_softmax_clamped(fields, clamped, clamp_onehot):
    """ln phi = h - ln Z (Eq. 15), replaced by ln(one-hot) on clamped rows."""
    log_phi = fields - logsumexp(fields, axis=-1, keepdims=True)
    return jnp.where(clamped[..., None], jnp.log(clamp_onehot), log_phi)


def mean_field_fields(marginals, unary, neighbor_index, neighbor_weight):
    """The right-hand side of Eq. 16: ``h_i(s) = u_i(s) + sum_d w[i, d] phi[nbr[i, d], s]``.

    Shapes: ``marginals, unary [n, q]``, ``neighbor_index int[n, d]``,
    ``neighbor_weight [n, d]``.
    """
    d = neighbor_index.shape[1]
    if d <= _UNROLL_MAX_DEGREE:  # one [n, q] gather per neighbour slot: 4x faster on CPU
        acc = unary                 # than materialising the [n, d, q] gather
        for k in range(d):
            acc = acc + neighbor_weight[:, k, None] * marginals[neighbor_index[:, k]]
        return acc

    def slot(k, acc):
        return acc + neighbor_weight[:, k, None] * marginals[neighbor_index[:, k]]

    return jax.lax.fori_loop(0, d, slot, unary)


@partial(jax.jit, static_argnames=("max_iter",))
def _solve_parallel(unary, neighbor_index, neighbor_weight, clamped, clamp_onehot, fields0,
                    damping, tol, max_iter):
    free = ~clamped[:, None]

    def residual_of(fields):
        phi = jnp.exp(_log_softmax_clamped(fields, clamped, clamp_onehot))
        new = mean_field_fields(phi, unary, neighbor_index, neighbor_weight)
        return new, jnp.max(jnp.where(free, jnp.abs(new - fields), 0.0))

    def cond(carry):
        t, _, res = carry
        return (t < max_iter) & (res >= tol)

    def body(carry):
        t, fields, _ = carry
        new, res = residual_of(fields)
        return t + 1, fields + damping * (new - fields), res

    init = (jnp.asarray(0, jnp.int32), fields0, jnp.asarray(jnp.inf, fields0.dtype))
    t, fields, res = jax.lax.while_loop(cond, body, init)
    return fields, t, res


@partial(jax.jit, static_argnames=("max_iter",))
def _solve_sequential(unary, neighbor_index, neighbor_weight, clamped, clamp_onehot, fields0,
                      tol, max_iter):
    n, q = unary.shape
    # One packed carry [fields | phi | change] per node: XLA's CPU while-loop updates a
    # single array in place, while a tuple carry was copied whole at every node (50x slower).

    def node_update(i, packed):
        row = jax.lax.dynamic_index_in_dim(neighbor_index, i, keepdims=False)
        phi_nb = jnp.take(packed, row, axis=0)[:, q:2 * q]
        w_i = jax.lax.dynamic_index_in_dim(neighbor_weight, i, keepdims=False)
        u_i = jax.lax.dynamic_index_in_dim(unary, i, keepdims=False)
        h_i = u_i + w_i @ phi_nb
        c_i = jax.lax.dynamic_index_in_dim(clamped, i, keepdims=False)
        onehot_i = jax.lax.dynamic_index_in_dim(clamp_onehot, i, keepdims=False)
        phi_i = jnp.where(c_i, onehot_i, jnp.exp(h_i - logsumexp(h_i)))
        old = jax.lax.dynamic_slice(packed, (i, 0), (1, q))[0]
        change = jnp.where(c_i, 0.0, jnp.max(jnp.abs(h_i - old)))
        new_row = jnp.concatenate([h_i, phi_i, change[None]])[None]
        return jax.lax.dynamic_update_slice(packed, new_row, (i, 0))

    def cond(carry):
        t, _, res = carry
        return (t < max_iter) & (res >= tol)

    def body(carry):
        t, packed, _ = carry
        packed = jax.lax.fori_loop(0, n, node_update, packed)
        return t + 1, packed, jnp.max(packed[:, -1])

    phi0 = jnp.exp(_log_softmax_clamped(fields0, clamped, clamp_onehot))
    packed0 = jnp.concatenate([fields0, phi0, jnp.zeros((n, 1), fields0.dtype)], axis=1)
    init = (jnp.asarray(0, jnp.int32), packed0, jnp.asarray(jnp.inf, fields0.dtype))
    t, packed, res = jax.lax.while_loop(cond, body, init)
    return packed[:, :q], t, res


def mean_field_coloring(neighbor_index) -> np.ndarray:
    """Colour classes for ``order="chromatic"``: ``int32[n]`` colours such that no node reads
    (through ``neighbor_index``, in either direction) a node of its own colour.

    :func:`graphssl.inference.coloring.table_coloring` of the padded table (padding slots
    hold the node itself and are skipped). A one-off host cost; pass the result as
    ``colors`` to reuse it.
    """
    from graphssl.inference.coloring import table_coloring

    return table_coloring(neighbor_index)


@partial(jax.jit, static_argnames=("bounds", "max_iter"))
def _solve_chromatic(unary, neighbor_index, neighbor_weight, clamped, clamp_onehot, fields0,
                     bounds, tol, max_iter):
    # nodes renumbered so that colour class c is the contiguous range bounds[c]:bounds[c+1]:
    # its tables are slices, its update one in-place slice write (no gathers or scatters)
    ranges = list(zip(bounds[:-1], bounds[1:], strict=True))

    def cond(carry):
        t, _, _, res = carry
        return (t < max_iter) & (res >= tol)

    def body(carry):
        t, fields, phi, _ = carry
        res = jnp.zeros((), fields.dtype)
        for start, stop in ranges:
            clamped_c = clamped[start:stop]
            h = mean_field_fields(phi, unary[start:stop], neighbor_index[start:stop],
                                  neighbor_weight[start:stop])
            change = jnp.where(clamped_c[:, None], 0.0, jnp.abs(h - fields[start:stop]))
            res = jnp.maximum(res, jnp.max(change))
            fields = jax.lax.dynamic_update_slice_in_dim(fields, h, start, axis=0)
            new_phi = jnp.exp(_log_softmax_clamped(h, clamped_c, clamp_onehot[start:stop]))
            phi = jax.lax.dynamic_update_slice_in_dim(phi, new_phi, start, axis=0)
        return t + 1, fields, phi, res

    phi0 = jnp.exp(_log_softmax_clamped(fields0, clamped, clamp_onehot))
    init = (jnp.asarray(0, jnp.int32), fields0, phi0, jnp.asarray(jnp.inf, fields0.dtype))
    t, fields, _, res = jax.lax.while_loop(cond, body, init)
    return fields, t, res


def _renumber(arrays, perm):
    """The solver arrays with node ``perm[i]`` renamed ``i`` (neighbour indices remapped),
    and ``rank`` (``rank[old] = new``) to map the solution back."""
    rank = np.empty_like(perm)
    rank[perm] = np.arange(perm.size, dtype=perm.dtype)
    take = jnp.asarray(perm)
    arrays = tuple(a[take] for a in arrays)
    if isinstance(arrays[1], jax.core.Tracer):  # a traced table (jit): remap on the device
        index = jnp.asarray(rank, jnp.int32)[arrays[1]]
    else:
        index = jnp.asarray(rank[np.asarray(arrays[1])], jnp.int32)
    return (arrays[0], index, *arrays[2:]), rank


def _color_ranges(neighbor_index, colors, n):
    """``(perm, bounds)``: nodes sorted by colour (ascending index within a colour) and the
    class boundaries ``bounds[c]:bounds[c + 1]`` in that order; the colouring is checked
    (against a concrete ``neighbor_index``; a traced one, inside ``jax.jit``, is not read:
    the colours, which fix the compiled sweep's shape, must then be concrete)."""
    traced = isinstance(neighbor_index, jax.core.Tracer)
    if isinstance(colors, jax.core.Tracer) or (colors is None and traced):
        raise ValueError("colors: order='chromatic' inside jax.jit needs a concrete colouring "
                         "(it fixes the shape of the compiled sweep); compute colors = "
                         "mean_field_coloring(model.neighbor_index) outside jit and close "
                         "over it as a NumPy array (not a jit argument)")
    colors = mean_field_coloring(neighbor_index) if colors is None else np.asarray(colors)
    if colors.shape != (n,):
        raise ValueError(f"colors: expected one colour per node, shape ({n},), "
                         f"got {colors.shape}")
    if not np.issubdtype(colors.dtype, np.integer) or (colors.size and colors.min() < 0):
        raise ValueError(f"colors: expected integer colours >= 0 (dtype {colors.dtype}); pass "
                         "mean_field_coloring(neighbor_index) or None")
    if not traced:
        index = np.asarray(neighbor_index)
        rows = np.repeat(np.arange(n), index.shape[1])
        cols = index.reshape(-1)
        if np.any((colors[rows] == colors[cols]) & (rows != cols)):
            raise ValueError("colors: two neighbours share a colour; pass a proper colouring "
                             "(mean_field_coloring(neighbor_index)) or None")
    perm = np.argsort(colors, kind="stable")
    counts = np.bincount(colors)
    bounds = tuple(int(b) for b in np.concatenate([[0], np.cumsum(counts[counts > 0])]))
    return perm, bounds
