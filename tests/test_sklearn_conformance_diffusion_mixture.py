"""scikit-learn's estimator checks on DiffusionMixtureClassifier (setup and skip rule:
``tests/conformance_checks.py``). ``gamma=0.8`` skips the choice of gamma (a second
batched program to compile for every shape the checks fit: 83 -> 41 s wall on 2 workers);
the default ``gamma="auto"`` path and its determinism are tested in
``tests/test_diffusion_mixture_gamma.py``."""

from conformance_checks import expected_failures, run_check
from sklearn.utils.estimator_checks import parametrize_with_checks

from graphssl.estimators import DiffusionMixtureClassifier


@parametrize_with_checks([DiffusionMixtureClassifier(n_chains=1, n_iterations=4, burn_in=2,
                                                     thin=1, pointwise_loo=False, gamma=0.8,
                                                     moves=(1, 0, 0))],
                         expected_failed_checks=expected_failures)
def test_sklearn_compatible_estimator(estimator, check):
    run_check(estimator, check)
