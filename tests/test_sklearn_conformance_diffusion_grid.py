"""scikit-learn's estimator checks on DiffusionMixtureGridClassifier (setup and skip rule:
``tests/conformance_checks.py``)."""

from conformance_checks import expected_failures, run_check
from sklearn.utils.estimator_checks import parametrize_with_checks

from graphssl.estimators import DiffusionMixtureGridClassifier


@parametrize_with_checks([DiffusionMixtureGridClassifier(k_grid=(5,), tau_grid=(5.0,),
                                                         n_checkpoints=1, every=2, burn_in=2,
                                                         moves=(1, 0, 0))],
                         expected_failed_checks=expected_failures)
def test_sklearn_compatible_estimator(estimator, check):
    run_check(estimator, check)
