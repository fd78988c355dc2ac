"""Hyper-parameters of HarmonicFunctionClassifier, LGCClassifier, ParzenWindowClassifier,
KNNGraphClassifier, MincutClassifier and HarmonicMixtureClassifier are checked at ``fit`` with a
message that starts with the parameter's name (fuzz report fuzz5a: an unchecked CG ``tol``
that returned unsolved rows, flags read by truthiness, Parzen ``tau=inf`` giving uniform
rows, ``reg_covar`` ending in a LinAlgError, ``n_neighbors`` errors that blamed ``k``, raw
TypeErrors from strings and None); a CG solve that does not reach ``tol`` is reported."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from param_cases import bad_value_case as _case
from param_cases import two_blobs

import graphssl.inference.optimize.baselines.solvers as solvers
from graphssl.estimators import (
    HarmonicFunctionClassifier,
    HarmonicMixtureClassifier,
    KNNGraphClassifier,
    LGCClassifier,
    MincutClassifier,
    ParzenWindowClassifier,
)
from graphssl.inference.mcmc.statistics import ConvergenceWarning

NAN, INF = float("nan"), float("inf")


@pytest.fixture(scope="module")
def blobs():
    return two_blobs(30)


BAD_TOL = (NAN, -1.0, INF, 1e300, 2.0, 0.0, "1e-5", None)
HF_LGC = [
    *[_case(HarmonicFunctionClassifier, "tol", v, method="cg") for v in BAD_TOL],
    *[_case(LGCClassifier, "tol", v, method="cg") for v in BAD_TOL],
    _case(HarmonicFunctionClassifier, "tol", 0.0, method="jax_cg"),
    _case(LGCClassifier, "tol", 2.0, method="jax_cg"),
    *[_case(LGCClassifier, "alpha", v) for v in ("0.9", None, np.array([0.9]))],
    *[_case(HarmonicFunctionClassifier, "normalize_graph", v)
      for v in ("False", "no", NAN, [0], 1)],
    pytest.param(LGCClassifier, {"prior_weight": INF},
                 r"^prior_weight: must be 'cv' or a finite number > 0, got inf$",
                 id="LGC-prior_weight=inf-message-says-finite"),
]

PARZEN = [
    *[_case(ParzenWindowClassifier, "tau", v)
      for v in (INF, 1e300, 1e12, 0.0, "5", None, np.array([3.0]), True)],
    *[_case(ParzenWindowClassifier, "class_prior", v)
      for v in ([1, 2], "uniform", [1e300, 1e300], [2.0, -1.0])],
]

KNN = [_case(KNNGraphClassifier, "n_neighbors", v)
       for v in (0, 2.5, None, "Gibbs", "10", 1e300, True, 3.0)]

MINCUT = [
    *[_case(MincutClassifier, "alpha", v) for v in ("1", None, np.array([1.0]), True)],
    *[_case(MincutClassifier, "method", v) for v in (["scipy"],)],
    *[_case(MincutClassifier, "delta", v, scheme="delta") for v in ("1.5", INF, True)],
]

HM_BASE = dict(n_components=4, max_iter=20)
HM = [
    *[_case(HarmonicMixtureClassifier, "reg_covar", v, **HM_BASE)
      for v in (0.0, -1.0, NAN, INF, 1e-310, 1e308, None, "Gibbs")],
    *[_case(HarmonicMixtureClassifier, "max_iter", v, n_components=4)
      for v in (-1, 1e300, 2.5, "10", None, True)],
    *[_case(HarmonicMixtureClassifier, "tol", v, **HM_BASE) for v in (None, "Gibbs", -1.0, NAN)],
    *[_case(HarmonicMixtureClassifier, "alpha", v, **HM_BASE) for v in (None, "Gibbs")],
]


@pytest.mark.parametrize(("estimator", "params", "pattern"), HF_LGC + PARZEN + KNN + MINCUT + HM)
def test_a_bad_parameter_is_named_at_fit(blobs, estimator, params, pattern):
    X, y, _ = blobs
    with pytest.raises(ValueError, match=pattern):
        estimator(**params).fit(X, y)


@pytest.mark.parametrize("failure", ["linalg", "nan"])
def test_a_degenerate_mixture_names_reg_covar(blobs, monkeypatch, failure):
    """A mixture that collapses in EM (full covariances with a tiny prior, in float32:
    reg_covar=1e-6, 8 components on 40 points) ended in numpy's LinAlgError from the lambda
    step; it is a ValueError naming reg_covar and the fix. The failure is simulated: whether
    EM collapses depends on XLA's float32 arithmetic (the suite's compiler flags differ)."""
    import graphssl.estimators.harmonic_mixture as module

    X, y, _ = blobs
    if failure == "linalg":
        def broken(*args, **kwargs):
            raise np.linalg.LinAlgError("Eigenvalues did not converge")

        monkeypatch.setattr(module, "fit_harmonic_mixture", broken)
    else:
        monkeypatch.setattr(module, "predict_proba",
                            lambda fit, X: np.full((X.shape[0], 2), np.nan))
    with pytest.raises(ValueError, match=r"^reg_covar: the EM mixture became numerically "
                                         r"degenerate .*covariance_type='spherical'"):
        HarmonicMixtureClassifier(n_components=4, max_iter=5, covariance_type="full",
                                  reg_covar=1e-6).fit(X, y)


def test_reg_covar_below_the_working_precision_is_refused_before_em(blobs):
    """In float32 (JAX's default) 1e-300 times the features' variance is 0: refused before
    the EM, which ended in numpy's LinAlgError."""
    X, y, _ = blobs
    with jax.enable_x64(False), pytest.raises(ValueError,
                                              match=r"^reg_covar: 1e-300 .* float32"):
        HarmonicMixtureClassifier(n_components=4, reg_covar=1e-300).fit(X, y)


@pytest.mark.parametrize("estimator", [HarmonicFunctionClassifier, LGCClassifier])
def test_a_cg_solve_cut_off_by_maxiter_is_warned(blobs, estimator, monkeypatch):
    X, y, _ = blobs
    monkeypatch.setattr(solvers, "default_maxiter", lambda n: 2)
    with pytest.warns(ConvergenceWarning, match=r"'cg' solve stopped after 2 iterations .*tol="):
        estimator(method="cg", tol=1e-12).fit(X, y)


@pytest.mark.parametrize("estimator", [HarmonicFunctionClassifier, LGCClassifier])
def test_a_broken_down_cg_solve_is_redone_directly(blobs, estimator, monkeypatch):
    """With tol=0 (or one below float32's precision) jax_cg iterated until its residual was
    NaN, and the NaN rows came back uniform (accuracy 0.55) without a word; the breakdown is
    simulated here (it depends on XLA's float32 arithmetic)."""
    X, y, truth = blobs

    def broken(A, B, inv_diag, tol, maxiter):
        return np.full(np.shape(B), np.nan), 342, float("nan")

    monkeypatch.setattr(solvers, "_jax_batched_pcg", broken)
    with pytest.warns(ConvergenceWarning, match=r"'jax_cg' solve broke down .*'direct'"):
        clf = estimator(method="jax_cg", tol=1e-30).fit(X, y)
    direct = estimator(method="direct").fit(X, y)
    np.testing.assert_allclose(clf.label_distributions_, direct.label_distributions_,
                               atol=1e-12)
    assert np.array_equal(clf.transduction_, truth)
