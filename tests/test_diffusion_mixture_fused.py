"""The fused (one Pallas kernel program per chain) Gibbs sweep of Walder's mixture.

Off a GPU the kernel runs in Pallas' interpreter, so these tests check its arithmetic on the
CPU: in float64 it makes the very same draws as the ``lax.scan`` sweep from the same key
(same conditional, same uniforms, same inverse-CDF rule), and on its own it leaves the exact
joint of the 5-node graph invariant (per-cell tolerance 5 binomial standard errors, as in
``test_diffusion_mixture.py``; fewer draws there because the interpreter runs the grid one
program at a time). The last test compiles the kernel and runs only where a GPU is present.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from graphssl.graph import knn_graph
from graphssl.inference.diffusion_mixture import gibbs
from graphssl.inference.diffusion_mixture import pallas as dmp
from graphssl.inference.diffusion_mixture import sampler as dms
from graphssl.models import diffusion_mixture as dm
from tests.test_diffusion_mixture import (
    _assert_tables_match,
    _enumerate,
    _keys,
    _model,
    _states,
    _tables,
)

N_FUSED = 6_000


def _random_model(m=60, C=3, seed=3, **kw):
    X = np.random.default_rng(seed).normal(size=(m, 3))
    labels = -np.ones(m, int)
    labels[: 2 * C] = np.arange(2 * C) % C
    params = dict(gamma=0.8, tau=2.0)
    params.update(kw)
    return dm.DirichletDiffusionMixture.create(knn_graph(X, 5, sigma="walder"), labels, C,
                                               **params)


def _assert_same_sweeps(model, n_sweeps, seed=0):
    state = gibbs.init_state(model, jax.random.PRNGKey(seed))
    scan = jax.jit(gibbs.gibbs_sweep)
    fused = jax.jit(dmp.fused_gibbs_sweep)
    for t in range(n_sweeps):
        key = jax.random.PRNGKey(100 + t)
        a, pa = scan(model, key, state)
        b, pb = fused(model, key, state)
        np.testing.assert_array_equal(np.asarray(a.y), np.asarray(b.y))
        np.testing.assert_array_equal(np.asarray(a.beta), np.asarray(b.beta))
        np.testing.assert_allclose(np.asarray(pa), np.asarray(pb), atol=1e-10)
        np.testing.assert_array_equal(np.asarray(a.stats.component_counts),
                                      np.asarray(b.stats.component_counts))
        np.testing.assert_allclose(np.asarray(a.stats.laplacian_indicators),
                                   np.asarray(b.stats.laplacian_indicators), atol=1e-12)
        state = a


@pytest.mark.parametrize("kw", [dict(), dict(balance=False, laplacian_kind="walder"),
                                dict(gamma=0.0, C=2)])
def test_fused_sweep_makes_the_scan_sweeps_draws(kw):
    _assert_same_sweeps(_random_model(**kw), n_sweeps=3)
    if not kw:
        _assert_same_sweeps(_model(), n_sweeps=5)


def test_fused_sweep_leaves_the_joint_invariant():
    model = _model()
    ys, bs, p = _enumerate(model)
    idx = np.random.default_rng(7).choice(p.size, size=N_FUSED, p=p)
    states = _states(model, ys[idx], bs[idx])
    tables = dmp.sweep_tables(model)
    sweep = jax.jit(jax.vmap(lambda k, s: dmp.fused_gibbs_sweep(model, k, s, tables)))
    new, probs = sweep(_keys(21, N_FUSED), states)
    _assert_tables_match(_tables(np.asarray(new.y), np.asarray(new.beta)),
                         _tables(ys, bs, p), N_FUSED)
    assert np.all(np.asarray(new.y)[:, [0, 4]] == [0, 1])
    np.testing.assert_allclose(np.asarray(probs).sum(axis=-1), 1.0, atol=1e-12)


def test_fused_sweep_large_gamma_gives_no_nan():
    model = _model(gamma=1e4, tau=0.01)
    state = gibbs.init_state(model, jax.random.PRNGKey(2))
    new, probs = jax.jit(dmp.fused_gibbs_sweep)(model, jax.random.PRNGKey(3), state)
    assert np.all(np.isfinite(np.asarray(probs)))
    assert np.isfinite(float(model.log_joint(new.y, new.beta)))


@pytest.mark.parametrize("batched", [False, True])
def test_sampler_engines_agree_and_bad_engine_raises(batched):
    model = _model()
    if batched:  # splits x chains: a two-dimensional kernel grid
        model = dms.stack_models([model, _model(gamma=0.0)])
    # the engine is the Gibbs sweep's: the chains keep the sweep and the re-sampling move
    # and leave out the re-labelling move (a quarter of the chain's program, engine-blind)
    runs = [dms.sample_mixture(model, jax.random.PRNGKey(5), n_chains=2, n_iterations=20,
                               burn_in=2, engine=e, moves=(1, 0)) for e in ("scan", "pallas")]
    np.testing.assert_array_equal(np.asarray(runs[0].labels), np.asarray(runs[1].labels))
    np.testing.assert_allclose(np.asarray(runs[0].energy), np.asarray(runs[1].energy),
                               atol=1e-9)
    with pytest.raises(ValueError, match="engine"):
        dms.sample_mixture(model, jax.random.PRNGKey(0), n_iterations=2, engine="cuda")
    expected = "pallas" if dmp.fused_sweep_available() else "scan"
    assert dms.resolve_engine("auto", model) == expected
    assert dmp.padded_shape(1500, 2) == (2, 2048)
    assert dmp.padded_shape(1500, 6) == (8, 2048)
    assert dmp.padded_shape(5, 2) == (2, 8)


@pytest.mark.skipif(not dmp.fused_sweep_available(), reason="needs a CUDA GPU")
def test_compiled_kernel_matches_the_scan_sweep_on_the_gpu():
    """float32 on the device: the two engines sum in different orders, so a draw whose
    uniform falls within rounding of a CDF step may differ; nearly all must agree."""
    model = _random_model(m=1500, C=3, dtype=jnp.float32)
    state = gibbs.init_state(model, jax.random.PRNGKey(0))
    a, pa = jax.jit(gibbs.gibbs_sweep)(model, jax.random.PRNGKey(1), state)
    b, pb = jax.jit(lambda *x: dmp.fused_gibbs_sweep(*x, interpret=False))(
        model, jax.random.PRNGKey(1), state)
    same = (np.asarray(a.y) == np.asarray(b.y)) & (np.asarray(a.beta) == np.asarray(b.beta))
    first = int(np.flatnonzero(~same)[0]) if not same.all() else model.n_nodes
    assert first >= model.n_nodes // 2, f"draws part at site {first}"
    stop = min(first + 1, model.n_nodes)  # the class probabilities come before the draw
    np.testing.assert_allclose(np.asarray(pa)[:stop], np.asarray(pb)[:stop], atol=1e-4)


def test_fused_greedy_sweep_and_map_refinement_equal_the_scan_ones():
    from graphssl.inference.diffusion_mixture.kernels import map_refine

    model = _random_model(C=3)
    state = gibbs.init_state(model, jax.random.PRNGKey(4))
    a, pa = jax.jit(lambda s: gibbs.gibbs_sweep(model, jax.random.PRNGKey(0), s, greedy=True))(
        state)
    b, pb = jax.jit(lambda s: dmp.fused_gibbs_sweep(model, jax.random.PRNGKey(0), s,
                                                    greedy=True))(state)
    np.testing.assert_array_equal(np.asarray(a.y), np.asarray(b.y))
    np.testing.assert_array_equal(np.asarray(a.beta), np.asarray(b.beta))
    np.testing.assert_allclose(np.asarray(pa), np.asarray(pb), atol=1e-10)
    refine = jax.jit(map_refine, static_argnames=("max_sweeps", "engine"))
    (sa, na), (sb, nb) = (refine(model, state, max_sweeps=20, engine=e)
                          for e in ("scan", "pallas"))
    assert int(na) == int(nb) < 20  # converged, in the same number of sweeps
    np.testing.assert_array_equal(np.asarray(sa.y), np.asarray(sb.y))
    np.testing.assert_array_equal(np.asarray(sa.beta), np.asarray(sb.beta))
    assert float(model.log_joint(sb.y, sb.beta)) >= float(model.log_joint(state.y, state.beta))
    with pytest.raises(ValueError, match="engine"):
        map_refine(model, state, engine="auto")
