"""Optimisation for Boltzmann-machine learning (Zhu & Ghahramani 2002).

Gradient ascent on ``log P(O_L | X, Theta) + log p(Theta)`` (Eqs. 6, 37): the priors on
Theta (the exponential prior on sigma, Eqs. 83-84; our normal prior on the extended
model's parameters, Sec. 6), the gradient oracle over the expectations of
``graphssl.inference.boltzmann.expectations``, the adaptive step size of Sec. 3.1, an optax
alternative, and random restarts from the initialisation ranges of Sec. 5.2.

Symbol map: see ``graphssl.models.boltzmann``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from graphssl.inference.boltzmann.expectations import (
    METHODS,
    BasicParams,
    BoltzmannProblem,
    ChainSettings,
    Moments,
    _enumerate_relative,
    _models_jit,
    chain_moments,
    enumerate_moments,
    gradient,
    log_likelihood_estimate,
    relative_offset,
)
from graphssl.models.boltzmann import ExtendedParams, PairGeometry
from graphssl.validation import check_count, check_real

__all__ = [
    "ExponentialSigmaPrior",
    "GradientOracle",
    "OracleState",
    "OracleValue",
    "ThetaPrior",
    "adaptive_hill_climb",
    "data_scale_params",
    "fit",
    "log_prior",
    "optax_ascent",
    "random_restarts",
    "sample_initial_params",
]


# --------------------------------------------------------------------------- priors
@dataclasses.dataclass(frozen=True)
class ExponentialSigmaPrior:
    """``p(sigma) ∝ e^{lambda sigma}`` on ``[0, max_ij d_ij]``, Eqs. (83)-(84); ``rate`` is
    lambda (``d log p / d sigma = lambda``).  ``sigma_max`` bounds sigma (projection)."""

    rate: float
    sigma_max: float

    def __post_init__(self):
        check_real(self.rate, "rate")
        check_real(self.sigma_max, "sigma_max", low=0.0, low_open=True)

    def log_prob(self, theta: BasicParams):
        return self.rate * jnp.exp(theta.log_sigma)

    def project(self, theta: BasicParams) -> BasicParams:
        return BasicParams(jnp.minimum(theta.log_sigma, jnp.log(self.sigma_max)))


@dataclasses.dataclass(frozen=True)
class ThetaPrior:
    """Independent normal priors on the extended model's Theta (the paper's Sec. 6 asks for
    one; this is our choice, not the paper's):

    * ``alpha_d ~ N(length_scale_mean[d], length_scale_std^2)``: a log-normal prior on the
      squared length scales ``e^{alpha_d}``; ``length_scale_mean`` defaults (``None``) to the
      data scale ``log(2 sigma_0^2)`` for every feature, ``sigma_0`` the median distance
      from each point to its 10 nearest paired points (kNN pairs: the median kNN
      distance), so that at the prior's
      mode ``A_ij = exp(alpha_0 - d_ij^2 / (2 sigma_0^2))``
      (:func:`graphssl.inference.boltzmann.selection.data_scale_log_length_scales`; a mean
      per feature at that feature's own typical difference would make a typical coupling
      ``e^{alpha_0 - D}``: chance accuracy for ``D >= 5``). Give a tuple to override (the
      prior is hashed as a static argument of the compiled objective);
    * ``alpha_0 ~ N(0, alpha0_std^2)``; ``beta_c ~ N(0, beta_std^2)`` (only differences matter);
    * ``gamma ~ N(gamma_mean, gamma_std^2)`` with ``gamma_mean = log log 9``: a label is right
      9 times as often as a particular wrong class, and the ``gamma -> -inf`` collapse of
      Sec. 6 (observations ignored) costs a quadratic penalty.
    """

    length_scale_mean: Any = None
    length_scale_std: float = 2.0
    alpha0_std: float = 3.0
    beta_std: float = 2.0
    gamma_mean: float = math.log(math.log(9.0))
    gamma_std: float = 1.0

    def __post_init__(self):
        for name in ("length_scale_std", "alpha0_std", "beta_std", "gamma_std"):
            check_real(getattr(self, name), name, low=0.0, low_open=True)
        check_real(self.gamma_mean, "gamma_mean")

    def log_prob(self, theta: ExtendedParams, geometry: PairGeometry):
        mean = self.length_scale_mean
        if mean is None:  # the data scale log(2 sigma_0^2), the same for every feature
            from graphssl.inference.boltzmann.selection import neighbour_sq_distance_median

            mean = jnp.log(2.0 * neighbour_sq_distance_median(geometry))
        else:
            mean = jnp.asarray(mean)
        z = [
            (theta.log_length_scales - mean) / self.length_scale_std,
            jnp.atleast_1d(theta.alpha0) / self.alpha0_std,
            theta.class_bias / self.beta_std,
            jnp.atleast_1d(theta.gamma - self.gamma_mean) / self.gamma_std,
        ]
        return -0.5 * sum(jnp.sum(jnp.square(v)) for v in z)


@partial(jax.jit, static_argnums=0)
def _prior_value_and_grad(prior, theta, geometry: PairGeometry):
    return jax.value_and_grad(log_prior, argnums=1)(prior, theta, geometry)


def log_prior(prior, theta, geometry: PairGeometry):
    """``log p(Theta)`` (0 for a flat prior, ``prior=None``)."""
    if prior is None:
        return jnp.zeros(())
    if isinstance(prior, ExponentialSigmaPrior):
        return prior.log_prob(theta)
    return prior.log_prob(theta, geometry)


# --------------------------------------------------------------------------- objective
class OracleState(NamedTuple):
    """What changes from one gradient evaluation to the next: ``key``, the PRNG key of the
    next sampled evaluation (None under enumeration); ``clamped_labels`` /
    ``unclamped_labels``, each phase's last chain labels ``[chains, n]`` (the next starts of
    persistent chains; None before the first evaluation or without persistence); ``n_calls``,
    evaluations done."""

    key: Any = None
    clamped_labels: Any = None
    unclamped_labels: Any = None
    n_calls: int = 0


class OracleValue(NamedTuple):
    """One evaluation: ``objective`` (``log P(O_L|X,Theta) + log p(Theta)``, exact or the
    estimate of Eq. 27), ``gradient`` (a pytree like Theta), ``log_likelihood`` (its first
    term) and ``clamped`` (the clamped phase's :class:`Moments`)."""

    objective: float
    gradient: Any
    log_likelihood: float
    clamped: Moments


@dataclasses.dataclass(frozen=True, eq=False)
class GradientOracle:
    """``(state, theta) -> (state, OracleValue)`` for ``log P(O_L|X,Theta) + log p(Theta)``.

    ``method="enumeration"``: exact moments and exact likelihood (Eq. 82).  Otherwise the
    moments of both phases come from chains (Eq. 26) and the objective is the crude
    estimate of Eq. (27) plus the log prior.  The oracle holds only settings (immutable);
    what an evaluation changes -- the PRNG key and, with persistent chains, the chains' last
    labels -- is the :class:`OracleState` it takes and returns (``oracle.init(key)``), so an
    evaluation is a pure function of ``(state, theta)``: the same state and theta give the
    same value.  The chains run on the host-driven ``sample_chains`` (its compiled scans
    are reused across calls).
    """

    problem: BoltzmannProblem
    method: str = "enumeration"
    prior: Any = None
    chains: ChainSettings = ChainSettings()

    def __post_init__(self):
        if self.chains is None:
            object.__setattr__(self, "chains", ChainSettings())
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}.")

    @functools.cached_property
    def template(self):
        """The problem's model template (built once per oracle)."""
        return self.problem.template()

    def init(self, key=None) -> OracleState:
        """The first state: ``key`` is required when the moments are sampled."""
        if key is None and self.method != "enumeration":
            raise ValueError(f"key: method={self.method!r} samples the moments; pass a PRNG "
                             "key (key=jax.random.key(seed))")
        return OracleState(key=key)

    def moments(self, state: OracleState, theta):
        """``(state, (clamped, unclamped, offset, Moments_c, Moments_u, unclamped_draws))``
        with ``log P(O_L) = Moments_c.log_z - Moments_u.log_z + offset`` under enumeration
        (there ``Moments_c.log_z`` is ``log Z_rel``, the offset the matching
        :func:`~graphssl.inference.boltzmann.expectations.relative_offset`)."""
        clamped, unclamped, offset = _models_jit(self.template, self.problem.geometry, theta)
        if self.method == "enumeration":  # offset for log Z_rel: no cancellation (Eq. 82)
            mc, log_z_rel = _enumerate_relative(clamped)
            mc = mc._replace(log_z=log_z_rel)
            return state, (clamped, unclamped, relative_offset(self.template, theta), mc,
                           enumerate_moments(unclamped), None)
        key, kc, ku = jax.random.split(state.key, 3)
        use = self.chains.persistent
        mc, sc = chain_moments(clamped, kc, self.method, self.chains,
                               state.clamped_labels if use else None)
        mu, su = chain_moments(unclamped, ku, self.method, self.chains,
                               state.unclamped_labels if use else None)
        state = state._replace(key=key, clamped_labels=sc.final_state.labels,
                               unclamped_labels=su.final_state.labels)
        return state, (clamped, unclamped, offset, mc, mu, su.labels)

    def __call__(self, state: OracleState, theta) -> tuple[OracleState, OracleValue]:
        state, (clamped, _, offset, mc, mu, draws) = self.moments(state, theta)
        g_lik = gradient(theta, self.template, self.problem.geometry, mc, mu)
        lp, g_prior = _prior_value_and_grad(self.prior, theta, self.problem.geometry)
        grad = jax.tree_util.tree_map(jnp.add, g_lik, g_prior)
        if draws is None:
            loglik = mc.log_z - mu.log_z + offset
        else:
            loglik = log_likelihood_estimate(clamped, offset, draws)
        value = OracleValue(float(loglik + lp), grad, float(loglik), mc)
        return state._replace(n_calls=state.n_calls + 1), value


# --------------------------------------------------------------------------- optimisers
def _project(prior, theta):
    return prior.project(theta) if isinstance(prior, ExponentialSigmaPrior) else theta


def adaptive_hill_climb(
    oracle: GradientOracle,
    theta0,
    *,
    key=None,
    step=0.1,
    grow=1.5,
    shrink=0.5,
    patience=2,
    min_step=1e-4,
    max_iter=300,
    ftol=1e-7,
    xtol=0.0,
    overshoot: str = "auto",
):
    """Gradient ascent with the adaptive step of Sec. 3.1: after ``patience`` successful
    steps in a row the step grows by ``grow``; on overshoot the last good parameters are
    kept and the step shrinks by ``shrink``; stop when the step falls below ``min_step``,
    the objective rises by less than ``ftol`` (exact objective only), an accepted step moves
    every parameter by less than ``xtol`` (for noisy sampled gradients), or after
    ``max_iter`` steps.

    A pure function of its arguments: the oracle's state (``oracle.init(key)``; ``key``
    required for sampled moments) is threaded through the evaluations, nothing is mutated.
    A host loop: each step's accept / shrink decision and the oracle's chains
    (``sample_chains``) are driven from Python, one compiled program per phase.

    Overshoot test (``overshoot``): ``"objective"`` -- the objective fell (exact
    enumeration); ``"gradient"`` -- the new gradient points back, ``g' . (theta' - theta)
    < 0`` (robust to the noise of sampled objectives); ``"auto"`` picks by method.
    Returns ``(theta, info)`` with iterations, converged, reason, the history and the
    final oracle state (``oracle_state``).

    A step whose objective or gradient is not finite counts as an overshoot (the last good
    parameters are kept), so every accepted point is finite. A start whose objective or
    gradient is not finite is refused (ValueError naming ``theta0``): no step from it can
    be judged, and reporting the run converged would be false. ``step``, ``grow``,
    ``shrink``, ``patience``, ``min_step``, ``max_iter`` (``0``: the start, evaluated, as
    the answer, not converged), ``ftol`` and ``xtol`` are checked (ValueError naming each).
    """
    step = check_real(step, "step", low=0.0, low_open=True)
    check_real(grow, "grow", low=1.0)
    check_real(shrink, "shrink", low=0.0, high=1.0, low_open=True, high_open=True)
    check_count(patience, "patience", least=1)
    check_real(min_step, "min_step", low=0.0)
    max_iter = check_count(max_iter, "max_iter")
    check_real(ftol, "ftol", low=0.0)
    check_real(xtol, "xtol", low=0.0)
    if overshoot == "auto":
        overshoot = "objective" if oracle.method == "enumeration" else "gradient"
    elif overshoot not in ("objective", "gradient"):
        raise ValueError(f"overshoot: use 'auto', 'objective' or 'gradient', got {overshoot!r}")
    flat, unravel = ravel_pytree(theta0)
    state, current = oracle(oracle.init(key), theta0)
    g = ravel_pytree(current.gradient)[0]
    _check_finite_start(current, g, flat)
    history = [dict(objective=current.objective, step=step, theta=np.asarray(flat),
                    accepted=True)]
    wins, reason, it = 0, "max_iter", 0
    for it in range(1, max_iter + 1):  # noqa: B007 (it is reported)
        new_flat = ravel_pytree(_project(oracle.prior, unravel(flat + step * g)))[0]
        state, new = oracle(state, unravel(new_flat))
        new_g = ravel_pytree(new.gradient)[0]
        if not (np.isfinite(new.objective) and bool(jnp.all(jnp.isfinite(new_g)))):
            bad = True
        elif overshoot == "objective":
            bad = not (new.objective >= current.objective)
        else:
            bad = float(jnp.dot(new_g, new_flat - flat)) < 0.0
        history.append(dict(objective=new.objective, step=step, theta=np.asarray(new_flat),
                            accepted=not bad))
        if bad:
            step, wins = step * shrink, 0
            if step < min_step:
                reason = "step below min_step"
                break
            continue
        gain = new.objective - current.objective
        moved = float(jnp.max(jnp.abs(new_flat - flat)))
        flat, g, current = new_flat, new_g, new
        wins += 1
        if wins >= patience:
            step, wins = step * grow, 0
        if overshoot == "objective" and 0 <= gain < ftol:
            reason = "objective converged"
            break
        if moved < xtol:
            reason = "parameter change below xtol"
            break
    info = _ascent_info(state, it, reason, current, float(jnp.linalg.norm(g)), history)
    return unravel(flat), info


def _check_finite_start(value: OracleValue, flat_gradient, flat_theta) -> None:
    """A start whose objective or gradient is not finite: a ValueError naming ``theta0``."""
    if np.isfinite(value.objective) and bool(jnp.all(jnp.isfinite(flat_gradient))):
        return
    where = ("theta0 holds NaN or inf" if not bool(jnp.all(jnp.isfinite(flat_theta)))
             else "check the prior's settings and the problem's data")
    raise ValueError(f"theta0: the objective at the start is {value.objective!r} (gradient "
                     f"finite: {bool(jnp.all(jnp.isfinite(flat_gradient)))}); an ascent needs "
                     f"a finite start ({where})")


_NOT_CONVERGED = ("max_iter", "non-finite objective")


def _ascent_info(state: OracleState, iterations, reason, current: OracleValue, grad_norm,
                 history) -> dict:
    """The run summary both ascent loops return; ``converged`` only for a stopping rule met
    at a finite objective."""
    return dict(
        iterations=iterations,
        converged=reason not in _NOT_CONVERGED and bool(np.isfinite(current.objective))
        and bool(np.isfinite(grad_norm)),
        reason=reason,
        objective=current.objective,
        log_likelihood=current.log_likelihood,
        grad_norm=grad_norm,
        history=history,
        n_evaluations=state.n_calls,
        oracle_state=state,
    )


def optax_ascent(oracle: GradientOracle, theta0, optimizer=None, *, key=None, max_iter=300,
                 gtol=1e-4):
    """Ascent with an optax optimiser (default ``optax.adam(0.05)``) on ``-objective``;
    stops when the gradient norm is below ``gtol`` or after ``max_iter`` steps. The optax
    state and the oracle state (``oracle.init(key)``) are threaded through a host loop, as
    in :func:`adaptive_hill_climb`.

    A non-finite start is refused (ValueError naming ``theta0``); a later non-finite
    evaluation stops the run at the last finite parameters with reason
    ``"non-finite objective"`` and ``converged=False``. ``max_iter=0``: the start,
    evaluated once, not converged."""
    import optax

    max_iter = check_count(max_iter, "max_iter")
    check_real(gtol, "gtol", low=0.0)
    optimizer = optax.adam(0.05) if optimizer is None else optimizer
    theta, opt_state, state = theta0, optimizer.init(theta0), oracle.init(key)
    state, current = oracle(state, theta)
    flat = ravel_pytree(current.gradient)[0]
    _check_finite_start(current, flat, ravel_pytree(theta0)[0])
    norm = float(jnp.linalg.norm(flat))
    history = []
    reason, it, good = "max_iter", 0, theta  # good: the last parameters evaluated finite
    for it in range(1, max_iter + 1):  # noqa: B007 (it is reported)
        if it > 1:
            state, value = oracle(state, theta)
            flat = ravel_pytree(value.gradient)[0]
            if not (np.isfinite(value.objective) and bool(jnp.all(jnp.isfinite(flat)))):
                theta, reason = good, "non-finite objective"
                break
            current, norm = value, float(jnp.linalg.norm(flat))
        history.append(dict(objective=current.objective, grad_norm=norm))
        if norm < gtol:
            reason = "gradient below gtol"
            break
        good = theta
        neg = jax.tree_util.tree_map(jnp.negative, current.gradient)
        updates, opt_state = optimizer.update(neg, opt_state, theta)
        theta = _project(oracle.prior, optax.apply_updates(theta, updates))
    return theta, _ascent_info(state, it, reason, current, norm, history)


def fit(
    problem: BoltzmannProblem,
    theta0,
    *,
    method="enumeration",
    prior=None,
    optimizer="adaptive",
    key=None,
    chains: ChainSettings | None = None,
    **options,
):
    """Learn Theta by gradient ascent on ``log P(O_L|X,Theta) + log p(Theta)`` (Eqs. 6, 37).
    ``optimizer``: ``"adaptive"`` (Sec. 3.1) or an ``optax.GradientTransformation``.
    ``key``: PRNG key of the sampled moments (required unless ``method="enumeration"``)."""
    oracle = GradientOracle(problem, method, prior, chains)
    if isinstance(optimizer, str):
        if optimizer != "adaptive":
            raise ValueError(
                f"optimizer must be 'adaptive' or an optax transformation, got {optimizer!r}."
            )
        return adaptive_hill_climb(oracle, theta0, key=key, **options)
    return optax_ascent(oracle, theta0, optimizer, key=key, **options)


# --------------------------------------------------------------------------- restarts
def sample_initial_params(problem: BoltzmannProblem, key):
    """Random initial Theta from the ranges of Sec. 5.2: ``alpha_0 ~ U[-4.61, 1.93]``;
    ``alpha_d ~ U[log(min_ij (dx^d)^2 / 5), log(max_ij (dx^d)^2 * 5)]`` (min over differences
    above ``1e-6 max``: rounding noise between equal coordinates would give ``-50``);
    ``beta_1 = 0``, ``beta_c ~ U[-2.20, 2.20]``; ``gamma ~ U[-0.90, 1.93]``.
    Basic model: ``log sigma ~ U[log min d_ij, log max d_ij]`` over the positive
    distances (all points identical: ``sigma`` at :func:`data_scale_params`' data scale)."""
    sq = np.asarray(problem.geometry.sq_diff)
    k0, k1, k2, k3 = jax.random.split(key, 4)
    if problem.kind == "basic":
        d2 = sq.sum(1)
        if not np.any(d2 > 0):
            start = float(data_scale_params(problem).log_sigma)
            return BasicParams(jnp.asarray(start))
        lo, hi = 0.5 * np.log(d2[d2 > 0].min()), 0.5 * np.log(d2.max())
        return BasicParams(jax.random.uniform(k0, (), minval=lo, maxval=hi))
    tiny = 1e-6 * np.maximum(sq.max(0), 1e-300)  # rounding-level differences count as 0
    smallest = [c[c > t].min() if np.any(c > t) else 1.0 for c, t in zip(sq.T, tiny, strict=True)]
    lo = np.log(np.array(smallest) / 5)
    hi = np.log(np.maximum(sq.max(0), 1e-12) * 5)
    C = problem.n_classes
    beta = jnp.concatenate(
        [jnp.zeros(1), jax.random.uniform(k2, (C - 1,), minval=-2.2, maxval=2.2)]
    )
    return ExtendedParams(
        alpha0=jax.random.uniform(k0, (), minval=-4.61, maxval=1.93),
        log_length_scales=jax.random.uniform(k1, lo.shape, minval=lo, maxval=hi),
        class_bias=beta,
        gamma=jax.random.uniform(k3, (), minval=-0.90, maxval=1.93),
    )


def data_scale_params(problem: BoltzmannProblem):
    """The start at the data scale (the mode of :class:`ThetaPrior`): ``alpha_0 = 0``,
    ``alpha_d = log(2 sigma_0^2)``, ``beta = 0``, ``gamma = log log 9``; basic model:
    ``sigma = sigma_0`` (``sigma_0``: :func:`~graphssl.inference.boltzmann.selection.
    data_scale`)."""
    from graphssl.inference.boltzmann.selection import data_scale, data_scale_log_length_scales

    geometry = problem.geometry
    if problem.kind == "basic":
        return BasicParams(jnp.asarray(math.log(data_scale(geometry))))
    return ExtendedParams(
        alpha0=jnp.zeros(()),
        log_length_scales=jnp.asarray(data_scale_log_length_scales(geometry)),
        class_bias=jnp.zeros(problem.n_classes),
        gamma=jnp.asarray(ThetaPrior.gamma_mean),
    )


def random_restarts(problem: BoltzmannProblem, key, n_restarts: int = 10, *,
                    from_data_scale: bool = True, **fit_options):
    """Hill climbing from ``n_restarts`` starts (Sec. 5.2, Tables 5-8): the first at the
    data scale (:func:`data_scale_params`; ``from_data_scale=False``: random as the others),
    the others random; returns ``(best_theta, best_info, trials)`` with ``trials`` a list of
    ``(start, theta, info)`` and ``best`` the trial of highest final objective (a
    ValueError naming ``n_restarts`` unless it is a whole number >= 1)."""
    n_restarts = check_count(n_restarts, "n_restarts", least=1)
    trials = []
    for i, k in enumerate(jax.random.split(key, n_restarts)):
        k_init, k_fit = jax.random.split(k)
        if i == 0 and from_data_scale:
            start = data_scale_params(problem)
        else:
            start = sample_initial_params(problem, k_init)
        theta, info = fit(problem, start, key=k_fit, **fit_options)
        trials.append((start, theta, info))
    best = max(range(n_restarts), key=lambda i: trials[i][2]["objective"])
    return trials[best][1], trials[best][2], trials
