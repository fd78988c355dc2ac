"""Global Metropolis moves (Zhu & Ghahramani 2002, Sec. 3.3).

The label-permutation move proposes ``π(Y) = (π(y_1), ..., π(y_n))`` for a permutation ``π``
of the classes drawn uniformly. The proposal is symmetric (``π`` and ``π^{-1}`` are equally
likely), so ``r = P(π(Y)) / P(Y)``.

Acceptance rule. The paper accepts with Barker's rule ``P(π(Y)) / (P(Y) + P(π(Y)))``. We
default to the Metropolis rule ``min(1, P(π(Y)) / P(Y))``: both satisfy detailed balance for
a symmetric proposal, but Metropolis accepts at least as often in every state, so by Peskun's
theorem its estimates have no larger asymptotic variance. The gap matters most exactly where
the move is meant to help: for a field-free Potts energy every permutation has ``r = 1``;
Metropolis always swaps, Barker only half of the time. ``rule="barker"`` reproduces the paper.

Clamped phase. A permutation that moves the label of a clamped node leaves the support
(``P = 0``) and would always be rejected. We therefore draw ``π`` uniformly among the
permutations that fix every class present among the clamped labels (all permutations in the
unclamped phase). This set does not depend on ``Y``, the proposal stays symmetric and the
move stays exact, and with no clamped node it is the paper's proposal.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from graphssl.inference.mcmc.kernels import Kernel, metropolis_hastings

__all__ = ["permutation_move", "random_class_permutation"]


def random_class_permutation(key: jax.Array, movable: jax.Array) -> jax.Array:
    """Uniform permutation ``int32[q]`` of the classes where ``movable`` is True; the others
    map to themselves. ``perm[c]`` is the new label of class ``c``."""
    q = movable.shape[0]
    classes = jnp.arange(q, dtype=jnp.int32)
    u = jax.random.uniform(key, (q,))
    slots = jnp.argsort(~movable, stable=True)  # movable classes first, in class order
    shuffled = jnp.argsort(jnp.where(movable, u, 2.0 + classes))  # movable first, shuffled
    return jnp.zeros(q, jnp.int32).at[slots].set(shuffled.astype(jnp.int32))


def _clamped_classes(model) -> jax.Array:
    observed = jnp.asarray(model.observed, dtype=bool)
    hits = jax.nn.one_hot(jnp.asarray(model.labels), model.n_classes, dtype=jnp.int32)
    return jnp.any((hits * observed[:, None]) > 0, axis=0)


def _propose_permutation(model, key, state):
    perm = random_class_permutation(key, ~_clamped_classes(model))
    labels = perm[state.labels].astype(state.labels.dtype)
    return state._replace(labels=labels), jnp.zeros((), dtype=jnp.float32)


def permutation_move(rule: str = "metropolis", name: str = "perm") -> Kernel:
    """Global label-permutation Metropolis move (Sec. 3.3); see the module docstring for the
    acceptance ``rule`` ("metropolis" default, "barker" as in the paper). Info: the
    NamedTuple ``mh_info_type(name)``, fields ``{name}_accept_prob`` and ``{name}_accepted``
    (:func:`~graphssl.inference.mcmc.kernels.mh_info_type`)."""
    return metropolis_hastings(_propose_permutation, rule=rule, name=name)
