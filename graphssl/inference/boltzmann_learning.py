"""Boltzmann-machine learning for the MRF of Zhu & Ghahramani (2002).

Gradient ascent on ``log P(O_L | X, Theta) + log p(Theta)``.  The likelihood gradient is
the clamped minus the unclamped expectation of the gradient of the negative energy,
Eqs. (24), (38).  Since ``-energy(Y; Theta) = sum_{i<j} A_ij(Theta) delta(y_i,y_j) +
sum_i h_i(y_i; Theta)`` is linear in the sufficient statistics, the expectations need only
two moments per phase: the edge agreement probabilities ``m_e = P(y_i = y_j)`` and the node
marginals ``p_ic``.  The gradient is then the ordinary gradient of

    phi(Theta) = 1/2 sum_e A_e(Theta) (m^c_e - m^u_e) + sum_ic h_ic(Theta) p^c_ic
                 - sum_ic h^u_ic(Theta) p^u_ic - l log(C - 1 + e^{e^gamma})

at fixed moments, which reproduces Eqs. (41)-(44) term by term; the last term collects the
summed-out observations of Eqs. (64) and (73) (their ``u`` parts cancel; Eq. 82).

Moments come from exact enumeration (vectorised over all ``C^n_free`` configurations,
chunked, for ``C^n_free <= ~2^22``) or from Markov chains of ``graphssl.inference``
(Gibbs, Gibbs + permutation move, Swendsen-Wang; Secs. 3.2-3.4).

Symbol map: see ``graphssl.models.boltzmann``.  ``BasicParams.log_sigma = log sigma``;
``ExtendedParams`` = ``(alpha_0, alpha_1..D, beta_1..C, gamma)``.
"""

from __future__ import annotations

import dataclasses
import math
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from graphssl.models.boltzmann import (
    BoltzmannMRF,
    ExtendedParams,
    PairGeometry,
    basic_boltzmann,
    basic_couplings,
    extended_boltzmann,
    length_scale_couplings,
    log_evidence_normaliser,
)

__all__ = [
    "BasicParams",
    "BoltzmannPosterior",
    "BoltzmannProblem",
    "ExponentialSigmaPrior",
    "Moments",
    "ThetaPrior",
    "adaptive_hill_climb",
    "enumerate_moments",
    "exact_log_likelihood",
    "fit",
    "gradient",
    "log_likelihood_estimate",
    "optax_ascent",
    "posterior",
    "random_restarts",
    "sample_initial_params",
    "sampled_moments",
]

MAX_ENUMERATION = 2**22


class BasicParams(NamedTuple):
    """Theta of the basic model, Eq. (2): ``log_sigma = log sigma``."""

    log_sigma: jax.Array


class Moments(NamedTuple):
    """Sufficient statistics of one phase: ``edge_agreement[e] = P(y_s = y_r)``,
    ``node_marginals[i, c] = P(y_i = c)``, ``log_z`` (exact only; NaN when sampled),
    ``mode`` (most probable configuration found) and ``mode_log_weight``."""

    edge_agreement: jax.Array
    node_marginals: jax.Array
    log_z: jax.Array
    mode: jax.Array
    mode_log_weight: jax.Array


# --------------------------------------------------------------------------- problem
@dataclasses.dataclass(frozen=True)
class BoltzmannProblem:
    """Data of one learning problem: pair geometry, labels (-1 = unlabelled) and model kind
    (``"basic"``: Eq. 2, hard-clamped labels; ``"extended"``: Eq. 40 reduced to F/G)."""

    geometry: PairGeometry
    labels: np.ndarray
    n_classes: int
    kind: str = "extended"

    def __post_init__(self):
        if self.kind not in ("basic", "extended"):
            raise ValueError(f"kind must be 'basic' or 'extended', got {self.kind!r}.")
        lab = np.asarray(self.labels)
        if lab.shape != (self.geometry.n_nodes,) or not np.any(lab >= 0):
            raise ValueError("labels must have one entry per point and at least one label >= 0.")

    @property
    def n_labelled(self) -> int:
        return int(np.sum(np.asarray(self.labels) >= 0))

    def template(self) -> BoltzmannMRF:
        """The clamped-phase model at placeholder parameters (reparametrised by ``models``)."""
        D = self.geometry.sq_diff.shape[1]
        if self.kind == "basic":
            return basic_boltzmann(self.geometry, 1.0, self.labels, self.n_classes)
        zeros = jnp.zeros((), self.geometry.sq_diff.dtype)
        theta = ExtendedParams(zeros, jnp.zeros(D), jnp.zeros(self.n_classes), zeros)
        return extended_boltzmann(self.geometry, theta, self.labels)


def models(template: BoltzmannMRF, geometry: PairGeometry, theta):
    """``(clamped, unclamped, offset)`` at ``theta`` with ``L = log Z_c - log Z_u + offset``:
    basic model offset 0; extended model ``offset = -l log(C-1+e^{e^gamma})`` (Eq. 82)."""
    if isinstance(theta, BasicParams):
        clamped = template.with_parameters(basic_couplings(geometry, jnp.exp(theta.log_sigma)))
        return clamped, clamped.unclamped(), jnp.zeros((), clamped.field.dtype)
    couplings = length_scale_couplings(geometry, theta.alpha0, theta.log_length_scales)
    clamped = template.with_parameters(couplings, theta.class_bias, jnp.exp(theta.gamma))
    n_lab = jnp.sum(template.noisy_observed)
    offset = -n_lab * log_evidence_normaliser(theta.gamma, template.n_classes)
    return clamped, clamped.unclamped(), offset


# --------------------------------------------------------------------------- enumeration
def _dense_couplings(model: BoltzmannMRF) -> jax.Array:
    n = model.n_nodes
    g = model.graph
    return jnp.zeros((n, n), g.weights.dtype).at[g.senders, g.receivers].add(g.weights)


@partial(jax.jit, static_argnames=("n_classes", "n_configs", "chunk"))
def _enumerate(J, h, base, free, *, n_classes, n_configs, chunk):
    n, C = h.shape[0], n_classes
    n_free = free.shape[0]
    powers = C ** jnp.arange(n_free, dtype=jnp.int64 if jax.config.jax_enable_x64 else jnp.int32)
    n_chunks = -(-n_configs // chunk)
    dtype = J.dtype

    def body(carry, c):
        m, s, node, pair, best_lw, best = carry
        k = c * chunk + jnp.arange(chunk, dtype=powers.dtype)
        digits = (k[:, None] // powers[None, :]) % C
        y = jnp.broadcast_to(base, (chunk, n)).at[:, free].set(digits.astype(base.dtype))
        oh = jax.nn.one_hot(y, C, dtype=dtype)
        lw = 0.5 * jnp.einsum("mic,ij,mjc->m", oh, J, oh) + jnp.einsum("mic,ic->m", oh, h)
        lw = jnp.where(k < n_configs, lw, -jnp.inf)
        m_new = jnp.maximum(m, jnp.max(lw))
        scale = jnp.exp(m - m_new)
        w = jnp.exp(lw - m_new)
        s = s * scale + jnp.sum(w)
        node = node * scale + jnp.einsum("m,mic->ic", w, oh)
        pair = pair * scale + jnp.einsum("m,mic,mjc->ij", w, oh, oh)
        i = jnp.argmax(lw)
        better = lw[i] > best_lw
        return (
            m_new,
            s,
            node,
            pair,
            jnp.where(better, lw[i], best_lw),
            jnp.where(better, y[i], best),
        ), None

    init = (
        jnp.asarray(-jnp.inf, dtype),
        jnp.zeros((), dtype),
        jnp.zeros((n, C), dtype),
        jnp.zeros((n, n), dtype),
        jnp.asarray(-jnp.inf, dtype),
        base,
    )
    (m, s, node, pair, best_lw, best), _ = jax.lax.scan(body, init, jnp.arange(n_chunks))
    return m + jnp.log(s), node / s, pair / s, best, best_lw


def enumerate_moments(model: BoltzmannMRF, chunk: int = 2**13) -> Moments:
    """Exact moments of ``p(Y) ∝ exp(-model.energy(Y))`` by summing over every
    configuration of the free (not hard-clamped) nodes, ``C^n_free <= 2^22``, vectorised
    in chunks of ``chunk`` configurations with a running log-sum-exp (Sec. 3.1)."""
    observed = np.asarray(model.observed)
    free = np.nonzero(~observed)[0]
    n_configs = model.n_classes ** len(free)
    if n_configs > MAX_ENUMERATION:
        raise ValueError(
            f"exact enumeration needs C^n_free = {model.n_classes}^{len(free)} configurations "
            f"(> 2^22); use method='swendsen_wang' or 'gibbs' for this problem."
        )
    chunk = int(min(chunk, 2 ** math.ceil(math.log2(max(n_configs, 2)))))
    base = jnp.where(model.observed, model.labels, 0).astype(jnp.int32)
    J = _dense_couplings(model)
    log_z, node, pair, best, best_lw = _enumerate(
        J,
        model.unary_logits(),
        base,
        jnp.asarray(free, jnp.int32),
        n_classes=model.n_classes,
        n_configs=n_configs,
        chunk=chunk,
    )
    g = model.graph
    return Moments(pair[g.senders, g.receivers], node, log_z, best, best_lw)


@jax.jit
def sampled_moments(model: BoltzmannMRF, labels) -> Moments:
    """Monte-Carlo moments from label draws ``labels[..., n]`` (any leading axes) of a
    chain targeting ``model`` (Eq. 26)."""
    y = jnp.asarray(labels).reshape(-1, model.n_nodes).astype(jnp.int32)
    g = model.graph
    dtype = g.weights.dtype
    agree = jnp.mean((y[:, g.senders] == y[:, g.receivers]).astype(dtype), axis=0)
    node = jnp.mean(jax.nn.one_hot(y, model.n_classes, dtype=dtype), axis=0)
    energies = jax.vmap(model.energy)(y)
    i = jnp.argmin(energies)
    return Moments(agree, node, jnp.asarray(jnp.nan, dtype), y[i], -energies[i])


# --------------------------------------------------------------------------- gradient
def _expected_potential(theta, template, geometry, mc: Moments, mu: Moments):
    clamped, unclamped, offset = models(template, geometry, theta)
    pair_c = 0.5 * jnp.sum(clamped.graph.weights * mc.edge_agreement)
    pair_u = 0.5 * jnp.sum(unclamped.graph.weights * mu.edge_agreement)
    unary_c = jnp.sum(clamped.unary_logits() * mc.node_marginals)
    unary_u = jnp.sum(unclamped.unary_logits() * mu.node_marginals)
    return pair_c + unary_c - pair_u - unary_u + offset


@jax.jit
def gradient(
    theta, template: BoltzmannMRF, geometry: PairGeometry, clamped: Moments, unclamped: Moments
):
    """``d/dTheta log P(O_L | X, Theta)`` = clamped minus unclamped expectation of
    ``d(-energy)/dTheta`` (Eqs. 24, 38, 41-44, 64, 73), from the two phases' moments."""
    return jax.grad(_expected_potential)(theta, template, geometry, clamped, unclamped)


@jax.jit
def _models_jit(template, geometry, theta):
    return models(template, geometry, theta)


def exact_log_likelihood(problem: BoltzmannProblem, theta, template: BoltzmannMRF | None = None):
    """Exact ``log P(O_L | X, Theta)`` by enumeration: ``log Z_c - log Z_u`` for the basic
    model, Eq. (82) for the extended one.  Returns ``(L, clamped_moments, unclamped_moments)``."""
    template = problem.template() if template is None else template
    clamped, unclamped, offset = _models_jit(template, problem.geometry, theta)
    mc, mu = enumerate_moments(clamped), enumerate_moments(unclamped)
    return mc.log_z - mu.log_z + offset, mc, mu


@jax.jit
def log_likelihood_estimate(clamped: BoltzmannMRF, offset, unclamped_draws) -> jax.Array:
    """Crude estimate of ``log P(O_L)`` from unclamped draws, Eq. (27):
    ``log mean_n P(O_L | Y^n)``; ``P(O_L|Y) = [Y_L = O_L]`` for the basic model and
    ``prod_{i in L} e^{e^gamma [y_i = o_i]} / (C-1+e^{e^gamma})`` for the extended one.
    (Eq. 27 as printed also multiplies by ``P(Y^n)``, which would double-count: the draws
    already follow ``P(Y)``; we use the consistent frequency estimator.)"""
    y = jnp.asarray(unclamped_draws).reshape(-1, clamped.n_nodes)
    hard_ok = jnp.all((y == clamped.labels[None]) | ~clamped.observed[None], axis=1)
    match = (y == clamped.noisy_labels[None]) & clamped.noisy_observed[None]
    log_p = jnp.where(hard_ok, clamped.evidence_strength * jnp.sum(match, axis=1), -jnp.inf)
    return jax.scipy.special.logsumexp(log_p) - jnp.log(y.shape[0]) + offset


# --------------------------------------------------------------------------- priors
@dataclasses.dataclass(frozen=True)
class ExponentialSigmaPrior:
    """``p(sigma) ∝ e^{lambda sigma}`` on ``[0, max_ij d_ij]``, Eqs. (83)-(84); ``rate`` is
    lambda (``d log p / d sigma = lambda``).  ``sigma_max`` bounds sigma (projection)."""

    rate: float
    sigma_max: float

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
      log of the median squared difference of each feature (give a tuple: the prior is
      hashed as a static argument of the compiled objective);
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

    def log_prob(self, theta: ExtendedParams, geometry: PairGeometry):
        mean = self.length_scale_mean
        if mean is None:
            mean = jnp.log(jnp.median(geometry.sq_diff, axis=0) + 1e-12)
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


# --------------------------------------------------------------------------- chains
METHODS = ("enumeration", "gibbs", "gibbs_permutation", "swendsen_wang")
_KERNELS: dict = {}


def _kernel(method: str, model: BoltzmannMRF):
    """The inference-core kernel for ``method`` (built once per structure, so compiled
    scans are reused across gradient steps)."""
    from graphssl.inference.gibbs import chromatic_gibbs, sequential_gibbs
    from graphssl.inference.kernels import compose
    from graphssl.inference.moves import permutation_move
    from graphssl.inference.swendsen_wang import swendsen_wang

    dense = model.n_nodes <= 64
    structure = None
    if method != "swendsen_wang" and not dense:  # chromatic Gibbs: colouring of this graph
        structure = hash(
            np.asarray(model.graph.senders).tobytes() + np.asarray(model.graph.receivers).tobytes()
        )
    key = (method, dense, structure)
    if key not in _KERNELS:
        if method == "swendsen_wang":
            k = swendsen_wang()
        else:
            k = sequential_gibbs() if dense else chromatic_gibbs(model.graph)
            if method == "gibbs_permutation":
                k = compose(k, permutation_move())
        _KERNELS[key] = k
    return _KERNELS[key]


@dataclasses.dataclass(frozen=True)
class ChainSettings:
    """Markov-chain settings per phase and gradient step (Sec. 3.2): ``n_chains`` chains,
    ``burn_in`` discarded steps, ``n_samples`` kept draws every ``thin`` steps.  With
    ``persistent=True`` each gradient step restarts the chains from the previous step's
    final labels (burn-in is then ``persistent_burn_in``)."""

    n_chains: int = 4
    n_samples: int = 500
    burn_in: int = 100
    thin: int = 1
    persistent: bool = True
    persistent_burn_in: int = 10


def chain_moments(model: BoltzmannMRF, key, method: str, settings: ChainSettings, init_labels=None):
    """Moments of ``model`` from chains of ``method``; returns ``(Moments, Samples)``."""
    from graphssl.inference.chains import sample_chains

    if method not in METHODS[1:]:
        raise ValueError(f"method must be one of {METHODS[1:]} for chains, got {method!r}.")
    burn = settings.burn_in if init_labels is None else settings.persistent_burn_in
    samples = sample_chains(
        _kernel(method, model),
        model,
        key,
        n_chains=settings.n_chains,
        n_samples=settings.n_samples,
        burn_in=burn,
        thin=settings.thin,
        init_labels=init_labels,
    )
    return sampled_moments(model, samples.labels), samples


# --------------------------------------------------------------------------- objective
class GradientOracle:
    """``theta -> (objective, gradient, aux)`` for ``log P(O_L|X,Theta) + log p(Theta)``.

    ``method="enumeration"``: exact moments and exact likelihood (Eq. 82).  Otherwise the
    moments of both phases come from chains (Eq. 26) and the objective is the crude
    estimate of Eq. (27) plus the log prior.  Holds the PRNG key and, with persistent
    chains, the last labels of each phase (the only state; the maths is pure).
    """

    def __init__(
        self,
        problem: BoltzmannProblem,
        method: str = "enumeration",
        prior=None,
        key=None,
        chains: ChainSettings | None = None,
    ):
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}.")
        self.problem, self.method, self.prior = problem, method, prior
        self.template = problem.template()
        self.key = jax.random.key(0) if key is None else key
        self.chains = ChainSettings() if chains is None else chains
        self._last = {"c": None, "u": None}
        self.n_calls = 0

    def moments(self, theta):
        """``(clamped, unclamped, offset, Moments_c, Moments_u, unclamped_draws)``."""
        clamped, unclamped, offset = _models_jit(self.template, self.problem.geometry, theta)
        if self.method == "enumeration":
            return (
                clamped,
                unclamped,
                offset,
                enumerate_moments(clamped),
                enumerate_moments(unclamped),
                None,
            )
        self.key, kc, ku = jax.random.split(self.key, 3)
        use = self.chains.persistent
        mc, sc = chain_moments(
            clamped, kc, self.method, self.chains, self._last["c"] if use else None
        )
        mu, su = chain_moments(
            unclamped, ku, self.method, self.chains, self._last["u"] if use else None
        )
        self._last = {"c": sc.final_state.labels, "u": su.final_state.labels}
        return clamped, unclamped, offset, mc, mu, su.labels

    def __call__(self, theta):
        self.n_calls += 1
        clamped, _, offset, mc, mu, draws = self.moments(theta)
        g_lik = gradient(theta, self.template, self.problem.geometry, mc, mu)
        lp, g_prior = _prior_value_and_grad(self.prior, theta, self.problem.geometry)
        grad = jax.tree_util.tree_map(jnp.add, g_lik, g_prior)
        if draws is None:
            loglik = mc.log_z - mu.log_z + offset
        else:
            loglik = log_likelihood_estimate(clamped, offset, draws)
        value = loglik + lp
        return float(value), grad, {"log_likelihood": float(loglik), "clamped": mc}


# --------------------------------------------------------------------------- optimisers
def _project(prior, theta):
    return prior.project(theta) if isinstance(prior, ExponentialSigmaPrior) else theta


def adaptive_hill_climb(
    oracle: GradientOracle,
    theta0,
    *,
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

    Overshoot test (``overshoot``): ``"objective"`` -- the objective fell (exact
    enumeration); ``"gradient"`` -- the new gradient points back, ``g' . (theta' - theta)
    < 0`` (robust to the noise of sampled objectives); ``"auto"`` picks by method.
    Returns ``(theta, info)`` with iterations, converged, reason and the history.
    """
    if overshoot == "auto":
        overshoot = "objective" if oracle.method == "enumeration" else "gradient"
    flat, unravel = ravel_pytree(theta0)
    value, grad, aux = oracle(theta0)
    g = ravel_pytree(grad)[0]
    history = [dict(objective=value, step=step, theta=np.asarray(flat), accepted=True)]
    wins, reason = 0, "max_iter"
    for it in range(1, max_iter + 1):  # noqa: B007 (it is reported)
        new_flat = ravel_pytree(_project(oracle.prior, unravel(flat + step * g)))[0]
        new_value, new_grad, new_aux = oracle(unravel(new_flat))
        new_g = ravel_pytree(new_grad)[0]
        if overshoot == "objective":
            bad = not (new_value >= value)
        else:
            bad = float(jnp.dot(new_g, new_flat - flat)) < 0.0
        history.append(
            dict(objective=new_value, step=step, theta=np.asarray(new_flat), accepted=not bad)
        )
        if bad:
            step, wins = step * shrink, 0
            if step < min_step:
                reason = "step below min_step"
                break
            continue
        gain = new_value - value
        moved = float(jnp.max(jnp.abs(new_flat - flat)))
        flat, value, g, aux = new_flat, new_value, new_g, new_aux
        wins += 1
        if wins >= patience:
            step, wins = step * grow, 0
        if overshoot == "objective" and 0 <= gain < ftol:
            reason = "objective converged"
            break
        if moved < xtol:
            reason = "parameter change below xtol"
            break
    info = dict(
        iterations=it,
        converged=reason != "max_iter",
        reason=reason,
        objective=value,
        log_likelihood=aux["log_likelihood"],
        grad_norm=float(jnp.linalg.norm(g)),
        history=history,
        n_evaluations=oracle.n_calls,
    )
    return unravel(flat), info


def optax_ascent(oracle: GradientOracle, theta0, optimizer=None, *, max_iter=300, gtol=1e-4):
    """Ascent with an optax optimiser (default ``optax.adam(0.05)``) on ``-objective``;
    stops when the gradient norm is below ``gtol`` or after ``max_iter`` steps."""
    import optax

    optimizer = optax.adam(0.05) if optimizer is None else optimizer
    theta, state = theta0, optimizer.init(theta0)
    history = []
    reason = "max_iter"
    for it in range(1, max_iter + 1):  # noqa: B007 (it is reported)
        value, grad, aux = oracle(theta)
        norm = float(jnp.linalg.norm(ravel_pytree(grad)[0]))
        history.append(dict(objective=value, grad_norm=norm))
        if norm < gtol:
            reason = "gradient below gtol"
            break
        neg = jax.tree_util.tree_map(jnp.negative, grad)
        updates, state = optimizer.update(neg, state, theta)
        theta = _project(oracle.prior, optax.apply_updates(theta, updates))
    info = dict(
        iterations=it,
        converged=reason != "max_iter",
        reason=reason,
        objective=value,
        log_likelihood=aux["log_likelihood"],
        grad_norm=norm,
        history=history,
        n_evaluations=oracle.n_calls,
    )
    return theta, info


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
    ``optimizer``: ``"adaptive"`` (Sec. 3.1) or an ``optax.GradientTransformation``."""
    oracle = GradientOracle(problem, method, prior, key, chains)
    if isinstance(optimizer, str):
        if optimizer != "adaptive":
            raise ValueError(
                f"optimizer must be 'adaptive' or an optax transformation, got {optimizer!r}."
            )
        return adaptive_hill_climb(oracle, theta0, **options)
    return optax_ascent(oracle, theta0, optimizer, **options)


# --------------------------------------------------------------------------- restarts
def sample_initial_params(problem: BoltzmannProblem, key):
    """Random initial Theta from the ranges of Sec. 5.2: ``alpha_0 ~ U[-4.61, 1.93]``;
    ``alpha_d ~ U[log(min_ij (dx^d)^2 / 5), log(max_ij (dx^d)^2 * 5)]`` (min over differences
    above ``1e-6 max``: rounding noise between equal coordinates would give ``-50``);
    ``beta_1 = 0``, ``beta_c ~ U[-2.20, 2.20]``; ``gamma ~ U[-0.90, 1.93]``.
    Basic model: ``log sigma ~ U[log min d_ij, log max d_ij]``."""
    sq = np.asarray(problem.geometry.sq_diff)
    k0, k1, k2, k3 = jax.random.split(key, 4)
    if problem.kind == "basic":
        d2 = sq.sum(1)
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


def random_restarts(problem: BoltzmannProblem, key, n_restarts: int = 10, **fit_options):
    """Hill climbing from ``n_restarts`` random starts (Sec. 5.2, Tables 5-8); returns
    ``(best_theta, best_info, trials)`` with ``trials`` a list of ``(start, theta, info)``
    and ``best`` the trial of highest final objective."""
    trials = []
    for k in jax.random.split(key, n_restarts):
        k_init, k_fit = jax.random.split(k)
        start = sample_initial_params(problem, k_init)
        theta, info = fit(problem, start, key=k_fit, **fit_options)
        trials.append((start, theta, info))
    best = max(range(n_restarts), key=lambda i: trials[i][2]["objective"])
    return trials[best][1], trials[best][2], trials


# --------------------------------------------------------------------------- prediction
class BoltzmannPosterior(NamedTuple):
    """Posterior over the true labels given the observations, at fixed Theta (Eq. 5).

    ``marginals[i, c] = P(y_i = c | O_L, X, Theta)``; ``posterior_mean_labels`` = per-node
    argmax of the marginals (the paper's "MAP labeling", Eq. 5); ``map_labels`` = the single
    most probable joint configuration (the mincut state of Sec. 7; exact by enumeration,
    best visited state for chains); ``suspected_errors`` = indices of observed points whose
    observed label is not the posterior-mean label; ``p_observed`` = ``P(y_i = o_i | O_L)``
    (NaN where unobserved)."""

    marginals: np.ndarray
    posterior_mean_labels: np.ndarray
    map_labels: np.ndarray
    suspected_errors: np.ndarray
    p_observed: np.ndarray


def posterior(
    problem: BoltzmannProblem,
    theta,
    *,
    method="enumeration",
    key=None,
    chains: ChainSettings | None = None,
) -> BoltzmannPosterior:
    """Label posterior of the clamped phase (G for the extended model) at ``theta``."""
    template = problem.template()
    clamped, _, _ = _models_jit(template, problem.geometry, theta)
    if method == "enumeration":
        m = enumerate_moments(clamped)
        mode = m.mode
    else:
        chains = (
            ChainSettings(n_chains=4, n_samples=2000, burn_in=200) if chains is None else chains
        )
        key = jax.random.key(0) if key is None else key
        m, samples = chain_moments(clamped, key, method, chains)
        mode = samples.map_labels
    marg = np.asarray(m.node_marginals)
    labels = np.asarray(problem.labels)
    obs = labels >= 0
    mean_labels = marg.argmax(1)
    p_obs = np.full(len(labels), np.nan)
    p_obs[obs] = marg[obs, labels[obs]]
    wrong = np.flatnonzero(obs & (mean_labels != labels))
    return BoltzmannPosterior(marg, mean_labels, np.asarray(mode), wrong, p_obs)
