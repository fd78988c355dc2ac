"""Kernel infos are NamedTuples (one class per kernel type); compose merges them into one
flat NamedTuple; drivers report them by name (``info_dict``). Shapes only (``eval_shape``):
nothing is compiled here."""

import pickle

import jax
import jax.numpy as jnp
import pytest

from graphssl.inference import (
    LabelState,
    compose,
    metropolis_hastings,
    permutation_move,
    sequential_gibbs,
    swendsen_wang,
)
from graphssl.inference.mcmc.gibbs import GibbsInfo
from graphssl.inference.mcmc.kernels import (
    MHInfo,
    info_dict,
    merge_infos,
    mh_info_type,
)
from graphssl.inference.mcmc.swendsen_wang import SwendsenWangInfo


def _keep(model, key, state):
    return LabelState(state.labels), jnp.zeros(())


def test_each_kernel_type_has_its_info_and_compose_merges_them(kernels, models):
    model = models[(True, True)]
    state = kernels["chromatic"].init(model, jax.random.key(0))

    def info_of(kernel):
        return jax.eval_shape(lambda s: kernel.step(model, jax.random.key(1), s), state)[1]

    assert type(info_of(kernels["chromatic"])) is GibbsInfo
    assert type(info_of(sequential_gibbs())) is GibbsInfo
    assert type(info_of(swendsen_wang())) is SwendsenWangInfo
    assert type(info_of(metropolis_hastings(_keep))) is MHInfo
    perm = info_of(permutation_move())
    assert type(perm) is mh_info_type("perm") and perm._fields == ("perm_accept_prob",
                                                                   "perm_accepted")
    both = info_of(compose(swendsen_wang(), permutation_move(), permutation_move()))
    assert both._fields == SwendsenWangInfo._fields + (
        "perm_accept_prob", "perm_accepted", "perm_accept_prob_2", "perm_accepted_2")
    assert both.perm_accepted.dtype == jnp.bool_
    # one class per field set: kernels built apart give the same pytree structure
    assert type(both) is type(info_of(compose(swendsen_wang(), permutation_move(),
                                              permutation_move())))
    assert list(info_dict(both)) == list(both._fields)


def test_info_dict_merge_and_pickle():
    info = mh_info_type("perm")(jnp.float32(0.5), jnp.bool_(True))
    again = pickle.loads(pickle.dumps(info))
    assert type(again) is type(info) and again == info
    merged = merge_infos([GibbsInfo(), info, {"n": 1}])  # a mapping from an older kernel
    assert merged._fields == ("perm_accept_prob", "perm_accepted", "n")
    assert info_dict(merged) == {"perm_accept_prob": 0.5, "perm_accepted": True, "n": 1}
    with pytest.raises(TypeError, match="NamedTuple"):
        merge_infos([(1.0,)])
    with pytest.raises(ValueError, match="identifier"):
        permutation_move(name="perm-1")
