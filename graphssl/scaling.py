"""Per-column feature scaling for the estimators' kNN graphs (``standardize=`` option).

Every estimator of :mod:`graphssl.estimators` builds its graph (or its feature model) from
Euclidean distances, which the column of largest spread dominates: on scikit-learn's wine
(proline in the hundreds, hue near 1) the harmonic function reaches 64.6 % on raw columns and
92.1 % standardised; breast_cancer 85.8 % and 90.0 % (10 labels a class, 3 splits). On
columns that share one unit the spread is information and standardising costs accuracy:
digits 97.4 -> 94.9 %, SSL-book Digit1 (10 labels) 92.8 -> 54.1 %, COIL2 60.9 -> 54.7 %.
Hence the default rule (``standardize="auto"``):

    standardise when the columns' spreads differ by more than an order of magnitude --
    the largest standard deviation of a non-constant column exceeds ``RATIO = 10`` times
    their median -- unless the features are non-negative with more than half the entries
    zero (counts, indicators, tf-idf: one unit whose spread is information).

Measured ratio (largest / median column std): wine 388, breast_cancer 7829 (standardised);
iris 2.2, digits 1.5, Digit1 2.9, USPS 1.8, COIL2 1.9, two moons 1.3 (left as they are); SSL-book
Text 13.8 but sparse non-negative (left; standardising it changes the harmonic function by
0.1 point).

Data whose spreads are alike but whose centre lies far from the origin (more than
``OFFSET_RATIO = 10`` times the spread: ``|column means| > 10 |column stds|``) is centred
only, ``x - mean``: no distance changes, and the float32 distances of the JAX models keep
their digits (two moons shifted by 10^4: the harmonic mixture fell from 100 % to 79 %, and
to 53 % at 10^8, with the shift kept). Ratios on the panel and held-out sets: at most 5.5
(Digit1); none is centred.

Standardising is ``(x - mean) / std`` per column (a constant column is only centred); sparse
input is scaled without centring (centring would fill it). The same map is applied to the
points given to ``predict`` / ``predict_proba``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp

__all__ = ["FeatureScaling", "fit_feature_scaling", "STANDARDIZE_CHOICES", "RATIO",
           "OFFSET_RATIO"]

STANDARDIZE_CHOICES = ("auto", True, False)
RATIO = 10.0  # "an order of magnitude" between the largest and the median column spread
OFFSET_RATIO = 10.0  # centre (only) data whose mean lies farther than this many spreads out


@dataclasses.dataclass(frozen=True)
class FeatureScaling:
    """A fitted per-column scaling ``x -> (x - center) / scale``.

    Fields: ``applied`` (False: the identity), ``center`` and ``scale`` (``float[d]``, or
    None when not applied; ``center`` is zero for sparse input), ``reason`` (one line: why
    it was or was not applied).
    """

    applied: bool
    center: np.ndarray | None
    scale: np.ndarray | None
    reason: str

    def transform(self, X):
        """``X`` scaled by this map (dense: float64 copy; sparse: CSR, never centred)."""
        if not self.applied:
            return X
        if sp.issparse(X):
            return sp.csr_matrix(X @ sp.diags(1.0 / self.scale))
        return (np.asarray(X, dtype=np.float64) - self.center) / self.scale


def _plain_column_std(X) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, std)`` per column, dense or sparse (population variance), as computed."""
    if sp.issparse(X):
        mean = np.asarray(X.mean(axis=0)).ravel()
        second = np.asarray(X.multiply(X).mean(axis=0)).ravel()
        return mean, np.sqrt(np.maximum(second - mean**2, 0.0))
    X = np.asarray(X, dtype=np.float64)
    return X.mean(axis=0), X.std(axis=0)


def _column_magnitude(X) -> np.ndarray:
    """Each column's largest ``|x|`` (1 for an all-zero column)."""
    if sp.issparse(X):
        top = np.asarray(abs(X).max(axis=0).todense()).ravel()
    else:
        top = np.max(np.abs(np.asarray(X, dtype=np.float64)), axis=0, initial=0.0)
    return np.where(top > 0, top, 1.0)


def _column_std(X) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, std)`` per column, dense or sparse (population variance). Where the squares
    would overflow (magnitudes past ~1e154: the std came out inf) or lose digits to
    underflow (below ~1e-154: 0, or subnormal, for a varying column) -- any column past
    1e140 or below 1e-140 -- it is divided by its largest ``|x|`` first and the result
    scaled back; other columns are computed plainly, as before."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        mean, std = _plain_column_std(X)
    magnitude = _column_magnitude(X)
    # squares of |x| past 1e140 or below 1e-140 near float64's ends (1e308; subnormal
    # below 2e-308, with fewer digits)
    suspect = ~np.isfinite(std) | ~np.isfinite(mean) | (magnitude > 1e140) | (
        magnitude < 1e-140)
    if suspect.any():
        scaled = X @ sp.diags(1.0 / magnitude) if sp.issparse(X) else (
            np.asarray(X, dtype=np.float64) / magnitude)
        scaled_mean, scaled_std = _plain_column_std(scaled)
        mean = np.where(suspect, scaled_mean * magnitude, mean)
        std = np.where(suspect, scaled_std * magnitude, std)
    return mean, std


def _spread_ratio(std: np.ndarray) -> float:
    """Largest over median standard deviation of the non-constant columns (1 if none)."""
    tiny = 1e-12 * float(std.max()) if std.size else 0.0
    varying = std[std > tiny]
    if varying.size == 0:
        return 1.0
    return float(varying.max() / np.median(varying))


def _offset_ratio(X, mean: np.ndarray, std: np.ndarray) -> float:
    """``|mean| / |std|`` over the columns (0 for sparse input, which is never centred): how
    far the data's centre lies from the origin in units of its spread. Distances computed as
    ``|x|^2 - 2 x.y + |y|^2`` in float32 (the JAX models' kNN search and mixture
    components) keep about ``7 - 2 log10(ratio)`` digits of a typical squared distance."""
    if sp.issparse(X):
        return 0.0
    spread, offset = _norm(std), _norm(mean)
    return offset / spread if spread > 0 else 0.0


def _norm(v: np.ndarray) -> float:
    """Euclidean norm without overflow or underflow of the squares (scaled by max |v|)."""
    top = float(np.max(np.abs(v), initial=0.0))
    return top * float(np.sqrt(np.sum((v / top) ** 2))) if top > 0 else 0.0


def _one_unit_sparse(X) -> bool:
    """Non-negative with more than half the entries zero (counts, indicators, tf-idf)."""
    if sp.issparse(X):
        return bool(X.nnz < 0.5 * X.shape[0] * X.shape[1] and (X.data >= 0).all())
    X = np.asarray(X)
    return bool(np.count_nonzero(X) < 0.5 * X.size and (X >= 0).all())


def fit_feature_scaling(X, standardize="auto", *, name: str = "standardize") -> FeatureScaling:
    """The scaling the ``standardize`` option asks for on ``X`` (module docstring's rule).

    Args:
      X: ``float[n, d]`` (checked features) or a scipy sparse matrix.
      standardize: ``"auto"`` (the rule), True (always) or False (never).
      name: the option's name in error messages.
    Returns:
      a :class:`FeatureScaling` (``transform`` applies it).
    """
    if not (isinstance(standardize, str) and standardize == "auto") and not isinstance(
            standardize, (bool, np.bool_)):
        raise ValueError(f"{name}: use 'auto', True or False, got {standardize!r}")
    if standardize is False or standardize is np.False_:
        return FeatureScaling(False, None, None, f"{name}=False")
    values = X.data if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    if not np.all(np.isfinite(values)):
        raise ValueError(f"X: {int(np.sum(~np.isfinite(values)))} entries are NaN or inf; "
                         "impute or drop them before fitting (e.g. "
                         "sklearn.impute.SimpleImputer)")
    mean, std = _column_std(X)
    ratio = _spread_ratio(std)
    if isinstance(standardize, str):
        if _one_unit_sparse(X):
            return FeatureScaling(False, None, None, "auto: non-negative with most entries "
                                  "zero (counts / indicators / tf-idf share one unit)")
        if ratio <= RATIO:
            offset = _offset_ratio(X, mean, std)
            if offset > OFFSET_RATIO:
                return FeatureScaling(True, mean, np.ones_like(std), f"auto: centred only "
                                      f"(the columns' mean lies {offset:.3g} x their spread "
                                      f"from the origin, > {OFFSET_RATIO:g}; spreads within "
                                      f"a factor {ratio:.3g} of their median)")
            return FeatureScaling(False, None, None, f"auto: column spreads within a factor "
                                  f"{ratio:.3g} <= {RATIO:g} of their median")
        reason = f"auto: largest column spread {ratio:.3g} x the median (> {RATIO:g})"
    else:
        reason = f"{name}=True"
    tiny = 1e-12 * float(std.max()) if std.size else 0.0
    scale = np.where(std > tiny, std, 1.0)  # a constant column: centred only
    center = np.zeros_like(mean) if sp.issparse(X) else mean
    return FeatureScaling(True, center, scale, reason)
