"""Label fields as numpyro distributions: the discrete sites of the graph models.

A *label field* is a distribution over all ``n`` node labels at once (event shape ``(n,)``)
whose **unnormalised** log density is minus a library model's energy:

    log_prob(y) = -E(y)          (``-inf`` where a clamped node is off its label)
    p(y) = exp(-E(y)) / Z,       Z = sum over all q^n labelings of exp(-E(y)).

``Z`` is never computed. It depends on every parameter of the field (for a Potts field
``Z(beta, W, theta)``; for the Boltzmann field ``Z(A, class_bias)``) and on nothing else.
Clamped nodes are *observations of the field* (their labels are part of ``y``), so the
normaliser of the program's joint is the unclamped ``Z``: that is the ``Z`` the exchange
move of :mod:`graphssl.inference.mcmc.numpyro_exchange` cancels. While the field's parameters
are constants of the program, ``-log Z`` is a constant of the log joint and the program's
density is exact up to it; a parameter that is itself a random site changes ``Z`` and must
not be sampled by NUTS from this density (the block kernels refuse it, see there).

``sample`` is **not** an exact draw: it returns a starting state (each node drawn from its
unary term alone, clamped nodes at their labels) for numpyro's prototype trace and
initialisation. Exact draws come from the MCMC kernels (chromatic Gibbs, Swendsen–Wang).
Do not use :class:`numpyro.infer.Predictive` on a field site.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.scipy.special import gammaln
from numpyro.distributions import constraints

from graphssl.models.diffusion_mixture import DirichletDiffusionMixture, log_joint_terms
from graphssl.models.potts import PottsModel
from graphssl.models.protocol import PairwiseLabelModel, pairwise_energy, pairwise_tables

__all__ = [
    "LabelField",
    "PottsField",
    "MixtureClassField",
    "PolyaCentres",
    "EvidenceModel",
    "with_evidence",
    "default_pairs",
    "record_label_statistics",
]


def _unary_start(model, key):
    """Independent draws from the field's unary logits (uniform without one), clamped."""
    n, q = model.n_nodes, model.n_classes
    pairwise = isinstance(model, PairwiseLabelModel)
    unary = pairwise_tables(model).unary if pairwise else jnp.zeros((n, q))
    draw = jax.random.categorical(key, unary, axis=-1).astype(jnp.int32)
    return jnp.where(model.observed, model.labels, draw)


class LabelField(dist.Distribution):
    """Distribution over ``int32[n]`` labels with ``log_prob = -model.energy(y)`` (unnormalised).

    ``model``: any discrete label model of the protocol (``energy``, ``observed``, ``labels``,
    ``n_classes``, ``n_nodes``); :class:`PottsField` is the pairwise case. See the module
    docstring for the normaliser and for ``sample``.
    """

    arg_constraints: dict = {}
    pytree_data_fields = ("model",)

    def __init__(self, model, *, validate_args=None):
        self.model = model
        super().__init__(batch_shape=(), event_shape=(model.n_nodes,),
                         validate_args=validate_args)

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        """Labels ``0..n_classes-1`` at every node."""
        return constraints.independent(
            constraints.integer_interval(0, self.model.n_classes - 1), 1)

    def energy(self, value) -> jax.Array:
        """``E(y)`` of the field (clamping ignored)."""
        return self.model.energy(jnp.asarray(value, jnp.int32))

    def log_prob(self, value) -> jax.Array:
        """``-E(y)``, ``-inf`` if a clamped node is off its observed label."""
        value = jnp.asarray(value, jnp.int32)
        off = jnp.any(jnp.asarray(self.model.observed) & (value != self.model.labels))
        return jnp.where(off, -jnp.inf, -self.model.energy(value))

    def sample(self, key, sample_shape=()):
        """A starting state, not an exact draw (module docstring)."""
        keys = jax.random.split(key, int(np.prod(sample_shape, dtype=int)) or 1)
        draws = jax.vmap(lambda k: _unary_start(self.model, k))(keys)
        return draws.reshape(tuple(sample_shape) + self.event_shape)

    def unclamped(self) -> LabelField:
        """The same field with no node clamped (what the normaliser ``Z`` sums over)."""
        observed = jnp.zeros_like(jnp.asarray(self.model.observed))
        return type(self)(dataclasses.replace(self.model, observed=observed))


class PottsField(LabelField):
    """The Potts field of Bergamim & Breve Eqs. 10-12 (``E = beta H``, H with couplings ``W``
    from the graph and field ``theta``), or any :class:`~graphssl.models.potts.PottsModel`
    subclass (the Boltzmann field :class:`~graphssl.models.boltzmann.BoltzmannMRF`: ``beta = 1``,
    ``W = A``, ``theta = class_bias``). ``Z = Z(beta, W, theta)``.

    Example::

        y = numpyro.sample("labels", PottsField.create(graph, 2, beta=1.0, labels=labels))
    """

    @classmethod
    def create(cls, graph, n_classes: int, *, beta=1.0, field=None, labels=None,
               observed=None) -> PottsField:
        """``PottsField(PottsModel.create(...))``: couplings from ``graph`` (``W``), inverse
        temperature ``beta``, optional ``field`` (theta, float[n, q]), clamped nodes where
        ``labels >= 0`` (or ``observed``)."""
        return cls(PottsModel.create(graph, n_classes, beta=beta, field=field, labels=labels,
                                     observed=observed))

    def unclamped(self) -> PottsField:
        """Potts field without clamping (a BoltzmannMRF keeps its field: only the clamp goes)."""
        observed = jnp.zeros_like(jnp.asarray(self.model.observed))
        return PottsField(dataclasses.replace(self.model, observed=observed))


class MixtureClassField(LabelField):
    """Walder's class field (Sec. 3.5): ``p_BAL(y | eta) p_MRF(y | L, gamma)`` (Eqs. 4-5),
    ``log_prob = sum_j (c_j log eta_j - balance log c_j!) - gamma sum_j b^(j)T L b^(j)``.
    ``Z = Z(eta, gamma, balance, L)``. ``model``: a
    :class:`~graphssl.models.diffusion_mixture.DirichletDiffusionMixture` (its ``alpha`` and
    ``D_tau`` are not used here: they enter :class:`PolyaCentres` and the vertex site).
    """

    def energy(self, value) -> jax.Array:
        """``-log p_BAL p_MRF``."""
        y = jnp.asarray(value, jnp.int32)
        terms = log_joint_terms(self.model, y, jnp.zeros_like(y))
        return -(jnp.sum(terms.balance) + jnp.sum(terms.mrf))

    def log_prob(self, value) -> jax.Array:
        """``-energy``, ``-inf`` off a clamped label or outside ``0..q-1`` (a label 5 of a
        3-class field read a finite density)."""
        value = jnp.asarray(value, jnp.int32)
        off = jnp.any(self.model.observed & (value != self.model.labels))
        off = off | jnp.any((value < 0) | (value >= self.model.n_classes))
        return jnp.where(off, -jnp.inf, -self.energy(value))

    def sample(self, key, sample_shape=()):
        """A starting state: ``y_i ~ eta`` independently, clamped (not an exact draw)."""
        keys = jax.random.split(key, int(np.prod(sample_shape, dtype=int)) or 1)
        m = self.model

        def one(k):
            y = jax.random.categorical(k, m.log_eta, shape=(m.n_nodes,)).astype(jnp.int32)
            return jnp.where(m.observed, m.labels, y)

        return jax.vmap(one)(keys).reshape(tuple(sample_shape) + self.event_shape)

    def unclamped(self) -> MixtureClassField:
        """The class field with no node clamped."""
        return MixtureClassField(self.model.replace(observed=jnp.zeros_like(self.model.observed)))


class PolyaCentres(dist.Distribution):
    """Component centres given classes, Walder Eq. (6) with the Dirichlet weights integrated
    out: per class j, ``w_j ~ Dirichlet(alpha/m, ..., alpha/m)`` over the m vertices and
    ``beta_i | y_i = j ~ Categorical(w_j)``, so that

        p(beta | y) = prod_j G(alpha) / G(c_j + alpha) prod_l G(c_jl + alpha/m) / G(alpha/m),

    a normalised density of the centre sequence (``alpha`` may be a random site). ``sample``
    is exact (the Polya urn, node by node).
    """

    arg_constraints = {"alpha": constraints.positive}
    pytree_data_fields = ("classes", "alpha")
    pytree_aux_fields = ("n_classes",)

    def __init__(self, classes, alpha, n_classes: int, *, validate_args=None):
        self.classes = jnp.asarray(classes, jnp.int32)
        self.alpha = jnp.asarray(alpha)
        self.n_classes = int(n_classes)
        super().__init__(batch_shape=(), event_shape=self.classes.shape[-1:],
                         validate_args=validate_args)

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        """Centres are vertices ``0..m-1``."""
        return constraints.independent(
            constraints.integer_interval(0, self.event_shape[0] - 1), 1)

    def log_prob(self, value) -> jax.Array:
        """``log p(beta | y, alpha)`` of Eq. (6); ``-inf`` for ``alpha <= 0`` (no Dirichlet:
        ``gammaln`` of a negative ``alpha`` is finite, and NUTS under an unbounded prior froze
        at alpha = -0.004, silently) and for classes or centres out of range (a class ``>=
        n_classes`` dropped its node from the counts)."""
        m, C = self.event_shape[0], self.n_classes
        beta = jnp.asarray(value, jnp.int32)
        outside = (jnp.any((self.classes < 0) | (self.classes >= C))
                   | jnp.any((beta < 0) | (beta >= m)) | ~(self.alpha > 0))
        counts = jnp.zeros((C, m)).at[self.classes, beta].add(1.0)
        alpha = jnp.where(self.alpha > 0, self.alpha, 1.0)  # -inf below, not NaN
        a_m = alpha / m
        per_class = gammaln(alpha) - gammaln(counts.sum(1) + alpha)
        log_p = jnp.sum(per_class) + jnp.sum(gammaln(counts + a_m) - gammaln(a_m))
        return jnp.where(outside, -jnp.inf, log_p)

    def sample(self, key, sample_shape=()):
        """Exact draws by the Polya urn over nodes ``0..m-1``."""
        m, C = self.event_shape[0], self.n_classes
        keys = jax.random.split(key, int(np.prod(sample_shape, dtype=int)) or 1)

        def one(k):
            def body(counts, xs):
                j, ki = xs
                logits = jnp.log(counts[j] + self.alpha / m)
                b = jax.random.categorical(ki, logits)
                return counts.at[j, b].add(1.0), b

            _, beta = jax.lax.scan(body, jnp.zeros((C, m)), (self.classes, jax.random.split(k, m)))
            return beta.astype(jnp.int32)

        return jax.vmap(one)(keys).reshape(tuple(sample_shape) + self.event_shape)


# ----------------------------------------------------------------------------- evidence


@dataclasses.dataclass(frozen=True)
class EvidenceModel:
    """A pairwise label model plus an extra unary term: ``E'(y) = E(y) - sum_i U[i, y_i]``.

    The conditional of a label field given the program's other sites when those depend on
    the labels node by node (``U[i, c]`` = their log density with ``y_i = c``). Answers the
    pairwise protocol (:mod:`graphssl.models.protocol`) by delegation: ``pairwise_tables``
    (hence the conditionals and Swendsen–Wang's cluster fields) and ``unary_logits`` add ``U``
    to the field; couplings, ``observed`` and ``labels`` are the base's.
    """

    base: object
    evidence: jax.Array

    @property
    def n_nodes(self) -> int:
        return self.base.n_nodes

    @property
    def n_classes(self) -> int:
        return self.base.n_classes

    @property
    def observed(self):
        return self.base.observed

    @property
    def labels(self):
        return self.base.labels

    def energy(self, labels) -> jax.Array:
        """``E(y) - sum_i U[i, y_i]``: :func:`~graphssl.models.protocol.pairwise_energy` of
        the tables below (one source of truth with the samplers)."""
        return pairwise_energy(self, labels)

    def unary_logits(self) -> jax.Array:
        """The base's field plus ``U``."""
        return self.pairwise_tables()[2]

    def pairwise_tables(self):
        """The base's tables with ``U`` added to the unary table."""
        tables = pairwise_tables(self.base)
        return tables._replace(unary=tables.unary + self.evidence)

    def unclamped(self) -> EvidenceModel:
        """The base unclamped, evidence kept."""
        observed = jnp.zeros_like(jnp.asarray(self.base.observed))
        return EvidenceModel(dataclasses.replace(self.base, observed=observed), self.evidence)


jax.tree_util.register_dataclass(EvidenceModel, data_fields=["base", "evidence"],
                                 meta_fields=[])


def with_evidence(model, evidence) -> EvidenceModel:
    """``model`` conditioned on per-node evidence ``U`` (float[n, q], log units)."""
    evidence = jnp.asarray(evidence)
    if evidence.shape != (model.n_nodes, model.n_classes):
        raise ValueError(f"evidence: expected shape ({model.n_nodes}, {model.n_classes}), "
                         f"got {evidence.shape}")
    return EvidenceModel(model, evidence)


# ----------------------------------------------------------------------------- statistics


def default_pairs(n_nodes: int, n_pairs: int = 8, seed: int = 0) -> np.ndarray:
    """A fixed, documented set of node pairs for co-assignment traces: ``int[n_pairs, 2]``,
    distinct pairs drawn uniformly (``numpy.random.default_rng(seed)``), sorted."""
    if n_nodes < 2:
        raise ValueError(f"n_nodes: need at least 2 nodes for a pair, got {n_nodes}")
    n_all = n_nodes * (n_nodes - 1) // 2
    rng = np.random.default_rng(seed)
    picks = np.sort(rng.choice(n_all, size=min(n_pairs, n_all), replace=False))
    i, j = np.triu_indices(n_nodes, 1)
    return np.stack([i[picks], j[picks]], axis=1).astype(np.int32)


def record_label_statistics(labels, field: LabelField, pairs) -> None:
    """Deterministic sites for traces (ArviZ ``posterior``), never one per node:
    ``label_energy`` (the field's ``E(y)``), ``class_sizes`` (float[q]) and ``co_assignment``
    (float[n_pairs]: ``[y_i = y_j]`` for the fixed ``pairs``, see :func:`default_pairs`)."""
    labels = jnp.asarray(labels, jnp.int32)
    pairs = jnp.asarray(pairs, jnp.int32)
    q = field.model.n_classes
    numpyro.deterministic("label_energy", field.energy(labels))
    sizes = jnp.sum(labels[:, None] == jnp.arange(q), axis=0)
    numpyro.deterministic("class_sizes", sizes.astype(jnp.result_type(float)))
    same = labels[pairs[:, 0]] == labels[pairs[:, 1]]
    numpyro.deterministic("co_assignment", same.astype(jnp.result_type(float)))


def _check_mixture(model) -> DirichletDiffusionMixture:
    if not isinstance(model, DirichletDiffusionMixture):
        raise ValueError("model: expected a DirichletDiffusionMixture "
                         "(DirichletDiffusionMixture.create(graph, labels, ...))")
    return model
