"""Criteria of the Boltzmann MRF's grid route, per grid point (Zhu & Ghahramani 2002).

**(CV), the model's predictive probability of the labelled points.**

    CV(Theta) = sum_{i in L} log P(o_i | O_{L \\ fold(i)}, X, Theta),                   (CV)

``K``-fold over the labelled points; ``P(o_i | ...)`` is the clamped phase of the fold
without ``i``'s observation, Rao-Blackwellised over the draws (the Gibbs conditional of
``y_i``, Eq. 25, averaged over the chains' states) and passed through the label-noise
channel of Eq. (40), ``P(o | y) = e^{e^gamma [o = y]} / (C - 1 + e^{e^gamma})``, so that one
confident error costs at most ``log(C - 1 + e^{e^gamma})`` nats (:func:`held_out_log_prob`).

**Degeneracy.**  A pairwise model with few labels can prefer a labelling in which a whole
class region takes another class (soft evidence: all of it; clamped labels: all but the
labelled nodes -- the small cuts of Blum & Chawla 2001).  Swendsen-Wang and Gibbs chains
started from the labels never reach it (bonds join equal labels only), and would report a
posterior the model does not have.  :func:`merge_gain` estimates the free-energy change of
the best such merge from the chains' draws; a negative value marks the grid point as
degenerate.

Symbol map: see :mod:`graphssl.models.boltzmann`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from graphssl.models.boltzmann import log_evidence_normaliser
from graphssl.models.protocol import conditional_logits_from_tables

__all__ = ["held_out_log_prob", "merge_gain"]


def held_out_log_prob(model, draws, rows, observed_labels, evidence):
    """(CV)'s term of each labelled node ``rows[k]`` (observation ``observed_labels[k]``)
    under ``model`` (the fold without that observation), ``log mean_s sum_y P(y_i = y |
    y_-i^s) P(o_i | y)``, ``float[rows]``; ``draws [S, n]``; ``evidence`` = ``e^gamma``."""
    tables = model.pairwise_tables()
    logits = jax.vmap(lambda y: conditional_logits_from_tables(tables, y, rows))(draws)
    log_p = jax.nn.log_softmax(logits, axis=-1)  # [S, l, C]
    log_p_obs = jnp.take_along_axis(log_p, observed_labels[None, :, None], axis=-1)[..., 0]
    log_mean = jax.scipy.special.logsumexp(log_p_obs, axis=0) - jnp.log(draws.shape[0])
    C = model.n_classes
    # P(o | y-dist) = (p(o) e^E + 1 - p(o)) / (C - 1 + e^E), E = e^gamma, in log space
    log1m = jnp.log1p(-jnp.minimum(jnp.exp(log_mean), 1.0 - 1e-16))
    return jnp.logaddexp(log_mean + evidence, log1m) - log_evidence_normaliser(
        jnp.log(evidence), C)


def merge_gain(model, draws, rows, observed_labels, evidence, hard, entropy_draws):
    """Estimated free-energy change of the best class merge (``+inf`` when no class region
    holds an observation).  In a draw, region ``a`` (the nodes labelled ``a``) splits into
    its free nodes ``F_a`` and its observed ones ``L_a``.  Two moves, each into another
    class ``b``'s region ``R_b``:

    * free merge -- relabel ``F_a`` as ``b``: ``dE = -W(F_a, R_b) + W(F_a, L_a)``;
    * full merge (soft evidence only) -- relabel all of region ``a``: ``dE = -W(R_a, R_b) +
      e^gamma (K_aa - K_ab)``, ``K_ab`` the observations ``o = b`` in region ``a``;

    ``W(S, T)`` the coupling between the node sets.  A merge loses about the entropy of the
    ``a``/``b`` split of the nodes concerned, estimated by ``sum_i H_i`` over both regions'
    moved kind of nodes (``H_i``: entropy of node ``i``'s label over ``entropy_draws``, the
    draws of every fold's chains, independent of one another), which is added.  Returns
    ``min mean_s (dE + entropy)`` over the moves and the class pairs with observations in
    region ``a``: negative means the model prefers a merged labelling to the states the
    chains hold, i.e. it has degenerated.  ``hard``: labels clamped (no full merge)."""
    C, n = model.n_classes, model.n_nodes
    g = model.graph
    dtype = g.weights.dtype
    p = jnp.mean(jax.nn.one_hot(entropy_draws, C, dtype=dtype), axis=0)
    entropy = -jnp.sum(jnp.where(p > 0, p * jnp.log(jnp.where(p > 0, p, 1.0)), 0.0), axis=1)
    obs = jax.nn.one_hot(observed_labels, C, dtype=dtype)
    is_obs = jnp.zeros(n, dtype).at[rows].set(1.0)

    def one(y):
        onehot = jax.nn.one_hot(y, C, dtype=dtype)
        free, held = onehot * (1.0 - is_obs)[:, None], onehot * is_obs[:, None]
        wy = jax.ops.segment_sum(g.weights[:, None] * onehot[g.receivers], g.senders,
                                 num_segments=n)  # [n, C]: coupling of each node to each class
        wheld = jax.ops.segment_sum(g.weights[:, None] * held[g.receivers], g.senders,
                                    num_segments=n)
        free_to = free.T @ wy  # W(F_a, R_b)
        free_h, all_h = free.T @ entropy, onehot.T @ entropy
        free_merge = -free_to + jnp.diag(free.T @ wheld)[:, None]
        free_merge = free_merge + free_h[:, None] + free_h[None, :]
        K = onehot[rows].T @ obs
        full = -(onehot.T @ wy) + evidence * (jnp.diag(K)[:, None] - K)
        full = full + all_h[:, None] + all_h[None, :]
        best = free_merge if hard else jnp.minimum(free_merge, full)
        return best, K.sum(1)

    bound, labelled = jax.vmap(one)(draws)
    bound = jnp.mean(bound, axis=0)
    valid = (jnp.mean(labelled, axis=0) > 0)[:, None] & ~jnp.eye(C, dtype=bool)
    return jnp.min(jnp.where(valid, bound, jnp.inf))
