"""Ordinary data off the paved path (issue 24, item 1): each input gives a result or a clear
error, never a crash."""

import warnings

import numpy as np
import pytest
from conformance_checks import TINY_GRID
from sklearn.datasets import load_iris
from sklearn.exceptions import NotFittedError

from graphssl.estimators import (
    BoltzmannMRFClassifier,
    DiffusionMixtureClassifier,
    DiffusionMixtureGridClassifier,
    HarmonicFunctionClassifier,
    HarmonicMixtureClassifier,
    KNNGraphClassifier,
    LGCClassifier,
    MincutClassifier,
    ParzenWindowClassifier,
    PottsClassifier,
)
from graphssl.graph import knn_graph

# tiny settings for the sampled and learned models; the same settings (so the same compiled
# functions) serve every test of this module
# The sampled estimators at their smallest settings (the diffusion mixtures' re-sampling
# move alone, the Boltzmann MRF's coupling search on two grid points, TINY_GRID): these
# tests are about input handling, each fit compiles its sampler for the data's shape.
FACTORIES = {
    "harmonic": lambda **kw: HarmonicFunctionClassifier(),
    "lgc": lambda **kw: LGCClassifier(),
    "parzen": lambda **kw: ParzenWindowClassifier(),
    "knn": lambda **kw: KNNGraphClassifier(),
    "mincut": lambda **kw: MincutClassifier(),
    "potts_mf": lambda **kw: PottsClassifier(),
    "potts_sw": lambda **kw: PottsClassifier(inference="swendsen_wang", n_chains=2,
                                             n_samples=20, burn_in=5, **kw),
    "boltzmann": lambda **kw: BoltzmannMRFClassifier(model="basic", pairs="knn", n_restarts=1,
                                                     max_iter=2, n_chains=2, n_samples=10,
                                                     burn_in=2, method="gibbs",
                                                     grid=TINY_GRID, **kw),
    "diffusion_mixture": lambda **kw: DiffusionMixtureClassifier(n_chains=1, n_iterations=6,
                                                                 burn_in=2, thin=1,
                                                                 moves=(1, 0, 0), **kw),
    "diffusion_grid": lambda **kw: DiffusionMixtureGridClassifier(
        k_grid=(10,), tau_grid=(5.0,), n_checkpoints=1, every=2, burn_in=2, moves=(1, 0, 0),
        **kw),
    "harmonic_mixture": lambda **kw: HarmonicMixtureClassifier(n_components=3, max_iter=10,
                                                               **kw),
}
SAMPLED = ["potts_sw", "boltzmann", "diffusion_mixture", "diffusion_grid", "harmonic_mixture"]


@pytest.fixture(scope="module")
def iris():
    X, y_true = load_iris(return_X_y=True)
    assert len(np.unique(X, axis=0)) < len(X)  # iris has duplicate rows
    y = np.full(len(y_true), -1)
    labelled = np.concatenate([np.flatnonzero(y_true == c)[:5] for c in range(3)])
    y[labelled] = y_true[labelled]
    return X, y, y_true


@pytest.mark.parametrize("name", list(FACTORIES))
def test_iris_with_duplicate_rows_works_with_every_estimator(iris, name):
    X, y, y_true = iris
    clf = FACTORIES[name]().fit(X, y)
    proba = clf.predict_proba()
    assert proba.shape == (150, 3)
    np.testing.assert_allclose(proba.sum(1), 1.0, atol=1e-9)
    if name not in SAMPLED:  # 15 labels, chance 1/3 (tiny-setting models: no claim)
        assert np.mean(clf.transduction_ == y_true) > 0.6


@pytest.mark.parametrize("name", SAMPLED)
def test_random_state_none_int_or_generator(iris, name):
    X, y, _ = iris
    for random_state in (None, np.random.default_rng(1), 3):
        clf = FACTORIES[name](random_state=random_state).fit(X, y)
        assert np.all(np.isfinite(clf.label_distributions_))
    with pytest.raises(ValueError, match="random_state"):
        FACTORIES[name](random_state="seed").fit(X, y)


@pytest.fixture(scope="module")
def blobs():
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(0, 0.5, (30, 2)), rng.normal(3, 0.5, (30, 2))])
    truth = np.repeat(np.array(["setosa", "virginica"]), 30)
    return X, truth


@pytest.mark.parametrize(
    "unlabelled, dtype",
    [(None, object), ("", object), ("", str), (np.nan, object)],
)
def test_string_labels(blobs, unlabelled, dtype):
    X, truth = blobs
    y = np.array(truth, dtype=dtype)
    y[np.setdiff1d(np.arange(60), [0, 1, 30, 31])] = unlabelled
    for clf in (HarmonicFunctionClassifier(), PottsClassifier()):
        clf.fit(X, y)
        np.testing.assert_array_equal(clf.classes_, ["setosa", "virginica"])
        assert clf.transduction_.dtype.kind in "OU"
        assert np.mean(clf.predict(X) == truth) > 0.95
        assert set(clf.predict(np.array([[0.0, 0.0], [3.0, 3.0]]))) == {"setosa", "virginica"}


def test_categorical_and_arbitrary_integer_labels(blobs):
    pd = pytest.importorskip("pandas")
    X, truth = blobs
    y = pd.Categorical(np.where(np.isin(np.arange(60), [0, 1, 30, 31]), truth, None))
    clf = LGCClassifier().fit(X, y)
    assert list(clf.classes_) == ["setosa", "virginica"]
    codes = np.where(truth == "setosa", -5, 12)
    y_int = np.where(np.isin(np.arange(60), [0, 1, 30, 31]), codes, -1)
    clf = LGCClassifier().fit(X, y_int)  # -1 unlabelled, any other integer a class
    np.testing.assert_array_equal(clf.classes_, [-5, 12])
    assert np.mean(clf.transduction_ == codes) > 0.95


def test_pandas_nullable_labels_mark_missing_as_unlabelled(blobs):
    pd = pytest.importorskip("pandas")
    X, truth = blobs
    shown = np.isin(np.arange(60), [0, 1, 30, 31])
    text = pd.Series(np.where(shown, truth, None), dtype="string")  # pd.NA where unlabelled
    clf = HarmonicFunctionClassifier().fit(X, text)
    np.testing.assert_array_equal(clf.classes_, ["setosa", "virginica"])
    assert np.mean(clf.transduction_ == truth) > 0.95
    codes = np.where(truth == "setosa", 3, 7)
    integers = pd.Series(np.where(shown, codes, 0), dtype="Int64").mask(~shown)  # Int64 + NA
    clf = HarmonicFunctionClassifier().fit(X, integers)
    assert clf.classes_.dtype.kind == "i"  # the nullable integers stay integers
    np.testing.assert_array_equal(clf.classes_, [3, 7])
    assert np.mean(clf.transduction_ == codes) > 0.95


def test_identical_rows_with_different_labels_are_reported(iris):
    X, y, _ = iris
    X = np.vstack([X, X[:1]])
    y = np.r_[y, (y[0] + 1) % 3]  # the same flower, another class
    with pytest.warns(UserWarning, match=r"1 group\(s\) of identical rows of X carry different"):
        clf = HarmonicFunctionClassifier().fit(X, y)
    assert clf.transduction_[0] == y[0] and clf.transduction_[-1] == y[-1]  # each keeps its own
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # agreeing duplicates (iris has them) say nothing
        HarmonicFunctionClassifier().fit(X[:-1], y[:-1])


def test_labels_of_mixed_types_are_named():
    y = np.array([1, "a", None, None, 1, "a"], dtype=object)
    with pytest.raises(ValueError, match="y: labels of mixed types"):
        HarmonicFunctionClassifier().fit(np.arange(12.0).reshape(6, 2), y)


@pytest.mark.parametrize("d", [1, 2, 8, 20])
def test_huge_features_give_a_value_error_not_a_crash(d):
    # ~1e155 with d <= 8 used to crash the process (KD-tree inf distances -> bad CSR index)
    X = np.random.default_rng(0).normal(size=(40, d)) * 1e155
    y = np.full(40, -1)
    y[:2] = [0, 1]
    with pytest.raises(ValueError, match="overflow squared distances"):
        HarmonicFunctionClassifier().fit(X, y)
    with pytest.raises(ValueError, match="overflow squared distances"):
        knn_graph(X, 5)
    with pytest.raises(ValueError, match="underflow"):
        HarmonicFunctionClassifier().fit(X * 1e-310, y)
    # large but representable magnitudes work (the kNN graph is scale-free with kth_over_3)
    small = HarmonicFunctionClassifier().fit(X * 1e-155, y)
    large = HarmonicFunctionClassifier().fit(X * 1e-55, y)
    np.testing.assert_allclose(large.label_distributions_, small.label_distributions_,
                               atol=1e-8)


@pytest.mark.parametrize("name", list(FACTORIES))
def test_not_fitted_error(name):
    clf = FACTORIES[name]()
    with pytest.raises(NotFittedError):
        clf.predict(np.zeros((2, 2)))
    with pytest.raises(NotFittedError):
        clf.predict_proba()


def test_boltzmann_auto_method_picks_one_that_can_run():
    clf = BoltzmannMRFClassifier(model="basic")
    # 2^40 configurations are not enumerable: auto must sample
    assert clf._check(40, 2)[0] == "swendsen_wang"
    assert clf._check(12, 2)[0] == "enumeration"
    assert clf._check(12, 3)[0] == "swendsen_wang"  # 3^12 > 2^16
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(0, 0.5, (20, 2)), rng.normal(3, 0.5, (20, 2))])
    y = np.full(40, -1)
    y[[0, 1, 20, 21]] = [0, 0, 1, 1]
    fitted = BoltzmannMRFClassifier(model="basic", n_restarts=1, max_iter=2, n_chains=2,
                                    n_samples=10, burn_in=2).fit(X, y)
    assert fitted.method_ == "swendsen_wang"
    np.testing.assert_allclose(fitted.label_distributions_.sum(1), 1.0)


def test_potts_huge_beta_gives_probability_rows(blobs):
    X, truth = blobs
    y = np.where(np.isin(np.arange(60), [0, 1, 30, 31]), truth, "")
    with pytest.warns(UserWarning, match="beta"):
        clf = PottsClassifier(beta=1e300).fit(X, y)
    proba = clf.label_distributions_
    assert np.all(np.isfinite(proba)) and np.all(proba >= 0)
    np.testing.assert_allclose(proba.sum(1), 1.0, atol=1e-9)
    assert clf.beta_ == 1e8
    labelled = [0, 1, 30, 31]
    np.testing.assert_array_equal(clf.transduction_[labelled], truth[labelled])


@pytest.mark.parametrize("param, value", [("burn_in", -1), ("n_samples", 2.5),
                                          ("n_chains", 0), ("max_iter", True)])
def test_boltzmann_counts_are_checked(blobs, param, value):
    X, truth = blobs
    y = np.where(np.isin(np.arange(60), [0, 1, 30, 31]), truth, None)
    with pytest.raises(ValueError, match=f"{param}: must be an integer >= "):
        BoltzmannMRFClassifier(**{param: value}).fit(X, y)


@pytest.mark.parametrize("builder", ["local_widths", "sigma_kth_neighbor"])
@pytest.mark.parametrize("shape", [(5,), (5, 0)])
def test_neighbour_widths_want_the_distance_table(builder, shape):
    """A 1-D array is no ``[n, k]`` distance table: its last entry was read as every point's
    k-th distance (``local_widths``) or it failed with an IndexError."""
    from graphssl.graph import weights

    with pytest.raises(ValueError, match=r"distances: expected the float\[n, k\]"):
        getattr(weights, builder)(np.ones(shape))


@pytest.mark.parametrize("bins", [0, 2.5, -1])
def test_rank_plot_names_its_bins(bins):
    """``bins=0`` divided by zero inside the plot (a warning and an empty figure)."""
    from graphssl.diagnostics import plot_rank

    energy = np.random.default_rng(0).normal(size=(2, 20))
    with pytest.raises(ValueError, match="bins: a whole number of rank bins >= 1"):
        plot_rank(None, quantity=energy, bins=bins)
    with pytest.raises(ValueError, match=r"quantity: expected float\[chains, draws\]"):
        plot_rank(None, quantity=energy[0])
    with pytest.raises(ValueError, match=r"bins: at most the draws per chain \(20\)"):
        plot_rank(None, quantity=energy, bins=10**6)


def test_a_refit_by_another_route_leaves_nothing_of_the_earlier_fit():
    """Potts by Gibbs, then by mean field on other labels: the chains, MAP and convergence of
    the first fit stayed on the estimator (and ``to_arviz`` exported them as the new fit's)."""
    from sklearn.datasets import make_moons

    X, truth = make_moons(40, noise=0.1, random_state=0)
    y = np.full(40, -1)
    y[:6] = truth[:6]
    clf = PottsClassifier(inference="gibbs", n_samples=20, n_chains=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(X, y)
    assert hasattr(clf, "samples_") and hasattr(clf, "map_labels_")
    clf.set_params(inference="mean_field").fit(X[::-1], np.where(y < 0, -1, 1 - y))
    for stale in ("samples_", "map_labels_", "convergence_", "_training_labels"):
        assert not hasattr(clf, stale), stale
    with pytest.raises(ValueError, match="fit with inference='gibbs' or 'swendsen_wang'"):
        clf.to_arviz()
    assert clf.get_params()["inference"] == "mean_field"


def test_score_counts_the_labelled_points_only():
    """``-1`` / ``None`` mark unlabelled points in ``y``; scikit-learn's default ``score``
    counted them as misses (0.2 at 100 % accuracy on 12 of 60 labelled) and failed on
    ``None`` with a TypeError."""
    from sklearn.datasets import make_moons
    from sklearn.model_selection import cross_val_score

    X, truth = make_moons(60, noise=0.1, random_state=0)
    y = np.where(np.arange(60) % 5 == 0, truth, -1)
    clf = HarmonicFunctionClassifier().fit(X, y)
    assert clf.score(X, y) == 1.0
    wrong = y.copy()
    wrong[0] = 1 - wrong[0]
    assert clf.score(X, wrong) == pytest.approx(11 / 12)
    assert clf.score(X, y, sample_weight=np.where(np.arange(60) == 0, 11.0, 1.0)) == 1.0
    assert min(cross_val_score(HarmonicFunctionClassifier(), X, y, cv=3)) > 0.5
    named = np.array([None] * 60, dtype=object)
    named[y >= 0] = np.where(y[y >= 0] == 0, "a", "b")
    assert HarmonicFunctionClassifier().fit(X, named).score(X, named) == 1.0
    with pytest.raises(ValueError, match="y: no labelled point to score"):
        clf.score(X, np.full(60, -1))
    with pytest.raises(ValueError, match="y: has 59 entries but X has 60 rows"):
        clf.score(X, y[:59])



@pytest.mark.parametrize("name", ["potts_sw", "boltzmann", "diffusion_mixture"])
def test_exports_name_the_classes_and_take_the_converters_arguments(name, blobs):
    """``to_arviz(model=None)`` clashed with the estimator's own ``model=`` (TypeError); the
    Boltzmann MRF's export named its classes 0, 1 where ``classes_`` are strings."""
    X, truth = blobs
    named = np.where(truth == "setosa", "cat", "dog").astype(object)
    named[np.arange(60) % 6 != 0] = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = FACTORIES[name]().fit(X, named)
    tree = clf.to_arviz()
    assert list(tree["constant_data"]["label_marginals"].coords["class"].values) == ["cat", "dog"]
    assert clf.to_arviz(model=None) is not None


def test_potts_feature_route_thins_its_chains():
    """``fit_graph(graph, y, X=features)`` by MCMC kept every step whatever ``thin`` said."""
    from sklearn.datasets import make_moons

    X, truth = make_moons(40, noise=0.1, random_state=0)
    y = np.full(40, -1)
    y[::4] = truth[::4]
    clf = PottsClassifier(inference="gibbs", n_samples=6, burn_in=2, n_chains=2, thin=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit_graph(knn_graph(X, 5), y, X=X)
    assert clf.feature_fit_ is not None
    assert clf.samples_.thin == 3 and clf.samples_.labels.shape[1] == 6


@pytest.mark.parametrize("sigma", [1e300, 1e160, 1e-160, 1e-300])
def test_new_points_under_an_extreme_width(sigma, blobs):
    """``predict(X_new)`` raised OverflowError (sigma = 1e300) or ZeroDivisionError (1e-300),
    and gave NaN rows at 1e-160. Far above the distances every neighbour weighs alike; far
    below, the nearest decides (the limits of exp(-d^2 / (2 sigma^2)))."""
    X, truth = blobs
    y = np.where(np.arange(60) % 6 == 0, truth, None).astype(object)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = HarmonicFunctionClassifier(sigma=sigma).fit(X, y)
    proba = clf.predict_proba(X[:5] + 0.01)
    assert np.all(np.isfinite(proba)) and np.allclose(proba.sum(1), 1.0)
    if sigma < 1:
        near = clf.label_distributions_[[np.argmin(((X - x) ** 2).sum(1)) for x in X[:5] + 0.01]]
        np.testing.assert_allclose(proba, near)
