"""A Potts CRF for graphs that come with node features: feature unary + learned couplings.

The model (Eq. 1 of :mod:`graphssl.inference.optimize.pseudo_likelihood` with one graph): on
the given graph ``W`` (e.g. citations), optionally joined with a cosine kNN graph ``K`` of the
features (``W <- W + K``),

    p(y | X) ∝ exp( sum_i alpha u_{i, y_i} + beta sum_{i<j} W_ij [y_i = y_j] ),
    labelled nodes clamped,

with ``u_i = log p(y_i | x_i)`` from the feature model (multinomial logistic regression with a
Gaussian prior, :mod:`graphssl.models.feature_model`). As a
:class:`~graphssl.models.potts.PottsModel`: ``beta`` = the coupling, ``graph`` = ``W``,
``field`` = ``(alpha / beta) u``.

Every setting comes from the labelled nodes, none from a validation set
(:func:`fit_feature_potts`):

1. rows scaled to unit norm; the feature model's prior precision by 5-fold cross-validated
   log likelihood; out-of-fold ``u_i`` for the labelled nodes (no over-confident in-sample
   unary biases step 2);
2. ``theta = (alpha, beta)`` by maximum pseudo-likelihood of the labelled nodes,
   neighbours' labels replaced by beliefs (feature-model predictions, then the mean-field
   marginals), ``rounds`` times;
3. the posterior by naive mean field (and, on request, Swendsen-Wang or chromatic Gibbs with
   MAP by ICM from the best draw: :func:`sample_feature_potts`).

Nodes that no label reaches (components without a labelled node; 438 components in CiteSeer)
keep the feature unary, so they get the feature model's prediction smoothed by their own
component, never an arbitrary class; an isolated node gets exactly ``softmax(alpha u_i)``.
For a model without a field (GRF, LGC, ...), :func:`fill_unreached` does the same by hand.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np
import scipy.sparse as sp

from graphssl.graph import Graph, unreached_nodes
from graphssl.inference.optimize.logistic import (
    DEFAULT_PRECISIONS,
    FeatureFit,
    cross_fitted_log_probabilities,
)
from graphssl.inference.optimize.mean_field import MeanFieldOptions, naive_mean_field
from graphssl.inference.optimize.pseudo_likelihood import (
    fit_pseudo_likelihood,
    neighbor_beliefs,
)
from graphssl.models.feature_model import normalize_rows
from graphssl.models.potts import PottsModel

__all__ = [
    "FeaturePottsFit",
    "cosine_knn_graph",
    "fit_feature_potts",
    "sample_feature_potts",
    "fill_unreached",
]


class FeaturePottsFit(NamedTuple):
    """Result of :func:`fit_feature_potts`.

    Attributes:
      model: the learned :class:`PottsModel` (labelled nodes clamped).
      marginals: float64[n, C] mean-field posterior marginals.
      theta: ``(alpha, beta)`` of the last pseudo-likelihood round.
      theta_history: float[rounds, 2], one row per round.
      feature: the :class:`~graphssl.inference.optimize.logistic.FeatureFit` (``log_probs``:
        out-of-fold on labelled nodes).
      graphs: ``[W]``, the coupling graph (scipy CSR, symmetric; kNN joined if asked).
      mean_field_info: convergence record of the last mean-field solve.
    """

    model: PottsModel
    marginals: np.ndarray
    theta: np.ndarray
    theta_history: np.ndarray
    feature: FeatureFit
    graphs: list
    mean_field_info: object


def cosine_knn_graph(features, k: int, *, block: int = 2048) -> sp.csr_matrix:
    """Symmetric (``max``) kNN graph of the rows by cosine similarity, weights in (0, 1].

    Sparse rows stay sparse: similarities come from blocks of the CSR product ``X X^T`` (no
    dense n x d copy); only positive similarities count as neighbours (a row that shares no
    word with any other stays isolated).
    """
    X = normalize_rows(features)
    n = X.shape[0]
    if not 1 <= int(k) < n:
        raise ValueError(f"k: need 1 <= k < n = {n}, got {k}")
    rows, cols, vals = [], [], []
    XT = sp.csc_matrix(X.T)
    for start in range(0, n, block):
        S = np.asarray((X[start:start + block] @ XT).toarray())
        local = np.arange(S.shape[0])
        S[local, start + local] = 0.0
        top = np.argpartition(-S, int(k) - 1, axis=1)[:, : int(k)]
        v = np.take_along_axis(S, top, axis=1)
        keep = v > 0
        rows.append(np.repeat(start + local, int(k))[keep.ravel()])
        cols.append(top[keep])
        vals.append(v[keep])
    K = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(n, n))
    return sp.csr_matrix(K.maximum(K.T))


def _as_symmetric_csr(graph) -> sp.csr_matrix:
    W = graph.to_scipy() if isinstance(graph, Graph) else sp.csr_matrix(graph, dtype=float)
    if W.shape[0] != W.shape[1]:
        raise ValueError(f"graph: expected a square n x n adjacency, got shape {W.shape}")
    W = sp.csr_matrix(W.maximum(W.T))
    W.setdiag(0)
    W.eliminate_zeros()
    return W


def _beliefs(probs, labels):
    q = np.array(probs, dtype=np.float64)
    rows = np.flatnonzero(labels >= 0)
    q[rows] = 0.0
    q[rows, labels[rows]] = 1.0
    return q


def _potts(graphs, theta, unary, labels, n_classes) -> PottsModel:
    alpha, betas = float(theta[0]), np.maximum(np.asarray(theta[1:], dtype=float), 1e-8)
    beta = float(betas[0])
    W = graphs[0].copy()
    for b, K in zip(betas[1:], graphs[1:], strict=True):
        W = W + (b / beta) * K
    return PottsModel.create(Graph.from_scipy(W), n_classes, beta=beta,
                             field=(alpha / beta) * unary, labels=labels)


def fit_feature_potts(graph, features, labels, n_classes: int | None = None, *,
                      knn: int = 0, rounds: int = 2, pl_prior: float = 1.0,
                      precisions=DEFAULT_PRECISIONS, n_folds: int = 5, seed: int,
                      mean_field_options: MeanFieldOptions | None = None) -> FeaturePottsFit:
    """Fit the feature-unary Potts CRF of this module (steps 1-3 of the module docstring).

    Args:
        graph: the given graph (:class:`Graph` or scipy sparse n x n; symmetrised).
        features: float[n, d], dense or scipy sparse (kept sparse).
        labels: int[n], ``-1`` for unlabelled; at least ``2 * n_folds`` labelled nodes.
        n_classes: C (default max label + 1).
        knn: 0 (default: the given graph only) or k of a cosine kNN graph of the features
            joined with it (``W + K``, one shared coupling). Measured on CiteSeer's
            validation split (benchmarks/bench_citation.py): k = 10 gained 1.2 points, within
            one standard error (2 points at 500 nodes), so the default keeps the simpler
            model; a separate ``beta_K`` learnt by pseudo-likelihood over-weighted ``K``
            (its messages echo the feature unary) and lost 5-15 points.
        rounds: pseudo-likelihood rounds (beliefs refreshed from the mean field each round).
        pl_prior: precision of the Gaussian prior on ``theta``.
        precisions, n_folds, seed: the feature model's cross-validation
            (:func:`~graphssl.inference.optimize.logistic.cross_fitted_log_probabilities`;
            ``seed`` deals the folds: required, no hidden default).
        mean_field_options: default sequential Gauss-Seidel sweeps, tol 1e-4.
    """
    labels = np.asarray(labels, dtype=np.int64)
    W = _as_symmetric_csr(graph)
    n = W.shape[0]
    if labels.shape != (n,):
        raise ValueError(f"labels: expected shape ({n},) to match the graph, got {labels.shape}")
    if features.shape[0] != n:
        raise ValueError(f"features: expected {n} rows (one per node), got {features.shape[0]}")
    if int(rounds) < 1:
        raise ValueError(f"rounds: need at least 1 pseudo-likelihood round, got {rounds}")
    C = int(labels.max()) + 1 if n_classes is None else int(n_classes)
    X = normalize_rows(features)
    feature = cross_fitted_log_probabilities(X, labels, C, precisions=precisions,
                                             n_folds=n_folds, seed=seed)
    unary = feature.log_probs
    graphs = [W if not knn else sp.csr_matrix(W + cosine_knn_graph(X, int(knn)))]
    options = mean_field_options or MeanFieldOptions(order="sequential", tol=1e-4)
    rows = np.flatnonzero(labels >= 0)
    beliefs = _beliefs(np.exp(unary), labels)
    theta, history, info, model = None, [], None, None
    for _ in range(int(rounds)):
        messages = neighbor_beliefs(graphs, beliefs, rows)
        pl = fit_pseudo_likelihood(unary[rows], messages, labels[rows],
                                   prior_precision=pl_prior, init=theta)
        theta = pl.theta
        history.append(theta)
        model = _potts(graphs, theta, unary, labels, C)
        solution, info = naive_mean_field(model, options=options)
        beliefs = _beliefs(np.asarray(solution.marginals, dtype=np.float64), labels)
    return FeaturePottsFit(model, beliefs, np.asarray(theta), np.asarray(history), feature,
                           graphs, info)


def sample_feature_potts(fit: FeaturePottsFit, *, kernel: str = "swendsen_wang",
                         n_chains: int = 4, n_samples: int = 200, burn_in: int = 50,
                         thin: int = 1, seed: int, icm: bool = True):
    """Posterior of the learned CRF by Swendsen-Wang (or ``kernel="gibbs"``: chromatic
    Gibbs), started from the mean-field labels; marginals Rao-Blackwellised
    (:func:`~graphssl.inference.mcmc.chains.rao_blackwell_marginals`); MAP by ICM from the
    lowest-energy draw. ``thin``: steps per kept draw. ``seed``: of the chains' PRNG key
    (required).

    Returns ``(marginals float64[n, C], map_labels int[n], samples)``.
    """
    from graphssl.inference.mcmc.chains import rao_blackwell_marginals, sample_chains
    from graphssl.inference.mcmc.gibbs import chromatic_gibbs
    from graphssl.inference.mcmc.swendsen_wang import swendsen_wang
    from graphssl.inference.optimize.icm import iterated_conditional_modes

    if kernel not in ("swendsen_wang", "gibbs"):
        raise ValueError(f"kernel: use 'swendsen_wang' or 'gibbs', got {kernel!r}")
    model = fit.model
    step = swendsen_wang() if kernel == "swendsen_wang" else chromatic_gibbs(model.graph)
    start = np.argmax(fit.marginals, axis=1)
    samples = sample_chains(step, model, jax.random.PRNGKey(int(seed)), n_chains=int(n_chains),
                            n_samples=int(n_samples), burn_in=int(burn_in), thin=int(thin),
                            init_labels=np.tile(start, (int(n_chains), 1)))
    marginals = np.asarray(rao_blackwell_marginals(model, samples), dtype=np.float64)
    map_labels = np.asarray(samples.map_labels)
    if icm:
        map_labels = np.asarray(iterated_conditional_modes(model, map_labels)[0])
    return marginals, map_labels, samples


def fill_unreached(distributions, graph, labels, feature_probs) -> np.ndarray:
    """Rows of nodes that no label reaches (:func:`graphssl.graph.unreached_nodes`) replaced
    by the feature model's class probabilities: what a graph-only model (GRF, LGC, ...) would
    otherwise leave uniform (argmax: class 0) or at an arbitrary class. ``graph``: a
    :class:`~graphssl.graph.Graph` or a square SciPy / dense adjacency."""
    out = np.array(distributions, dtype=np.float64)
    if not isinstance(graph, Graph):
        graph = Graph.from_scipy(_as_symmetric_csr(graph))
    lost = unreached_nodes(graph, np.asarray(labels) >= 0)
    out[lost] = np.asarray(feature_probs, dtype=np.float64)[lost]
    return out
