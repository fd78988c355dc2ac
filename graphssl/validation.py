"""Input checks shared by every builder, model and estimator.

Each check raises ``ValueError`` naming the offending argument and saying how to fix it.

Labels (:func:`encode_labels`): any hashable class values (numbers, strings, categories).
Unlabelled points are marked by ``-1`` (numeric labels; ``NaN`` too for float labels) and by
``None``, ``""``, ``NaN`` or pandas's ``NA`` for labels of any other type (strings, objects,
a pandas categorical or nullable column with missing values). :data:`UNLABELLED` is ``-1``.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp

from graphssl._warnings import warn_user

__all__ = [
    "UNLABELLED",
    "UnreachedNodesWarning",
    "check_features",
    "check_flag",
    "check_label_codes",
    "check_count",
    "check_labels",
    "check_pairs",
    "check_real",
    "check_scalar",
    "check_state_codes",
    "check_k",
    "check_same_length",
    "encode_labels",
    "is_whole",
    "labelled_values",
    "warn_conflicting_duplicates",
    "seed_from_random_state",
]

UNLABELLED = -1
_FLOAT_MAX = np.finfo(np.float64).max
# below this magnitude squared distances underflow to 0 (sqrt of the smallest normal)
_FLOAT_SMALL = float(np.sqrt(np.finfo(np.float64).tiny))


class UnreachedNodesWarning(UserWarning):
    """Some unlabelled nodes lie in connected components without any labelled node."""


def check_features(X, *, name: str = "X", accept_sparse: bool = False):
    """A finite, non-empty 2-D float array whose squared distances cannot overflow.

    ``accept_sparse=True`` returns scipy sparse input as float64 CSR (kept sparse); otherwise
    sparse input is refused with a hint. Object arrays of numbers are converted; complex,
    non-numeric, NaN or inf values and magnitudes whose squared pairwise distances would
    overflow (about 1e150) or underflow (about 1e-154) float64 give a ``ValueError``.
    """
    if sp.issparse(X):
        if not accept_sparse:
            raise ValueError(
                f"{name}: sparse input is not supported here; pass {name}.toarray(), or give a "
                "graph and sparse node features to fit_graph(graph, y, X=...)"
            )
        X = sp.csr_matrix(X, dtype=np.float64)
        _check_shape(X.shape, name)
        _check_finite(X.data, name, rows=None)
        _check_magnitude(X.data, X.shape, name)
        return X
    X = _as_float_array(X, name)
    _check_shape(X.shape, name)
    _check_finite(X, name, rows=True)
    _check_magnitude(X, X.shape, name)
    return X


def _as_float_array(X, name: str) -> np.ndarray:
    X = np.asarray(X)
    if np.iscomplexobj(X):
        raise ValueError(f"{name}: Complex data not supported; pass the real part or |z|")
    if X.ndim == 1:
        raise ValueError(
            f"{name}: expected a 2-D array [n_samples, n_features], got 1-D; Reshape your data "
            "with X.reshape(-1, 1) (one feature) or X.reshape(1, -1) (one sample)"
        )
    if X.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array [n_samples, n_features], got {X.ndim}-D")
    if X.dtype == object:
        try:
            X = X.astype(np.float64)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{name}: features must be numeric ({error})") from None
    if not (np.issubdtype(X.dtype, np.number) or X.dtype == bool):
        raise ValueError(f"{name}: features must be numeric, got dtype {X.dtype}")
    return X


def _check_shape(shape, name: str) -> None:
    if shape[0] == 0:
        raise ValueError(f"{name}: no samples (the graph would be empty)")
    if shape[1] == 0:
        raise ValueError(
            f"{name}: 0 feature(s) (shape={shape}) while a minimum of 1 is required; "
            "pass at least one feature column"
        )


def _check_finite(values, name: str, rows) -> None:
    bad = ~np.isfinite(values)
    if not bad.any():
        return
    if rows:
        where = np.unique(np.nonzero(bad)[0])
        raise ValueError(
            f"{name}: {where.size} rows contain NaN or inf (first: {where[:5].tolist()}); "
            "impute or drop them"
        )
    raise ValueError(f"{name}: {int(bad.sum())} entries are NaN or inf; impute or drop them")


def _check_magnitude(values, shape, name: str) -> None:
    """Squared distances ``sum_d (x_i - x_j)^2`` and the sums over all points of
    ``|x_i|^2`` (Walder's omega) must stay finite and must not vanish."""
    if values.size == 0:
        return
    largest = float(np.max(np.abs(values)))
    n, d = shape
    limit = np.sqrt(_FLOAT_MAX / (4.0 * d * max(n, 4)))
    if largest > limit:
        raise ValueError(
            f"{name}: features as large as {largest:.3g} overflow squared distances in float64 "
            f"(limit {limit:.3g} for {n} x {d}); standardise {name} (e.g. "
            "sklearn.preprocessing.StandardScaler) or divide it by its largest value"
        )
    if 0.0 < largest < _FLOAT_SMALL:
        raise ValueError(
            f"{name}: features no larger than {largest:.3g} underflow squared distances to 0; "
            f"rescale {name} (e.g. divide it by its largest value)"
        )


def check_same_length(n: int, array, name: str, *, against: str = "X has {n} rows") -> None:
    """``array`` must have ``n`` rows; ``against`` says what has ``n`` (formatted with it)."""
    if len(array) != n:
        raise ValueError(f"{name}: has {len(array)} entries but {against.format(n=n)}; "
                         "align them")


def _unlabelled_mask(y: np.ndarray) -> np.ndarray:
    """``-1`` (and ``NaN``) for numeric labels; ``None``, ``""``, ``NaN`` (or ``-1``) else."""
    if y.dtype.kind in "iu":
        return y == UNLABELLED
    if y.dtype.kind == "f":
        return (y == UNLABELLED) | np.isnan(y)
    if y.dtype.kind == "b":
        return np.zeros(y.shape, dtype=bool)
    if y.dtype.kind in "US":
        return y == y.dtype.type("")

    def missing(value) -> bool:
        if value is None or (isinstance(value, str) and value == "") or _is_pandas_missing(value):
            return True
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            return value == UNLABELLED or value != value
        return False

    return np.fromiter((missing(v) for v in y), dtype=bool, count=y.size)


def _is_pandas_missing(value) -> bool:
    """``pd.NA`` / ``pd.NaT`` (checked by type, so pandas is not imported)."""
    kind = type(value)
    return kind.__module__.startswith("pandas") and kind.__name__ in ("NAType", "NaTType")


def _as_label_array(y) -> np.ndarray:
    """``y`` as a NumPy array; a pandas extension array (nullable ``Int64``, ``string``,
    ``boolean``) becomes an object array with ``None`` where it is missing, so that its
    ``pd.NA`` marks a point unlabelled."""
    dtype = getattr(y, "dtype", None)
    if dtype is not None and not isinstance(dtype, np.dtype) and hasattr(y, "to_numpy"):
        return y.to_numpy(dtype=object, na_value=None)
    return np.asarray(y)


def _narrowed(values: np.ndarray) -> np.ndarray:
    """An object array whose values are all of one type as that type's NumPy array (the
    labelled values of a nullable ``Int64`` column come back as integers, not objects)."""
    if values.dtype != object or values.size == 0 or len({type(v) for v in values}) != 1:
        return values
    narrowed = np.asarray(values.tolist())
    return narrowed if narrowed.dtype != object and narrowed.shape == values.shape else values


def _check_not_mixed(labelled: np.ndarray, name: str) -> None:
    """Strings mixed with other values (``[1, "a"]``) cannot be ordered into classes."""
    if labelled.dtype != object:
        return
    is_text = [isinstance(v, str) for v in labelled]
    if any(is_text) and not all(is_text):
        kinds = sorted({type(v).__name__ for v in labelled})
        raise ValueError(f"{name}: labels of mixed types ({', '.join(kinds)}); give every "
                         "class label the same type, e.g. all strings")


def encode_labels(y, n: int, *, name: str = "y") -> tuple[np.ndarray, np.ndarray]:
    """Class values and ``int64[n]`` codes in ``0..C-1`` (``-1`` for unlabelled).

    ``y`` holds labels of any type; unlabelled points are ``-1`` for numeric labels (``NaN``
    too for floats) and ``None``, ``""`` or ``NaN`` for any other type (see the module
    docstring). Returns ``(classes, codes)`` with ``classes`` sorted, so that
    ``classes[codes[i]]`` is point i's label. A column vector ``[n, 1]`` is accepted with a
    ``DataConversionWarning`` (scikit-learn's rule); continuous targets, fewer than two
    classes or no labelled point give a ``ValueError``.
    """
    from sklearn.utils.multiclass import type_of_target
    from sklearn.utils.validation import column_or_1d

    if y is None:
        raise ValueError(f"{name}: the target y is None; give -1 (or None) for unlabelled points")
    y = _as_label_array(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = column_or_1d(y, warn=True)
    if y.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D label vector, got shape {y.shape}")
    check_same_length(n, y, name)
    unlabelled = _unlabelled_mask(y)
    labelled = _narrowed(y[~unlabelled])
    if labelled.size == 0:
        raise ValueError(
            f"{name}: no labelled point (every label is unlabelled: -1, None, '' or NaN); "
            "label at least one point of each class"
        )
    _check_not_mixed(labelled, name)
    kind = type_of_target(labelled, input_name=name)
    if kind not in ("binary", "multiclass"):
        raise ValueError(
            f"{name}: Unknown label type: {kind!r}; give class labels (integers, strings, ...) "
            "with -1 for unlabelled, not a continuous or multi-output target"
        )
    try:
        classes, codes = np.unique(labelled, return_inverse=True)
    except TypeError as error:
        raise ValueError(f"{name}: labels of mixed types cannot be ordered ({error})") from None
    if classes.size < 2:
        raise ValueError(
            f"{name}: only one class ({classes[0]!r}) among the labelled points; "
            "label at least one point of a second class"
        )
    encoded = np.full(n, -1, dtype=np.int64)
    encoded[~unlabelled] = codes.ravel()
    return classes, encoded


def labelled_values(y, n: int, *, name: str = "y") -> tuple[np.ndarray, np.ndarray]:
    """``(rows int[L], values [L])``: where ``y`` (one label per row of ``X``'s ``n``) holds
    a label and what it is, by the rules of :func:`encode_labels` (``-1`` / ``NaN`` /
    ``None`` / ``""`` / ``pd.NA`` mark a point unlabelled); for scoring predictions on the
    labelled points only."""
    y = _as_label_array(y)
    if y.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D label vector, got shape {y.shape}")
    check_same_length(n, y, name)
    rows = np.flatnonzero(~_unlabelled_mask(y))
    return rows, _narrowed(y[rows])


def warn_conflicting_duplicates(X, labels: np.ndarray, classes, *, name: str = "y") -> int:
    """Warn when identical rows of ``X`` carry different labels (each keeps its own; the
    graph joins them at distance 0, so they pull against each other).
    Returns the number of such groups. ``labels``: codes, ``-1`` unlabelled; only labelled
    rows are compared (``L`` of them, so this is cheap)."""
    rows = np.flatnonzero(labels >= 0)
    if rows.size < 2 or sp.issparse(X):
        return 0
    _, group = np.unique(np.asarray(X)[rows], axis=0, return_inverse=True)
    group = group.ravel()
    first = np.full(group.max() + 1, -1)
    first[group] = labels[rows]  # one label a group (the last written)
    conflicting = np.unique(group[labels[rows] != first[group]])
    if conflicting.size:
        example = rows[group == conflicting[0]]
        shown = ", ".join(f"row {i}: {classes[labels[i]].tolist()!r}" for i in example[:4])
        warn_user(f"{name}: {conflicting.size} group(s) of identical rows of X carry different "
                  f"labels ({shown}); each point keeps its own label. Check the labels, or drop "
                  "the duplicates.", UserWarning)
    return int(conflicting.size)


def check_label_codes(y, n: int, *, n_classes: int | None = None, name: str = "labels",
                      against: str = "X has {n} rows") -> np.ndarray:
    """Integer codes in ``0..C-1`` with ``-1`` for unlabelled, one per row or node (``n``;
    ``against`` says what has ``n``, as in :func:`check_same_length`), below ``n_classes``
    when given. Whole-valued floats are accepted. No rule on how many are labelled (the
    numpyro programs sample with none); :func:`check_labels` adds those.

    Returns an ``int64`` copy.
    """
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D label vector, got shape {y.shape}")
    check_same_length(n, y, name, against=against)
    whole_floats = (np.issubdtype(y.dtype, np.floating) and np.all(np.isfinite(y))
                    and np.all(np.equal(np.mod(y, 1), 0)))
    if not (np.issubdtype(y.dtype, np.integer) or whole_floats):
        raise ValueError(
            f"{name}: labels must be integers in 0..C-1, or -1 for unlabelled (got dtype "
            f"{y.dtype}); encode other labels with graphssl.validation.encode_labels (the "
            "estimators do this for you)"
        )
    y = y.astype(np.int64)
    if np.any(y < -1):
        raise ValueError(f"{name}: labels below -1 found; use -1 for unlabelled, 0..C-1 otherwise")
    if n_classes is not None and np.any(y >= n_classes):
        raise ValueError(f"{name}: labels must be < n_classes={n_classes}; found {y.max()}")
    return y


def check_labels(y, n: int, *, n_classes: int | None = None, name: str = "y") -> np.ndarray:
    """Integer codes in ``0..C-1`` with ``-1`` for unlabelled
    (:func:`check_label_codes`); at least one labelled point, two classes. For labels of
    other types use :func:`encode_labels`.

    Returns an ``int64`` copy.
    """
    y = check_label_codes(y, n, n_classes=n_classes, name=name)
    labelled = y[y >= 0]
    if labelled.size == 0:
        raise ValueError(f"{name}: no labelled point (all -1); label at least one per class")
    if np.unique(labelled).size < 2 and n_classes is None:
        raise ValueError(
            f"{name}: only one class ({labelled[0]}) among the labelled points; "
            "label at least one point of a second class"
        )
    return y


def check_pairs(pairs, n: int, *, name: str = "pairs") -> np.ndarray:
    """Node pairs ``int64[P, 2]`` in ``0..n-1`` with two different nodes each (an empty
    list is none); a flat list, fractional indices or a node paired with itself are named,
    never reshaped, truncated or clamped into other pairs."""
    pairs = np.asarray(pairs)
    if pairs.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if (pairs.ndim != 2 or pairs.shape[1] != 2 or pairs.dtype.kind not in "iu"
            or pairs.min() < 0 or pairs.max() >= n or np.any(pairs[:, 0] == pairs[:, 1])):
        raise ValueError(f"{name}: int[P, 2] pairs of two different node indices in "
                         f"0..{n - 1}, got shape {pairs.shape} of dtype {pairs.dtype}")
    return pairs.astype(np.int64)


def check_scalar(value, name: str, *, minimum: float = 0.0, strict: bool = False) -> None:
    """``value`` must be one finite real number ``>= minimum`` (``> minimum`` when ``strict``);
    a traced value (``jit``, ``vmap``, a numpyro program's sample) is checked for its shape
    only. Strings and bools are refused (``"1"`` is not a number here)."""
    wanted = f"{name}: a finite number {'>' if strict else '>='} {minimum:g} (a scalar)"
    import jax

    if isinstance(value, jax.core.Tracer):
        if value.shape != ():
            raise ValueError(f"{wanted}, got an array of shape {value.shape}")
        return
    if isinstance(value, (str, bytes, bool, np.bool_)):
        raise ValueError(f"{wanted}, got {value!r}")
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{wanted}, got {value!r}") from None
    if array.shape != ():
        raise ValueError(f"{wanted}, got an array of shape {array.shape}")
    number = float(array)
    if not np.isfinite(number) or number < minimum or (strict and number == minimum):
        raise ValueError(f"{wanted}, got {number!r}")


def check_state_codes(values, n: int, count: int, name: str, what: str) -> None:
    """``values`` must be ``int[n]`` with every entry a ``what`` in ``0..count-1`` (a state of
    the model: no ``-1``). Concrete values are checked on the host; a traced array (``jit``,
    ``vmap``) for its shape only, so that compiled callers pay nothing."""
    import jax

    if isinstance(values, jax.core.Tracer):
        if values.shape != (n,):
            raise ValueError(f"{name}: expected shape ({n},), one {what} per node, got "
                             f"{values.shape}")
        return
    codes = np.asarray(values)
    if (codes.ndim == 1 and codes.size and np.issubdtype(codes.dtype, np.number)
            and (codes.min() < 0 or codes.max() >= count)):
        bad = codes[(codes < 0) | (codes >= count)]
        raise ValueError(f"{name}: every node needs a {what} in 0..{count - 1} (a state has no "
                         f"unlabelled node); found {bad[0].item()!r}")
    check_label_codes(codes, n, name=name, against="the model has {n} nodes")


def check_flag(value, name: str) -> bool:
    """``value`` as a bool when it is True or False (NumPy's bools too); otherwise a
    ValueError naming ``name`` (``"yes"``, 1 or None are refused: an option that reads them
    as truthy would do silently what was not asked)."""
    if not isinstance(value, bool | np.bool_):
        raise ValueError(f"{name}: True or False, got {value!r}")
    return bool(value)


def check_class_mass_rule(value, name: str = "class_mass_normalize"):
    """A class-mass decision rule: ``"auto"``, ``"counts"`` or a bool (NumPy's too), as given;
    otherwise a ValueError naming ``name`` and the choices."""
    if isinstance(value, str) and value in ("auto", "counts"):
        return value
    if isinstance(value, bool | np.bool_):
        return bool(value)
    raise ValueError(f"{name}: use 'auto', True (class masses), 'counts' (class counts) or "
                     f"False, got {value!r}")


def is_whole(value, least: int) -> bool:
    """Whether ``value`` is an integer (Python or NumPy, not a bool, not ``2.0``) ``>= least``:
    the test behind every count argument (chains, draws, steps, copies); each caller words
    its own error."""
    return (not isinstance(value, bool) and isinstance(value, numbers.Integral)
            and value >= least)


COUNT_MAX = 2**31 - 1  # counts reach JAX as int32 (1e300 chains gave an MLIR TypeError)


def check_count(value, name: str, *, least: int = 0, most: int = COUNT_MAX) -> int:
    """A count parameter (chains, draws, iterations, checkpoints): a whole number (Python
    or NumPy integer, not a bool, not ``2.5`` or ``"10"``) in ``least..most``; returns it as
    an ``int``. Raises ``ValueError`` naming ``name``."""
    if not is_whole(value, least) or value > most:
        raise ValueError(f"{name}: a whole number in {least}..{most}, got {value!r}")
    return int(value)


def check_real(value, name: str, *, low: float = -np.inf, high: float = np.inf,
               low_open: bool = False, high_open: bool = False) -> float:
    """A real parameter (not a bool or a string) in the interval from ``low`` to ``high``
    (``*_open``: that end excluded; an infinite end is always excluded: the value must be
    finite); returns it as a ``float``. Raises ``ValueError`` naming ``name``."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)
    number = float(value) if ok else np.nan
    ok = ok and np.isfinite(number)
    ok = ok and (number > low if low_open else number >= low)
    ok = ok and (number < high if high_open else number <= high)
    if not ok:
        left, right = "(" if low_open or low == -np.inf else "[", \
            ")" if high_open or high == np.inf else "]"
        raise ValueError(f"{name}: a finite number in {left}{low:g}, {high:g}{right}, "
                         f"got {value!r}")
    return number


def check_k(k, n: int, *, name: str = "k") -> int:
    """Neighbour count ``1 <= k < n``."""
    if isinstance(k, bool) or not isinstance(k, numbers.Real) or not float(k).is_integer():
        raise ValueError(f"{name}: must be a positive integer, got {k!r}")
    k = int(k)
    if k < 1:
        raise ValueError(f"{name}: must be >= 1, got {k}")
    if k >= n:
        raise ValueError(f"{name}: k={k} must be smaller than the number of points n={n}")
    return k


def seed_from_random_state(random_state, *, name: str = "random_state") -> int:
    """An integer seed in ``[0, 2^32)`` from scikit-learn's ``random_state`` conventions.

    ``None``: a fresh seed from NumPy's global generator (a different result each fit, as in
    scikit-learn); an int: itself (the same result each fit); a ``np.random.Generator`` or
    ``np.random.RandomState``: the next seed drawn from it. Estimators turn it into a JAX key
    with ``jax.random.PRNGKey(seed)``.
    """
    if random_state is None:
        return int(np.random.randint(0, 2**32, dtype=np.int64))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**32))
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**32, dtype=np.int64))
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if not 0 <= int(random_state) < 2**32:
            raise ValueError(f"{name}: an integer seed must lie in [0, 2**32), got {random_state}")
        return int(random_state)
    raise ValueError(
        f"{name}: use None, an int seed or a numpy.random.Generator, got "
        f"{type(random_state).__name__}"
    )
