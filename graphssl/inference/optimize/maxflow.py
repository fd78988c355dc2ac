"""Minimum s-t cuts by max-flow, the mincut classifier, alpha-expansion and a hill-climber.

Blum & Chawla (2001), Sec. 2 step 4: find a minimum ``(v+, v-)`` cut by max-flow with ``v+``
the source and ``v-`` the sink; among several minimum cuts take the one with the smallest
``V+`` -- the nodes reachable from ``v+`` in the residual graph of any maximum flow (that set
is contained in the source side of every minimum cut). Step 5 labels ``V+`` positive.

Three max-flow back ends, same answer (tested against each other and brute force);
``method="auto"`` (default) picks by measurement (:func:`choose_method`):

* ``"pymaxflow"`` (the default on kNN graphs, see ``benchmarks/bench_mincut.py``):
  Boykov-Kolmogorov with float64 capacities, nodes renumbered in reverse Cuthill-McKee order
  for memory locality (N >= 10^4). BK's search trees are maximal when it stops,
  so the tree grown from a terminal is exactly that terminal's residual-reachable set; we
  run BK on the reversed network (``v-`` as source) and read ``V+`` as BK's sink tree, so
  nodes in neither tree (unreachable from ``v+``) go to ``V-`` as step 4 asks.
* ``"scipy"``: ``scipy.sparse.csgraph.maximum_flow`` (Dinic), int32 capacities only.
  Capacities are scaled by the power of two ``s <= 2^30 / T`` (T = sum of finite
  capacities) and rounded; each arc moves by at most ``1 / (2 s)``, so the returned cut
  exceeds the true minimum by at most ``m / s <= m T / 2^29`` (m = number of finite arcs);
  ``CutInfo.rounding_bound`` reports it. Integer (dyadic) weights are scaled exactly.
  (int64 input is *silently* truncated by scipy 1.18; we always pass int32.)
* ``"networkx"``: ``networkx.algorithms.flow.preflow_push`` then a search of the residual
  graph from ``v+`` (``nx.minimum_cut`` itself returns the *largest* source side); pure
  Python, small graphs only.

Multi-class (C > 2): alpha-expansion (Boykov, Veksler & Zabih 2001) on the Potts energy
``sum_{i<j} w_ij [y_i != y_j]`` with clamped labels; each move is one binary cut
(``graphssl.models.mincut.expansion_network``). For C = 2 one expansion from the all-0
labelling is exactly the binary mincut (global optimum); for C > 2 the result is a local
minimum within a factor 2 of the optimum (Boykov et al. Thm 6.1).

:func:`iterative_relabelling` is the Fig. 4 baseline: hill-climbing on the same cut by
single-label flips from a random start, stopping at a local optimum.

Host functions on purpose: max-flow is a sequential augmenting-path / push-relabel search on
a residual graph that changes at every step (no data-parallel form in JAX); the back ends
are C++ (PyMaxflow), Cython (scipy) or Python (networkx). Each call is a pure function of
its inputs (graph, labels, options; the hill-climber's random start from its required
``seed``): nothing is kept between calls.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from graphssl.inference.optimize.maxflow_results import (
    CutInfo,
    CutResult,
    ExpansionInfo,
    MincutInfo,
    MincutMapInfo,
    RelabelInfo,
)
from graphssl.models.mincut import (
    CutNetwork,
    _check_binary,
    as_weight_matrix,
    cut_network,
    expansion_network,
    potts_energy,
    scale_unlabelled_edges,
)
from graphssl.validation import (
    check_count,
    check_label_codes,
    check_same_length,
    check_state_codes,
)

__all__ = [
    "CutInfo",
    "CutResult",
    "ExpansionInfo",
    "RelabelInfo",
    "MincutInfo",
    "MincutMapInfo",
    "METHODS",
    "minimum_cut",
    "choose_method",
    "mincut_labels",
    "alpha_expansion",
    "mincut_classify",
    "degenerate_classes",
    "mincut_map",
    "mincut_networkx",
    "iterative_relabelling",
]

METHODS = ("pymaxflow", "scipy", "networkx")
_INT32_BUDGET = 2**30


def _check_clamped(labels, observed, n: int, n_classes: int | None = None):
    """``(labels int64[n], observed bool[n])``: ``observed`` (default ``labels >= 0``) has one
    entry per node and every observed node a class ``0..C-1`` (below ``n_classes`` when
    given); unobserved entries are ignored (read as ``-1``)."""
    labels = np.asarray(labels)
    check_same_length(n, np.atleast_1d(labels), "labels", against="the graph has {n} nodes")
    observed = labels >= 0 if observed is None else np.asarray(observed, dtype=bool)
    check_same_length(n, np.atleast_1d(observed), "observed",
                      against="the graph has {n} nodes")
    if np.issubdtype(labels.dtype, np.number):
        bad = np.flatnonzero(observed & ~(labels >= 0))
        if bad.size:
            raise ValueError(f"labels: observed node {int(bad[0])} has label "
                             f"{labels[bad[0]].item()!r}; give every observed node a class in "
                             "0..C-1, or set observed to False there")
    codes = check_label_codes(np.where(observed, labels, -1), n, n_classes=n_classes,
                              name="labels", against="the graph has {n} nodes")
    return codes, observed


def _locality_order(net: CutNetwork) -> np.ndarray:
    """Reverse Cuthill-McKee order of the example graph (new position -> old node): BK walks
    neighbour lists, and on kNN graphs of randomly ordered points this halves its cache
    misses (1.4-1.9x less CPU time measured at N = 10^5)."""
    n = net.n_nodes
    A = sp.csr_matrix(
        (np.ones(net.senders.size, dtype=np.int8), (net.senders, net.receivers)), shape=(n, n)
    )
    return np.asarray(csgraph.reverse_cuthill_mckee(A + A.T, symmetric_mode=True))


def _pymaxflow(net: CutNetwork, reorder: bool | None = None):
    import maxflow

    n = net.n_nodes
    reorder = n >= 10_000 if reorder is None else reorder
    order = _locality_order(net) if reorder else np.arange(n)
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    i, j = pos[net.senders], pos[net.receivers]
    arcs = np.argsort(np.minimum(i, j), kind="stable")
    g = maxflow.Graph[float](n, max(int(net.senders.size), 1))
    g.add_nodes(n)
    # reversed network: v- is BK's source, v+ its sink, every arc turned around
    if net.senders.size:
        g.add_edges(
            i[arcs].astype(np.int32),
            j[arcs].astype(np.int32),
            np.ascontiguousarray(net.reverse_capacities[arcs], dtype=np.float64),
            np.ascontiguousarray(net.capacities[arcs], dtype=np.float64),
        )
    nodes = np.arange(n, dtype=np.int32)
    g.add_grid_tedges(
        nodes,
        np.ascontiguousarray(net.sink_capacity[order], dtype=np.float64),
        np.ascontiguousarray(net.source_capacity[order], dtype=np.float64),
    )
    flow = g.maxflow()
    # get_grid_segments is True on BK's sink tree = nodes reachable from v+ (free nodes: False)
    segments = np.asarray(g.get_grid_segments(nodes), dtype=bool)
    return segments[pos], float(flow), {"reordered": bool(reorder)}


def _scipy(net: CutNetwork):
    n = net.n_nodes
    s, t = n, n + 1
    finite = [net.capacities, net.reverse_capacities]
    big = net.terminal_capacity
    finite.append(net.source_capacity[net.source_capacity < big])
    finite.append(net.sink_capacity[net.sink_capacity < big])
    total = float(sum(np.sum(a) for a in finite))
    n_arcs = int(sum(np.count_nonzero(a) for a in finite))
    # a power of two 2^k: dyadic weights (integers, halves, ...) scale exactly, ties stay
    # ties; ldexp keeps it exact where 2^k itself leaves float64 (subnormal weights, total
    # below 2^-993: k > 1023)
    k = _scale_exponent(total)
    with np.errstate(over="ignore"):
        scale = float(np.ldexp(1.0, k))  # inf past 2^1023 (reported only)

    def q(a):
        return np.rint(np.ldexp(np.asarray(a, np.float64), k)).astype(np.int64)

    cap, rcap = q(net.capacities), q(net.reverse_capacities)
    held_src, held_snk = net.source_capacity >= big, net.sink_capacity >= big
    # the terminal arcs of clamped nodes (M) get m_int below; they are not scaled (M 2^k
    # may leave int64, or float64 when k > 1023)
    src = np.where(held_src, -1, q(np.where(held_src, 0.0, net.source_capacity)))
    snk = np.where(held_snk, -1, q(np.where(held_snk, 0.0, net.sink_capacity)))
    m_int = int(cap.sum() + rcap.sum() + src[src > 0].sum() + snk[snk > 0].sum()) + 1
    if m_int >= 2**31:
        raise ValueError("network: too many arcs for int32 max-flow; use method='pymaxflow'")
    src = np.where(src < 0, m_int, src)
    snk = np.where(snk < 0, m_int, snk)
    ids = np.arange(n)
    rows = np.concatenate([net.senders, net.receivers, np.full(n, s), ids])
    cols = np.concatenate([net.receivers, net.senders, ids, np.full(n, t)])
    vals = np.concatenate([cap, rcap, src, snk])
    keep = vals > 0
    C = sp.csr_array(
        (vals[keep].astype(np.int32), (rows[keep], cols[keep])), shape=(n + 2, n + 2)
    )
    C.sum_duplicates()
    result = csgraph.maximum_flow(C, s, t)
    residual = sp.csr_array(C - result.flow)
    residual.data[residual.data < 0] = 0
    residual.eliminate_zeros()
    reach = csgraph.breadth_first_order(residual, s, directed=True, return_predecessors=False)
    side = np.zeros(n + 2, dtype=bool)
    side[reach] = True
    info = {"scale": scale, "rounding_bound": float(np.ldexp(float(n_arcs), -k))}
    return side[:n], float(np.ldexp(float(result.flow_value), -k)), info


def _scale_exponent(total: float) -> int:
    """``k`` with ``2^k`` the largest power of two ``<= 2^30 / total`` (0 when total is 0):
    the scipy back end's int32 scaling, computed from exponents where ``2^30 / total``
    overflows float64."""
    if not total > 0:
        return 0
    ratio = _INT32_BUDGET / total
    if np.isfinite(ratio):
        return int(np.floor(np.log2(ratio)))
    mantissa, exponent = np.frexp(total)  # total = mantissa 2^exponent, mantissa in [0.5, 1)
    return 30 - int(exponent) + (1 if mantissa == 0.5 else 0)


def _networkx(net: CutNetwork):
    import networkx as nx

    g = net.to_networkx()
    residual = nx.algorithms.flow.preflow_push(g, "v+", "v-", capacity="capacity")
    # nx.minimum_cut returns the *largest* source side (complement of the nodes that reach
    # v-); step 4 wants the nodes reachable from v+ through unsaturated arcs.
    open_arcs = nx.DiGraph(
        (u, v) for u, v, d in residual.edges(data=True) if d["capacity"] - d["flow"] > 0
    )
    open_arcs.add_node("v+")
    reachable = nx.descendants(open_arcs, "v+")
    side = np.zeros(net.n_nodes, dtype=bool)
    side[[v for v in reachable if v != "v-"]] = True
    return side, float(residual.graph["flow_value"]), {}


def choose_method(network: CutNetwork) -> str:
    """``"auto"``: scipy's Dinic for integer capacities on dense graphs (mean degree >= 30,
    e.g. the 0/1 Mincut-delta graphs of Table 1: 4-7x faster than BK there, and exact),
    PyMaxflow's BK otherwise (kNN graphs with real weights: 2-5x faster than Dinic, measured
    in ``benchmarks/bench_mincut.py``)."""
    caps = network.capacities
    dense = 2 * caps.size >= 30 * max(network.n_nodes, 1)
    integer = bool(np.all(caps == np.rint(caps)) and caps.sum() < 2**28)
    return "scipy" if dense and integer else "pymaxflow"


def minimum_cut(network: CutNetwork, method: str = "auto") -> CutResult:
    """Minimum ``(v+, v-)`` cut of ``network`` with the smallest ``v+`` side (Sec. 2 step 4).

    ``method``: ``"auto"`` (default, :func:`choose_method`), ``"pymaxflow"``, ``"scipy"`` or
    ``"networkx"``.
    """
    solvers = {"pymaxflow": _pymaxflow, "scipy": _scipy, "networkx": _networkx}
    if method == "auto":
        method = choose_method(network)
    if method not in solvers:
        raise ValueError(
            f"method: unknown max-flow method {method!r}; use 'auto' or one of {METHODS}"
        )
    start, cpu = time.perf_counter(), time.process_time()
    side, flow, info = solvers[method](network)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    info = CutInfo(method, seconds, cpu_seconds, **info)
    return CutResult(side, network.cut_value(side), flow + network.constant, info)


def mincut_labels(graph, labels, observed=None, *, alpha: float = 1.0, method="auto"):
    """Binary Graph Mincut (Sec. 2): ``labels`` 1 / 0 on observed nodes -> full labelling.

    Returns ``(labels int64[n], CutResult)``; unlabelled nodes on the ``v+`` side get 1.
    """
    net = cut_network(graph, labels, observed, alpha=alpha)
    result = minimum_cut(net, method)
    labels = np.asarray(labels)
    observed = labels >= 0 if observed is None else np.asarray(observed, dtype=bool)
    out = np.where(observed, labels, result.source_side.astype(np.int64))
    return out.astype(np.int64), result


def alpha_expansion(
    graph,
    labels,
    observed=None,
    *,
    n_classes: int | None = None,
    unary=None,
    init=None,
    alpha: float = 1.0,
    method: str = "auto",
    max_sweeps: int = 20,
):
    """Alpha-expansion for the clamped Potts energy (multi-class mincut).

    Each sweep tries every class as ``alpha_label`` and accepts a move when it lowers the
    energy strictly. Starts from ``init`` (default: clamped labels, 0 elsewhere).
    Returns ``(labels int64[n], ExpansionInfo)``.
    """
    W = as_weight_matrix(graph)
    n = W.shape[0]
    if n_classes is not None:
        n_classes = check_count(n_classes, "n_classes", least=1)
    labels, observed = _check_clamped(labels, observed, n, n_classes)
    if n_classes is None and not observed.any():
        raise ValueError("n_classes: no node is observed, so the number of classes cannot be "
                         "read from labels; pass n_classes or observe at least one node")
    W = scale_unlabelled_edges(W, observed, alpha)
    C = int(n_classes if n_classes is not None else labels[observed].max() + 1)
    unary = _check_unary(unary, n, C)
    f = np.where(observed, labels, 0) if init is None else np.asarray(init).copy()
    f = np.where(observed, labels, f)
    if init is not None:
        check_state_codes(f, n, C, "init", "start label")
    f = f.astype(np.int64)
    energy = potts_energy(W, f, unary)
    # a move must lower the energy by more than rounding: 1e-12 of |energy|, at least of
    # the problem's scale (1 for weights of order 1 or more; tiny weights, 1e-300, keep their
    # own scale, else no move was ever accepted)
    size = float(W.sum()) + (float(np.abs(unary).sum()) if unary is not None else 0.0)
    floor = min(1.0, size) if size > 0 else 1.0
    moves, converged, sweeps = 0, False, 0
    while sweeps < max_sweeps:
        sweeps += 1
        improved = False
        for a in range(C):
            result = minimum_cut(expansion_network(W, f, observed, a, unary), method)
            candidate = np.where(result.source_side, a, f)
            new = potts_energy(W, candidate, unary)
            if new < energy - 1e-12 * max(abs(energy), floor):
                f, energy, improved, moves = candidate, new, True, moves + 1
        if not improved:
            converged = True
            break
    return f, ExpansionInfo(energy, sweeps, moves, converged)


def _check_unary(unary, n: int, n_classes: int):
    """``unary`` costs as float64 ``[n, C]`` (None stays None): finite, one row per node and
    one column per class; a NaN cost made every move's energy NaN, so none was accepted and
    the start came back as "converged"."""
    if unary is None:
        return None
    unary = np.asarray(unary, dtype=np.float64)
    if unary.ndim != 2 or unary.shape[0] != n or unary.shape[1] < n_classes:
        raise ValueError(f"unary: expected costs float[{n}, {n_classes}] (one row per node, "
                         f"one column per class), got shape {unary.shape}")
    if not np.all(np.isfinite(unary)):
        rows = np.flatnonzero(~np.all(np.isfinite(unary), axis=1))
        raise ValueError(f"unary: {rows.size} rows hold NaN or inf costs (first: node "
                         f"{int(rows[0])}); give finite costs (a large finite cost forbids a "
                         "class)")
    return unary


def degenerate_classes(labels, observed, out, *, ratio: float = 0.1) -> np.ndarray:
    """Classes whose share of the unlabelled nodes in the cut is below ``ratio`` times their
    share of the labelled nodes: the minimum cut (nearly) only cuts their labelled nodes off
    (a degenerate cut; Joachims 2003, Sec. 3, on mincut's preference for unbalanced cuts).
    It happens when the edges around the labelled nodes weigh less than any cut between the
    classes' regions: on CiteSeer's cosine kNN graph all 3207 unlabelled nodes went to one
    class (cut 307 against 2073 for the harmonic function's labelling); on standardised
    breast_cancer (10 labels a class, k = 10) 546 of 549 to one class on 2 of 3 splits
    (cut 4.4 against 6.0). It is the model's minimum, not a search failure."""
    labels, out = np.asarray(labels), np.asarray(out)
    observed = np.asarray(observed, dtype=bool)
    if observed.all() or not observed.any():
        return np.zeros(0, dtype=np.int64)
    C = int(max(labels[observed].max(), out.max())) + 1
    lab_share = np.bincount(labels[observed], minlength=C) / observed.sum()
    unl_share = np.bincount(out[~observed], minlength=C) / (~observed).sum()
    return np.flatnonzero((lab_share > 0) & (unl_share < ratio * lab_share)).astype(np.int64)


def mincut_classify(graph, labels, observed=None, *, alpha=1.0, method="auto"):
    """Mincut labelling for any number of classes: the binary cut of Sec. 2 when the
    observed labels are {0, 1}, alpha-expansion otherwise (multi-class; Blum & Chawla is
    binary). Returns ``(labels, MincutInfo)``; ``degenerate_classes``: see
    :func:`degenerate_classes`."""
    labels, observed = _check_clamped(labels, observed, np.size(labels))
    if labels.size == 0:
        raise ValueError("graph: has no nodes; give a graph with at least one node")
    if not observed.any():
        raise ValueError("labels: no node is observed, so no cut separates classes (every "
                         "labelling costs 0); observe at least one node of each class")
    if np.all(np.isin(labels[observed], (0, 1))):
        out, result = mincut_labels(graph, labels, observed, alpha=alpha, method=method)
        energy, cut, expansion = result.cut_value, result.info, None
    else:
        out, expansion = alpha_expansion(graph, labels, observed, alpha=alpha, method=method)
        energy, cut = expansion.energy, None
    return out, MincutInfo(energy, degenerate_classes(labels, observed, out), cut, expansion)


def mincut_map(model, init=None, options=None):
    """Optimizer protocol ``(model, init, options) -> (solution, info)``: exact MAP of a
    clamped Potts model (``graphssl.models.potts.PottsModel``) with two classes by one
    minimum cut, alpha-expansion (local, factor-2) for more. The field enters as unary
    costs ``-beta theta``; ``options`` may hold ``method`` and ``max_sweeps``. Returns
    ``(labels int64[n], MincutMapInfo)``.
    """
    options = dict(options or {})
    W = model.graph.to_scipy() * float(model.beta)
    observed = np.asarray(model.observed, dtype=bool)
    labels = np.where(observed, np.asarray(model.labels), -1)
    unary = -float(model.beta) * np.asarray(model.field, dtype=np.float64)
    if not np.all(np.isfinite(unary)):
        raise ValueError("model.field: beta * field must be finite (found NaN or inf); remove "
                         "NaN or inf from the model's field and beta, or lower beta")
    unary = unary - unary.min(axis=1, keepdims=True)
    f, info = alpha_expansion(
        W,
        labels,
        observed,
        n_classes=model.n_classes,
        unary=unary if np.any(unary) else None,
        init=init,
        method=options.get("method", "auto"),
        max_sweeps=options.get("max_sweeps", 20),
    )
    return f, MincutMapInfo(
        iterations=info.sweeps,
        residual=0.0,
        converged=info.converged,
        exact=model.n_classes == 2,
        energy=info.energy,
        sweeps=info.sweeps,
        moves=info.moves,
    )


def mincut_networkx(g, *, label: str = "label", weight: str = "weight", **kwargs):
    """Mincut on a networkx graph: nodes carry ``label`` (0..C-1, or absent / -1 for
    unlabelled); returns a copy whose nodes carry ``"mincut_label"``, with the cut value
    in ``graph.graph["cut_value"]``."""
    import networkx as nx

    nodes = list(g.nodes)
    W = nx.to_scipy_sparse_array(g, nodelist=nodes, weight=weight, format="csr")
    y = np.array([g.nodes[v].get(label, -1) for v in nodes], dtype=np.int64)
    out, info = mincut_classify(W, y, y >= 0, **kwargs)
    h = g.copy()
    nx.set_node_attributes(h, {v: int(c) for v, c in zip(nodes, out, strict=True)}, "mincut_label")
    h.graph["cut_value"] = info.energy
    return h


def iterative_relabelling(graph, labels, observed=None, *, seed, max_sweeps: int = 1000):
    """Fig. 4 baseline: random labelling of U (``seed``, required), then single flips while
    the cut drops.

    Sweeps visit the unlabelled nodes in a random order and flip a node when its weight to
    the other class exceeds its weight to its own class (a strict decrease of the cut).
    Stops at a local optimum (no improving flip). Returns ``(labels, RelabelInfo)``.
    """
    W = as_weight_matrix(graph)
    labels, observed = _check_clamped(labels, observed, W.shape[0])
    labels, observed = _check_binary(labels, observed, W.shape[0])
    rng = np.random.default_rng(seed)
    f = np.where(observed, labels, rng.integers(0, 2, labels.size)).astype(np.int64)
    sign = np.where(f == 1, 1.0, -1.0)
    field = np.asarray(W @ sign).ravel()  # sum_u w(x, u) f(u)
    indptr, indices, data = W.indptr, W.indices, W.data
    free = np.flatnonzero(~observed)
    flips, converged, sweeps = 0, False, 0
    while sweeps < max_sweeps:
        sweeps += 1
        changed = 0
        for x in rng.permutation(free):
            if sign[x] * field[x] < 0:  # disagrees with its weighted vote: flipping lowers cut
                sign[x] = -sign[x]
                lo, hi = indptr[x], indptr[x + 1]
                field[indices[lo:hi]] += 2.0 * sign[x] * data[lo:hi]
                changed += 1
        flips += changed
        if changed == 0:
            converged = True
            break
    f = np.where(sign > 0, 1, 0)
    return f, RelabelInfo(potts_energy(W, f), sweeps, flips, converged)
