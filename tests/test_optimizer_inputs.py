"""Input checks of the optimisers (mean field, ICM, mincut, feature prior) and of the
mincut model's weight builders: bad inputs give a ValueError naming the argument."""

import numpy as np
import pytest
import scipy.sparse as sp

from graphssl.graph import Graph
from graphssl.inference.optimize.mean_field import (
    MeanFieldOptions,
    naive_mean_field,
    solve_mean_field,
)
from graphssl.inference.optimize.mean_field_host import solve_gauss_seidel_host
from graphssl.models.potts import PottsModel


def _complete(n):
    return sp.csr_matrix(np.ones((n, n)) - np.eye(n))


# --- 1. mean field: NaN is never "converged"; non-finite tables refused -------------------

def test_host_gauss_seidel_nan_residual_is_not_converged():
    unary = np.zeros((2, 2))
    index = np.array([[1], [0]])
    weight = np.ones((2, 1))
    fields, sweeps, residual = solve_gauss_seidel_host(
        unary, index, weight, np.zeros(2, bool), np.zeros((2, 2)), np.full((2, 2), np.nan),
        [np.array([0]), np.array([1])], 1e-3, 50)
    assert np.isnan(residual)


@pytest.mark.parametrize("order", ["sequential", "chromatic"])
def test_nan_init_fields_not_converged(order):
    u = np.zeros((2, 2))
    idx = np.array([[1], [0]])
    w = np.ones((2, 1))
    _, info = solve_mean_field(u, idx, w, init_fields=np.full((2, 2), np.nan),
                               options=MeanFieldOptions(order=order, engine="host"))
    assert not bool(info.converged)
    assert np.isnan(float(info.residual))


@pytest.mark.parametrize("engine", ["auto", "host", "compiled"])
def test_naive_mean_field_refuses_nan_field(engine):
    field = np.zeros((4, 2))
    field[2, 1] = np.nan
    model = PottsModel.create(Graph.from_scipy(_complete(4)), 2, field=field)
    with pytest.raises(ValueError, match="coupling and unary must be finite"):
        naive_mean_field(model, options=MeanFieldOptions(order="sequential", engine=engine))


def test_naive_mean_field_valid_unchanged():
    model = PottsModel.create(Graph.from_scipy(_complete(4)), 2,
                              labels=np.array([0, -1, 1, -1]))
    sol, info = naive_mean_field(model, options=MeanFieldOptions(order="sequential"))
    assert bool(info.converged)
    assert np.allclose(np.asarray(sol.marginals).sum(1), 1.0)


# --- 2. solve_mean_field: neighbour indices and clamp labels in range ---------------------

@pytest.mark.parametrize("bad", [-1, 6])
@pytest.mark.parametrize("order,engine", [("sequential", "host"), ("sequential", "compiled"),
                                          ("sequential", "auto"), ("parallel", "auto"),
                                          ("chromatic", "auto")])
def test_solve_mean_field_neighbor_index_out_of_range(bad, order, engine):
    u = np.zeros((6, 3))
    idx = np.array([[1], [0], [3], [2], [5], [bad]])
    w = np.ones((6, 1))
    with pytest.raises(ValueError, match="neighbor_index"):
        solve_mean_field(u, idx, w, options=MeanFieldOptions(order=order, engine=engine))


@pytest.mark.parametrize("bad", [-1, 3, 7])
@pytest.mark.parametrize("order", ["sequential", "parallel"])
def test_solve_mean_field_clamp_labels_out_of_range(bad, order):
    u = np.zeros((4, 3))
    idx = np.array([[1], [0], [3], [2]])
    w = np.ones((4, 1))
    with pytest.raises(ValueError, match="clamp_labels"):
        solve_mean_field(u, idx, w, clamped=np.array([1, 0, 0, 0], bool),
                         clamp_labels=np.array([bad, 0, 0, 0]),
                         options=MeanFieldOptions(order=order))


def test_solve_mean_field_unclamped_minus_one_is_fine():
    u = np.zeros((4, 3))
    idx = np.array([[1], [0], [3], [2]])
    w = np.ones((4, 1))
    sol, info = solve_mean_field(u, idx, w, clamped=np.array([1, 0, 0, 0], bool),
                                 clamp_labels=np.array([2, -1, -1, -1]))
    assert np.allclose(np.asarray(sol.marginals)[0], [0, 0, 1])


# --- 3. ICM start labels -------------------------------------------------------------------

def _icm_model():
    rng = np.random.default_rng(1)
    A = (rng.random((20, 20)) < 0.2) * rng.random((20, 20))
    A = np.triu(A, 1)
    A = A + A.T
    lab = -np.ones(20, int)
    lab[:3] = [0, 1, 2]
    return PottsModel.create(Graph.from_scipy(sp.csr_matrix(A)), 3, labels=lab)


@pytest.mark.parametrize("bad", [-1, 3, 5])
def test_icm_refuses_start_labels_out_of_range(bad):
    from graphssl.inference.optimize.icm import iterated_conditional_modes

    with pytest.raises(ValueError, match="labels"):
        iterated_conditional_modes(_icm_model(), np.full(20, bad))


def test_icm_start_minus_one_on_clamped_nodes_only_is_fine():
    from graphssl.inference.optimize.icm import iterated_conditional_modes

    start = np.zeros(20, int)
    start[:3] = -1  # clamped nodes: reset to their observed labels
    y, info = iterated_conditional_modes(_icm_model(), start)
    y = np.asarray(y)
    assert y[:3].tolist() == [0, 1, 2] and y.min() >= 0 and bool(info.converged)


# --- 4. mincut entry points: observed nodes need a class; the hill-climber is binary -------

_W4 = np.ones((4, 4)) - np.eye(4)


def test_mincut_classify_refuses_negative_observed_label():
    from graphssl.inference.optimize.maxflow import mincut_classify

    with pytest.raises(ValueError, match="labels: observed node 1 has label -1"):
        mincut_classify(_W4, np.array([1, -1, -1, 0]), observed=np.ones(4, bool))


def test_alpha_expansion_refuses_negative_observed_label():
    from graphssl.inference.optimize.maxflow import alpha_expansion

    with pytest.raises(ValueError, match="labels: observed node 1"):
        alpha_expansion(_W4, np.array([0, -2, 1, -1]), observed=np.array([1, 1, 1, 0], bool))


def test_alpha_expansion_checks_n_classes_init_and_observed_length():
    from graphssl.inference.optimize.maxflow import alpha_expansion

    labels = np.array([0, 2, 1, -1])
    with pytest.raises(ValueError, match="n_classes"):
        alpha_expansion(_W4, labels, n_classes=2)
    with pytest.raises(ValueError, match="init"):
        alpha_expansion(_W4, labels, init=np.array([0, 0, 0, 5]))
    with pytest.raises(ValueError, match="observed"):
        alpha_expansion(_W4, labels, observed=np.ones(3, bool))
    with pytest.raises(ValueError, match="n_classes"):
        alpha_expansion(_W4, -np.ones(4, int))


def test_mincut_valid_inputs_unchanged():
    from graphssl.inference.optimize.maxflow import alpha_expansion, mincut_classify

    out, info = mincut_classify(_W4, np.array([1, -1, -1, 0]))
    assert out[0] == 1 and out[3] == 0 and set(out.tolist()) <= {0, 1}
    out, _ = alpha_expansion(_W4, np.array([0, 2, 1, -1]))
    assert out[:3].tolist() == [0, 2, 1] and 0 <= out[3] <= 2


def test_iterative_relabelling_refuses_non_binary_labels():
    from graphssl.inference.optimize.maxflow import iterative_relabelling

    with pytest.raises(ValueError, match="labels"):
        iterative_relabelling(_W4, np.array([0, 1, 2, -1]), seed=0)
    with pytest.raises(ValueError, match="labels: observed node"):
        iterative_relabelling(_W4, np.array([0, 1, -1, -1]), observed=np.array([1, 1, 1, 0], bool),
                              seed=0)
    out, info = iterative_relabelling(_W4, np.array([0, 1, 1, -1]), seed=0)
    assert out[:3].tolist() == [0, 1, 1] and bool(info.converged)


# --- 5. fit_feature_prior labels -----------------------------------------------------------

def _prior_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 5))
    y = -np.ones(40, int)
    y[:20] = np.arange(20) % 2
    return X, y


def test_fit_feature_prior_refuses_fractional_labels():
    from graphssl.inference.optimize.feature_prior import fit_feature_prior

    X, y = _prior_data()
    with pytest.raises(ValueError, match="labels: labels must be integers"):
        fit_feature_prior(X, y + 0.5, 2, seed=0)


def test_fit_feature_prior_refuses_labels_of_another_length():
    from graphssl.inference.optimize.feature_prior import fit_feature_prior

    X, y = _prior_data()
    with pytest.raises(ValueError, match="labels: has 30 entries but features has 40 rows"):
        fit_feature_prior(X, y[:30], 2, seed=0)
    with pytest.raises(ValueError, match="n_classes"):
        fit_feature_prior(X, np.where(y == 1, 5, y), 2, seed=0)


def test_fit_feature_prior_whole_float_labels_same_as_int():
    from graphssl.inference.optimize.feature_prior import fit_feature_prior

    X, y = _prior_data()
    a = fit_feature_prior(X, y, 2, seed=0)
    b = fit_feature_prior(X, y.astype(float), 2, seed=0)
    assert np.array_equal(a.folds, b.folds) and np.allclose(a.probs, b.probs)


# --- 6. models.mincut distance rules -------------------------------------------------------

def _delta_data():
    from graphssl.models.mincut import euclidean_distances

    X = np.random.default_rng(0).random((12, 2))
    D = euclidean_distances(X)
    labels = -np.ones(12, int)
    labels[0], labels[1] = 0, 1
    return D, labels, labels >= 0


def _bad_distances(D):
    neg = D.copy()
    neg[0, 1] = neg[1, 0] = -1.0
    nan = D.copy()
    nan[0, 1] = nan[1, 0] = np.nan
    return {"lower triangle": np.tril(D), "negative": neg, "NaN": nan, "non-square": D[:, :10]}


@pytest.mark.parametrize("which", ["lower triangle", "negative", "NaN", "non-square"])
def test_delta_rules_refuse_bad_distances(which):
    from graphssl.models.mincut import delta_half, delta_weights, delta_zero, mincut3_weights

    D, labels, obs = _delta_data()
    bad = _bad_distances(D)[which]
    with pytest.raises(ValueError, match="distances"):
        delta_zero(bad, labels, obs)
    with pytest.raises(ValueError, match="distances"):
        delta_half(bad)
    with pytest.raises(ValueError, match="distances"):
        delta_weights(bad, 0.3)
    with pytest.raises(ValueError, match="distances"):
        mincut3_weights(bad, obs)


def test_delta_rules_refuse_wrong_lengths_and_nan_delta():
    from graphssl.models.mincut import delta_weights, delta_zero, mincut3_weights

    D, labels, obs = _delta_data()
    with pytest.raises(ValueError, match="observed: has 5 entries"):
        delta_zero(D, labels, obs[:5])
    with pytest.raises(ValueError, match="labels: has 5 entries"):
        delta_zero(D, labels[:5], obs)
    with pytest.raises(ValueError, match="observed: has 5 entries"):
        mincut3_weights(D, obs[:5])
    with pytest.raises(ValueError, match="delta"):
        delta_weights(D, float("nan"))


def test_mincut3_needs_a_labelled_example():
    from graphssl.models.mincut import mincut3_weights

    D, _, _ = _delta_data()
    with pytest.raises(ValueError, match="observed: Mincut-3 needs at least one labelled"):
        mincut3_weights(D, np.zeros(12, bool))
    W = mincut3_weights(D, np.zeros(12, bool), force_labelled=False)
    assert W.shape == (12, 12)


def test_delta_rules_check_at_their_one_entry_point():
    """graphssl.models.mincut re-exports the checked functions themselves: an import from
    mincut_delta / mincut_weights is checked too (a triangle is refused there as well)."""
    from graphssl.models import mincut, mincut_delta, mincut_weights

    assert mincut.delta_zero is mincut_delta.delta_zero
    assert mincut.delta_half is mincut_delta.delta_half
    assert mincut.delta_weights is mincut_weights.delta_weights
    assert mincut.mincut3_weights is mincut_weights.mincut3_weights
    D, labels, obs = _delta_data()
    with pytest.raises(ValueError, match="not symmetric"):
        mincut_delta.delta_zero(np.tril(D), labels, obs)
    with pytest.raises(ValueError, match="not symmetric"):
        mincut_weights.mincut3_weights(np.triu(D), obs)
