"""Tests for graphssl.metrics against hand-computed values."""

import math

import numpy as np
import pytest

from graphssl import metrics as M

Y_TRUE = np.array([0, 0, 0, 1, 1, 1, 2, 2])
Y_PRED = np.array([0, 0, 1, 1, 1, 2, 2, 0])
LABELED = np.array([0, 3])  # scored points: 1, 2, 4, 5, 6, 7


def test_accuracy_and_error_on_unlabeled_points():
    assert M.accuracy(Y_TRUE, Y_PRED) == pytest.approx(5 / 8)
    # unlabelled points 1,2,4,5,6,7: correct at 1, 4, 6 -> 3 / 6
    assert M.accuracy(Y_TRUE, Y_PRED, LABELED) == pytest.approx(0.5)
    assert M.error_rate(Y_TRUE, Y_PRED, LABELED) == pytest.approx(0.5)
    with_unreached = Y_PRED.copy()
    with_unreached[1] = -1  # a node no label reached counts as wrong
    assert M.accuracy(Y_TRUE, with_unreached, LABELED) == pytest.approx(2 / 6)
    assert M.accuracy(Y_TRUE.astype(float), Y_PRED.astype(float)) == pytest.approx(5 / 8)


def test_confusion_matrix_and_per_class_accuracy():
    expected = np.array([[2, 1, 0], [0, 2, 1], [1, 0, 1]])
    np.testing.assert_array_equal(M.confusion_matrix(Y_TRUE, Y_PRED), expected)
    np.testing.assert_array_equal(
        M.confusion_matrix(Y_TRUE, Y_PRED, labeled_idx=LABELED),
        [[1, 1, 0], [0, 1, 1], [1, 0, 1]],
    )
    rows = M.confusion_matrix(Y_TRUE, Y_PRED, normalize="true")
    np.testing.assert_allclose(rows, expected / [[3], [3], [2]])
    np.testing.assert_allclose(M.per_class_accuracy(Y_TRUE, Y_PRED), [2 / 3, 2 / 3, 1 / 2])
    np.testing.assert_allclose(M.confusion_matrix(Y_TRUE, Y_PRED, normalize="all").sum(), 1.0)
    big = M.confusion_matrix(Y_TRUE, Y_PRED, n_classes=4)
    assert big.shape == (4, 4) and big[3].sum() == 0
    acc = M.per_class_accuracy(Y_TRUE, Y_PRED, n_classes=4)
    assert np.isnan(acc[3])
    unreached = np.array([0, -1, 0])
    np.testing.assert_array_equal(M.confusion_matrix([0, 0, 1], unreached), [[1, 0], [1, 0]])


def _ami_reference(a, b):
    """AMI from its definition (Vinh, Epps & Bailey 2010, Eq. 24a, arithmetic mean)."""
    n = len(a)
    table = np.array([[np.sum((a == i) & (b == j)) for j in np.unique(b)] for i in np.unique(a)])
    rows, cols = table.sum(1), table.sum(0)
    mi = sum(t / n * math.log(n * t / (r * c))
             for i, r in enumerate(rows) for j, c in enumerate(cols)
             if (t := table[i, j]) > 0)
    h = lambda p: -sum(x / n * math.log(x / n) for x in p)  # noqa: E731
    emi = 0.0
    for r in rows:
        for c in cols:
            for k in range(max(1, r + c - n), min(r, c) + 1):
                log_p = (math.lgamma(r + 1) + math.lgamma(c + 1) + math.lgamma(n - r + 1)
                         + math.lgamma(n - c + 1) - math.lgamma(n + 1) - math.lgamma(k + 1)
                         - math.lgamma(r - k + 1) - math.lgamma(c - k + 1)
                         - math.lgamma(n - r - c + k + 1))
                emi += k / n * math.log(n * k / (r * c)) * math.exp(log_p)
    return (mi - emi) / (0.5 * (h(rows) + h(cols)) - emi)


def test_adjusted_mutual_info():
    assert M.adjusted_mutual_info(Y_TRUE, Y_TRUE) == pytest.approx(1.0)
    permuted = np.array([2, 0, 1])[Y_TRUE]  # same partition, other names
    assert M.adjusted_mutual_info(Y_TRUE, permuted) == pytest.approx(1.0)
    assert M.adjusted_mutual_info(Y_TRUE, Y_PRED) == pytest.approx(_ami_reference(Y_TRUE, Y_PRED))
    mask = M.evaluation_mask(8, LABELED)
    assert M.adjusted_mutual_info(Y_TRUE, Y_PRED, LABELED) == pytest.approx(
        _ami_reference(Y_TRUE[mask], Y_PRED[mask])
    )
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 3, 3000), rng.integers(0, 3, 3000)
    assert abs(M.adjusted_mutual_info(a, b)) < 0.01  # independent partitions -> about 0


PROBA = np.array([
    [0.95, 0.05],  # conf 0.95 -> bin (0.9, 1.0], predicts 0, true 0: hit
    [0.55, 0.45],  # conf 0.55 -> bin (0.5, 0.6], predicts 0, true 1: miss
    [0.30, 0.70],  # conf 0.70 -> bin (0.6, 0.7] (right edge), predicts 1, true 1: hit
    [0.10, 0.90],  # conf 0.90 -> bin (0.8, 0.9], predicts 1, true 0: miss
    [0.60, 0.40],  # conf 0.60 -> bin (0.5, 0.6], predicts 0, true 0: hit
])
PROBA_TRUE = np.array([0, 1, 1, 0, 0])


def test_reliability_table_and_ece():
    table = M.reliability_table(PROBA_TRUE, PROBA, n_bins=10)
    np.testing.assert_array_equal(table["count"], [0, 0, 0, 0, 0, 2, 1, 0, 1, 1])
    np.testing.assert_allclose(table["confidence"][[5, 6, 8, 9]], [0.575, 0.70, 0.90, 0.95])
    np.testing.assert_allclose(table["accuracy"][[5, 6, 8, 9]], [0.5, 1.0, 0.0, 1.0])
    assert np.isnan(table["accuracy"][0])
    # ECE = (2 |0.5 - 0.575| + |1 - 0.7| + |0 - 0.9| + |1 - 0.95|) / 5
    expected = (2 * 0.075 + 0.3 + 0.9 + 0.05) / 5
    assert M.expected_calibration_error(PROBA_TRUE, PROBA, n_bins=10) == pytest.approx(expected)
    # one bin: |accuracy - mean confidence| = |3/5 - 3.7/5|
    assert M.expected_calibration_error(PROBA_TRUE, PROBA, n_bins=1) == pytest.approx(0.14)
    # scored on points 1..4 only
    assert M.expected_calibration_error(
        PROBA_TRUE, PROBA, n_bins=1, labeled_idx=np.array([0])
    ) == pytest.approx(abs(2 / 4 - (0.55 + 0.7 + 0.9 + 0.6) / 4))
    perfect = np.eye(2)[PROBA_TRUE]
    assert M.expected_calibration_error(PROBA_TRUE, perfect) == pytest.approx(0.0)


def test_map_posterior_disagreement():
    map_labels = np.array([0, 0, 1, 1, 0])
    # posterior-mean arg-max of PROBA: 0, 0, 1, 1, 0 -> agrees everywhere
    assert M.map_posterior_disagreement(map_labels, PROBA) == 0.0
    other = np.array([1, 0, 1, 0, 0])
    assert M.map_posterior_disagreement(other, PROBA) == pytest.approx(2 / 5)
    assert M.map_posterior_disagreement(other, map_labels, np.array([0])) == pytest.approx(1 / 4)


def test_summary():
    out = M.summary(PROBA_TRUE, PROBA.argmax(1), PROBA)
    assert out["accuracy"] == pytest.approx(3 / 5) and out["error"] == pytest.approx(2 / 5)
    assert set(out) == {"accuracy", "error", "ami", "ece"}


def test_bad_input_errors():
    with pytest.raises(ValueError, match="same length"):
        M.accuracy([0, 1], [0, 1, 1])
    with pytest.raises(ValueError, match="integer class labels"):
        M.accuracy([0, 1], [0.5, 1])
    with pytest.raises(ValueError, match="no -1"):
        M.accuracy([0, -1], [0, 1])
    with pytest.raises(ValueError, match="labeled_idx must lie"):
        M.accuracy([0, 1], [0, 1], np.array([2]))
    with pytest.raises(ValueError, match="nothing is left"):
        M.accuracy([0, 1], [0, 1], np.array([0, 1]))
    with pytest.raises(ValueError, match="sum to 1"):
        M.expected_calibration_error([0, 1], [[0.5, 0.6], [0.5, 0.5]])
    with pytest.raises(ValueError, match="float\\[n, C\\]"):
        M.expected_calibration_error([0, 1], [0.5, 0.5])
    with pytest.raises(ValueError, match="n_bins"):
        M.reliability_table([0, 1], np.eye(2), n_bins=0)
    with pytest.raises(ValueError, match="normalize"):
        M.confusion_matrix([0, 1], [0, 1], normalize="rows")
    with pytest.raises(ValueError, match="n_classes"):
        M.confusion_matrix([0, 2], [0, 1], n_classes=2)
    with pytest.raises(ValueError, match="describe the"):
        M.map_posterior_disagreement([0, 1, 1], [0, 1])


def test_hand_written_metrics_equal_scikit_learn():
    """accuracy, confusion_matrix and per_class_accuracy stay hand-written because they are
    measured faster (benchmarks/bench_host_utilities.py); they must equal sklearn.metrics,
    -1 predictions included (wrong in accuracy and recall, left out of the matrix)."""
    from sklearn import metrics as sk

    rng = np.random.default_rng(3)
    truth = rng.integers(0, 5, 400)
    truth[truth == 2] = 3  # a class with no true point: recall NaN
    pred = np.where(rng.random(400) < 0.1, -1, rng.integers(0, 5, 400))
    labels = np.arange(5)
    assert M.accuracy(truth, pred) == pytest.approx(sk.accuracy_score(truth, pred), abs=0)
    np.testing.assert_array_equal(M.confusion_matrix(truth, pred, 5),
                                  sk.confusion_matrix(truth, pred, labels=labels))
    for how in ("true", "pred", "all"):
        np.testing.assert_allclose(
            M.confusion_matrix(truth, pred, 5, normalize=how),
            sk.confusion_matrix(truth, pred, labels=labels, normalize=how), rtol=1e-12)
    np.testing.assert_allclose(
        M.per_class_accuracy(truth, pred, 5),
        sk.recall_score(truth, pred, labels=labels, average=None, zero_division=np.nan),
        rtol=1e-12)


def test_an_empty_split_row_scores_every_point():
    """``labeled_idx=[]`` (an empty split row; ``np.asarray([])`` is float) gave a bare
    IndexError."""
    t, p = np.array([0, 1, 2, 1]), np.array([0, 2, 2, 1])
    assert M.accuracy(t, p, labeled_idx=[]) == M.accuracy(t, p) == 0.75


def test_per_class_accuracy_refuses_labels_past_n_classes_like_confusion_matrix():
    """``n_classes=2`` with labels reaching 2 returned three recalls."""
    t, p = np.array([0, 1, 2, 1, 0, 2]), np.array([0, 2, 2, 1, 0, 0])
    for metric in (M.per_class_accuracy, M.confusion_matrix):
        with pytest.raises(ValueError, match=r"^n_classes: labels reach 2 but n_classes = 2"):
            metric(t, p, n_classes=2)
    np.testing.assert_allclose(M.per_class_accuracy(t, p, n_classes=3), [1, 0.5, 0.5])


def test_calibration_refuses_proba_with_fewer_columns_than_the_classes():
    """Three classes scored against two probability columns returned an ECE of 0.17."""
    t = np.array([0, 1, 2, 1, 0, 2])
    with pytest.raises(ValueError, match=r"^y_true: labels 0..2 .* 2 class columns"):
        M.expected_calibration_error(t, np.full((6, 2), 0.5))
    assert M.expected_calibration_error(t, np.full((6, 3), 1 / 3)) >= 0
