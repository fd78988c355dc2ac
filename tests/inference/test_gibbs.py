"""Gibbs kernels (Zhu & Ghahramani Sec. 3.2) against exact enumeration."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from graphssl.inference import chromatic_gibbs, sample_chains, sequential_gibbs
from graphssl.inference.mcmc.gibbs import (
    bucket_logits,
    color_classes,
    degree_buckets,
    greedy_coloring,
)
from graphssl.inference.mcmc.kernels import sample_categorical_columns
from graphssl.models.potts import PottsModel
from graphssl.models.protocol import pairwise_conditional_logits

from .conftest import BURN_IN, N_CHAINS, N_SAMPLES, VARIANTS, assert_matches_exact, random_graph


@pytest.mark.parametrize("name", ["sequential", "chromatic"])
def test_gibbs_matches_enumeration(kernels, models, exact, name):
    for variant in VARIANTS:
        samples = sample_chains(
            kernels[name], models[variant], jax.random.key(11), n_chains=N_CHAINS,
            n_samples=N_SAMPLES, burn_in=BURN_IN,
        )
        assert_matches_exact(samples, exact[variant])
        observed = np.asarray(models[variant].observed)
        clamped = np.asarray(models[variant].labels)[observed]
        assert np.all(np.asarray(samples.labels)[:, :, observed] == clamped)


def test_unclamped_phase_frees_labelled_nodes(kernels, models):
    model = models[(True, True)]
    samples = sample_chains(kernels["chromatic"], model.unclamped(), jax.random.key(2),
                            n_chains=N_CHAINS, n_samples=N_SAMPLES, burn_in=BURN_IN)
    observed = np.asarray(model.observed)
    assert len(np.unique(np.asarray(samples.labels)[:, :, observed])) > 1


def test_greedy_coloring_is_proper():
    graph = random_graph(60, 0.15, seed=5)
    s, r = np.asarray(graph.senders), np.asarray(graph.receivers)
    for order in ("largest_first", "natural", "jones_plassmann", "igraph", "auto"):
        colors = greedy_coloring(graph, order=order)
        assert np.all(colors[s] != colors[r])
        assert colors.max() <= np.bincount(s).max()
        classes = color_classes(colors)
        assert sum(c.size for c in classes) == graph.n_nodes
    with pytest.raises(ValueError, match="proper colouring"):
        chromatic_gibbs(graph, colors=np.zeros(graph.n_nodes, int))


@pytest.mark.parametrize("seed", [0, 1])
def test_jones_plassmann_is_the_greedy_colouring_in_its_order(seed):
    """The round-based colouring equals the one-node-at-a-time greedy pass visiting the nodes
    in decreasing (degree, random) priority -- the same rule, computed in parallel rounds."""
    from graphssl.inference.coloring import undirected_csr as _csr

    graph = random_graph(200, 0.05, seed=seed)
    colors = greedy_coloring(graph, order="jones_plassmann", seed=seed)
    indptr, nbrs = _csr(graph)
    degree = np.diff(indptr)
    n = graph.n_nodes
    visit = np.lexsort((np.random.default_rng(seed).random(n), degree))[::-1]
    ref = np.full(n, -1)
    for node in visit:
        used = set(ref[nbrs[indptr[node]:indptr[node + 1]]])
        ref[node] = min(c for c in range(n + 1) if c not in used)
    np.testing.assert_array_equal(colors, ref)


@pytest.fixture(scope="module")
def padded_kernel(models):
    return chromatic_gibbs(models[(False, False)].graph, layout="padded")


def test_padded_layout_matches_enumeration(padded_kernel, models, exact):
    """The old per-colour path (kept for comparison and for models without tables)."""
    for variant in VARIANTS:
        samples = sample_chains(padded_kernel, models[variant], jax.random.key(12),
                                n_chains=N_CHAINS, n_samples=N_SAMPLES, burn_in=BURN_IN)
        assert_matches_exact(samples, exact[variant])


# one program per bucket shape (run op by op, every operation compiled on its own per shape)
_BUCKET_LOGITS = jax.jit(bucket_logits)
_PAIRWISE_LOGITS = jax.jit(pairwise_conditional_logits)


@pytest.mark.parametrize("q", [3, 6])
def test_bucketed_table_reproduces_padded_conditionals(q):
    """Degree buckets read only up to each bucket's width: same logits as the full padded
    table (float64), and the buckets partition the nodes, one colour class at a time."""
    rng = np.random.default_rng(q)
    graph = random_graph(40, 0.25, seed=q)
    model = PottsModel.create(graph, q, beta=0.7, field=rng.normal(size=(40, q)))
    assert model.field.dtype == jnp.float64
    labels = jnp.asarray(rng.integers(0, q, 40), jnp.int32)
    colors = greedy_coloring(graph)
    plan = degree_buckets(graph, colors, n_buckets=3, min_bucket_size=1)
    rows_all = np.concatenate([rows for colour in plan for rows, _ in colour])
    assert np.array_equal(np.sort(rows_all), np.arange(40))
    degree = np.bincount(np.asarray(graph.senders), minlength=40)
    tables = model.pairwise_tables()
    coupling, unary = tables.coupling, tables.unary
    widths = []
    for colour in plan:
        assert len({int(colors[r]) for rows, _ in colour for r in rows}) == 1
        for rows, neighbours in colour:
            assert neighbours.shape == (max(degree[rows].max(), 1), rows.size)
            widths.append(neighbours.shape[0])
            got = _BUCKET_LOGITS(labels, coupling, unary, rows, neighbours).T
            want = _PAIRWISE_LOGITS(model, labels, jnp.asarray(rows))
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12, atol=1e-12)
    assert min(widths) < model.neighbor_index.shape[1]  # some bucket is narrower than d_max


def test_sample_categorical_columns_law():
    """Frequencies within 4 binomial standard errors of softmax, with huge logits (no
    overflow) and a zero-probability class."""
    logits = jnp.asarray([1000.0, 1000.0 + np.log(2.0), -jnp.inf, 999.0])
    p = np.asarray(jax.nn.softmax(logits))
    m = 200_000
    draws = np.asarray(sample_categorical_columns(jax.random.key(3),
                                                  jnp.tile(logits[:, None], (1, m))))
    freq = np.bincount(draws, minlength=4) / m
    se = np.sqrt(p * (1 - p) / m)
    assert np.all(np.abs(freq - p) <= 4 * se + 1e-12)
    assert freq[2] == 0.0


def test_stacked_classes_pad_past_the_last_node():
    """Every colour class is one row, padded with distinct indices past the last node (reads
    are clipped, writes dropped), so each row is sorted and free of repeats."""
    from graphssl.inference.mcmc.gibbs import _stacked_classes

    colors = np.array([0, 1, 0, 2, 1, 0])
    table = _stacked_classes(colors)
    np.testing.assert_array_equal(table, [[0, 2, 5], [1, 4, 6], [3, 6, 7]])


def test_auto_layout_is_stacked_on_a_small_graph_on_cpu(models, monkeypatch):
    """``layout="auto"`` on a CPU: the stacked layout up to STACKED_MAX_NODES nodes (one
    compiled body whatever the colouring), the bucketed one above."""
    from graphssl.inference.mcmc import gibbs

    graph = models[(False, False)].graph
    assert jax.default_backend() == "cpu"
    stacked = gibbs.chromatic_gibbs(graph).step.args[0][2]
    assert stacked is not None and stacked.shape[1] < graph.n_nodes
    monkeypatch.setattr(gibbs, "STACKED_MAX_NODES", graph.n_nodes - 1)
    plan, _, none = gibbs.chromatic_gibbs(graph).step.args[0]
    assert none is None and plan is not None


def test_chromatic_layout_arguments(models):
    graph = models[(False, False)].graph
    with pytest.raises(ValueError, match="layout"):
        chromatic_gibbs(graph, layout="csr")
    with pytest.raises(ValueError, match="n_buckets"):
        chromatic_gibbs(graph, n_buckets=0)
    other = random_graph(graph.n_nodes, 0.6, seed=9)
    kernel = chromatic_gibbs(other, layout="bucketed")
    with pytest.raises(ValueError, match="model's own graph"):
        kernel.init(models[(False, False)], jax.random.key(0))
    # the stacked layout reads the model's own tables: any colouring that separates the
    # model's coupled pairs will do, and one that does not is refused
    sparse = random_graph(graph.n_nodes, 0.05, seed=9)
    with pytest.raises(ValueError, match="share a colour"):
        chromatic_gibbs(sparse, layout="stacked").init(models[(False, False)],
                                                       jax.random.key(0))


@pytest.mark.parametrize("layout", ["bucketed", "stacked"])
def test_prepared_model_gives_the_same_sweep(models, layout):
    """``Kernel.prepare`` gathers the couplings into bucket (or stacked) layout once per run; a
    step on the prepared model is the same transition (same key, same labels) as on the plain
    one, also inside ``compose``, and the prepared model still answers the model protocol."""
    from graphssl.inference import compose, permutation_move
    from graphssl.inference.mcmc.gibbs import PreparedModel
    from graphssl.inference.mcmc.kernels import prepared

    model = models[(True, True)]
    kernel = chromatic_gibbs(model.graph, layout=layout)
    assert kernel.prepare is not None
    ready = prepared(kernel, model)
    assert isinstance(ready, PreparedModel) and ready.n_nodes == model.n_nodes
    state = kernel.init(model, jax.random.key(0))
    step = jax.jit(kernel.step)  # one program per model type (op by op: ~120 compilations)
    for t in range(3):
        key = jax.random.key(10 + t)
        plain, _ = step(model, key, state)
        fast, _ = step(ready, key, state)
        np.testing.assert_array_equal(np.asarray(plain.labels), np.asarray(fast.labels))
        state = plain
    both = compose(kernel, permutation_move())
    ready2 = prepared(both, model)
    key = jax.random.key(3)
    step_both = jax.jit(both.step)
    np.testing.assert_array_equal(np.asarray(step_both(model, key, state)[0].labels),
                                  np.asarray(step_both(ready2, key, state)[0].labels))
    assert float(ready2.energy(state.labels)) == float(model.energy(state.labels))


def test_sequential_order_must_visit_every_node_once(models):
    model = models[(True, True)]
    n = model.n_nodes
    reversed_sweep = sample_chains(sequential_gibbs(np.arange(n)[::-1]), model,
                                   jax.random.key(0), n_chains=2, n_samples=3, burn_in=1)
    assert reversed_sweep.labels.shape == (2, 3, n)
    for order in (np.arange(n - 1), np.r_[np.arange(n - 1), n + 90], np.r_[0, np.arange(n - 1)]):
        with pytest.raises(ValueError, match=f"order: must be a permutation of 0..{n - 1}"):
            sample_chains(sequential_gibbs(order), model, jax.random.key(0), n_samples=2)
    with pytest.raises(ValueError, match="order: a 1-D array of node indices"):
        sequential_gibbs(np.full(n, 0.5))


def test_color_classes_of_an_empty_or_malformed_colouring():
    """An empty colouring (a graph without nodes) failed on ``colors.max()`` of nothing;
    negative or fractional colours are named."""
    from graphssl.inference.coloring import color_classes

    assert color_classes(np.zeros(0, dtype=int)) == []
    for bad in (np.array([0, -1]), np.array([0.0, 1.5]), np.zeros((2, 2), int)):
        with pytest.raises(ValueError, match=r"^colors: expected one integer colour"):
            color_classes(bad)
    got = color_classes(np.array([1, 0, 1]))
    assert [c.tolist() for c in got] == [[1], [0, 2]]
