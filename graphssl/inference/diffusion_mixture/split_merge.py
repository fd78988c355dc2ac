"""Split-merge moves of components of Walder's mixture (not in the paper).

:func:`split_merge_move` splits a component by a random centre or merges two (random
allocation); :func:`centred_split_merge_move` splits with a sequential allocation of the
members (Dahl's sequentially-allocated merge-split). Each is a pure ``(model, key, state) ->
(state, accepted)`` function over a
:class:`~graphssl.inference.diffusion_mixture.gibbs.MixtureState`, checked against exact
enumeration in ``tests/test_diffusion_mixture.py``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from graphssl.inference.diffusion_mixture.gibbs import MixtureState
from graphssl.inference.diffusion_mixture.proposals import (
    categorical,
    centre_log_q,
    draw_centre,
    local_pair,
    member_slots,
)
from graphssl.models.diffusion_mixture import log_gamma_components

__all__ = ["split_merge_move", "centred_split_merge_move"]


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
    a, b = local_pair(k_a, k_b, log_d)
    nodes = jnp.arange(m)
    j, l, l_b = y[a], beta[a], beta[b]
    same_class = y[b] == j
    split = l_b == l
    empty = stats.component_counts[j] == 0
    # split proposal: new centre for b's side, then the subset moving with b
    target_logits = jnp.where(empty, log_d[b], -jnp.inf)
    l_new = categorical(k_target, jnp.where(empty.any(), target_logits, 0.0))
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
    n_2 = jnp.sum(goes)
    n = jnp.sum(members)
    log_target = (log_gamma_components(model, n - n_2) + log_gamma_components(model, n_2)
                  - log_gamma_components(model, n) - log_gamma_components(model, 0)
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


def _sequential_sides(key, sub_log_d, slots, a, b, split, side_b_state, sub_free, a_m):
    """Sequential allocation of a split's sides (in the style of Dahl's sequentially-allocated
    merge-split): a starts side A, b side B; every other member i of U, in node order, joins
    B with probability ``w_B / (w_A + w_B)``, where ``w_S = (n_S + a/m) sum_l p(l | S) D[i, l]``
    is side S's predictive as allocated so far (Dirichlet-multinomial weight times the centre
    marginal, Eq. 6 and Eq. 3), with the centre l restricted to the members of U that are
    free centres (all of U if none is): a deterministic function of U and F, hence the same
    in a split and its reverse merge; the centres themselves are then drawn over all of F.
    For a merge the sides are read from the state (``side_b_state``) and the same
    probabilities give the reverse proposal's ``log q``. ``sub_log_d[s, t] = log D[U_s, U_t]``
    over the slots, ``sub_free`` the slots that are free centres. Returns
    ``(goes_b bool[slots], log q)``; O(max_members^2)."""
    dtype = sub_log_d.dtype
    uniforms = jax.random.uniform(key, slots.index.shape, dtype=dtype)

    def norm(logits):
        return jax.nn.logsumexp(jnp.where(sub_free, logits, -jnp.inf))

    def body(carry, slot):
        logits_a, logits_b, norm_a, norm_b, n_a, n_b, log_q = carry
        i, used, row, u = slot
        active = used & (i != a) & (i != b)
        num_a, num_b = norm(logits_a + row), norm(logits_b + row)
        log_wa = jnp.log(n_a + a_m) + num_a - norm_a
        log_wb = jnp.log(n_b + a_m) + num_b - norm_b
        log_total = jnp.logaddexp(log_wa, log_wb)
        log_pa, log_pb = log_wa - log_total, log_wb - log_total
        go_b = jnp.where(split, u < jnp.exp(log_pb), side_b_state[i])
        to_a, to_b = active & ~go_b, active & go_b
        carry = (jnp.where(to_a, logits_a + row, logits_a),
                 jnp.where(to_b, logits_b + row, logits_b),
                 jnp.where(to_a, num_a, norm_a), jnp.where(to_b, num_b, norm_b),
                 n_a + to_a, n_b + to_b,
                 log_q + jnp.where(active, jnp.where(go_b, log_pb, log_pa), 0.0))
        return carry, to_b | (used & (i == b))

    def row_of(node):
        return sub_log_d[jnp.argmax(slots.used & (slots.index == node))]

    one = jnp.ones((), dtype)
    start_a, start_b = row_of(a), row_of(b)
    carry = (start_a, start_b, norm(start_a), norm(start_b), one, one, 0 * one)
    (*_, log_q), goes_b = lax.scan(body, carry, (slots.index, slots.used, sub_log_d, uniforms))
    return goes_b, log_q


def centred_split_merge_move(model, key, state: MixtureState, max_members: int = 128,
                             allocation: str = "sequential"):
    """Split or merge components of one class with the new centres drawn from their conditional
    given the members (a split–merge move in the style of Jain & Neal 2004; not in Walder).

    Given the members ``S`` of a component of class j, the centre's full conditional is
    ``p(l | S) ∝ prod_{i in S} D[i, l]`` over the centres class j leaves free (p_DM depends on
    the counts only, so moving a whole component between free centres does not change it).
    This move uses that conditional as its centre proposal, so merged and split components get
    centres that fit their members (the plain :func:`split_merge_move` keeps a's centre).

    Proposal: pick a node a uniformly and b != a with probability ``D[b, a] / (1 - D[a, a])``
    (a fixed kernel on ordered pairs); nothing happens if ``y_a != y_b``. Let j = y_a and
    ``F`` = the centres not used by the *other* components of class j (the free centres plus
    those of a's and b's components).

    * **Split** (``beta_a = beta_b = l*``, members U): a goes to side A, b to side B, and
      every other member i is allocated to a side: with ``allocation="sequential"`` (the
      default) one at a time in node order from the sides' predictives given the members
      allocated before it (:func:`_sequential_sides`); with ``"independent"`` to B with
      probability ``p_i = D[i, b] / (D[i, a] + D[i, b])`` (a and b stand in for the unknown
      centres). Then ``l_A ~ p(. | A)`` over F and ``l_B ~ p(. | B)`` over ``F \\ {l_A}``.
    * **Merge** (``beta_a = l_A != l_B = beta_b``): ``U = A ∪ B`` takes the centre
      ``l* ~ p(. | U)`` over F.

    Detailed balance. For the ordered pair (a, b), split and merge are each other's reverse:
    F is the same set before and after (it excludes only the centres of the untouched
    components), the split state's sides are the merged state's two components with a in A
    and b in B, and every allocation probability lies in (0, 1), so each split is reachable
    from the merged state and back. With ``q_sides`` the probability of the sides'
    allocation (for a merge: of allocating the two existing components that way, computed
    by the same rule), ``q_split = q_sides * p(l_A | A, F) * p(l_B | B, F \\ {l_A})`` and
    ``q_merge = p(l* | U, F)``,

        A_split = pi(split) q_merge / (pi(merged) q_split),  A_merge = 1 / A_split,

    ``pi(split) / pi(merged) = G(n_A + a/m) G(n_B + a/m) / (G(n + a/m) G(a/m))
    * prod_{i in A} D[i, l_A] prod_{i in B} D[i, l_B] / prod_{i in U} D[i, l*]`` (labels do
    not change, so only p_DM, Eq. 6, and the likelihood, Eq. 3, enter). Pairs whose merged
    component U has more than ``max_members`` nodes are rejected: U is the same set in a split
    and in its reverse merge, so the rejection is symmetric, and the centre conditionals are
    sums over at most ``max_members`` gathered rows of ``log D`` (O(max_members m) per attempt,
    not the O(m^2) of a mat-vec with an indicator). Checked against exact enumeration in
    ``tests/test_diffusion_mixture.py``. Returns ``(state, accepted)``.
    """
    k_a, k_b, k_side, k_ca, k_cb, k_merge, k_u = jax.random.split(key, 7)
    m = model.n_nodes
    y, beta, stats = state
    log_d = model.log_diffusion
    nodes = jnp.arange(m)
    a, b = local_pair(k_a, k_b, log_d)
    j = y[a]
    same_class = y[b] == j
    split = beta[a] == beta[b]
    members = (y == j) & ((beta == beta[a]) | (beta == beta[b]))
    free = (stats.component_counts[j] == 0) | (nodes == beta[a]) | (nodes == beta[b])
    # sides: drawn for a split, read off the two components for a merge; centre conditionals
    # sum_{i in S} log D[i, l] for every l, over U's gathered rows
    slots = member_slots(members, max_members)
    rows = log_d[slots.index]
    if allocation == "sequential":
        sub_free = free[slots.index] & slots.used
        goes_b, log_q_sides = _sequential_sides(
            k_side, rows[:, slots.index], slots, a, b, split, beta == beta[b],
            jnp.where(sub_free.any(), sub_free, slots.used), model.alpha / m)
        side_b = jnp.zeros((m,), bool).at[slots.index].max(goes_b & slots.used)
    elif allocation == "independent":
        log_p = log_d[:, b] - jnp.logaddexp(log_d[:, a], log_d[:, b])
        log_1mp = log_d[:, a] - jnp.logaddexp(log_d[:, a], log_d[:, b])
        draws = jax.random.uniform(k_side, (m,), dtype=log_d.dtype) < jnp.exp(log_p)
        side_b = jnp.where(split, draws, beta == beta[b])
        side_b = members & ((side_b & (nodes != a)) | (nodes == b))
        others = members & (nodes != a) & (nodes != b)
        log_q_sides = jnp.sum(jnp.where(others, jnp.where(side_b, log_p, log_1mp), 0.0))
    else:
        raise ValueError(f"allocation: use 'independent' or 'sequential', got {allocation!r}")
    side_a = members & ~side_b
    logits_a = (side_a[slots.index] & slots.used).astype(log_d.dtype) @ rows
    logits_b = (side_b[slots.index] & slots.used).astype(log_d.dtype) @ rows
    logits_u = logits_a + logits_b
    drawn_a = draw_centre(k_ca, logits_a, free)
    l_a = jnp.where(split, drawn_a, beta[a])
    free_b = free & (nodes != l_a)
    l_b = jnp.where(split, draw_centre(k_cb, logits_b, free_b), beta[b])
    l_u = jnp.where(split, beta[a], draw_centre(k_merge, logits_u, free))
    log_q_split = (log_q_sides + centre_log_q(logits_a, l_a, free)
                   + centre_log_q(logits_b, l_b, free_b))
    log_q_merge = centre_log_q(logits_u, l_u, free)
    n_a, n_b = jnp.sum(side_a), jnp.sum(side_b)
    log_target = (log_gamma_components(model, n_a) + log_gamma_components(model, n_b)
                  - log_gamma_components(model, n_a + n_b) - log_gamma_components(model, 0)
                  + logits_a[l_a] + logits_b[l_b] - logits_u[l_u])
    log_split = log_target + log_q_merge - log_q_split
    log_ratio = jnp.where(split, log_split, -log_split)
    valid = same_class & (free_b.any() | ~split) & (slots.count <= max_members)
    accept = valid & (jnp.log(jax.random.uniform(k_u, dtype=log_d.dtype)) < log_ratio)
    new_beta = jnp.where(split, jnp.where(side_b, l_b, l_a), l_u)
    beta_new = jnp.where(accept & members, new_beta, beta)
    comp = stats.component_counts
    sign = jnp.where(split, 1, -1).astype(comp.dtype)
    n_a_i, n_b_i = jnp.sum(side_a).astype(comp.dtype), jnp.sum(side_b).astype(comp.dtype)
    delta = jnp.where(accept, sign, 0).astype(comp.dtype)
    comp = (comp.at[j, l_u].add(-delta * (n_a_i + n_b_i))
            .at[j, l_a].add(delta * n_a_i).at[j, l_b].add(delta * n_b_i))
    return MixtureState(y, beta_new, stats._replace(component_counts=comp)), accept

