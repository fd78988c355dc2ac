"""Bad input to graphssl.data: user ``.npz`` files, citation arrays, split helpers and seeds.

Every case is refused with a ``ValueError`` naming the file or argument (or, for overlapping
citation splits, warned about), never misread, truncated, wrapped or crashed on.
"""

import re
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from graphssl import data as D

X80 = np.random.default_rng(0).normal(size=(80, 2))
Y80 = np.repeat([0, 1], 40)


def _save(folder, name="user", **arrays):
    np.savez(folder / f"{name}.npz", **arrays)
    return name


# ------------------------------------------------------------------ load_npz labels (S1)
def test_npz_unlabelled_rows_are_not_a_class(tmp_path):
    y = Y80.copy()
    y[5:40] = -1
    y[45:] = -1
    ds = D.load_npz(_save(tmp_path, X=X80, y=y), tmp_path)
    np.testing.assert_array_equal(ds.classes, [0, 1])
    np.testing.assert_array_equal(ds.y, y)
    assert ds.n_classes == 2


def test_npz_class_values_are_reencoded_to_codes(tmp_path):
    y = np.where(Y80 == 0, 3, 7)
    y[:10] = -1
    ds = D.load_npz(_save(tmp_path, X=X80, y=y), tmp_path)
    np.testing.assert_array_equal(ds.classes, [3, 7])
    np.testing.assert_array_equal(ds.y[:10], -1)
    np.testing.assert_array_equal(ds.classes[ds.y[10:]], y[10:])


def test_npz_stored_classes_name_the_codes(tmp_path):
    ds = D.load_npz(_save(tmp_path, X=X80, y=Y80, classes=np.array(["a", "b"])), tmp_path)
    np.testing.assert_array_equal(ds.classes, ["a", "b"])
    np.testing.assert_array_equal(ds.y, Y80)
    name = _save(tmp_path, "short", X=X80, y=Y80, classes=np.array(["a"]))
    with pytest.raises(ValueError, match=r"short\.npz: 'classes' holds 1 name"):
        D.load_npz(name, tmp_path)


# ------------------------------------------------------------------ corrupt files (C1, C4)
def _corrupt_csr(**changes):
    arrays = dict(data=np.ones(2), indices=np.array([0, 1]), indptr=np.array([0, 1, 2]),
                  shape=np.array([2, 3]), y=np.array([0, 1]))
    return {**arrays, **changes}


@pytest.mark.parametrize("changes", [
    {"indices": np.array([0, 5])},      # past the last column: written outside the array
    {"indices": np.array([0, -1])},
    {"indptr": np.array([0, 2, 1])},
    {"shape": np.array([2])},
])
def test_npz_corrupt_csr_is_refused_before_use(tmp_path, changes):
    name = _save(tmp_path, **_corrupt_csr(**changes))
    with pytest.raises(ValueError, match=r"user\.npz: "):
        D.load_npz(name, tmp_path)
    with pytest.raises(ValueError, match=r"user\.npz: "):
        D.load_npz(name, tmp_path, dense=False)


def test_npz_valid_csr_still_loads(tmp_path):  # guard: valid input unchanged
    ds = D.load_npz(_save(tmp_path, **_corrupt_csr()), tmp_path, dense=False)
    np.testing.assert_array_equal(ds.X.toarray(), [[1, 0, 0], [0, 1, 0]])


def _unreadable_files(folder):
    real = folder / "real.npz"
    np.savez(real, X=X80, y=Y80)
    (folder / "trunc.npz").write_bytes(real.read_bytes()[:300])
    (folder / "empty.npz").write_bytes(b"")
    np.save(folder / "single.npy", X80)
    (folder / "single.npz").write_bytes((folder / "single.npy").read_bytes())
    return ["trunc", "empty", "single"]


def test_npz_unreadable_file_is_a_value_error_naming_it(tmp_path):
    for name in _unreadable_files(tmp_path):
        with pytest.raises(ValueError, match=rf"{name}\.npz .*(readable|not a \.npz)"):
            D.load_npz(name, tmp_path)
    with pytest.raises(ValueError, match=r"noy\.npz holds no labels 'y'"):
        D.load_npz(_save(tmp_path, "noy", X=X80), tmp_path)


def test_citation_unreadable_file_is_a_value_error_naming_it(tmp_path):
    for name in _unreadable_files(tmp_path):
        with pytest.raises(ValueError, match=rf"{name}\.npz .*(readable|not a \.npz)"):
            D.load_citation(name, tmp_path)


def _citation_arrays(**changes):
    csr = sp.csr_matrix(np.eye(4))
    arrays = dict(data=csr.data, indices=csr.indices, indptr=csr.indptr,
                  shape=np.array(csr.shape), y=np.array([0, 0, 1, 1]),
                  edges=np.array([[0, 1], [2, 3]]), split_train=np.array([0, 2]))
    return {**arrays, **changes}


def test_citation_corrupt_csr_is_refused(tmp_path):
    name = _save(tmp_path, "cite", **_citation_arrays(indices=np.array([0, 1, 2, 9])))
    with pytest.raises(ValueError, match=r"cite\.npz: the CSR arrays"):
        D.load_citation(name, tmp_path)
    bad = sp.csr_matrix(np.eye(4))
    bad.indices[3] = 9
    with pytest.raises(ValueError, match="features: not a valid sparse matrix"):
        D.citation_from_arrays([[0, 1]], bad, [0, 0, 1, 1], [0, 2])


# ------------------------------------------------------------------ inconsistent .npz (U3)
@pytest.mark.parametrize(("arrays", "match"), [
    ({"X": X80, "y": Y80[:70]}, r"user\.npz: y: has 70 entries but the features have 80"),
    ({"X": X80, "y": np.r_[np.zeros(40), np.full(40, 0.7)]}, r"user\.npz: y: labels must"),
    ({"X": X80, "y": Y80, "splits_labeled_2": np.array([[0, 500]])},
     r"user\.npz: splits_labeled_2: node indices must lie in 0\.\.79"),
    ({"X": X80, "y": Y80, "splits_labeled_2": np.array([[0.5, 3]])},
     r"user\.npz: splits_labeled_2: indices must be whole"),
    ({"X": X80[:, 0], "y": Y80}, r"user\.npz: X must be 2-D"),
])
def test_npz_inconsistent_arrays_are_refused(tmp_path, arrays, match):
    with pytest.raises(ValueError, match=match):
        D.load_npz(_save(tmp_path, **arrays), tmp_path)


def test_npz_whole_float_labels_and_one_row_split_load(tmp_path):
    ds = D.load_npz(_save(tmp_path, X=X80, y=Y80.astype(float),
                          splits_labeled_2=np.array([0, 50])), tmp_path)
    np.testing.assert_array_equal(ds.y, Y80)
    np.testing.assert_array_equal(D.fixed_splits(ds, 2), [[0, 50]])


# ------------------------------------------------------------------ citation splits (S2, M4, M7)
def _cite(split_train, **kwargs):
    return D.citation_from_arrays(np.array([[0, 1], [2, 3]]), np.eye(4), [0, 0, 1, 1],
                                  split_train, **kwargs)


def test_citation_bool_mask_is_a_mask_not_indices(tmp_path):
    mask = np.array([True, False, True, False])
    assert _cite(mask).train_mask.tolist() == mask.tolist()
    assert _cite([0, 2]).train_mask.tolist() == mask.tolist()
    assert _cite(np.array([0.0, 2.0])).train_mask.tolist() == mask.tolist()
    name = _save(tmp_path, "cite", **_citation_arrays(split_train=mask,
                                                      split_test=~mask))
    loaded = D.load_citation(name, tmp_path)
    assert loaded.train_mask.tolist() == mask.tolist()
    assert loaded.test_mask.tolist() == (~mask).tolist()
    with pytest.raises(ValueError, match=r"split_train: a boolean mask needs one entry per node"):
        _cite(np.array([True, False]))


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"split_train": [0.7, 2.9]}, "split_train: indices must be whole numbers"),
    ({"split_train": [0, 2], "split_val": [1.5]}, "split_val: indices must be whole"),
    ({"split_train": [0, 2], "split_test": [2.5]}, "split_test: indices must be whole"),
])
def test_citation_fractional_or_out_of_range_split_is_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        _cite(**kwargs)


def test_citation_fractional_edges_are_refused():
    with pytest.raises(ValueError, match="edges: indices must be whole numbers"):
        D.citation_from_arrays(np.array([[0.9, 1.9], [2.5, 3.5]]), np.eye(4), [0, 0, 1, 1],
                               [0, 2])


def test_citation_file_errors_name_the_file(tmp_path):
    name = _save(tmp_path, "cite", **_citation_arrays(split_train=np.array([0.5])))
    with pytest.raises(ValueError, match=r"cite\.npz: split_train: indices must be whole"):
        D.load_citation(name, tmp_path)


def test_citation_test_split_overlapping_train_warns():
    with pytest.warns(UserWarning, match=r"split_train and split_test share 2 node\(s\)"):
        _cite([0, 2], split_test=[0, 2])
    with pytest.warns(UserWarning, match=r"split_train and split_val share 1 node\(s\)"):
        _cite([0, 2], split_val=[2, 3])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _cite([0, 2], split_val=[1], split_test=[3])


# ------------------------------------------------------------------ unlabeled_indices (S3)
@pytest.mark.parametrize(("labeled_idx", "match"), [
    ([-1], r"labeled_idx must lie in \[0, 5\)"),
    ([7], r"labeled_idx must lie in \[0, 5\)"),
    ([1.7], "labeled_idx must be a 1-D integer array"),
    (np.array([True, False, False, False, False]), "labeled_idx .*boolean mask"),
    ([[0, 1]], "labeled_idx must be a 1-D integer array"),
])
def test_unlabeled_indices_checks_like_mask_labels(labeled_idx, match):
    with pytest.raises(ValueError, match=match):
        D.unlabeled_indices(5, labeled_idx)


def test_unlabeled_indices_valid_input():
    np.testing.assert_array_equal(D.unlabeled_indices(5, [0, 3]), [1, 2, 4])
    np.testing.assert_array_equal(D.unlabeled_indices(5, np.array([4], np.int32)), [0, 1, 2, 3])
    np.testing.assert_array_equal(D.unlabeled_indices(5, []), [0, 1, 2, 3, 4])
    with pytest.raises(ValueError, match="n must be a non-negative integer"):
        D.unlabeled_indices(5.5, [1])


# ------------------------------------------------------------------ random_splits seeds (C5)
Y17 = np.array([0] * 10 + [1] * 7)


def test_random_splits_accept_none_generator_and_seed_sequence():
    fresh = D.random_splits(Y17, 0.5, n_splits=3, seed=None)
    assert fresh.shape == (3, 8)
    rng = np.random.default_rng(0)
    first, second = (D.random_splits(Y17, 0.5, n_splits=3, seed=rng) for _ in range(2))
    assert not np.array_equal(first, second)  # the generator advances
    again = D.random_splits(Y17, 0.5, n_splits=3, seed=np.random.default_rng(0))
    np.testing.assert_array_equal(first, again)
    sequence = D.random_splits(Y17, 0.5, n_splits=3, seed=np.random.SeedSequence(4))
    np.testing.assert_array_equal(
        sequence, D.random_splits(Y17, 0.5, n_splits=3, seed=np.random.SeedSequence(4)))
    for rows in (fresh, first, sequence):
        assert len({tuple(r) for r in rows}) == 3
        assert all(set(Y17[r]) == {0, 1} for r in rows)


def test_random_splits_int_seed_keeps_its_splits():  # guard: same splits as before
    rows = D.random_splits(Y17, 0.5, n_splits=3, seed=5)
    for i, row in enumerate(rows):
        np.testing.assert_array_equal(row, D.random_split(Y17, 0.5, seed=[5, i]))


@pytest.mark.parametrize("seed", [-1, "a", 1.5])
def test_bad_seed_names_seed(seed):
    with pytest.raises(ValueError, match="seed: use None, a non-negative int"):
        D.random_splits(Y17, 0.5, n_splits=2, seed=seed)
    with pytest.raises(ValueError, match="seed: use None, a non-negative int"):
        D.random_split(Y17, 0.5, seed=seed)


# ------------------------------------------------------------------ argument names (U1)
def test_label_rate_too_small_names_label_rate_and_the_fix():
    with pytest.raises(ValueError, match=r"label_rate=0\.05 of 17 points gives 0 labelled "
                                         r"point.*raise label_rate to at least 0\.12") as info:
        D.random_split(Y17, label_rate=0.05)
    assert "n_labeled" not in str(info.value)
    least = float(re.search(r"at least ([0-9.]+)", str(info.value)).group(1))
    assert set(Y17[D.random_split(Y17, label_rate=least)]) == {0, 1}
    y = np.repeat([0, 1, 2], 300)
    with pytest.raises(ValueError, match=r"label_rate=0\.002 of 900 points gives 1 .*0\.0034"):
        D.random_split(y, 0.002)
    assert len(D.random_split(y, 0.0034)) == 3


def test_label_count_errors_use_the_callers_name():
    with pytest.raises(ValueError, match=r"--label-rate=0\.0001 of 17 points .*raise "
                                         r"--label-rate to at least"):
        D.random_splits(Y17, 0.0001, n_splits=2, name="--label-rate")
    with pytest.raises(ValueError, match=r"--label-rate: a finite number in \(0, 1\]"):
        D.random_split(Y17, 2.0, name="--label-rate")
    with pytest.raises(ValueError, match=r"label_rate: a finite number in \(0, 1\]"):
        D.random_split(Y17, "0.5")
    with pytest.raises(ValueError, match=r"--n-labeled: a whole number in 1\.\.17"):
        D.random_split(Y17, n_labeled=2.0, name="--n-labeled")


def test_subsample_errors_name_n():
    ds = D.load_dataset("three_clusters", n=30)
    with pytest.raises(ValueError, match=r"^n = 2 is below the number of classes \(3\)"):
        D.subsample(ds, 2)
    with pytest.raises(ValueError, match=r"^n: a whole number in 1\.\.30, got 1000"):
        D.subsample(ds, 1000)
