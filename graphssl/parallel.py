"""Scaling past one device: node-sharded mean field, and multi-host set-up.

Two axes can be spread over devices:

* **chains** — :func:`graphssl.inference.mcmc.chains.sample_chains` places its chain axis across
  the local devices by itself when there are several and they divide ``n_chains``;
* **nodes** — :func:`sharded_mean_field` splits the nodes of a mean-field solve (the Jacobi
  order of Bergamim & Breve Eqs. 15-16) across every device of a 1-D mesh. Each device updates
  its block of rows; XLA gathers the neighbours' marginals across devices in every sweep.

Several hosts: start every process with :func:`initialize_distributed` (a thin wrapper of
``jax.distributed.initialize``), then build the mesh from ``jax.devices()`` — the global
device list — exactly as on one host; the same :func:`sharded_mean_field` call runs on all of
them (SPMD), and every process receives the full result. On one machine the code path is
tested with ``XLA_FLAGS=--xla_force_host_platform_device_count=4``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from graphssl.inference.optimize.mean_field import (
    MeanFieldInfo,
    MeanFieldOptions,
    MeanFieldSolution,
    mean_field_tables,
    solve_mean_field,
)

__all__ = ["node_mesh", "pad_rows", "sharded_mean_field", "initialize_distributed"]


def initialize_distributed(coordinator_address: str | None = None, num_processes=None,
                           process_id=None, **kwargs) -> None:
    """Join a multi-host JAX run (call once per process, before any other JAX call).

    Arguments are those of ``jax.distributed.initialize``; on managed clusters (SLURM, TPU
    pods, Kubernetes with the JAX launcher) all may be left out and are auto-detected.
    """
    jax.distributed.initialize(coordinator_address, num_processes, process_id, **kwargs)


def node_mesh(devices=None) -> jax.sharding.Mesh:
    """A 1-D mesh with axis ``"nodes"`` over ``devices`` (default: every global device)."""
    devices = jax.devices() if devices is None else list(devices)
    return jax.sharding.Mesh(np.asarray(devices), ("nodes",))


def pad_rows(array, n_padded: int, fill=0):
    """Append rows filled with ``fill`` until the leading axis has ``n_padded`` entries."""
    array = jnp.asarray(array)
    extra = n_padded - array.shape[0]
    if extra < 0:
        raise ValueError(f"n_padded: {n_padded} is smaller than the {array.shape[0]} rows")
    if extra == 0:
        return array
    padding = jnp.full((extra,) + array.shape[1:], fill, dtype=array.dtype)
    return jnp.concatenate([array, padding])


def sharded_mean_field(model, options: MeanFieldOptions | None = None, *, mesh=None,
                       couplings: str = "directed"):
    """Naive mean field (Jacobi order) with the nodes split across the devices of ``mesh``.

    The node count is padded to a multiple of the device count with isolated, unclamped dummy
    nodes (neighbour index = themselves, weight 0, field 0): they never influence a real node,
    and are dropped from the result. Returns ``(MeanFieldSolution, MeanFieldInfo)`` exactly as
    :func:`graphssl.inference.optimize.mean_field.naive_mean_field` with ``order="parallel"``
    (``couplings`` as there: the model's pairwise tables, directed W where it kept one).
    """
    options = MeanFieldOptions() if options is None else options
    if options.order != "parallel":
        raise ValueError(
            "options.order: only the parallel (Jacobi) order can be split across devices; "
            "use order='parallel'"
        )
    mesh = node_mesh() if mesh is None else mesh
    n_devices = mesh.devices.size
    n = model.n_nodes
    n_padded = -(-n // n_devices) * n_devices
    unary, index, weight = mean_field_tables(model, couplings)
    dummy_index = jnp.arange(n, n_padded, dtype=index.dtype)[:, None]
    index = jnp.concatenate([index, jnp.broadcast_to(dummy_index, (n_padded - n, index.shape[1]))])
    weight = pad_rows(weight, n_padded)
    unary = pad_rows(unary, n_padded)
    clamped = pad_rows(model.observed, n_padded, False)
    labels = pad_rows(model.labels, n_padded, 0)
    rows = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("nodes"))
    unary, index, weight, clamped, labels = jax.device_put(
        (unary, index, weight, clamped, labels), rows
    )
    solution, info = solve_mean_field(unary, index, weight, clamped, labels, None, options)
    solution = MeanFieldSolution(*(x[:n] for x in solution))
    return solution, MeanFieldInfo(*info)
