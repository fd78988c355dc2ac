"""The source papers' models as numpyro programs (generative stories over the label fields).

Each program is a plain numpyro model function: write a variant by copying one and editing a
line. Label sites are :mod:`~graphssl.models.numpyro.fields` distributions; inference is
``numpyro.infer.MCMC`` over :func:`graphssl.inference.mcmc.numpyro_gibbs.label_field_gibbs`
(the library's discrete moves on the label site, NUTS on the continuous sites). The rule the
samplers enforce: a random site may enter a field's parameters (which set its normaliser ``Z``)
only through the exchange move; evidence about the labels (emissions, noisy observed labels)
goes into separate sites that depend on the labels node by node, inside a plate over nodes.

Every program records ``label_energy``, ``class_sizes`` and ``co_assignment`` of a fixed pair
set as deterministic sites (:func:`~graphssl.models.numpyro.fields.record_label_statistics`).

Example (hidden Potts, NUTS on the class means and the noise scale)::

    from numpyro.infer import MCMC
    from graphssl.inference.mcmc import chromatic_gibbs
    from graphssl.inference.mcmc.numpyro_gibbs import label_field_gibbs

    kernel = label_field_gibbs(hidden_potts_program, chromatic_gibbs(graph))
    mcmc = MCMC(kernel, num_warmup=200, num_samples=500, num_chains=2,
                chain_method="sequential", progress_bar=False)
    mcmc.run(jax.random.key(0), x, graph, labels, 2, beta=1.0)
    az.summary(az.from_numpyro(mcmc))   # means, sigma, label_energy, class_sizes, ...
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from graphssl.models.diffusion_mixture import DirichletDiffusionMixture
from graphssl.models.harmonic_mixture import (
    GaussianMixture,
    numpyro_mixture_model,
    responsibilities,
)
from graphssl.models.numpyro.fields import (
    MixtureClassField,
    PolyaCentres,
    PottsField,
    default_pairs,
    record_label_statistics,
)
from graphssl.models.potts import PottsModel
from graphssl.validation import check_label_codes, check_pairs, check_same_length, is_whole

__all__ = [
    "potts_program",
    "hidden_potts_program",
    "boltzmann_program",
    "diffusion_mixture_program",
    "harmonic_mixture_program",
]


NODES = "the graph has {n} nodes"


def _label_codes(labels, n: int, n_classes: int | None, against: str = NODES):
    """The programs' ``labels``: ``int64[n]`` codes, -1 unobserved (a string or fractional
    label, or one of another length, is named here instead of failing inside JAX); a traced
    value (a conditioned site) is passed through."""
    if isinstance(labels, jax.core.Tracer):
        return labels
    return check_label_codes(labels, n, n_classes=n_classes, name="labels", against=against)


def _pairs(pairs, n):
    """The co-assignment pairs recorded beside the labels: :func:`default_pairs` or the
    given ``int[P, 2]`` (:func:`~graphssl.validation.check_pairs`: one out of range was
    clamped by JAX's gather, a wrong pair, silently)."""
    return default_pairs(n) if pairs is None else check_pairs(pairs, n)


def _check_nonnegative_support(prior, name: str = "beta_prior",
                               why: str = "the Potts coupling is ferromagnetic") -> None:
    """A prior (``beta_prior``, ``alpha_prior``) must put no mass below 0: the Potts
    couplings ``beta W`` are ferromagnetic, and Swendsen-Wang's bonds (``1 - e^{-beta w}``)
    are no probability below 0 (a ``Normal(0, 1)`` prior gave 48 % negative draws, sampled
    silently wrong); Walder's Dirichlet concentration is positive."""
    lower = getattr(getattr(prior, "support", None), "lower_bound", None)
    try:
        ok = lower is not None and bool(np.all(np.asarray(lower) >= 0))
    except (TypeError, jax.errors.ConcretizationTypeError,
            jax.errors.TracerArrayConversionError):  # a traced bound: not checkable here
        return
    if not ok:
        raise ValueError(f"{name}: its support must lie in [0, inf) ({why}), got "
                         f"{type(prior).__name__} on {prior.support}; use e.g. dist.Gamma, "
                         "dist.HalfNormal or dist.LogNormal")


def potts_program(graph, labels, n_classes: int | None = None, *, beta=1.0, clamp: bool = False,
                  beta_prior=None, pairs=None):
    """Bergamim & Breve's Potts field (Eqs. 10-12) as a program: ``y ~ Potts(beta W, theta)``.

    ``clamp=False``: the labelled nodes carry the unit field theta of Eq. 4 (the paper);
    ``clamp=True``: zero field, labelled nodes clamped (Eq. 10, the GRF / mincut form, whose
    MAP is the mincut labeling). ``beta_prior``: a numpyro distribution on ``beta`` (then a
    site ``"beta"`` whose value changes ``Z(beta)``: sample it with the exchange move,
    ``label_field_gibbs(..., exchange=("beta",))``). ``labels``: int[n], -1 = unlabelled.

    Example::

        mcmc.run(key, graph, labels, 2, beta=2.0)          # labels only: plain MCMC route
    """
    labels = _label_codes(labels, graph.n_nodes, n_classes)
    base = PottsModel.from_labels(graph, labels, n_classes, beta=1.0, clamp=clamp)
    if beta_prior is not None:
        _check_nonnegative_support(beta_prior)
        beta = numpyro.sample("beta", beta_prior)
    elif not isinstance(beta, jax.core.Tracer) and not (np.all(np.isfinite(beta))
                                                        and np.all(np.asarray(beta) >= 0)):
        raise ValueError(f"beta: a finite coupling >= 0, got {beta!r}")
    field = PottsField(base.with_beta(beta))
    y = numpyro.sample("labels", field)
    record_label_statistics(y, field, _pairs(pairs, graph.n_nodes))
    return y


def hidden_potts_program(x, graph, labels=None, n_classes: int = 2, *, beta=1.0,
                         mean_scale=None, sigma=None, pairs=None):
    """Hidden Potts model: a Potts prior over labels, class-conditional Gaussian features.

    ``y ~ Potts(beta W)`` clamped at the labelled nodes; ``mu_c ~ N(mean(x), mean_scale^2)``
    (default ``mean_scale = 2 std(x)``); ``sigma ~ HalfNormal(std(x))`` unless given (``std(x)``
    read as 1 for constant features);
    ``x_i | y_i ~ N(mu_{y_i}, sigma^2 I)``. The features enter the labels' conditional as
    evidence ``log N(x_i | mu_c, sigma)`` node by node; NUTS samples ``mu`` and ``sigma``.
    ``x``: float[n] or float[n, D].

    Example::

        kernel = label_field_gibbs(hidden_potts_program, swendsen_wang())
        MCMC(kernel, ...).run(key, x, graph, labels, 2, beta=1.0)
    """
    x = jnp.asarray(x)
    x = x[:, None] if x.ndim == 1 else x
    check_same_length(graph.n_nodes, x, "x", against=NODES)
    if not isinstance(x, jax.core.Tracer) and not bool(jnp.all(jnp.isfinite(x))):
        raise ValueError(f"x: {int(jnp.sum(~jnp.isfinite(x)))} feature values are NaN or inf; "
                         "impute or drop them (the class-conditional Gaussians need finite "
                         "features)")
    if labels is not None:
        labels = _label_codes(labels, graph.n_nodes, n_classes)
    n, D = x.shape
    # the priors' scale: the features' spread, or 1 for constant features (a 1e-12 floor
    # made sigma's prior HalfNormal(1e-12): sigma stuck at one value in every draw)
    std = jnp.std(x)
    center, spread = jnp.mean(x, 0), jnp.where(std > 0, std, 1.0)
    scale = 2.0 * spread if mean_scale is None else mean_scale
    means = jnp.asarray(numpyro.sample(  # jnp: a conditioned value may be a NumPy array
        "means", dist.Normal(center, scale).expand([n_classes, D]).to_event(2)))
    if sigma is None:
        sigma = numpyro.sample("sigma", dist.HalfNormal(spread))
    field = PottsField.create(graph, n_classes, beta=beta, labels=labels)
    y = numpyro.sample("labels", field)
    with numpyro.plate("nodes", n):
        numpyro.sample("x", dist.Normal(means[y], sigma).to_event(1), obs=x)
    record_label_statistics(y, field, _pairs(pairs, n))
    return y


def boltzmann_program(field_model, labels, *, noise_prior=None, pairs=None):
    """Zhu & Ghahramani's Boltzmann MRF (Eq. 2) with a prior on the label-noise rate.

    ``Y ~ Boltzmann(A)`` given as ``field_model``, an unclamped
    :class:`~graphssl.models.boltzmann.BoltzmannMRF` (build it once, outside the program:
    ``basic_boltzmann(pair_geometry(X, k), sigma, np.full(n, -1), C)``, ``A_ij =
    exp(-d_ij^2 / (2 sigma^2))``); the observed labels are noisy copies, ``o_i = y_i`` with
    probability ``1 - eps``, else uniform over the other ``C - 1`` classes (the extended
    model's channel, Eqs. 36-46, with ``e^gamma = log((1 - eps)(C - 1) / eps)``);
    ``eps ~ noise_prior`` (default Beta(1, 9)). The channel is normalised per node, so ``eps``
    does not touch the field's ``Z(A)``: NUTS samples it. ``labels``: int[n], -1 = unobserved.

    Example::

        field = basic_boltzmann(pair_geometry(X, k=5), 0.5, np.full(len(X), -1), 2)
        mcmc.run(key, field, labels)           # NUTS on noise_rate, Gibbs/SW on labels
    """
    n, q = field_model.n_nodes, field_model.n_classes
    labels = np.asarray(_label_codes(labels, n, q, against="field_model has {n} nodes"))
    field = PottsField(field_model)
    prior = dist.Beta(1.0, 9.0) if noise_prior is None else noise_prior
    eps = numpyro.sample("noise_rate", prior)
    y = numpyro.sample("labels", field)
    same = jnp.arange(q)[None, :] == y[:, None]
    logits = jnp.where(same, jnp.log1p(-eps), jnp.log(eps / (q - 1)))
    with numpyro.plate("nodes", n), numpyro.handlers.mask(mask=labels >= 0):
        numpyro.sample("observed_labels", dist.Categorical(logits=logits),
                       obs=np.maximum(labels, 0))
    record_label_statistics(y, field, _pairs(pairs, n))
    return y


def diffusion_mixture_program(model: DirichletDiffusionMixture, *, alpha_prior=None,
                              pairs=None):
    """Walder's Dirichlet mixture of graph diffusions (Sec. 3.5) as a generative story.

    ``y ~ p_BAL(y | eta) p_MRF(y | L, gamma)`` (Eqs. 4-5; clamped at the labelled nodes);
    per class j, Dirichlet weights ``w_j ~ Dir(alpha/m)`` over centres, integrated out:
    ``beta | y`` by the Polya urn of Eq. (6); each vertex is generated by its component's
    heat-kernel p.m.f., ``xi_i | beta_i ~ D_tau[:, beta_i]``, observed ``xi_i = i`` (Eq. 3).
    ``alpha_prior``: a distribution on ``alpha`` (it enters only the normalised Eq. 6, so NUTS
    may sample it); default: the model's ``alpha``. Sites: ``labels``, ``centres``.

    Example (Walder's iteration as the discrete step; add ``(NUTS(program), None)`` as a
    second block when ``alpha_prior`` is given)::

        from graphssl.inference.mcmc.numpyro_gibbs import MixtureFieldGibbs, ProgramGibbs

        block = MixtureFieldGibbs(diffusion_mixture_program)
        mcmc = MCMC(ProgramGibbs([(block, ["labels", "centres"])]), num_warmup=100,
                    num_samples=500, progress_bar=False)
        mcmc.run(key, DirichletDiffusionMixture.create(graph, labels, tau=2.0))
    """
    m = model.n_nodes
    if alpha_prior is not None:  # a Normal(0, 1) prior: NUTS froze at alpha = -0.004
        _check_nonnegative_support(alpha_prior, "alpha_prior",
                                   "the Dirichlet concentration alpha is positive")
    alpha = model.alpha if alpha_prior is None else numpyro.sample("alpha", alpha_prior)
    field = MixtureClassField(model)
    y = numpyro.sample("labels", field)
    beta = numpyro.sample("centres", PolyaCentres(y, alpha, model.n_classes))
    with numpyro.plate("nodes", m):
        numpyro.sample("vertices", dist.Categorical(logits=model.log_diffusion.T[beta]),
                       obs=jnp.arange(m))
    record_label_statistics(y, field, _pairs(pairs, m))
    return y


def harmonic_mixture_program(X, labels, laplacian, *, n_components: int, n_classes: int = 2,
                             alpha: float = 0.5, covariance_type: str = "diag"):
    """Zhu & Lafferty's harmonic mixture (Eq. 3) as a program: the mixture of Sec. 2.1 with
    priors (:func:`~graphssl.models.harmonic_mixture.numpyro_mixture_model`, components summed
    out) times the graph factor ``exp(-((1 - alpha) / alpha) E(theta))``, with ``f_U = R
    lambda`` and ``f_L`` the one-hot labels. ``E`` is Eq. 2 on ``f = p(y = 1)`` for two
    classes, ``E = f_1^T Delta f_1``, and ``sum_c f_c^T Delta f_c`` for more (the conventions of
    :func:`graphssl.inference.optimize.harmonic_lambda.solve_lambda`). Its log density is
    ``-(1/alpha) O_alpha(theta)`` plus the log prior, so the MAP with flat priors is the
    minimiser of Eq. 3; with the components fixed (``numpyro.handlers.condition`` on
    ``weights``, ``means``, ``scales``) and ``label_concentration = 1`` it is the lambda of
    the library's fit, :func:`~graphssl.inference.harmonic_mixture.fit.fit_harmonic_mixture`.
    Every site is continuous: NUTS samples the program (no discrete step).
    ``laplacian``: dense ``Delta = D - W`` (float[n, n]).

    Example::

        mcmc = MCMC(NUTS(harmonic_mixture_program), num_warmup=300, num_samples=500)
        mcmc.run(key, X, labels, laplacian, n_components=4, alpha=0.5)
    """
    n = len(X)
    if not is_whole(n_components, 1):
        raise ValueError(f"n_components: a whole number >= 1, got {n_components!r}")
    if not is_whole(n_classes, 2):
        raise ValueError(f"n_classes: a whole number >= 2, got {n_classes!r}")
    labels = np.asarray(_label_codes(labels, n, n_classes, against="X has {n} rows"))
    if np.shape(laplacian) != (n, n):
        raise ValueError(f"laplacian: expected the dense float[{n}, {n}] Laplacian D - W of "
                         f"X's graph, got shape {np.shape(laplacian)}")
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"alpha: the likelihood weight of Eq. 3 must be in (0, 1], got {alpha}")
    tr = numpyro.handlers.trace(numpyro_mixture_model).get_trace(
        X, jnp.asarray(labels), n_components=n_components, n_classes=n_classes,
        covariance_type=covariance_type)
    scales = tr["scales"]["value"]
    mixture = GaussianMixture(jnp.log(tr["weights"]["value"]), tr["means"]["value"],
                              scales**2, jnp.log(tr["label_probs"]["value"]),
                              covariance_type=covariance_type)
    f = responsibilities(mixture, jnp.asarray(X)) @ tr["label_probs"]["value"]
    onehot = jnp.eye(n_classes)[np.maximum(labels, 0)]
    f = jnp.where(jnp.asarray(labels >= 0)[:, None], onehot, f)
    f = f[:, 1:] if n_classes == 2 else f  # Eq. 2 on f = p(y = 1) for two classes
    energy = jnp.sum(f * (jnp.asarray(laplacian) @ f))
    numpyro.deterministic("graph_energy", energy)
    numpyro.factor("graph", -((1.0 - alpha) / alpha) * energy)
