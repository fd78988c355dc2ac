"""Naive mean field (Bergamim & Breve Eqs. 15-20, Alg. 3.1) on small enumerable graphs."""

import jax
import numpy as np
import pytest
import scipy.sparse as sp

jax.config.update("jax_enable_x64", True)

from graphssl.graph import Graph, row_normalize  # noqa: E402
from graphssl.inference.exact.enumeration import exact_marginals  # noqa: E402
from graphssl.inference.optimize.mean_field import (  # noqa: E402
    MeanFieldOptions,
    mean_field_labels,
    mean_field_residual,
    naive_mean_field,
)
from graphssl.models.potts import PottsModel, label_field  # noqa: E402

N, Q = 8, 3
TIGHT = 1e-12
SEQ = MeanFieldOptions(order="sequential", tol=TIGHT, max_iter=5000)  # engine auto: NumPy
SEQ_COMPILED = SEQ._replace(engine="compiled")
PAR = MeanFieldOptions(order="parallel", damping=0.5, tol=TIGHT, max_iter=5000)  # one compile
CHROM = MeanFieldOptions(order="chromatic", tol=TIGHT, max_iter=5000)  # engine auto: NumPy
CHROM_COMPILED = CHROM._replace(engine="compiled")


def _random_weights(seed=0, n=N, density=0.6):
    rng = np.random.default_rng(seed)
    W = rng.uniform(0.2, 1.0, (n, n)) * (rng.uniform(size=(n, n)) < density)
    W = np.triu(W, 1)
    W = W + W.T
    # make sure the graph is connected: add a ring
    for i in range(n):
        j = (i + 1) % n
        W[i, j] = W[j, i] = max(W[i, j], 0.5)
    return W


@pytest.fixture(scope="module")
def sym_graph():
    return Graph.from_scipy(sp.csr_matrix(_random_weights(0)))


@pytest.fixture(scope="module")
def labels():
    lab = np.full(N, -1)
    lab[0], lab[3], lab[6] = 0, 1, 2
    return lab


def _reference_rhs(W, beta, theta, phi):
    """Eqs. 15-16 in plain NumPy float64: softmax(beta (theta + W phi))."""
    h = beta * (theta + W @ phi)
    h = h - h.max(axis=1, keepdims=True)
    e = np.exp(h)
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("options", [SEQ, SEQ_COMPILED, PAR, CHROM, CHROM_COMPILED],
                         ids=["sequential", "sequential_compiled", "parallel", "chromatic",
                              "chromatic_compiled"])
@pytest.mark.parametrize("beta", [0.5, 3.0])
def test_fixed_point_of_eqs_15_16(sym_graph, labels, options, beta):
    model = PottsModel.from_labels(sym_graph, labels, Q, beta=beta)
    sol, info = naive_mean_field(model, options=options)
    assert bool(info.converged) and int(info.iterations) < options.max_iter
    phi = np.asarray(sol.marginals)
    assert phi.dtype == np.float64
    W = sym_graph.to_scipy().toarray()
    ref = _reference_rhs(W, beta, label_field(labels, Q), phi)
    assert np.max(np.abs(ref - phi)) < 1e-6
    assert float(mean_field_residual(model, sol.marginals)) < 1e-6
    np.testing.assert_allclose(phi.sum(1), 1.0, atol=1e-12)
    np.testing.assert_allclose(np.exp(sol.log_marginals), phi, atol=1e-12)


def test_directed_row_normalised_graph_uses_out_edges(sym_graph, labels):
    """On the paper's row-normalised W (Eq. 9) the sum of Eq. 16 runs over W_ij, row i."""
    graph = row_normalize(sym_graph)
    assert not graph.is_symmetric()
    model = PottsModel.from_labels(graph, labels, Q, beta=4.0)
    sol, _ = naive_mean_field(model, options=SEQ)
    P = graph.to_scipy().toarray()
    np.testing.assert_allclose(P.sum(1), 1.0)
    ref = _reference_rhs(P, 4.0, label_field(labels, Q), np.asarray(sol.marginals))
    assert np.max(np.abs(ref - np.asarray(sol.marginals))) < 1e-6
    # the sampling law of the model is the symmetrised one; couplings="symmetric" solves it
    assert model.graph.is_symmetric()
    sym, _ = naive_mean_field(model, options=SEQ, couplings="symmetric")
    ref = _reference_rhs((P + P.T) / 2, 4.0, label_field(labels, Q), np.asarray(sym.marginals))
    assert np.max(np.abs(ref - np.asarray(sym.marginals))) < 1e-6
    assert np.max(np.abs(np.asarray(sym.marginals) - np.asarray(sol.marginals))) > 1e-3
    with pytest.raises(ValueError, match="couplings"):
        naive_mean_field(model, options=SEQ, couplings="both")


@pytest.mark.parametrize("beta", [0.3, 2.0, 8.0])
def test_sequential_and_parallel_agree(sym_graph, labels, beta):
    model = PottsModel.from_labels(row_normalize(sym_graph), labels, Q, beta=beta)
    seq, _ = naive_mean_field(model, options=SEQ)
    par, _ = naive_mean_field(model, options=PAR)
    undamped, _ = naive_mean_field(model, options=PAR._replace(damping=1.0))
    np.testing.assert_allclose(seq.marginals, par.marginals, atol=1e-8)
    if beta < 5:  # the undamped synchronous map is a contraction only at small beta
        np.testing.assert_allclose(seq.marginals, undamped.marginals, atol=1e-8)


def test_weak_coupling_matches_enumeration(sym_graph, labels):
    """At small beta naive mean field is exact up to its (TAP) correction, which vanishes
    faster than linearly in beta: compare with enumerating 3^8 states."""
    errors = []
    for beta in (0.05, 0.1):
        model = PottsModel.from_labels(sym_graph, labels, Q, beta=beta)
        sol, _ = naive_mean_field(model, options=SEQ)
        exact = np.asarray(exact_marginals(model))
        errors.append(np.max(np.abs(exact - np.asarray(sol.marginals))))
    assert errors[0] < 1e-4
    assert errors[1] / errors[0] > 3.0  # at least quadratic in beta (8x observed: cubic)


def test_hard_clamped_nodes_keep_one_hot_marginals(sym_graph, labels):
    model = PottsModel.from_labels(sym_graph, labels, Q, beta=5.0, clamp=True)
    for options in (SEQ, PAR):
        sol, info = naive_mean_field(model, options=options)
        assert bool(info.converged)
        phi = np.asarray(sol.marginals)
        idx = np.flatnonzero(labels >= 0)
        np.testing.assert_array_equal(phi[idx], np.eye(Q)[labels[idx]])
        assert np.all(np.asarray(sol.log_marginals)[idx, labels[idx]] == 0.0)
        assert float(mean_field_residual(model, sol.marginals)) < 1e-6


@pytest.mark.parametrize("beta", [0.1, 1.0, 10.0, 100.0, 1000.0])
def test_field_labels_cannot_flip_eqs_18_20(beta):
    """A labelled node whose neighbours all hold another label keeps its own (Eqs. 18-20).

    Star: centre 0 labelled 0, leaves 1..4 labelled 1 (and 5..7 unlabelled), row-normalised.
    """
    W = np.zeros((N, N))
    for j in range(1, N):
        W[0, j] = W[j, 0] = 1.0
    for j in range(5, N - 1):
        W[j, j + 1] = W[j + 1, j] = 1.0
    graph = row_normalize(Graph.from_scipy(sp.csr_matrix(W)))
    lab = np.array([0, 1, 1, 1, 1, -1, -1, -1])
    model = PottsModel.from_labels(graph, lab, 2, beta=beta)
    for options in (SEQ._replace(tol=1e-9), PAR._replace(tol=1e-9)):
        sol, _ = naive_mean_field(model, options=options)
        h = np.asarray(sol.fields)
        assert np.all(np.isfinite(h))
        # Eqs. 18-19: h_m(y_m) >= h_m(s) (up to rounding of the row sums)
        margin = h[np.arange(5), lab[:5]] - h[:5].max(1)
        assert np.all(margin >= -1e-12 * beta)
        pred = np.asarray(mean_field_labels(sol, model.unary_logits()))
        np.testing.assert_array_equal(pred[:5], lab[:5])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_no_nan_at_beta_1e3(sym_graph, labels, dtype):
    graph = row_normalize(sym_graph)
    graph = Graph(graph.senders, graph.receivers, graph.weights.astype(dtype), graph.n_nodes)
    model = PottsModel.from_labels(graph, labels, Q, beta=1e3)
    for options in (SEQ._replace(tol=1e-3), PAR._replace(damping=1.0, tol=1e-3)):
        sol, info = naive_mean_field(model, options=options)
        for arr in (sol.marginals, sol.fields, info.residual):
            assert np.all(np.isfinite(np.asarray(arr)))
        assert np.all(np.asarray(sol.log_marginals) <= 0)
        pred = np.asarray(mean_field_labels(sol, model.unary_logits()))
        np.testing.assert_array_equal(pred[labels >= 0], labels[labels >= 0])


def test_info_reports_non_convergence(sym_graph, labels):
    model = PottsModel.from_labels(sym_graph, labels, Q, beta=2.0)
    _, info = naive_mean_field(model, options=MeanFieldOptions(max_iter=2, tol=1e-12))
    assert int(info.iterations) == 2 and not bool(info.converged)
    assert float(info.residual) > 1e-12


def test_warm_start_from_solution(sym_graph, labels):
    model = PottsModel.from_labels(sym_graph, labels, Q, beta=2.0)
    sol, _ = naive_mean_field(model, options=SEQ)
    again, info = naive_mean_field(model, init=sol, options=SEQ)
    assert int(info.iterations) <= 2
    np.testing.assert_allclose(again.marginals, sol.marginals, atol=1e-10)


@pytest.mark.parametrize(
    "options, word",
    [(MeanFieldOptions(order="random"), "order"), (MeanFieldOptions(damping=0.0), "damping"),
     (MeanFieldOptions(tol=0.0), "tol"), (MeanFieldOptions(max_iter=0), "max_iter")],
)
def test_bad_options_raise(sym_graph, labels, options, word):
    model = PottsModel.from_labels(sym_graph, labels, Q)
    with pytest.raises(ValueError, match=word):
        naive_mean_field(model, options=options)


@pytest.mark.parametrize("clamp", [False, True])
def test_locality_reorder_gives_the_same_solution(sym_graph, labels, clamp):
    """options.reorder renumbers nodes (reverse Cuthill-McKee) and back: the parallel update
    computes the same numbers; the sequential one reaches the same fixed point."""
    from graphssl.inference.optimize.mean_field import locality_order

    model = PottsModel.from_labels(row_normalize(sym_graph), labels, Q, beta=3.0, clamp=clamp)
    perm = locality_order(model.pairwise_tables().neighbor_index)
    assert sorted(perm.tolist()) == list(range(N)) and perm.tolist() != list(range(N))
    init = np.random.default_rng(1).normal(size=(N, Q))
    plain, info = naive_mean_field(model, init=init, options=PAR)
    moved, info_moved = naive_mean_field(model, init=init, options=PAR._replace(reorder=True))
    assert bool(info_moved.converged)
    assert int(info_moved.iterations) == int(info.iterations)
    np.testing.assert_allclose(moved.marginals, plain.marginals, atol=1e-12)
    np.testing.assert_allclose(moved.fields, plain.fields, atol=1e-10)
    with pytest.raises(ValueError, match="reorder"):
        naive_mean_field(model, options=SEQ._replace(reorder=True))



@pytest.mark.parametrize("engine", ["host", "compiled"])
@pytest.mark.parametrize("directed", [False, True])
def test_chromatic_sweep_is_a_sequential_sweep_in_class_order(sym_graph, labels, directed,
                                                              engine):
    """One chromatic sweep updates each colour class at once; since no node of a class reads
    another, that equals the node-by-node Gauss-Seidel sweep visiting the nodes class by
    class. Checked sweep by sweep against the sequential solver run on the nodes renumbered
    into that order, for both engines (NumPy, compiled JAX)."""
    from graphssl.inference.optimize.mean_field import (
        mean_field_coloring,
        mean_field_tables,
        solve_mean_field,
    )

    graph = row_normalize(sym_graph) if directed else sym_graph
    model = PottsModel.from_labels(graph, labels, Q, beta=2.5, asymmetric="symmetrize")
    unary, index, weight = mean_field_tables(model)
    colors = mean_field_coloring(index)
    idx = np.asarray(index)
    rows = np.repeat(np.arange(N), idx.shape[1])
    assert not np.any((colors[rows] == colors[idx.ravel()]) & (rows != idx.ravel()))
    perm = np.argsort(colors, kind="stable")  # class by class, nodes ascending in a class
    rank = np.empty_like(perm)
    rank[perm] = np.arange(N)
    unary = np.asarray(unary)
    observed, clamp = np.asarray(model.observed), np.asarray(model.labels)
    for sweeps in (1, 2, 5):
        opts = dict(tol=1e-300, max_iter=sweeps)
        chrom, _ = solve_mean_field(unary, index, weight, observed, clamp,
                                    options=MeanFieldOptions("chromatic", engine=engine,
                                                             **opts),
                                    colors=colors)
        assert isinstance(chrom.fields, np.ndarray) == (engine == "host")
        seq, _ = solve_mean_field(unary[perm], rank[idx[perm]], np.asarray(weight)[perm],
                                  observed[perm], clamp[perm],
                                  options=MeanFieldOptions("sequential", engine="compiled",
                                                           **opts))
        np.testing.assert_allclose(np.asarray(chrom.fields)[perm], np.asarray(seq.fields),
                                   atol=1e-12)


@pytest.mark.parametrize("options", [CHROM, CHROM_COMPILED], ids=["host", "compiled"])
def test_chromatic_rejects_an_improper_colouring(sym_graph, labels, options):
    model = PottsModel.from_labels(sym_graph, labels, Q, beta=1.0)
    with pytest.raises(ValueError, match="colors"):
        naive_mean_field(model, options=options, colors=np.zeros(N, int))
    with pytest.raises(ValueError, match="colors"):
        naive_mean_field(model, options=options, colors=np.zeros(N - 1, int))


@pytest.mark.parametrize("directed", [False, True])
def test_host_sequential_sweep_is_the_node_loop(directed):
    """The NumPy sequential sweep updates the nodes level by level (``sequential_levels``:
    a node comes after every neighbour of lower index and before every neighbour of higher
    index), which is the compiled node loop exactly: checked sweep by sweep (float64,
    1e-12) on a 40-node graph. A broken copy -- every node in one stage (the Jacobi update)
    -- fails the same comparison."""
    from graphssl.inference.optimize.mean_field import mean_field_tables, solve_mean_field
    from graphssl.inference.optimize.mean_field_host import (
        sequential_levels,
        solve_gauss_seidel_host,
    )

    n = 40
    graph = Graph.from_scipy(sp.csr_matrix(_random_weights(3, n=n, density=0.15)))
    graph = row_normalize(graph) if directed else graph
    lab = np.full(n, -1)
    lab[[0, 13, 27]] = [0, 1, 2]
    model = PottsModel.from_labels(graph, lab, Q, beta=3.0, asymmetric="symmetrize")
    unary, index, weight = (np.asarray(a) for a in mean_field_tables(model))
    level = sequential_levels(index)
    rows = np.repeat(np.arange(n), index.shape[1])
    cols = index.ravel()
    edge = rows != cols
    later = np.maximum(rows, cols)[edge]
    earlier = np.minimum(rows, cols)[edge]
    assert np.all(level[later] > level[earlier]) and level.max() > 0
    observed, clamp = np.asarray(model.observed), np.asarray(model.labels)
    for sweeps in (1, 2, 5):
        opts = dict(tol=1e-300, max_iter=sweeps)
        host, _ = solve_mean_field(unary, index, weight, observed, clamp,
                                   options=MeanFieldOptions("sequential", **opts))
        loop, _ = solve_mean_field(unary, index, weight, observed, clamp,
                                   options=MeanFieldOptions("sequential", engine="compiled",
                                                            **opts))
        assert isinstance(host.fields, np.ndarray) and isinstance(loop.fields, jax.Array)
        np.testing.assert_allclose(host.fields, loop.fields, atol=1e-12)
    onehot = np.eye(Q)[clamp]
    jacobi, _, _ = solve_gauss_seidel_host(unary, index, weight, observed, onehot,
                                           np.zeros((n, Q)), [np.arange(n)], 1e-300, 2)
    assert np.max(np.abs(jacobi - np.asarray(loop.fields))) > 1e-3


@pytest.mark.parametrize("order", ["sequential", "chromatic"])
def test_host_and_compiled_engines_agree(sym_graph, labels, order):
    """engine="auto" runs the Gauss-Seidel orders in NumPy on a small concrete model and
    compiled otherwise: same fields (float64, 1e-12), same sweep count and residual; a host
    graph's model stays in NumPy throughout. Bad engine choices are refused by name."""
    graph = row_normalize(sym_graph)
    model = PottsModel.from_labels(graph, labels, Q, beta=3.0, asymmetric="symmetrize")
    options = MeanFieldOptions(order, tol=1e-9)
    host, host_info = naive_mean_field(model, options=options)
    compiled, info = naive_mean_field(model, options=options._replace(engine="compiled"))
    # a model on a device gets its solution on the device, from either engine
    assert isinstance(host.fields, jax.Array) and isinstance(compiled.fields, jax.Array)
    np.testing.assert_allclose(host.fields, compiled.fields, atol=1e-12)
    np.testing.assert_allclose(host.log_marginals, compiled.log_marginals, atol=1e-12)
    assert int(host_info.iterations) == int(info.iterations)
    np.testing.assert_allclose(float(host_info.residual), float(info.residual), rtol=1e-6)
    assert bool(host_info.converged)
    # a host graph (NumPy fields) keeps the model, tables and solution on the host
    on_host = Graph.from_scipy(graph.to_scipy(), on_host=True)
    host_model = PottsModel.from_labels(on_host, labels, Q, beta=3.0, asymmetric="symmetrize")
    assert all(isinstance(a, np.ndarray) for a in jax.tree_util.tree_leaves(host_model))
    again, again_info = naive_mean_field(host_model, options=options)
    assert isinstance(again.fields, np.ndarray) and isinstance(again_info.residual, np.ndarray)
    np.testing.assert_allclose(again.fields, host.fields, atol=1e-12)
    assert isinstance(mean_field_labels(again, host_model.unary_logits()), np.ndarray)


def test_engine_choices_are_checked(sym_graph, labels):
    model = PottsModel.from_labels(sym_graph, labels, Q, beta=1.0)
    with pytest.raises(ValueError, match="engine must be one of"):
        naive_mean_field(model, options=SEQ._replace(engine="gpu"))
    with pytest.raises(ValueError, match="Gauss-Seidel orders"):
        naive_mean_field(model, options=PAR._replace(engine="host"))
    # inside jit the arrays are traced: the host engine is refused by name, "auto" compiles
    with pytest.raises(ValueError, match="engine='host' needs concrete"):
        jax.jit(lambda m: naive_mean_field(m, options=SEQ._replace(engine="host"))[0])(model)
    traced = jax.jit(lambda m: naive_mean_field(m, options=SEQ)[0].fields)(model)
    plain, _ = naive_mean_field(model, options=SEQ)
    np.testing.assert_allclose(traced, plain.fields, atol=1e-10)


def test_an_order_with_many_levels_is_compiled_under_auto():
    """A path graph numbered along the path has one node per level (150 stages): engine
    "auto" then runs the compiled node loop (its level count stops at HOST_MAX_STAGES);
    engine "host" still runs it, with the same fields after 20 sweeps."""
    from graphssl.inference.optimize.mean_field_host import HOST_MAX_STAGES, sequential_levels

    n = 150
    path = sp.diags([np.ones(n - 1), np.ones(n - 1)], [-1, 1], shape=(n, n))
    lab = np.full(n, -1)
    lab[[0, n - 1]] = [0, 1]
    model = PottsModel.from_labels(Graph.from_scipy(path), lab, 2, beta=2.0)
    index = np.asarray(model.neighbor_index)
    assert sequential_levels(index).max() == n - 1
    assert sequential_levels(index, HOST_MAX_STAGES) is None
    from graphssl.inference.optimize.mean_field import mean_field_tables, solve_mean_field

    options = MeanFieldOptions("sequential", tol=1e-300, max_iter=20)
    tables = [np.asarray(a) for a in mean_field_tables(model)]  # NumPy in: NumPy out on host
    observed, clamp = np.asarray(model.observed), np.asarray(model.labels)
    auto, _ = solve_mean_field(*tables, observed, clamp, options=options)
    host, _ = solve_mean_field(*tables, observed, clamp, options=options._replace(engine="host"))
    assert isinstance(auto.fields, jax.Array) and isinstance(host.fields, np.ndarray)
    np.testing.assert_allclose(host.fields, auto.fields, atol=1e-12)
