"""Exact enumeration of small label models (Zhu & Ghahramani 2002, Sec. 3.1).

Every configuration ``Y`` consistent with the clamped labels is visited once: the
``q ** n_free`` configurations are indexed by integers whose base-``q`` digits are the free
nodes' labels, evaluated in fixed-size blocks (``vmap`` of ``model.energy`` inside a
``lax.scan`` over blocks) and folded into streaming log-sum-exp accumulators, so memory
stays ``O(block_size * n)`` however many configurations there are.

Paper symbols -> arguments: ``P(Y) = exp(-E(Y)) / Z`` with ``E = model.energy``; the
clamped phase ``<.>_c`` is ``model`` itself (nodes with ``model.observed`` hold
``model.labels``), the unclamped phase ``<.>_u`` is ``model.unclamped()``.

The model is used only through what every model of :mod:`graphssl.models.protocol` has:
``n_nodes``, ``n_classes``, ``observed``, ``labels`` and ``energy(labels)`` (for a pairwise
label model that is :func:`~graphssl.models.protocol.pairwise_energy` of its tables, the law
every sampler draws from).
"""

from __future__ import annotations

import functools
import numbers
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from graphssl.validation import COUNT_MAX, check_count

__all__ = [
    "ExactResult",
    "enumerate_model",
    "enumerate_configurations",
    "exact_log_partition",
    "exact_marginals",
    "exact_expectation",
    "exact_map",
]

DEFAULT_MAX_CONFIGURATIONS = 2**24


class ExactResult(NamedTuple):
    """Exact quantities of ``p(Y) ∝ exp(-E(Y))`` restricted to the clamped labels.

    Attributes:
      log_partition: ``log Z = log sum_Y exp(-E(Y))`` over consistent configurations.
      marginals: ``float[n, q]`` exact per-node marginals ``P(y_i = c)`` (one-hot rows at
        clamped nodes).
      map_labels: ``int32[n]`` the most probable configuration (lowest energy; first in
        enumeration order on ties).
      map_energy: its energy.
      expectation: ``E_p[fn(Y)]`` (same pytree as ``fn``'s output) or ``None``.
      n_configurations: number of configurations summed (``q ** n_free``).
    """

    log_partition: jax.Array
    marginals: jax.Array
    map_labels: jax.Array
    map_energy: jax.Array
    expectation: Any
    n_configurations: int


def _free_nodes(model) -> np.ndarray:
    observed = np.asarray(model.observed, dtype=bool)
    if observed.shape != (model.n_nodes,):
        raise ValueError(
            f"model.observed must have shape ({model.n_nodes},), got {observed.shape}; "
            "build the model with one observed flag per node"
        )
    return np.flatnonzero(~observed).astype(np.int32)


def _check_max_configurations(value) -> int:
    """``max_configurations`` as an ``int``: a whole number ``>= 1`` (``1e8`` too), never
    NaN, inf, a bool or a string (``float("inf")`` lifted the limit past what the indices
    can count)."""
    if isinstance(value, bool | np.bool_):
        pass
    elif isinstance(value, numbers.Integral) and value >= 1:
        return int(value)
    elif (isinstance(value, numbers.Real) and np.isfinite(float(value))
          and float(value).is_integer() and value >= 1):
        return int(value)
    raise ValueError(f"max_configurations: a whole number >= 1 (a finite count of "
                     f"configurations), got {value!r}")


def _index_limit() -> int:
    """The most configurations whose numbers JAX's default integers can hold: int32, or
    int64 with ``jax_enable_x64``."""
    return 2**63 - 1 if jax.config.jax_enable_x64 else 2**31 - 1


def _check_size(n_free: int, q: int, max_configurations, limit: int | None = None) -> int:
    max_configurations = _check_max_configurations(max_configurations)
    count = int(q) ** int(n_free)
    limit = _index_limit() if limit is None else limit
    if count > limit and count <= max_configurations:
        raise ValueError(
            f"max_configurations: enumeration needs q**n_free = {q}**{n_free} = {count} "
            f"configurations, more than its {'int64' if limit > 2**31 else 'int32'} "
            f"configuration indices can number (at most {limit} here); clamp more nodes or "
            "use a smaller "
            "graph (or, for enumerate_model, enable 64-bit indices with "
            "jax.config.update('jax_enable_x64', True))"
        )
    if count > max_configurations:
        raise ValueError(
            f"enumeration needs q**n_free = {q}**{n_free} = {count} configurations, more "
            f"than max_configurations={max_configurations}; clamp more nodes, use a smaller "
            "graph, or raise max_configurations"
        )
    return count


def _base_labels(model) -> jax.Array:
    observed = jnp.asarray(model.observed, dtype=bool)
    return jnp.where(observed, jnp.asarray(model.labels, dtype=jnp.int32), 0)


def _decode(index: jax.Array, base: jax.Array, free: jax.Array, q: int) -> jax.Array:
    """Configuration number ``index`` -> labels: free node ``free[k]`` gets digit k."""
    powers = jnp.asarray(q, jnp.int64 if jax.config.jax_enable_x64 else jnp.int32) ** (
        jnp.arange(free.shape[0])
    )
    digits = (index // powers) % q
    return base.at[free].set(digits.astype(jnp.int32))


def enumerate_configurations(model, max_configurations: int = 2**20) -> jax.Array:
    """All ``q ** n_free`` consistent configurations as ``int32[M, n]`` (small models only;
    ``M`` at most ``max_configurations`` and below 2^31, the table within this machine's
    physical memory: past that use :func:`enumerate_model`, which streams them)."""
    free = _free_nodes(model)
    q = int(model.n_classes)
    # every configuration is materialised: int32[M, n], so M stays below 2^31 even with x64
    count = _check_size(free.size, q, max_configurations, limit=COUNT_MAX)
    _check_table_memory(count, int(model.n_nodes))
    base = _base_labels(model)
    return jax.vmap(lambda i: _decode(i, base, jnp.asarray(free), q))(jnp.arange(count))


def _physical_memory() -> int | None:
    """This machine's physical memory in bytes (POSIX ``sysconf``), or None if unknown."""
    import os

    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        return None


def _check_table_memory(count: int, n_nodes: int) -> None:
    """Refuse a table ``int32[count, n_nodes]`` larger than the machine's physical memory
    before allocating it (2^30 configurations of 31 nodes asked for 133 GB and ended in the
    back end's RESOURCE_EXHAUSTED)."""
    needed, memory = 4 * count * max(n_nodes, 1), _physical_memory()
    if memory is not None and needed > memory:
        raise ValueError(
            f"max_configurations: the table of {count} configurations x {n_nodes} nodes "
            f"needs {needed / 2**30:.1f} GiB, more than this machine's "
            f"{memory / 2**30:.1f} GiB; use enumerate_model(model, fn=...) (it streams the "
            "configurations in blocks) or clamp more nodes")


def _zeros_like_output(fn, labels):
    shapes = jax.eval_shape(fn, labels)
    return jax.tree_util.tree_map(
        lambda s: jnp.zeros(s.shape, jnp.result_type(s.dtype, float)), shapes
    )


def enumerate_model(
    model,
    fn: Callable[[jax.Array], Any] | None = None,
    *,
    block_size: int = 4096,
    max_configurations: int = DEFAULT_MAX_CONFIGURATIONS,
) -> ExactResult:
    """Exact log-partition, marginals, MAP and ``E[fn(Y)]`` by full enumeration.

    Args:
      model: any discrete label model of the protocol (``energy``, ``observed``, ...).
      fn: optional ``labels int32[n] -> pytree of arrays``; its exact expectation is returned.
      block_size: configurations evaluated together (one ``vmap``), a whole number >= 1;
        the scan runs over ``ceil(M / block_size)`` blocks.
      max_configurations: refuse (``ValueError``) when ``q ** n_free`` exceeds this (a
        whole number; never more than the configurations the indices can number: 2^31 - 1,
        or 2^63 - 1 with ``jax_enable_x64``).

    An energy that is NaN or ``-inf`` on some configuration (float overflow at a huge beta)
    gives a ``ValueError``: no log-sum-exp of it is finite.
    """
    free = _free_nodes(model)
    q = int(model.n_classes)
    if q < 1:
        raise ValueError(f"model.n_classes must be >= 1, got {q}")
    block_size = check_count(block_size, "block_size", least=1)
    # the last block's indices run up to count + block_size - 2: they too must not wrap
    count = _check_size(free.size, q, max_configurations,
                        limit=_index_limit() - block_size + 1)
    block = int(min(block_size, count))
    n_blocks = -(-count // block)
    result, bad_energy = _enumerate(model, fn, jnp.asarray(free), q, count, block, n_blocks)
    if not isinstance(bad_energy, jax.core.Tracer) and bool(bad_energy):
        raise ValueError(
            "model: its energy is NaN or -inf on some configuration (float overflow: e.g. a "
            f"{jnp.result_type(result.log_partition)} model at a beta so large that "
            "beta * sum(W) exceeds the dtype's range), so log Z and the marginals cannot be "
            "computed; lower beta or the weights, or build the model in float64 "
            "(jax.config.update('jax_enable_x64', True))"
        )
    return result._replace(n_configurations=count)


@functools.partial(jax.jit, static_argnums=(1, 3, 4, 5, 6))
def _enumerate(model, fn, free, q, count, block, n_blocks):
    base = _base_labels(model)
    n = model.n_nodes
    decode = jax.vmap(lambda i: _decode(i, base, free, q))
    energy = jax.vmap(model.energy)
    fn_ = fn if fn is not None else (lambda y: jnp.zeros(()))
    f_zero = _zeros_like_output(fn_, base)
    e_dtype = jnp.result_type(jax.eval_shape(model.energy, base).dtype, float)

    def body(carry, b):
        m, s, marg, fsum, best_e, best_y, bad = carry
        idx = b * block + jnp.arange(block)
        valid = idx < count
        ys = decode(jnp.where(valid, idx, 0))
        es = energy(ys).astype(e_dtype)
        # NaN or -inf (an overflowed energy) would make the log-sum-exp NaN; +inf is a
        # configuration of probability 0
        bad = bad | jnp.any(valid & (jnp.isnan(es) | (es == -jnp.inf)))
        logw = jnp.where(valid, -es, -jnp.inf)
        new_m = jnp.maximum(m, jnp.max(logw))
        scale = jnp.exp(m - new_m)
        w = jnp.exp(logw - new_m)
        onehot = jax.nn.one_hot(ys, q, dtype=e_dtype)  # [block, n, q]
        marg = marg * scale + jnp.einsum("b,bnc->nc", w, onehot)
        fvals = jax.vmap(fn_)(ys)
        fsum = jax.tree_util.tree_map(
            lambda acc, v: acc * scale + jnp.tensordot(w, v.astype(acc.dtype), axes=1), fsum, fvals
        )
        es_masked = jnp.where(valid, es, jnp.inf)
        k = jnp.argmin(es_masked)
        better = es_masked[k] < best_e
        best_e = jnp.where(better, es_masked[k], best_e)
        best_y = jnp.where(better, ys[k], best_y)
        return (new_m, s * scale + jnp.sum(w), marg, fsum, best_e, best_y, bad), None

    init = (
        jnp.asarray(-jnp.inf, e_dtype),
        jnp.asarray(0.0, e_dtype),
        jnp.zeros((n, q), e_dtype),
        f_zero,
        jnp.asarray(jnp.inf, e_dtype),
        base,
        jnp.asarray(False),
    )
    (m, s, marg, fsum, best_e, best_y, bad), _ = jax.lax.scan(body, init,
                                                              jnp.arange(n_blocks))
    expectation = None if fn is None else jax.tree_util.tree_map(lambda a: a / s, fsum)
    return ExactResult(
        log_partition=m + jnp.log(s),
        marginals=marg / s,
        map_labels=best_y,
        map_energy=best_e,
        expectation=expectation,
        n_configurations=0,
    ), bad


def exact_log_partition(model, **kwargs) -> jax.Array:
    """``log Z`` over the configurations consistent with the clamped labels."""
    return enumerate_model(model, **kwargs).log_partition


def exact_marginals(model, **kwargs) -> jax.Array:
    """Exact per-node marginals ``float[n, q]``."""
    return enumerate_model(model, **kwargs).marginals


def exact_expectation(model, fn: Callable[[jax.Array], Any], **kwargs) -> Any:
    """Exact ``E_p[fn(Y)]`` for a user function of the labels (e.g. Eq. (14)'s statistics)."""
    return enumerate_model(model, fn, **kwargs).expectation


def exact_map(model, **kwargs) -> tuple[jax.Array, jax.Array]:
    """Most probable configuration and its energy ``(labels int32[n], energy)``."""
    result = enumerate_model(model, **kwargs)
    return result.map_labels, result.map_energy
