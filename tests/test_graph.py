"""graphssl.graph: builders, weights, symmetrisation, Laplacians, heat kernel, conversions."""

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp
import scipy.spatial

from graphssl import graph as G


@pytest.fixture(scope="module")
def points():
    return np.random.default_rng(0).normal(size=(60, 3))


def _dense(graph):
    return graph.to_scipy().toarray()


def _reference_knn(X, k):
    d = scipy.spatial.distance.cdist(X, X)
    np.fill_diagonal(d, np.inf)
    idx = np.argsort(d, axis=1, kind="stable")[:, :k]
    return idx, np.take_along_axis(d, idx, axis=1)



@pytest.mark.parametrize("method", ["brute", "gemm", "kdtree", "nndescent"])
def test_knn_search_matches_reference(points, method):
    if method == "nndescent":
        pytest.importorskip("pynndescent")  # the optional 'scale' extra
    idx, dist = G.knn_search(points, 5, method=method)
    ref_idx, ref_dist = _reference_knn(points, 5)
    np.testing.assert_allclose(dist, ref_dist, rtol=1e-5)
    if method != "nndescent":
        assert np.array_equal(np.sort(idx, 1), np.sort(ref_idx, 1))
    assert not np.any(idx == np.arange(len(points))[:, None])


def test_knn_search_high_dim_brute_is_exact():
    X = np.random.default_rng(1).normal(size=(300, 30))
    idx, dist = G.knn_search(X, 4, method="brute")
    ref_idx, ref_dist = _reference_knn(X, 4)
    np.testing.assert_allclose(dist, ref_dist, rtol=1e-8)
    assert np.array_equal(idx, ref_idx)


def test_knn_search_gemm_is_exact_with_ties_and_duplicates():
    """float32 candidates, float64 re-rank: the same neighbours and distances as the exact
    search; exact ties (an integer grid: shells of 4 equal distances) and a duplicated point
    broken by index, as the reference does."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(700, 30))
    X[5] = X[9]  # a duplicate: distance 0
    grid = np.stack(np.meshgrid(np.arange(8.0), np.arange(8.0)), -1).reshape(-1, 2)
    for data, k in ((X, 7), (grid, 7)):
        idx, dist = G.knn_search(data, k, method="gemm")
        ref_idx, ref_dist = _reference_knn(data, k)
        np.testing.assert_allclose(dist, ref_dist, rtol=1e-9, atol=1e-9)
        assert np.array_equal(idx, ref_idx)
        assert not np.any(idx == np.arange(len(data))[:, None])


@pytest.mark.parametrize("layout", ["curve_order", "one_group_per_stretch"])
def test_knn_search_gemm_neighbours_crowded_into_one_column_group(layout):
    """The two-stage top-k keeps the column groups (group g: columns g, g + n_groups, ...;
    16 per group) with the largest maxima: points along a curve placed so that each stretch
    of 16 consecutive points fills one group put all of a point's neighbours in one or two
    groups, so the kept groups must hold several candidates each; also the plain curve order
    (n = 601: not a multiple of the group or block size, padded columns)."""
    from graphssl import neighbors

    rng = np.random.default_rng(3)
    n, group = 601, 16
    assert neighbors._GEMM_GROUP == group  # the layout below is built for this group size
    n_groups = -(-n // group)
    j = np.arange(group * n_groups)
    column = (j % group) * n_groups + j // group  # curve point j -> a column in group j // 16
    if layout == "curve_order":
        column = j
    keep = column < n
    t = np.sort(rng.uniform(0, 10, size=j.size))[keep]
    curve = np.column_stack([np.cos(t), np.sin(t), t]) + 1e-3 * rng.normal(size=(n, 3))
    X = np.zeros((n, 30))  # d = 30 > 8: not the KD-tree's regime
    X[column[keep], :3] = curve
    idx, dist = G.knn_search(X, 9, method="gemm")
    ref_idx, ref_dist = _reference_knn(X, 9)
    np.testing.assert_allclose(dist, ref_dist, rtol=1e-9, atol=1e-12)
    assert np.array_equal(idx, ref_idx)


def test_exact_distances_over_blocks_and_threads(monkeypatch):
    """The float64 re-ranking: row blocks split over threads give the distances of x - y
    (relative 1e-10), near-duplicates recomputed from the differences (a duplicate at 0)."""
    from graphssl import _distances as neighbors

    rng = np.random.default_rng(4)
    X = rng.normal(size=(1500, 300)) + 50.0  # large norms: cancellation-prone
    X[7] = X[3]
    X[8] = X[3] + 1e-6
    indices = rng.integers(0, 1500, size=(1500, 12))
    indices[3, :3] = [7, 8, 3]
    direct = np.linalg.norm(X[indices] - X[:, None, :], axis=2)
    monkeypatch.setattr(neighbors, "_PRODUCTS_PER_THREAD", 1000)
    for threads in (1, 3):
        monkeypatch.setattr(neighbors, "_threads", lambda threads=threads: threads)
        got = neighbors._exact_distances(X, indices)
        np.testing.assert_allclose(got, direct, rtol=1e-10, atol=0)
        assert got[3, 0] == 0.0 and got[3, 2] == 0.0


def test_knn_search_pca_candidates_reranked_exactly():
    # 5 latent dimensions in 40: the 8 leading principal components hold the neighbours
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 5)) @ rng.normal(size=(5, 40)) + 0.05 * rng.normal(size=(300, 40))
    idx, dist = G.knn_search(X, 6, method="pca", n_components=8)
    ref_idx, ref_dist = _reference_knn(X, 6)
    full = scipy.spatial.distance.cdist(X, X)
    # returned distances are the exact ones of the returned indices, sorted, self excluded
    np.testing.assert_allclose(dist, np.take_along_axis(full, idx, 1), rtol=1e-10)
    assert np.all(np.diff(dist, axis=1) >= 0)
    assert not np.any(idx == np.arange(300)[:, None])
    recall = np.mean([len(set(a) & set(b)) for a, b in zip(idx, ref_idx, strict=True)]) / 6
    assert recall >= 0.98
    # two candidates per neighbour on 2 components miss some: the recall measure can fail
    idx2, _ = G.knn_search(X, 6, method="pca", n_components=2, n_candidates=6)
    recall2 = np.mean([len(set(a) & set(b)) for a, b in zip(idx2, ref_idx, strict=True)]) / 6
    assert recall2 < recall
    # d <= n_components: the exact brute-force search
    idx3, dist3 = G.knn_search(X[:, :8], 6, method="pca", n_components=8)
    ref3 = _reference_knn(X[:, :8], 6)
    np.testing.assert_allclose(dist3, ref3[1], rtol=1e-8)
    with pytest.raises(ValueError, match="n_candidates"):
        G.knn_search(X, 6, method="pca", n_candidates=3)
    with pytest.raises(ValueError, match="n_components"):
        G.knn_search(X, 6, method="pca", n_components=0)


def test_scipy_round_trip_keeps_input_and_handles_any_edge_order():
    A = sp.random(30, 30, density=0.2, format="csr", random_state=3)
    A = (A + A.T).tocsr()
    A.setdiag(1.0)
    before = A.copy()
    graph = G.Graph.from_scipy(A, dtype=np.float64)
    assert (A != before).nnz == 0  # the caller's matrix is not modified
    expected = A.toarray()
    np.fill_diagonal(expected, 0.0)
    np.testing.assert_allclose(graph.to_scipy().toarray(), expected)
    W = graph.to_scipy()
    W.data *= 2.0  # the CSR arrays are the caller's own (writable, not views of the graph)
    W.indices[:] = W.indices
    np.testing.assert_allclose(graph.to_scipy().toarray(), expected)
    keys = np.asarray(graph.senders) * 30 + np.asarray(graph.receivers)
    assert np.all(np.diff(keys) > 0)
    # a hand-made graph with unsorted, repeated edges: duplicates are summed
    shuffled = G.Graph(senders=jnp.array([2, 0, 2]), receivers=jnp.array([1, 1, 1]),
                       weights=jnp.array([1.0, 2.0, 0.5]), n_nodes=3)
    np.testing.assert_allclose(shuffled.to_scipy().toarray(),
                               [[0, 2.0, 0], [0, 0, 0], [0, 1.5, 0]])


def test_knn_graph_symmetrisations(points):
    k = 4
    ref_idx, ref_dist = _reference_knn(points, k)
    directed = np.zeros((60, 60))
    sigma = ref_dist[:, -1].mean() / 3
    for i in range(60):
        directed[i, ref_idx[i]] = np.exp(-ref_dist[i] ** 2 / (2 * sigma**2))
    for mode, expected in [
        ("max", np.maximum(directed, directed.T)),
        ("min", np.minimum(directed, directed.T)),
        ("mean", (directed + directed.T) / 2),
        (None, directed),
    ]:
        graph = G.knn_graph(points, k, symmetrize=mode, sigma="kth_over_3")
        np.testing.assert_allclose(_dense(graph), expected, rtol=1e-9, atol=1e-300)
        assert np.all(np.diag(_dense(graph)) == 0)
        if mode is not None:
            assert graph.is_symmetric()


def test_edges_sorted_both_directions(points):
    graph = G.knn_graph(points, 3)
    s, r = np.asarray(graph.senders), np.asarray(graph.receivers)
    assert np.all(np.diff(s * 60 + r) > 0)
    forward = set(zip(s.tolist(), r.tolist(), strict=True))
    assert forward == set(zip(r.tolist(), s.tolist(), strict=True))


def test_weight_schemes(points):
    binary = G.knn_graph(points, 3, weight="binary")
    assert set(np.unique(np.asarray(binary.weights))) == {1.0}
    dist = G.knn_graph(points, 3, weight="distance")
    d = _dense(dist)
    full = scipy.spatial.distance.cdist(points, points)
    np.testing.assert_allclose(d[d > 0], full[d > 0])
    gauss = G.knn_graph(points, 3, sigma=0.7)
    np.testing.assert_allclose(_dense(gauss)[d > 0], np.exp(-full[d > 0] ** 2 / (2 * 0.49)))
    walder = G.knn_graph(points, 3, sigma="walder")
    pair_sq = full**2
    omega = 1.0 / pair_sq[~np.eye(60, dtype=bool)].mean()
    np.testing.assert_allclose(G.walder_omega(points), omega)
    np.testing.assert_allclose(_dense(walder)[d > 0], np.exp(-omega * pair_sq[d > 0]))
    text = np.abs(points) + 0.1
    cosine = G.knn_graph(text, 3, weight="cosine", t=0.5)
    c = _dense(cosine)
    norms = np.linalg.norm(text, axis=1)
    cos = text @ text.T / np.outer(norms, norms)
    np.testing.assert_allclose(c[c > 0], np.exp(-(1 - cos[c > 0]) / 0.5))
    for t in (0.0, -1.0, np.nan):  # 0 gave all-zero weights, < 0 weights above 1
        with pytest.raises(ValueError, match="t: the cosine weights' temperature"):
            G.knn_graph(text, 3, weight="cosine", t=t)


def test_length_scale_weights_eq39(points):
    s = jnp.array([0, 1, 2])
    r = jnp.array([1, 2, 0])
    alpha = jnp.array([0.1, -0.3, 2.0])
    w = G.length_scale_weights(points, s, r, 0.5, alpha)
    diff = points[[0, 1, 2]] - points[[1, 2, 0]]
    expected = np.exp(0.5 - (diff**2 / np.exp(np.asarray(alpha))).sum(1))
    np.testing.assert_allclose(w, expected)
    grad = jax.grad(lambda a: G.length_scale_weights(points, s, r, 0.0, a).sum())(alpha)
    assert np.all(np.isfinite(grad))


def test_epsilon_and_dense_graphs(points):
    full = scipy.spatial.distance.cdist(points, points)
    eps = G.epsilon_graph(points, 0.8, sigma=1.0)
    mask = (full <= 0.8) & ~np.eye(60, dtype=bool)
    np.testing.assert_allclose(_dense(eps)[mask], np.exp(-full[mask] ** 2 / 2))
    assert np.count_nonzero(_dense(eps)) == mask.sum()
    dense = G.dense_graph(points, sigma=2.0)
    np.testing.assert_allclose(_dense(dense), np.exp(-full**2 / 8) * ~np.eye(60, dtype=bool))


def test_laplacians_and_row_normalisation(points):
    graph = G.knn_graph(points, 4)
    W = _dense(graph)
    d = W.sum(1)
    np.testing.assert_allclose(G.laplacian(graph).toarray(), np.diag(d) - W, atol=1e-12)
    sym = np.eye(60) - W / np.sqrt(np.outer(d, d))
    np.testing.assert_allclose(G.laplacian(graph, "symmetric").toarray(), sym, atol=1e-12)
    rw = np.eye(60) - W / d[:, None]
    np.testing.assert_allclose(G.laplacian(graph, "random_walk").toarray(), rw, atol=1e-12)
    P = _dense(G.row_normalize(graph))
    np.testing.assert_allclose(P.sum(1), 1.0)
    K = G.heat_kernel(graph, 3.0)
    np.testing.assert_allclose(K, scipy.linalg.expm(-1.5 * sym), atol=1e-10)


def test_propagate_and_padded_neighbors(points):
    graph = G.knn_graph(points, 4, symmetrize="max")
    x = np.random.default_rng(2).normal(size=(60, 2))
    np.testing.assert_allclose(G.propagate(graph, jnp.asarray(x)), _dense(graph) @ x, atol=1e-12)
    index, weight = graph.padded_neighbors()
    gathered = (np.asarray(weight)[..., None] * x[np.asarray(index)]).sum(1)
    np.testing.assert_allclose(gathered, _dense(graph) @ x, atol=1e-12)


def test_conversions_round_trip(points):
    graph = G.knn_graph(points, 3)
    again = G.Graph.from_scipy(graph.to_scipy())
    np.testing.assert_allclose(_dense(again), _dense(graph))
    nxg = graph.to_networkx()
    assert isinstance(nxg, nx.Graph) and nxg.number_of_edges() == graph.n_edges // 2
    back = G.Graph.from_networkx(nxg)
    np.testing.assert_allclose(_dense(back), _dense(graph))
    n_comp, comp = G.connected_components(graph)
    ref_n, ref = sp.csgraph.connected_components(graph.to_scipy())
    assert n_comp == ref_n and np.array_equal(comp, ref)


def test_graph_is_a_pytree(points):
    graph = G.knn_graph(points, 3)
    leaves, tree = jax.tree_util.tree_flatten(graph)
    assert len(leaves) == 3
    doubled = jax.jit(lambda g: G.propagate(g, jnp.ones(g.n_nodes)))(graph)
    np.testing.assert_allclose(doubled, _dense(graph).sum(1))


def test_two_components_found():
    line = np.arange(5)[:, None] * 0.1 * np.ones((5, 2))
    X = np.r_[line, 100 + line]
    n_comp, comp = G.connected_components(G.knn_graph(X, 2))
    assert n_comp == 2 and len(set(comp[:5])) == 1 and comp[0] != comp[5]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(X=np.array([[0.0, np.nan], [1, 1], [2, 2]]), k=1), "NaN"),
        (dict(X=np.zeros((3, 2)) + np.arange(3)[:, None], k=3), "smaller than"),
        (dict(X=np.zeros((3, 2)) + np.arange(3)[:, None], k=0), ">= 1"),
        (dict(X=np.array([[0.0, 0], [0, 0], [1, 1], [2, 2]]), k=1, on_duplicates="raise"),
         "duplicate"),
        (dict(X=np.zeros((0, 2)), k=1), "no samples"),
        (dict(X=np.arange(4.0), k=1), "2-D"),
        (dict(X=np.zeros((4, 2)) + np.arange(4)[:, None], k=1, symmetrize="both"), "symmetrize"),
        (dict(X=np.zeros((4, 2)) + np.arange(4)[:, None], k=1, weight="tanh"), "weight"),
        (dict(X=np.zeros((4, 2)) + np.arange(4)[:, None], k=1, sigma=-1.0), "sigma"),
    ],
)
def test_bad_input_is_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        G.knn_graph(**kwargs)


def test_duplicates_are_kept_by_default():
    X = np.array([[0.0, 0], [0, 0], [1, 1], [2, 2]])
    graph = G.knn_graph(X, 1)
    assert graph.n_edges > 0
    W = graph.to_scipy()
    assert W[0, 1] == 1.0  # distance 0: Gaussian weight 1, a legitimate affinity


def test_local_sigma_weighs_each_edge_by_its_end_points_own_widths():
    """sigma="local": w_ij = exp(-d_ij^2 / (2 sigma_i sigma_j)), sigma_i = d_{i,k} / 3
    (each point's own k-th neighbour distance), symmetric; a point whose k neighbours are
    exact duplicates falls back on the global width instead of dividing by zero."""
    rng = np.random.default_rng(3)
    points = np.concatenate([rng.normal(size=(30, 2)), 5.0 + 0.1 * rng.normal(size=(30, 2))])
    k = 4
    indices, distances = G.knn_search(points, k)
    widths = distances[:, -1] / 3.0
    W = G.knn_graph(points, k, symmetrize="max", sigma="local").to_scipy().toarray()
    rows, cols = np.nonzero(W)
    d2 = np.sum((points[rows] - points[cols]) ** 2, axis=1)
    np.testing.assert_allclose(W[rows, cols], np.exp(-d2 / (2 * widths[rows] * widths[cols])),
                               rtol=1e-10)
    np.testing.assert_allclose(W, W.T)
    # the tight cluster (10x smaller spread) gets its own, smaller widths
    assert widths[30:].mean() < widths[:30].mean() / 5
    duplicated = np.concatenate([np.zeros((5, 2)), rng.normal(size=(20, 2))])
    W = G.knn_graph(duplicated, 4, sigma="local").to_scipy()
    assert np.all(np.isfinite(W.data)) and np.all(W.data > 0)


def test_host_graph_holds_numpy_arrays_that_every_consumer_takes():
    """``on_host=True``: read-only NumPy fields of the device graph's dtypes and values;
    JAX functions and jitted programs take it and give the device graph's results."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    device = G.knn_graph(X, 5)
    host = G.knn_graph(X, 5, on_host=True)
    assert host.on_host and not device.on_host
    for name in ("senders", "receivers", "weights"):
        h, d = getattr(host, name), getattr(device, name)
        assert isinstance(h, np.ndarray) and not h.flags.writeable
        assert h.dtype == d.dtype
        np.testing.assert_array_equal(h, np.asarray(d))
    np.testing.assert_allclose(np.asarray(host.degrees()), np.asarray(device.degrees()))
    total = jax.jit(lambda g: jnp.sum(g.degrees()))
    assert float(total(host)) == float(total(device))
    moved = host.on_device()
    assert not moved.on_host and isinstance(moved.weights, jax.Array)
    assert device.on_device() is device
    assert (host.to_scipy() != device.to_scipy()).nnz == 0


def test_estimators_put_a_given_host_graph_where_their_programs_run():
    """``fit_graph`` (any graph, here a host graph): a host solver keeps a host graph, a model
    whose inference runs in JAX gets the graph on the device, once."""
    from graphssl.estimators import HarmonicFunctionClassifier, PottsClassifier

    rng = np.random.default_rng(1)
    X = np.vstack([rng.normal(0, 0.3, (15, 2)), rng.normal(3, 0.3, (15, 2))])
    y = -np.ones(30, int)
    y[[0, 15]] = [0, 1]
    host = G.knn_graph(X, 4, on_host=True)
    assert HarmonicFunctionClassifier().fit_graph(host, y).graph_.on_host
    potts = PottsClassifier().fit_graph(host, y)
    assert not potts.graph_.on_host
    np.testing.assert_array_equal(potts.transduction_, np.repeat([0, 1], 15))


def test_host_solvers_never_start_the_jax_back_end():
    """A fresh process that fits the estimators whose solvers run on the host (harmonic
    function, LGC: scipy solves; kNN vote: shortest paths; mincut: max-flow; Potts: mean
    field in NumPy at this size) on a host graph, and predicts new points, starts no JAX
    back end."""
    import subprocess
    import sys

    code = (
        "import numpy as np\n"
        "from graphssl.estimators import (HarmonicFunctionClassifier, KNNGraphClassifier,\n"
        "                                 LGCClassifier, MincutClassifier, PottsClassifier)\n"
        "import jax._src.xla_bridge as xb\n"
        "rng = np.random.default_rng(0)\n"
        "X = np.vstack([rng.normal(0, 0.3, (30, 4)), rng.normal(3, 0.3, (30, 4))])\n"
        "y = -np.ones(60, int); y[[0, 1, 30, 31]] = [0, 0, 1, 1]\n"
        "for M in (HarmonicFunctionClassifier, LGCClassifier, KNNGraphClassifier,\n"
        "          MincutClassifier, PottsClassifier):\n"
        "    clf = M().fit(X, y)\n"
        "    assert (clf.transduction_ == np.repeat([0, 1], 30)).all()\n"
        "    assert clf.graph_.on_host\n"
        "    assert (clf.predict(X[:5] + 0.01) == 0).all()\n"
        "print('backends', len(xb._backends))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "backends 0" in out.stdout


@pytest.mark.parametrize("x64", [False, True])
def test_a_duplicate_point_keeps_its_edge_in_the_graphs_storage_dtype(x64):
    """``weight="distance"`` gives a duplicate weight 0, kept as the smallest positive
    weight so that sparsity does not lose the edge; that floor was float64's (2.2e-308), an
    explicit 0.0 once stored in a float32 graph (JAX's default): the edge was gone. The floor
    is now the storage dtype's smallest normal number."""
    X = np.repeat(np.random.default_rng(0).normal(size=(10, 2)), 2, axis=0)  # pairs
    with jax.enable_x64(x64):
        builders = [lambda: G.knn_graph(X, 3, weight="distance"),
                    lambda: G.epsilon_graph(X, 0.5, weight="distance"),
                    lambda: G.dense_graph(X, weight="distance")]
        for build in builders:
            W = build().to_scipy()
            floor = np.finfo(W.dtype).tiny
            assert W.dtype == (np.float64 if x64 else np.float32)
            assert np.all(W.data >= floor), "an edge stored as an explicit 0"
            assert all(W[2 * i, 2 * i + 1] == floor for i in range(10))  # the duplicates
