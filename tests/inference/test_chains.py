"""sample_chains: resume, chunking, thinning, storage, MAP tracking, ICM, device sharding."""

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from graphssl.inference import label_marginals, sample_chains, storage_dtype
from graphssl.inference.mcmc.chains import rao_blackwell_marginals
from graphssl.inference.optimize.icm import iterated_conditional_modes

from . import exactness as E
from .conftest import BURN_IN, N_CHAINS, N_SAMPLES, small_model


@pytest.fixture(scope="module")
def reference(kernels, models):
    """One uninterrupted run (same compiled shapes as the exactness tests)."""
    return sample_chains(kernels["chromatic"], models[(True, True)], jax.random.key(4),
                         n_chains=N_CHAINS, n_samples=N_SAMPLES, burn_in=BURN_IN)


def test_resume_and_chunks_equal_uninterrupted_run(kernels, models, reference):
    kernel, model = kernels["chromatic"], models[(True, True)]
    half = N_SAMPLES // 2
    first = sample_chains(kernel, model, jax.random.key(4), n_chains=N_CHAINS,
                          n_samples=half, burn_in=BURN_IN)
    resumed = sample_chains(kernel, model, None, n_samples=N_SAMPLES - half, resume=first)
    np.testing.assert_array_equal(resumed.labels, reference.labels)
    np.testing.assert_array_equal(resumed.energy, reference.energy)
    np.testing.assert_array_equal(resumed.map_labels, reference.map_labels)
    assert resumed.n_steps == reference.n_steps == BURN_IN + N_SAMPLES
    # chunked scan (the progress-bar path) gives the same draws
    chunked = sample_chains(kernel, model, jax.random.key(4), n_chains=N_CHAINS,
                            n_samples=N_SAMPLES, burn_in=BURN_IN, progress=True, chunk_size=half)
    np.testing.assert_array_equal(chunked.labels, reference.labels)


def test_storage_map_and_marginals(models, reference, exact):
    assert reference.labels.dtype == storage_dtype(3) == np.int8
    assert storage_dtype(200) == np.int16 and storage_dtype(40000) == np.int32
    assert reference.labels.shape == (N_CHAINS, N_SAMPLES, 8)
    assert reference.energy.shape == (N_CHAINS, N_SAMPLES)
    model = models[(True, True)]
    energies = jax.vmap(model.energy)(reference.labels.reshape(-1, 8).astype(np.int32))
    np.testing.assert_allclose(energies.reshape(N_CHAINS, -1), reference.energy, rtol=1e-12)
    # the best state visited is at least as good as any retained draw, and here it is the
    # exact MAP (small model, many chains)
    assert reference.map_energy <= reference.energy.min() + 1e-12
    np.testing.assert_allclose(reference.map_energy, exact[(True, True)].map_energy, rtol=1e-12)
    np.testing.assert_allclose(model.energy(reference.map_labels), reference.map_energy)
    marg = label_marginals(reference)
    np.testing.assert_allclose(marg.sum(1), 1.0)
    np.testing.assert_allclose(label_marginals(reference.labels, 3), marg)


def _conditionals_by_energy(model, draw) -> np.ndarray:
    """``p(y_i = c | y_-i)`` of one labelling from ``model.energy`` alone (one-hot where a
    node is clamped): the reference the Rao–Blackwellised marginals must reproduce."""
    n, q = draw.size, model.n_classes
    out = np.zeros((n, q))
    for i in range(n):
        trials = np.repeat(draw[None], q, axis=0)
        trials[:, i] = np.arange(q)
        energy = np.asarray(jax.vmap(model.energy)(trials.astype(np.int32)), dtype=float)
        finite = np.isfinite(energy)
        logits = np.where(finite, -energy, -np.inf)
        out[i] = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    return out


def _assert_conditionals(marginals_fn, model, draws):
    for draw in draws:
        np.testing.assert_allclose(np.asarray(marginals_fn(model, draw[None])),
                                   _conditionals_by_energy(model, draw), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("variant", [(True, True), (False, True), (True, False)])
def test_rao_blackwell_marginals_are_the_laws_conditionals(models, reference, variant):
    """One draw's estimate is each node's full conditional, derived here from the energy
    alone (field, couplings and clamps); a frequency estimate or a copy that forgets the
    clamps fails the same check."""
    model = models[variant]
    observed = np.asarray(model.observed)
    clamp = np.asarray(model.labels)
    rng = np.random.default_rng(0)
    draws = rng.integers(0, 3, (4, 8))
    draws[:, observed] = clamp[observed]
    _assert_conditionals(rao_blackwell_marginals, model, draws)
    with pytest.raises(AssertionError):
        _assert_conditionals(lambda m, d: label_marginals(d, 3), model, draws)
    if observed.any():
        import dataclasses

        def unclamped(m, d):
            return rao_blackwell_marginals(dataclasses.replace(m, observed=m.observed & False), d)

        with pytest.raises(AssertionError):
            _assert_conditionals(unclamped, model, draws)


def test_rao_blackwell_marginals_match_enumeration_with_less_spread(models, reference, exact):
    """Over the reference chains: within 4 Monte-Carlo standard errors (spread of the 64
    chains' estimates) of exact enumeration, and that spread below the frequencies'."""
    model, truth = models[(True, True)], np.asarray(exact[(True, True)].marginals)
    labels = np.asarray(reference.labels)
    per_chain_rb = np.stack([np.asarray(rao_blackwell_marginals(model, chain))
                             for chain in labels])
    per_chain_freq = np.stack([np.asarray(label_marginals(chain, 3)) for chain in labels])
    se_rb = per_chain_rb.std(0, ddof=1) / np.sqrt(N_CHAINS)
    se_freq = per_chain_freq.std(0, ddof=1) / np.sqrt(N_CHAINS)
    free = ~np.asarray(model.observed)
    z = np.abs(per_chain_rb.mean(0) - truth)[free] / se_rb[free]
    assert z.max() < 4.0, f"max z = {z.max():.2f}"
    np.testing.assert_allclose(np.asarray(rao_blackwell_marginals(model, reference)),
                               per_chain_rb.mean(0), rtol=1e-10)
    assert se_rb[free].mean() < 0.8 * se_freq[free].mean()
    np.testing.assert_array_equal(per_chain_rb[:, ~free].max(-1), 1.0)
    with pytest.raises(ValueError, match="nodes"):
        rao_blackwell_marginals(model, labels[0, :, :5])


def test_runs_of_other_lengths_share_one_compiled_program(kernels, models, reference,
                                                         lowered_programs):
    """The number of draws is an argument of the chain program (its outputs are buffers of a
    bucketed length, cut back on the host): after the module's run of N_SAMPLES draws, runs
    of other lengths in its bucket from the same kernel and model lower no new program, and
    give the reference run's first draws."""
    from graphssl.inference.mcmc.chains import _draw_capacity

    assert [_draw_capacity(n, 1) for n in (1, 16, 17, 24, 25, 33, 48, 49, 100)] == [
        16, 16, 24, 24, 32, 48, 48, 64, 128]
    assert _draw_capacity(1000, 1 << 20) == 1000  # buffers past BUCKET_MAX_BYTES: exact
    per_draw = N_CHAINS * 8  # int8 labels of 8 nodes, every chain
    lengths = (N_SAMPLES - 43, N_SAMPLES - 1)
    assert {_draw_capacity(n, per_draw) for n in (*lengths, N_SAMPLES)} == {384}
    kernel, model = kernels["chromatic"], models[(True, True)]
    for n in lengths:
        run, lowered = lowered_programs(lambda n=n: sample_chains(
            kernel, model, jax.random.key(4), n_chains=N_CHAINS, n_samples=n, burn_in=BURN_IN))
        assert not lowered, f"{n} draws lowered {lowered} programs"
        assert run.labels.shape == (N_CHAINS, n, 8) and run.energy.shape == (N_CHAINS, n)
        np.testing.assert_array_equal(run.labels, reference.labels[:, :n])
        np.testing.assert_array_equal(run.energy, reference.energy[:, :n])


def test_thinning_and_argument_errors(kernels, models):
    kernel, model = kernels["chromatic"], models[(True, True)]
    thin = sample_chains(kernel, model, jax.random.key(0), n_chains=N_CHAINS, n_samples=5,
                         burn_in=3, thin=4)
    assert thin.labels.shape == (N_CHAINS, 5, 8) and thin.n_steps == 3 + 20
    assert thin.stats == {}
    with pytest.raises(ValueError, match="n_chains"):
        sample_chains(kernel, model, jax.random.key(0), n_chains=0)
    with pytest.raises(ValueError, match="thin"):
        sample_chains(kernel, model, jax.random.key(0), thin=0)
    with pytest.raises(ValueError, match="init_labels"):
        sample_chains(kernel, model, jax.random.key(0), init_labels=np.zeros(3, int))
    for key in (0, None, "abc", jax.random.split(jax.random.key(0), 2)):
        with pytest.raises(ValueError, match="key: one PRNG key"):
            sample_chains(kernel, model, key, n_samples=2)
    with pytest.raises(ValueError, match="n_chains must be an integer >= 1, got 2.0"):
        sample_chains(kernel, model, jax.random.key(0), n_chains=2.0)
    for chunk in (0, -1, 2.5):
        with pytest.raises(ValueError, match="chunk_size must be None or an integer >= 1"):
            sample_chains(kernel, model, jax.random.key(0), n_samples=4, chunk_size=chunk)
    n, q = model.n_nodes, int(model.n_classes)
    for start in (np.full(n, q), np.full(n, -1), np.full(n, 0.5)):  # q: a NaN MAP energy
        with pytest.raises(ValueError, match=f"init_labels: must be class indices in 0..{q - 1}"):
            sample_chains(kernel, model, jax.random.key(0), init_labels=start)
    with pytest.raises(ValueError, match=f"resume: the run holds chains over 3 nodes, the "
                                         f"model has {n}"):
        sample_chains(kernel, model, jax.random.key(0), n_samples=2,
                      resume=thin._replace(chain_map_labels=thin.chain_map_labels[:, :3]))


def test_icm_reaches_single_site_minimum(models, exact):
    model = models[(True, True)]
    start = np.zeros(8, dtype=np.int32)
    for graph in (None, model.graph):
        labels, info = iterated_conditional_modes(model, start, graph=graph)
        assert bool(info.converged) and float(info.energy) <= float(info.initial_energy)
        labels = np.asarray(labels)
        observed = np.asarray(model.observed)
        assert np.all(labels[observed] == np.asarray(model.labels)[observed])
        e = float(model.energy(labels))
        for i in np.flatnonzero(~observed):
            for c in range(3):
                other = labels.copy()
                other[i] = c
                assert float(model.energy(other)) >= e - 1e-12
    labels, info = iterated_conditional_modes(model, exact[(True, True)].map_labels)
    np.testing.assert_array_equal(labels, exact[(True, True)].map_labels)
    assert int(info.iterations) == 1


SHARDED = textwrap.dedent(
    """
    import jax, numpy as np
    jax.config.update("jax_enable_x64", True)
    assert jax.local_device_count() == 4
    from tests.inference.conftest import small_model
    from graphssl.inference import chromatic_gibbs, sample_chains
    model = small_model(field=True, clamped=True, seed=0)
    kernel = chromatic_gibbs(model.graph)
    run = sample_chains(kernel, model, jax.random.key(4), n_chains={n_chains},
                        n_samples={n_samples}, burn_in={burn_in})
    assert len(run.labels.sharding.device_set) == 4, run.labels.sharding
    np.save("{out}", np.asarray(run.labels))
    """
)


def test_sharded_chains_equal_single_device(reference, tmp_path):
    """Four host devices (subprocess with XLA_FLAGS): chains are split across devices and the
    draws equal those of a single-device run."""
    out = tmp_path / "labels.npy"
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = SHARDED.format(out=out, n_chains=N_CHAINS, n_samples=N_SAMPLES, burn_in=BURN_IN)
    subprocess.run([sys.executable, "-c", code], env=env, cwd=root, check=True, timeout=300)
    np.testing.assert_array_equal(np.load(out), reference.labels)


def test_resume_refuses_a_run_of_another_model_or_kernel(kernels, models, reference):
    """A model of the same size with another beta and field joined the draws of two laws
    (its MAP energy stayed the first model's); Swendsen-Wang after a Gibbs run failed late
    with a KeyError, batched_model=True with an IndexError."""
    import dataclasses

    kernel, model = kernels["chromatic"], models[(True, True)]
    weaker = dataclasses.replace(model, beta=model.beta * 0.1, field=model.field * 0.1)
    with pytest.raises(ValueError, match="resume: the run's last draws have energies"):
        sample_chains(kernel, weaker, None, n_samples=2, resume=reference)
    with pytest.raises(ValueError, match="move statistics .* another kernel made it"):
        sample_chains(kernels["swendsen_wang"], model, None, n_samples=2, resume=reference)
    with pytest.raises(ValueError, match="batched_model: True needs one model per chain"):
        sample_chains(kernel, model, None, n_samples=2, batched_model=True, resume=reference)
    four = small_model(n=8, q=4, field=True, clamped=True, seed=0)
    with pytest.raises(ValueError, match="resume: the run has 3 classes, the model 4"):
        sample_chains(kernel, four, None, n_samples=2, resume=reference)


def test_batched_potts_models_run_one_model_per_chain():
    """Stacked PottsModels (one per chain) failed in the host-side model check with a bare
    broadcasting error (beta [chains] against tables [chains, n, q]); each chain's model is
    now checked, and each chain samples its own model's law."""
    from graphssl.inference import enumerate_model, sequential_gibbs

    models = [E.main_model(beta=beta) for beta in (0.3, 0.6)]
    stacked = jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves), *models)
    n = models[0].n_nodes
    samples = sample_chains(sequential_gibbs(), stacked, jax.random.key(0), n_chains=2,
                            n_samples=4000, burn_in=100, batched_model=True,
                            init_labels=np.zeros((2, n), int))
    energies = np.asarray(samples.energy)
    for chain, model in enumerate(models):
        exact = enumerate_model(model, fn=lambda y, model=model: model.energy(y))
        batches = energies[chain].reshape(40, 100).mean(axis=1)  # batch means
        error = batches.std(ddof=1) / np.sqrt(batches.size)
        assert abs(energies[chain].mean() - float(exact.expectation)) < 5 * error + 1e-9
    with pytest.raises(ValueError, match=r"^batched_model: True needs one model per chain"):
        sample_chains(sequential_gibbs(), stacked, jax.random.key(0), n_chains=3, n_samples=2,
                      batched_model=True, init_labels=np.zeros((3, n), int))
