"""scikit-learn's estimator checks on every public estimator of graphssl.estimators.

Each estimator runs the whole ``check_estimator`` suite once (``parametrize_with_checks``),
the sampled and learned models at tiny settings. The one expected failure is declared through
scikit-learn's ``expected_failed_checks`` with its reason.
"""

from sklearn.utils.estimator_checks import parametrize_with_checks

from graphssl.estimators import (
    BoltzmannMRFClassifier,
    DiffusionMixtureClassifier,
    DiffusionMixtureGridClassifier,
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
    BoltzmannMRFClassifier(model="basic", pairs="knn", n_restarts=1, max_iter=2, n_chains=2,
                           n_samples=10, burn_in=2, method="gibbs"),
    DiffusionMixtureClassifier(n_chains=1, n_iterations=4, burn_in=2, thin=1),
    DiffusionMixtureGridClassifier(k_grid=(5,), tau_grid=(5.0,), n_checkpoints=1, every=2,
                                   burn_in=2),
    HarmonicMixtureClassifier(n_components=2, max_iter=5),
]

SEMI_SUPERVISED = {
    "check_classifiers_classes": (
        "the check's last problem uses the class labels {-1, 1}, but y = -1 marks an unlabelled "
        "point (scikit-learn's own semi-supervised convention; its checks exempt "
        "LabelPropagation / LabelSpreading / SelfTrainingClassifier by name for this reason). "
        "String and object labels, the rest of this check, are tested in test_bad_input.py"
    ),
}


def expected_failures(estimator) -> dict:
    """The checks that contradict semi-supervised learning, with the reason."""
    return SEMI_SUPERVISED


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failures)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
