"""scikit-learn's estimator checks on the estimators that compile nothing per data shape
(setup and the skip rule: ``tests/conformance_checks.py``; the sampled estimators have their own
files)."""

from conformance_checks import (
    BASE_CLASS_CHECKS,
    SUBSUMED_CHECKS,
    check_name,
    expected_failures,
    run_check,
)
from sklearn.utils.estimator_checks import parametrize_with_checks

from graphssl.estimators import (
    HarmonicFunctionClassifier,
    HarmonicMixtureClassifier,
    KNNGraphClassifier,
    LGCClassifier,
    MincutClassifier,
    ParzenWindowClassifier,
    PottsClassifier,
)

ESTIMATORS = [
    HarmonicFunctionClassifier(),
    LGCClassifier(),
    ParzenWindowClassifier(),
    KNNGraphClassifier(),
    MincutClassifier(),
    PottsClassifier(),
    HarmonicMixtureClassifier(n_components=2, max_iter=5),
]


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failures)
def test_sklearn_compatible_estimator(estimator, check):
    run_check(estimator, check)


def test_base_class_checks_are_real_check_names():
    """A renamed scikit-learn check would silently leave the skip list: every name in it is
    one of the checks scikit-learn yields for a classifier."""
    from sklearn.utils.estimator_checks import estimator_checks_generator

    names = {check_name(check) for _, check in
             estimator_checks_generator(HarmonicFunctionClassifier(), mark="skip")}
    assert BASE_CLASS_CHECKS <= names, BASE_CLASS_CHECKS - names
    assert set(SUBSUMED_CHECKS) <= names, set(SUBSUMED_CHECKS) - names
