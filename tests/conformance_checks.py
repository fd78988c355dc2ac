"""Shared setup of scikit-learn's estimator checks (``tests/test_sklearn_conformance*.py``).

Each public estimator runs the whole ``check_estimator`` suite once (``parametrize_with_checks``),
the sampled and learned models at tiny settings. The one expected failure is declared through
scikit-learn's ``expected_failed_checks`` with its reason.

The sampled models compile their sampler once per data shape (measured: 12 s for the diffusion
mixture, 5 s for the Boltzmann MRF on a 30-point problem; a second fit of the same shape takes
0.02-0.07 s), the harmonic mixture its EM (2-3 s), and scikit-learn's checks draw a new shape
almost every fit. The checks in
:data:`BASE_CLASS_CHECKS` exercise only what every estimator inherits from
:class:`graphssl.estimators.base.GraphSSLClassifier` (input validation, ``n_features_in_``, the
not-fitted error, dtypes, ``fit`` returning ``self``): they run on the six other estimators
and are skipped, with that reason, for the four in :data:`COMPILE_PER_SHAPE` (82 of the harmonic
mixture's 126 s of checks in the suite's census), whose own code
(``fit`` on train data, idempotence, parameters left unchanged, no public attribute set in
``fit``) still runs in every check that reaches it. The three sampled estimators have a test
file each, so that the test processes (one file at a time) share them out, and run the checks
with their smallest samplers (the diffusion mixtures with the re-sampling move alone,
``moves=(1, 0, 0)``: 30-35 % less compilation per shape; the Boltzmann MRF on a two-point
coupling grid); their moves and searches are tested in their own files.
"""

import functools

import pytest

from graphssl.estimators import (
    BoltzmannMRFClassifier,
    DiffusionMixtureClassifier,
    DiffusionMixtureGridClassifier,
    HarmonicMixtureClassifier,
)
from graphssl.inference.boltzmann.selection import GridSettings

# The Boltzmann MRF's coupling search at the size of the input-handling tests: two grid
# points, one length scale, two folds (the search itself: tests/test_boltzmann_selection.py).
TINY_GRID = GridSettings(alpha0=(0.0, 1.0), log_scale_offsets=(0.0,), n_folds=2, burn_in=2,
                         n_samples=4)

SEMI_SUPERVISED = {
    "check_classifiers_classes": (
        "the check's last problem uses the class labels {-1, 1}, but y = -1 marks an unlabelled "
        "point (scikit-learn's own semi-supervised convention; its checks exempt "
        "LabelPropagation / LabelSpreading / SelfTrainingClassifier by name for this reason). "
        "String and object labels, the rest of this check, are tested in test_bad_input.py"
    ),
}

COMPILE_PER_SHAPE = (BoltzmannMRFClassifier, DiffusionMixtureClassifier,
                     DiffusionMixtureGridClassifier, HarmonicMixtureClassifier)
BASE_CLASS_CHECKS = frozenset({
    "check_n_features_in", "check_n_features_in_after_fitting", "check_dtype_object",
    "check_estimators_nan_inf", "check_fit_score_takes_y", "check_classifier_data_not_an_array",
    "check_positive_only_tag_during_fit", "check_fit_check_is_fitted", "check_estimators_dtypes",
    "check_classifiers_classes", "check_pipeline_consistency",
    "check_estimators_fit_returns_self",  # fit is GraphSSLClassifier.fit, never overridden
})


def check_name(check) -> str:
    """The name of a check (scikit-learn wraps them in ``functools.partial``)."""
    while isinstance(check, functools.partial):
        check = check.func
    return check.__name__


def expected_failures(estimator) -> dict:
    """The checks that contradict semi-supervised learning, with the reason."""
    return SEMI_SUPERVISED


# Checks whose every assertion another check makes on the same estimator: skipped where a
# fit costs a compilation (each check draws a new data shape).
SUBSUMED_CHECKS = {
    "check_estimators_overwrite_params": (
        "its assertion (get_params unchanged by fit) is part of check_dont_overwrite_parameters "
        "(no public attribute, parameters included, changed or added by fit), which runs"),
    "check_supervised_y_2d": (
        "a column-vector y is turned into a vector with a DataConversionWarning by the base "
        "class's input validation, checked on the estimators that compile nothing per shape"),
    "check_non_transformer_estimators_n_iter": (
        "its assertion (n_iter_ >= 1 after a fit, for estimators with max_iter) is made on a "
        "sampled fit by tests/test_map_is_mode.py (grid route) and tests/test_boltzmann.py "
        "(likelihood route), on the harmonic mixture's EM by tests/test_harmonic_mixture.py; "
        "the check refits on iris, a new shape: every program compiles again"),
}


def run_check(estimator, check) -> None:
    """Run one check, or skip a base-class or subsumed check on an estimator that compiles
    per shape."""
    if isinstance(estimator, COMPILE_PER_SHAPE):
        name = check_name(check)
        if name in BASE_CLASS_CHECKS:
            pytest.skip("base-class behaviour, checked on the estimators that compile nothing "
                        "per shape (tests/conformance_checks.py)")
        if name in SUBSUMED_CHECKS:
            pytest.skip(SUBSUMED_CHECKS[name])
    check(estimator)
