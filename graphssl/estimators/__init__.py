"""scikit-learn compatible classifiers over the models (``y = -1`` marks unlabelled points).

Imports are lazy, so ``import graphssl.estimators`` stays cheap; every class is importable
from here or from its own module (e.g. ``graphssl.estimators.potts.PottsClassifier``).
"""

import importlib

_WHERE = {
    "GraphSSLClassifier": "base",
    "HarmonicFunctionClassifier": "baselines",
    "LGCClassifier": "baselines",
    "ParzenWindowClassifier": "baselines",
    "KNNGraphClassifier": "baselines",
    "PottsClassifier": "potts",
    "BoltzmannMRFClassifier": "boltzmann",
    "DiffusionMixtureClassifier": "diffusion_mixture",
    "DiffusionMixtureGridClassifier": "diffusion_mixture",
    "HarmonicMixtureClassifier": "harmonic_mixture",
    "MincutClassifier": "mincut",
}

__all__ = sorted(_WHERE)


def __getattr__(name):
    if name in _WHERE:
        return getattr(importlib.import_module(f"graphssl.estimators.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'graphssl.estimators' has no attribute {name!r}")
