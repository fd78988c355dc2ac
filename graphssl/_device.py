"""Host arrays to JAX arrays without compiling anything.

``jnp.asarray(x)`` of a NumPy array runs a ``stage`` (copy) or ``convert_element_type``
primitive eagerly, and every eager primitive is compiled once per shape and dtype: a
PottsClassifier fit in a new process paid 56 such compilations (1.7 CPU s at n = 10^3,
against 0.05 s for the same fit once compiled). :func:`to_device` converts on the host and
moves the result with ``jax.device_put``, which compiles nothing. Use it where a host array
enters JAX outside ``jit``; inside ``jit`` (or on a tracer) it is not needed.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["to_device", "host_array", "alike", "concatenate", "take"]


def to_device(values, dtype=None) -> jax.Array:
    """``values`` as a JAX array of ``dtype`` (default: its own), in JAX's canonical dtypes
    (float64 -> float32 and int64 -> int32 unless x64 is enabled). Host input (NumPy
    arrays, lists, scalars) is converted on the host and moved by ``jax.device_put``; a JAX
    array or tracer already of that dtype is returned as it is, one of another dtype goes
    through ``astype`` (an XLA conversion)."""
    if isinstance(values, jax.Array):
        if dtype is None:
            return values
        dtype = jax.dtypes.canonicalize_dtype(dtype)
        return values if values.dtype == dtype else values.astype(dtype)
    host = np.asarray(values)
    dtype = jax.dtypes.canonicalize_dtype(host.dtype if dtype is None else dtype)
    return jax.device_put(host.astype(dtype, copy=False))


def host_array(values, dtype=None) -> np.ndarray:
    """``values`` as a read-only NumPy array in the dtype :func:`to_device` would give it
    (JAX's canonical dtypes), without starting JAX's back end: what a host-side consumer
    (scipy solvers) reads, and what any JAX program taking it converts on its call."""
    host = np.asarray(values)
    dtype = jax.dtypes.canonicalize_dtype(host.dtype if dtype is None else dtype)
    host = host.astype(dtype, copy=True)
    host.flags.writeable = False
    return host


def alike(values, reference, dtype=None):
    """``values`` on the same side as ``reference``: :func:`host_array` when ``reference``
    is a NumPy array (a host graph's field, :class:`graphssl.graph.Graph`), else
    :func:`to_device`. What lets a model built on a host graph stay on the host, so that a
    fit whose solver runs in NumPy never starts JAX's back end."""
    if isinstance(reference, np.ndarray):
        return host_array(values, dtype)
    return to_device(values, dtype)


def _host_side(values) -> bool:
    """Whether ``values`` is a NumPy array or a concrete JAX array on one CPU device (so
    NumPy reads it without a copy; an array sharded over devices keeps JAX's path and its
    sharding)."""
    if isinstance(values, np.ndarray):
        return True
    if not isinstance(values, jax.Array) or isinstance(values, jax.core.Tracer):
        return False
    devices = values.devices()
    return len(devices) == 1 and next(iter(devices)).platform == "cpu"


def concatenate(parts, axis: int = 0) -> jax.Array:
    """``jnp.concatenate(parts, axis)`` without a compiled program where every part is on
    the host (NumPy, or JAX on a CPU): joined by NumPy and moved by ``jax.device_put``.
    An eager ``jnp.concatenate`` compiles once per shape, and a chain's growing draw record
    has a new shape at every chunk (``sample_until_converged``: 78 compilations in the
    diffusion mixture's convergence tests). Accelerator arrays take ``jnp.concatenate``
    (no copy to the host and back)."""
    if all(_host_side(part) for part in parts):
        return jax.device_put(np.concatenate([np.asarray(part) for part in parts], axis=axis))
    return jnp.concatenate(parts, axis=axis)


def take(values, start: int = 0, stop: int | None = None, axis: int = 1) -> jax.Array:
    """``values[:, start:stop]`` (``axis`` 1; any axis) without a compiled program where the
    array is on the host (see :func:`concatenate`; an eager slice compiles once per
    shape); ``values`` itself when the slice is all of it."""
    if start == 0 and (stop is None or stop == values.shape[axis]):
        return values
    index = (slice(None),) * axis + (slice(start, stop),)
    if _host_side(values):
        return jax.device_put(np.asarray(values)[index])
    return values[index]
