"""Permutation move (Zhu & Ghahramani Sec. 3.3) and the generic MH mechanism."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np

from graphssl.inference import LabelState, metropolis_hastings, sample_chains
from graphssl.inference.mcmc.moves import permutation_move, random_class_permutation

from .conftest import BURN_IN, N_CHAINS, N_SAMPLES, VARIANTS, assert_matches_exact


def test_random_permutation_uniform_and_fixes_clamped_classes():
    movable = jnp.asarray([True, False, True, True])
    keys = jax.random.split(jax.random.key(3), 12000)
    perms = np.asarray(jax.vmap(lambda k: random_class_permutation(k, movable))(keys))
    assert np.all(perms[:, 1] == 1)
    assert np.all(np.sort(perms, axis=1) == np.arange(4))
    counts = {p: 0 for p in itertools.permutations([0, 2, 3])}
    for row in perms:
        counts[tuple(row[[0, 2, 3]])] += 1
    freq = np.array(list(counts.values())) / len(perms)
    assert np.all(np.abs(freq - 1 / 6) < 4 * np.sqrt((1 / 6) * (5 / 6) / len(perms)))


def test_compositions_match_enumeration(kernels, models, exact):
    for name in ("chromatic+perm", "sw+perm_barker"):
        for variant in VARIANTS:
            samples = sample_chains(kernels[name], models[variant], jax.random.key(7),
                                    n_chains=N_CHAINS, n_samples=N_SAMPLES, burn_in=BURN_IN)
            assert_matches_exact(samples, exact[variant])
            prob = np.asarray(samples.stats["perm_accept_prob"])
            if variant == (False, False):
                # field-free Potts energy is permutation invariant: MH always accepts,
                # Barker (the paper's rule) only half of the time
                expected = 1.0 if name == "chromatic+perm" else 0.5
                np.testing.assert_allclose(prob, expected, atol=1e-12)


def test_permutation_alone_never_leaves_support(models):
    model = models[(True, True)]
    kernel = permutation_move()
    state = kernel.init(model, jax.random.key(0))
    obs = np.asarray(model.observed)
    step = jax.jit(kernel.step)
    for k in jax.random.split(jax.random.key(1), 20):
        state, info = step(model, k, state)
        assert np.all(np.asarray(state.labels)[obs] == np.asarray(model.labels)[obs])
        assert 0.0 <= float(info.perm_accept_prob) <= 1.0


def test_generic_metropolis_hastings_single_site(models, exact):
    """A user move: flip one random unclamped node to a random label (symmetric proposal)."""

    def propose(model, key, state):
        k1, k2 = jax.random.split(key)
        node = jax.random.randint(k1, (), 0, model.n_nodes)
        label = jax.random.randint(k2, (), 0, model.n_classes, dtype=jnp.int32)
        new = state.labels.at[node].set(jnp.where(model.observed[node], state.labels[node], label))
        return LabelState(new), 0.0

    kernel = metropolis_hastings(propose, name="flip")
    variant = (True, True)
    samples = sample_chains(kernel, models[variant], jax.random.key(9), n_chains=N_CHAINS,
                            n_samples=N_SAMPLES, burn_in=BURN_IN, thin=8)
    assert_matches_exact(samples, exact[variant])
    assert 0.0 < float(np.mean(samples.stats["flip_accepted"])) < 1.0
