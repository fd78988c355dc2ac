"""Hyper-parameters of PottsClassifier, DiffusionMixtureClassifier,
DiffusionMixtureGridClassifier and BoltzmannMRFClassifier are checked at ``fit``, before any
sampling or compilation, with a message that starts with the parameter's name (fuzz report
fuzz5a: counts through ``int()``, values beyond float32, flags read by truthiness, raw
``float()`` errors, a misnamed mean-field option, an empty Boltzmann grid)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from param_cases import bad_value_case as _case
from param_cases import two_blobs

from graphssl.estimators import (
    BoltzmannMRFClassifier,
    DiffusionMixtureClassifier,
    DiffusionMixtureGridClassifier,
    PottsClassifier,
)

NAN, INF = float("nan"), float("inf")


@pytest.fixture(scope="module")
def blobs():
    X, y, _ = two_blobs(15)
    return X, y


POTTS = [
    *[_case(PottsClassifier, "n_chains", v) for v in (1e300, 2.5, True, "10", None, NAN)],
    *[_case(PottsClassifier, "n_samples", v) for v in (0, 1e300, INF)],
    *[_case(PottsClassifier, "burn_in", v) for v in (1e300, 2.5)],
    *[_case(PottsClassifier, "thin", v) for v in (1e300, "10")],
    *[_case(PottsClassifier, "max_iter", v) for v in (INF, NAN, 2.5, np.float32(0.5), "10")],
    *[_case(PottsClassifier, "damping", v) for v in (None, "fast", 0, 1.5, NAN)],
    *[_case(PottsClassifier, "tol", v) for v in (None, "fast", 0.0, -1.0, INF)],
    *[_case(PottsClassifier, "clamp", v) for v in ("False", "no", NAN, [0], 1)],
    _case(PottsClassifier, "n_chains", 1e300, inference="gibbs"),
    _case(PottsClassifier, "n_samples", 0, inference="swendsen_wang"),
]

DM_BASE = dict(n_iterations=10, burn_in=2, n_chains=2, thin=1, gamma=0.8, pointwise_loo=False)
DM = [
    *[_case(DiffusionMixtureClassifier, "tau", v, **DM_BASE)
      for v in (1e39, 1e300, 1e20, None, "Gibbs")],
    *[_case(DiffusionMixtureClassifier, "alpha", v, **DM_BASE) for v in (1e300, 1e39, None)],
    *[_case(DiffusionMixtureClassifier, "gamma", v, **DM_BASE)
      for v in (1e300, None)],
    *[_case(DiffusionMixtureClassifier, "n_chains", v, **DM_BASE)
      for v in (1e300, 2.5, True, "10", NAN)],
    *[_case(DiffusionMixtureClassifier, "n_iterations", v, **DM_BASE) for v in (1e300, 12.5)],
    *[_case(DiffusionMixtureClassifier, "burn_in", v, **DM_BASE) for v in (1e300, 2.5)],
    *[_case(DiffusionMixtureClassifier, "thin", v, **DM_BASE) for v in (1e300, 1.5)],
    *[_case(DiffusionMixtureClassifier, "max_components", v, **DM_BASE) for v in (1e300, 2.5)],
    _case(DiffusionMixtureClassifier, "block_size", 2.5, **DM_BASE),
    _case(DiffusionMixtureClassifier, "init_noise", "Gibbs", **DM_BASE),
    _case(DiffusionMixtureClassifier, "moves", "Gibbs", **DM_BASE),
    _case(DiffusionMixtureClassifier, "moves", None, **DM_BASE),
    *[pytest.param(DiffusionMixtureClassifier, {**DM_BASE, "moves": moves},
                   rf"^moves\[0\]: .*{re.escape(repr(moves[0]))}", id=f"DM-moves={moves!r}")
      for moves in ((1e300, 1, 0), (1.5, 1, 0))],
    *[_case(DiffusionMixtureClassifier, "balance", v, **DM_BASE) for v in ("False", NAN)],
    *[_case(DiffusionMixtureClassifier, "pointwise_loo", v, **DM_BASE) for v in ("no", [0])],
]

GRID_BASE = dict(k_grid=(5,), tau_grid=(5.0,), n_checkpoints=5, every=2, burn_in=5)
GRID = [
    *[_case(DiffusionMixtureGridClassifier, "k_grid", v, **GRID_BASE) for v in (5, "Gibbs")],
    *[pytest.param(DiffusionMixtureGridClassifier, {**GRID_BASE, "k_grid": grid},
                   rf"^k_grid: .*{re.escape(repr(grid[0]))}", id=f"grid-k_grid={grid!r}")
      for grid in ((1e300,),)],
    _case(DiffusionMixtureGridClassifier, "tau_grid", 5.0, **GRID_BASE),
    *[pytest.param(DiffusionMixtureGridClassifier, {**GRID_BASE, "tau_grid": grid},
                   rf"^tau_grid: .*{re.escape(repr(grid[0]))}", id=f"grid-tau_grid={grid!r}")
      for grid in ((1e300,), (1e39,), ("Gibbs",))],
    *[_case(DiffusionMixtureGridClassifier, name, v, **GRID_BASE)
      for name in ("alpha", "gamma") for v in (1e300, None)],
    *[_case(DiffusionMixtureGridClassifier, name, v, **GRID_BASE)
      for name in ("n_checkpoints", "every", "n_chains") for v in (1e300, 2.5)],
    _case(DiffusionMixtureGridClassifier, "burn_in", 2.5, **GRID_BASE),
    pytest.param(DiffusionMixtureGridClassifier, {**GRID_BASE, "moves": (1e300, 1, 0)},
                 r"^moves\[0\]: .*1e\+300", id="grid-moves=(1e300, 1, 0)"),
]

BOLTZMANN = [
    *[_case(BoltzmannMRFClassifier, "step", v) for v in (NAN, INF, -1.0, 0.0, "Gibbs", None)],
    *[_case(BoltzmannMRFClassifier, "sigma_rate", v, model="basic") for v in (NAN, -1.0, 0.0)],
    *[_case(BoltzmannMRFClassifier, "prior", v) for v in ("flat", 5)],
    *[_case(BoltzmannMRFClassifier, "label_noise", v) for v in ("Gibbs", None)],
    pytest.param(BoltzmannMRFClassifier, {"grid": {"log_scale_offsets": ()}},
                 r"^grid: log_scale_offsets is \(\)", id="Boltzmann-grid-empty-offsets"),
    pytest.param(BoltzmannMRFClassifier, {"n_chains": 2**40},
                 r"^n_chains: must be an integer <= 2147483647", id="Boltzmann-n_chains=2**40"),
]


@pytest.mark.parametrize(("estimator", "params", "pattern"), POTTS + DM + GRID + BOLTZMANN)
def test_a_bad_parameter_is_named_at_fit(blobs, estimator, params, pattern):
    X, y = blobs
    with pytest.raises(ValueError, match=pattern):
        estimator(**params).fit(X, y)


@pytest.mark.parametrize("beta", [1e-300, 1e-30])
def test_potts_warns_when_beta_leaves_every_marginal_uniform(blobs, beta):
    X, y = blobs
    with pytest.warns(UserWarning, match="beta: .* every unlabelled node's marginal is uniform"):
        PottsClassifier(beta=beta).fit(X, y)
