"""Replica exchange over coupling scales: the ladder, the checks, the state's contract and
the exchange rule. Exactness against enumeration (and the faulty copies it rejects) is in
``test_exactness.py`` / ``test_mutations.py``."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from graphssl.inference import coupling_ladder, replica_exchange, sample_chains, swendsen_wang
from graphssl.inference.mcmc.tempering import CouplingScaled, exchange
from graphssl.models.protocol import pair_agreement, pairwise_energy, pairwise_tables

from . import exactness as E


def test_coupling_ladder_is_even_in_log_scale():
    s = coupling_ladder(np.exp(-1.5), 4)
    np.testing.assert_allclose(np.log(s), [-1.5, -1.0, -0.5, 0.0])
    with pytest.raises(ValueError, match="weakest"):
        coupling_ladder(0.0, 4)
    with pytest.raises(ValueError, match="n_replicas"):
        coupling_ladder(0.5, 1)
    with pytest.raises(ValueError, match="n_replicas"):
        coupling_ladder(0.5, 2.5)  # was 2 copies, silently
    with pytest.raises(ValueError, match="weakest"):
        coupling_ladder(1.0, 4)  # was [1, 1, 1, 1], which replica_exchange refuses


@pytest.mark.parametrize("scales", [[0.5], [0.2, 0.5], [0.5, 0.2, 1.0], [-0.1, 1.0],
                                    [np.nan, 1.0], [0.0, np.nan, 1.0],
                                    [0.5, 1.000009]])  # np.isclose took it: not the model
def test_scales_are_checked(scales):
    with pytest.raises(ValueError, match="scales"):
        replica_exchange(swendsen_wang(), scales)


def test_scaled_copy_tempers_the_couplings_only():
    model = E.main_model()
    copy = CouplingScaled(model, 0.3)
    t, c = pairwise_tables(model), pairwise_tables(copy)
    np.testing.assert_allclose(c.coupling, 0.3 * t.coupling)
    np.testing.assert_array_equal(c.unary, t.unary)
    y = jnp.asarray(np.random.default_rng(0).integers(4, size=9)).at[1].set(0).at[5].set(1)
    # E_s(y) = -(s A(y) + H(y))
    h = float(pair_agreement(t, y) + pairwise_energy(model, y))  # = -H(y)
    assert float(copy.energy(y)) == pytest.approx(-0.3 * float(pair_agreement(t, y)) + h)


def test_exchange_swaps_neighbours_of_the_given_parity_by_the_coupling_statistic():
    model = E.main_model()
    t = pairwise_tables(model)
    rng = np.random.default_rng(1)
    ladder = jnp.asarray(rng.integers(4, size=(4, 9)))
    scales = jnp.asarray([0.0, 0.3, 0.7, 1.0])
    for parity in (0, 1):
        new, accepted, proposed = exchange(model, jax.random.key(0), ladder, scales, parity)
        assert int(proposed) == (2 if parity == 0 else 1)
        a = np.asarray(jax.vmap(lambda y: pair_agreement(t, y))(ladder))
        for r in range(parity, 3, 2):
            log_ratio = (scales[r + 1] - scales[r]) * (a[r] - a[r + 1])
            swapped = np.array_equal(new[r], ladder[r + 1])
            if log_ratio >= 0:  # always accepted
                assert swapped
            if swapped:
                np.testing.assert_array_equal(new[r + 1], ladder[r])
        paired = {i for r in range(parity, 3, 2) for i in (r, r + 1)}
        for r in set(range(4)) - paired:  # copies outside the proposed pairs stay
            np.testing.assert_array_equal(new[r], ladder[r])


def test_state_labels_are_the_models_own_chain():
    model = E.main_model()
    kernel = replica_exchange(swendsen_wang(), [0.0, 0.5, 1.0])
    samples = sample_chains(kernel, model, jax.random.key(0), n_chains=2, n_samples=5,
                            burn_in=2)
    state = samples.final_state
    np.testing.assert_array_equal(state.labels, state.ladder[:, -1])
    assert state.ladder.shape == (2, 3, 9)
    # every copy keeps the clamped nodes
    assert np.all(np.asarray(state.ladder)[..., 1] == 0)
    assert np.all(np.asarray(state.ladder)[..., 5] == 1)
    rate = samples.stats["swaps_accepted"].sum() / samples.stats["swaps_proposed"].sum()
    assert 0.0 < float(rate) <= 1.0
