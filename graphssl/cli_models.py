"""The models ``graphssl run`` compares: :data:`MODELS` (name -> (factory, description)).

A factory takes no argument and returns an unfitted estimator with ``fit_graph(graph, y)``
(or ``fit(X, y)`` when it sets ``fits_features = True``) and ``label_distributions_``.
Factories are module-level functions so that Dask workers can unpickle them by reference.
The samplers' draws are the starting budget: ``graphssl run`` doubles them until the
chains converge or ``--max-doublings`` is spent (:mod:`graphssl.runs`).
"""

from __future__ import annotations

__all__ = ["MODELS", "register_model"]


def _grf():
    from graphssl.estimators.baselines import HarmonicFunctionClassifier

    return HarmonicFunctionClassifier(class_mass_normalize=False)  # the argmax rule


def _grf_cmn():
    from graphssl.estimators.baselines import HarmonicFunctionClassifier

    return HarmonicFunctionClassifier(class_mass_normalize=True)


def _lgc():
    from graphssl.estimators.baselines import LGCClassifier

    return LGCClassifier(alpha=0.99)  # Zhou et al.'s setting (the estimator's default: 0.9)


def _parzen():
    from graphssl.estimators.baselines import ParzenWindowClassifier

    return ParzenWindowClassifier()


def _knn():
    from graphssl.estimators.baselines import KNNGraphClassifier

    return KNNGraphClassifier()


def _potts_mean_field():
    from graphssl.estimators.potts import PottsClassifier

    return PottsClassifier(inference="mean_field", beta="nmfB")


def _potts_gibbs():
    from graphssl.estimators.potts import PottsClassifier

    return PottsClassifier(inference="gibbs", beta="nmfB", n_chains=4, n_samples=300,
                           burn_in=100)


def _potts_swendsen_wang():
    from graphssl.estimators.potts import PottsClassifier

    return PottsClassifier(inference="swendsen_wang", beta="nmfB", n_chains=4, n_samples=300,
                           burn_in=100)


def _boltzmann():
    from graphssl.estimators.boltzmann import BoltzmannMRFClassifier

    return BoltzmannMRFClassifier(model="basic", n_restarts=1, max_iter=20)


def _diffusion_mixture():
    from graphssl.estimators.diffusion_mixture import DiffusionMixtureClassifier

    # the notebook's moves: component flips mix the labels of boundary groups
    return DiffusionMixtureClassifier(gamma=0.8, init="parzen", n_chains=2, n_iterations=200,
                                      burn_in=50, moves=(20, 1, 0, 4, 0, 0, 10))


def _harmonic_mixture():
    from graphssl.estimators.harmonic_mixture import HarmonicMixtureClassifier

    return HarmonicMixtureClassifier(n_components=36)


def _mincut():
    from graphssl.estimators.mincut import MincutClassifier

    return MincutClassifier()


MODELS = {
    "grf": (_grf, "harmonic function / GRF (Zhu et al. 2003)"),
    "grf_cmn": (_grf_cmn, "GRF with class mass normalisation"),
    "lgc": (_lgc, "local and global consistency, alpha 0.99 (Zhou et al. 2004)"),
    "parzen": (_parzen, "graph Parzen window, heat kernel tau 5 (Walder)"),
    "knn": (_knn, "3 nearest labelled nodes along the graph"),
    "potts_mf": (_potts_mean_field, "Potts naive mean field, beta from Gamma = 1 (B&B nmfB)"),
    "potts_gibbs": (_potts_gibbs, "Potts posterior by chromatic Gibbs, 4 chains x 300"),
    "potts_sw": (_potts_swendsen_wang, "Potts posterior by Swendsen-Wang, 4 chains x 300"),
    "boltzmann": (_boltzmann, "Boltzmann MRF, learned sigma (Zhu & Ghahramani 2002)"),
    "dirichlet_mixture": (_diffusion_mixture,
                          "Dirichlet mixture of diffusions, gamma 0.8, Parzen start (Walder)"),
    "harmonic_mixture": (_harmonic_mixture, "harmonic mixture, M = 36 (Zhu & Lafferty 2005)"),
    "mincut": (_mincut, "s-t graph mincut (Blum & Chawla 2001)"),
}


def register_model(name: str, factory, description: str = "") -> None:
    """Add a model to the ``graphssl run`` registry."""
    MODELS[name] = (factory, description)
