"""The library's discrete moves as numpyro samplers over a program's label site.

A numpyro program (e.g. :mod:`graphssl.models.numpyro.programs`) draws its labels from a
:class:`~graphssl.models.numpyro.fields.LabelField`. This module builds the samplers:

* :func:`label_field_gibbs`: a :class:`ProgramGibbs` (numpyro's ``Gibbs``) of the label
  block :class:`~graphssl.inference.mcmc.numpyro_label_block.LabelFieldGibbs` (one of our
  kernels — chromatic Gibbs, Swendsen–Wang, ``compose(...)`` — on the exact conditional of
  the labels given every other site) plus NUTS on the remaining continuous sites;
* :class:`~graphssl.inference.mcmc.numpyro_mixture_block.MixtureFieldGibbs`: the block of
  Walder's diffusion mixture (labels and centres moved jointly by the mixture kernel);
* :func:`label_gibbs_fn`: the same label update as a ``gibbs_fn`` for
  ``numpyro.infer.HMCGibbs``.

The rules the label block enforces (:mod:`.numpyro_block_checks`): the other sites depend on
the labels node by node, and a continuous site that sets the field's parameters (hence its
normaliser ``Z``) is refused with a ``ValueError`` unless it is given to ``exchange=``: it is
then updated by the exchange algorithm of Murray, Ghahramani & MacKay (2006) with
Swendsen–Wang auxiliary draws (:mod:`.numpyro_exchange`).

:class:`ProgramGibbs`' ``postprocess_fn`` keeps per-node sites out of ``mcmc.get_samples()``
(so ``az.from_numpyro`` gives continuous sites and the program's deterministic statistics
only). The per-node labels stay available as ``extra_fields=("block_states.0.labels",)``
(ArviZ puts them in ``sample_stats``). Numpyro's Gibbs composite takes one key per chain: use
``chain_method="sequential"`` or ``jax.vmap``; the checks of ``init`` run only where its
values are concrete (not under ``jax.vmap``: there, on a prototype at compile time).

``LabelFieldGibbs``, ``LabelFieldState`` and ``MixtureFieldGibbs`` are importable from here.
"""

from __future__ import annotations

import jax.numpy as jnp
from numpyro.infer import NUTS, Gibbs
from numpyro.infer.gibbs import GIBBS_SITES_KWARG

from graphssl.inference.mcmc.numpyro_label_block import LabelFieldGibbs, LabelFieldState
from graphssl.inference.mcmc.numpyro_mixture_block import MixtureFieldGibbs

__all__ = ["LabelFieldGibbs", "LabelFieldState", "MixtureFieldGibbs", "ProgramGibbs",
           "label_field_gibbs", "label_gibbs_fn"]


class ProgramGibbs(Gibbs):
    """``numpyro.infer.Gibbs`` whose posterior samples leave out the per-node sites of its
    label blocks (they stay in the blocks' states: ``extra_fields=("block_states.0.labels",)``),
    so ``az.from_numpyro(mcmc)`` holds continuous sites and deterministic statistics only."""

    def postprocess_fn(self, model_args, model_kwargs):
        """Gibbs' constrain-and-replay, minus the per-node sites."""
        fn = super().postprocess_fn(model_args, model_kwargs)
        drop = {s for kernel in self._kernels for s in getattr(kernel, "per_node_sites", ())}
        return lambda z: {k: v for k, v in fn(z).items() if k not in drop}


def label_field_gibbs(model, kernel, *, site: str = "labels", exchange=(),
                      continuous: bool = True, nuts_kwargs=None, **block_kwargs) -> ProgramGibbs:
    """The sampler of a program with a label field: :class:`LabelFieldGibbs` on ``site`` (and
    ``exchange`` sites) + NUTS on every other latent site (``continuous=False`` when there are
    none), as a :class:`ProgramGibbs`. ``nuts_kwargs`` go to ``numpyro.infer.NUTS``;
    ``block_kwargs`` to :class:`LabelFieldGibbs`."""
    block = LabelFieldGibbs(model, kernel, site=site, exchange=exchange, **block_kwargs)
    blocks = [(block, list(block.sites))]
    if continuous:
        blocks.append((NUTS(model, **(nuts_kwargs or {})), None))
    return ProgramGibbs(blocks)


def label_gibbs_fn(model, kernel, model_args=(), model_kwargs=None, *, site: str = "labels",
                   steps: int = 1):
    """A ``gibbs_fn`` for ``numpyro.infer.HMCGibbs(NUTS(model), gibbs_fn, gibbs_sites=[site])``:
    ``steps`` of ``kernel`` on the label conditional given ``hmc_sites`` (the same update as
    :class:`LabelFieldGibbs`, without its checks; no exchange moves: HMCGibbs gives NUTS every
    other site, so no site may set the field's parameters). ``model_args`` / ``model_kwargs``
    are the program's arguments (HMCGibbs does not pass them to ``gibbs_fn``)."""
    block = LabelFieldGibbs(model, kernel, site=site, steps=steps)
    model_kwargs = dict(model_kwargs or {})

    def gibbs_fn(rng_key, gibbs_sites, hmc_sites):
        kwargs = {**model_kwargs, GIBBS_SITES_KWARG: dict(hmc_sites)}
        values = {site: jnp.asarray(gibbs_sites[site], jnp.int32)}
        new, _ = block.update(rng_key, values, model_args, kwargs)
        return {site: new[site]}

    return gibbs_fn
