"""Faulty copies of the samplers (mutation tests): each injects one fault into the real
kernel's code path, so the exactness check (``exactness.py``) must reject it.

* ``scaled_logits``: sequential Gibbs whose conditional logits are multiplied by 0.97;
* ``skip_colour``: chromatic Gibbs that skips its first colour class;
* ``skip_stacked_colour``: the stacked layout's sweep (its real code) without its first row;
* ``synchronous``: Gibbs updating all nodes at once from the old labels (not chromatic);
* ``weak_bonds``: Swendsen–Wang bonding with ``1 - exp(-0.97 J)``;
* ``no_hastings``: Metropolis–Hastings with an asymmetric proposal, Hastings ratio dropped;
* ``field_in_exchange``: replica exchange whose exchange ratio counts the field with the
  couplings (``(s_{r+1} - s_r) (F(y) - F(y'))``, ``F = A + H``), where only the couplings
  are tempered (the field cancels);
* ``always_exchange``: replica exchange that swaps every proposed pair.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from graphssl.inference import LabelState, metropolis_hastings, sequential_gibbs, swendsen_wang
from graphssl.inference.coloring import color_classes, greedy_coloring
from graphssl.inference.mcmc.gibbs import (
    GibbsInfo,
    _stacked_classes,
    _stacked_layout,
    _stacked_sweep,
    _update,
)
from graphssl.inference.mcmc.kernels import Kernel, pairwise_check, pairwise_init
from graphssl.models.protocol import PairwiseTables, pairwise_tables


class _Rescaled:
    """A model whose tables the sampler reads rescaled (the fault lives in the kernel: the
    wrapper is built inside the faulty step, the chain's energy is still the model's)."""

    def __init__(self, model, coupling_scale: float, unary_scale: float):
        self._model, self._cs, self._us = model, coupling_scale, unary_scale

    def __getattr__(self, name):
        return getattr(self._model, name)

    def pairwise_tables(self) -> PairwiseTables:
        t = pairwise_tables(self._model)
        return t._replace(coupling=self._cs * t.coupling, unary=self._us * t.unary)


def scaled_logits(scale: float = 0.97) -> Kernel:
    """Sequential Gibbs drawing from ``softmax(scale * logits)``."""
    real = sequential_gibbs()

    def step(model, key, state):
        return real.step(_Rescaled(model, scale, scale), key, state)

    return Kernel(pairwise_init, step, None, pairwise_check)


def _classes(graph):
    return [jnp.asarray(c) for c in color_classes(greedy_coloring(graph)) if c.size]


def skip_colour(graph) -> Kernel:
    """Chromatic Gibbs (padded layout's update) over every colour class but the first."""
    classes = _classes(graph)

    def step(model, key, state):
        t = pairwise_tables(model)
        observed = jnp.asarray(model.observed, bool)
        labels = state.labels
        keys = jax.random.split(key, len(classes))
        for nodes, k in zip(classes[1:], keys[1:], strict=True):
            labels = _update(t, observed, k, labels, nodes)
        return state._replace(labels=labels), GibbsInfo()

    return Kernel(pairwise_init, step, None, pairwise_check)


def skip_stacked_colour(graph) -> Kernel:
    """The stacked chromatic sweep (``layout="stacked"``, its own functions) with the first
    row of the stacked colour classes dropped, as an off-by-one loop bound would."""
    classes = jnp.asarray(_stacked_classes(greedy_coloring(graph)))

    def step(model, key, state):
        observed = jnp.asarray(model.observed, bool)
        layout = _stacked_layout(pairwise_tables(model), observed, classes)
        labels = _stacked_sweep(tuple(x[1:] for x in layout), key, state.labels, classes[1:])
        return state._replace(labels=labels), GibbsInfo()

    return Kernel(pairwise_init, step, None, pairwise_check)


def synchronous() -> Kernel:
    """Every node drawn at once from its conditional given the old labels."""

    def step(model, key, state):
        t = pairwise_tables(model)
        observed = jnp.asarray(model.observed, bool)
        nodes = jnp.arange(model.n_nodes, dtype=jnp.int32)
        return state._replace(labels=_update(t, observed, key, state.labels, nodes)), GibbsInfo()

    return Kernel(pairwise_init, step, None, pairwise_check)


def weak_bonds(scale: float = 0.97) -> Kernel:
    """Swendsen–Wang whose bonds form with ``1 - exp(-scale J)`` (field untouched)."""
    real = swendsen_wang()

    def step(model, key, state):
        return real.step(_Rescaled(model, scale, 1.0), key, state)

    return Kernel(pairwise_init, step, None, pairwise_check)


UP = 0.75  # probability of proposing label + 1 (else label - 1): an asymmetric proposal


def _propose_shift(model, key, state, with_ratio: bool):
    """One free node (uniform among all; a clamped pick proposes no change) moves to
    ``label + 1`` with probability ``UP``, to ``label - 1`` otherwise (mod q). The reverse
    of a +1 move is a -1 move: ``log q(x|x') - log q(x'|x) = log((1 - UP) / UP)``."""
    k1, k2 = jax.random.split(key)
    node = jax.random.randint(k1, (), 0, model.n_nodes)
    up = jax.random.uniform(k2) < UP
    shift = jnp.where(up, 1, -1)
    q = model.n_classes
    old = state.labels[node]
    free = ~jnp.asarray(model.observed, bool)[node]
    new = jnp.where(free, (old + shift) % q, old)
    ratio = jnp.where(up, np.log((1 - UP) / UP), np.log(UP / (1 - UP)))
    log_q_ratio = jnp.where(free, ratio, 0.0) if with_ratio else jnp.zeros(())
    return LabelState(state.labels.at[node].set(new.astype(state.labels.dtype))), log_q_ratio


def shift_move(with_ratio: bool = True) -> Kernel:
    """The asymmetric ``label +- 1`` Metropolis–Hastings move (correct with the ratio)."""
    if with_ratio:
        return metropolis_hastings(lambda m, k, s: _propose_shift(m, k, s, True), name="shift")
    return metropolis_hastings(lambda m, k, s: _propose_shift(m, k, s, False), name="shift")


def no_hastings() -> Kernel:
    """:func:`shift_move` without its Hastings ratio."""
    return shift_move(with_ratio=False)


def _tempered_with(ratio, scales) -> Kernel:
    """The real replica-exchange kernel with its log exchange ratio
    (:func:`graphssl.inference.mcmc.tempering.exchange_log_ratio`) replaced by ``ratio(model,
    tables, ladder, scales)`` while its step is traced."""
    from graphssl.inference.mcmc import tempering

    real = tempering.replica_exchange(swendsen_wang(), scales)

    def faulty(model, ladder, scales):
        return ratio(model, pairwise_tables(model), ladder, scales)

    def step(model, key, state):
        saved, tempering.exchange_log_ratio = tempering.exchange_log_ratio, faulty
        try:
            return real.step(model, key, state)
        finally:
            tempering.exchange_log_ratio = saved

    return Kernel(real.init, step, None, real.check)


def field_in_exchange(scales=(0.2, 0.42, 0.68, 1.0)) -> Kernel:
    """Exchange ratio with the field counted as if it were tempered too."""
    from graphssl.models.protocol import pairwise_energy

    def ratio(model, tables, ladder, scales):
        full = jax.vmap(lambda y: -pairwise_energy(model, y, tables))(ladder)  # A + H
        return (scales[1:] - scales[:-1]) * (full[:-1] - full[1:])

    return _tempered_with(ratio, scales)


def always_exchange(scales=(0.2, 0.42, 0.68, 1.0)) -> Kernel:
    """Every proposed pair swaps."""
    return _tempered_with(lambda model, tables, ladder, scales: jnp.full(
        ladder.shape[0] - 1, jnp.inf), scales)
