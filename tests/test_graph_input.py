"""Your own graph: graphssl.graph.as_graph and fit_graph(graph, y, X=None) on the estimators."""

import jax
import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from graphssl.estimators import (
    BoltzmannMRFClassifier,
    HarmonicFunctionClassifier,
    HarmonicMixtureClassifier,
    LGCClassifier,
    MincutClassifier,
    PottsClassifier,
)
from graphssl.graph import DirectedGraphWarning, Graph, GraphWeightsRescaledWarning, as_graph
from graphssl.validation import UnreachedNodesWarning


@pytest.fixture(scope="module")
def karate():
    G = nx.karate_club_graph()
    truth = np.array([G.nodes[v]["club"] == "Officer" for v in G.nodes], dtype=np.int64)
    y = np.full(G.number_of_nodes(), -1)
    y[0], y[33] = truth[0], truth[33]  # the two leaders
    return G, y, truth


def test_networkx_node_order_and_weight_attribute():
    G = nx.Graph()
    G.add_edge("b", "a", weight=2.0)
    G.add_edge("a", "c", strength=5.0)
    graph = as_graph(G)  # node order list(G.nodes) = [b, a, c]; "weight", 1 where missing
    W = graph.to_scipy().toarray()
    np.testing.assert_allclose(W, [[0, 2, 0], [2, 0, 1], [0, 1, 0]])
    W = as_graph(G, weight="strength").to_scipy().toarray()
    np.testing.assert_allclose(W, [[0, 1, 0], [1, 0, 5], [0, 5, 0]])
    W = as_graph(G, nodelist=["a", "b", "c"]).to_scipy().toarray()
    np.testing.assert_allclose(W[0], [0, 2, 1])


def test_matrix_and_edge_list_forms_agree():
    edges = np.array([[0, 1], [1, 2], [2, 3], [3, 0]])
    W = np.zeros((4, 4))
    W[edges[:, 0], edges[:, 1]] = W[edges[:, 1], edges[:, 0]] = 1.0
    reference = as_graph(W).to_scipy().toarray()
    np.testing.assert_array_equal(reference, W)
    np.testing.assert_array_equal(as_graph(sp.csr_matrix(W)).to_scipy().toarray(), W)
    np.testing.assert_array_equal(as_graph(Graph.from_scipy(W)).to_scipy().toarray(), W)
    both = np.vstack([edges, edges[:, ::-1]])
    np.testing.assert_array_equal(as_graph(both).to_scipy().toarray(), W)
    weighted = np.column_stack([both, np.full(8, 0.5)])
    np.testing.assert_array_equal(as_graph(weighted).to_scipy().toarray(), 0.5 * W)
    # n_nodes leaves trailing nodes isolated
    assert as_graph(both, 6).n_nodes == 6


def test_one_directional_edges_are_symmetrised_and_reported():
    # a citation file's i < j pairs: every edge named once
    edges = np.array([[0, 1], [0, 2], [1, 2], [2, 3]])
    with pytest.warns(DirectedGraphWarning, match="4 of 4 edges are given in one direction"):
        graph = as_graph(edges)
    assert graph.is_symmetric() and graph.n_edges == 8
    # a directed networkx graph: one of its two edges is one-directional
    D = nx.DiGraph([(0, 1), (1, 0), (1, 2)])
    with pytest.warns(DirectedGraphWarning, match="1 of 2 edges") as record:
        as_graph(D)
    assert [w.filename for w in record] == [__file__]  # the caller's line
    with pytest.warns(DirectedGraphWarning, match="symmetrize='min'"):
        mutual = as_graph(D, symmetrize="min")
    assert mutual.n_edges == 2
    unequal = np.array([[0, 2.0], [1.0, 0]])
    with pytest.warns(DirectedGraphWarning, match="1 pairs have unequal weights"):
        mean = as_graph(unequal, symmetrize="mean")
    np.testing.assert_allclose(mean.to_scipy().toarray(), [[0, 1.5], [1.5, 0]])
    assert not as_graph(edges, symmetrize=None).is_symmetric()


@pytest.mark.parametrize(
    "obj, kwargs, match",
    [
        (np.zeros((3, 4)), {}, "shape"),
        (sp.random(5, 4, density=0.5, format="csr", random_state=0), {}, "must be square"),
        (np.array([[0, 1], [1, -2]]), {}, "non-negative"),
        (np.array([[0, 1.5], [1, 2], [2, 3]]), {"n_nodes": 5}, "integers"),
        (np.array([[0, 7]]), {"n_nodes": 5}, "names node 7"),
        (np.eye(3), {"n_nodes": 4}, "3 nodes but y has 4"),
        (np.zeros((3, 3)), {}, "no edges"),
        ("edges.csv", {}, "expected a graphssl Graph"),
        (np.array([[0, 1]]), {"symmetrize": "both"}, "symmetrize"),
    ],
)
def test_bad_graphs_are_named(obj, kwargs, match):
    with pytest.raises(ValueError, match=match):
        as_graph(obj, **kwargs)


def test_weights_outside_the_stored_float_range_are_rescaled_and_reported(karate):
    G, y, truth = karate
    A = nx.to_scipy_sparse_array(G, weight=None, format="csr").astype(np.float64)
    storage = np.finfo(jax.dtypes.canonicalize_dtype(np.float64))  # what a Graph stores
    reference = HarmonicFunctionClassifier().fit_graph(A, y).label_distributions_
    for scale in (float(storage.tiny) / 64, float(storage.max) / 4):
        with pytest.warns(GraphWeightsRescaledWarning, match="divided by the largest weight"):
            graph = as_graph(A * scale)
        np.testing.assert_allclose(graph.to_scipy().toarray(), A.toarray())
        with pytest.warns(GraphWeightsRescaledWarning):
            clf = HarmonicFunctionClassifier().fit_graph(A * scale, y)
        np.testing.assert_allclose(clf.label_distributions_, reference, atol=1e-6)
    # a range wider than the float holds: the weakest edges are dropped, and counted
    W = A.toarray()
    W[0, 1] = W[1, 0] = float(storage.tiny) / 64
    with pytest.warns(GraphWeightsRescaledWarning, match="and 2 edges weaker than"):
        graph = as_graph(W)
    assert graph.n_edges == A.nnz - 2


def test_integer_weights_are_stored_as_floats():
    """An int matrix (a networkx graph's default weights) gives float weights: a model built
    on it keeps its float beta and field (they took the weights' int dtype and became 0)."""
    from graphssl.models.potts import PottsModel

    graph = Graph.from_networkx(nx.path_graph(4))
    assert graph.weights.dtype.kind == "f"
    model = PottsModel.create(graph, 2, beta=0.7, field=np.full((4, 2), 0.4))
    assert float(model.beta) == pytest.approx(0.7)
    assert float(model.field[0, 0]) == pytest.approx(0.4)


def test_unreached_nodes_wants_a_mask():
    from graphssl.graph import unreached_nodes

    graph = as_graph(np.array([[0, 1], [1, 0], [2, 3]]), 5)  # 0-1, 2-3 and an isolated 4
    labels = np.array([0, -1, -1, -1, -1])
    np.testing.assert_array_equal(unreached_nodes(graph, labels >= 0), [0, 0, 1, 1, 1])
    for wrong in (labels, np.ones(3, bool)):  # -1 read as True marked the wrong nodes
        with pytest.raises(ValueError, match="observed: a boolean mask of shape"):
            unreached_nodes(graph, wrong)


def test_precomputed_neighbours_out_of_range_are_refused():
    from graphssl.graph import knn_graph, knn_search

    X = np.random.default_rng(0).normal(size=(20, 2))
    indices, distances = knn_search(X, 3)
    for bad in (-1, 20):  # a scipy matrix built from them corrupted memory
        wrong = indices.copy()
        wrong[0, 0] = bad
        with pytest.raises(ValueError, match=r"neighbors: indices must be integers in \[0, 20\)"):
            knn_graph(X, 3, neighbors=(wrong, distances))


def test_karate_club_with_potts_and_harmonic(karate):
    G, y, truth = karate
    potts = PottsClassifier().fit_graph(G, y)
    hf = HarmonicFunctionClassifier().fit_graph(G, y)
    # measured: Potts mean field 0.971 (33 of 34), harmonic function 1.000
    assert np.mean(potts.transduction_ == truth) >= 0.94
    assert np.mean(hf.transduction_ == truth) >= 0.94
    np.testing.assert_array_equal(potts.classes_, [0, 1])
    assert potts.graph_.n_nodes == 34 and potts.graph_.is_symmetric()


def test_features_are_validated_and_kept_sparse(karate):
    G, y, _ = karate
    X = sp.random(34, 50, density=0.1, format="csr", random_state=0)
    clf = LGCClassifier().fit_graph(G, y, X=X)
    assert sp.issparse(clf.X_graph_) and clf.X_graph_.shape == (34, 50)
    dense = np.asarray(X.todense())
    assert isinstance(HarmonicFunctionClassifier().fit_graph(G, y, X=dense).X_graph_, np.ndarray)
    with pytest.raises(ValueError, match="33 rows but the graph has 34 nodes"):
        LGCClassifier().fit_graph(G, y, X=dense[:-1])
    with pytest.raises(ValueError, match="NaN"):
        LGCClassifier().fit_graph(G, y, X=np.full((34, 2), np.nan))
    # after fit_graph, predict(X_new) is refused: there is no feature graph to extend
    with pytest.raises(ValueError, match="fit_graph"):
        clf.predict(dense)


def test_feature_models_need_X_on_a_graph(karate):
    # the Boltzmann MRF takes a bare graph (its couplings then follow the edge weights:
    # tests/test_boltzmann_selection.py); the harmonic mixture's components live in X
    G, y, _ = karate
    with pytest.raises(ValueError, match=r"X: .* learns from node features"):
        HarmonicMixtureClassifier().fit_graph(G, y)


def test_models_learning_from_features_use_the_given_graph():
    # two 6-cliques joined by one edge; features separate them too
    G = nx.disjoint_union(nx.complete_graph(6), nx.complete_graph(6))
    G.add_edge(5, 6)
    X = np.repeat([[0.0, 0.0], [3.0, 3.0]], 6, axis=0)
    X += np.random.default_rng(0).normal(0, 0.3, X.shape)
    y = np.full(12, -1)
    y[[0, 11]] = [0, 1]
    truth = np.repeat([0, 1], 6)
    hm = HarmonicMixtureClassifier(n_components=2, max_iter=5).fit_graph(G, y, X=X)
    assert np.mean(hm.transduction_ == truth) >= 0.9
    bm = BoltzmannMRFClassifier(model="basic", n_restarts=1, max_iter=2).fit_graph(G, y, X=X)
    assert bm.method_ == "enumeration"  # auto: 2^12 configurations
    assert bm.theta_ is not None and np.mean(bm.transduction_ == truth) >= 0.9
    # the pairs are the graph's 31 edges (both directions), not a dense or kNN set
    assert bm._pair_graph.n_edges == 62


@pytest.mark.parametrize("make", [
    lambda: HarmonicFunctionClassifier(),
    lambda: LGCClassifier(),
    lambda: MincutClassifier(),
    lambda: PottsClassifier(),
    lambda: PottsClassifier(inference="swendsen_wang", n_chains=2, n_samples=20, burn_in=5),
])
def test_unreached_components_get_the_class_prior(make):
    # two triangles joined (nodes 0-5, labels 0, 0, 1) and a separate triangle (6-8)
    edges = np.array([[0, 1], [1, 2], [2, 0], [3, 4], [4, 5], [5, 3], [2, 3], [6, 7], [7, 8],
                      [8, 6]])
    edges = np.vstack([edges, edges[:, ::-1]])
    y = np.array([0, 0, -1, 1, -1, -1, -1, -1, -1])
    clf = make()
    with pytest.warns(UnreachedNodesWarning, match="3 of 9 nodes") as record:
        clf.fit_graph(edges, y)
    # attributed to this line, the caller's, not to the library frame that noticed it
    assert {w.filename for w in record} == {__file__}
    np.testing.assert_allclose(clf.label_distributions_[6:], [[2 / 3, 1 / 3]] * 3)
    assert clf.n_unreached_ == 3
    assert np.all(clf.transduction_[6:] == 0)
    if hasattr(clf, "map_labels_"):
        assert np.all(clf.map_labels_[6:] == 0)


def test_a_fixed_width_far_below_the_distances_is_reported():
    """``dense_graph(X * 1e20)`` at the default ``sigma=1`` gave every weight exp(-1e40): a
    graph of zeros in float32, silently. The warning names sigma and the way out; a width
    near the data's distances stays silent."""
    import warnings

    from graphssl.graph import GraphWeightsUnderflowWarning, dense_graph, knn_graph

    X = np.random.default_rng(0).normal(size=(30, 2))
    with pytest.warns(GraphWeightsUnderflowWarning, match=r"sigma=1: 100 % of the edges"):
        dense_graph(X * 1e20)
    with pytest.warns(GraphWeightsUnderflowWarning, match="sigma='local'"):
        knn_graph(X * 1e3, 5, sigma=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", GraphWeightsUnderflowWarning)
        dense_graph(X)
        knn_graph(X, 5, sigma=1.0)


def test_a_given_neighbour_table_must_match_k_and_be_sorted():
    """A 3-NN table with k=5 built a 3-NN graph; a table with its columns reversed changed
    weights by up to 0.29 (the width rules read the last column as the k-th); a per-node
    sigma array failed with NumPy's "truth value of an array" error."""
    from graphssl.graph import knn_graph, knn_search

    X = np.random.default_rng(0).normal(size=(30, 3))
    indices, distances = knn_search(X, 3)
    with pytest.raises(ValueError, match="neighbors: a table of 3 neighbours a point for k=5"):
        knn_graph(X, 5, neighbors=(indices, distances))
    with pytest.raises(ValueError, match="neighbors: each row nearest first"):
        knn_graph(X, 3, neighbors=(indices[:, ::-1], distances[:, ::-1]))
    with pytest.raises(ValueError, match="sigma: one positive number or a rule"):
        knn_graph(X, 3, sigma=np.full(30, 0.5))
    assert knn_graph(X, 3, neighbors=(indices, distances)).n_nodes == 30
