"""The model protocols of graphssl: the one place they are defined, with their equations.

Two kinds of label model reach the inference code.

**Pairwise label models** (:class:`PairwiseLabelModel`: the Potts model, the Boltzmann MRF)
put a law on the labels ``y in {0..q-1}^n``

    log p(y) = sum_{i<j} J_ij [y_i = y_j] + sum_i h_i(y_i) + const,        (P)

conditioned on the clamped nodes (``observed``) holding ``labels``. The model describes (P)
by one thing only, its :class:`PairwiseTables` (``pairwise_tables()``): a padded neighbour
table ``neighbor_index int32[n, d]``, the couplings ``coupling float[n, d]`` (``J_ij`` in logit
units at slot ``(i, d)`` with ``neighbor_index[i, d] = j``; 0 on padding, which holds the
node itself) and the field ``unary float[n, q]`` (``h_i(c)`` in logit units). Every
quantity a sampler or optimiser needs is derived from the tables by the pure functions of
this module, never re-implemented by a model:

* the energy ``E(y) = -log p(y) + const`` (:func:`pairwise_energy`; ``+inf`` off the clamped
  labels), which ``model.energy`` returns and which exact enumeration, ``sample_chains`` and
  every Metropolis–Hastings move read;
* the single-site conditionals (Zhu & Ghahramani Eq. 25, Bergamim & Breve Eq. 16 with point
  masses) ``log p(y_i = c | y_-i) = h_i(c) + sum_d J_{i,d} [y_{nbr(i,d)} = c] + const``
  (:func:`pairwise_conditional_logits`), read by Gibbs sampling and ICM;
* the Swendsen–Wang bonds (Zhu & Ghahramani Eq. 34): every unordered pair ``i < j`` with
  ``J_ij > 0`` bonds with probability ``1 - exp(-J_ij)`` between equal labels
  (:func:`bond_list`), the clusters then drawn from the summed field (Eq. 35).

(P) sums over unordered pairs, so the tables must hold ``J_ij = J_ji`` (each pair stored in
both rows). The conditionals read row ``i`` only: with an asymmetric table they would be
those of another law than the energy. :func:`check_pairwise_tables` refuses such tables with a
``ValueError``; every generic kernel runs it on concrete models (``Kernel.check``, called by
``sample_chains``, and ``init`` when not traced). ``PottsModel.create`` symmetrises an
asymmetric weight matrix (with a warning) so that its tables always pass.

``directed_coupling`` (optional, ``None`` for a symmetric model) is *not* part of (P): it is
the weight matrix as given when that was directed (Bergamim & Breve's row-normalised W, Eq. 9),
in the same slots, read only by their naive mean field (Eq. 16 sums ``W_ij phi_j`` along
out-edges, which is no variational mean field of (P) when ``W`` is directed).

**Models that bring their own kernels** (:class:`ModelWithOwnKernels`: the Dirichlet
diffusion mixture, Boltzmann learning's extended model with its doubled field) have latent
structure beyond a pairwise table. They expose ``energy(labels)`` (``-log p(y) + const``,
``+inf`` where impossible), ``n_nodes``, ``n_classes``, ``observed`` and ``labels``, so that
exact enumeration, ``sample_chains`` (MAP tracking) and the generic Metropolis–Hastings moves
(e.g. the label permutation) work on them, and ship their own ``Kernel`` factories for the
rest; the generic Gibbs and Swendsen–Wang kernels refuse them (no ``pairwise_tables``).
"""

from __future__ import annotations

from typing import NamedTuple, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "PairwiseTables",
    "PairwiseLabelModel",
    "ModelWithOwnKernels",
    "pairwise_tables",
    "pairwise_energy",
    "pair_agreement",
    "pairwise_conditional_logits",
    "conditional_logits_from_tables",
    "bond_list",
    "bond_slots",
    "check_pairwise_tables",
    "is_traced",
]

_DENSE_MAX_CLASSES = 4


class PairwiseTables(NamedTuple):
    """The description of law (P) (module docstring).

    Attributes:
      neighbor_index: ``int32[n, d]``, the neighbours of node ``i`` in row ``i``; padding
        slots hold ``i`` itself.
      coupling: ``float[n, d]``, ``J_ij`` (logit units, ``beta W_ij`` for a Potts model) in
        the slot of ``j`` in row ``i``; 0 on padding; ``J_ij = J_ji`` required.
      unary: ``float[n, q]``, the field ``h_i(c)`` in logit units (``beta theta``).
      directed_coupling: ``None``, or ``float[n, d]``: the directed weights the model was
        built from (same slots), read only by the Bergamim–Breve mean field; not part of (P).
      bond_slots: ``None``, or ``int[m]``: a cache of :func:`bond_slots` ``(neighbor_index)``
        (derived, not a description: :func:`check_pairwise_tables` verifies it), so that
        Swendsen–Wang reads the ``m = E / 2`` pairs instead of all ``n * d`` slots.
    """

    neighbor_index: jax.Array
    coupling: jax.Array
    unary: jax.Array
    directed_coupling: jax.Array | None = None
    bond_slots: jax.Array | None = None


@runtime_checkable
class PairwiseLabelModel(Protocol):
    """A label model with law (P): ``log p(y) = sum_{i<j} J_ij [y_i=y_j] + sum_i h_i(y_i)``,
    clamped nodes held at ``labels``. ``energy`` must be :func:`pairwise_energy`."""

    n_nodes: int
    n_classes: int
    observed: jax.Array  # bool[n]
    labels: jax.Array  # int32[n], meaningful where observed

    def pairwise_tables(self) -> PairwiseTables:
        """The tables of (P); the only description the inference code reads."""
        ...

    def energy(self, labels: jax.Array) -> jax.Array:
        """``pairwise_energy(self, labels)``."""
        ...


@runtime_checkable
class ModelWithOwnKernels(Protocol):
    """A label model whose inference is its own (diffusion mixture, Boltzmann learning):
    ``energy(labels) = -log p(y) + const`` (``+inf`` where impossible), plus the attributes
    below; its kernels come from its own sub-package and are combined with the generic ones
    through ``compose``."""

    n_nodes: int
    n_classes: int
    observed: jax.Array
    labels: jax.Array

    def energy(self, labels: jax.Array) -> jax.Array:
        """``-log p(labels) + const``."""
        ...


def pairwise_tables(model) -> PairwiseTables:
    """``model.pairwise_tables()`` as a :class:`PairwiseTables` (a plain 3- or 4-tuple from a
    user model is accepted)."""
    tables = model.pairwise_tables()
    return tables if isinstance(tables, PairwiseTables) else PairwiseTables(*tables)


def _clamp_violation(model, labels) -> jax.Array:
    observed = jnp.asarray(model.observed, dtype=bool)
    return jnp.any(observed & (labels != jnp.asarray(model.labels, labels.dtype)))


def pairwise_energy(model, labels: jax.Array, tables: PairwiseTables | None = None):
    """``E(y) = -sum_{i<j} J_ij [y_i = y_j] - sum_i h_i(y_i)`` of (P), from the tables
    (each unordered pair is stored twice: half the sum over slots); ``+inf`` when a clamped
    node is off its label. ``tables`` defaults to ``model.pairwise_tables()``."""
    t = pairwise_tables(model) if tables is None else tables
    labels = jnp.asarray(labels)
    pair = pair_agreement(t, labels)
    unary = jnp.sum(jnp.take_along_axis(t.unary, labels[:, None].astype(jnp.int32), axis=1))
    return jnp.where(_clamp_violation(model, labels), jnp.inf, -(pair + unary))


def pair_agreement(tables: PairwiseTables, labels: jax.Array) -> jax.Array:
    """``A(y) = sum_{i<j} J_ij [y_i = y_j]``, the coupling part of ``-E(y)`` in (P) (each
    unordered pair is stored twice: half the sum over slots); the statistic that replica
    exchange over coupling scales reads (:mod:`graphssl.inference.mcmc.tempering`). Each
    slot is halved before the sum (exact: a power of two), so a sum that fits the dtype
    does not overflow on the way (float32 couplings near 3e37 gave an energy of -inf)."""
    labels = jnp.asarray(labels)
    same = labels[tables.neighbor_index] == labels[:, None]
    return jnp.sum(jnp.where(same, 0.5 * tables.coupling, 0.0))


def conditional_logits_from_tables(tables: PairwiseTables, labels, nodes) -> jax.Array:
    """``logits[k, c] = h_i(c) + sum_d J_{i,d} [labels[nbr(i, d)] = c]`` for ``i = nodes[k]``,
    shape ``[len(nodes), q]`` (Zhu & Ghahramani Eq. 25 with a field).

    For q <= 4 a compare-and-sum per class (dense, vectorises well); above, a scatter-add
    (its cost does not grow with q). Measured on CPU (benchmarks/bench_samplers.py): the
    scatter is ~2x slower at q = 2 and ~2x faster at q = 10.
    """
    index = tables.neighbor_index[nodes]
    weight = tables.coupling[nodes]
    unary = tables.unary[nodes].astype(weight.dtype)
    q = tables.unary.shape[-1]
    neighbour_labels = labels[index]
    if q <= _DENSE_MAX_CLASSES:
        sums = [jnp.sum(jnp.where(neighbour_labels == c, weight, 0.0), axis=1) for c in range(q)]
        return unary + jnp.stack(sums, axis=1)
    rows = jnp.arange(nodes.shape[0])[:, None]
    return unary.at[rows, neighbour_labels].add(weight)


def pairwise_conditional_logits(model, labels, nodes) -> jax.Array:
    """``log p(y_i = c | y_-i) + const`` for ``i`` in ``nodes``, ``[len(nodes), q]``, from
    ``model.pairwise_tables()`` (:func:`conditional_logits_from_tables`)."""
    return conditional_logits_from_tables(pairwise_tables(model), labels, nodes)


def bond_list(tables: PairwiseTables, slots=None):
    """The Swendsen–Wang bond description ``(senders, receivers, J)`` of (P), each unordered
    pair once: the slots ``(i, d)`` with ``i < j = neighbor_index[i, d]`` (padding, ``j = i``,
    and the mirror slot ``j > i`` are excluded). A bond forms with ``1 - exp(-J)``.

    ``slots``: optional ``int[m]`` flat positions (row-major in ``[n, d]``) of exactly those
    slots, computed on the host (:func:`bond_slots`) so that the sweep reads ``m = E / 2``
    entries instead of all ``n * d``; default ``tables.bond_slots``. Without either, every
    slot is returned, with ``J = 0`` where excluded.
    """
    index = tables.neighbor_index
    n, d = index.shape
    slots = tables.bond_slots if slots is None else slots
    if slots is None:
        senders = jnp.broadcast_to(jnp.arange(n, dtype=index.dtype)[:, None], (n, d))
        upper = index > senders
        coupling = jnp.where(upper, tables.coupling, 0.0)
        return senders.reshape(-1), index.reshape(-1), coupling.reshape(-1)
    senders = (slots // d).astype(index.dtype)
    return senders, index.reshape(-1)[slots], tables.coupling.reshape(-1)[slots]


def bond_slots(neighbor_index) -> np.ndarray:
    """Host side: the flat slot positions of :func:`bond_list` (``i < neighbor_index[i, d]``),
    ``int32`` (``int64`` past 2^31 slots)."""
    index = np.asarray(neighbor_index)
    n, d = index.shape
    flat = np.flatnonzero(index > np.arange(n)[:, None])
    return flat.astype(np.int32 if n * d < 2**31 else np.int64)


def is_traced(x) -> bool:
    """True for a JAX tracer (inside ``jit``/``vmap``): values unknown, checks skipped."""
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(x))


def _asymmetry(index, coupling, rtol) -> int | None:
    """A node whose row of ``J`` differs from its column, or None. ``J`` is symmetric iff
    ``J y = J^T y`` for all ``y``; checked for one random ``y`` in ``[1, 2]^n`` (fixed seed),
    node by node to ``rtol`` of the scale ``(|J| + |J|^T) 1``. The padded table is read as a
    CSR matrix as it stands (rows of equal length, no sort), so this is four sparse
    matrix-vector products: 0.1-0.2 s CPU at 10^6 nodes, d = 34, where a sparse
    ``J - J^T`` (which sorts) took 1.7-2.3 s. An asymmetry escapes only if it cancels within
    a row for that ``y`` (probability 0)."""
    import scipy.sparse as sp

    n, d = index.shape
    indptr = np.arange(0, n * d + 1, d, dtype=np.int64)
    J = sp.csr_matrix((coupling.reshape(-1), index.reshape(-1), indptr), shape=(n, n))
    A = sp.csr_matrix((np.abs(coupling).reshape(-1), index.reshape(-1), indptr), shape=(n, n))
    y = np.random.default_rng(0).uniform(1.0, 2.0, n)
    ones = np.ones(n)
    difference = np.abs(J @ y - J.T @ y)
    scale = A @ ones + A.T @ ones
    bad = difference > rtol * 2.0 * np.maximum(scale, 1e-300)
    return int(np.flatnonzero(bad)[0]) if np.any(bad) else None


def check_pairwise_tables(model, *, rtol: float = 1e-6) -> PairwiseTables:
    """Validate ``model.pairwise_tables()`` on the host; returns the tables.

    Raises ``ValueError`` (naming the fix) for wrong shapes, an index out of range, a
    non-finite coupling or field, or an asymmetric coupling (``J_ij != J_ji``: the
    conditionals would not be those of the energy). Skipped (tables returned unchecked)
    when the tables are traced.
    """
    t = pairwise_tables(model)
    if is_traced((t.neighbor_index, t.coupling, t.unary)):
        return t
    n, q = int(model.n_nodes), int(model.n_classes)
    index = np.asarray(t.neighbor_index)
    coupling = np.asarray(t.coupling)
    unary = np.asarray(t.unary)
    if index.ndim != 2 or index.shape[0] != n or coupling.shape != index.shape:
        raise ValueError(
            f"pairwise_tables: neighbor_index and coupling must both have shape ({n}, d); got "
            f"{index.shape} and {coupling.shape}; build them with Graph.padded_neighbors()")
    if unary.shape != (n, q):
        raise ValueError(f"pairwise_tables: unary must have shape ({n}, {q}), got {unary.shape}")
    if index.size and (index.min() < 0 or index.max() >= n):
        raise ValueError("pairwise_tables: neighbor_index holds a node outside 0..n-1; pad "
                         "rows with the node's own index")
    if not (np.all(np.isfinite(coupling)) and np.all(np.isfinite(unary))):
        raise ValueError("pairwise_tables: coupling and unary must be finite")
    rows = np.repeat(np.arange(n), index.shape[1])
    cols = index.reshape(-1)
    if np.any((rows == cols) & (coupling.reshape(-1) != 0)):
        raise ValueError("pairwise_tables: a slot pointing at its own node (padding) has a "
                         "non-zero coupling; set coupling to 0 on padding")
    if t.bond_slots is not None and not np.array_equal(np.asarray(t.bond_slots),
                                                       bond_slots(index)):
        raise ValueError("pairwise_tables: bond_slots is not bond_slots(neighbor_index); "
                         "recompute it after changing the table, or return None")
    worst = _asymmetry(index, coupling, max(rtol, 64 * float(np.finfo(coupling.dtype).eps)))
    if worst is not None:
        raise ValueError(
            "pairwise_tables: the coupling is not symmetric (J_ij != J_ji; row of node "
            f"{worst}); law (P) sums J_ij over unordered pairs, so the conditionals "
            "would not be those of the energy. Symmetrise the weights first "
            "(graphssl.graph.symmetrize(graph, 'mean'), which PottsModel.create applies with "
            "a warning) or return (J + J^T) / 2 from pairwise_tables()")
    return t
