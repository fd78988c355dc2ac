"""Label stability: which posterior-mean labels the chains' Monte-Carlo error leaves open."""

import warnings

import numpy as np
import pytest

from graphssl.diagnostics import ConvergenceWarning, check_convergence, label_stability
from graphssl.inference.mcmc.chains import Samples
from graphssl.inference.mcmc.statistics import chain_label_frequencies


def _chains(*rows):
    """float[K, n, 2] from per-node lists of each chain's probability of class 0."""
    p0 = np.array(rows, dtype=np.float64).T  # [K, n]
    return np.stack([p0, 1.0 - p0], axis=-1)


def test_label_stability_marks_the_nodes_the_chains_split_on():
    p = _chains(
        [0.9, 0.9, 0.9, 0.9],      # every chain agrees: settled
        [0.9, 0.1, 0.8, 0.2],      # two chains each way: the mean is a tie, unsettled
        [0.56, 0.55, 0.55, 0.54],  # a small lead, but every chain sees it: settled
        [0.7, 0.6, 0.4, 0.65],     # one chain on the other side, lead 0.175 < 2 se: unsettled
        [0.5, 0.5, 0.5, 0.5],      # an exact tie in every chain: open (the label is the
    )                              # tie-break's; it read settled before, fuzz report 10)
    out = label_stability(p)
    assert out.unsettled.tolist() == [False, True, False, True, True]
    assert out.fraction == pytest.approx(3 / 5)
    assert out.chains_disagree == pytest.approx(2 / 5)  # nodes 1 and 3
    assert out.n_chains == 4 and out.z == 2.0
    # counted over the free nodes only
    free = np.array([True, False, True, True, False])
    out = label_stability(p, free=free)
    assert out.unsettled.tolist() == [False, False, False, True, False]
    assert out.fraction == pytest.approx(1 / 3)
    # a stricter z unsettles fewer; node 3's lead is 1.17 standard errors
    assert label_stability(p, z=1.0).unsettled.tolist() == [False, True, False, False, True]


def test_label_stability_is_calibrated_on_replicates_of_known_spread():
    """Chains as noisy replicates of a known marginal. A node whose true lead is zero is
    unsettled as often as Student's t with K - 1 = 3 dof puts |t| at most z = 2 (0.861); a
    node 6 standard errors clear almost never. A copy that forgot the sqrt(K) of the standard
    error (the chains' own spread taken as the error of their mean) fails both checks."""
    rng = np.random.default_rng(0)
    n, k, sd = 4000, 4, 0.1
    true_lead = np.where(np.arange(n) < n // 2, 0.0, 6 * sd / np.sqrt(k))
    p0 = 0.5 + true_lead / 2 + rng.normal(0.0, sd / 2, (k, n))  # lead = 2 p0 - 1, sd 0.1
    out = label_stability(np.stack([p0, 1 - p0], axis=-1))
    tied, clear = out.unsettled[: n // 2], out.unsettled[n // 2:]
    assert 0.82 <= tied.mean() <= 0.90  # t_3: 0.861; binomial sd over 2000 nodes 0.008
    assert clear.mean() < 0.02
    lead = 2 * p0 - 1
    broken = np.abs(lead.mean(0)) <= 2 * lead.std(0, ddof=1)  # no sqrt(K)
    assert not 0.82 <= broken[: n // 2].mean() <= 0.90
    assert broken[n // 2:].mean() >= 0.02


def test_label_stability_needs_two_chains_and_checks_shapes():
    one = label_stability(_chains([0.9], [0.5]))
    assert np.isnan(one.fraction) and not one.unsettled.any()
    assert one.sentence() == ""
    with pytest.raises(ValueError, match="per_chain_marginals: expected"):
        label_stability(np.zeros((4, 3)))
    with pytest.raises(ValueError, match=r"free: expected bool\[2\]"):
        label_stability(_chains([0.9, 0.8], [0.1, 0.2]), free=np.ones(3, bool))


def _samples(labels):
    energy = np.arange(labels.shape[0] * labels.shape[1], dtype=np.float64).reshape(
        labels.shape[:2]) % 7
    return Samples(labels=labels, energy=energy, stats={}, final_state=None,
                   map_labels=labels[0, 0].astype(np.int32), map_energy=0.0,
                   chain_map_labels=None, chain_map_energy=None, chain_keys=None,
                   n_steps=labels.shape[1], burn_in=0, thin=1, n_classes=2)


def test_check_convergence_reports_the_unsettled_labels_of_stuck_chains():
    """Two chains stuck with node 2 in class 0, two with it in class 1 (nodes 0, 1 labelled,
    node 3 the same everywhere): the report's stability marks node 2 only, and the warning
    says what share of the unlabelled nodes that is."""
    rng = np.random.default_rng(1)
    labels = np.zeros((4, 50, 4), np.int8)
    labels[:, :, 1] = 1
    labels[2:, :, 2] = 1
    labels[:, :, 3] = rng.random((4, 50)) < 0.05  # mostly class 0 in every chain
    observed = np.array([0, 1, -1, -1])
    assert chain_label_frequencies(labels, 2).shape == (4, 4, 2)
    with pytest.warns(ConvergenceWarning, match=r"leave 50.0 % of the unlabelled nodes"):
        report = check_convergence(_samples(labels), observed_labels=observed)
    assert report.stability.unsettled.tolist() == [False, False, True, False]
    assert report.stability.chains_disagree == pytest.approx(0.5)
    # per-chain marginals given explicitly take the place of the frequencies
    settled = np.tile(np.array([[1.0, 0.0], [0.0, 1.0], [0.9, 0.1], [0.8, 0.2]]), (4, 1, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        report = check_convergence(_samples(labels), observed_labels=observed,
                                   label_marginals=settled)
    assert not report.stability.unsettled.any()
    assert "tie" not in report.advice()
    # no training label: nothing anchors the classes (a chain may name them its own way), so
    # no per-chain comparison is made
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        assert check_convergence(_samples(labels)).stability is None
        assert check_convergence(_samples(labels),
                                 observed_labels=np.full(4, -1)).stability is None


def _converged(n_nodes, rng):
    """Samples of 4 chains x 200 independent draws (R-hat ~ 1, ESS ~ 800): node 0 labelled
    class 0, node 1 class 1, the others free."""
    labels = (rng.random((4, 200, n_nodes)) < 0.5).astype(np.int8)
    labels[:, :, 0], labels[:, :, 1] = 0, 1
    samples = _samples(labels)
    return samples._replace(energy=rng.normal(size=(4, 200)))


def test_converged_chains_that_leave_labels_open_are_reported():
    """R-hat and ESS pass, but the per-chain marginals put 3 of the 20 free nodes (15 %)
    within two standard errors of a tie: an UnsettledLabelsWarning (a ConvergenceWarning)
    says so; with 1 of 20 (5 %, the limit) nothing is warned."""
    from graphssl.diagnostics import UnsettledLabelsWarning
    from graphssl.inference.mcmc.statistics import UNSETTLED_WARN_FRACTION

    rng = np.random.default_rng(3)
    n = 22
    observed = np.r_[0, 1, np.full(n - 2, -1)]
    clear = np.tile(np.array([0.9, 0.1]), (4, n, 1))
    open_rows = np.array([[0.6, 0.4], [0.4, 0.6], [0.55, 0.45], [0.45, 0.55]])

    def marginals(n_open):
        p = clear.copy()
        p[:, 2:2 + n_open] = open_rows[:, None, :]
        return p

    with pytest.warns(UnsettledLabelsWarning, match=r"pass R-hat and ESS, but leave 15.0 %"):
        report = check_convergence(_converged(n, rng), observed_labels=observed,
                                   label_marginals=marginals(3), source="Test")
    assert report.converged and report.stability.unsettled[2:5].all()
    assert issubclass(UnsettledLabelsWarning, ConvergenceWarning)
    assert UNSETTLED_WARN_FRACTION == 0.05
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = check_convergence(_converged(n, rng), observed_labels=observed,
                                   label_marginals=marginals(1))
    assert report.stability.fraction == pytest.approx(0.05)
