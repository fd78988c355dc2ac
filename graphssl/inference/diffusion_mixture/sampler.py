"""Running Walder's sampler: chains of :func:`~.kernels.mixture_kernel` under ``sample_chains``.

:func:`sample_mixture` builds the iteration kernel of Walder Sec. 5
(:mod:`graphssl.inference.diffusion_mixture.kernels`) and runs it with the library's one
chain driver, :func:`graphssl.inference.mcmc.chains.sample_chains` (resume, progress bar,
vectorised chains; a stack of models, one per split or setting, runs in the same compiled
call with ``batched_model``). It returns the driver's
:class:`~graphssl.inference.mcmc.chains.Samples`; the mixture's own tallies live in its
``final_state`` (:class:`~.kernels.MixtureChainState`) and are read by
:func:`class_marginals` and :func:`map_estimate`. ArviZ data come from the one converter,
:func:`graphssl.diagnostics.to_arviz`; running until R-hat <= 1.01 from
:func:`graphssl.inference.mcmc.convergence.sample_until_converged`
(:func:`sample_mixture_until_converged`).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from graphssl.inference.diffusion_mixture.gibbs import MixtureState
from graphssl.inference.diffusion_mixture.kernels import (
    ENGINES,
    MOVES,
    MixtureChainState,
    map_refine,
    mixture_energy,
    mixture_kernel,
    move_counts,
    reset_tally,
    resolve_engine,
)
from graphssl.inference.mcmc.chains import Samples, sample_chains
from graphssl.inference.mcmc.convergence import check_run_arguments, sample_until_converged
from graphssl.models.diffusion_mixture import DirichletDiffusionMixture

__all__ = ["ENGINES", "MOVES", "move_counts", "resolve_engine", "sample_mixture",
           "stack_models", "n_models", "class_marginals", "posterior_mean_labels",
           "map_estimate", "map_search_mixture", "MixtureMapSearch",
           "sample_mixture_until_converged", "TRACE_STATISTICS"]

# per-draw statistics of the mixture's kernels that are invariant to permuting the classes
TRACE_STATISTICS = ("n_components", "edge_agreement")


def n_models(model) -> int | None:
    """Models in a :func:`stack_models` stack (its leading axis), None for one model."""
    return None if np.ndim(model.labels) == 1 else int(np.shape(model.labels)[0])


def _per_chain(model, n_chains: int):
    """A stack of S models as S * n_chains per-chain models (model-major)."""
    if n_chains == 1:
        return model
    return jax.tree.map(lambda x: jnp.repeat(x, n_chains, axis=0), model)


@functools.partial(jax.jit, static_argnames=("init_noise", "n_chains"))
def _start_labels(model, key, init_labels, init_noise: float, n_chains: int):
    """Per-chain starting labels int32[S * chains, m] (or None): ``init_labels`` with a
    fraction ``init_noise`` of them redrawn from eta, independently per chain."""
    if init_labels is None:
        return None
    S, m = n_models(model) or 1, model.n_nodes
    init = jnp.asarray(init_labels, jnp.int32).reshape(S, 1, m)
    init = jnp.broadcast_to(init, (S, n_chains, m))
    if init_noise == 0.0:
        return init.reshape(S * n_chains, m)
    log_eta = jnp.asarray(model.log_eta).reshape(S, 1, -1)
    k_redraw, k_fresh = jax.random.split(jax.random.fold_in(key, 1))
    redraw = jax.random.uniform(k_redraw, (S, n_chains, m)) < init_noise
    fresh = jax.random.categorical(k_fresh, log_eta[:, :, None, :], shape=(S, n_chains, m))
    return jnp.where(redraw, fresh, init).reshape(S * n_chains, m).astype(jnp.int32)


def _check(model, n_chains, n_iterations, burn_in, thin, max_components, block_size,
           init_labels, init_noise):
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
        init_labels = np.asarray(init_labels)
        if init_labels.shape != tuple(np.shape(model.labels)):
            raise ValueError(f"init_labels: expected shape {tuple(np.shape(model.labels))}, "
                             f"got {init_labels.shape}")
        if (not np.all(np.isfinite(init_labels)) or np.any(init_labels != np.round(init_labels))
                or np.any(init_labels < 0) or np.any(init_labels >= model.n_classes)):
            raise ValueError(f"init_labels: whole class codes in 0..{model.n_classes - 1} (0.7 "
                             f"was truncated to 0), got values "
                             f"{np.unique(init_labels)[:5].tolist()}")
    if not 0.0 <= init_noise <= 1.0:
        raise ValueError(f"init_noise: a fraction in [0, 1], got {init_noise}")


def sample_mixture(model: DirichletDiffusionMixture, key, *, n_chains: int = 4,
                   n_iterations: int = 1000, burn_in: int = 100, thin: int = 1,
                   max_components: int = 2, moves: tuple = (True, True),
                   init_beta: str = "random", init_labels=None, init_noise: float = 0.0,
                   engine: str = "auto", resume: Samples | None = None,
                   block_size: int = 24, join: bool = True, progress: bool = False,
                   chain_method: str = "vectorized", chunk_size: int | None = None) -> Samples:
    """Run ``n_chains`` chains of Walder's sampler through
    :func:`~graphssl.inference.mcmc.chains.sample_chains`.

    A model whose leaves carry a leading axis (:func:`stack_models`, S models) runs S x
    ``n_chains`` chains in one compiled call (chain ``s * n_chains + c`` runs model s). By
    default chains start apart (unobserved labels ~ eta, random centres). ``init_labels``
    (int[m], or int[S, m] for a stack; e.g. a Parzen-window prediction) starts every chain
    from those labels instead, with a fraction ``init_noise`` of them redrawn from eta per
    chain (the paper does not say how its chains started; a warm start matters with short
    chains). ``n_iterations`` is rounded down to a multiple of ``thin`` (one draw every
    ``thin`` iterations); ``max_components`` is R of Sec. 4.2; ``moves`` = attempts per
    iteration of each move of :data:`MOVES` (2 to 7 counts, :func:`mixture_kernel`);
    ``block_size`` the nodes one block move re-draws; ``init_beta`` ``"random"`` or
    ``"self"``; ``engine`` the Gibbs sweep's implementation (:func:`resolve_engine`: one
    fused kernel per chain on a GPU, ``lax.scan`` elsewhere; both give the same draws).
    ``resume``: a previous result of the same model; its chains continue for
    ``n_iterations`` more (``key``, ``n_chains``, ``burn_in``, ``init_*`` unused; ``thin``
    must match), the draws are those of one uninterrupted run; ``join=False`` starts the
    tally (class marginals, best state) afresh, so they cover the new iterations only
    (the draws returned are still all of them). ``progress``: a tqdm bar;
    ``chain_method``, ``chunk_size``: see ``sample_chains`` (draws per compiled scan; runs
    of different lengths with the same ``chunk_size`` share one compilation). The default
    ``"vectorized"`` (``vmap`` over chains) is measured faster here than ``sample_chains``'
    CPU choice ``"sequential"``: 2 Digit1 models x 2 chains, CPU time per iteration, 2-core
    CPU: 37-48 it/s vectorized against 21 it/s sequential.

    Returns ``sample_chains``' :class:`~graphssl.inference.mcmc.chains.Samples`: ``labels``
    [chains, draws, m], ``energy`` ``-log p(y, beta)`` per draw, ``stats`` (each move's
    ``{name}_accepted`` and the invariant ``n_components``, ``edge_agreement``; with
    ``thin > 1`` averaged over the iterations leading to the draw) and ``final_state``
    (:class:`~graphssl.inference.diffusion_mixture.kernels.MixtureChainState`, with the
    Rao–Blackwellised class marginals, :func:`class_marginals`, and the best state visited
    after burn-in, :func:`map_estimate`).
    """
    kernel, chain_model, kwargs, resume = _run_setup(
        model, key, n_chains, n_iterations, burn_in, thin, max_components, moves, init_beta,
        init_labels, init_noise, engine, resume, block_size, join)
    return sample_chains(kernel, chain_model, key, n_samples=int(n_iterations) // int(thin),
                         progress=progress, resume=resume, chunk_size=chunk_size,
                         **dict(kwargs, chain_method=chain_method))


def _run_setup(model, key, n_chains, n_iterations, burn_in, thin, max_components, moves,
               init_beta, init_labels, init_noise, engine, resume, block_size, join):
    """The kernel, the (per-chain) model, ``sample_chains`` keyword arguments and the
    resumed run (its tally reset unless ``join``) of :func:`sample_mixture`."""
    stacked = n_models(model) is not None
    S = n_models(model) or 1
    if resume is not None:
        n_chains = int(np.shape(resume.chain_keys)[0]) // S
        if int(resume.thin) != int(thin):
            raise ValueError(f"thin: the resumed run used thin={int(resume.thin)}; use the same")
        if init_labels is not None:
            raise ValueError("init_labels: a resumed run starts from its last state; drop it")
        burn_in = int(resume.burn_in)
        if not join:
            resume = resume._replace(final_state=reset_tally(resume.final_state))
    _check(model, n_chains, n_iterations, burn_in, thin, max_components, block_size,
           init_labels, init_noise)
    kernel = mixture_kernel(moves, engine=resolve_engine(engine, model),
                            max_components=max_components, block_size=block_size,
                            init_beta=init_beta, tally_from=burn_in)
    chain_model = _per_chain(model, int(n_chains)) if stacked else model
    start = None if resume is not None else _start_labels(
        model, key, init_labels, float(init_noise), int(n_chains))
    kwargs = dict(n_chains=S * int(n_chains), burn_in=int(burn_in), thin=int(thin),
                  init_labels=start, energy=mixture_energy, batched_model=stacked,
                  chain_method="vectorized")
    return kernel, chain_model, kwargs, resume


def sample_mixture_until_converged(model: DirichletDiffusionMixture, key=None, *,
                                   target_rhat: float = 1.01, check_every: int = 2000,
                                   max_iterations: int = 50_000, resume: Samples | None = None,
                                   pairs=None, n_pairs: int = 20, seed: int = 0,
                                   progress: bool = False, n_chains: int = 4,
                                   burn_in: int = 100, thin: int | None = None,
                                   max_components: int = 2,
                                   moves: tuple = (True, True), init_beta: str = "random",
                                   init_labels=None, init_noise: float = 0.0,
                                   engine: str = "auto", block_size: int = 24):
    """Chains of :func:`sample_mixture` run by the generic
    :func:`graphssl.inference.mcmc.convergence.sample_until_converged` until every R-hat of
    the permutation-invariant statistics (energy, sorted class sizes, co-assignment of
    ``pairs``, ``n_components``, ``edge_agreement``) is at most ``target_rhat``, or
    ``max_iterations`` iterations per chain have run (chunks of ``check_every``). One
    unstacked model; ``resume`` (a previous run) counts as warm-up, its tally starts afresh;
    ``thin`` defaults to the resumed run's (else 1).
    Returns ``(samples, checks)``: the draws of the last check's window (the class marginals
    of its final state cover every iteration of this call) and the
    :class:`~graphssl.inference.mcmc.convergence.ConvergenceCheck` list."""
    if n_models(model) is not None:
        raise ValueError("model: sample_mixture_until_converged takes one unstacked model; "
                         "run the members of a stack one at a time")
    if key is None and resume is None:
        raise ValueError("key: give a PRNG key for new chains, or resume= a previous run")
    if thin is None:
        thin = int(resume.thin) if resume is not None else 1
    check_run_arguments(target_rhat, check_every, max_iterations, thin, key, resume,
                        max_name="max_iterations")
    kernel, chain_model, kwargs, resume = _run_setup(
        model, key, n_chains, check_every, burn_in, thin, max_components, moves, init_beta,
        init_labels, init_noise, engine, resume, block_size, False)
    return sample_until_converged(
        kernel, chain_model, key, target_rhat=target_rhat, check_every=check_every,
        max_steps=max_iterations, resume=resume, pairs=pairs, n_pairs=n_pairs, seed=seed,
        trace_statistics=TRACE_STATISTICS, progress=progress, **kwargs)


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


def class_marginals(samples: Samples, n_models: int | None = None,
                    per_chain: bool = False) -> np.ndarray:
    """Rao–Blackwellised posterior class marginals (the mean over the iterations after
    burn-in of each sweep's ``p(y_i | rest)``): float[m, C] averaged over chains, or
    float[S, m, C] for a run of ``n_models`` = S stacked models (:func:`n_models`);
    ``per_chain``: float[chains, m, C] (or [S, chains, m, C])."""
    state = samples.final_state
    sums = np.asarray(state.class_prob_sum, np.float64)
    counts = np.asarray(state.n_tallied, np.float64)
    if np.any(counts == 0):
        raise ValueError("samples: no iteration after burn-in was tallied; run n_iterations >= 1")
    probs = sums / counts[:, None, None]
    if n_models is not None:
        probs = probs.reshape((int(n_models), -1) + probs.shape[1:])
    return probs if per_chain else probs.mean(axis=-3)


def posterior_mean_labels(samples: Samples, n_models: int | None = None) -> np.ndarray:
    """Posterior-mean labels: the argmax of :func:`class_marginals`, int[m] (or [S, m])."""
    return class_marginals(samples, n_models).argmax(axis=-1)


def map_estimate(model: DirichletDiffusionMixture, samples: Samples, max_sweeps=50,
                 engine: str = "auto", member: int | None = None):
    """MAP labels (Walder Sec. 5): the best state visited over the chains (after burn-in),
    refined by :func:`~.kernels.map_refine` (its sweeps by ``engine``). For a stacked run
    give the stack as ``model`` and the ``member`` index.
    Returns ``(y int[m], log_joint, n_sweeps)``."""
    state: MixtureChainState = samples.final_state
    best_log = np.asarray(state.best_log_joint)
    rows = np.arange(best_log.shape[0])
    S = n_models(model)
    if S is not None:
        if member is None or not 0 <= int(member) < S:
            raise ValueError(f"member: a stacked run of {S} models needs member= in 0..{S - 1}")
        per = best_log.shape[0] // S
        rows = rows[int(member) * per:(int(member) + 1) * per]
        model = jax.tree.map(lambda x: x[int(member)], model)
    elif member is not None:
        raise ValueError("member: give the stacked model with it (or drop member for one model)")
    if not np.any(np.isfinite(best_log[rows])):
        raise ValueError("samples: no state after burn-in was recorded; run n_iterations >= 1")
    best = int(rows[np.argmax(best_log[rows])])
    point = MixtureState(jnp.asarray(state.best_labels[best]), jnp.asarray(state.best_beta[best]),
                         None)
    refined, sweeps = _map_refine_jit(model, point, max_sweeps=int(max_sweeps),
                                      engine=resolve_engine(engine, model))
    return (np.asarray(refined.y), float(model.log_joint(refined.y, refined.beta)),
            int(sweeps))


_map_refine_jit = jax.jit(map_refine, static_argnames=("max_sweeps", "engine"))


class MixtureMapSearch(NamedTuple):
    """What :func:`map_search_mixture` compared. ``energies``: ``{candidate name: energy}``,
    ``energy = -log p(y, beta)`` of each candidate (``"chains_best"``, ``"posterior_mean"``,
    ``"refined_from_mean"``); ``best``: the name of the lowest; ``energy``: its energy."""

    energies: dict
    best: str
    energy: float


def map_search_mixture(model: DirichletDiffusionMixture, samples: Samples, posterior_mean,
                       max_sweeps=50, engine: str = "auto"):
    """The lowest-energy state found (issue 25 item 4), ``energy = -log p(y, beta)``, among

    * ``"chains_best"``: :func:`map_estimate` (best visited state, refined);
    * ``"posterior_mean"``: the posterior-mean labels ``posterior_mean`` (``int[m]``) with
      the centres ``beta`` set by conditional maximisation given those labels (started
      from the chains' best centres): the posterior-mean labelling's energy;
    * ``"refined_from_mean"``: :func:`~.kernels.map_refine` (labels and centres) from it.

    Every step of the refinements can only raise the joint, so the returned state's energy
    is at or below the posterior-mean labelling's (at its fitted centres) and the chains'
    best (hence every retained draw's). Returns ``(y int[m], log_joint, info)`` with ``info``
    a :class:`MixtureMapSearch` (each candidate's energy, the winner).
    """
    engine = resolve_engine(engine, model)
    y_best, lj_best, _ = map_estimate(model, samples, max_sweeps=max_sweeps, engine=engine)
    state: MixtureChainState = samples.final_state
    top = int(np.argmax(np.asarray(state.best_log_joint)))
    observed = np.asarray(model.observed)
    y_mean = np.where(observed, np.asarray(model.labels), np.asarray(posterior_mean))
    y_mean = jnp.asarray(y_mean, dtype=jnp.asarray(model.labels).dtype)
    # centres only: every node observed at the posterior-mean labels
    fixed = dataclasses.replace(model, observed=jnp.ones_like(model.observed), labels=y_mean)
    start = MixtureState(y_mean, jnp.asarray(state.best_beta[top]), None)
    at_mean, _ = _map_refine_jit(fixed, start, max_sweeps=int(max_sweeps), engine=engine)
    refined, _ = _map_refine_jit(model, MixtureState(y_mean, at_mean.beta, None),
                                 max_sweeps=int(max_sweeps), engine=engine)
    candidates = {
        "chains_best": (np.asarray(y_best), lj_best),
        "posterior_mean": (np.asarray(y_mean), float(model.log_joint(y_mean, at_mean.beta))),
        "refined_from_mean": (np.asarray(refined.y),
                              float(model.log_joint(refined.y, refined.beta))),
    }
    best = max(candidates, key=lambda name: candidates[name][1])
    info = MixtureMapSearch({name: -lj for name, (_, lj) in candidates.items()}, best,
                            -candidates[best][1])
    return candidates[best][0], candidates[best][1], info
