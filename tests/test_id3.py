"""ID3 (information-gain decision tree), the Table 1 baseline of Blum & Chawla (2001):
hand-checked gains and tree on the PlayTennis table (Mitchell 1997, Table 3.2), numeric
thresholds, unseen values, windowing and bad input."""

import numpy as np
import pytest

from graphssl.reproductions.id3 import ID3Classifier, best_threshold, categorical_gain, entropy

# outlook, temperature, humidity, wind -> play
_TENNIS = """
sunny hot high weak no
sunny hot high strong no
overcast hot high weak yes
rain mild high weak yes
rain cool normal weak yes
rain cool normal strong no
overcast cool normal strong yes
sunny mild high weak no
sunny cool normal weak yes
rain mild normal weak yes
sunny mild normal strong yes
overcast mild high strong yes
overcast hot normal weak yes
rain mild high strong no
"""


@pytest.fixture(scope="module")
def tennis():
    rows = np.array([line.split() for line in _TENNIS.strip().splitlines()])
    return rows[:, :4], rows[:, 4]


def test_entropy_and_gains_by_hand(tennis):
    X, y = tennis
    codes = (y == "yes").astype(int)
    # H(9 yes, 5 no) = -(9/14) log2(9/14) - (5/14) log2(5/14)
    h = -(9 / 14) * np.log2(9 / 14) - (5 / 14) * np.log2(5 / 14)
    assert entropy([9, 5]) == pytest.approx(h) == pytest.approx(0.940, abs=5e-4)
    assert entropy([0, 0]) == 0.0 and entropy([7, 0]) == 0.0
    # outlook: sunny 2+/3-, overcast 4+/0-, rain 3+/2-
    outlook = h - 5 / 14 * entropy([2, 3]) - 4 / 14 * 0.0 - 5 / 14 * entropy([3, 2])
    gains = [categorical_gain(X[:, a], codes, 2) for a in range(4)]
    assert gains[0] == pytest.approx(outlook) == pytest.approx(0.2467, abs=1e-4)
    np.testing.assert_allclose(gains[1:], [0.0292, 0.1518, 0.0481], atol=1e-4)


def test_tree_is_the_textbook_tree(tennis):
    X, y = tennis
    clf = ID3Classifier(categorical="all").fit(X, y)
    root = clf.tree_
    assert root.attribute == 0  # outlook
    assert root.children["overcast"].attribute == -1
    assert clf.classes_[root.children["overcast"].prediction] == "yes"
    assert root.children["sunny"].attribute == 2  # humidity
    assert root.children["rain"].attribute == 3  # wind
    assert clf.depth() == 2
    assert np.all(clf.predict(X) == y)
    # an outlook value never seen: the root's majority (9 yes of 14)
    assert clf.predict(np.array([["foggy", "hot", "high", "weak"]]))[0] == "yes"
    # unseen humidity under "sunny": that node's majority (3 no of 5)
    assert clf.predict(np.array([["sunny", "hot", "?", "weak"]]))[0] == "no"
    np.testing.assert_allclose(clf.predict_proba(X).sum(axis=1), 1.0)


def test_numeric_threshold_and_reuse():
    x = np.array([1.0, 2.0, 3.0, 10.0, 11.0, 12.0])
    y = np.array([0, 0, 0, 1, 1, 1])
    gain, t = best_threshold(x, y, 2)
    assert gain == pytest.approx(1.0) and t == pytest.approx(6.5)
    assert best_threshold(np.ones(4), np.array([0, 1, 0, 1]), 2)[0] == -np.inf
    # an interval class needs the numeric attribute twice on one path
    x2 = np.arange(9.0)[:, None]
    y2 = np.array([0, 0, 0, 1, 1, 1, 0, 0, 0])
    clf = ID3Classifier().fit(x2, y2)
    assert np.all(clf.predict(x2) == y2) and clf.depth() == 2
    assert clf.predict(np.array([[4.4], [100.0]])).tolist() == [1, 0]


def test_mixed_attributes_and_windowing(tennis):
    X, y = tennis
    rng = np.random.default_rng(0)
    Xm = np.column_stack([X, rng.normal(size=X.shape[0]).round(3)]).astype(object)
    clf = ID3Classifier(categorical=[0, 1, 2, 3], window=0.3, random_state=1).fit(Xm, y)
    assert clf.n_windows_ >= 1
    assert np.all(clf.predict(Xm) == y)  # windowing stops once every example is right
    assert not ID3Classifier(categorical="all", min_gain=0.5).fit(X, y).depth()


def test_bad_input_is_rejected(tennis):
    X, y = tennis
    with pytest.raises(ValueError, match="categorical"):
        ID3Classifier(categorical="some").fit(X, y)
    with pytest.raises(ValueError, match="window"):
        ID3Classifier(categorical="all", window=1.5).fit(X, y)
    with pytest.raises(ValueError, match="y"):
        ID3Classifier(categorical="all").fit(X, y[:3])
    with pytest.raises(ValueError, match="columns"):
        ID3Classifier(categorical="all").fit(X, y).predict(X[:, :2])
