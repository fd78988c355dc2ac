"""Does a posterior's chain sit in a metastable state? A probe from one-class starts.

Near the ordering transition of a Potts-family model (a Boltzmann MRF at the coupling its
labels choose, a Potts model at large ``beta``) the law has two kinds of macrostate: the
labels' domains (each labelled region holding its class) and the merged states (one class
swept over the graph, the other labels kept as islands or overruled). A chain started near
the labels stays in the first kind, a chain started from a merged state in the second, for
thousands of sweeps each: Swendsen-Wang does not cross that barrier when the field pins the
clusters. Chains that all start from the same state agree with one another, so R-hat and the
effective sample size cannot see it.

The probe: one short chain from each one-class state (every node in class ``c``).
If a probe chain settles at a mean energy well below the posterior's draws (more than ``3``
standard deviations of their energies, and at least 1 nat), the model's law at these
parameters has states the posterior's chains never visit and prefers them energetically,
and the reported marginals are those of a metastable state; the report says whether the
probe stayed merged (some class holds more of the unobserved nodes than the labelled
counts make plausible: :func:`~graphssl.inference.ordered_phase.plausible_share_limits`).
Chains that disagree with one another are R-hat's to report
(:func:`~graphssl.diagnostics.check_convergence`); the probe covers chains that agree.
Energy is not free energy; a replica-exchange run
(:func:`~graphssl.inference.mcmc.tempering.replica_exchange`) samples both kinds in
proportion. On Digit1-10 (split 2, the Boltzmann MRF at ``alpha_0 = -0.5``) the two kinds
were 110 nats apart and replica exchange found only the merged one.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from graphssl.inference.mcmc.statistics import ConvergenceWarning
from graphssl.inference.ordered_phase import plausible_share_limits

__all__ = ["MetastabilityReport", "MetastableChainsWarning", "one_class_starts",
           "metastability_report"]


class MetastableChainsWarning(ConvergenceWarning):
    """The posterior's chains sit in one macrostate while chains started from a one-class
    state stay merged at a clearly lower energy (:func:`metastability_report`): the reported
    marginals are a metastable state's. A :class:`ConvergenceWarning`, so its filters catch
    it too."""

GAP_STANDARD_DEVIATIONS = 3.0
MIN_GAP_NATS = 1.0


class MetastabilityReport(NamedTuple):
    """:func:`metastability_report`'s result. ``probe_energy`` / ``probe_share``:
    ``float[C]``, each one-class probe chain's mean energy and the mean share of the
    unobserved nodes held by its draws' largest class (a merged state may change its class
    as a whole); ``stays``: ``bool[C]``, the probes whose draws are mostly merged (some
    class holds more of the unobserved nodes than the labelled counts make plausible);
    ``posterior_energy`` / ``posterior_spread``: the mean and the standard deviation of the
    posterior draws' energies; ``gap``: ``posterior_energy`` minus the lowest mean energy of
    a probe; ``metastable``: some probe settled more than ``GAP_STANDARD_DEVIATIONS``
    spreads (and ``MIN_GAP_NATS``) below the posterior's draws, merged or not: a chain that
    sampled the model's law would visit those energies."""

    probe_energy: np.ndarray
    probe_share: np.ndarray
    stays: np.ndarray
    posterior_energy: float
    posterior_spread: float
    gap: float
    metastable: bool


def one_class_starts(n_nodes: int, n_classes: int) -> np.ndarray:
    """``int32[C, n]``: start ``c`` puts every node in class ``c``, the labelled ones too
    (soft evidence can be overruled; a sampler's ``init`` puts hard-clamped nodes back at
    their labels)."""
    return np.tile(np.arange(n_classes, dtype=np.int32)[:, None], (1, int(n_nodes)))


def metastability_report(posterior_energy, probe_labels, probe_energy, labels,
                         n_classes: int) -> MetastabilityReport:
    """The probe's verdict (module docstring).

    Args:
      posterior_energy: ``float[chains, draws]`` energies of the posterior's draws.
      probe_labels: ``int[C, draws, n]``, the draws of the chain started from
        :func:`one_class_starts`' start ``c`` (after its burn-in).
      probe_energy: ``float[C, draws]``, their energies.
      labels: ``int[n]``, ``-1`` where unobserved.
      n_classes: ``C``.
    """
    labels = np.asarray(labels)
    draws = np.asarray(probe_labels)[..., labels < 0]  # [C, S, free]
    # one class at a time: a [C, S, free, classes] table would be ~35 MB for 10 classes on
    # 7000 nodes
    n_free = max(draws.shape[2], 1)  # every node observed: no share, nothing merged
    shares = np.stack([np.sum(draws == c, axis=2) / n_free for c in range(n_classes)], axis=-1)
    merged = np.any(shares > plausible_share_limits(labels, n_classes), axis=-1)  # [C, S]
    share = shares.max(axis=-1).mean(axis=1)
    stays = merged.mean(axis=1) > 0.5
    energies = np.asarray(probe_energy, dtype=np.float64).mean(axis=1)
    posterior = np.asarray(posterior_energy, dtype=np.float64)
    mean, spread = float(posterior.mean()), float(posterior.std())
    gap = float(mean - energies.min())
    threshold = max(GAP_STANDARD_DEVIATIONS * spread, MIN_GAP_NATS)
    return MetastabilityReport(energies, share, stays, mean, spread, gap, bool(gap > threshold))
