"""EM for the semi-supervised mixtures of Zhu & Lafferty (2005), Sec. 2.1 / Fig. 2 step 1.

Maximises ``l(theta) + log p(theta)`` (Eq. 1 plus the regulariser of
:func:`graphssl.models.harmonic_mixture.log_prior`) with exact E- and M-steps, so the
objective never decreases (checked in the tests). Responsibilities are normalised with the
log-sum-exp shift (one exp per entry; the class statistics of labelled points stay in log
space and are computed only on the batches that hold labelled points). The E-step streams
over row batches with ``lax.scan`` (sufficient statistics only: memory ``O(batch * M)``,
never ``n x M``), so N = 10^6 points fit on one device. Everything is jit-compiled; shapes
are static.

Initialisation by k-means (k-means++ seeding, Lloyd iterations;
:mod:`graphssl.inference.optimize.kmeans`,
re-exported here), as in Sec. 4.2.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import logsumexp

from graphssl.inference.optimize.kmeans import _batches, _kmeans, kmeans, kmeans_assign
from graphssl.models.harmonic_mixture import (
    COVARIANCE_TYPES,
    GaussianMixture,
    MultinomialMixture,
    component_log_densities,
    log_prior,
)

__all__ = [
    "EMInfo",
    "EMOptions",
    "kmeans",
    "kmeans_assign",
    "init_gaussian_mixture",
    "init_multinomial_mixture",
    "em_step",
    "fit_em",
]


class EMOptions(NamedTuple):
    """Regularisation and streaming settings (static under jit).

    ``reg_covar`` / ``prior_weight``: the covariance prior (Sigma_m >= roughly
    ``reg_covar * tau / (N_m + tau)``); ``label_pseudocount``: Dirichlet pseudo-count on
    lambda (0 = the plain maximum-likelihood lambda of Eq. 1); ``word_pseudocount``:
    Laplace smoothing of multinomial word probabilities; ``batch_size``: rows per E-step batch.
    """

    reg_covar: float = 1e-6
    prior_weight: float = 1.0
    label_pseudocount: float = 0.0
    word_pseudocount: float = 0.1
    batch_size: int = 8192


DEFAULT_OPTIONS = EMOptions()


class EMInfo(NamedTuple):
    """Convergence record: ``objective[t]`` = l + log prior at iterate t (NaN after the end)."""

    iterations: jax.Array
    converged: jax.Array
    objective: jax.Array
    residual: jax.Array


# ----------------------------------------------------------------------------- statistics


def _log_joint(mixture, X, labels, observed):
    joint = component_log_densities(mixture, X) + mixture.log_weights[None, :]
    lab = jnp.where(observed, labels, 0)
    return joint + jnp.where(observed[:, None], mixture.log_label_probs.T[lab], 0.0)


def _class_log_stats(log_r, labels, observed, n_classes):
    """log sum_{i in L, y_i = c} r_im, ``[C, M]`` (log space: lambda of far components stays
    finite even when every responsibility underflows)."""
    onehot = (labels[:, None] == jnp.arange(n_classes)[None]) & observed[:, None]
    masked = jnp.where(onehot.T[:, :, None], log_r[None], -jnp.inf)  # [C, n, M]
    return logsumexp(masked, axis=1)


def _gaussian_stats(mixture, X, labels, observed, batch_size):
    kind = mixture.covariance_type
    M, D = mixture.means.shape
    C = mixture.n_classes
    # moments about the centre of the means: the M-step's scatter s2 - N mu mu^T then loses
    # only eps * |x - c|^2 (not eps * |x|^2) to cancellation, whatever the data's offset
    center = jax.lax.stop_gradient(mixture.means.mean(0))
    Xb, keep = _batches(X, batch_size)
    yb, _ = _batches(labels, batch_size)
    ob, _ = _batches(observed, batch_size)

    def body(acc, batch):
        xb, y, o, k = batch
        joint = _log_joint(mixture, xb, y, o)
        xb = xb - center
        # one exp per entry: r = e / sum e with e = exp(joint - row max); log-space only
        # where labelled points need it (class statistics, computed on their batches only)
        top = jnp.max(joint, axis=1, keepdims=True)
        top = jnp.where(jnp.isfinite(top), top, 0.0)
        e = jnp.exp(joint - top)
        total = e.sum(1)
        norm = top[:, 0] + jnp.log(total)
        r = jnp.where(k[:, None], e / total[:, None], 0.0)
        lab_mask = o & k
        label_stats = jax.lax.cond(
            jnp.any(lab_mask),
            lambda: _class_log_stats(jnp.where(k[:, None], joint - norm[:, None], -jnp.inf),
                                     y, lab_mask, C),
            lambda: jnp.full((C, M), -jnp.inf, joint.dtype),
        )
        if kind == "full":
            s2 = jnp.einsum("nm,nd,ne->mde", r, xb, xb)
        elif kind == "diag":
            s2 = r.T @ (xb * xb)
        else:
            s2 = r.T @ (xb * xb).sum(1)
        lab = jnp.logaddexp(acc["label"], label_stats)
        spread = jnp.max(jnp.where(k, (xb * xb).sum(1), 0.0))
        return {
            "spread": jnp.maximum(acc["spread"], spread),
            "loglik": acc["loglik"] + jnp.where(k, norm, 0.0).sum(),
            "n": acc["n"] + r.sum(0),
            "s1": acc["s1"] + r.T @ xb,
            "s2": acc["s2"] + s2,
            "label": lab,
        }, None

    s2_shape = {"full": (M, D, D), "diag": (M, D), "spherical": (M,)}[kind]
    dt = X.dtype
    init = {
        "spread": jnp.zeros((), dt),
        "loglik": jnp.zeros((), dt),
        "n": jnp.zeros(M, dt),
        "s1": jnp.zeros((M, D), dt),
        "s2": jnp.zeros(s2_shape, dt),
        "label": jnp.full((C, M), -jnp.inf, dt),
    }
    stats, _ = jax.lax.scan(body, init, (Xb, yb, ob, keep))
    stats["center"] = center
    return stats


def _multinomial_stats(mixture, X, labels, observed):
    joint = _log_joint(mixture, X, labels, observed)
    norm = logsumexp(joint, axis=1)
    log_r = joint - norm[:, None]
    r = jnp.exp(log_r)
    return {
        "loglik": norm.sum(),
        "n": r.sum(0),
        "words": (X.T @ r).T,
        "label": _class_log_stats(log_r, labels, observed, mixture.n_classes),
    }


# ----------------------------------------------------------------------------- M-step


def _label_mstep(label_stats, pseudocount):
    """log lambda_{mc} = log (s_cm + a) - log sum_c (s_cm + a); uniform when no labels reach m."""
    C = label_stats.shape[0]
    s = label_stats if pseudocount <= 0 else jnp.logaddexp(label_stats, jnp.log(pseudocount))
    total = logsumexp(s, axis=0, keepdims=True)
    ok = jnp.isfinite(total)
    log_lam = jnp.where(ok, s - jnp.where(ok, total, 0.0), -jnp.log(C))
    return log_lam.T


_RESOLUTION = 32.0
"""The full covariances' eigenvalue floor in units of ``eps * max_i |x_i - c|^2`` (``c`` the
means' centre): above the rounding error of the M-step's scatter ``s2 - N mu mu^T``."""


def _floored_full_covariances(cov, floor):
    """``cov [M, D, D]`` with each smallest eigenvalue raised to at least ``floor [M]`` by
    adding ``(floor - lambda_min) I``; a covariance already above its floor keeps its bits.

    Why: a component that collapses onto ``<= D`` points has a singular scatter, and in
    float32 the scatter's rounding (about ``4 eps max |x - c|^2`` per unit weight) drove its
    covariance indefinite: EM's objective fell, then went NaN (fuzz report 7; 3 of 16 row
    orders of three 2-D blobs with 9 components). The floor ``max(tau reg / (N_m + tau),
    32 eps max |x - c|^2)`` is the bound the exact M-step obeys, or the working precision's
    resolution of the scatter: a regularisation in the sense of scikit-learn's
    ``reg_covar``, inactive in float64 on ordinary data."""
    low = jnp.linalg.eigvalsh(cov)[:, 0]
    shift = jnp.where(low < floor, floor - low, 0.0)
    return cov + shift[:, None, None] * jnp.eye(cov.shape[1], dtype=cov.dtype)


def _gaussian_mstep(stats, kind, n_total, opts):
    tiny = jnp.finfo(stats["n"].dtype).tiny
    nk = jnp.maximum(stats["n"], tiny)
    log_w = jnp.log(nk) - jnp.log(n_total)
    mu = stats["s1"] / nk[:, None]  # about stats["center"]: the moments are centred there
    tau, reg = opts.prior_weight, opts.reg_covar
    D = mu.shape[1]
    if kind == "full":
        scatter = stats["s2"] - nk[:, None, None] * mu[:, :, None] * mu[:, None, :]
        eye = jnp.eye(D, dtype=mu.dtype)
        cov = (scatter + tau * reg * eye) / (nk + tau)[:, None, None]
        cov = 0.5 * (cov + jnp.swapaxes(cov, 1, 2))
        if "spread" in stats:  # EM's statistics (not the k-means start's)
            resolution = _RESOLUTION * jnp.finfo(cov.dtype).eps * stats["spread"]
            cov = _floored_full_covariances(cov, jnp.maximum(tau * reg / (nk + tau),
                                                             resolution))
    elif kind == "diag":
        scatter = jnp.maximum(stats["s2"] - nk[:, None] * mu * mu, 0.0)
        cov = (scatter + tau * reg) / (nk + tau)[:, None]
    else:
        scatter = jnp.maximum(stats["s2"] - nk * (mu * mu).sum(1), 0.0)
        cov = (scatter + D * tau * reg) / (D * (nk + tau))
    return log_w, mu + stats["center"], cov


def _mstep(mixture, stats, n_total, opts):
    log_lam = _label_mstep(stats["label"], opts.label_pseudocount)
    if isinstance(mixture, MultinomialMixture):
        tiny = jnp.finfo(stats["n"].dtype).tiny
        log_w = jnp.log(jnp.maximum(stats["n"], tiny)) - jnp.log(n_total)
        counts = stats["words"] + opts.word_pseudocount
        log_theta = jnp.log(jnp.maximum(counts, tiny)) - jnp.log(
            jnp.maximum(counts.sum(1, keepdims=True), tiny)
        )
        return MultinomialMixture(log_w, log_theta, log_lam)
    log_w, mu, cov = _gaussian_mstep(stats, mixture.covariance_type, n_total, opts)
    return GaussianMixture(log_w, mu, cov, log_lam, covariance_type=mixture.covariance_type)


def _prior(mixture, opts):
    return log_prior(
        mixture,
        reg_covar=opts.reg_covar,
        prior_weight=opts.prior_weight,
        label_pseudocount=opts.label_pseudocount,
        word_pseudocount=opts.word_pseudocount,
    )


def em_step(mixture, X, labels, observed, opts: EMOptions = DEFAULT_OPTIONS):
    """One EM iteration: ``(new_mixture, objective(old mixture))`` with objective
    ``l(theta) + log p(theta)`` (Eq. 1 + prior)."""
    if isinstance(mixture, MultinomialMixture):
        stats = _multinomial_stats(mixture, X, labels, observed)
    else:
        stats = _gaussian_stats(mixture, X, labels, observed, opts.batch_size)
    obj = stats["loglik"] + _prior(mixture, opts)
    return _mstep(mixture, stats, X.shape[0], opts), obj


# ----------------------------------------------------------------------------- driver


def fit_em(
    mixture,
    X,
    labels,
    observed,
    *,
    max_iter: int = 200,
    tol: float = 1e-7,
    options: EMOptions = DEFAULT_OPTIONS,
):
    """Run EM from ``mixture`` until the relative objective change is below ``tol``.

    A full covariance's eigenvalues are kept at or above the exact M-step's bound
    ``tau reg / (N_m + tau)`` or the working precision's resolution of the scatter, whichever
    is larger (``_floored_full_covariances``: a component collapsed onto a few points went
    indefinite in float32).

    Args: ``X [n, D]`` (Gaussian) or counts ``[n, V]`` dense/BCOO (multinomial);
    ``labels int[n]`` (value ignored where ``observed`` is False); ``observed bool[n]``.
    Returns ``(mixture, EMInfo)``; ``info.objective`` has ``max_iter + 1`` entries.
    """
    return _fit_em(mixture, X, labels, observed, max_iter, tol, options)


@partial(jax.jit, static_argnums=(4, 6))
def _fit_em(mixture, X, labels, observed, max_iter, tol, opts):
    dt = mixture.log_weights.dtype
    trace0 = jnp.full(max_iter + 1, jnp.nan, dt)

    def cond(state):
        _, t, _, done, _ = state
        return (t < max_iter) & ~done

    def body(state):
        mix, t, trace, _, _ = state
        new, obj = em_step(mix, X, labels, observed, opts)
        prev = jnp.where(t > 0, trace[jnp.maximum(t - 1, 0)], -jnp.inf)
        resid = jnp.abs(obj - prev) / jnp.maximum(jnp.abs(obj), 1.0)
        done = resid < tol
        return new, t + 1, trace.at[t].set(obj), done, resid

    zero = jnp.zeros((), jnp.int32)
    init = (mixture, zero, trace0, jnp.zeros((), bool), jnp.asarray(jnp.inf, dt))
    mix, t, trace, done, resid = jax.lax.while_loop(cond, body, init)
    _, final = em_step(mix, X, labels, observed, opts)
    trace = trace.at[t].set(final)
    return mix, EMInfo(t, done, trace, resid)


# ----------------------------------------------------------------------------- init


def _hard_stats_mixture(mixture_like, X, assignments, labels, observed, opts):
    """M-step from hard (k-means) responsibilities: the k-means initialisation. Sufficient
    statistics by segment sums (memory O(n D), never n x M)."""
    M = mixture_like.n_components
    C = mixture_like.n_classes

    def seg(v):
        return jax.ops.segment_sum(v, assignments, num_segments=M)

    onehot_y = jax.nn.one_hot(labels, C, dtype=X.dtype) * observed[:, None]
    counts = seg(onehot_y).T  # [C, M]
    tiny = jnp.finfo(X.dtype).tiny
    stats = {
        "n": seg(jnp.ones(X.shape[0], X.dtype)),
        "label": jnp.where(counts > 0, jnp.log(jnp.maximum(counts, tiny)), -jnp.inf),
    }
    if isinstance(mixture_like, MultinomialMixture):
        stats["words"] = seg(X)
    else:
        kind = mixture_like.covariance_type
        stats["center"] = X.mean(0)
        Xc = X - stats["center"]  # centred moments, as in _gaussian_stats
        stats["s1"] = seg(Xc)
        stats["s2"] = {
            "full": lambda: seg(Xc[:, :, None] * Xc[:, None, :]),
            "diag": lambda: seg(Xc * Xc),
            "spherical": lambda: seg((Xc * Xc).sum(1)),
        }[kind]()
    mix = _mstep(mixture_like, stats, X.shape[0], opts)
    # start lambda uniform: k-means clusters without labelled points carry no label evidence
    uniform = jnp.full_like(mix.log_label_probs, -jnp.log(C))
    return dataclasses.replace(mix, log_label_probs=uniform)


def init_gaussian_mixture(
    X,
    labels,
    observed,
    n_components: int,
    n_classes: int,
    key,
    *,
    covariance_type: str = "full",
    options: EMOptions = DEFAULT_OPTIONS,
    kmeans_iter: int = 30,
    kmeans_sample: int | None = None,
):
    """Mixture initialised from k-means: means = centres, covariances = within-cluster
    scatter (regularised), gamma = cluster sizes, lambda uniform. ``kmeans_sample``: run
    k-means on that many random rows only (large n), then assign every row once."""
    if covariance_type not in COVARIANCE_TYPES:
        raise ValueError(
            f"covariance_type: unknown {covariance_type!r}; use one of "
            f"{', '.join(COVARIANCE_TYPES)}"
        )
    return _init_gaussian(X, labels, observed, key, n_components, n_classes, covariance_type,
                          options, kmeans_iter, kmeans_sample)


@partial(jax.jit, static_argnums=(4, 5, 6, 7, 8, 9))
def _init_gaussian(X, labels, observed, key, n_components, n_classes, covariance_type,
                   options, kmeans_iter, kmeans_sample):
    if kmeans_sample is not None and kmeans_sample < X.shape[0]:
        key, sub = jax.random.split(key)
        rows = jax.random.choice(sub, X.shape[0], (kmeans_sample,), replace=False)
        centers, _, _ = _kmeans(X[rows], key, n_components, kmeans_iter, options.batch_size)
        assignments, _ = kmeans_assign(X, centers, options.batch_size)
    else:
        _, assignments, _ = _kmeans(X, key, n_components, kmeans_iter, options.batch_size)
    M, D = n_components, X.shape[1]
    shape = {"full": (M, D, D), "diag": (M, D), "spherical": (M,)}[covariance_type]
    like = GaussianMixture(
        jnp.zeros(M, X.dtype), jnp.zeros((M, D), X.dtype), jnp.ones(shape, X.dtype),
        jnp.zeros((M, n_classes), X.dtype), covariance_type=covariance_type,
    )
    return _hard_stats_mixture(like, X, assignments, labels, observed, options)


def init_multinomial_mixture(
    X, labels, observed, n_components: int, n_classes: int, key, *,
    options: EMOptions = DEFAULT_OPTIONS, kmeans_iter: int = 30,
):
    """Multinomial mixture initialised from k-means on L2-normalised count rows (cosine
    k-means); ``X`` dense counts ``[n, V]``. One compiled program, as the Gaussian
    initialisation (run op by op it was ~40 XLA compilations of single operations)."""
    Xd = jnp.asarray(X.todense() if hasattr(X, "todense") else X)
    return _init_multinomial(Xd, labels, observed, key, n_components, n_classes, options,
                             kmeans_iter)


@partial(jax.jit, static_argnums=(4, 5, 6, 7))
def _init_multinomial(Xd, labels, observed, key, n_components, n_classes, options, kmeans_iter):
    norm = jnp.sqrt((Xd * Xd).sum(1, keepdims=True))
    Z = Xd / jnp.maximum(norm, jnp.finfo(Xd.dtype).tiny)
    _, assignments, _ = kmeans(Z, n_components, key, n_iter=kmeans_iter,
                               batch_size=options.batch_size)
    M, V = n_components, Xd.shape[1]
    like = MultinomialMixture(
        jnp.zeros(M, Xd.dtype), jnp.zeros((M, V), Xd.dtype), jnp.zeros((M, n_classes), Xd.dtype)
    )
    return _hard_stats_mixture(like, Xd, assignments, labels, observed, options)
