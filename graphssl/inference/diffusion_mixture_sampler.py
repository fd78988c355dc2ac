"""MCMC and MAP for Walder's Dirichlet mixture of graph diffusions (Sec. 4 and Sec. 5).

One iteration (Walder Sec. 5) = a blocked Gibbs sweep (:func:`gibbs_sweep`) + one attempt of
the component re-sampling move (:func:`resample_component_move`, Sec. 4.1) + one attempt of
the component re-labelling move (:func:`relabel_components_move`, Sec. 4.2). All functions are
pure and jit/vmap-able; :func:`sample_mixture` runs chains with ``lax.scan`` inside ``vmap``
over chains and, for a model whose leaves carry a leading axis, over splits too.

The per-site update keeps the sufficient statistics of
:class:`graphssl.models.diffusion_mixture.MixtureStats` up to date in O(m C + d C), so a
sweep costs O(m^2 C) instead of the O(m^3 C) of re-evaluating the joint at every site.
The sweep is a systematic scan over nodes 0..m-1: each site update is an exact draw from a
full conditional, hence leaves the joint invariant, and so does their composition.
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
    log_joint_delta,
    log_joint_terms,
    remove_site,
    sufficient_statistics,
)

__all__ = [
    "MixtureState",
    "MixtureSamples",
    "init_state",
    "gibbs_sweep",
    "resample_component_move",
    "relabel_components_move",
    "iteration",
    "map_refine",
    "map_estimate",
    "sample_mixture",
    "stack_models",
    "posterior_mean_labels",
    "to_arviz",
    "as_label_samples",
]


class MixtureState(NamedTuple):
    """One chain: labels ``y`` int32[m], centres ``beta`` int32[m], their ``stats``."""

    y: jax.Array
    beta: jax.Array
    stats: MixtureStats


def init_state(model: DirichletDiffusionMixture, key, y=None, beta=None,
               init_beta: str = "random") -> MixtureState:
    """Start state: observed labels clamped; unobserved ``y_i ~ eta`` unless given (distinct
    keys give chains started apart); ``beta`` given, or ``init_beta="random"`` (uniform over
    vertices) or ``"self"`` (``beta_i = i``: every point its own centre)."""
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
    lower-triangular mat-vecs (O(n) in all)."""
    n = weights.shape[0]
    if n <= 16:
        cum = jnp.cumsum(weights)
        return jnp.minimum(jnp.sum(cum <= u * cum[-1]), n - 1).astype(jnp.int32)
    width = int(np.ceil(np.sqrt(n)))
    n_blocks = -(-n // width)
    blocks = jnp.pad(weights, (0, n_blocks * width - n)).reshape(n_blocks, width)
    tri_b = jnp.tril(jnp.ones((n_blocks, n_blocks), weights.dtype))
    tri_w = jnp.tril(jnp.ones((width, width), weights.dtype))
    cum_blocks = tri_b @ jnp.sum(blocks, axis=1)
    target = u * cum_blocks[-1]
    b = jnp.minimum(jnp.sum(cum_blocks <= target), n_blocks - 1)
    before = jnp.where(b > 0, cum_blocks[jnp.maximum(b - 1, 0)], 0.0)
    row = blocks[b]
    cum_row = tri_w @ row
    j = jnp.sum(cum_row <= target - before)
    # float rounding can step past the block's last positive weight: clamp onto it
    last = jnp.max(jnp.where(row > 0, jnp.arange(width), 0))
    return jnp.minimum(b * width + jnp.minimum(j, last), n - 1).astype(jnp.int32)


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
    a = class_log_weights(model, removed, i)
    comp = (removed.component_counts.astype(model.alpha.dtype) + model.alpha / model.n_nodes)
    comp = comp * model.diffusion_scaled[i][None, :]
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


def gibbs_sweep(model, key, state: MixtureState, greedy: bool = False):
    """One systematic-scan sweep of Eq. (7) over all nodes (``lax.scan``).

    Returns ``(state, class_probs float[m, C])`` where ``class_probs[i] = p(y_i | rest)`` at
    node i's update (a Rao–Blackwellised posterior-mean estimate; one-hot on observed nodes).
    The Laplacian statistics are recomputed at the start so float rounding never accumulates.
    """
    m = model.n_nodes
    stats = sufficient_statistics(model, state.y, state.beta)
    u = jax.random.uniform(key, (2, m), dtype=model.alpha.dtype)
    (y, beta, stats), probs = lax.scan(
        partial(_site_update, model, greedy),
        (state.y, state.beta, stats),
        (jnp.arange(m), u[0], u[1]),
    )
    return MixtureState(y, beta, stats), probs


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


# ----------------------------------------------------------------------------- iteration


class IterationInfo(NamedTuple):
    """Per-iteration record: ``energy`` (-log joint), move acceptances, permutation-invariant
    summaries (``n_components`` occupied (j, l) pairs; ``edge_agreement`` = weighted fraction
    of graph edges whose ends share a label, a co-assignment statistic)."""

    energy: jax.Array
    resample_accepted: jax.Array
    relabel_accepted: jax.Array
    n_components: jax.Array
    edge_agreement: jax.Array


def _edge_agreement(model, y):
    same = (y[model.neighbor_index] == y[:, None]).astype(model.alpha.dtype)
    w = -model.neighbor_laplacian
    return jnp.sum(w * same) / jnp.maximum(jnp.sum(w), 1e-30)


def iteration(model, key, state: MixtureState, max_components: int = 2,
              moves: tuple[bool, bool] = (True, True)):
    """One iteration of Walder Sec. 5: Gibbs sweep, then one attempt of each MH move.

    Returns ``(state, class_probs [m, C], info)``; ``moves`` switches the two moves off for
    ablations and tests.
    """
    k_sweep, k_res, k_rel = jax.random.split(key, 3)
    state, probs = gibbs_sweep(model, k_sweep, state)
    acc_res = acc_rel = jnp.array(False)
    if moves[0]:
        state, acc_res = resample_component_move(model, k_res, state)
    if moves[1]:
        state, acc_rel = relabel_components_move(model, k_rel, state, max_components)
    terms = log_joint_terms(model, state.y, state.beta, state.stats)
    energy = -sum(jnp.sum(t) for t in terms)
    info = IterationInfo(energy, acc_res, acc_rel,
                         jnp.sum(state.stats.component_counts > 0),
                         _edge_agreement(model, state.y))
    return state, probs, info


# ----------------------------------------------------------------------------- MAP


def map_refine(model, state: MixtureState, max_sweeps: int = 50):
    """MAP refinement of Walder Sec. 5: sweep the Gibbs conditionals, setting each unobserved
    (beta_i, y_i) pair jointly (and each observed beta_i) to its conditional argmax, until no
    site changes. Each step maximises the joint over one block, so the joint never decreases.
    Returns ``(state, n_sweeps)``."""

    def cond(carry):
        _, changed, sweeps = carry
        return changed & (sweeps < max_sweeps)

    def body(carry):
        state, _, sweeps = carry
        new, _ = gibbs_sweep(model, jax.random.PRNGKey(0), state, greedy=True)
        changed = jnp.any(new.y != state.y) | jnp.any(new.beta != state.beta)
        return new, changed, sweeps + 1

    state, _, sweeps = lax.while_loop(cond, body, (state, jnp.array(True), 0))
    return state, sweeps


# ----------------------------------------------------------------------------- driver


class MixtureSamples(NamedTuple):
    """Output of :func:`sample_mixture` (leading axes: [splits,] chains).

    ``labels`` int8[..., draws, m] thinned label draws; ``energy``, ``resample_accepted``,
    ``relabel_accepted``, ``n_components``, ``edge_agreement`` [..., iterations];
    ``class_probs`` float[..., m, C] Rao–Blackwellised posterior class marginals;
    ``map_y``, ``map_beta``, ``map_log_joint``: the most probable state visited per chain;
    ``final_state``: the last :class:`MixtureState` (resume from it).
    """

    labels: jax.Array
    energy: jax.Array
    resample_accepted: jax.Array
    relabel_accepted: jax.Array
    n_components: jax.Array
    edge_agreement: jax.Array
    class_probs: jax.Array
    map_y: jax.Array
    map_beta: jax.Array
    map_log_joint: jax.Array
    final_state: MixtureState


def _run_chain(model, key, state, n_iterations, burn_in, thin, max_components, moves):
    step = partial(iteration, model, max_components=max_components, moves=moves)

    def burn(state, key):
        state, _, _ = step(key, state)
        return state, None

    k_burn, k_run = jax.random.split(key)
    state, _ = lax.scan(burn, state, jax.random.split(k_burn, burn_in))
    m, C = model.n_nodes, model.n_classes
    dtype = model.alpha.dtype

    def inner(carry, key):
        state, prob_sum, best = carry
        state, probs, info = step(key, state)
        better = -info.energy > best[2]
        best = jax.tree.map(lambda a, b: jnp.where(better, a, b),
                            (state.y, state.beta, -info.energy), best)
        return (state, prob_sum + probs, best), info

    def outer(carry, keys):
        carry, infos = lax.scan(inner, carry, keys)
        return carry, (carry[0].y.astype(jnp.int8), infos)

    n_draws = n_iterations // thin
    keys = jax.random.split(k_run, n_draws * thin).reshape(n_draws, thin, -1)
    best0 = (state.y, state.beta, jnp.asarray(-jnp.inf, dtype))
    (state, prob_sum, best), (labels, infos) = lax.scan(
        outer, (state, jnp.zeros((m, C), dtype), best0), keys)
    infos = jax.tree.map(lambda x: x.reshape((n_draws * thin,) + x.shape[2:]), infos)
    return MixtureSamples(labels, infos.energy, infos.resample_accepted,
                          infos.relabel_accepted, infos.n_components, infos.edge_agreement,
                          prob_sum / (n_draws * thin), best[0], best[1], best[2], state)


@partial(jax.jit, static_argnames=("n_chains", "n_iterations", "burn_in", "thin",
                                   "max_components", "moves", "init_beta"))
def _sample_jit(model, key, n_chains, n_iterations, burn_in, thin, max_components, moves,
                init_beta, init_labels=None, init_noise=0.0):
    def one_model(model, key, init_y):
        keys = jax.random.split(key, 3 * n_chains).reshape(3, n_chains, -1)

        def start(k_init, k_noise):
            y0 = None
            if init_y is not None:
                redraw = jax.random.uniform(k_noise, init_y.shape) < init_noise
                fresh = jax.random.categorical(k_noise, model.log_eta, shape=init_y.shape)
                y0 = jnp.where(redraw, fresh, init_y)
            return init_state(model, k_init, y=y0, init_beta=init_beta)

        states = jax.vmap(start)(keys[0], keys[2])
        run = partial(_run_chain, model, n_iterations=n_iterations, burn_in=burn_in,
                      thin=thin, max_components=max_components, moves=moves)
        return jax.vmap(run)(keys[1], states)

    if model.labels.ndim == 1:
        return one_model(model, key, init_labels)
    keys = jax.random.split(key, model.labels.shape[0])
    return jax.vmap(one_model)(model, keys, init_labels)


def sample_mixture(model: DirichletDiffusionMixture, key, *, n_chains: int = 4,
                   n_iterations: int = 1000, burn_in: int = 100, thin: int = 1,
                   max_components: int = 2, moves: tuple[bool, bool] = (True, True),
                   init_beta: str = "random", init_labels=None, init_noise: float = 0.0):
    """Run ``n_chains`` chains of Walder's sampler (fully JIT-compiled, vmapped over chains).

    A model whose leaves carry a leading axis (``stack_models``) is vmapped over it too
    (one batch for many splits / hyper-parameters; the shapes must agree). By default chains
    start apart (unobserved labels ~ eta, random centres). ``init_labels`` (int[m], or
    int[S, m] for a batch; e.g. a Parzen-window prediction) starts every chain from those
    labels instead, with a fraction ``init_noise`` of them redrawn from eta per chain (the
    paper does not say how its chains started; a warm start matters with short chains).
    ``n_iterations`` is rounded down to a multiple of ``thin``; ``max_components`` is R of
    Sec. 4.2; ``init_beta`` see :func:`init_state`. Returns :class:`MixtureSamples`.
    """
    for name, value in (("n_chains", n_chains), ("n_iterations", n_iterations),
                        ("thin", thin), ("max_components", max_components)):
        if int(value) < 1:
            raise ValueError(f"{name}: must be a positive integer, got {value}")
    if burn_in < 0:
        raise ValueError(f"burn_in: must be >= 0, got {burn_in}")
    if n_iterations < thin:
        raise ValueError(f"n_iterations: must be >= thin={thin}, got {n_iterations}")
    if init_labels is not None:
        init_labels = jnp.asarray(init_labels, jnp.int32)
        if init_labels.shape != model.labels.shape:
            raise ValueError(f"init_labels: expected shape {model.labels.shape}, "
                             f"got {init_labels.shape}")
        if np.any(np.asarray(init_labels) < 0) or np.any(
                np.asarray(init_labels) >= model.n_classes):
            raise ValueError(f"init_labels: classes must lie in 0..{model.n_classes - 1}")
    if not 0.0 <= init_noise <= 1.0:
        raise ValueError(f"init_noise: a fraction in [0, 1], got {init_noise}")
    return _sample_jit(model, key, int(n_chains), int(n_iterations), int(burn_in), int(thin),
                       int(max_components), tuple(bool(x) for x in moves), init_beta,
                       init_labels, jnp.asarray(init_noise, model.alpha.dtype))


def stack_models(models, width: int | None = None):
    """Stack models (e.g. one per split) for one batched :func:`sample_mixture`.

    The models must share n_nodes and n_classes; neighbour tables are padded (own index,
    Laplacian entry 0, which changes nothing) to the widest one, or to ``width`` when that
    is larger (a fixed width lets different graphs share one compiled sampler)."""
    width = max([int(mod.neighbor_index.shape[1]) for mod in models] + [width or 0])

    def pad(mod):
        extra = width - int(mod.neighbor_index.shape[1])
        if extra == 0:
            return mod
        own = jnp.broadcast_to(jnp.arange(mod.n_nodes, dtype=jnp.int32)[:, None],
                               (mod.n_nodes, extra))
        return mod.replace(
            neighbor_index=jnp.concatenate([mod.neighbor_index, own], axis=1),
            neighbor_laplacian=jnp.pad(mod.neighbor_laplacian, ((0, 0), (0, extra))))

    return jax.tree.map(lambda *xs: jnp.stack(xs), *[pad(mod) for mod in models])


def posterior_mean_labels(samples: MixtureSamples) -> np.ndarray:
    """Per-node class marginals averaged over chains: float[..., m, C] (argmax = labels)."""
    return np.asarray(samples.class_probs).mean(axis=-3)


def map_estimate(model: DirichletDiffusionMixture, samples: MixtureSamples, max_sweeps=50):
    """MAP labels (Walder Sec. 5): best visited state over chains, refined by
    :func:`map_refine`. Unbatched model only. Returns ``(y int[m], log_joint, n_sweeps)``."""
    best = int(np.argmax(np.asarray(samples.map_log_joint)))
    state = MixtureState(samples.map_y[best], samples.map_beta[best], None)
    state = state._replace(stats=sufficient_statistics(model, state.y, state.beta))
    state, sweeps = jax.jit(map_refine, static_argnames="max_sweeps")(
        model, state, max_sweeps=max_sweeps)
    return np.asarray(state.y), float(model.log_joint(state.y, state.beta)), int(sweeps)


class LabelSamples(NamedTuple):
    """The generic ``Samples`` view (CONTRIBUTING: labels, energy, stats, map_labels) of an
    unbatched :class:`MixtureSamples`, for :mod:`graphssl.diagnostics`. Per-draw records are
    taken at the thinned draws."""

    labels: np.ndarray
    energy: np.ndarray
    stats: dict
    map_labels: np.ndarray
    map_energy: float
    n_classes: int


def as_label_samples(samples: MixtureSamples, n_classes: int) -> LabelSamples:
    """Adapter to the generic samples record (chains x draws) of the inference API."""
    labels = np.asarray(samples.labels)
    n_draws = labels.shape[-2]
    thin = max(samples.energy.shape[-1] // n_draws, 1)
    at_draws = lambda x: np.asarray(x)[..., thin - 1::thin][..., :n_draws]  # noqa: E731
    best = int(np.argmax(np.asarray(samples.map_log_joint)))
    return LabelSamples(
        labels=labels,
        energy=at_draws(samples.energy),
        stats={"resample_accepted": at_draws(samples.resample_accepted),
               "relabel_accepted": at_draws(samples.relabel_accepted),
               "n_components": at_draws(samples.n_components),
               "edge_agreement": at_draws(samples.edge_agreement)},
        map_labels=np.asarray(samples.map_y[best]),
        map_energy=-float(samples.map_log_joint[best]),
        n_classes=int(n_classes),
    )


def to_arviz(samples: MixtureSamples, model: DirichletDiffusionMixture):
    """ArviZ DataTree through the generic :func:`graphssl.diagnostics.to_arviz`: posterior
    ``labels [chain, draw, node]``; sample_stats ``energy``, move acceptances and the
    permutation-invariant ``n_components`` and ``edge_agreement`` (weighted co-assignment of
    graph neighbours); constant_data the label marginals and MAP labels. Unbatched runs."""
    from graphssl.diagnostics import to_arviz as generic

    return generic(as_label_samples(samples, model.n_classes), model=model)
