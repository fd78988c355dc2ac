"""Metropolis–Hastings moves of Walder's Dirichlet diffusion mixture (Sec. 4.1 and 4.2).

Each move is a pure ``(model, key, state) -> (state, accepted)`` function over a
:class:`~graphssl.inference.diffusion_mixture.gibbs.MixtureState`; its detailed-balance
argument is written in its docstring and checked against exact enumeration in
``tests/test_diffusion_mixture.py``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import gammaln

from graphssl.inference.diffusion_mixture.gibbs import MixtureState, _inverse_cdf, site_weights
from graphssl.models.diffusion_mixture import (
    add_site,
    log_joint_delta,
    log_joint_terms,
    move_block,
    remove_site,
    sufficient_statistics,
)

__all__ = ["resample_component_move", "relabel_components_move", "split_merge_move",
           "centred_split_merge_move", "cluster_flip_move", "neighbourhood_block_move",
           "component_flip_move"]

# ----------------------------------------------------------------------------- MH moves


def _categorical(key, logits):
    """Index k with probability ``exp(logits[k]) / sum(exp(logits))`` from one uniform, in
    O(n) (:func:`~graphssl.inference.diffusion_mixture.gibbs._inverse_cdf`); on CPU about
    50x faster than ``jax.random.categorical``, which draws n Gumbel variates. Some index
    when every logit is -inf (callers check that a candidate exists)."""
    top = jnp.max(logits)
    weights = jnp.exp(logits - jnp.where(jnp.isfinite(top), top, 0.0))
    return _inverse_cdf(weights, jax.random.uniform(key, dtype=weights.dtype))


def _uniform_pick(key, mask):
    """Uniform index among ``mask`` (any index when the mask is empty; check ``mask.any()``)."""
    logits = jnp.where(mask, 0.0, -jnp.inf)
    return _categorical(key, jnp.where(mask.any(), logits, 0.0))


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
    l_new = _categorical(k_target, fwd)
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
    moved = accept & jnp.any(y_new != y)
    return MixtureState(pick(y_new, y), beta, jax.tree.map(pick, new_stats, stats)), moved


def _local_pair(k_a, k_b, log_d):
    """The split-merge moves' node pair: a uniformly, then a local partner ``b ~ D[b, a]``
    (b != a); a fixed kernel on ordered pairs, so it cancels in the acceptance ratios."""
    m = log_d.shape[0]
    a = jax.random.randint(k_a, (), 0, m)
    b = _categorical(k_b, jnp.where(jnp.arange(m) == a, -jnp.inf, log_d[:, a]))
    return a, b


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
    a, b = _local_pair(k_a, k_b, log_d)
    nodes = jnp.arange(m)
    j, l, l_b = y[a], beta[a], beta[b]
    same_class = y[b] == j
    split = l_b == l
    empty = stats.component_counts[j] == 0
    # split proposal: new centre for b's side, then the subset moving with b
    target_logits = jnp.where(empty, log_d[b], -jnp.inf)
    l_new = _categorical(k_target, jnp.where(empty.any(), target_logits, 0.0))
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


def _centre_log_q(logits, centre, candidates):
    """``log q(centre)`` for a centre drawn with weights ``exp(logits)`` over ``candidates``."""
    return logits[centre] - jax.nn.logsumexp(jnp.where(candidates, logits, -jnp.inf))


def _draw_centre(key, logits, candidates):
    return _categorical(key, jnp.where(candidates, logits, -jnp.inf))


class _Slots(NamedTuple):
    index: jax.Array
    used: jax.Array
    count: jax.Array


def _member_slots(members, max_members: int):
    """The first ``max_members`` nodes of the mask ``members`` (in node order): ``index``
    int[size] (padded with node 0), ``used`` bool[size] and ``count``, the size of the whole
    mask (callers reject when it exceeds ``max_members``); size = min(max_members, n)."""
    size = min(max_members, members.shape[0])
    rank = _prefix_count(members) - 1  # position of each member among the members
    slot = jnp.where(members & (rank < size), rank, size)
    index = jnp.zeros((size,), jnp.int32).at[slot].set(
        jnp.arange(members.shape[0], dtype=jnp.int32), mode="drop")
    count = jnp.sum(members)
    used = jnp.arange(size) < count
    return _Slots(jnp.where(used, index, 0), used, count)


def _prefix_count(mask):
    """Inclusive running count of ``mask`` (int32[n]) in O(n): XLA's cumsum on CPU is
    O(n^2), and a sort (the obvious way to list a mask's nodes in order) costs ~100x more, so
    the vector is cut into ~sqrt(n) blocks whose running sums are small triangular mat-vecs
    (float32 sums of 0/1 are exact below 2^24)."""
    n = mask.shape[0]
    width = int(np.ceil(np.sqrt(n)))
    n_blocks = -(-n // width)
    blocks = jnp.pad(mask.astype(jnp.float32), (0, n_blocks * width - n))
    blocks = blocks.reshape(n_blocks, width)
    exact = lax.Precision.HIGHEST  # not a GPU's TF32
    within = jnp.matmul(blocks, jnp.triu(jnp.ones((width, width), jnp.float32)),
                        precision=exact)
    before = jnp.matmul(jnp.tril(jnp.ones((n_blocks, n_blocks), jnp.float32), -1),
                        blocks.sum(axis=1), precision=exact)
    return (within + before[:, None]).reshape(-1)[:n].astype(jnp.int32)


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
    a, b = _local_pair(k_a, k_b, log_d)
    j = y[a]
    same_class = y[b] == j
    split = beta[a] == beta[b]
    members = (y == j) & ((beta == beta[a]) | (beta == beta[b]))
    free = (stats.component_counts[j] == 0) | (nodes == beta[a]) | (nodes == beta[b])
    # sides: drawn for a split, read off the two components for a merge; centre conditionals
    # sum_{i in S} log D[i, l] for every l, over U's gathered rows
    slots = _member_slots(members, max_members)
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
    drawn_a = _draw_centre(k_ca, logits_a, free)
    l_a = jnp.where(split, drawn_a, beta[a])
    free_b = free & (nodes != l_a)
    l_b = jnp.where(split, _draw_centre(k_cb, logits_b, free_b), beta[b])
    l_u = jnp.where(split, beta[a], _draw_centre(k_merge, logits_u, free))
    log_q_split = (log_q_sides + _centre_log_q(logits_a, l_a, free)
                   + _centre_log_q(logits_b, l_b, free_b))
    log_q_merge = _centre_log_q(logits_u, l_u, free)
    a_m = model.alpha / m
    n_a = jnp.sum(side_a).astype(log_d.dtype)
    n_b = jnp.sum(side_b).astype(log_d.dtype)
    log_target = (gammaln(n_a + a_m) + gammaln(n_b + a_m) - gammaln(n_a + n_b + a_m)
                  - gammaln(a_m) + logits_a[l_a] + logits_b[l_b] - logits_u[l_u])
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


def _bond_cluster(model, key, y, seed_node):
    """The Swendsen–Wang cluster of ``seed_node`` (bool[m]) for the MRF potential (Eq. 4).

    Off the diagonal, ``log p_MRF = gamma sum_{(i, s)} S_is [y_i = y_{nb(i, s)}]`` over the
    directed entries of the Laplacian table (``S_is = -neighbor_laplacian[i, s]``). Each entry
    carries its own bond, open with probability ``1 - exp(-gamma S_is)`` when its ends share a
    label, so a pair is bonded with probability ``1 - exp(-J_ij)``, ``J_ij`` the pair's whole
    coupling (Edwards–Sokal). The cluster is the seed's component in the bond graph (edges in
    either direction), grown by a ``while_loop``.
    """
    nb = model.neighbor_index
    coupling = -model.gamma * model.neighbor_laplacian
    u = jax.random.uniform(key, nb.shape, dtype=coupling.dtype)
    own = nb == jnp.arange(nb.shape[0])[:, None]  # padding
    bond = (u < -jnp.expm1(-coupling)) & (y[nb] == y[:, None]) & ~own

    def grow(carry):
        cluster, _ = carry
        pulled = cluster | jnp.any(bond & cluster[nb], axis=1)
        pushed = pulled.at[nb].max(bond & pulled[:, None])
        return pushed, jnp.any(pushed != cluster)

    start = jnp.arange(nb.shape[0]) == seed_node
    cluster, _ = lax.while_loop(lambda c: c[1], grow, (start, jnp.array(True)))
    return cluster


def _allocation_log_q(model, key, members, beta, counts_new, counts_old, max_members):
    """Sequential re-allocation of the centres of ``members`` (in node order) for
    :func:`cluster_flip_move`: each member draws ``beta'_i`` from its class-j' conditional
    ``∝ (c_{j',l} + a/m) D[i, l]`` given the members placed before it, and the log probability
    of placing it back at ``beta_i`` under class j (counts ``counts_old``) is accumulated the
    same way. A fixed ``lax.scan`` over ``max_members`` slots (the caller rejects larger
    clusters), one uniform per draw (inverse CDF). Returns ``(new_beta [m], log q_forward,
    log q_reverse)``."""
    a_m = model.alpha / model.n_nodes
    log_d = model.log_diffusion
    slots = _member_slots(members, max_members)
    order, n_members = slots.index, slots.count
    uniforms = jax.random.uniform(key, (max_members,), dtype=log_d.dtype)

    def log_normaliser(logits):
        top = jnp.max(logits)
        weights = jnp.exp(logits - top)
        return weights, top + jnp.log(jnp.sum(weights))

    def body(carry, slot):
        new_beta, c_new, c_old, q_fwd, q_rev = carry
        t, u = slot
        active = t < n_members
        i = order[t]
        logits_new = jnp.log(c_new + a_m) + log_d[i]
        weights, norm_new = log_normaliser(logits_new)
        pick = _inverse_cdf(weights, u)
        logits_old = jnp.log(c_old + a_m) + log_d[i]
        _, norm_old = log_normaliser(logits_old)
        step = jnp.where(active, 1.0, 0.0).astype(log_d.dtype)
        return (jnp.where(active, new_beta.at[i].set(pick), new_beta),
                c_new.at[pick].add(step), c_old.at[beta[i]].add(step),
                q_fwd + step * (logits_new[pick] - norm_new),
                q_rev + step * (logits_old[beta[i]] - norm_old)), None

    zero = jnp.zeros((), log_d.dtype)
    slots = (jnp.arange(max_members), uniforms)
    (new_beta, _, _, q_fwd, q_rev), _ = lax.scan(
        body, (beta, counts_new, counts_old, zero, zero), slots)
    return new_beta, q_fwd, q_rev


def cluster_flip_move(model, key, state: MixtureState, max_members: int = 64):
    """Flip the label of a Swendsen–Wang cluster of the MRF and re-allocate its centres (a
    cluster move for the labels; not in Walder, whose labels change one node at a time or a
    whole mixture component at a time).

    Auxiliary bonds (Edwards–Sokal) make the MRF potential of Eq. (4) uniform over labellings
    that are constant on bond clusters (:func:`_bond_cluster`); given the bonds, this MH step
    targets ``h(y, beta) = p_BAL p_DM prod_i D[i, beta_i]`` (Eqs. 3, 5, 6) on those
    labellings. Proposal: a node v uniformly, its cluster K (rejected if K holds an observed
    node, whose label is clamped, or more than ``max_members`` nodes: both depend on K alone,
    which the move keeps, so the rejection is symmetric), a new class ``j' != j = y_v``
    uniformly, and new centres for K allocated one member at a time from the class-j'
    conditional
    ``∝ (c_{j',l} + a/m) D[i, l]`` (:func:`_allocation_log_q`).

    Detailed balance. In the proposed state K is still a whole bond cluster (its bonds join
    equal labels, and no bond leaves it), picked with the same probability |K| / m, and the
    reverse class proposal ``j`` has the same probability 1 / (C - 1); the reverse allocation
    places K's members back in class j in the same node order, with probability
    ``q_rev`` computed alongside. So

        A = h(y', beta') / h(y, beta) * q_rev / q_fwd,

    and the bonds, drawn afresh from their conditional each time, leave the joint invariant.
    Checked against exact enumeration in ``tests/test_diffusion_mixture.py``.
    Returns ``(state, accepted)``.
    """
    k_bond, k_node, k_class, k_alloc, k_u = jax.random.split(key, 5)
    m, C = model.n_nodes, model.n_classes
    y, beta, stats = state
    node = jax.random.randint(k_node, (), 0, m)
    cluster = _bond_cluster(model, k_bond, y, node)
    j = y[node]
    j_new = ((j + jax.random.randint(k_class, (), 1, max(C, 2))) % C).astype(y.dtype)
    dtype = model.log_diffusion.dtype
    comp = stats.component_counts.astype(dtype)
    in_k = jnp.zeros((m,), dtype).at[beta].add(cluster.astype(dtype))  # K's counts by centre
    beta_new, log_q_fwd, log_q_rev = _allocation_log_q(
        model, k_alloc, cluster, beta, comp[j_new], comp[j] - in_k, max_members)
    y_new = jnp.where(cluster, j_new, y)
    new_stats = sufficient_statistics(model, y_new, beta_new)
    new_terms = log_joint_terms(model, y_new, beta_new, new_stats)
    old_terms = log_joint_terms(model, y, beta, stats)
    no_mrf = lambda t: t._replace(mrf=jnp.zeros((), dtype))  # noqa: E731
    log_ratio = log_joint_delta(no_mrf(new_terms), no_mrf(old_terms)) + log_q_rev - log_q_fwd
    valid = ~jnp.any(cluster & model.observed) & (jnp.sum(cluster) <= max_members) & (C > 1)
    accept = valid & (jnp.log(jax.random.uniform(k_u, dtype=dtype)) < log_ratio)
    pick = lambda a, b: jnp.where(accept, a, b)  # noqa: E731
    return (MixtureState(pick(y_new, y), pick(beta_new, beta),
                         jax.tree.map(pick, new_stats, stats)), accept)


def _site_log_probs(model, removed, i):
    """``(log p(y_i | rest) float[C], centre weights float[C, m])`` of Eq. (7) for node i,
    absent from ``removed`` (:func:`site_weights`)."""
    a, comp = site_weights(model, removed, i)
    return jax.nn.log_softmax(a + jnp.log(jnp.sum(comp, axis=1))), comp


def _pair_log_prob(log_py, comp, y_i, beta_i):
    """``log p(y_i, beta_i | rest)`` from :func:`_site_log_probs`."""
    return log_py[y_i] + jnp.log(comp[y_i, beta_i]) - jnp.log(jnp.sum(comp[y_i]))


def neighbourhood_block_move(model, key, state: MixtureState, block_size: int = 24):
    """Re-draw ``(y, beta)`` on a graph neighbourhood at once (a block Metropolis–Hastings
    move with a sequential proposal; not in Walder, whose labels change one node at a time or
    a whole mixture component at a time).

    Block: a node v uniformly and its ``block_size`` nearest nodes by diffusion (the largest
    ``D[., v]``, v usually first), in that order; it depends on v alone, not on the state.
    Proposal: take the block out of the statistics, then place its nodes one at a time,
    nearest first, each from its blocked conditional of Eq. (7) given the nodes outside the
    block and the block nodes placed before it (observed nodes keep their label and draw
    beta alone). A group of nodes on a class boundary, whose labels Gibbs can only flip one
    node at a time against the MRF and the mixture components around it, can so change
    class, with fitting centres, in one step.

    Detailed balance. The block is chosen independently of the state and the proposal for
    the block depends only on the nodes outside it, which the move leaves as they are; so
    for each v this is an MH step on the block's conditional with acceptance

        A = pi(x') q(x_B | x_{-B}) / (pi(x) q(x'_B | x_{-B})),

    ``q(x_B | x_{-B})`` being the product of the sequential conditionals of the current
    block values, computed alongside the draws. Checked against exact enumeration in
    ``tests/test_diffusion_mixture.py``. O(block_size m C) per attempt.
    Returns ``(state, accepted)``, where ``accepted`` counts only accepted proposals that
    change a label.
    """
    k_node, k_draw, k_u = jax.random.split(key, 3)
    m = model.n_nodes
    y, beta, stats = state
    seed = jax.random.randint(k_node, (), 0, m)
    _, block = lax.top_k(model.log_diffusion[:, seed], min(block_size, m))

    def take_out(stats, i):
        return remove_site(model, stats, i, y[i], beta[i]), None

    outside, _ = lax.scan(take_out, stats, block)
    uniforms = jax.random.uniform(k_draw, (2, block.shape[0]), dtype=model.alpha.dtype)

    def place(carry, inputs):
        new, old, y_new, beta_new, log_q_fwd, log_q_rev = carry
        i, u_y, u_b = inputs
        log_py, comp = _site_log_probs(model, new, i)
        y_i = _inverse_cdf(jnp.exp(log_py), u_y)
        b_i = _inverse_cdf(comp[y_i], u_b)
        log_fwd = _pair_log_prob(log_py, comp, y_i, b_i)
        log_rev = _pair_log_prob(*_site_log_probs(model, old, i), y[i], beta[i])
        return (add_site(model, new, i, y_i, b_i), add_site(model, old, i, y[i], beta[i]),
                y_new.at[i].set(y_i), beta_new.at[i].set(b_i),
                log_q_fwd + log_fwd, log_q_rev + log_rev), None

    zero = jnp.zeros((), model.alpha.dtype)
    (_, _, y_new, beta_new, log_q_fwd, log_q_rev), _ = lax.scan(
        place, (outside, outside, y, beta, zero, zero), (block, uniforms[0], uniforms[1]))
    new_stats = sufficient_statistics(model, y_new, beta_new)
    log_ratio = (log_joint_delta(log_joint_terms(model, y_new, beta_new, new_stats),
                                 log_joint_terms(model, y, beta, stats))
                 + log_q_rev - log_q_fwd)
    accept = jnp.log(jax.random.uniform(k_u, dtype=zero.dtype)) < log_ratio
    pick = lambda a, b: jnp.where(accept, a, b)  # noqa: E731
    moved = accept & jnp.any(y_new != y)
    return (MixtureState(pick(y_new, y), pick(beta_new, beta),
                         jax.tree.map(pick, new_stats, stats)), moved)


def _boundary_nodes(model, y):
    """Unobserved nodes with a graph neighbour of another label (bool[m])."""
    nb = model.neighbor_index
    linked = model.neighbor_laplacian != 0
    return ~model.observed & jnp.any(linked & (y[nb] != y[:, None]), axis=1)


def _unobserved_occupied(model, y, beta):
    """bool[C, m]: class j has an unobserved member at centre l."""
    m = model.n_nodes
    return jnp.zeros((model.n_classes, m), bool).at[y, beta].max(~model.observed)


def component_flip_move(model, key, state: MixtureState, max_members: int = 128):
    """Move a mixture component on a class boundary to another class, with a new centre (a
    component-level label move; not in Walder).

    Walder's re-labelling move (Sec. 4.2) flips components picked at random and keeps their
    centres; almost every component lies inside a class, where a flip is hopeless, and a
    component can change class only to a centre the other class leaves free. Here the
    component is picked through a node on a class boundary, and its centre is re-drawn
    from its conditional given the members.

    Proposal: a node v uniformly among the boundary nodes ``∂(x)`` (unobserved nodes with
    a graph neighbour of another label); its block ``K`` = the unobserved members of v's
    component, ``{i unobserved : y_i = j, beta_i = l}`` (j = y_v, l = beta_v), so K is
    picked with probability ``|K ∩ ∂(x)| / |∂(x)|``; a class ``j' != j`` uniformly; a centre
    ``l' ~ p(. | K) ∝ prod_{i in K} D[i, .]`` (Eq. 3) over ``E_{j'}(x)``, the centres with
    no unobserved member of class j'; then ``y_K <- j'``, ``beta_K <- l'``.

    Detailed balance. In x' the unobserved members of (j', l') are exactly K (l' had none),
    so the reverse proposal picks K with probability ``|K ∩ ∂(x')| / |∂(x')|``, proposes j
    with probability 1 / (C - 1), and l from ``E_j(x')``, which contains l (K was all of
    (j, l)'s unobserved members); hence

        A = pi(x') / pi(x) * [|K ∩ ∂(x')| / |∂(x')| * p(l | K, E_j(x'))]
                           / [|K ∩ ∂(x)| / |∂(x)| * p(l' | K, E_{j'}(x))],

    with every potential of Sec. 3.5 in the target ratio. Blocks of more than
    ``max_members`` nodes are rejected (K is the same set both ways: a symmetric
    restriction), so the centre conditional sums at most ``max_members`` gathered rows of
    ``log D``. Checked against exact enumeration in ``tests/test_diffusion_mixture.py``.
    Returns ``(state, accepted)``.
    """
    k_node, k_class, k_centre, k_u = jax.random.split(key, 4)
    C = model.n_classes
    y, beta, stats = state
    dtype = model.log_diffusion.dtype
    nodes = jnp.arange(y.shape[0])
    boundary = _boundary_nodes(model, y)
    v = _uniform_pick(k_node, boundary)
    j, l = y[v], beta[v]
    block = ~model.observed & (y == j) & (beta == l)
    j_new = ((j + jax.random.randint(k_class, (), 1, max(C, 2))) % C).astype(y.dtype)
    slots = _member_slots(block, max_members)
    logits = (slots.used.astype(dtype) @ model.log_diffusion[slots.index])  # sum_K log D[i, .]
    occupied = _unobserved_occupied(model, y, beta)
    free_new = ~occupied[j_new]
    free_back = ~occupied[j] | (nodes == l)  # in x', class j has no unobserved member at l
    l_new = _draw_centre(k_centre, logits, free_new)
    y_new = jnp.where(block, j_new, y)
    beta_new = jnp.where(block, l_new, beta)
    boundary_new = _boundary_nodes(model, y_new)
    count = lambda mask: jnp.sum(mask).astype(dtype)  # noqa: E731
    log_q_fwd = (jnp.log(count(block & boundary)) - jnp.log(count(boundary))
                 + _centre_log_q(logits, l_new, free_new))
    log_q_rev = (jnp.log(count(block & boundary_new)) - jnp.log(count(boundary_new))
                 + _centre_log_q(logits, l, free_back))
    new_stats, log_target = move_block(model, stats, y, block, j, l, j_new, l_new,
                                       logits[l_new] - logits[l])
    log_ratio = log_target + log_q_rev - log_q_fwd
    valid = boundary.any() & (slots.count <= max_members) & free_new.any() & (C > 1)
    accept = valid & (jnp.log(jax.random.uniform(k_u, dtype=dtype)) < log_ratio)
    pick = lambda a, b: jnp.where(accept, a, b)  # noqa: E731
    return (MixtureState(pick(y_new, y), pick(beta_new, beta),
                         jax.tree.map(pick, new_stats, stats)), accept)
