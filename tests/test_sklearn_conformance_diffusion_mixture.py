"""scikit-learn's estimator checks on DiffusionMixtureClassifier (setup and skip rule:
``tests/conformance_checks.py``)."""

from conformance_checks import expected_failures, run_check
from sklearn.utils.estimator_checks import parametrize_with_checks

from graphssl.estimators import DiffusionMixtureClassifier


@parametrize_with_checks([DiffusionMixtureClassifier(n_chains=1, n_iterations=4, burn_in=2,
                                                     thin=1, pointwise_loo=False,
                                                     moves=(1, 0, 0))],
                         expected_failed_checks=expected_failures)
def test_sklearn_compatible_estimator(estimator, check):
    run_check(estimator, check)
