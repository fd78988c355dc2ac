"""Blocked Gibbs sweep and MAP refinement for Walder's Dirichlet diffusion mixture (Sec. 4, 5).

The per-site update of Eq. (7) keeps the sufficient statistics of
:class:`graphssl.models.diffusion_mixture.MixtureStats` up to date in O(m C + d C), so a
sweep costs O(m^2 C) instead of the O(m^3 C) of re-evaluating the joint at every site.
The sweep is a systematic scan over nodes 0..m-1: each site update is an exact draw from a
full conditional, hence leaves the joint invariant, and so does their composition.
The sweep as a :class:`~graphssl.inference.mcmc.kernels.Kernel` and the MAP refinement are
in :mod:`graphssl.inference.diffusion_mixture.kernels`.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from graphssl.models.diffusion_mixture import (
    DirichletDiffusionMixture,
    MixtureStats,
    add_site,
    class_log_weights,
    remove_site,
    sufficient_statistics,
)

__all__ = ["MixtureState", "init_state", "site_weights", "gibbs_sweep"]


class MixtureState(NamedTuple):
    """One chain: labels ``y`` int32[m], centres ``beta`` int32[m], their ``stats``."""

    y: jax.Array
    beta: jax.Array
    stats: MixtureStats


@partial(jax.jit, static_argnames="init_beta")
def init_state(model: DirichletDiffusionMixture, key, y=None, beta=None,
               init_beta: str = "random") -> MixtureState:
    """Start state: observed labels clamped; unobserved ``y_i ~ eta`` unless given (distinct
    keys give chains started apart); ``beta`` given, or ``init_beta="random"`` (uniform over
    vertices) or ``"self"`` (``beta_i = i``: every point its own centre). Compiled as one
    program (called outside ``jit``, its statistics were ~40 single-operation compilations)."""
    m = model.n_nodes
    k_y, k_b = jax.random.split(key)
    if y is None:
        y = jax.random.categorical(k_y, model.log_eta, shape=(m,))
    y = jnp.where(model.observed, model.labels, jnp.asarray(y)).astype(jnp.int32)
    if beta is None and init_beta == "self":
        beta = jnp.arange(m)
    elif beta is None and init_beta == "random":
        beta = jax.random.randint(k_b, (m,), 0, m)
    elif beta is None:
        raise ValueError(f"init_beta: use 'random' or 'self', got {init_beta!r}")
    beta = jnp.asarray(beta, jnp.int32)
    return MixtureState(y, beta, sufficient_statistics(model, y, beta))


# ----------------------------------------------------------------------------- Gibbs


def _inverse_cdf(weights, u):
    """Index k with prob weights[k] / sum(weights) from one uniform u, in O(n).

    XLA's cumsum on CPU costs O(n^2) (reduce-window), so long vectors are cut into about
    sqrt(n) blocks: prefix sums of the block totals and of the chosen block are small
    lower-triangular mat-vecs (O(n) in all), at full float precision (a GPU's default TF32
    would round the weights to 10 bits)."""
    n = weights.shape[0]
    if n <= 16:
        cum = jnp.cumsum(weights)
        return jnp.minimum(jnp.sum(cum <= u * cum[-1]), n - 1).astype(jnp.int32)
    width = int(np.ceil(np.sqrt(n)))
    n_blocks = -(-n // width)
    blocks = jnp.pad(weights, (0, n_blocks * width - n)).reshape(n_blocks, width)
    tri_b = jnp.tril(jnp.ones((n_blocks, n_blocks), weights.dtype))
    tri_w = jnp.tril(jnp.ones((width, width), weights.dtype))
    exact = lax.Precision.HIGHEST
    cum_blocks = jnp.matmul(tri_b, jnp.sum(blocks, axis=1), precision=exact)
    target = u * cum_blocks[-1]
    b = jnp.minimum(jnp.sum(cum_blocks <= target), n_blocks - 1)
    before = jnp.where(b > 0, cum_blocks[jnp.maximum(b - 1, 0)], 0.0)
    row = blocks[b]
    cum_row = jnp.matmul(tri_w, row, precision=exact)
    j = jnp.sum(cum_row <= target - before)
    # float rounding can step past the block's last positive weight: clamp onto it
    last = jnp.max(jnp.where(row > 0, jnp.arange(width), 0))
    return jnp.minimum(b * width + jnp.minimum(j, last), n - 1).astype(jnp.int32)


def site_weights(model, removed, i):
    """The two factors of Eq. (7) for node i, given the statistics without it: the class
    factor ``A_y`` (log, float[C]; :func:`class_log_weights`) and the centre weights
    ``(c'_{y,l} + a/m) D[i, l] / max_l D[i, l]`` (float[C, m]), so that
    ``p(y, beta = l | rest) ∝ exp(A_y) * weights[y, l]``."""
    comp = (removed.component_counts.astype(model.alpha.dtype) + model.alpha / model.n_nodes)
    return class_log_weights(model, removed, i), comp * model.diffusion_scaled[i][None, :]


def _site_update(model, greedy: bool, carry, inputs):
    """Blocked update of (y_i, beta_i) from Eq. (7); beta_i alone when node i is observed.

    The conditional factorises as ``p(y | rest) p(beta | y, rest)`` with
    ``p(y | rest) ∝ A_y sum_l (c'_{y,l} + a/m) D[i, l]`` (``A_y`` = :func:`class_log_weights`)
    and ``p(beta = l | y, rest) ∝ (c'_{y,l} + a/m) D[i, l]``: y is drawn first, then beta,
    from two uniforms, in linear space with ``A_y`` max-normalised (no overflow at any gamma).
    ``greedy`` takes the joint argmax instead (MAP refinement, Sec. 5).
    """
    y, beta, stats = carry
    i, u_y, u_b = inputs
    y_old, b_old = y[i], beta[i]
    removed = remove_site(model, stats, i, y_old, b_old)
    a, comp = site_weights(model, removed, i)
    log_py = a + jnp.log(jnp.sum(comp, axis=1))
    probs = jax.nn.softmax(log_py)
    if greedy:
        best = a + jnp.log(jnp.max(comp, axis=1))
        y_new = jnp.argmax(best).astype(jnp.int32)
        b_new = jnp.argmax(comp[y_new]).astype(jnp.int32)
    else:
        y_new = _inverse_cdf(probs, u_y)
        b_new = _inverse_cdf(comp[y_new], u_b)
    stats = add_site(model, removed, i, y_new, b_new)
    return (y.at[i].set(y_new), beta.at[i].set(b_new), stats), probs


def _sweep_uniforms(model, key, greedy: bool):
    """The sweep's two uniforms per site, float[2, m]; a greedy sweep draws nothing (``key``
    may then be None)."""
    if key is None and not greedy:
        raise ValueError("key: a sampling sweep needs a PRNG key (only greedy=True takes None)")
    if key is None:
        return jnp.zeros((2, model.n_nodes), model.alpha.dtype)
    return jax.random.uniform(key, (2, model.n_nodes), dtype=model.alpha.dtype)


def gibbs_sweep(model, key, state: MixtureState, greedy: bool = False):
    """One systematic-scan sweep of Eq. (7) over all nodes (``lax.scan``); ``key`` None
    with ``greedy`` (no draw).

    Returns ``(state, class_probs float[m, C])`` where ``class_probs[i] = p(y_i | rest)`` at
    node i's update (a Rao–Blackwellised posterior-mean estimate; one-hot on observed nodes).
    The Laplacian statistics are recomputed at the start so float rounding never accumulates.
    """
    m = model.n_nodes
    stats = sufficient_statistics(model, state.y, state.beta)
    u = _sweep_uniforms(model, key, greedy)
    (y, beta, stats), probs = lax.scan(
        partial(_site_update, model, greedy),
        (state.y, state.beta, stats),
        (jnp.arange(m), u[0], u[1]),
    )
    return MixtureState(y, beta, stats), probs
