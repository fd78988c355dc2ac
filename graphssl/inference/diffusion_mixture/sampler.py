"""MCMC and MAP for Walder's Dirichlet mixture of graph diffusions (Sec. 4 and Sec. 5).

One iteration (Walder Sec. 5) = a blocked Gibbs sweep (:func:`gibbs_sweep`) + one attempt of
the component re-sampling move (:func:`resample_component_move`, Sec. 4.1) + one attempt of
the component re-labelling move (:func:`relabel_components_move`, Sec. 4.2); optionally more
attempts of each, and of three moves that are not in the paper: two split-merge moves of
components (:func:`split_merge_move`, :func:`centred_split_merge_move`; they create and remove
components in one step), a Swendsen–Wang cluster flip of labels with re-allocated centres
(:func:`cluster_flip_move`), a block re-draw of a graph neighbourhood
(:func:`neighbourhood_block_move`) and a class flip of a boundary component with a new centre
(:func:`component_flip_move`). All functions are
pure and jit/vmap-able; :func:`sample_mixture` runs chains with ``lax.scan`` inside ``vmap``
over chains and, for a model whose leaves carry a leading axis, over splits too.

The per-site update keeps the sufficient statistics of
:class:`graphssl.models.diffusion_mixture.MixtureStats` up to date in O(m C + d C), so a
sweep costs O(m^2 C) instead of the O(m^3 C) of re-evaluating the joint at every site.
The sweep is a systematic scan over nodes 0..m-1: each site update is an exact draw from a
full conditional, hence leaves the joint invariant, and so does their composition.
The Gibbs sweep lives in :mod:`graphssl.inference.diffusion_mixture.gibbs`, the MH moves in
:mod:`graphssl.inference.diffusion_mixture.moves`; they are re-exported here.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from graphssl.inference.diffusion_mixture.gibbs import (
    MixtureState,
    _inverse_cdf,  # noqa: F401  (re-exported for tests)
    gibbs_sweep,
    init_state,
    map_refine,
)
from graphssl.inference.diffusion_mixture.moves import (
    centred_split_merge_move,
    cluster_flip_move,
    component_flip_move,
    neighbourhood_block_move,
    relabel_components_move,
    resample_component_move,
    split_merge_move,
)
from graphssl.inference.diffusion_mixture.pallas import (
    fused_gibbs_sweep,
    fused_sweep_available,
    padded_shape,
    sweep_tables,
)
from graphssl.models.diffusion_mixture import (
    DirichletDiffusionMixture,
    log_joint_terms,
    sufficient_statistics,
)

__all__ = [
    "MixtureState",
    "MixtureSamples",
    "init_state",
    "gibbs_sweep",
    "resample_component_move",
    "relabel_components_move",
    "split_merge_move",
    "centred_split_merge_move",
    "cluster_flip_move",
    "neighbourhood_block_move",
    "component_flip_move",
    "move_counts",
    "iteration",
    "resolve_engine",
    "fused_gibbs_sweep",
    "sweep_tables",
    "map_refine",
    "map_estimate",
    "sample_mixture",
    "stack_models",
    "posterior_mean_labels",
    "to_arviz",
    "as_label_samples",
]


# ----------------------------------------------------------------------------- iteration


class IterationInfo(NamedTuple):
    """Per-iteration record: ``energy`` (-log joint), the fraction of each move's attempts
    accepted, permutation-invariant summaries (``n_components`` occupied (j, l) pairs;
    ``edge_agreement`` = weighted fraction of graph edges whose ends share a label, a
    co-assignment statistic)."""

    energy: jax.Array
    resample_accepted: jax.Array
    relabel_accepted: jax.Array
    n_components: jax.Array
    edge_agreement: jax.Array
    split_merge_accepted: jax.Array
    centred_split_merge_accepted: jax.Array
    cluster_flip_accepted: jax.Array
    block_accepted: jax.Array
    component_flip_accepted: jax.Array


def _edge_agreement(model, y):
    same = (y[model.neighbor_index] == y[:, None]).astype(model.alpha.dtype)
    w = -model.neighbor_laplacian
    return jnp.sum(w * same) / jnp.maximum(jnp.sum(w), 1e-30)


MOVES = ("resample", "relabel", "split_merge", "centred_split_merge", "cluster_flip", "block",
         "component_flip")


def move_counts(moves) -> tuple[int, ...]:
    """Attempts per iteration of each move of :data:`MOVES` (``resample, relabel,
    split_merge, centred_split_merge, cluster_flip, block, component_flip``) from ``moves``: a
    tuple of two to seven bools / non-negative ints (missing entries are 0)."""
    counts = tuple(int(x) for x in moves) + (0,) * (len(MOVES) - len(tuple(moves)))
    if not 2 <= len(tuple(moves)) <= len(MOVES) or min(counts) < 0:
        raise ValueError(f"moves: give 2 to {len(MOVES)} non-negative attempt counts "
                         f"({', '.join(MOVES)}), got {moves}")
    return counts


def _attempts(move, n: int, key, state, dtype):
    """``n`` successive attempts of ``move(key, state) -> (state, accepted)``; returns the
    state and the fraction accepted (one attempt uses ``key`` itself)."""
    if n == 0:
        return state, jnp.zeros((), dtype)
    if n == 1:
        state, acc = move(key, state)
        return state, acc.astype(dtype)

    def body(state, key):
        state, acc = move(key, state)
        return state, acc

    state, acc = lax.scan(body, state, jax.random.split(key, n))
    return state, jnp.mean(acc.astype(dtype))


ENGINES = ("auto", "scan", "pallas")
# classes x nodes (padded) held on chip by one fused-sweep program: "auto" stays within what
# was measured on an H100 (COIL: 8 x 2048, 120 it/s for 24 runs); larger ones may spill
_FUSED_MAX_CELLS = 1 << 14


def resolve_engine(engine: str, model) -> str:
    """The sweep engine: ``"scan"`` (``lax.scan`` over sites, any backend), ``"pallas"`` (one
    fused kernel program per chain, :mod:`graphssl.inference.diffusion_mixture.pallas`;
    interpreted off a GPU, so only for tests there) or ``"auto"``: ``"pallas"`` on a GPU when
    a chain's padded counts (classes x nodes) fit on chip, ``"scan"`` otherwise."""
    if engine not in ENGINES:
        raise ValueError(f"engine: use one of {ENGINES}, got {engine!r}")
    if engine != "auto":
        return engine
    K, M = padded_shape(model.n_nodes, model.n_classes)
    return "pallas" if fused_sweep_available() and K * M <= _FUSED_MAX_CELLS else "scan"


def iteration(model, key, state: MixtureState, max_components: int = 2,
              moves: tuple = (True, True), engine: str = "scan", tables=None,
              block_size: int = 24):
    """One iteration of Walder Sec. 5: Gibbs sweep, then attempts of each MH move.

    ``moves`` = attempts per iteration of the moves of :data:`MOVES`, ``(n_resample,
    n_relabel[, n_split_merge[, n_centred_split_merge[, n_cluster_flip[, n_block[,
    n_component_flip]]]]])``
    (bools read as 0 / 1; the paper's iteration is ``(1, 1)``); each attempt leaves the joint
    invariant, so any counts give a valid kernel. ``block_size``: nodes re-drawn by one
    attempt of :func:`neighbourhood_block_move`. ``engine`` ``"scan"`` or ``"pallas"`` (the
    same draws; see :func:`resolve_engine`), ``tables`` the fused sweep's padded tables
    (:func:`sweep_tables`, built here when omitted). Returns ``(state, class_probs [m, C],
    info)``.
    """
    n_res, n_rel, n_sm, n_csm, n_flip, n_block, n_cflip = move_counts(moves)
    k_sweep, k_res, k_rel, k_sm = jax.random.split(key, 4)
    dtype = model.alpha.dtype
    if engine == "pallas":
        state, probs = fused_gibbs_sweep(model, k_sweep, state, tables)
    elif engine == "scan":
        state, probs = gibbs_sweep(model, k_sweep, state)
    else:
        raise ValueError(f"engine: use 'scan' or 'pallas' here (resolved), got {engine!r}")
    state, acc_sm = _attempts(partial(split_merge_move, model), n_sm, k_sm, state, dtype)
    state, acc_csm = _attempts(partial(centred_split_merge_move, model), n_csm,
                               jax.random.fold_in(k_sm, 1), state, dtype)
    state, acc_flip = _attempts(partial(cluster_flip_move, model), n_flip,
                                jax.random.fold_in(k_sm, 2), state, dtype)
    state, acc_block = _attempts(partial(neighbourhood_block_move, model, block_size=block_size),
                                 n_block, jax.random.fold_in(k_sm, 3), state, dtype)
    state, acc_cflip = _attempts(partial(component_flip_move, model), n_cflip,
                                 jax.random.fold_in(k_sm, 4), state, dtype)
    state, acc_res = _attempts(partial(resample_component_move, model), n_res, k_res, state,
                               dtype)
    relabel = partial(relabel_components_move, model, max_components=max_components)
    state, acc_rel = _attempts(relabel, n_rel, k_rel, state, dtype)
    terms = log_joint_terms(model, state.y, state.beta, state.stats)
    energy = -sum(jnp.sum(t) for t in terms)
    info = IterationInfo(energy, acc_res, acc_rel,
                         jnp.sum(state.stats.component_counts > 0),
                         _edge_agreement(model, state.y), acc_sm, acc_csm, acc_flip,
                         acc_block, acc_cflip)
    return state, probs, info


# ----------------------------------------------------------------------------- driver


class MixtureSamples(NamedTuple):
    """Output of :func:`sample_mixture` (leading axes: [splits,] chains).

    ``labels`` int8[..., draws, m] thinned label draws; ``energy``, ``resample_accepted``,
    ``relabel_accepted``, ``n_components``, ``edge_agreement``, ``split_merge_accepted``,
    ``centred_split_merge_accepted``, ``cluster_flip_accepted``, ``block_accepted``,
    ``component_flip_accepted`` [..., iterations]
    (acceptances: the fraction of that iteration's attempts accepted that changed the
    state; re-labelling and block proposals that redraw the current labels are not counted);
    ``class_probs`` float[..., m, C] Rao–Blackwellised posterior class marginals;
    ``map_y``, ``map_beta``, ``map_log_joint``: the most probable state visited per chain;
    ``final_state``: the last :class:`MixtureState`; ``chain_keys`` [..., chains, 2] (the
    key of iteration t of a chain is ``fold_in(chain_key, t)``); ``n_steps`` iterations run
    per chain, burn-in included; ``thin``. Pass the record as ``resume=`` to
    :func:`sample_mixture` to continue the same chains.
    """

    labels: jax.Array
    energy: jax.Array
    resample_accepted: jax.Array
    relabel_accepted: jax.Array
    n_components: jax.Array
    edge_agreement: jax.Array
    split_merge_accepted: jax.Array
    centred_split_merge_accepted: jax.Array
    cluster_flip_accepted: jax.Array
    block_accepted: jax.Array
    component_flip_accepted: jax.Array
    class_probs: jax.Array
    map_y: jax.Array
    map_beta: jax.Array
    map_log_joint: jax.Array
    final_state: MixtureState
    chain_keys: jax.Array = None
    n_steps: int = 0
    thin: int = 1


_TRACES = ("energy", "resample_accepted", "relabel_accepted", "n_components",
           "edge_agreement", "split_merge_accepted", "centred_split_merge_accepted",
           "cluster_flip_accepted", "block_accepted", "component_flip_accepted")


def _run_chain(model, chain_key, state, best, start, n_iterations, burn_in, thin,
               max_components, moves, engine="scan", block_size=24):
    """Iterations ``start .. start + burn_in + n_iterations - 1`` of one chain; iteration t
    uses ``fold_in(chain_key, t)``, so a run continued from its last state draws exactly what
    one longer run would. ``best`` = (y, beta, log joint) of the best state visited so far."""
    tables = sweep_tables(model) if engine == "pallas" else None
    step = partial(iteration, model, max_components=max_components, moves=moves,
                   engine=engine, tables=tables, block_size=block_size)

    def burn(state, t):
        state, _, _ = step(jax.random.fold_in(chain_key, t), state)
        return state, None

    state, _ = lax.scan(burn, state, start + jnp.arange(burn_in))
    m, C = model.n_nodes, model.n_classes
    dtype = model.alpha.dtype
    best = (state.y, state.beta, jnp.asarray(-jnp.inf, dtype)) if best is None else best

    def inner(carry, t):
        state, prob_sum, best = carry
        state, probs, info = step(jax.random.fold_in(chain_key, t), state)
        better = -info.energy > best[2]
        best = jax.tree.map(lambda a, b: jnp.where(better, a, b),
                            (state.y, state.beta, -info.energy), best)
        return (state, prob_sum + probs, best), info

    def outer(carry, ts):
        carry, infos = lax.scan(inner, carry, ts)
        return carry, (carry[0].y.astype(jnp.int8), infos)

    n_draws = n_iterations // thin
    ts = (start + burn_in + jnp.arange(n_draws * thin)).reshape(n_draws, thin)
    (state, prob_sum, best), (labels, infos) = lax.scan(
        outer, (state, jnp.zeros((m, C), dtype), best), ts)
    infos = jax.tree.map(lambda x: x.reshape((n_draws * thin,) + x.shape[2:]), infos)
    return MixtureSamples(labels, infos.energy, infos.resample_accepted,
                          infos.relabel_accepted, infos.n_components, infos.edge_agreement,
                          infos.split_merge_accepted, infos.centred_split_merge_accepted,
                          infos.cluster_flip_accepted, infos.block_accepted,
                          infos.component_flip_accepted,
                          prob_sum / (n_draws * thin), best[0], best[1], best[2], state,
                          chain_key)


@partial(jax.jit, static_argnames=("n_chains", "n_iterations", "burn_in", "thin",
                                   "max_components", "moves", "init_beta", "engine",
                                   "block_size"))
def _sample_jit(model, key, n_chains, n_iterations, burn_in, thin, max_components, moves,
                init_beta, init_labels=None, init_noise=0.0, engine="scan", resume=None,
                start=0, block_size=24):
    run = partial(_run_chain, n_iterations=n_iterations, burn_in=burn_in, thin=thin,
                  max_components=max_components, moves=moves, engine=engine,
                  block_size=block_size)

    def one_model(model, key, init_y):
        keys = jax.random.split(key, 3 * n_chains).reshape(3, n_chains, -1)

        def start_state(k_init, k_noise):
            y0 = None
            if init_y is not None:
                redraw = jax.random.uniform(k_noise, init_y.shape) < init_noise
                fresh = jax.random.categorical(k_noise, model.log_eta, shape=init_y.shape)
                y0 = jnp.where(redraw, fresh, init_y)
            return init_state(model, k_init, y=y0, init_beta=init_beta)

        states = jax.vmap(start_state)(keys[0], keys[2])
        return jax.vmap(lambda k, s: run(model, k, s, None, 0))(keys[1], states)

    def continued(model, chain_keys, states, best):
        return jax.vmap(lambda k, s, b: run(model, k, s, b, start))(chain_keys, states, best)

    batched = model.labels.ndim > 1
    if resume is not None:
        chain_keys, states, best = resume
        return (jax.vmap(continued) if batched else continued)(model, chain_keys, states, best)
    if not batched:
        return one_model(model, key, init_labels)
    keys = jax.random.split(key, model.labels.shape[0])
    return jax.vmap(one_model)(model, keys, init_labels)


def _continue_from(resume: MixtureSamples, model, n_chains, thin, init_labels):
    """The jit's ``resume`` argument from a previous record, after checking it fits."""
    if resume.chain_keys is None:
        raise ValueError("resume: not a record of sample_mixture (no chain keys)")
    expected = tuple(model.labels.shape[:-1]) + (n_chains, model.n_nodes)
    if tuple(resume.final_state.y.shape) != expected:
        raise ValueError(f"resume: its final state has shape {tuple(resume.final_state.y.shape)}"
                         f", this model and n_chains={n_chains} need {expected}")
    if int(resume.thin) != thin:
        raise ValueError(f"thin: the resumed run used thin={int(resume.thin)}; use the same")
    if init_labels is not None:
        raise ValueError("init_labels: a resumed run starts from its last state; drop it")
    best = (resume.map_y, resume.map_beta, resume.map_log_joint)
    return resume.chain_keys, resume.final_state, best


def _joined(old: MixtureSamples, new: MixtureSamples, n_new: int) -> MixtureSamples:
    """A resumed run's record: draws and traces appended, marginals averaged by iterations
    (the best state and final state are the new run's, which started from the old ones)."""
    n_old = int(np.asarray(old.energy).shape[-1])
    cat = lambda a, b, axis: jnp.concatenate([jnp.asarray(a), jnp.asarray(b)], axis=axis)  # noqa: E731
    probs = (jnp.asarray(old.class_probs) * n_old + new.class_probs * n_new) / (n_old + n_new)
    return new._replace(labels=cat(old.labels, new.labels, -2), class_probs=probs,
                        **{f: cat(getattr(old, f), getattr(new, f), -1) for f in _TRACES})


def sample_mixture(model: DirichletDiffusionMixture, key, *, n_chains: int = 4,
                   n_iterations: int = 1000, burn_in: int = 100, thin: int = 1,
                   max_components: int = 2, moves: tuple = (True, True),
                   init_beta: str = "random", init_labels=None, init_noise: float = 0.0,
                   engine: str = "auto", resume: MixtureSamples | None = None,
                   block_size: int = 24, join: bool = True):
    """Run ``n_chains`` chains of Walder's sampler (fully JIT-compiled, vmapped over chains).

    A model whose leaves carry a leading axis (``stack_models``) is vmapped over it too
    (one batch for many splits / hyper-parameters; the shapes must agree). By default chains
    start apart (unobserved labels ~ eta, random centres). ``init_labels`` (int[m], or
    int[S, m] for a batch; e.g. a Parzen-window prediction) starts every chain from those
    labels instead, with a fraction ``init_noise`` of them redrawn from eta per chain (the
    paper does not say how its chains started; a warm start matters with short chains).
    ``n_iterations`` is rounded down to a multiple of ``thin``; ``max_components`` is R of
    Sec. 4.2; ``moves`` = attempts per iteration of each move of :data:`MOVES` (2 to 7
    counts), see :func:`iteration`; ``block_size`` the nodes one block move re-draws;
    ``init_beta`` see :func:`init_state`;
    ``engine`` the Gibbs sweep's implementation (:func:`resolve_engine`: by default one
    fused kernel per chain on a GPU, ``lax.scan`` elsewhere; both give the same draws).
    ``resume``: a previous record of the same model; its chains continue from their last
    state for ``n_iterations`` more (no burn-in; ``key``, ``n_chains``, ``init_*`` unused;
    ``thin`` must match) and the records are joined: a run of N iterations resumed for M
    draws exactly what one run of N + M would; ``join=False`` returns the new iterations'
    record only (its ``class_probs`` average them alone).
    Returns :class:`MixtureSamples`.
    """
    if resume is not None:
        n_chains = int(np.asarray(resume.final_state.y).shape[-2])
        burn_in = 0
    for name, value in (("n_chains", n_chains), ("n_iterations", n_iterations),
                        ("thin", thin), ("max_components", max_components),
                        ("block_size", block_size)):
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
    carried, start = None, 0
    if resume is not None:
        carried = _continue_from(resume, model, n_chains, int(thin), init_labels)
        start = int(resume.n_steps)
    samples = _sample_jit(model, key, int(n_chains), int(n_iterations), int(burn_in),
                          int(thin), int(max_components), move_counts(moves), init_beta,
                          init_labels, jnp.asarray(init_noise, model.alpha.dtype),
                          engine=resolve_engine(engine, model), resume=carried,
                          start=jnp.asarray(start, jnp.int32), block_size=int(block_size))
    n_run = (int(n_iterations) // int(thin)) * int(thin)
    samples = samples._replace(n_steps=start + int(burn_in) + n_run, thin=int(thin))
    return samples if resume is None or not join else _joined(resume, samples, n_run)


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


def map_estimate(model: DirichletDiffusionMixture, samples: MixtureSamples, max_sweeps=50,
                 engine: str = "auto"):
    """MAP labels (Walder Sec. 5): best visited state over chains, refined by
    :func:`map_refine` (its sweeps by ``engine``, see :func:`resolve_engine`). Unbatched
    model only. Returns ``(y int[m], log_joint, n_sweeps)``."""
    best = int(np.argmax(np.asarray(samples.map_log_joint)))
    state = MixtureState(samples.map_y[best], samples.map_beta[best], None)
    state = state._replace(stats=sufficient_statistics(model, state.y, state.beta))
    state, sweeps = jax.jit(map_refine, static_argnames=("max_sweeps", "engine"))(
        model, state, max_sweeps=max_sweeps, engine=resolve_engine(engine, model))
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
               "split_merge_accepted": at_draws(samples.split_merge_accepted),
               "centred_split_merge_accepted": at_draws(
                   samples.centred_split_merge_accepted),
               "cluster_flip_accepted": at_draws(samples.cluster_flip_accepted),
               "block_accepted": at_draws(samples.block_accepted),
               "component_flip_accepted": at_draws(samples.component_flip_accepted),
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
