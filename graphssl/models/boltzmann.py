"""Boltzmann-machine Markov random field of Zhu & Ghahramani (2002).

Paper: X. Zhu, Z. Ghahramani, *Towards Semi-Supervised Classification with Markov Random
Fields*, CMU-CALD-02-106 (``shared/papers/zhu-ghahramani-2002-boltzmann-mrf.txt``).

Two models over the true labels ``Y`` of all ``n = l + u`` points:

* the **basic model**, Eq. (2): ``P(Y|X) ∝ exp(sum_{j<i} delta(y_i, y_j) A_ij)`` with
  ``A_ij = exp(-d_ij^2 / (2 sigma^2))``; the labelled points are clamped to ``Y_L``;
* the **extended model**, Eqs. (36)-(40): observed labels ``o_i`` are noisy copies of
  ``y_i``; ``A_ij = exp(alpha_0 - sum_d (x_i^d - x_j^d)^2 / e^{alpha_d})`` (Eq. 39), class
  priors ``beta_c`` and one noise strength ``e^gamma``.  The doubled field over ``(O, Y)``
  is never built: its marginals over ``O`` are the Y-only potentials
  ``F`` (Eq. 45, unclamped phase, Eqs. 48-54) and ``G`` (Eq. 46, clamped phase, Eqs. 65-66),
  i.e. a Potts energy whose unary field is ``beta`` (F) or ``beta + e^gamma [y_i = o_i]`` on
  the labelled points (G).  The constants ``log(C - 1 + e^{e^gamma})`` per summed-out ``o_i``
  (Eq. 51) enter only the likelihood (Eq. 82) and the gamma gradient (Eqs. 64, 73).

Symbol map: ``A_ij`` -> ``graph.weights`` and ``pairwise_tables().coupling`` (both
directions of each pair are stored, so a sum over ``j < i`` is half the sum over stored
edges); ``sigma`` -> ``sigma``; ``alpha_0`` -> ``alpha0``; ``alpha_d`` ->
``log_length_scales[d]``; ``beta_c`` -> ``class_bias[c]``; ``gamma`` -> ``gamma``; ``o_i`` ->
``noisy_labels``; ``Y_L`` (clamped) -> ``labels`` where ``observed``.  Classes are
``0..C-1`` (the paper's ``1..C``).

Binary labels: with ``y in {0, 1}``, ``(y_i - y_j)^2 = 1 - delta(y_i, y_j)``, so an energy
``sum w_ij (y_i - y_j)^2`` is this 2-state Potts energy with ``A_ij = w_ij`` up to a
constant (factor 1); with spins ``y in {-1, +1}`` it is ``4 (1 - delta)``: ``A_ij = 4 w_ij``.

Energy convention (``p ∝ exp(-energy)``)::

    energy(Y) = -sum_{i<j} A_ij delta(y_i, y_j) - sum_i h_i(y_i),   h = pairwise_tables().unary

(``+inf`` off the hard-clamped labels), the pairwise law of :mod:`graphssl.models.protocol`
with the tables inherited from ``PottsModel.pairwise_tables``, so the Swendsen-Wang bond
probability between equal labels is ``1 - exp(-A_ij)`` (Eq. 34).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from graphssl.graph import Graph
from graphssl.graph.core import edge_slots
from graphssl.models.potts import POTTS_DATA_FIELDS, PottsModel

__all__ = [
    "BoltzmannMRF",
    "ExtendedParams",
    "MAX_LOG_COUPLING",
    "PairGeometry",
    "basic_boltzmann",
    "basic_couplings",
    "clamped_gamma_moment",
    "doubled_energy",
    "extended_boltzmann",
    "f_potential",
    "g_potential",
    "knn_pairs",
    "length_scale_couplings",
    "locally_scaled",
    "log_evidence_normaliser",
    "log_likelihood_from_partitions",
    "pair_geometry",
    "pair_sq_distances",
    "unclamped_gamma_moment",
]


# --------------------------------------------------------------------------- geometry
@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class PairGeometry:
    """Pairs (both directions) and their per-dimension squared differences.

    ``sq_diff[e, d] = (x_{senders[e]}^d - x_{receivers[e]}^d)^2``; the couplings of
    Eq. (2) and Eq. (39) are functions of this array only.
    """

    senders: jax.Array
    receivers: jax.Array
    sq_diff: jax.Array
    n_nodes: int = dataclasses.field(metadata=dict(static=True))

    @property
    def sq_dist(self) -> jax.Array:
        """Squared Euclidean distances ``d_ij^2`` per stored pair."""
        return jnp.sum(self.sq_diff, axis=-1)


def pair_geometry(X, k: int | None = None, per_feature: bool = True,
                  neighbours: np.ndarray | None = None, mutual: bool = False,
                  observed=None, pairs=None) -> PairGeometry:
    """Pairs of a fully connected Boltzmann machine (``k=None``, Eq. 2) or of its
    kNN sparsification (``k`` neighbours, symmetrised by union, or ``mutual``:
    :func:`knn_pairs`), both directions stored, sorted by (sender, receiver).

    ``per_feature=False`` keeps one column, the squared distance ``d_ij^2`` (``sq_diff[E,
    1]``): exact for every coupling with one length scale shared by all features (Eq. 2,
    and Eq. 39 with equal ``alpha_d``, the grid route), and ``E`` numbers instead of ``E x
    D`` (Text: 22 thousand pairs x 11960 features would be 2 GB).

    ``neighbours``: the ``int[n, k + 1]`` indices of a kNN search already done on ``X``
    (each row's ``k + 1`` nearest points, itself among them, as scikit-learn's
    ``kneighbors(X)`` returns them), to skip the search here; only with ``k``.
    ``mutual``, ``observed``: as :func:`knn_pairs` (only with ``k``). ``pairs``: the
    ``(senders, receivers)`` of :func:`knn_pairs` already chosen (then ``k``,
    ``neighbours``, ``mutual`` and ``observed`` are not read)."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] < 2:
        raise ValueError(f"X must be a 2-D array with at least 2 rows, got shape {X.shape}.")
    if not np.all(np.isfinite(X)):
        raise ValueError("X contains NaN or inf; impute or drop those rows first.")
    n = X.shape[0]
    if pairs is not None:
        s, r = (np.asarray(p, np.int64) for p in pairs)
    elif k is None:
        s, r = np.nonzero(~np.eye(n, dtype=bool))
    else:
        if not (isinstance(k, (int, np.integer)) and 1 <= k < n):
            raise ValueError(f"k must be an integer in [1, n-1] = [1, {n - 1}] or None, got {k!r}.")
        if neighbours is None:
            from sklearn.neighbors import NearestNeighbors

            idx = NearestNeighbors(n_neighbors=k + 1).fit(X).kneighbors(X, return_distance=False)
        else:
            idx = np.asarray(neighbours)
            if idx.shape != (n, k + 1):
                raise ValueError(f"neighbours: expected shape {(n, k + 1)} (each row's k + 1 "
                                 f"nearest points, itself included), got {idx.shape}")
        s, r, _ = knn_pairs(idx, mutual=mutual, observed=observed)
    sq = (X[s] - X[r]) ** 2 if per_feature else pair_sq_distances(X, s, r)[:, None]
    return PairGeometry(jnp.asarray(s, jnp.int32), jnp.asarray(r, jnp.int32), jnp.asarray(sq), n)


def knn_pairs(neighbours, mutual: bool = False, observed=None):
    """The pairs ``(senders, receivers, n_reconnected)`` of a kNN search, both directions,
    sorted by (sender, receiver).

    ``neighbours``: ``int[n, k + 1]``, each row's nearest points (itself among them).
    ``mutual=False``: the union (i in kNN(j) or j in kNN(i)); ``True``: the mutual pairs
    (i in kNN(j) and j in kNN(i), Bergamim & Breve's Eq. 8), where a node that no
    ``observed`` node (``bool[n]``) reaches gets its union pairs back
    (:func:`graphssl.models.potts.reconnect_unreached`, as ``PottsClassifier`` does);
    ``n_reconnected`` counts those nodes (0 for the union)."""
    import scipy.sparse as sp

    idx = np.asarray(neighbours)
    n = idx.shape[0]
    rows, cols = np.repeat(np.arange(n), idx.shape[1]), idx.reshape(-1)
    keep = rows != cols
    directed = sp.csr_matrix((np.ones(int(keep.sum())), (rows[keep], cols[keep])),
                             shape=(n, n))
    directed.data[:] = 1.0  # a repeated neighbour counts once
    union = directed.maximum(directed.T).tocsr()
    n_reconnected = 0
    pairs = union
    if mutual:
        from graphssl.models.potts import reconnect_unreached

        if observed is None:
            raise ValueError("observed: mutual pairs need the labelled nodes (bool[n]) to "
                             "give unreached nodes their union pairs back")
        graph, n_reconnected = reconnect_unreached(
            Graph.from_scipy(directed.minimum(directed.T).tocsr()), Graph.from_scipy(union),
            np.asarray(observed, bool))
        pairs = graph.to_scipy().tocsr()
    pairs = pairs.tocoo()
    order = np.lexsort((pairs.col, pairs.row))
    return (pairs.row[order].astype(np.int64), pairs.col[order].astype(np.int64),
            int(n_reconnected))


def pair_sq_distances(X: np.ndarray, senders: np.ndarray, receivers: np.ndarray,
                  block: int = 4096) -> np.ndarray:
    """``||x_s - x_r||^2`` per pair ``(senders[e], receivers[e])``, ``float64[E]``, a block of
    pairs at a time (no ``E x D`` array)."""
    out = np.empty(senders.size, dtype=np.float64)
    for start in range(0, senders.size, block):
        stop = start + block
        diff = X[senders[start:stop]] - X[receivers[start:stop]]
        out[start:stop] = np.einsum("ij,ij->i", diff, diff)
    return out


def locally_scaled(geometry: PairGeometry, widths) -> PairGeometry:
    """The pairs with each squared difference divided by ``sigma_i sigma_j / sigma_ref^2``:
    Zelnik-Manor & Perona's local scaling (2004) carried into Eq. (39), which then reads
    ``A_ij = exp(alpha_0 - sum_d (x_i^d - x_j^d)^2 sigma_ref^2 / (sigma_i sigma_j e^{alpha_d}))``.

    ``widths`` (``float[n]``, positive) are the points' own widths (each point's k-th
    neighbour distance / 3, :func:`graphssl.graph.weights.local_widths`); ``sigma_ref`` is
    their median, so a pair of typical points keeps its distance and the length scales
    ``alpha_d`` keep their units. A point in a sparse region (wide ``sigma_i``) couples to
    its neighbours as strongly as one in a dense region does to its own: the same
    correction that the local widths give the harmonic function's weights."""
    widths = np.asarray(widths, dtype=np.float64)
    if widths.shape != (geometry.n_nodes,) or not np.all(np.isfinite(widths) & (widths > 0)):
        raise ValueError(f"widths: need {geometry.n_nodes} positive finite numbers, one per "
                         "point (graphssl.graph.weights.local_widths)")
    reference = float(np.median(widths))
    s, r = np.asarray(geometry.senders), np.asarray(geometry.receivers)
    factor = reference**2 / (widths[s] * widths[r])
    sq_diff = np.asarray(geometry.sq_diff) * factor[:, None]
    return dataclasses.replace(geometry, sq_diff=jnp.asarray(sq_diff, geometry.sq_diff.dtype))


@jax.jit
def basic_couplings(geometry: PairGeometry, sigma) -> jax.Array:
    """``A_ij = exp(-d_ij^2 / (2 sigma^2))``, Eq. (2) of Zhu & Ghahramani (1 for coinciding
    points at any ``sigma``, 0 for distinct ones as ``sigma -> 0``: no ``0 / 0``)."""
    d2 = geometry.sq_dist
    return jnp.where(d2 > 0, jnp.exp(-d2 / (2.0 * jnp.square(sigma))), 1.0)


MAX_LOG_COUPLING = 50.0  # A_ij <= e^50: a bond forms with probability 1 - e^{-e^50} = 1


@jax.jit
def length_scale_couplings(geometry: PairGeometry, alpha0, log_length_scales) -> jax.Array:
    """``A_ij = exp(alpha_0 - sum_d (x_i^d - x_j^d)^2 / e^{alpha_d})``, Eq. (39), computed in
    log space: a zero difference contributes 0 at any length scale (no ``0 * inf``), and
    ``log A_ij`` is capped at ``MAX_LOG_COUPLING`` (already a certain bond), so that sums of
    couplings stay finite in float32 for any ``alpha_0``. Jitted, as
    :func:`basic_couplings` is: one program per data shape where its operations, called
    eagerly, compiled one by one."""
    inverse = jnp.exp(-jnp.asarray(log_length_scales))
    scaled = jnp.where(geometry.sq_diff > 0, geometry.sq_diff * inverse, 0.0)
    return jnp.exp(jnp.minimum(alpha0 - jnp.sum(scaled, axis=-1), MAX_LOG_COUPLING))


# --------------------------------------------------------------------------- parameters
class ExtendedParams(NamedTuple):
    """Theta of the extended model, Eq. (40): ``alpha0`` (alpha_0), ``log_length_scales``
    (alpha_1..alpha_D), ``class_bias`` (beta_1..beta_C), ``gamma``."""

    alpha0: jax.Array
    log_length_scales: jax.Array
    class_bias: jax.Array
    gamma: jax.Array


# --------------------------------------------------------------------------- the model
@dataclasses.dataclass(frozen=True)
class BoltzmannMRF(PottsModel):
    """Y-only Boltzmann machine: a :class:`~graphssl.models.potts.PottsModel` at ``beta = 1``
    with couplings ``W = A`` and field ``class_bias + evidence``, which remembers how its
    field was made so that ``unclamped()`` is the right phase:

    * basic model, clamped phase: ``observed = L`` (hard clamp), ``evidence_strength = 0``;
    * extended model, clamped phase = ``G`` (Eqs. 46, 66): ``noisy_observed = L``,
      ``evidence_strength = e^gamma``, nothing hard-clamped;
    * ``unclamped()`` drops both: the basic unclamped model, or ``F`` (Eqs. 45, 52).

    ``energy`` is ``-(F or G)(Y)`` (Eqs. 2, 45, 46), ``+inf`` off the hard-clamped labels:
    the inherited ``PottsModel.energy``, i.e. the protocol's ``pairwise_energy``.

    Extra fields: ``class_bias`` (beta_c, float[C]), ``node_field`` (None, or a per-node
    class prior ``float[n, C]`` added to every node's field in both phases: Eq. (40)'s
    ``beta_c`` generalised to ``beta_ic``, e.g. a feature model's log-probabilities),
    ``evidence_strength`` (e^gamma),
    ``noisy_observed`` (bool[n], the set L of the extended model), ``noisy_labels``
    (o_i, int32[n]) and ``edge_slot`` (int32[n, d_max]: the edge behind each entry of the
    padded neighbour table, ``E`` for padding) so that :meth:`with_parameters` stays jit-able.
    """

    class_bias: jax.Array = None
    node_field: jax.Array = None
    evidence_strength: jax.Array = None
    noisy_observed: jax.Array = None
    noisy_labels: jax.Array = None
    edge_slot: jax.Array = None

    def evidence_field(self) -> jax.Array:
        """``e^gamma [c = o_i] [i in L]``, float[n, C]: the O-marginalised noise term (Eq. 46)."""
        onehot = jax.nn.one_hot(self.noisy_labels, self.n_classes, dtype=self.field.dtype)
        return self.evidence_strength * onehot * self.noisy_observed[:, None]

    def with_parameters(
        self, couplings=None, class_bias=None, evidence_strength=None
    ) -> BoltzmannMRF:
        """Same structure, new ``A_ij`` (``couplings``, float[E], one per stored pair, in the
        order of ``graph.senders``), ``beta_c`` (``class_bias``, float[C]) and/or ``e^gamma``;
        jit-able, and one compiled program when called outside ``jit``
        (:func:`_with_parameters`). Lists are converted; a wrong length is a ``ValueError``
        (shapes are static: checked for traced values too)."""
        if couplings is not None:
            couplings = _parameter_vector(couplings, int(self.graph.senders.shape[0]),
                                          "couplings", "one A_ij per stored pair",
                                          self.graph.weights.dtype)
        if class_bias is not None:
            class_bias = _parameter_vector(class_bias, self.n_classes, "class_bias",
                                           "one beta_c per class", self.field.dtype)
        return _with_parameters(self, couplings, class_bias, evidence_strength)

    def unclamped(self) -> BoltzmannMRF:
        """The unclamped phase: no hard clamping and no evidence term (F of Eq. 52)."""
        false = jnp.zeros_like(self.observed)
        m = dataclasses.replace(
            self,
            evidence_strength=jnp.zeros_like(self.evidence_strength),
            noisy_observed=false,
            observed=false,
        )
        return m.with_parameters()


jax.tree_util.register_dataclass(
    BoltzmannMRF,
    data_fields=[
        *POTTS_DATA_FIELDS,
        "class_bias",
        "node_field",
        "evidence_strength",
        "noisy_observed",
        "noisy_labels",
        "edge_slot",
    ],
    meta_fields=["n_classes"],
)


def _parameter_vector(value, length: int, name: str, meaning: str, dtype):
    """``value`` as a float[length] array (a list or tuple is converted to ``dtype``); a
    ``ValueError`` naming ``name`` when its shape differs. Reads ``.shape`` only, so a traced
    value (``jit``, ``vmap``, ``grad``) passes through unconverted."""
    if not hasattr(value, "shape"):
        try:
            value = np.asarray(value, dtype=dtype)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: expected float[{length}] ({meaning}), got "
                             f"{value!r}") from None
    if tuple(value.shape) != (length,):
        raise ValueError(f"{name}: expected float[{length}] ({meaning}), got shape "
                         f"{tuple(value.shape)}")
    return value


@jax.jit
def _with_parameters(m: BoltzmannMRF, couplings, class_bias, evidence_strength) -> BoltzmannMRF:
    """:meth:`BoltzmannMRF.with_parameters` (``None``: keep the model's). Jitted: called
    eagerly, its gathers and sums compiled one by one (0.3 s per new data shape, 2-core
    CPU)."""
    if couplings is not None:
        graph = dataclasses.replace(m.graph, weights=couplings)
        padded = jnp.concatenate([couplings, jnp.zeros((1,), couplings.dtype)])
        m = dataclasses.replace(m, graph=graph, neighbor_weight=padded[m.edge_slot])
    if class_bias is not None:
        m = dataclasses.replace(m, class_bias=jnp.asarray(class_bias, m.field.dtype))
    if evidence_strength is not None:
        m = dataclasses.replace(
            m, evidence_strength=jnp.asarray(evidence_strength, m.field.dtype)
        )
    field = m.class_bias[None, :] + m.evidence_field()
    if m.node_field is not None:
        field = field + m.node_field
    return dataclasses.replace(m, field=field)


def _edge_slots(senders: np.ndarray, n: int, d_max: int) -> np.ndarray:
    """Edge index behind each entry of ``Graph.padded_neighbors()`` (``E`` = padding)."""
    slot, _ = edge_slots(senders, n)
    out = np.full((n, d_max), senders.size, dtype=np.int32)
    out[senders, slot] = np.arange(senders.size)
    return out


def _build(
    geometry, couplings, class_bias, evidence_strength, noisy_observed, labels, observed, n_classes
):
    graph = Graph(
        senders=geometry.senders,
        receivers=geometry.receivers,
        weights=couplings,
        n_nodes=geometry.n_nodes,
    )
    potts = PottsModel.create(
        graph, n_classes, beta=1.0, labels=np.where(observed, labels, -1), observed=observed
    )
    index = potts.neighbor_index
    slots = _edge_slots(np.asarray(geometry.senders), geometry.n_nodes, index.shape[1])
    dtype = potts.field.dtype
    model = BoltzmannMRF(
        **{f.name: getattr(potts, f.name) for f in dataclasses.fields(PottsModel)},
        class_bias=jnp.asarray(class_bias, dtype),
        evidence_strength=jnp.asarray(evidence_strength, dtype),
        noisy_observed=jnp.asarray(noisy_observed),
        noisy_labels=jnp.asarray(labels, jnp.int32),
        edge_slot=jnp.asarray(slots),
    )
    return model.with_parameters()


def _as_labels(labels, n: int, n_classes: int | None):
    y = np.asarray(labels)
    if y.shape != (n,):
        raise ValueError(f"labels must have shape ({n},) matching X, got {y.shape}.")
    if not np.issubdtype(y.dtype, np.integer):
        raise ValueError("labels must be integers 0..C-1, with -1 for unlabelled points.")
    if np.any(y < -1):
        raise ValueError("labels must be >= -1 (-1 marks an unlabelled point).")
    if n_classes is None:
        n_classes = int(max(y.max() + 1, 2))
    if np.any(y >= n_classes):
        raise ValueError(f"labels must be < n_classes = {n_classes}.")
    observed = y >= 0
    return jnp.asarray(observed), jnp.asarray(np.where(observed, y, 0), jnp.int32), n_classes


def basic_boltzmann(
    geometry: PairGeometry, sigma, labels, n_classes: int | None = None
) -> BoltzmannMRF:
    """Basic model Eq. (2), clamped to the labelled points (``labels = -1`` elsewhere)."""
    observed, lab, C = _as_labels(labels, geometry.n_nodes, n_classes)
    observed, lab = np.asarray(observed), np.asarray(lab)
    return _build(
        geometry,
        basic_couplings(geometry, sigma),
        np.zeros(C),
        0.0,
        np.zeros_like(observed),
        lab,
        observed,
        C,
    )


def extended_boltzmann(geometry: PairGeometry, params: ExtendedParams, labels) -> BoltzmannMRF:
    """Extended model Eq. (40) reduced to ``G`` (Eq. 66): the clamped phase over ``Y``
    given the noisy observations ``o_i = labels[i]`` (``-1`` = unobserved)."""
    C = int(np.shape(params.class_bias)[0])
    if C < 2:
        raise ValueError("params.class_bias must have one entry per class (at least 2).")
    observed, lab, _ = _as_labels(labels, geometry.n_nodes, C)
    if np.shape(params.log_length_scales) != (geometry.sq_diff.shape[1],):
        raise ValueError(
            "params.log_length_scales must have one entry per feature "
            f"({geometry.sq_diff.shape[1]}), got shape {np.shape(params.log_length_scales)}."
        )
    couplings = length_scale_couplings(geometry, params.alpha0, params.log_length_scales)
    return _build(
        geometry,
        couplings,
        params.class_bias,
        jnp.exp(params.gamma),
        np.asarray(observed),
        np.asarray(lab),
        np.zeros(geometry.n_nodes, bool),
        C,
    )


# --------------------------------------------------------------------------- Eqs. 45-82
def f_potential(model: BoltzmannMRF, y) -> jax.Array:
    """``F(Y) = sum_{j<i} delta(y_i,y_j) A_ij + sum_i beta_{y_i}``, Eq. (45)."""
    return -model.unclamped().energy(y)


def g_potential(model: BoltzmannMRF, y) -> jax.Array:
    """``G(O_L, Y) = F(Y) + sum_{i in L} delta(o_i, y_i) e^gamma``, Eq. (46)."""
    return -dataclasses.replace(model, observed=jnp.zeros_like(model.observed)).energy(y)


def doubled_energy(model: BoltzmannMRF, o, y) -> jax.Array:
    """``-H(O, Y)`` of Eq. (47): the doubled field over ``(O, Y)`` with every ``o_i``
    explicit.  Only for brute-force checks of the reductions; never used for inference."""
    match = (o == y).astype(model.field.dtype)
    return -(f_potential(model, y) + model.evidence_strength * jnp.sum(match))


def log_evidence_normaliser(gamma, n_classes: int) -> jax.Array:
    """``log(C - 1 + e^{e^gamma})``: the sum over one unobserved ``o_i`` (Eq. 51), stable
    for large gamma."""
    e = jnp.exp(gamma)
    return e + jnp.log1p((n_classes - 1) * jnp.exp(-e))


def unclamped_gamma_moment(gamma, n_nodes: int, n_classes: int) -> jax.Array:
    """``<dH/dgamma>_u = (l+u) e^{gamma + e^gamma} / (C - 1 + e^{e^gamma})``, Eq. (64)."""
    return n_nodes * jnp.exp(gamma + jnp.exp(gamma) - log_evidence_normaliser(gamma, n_classes))


def clamped_gamma_moment(gamma, expected_matches, n_unlabelled: int, n_classes: int) -> jax.Array:
    """Eq. (73): ``<dH/dgamma>_c = <sum_{i<=l} delta(o_i, y_i)>_G e^gamma
    + u e^{gamma + e^gamma} / (C - 1 + e^{e^gamma})``."""
    tail = n_unlabelled * jnp.exp(
        gamma + jnp.exp(gamma) - log_evidence_normaliser(gamma, n_classes)
    )
    return expected_matches * jnp.exp(gamma) + tail


def log_likelihood_from_partitions(
    log_z_g, log_z_f, gamma, n_labelled: int, n_classes: int
) -> jax.Array:
    """``L = log Z_G - log Z_F - l log(C - 1 + e^{e^gamma})``, Eq. (82)."""
    return log_z_g - log_z_f - n_labelled * log_evidence_normaliser(gamma, n_classes)
