"""Run Walder's sampler until its chains agree (R-hat on permutation-invariant statistics).

Walder's chains mix slowly on a graph of 1500 nodes (he ran 10^5 iterations per split), and
how many iterations a data set needs is not known in advance. :func:`sample_until_converged`
continues the chains of :func:`~graphssl.inference.diffusion_mixture.sampler.sample_mixture`
in chunks (``resume=``: the same draws as one long run) and stops once every
rank-normalised split R-hat (Vehtari et al. 2021, through ArviZ) of :func:`mixture_rhat` is at
most ``target_rhat``. Each check looks at the last half of the chunks run so far, the first
half being warm-up (the rule of Gelman & Rubin 1992): a chain that drifted early does not
need to be outrun, and the record returned is that window.

All the statistics are invariant to permuting the classes (label switching cannot inflate
them): the energy ``-log p(y, beta)``, the number of occupied components, the weighted
fraction of graph edges whose ends share a label, the co-assignment ``[y_a = y_b]`` of node
pairs and the sorted class sizes.
"""

from __future__ import annotations

import time
import warnings
from typing import NamedTuple

import numpy as np

from graphssl import diagnostics
from graphssl.inference.diffusion_mixture.sampler import (
    MixtureSamples,
    _joined,
    as_label_samples,
    sample_mixture,
)

__all__ = ["ConvergenceCheck", "mixture_rhat", "window", "sample_until_converged"]

TRACE_STATISTICS = ("energy", "n_components", "edge_agreement")
DRAW_STATISTICS = ("coassignment", "class_sizes")


def _rhat(x) -> float:
    """Rank-normalised split R-hat of ``x [chains, draws]``; NaN when x never changes."""
    import arviz as az

    x = np.asarray(x, np.float64)
    if not np.all(np.isfinite(x)) or np.ptp(x) == 0:
        return float("nan")
    return float(az.rhat(x))


def mixture_rhat(samples: MixtureSamples, n_classes: int, *, pairs=None, n_pairs: int = 20,
                 seed: int = 0) -> dict[str, float]:
    """R-hat of each permutation-invariant statistic of an unbatched run (>= 2 chains).

    ``energy``, ``n_components``, ``edge_agreement``: over every recorded iteration;
    ``coassignment``: the largest R-hat of ``[y_a = y_b]`` over node ``pairs`` (int[P, 2];
    default ``n_pairs`` random pairs drawn with ``seed``) and ``class_sizes``: the largest
    over the sorted class sizes, both at the thinned draws
    (:func:`graphssl.diagnostics.convergence_summary`). A statistic that never changes in
    any chain has no R-hat (NaN; it cannot show disagreement).
    """
    energy = np.asarray(samples.energy)
    if energy.ndim != 2 or energy.shape[0] < 2:
        raise ValueError(f"samples: need one unbatched run of >= 2 chains, got traces of shape "
                         f"{energy.shape} (chains, iterations)")
    out = {name: _rhat(getattr(samples, name)) for name in TRACE_STATISTICS}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        conv = diagnostics.convergence_summary(as_label_samples(samples, n_classes),
                                               pairs=pairs, n_pairs=n_pairs, seed=seed)
    for name in DRAW_STATISTICS:
        r = np.asarray(conv[name]["rhat"], np.float64)
        r = r[np.isfinite(r)]
        out[name] = float(r.max()) if r.size else float("nan")
    return out


class ConvergenceCheck(NamedTuple):
    """One check of :func:`sample_until_converged`: ``iterations`` run per chain so far (its
    chunks; warm-up given as ``resume`` not counted), ``window`` iterations the R-hats look
    at (the last half), ``rhat`` per statistic (:func:`mixture_rhat`), ``max_rhat`` over them
    (NaN entries ignored), ``seconds`` since the start."""

    iterations: int
    window: int
    rhat: dict
    max_rhat: float
    seconds: float


def window(chunks: list[MixtureSamples]) -> MixtureSamples:
    """One record of consecutive chunks of the same chains (traces and draws appended,
    class marginals averaged by iterations; best and final state from the last chunk)."""
    record = chunks[0]
    for chunk in chunks[1:]:
        record = _joined(record, chunk, int(np.asarray(chunk.energy).shape[-1]))
    return record


# what only starts new chains (sample_mixture refuses init_labels when it continues a record)
_NEW_CHAINS_ONLY = ("n_chains", "burn_in", "init_beta", "init_labels", "init_noise")


def _progress_bar(progress: bool, total: int, target_rhat: float):
    """A tqdm bar over iterations (tqdm is imported only when one is asked for: in a kernel
    without widgets its import alone warns)."""
    if not progress:
        class _Silent:
            update = set_postfix = close = staticmethod(lambda *a, **k: None)

        return _Silent()
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="it", desc=f"until R-hat <= {target_rhat:.3g}")


def sample_until_converged(model, key=None, *, target_rhat: float = 1.01,
                           check_every: int = 2000, max_iterations: int = 50_000,
                           resume: MixtureSamples | None = None, pairs=None,
                           n_pairs: int = 20, seed: int = 0, progress: bool = True,
                           **sample_kwargs):
    """Run chains of Walder's sampler until every R-hat of :func:`mixture_rhat` is at most
    ``target_rhat``, or ``max_iterations`` iterations per chain have run.

    Args:
      model: an unbatched :class:`~graphssl.models.diffusion_mixture.DirichletDiffusionMixture`.
      key: PRNG key of new chains (unused with ``resume``).
      target_rhat: the largest R-hat accepted on every statistic (1.01: Vehtari et al. 2021).
      check_every: iterations per chunk; R-hat is checked after each (a multiple of
        ``thin``).
      max_iterations: the most iterations per chain, chunks of this call only.
      resume: a previous record of this model (:func:`sample_mixture`): its chains go on
        from their last state, and the record itself counts as warm-up.
      pairs, n_pairs, seed: the co-assignment pairs (:func:`mixture_rhat`), the same at
        every check.
      progress: a tqdm bar over iterations, showing the largest R-hat.
      **sample_kwargs: for :func:`sample_mixture` (``n_chains``, ``burn_in``, ``thin``,
        ``moves``, ``init_labels``, ...); ``burn_in`` runs before the first chunk, and
        ``n_chains``, ``burn_in`` and ``init_*`` only start new chains (unused with
        ``resume``).

    Returns ``(samples, checks)``: the record of the last half of the chunks (the window the
    last check looked at; its ``class_probs`` average that window only) and the list of
    :class:`ConvergenceCheck`. Whether it converged is ``checks[-1].max_rhat <= target_rhat``
    (a run that reached ``max_iterations`` first is returned too, never silently).
    """
    if int(np.ndim(model.labels)) != 1:
        raise ValueError("model: sample_until_converged takes one unbatched model; run the "
                         "splits of a stacked model one at a time")
    if not target_rhat > 1.0:
        raise ValueError(f"target_rhat: must be > 1 (e.g. 1.01), got {target_rhat}")
    thin = int(resume.thin if resume is not None else sample_kwargs.get("thin", 1))
    if "thin" in sample_kwargs and resume is not None and int(sample_kwargs["thin"]) != thin:
        raise ValueError(f"thin: the resumed run used thin={thin}; use the same")
    sample_kwargs["thin"] = thin
    if int(check_every) < 4 * thin or int(check_every) % thin:
        raise ValueError(f"check_every: a multiple of thin={thin} with >= 4 draws per chunk, "
                         f"got {check_every}")
    if int(max_iterations) < int(check_every):
        raise ValueError(f"max_iterations: must be >= check_every={check_every}, "
                         f"got {max_iterations}")
    if key is None and resume is None:
        raise ValueError("key: give a PRNG key for new chains, or resume= a previous record")
    continued = {k: v for k, v in sample_kwargs.items() if k not in _NEW_CHAINS_ONLY}
    if pairs is None:
        pairs = np.random.default_rng(seed).integers(0, model.n_nodes, size=(n_pairs, 2))
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    n_chunks = int(max_iterations) // int(check_every)
    bar = _progress_bar(progress, n_chunks * int(check_every), target_rhat)
    chunks, checks, previous = [], [], resume
    start = time.perf_counter()
    for _ in range(n_chunks):
        chunk = sample_mixture(model, key, n_iterations=int(check_every), resume=previous,
                               join=False, **(sample_kwargs if previous is None else continued))
        chunks.append(chunk)
        previous = chunk
        record = window(chunks[len(chunks) // 2:])
        rhat = mixture_rhat(record, model.n_classes, pairs=pairs)
        finite = [r for r in rhat.values() if np.isfinite(r)]
        worst = max(finite) if finite else float("nan")
        n_window = int(np.asarray(record.energy).shape[-1])
        checks.append(ConvergenceCheck(len(chunks) * int(check_every), n_window, rhat, worst,
                                       time.perf_counter() - start))
        bar.update(int(check_every))
        bar.set_postfix(max_rhat=f"{worst:.3f}")
        if worst <= target_rhat:
            break
    bar.close()
    return record, checks

