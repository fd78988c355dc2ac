"""The label-site block of numpyro's ``Gibbs``: one of our kernels on a program's label field.

A numpyro program (e.g. :mod:`graphssl.models.numpyro.programs`) draws its labels from a
:class:`~graphssl.models.numpyro.fields.LabelField`. :class:`LabelFieldGibbs` is a block
kernel of :class:`numpyro.infer.Gibbs` that updates that site with one of our
:class:`~graphssl.inference.mcmc.kernels.Kernel` s (chromatic Gibbs, Swendsen–Wang,
``compose(...)``) from its exact conditional given every other site:

    p(y | rest) ∝ exp(-E(y)) prod_s p_s(value_s | y, rest) = exp(-E(y) + sum_i U[i, y_i]),

where ``U[i, c]`` (the *evidence*) is the log density of the other sites with ``y_i = c``.
It is computed by running the program once per class with ``y = c`` everywhere, so the other
sites must depend on the labels **node by node** (inside a plate over the ``n`` nodes, site
``i`` reading ``y_i`` only); :meth:`LabelFieldGibbs.init` checks this on the first state and
refuses anything else (:mod:`.numpyro_block_checks`). The label kernel then runs on the
field's model plus ``U`` (:class:`~graphssl.models.numpyro.fields.EvidenceModel`). Sites that
set the field's parameters are updated by the exchange move (:mod:`.numpyro_exchange`).
The samplers built from this block are in :mod:`.numpyro_gibbs`.
"""

from __future__ import annotations

import copy
from typing import NamedTuple

import jax
import jax.numpy as jnp
from numpyro.handlers import seed, substitute, trace
from numpyro.infer.gibbs import GIBBS_SITES_KWARG, conditioned
from numpyro.infer.mcmc import MCMCKernel

from graphssl.inference.mcmc.chains import storage_dtype
from graphssl.inference.mcmc.kernels import info_dict
from graphssl.inference.mcmc.numpyro_block_checks import (
    check_block_once,
    check_label_block,
    run_compiled,
    site_log_prob,
    static_facts,
)
from graphssl.inference.mcmc.numpyro_exchange import exchange_move
from graphssl.inference.mcmc.swendsen_wang import swendsen_wang
from graphssl.models.numpyro.fields import with_evidence

__all__ = ["LabelFieldGibbs", "LabelFieldState"]


class LabelFieldState(NamedTuple):
    """``z``: the block's site values (labels int32[n], exchange sites); ``labels``: a compact
    copy (int8/16) for ``extra_fields``; ``stats``: the kernel's info as ``{name: value}``
    (:func:`~graphssl.inference.mcmc.kernels.info_dict`) plus ``exchange_accept_prob``;
    ``rng_key``."""

    z: dict
    labels: jax.Array
    stats: dict
    rng_key: jax.Array


class LabelFieldGibbs(MCMCKernel):
    """Block kernel: ``kernel`` on the label ``site`` of ``model`` (a numpyro program), given the
    other sites; optional exchange updates of ``exchange`` sites (module docstring).

    Args:
      model: the numpyro program; its ``site`` must be a ``LabelField``.
      kernel: a ``Kernel(init, step)`` on label models (``chromatic_gibbs(graph)``,
        ``swendsen_wang()``, ``compose(...)``); ``steps`` of it per MCMC step.
      exchange: continuous sites that set the field's parameters, updated by exchange moves
        (:func:`~graphssl.inference.mcmc.numpyro_exchange.exchange_move`).
      exchange_scale: random-walk step in the unconstrained space of each exchange site.
      aux_kernel, aux_steps: the auxiliary draw of the exchange move (default 10 sweeps of
        Swendsen–Wang on the unclamped field).
    """

    sample_field = "z"

    def __init__(self, model, kernel, *, site: str = "labels", exchange=(), steps: int = 1,
                 exchange_scale: float = 0.3, aux_kernel=None, aux_steps: int = 10):
        if int(steps) < 1 or int(aux_steps) < 1:
            raise ValueError(f"steps, aux_steps: need >= 1, got {steps}, {aux_steps}")
        self._model = model
        self.kernel = kernel
        self.site = site
        self.exchange = tuple(exchange)
        self.steps = int(steps)
        self.exchange_scale = float(exchange_scale)
        self.aux_kernel = swendsen_wang() if aux_kernel is None else aux_kernel
        self.aux_steps = int(aux_steps)

    @property
    def model(self):
        """The numpyro program (as wrapped by the enclosing ``Gibbs``)."""
        return self._model

    @property
    def per_node_sites(self) -> tuple[str, ...]:
        """Sites with one value per node (kept out of the posterior by ``ProgramGibbs``)."""
        return (self.site,)

    @property
    def sites(self) -> tuple[str, ...]:
        """All sites this block owns."""
        return (self.site, *self.exchange)

    def wrap_model(self, wrapper):
        """Copy bound to ``wrapper(model)`` (numpyro's Gibbs conditions it on the siblings)."""
        kernel = copy.copy(self)
        kernel._model = wrapper(self._model)
        return kernel

    def refresh(self, state, model_args, model_kwargs):
        """Nothing is cached: the conditional is rebuilt at every step."""
        return state

    def get_constrain_fn(self, model_args, model_kwargs):
        """Values are held constrained."""
        return lambda z: z

    # ------------------------------------------------------------------ program evaluation
    def trace_program(self, values, model_args, model_kwargs):
        """The program's trace with ``values`` substituted (the siblings come through
        numpyro's conditioning keyword)."""
        program = substitute(seed(conditioned(self._model), jax.random.key(0)), data=values)
        return trace(program).get_trace(*model_args, **(model_kwargs or {}))

    def evidence(self, values, n, q, model_args, model_kwargs):
        """``U[i, c]``: the other sites' per-node log densities with ``y = c`` everywhere."""

        def per_class(c):
            tr = self.trace_program({**values, self.site: jnp.full((n,), c, jnp.int32)},
                                    model_args, model_kwargs)
            total = jnp.zeros((n,))
            for name, s in tr.items():
                if s["type"] == "sample" and name not in self.sites:
                    lp = site_log_prob(s)
                    if jnp.shape(lp) == (n,):
                        total = total + lp
            return total

        return jax.vmap(per_class)(jnp.arange(q)).T

    def conditional(self, values, model_args, model_kwargs):
        """``(EvidenceModel, trace)``: the label field's model plus the evidence ``U``."""
        tr = self.trace_program(values, model_args, model_kwargs)
        model = tr[self.site]["fn"].model
        U = self.evidence(values, model.n_nodes, model.n_classes, model_args, model_kwargs)
        return with_evidence(model, U), tr

    def check(self, values, model_args, model_kwargs):
        """The block's checks on concrete values (:mod:`.numpyro_block_checks`)."""
        check_label_block(self, values, model_args, model_kwargs)

    # ------------------------------------------------------------------ MCMCKernel
    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        """Initial values from ``init_params`` (``Gibbs`` passes them) or the prototype."""
        model_kwargs = dict(model_kwargs or {})
        siblings = model_kwargs.get(GIBBS_SITES_KWARG, {})
        if not init_params:
            def latent_sites():
                tr = self.trace_program({}, model_args, model_kwargs)
                return [k for k, s in tr.items() if s["type"] == "sample"
                        and not s["is_observed"] and k not in siblings]

            loose = sorted(set(static_facts(latent_sites)) - set(self.sites))
            if loose:
                raise ValueError(f"sites {loose} are latent but no kernel samples them; use "
                                 "label_field_gibbs(program, kernel), which adds NUTS")
            init_params = run_compiled(lambda: {
                k: s["value"] for k, s in self.trace_program({}, model_args, model_kwargs).items()
                if k in self.sites})
        values = {k: jnp.asarray(init_params[k]) for k in self.sites}
        values[self.site] = values[self.site].astype(jnp.int32)
        check_block_once(self, values, siblings, model_args, model_kwargs)
        rng_key, key = jax.random.split(rng_key)
        _, stats = jax.eval_shape(lambda: self.update(key, values, model_args, model_kwargs))
        stats = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), stats)
        q = static_facts(lambda v: self.trace_program(v, model_args, model_kwargs)[self.site]
                         ["fn"].model.n_classes, values)
        compact = values[self.site].astype(storage_dtype(q))
        return LabelFieldState(values, compact, stats, rng_key)

    def update(self, key, values, model_args, model_kwargs):
        """``(values, stats)`` after ``steps`` kernel steps on the label conditional, then one
        exchange move if ``exchange`` sites are given."""
        key_labels, key_exchange = jax.random.split(key)
        model, _ = self.conditional(values, model_args, model_kwargs)
        state = self.kernel.init(model, key_labels, values[self.site])
        for t in range(self.steps):
            state, info = self.kernel.step(model, jax.random.fold_in(key_labels, t), state)
        values = {**values, self.site: state.labels.astype(jnp.int32)}
        stats = {k: jnp.asarray(v) for k, v in info_dict(info).items()}
        if self.exchange:
            values, accept = exchange_move(self, key_exchange, values, model_args, model_kwargs)
            stats["exchange_accept_prob"] = accept
        return values, stats

    def sample(self, state, model_args, model_kwargs):
        """One label update (``steps`` kernel steps), then one exchange move if asked."""
        rng_key, key = jax.random.split(state.rng_key)
        values, stats = self.update(key, state.z, model_args, model_kwargs)
        return LabelFieldState(values, values[self.site].astype(state.labels.dtype), stats,
                               rng_key)
