"""Closed-form graph baselines: harmonic function (GRF), LGC, graph Parzen window, graph kNN.

These are the yardsticks every probabilistic model is compared with. Each function takes a
graph (a :class:`graphssl.graph.Graph` or an ``n x n`` scipy.sparse weight matrix ``W``) and
labels (``int[n]``, ``-1`` for unlabelled; or ``labels`` plus an ``observed`` mask) and
returns per-node class scores ``float64[n, C]`` (rows are probability vectors unless stated).

Unlabelled nodes whose connected component holds no labelled node cannot be reached by any
of these methods. They get a :class:`UnreachedNodesWarning` that names how many nodes and
components are affected, and the **uniform** class distribution ``1 / C`` as their output.

Paper symbols -> arguments:

* Zhu, Ghahramani & Lafferty (2003), harmonic function ``f_U = -L_UU^{-1} L_UL f_L``
  (in Zhu & Lafferty 2005, Sec. 2, with ``Delta = L = D - W``): ``f_L`` = one-hot ``labels``;
  class mass normalisation (CMN): ``q`` = ``class_prior``.
* Zhou et al. (2004), LGC ``F* = (1 - alpha) (I - alpha S)^{-1} Y`` with
  ``S = D^-1/2 W D^-1/2`` and the iteration ``F <- alpha S F + (1 - alpha) Y``
  (Bergamim & Breve Alg. 2.2, Eq. 3-4): ``alpha`` = ``alpha``, ``Y`` (their theta) = one-hot.
* Walder, Sec. 2.4 and Sec. 5: graph Parzen window with heat kernel
  ``K_tau = exp(-tau L / 2)`` (``tau``), diffusion p.m.f.s ``D_tau`` (normalised columns of
  ``K_tau``) and class proportions ``eta`` = ``class_prior``.

Modules: :mod:`~graphssl.inference.optimize.baselines.common` (input checks, unreached nodes, the
:class:`SolveInfo` record), :mod:`~graphssl.inference.optimize.baselines.solvers` (batched PCG,
sparse
LU), :mod:`~graphssl.inference.optimize.baselines.propagation` (GRF, class mass normalisation, LGC),
:mod:`~graphssl.inference.optimize.baselines.end_to_end` (kNN graph + GRF in one XLA program, for an
accelerator), :mod:`~graphssl.inference.optimize.baselines.parzen` (Parzen window) and
:mod:`~graphssl.inference.optimize.baselines.graph_knn` (graph kNN vote). Every public name is
re-exported here.
"""

from graphssl.inference.optimize.baselines.common import (
    SolveInfo,
    UnreachedNodesWarning,
    normalize_scores,
)
from graphssl.inference.optimize.baselines.end_to_end import (
    DeviceSolve,
    harmonic_function_from_features,
    lgc_from_features,
)
from graphssl.inference.optimize.baselines.graph_knn import knn_graph_classifier
from graphssl.inference.optimize.baselines.parzen import parzen_window
from graphssl.inference.optimize.baselines.propagation import (
    class_mass_normalization,
    harmonic_function,
    labelled_class_proportions,
    lgc,
)
from graphssl.inference.optimize.baselines.solvers import batched_pcg

__all__ = [
    "DeviceSolve",
    "harmonic_function_from_features",
    "lgc_from_features",
    "UnreachedNodesWarning",
    "SolveInfo",
    "harmonic_function",
    "class_mass_normalization",
    "labelled_class_proportions",
    "lgc",
    "parzen_window",
    "knn_graph_classifier",
    "normalize_scores",
    "batched_pcg",
]
