"""numpyro ``MCMCKernel`` over our kernels, so ``numpyro.infer.MCMC`` drives them.

``MCMC(NumpyroKernel(kernel, model), num_warmup=..., num_samples=..., num_chains=...,
chain_method="vectorized")`` gives numpyro's progress bar, chain methods, thinning,
``get_samples()["labels"]`` (``[draws, n]``, compact int8/int16) and ``print_summary()``.
The energy and the kernel's move statistics come back through
``mcmc.run(key, extra_fields=("energy", "stats"))`` / ``mcmc.get_extra_fields()``.

As in :func:`graphssl.inference.sample_chains`, step ``t`` of a chain uses the key
``fold_in(chain_key, t)``. numpyro facts this relies on (see DESIGN.md): with
``chain_method="vectorized"`` ``init`` receives a batch of keys and ``sample`` a batched
state (we vmap ourselves, branching on ``numpyro.util.is_prng_key`` as numpyro's HMC does);
``az.from_numpyro`` reads ``mcmc.sampler.model``, so ``model`` is an attribute (``None``: our
label model is ``label_model``). The model may also be passed at run time,
``mcmc.run(key, model)``, which lets numpyro's ``jit_model_args`` reuse one compile.

Two things keep the adapter's per-step cost at that of
:func:`~graphssl.inference.mcmc.chains.sample_chains` (``benchmarks/bench_numpyro_overhead.py``):
the kernel's ``prepare`` (e.g. chromatic Gibbs' bucket layout) is done once in ``init`` and
the prepared model carried in the state (``step_model``, one copy shared by all chains), not
redone every step; with ``chain_method="vectorized"`` the chains are vmapped. Measured
(``bench_numpyro_overhead.py``, chromatic Gibbs, N = 1e4, q = 10, 4 chains, 2-core CPU,
load ~7): per sweep 1.78 ms against ``sample_chains``' 1.87 ms (0.95x); without the
one-time ``prepare`` 2.80 ms (1.50x); mapping the chains one after another inside each step
(``chain_map="sequential"``, ``lax.map``) 3.35 ms (1.79x): unlike ``sample_chains``, which
maps whole runs, numpyro's loop would slice every chain's state at every step. On an H100
(elapsed time, 4 chains, median of 3 interleaved repeats) numpyro / ``sample_chains`` per
sweep: chromatic Gibbs 0.50 (N = 1e4) and 0.85 (N = 1e5), Swendsen–Wang 0.91 and 0.98, the
composed move 0.79 (N = 1e4) (``bench_numpyro_overhead_gpu*.json``).

Programs (numpyro models with label fields) are driven by
:mod:`graphssl.inference.mcmc.numpyro_gibbs` instead; this adapter runs a bare label model.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from numpyro.infer.mcmc import MCMCKernel
from numpyro.util import is_prng_key

from graphssl.inference.mcmc.chains import storage_dtype
from graphssl.inference.mcmc.kernels import info_dict, prepared

__all__ = ["NumpyroKernel", "NumpyroState"]


class NumpyroState(NamedTuple):
    """``i``: steps done; ``z``: ``{"labels": int8/16[n]}`` (the sample field);
    ``energy``; ``stats``: the kernel's info as ``{name: value}``
    (:func:`~graphssl.inference.mcmc.kernels.info_dict`, as ``Samples.stats``);
    ``kernel_state``; ``rng_key``: the chain key; ``step_model``: the model as prepared by
    the kernel's ``prepare`` (once, in ``init``)."""

    i: jax.Array
    z: dict
    energy: jax.Array
    stats: dict
    kernel_state: Any
    rng_key: jax.Array
    step_model: Any


class NumpyroKernel(MCMCKernel):
    """Wrap ``kernel`` (a ``Kernel(init, step)``) and a label ``model`` for numpyro's MCMC.

    ``init_params`` (numpyro's argument) may be ``{"labels": int[n]}`` or ``int[n]``
    (``[chains, n]`` when vectorized). ``chain_map``: how vectorized chains are mapped,
    ``"vmap"`` (default) or ``"sequential"`` (``lax.map`` inside each step: slower, see the
    module docstring); the draws are the same.
    """

    sample_field = "z"

    def __init__(self, kernel, model=None, *, chain_map: str = "vmap"):
        if chain_map not in ("vmap", "sequential"):
            raise ValueError(f"chain_map: use 'vmap' or 'sequential', got {chain_map!r}")
        self.chain_map = chain_map
        self.kernel = kernel
        self.label_model = model
        self.model = None  # read by az.from_numpyro; we are not a numpyro model
        self._init_single = jax.jit(self._init_one)
        self._init_batched = jax.jit(jax.vmap(self._init_one, in_axes=(None, 0, None)))
        self._init_batched_labels = jax.jit(jax.vmap(self._init_one, in_axes=(None, 0, 0)))
        self._prepare = jax.jit(lambda model: prepared(kernel, model))

    def _model(self, model_args):
        model = model_args[0] if model_args else self.label_model
        if model is None:
            raise ValueError("no label model: pass NumpyroKernel(kernel, model) or run(key, model)")
        return model

    @property
    def default_fields(self):
        return ("z",)

    def _init_one(self, model, rng_key, labels):
        init_key, chain_key = jax.random.split(rng_key)
        state = self.kernel.init(model, init_key, labels)
        _, info = jax.eval_shape(lambda s: self.kernel.step(model, chain_key, s), state)
        stats = {k: jnp.zeros(s.shape, s.dtype) for k, s in info_dict(info).items()}
        dtype = storage_dtype(model.n_classes)
        return NumpyroState(
            i=jnp.int32(0),
            z={"labels": state.labels.astype(dtype)},
            energy=model.energy(state.labels),
            stats=stats,
            kernel_state=state,
            rng_key=chain_key,
            step_model=None,
        )

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        model = self._model(model_args)
        check = getattr(self.kernel, "check", None)
        if check is not None and not any(isinstance(x, jax.core.Tracer)
                                         for x in jax.tree_util.tree_leaves(model)):
            check(model)
        labels = init_params.get("labels") if isinstance(init_params, dict) else init_params
        if is_prng_key(rng_key):
            state = self._init_single(model, rng_key, labels)
        elif labels is None or jnp.ndim(labels) == 1:
            state = self._init_batched(model, rng_key, labels)
        else:
            state = self._init_batched_labels(model, rng_key, labels)
        # one prepared model shared by all chains (not batched: no per-chain copies)
        return state._replace(step_model=self._prepare(model))

    def _sample_one(self, model, step_model, state):
        key = jax.random.fold_in(state.rng_key, state.i)
        kernel_state, info = self.kernel.step(step_model, key, state.kernel_state)
        labels = kernel_state.labels
        return NumpyroState(
            i=state.i + 1,
            z={"labels": labels.astype(state.z["labels"].dtype)},
            energy=model.energy(labels),
            stats=info_dict(info),
            kernel_state=kernel_state,
            rng_key=state.rng_key,
            step_model=None,
        )

    def sample(self, state, model_args, model_kwargs):
        model = self._model(model_args)
        step_model, chains = state.step_model, state._replace(step_model=None)
        if jnp.ndim(state.i) == 0:
            new = self._sample_one(model, step_model, chains)
        elif self.chain_map == "sequential":
            new = jax.lax.map(lambda s: self._sample_one(model, step_model, s), chains)
        else:
            new = jax.vmap(self._sample_one, in_axes=(None, None, 0))(model, step_model, chains)
        return new._replace(step_model=step_model)

    def postprocess_fn(self, model_args, model_kwargs):
        return lambda z: z

    def get_diagnostics_str(self, state):
        return f"energy {float(jnp.mean(state.energy)):.4g}"
