"""ArviZ layout, convergence checks, MAP vs posterior mean, invariant statistics, plots."""

import warnings

import jax
import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

import arviz as az  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
from sklearn.exceptions import ConvergenceWarning as SklearnConvergenceWarning  # noqa: E402

from graphssl.diagnostics import (  # noqa: E402
    ConvergenceWarning,
    ParetoKWarning,
    UnsettledLabelsWarning,
    check_convergence,
    class_sizes,
    coassignment,
    convergence_summary,
    default_pairs,
    map_vs_posterior_mean,
    plot_energy_trace,
    plot_marginal_confidence,
    plot_rank,
    posterior_mean_labels,
    psis_loo,
    to_arviz,
)
from graphssl.inference.mcmc.chains import Samples, label_marginals  # noqa: E402
from tests.inference.conftest import small_model  # noqa: E402

TRAINING = np.array([-1, 2, -1, -1, 1, -1, -1, -1])  # labels given through a field


def _samples(labels, energy, stats=None, q=3):
    flat = labels.reshape(-1, labels.shape[-1])
    return Samples(
        labels=labels, energy=energy, stats=stats or {}, final_state=None,
        map_labels=flat[np.argmin(energy.reshape(-1))].astype(np.int32),
        map_energy=energy.min(), chain_map_labels=None, chain_map_energy=None,
        chain_keys=None, n_steps=labels.shape[1], burn_in=0, thin=1, n_classes=q,
    )


@pytest.fixture(scope="module")
def run():
    """Synthetic draws (no JAX compile): two blocks of 4 nodes with 5 % label noise, and a
    uniformly random class permutation applied to every draw, as an always-accepted
    permutation move would do on a field-free model."""
    model = small_model(n=8, q=3, field=False, clamped=False, beta=1.2, seed=0)
    rng = np.random.default_rng(0)
    base = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    noisy = np.where(rng.random((4, 400, 8)) < 0.05, rng.integers(0, 3, (4, 400, 8)), base)
    perms = np.argsort(rng.random((4, 400, 3)), axis=-1)
    labels = np.take_along_axis(perms, noisy, axis=-1).astype(np.int8)
    energy = np.asarray(jax.vmap(model.energy)(labels.reshape(-1, 8).astype(np.int32)))
    stats = {"perm_accept_prob": np.ones((4, 400)), "perm_accepted": np.ones((4, 400), bool)}
    return model, _samples(labels, energy.reshape(4, 400), stats)


def test_default_pairs_are_fixed_unlabelled_and_distinct():
    pairs = default_pairs(1000, np.arange(1000) < 500, n_pairs=12)
    assert pairs.shape == (12, 2) and np.all(pairs[:, 0] < pairs[:, 1])
    assert pairs.min() >= 500 and len({tuple(p) for p in pairs}) == 12
    np.testing.assert_array_equal(pairs, default_pairs(1000, np.arange(1000) < 500, 12))
    assert not np.array_equal(pairs, default_pairs(1000, np.arange(1000) < 500, 12, seed=1))
    every = default_pairs(4, np.array([True, False, False, False]), n_pairs=10)
    np.testing.assert_array_equal(every, [[1, 2], [1, 3], [2, 3]])
    assert default_pairs(3, np.array([True, True, False])).shape == (0, 2)
    with pytest.raises(ValueError, match="observed must have shape"):
        default_pairs(3, np.ones(4, bool))


def test_to_arviz_layout(run):
    model, samples = run
    tree = to_arviz(samples, model=model, observed_labels=TRAINING)
    post = tree["posterior"]
    assert set(post.data_vars) == {"energy", "class_sizes", "coassignment"}
    assert post["class_sizes"].dims == ("chain", "draw", "size_rank")
    np.testing.assert_array_equal(post["class_sizes"], class_sizes(samples))
    pairs = np.asarray(tree["constant_data"]["coassignment_pairs"])
    free = np.flatnonzero(TRAINING < 0)
    assert pairs.shape == (10, 2) and set(pairs.ravel()) <= set(free)  # 10 of C(6, 2)
    assert list(post["coassignment"].coords["pair"].values) == [f"{i}-{j}" for i, j in pairs]
    np.testing.assert_array_equal(post["coassignment"], coassignment(samples, pairs))
    assert tree["posterior_labels"]["labels"].shape == (4, 400, 8)
    assert tree["posterior_labels"]["labels"].dtype == np.int8
    assert {"energy", "perm_accept_prob", "perm_accepted"} == set(tree["sample_stats"].data_vars)
    const = tree["constant_data"]
    np.testing.assert_allclose(const["label_marginals"], label_marginals(samples))
    assert {"posterior_mean_labels", "map_labels", "clamped"} <= set(const.data_vars)
    # clamp=False: the labels come through the field, observed_data still holds them
    obs = tree["observed_data"]["observed_labels"]
    assert list(obs.values) == [2, 1] and list(obs.coords["labelled_node"].values) == [1, 4]
    clamped = to_arviz(samples, model=small_model(n=8, q=3, field=False, clamped=True))
    assert list(clamped["observed_data"]["observed_labels"].values) == [2, 1]


def test_to_arviz_pair_count_and_extras(run):
    model, samples = run
    theta = np.random.default_rng(1).normal(size=(4, 400, 2))
    tree = to_arviz(samples, model=model, n_pairs=3, extra_posterior={"theta": theta},
                    extra_dims={"theta": ["feature"]}, extra_coords={"feature": ["a", "b"]})
    assert tree["posterior"]["coassignment"].shape == (4, 400, 3)
    assert list(tree["posterior"]["theta"].coords["feature"].values) == ["a", "b"]
    moved = to_arviz(samples, extra_posterior={"perm_accept_prob":
                                               samples.stats["perm_accept_prob"]},
                     label_marginals=np.full((8, 3), 1 / 3), map_labels=np.zeros(8, int))
    assert "perm_accept_prob" in moved["posterior"].data_vars
    assert set(moved["sample_stats"].data_vars) == {"energy", "perm_accepted"}
    np.testing.assert_allclose(moved["constant_data"]["label_marginals"], 1 / 3)
    assert "observed_data" not in moved.children  # nothing known about training labels
    with pytest.raises(ValueError, match="label_marginals"):
        to_arviz(samples, label_marginals=np.ones((8, 2)))
    with pytest.raises(ValueError, match="extra_posterior"):
        to_arviz(samples, extra_posterior={"theta": theta[:, :10]})
    with pytest.raises(ValueError, match="observed_labels"):
        to_arviz(samples, observed_labels=TRAINING[:5])


def test_log_likelihood_group_is_the_released_conditional_and_az_loo_reads_it():
    """Clamped Potts model (nodes 1, 4 at labels 2, 1) and draws holding the clamp: the
    log_likelihood group is log p(y_i = observed | y_-i) with node i's clamp released
    (energy differences of the same model unclamped), and az.loo / psis_loo run on it.
    Draws whose largest ratios tie (a discrete log-likelihood) stop az.loo; psis_loo keeps
    their raw ratios (k = -inf)."""
    from scipy.special import logsumexp

    clamped = small_model(n=8, q=3, field=True, clamped=True, seed=0)
    free = small_model(n=8, q=3, field=True, clamped=False, seed=0)
    labels = np.random.default_rng(0).integers(0, 3, (2, 40, 8)).astype(np.int8)
    labels[..., 1], labels[..., 4] = 2, 1
    tree = to_arviz(_samples(labels, np.zeros((2, 40))), model=clamped)
    ll = tree["log_likelihood"]["observed_labels"]
    assert ll.dims == ("chain", "draw", "labelled_node") and ll.shape == (2, 40, 2)
    assert list(ll.coords["labelled_node"].values) == [1, 4]
    flat = labels.reshape(-1, 8).astype(np.int32)
    for column, (node, observed) in enumerate(((1, 2), (4, 1))):
        variants = np.repeat(flat[:, None, :], 3, axis=1)
        variants[:, :, node] = np.arange(3)
        energy = np.asarray(jax.vmap(free.energy)(variants.reshape(-1, 8))).reshape(-1, 3)
        expected = -energy[:, observed] - logsumexp(-energy, axis=1)
        np.testing.assert_allclose(ll.values[..., column].reshape(-1), expected, atol=1e-5)
    result = az.loo(tree, pointwise=True)
    assert np.isfinite(result.elpd) and result.pareto_k.shape == (2,)
    ours = psis_loo(tree)
    assert ours.elpd == pytest.approx(float(result.elpd), abs=1e-9)
    assert ours.elpd == pytest.approx(float(ours.elpd_i.sum()))
    tied = np.random.default_rng(2).integers(0, 3, (2, 40, 8)).astype(np.int8)
    tied[..., 1], tied[..., 4] = 2, 1  # node 1's 16 largest ratios are equal
    tied_tree = to_arviz(_samples(tied, np.zeros((2, 40))), model=clamped)
    with pytest.raises(ValueError, match="tail values are the same"):
        az.loo(tied_tree)
    tied_ll = tied_tree["log_likelihood"]["observed_labels"].values
    raw = -np.log(np.mean(np.exp(-tied_ll[..., 0])))  # harmonic mean of the raw ratios
    tied_result = psis_loo(tied_tree)
    assert np.asarray(tied_result.pareto_k)[0] == -np.inf
    assert float(tied_result.elpd_i[0]) == pytest.approx(raw, abs=1e-10)
    assert "log_likelihood" not in to_arviz(_samples(labels, np.zeros((2, 40))), model=clamped,
                                            log_likelihood=False).children
    with pytest.raises(ValueError, match="log_likelihood must be"):
        to_arviz(_samples(labels, np.zeros((2, 40))), model=clamped,
                 log_likelihood=np.zeros((2, 40, 3)))


def test_psis_loo_warns_on_high_pareto_k_and_needs_25_draws():
    """Node 0's predictive p ~ U(0, 1): the ratios 1/p have tail index 1 (k = 1); nodes 1, 2
    have bounded ratios. One warning naming node count and fix; ArviZ's own is replaced."""
    rng = np.random.default_rng(0)
    ll = np.log(rng.uniform(0.5, 1.0, (2, 200, 3)))
    ll[..., 0] = np.log(rng.uniform(size=(2, 200)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = psis_loo(ll, source="Test")
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and issubclass(caught[0].category, ParetoKWarning)
    assert messages[0].startswith("Test: Pareto k > ") and "1 of 3 labelled nodes" in messages[0]
    assert "more draws" in messages[0]
    k = np.asarray(result.pareto_k)
    assert k[0] > 0.7 and np.all(k[1:] < result.good_k)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        psis_loo(ll[..., 1:])
    with pytest.raises(ValueError, match="at least 25 draws"):
        psis_loo(ll[:, :12])
    with pytest.raises(ValueError, match="log_likelihood group"):
        psis_loo(to_arviz(_samples(np.zeros((2, 30, 8), np.int8), np.zeros((2, 30)))))


def test_summary_and_trace_with_defaults(run):
    """az.summary / az.plot_trace with their defaults: short, and they name the energy and
    the class sizes (not 8 nodes x 400 draws of raw labels)."""
    model, samples = run
    tree = to_arviz(samples, model=model, observed_labels=TRAINING)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        summary = az.summary(tree)
    rows = list(summary.index)
    assert rows[:4] == ["energy", "class_sizes[0]", "class_sizes[1]", "class_sizes[2]"]
    assert len(rows) == 1 + 3 + 10 and all(not r.startswith("labels") for r in rows)
    assert float(summary.loc["energy", "r_hat"]) < 1.01
    assert float(summary.loc["class_sizes[0]", "mean"]) > 3.5  # the larger block (~4 nodes)
    text = summary.to_string()
    assert "energy" in text and "class_sizes[0]" in text
    plot = az.plot_trace(tree)
    assert plot is not None
    titles = [ax.get_title() for ax in plt.gcf().axes if ax.get_title()]
    assert len(plt.get_fignums()) == 1 and len(titles) == 1 + 3 + 10  # one panel each
    assert titles[0] == "energy" and titles[1].startswith("class_sizes")
    plt.close("all")


def test_check_convergence_passes_and_warns(run):
    model, samples = run
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = check_convergence(samples, model=model)
    assert report.converged and report.max_rhat < 1.01 and report.min_ess > 100
    # with training labels the per-chain marginals are compared too: these draws permute
    # the classes at random, so every chain's marginals are near flat and the labels open
    with pytest.warns(UnsettledLabelsWarning, match=r"pass R-hat and ESS, but leave"):
        labelled = check_convergence(samples, model=model, observed_labels=TRAINING)
    assert labelled.converged and labelled.stability.fraction > 0.5
    assert issubclass(UnsettledLabelsWarning, ConvergenceWarning)
    assert set(report.rhat) == {"energy", "class_sizes", "coassignment"}
    tree_report = check_convergence(to_arviz(samples, model=model, observed_labels=TRAINING))
    assert tree_report.converged
    np.testing.assert_allclose(tree_report.rhat["energy"], report.rhat["energy"])
    # chains stuck in different states: energies differ between chains
    stuck = np.asarray(samples.labels).copy()
    stuck[2:, :, :4] = stuck[2:, :, 4:5]  # chains 2, 3 merge the blocks
    energy = np.asarray(jax.vmap(model.energy)(stuck.reshape(-1, 8).astype(np.int32)))
    bad = _samples(stuck, energy.reshape(4, 400))
    pattern = r"PottsTest: .*coassignment\[\d-\d\]: R-hat.*n_samples"
    with pytest.warns(ConvergenceWarning, match=pattern):
        report = check_convergence(bad, model=model, source="PottsTest")
    assert not report.converged and report.max_rhat > 1.01
    assert "energy" in " ".join(report.failing) and report.rhat["energy"][0] > 1.01
    assert issubclass(ConvergenceWarning, SklearnConvergenceWarning)
    with pytest.warns(ConvergenceWarning, match="ESS"):  # too short: 4 chains x 20 draws
        check_convergence(_samples(samples.labels[:, :20], samples.energy[:, :20]))
    with pytest.warns(ConvergenceWarning, match="only 2 draws"):
        check_convergence(_samples(samples.labels[:, :2], samples.energy[:, :2]))
    quiet = check_convergence(bad, warn=False)
    assert not quiet.converged


def test_a_statistic_stuck_in_every_chain_is_named_so():
    """Constant within each chain, different between chains: the rank-normalised R-hat comes
    out near 1e16; the report says what that means instead of printing the number."""
    from graphssl.inference.mcmc.statistics import convergence_report

    stuck = np.zeros((4, 50))
    stuck[1:3] = 1.0
    moving = np.random.default_rng(0).normal(size=(4, 50)) + np.arange(4)[:, None]
    report = convergence_report({"n_components": stuck, "energy": moving,
                                 "never_moves": np.ones((4, 50))})
    assert report.failing[0] == ("n_components: each of the 4 chains stuck at its own value "
                                 "(R-hat unbounded)")
    assert any(f.startswith("energy: R-hat 1.") for f in report.failing)
    assert not any("never_moves" in f for f in report.failing)


def test_one_chain_is_never_reported_converged():
    """ArviZ's R-hat is NaN on a single chain: the report fails and says why, however well
    the chain mixes (it passed before, with ``max_rhat = nan``)."""
    from graphssl.inference.mcmc.statistics import convergence_report

    mixing = np.random.default_rng(1).normal(size=(1, 2000))
    report = convergence_report({"energy": mixing})
    assert not report.converged and np.isnan(report.max_rhat) and report.min_ess > 1000
    assert report.failing == ("R-hat needs at least 2 chains, got 1",)
    assert convergence_report({"energy": np.vstack([mixing, mixing[:, ::-1]])}).converged


def test_non_finite_statistics_fail_by_name():
    """NaN or inf in a statistic is reported, not skipped as a column that never moves."""
    from graphssl.inference.mcmc.statistics import convergence_report

    energy = np.random.default_rng(2).normal(size=(4, 500))
    energy[1, 7] = np.nan
    energy[2, 9] = np.inf
    report = convergence_report({"energy": energy})
    assert not report.converged and report.failing == ("energy: 2 NaN / inf values of 2000",)
    with pytest.raises(ValueError, match="max_draws: must be None or an integer >= 1"):
        convergence_report({"energy": energy}, max_draws=0)


def test_permutation_scrambles_indicators_not_invariants(run):
    """Permuted draws: label marginals ~ 1/3 everywhere, yet the invariant quantities are
    stable across chains (R-hat ~ 1) and blocks stay co-assigned."""
    model, samples = run
    summary = convergence_summary(samples, pairs=[[0, 1], [2, 5], [3, 7]])
    assert summary["energy"]["rhat"] < 1.05 and summary["energy"]["ess"] > 100
    assert np.all(summary["coassignment"]["rhat"] < 1.05)
    assert np.all(summary["class_sizes"]["rhat"] < 1.05)
    np.testing.assert_allclose(label_marginals(samples, 3), 1 / 3, atol=0.06)
    co = coassignment(samples, [[0, 1], [0, 7]])
    assert co.shape == (4, 400, 2) and set(np.unique(co)) <= {0, 1}
    assert co[..., 0].mean() > 0.85 and co[..., 1].mean() < 0.15
    sizes = class_sizes(samples)
    brute = -np.sort(-np.stack([(samples.labels == c).sum(-1) for c in range(3)], -1), -1)
    np.testing.assert_array_equal(sizes, brute)
    assert np.all(sizes.sum(-1) == 8) and np.all(np.diff(sizes, axis=-1) <= 0)


def test_map_vs_posterior_mean(run):
    model, samples = run
    truth = np.asarray(samples.map_labels)
    report = map_vs_posterior_mean(samples, model=model, true_labels=truth)
    assert report["map_accuracy"] == 1.0
    assert report["map_energy"] <= report["posterior_mean_energy"] + 1e-12
    assert 0 <= report["agreement"] <= 1
    assert posterior_mean_labels(samples).shape == (8,)


def test_plots_have_labels_and_legends(run):
    model, samples = run
    X = np.random.default_rng(0).normal(size=(8, 2))
    axes = [plot_energy_trace(samples), plot_rank(samples),
            plot_marginal_confidence(X, label_marginals(samples), observed=TRAINING >= 0)]
    for ax in axes:
        assert ax.get_xlabel() and ax.get_ylabel() and ax.get_legend() is not None
    labels = [t.get_text() for t in axes[2].get_legend().get_texts()]
    assert "labelled" in labels and any(t.startswith("class") for t in labels)
    with pytest.raises(ValueError, match="X must be"):
        plot_marginal_confidence(X[:, :1], label_marginals(samples))
    plt.close("all")


def test_sampled_estimator_front_door():
    """PottsClassifier (Swendsen-Wang, labels through the field): a short run warns with the
    fix; clf.to_arviz() with ArviZ's defaults names the energy and class sizes, and its
    observed_data holds the two training labels although nothing is clamped."""
    import networkx as nx

    from graphssl.estimators import PottsClassifier

    graph = nx.karate_club_graph()
    y = np.full(34, -1)
    y[0], y[33] = 0, 1
    clf = PottsClassifier(inference="swendsen_wang", beta=4.0, clamp=False, n_samples=20,
                          burn_in=10)
    with pytest.warns(ConvergenceWarning, match="PottsClassifier: .*ESS.*n_samples") as record:
        clf.fit_graph(graph, y)
    # the warning names the caller's line (graphssl._warnings), not base.py or potts.py
    assert {w.filename for w in record if issubclass(w.category, ConvergenceWarning)} == {
        __file__}
    assert not clf.convergence_.converged and clf.convergence_.n_draws == 20
    tree = clf.to_arviz()
    summary = az.summary(tree)
    assert list(summary.index[:3]) == ["energy", "class_sizes[0]", "class_sizes[1]"]
    assert len(summary) == 1 + 2 + 10
    obs = tree["observed_data"]["observed_labels"]
    assert list(obs.coords["labelled_node"].values) == [0, 33]
    assert list(obs.values) == [0, 1]
    assert "log_likelihood" not in tree.children  # labels held by a field: a prior
    az.plot_trace(tree)
    plt.close("all")
    held = PottsClassifier(inference="swendsen_wang", beta=4.0, clamp=True, n_samples=20,
                           burn_in=10)  # clamped labels: pointwise log-likelihood per draw
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        held.fit_graph(graph, y)
    ll = held.to_arviz()["log_likelihood"]["observed_labels"]
    assert ll.shape == (4, 20, 2) and list(ll.coords["labelled_node"].values) == [0, 33]
    assert np.all(ll.values <= 0.0)


@pytest.mark.parametrize("pairs", [[[1, 2, 3], [4, 5, 6]], [[6.5, 7.9]], [[5, 5]], [7, 6, 5],
                                   [[0, 99]]])
def test_arviz_pairs_are_checked_not_reshaped(run, pairs):
    """``[[1, 2, 3], [4, 5, 6]]`` was read as three other pairs, ``[[6.5, 7.9]]`` as
    ``[[6, 7]]``, a node paired with itself was kept."""
    model, samples = run
    with pytest.raises(ValueError, match=r"pairs: int\[P, 2\] pairs of two different node"):
        to_arviz(samples, model=model, pairs=pairs)
    assert to_arviz(samples, model=model, pairs=[[0, 7]]) is not None


def test_marginal_map_reads_a_mask_or_indices_never_a_label_vector(run):
    """The training labels given as ``observed`` drew every unlabelled node as labelled."""
    model, samples = run
    X = np.random.default_rng(0).normal(size=(8, 2))
    marginals = label_marginals(samples)

    def stars(ax):
        return sum(len(c.get_offsets()) for c in ax.collections[1:])

    assert stars(plot_marginal_confidence(X, marginals, observed=TRAINING >= 0)) == 2
    assert stars(plot_marginal_confidence(X, marginals,
                                          observed=np.flatnonzero(TRAINING >= 0))) == 2
    with pytest.raises(ValueError, match="pass labels >= 0"):
        plot_marginal_confidence(X, marginals, observed=TRAINING)
    with pytest.raises(ValueError, match=r"observed: a bool\[8\] mask"):
        plot_marginal_confidence(X, marginals, observed=np.ones(5, bool))
    with pytest.raises(ValueError, match="class_names: one name per column"):
        plot_marginal_confidence(X, marginals, class_names=["a"])
    plt.close("all")


def test_to_arviz_names_its_misused_arguments(run):
    """``log_likelihood=True`` got a shape message about ``[]``; an extra named ``energy``
    replaced the energy trace silently; duplicate node names broke ``az.summary`` later; a
    diffusion-mixture model in ``map_vs_posterior_mean`` raised an AttributeError."""
    from graphssl.graph import Graph
    from graphssl.models.diffusion_mixture import DirichletDiffusionMixture

    model, samples = run
    with pytest.raises(ValueError, match="log_likelihood: an array"):
        to_arviz(samples, model=model, observed_labels=TRAINING, log_likelihood=True)
    for name in ("energy", "labels"):
        with pytest.raises(ValueError, match=f"extra_posterior: '{name}' is one of"):
            to_arviz(samples, model=model, extra_posterior={name: np.zeros((4, 400))})
    with pytest.raises(ValueError, match="node_names: the names must differ"):
        to_arviz(samples, model=model, node_names=["x"] * 8)
    ring = Graph.from_scipy(np.roll(np.eye(8), 1, axis=1) + np.roll(np.eye(8), -1, axis=1))
    mixture = DirichletDiffusionMixture.create(ring, np.array([0, -1, -1, -1, 1, -1, -1, -1]),
                                               tau=1.0)
    with pytest.raises(ValueError, match="model: the energy of a labelling alone"):
        map_vs_posterior_mean(samples, model=mixture)


@pytest.mark.parametrize("call, message", [
    (lambda s, m: check_convergence(s, rhat_max=float("nan"), warn=False), "rhat_max: a finite"),
    (lambda s, m: check_convergence(s, ess_min=-5, warn=False), "ess_min: a finite"),
    (lambda s, m: check_convergence(s, extra={"x": np.zeros(5)}, warn=False),
     r"extra\['x'\]: expected \[chains, draws"),
    (lambda s, m: check_convergence(s, model=m, observed_labels=TRAINING,
                                    label_marginals=np.ones((4, 7, 3)) / 3, warn=False),
     r"label_marginals: expected float\[chains, 8, C\]"),
    (lambda s, m: map_vs_posterior_mean(s, map_labels=np.full(8, -1)), "map_labels: every node"),
    (lambda s, m: map_vs_posterior_mean(s, map_labels=np.full(8, 5)), "map_labels: every node"),
    (lambda s, m: map_vs_posterior_mean(s, map_labels=np.zeros(5, int)), "map_labels: has 5"),
    (lambda s, m: map_vs_posterior_mean(s, true_labels=np.zeros(5, int)), "true_labels: has 5"),
])
def test_diagnostics_name_their_arguments(run, call, message):
    """``rhat_max=nan`` reported convergence, ``map_labels`` of -1 scored the last class's
    column; the rest failed with raw IndexErrors and reshape errors."""
    model, samples = run
    with pytest.raises(ValueError, match=message):
        call(samples, model)


def test_convergence_summary_without_pairs(run):
    _, samples = run
    summary = convergence_summary(samples, n_pairs=0)
    assert summary["coassignment"]["rhat"].size == 0 and np.isfinite(summary["energy"]["rhat"])
