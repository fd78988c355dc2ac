"""Cluster, block and component-flip moves of Walder's mixture (not in the paper).

:func:`cluster_flip_move` (a Swendsen–Wang cluster of the MRF with re-allocated centres),
:func:`neighbourhood_block_move` (a block re-draw of a graph neighbourhood) and
:func:`component_flip_move` (a class flip of a boundary component with a new centre). Each is
a pure ``(model, key, state) -> (state, accepted)`` function over a
:class:`~graphssl.inference.diffusion_mixture.gibbs.MixtureState`, checked against exact
enumeration in ``tests/test_diffusion_mixture.py``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from graphssl.inference.diffusion_mixture.gibbs import MixtureState, _inverse_cdf, site_weights
from graphssl.inference.diffusion_mixture.proposals import (
    centre_log_q,
    draw_centre,
    member_slots,
    uniform_pick,
)
from graphssl.models.diffusion_mixture import (
    add_site,
    log_joint_delta,
    log_joint_terms,
    move_block,
    remove_site,
    sufficient_statistics,
)

__all__ = ["cluster_flip_move", "neighbourhood_block_move", "component_flip_move"]


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
    slots = member_slots(members, max_members)
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
    v = uniform_pick(k_node, boundary)
    j, l = y[v], beta[v]
    block = ~model.observed & (y == j) & (beta == l)
    j_new = ((j + jax.random.randint(k_class, (), 1, max(C, 2))) % C).astype(y.dtype)
    slots = member_slots(block, max_members)
    logits = (slots.used.astype(dtype) @ model.log_diffusion[slots.index])  # sum_K log D[i, .]
    occupied = _unobserved_occupied(model, y, beta)
    free_new = ~occupied[j_new]
    free_back = ~occupied[j] | (nodes == l)  # in x', class j has no unobserved member at l
    l_new = draw_centre(k_centre, logits, free_new)
    y_new = jnp.where(block, j_new, y)
    beta_new = jnp.where(block, l_new, beta)
    boundary_new = _boundary_nodes(model, y_new)
    count = lambda mask: jnp.sum(mask).astype(dtype)  # noqa: E731
    log_q_fwd = (jnp.log(count(block & boundary)) - jnp.log(count(boundary))
                 + centre_log_q(logits, l_new, free_new))
    log_q_rev = (jnp.log(count(block & boundary_new)) - jnp.log(count(boundary_new))
                 + centre_log_q(logits, l, free_back))
    new_stats, log_target = move_block(model, stats, y, block, j, l, j_new, l_new,
                                       logits[l_new] - logits[l])
    log_ratio = log_target + log_q_rev - log_q_fwd
    valid = boundary.any() & (slots.count <= max_members) & free_new.any() & (C > 1)
    accept = valid & (jnp.log(jax.random.uniform(k_u, dtype=dtype)) < log_ratio)
    pick = lambda a, b: jnp.where(accept, a, b)  # noqa: E731
    return (MixtureState(pick(y_new, y), pick(beta_new, beta),
                         jax.tree.map(pick, new_stats, stats)), accept)
