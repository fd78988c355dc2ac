"""Replica exchange over the coupling strength (parallel tempering) for pairwise label models.

Near the ordering transition of a Potts / Boltzmann MRF a single chain, Swendsen–Wang
included, keeps the macrostate it first falls into: on Digit1-10 (split 2, 1500 nodes, the
Boltzmann MRF at ``alpha_0 = -0.5``) chains started from a two-domain state stayed there for
20000 sweeps, and chains started from a one-class state stayed there too, 110 nats lower in
energy. What such chains report depends on their start, not on the model.

Replica exchange (Swendsen & Wang 1986; Geyer 1991; Hukushima & Nemoto 1996) runs ``R``
copies of the chain at couplings ``s_r J`` for scales ``0 <= s_0 < ... < s_{R-1} = 1`` (the
field ``h`` unchanged) and, after every sweep, proposes to exchange the states of
neighbouring copies. With law (P), ``log p_r(y) = s_r A(y) + H(y) + const``, where
``A(y) = sum_{i<j} J_ij [y_i = y_j]`` (:func:`~graphssl.models.protocol.pair_agreement`) and
``H(y) = sum_i h_i(y_i)``, the exchange of ``y`` (copy ``r``) and ``y'`` (copy ``r + 1``) is
accepted with probability

    ``min(1, exp((s_{r+1} - s_r) (A(y) - A(y'))))``

(the field cancels). Every copy's law is left invariant, so copy ``R - 1`` samples the
model itself, while the weaker copies, which mix fast, carry states across the barrier. The
pairs exchanged alternate between ``(0, 1), (2, 3), ...`` and ``(1, 2), (3, 4), ...``
(the deterministic even-odd scheme: Okabe et al. 2001; Syed et al. 2022), each half-step
reversible, so their composition keeps every copy's law.

Symbol map: ``scales`` = ``s_r``; the base kernel sweeps each copy on the model whose
tables' ``coupling`` is multiplied by ``s_r`` (:class:`CouplingScaled`).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from graphssl.inference.mcmc.kernels import Kernel, LabelState, check_model, info_type
from graphssl.models.protocol import pair_agreement, pairwise_energy, pairwise_tables
from graphssl.validation import is_whole

__all__ = ["CouplingScaled", "ReplicaState", "ReplicaExchangeInfo", "replica_exchange",
           "coupling_ladder", "tempered_step", "exchange", "exchange_log_ratio", "swap_pairs"]


class ReplicaState(NamedTuple):
    """State of :func:`replica_exchange`: ``labels int32[n]`` (the copy at scale 1: the
    model's own chain), ``ladder int32[R, n]`` (every copy, scale 1 last) and ``parity``
    (which half of the neighbouring pairs the next exchange proposes)."""

    labels: jax.Array
    ladder: jax.Array
    parity: jax.Array


ReplicaExchangeInfo = info_type("ReplicaExchangeInfo", ("swaps_accepted", "swaps_proposed"))
ReplicaExchangeInfo.__doc__ = (
    "Info of :func:`replica_exchange`: ``swaps_accepted`` and ``swaps_proposed`` (exchanges "
    "of neighbouring copies this step; their ratio over a run is the exchange rate).")


@dataclasses.dataclass(frozen=True)
class CouplingScaled:
    """The pairwise model ``model`` with its couplings ``J_ij`` multiplied by ``scale`` (the
    field and the clamped nodes unchanged): copy ``r`` of :func:`replica_exchange`. Built
    inside a traced step (``scale`` may be a tracer); not a pytree."""

    model: object
    scale: jax.Array

    @property
    def n_nodes(self) -> int:
        return self.model.n_nodes

    @property
    def n_classes(self) -> int:
        return self.model.n_classes

    @property
    def observed(self):
        return self.model.observed

    @property
    def labels(self):
        return self.model.labels

    def pairwise_tables(self):
        t = pairwise_tables(self.model)
        return t._replace(coupling=self.scale * t.coupling, directed_coupling=None)

    def energy(self, labels):
        return pairwise_energy(self, labels)


def coupling_ladder(weakest: float, n_replicas: int) -> np.ndarray:
    """``n_replicas`` scales from ``weakest`` to 1, evenly spaced in ``log s`` (for a Boltzmann
    MRF, evenly in ``alpha_0``: ``A_ij = e^{alpha_0} k_ij``); ``weakest`` in (0, 1), a
    whole ``n_replicas >= 2``."""
    if not 0.0 < float(weakest) < 1.0:  # 1.0 made every copy the model itself
        raise ValueError(f"weakest: a scale in (0, 1), got {weakest!r}")
    if not is_whole(n_replicas, 2):
        raise ValueError(f"n_replicas: at least 2 copies, got {n_replicas!r}")
    return np.exp(np.linspace(np.log(float(weakest)), 0.0, int(n_replicas)))


def _check_scales(scales) -> np.ndarray:
    s = np.asarray(scales, dtype=np.float64)
    if s.ndim != 1 or s.size < 2:
        raise ValueError("scales: give at least 2 coupling scales, increasing, the last 1.0")
    # the last copy is the model: 1.0 up to rounding (1e-12; np.isclose let 1.000009 run
    # the "model" at other couplings), then exactly 1.0
    if (not np.all(np.isfinite(s)) or np.any(np.diff(s) <= 0) or s[0] < 0
            or abs(s[-1] - 1.0) > 1e-12):
        raise ValueError(f"scales: finite, increasing, >= 0, the last 1.0 (the model itself); got "
                         f"{s.tolist()}; coupling_ladder(weakest, n) makes one")
    s[-1] = 1.0
    return s


def replica_exchange(base: Kernel, scales) -> Kernel:
    """Replica-exchange kernel over coupling scales (module docstring).

    Args:
      base: the kernel that sweeps each copy (Swendsen–Wang, Gibbs, ...; it must read the
        model through ``pairwise_tables``, as the generic kernels do).
      scales: ``float[R]``, increasing, ``>= 0``, the last 1.0 (:func:`coupling_ladder`).

    One step = one ``base`` step of every copy (``vmap`` over copies) + one exchange round.
    ``state.labels`` is the model's own chain, so :func:`~graphssl.inference.mcmc.chains.
    sample_chains` records, checks and Rao-Blackwellises it like any other; a kernel
    composed after this one that changes ``labels`` changes copy ``R - 1``. Cost: ``R``
    base sweeps a step. Info: :data:`ReplicaExchangeInfo`.
    """
    ladder_scales = jnp.asarray(_check_scales(scales))
    n_replicas = int(ladder_scales.shape[0])

    def check(model):
        check_model(base, model)

    def init(model, key, labels=None):
        keys = jax.random.split(key, n_replicas)
        # a copy's start does not depend on its scale: the model's own init for each
        states = [base.init(model, keys[r], labels) for r in range(n_replicas)]
        ladder = jnp.stack([s.labels for s in states])
        return ReplicaState(ladder[-1], ladder, jnp.zeros((), jnp.int32))

    def step(model, key, state):
        ladder = state.ladder.at[-1].set(state.labels)  # a composed kernel may have moved it
        ladder, accepted, proposed = tempered_step(base, model, key, ladder, ladder_scales,
                                                   state.parity)
        info = ReplicaExchangeInfo(accepted, proposed)
        return ReplicaState(ladder[-1], ladder, 1 - state.parity), info

    return Kernel(init, step, None, check)


def tempered_step(base: Kernel, model, key, ladder, scales, parity):
    """One step of replica exchange on ``ladder int32[R, n]`` at coupling ``scales float[R]``
    (traceable: a driver may pass scales that are not known on the host): one ``base`` step
    of every copy, then one :func:`exchange` round of the pairs of ``parity``. Returns
    ``(ladder, accepted, proposed)``."""
    key_sweep, key_swap = jax.random.split(key)
    keys = jax.random.split(key_sweep, ladder.shape[0])

    def sweep(key, labels, scale):
        state, _ = base.step(CouplingScaled(model, scale), key, LabelState(labels))
        return state.labels

    ladder = jax.vmap(sweep)(keys, ladder, scales)
    return exchange(model, key_swap, ladder, scales, parity)


def exchange(model, key, ladder, scales, parity):
    """One exchange round: the pairs ``(r, r + 1)`` with ``r % 2 == parity`` each swap their
    states with probability ``min(1, exp(exchange_log_ratio))``. Returns ``(ladder,
    accepted, proposed)``."""
    return swap_pairs(key, ladder, exchange_log_ratio(model, ladder, scales), parity)


def exchange_log_ratio(model, ladder, scales):
    """``float[R - 1]``: the log acceptance ratio of exchanging copies ``r`` and ``r + 1``,
    ``(s_{r+1} - s_r) (A(y_r) - A(y_{r+1}))`` (the field cancels)."""
    tables = pairwise_tables(model)
    agreement = jax.vmap(lambda y: pair_agreement(tables, y))(ladder)  # A(y_r), [R]
    return (scales[1:] - scales[:-1]) * (agreement[:-1] - agreement[1:])


def swap_pairs(key, ladder, log_ratio, parity):
    """Swap the states of the pairs ``(r, r + 1)`` with ``r % 2 == parity`` where a uniform
    draw's log falls below ``log_ratio[r]``. Returns ``(ladder, accepted, proposed)``."""
    r = jnp.arange(ladder.shape[0] - 1)
    lower = (r % 2) == parity  # pairs (r, r + 1) proposed this round
    u = jax.random.uniform(key, r.shape)
    swap = lower & (jnp.log(u) < log_ratio)
    # copy r takes r + 1's state where pair (r, r+1) swaps, copy r + 1 takes r's
    from_above = jnp.concatenate([swap, jnp.zeros((1,), bool)])
    from_below = jnp.concatenate([jnp.zeros((1,), bool), swap])
    up = jnp.roll(ladder, -1, axis=0)
    down = jnp.roll(ladder, 1, axis=0)
    ladder = jnp.where(from_above[:, None], up, jnp.where(from_below[:, None], down, ladder))
    return ladder, jnp.sum(swap.astype(jnp.int32)), jnp.sum(lower.astype(jnp.int32))
