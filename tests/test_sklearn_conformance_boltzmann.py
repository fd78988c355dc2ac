"""scikit-learn's estimator checks on BoltzmannMRFClassifier (setup and skip rule:
``tests/conformance_checks.py``)."""

from conformance_checks import TINY_GRID, expected_failures, run_check
from sklearn.utils.estimator_checks import parametrize_with_checks

from graphssl.estimators import BoltzmannMRFClassifier


@parametrize_with_checks([BoltzmannMRFClassifier(model="basic", pairs="knn", n_restarts=1,
                                                 max_iter=2, n_chains=2, n_samples=10,
                                                 burn_in=2, method="gibbs",
                                                 grid=TINY_GRID)],
                         expected_failed_checks=expected_failures)
def test_sklearn_compatible_estimator(estimator, check):
    run_check(estimator, check)
