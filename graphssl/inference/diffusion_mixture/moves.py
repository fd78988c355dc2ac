"""Metropolis–Hastings moves of Walder's Dirichlet diffusion mixture (Sec. 4.1 and 4.2).

Each move is a pure ``(model, key, state) -> (state, accepted)`` function over a
:class:`~graphssl.inference.diffusion_mixture.gibbs.MixtureState`; its detailed-balance
argument is written in its docstring and checked against exact enumeration in
``tests/test_diffusion_mixture.py``. The paper's two moves live here; the split-merge
moves in :mod:`.split_merge`, the cluster, block and component-flip moves in
:mod:`.cluster_moves`.
"""


from __future__ import annotations

import jax
import jax.numpy as jnp

from graphssl.inference.diffusion_mixture.gibbs import MixtureState
from graphssl.inference.diffusion_mixture.proposals import categorical, uniform_pick
from graphssl.models.diffusion_mixture import (
    log_joint_delta,
    log_joint_terms,
    sufficient_statistics,
)

__all__ = ["resample_component_move", "relabel_components_move"]


def resample_component_move(model, key, state: MixtureState):
    """Mixture-component re-sampling (Walder Sec. 4.1): move C_{j,l} to an empty centre l'.

    Proposal: pick a node uniformly, so (j, l) = (y, beta) of that node is picked with
    probability c_{j,l} / m (step 1); pick l' from ``E_j ∪ {l}`` with probability
    ``D[l', l] / Z_l``, ``Z_l = sum_{l'' in E_j ∪ {l}} D[l'', l]`` (step 2); set
    ``beta_i <- l'`` for all i in C_{j,l}.

    Detailed balance. The reverse move picks the moved component (same count c_{j,l}, same
    probability c_{j,l} / m) and proposes l from ``E'_j ∪ {l'}``, where
    ``E'_j = E_j \\ {l'} ∪ {l}``; so ``E'_j ∪ {l'} = E_j ∪ {l}``: the same candidate set, now
    weighted by ``D[., l']``. Class counts, p_BAL, p_MRF and the multiset of component counts
    (hence p_DM, Eq. 6) are unchanged, so the target ratio is the likelihood ratio and

        A = D[l, l'] / D[l', l] * Z_l / Z_l' * prod_{i in C_jl} D[i, l'] / D[i, l].

    Walder's ratio omits ``Z_l / Z_l'``; it is needed whenever the candidate set is not all
    vertices (tested by exact enumeration). Returns ``(state, accepted)``.
    """
    k_node, k_target, k_u = jax.random.split(key, 3)
    m = model.n_nodes
    y, beta, stats = state
    node = jax.random.randint(k_node, (), 0, m)
    j, l = y[node], beta[node]
    candidates = (stats.component_counts[j] == 0) | (jnp.arange(m) == l)
    log_d = model.log_diffusion
    fwd = jnp.where(candidates, log_d[:, l], -jnp.inf)
    l_new = categorical(k_target, fwd)
    rev = jnp.where(candidates, log_d[:, l_new], -jnp.inf)
    members = (y == j) & (beta == l)
    log_lik = jnp.sum(jnp.where(members, log_d[:, l_new] - log_d[:, l], 0.0))
    log_ratio = (log_d[l, l_new] - log_d[l_new, l]
                 + jax.nn.logsumexp(fwd) - jax.nn.logsumexp(rev) + log_lik)
    accept = (l_new != l) & (jnp.log(jax.random.uniform(k_u, dtype=log_d.dtype)) < log_ratio)
    beta_new = jnp.where(accept & members, l_new, beta)
    comp = stats.component_counts
    count = comp[j, l]
    comp = comp.at[j, l].add(jnp.where(accept, -count, 0)).at[j, l_new].add(
        jnp.where(accept, count, 0))
    return MixtureState(y, beta_new, stats._replace(component_counts=comp)), accept


def relabel_components_move(model, key, state: MixtureState, max_components: int = 2):
    """Mixture-component re-labelling of up to R components (Walder Sec. 4.2).

    Proposal (auxiliary variables a): r ~ U{1..R}; for t = 1..r pick an unobserved node
    uniformly among those not yet selected, its *unobserved block*
    ``B_t = {i unobserved : y_i = j_t, beta_i = l_t}`` (so blocks are chosen without
    replacement with probability proportional to their sizes, step 2); draw
    ``y'_t ~ eta`` (step 3); set ``y_i <- y'_t`` on B_t (step 4). Observed nodes are never
    relabelled (their labels are clamped), so blocks count unobserved nodes only.

    Detailed balance (involutive MH). Map ``(y, a) -> (y*, a*)`` with a* = the same r, the
    same order, blocks identified by ``(y'_t, l_t)`` and new labels ``j_t``. This map is an
    involution whenever every moved block is, after the move, a *whole* unobserved block
    ``{i unobserved : y*_i = y'_t, beta_i = l_t}``; otherwise the reverse proposal cannot
    produce y and the move is rejected. When it holds, the block sizes and the total number
    of unobserved nodes are the same before and after, so the selection probabilities cancel
    and the label proposals leave ``prod_t eta_{j_t} / eta_{y'_t}``:

        A = p(y*, beta) / p(y, beta) * prod_{t <= r} eta_{j_t} / eta_{y'_t}.

    The target ratio includes p_BAL, p_MRF *and* p_DM (Eq. 6: relabelling moves counts
    between c_{j,l} and c_{j',l}); Walder's ratio shows only the first two, and his proposal
    weight w raises the eta ratio to the power c_{j,l}. Returns ``(state, accepted)``, where
    ``accepted`` counts only accepted proposals that change a label: drawing each block's own
    label again (probability ``eta_j`` per block) is a no-op that would otherwise inflate the
    reported rate (on Digit1 with 10 labels all of the ~38 % raw acceptance was such no-ops).
    """
    m = model.n_nodes
    keys = jax.random.split(key, 2 * max_components + 2)
    y, beta, stats = state
    unobserved = ~model.observed
    r = jax.random.randint(keys[0], (), 1, max_components + 1)
    selected = jnp.zeros((m,), bool)
    y_new = y
    log_q = jnp.zeros((), model.alpha.dtype)
    feasible = jnp.array(True)
    targets = []
    for t in range(max_components):
        active = t < r
        available = unobserved & ~selected
        feasible = feasible & (available.any() | ~active)
        node = uniform_pick(keys[2 + 2 * t], available)
        j_t, l_t = y[node], beta[node]
        block = available & (y == j_t) & (beta == l_t) & active
        label = jax.random.categorical(keys[3 + 2 * t], model.log_eta).astype(jnp.int32)
        selected = selected | block
        y_new = jnp.where(block, label, y_new)
        log_q = log_q + jnp.where(active, model.log_eta[j_t] - model.log_eta[label], 0.0)
        targets.append((active, label, l_t, jnp.sum(block)))
    valid = feasible
    for active, label, l_t, size in targets:
        whole = jnp.sum(unobserved & (y_new == label) & (beta == l_t)) == size
        valid = valid & (whole | ~active)
    new_stats = sufficient_statistics(model, y_new, beta)
    log_ratio = log_joint_delta(log_joint_terms(model, y_new, beta, new_stats),
                                log_joint_terms(model, y, beta, stats)) + log_q
    accept = valid & (jnp.log(jax.random.uniform(keys[1], dtype=log_q.dtype)) < log_ratio)
    pick = lambda a, b: jnp.where(accept, a, b)  # noqa: E731
    moved = accept & jnp.any(y_new != y)
    return MixtureState(pick(y_new, y), beta, jax.tree.map(pick, new_stats, stats)), moved

