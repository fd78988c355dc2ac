"""Input checks of the optimisers, round two (fuzz report 6): chromatic mean field and
``reorder`` under ``jax.jit``, enumeration limits, k-means, pseudo-likelihood, the lambda
step, mean-field options and labels, mincut capacities at the ends of float64, NaN costs,
delta_1/2 on tiny inputs. Bad inputs give a ValueError naming the argument; valid inputs
keep their results."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

from graphssl.graph import Graph
from graphssl.inference.exact.enumeration import enumerate_configurations, enumerate_model
from graphssl.inference.optimize.harmonic_lambda import solve_lambda
from graphssl.inference.optimize.kmeans import kmeans
from graphssl.inference.optimize.maxflow import alpha_expansion, mincut_classify, mincut_map
from graphssl.inference.optimize.mean_field import (
    MeanFieldOptions,
    mean_field_coloring,
    mean_field_labels,
    naive_mean_field,
)
from graphssl.inference.optimize.pseudo_likelihood import fit_pseudo_likelihood
from graphssl.models.mincut import delta_half
from graphssl.models.potts import PottsModel


def _random_graph(n, p=0.4, seed=0):
    rng = np.random.default_rng(seed)
    A = (rng.random((n, n)) < p) * rng.random((n, n))
    A = np.triu(A, 1)
    return sp.csr_matrix(A + A.T)


def _ring(n):
    W = sp.lil_matrix((n, n))
    for i in range(n):
        W[i, (i + 1) % n] = W[(i + 1) % n, i] = 1.0
    return W.tocsr()


# --- C1: chromatic mean field and reorder under jax.jit ------------------------------------

@pytest.fixture(scope="module")
def potts12():
    return PottsModel.create(Graph.from_scipy(_random_graph(12)), 3, beta=2.0,
                             labels=[0, 1, 2] + [-1] * 9)


def test_chromatic_mean_field_under_jit_with_concrete_colors(potts12):
    colors = mean_field_coloring(potts12.neighbor_index)
    options = MeanFieldOptions(order="chromatic", engine="compiled")
    eager, info = naive_mean_field(potts12, options=options, colors=colors)
    jitted = jax.jit(lambda m: naive_mean_field(m, options=options, colors=colors)[0])(potts12)
    assert bool(info.converged)
    # the same sweep; only the final softmax runs on the host eagerly, on the device in jit
    np.testing.assert_allclose(jitted.marginals, eager.marginals, atol=1e-6)
    np.testing.assert_allclose(jitted.fields, eager.fields, atol=1e-6)


def test_chromatic_mean_field_under_jit_needs_concrete_colors(potts12):
    options = MeanFieldOptions(order="chromatic", engine="compiled")
    with pytest.raises(ValueError, match="colors: .*concrete colouring"):
        jax.jit(lambda m: naive_mean_field(m, options=options)[0].marginals)(potts12)
    colors = mean_field_coloring(potts12.neighbor_index)
    with pytest.raises(ValueError, match="colors: .*concrete colouring"):
        jax.jit(lambda m, c: naive_mean_field(m, options=options, colors=c)[0].marginals)(
            potts12, colors)


def test_reorder_under_jit_is_refused_by_name(potts12):
    options = MeanFieldOptions(reorder=True)
    with pytest.raises(ValueError, match="options.reorder: .*jax.jit"):
        jax.jit(lambda m: naive_mean_field(m, options=options)[0].marginals)(potts12)


def test_reorder_outside_jit_unchanged(potts12):
    plain, _ = naive_mean_field(potts12, options=MeanFieldOptions(tol=1e-6))
    renumbered, _ = naive_mean_field(potts12, options=MeanFieldOptions(tol=1e-6, reorder=True))
    np.testing.assert_allclose(renumbered.marginals, plain.marginals, atol=1e-5)


@pytest.mark.parametrize("colors", [np.arange(12) - 1, np.arange(12) + 0.5])
def test_chromatic_bad_colors_named(potts12, colors):
    options = MeanFieldOptions(order="chromatic", engine="compiled")
    with pytest.raises(ValueError, match="colors: expected integer colours"):
        naive_mean_field(potts12, options=options, colors=colors)


# --- mean-field options and labels --------------------------------------------------------

@pytest.mark.parametrize("options, word", [
    (dict(max_iter=2.5), "options.max_iter"), (dict(max_iter=np.inf), "options.max_iter"),
    (dict(max_iter=True), "options.max_iter"), (dict(tol=np.inf), "options.tol"),
    (dict(tol="1e-3"), "options.tol"), (dict(tol=np.nan), "options.tol"),
    (dict(damping=None), "options.damping"), (dict(damping=np.nan), "options.damping"),
])
def test_mean_field_options_checked(potts12, options, word):
    with pytest.raises(ValueError, match=word):
        naive_mean_field(potts12, options=MeanFieldOptions(**options))


def test_mean_field_options_numpy_scalars_accepted(potts12):
    a, ia = naive_mean_field(potts12, options=MeanFieldOptions(tol=1e-4, max_iter=50,
                                                               damping=0.5))
    b, ib = naive_mean_field(potts12, options=MeanFieldOptions(
        tol=np.float32(1e-4), max_iter=np.int64(50), damping=np.float64(0.5)))
    np.testing.assert_array_equal(a.marginals, b.marginals)
    assert int(ia.iterations) == int(ib.iterations)


@pytest.mark.parametrize("rtol", [-1.0, np.nan, np.inf])
def test_mean_field_labels_rtol_checked(potts12, rtol):
    solution, _ = naive_mean_field(potts12)
    with pytest.raises(ValueError, match="rtol"):
        mean_field_labels(solution, potts12.unary_logits(), rtol=rtol)


def test_mean_field_labels_valid_rtol_unchanged(potts12):
    solution, _ = naive_mean_field(potts12)
    default = mean_field_labels(solution, potts12.unary_logits())
    given = mean_field_labels(solution, potts12.unary_logits(), rtol=0.0)
    np.testing.assert_array_equal(default, given)
    assert set(np.asarray(default)[:3].tolist()) == {0, 1, 2}


# --- C2: enumeration limits -------------------------------------------------------------------

def test_enumerate_configurations_past_int32_refused_before_allocating():
    model = PottsModel.create(Graph.from_scipy(_ring(31)), 2)
    with pytest.raises(ValueError, match="max_configurations: .*2\\*\\*31"):
        enumerate_configurations(model, max_configurations=2**40)


@pytest.mark.parametrize("limit", [float("inf"), float("nan"), -1, 0, True, "100"])
def test_enumerate_model_max_configurations_must_be_a_count(limit):
    model = PottsModel.create(Graph.from_scipy(_ring(5)), 2)
    with pytest.raises(ValueError, match="max_configurations: a whole number"):
        enumerate_model(model, max_configurations=limit)


def test_enumerate_model_past_index_range_refused():
    model = PottsModel.create(Graph.from_scipy(_random_graph(40, 0.2, seed=2)), 3)
    with pytest.raises(ValueError, match="max_configurations: .*indices"):
        enumerate_model(model, max_configurations=2**70)


@pytest.mark.parametrize("block", [2.5, 0, True])
def test_enumerate_model_block_size_is_a_count(block):
    model = PottsModel.create(Graph.from_scipy(_ring(5)), 2)
    with pytest.raises(ValueError, match="block_size"):
        enumerate_model(model, block_size=block)


def test_enumerate_model_overflowing_energy_refused():
    beta = 1e308 if jax.config.jax_enable_x64 else 1e38  # beta * 5 edges overflows
    model = PottsModel.create(Graph.from_scipy(_ring(5)), 2, beta=beta)
    with pytest.raises(ValueError, match="energy is NaN or -inf"):
        enumerate_model(model)


def test_enumerate_model_valid_unchanged():
    model = PottsModel.create(Graph.from_scipy(_ring(5)), 2, beta=0.7,
                              labels=[0, -1, -1, 1, -1])
    a = enumerate_model(model)
    b = enumerate_model(model, block_size=np.int64(3), max_configurations=1e3)
    assert a.n_configurations == b.n_configurations == 8
    np.testing.assert_allclose(a.log_partition, b.log_partition, rtol=1e-6)
    np.testing.assert_allclose(a.marginals, b.marginals, atol=1e-6)
    assert enumerate_configurations(model).shape == (8, 5)


# --- k-means ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def points():
    return np.random.default_rng(0).normal(size=(40, 5))


@pytest.mark.parametrize("X, n_clusters, word", [
    (np.zeros((0, 2)), 3, "X: expected points"), ("1d", 3, "X: expected points"),
    ("nan", 3, "X: 1 rows contain NaN"), (None, 0, "n_clusters"),
])
def test_kmeans_inputs_named(points, X, n_clusters, word):
    if X is None:
        X = points
    elif isinstance(X, str) and X == "1d":
        X = points[:, 0]
    elif isinstance(X, str):
        X = points.copy()
        X[3, 2] = np.nan
    with pytest.raises(ValueError, match=word):
        kmeans(X, n_clusters, jax.random.key(0))


def test_kmeans_int_key_named(points):
    with pytest.raises(ValueError, match="key: a JAX random key"):
        kmeans(points, 3, 0)


def test_kmeans_valid_keys_and_jit_unchanged(points):
    _, a, inertia = kmeans(jnp.asarray(points), 3, jax.random.key(0))
    _, b, legacy = kmeans(points, 3, jax.random.PRNGKey(0))
    _, c, jitted = jax.jit(lambda x, k: kmeans(x, 3, k))(jnp.asarray(points),
                                                        jax.random.key(0))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    assert float(inertia) == pytest.approx(float(legacy)) == pytest.approx(float(jitted))


# --- pseudo-likelihood -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pl_problem():
    rng = np.random.default_rng(0)
    return np.log(np.full((10, 3), 1 / 3)), rng.random((10, 3)), np.arange(10) % 3


def test_pseudo_likelihood_init_length_named(pl_problem):
    with pytest.raises(ValueError, match="init: .*shape \\(2,\\)"):
        fit_pseudo_likelihood(*pl_problem, init=np.ones(5))


def test_pseudo_likelihood_float_labels_named(pl_problem):
    unary, messages, labels = pl_problem
    with pytest.raises(ValueError, match="labels: integer classes"):
        fit_pseudo_likelihood(unary, messages, labels + 0.5)


def test_pseudo_likelihood_1d_unary_named(pl_problem):
    _, messages, labels = pl_problem
    with pytest.raises(ValueError, match="unary: expected"):
        fit_pseudo_likelihood(np.zeros(10), messages, labels)


def test_pseudo_likelihood_valid_unchanged(pl_problem):
    a = fit_pseudo_likelihood(*pl_problem)
    b = fit_pseudo_likelihood(*pl_problem, init=np.ones(2))
    np.testing.assert_array_equal(a.theta, b.theta)
    assert a.converged


# --- the lambda step -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def backbone():
    rng = np.random.default_rng(0)
    R = rng.random((4, 4))
    return R @ R.T + np.eye(4), -rng.random((4, 6))


@pytest.mark.parametrize("case, word", [
    ("nan_A", "A: 16 entries are NaN"), ("int_labels", "f_labelled: expected one-hot"),
    ("one_class", "f_labelled: need at least 2 classes"), ("rows", "f_labelled: expected"),
    ("square", "A: expected the square"),
])
def test_solve_lambda_inputs_named(backbone, case, word):
    A, B = backbone
    F = np.eye(2)[np.arange(6) % 2]
    if case == "nan_A":
        A = np.full_like(A, np.nan)
    elif case == "int_labels":
        F = np.arange(6) % 2
    elif case == "one_class":
        F = np.ones((6, 1))
    elif case == "rows":
        F = F[:3]
    else:
        A = A[:, :3]
    with pytest.raises(ValueError, match=word):
        solve_lambda(A, B, F)


def test_solve_lambda_max_iter_is_not_converged(backbone):
    A, B = backbone
    F = np.eye(3)[np.arange(6) % 3]
    lam, info = solve_lambda(A, B, F, max_iter=5)
    assert info.method == "simplex_pg" and info.iterations == 5
    assert not info.converged and info.residual >= 1e-9
    np.testing.assert_allclose(lam.sum(1), 1.0)


def test_solve_lambda_valid_binary_unchanged(backbone):
    A, B = backbone
    lam, info = solve_lambda(A, B, np.eye(2)[np.arange(6) % 2])
    assert info.converged
    np.testing.assert_allclose(lam.sum(1), 1.0)


# --- mincut: capacities at the ends of float64, NaN costs ----------------------------------

_W4 = np.ones((4, 4)) - np.eye(4)
_Y4 = np.array([1, -1, -1, 0])


@pytest.mark.parametrize("method", ["pymaxflow", "scipy", "networkx"])
def test_mincut_overflowing_capacities_refused(method):
    with pytest.raises(ValueError, match="graph: the capacities sum to inf"):
        mincut_classify(_W4 * 1.7e308, _Y4, method=method)


@pytest.mark.parametrize("method", ["pymaxflow", "scipy", "networkx"])
@pytest.mark.parametrize("weight", [5e-324, 1e-300, 2.0**-1000, 1e300])
def test_mincut_extreme_weights_give_the_true_minimum(method, weight):
    out, info = mincut_classify(_W4 * weight, _Y4, method=method)
    reference, ref_info = mincut_classify(_W4, _Y4, method=method)
    np.testing.assert_array_equal(out, reference)
    assert info.energy == pytest.approx(3 * weight, rel=1e-12)  # node 0 alone: 3 edges
    assert ref_info.energy == 3.0


def test_scipy_scale_exact_for_subnormal_weights():
    _, info = mincut_classify(_W4 * 5e-324, _Y4, method="scipy")
    assert info.energy == 3 * 5e-324
    assert info.cut.rounding_bound >= 0.0


def test_mincut_valid_scipy_scale_unchanged():
    _, info = mincut_classify(_W4 * 3.0, _Y4, method="scipy")
    assert info.cut.scale == 2.0**24  # 2^30 / (6 edges * 3) -> 2^25.8, floored
    assert info.energy == 9.0


def test_alpha_expansion_nan_unary_refused():
    W = np.asarray(_random_graph(10, 0.5).todense())
    labels = -np.ones(10, int)
    labels[[0, 3, 6]] = [0, 1, 2]
    with pytest.raises(ValueError, match="unary: 10 rows hold NaN"):
        alpha_expansion(W, labels, unary=np.full((10, 3), np.nan))
    with pytest.raises(ValueError, match="unary: expected costs"):
        alpha_expansion(W, labels, unary=np.zeros((10, 2)))


def test_alpha_expansion_tiny_weights_move_as_unit_weights():
    W = np.asarray(_random_graph(10, 0.5).todense())
    labels = -np.ones(10, int)
    labels[[0, 3, 6]] = [0, 1, 2]
    unit, unit_info = alpha_expansion(W, labels)
    tiny, tiny_info = alpha_expansion(W * 2.0**-1000, labels)  # exact rescaling
    np.testing.assert_array_equal(tiny, unit)
    assert tiny_info.moves == unit_info.moves > 0
    assert tiny_info.energy == unit_info.energy * 2.0**-1000


def test_mincut_map_nan_field_refused():
    labels = -np.ones(20, int)
    labels[:3] = [0, 1, 2]
    field = np.zeros((20, 3))
    field[5] = np.nan
    model = PottsModel.create(Graph.from_scipy(_random_graph(20, 0.2, seed=1)), 3,
                              labels=labels, field=field)
    with pytest.raises(ValueError, match="model.field"):
        mincut_map(model)


# --- delta_1/2 on tiny inputs ------------------------------------------------------------------

@pytest.mark.parametrize("n", [0, 1, 2])
@pytest.mark.parametrize("rule", ["at_least", "at_most"])
def test_delta_half_needs_three_points(n, rule):
    D = np.abs(np.subtract.outer(np.arange(n, dtype=float), np.arange(n, dtype=float)))
    with pytest.raises(ValueError, match="distances: delta_1/2 needs at least 3 points"):
        delta_half(D, rule)


def test_delta_half_three_points_unchanged():
    D = np.abs(np.subtract.outer(np.array([0.0, 1.0, 3.0]), np.array([0.0, 1.0, 3.0])))
    assert delta_half(D, "at_most") == 1.0
    assert delta_half(D) == np.nextafter(1.0, np.inf)


def test_mincut_classify_refuses_a_graph_without_nodes_or_labels():
    """No observed node returned all 0 without a word (every labelling costs 0), and a
    0-node graph failed inside the max-flow extension."""
    W = sp.csr_matrix(np.ones((4, 4)) - np.eye(4))
    with pytest.raises(ValueError, match=r"^labels: no node is observed"):
        mincut_classify(W, np.full(4, -1))
    with pytest.raises(ValueError, match=r"^graph: has no nodes"):
        mincut_classify(sp.csr_matrix((0, 0)), np.zeros(0, dtype=int))
    assert np.array_equal(mincut_classify(W, np.array([0, -1, 1, -1]))[0], [0, 0, 1, 0])


def test_class_folds_names_a_fold_count_below_one():
    from graphssl.inference.optimize.potts_beta import class_folds

    with pytest.raises(ValueError, match=r"^n_folds: .*got 0"):
        class_folds(np.array([0, 1, 0, 1]), 0)
    assert sorted(class_folds(np.array([0, 1, 0, 1]), 2)) == [0, 0, 1, 1]


def test_enumerate_configurations_refuses_a_table_larger_than_memory(monkeypatch):
    """2^30 configurations of 30 nodes asked the back end for 129 GB; the table's size is
    now checked against the machine's memory before anything is allocated."""
    from graphssl.inference.exact import enumeration

    model = PottsModel.create(Graph.from_scipy(sp.csr_matrix((30, 30))), 2, beta=1.0)
    monkeypatch.setattr(enumeration, "_physical_memory", lambda: 2**34)  # a 16 GiB machine
    with pytest.raises(ValueError, match=r"^max_configurations: the table of 1073741824 "
                                         r"configurations x 30 nodes needs 120.0 GiB"):
        enumerate_configurations(model, max_configurations=2**30)
    small = PottsModel.create(Graph.from_scipy(sp.csr_matrix((4, 4))), 2, beta=1.0)
    assert enumerate_configurations(small).shape == (16, 4)
