"""Every generic kernel and composed move draws exactly the model's law: node marginals,
energy mean and pairwise co-assignment against exact enumeration, |z| < 5 with Monte-Carlo
standard errors from 64 independent chains (``exactness.py``), on a 9-node model with a
field and clamped nodes, on an asymmetric (row-normalised) input, and on a subclass that
overrides ``pairwise_tables``."""

import dataclasses
import warnings

import jax
import numpy as np
import pytest

from graphssl.inference import (
    chromatic_gibbs,
    compose,
    permutation_move,
    sample_chains,
    sequential_gibbs,
    swendsen_wang,
)
from graphssl.inference.mcmc.tempering import coupling_ladder, replica_exchange
from graphssl.models.potts import POTTS_DATA_FIELDS, PottsModel

from . import exactness as E
from . import mutants


@pytest.fixture(scope="module")
def main():
    model = E.main_model()
    return model, E.exact_statistics(model)


KERNELS = {
    "sequential": lambda g: sequential_gibbs(),
    "chromatic_bucketed": lambda g: chromatic_gibbs(g, layout="bucketed"),
    "chromatic_padded": lambda g: chromatic_gibbs(g, layout="padded"),
    "chromatic_stacked": lambda g: chromatic_gibbs(g, layout="stacked"),
    "swendsen_wang": lambda g: swendsen_wang(),
    "swendsen_wang_graph": lambda g: swendsen_wang(g),
    "chromatic+perm": lambda g: compose(chromatic_gibbs(g), permutation_move()),
    "sw+perm_barker": lambda g: compose(swendsen_wang(g), permutation_move(rule="barker")),
    "mh_asymmetric_proposal": lambda g: mutants.shift_move(with_ratio=True),
    "replica_exchange_sw": lambda g: replica_exchange(swendsen_wang(g), coupling_ladder(0.2, 4)),
    "replica_exchange_gibbs+perm": lambda g: compose(
        replica_exchange(sequential_gibbs(), [0.0, 0.5, 1.0]), permutation_move()),
}


@pytest.mark.parametrize("name", list(KERNELS))
def test_kernel_is_exact(main, name):
    model, exact = main
    thin = 4 if name == "mh_asymmetric_proposal" else 1
    E.assert_exact(KERNELS[name](model.graph), model, exact, seed=3, thin=thin)


@pytest.fixture(scope="module")
def asymmetric():
    model = E.asymmetric_model()
    return model, E.exact_statistics(model)


def test_asymmetric_weights_are_symmetrised_with_a_warning():
    from graphssl.graph import row_normalize

    graph = row_normalize(E.ring_graph())
    assert not graph.is_symmetric()
    with pytest.warns(UserWarning, match="graphssl.graph.symmetrize"):
        model = PottsModel.create(graph, 3)
    assert model.graph.is_symmetric()
    W = graph.to_scipy().toarray()
    np.testing.assert_allclose(model.graph.to_scipy().toarray(), (W + W.T) / 2, rtol=1e-12)
    # the energy is the one the old energy evaluated on the directed W: pairs (W_ij + W_ji)/2
    y = np.array([0, 1, 1, 2, 0, 0, 1, 2, 2])
    same = y[:, None] == y[None, :]
    np.testing.assert_allclose(float(model.energy(y)), -0.5 * np.sum(W * same), rtol=1e-12)
    with pytest.raises(ValueError, match="symmetrize"):
        PottsModel.create(graph, 3, asymmetric="raise")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        PottsModel.create(graph, 3, asymmetric="symmetrize")  # explicit: no warning


@pytest.mark.parametrize("name", ["sequential", "chromatic_bucketed", "swendsen_wang"])
def test_asymmetric_input_is_sampled_exactly(asymmetric, name):
    model, exact = asymmetric
    E.assert_exact(KERNELS[name](model.graph), model, exact, seed=4)


@dataclasses.dataclass(frozen=True)
class TiltedPotts(PottsModel):
    """A subclass that changes the law through ``pairwise_tables`` alone: couplings of node
    0's row and column tripled, a field pulling towards class 3."""

    def pairwise_tables(self):
        t = super().pairwise_tables()
        index = t.neighbor_index
        touches0 = (index == 0) | (np.arange(index.shape[0])[:, None] == 0)
        tilt = np.zeros(t.unary.shape)
        tilt[:, 3] = 0.5
        # no cached bond_slots: Swendsen-Wang reads the whole padded table (masked path)
        return t._replace(coupling=t.coupling * (1 + 2 * touches0), unary=t.unary + tilt,
                          bond_slots=None)


jax.tree_util.register_dataclass(TiltedPotts, data_fields=list(POTTS_DATA_FIELDS),
                                 meta_fields=["n_classes"])


class LopsidedPotts(TiltedPotts):
    """A subclass whose tables are asymmetric (only row 0 is scaled): refused."""

    def pairwise_tables(self):
        t = PottsModel.pairwise_tables(self)
        scale = np.ones(t.coupling.shape)
        scale[0] = 3.0
        return t._replace(coupling=t.coupling * scale)


jax.tree_util.register_dataclass(LopsidedPotts, data_fields=list(POTTS_DATA_FIELDS),
                                 meta_fields=["n_classes"])


def _as(cls, model):
    return cls(**{f.name: getattr(model, f.name) for f in dataclasses.fields(PottsModel)})


@pytest.fixture(scope="module")
def tilted(main):
    model = _as(TiltedPotts, main[0])
    exact = E.exact_statistics(model)
    assert abs(exact["energy"] - main[1]["energy"]) > 1.0  # the override changes the law
    return model, exact


@pytest.mark.parametrize("name", ["sequential", "chromatic_bucketed", "swendsen_wang"])
def test_subclass_overriding_tables_is_sampled_exactly(tilted, name):
    model, exact = tilted
    E.assert_exact(KERNELS[name](model.graph), model, exact, seed=5)


@pytest.mark.parametrize("name", ["sequential", "chromatic_bucketed", "chromatic_padded",
                                  "swendsen_wang", "swendsen_wang_graph"])
def test_asymmetric_tables_are_refused(main, name):
    model = _as(LopsidedPotts, main[0])
    kernel = KERNELS[name](model.graph)
    with pytest.raises(ValueError, match="not symmetric"):
        sample_chains(kernel, model, jax.random.key(0), n_chains=2, n_samples=2)
    with pytest.raises(ValueError, match="not symmetric"):
        kernel.init(model, jax.random.key(0))


def test_permutation_move_draws_non_identity_permutations_while_clamped(main):
    """q = 4 with clamped labels only in classes {0, 1}: classes 2 and 3 may swap. The move
    must propose and accept that swap (labels change, clamped nodes stay)."""
    model, _ = main
    kernel = permutation_move()
    observed = np.asarray(model.observed)
    assert set(np.asarray(model.labels)[observed].tolist()) == {0, 1}
    labels = np.array([2, 0, 3, 3, 2, 1, 2, 3, 0])
    state = kernel.init(model, jax.random.key(0), labels)
    step = jax.jit(kernel.step)
    changed = 0
    for key in jax.random.split(jax.random.key(1), 40):
        new, info = step(model, key, state)
        new_labels = np.asarray(new.labels)
        assert np.all(new_labels[observed] == labels[observed])
        if not np.array_equal(new_labels, labels):
            changed += 1
            np.testing.assert_array_equal(new_labels, np.array([3, 0, 2, 2, 3, 1, 3, 2, 0]))
    assert 5 <= changed <= 35  # half the proposals are the swap, accepted with min(1, r) < 1


def test_symmetry_check_is_sharp():
    """The host check catches one perturbed slot (1e-4 relative) and passes the exact
    tables, float64 and float32; padding with a coupling is refused too."""
    from graphssl.models.protocol import check_pairwise_tables

    model = E.main_model()
    check_pairwise_tables(model)
    for dtype in (np.float64, np.float32):
        w = np.asarray(model.neighbor_weight).astype(dtype)
        check_pairwise_tables(dataclasses.replace(model, neighbor_weight=w))
        w[3, 1] *= 1 + 1e-4
        with pytest.raises(ValueError, match="not symmetric"):
            check_pairwise_tables(dataclasses.replace(model, neighbor_weight=w))
    index = np.asarray(model.neighbor_index)
    row, slot = np.argwhere(index == np.arange(index.shape[0])[:, None])[0]
    w = np.asarray(model.neighbor_weight).copy()
    w[row, slot] = 0.5
    with pytest.raises(ValueError, match="padding"):
        check_pairwise_tables(dataclasses.replace(model, neighbor_weight=w))
    with pytest.raises(ValueError, match="bond_slots"):
        check_pairwise_tables(dataclasses.replace(model, bond_slots=model.bond_slots[1:]))
