"""scikit-learn compatible classifiers over the models.

Every estimator has ``fit(X, y)`` (a kNN graph of the features), ``fit_graph(graph, y,
X=None)`` (your own graph: networkx, scipy.sparse or dense affinity matrix, edge list, or a
:class:`graphssl.graph.Graph`; optional node features), ``predict``, ``predict_proba``,
``transduction_``, ``label_distributions_`` and ``classes_``
(:class:`~graphssl.estimators.base.GraphSSLClassifier`). Labels may be of any type; unlabelled
points are ``-1`` for numeric labels and ``None``, ``""`` or ``NaN`` for other types.
Every estimator passes scikit-learn's ``check_estimator`` (tests/test_sklearn_conformance.py).

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
