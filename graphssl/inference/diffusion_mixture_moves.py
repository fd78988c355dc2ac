"""Metropolis–Hastings moves of Walder's Dirichlet diffusion mixture (Sec. 4.1 and 4.2).

Each move is a pure ``(model, key, state) -> (state, accepted)`` function over a
:class:`~graphssl.inference.diffusion_mixture_gibbs.MixtureState`; its detailed-balance
argument is written in its docstring and checked against exact enumeration in
``tests/test_diffusion_mixture.py``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln

from graphssl.inference.diffusion_mixture_gibbs import MixtureState
from graphssl.models.diffusion_mixture import (
    log_joint_delta,
    log_joint_terms,
    sufficient_statistics,
)

__all__ = ["resample_component_move", "relabel_components_move", "split_merge_move"]

# ----------------------------------------------------------------------------- MH moves


def _uniform_pick(key, mask):
    """Uniform index among ``mask`` (any index when the mask is empty; check ``mask.any()``)."""
    logits = jnp.where(mask, 0.0, -jnp.inf)
    return jax.random.categorical(key, jnp.where(mask.any(), logits, 0.0)).astype(jnp.int32)


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
    l_new = jax.random.categorical(k_target, fwd).astype(jnp.int32)
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
    weight w raises the eta ratio to the power c_{j,l}. Returns ``(state, accepted)``.
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
        node = _uniform_pick(keys[2 + 2 * t], available)
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
    return MixtureState(pick(y_new, y), beta, jax.tree.map(pick, new_stats, stats)), accept


def split_merge_move(model, key, state: MixtureState):
    """Split or merge mixture components of one class (a restricted split–merge move; not in
    Walder, whose Gibbs sweep creates and removes components one node at a time).

    Proposal: pick a node a uniformly and a partner b != a with probability
    ``D[b, a] / (1 - D[a, a])`` (nearby nodes, so that merges join neighbouring components);
    if ``y_a != y_b`` nothing happens. Let j = y_a, l = beta_a.

    * **Split** (``beta_b = l``): pick a new centre l' from ``E_j`` (the centres with
      c_{j,l'} = 0) with probability ``D[b, l'] / Z``, ``Z = sum_{e in E_j} D[b, e]``; node a
      stays at l, node b moves to l', every other member i of C_{j,l} moves to l' with
      probability ``p_i = D[i, l'] / (D[i, l] + D[i, l'])``, independently.
    * **Merge** (``beta_b = l_b != l``): move all of C_{j,l_b} to a's centre l.

    Detailed balance. The split of (a, b) from x and the merge of (a, b) from the split state
    x* are each other's reverse: in x*, b's component is exactly the split-off part (l' was
    empty for class j), and merging it back restores x; in the merged state the split of
    (a, b) can propose l' = l_b because l_b is then empty, and can propose exactly the old
    members of C_{j,l_b}, since every ``p_i`` lies in (0, 1). Hence

        A_split = pi(x*) / pi(x) / [D[b, l'] / Z * prod_{i moved} p_i prod_{i kept} (1 - p_i)]

    (a, b excluded from the products; the pair probability does not depend on the state, so it
    cancels) and A_merge is its reciprocal, with the split
    quantities evaluated in the merged state (``E_j`` then includes l_b). Labels do not
    change, so only p_DM (Eq. 6) and the likelihood enter the target ratio:
    ``pi(x*) / pi(x) = G(n_1 + a/m) G(n_2 + a/m) / (G(n + a/m) G(a/m)) * prod_{moved}
    D[i, l'] / D[i, l]`` with n = n_1 + n_2 the size of the merged component.
    Returns ``(state, accepted)``.
    """
    k_a, k_b, k_target, k_sub, k_u = jax.random.split(key, 5)
    m = model.n_nodes
    y, beta, stats = state
    log_d = model.log_diffusion
    a = jax.random.randint(k_a, (), 0, m)
    nodes = jnp.arange(m)
    b = jax.random.categorical(k_b, jnp.where(nodes == a, -jnp.inf, log_d[:, a])).astype(
        jnp.int32)  # a local partner: b ~ D[b, a] (b != a), a fixed kernel on node pairs
    j, l, l_b = y[a], beta[a], beta[b]
    same_class = y[b] == j
    split = l_b == l
    empty = stats.component_counts[j] == 0
    # split proposal: new centre for b's side, then the subset moving with b
    target_logits = jnp.where(empty, log_d[b], -jnp.inf)
    l_new = jax.random.categorical(k_target, jnp.where(empty.any(), target_logits, 0.0))
    l_new = l_new.astype(jnp.int32)
    # the two centres of the (proposed or existing) pair: a's side keeps l, b's side is l2
    l2 = jnp.where(split, l_new, l_b)
    members = (y == j) & ((beta == l) | (beta == l2))  # the merged component's nodes
    log_p = log_d[:, l2] - jnp.logaddexp(log_d[:, l], log_d[:, l2])
    log_1mp = log_d[:, l] - jnp.logaddexp(log_d[:, l], log_d[:, l2])
    draws = jax.random.uniform(k_sub, (m,), dtype=log_d.dtype) < jnp.exp(log_p)
    goes = jnp.where(split, draws, beta == l2)  # b's side after split / before merge
    goes = members & ((goes & (nodes != a)) | (nodes == b))
    others = members & (nodes != a) & (nodes != b)
    log_q_sub = jnp.sum(jnp.where(others, jnp.where(goes, log_p, log_1mp), 0.0))
    # the centre proposal is evaluated in the merged state: E_j there includes l2
    empty_merged = (empty | (nodes == l2)) & (nodes != l)
    log_q_target = log_d[b, l2] - jax.nn.logsumexp(jnp.where(empty_merged, log_d[b], -jnp.inf))
    a_m = model.alpha / m
    n_2 = jnp.sum(goes).astype(log_d.dtype)
    n = jnp.sum(members).astype(log_d.dtype)
    log_target = (gammaln(n - n_2 + a_m) + gammaln(n_2 + a_m) - gammaln(n + a_m) - gammaln(a_m)
                  + jnp.sum(jnp.where(goes, log_d[:, l2] - log_d[:, l], 0.0)))
    # log pi(split) - log pi(merged) - log q(split | merged) (merge proposal is deterministic)
    log_split = log_target - log_q_target - log_q_sub
    log_ratio = jnp.where(split, log_split, -log_split)
    valid = same_class & jnp.where(split, empty.any(), True)
    accept = valid & (jnp.log(jax.random.uniform(k_u, dtype=log_d.dtype)) < log_ratio)
    beta_new = jnp.where(accept & goes, jnp.where(split, l2, l), beta)
    comp = stats.component_counts
    moved = jnp.where(accept, jnp.sum(goes), 0).astype(comp.dtype)
    sign = jnp.where(split, 1, -1).astype(comp.dtype)
    comp = comp.at[j, l].add(-sign * moved).at[j, l2].add(sign * moved)
    return MixtureState(y, beta_new, stats._replace(component_counts=comp)), accept
