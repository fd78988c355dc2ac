"""Walder's sampler as :class:`~graphssl.inference.mcmc.kernels.Kernel` s (Sec. 4 and Sec. 5).

One iteration of Walder Sec. 5 is a blocked Gibbs sweep (:func:`sweep_kernel`; the
``lax.scan`` sweep or the fused Pallas sweep, the same draws) followed by attempts of the
Metropolis–Hastings moves (:func:`move_kernel`, one kernel per move), combined with
:func:`~graphssl.inference.mcmc.kernels.compose` and closed by :func:`record_kernel` (an
identity transition that records summaries); :func:`mixture_kernel` builds the composition
and :func:`~graphssl.inference.mcmc.chains.sample_chains` runs it (resume, progress,
vectorised chains, one model per chain for many splits) with :func:`mixture_energy` as the
per-draw energy. Each kernel leaves the joint ``p(y, beta)`` invariant (exact draws from full
conditionals, or MH moves with their Hastings ratios), so any composition does.

The chain state (:class:`MixtureChainState`) carries, besides ``labels``, ``beta`` and their
sufficient statistics, a tally that the kernels keep once ``step >= tally_from`` (the
burn-in): the Rao–Blackwellised class marginals (the sum of each sweep's ``p(y_i | rest)``)
and the most probable state visited (Walder's MAP candidate, refined by :func:`map_refine`).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from graphssl.inference.diffusion_mixture.cluster_moves import (
    cluster_flip_move,
    component_flip_move,
    neighbourhood_block_move,
)
from graphssl.inference.diffusion_mixture.gibbs import MixtureState, gibbs_sweep, init_state
from graphssl.inference.diffusion_mixture.moves import (
    relabel_components_move,
    resample_component_move,
)
from graphssl.inference.diffusion_mixture.pallas import (
    fused_gibbs_sweep,
    fused_sweep_available,
    padded_shape,
    sweep_tables,
)
from graphssl.inference.diffusion_mixture.split_merge import (
    centred_split_merge_move,
    split_merge_move,
)
from graphssl.inference.mcmc.kernels import Kernel, compose, info_type
from graphssl.models.diffusion_mixture import log_joint, sufficient_statistics

__all__ = ["MixtureChainState", "SweepInfo", "RecordInfo", "move_info_type", "MOVES",
           "ENGINES", "move_counts", "resolve_engine",
           "mixture_init", "mixture_energy", "sweep_kernel", "move_kernel", "record_kernel",
           "mixture_kernel", "map_refine", "reset_tally"]

MOVES = ("resample", "relabel", "split_merge", "centred_split_merge", "cluster_flip", "block",
         "component_flip")
ENGINES = ("auto", "scan", "pallas")
# classes x nodes (padded) held on chip by one fused-sweep program: "auto" stays within what
# was measured on an H100 (COIL: 8 x 2048, 120 it/s for 24 runs); larger ones may spill
_FUSED_MAX_CELLS = 1 << 14


class MixtureChainState(NamedTuple):
    """One chain of Walder's sampler.

    ``labels`` int32[m] (y), ``beta`` int32[m] (centres), ``stats`` their
    :class:`~graphssl.models.diffusion_mixture.MixtureStats`; ``step`` kernel steps done;
    the tally kept once ``step >= tally_from``: ``class_prob_sum`` float[m, C] (sum of the
    sweeps' ``p(y_i | rest)``), ``n_tallied`` (sweeps summed), ``best_labels``,
    ``best_beta``, ``best_log_joint`` (the most probable state visited, ``-inf`` before).
    """

    labels: jax.Array
    beta: jax.Array
    stats: object
    step: jax.Array
    class_prob_sum: jax.Array
    n_tallied: jax.Array
    best_labels: jax.Array
    best_beta: jax.Array
    best_log_joint: jax.Array


class SweepInfo(NamedTuple):
    """Info of :func:`sweep_kernel`: no fields (a Gibbs sweep's draws are always taken)."""


class RecordInfo(NamedTuple):
    """Info of :func:`record_kernel`: ``n_components`` (occupied (class, centre) pairs) and
    ``edge_agreement`` (weighted fraction of graph edges whose ends share a label)."""

    n_components: jax.Array
    edge_agreement: jax.Array


def move_info_type(name: str) -> type:
    """Info class (``MoveInfo``) of :func:`move_kernel` ``(name)``: one field,
    ``{name}_accepted``, the fraction of the step's attempts accepted that changed the
    state (named by the move, so the moves' infos merge under :func:`compose`)."""
    if name not in MOVES:
        raise ValueError(f"move: use one of {MOVES}, got {name!r}")
    return info_type("MoveInfo", (f"{name}_accepted",))


def _point(state: MixtureChainState) -> MixtureState:
    return MixtureState(state.labels, state.beta, state.stats)


def _with_point(state: MixtureChainState, point: MixtureState) -> MixtureChainState:
    return state._replace(labels=point.y, beta=point.beta, stats=point.stats)


def _model(model):
    """The model without the tables a ``prepare`` attached (for the moves)."""
    return model if model.prepared is None else model.replace(prepared=None)


def reset_tally(state: MixtureChainState) -> MixtureChainState:
    """The state with an empty tally (class marginals and best state start again); the chain
    itself is unchanged, so resumed draws stay those of one uninterrupted run."""
    return state._replace(
        class_prob_sum=jnp.zeros_like(state.class_prob_sum),
        n_tallied=jnp.zeros_like(state.n_tallied),
        best_labels=state.labels, best_beta=state.beta,
        best_log_joint=jnp.full_like(state.best_log_joint, -jnp.inf))


def _init(init_beta: str, model, key, labels=None) -> MixtureChainState:
    point = init_state(_model(model), key, y=labels, init_beta=init_beta)
    dtype = model.alpha.dtype
    return MixtureChainState(
        point.y, point.beta, point.stats, jnp.zeros((), jnp.int32),
        jnp.zeros((model.n_nodes, model.n_classes), dtype), jnp.zeros((), jnp.int32),
        point.y, point.beta, jnp.asarray(-jnp.inf, dtype))


def mixture_init(init_beta: str = "random"):
    """The kernels' ``init(model, key, labels=None)``: observed labels clamped, the others
    ``labels`` (or ``~ eta``), centres ``init_beta`` (``"random"``: uniform over vertices;
    ``"self"``: ``beta_i = i``), see :func:`~graphssl.inference.diffusion_mixture.gibbs.
    init_state`. One function object per setting (it keys the driver's compile cache)."""
    if init_beta not in ("random", "self"):
        raise ValueError(f"init_beta: use 'random' or 'self', got {init_beta!r}")
    return _INITS[init_beta]


_INITS = {name: jax.tree_util.Partial(_init, name) for name in ("random", "self")}


def mixture_energy(model, state) -> jax.Array:
    """``-log p(y, beta)`` of a chain state (the per-draw energy given to
    :func:`~graphssl.inference.mcmc.chains.sample_chains`)."""
    return -log_joint(_model(model), state.labels, state.beta, state.stats)


def move_counts(moves) -> tuple[int, ...]:
    """Attempts per iteration of each move of :data:`MOVES` (``resample, relabel,
    split_merge, centred_split_merge, cluster_flip, block, component_flip``) from ``moves``: a
    tuple of two to seven bools / non-negative whole numbers (missing entries are 0; 1.5
    is refused, where ``int()`` made it 1)."""
    wanted = (f"moves: give 2 to {len(MOVES)} non-negative whole attempt counts "
              f"({', '.join(MOVES)}), got {moves!r}")
    try:
        given = tuple(moves)
    except TypeError:
        raise ValueError(wanted) from None
    if not 2 <= len(given) <= len(MOVES) or not all(_is_attempt_count(x) for x in given):
        raise ValueError(wanted)
    return tuple(int(x) for x in given) + (0,) * (len(MOVES) - len(given))


def _is_attempt_count(value) -> bool:
    """A bool, or a whole number >= 0 (an int, or a float such as 2.0)."""
    if isinstance(value, bool | np.bool_):
        return True
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    return np.isfinite(number) and number >= 0 and number.is_integer()


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


# ----------------------------------------------------------------------------- sweep


def _sweep(engine: str, model, key, point: MixtureState, greedy: bool = False):
    if engine == "pallas":
        return fused_gibbs_sweep(_model(model), key, point, model.prepared, greedy=greedy)
    if engine == "scan":
        return gibbs_sweep(model, key, point, greedy=greedy)
    raise ValueError(f"engine: use 'scan' or 'pallas' (resolved), got {engine!r}")


def _sweep_step(engine: str, tally_from, model, key, state: MixtureChainState):
    point, probs = _sweep(engine, model, key, _point(state))
    keep = state.step >= tally_from
    state = _with_point(state, point)._replace(
        step=state.step + 1,
        class_prob_sum=state.class_prob_sum + jnp.where(keep, probs, 0.0),
        n_tallied=state.n_tallied + keep.astype(jnp.int32))
    return state, SweepInfo()


def _prepare_tables(model):
    return model.replace(prepared=sweep_tables(model))


def sweep_kernel(engine: str = "scan", init_beta: str = "random", tally_from=0) -> Kernel:
    """The blocked Gibbs sweep of Eq. (7) as a kernel: ``engine`` ``"scan"``
    (:func:`~graphssl.inference.diffusion_mixture.gibbs.gibbs_sweep`) or ``"pallas"``
    (:func:`~graphssl.inference.diffusion_mixture.pallas.fused_gibbs_sweep`, its padded
    tables built once per run by the kernel's ``prepare``); both give the same draws from the
    same key. Adds each sweep's class probabilities to the tally once ``step >=
    tally_from``. Info: :class:`SweepInfo` (no fields)."""
    if engine not in ("scan", "pallas"):
        raise ValueError(f"engine: use 'scan' or 'pallas' (see resolve_engine), got {engine!r}")
    step = jax.tree_util.Partial(_sweep_step, engine, jnp.asarray(tally_from, jnp.int32))
    prepare = jax.tree_util.Partial(_prepare_tables) if engine == "pallas" else None
    return Kernel(mixture_init(init_beta), step, prepare)


# ----------------------------------------------------------------------------- moves


def _move_fn(name: str, max_components: int, block_size: int):
    if name not in MOVES:
        raise ValueError(f"move: use one of {MOVES}, got {name!r}")
    if name == "relabel":
        return functools.partial(relabel_components_move, max_components=max_components)
    if name == "block":
        return functools.partial(neighbourhood_block_move, block_size=block_size)
    return {"resample": resample_component_move, "split_merge": split_merge_move,
            "centred_split_merge": centred_split_merge_move,
            "cluster_flip": cluster_flip_move, "component_flip": component_flip_move}[name]


def _move_step(name: str, attempts: int, max_components: int, block_size: int, model, key,
               state: MixtureChainState):
    move = _move_fn(name, max_components, block_size)
    model = _model(model)
    dtype = model.alpha.dtype
    if attempts == 1:
        point, accepted = move(model, key, _point(state))
        rate = accepted.astype(dtype)
    else:
        def body(point, k):
            return move(model, k, point)

        point, accepted = lax.scan(body, _point(state), jax.random.split(key, attempts))
        rate = jnp.mean(accepted.astype(dtype))
    return _with_point(state, point), move_info_type(name)(rate)


def move_kernel(name: str, attempts: int = 1, *, max_components: int = 2,
                block_size: int = 24, init_beta: str = "random") -> Kernel:
    """``attempts`` successive attempts of one MH move of :data:`MOVES` as a kernel:
    ``"resample"`` (Sec. 4.1), ``"relabel"`` (Sec. 4.2, up to ``max_components``
    components), ``"split_merge"``, ``"centred_split_merge"``, ``"cluster_flip"``,
    ``"block"`` (``block_size`` nodes), ``"component_flip"``. Info: :func:`move_info_type`
    ``(name)``, one field ``{name}_accepted``: the fraction of the attempts accepted that
    changed the state."""
    if int(attempts) < 1:
        raise ValueError(f"attempts: must be a positive integer, got {attempts}")
    _move_fn(name, max_components, block_size)  # validates the name
    step = jax.tree_util.Partial(_move_step, name, int(attempts), int(max_components),
                                 int(block_size))
    return Kernel(mixture_init(init_beta), step)


# ----------------------------------------------------------------------------- record


def _edge_agreement(model, y):
    same = (y[model.neighbor_index] == y[:, None]).astype(model.alpha.dtype)
    w = -model.neighbor_laplacian
    return jnp.sum(w * same) / jnp.maximum(jnp.sum(w), 1e-30)


def _record_step(tally_from, model, key, state: MixtureChainState):
    del key  # an identity transition: nothing is drawn
    log_p = -mixture_energy(model, state)
    better = (state.step >= tally_from) & (log_p > state.best_log_joint)
    state = state._replace(
        best_labels=jnp.where(better, state.labels, state.best_labels),
        best_beta=jnp.where(better, state.beta, state.best_beta),
        best_log_joint=jnp.where(better, log_p, state.best_log_joint))
    info = RecordInfo(
        n_components=jnp.sum(state.stats.component_counts > 0).astype(log_p.dtype),
        edge_agreement=_edge_agreement(model, state.labels))
    return state, info


def record_kernel(init_beta: str = "random", tally_from=0) -> Kernel:
    """The identity transition that closes an iteration: keeps the most probable state
    visited once ``step >= tally_from`` and records the permutation-invariant summaries
    (:class:`RecordInfo`) ``n_components`` (occupied (class, centre) pairs) and
    ``edge_agreement`` (weighted fraction of graph edges whose ends share a label, a
    co-assignment statistic)."""
    step = jax.tree_util.Partial(_record_step, jnp.asarray(tally_from, jnp.int32))
    return Kernel(mixture_init(init_beta), step)


def mixture_kernel(moves=(1, 1), *, engine: str = "scan", max_components: int = 2,
                   block_size: int = 24, init_beta: str = "random", tally_from=0) -> Kernel:
    """One iteration of Walder Sec. 5 as one kernel: the sweep (``engine``), then the moves'
    attempts (``moves``: counts for :data:`MOVES`, see :func:`move_counts`; the paper's
    iteration is ``(1, 1)``) in the order split-merge, centred split-merge, cluster flip,
    block, component flip, re-sampling, re-labelling, then :func:`record_kernel`.
    ``tally_from``: the step from which the tally is kept (the burn-in). Run it with
    ``sample_chains(kernel, model, key, energy=mixture_energy, ...)``."""
    counts = dict(zip(MOVES, move_counts(moves), strict=True))
    order = ("split_merge", "centred_split_merge", "cluster_flip", "block", "component_flip",
             "resample", "relabel")
    kernels = [sweep_kernel(engine, init_beta, tally_from)]
    kernels += [move_kernel(name, counts[name], max_components=max_components,
                            block_size=block_size, init_beta=init_beta)
                for name in order if counts[name]]
    kernels.append(record_kernel(init_beta, tally_from))
    return compose(*kernels)


# ----------------------------------------------------------------------------- MAP


def map_refine(model, state: MixtureState, max_sweeps: int = 50, engine: str = "scan"):
    """MAP refinement of Walder Sec. 5: sweep the Gibbs conditionals, setting each unobserved
    (beta_i, y_i) pair jointly (and each observed beta_i) to its conditional argmax, until no
    site changes. Each step maximises the joint over one block, so the joint never decreases.
    ``engine="pallas"`` runs each sweep as the fused kernel (same argmax). Deterministic (no
    key). Returns ``(state, n_sweeps)``."""
    if engine not in ("scan", "pallas"):
        raise ValueError(f"engine: use 'scan' or 'pallas', got {engine!r}")
    model = _prepare_tables(_model(model)) if engine == "pallas" else _model(model)

    def cond(carry):
        _, changed, sweeps = carry
        return changed & (sweeps < max_sweeps)

    def body(carry):
        state, _, sweeps = carry
        new, _ = _sweep(engine, model, None, state, greedy=True)
        changed = jnp.any(new.y != state.y) | jnp.any(new.beta != state.beta)
        return new, changed, sweeps + 1

    state = state._replace(stats=sufficient_statistics(_model(model), state.y, state.beta))
    state, _, sweeps = lax.while_loop(cond, body, (state, jnp.array(True), 0))
    return state, sweeps
