"""Run any kernel until its chains agree: R-hat on permutation-invariant statistics.

How many steps a chain needs is rarely known in advance (Walder ran 10^5 iterations per
split). :func:`sample_until_converged` continues the chains of
:func:`~graphssl.inference.mcmc.chains.sample_chains` in chunks (``resume=``: the same draws
as one long run) and stops once every rank-normalised split R-hat (Vehtari et al. 2021,
``arviz.rhat``) of :func:`invariant_rhat` is at most ``target_rhat``. Each check looks at the
last half of the chunks run so far, the first half being warm-up (the rule of Gelman & Rubin
1992): a chain that drifted early does not need to be outrun, and the record returned is
that window (older draws are dropped as the window moves, so memory stays bounded).

The statistics are invariant to permuting the classes, so label switching (a permutation
move, or the mixture's re-labelling) cannot inflate them: the energy, the sorted class sizes,
the co-assignment ``[y_a = y_b]`` of a fixed set of node pairs, and any scalar move statistic
the kernel records that is itself invariant (``trace_statistics``; e.g. the diffusion
mixture's ``n_components`` and ``edge_agreement``). Raw per-node labels are not used: a
permutation move scrambles them on healthy chains.

This is inference code: its statistics come from :mod:`graphssl.inference.mcmc.statistics`
(never from :mod:`graphssl.diagnostics`, which sits above inference), R-hat from ArviZ.
"""

from __future__ import annotations

import numbers
import time
from typing import NamedTuple

import numpy as np

from graphssl._device import take
from graphssl.inference.mcmc.chains import Samples, sample_chains
from graphssl.inference.mcmc.statistics import default_pairs, invariant_statistics, rhat_ess
from graphssl.validation import is_whole

__all__ = ["ConvergenceCheck", "check_run_arguments", "run_statistics", "invariant_rhat",
           "trim_draws", "sample_until_converged"]


def run_statistics(samples: Samples, pairs, trace_statistics=()) -> dict:
    """The permutation-invariant statistics of a run
    (:func:`graphssl.inference.mcmc.statistics.invariant_statistics`: ``energy``, sorted
    ``class_sizes``, ``coassignment`` of ``pairs``) plus each name of ``trace_statistics``
    from ``samples.stats`` (scalar move statistics the kernel records, which must be
    invariant themselves), each ``[chains, draws]`` or ``[chains, draws, k]``."""
    out = invariant_statistics(samples.labels, samples.energy, samples.n_classes, pairs)
    for name in trace_statistics:
        if name not in samples.stats:
            raise ValueError(f"trace_statistics: {name!r} is not a statistic of this kernel "
                             f"(it records {sorted(samples.stats)})")
        out[name] = np.asarray(samples.stats[name], np.float64)
    return out


def invariant_rhat(samples: Samples, pairs=None, trace_statistics=(), *, n_pairs: int = 20,
                   seed: int = 0) -> dict[str, float]:
    """Rank-normalised split R-hat (ArviZ) of each statistic of :func:`run_statistics`, the
    largest over its columns, for a run of >= 2 chains and >= 4 draws. ``pairs`` default:
    ``default_pairs(n, n_pairs=n_pairs, seed=seed)``. A statistic that never changes in any
    chain has no R-hat (NaN; it cannot show disagreement)."""
    energy = np.asarray(samples.energy)
    if energy.ndim != 2 or energy.shape[0] < 2 or energy.shape[1] < 4:
        raise ValueError(f"samples: need >= 2 chains of >= 4 draws, got energies of shape "
                         f"{energy.shape} (chains, draws)")
    if pairs is None:
        pairs = default_pairs(np.shape(samples.labels)[-1], n_pairs=n_pairs, seed=seed)
    out = {}
    for name, x in run_statistics(samples, pairs, trace_statistics).items():
        r, _ = rhat_ess(x)
        r = r[np.isfinite(r)]
        out[name] = float(r.max()) if r.size else float("nan")
    return out


def trim_draws(samples: Samples, start: int) -> Samples:
    """``samples`` without its first ``start`` draws (chain state, keys and step count kept,
    so it still resumes exactly)."""
    return samples._replace(labels=take(samples.labels, start),
                            energy=take(samples.energy, start),
                            stats={k: take(v, start) for k, v in samples.stats.items()})


class ConvergenceCheck(NamedTuple):
    """One check of :func:`sample_until_converged`: ``steps`` run per chain by this call so
    far (a given ``resume`` not counted), ``window`` draws per chain the R-hats look at (the
    last half of the chunks), ``rhat`` per statistic (:func:`invariant_rhat`), ``max_rhat``
    over them (NaN entries ignored), ``seconds`` since the start."""

    steps: int
    window: int
    rhat: dict
    max_rhat: float
    seconds: float


def _progress_bar(progress: bool, total: int, target_rhat: float):
    """A tqdm bar over steps (tqdm imported only when asked for: in a kernel without widgets
    its import alone warns)."""
    if not progress:
        class _Silent:
            update = set_postfix = close = staticmethod(lambda *a, **k: None)

        return _Silent()
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="step", desc=f"until R-hat <= {target_rhat:.3g}")


def check_run_arguments(target_rhat, check_every, max_steps, thin, key, resume, *,
                        max_name: str = "max_steps") -> None:
    """The checks of :func:`sample_until_converged`'s arguments, each error naming its
    argument; ``max_name``: the name the caller gives ``max_steps`` (a wrapper's
    ``max_iterations``), so that its users read their own argument's name."""
    if (isinstance(target_rhat, bool) or not isinstance(target_rhat, numbers.Real)
            or not target_rhat > 1.0):
        raise ValueError(f"target_rhat: must be a number > 1 (e.g. 1.01), got {target_rhat!r}")
    if not is_whole(thin, 1):
        raise ValueError(f"thin: must be an integer >= 1, got {thin!r}")
    for name, value in (("check_every", check_every), (max_name, max_steps)):
        if not is_whole(value, 0):
            raise ValueError(f"{name}: must be a whole number of steps, got {value!r}")
    if int(check_every) < 4 * thin or int(check_every) % thin:
        raise ValueError(f"check_every: a multiple of thin={thin} with >= 4 draws per chunk, "
                         f"got {check_every}")
    if int(max_steps) < int(check_every):
        raise ValueError(f"{max_name}: must be >= check_every={check_every}, got {max_steps}")
    if key is None and resume is None:
        raise ValueError("key: give a PRNG key for new chains, or resume= a previous run")


def sample_until_converged(kernel, model, key=None, *, target_rhat: float = 1.01,
                           check_every: int = 2000, max_steps: int = 50_000,
                           resume: Samples | None = None, pairs=None, n_pairs: int = 20,
                           seed: int = 0, trace_statistics=(), progress: bool = False,
                           **chain_kwargs):
    """Run chains of ``kernel`` until every R-hat of :func:`invariant_rhat` is at most
    ``target_rhat``, or ``max_steps`` steps per chain have run.

    Args:
      kernel, model: as for :func:`~graphssl.inference.mcmc.chains.sample_chains`.
      key: PRNG key of new chains (unused with ``resume``).
      target_rhat: the largest R-hat accepted on every statistic (1.01: Vehtari et al. 2021).
      check_every: steps per chunk; R-hat is checked after each (a multiple of ``thin``
        with >= 4 draws).
      max_steps: the most steps per chain, chunks of this call only.
      resume: a previous run of this kernel and model: its chains go on from their last
        state, and the run itself counts as warm-up.
      pairs, n_pairs, seed: the co-assignment pairs (default
        :func:`~graphssl.inference.mcmc.statistics.default_pairs` of the unclamped nodes),
        the same at every check.
      trace_statistics: names of invariant scalar statistics in the kernel's info.
      progress: a tqdm bar over steps, showing the largest R-hat.
      **chain_kwargs: for ``sample_chains`` (``n_chains``, ``burn_in``, ``thin``,
        ``init_labels``, ``energy``, ``batched_model``, ``chain_method``); ``n_chains``,
        ``burn_in`` and ``init_labels`` only start new chains.

    Returns ``(samples, checks)``: the run restricted to the draws of the last check's
    window (chain state, keys and MAP as after the last chunk) and the list of
    :class:`ConvergenceCheck`. Whether it converged is ``checks[-1].max_rhat <=
    target_rhat`` (a run that reached ``max_steps`` first is returned too, never silently).
    """
    thin = int(resume.thin if resume is not None else chain_kwargs.get("thin", 1))
    if "thin" in chain_kwargs and int(chain_kwargs["thin"]) != thin:
        raise ValueError(f"thin: the resumed run used thin={thin}; use the same")
    chain_kwargs["thin"] = thin
    check_run_arguments(target_rhat, check_every, max_steps, thin, key, resume)
    new_only = ("n_chains", "burn_in", "init_labels")
    continued = {k: v for k, v in chain_kwargs.items() if k not in new_only}
    if pairs is None:
        pairs = default_pairs(model.n_nodes, np.asarray(model.observed).reshape(
            -1, model.n_nodes)[0], n_pairs=n_pairs, seed=seed)
    draws = int(check_every) // thin
    n_chunks = int(max_steps) // int(check_every)
    bar = _progress_bar(progress, n_chunks * int(check_every), target_rhat)
    checks, record = [], None
    run = None if resume is None else trim_draws(resume, np.shape(resume.energy)[1])
    start = time.perf_counter()
    for chunk in range(1, n_chunks + 1):
        kwargs = chain_kwargs if run is None else continued
        run = sample_chains(kernel, model, key, n_samples=draws, resume=run, **kwargs)
        # the window: chunks chunk // 2 + 1 .. chunk; drop the draws before it
        held = np.shape(run.energy)[1] // draws  # chunks currently held
        run = trim_draws(run, (held - (chunk - chunk // 2)) * draws)
        rhat = invariant_rhat(run, pairs, trace_statistics)
        finite = [r for r in rhat.values() if np.isfinite(r)]
        worst = max(finite) if finite else float("nan")
        checks.append(ConvergenceCheck(chunk * int(check_every), int(np.shape(run.energy)[1]),
                                       rhat, worst, time.perf_counter() - start))
        record = run
        bar.update(int(check_every))
        bar.set_postfix(max_rhat=f"{worst:.3f}")
        if worst <= target_rhat:
            break
    bar.close()
    return record, checks
