"""MAP search for pairwise (Potts-family) label models: the lowest-energy labelling found.

A sampler's lowest-energy draw is a poor mode estimate: at temperature 1 the chains spend
their time at typical energies, far above the mode, so the "best draw" is often just the
starting state (issue 25: Potts Swendsen-Wang's MAP equalled its mean-field start on every
split of breast_cancer and wine). :func:`map_search` takes the lowest energy among

* ``"chains_best"``: the chains' lowest-energy retained draw (or start),
  ``Samples.map_labels``;
* ``"icm_from_chains"``: iterated conditional modes (Besag 1986) from it;
* ``"posterior_mean"``: the posterior-mean labels (per-node argmax of the marginals);
* ``"icm_from_mean"``: ICM from those;
* ``"alpha_expansion"``: alpha-expansion by graph cuts (Boykov, Veksler & Zabih 2001,
  :func:`graphssl.inference.optimize.maxflow.alpha_expansion`), started from the best of the
  above. The energy of law (P) (:mod:`graphssl.models.protocol`),
  ``E(y) = -sum_{i<j} J_ij [y_i = y_j] - sum_i h_i(y_i)``, equals up to a constant
  ``sum_{i<j} J_ij [y_i != y_j] + sum_i (max_c h_i(c) - h_i(y_i))``: a Potts energy with
  non-negative unary costs, whose expansion moves are exact minimum cuts when every
  ``J_ij >= 0`` (a metric pairwise term). For two classes one move from any start is the
  global minimum; for more, a local minimum within a factor 2 of the optimum (Thm 6.1).
  Skipped (reported) when some coupling is negative.

Each candidate's energy is evaluated by ``model.energy`` (the model's own law), so the
returned labelling's energy is at or below that of every candidate, in particular of the
posterior-mean labelling and of every retained draw (the chains' best is at or below each
draw). :func:`map_report` says, when MAP and posterior mean disagree on more than a few
points, whether the chains' best draw was the culprit (the search found lower energy) or the
model's mode itself differs from its posterior mean.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import jax
import numpy as np
import scipy.sparse as sp

from graphssl.models.protocol import pairwise_tables

if TYPE_CHECKING:
    from graphssl.inference.optimize.maxflow import ExpansionInfo

__all__ = ["MapSearchInfo", "MapReport", "map_search", "map_report", "potts_costs"]


class MapSearchInfo(NamedTuple):
    """:func:`map_search`'s record. ``energies``: dict, each candidate's name
    (``"chains_best"``, ``"icm_from_chains"``, ``"posterior_mean"``, ``"icm_from_mean"``,
    ``"alpha_expansion"``) -> its energy under ``model.energy`` (the model's law, lower is
    more probable), side by side; ``best``: the winner's name; ``energy``: its energy
    (``energies[best]``); ``expansion``: the alpha-expansion record
    (:class:`~graphssl.inference.optimize.maxflow.ExpansionInfo`, whose ``energy`` is the
    :func:`potts_costs` energy, ``model.energy`` less the constant), None when not run;
    ``expansion_start``: the candidate it started from (None when not run);
    ``expansion_skipped``: why it was skipped (negative couplings), else None."""

    energies: dict
    best: str
    energy: float
    expansion: ExpansionInfo | None = None
    expansion_start: str | None = None
    expansion_skipped: str | None = None


class MapReport(NamedTuple):
    """:func:`map_report`'s verdict. ``disagreement``: fraction of the compared nodes where
    MAP and posterior-mean labels differ; ``energies``: a copy of
    :attr:`MapSearchInfo.energies`; ``best``: the MAP's candidate name; ``verdict``:
    ``"agree"``, ``"search"``, ``"model"`` or ``"chains"`` (:func:`map_report`);
    ``explanation``: a
    sentence saying why, with the energies."""

    disagreement: float
    energies: dict
    best: str
    verdict: str
    explanation: str


def potts_costs(model):
    """``(W, unary_cost, constant)``: the model's energy as ``sum_{i<j} W_ij [y_i != y_j] +
    sum_i unary_cost[i, y_i] + constant`` (W: symmetric float64 CSR from
    ``pairwise_tables().coupling``; ``unary_cost = max_c h_i(c) - h_i``, >= 0)."""
    t = pairwise_tables(model)
    index = np.asarray(t.neighbor_index)
    coupling = np.asarray(t.coupling, dtype=np.float64)
    n, d = index.shape
    rows = np.repeat(np.arange(n), d)
    cols = index.reshape(-1)
    data = coupling.reshape(-1)
    keep = (rows != cols) & (data != 0)
    W = sp.csr_matrix((data[keep], (rows[keep], cols[keep])), shape=(n, n))
    W = (W + W.T) * 0.5  # each pair stored twice (J_ij = J_ji): exact, removes rounding
    unary = np.asarray(t.unary, dtype=np.float64)
    top = unary.max(axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    cost = top - unary
    constant = -float(W.sum() / 2.0) - float(top.sum())
    return W.tocsr(), cost, constant


@jax.jit
def _energy_program(model, labels):
    return model.energy(labels)


def _energy(model, labels) -> float:
    """``model.energy(labels)`` as a float: one compiled program per model structure where
    the model is a JAX pytree (every model here; its operations, called eagerly, compiled
    one by one: 0.5 s per new data shape on a 2-core CPU), else called as it is."""
    labels = np.asarray(labels, dtype=np.int32)
    leaves = jax.tree_util.tree_leaves(model)
    if leaves and all(isinstance(x, (jax.Array, np.ndarray)) for x in leaves):
        return float(_energy_program(model, labels))
    return float(model.energy(labels))


def map_search(model, *, samples=None, posterior_mean=None, expansion: bool = True,
               icm_max_sweeps: int = 100, max_sweeps: int = 20, method: str = "auto"):
    """Lowest-energy labelling among the chains' best draw, ICM from it, the posterior-mean
    labels, ICM from those and alpha-expansion from the best of them (module docstring).

    Args:
      model: a pairwise label model (``PottsModel``, ``BoltzmannMRF``, ...).
      samples: :class:`~graphssl.inference.mcmc.chains.Samples` (``map_labels`` used), or None.
      posterior_mean: ``int[n]`` posterior-mean labels, or None.
      expansion: run alpha-expansion (needs PyMaxflow or scipy; couplings >= 0).
      icm_max_sweeps, max_sweeps, method: ICM sweeps; expansion sweeps and max-flow back end.
    Returns ``(labels int64[n], MapSearchInfo)``: each candidate's energy under
    ``model.energy`` side by side, the winner's name and energy, and the alpha-expansion
    record (or why it was skipped).
    """
    from graphssl.inference.optimize.icm import iterated_conditional_modes

    starts = {}
    if samples is not None:
        starts["chains_best"] = np.asarray(samples.map_labels, dtype=np.int64)
    if posterior_mean is not None:
        starts["posterior_mean"] = np.asarray(posterior_mean, dtype=np.int64)
    if not starts:
        raise ValueError("map_search: give samples= and/or posterior_mean= (a start is needed)")
    candidates = dict(starts)
    icm_names = {"chains_best": "icm_from_chains", "posterior_mean": "icm_from_mean"}
    for name, start in starts.items():
        refined, _ = iterated_conditional_modes(model, start, max_sweeps=int(icm_max_sweeps))
        candidates[icm_names[name]] = np.asarray(refined, dtype=np.int64)
    energies = {name: _energy(model, y) for name, y in candidates.items()}
    record = start = skipped = None
    if expansion:
        W, cost, _ = potts_costs(model)
        if W.nnz and W.data.min() < 0:
            skipped = "negative couplings: expansion moves not submodular"
        else:
            from graphssl.inference.optimize.maxflow import alpha_expansion

            start = min(energies, key=energies.get)
            observed = np.asarray(model.observed, dtype=bool)
            clamped = np.where(observed, np.asarray(model.labels), -1)
            finite = np.where(np.isfinite(cost), cost, 0.0)
            y, record = alpha_expansion(
                W, clamped, observed, n_classes=int(model.n_classes),
                unary=finite if np.any(finite) else None, init=candidates[start],
                method=method, max_sweeps=int(max_sweeps))
            candidates["alpha_expansion"] = np.asarray(y, dtype=np.int64)
            energies["alpha_expansion"] = _energy(model, y)
    best = min(energies, key=energies.get)
    info = MapSearchInfo(energies, best, energies[best], record, start, skipped)
    return candidates[best], info


def map_report(map_labels, posterior_mean, info, *, free=None, tolerance: float = 0.03,
               converged: bool | None = None):
    """Why MAP and posterior mean differ, energies side by side.

    ``info``: :func:`map_search`'s :class:`MapSearchInfo`; ``free``: bool[n] nodes to
    compare (default all); ``tolerance``: the fraction of disagreeing nodes above which a
    verdict is written. Returns a :class:`MapReport` with ``disagreement`` (fraction),
    ``energies`` (from :func:`map_search`), ``best``, and ``verdict``:
    ``"agree"``; ``"search"`` (the chains' best draw was above the posterior-mean
    labelling's energy: the chains never reported the mode, the search found lower); or
    ``"model"`` (the lowest energy found lies below the posterior-mean labelling's: the
    model's mode is not its posterior mean, as at a low-temperature phase or with weak
    labels), with a sentence in ``explanation``; or ``"chains"`` when ``converged`` is
    False (the fit's convergence report failed): the chains' posterior mean is then not the
    model's, and the disagreement cannot be put on the model or the search (frozen Gibbs
    chains 6.8 nats above the mode read "model" before). ``converged=None``: not known.
    """
    a, b = np.asarray(map_labels), np.asarray(posterior_mean)
    free = np.ones(a.shape, bool) if free is None else np.asarray(free, bool)
    disagreement = float(np.mean(a[free] != b[free])) if free.any() else 0.0
    e = info.energies
    e_map, e_pm = info.energy, e.get("posterior_mean", np.nan)
    e_chain = e.get("chains_best", np.nan)
    if disagreement <= tolerance:
        return MapReport(disagreement, dict(e), info.best, "agree",
                         f"MAP and posterior mean differ on {100 * disagreement:.1f} % of "
                         "the nodes")
    parts = [f"MAP and posterior mean differ on {100 * disagreement:.1f} % of the nodes; ",
             f"energies: MAP ({info.best}) {e_map:.6g}, posterior-mean labels {e_pm:.6g}"]
    if np.isfinite(e_chain):
        parts.append(f", chains' best draw {e_chain:.6g}")
    if converged is False:
        verdict = "chains"
        parts.append(". The chains did not converge (see the fit's convergence report), so "
                     "their posterior mean is not the model's: the disagreement says nothing "
                     "about the model's mode yet; run the chains longer or with another "
                     "kernel (swendsen_wang), or from other starts")
        parts.append(f"; the search's state lies {e_chain - e_map:.3g} below every draw."
                     if np.isfinite(e_chain) and e_map < e_chain else ".")
    elif np.isfinite(e_chain) and e_chain > e_pm:
        verdict = "search"
        parts.append(". The chains' best draw lies above the posterior-mean labelling: the "
                     f"sampler never visited the mode, the search ({info.best}) found it")
        parts.append(", below the posterior-mean labelling too: the model's mode is not its "
                     "posterior mean either." if e_map < e_pm else ".")
    else:
        verdict = "model"
        parts.append(". The lowest energy found lies below the posterior-mean labelling: the "
                     "model's mode is not its posterior mean (the disagreement is the "
                     "model's, not the search's).")
    return MapReport(disagreement, dict(e), info.best, verdict, "".join(parts))
