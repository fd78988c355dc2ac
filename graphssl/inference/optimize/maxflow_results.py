"""What the max-flow solvers of :mod:`graphssl.inference.optimize.maxflow` return: the cut
and, per solver, a record of how it was found (named tuples, read by attribute)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["CutInfo", "CutResult", "ExpansionInfo", "RelabelInfo", "MincutInfo", "MincutMapInfo"]


class CutInfo(NamedTuple):
    """How a minimum cut was computed. ``method``: the back end that ran (``"pymaxflow"``,
    ``"scipy"`` or ``"networkx"``); ``seconds``: wall-clock seconds of the solve;
    ``cpu_seconds``: CPU seconds of this process over the solve (all three back ends are
    single-threaded, so this is the time on an idle core). Per back end, None elsewhere:
    ``reordered`` (pymaxflow): nodes renumbered in reverse Cuthill-McKee order;
    ``scale`` (scipy): the power of two the capacities were multiplied by before rounding to
    int32 (inf where it exceeds float64: capacities summing below about 1e-299, scaled
    exactly all the same); ``rounding_bound`` (scipy): how far the returned cut may exceed
    the true minimum, in the capacities' units (``m / scale``, m = number of finite arcs)."""

    method: str
    seconds: float
    cpu_seconds: float
    reordered: bool | None = None
    scale: float | None = None
    rounding_bound: float | None = None


class CutResult(NamedTuple):
    """``source_side``: bool[n], example nodes on the ``v+`` side (the smallest such set);
    ``cut_value``: value of that cut in float64 (recomputed from the network);
    ``flow_value``: the solver's max-flow value (back in the input's units);
    ``info``: :class:`CutInfo` (back end, timings, scipy's scale and rounding bound)."""

    source_side: np.ndarray
    cut_value: float
    flow_value: float
    info: CutInfo


class ExpansionInfo(NamedTuple):
    """Alpha-expansion record. ``energy``: Potts energy of the returned labelling,
    ``sum_{i<j} w_ij [y_i != y_j] + sum_i unary[i, y_i]`` (units of the weights, after the
    ``alpha`` scaling); ``sweeps``: sweeps over the classes done; ``moves``: accepted
    expansion moves (each lowered the energy strictly); ``converged``: the last sweep
    accepted none (a local minimum for expansion moves), False when ``max_sweeps`` ran out."""

    energy: float
    sweeps: int
    moves: int
    converged: bool


class RelabelInfo(NamedTuple):
    """Hill-climber record. ``energy``: cut value ``sum_{i<j} w_ij [y_i != y_j]`` of the
    returned labelling (units of the weights); ``sweeps``: sweeps over the unlabelled nodes
    done; ``flips``: single-label flips made (each lowered the cut strictly);
    ``converged``: the last sweep flipped none (a local optimum), False when ``max_sweeps``
    ran out."""

    energy: float
    sweeps: int
    flips: int
    converged: bool


class MincutInfo(NamedTuple):
    """:func:`mincut_classify`'s record. ``energy``: Potts energy (cut value, units of the
    weights after the ``alpha`` scaling) of the returned labelling; ``degenerate_classes``:
    int64[...] classes the cut (nearly) starved of unlabelled nodes
    (:func:`degenerate_classes`); ``cut``: the binary cut's :class:`CutInfo` (two classes,
    else None); ``expansion``: the :class:`ExpansionInfo` (more classes, else None)."""

    energy: float
    degenerate_classes: np.ndarray
    cut: CutInfo | None = None
    expansion: ExpansionInfo | None = None


class MincutMapInfo(NamedTuple):
    """:func:`mincut_map`'s record, with the optimizer protocol's fields (as
    ``MeanFieldInfo`` / ``ICMInfo``). ``iterations``: expansion sweeps done (= ``sweeps``);
    ``residual``: 0.0 (a combinatorial search has no continuous residual); ``converged``: the
    last sweep accepted no move; ``exact``: two classes (one minimum cut is the global MAP);
    ``energy``: ``beta sum_{i<j} w_ij [y_i != y_j]`` plus the unary costs of the solution
    (its ``model.energy`` up to a constant); ``sweeps``, ``moves``: as in
    :class:`ExpansionInfo`."""

    iterations: int
    residual: float
    converged: bool
    exact: bool
    energy: float
    sweeps: int
    moves: int
