"""Inference: samplers and optimisers that know a model only through its protocol."""

from graphssl.inference.exact.enumeration import (
    ExactResult,
    enumerate_configurations,
    enumerate_model,
    exact_expectation,
    exact_log_partition,
    exact_map,
    exact_marginals,
)
from graphssl.inference.mcmc.chains import (
    Samples,
    label_marginals,
    rao_blackwell_marginals,
    sample_chains,
    storage_dtype,
)
from graphssl.inference.mcmc.gibbs import chromatic_gibbs, greedy_coloring, sequential_gibbs
from graphssl.inference.mcmc.kernels import (
    Kernel,
    LabelState,
    compose,
    metropolis_hastings,
    sample_categorical,
)
from graphssl.inference.mcmc.moves import permutation_move
from graphssl.inference.mcmc.swendsen_wang import connected_components, swendsen_wang
from graphssl.inference.mcmc.tempering import coupling_ladder, replica_exchange
from graphssl.inference.optimize.icm import ICMInfo, iterated_conditional_modes

__all__ = [
    "ExactResult",
    "ICMInfo",
    "NumpyroKernel",
    "Kernel",
    "LabelState",
    "Samples",
    "chromatic_gibbs",
    "compose",
    "connected_components",
    "coupling_ladder",
    "enumerate_configurations",
    "enumerate_model",
    "exact_expectation",
    "exact_log_partition",
    "exact_map",
    "exact_marginals",
    "greedy_coloring",
    "iterated_conditional_modes",
    "label_marginals",
    "rao_blackwell_marginals",
    "metropolis_hastings",
    "permutation_move",
    "replica_exchange",
    "sample_categorical",
    "sample_chains",
    "sequential_gibbs",
    "storage_dtype",
    "swendsen_wang",
]


def __getattr__(name):
    """``NumpyroKernel`` is imported lazily (numpyro's import is slow)."""
    if name == "NumpyroKernel":
        from graphssl.inference.mcmc.numpyro_adapter import NumpyroKernel

        return NumpyroKernel
    raise AttributeError(f"module 'graphssl.inference' has no attribute {name!r}")
