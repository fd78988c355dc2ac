"""Naive mean field for Potts-family models (Bergamim & Breve 2022, Eqs. 13-17, Alg. 3.1).

The product distribution ``Phi(s) = prod_i phi_i(s_i)`` (Eq. 14) that minimises
``KL(Phi || Psi)`` (Eq. 13) satisfies the coupled equations (Eqs. 15-16)

    phi_i(s) = exp(h_i(s)) / Z_i,      Z_i = sum_s exp(h_i(s)),
    h_i(s)   = u_i(s) + sum_j J_ij phi_j(s),

where ``u`` and ``J`` come from the model's pairwise tables (:mod:`graphssl.models.protocol`):
``u = tables.unary`` (``beta theta`` for :class:`graphssl.models.potts.PottsModel`) and
``J = tables.coupling`` (``beta W``), so ``h_i(s) = beta (theta_{i,s} + sum_j W_ij phi_j(s))``
is Eq. 16 verbatim.

Directed W. The paper's W is row-normalised (Eq. 9), hence directed, and Eq. 16 sums
``W_ij phi_j`` along the out-edges ``i -> j``; on a directed W that is no variational mean
field of any energy, but it is the paper's algorithm (and Eqs. 18-20, labelled nodes keep
their labels, rest on rows summing to 1). The sampling law of such a model uses the
symmetrised ``(W_ij + W_ji) / 2`` (``PottsModel.create``); the directed W stays a separate,
documented input of this optimiser: ``tables.directed_coupling`` (kept by the model when it
was built from a directed W), used when ``couplings="directed"`` (the default) and present;
``couplings="symmetric"`` solves the mean field of the sampling law instead.

Paper symbols -> names: ``h`` -> ``fields`` ``[n, q]``, ``phi`` -> ``marginals`` ``[n, q]``,
``epsilon`` -> ``tol``, ``t_max`` -> ``max_iter``, ``delta`` (the change of the fields over
one sweep, Alg. 3.1) -> ``info.residual``.

The three update orders (``"sequential"`` Gauss-Seidel, ``"parallel"`` damped Jacobi,
``"chromatic"`` Gauss-Seidel by colour classes) and the locality renumbering
(``options.reorder``) are the compiled sweeps of
:mod:`graphssl.inference.optimize.mean_field_sweeps`, whose docstring compares them; all
work in log space (``phi = exp(h - logsumexp h)``), so no overflow or NaN at any beta.

The stopping rule is the paper's: stop when ``max_{i,s} |h_i(s)^{new} - h_i(s)^{old}| < tol``
(for the damped update the *undamped* change ``|F(h) - h|`` is used, i.e. the fixed-point
residual) or after ``max_iter`` sweeps; ``info`` reports which.

Clamped nodes (``model.observed``) hold one-hot marginals at ``model.labels`` (the zero-field
clamped form, Eq. 10). Unclamped labelled nodes carrying a field ``theta`` (Eq. 4) keep their
label under the paper's argument Eqs. 18-20 when ``W`` is row-normalised.

The solver is pure: :func:`solve_mean_field` / :func:`naive_mean_field` map
``(model or tables, init fields, options)`` to ``(MeanFieldSolution, MeanFieldInfo)``, the
optimiser shape of DESIGN.md (``init`` may be a previous solution: a warm start).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from graphssl._device import alike, host_array, to_device
from graphssl._exported import exported_call
from graphssl.graph.core import padded_to_bucket
from graphssl.inference.optimize.mean_field_host import (
    HOST_MAX_STAGES,
    sequential_levels,
    solve_gauss_seidel_host,
    stages_of,
)
from graphssl.inference.optimize.mean_field_sweeps import (
    _color_ranges,
    _log_softmax_clamped,
    _renumber,
    _solve_chromatic,
    _solve_parallel,
    _solve_sequential,
    locality_order,
    mean_field_coloring,
    mean_field_fields,
)
from graphssl.models.protocol import pairwise_tables
from graphssl.validation import check_count, check_real, check_same_length

__all__ = [
    "HOST_MAX_NODES",
    "locality_order",
    "MeanFieldInfo",
    "MeanFieldOptions",
    "MeanFieldSolution",
    "mean_field_coloring",
    "mean_field_fields",
    "mean_field_labels",
    "mean_field_residual",
    "mean_field_tables",
    "naive_mean_field",
    "solve_mean_field",
]

ORDERS = ("sequential", "parallel", "chromatic")
ENGINES = ("auto", "host", "compiled")
# engine="auto" runs the Gauss-Seidel orders in NumPy up to this many nodes (measured in
# mean_field_host: there the host sweep beats a new process's compiled solve)
HOST_MAX_NODES = 10_000


class MeanFieldOptions(NamedTuple):
    """Options of :func:`naive_mean_field`.

    Attributes:
      order: ``"sequential"`` (Gauss-Seidel, the node loop of Alg. 3.1), ``"parallel"``
        (Jacobi, all nodes at once) or ``"chromatic"`` (Gauss-Seidel by colour classes: each
        class at once; converges like ``"sequential"``, runs in parallel like ``"parallel"``).
      damping: step size of the parallel update, in ``(0, 1]``; 1 = undamped (unused by
        the Gauss-Seidel orders).
      tol: the paper's ``epsilon`` on ``max |Delta h|`` (1e-3 in Secs. 5-6).
      max_iter: the paper's ``t_max`` (10^4 in Secs. 5-6), in sweeps.
      reorder: renumber the nodes for memory locality (reverse Cuthill-McKee) before a
        parallel solve (large graphs in random order; its one-off cost is a few sweeps).
        Needs concrete arrays (not inside ``jax.jit``).
      engine: where the Gauss-Seidel orders (``"sequential"``, ``"chromatic"``) run:
        ``"host"`` (NumPy / scipy, :mod:`graphssl.inference.optimize.mean_field_host`, the
        same sweep stage by stage: no JAX back end, nothing compiled; returns NumPy
        arrays), ``"compiled"`` (a JAX program on the default device) or ``"auto"``
        (default: the host for concrete arrays of at most :data:`HOST_MAX_NODES` nodes
        whose sweep has at most ``HOST_MAX_STAGES`` stages, else compiled).
        ``"parallel"`` is always compiled.
    """

    order: str = "parallel"
    damping: float = 0.5
    tol: float = 1e-3
    max_iter: int = 10_000
    reorder: bool = False
    engine: str = "auto"


class MeanFieldInfo(NamedTuple):
    """Convergence record: sweeps done, last ``max |Delta h|``, and whether it is < tol."""

    iterations: jax.Array
    residual: jax.Array
    converged: jax.Array


class MeanFieldSolution(NamedTuple):
    """Mean-field solution: ``marginals`` phi, ``log_marginals`` ln phi, ``fields`` h; [n, q]."""

    marginals: jax.Array
    log_marginals: jax.Array
    fields: jax.Array


def _scalar_value(value):
    """A concrete 0-d NumPy / JAX array as its Python number (other values as given), so
    that :func:`check_real` reads ``np.float32(1e-3)`` and ``jnp.asarray(0.5)`` alike."""
    if isinstance(value, np.ndarray | jax.Array) and np.ndim(value) == 0 and _concrete(value):
        return value.item()
    return value


def _check_options(options: MeanFieldOptions) -> None:
    if options.order not in ORDERS:
        raise ValueError(f"options.order must be one of {ORDERS}, got {options.order!r}")
    check_real(_scalar_value(options.damping), "options.damping", low=0.0, high=1.0,
               low_open=True)
    check_real(_scalar_value(options.tol), "options.tol", low=0.0, low_open=True)
    check_count(_scalar_value(options.max_iter), "options.max_iter", least=1)
    if options.engine not in ENGINES:
        raise ValueError(f"options.engine must be one of {ENGINES}, got {options.engine!r}")
    if options.engine == "host" and options.order == "parallel":
        raise ValueError("options.engine='host' runs the Gauss-Seidel orders ('sequential', "
                         "'chromatic'); use engine='auto' or 'compiled' for 'parallel'")
    if options.reorder and options.order != "parallel":
        raise ValueError("options.reorder applies to order='parallel' only (the sequential "
                         "sweep's visiting order changes its fixed point); set reorder=False")


def solve_mean_field(unary, neighbor_index, neighbor_weight, clamped=None, clamp_labels=None,
                     init_fields=None, options: MeanFieldOptions | None = None, colors=None):
    """Solve Eqs. 15-16 on arrays (the engine behind :func:`naive_mean_field`).

    Args:
      unary: ``u = beta theta``, float[n, q].
      neighbor_index, neighbor_weight: padded table of the couplings ``J = beta W``
        (``Graph.padded_neighbors`` of the coupling graph), [n, d].
      clamped: bool[n] nodes held at ``clamp_labels`` (default: none).
      clamp_labels: int[n], used where clamped.
      init_fields: ``h^(0)`` [n, q]; default zeros (Alg. 3.1: uniform ``Phi^(0)``).
      options: :class:`MeanFieldOptions`.
      colors: ``int[n]`` colouring for ``order="chromatic"`` (default: computed by
        :func:`mean_field_coloring`); ignored by the other orders. Inside ``jax.jit`` it
        must be concrete (a NumPy array closed over, not a jit argument), and it is then
        not checked against the traced neighbour table.
    Returns:
      ``(MeanFieldSolution, MeanFieldInfo)``.
    """
    options = MeanFieldOptions() if options is None else options
    _check_options(options)
    _check_tables(unary, neighbor_index, clamped, clamp_labels)
    stages = _host_stages(options, unary, neighbor_index, colors, neighbor_weight, clamped,
                          clamp_labels, init_fields)
    if stages is not None:
        return _solve_on_host(unary, neighbor_index, neighbor_weight, clamped, clamp_labels,
                              init_fields, options, stages)
    # inputs made on the host and moved by device_put (jnp.zeros / asarray / one_hot run
    # eagerly compile one program per primitive and new shape)
    unary = to_device(unary)
    n, q = unary.shape
    dtype = unary.dtype
    clamped = to_device(np.zeros(n, bool) if clamped is None else clamped, bool)
    clamp_labels = to_device(np.zeros(n, np.int32) if clamp_labels is None else clamp_labels)
    if _concrete(clamp_labels):  # jax.nn.one_hot: a zero row outside 0..q-1
        clamp_onehot = to_device(np.asarray(clamp_labels)[:, None] == np.arange(q), dtype)
    else:
        clamp_onehot = jax.nn.one_hot(clamp_labels, q, dtype=dtype)
    fields0 = to_device(np.zeros((n, q)) if init_fields is None else init_fields, dtype)
    if fields0.shape != (n, q):
        raise ValueError(f"init: expected fields of shape ({n}, {q}), got {fields0.shape}")
    if options.order != "chromatic" and _concrete(neighbor_index, neighbor_weight):
        neighbor_index, neighbor_weight = padded_to_bucket(neighbor_index, neighbor_weight)
    neighbor_weight = to_device(neighbor_weight, dtype)
    arrays = (unary, neighbor_index, neighbor_weight, clamped, clamp_onehot, fields0)
    rank = None
    if options.reorder:
        if not _concrete(neighbor_index):
            raise ValueError("options.reorder: True renumbers the nodes on the host and needs a "
                             "concrete neighbour table, not one traced inside jax.jit; set "
                             "reorder=False under jit, or solve outside jit")
        arrays, rank = _renumber(arrays, locality_order(neighbor_index))
    tol = to_device(options.tol, dtype)
    if options.order == "parallel":
        fields, t, res = exported_call(_solve_parallel, *arrays,
                                       to_device(options.damping, dtype), tol,
                                       max_iter=int(options.max_iter))
    elif options.order == "chromatic":
        perm, bounds = _color_ranges(neighbor_index, colors, n)
        arrays, rank = _renumber(arrays, perm)
        fields, t, res = _solve_chromatic(*arrays, bounds, tol, int(options.max_iter))
    else:
        fields, t, res = exported_call(_solve_sequential, *arrays, tol,
                                       max_iter=int(options.max_iter))
    if rank is not None:
        fields = fields[jnp.asarray(rank)]
    if not _concrete(fields, res):
        log_phi = _log_softmax_clamped(fields, clamped, clamp_onehot)
        solution = MeanFieldSolution(jnp.exp(log_phi), log_phi, fields)
        return solution, MeanFieldInfo(iterations=t, residual=res, converged=res < tol)
    log_phi = _log_softmax_clamped_host(np.asarray(fields), np.asarray(clamped),
                                        np.asarray(clamp_onehot))
    solution = MeanFieldSolution(to_device(np.exp(log_phi)), to_device(log_phi), fields)
    converged = to_device(np.asarray(res) < np.asarray(tol))
    return solution, MeanFieldInfo(iterations=t, residual=res, converged=converged)


def _check_tables(unary, neighbor_index, clamped, clamp_labels) -> None:
    """On concrete arrays: every neighbour index is a node (``0..n-1``; a ``-1`` pad would
    wrap to node n-1, and the host sequential engine's levels never settle on it) and every
    clamped node's label a class (``0..q-1``; else its marginal row is all zero). Traced
    arrays (``jax.jit``) are not checked."""
    n, q = np.shape(unary)[0], np.shape(unary)[-1]
    if _concrete(neighbor_index):
        index = np.asarray(neighbor_index)
        if np.ndim(index) != 2 or np.shape(index)[0] != n:
            raise ValueError(f"neighbor_index: expected shape ({n}, d), one row per node of "
                             f"unary, got {np.shape(index)}; build it with "
                             "Graph.padded_neighbors()")
        if index.size and (index.min() < 0 or index.max() >= n):
            bad = index[(index < 0) | (index >= n)]
            raise ValueError(f"neighbor_index: every entry must be a node in 0..{n - 1}, found "
                             f"{bad[0].item()!r}; pad short rows with the node's own index "
                             "(and weight 0), not -1")
    if clamped is None or clamp_labels is None or not _concrete(clamped, clamp_labels):
        return
    labels = np.asarray(clamp_labels)
    check_same_length(n, labels, "clamp_labels", against="unary has {n} rows")
    held = np.asarray(clamped, bool)
    check_same_length(n, held, "clamped", against="unary has {n} rows")
    bad = held & ((labels < 0) | (labels >= q))
    if bad.any():
        node = int(np.flatnonzero(bad)[0])
        raise ValueError(f"clamp_labels: a clamped node needs a label in 0..{q - 1}; node "
                         f"{node} has {labels[node].item()!r}; fix the label or leave the "
                         "node unclamped (clamped[node] = False)")


def _host_stages(options, unary, neighbor_index, colors, *arrays):
    """The stages of a sweep run in NumPy (``options.engine``, see
    :class:`MeanFieldOptions`): the colour classes or the sequential order's levels; None
    when this solve is compiled."""
    if options.order == "parallel" or options.engine == "compiled":
        return None
    concrete = _concrete(unary, neighbor_index, *arrays)
    if options.engine == "host" and not concrete:
        raise ValueError("options.engine='host' needs concrete arrays (not inside jax.jit); "
                         "use engine='auto' or 'compiled'")
    n = np.shape(unary)[0]
    if not concrete or (options.engine == "auto" and n > HOST_MAX_NODES):
        return None
    if options.order == "chromatic":
        perm, bounds = _color_ranges(neighbor_index, colors, n)
        return [perm[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    limit = HOST_MAX_STAGES if options.engine == "auto" else None
    levels = sequential_levels(neighbor_index, limit)
    return None if levels is None else stages_of(levels)


def _solve_on_host(unary, neighbor_index, neighbor_weight, clamped, clamp_labels,
                   init_fields, options, stages):
    """:func:`solve_mean_field` by :func:`solve_gauss_seidel_host`: NumPy arrays in JAX's
    canonical dtypes (those of the compiled solve). The solution's arrays are on the side of
    the input's: NumPy for a host model (nothing moved to a device, no JAX back end
    started), JAX arrays for a model on a device."""
    given = unary
    unary = host_array(unary)
    n, q = unary.shape
    clamped = np.zeros(n, bool) if clamped is None else np.asarray(clamped, bool)
    clamp_labels = np.zeros(n, np.int32) if clamp_labels is None else np.asarray(clamp_labels)
    clamp_onehot = (clamp_labels[:, None] == np.arange(q)).astype(unary.dtype)
    fields0 = np.zeros((n, q), unary.dtype) if init_fields is None else np.asarray(
        init_fields, unary.dtype)
    if fields0.shape != (n, q):
        raise ValueError(f"init: expected fields of shape ({n}, {q}), got {fields0.shape}")
    fields, t, res = solve_gauss_seidel_host(unary, neighbor_index, neighbor_weight, clamped,
                                             clamp_onehot, fields0, stages, options.tol,
                                             int(options.max_iter))
    log_phi = _log_softmax_clamped_host(fields, clamped, clamp_onehot)
    solution = MeanFieldSolution(*(alike(a, given) for a in (np.exp(log_phi), log_phi, fields)))
    info = (t, res, np.asarray(res < options.tol))
    return solution, MeanFieldInfo(*(alike(a, given) for a in info))


def _concrete(*arrays) -> bool:
    """Whether no array is traced: the glue around the compiled sweeps then runs in NumPy
    (run eagerly in JAX, each primitive is compiled for every new shape: a PottsClassifier
    fit in a new process paid 26 such compilations here)."""
    return not any(isinstance(a, jax.core.Tracer) for a in arrays)


def _log_softmax_clamped_host(fields, clamped, clamp_onehot):
    """NumPy's :func:`_log_softmax_clamped`: ln phi = h - ln Z (Eq. 15), ln(one-hot) on
    clamped rows."""
    top = np.max(fields, axis=-1, keepdims=True)
    log_z = top + np.log(np.sum(np.exp(fields - top), axis=-1, keepdims=True))
    with np.errstate(divide="ignore"):
        return np.where(clamped[:, None], np.log(clamp_onehot), fields - log_z)


COUPLINGS = ("directed", "symmetric")


def mean_field_tables(model, couplings: str = "directed"):
    """``(u, neighbor_index, J)`` that Eq. 16 reads, from ``model.pairwise_tables()``:
    ``J = tables.directed_coupling`` when ``couplings="directed"`` and the model kept a
    directed W (Bergamim & Breve's row-normalised Eq. 9), else ``tables.coupling`` (the
    symmetric couplings of the sampling law)."""
    if couplings not in COUPLINGS:
        raise ValueError(f"couplings: use one of {COUPLINGS}, got {couplings!r}")
    t = pairwise_tables(model)
    use_directed = couplings == "directed" and t.directed_coupling is not None
    return t.unary, t.neighbor_index, t.directed_coupling if use_directed else t.coupling


def naive_mean_field(model, init=None, options: MeanFieldOptions | None = None, colors=None,
                     *, couplings: str = "directed"):
    """Naive mean field of a pairwise label model (Eqs. 15-16, Alg. 3.1 of Bergamim & Breve).

    The model is used through its pairwise tables only (:func:`mean_field_tables`):
    ``unary`` (``u = beta theta``), ``coupling`` (``J = beta W``) or, for a model built from
    a directed W, ``directed_coupling`` (out-edges of the row-normalised W, as in the paper),
    plus ``observed`` and ``labels`` (hard clamping).

    Args:
      model: e.g. :class:`graphssl.models.potts.PottsModel`.
      init: initial fields ``h^(0)`` [n, q], a previous :class:`MeanFieldSolution` (warm
        start, e.g. along a beta scan), or None (uniform marginals).
      options: :class:`MeanFieldOptions` (default: parallel, damping 0.5, tol 1e-3,
        max_iter 10^4).
      colors: node colouring reused by ``order="chromatic"`` (see
        :func:`mean_field_coloring`); None computes it (not possible inside ``jax.jit``:
        there compute it outside and close over it).
      couplings: ``"directed"`` (default: the directed W where the model kept one, the
        paper's Eq. 16) or ``"symmetric"`` (the couplings of the sampling law).
    Returns:
      ``(MeanFieldSolution, MeanFieldInfo)``: marginals phi, log-marginals, fields h; and
      iterations, residual ``max |Delta h|``, converged.
    """
    options = MeanFieldOptions() if options is None else options
    if isinstance(init, MeanFieldSolution):
        init = init.fields
    unary, index, weight = mean_field_tables(model, couplings)
    if _concrete(unary, weight) and not (np.all(np.isfinite(np.asarray(unary)))
                                         and np.all(np.isfinite(np.asarray(weight)))):
        # the message of check_pairwise_tables (ICM, map_search)
        raise ValueError("pairwise_tables: coupling and unary must be finite; remove NaN or "
                         "inf from the model's field, weights and beta")
    return solve_mean_field(unary, index, weight, model.observed, model.labels, init, options,
                            colors)


def mean_field_residual(model, marginals, *, couplings: str = "directed"):
    """``max_{i free, s} |phi_i(s) - softmax(h(phi))_i(s)|``: how far ``marginals`` are from
    solving Eqs. 15-16 (0 at an exact fixed point). Clamped nodes are skipped."""
    unary, index, weight = mean_field_tables(model, couplings)
    fields = mean_field_fields(jnp.asarray(marginals), unary, index, weight)
    phi = jax.nn.softmax(fields, axis=-1)
    free = ~jnp.asarray(model.observed)[:, None]
    return jnp.max(jnp.where(free, jnp.abs(phi - marginals), 0.0))


def mean_field_labels(solution: MeanFieldSolution, unary=None, *, rtol: float | None = None):
    """Labels ``y_i = argmax_s phi_i(s)`` (Eq. 17), ties resolved toward the field.

    Eqs. 18-20 show that on a row-normalised W a labelled node's field keeps its label:
    ``h_m(y_m) - h_m(s) = beta sum_j W_mj (1 - phi_j(s)) + ... > 0``. At large beta that
    margin is of order ``exp(-beta)`` and rounds to an exact tie (``phi_j(s) = 1.0``), which
    a plain argmax would resolve toward class 0. Here, among the classes whose field is
    within ``rtol * max_s |h_i(s)|`` of the maximum (float rounding of the row sums), the one
    with the largest ``unary`` (``beta theta``) wins, then the lowest index.

    Args:
      solution: a :class:`MeanFieldSolution`.
      unary: ``u = beta theta`` [n, q] (``model.pairwise_tables().unary``); None = plain
        argmax.
      rtol: relative tie tolerance; default ``64 * eps`` of the dtype.
    Returns:
      int32[n].
    """
    if rtol is not None and not isinstance(rtol, jax.core.Tracer):
        check_real(_scalar_value(rtol), "rtol", low=0.0)  # < 0 or NaN: every class "tied"
    if _concrete(solution.fields, solution.log_marginals, unary):
        return alike(_labels_host(np.asarray(solution.fields),
                                  np.asarray(solution.log_marginals), unary, rtol),
                     solution.fields)
    fields = jnp.asarray(solution.fields)
    log_phi = jnp.asarray(solution.log_marginals)
    if unary is None:
        return jnp.argmax(log_phi, axis=-1).astype(jnp.int32)
    rtol = 64 * jnp.finfo(fields.dtype).eps if rtol is None else rtol
    # rank by log-marginals (exact at clamped rows), ties judged on the fields' scale
    scale = jnp.max(jnp.abs(fields), axis=-1, keepdims=True)
    best = jnp.max(log_phi, axis=-1, keepdims=True)
    near = log_phi >= best - rtol * jnp.maximum(scale, 1.0)
    score = jnp.where(near, jnp.asarray(unary, fields.dtype), -jnp.inf)
    return jnp.argmax(score, axis=-1).astype(jnp.int32)


def _labels_host(fields, log_phi, unary, rtol):
    """NumPy's :func:`mean_field_labels` (the same arithmetic, in the arrays' dtype)."""
    if unary is None:
        return np.argmax(log_phi, axis=-1).astype(np.int32)
    rtol = 64 * np.finfo(fields.dtype).eps if rtol is None else rtol
    scale = np.max(np.abs(fields), axis=-1, keepdims=True)
    best = np.max(log_phi, axis=-1, keepdims=True)
    near = log_phi >= best - rtol * np.maximum(scale, 1.0)
    score = np.where(near, np.asarray(unary, fields.dtype), -np.inf)
    return np.argmax(score, axis=-1).astype(np.int32)
