"""Similarity graphs as JAX pytrees: builders, weight schemes, Laplacians, conversions.

A :class:`Graph` is an edge list ``(senders, receivers, weights)`` over ``n_nodes`` nodes.
Undirected graphs store both directions of every edge, sorted by ``(senders, receivers)``,
without self-loops, so memory is O(n k) for a k-nearest-neighbour graph.

Weight schemes (all return ``w_ij`` from distances ``d_ij``):

* Gaussian ``exp(-d^2 / (2 sigma^2))`` (Bergamim & Breve Eq. 6), ``sigma`` given, or
  ``sigma = (1 / 3N) sum_i d_{i,k(i)}`` (Bergamim & Breve Eq. 7, ``sigma="kth_over_3"``);
* Walder's ``exp(-omega d^2)`` with ``omega = 1 / mean squared pairwise distance``
  (``sigma="walder"``; Walder Sec. 2 and Sec. 5 — the paper's "omega set to the mean squared
  distance" read as the inverse, so that the exponent is scale-free);
* cosine ``exp(-(1 - cos(x_i, x_j)) / t)`` for text (``weight="cosine"``);
* per-dimension length scales ``exp(alpha_0 - sum_d (x_i^d - x_j^d)^2 / exp(alpha_d))``
  (Zhu & Ghahramani Eq. 39, :func:`length_scale_weights`).

The module is a package of five parts, all re-exported here (``from graphssl.graph import
knn_graph`` keeps working): :mod:`.core` (the :class:`Graph` pytree), :mod:`.inputs`
(:func:`as_graph`), :mod:`.weights` (the schemes above), :mod:`.builders` (kNN, epsilon and
dense graphs) and :mod:`.operators` (symmetrisation, Laplacians, heat kernel, components,
propagation). Imports run one way: ``core`` and ``weights`` import no other part,
``operators`` none at run time, ``inputs`` and ``builders`` import those three.
"""

from graphssl.graph.builders import dense_graph, epsilon_graph, knn_graph
from graphssl.graph.core import Graph
from graphssl.graph.inputs import DirectedGraphWarning, GraphWeightsRescaledWarning, as_graph
from graphssl.graph.operators import (
    connected_components,
    heat_kernel,
    laplacian,
    laplacian_eigh,
    propagate,
    row_normalize,
    symmetrize,
    unreached_nodes,
)
from graphssl.graph.weights import (
    GraphWeightsUnderflowWarning,
    gaussian_weights,
    length_scale_weights,
    local_gaussian_weights,
    local_widths,
    sigma_kth_neighbor,
    walder_omega,
)
from graphssl.neighbors import knn_search

__all__ = [
    "Graph",
    "as_graph",
    "DirectedGraphWarning",
    "GraphWeightsRescaledWarning",
    "GraphWeightsUnderflowWarning",
    "unreached_nodes",
    "knn_search",
    "knn_graph",
    "local_widths",
    "local_gaussian_weights",
    "epsilon_graph",
    "dense_graph",
    "gaussian_weights",
    "sigma_kth_neighbor",
    "walder_omega",
    "length_scale_weights",
    "symmetrize",
    "row_normalize",
    "laplacian",
    "heat_kernel",
    "laplacian_eigh",
    "connected_components",
    "propagate",
]
