"""The library's discrete moves as numpyro Gibbs blocks over a program's label site.

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
refuses anything else. The label kernel then runs on the field's model plus ``U``
(:class:`~graphssl.models.numpyro.fields.EvidenceModel`).

The rule on normalisers. The field's density is known only up to ``Z(theta)`` (beta, the
couplings, its unary field). A continuous site that enters ``theta`` and is sampled by NUTS
from the program's density would target ``p(theta) exp(-E_theta(y))`` instead of
``p(theta) exp(-E_theta(y)) / Z(theta)``: wrong. :meth:`LabelFieldGibbs.init` therefore
refuses (``ValueError``) a field whose parameters depend on a site owned by another block,
unless that site is given to ``exchange=``: then it is updated inside this block by the
exchange algorithm (Murray, Ghahramani & MacKay 2006): a Gaussian random walk in the site's
unconstrained space proposes ``theta'``, an auxiliary labeling ``w ~ p(w | theta')`` of the
*unclamped* field is drawn, and ``theta'`` is accepted with probability

    min(1, [p~(theta', y, rest) / p~(theta, y, rest)] [exp(-E_theta(w)) / exp(-E_theta'(w))])

(``p~``: the program's unnormalised joint, Jacobians included), which is exact when ``w`` is
an exact draw: ``Z(theta)/Z(theta')`` cancels. Here ``w`` is ``aux_steps`` steps of
``aux_kernel`` (default Swendsen–Wang) started from the current labels: an approximate
exchange step whose bias vanishes as ``aux_steps`` grows (tests compare with enumeration).

:func:`label_field_gibbs` builds the whole sampler: this block (plus NUTS on the remaining
continuous sites) inside :class:`ProgramGibbs`, a :class:`numpyro.infer.Gibbs` whose
``postprocess_fn`` keeps per-node sites out of ``mcmc.get_samples()`` (so ``az.from_numpyro``
gives continuous sites and the program's deterministic statistics only). The per-node labels
stay available as ``extra_fields=("block_states.0.labels",)`` (ArviZ puts them in
``sample_stats``). :func:`label_gibbs_fn` gives the same update as a ``gibbs_fn`` for
``numpyro.infer.HMCGibbs``. Numpyro's Gibbs composite takes one key per chain: use
``chain_method="sequential"`` or ``jax.vmap``; the checks of ``init`` run only where its
values are concrete (not under ``jax.vmap``).
"""

from __future__ import annotations

import copy
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.distributions.transforms import biject_to
from numpyro.handlers import seed, substitute, trace
from numpyro.infer import NUTS, Gibbs
from numpyro.infer.gibbs import GIBBS_SITES_KWARG, conditioned, prototype_trace
from numpyro.infer.mcmc import MCMCKernel
from numpyro.infer.util import log_density

from graphssl.inference.mcmc.chains import storage_dtype
from graphssl.inference.mcmc.kernels import info_dict
from graphssl.inference.mcmc.swendsen_wang import swendsen_wang
from graphssl.models.numpyro.fields import LabelField, with_evidence

__all__ = ["LabelFieldGibbs", "LabelFieldState", "MixtureFieldGibbs", "ProgramGibbs",
           "label_field_gibbs", "label_gibbs_fn"]


class LabelFieldState(NamedTuple):
    """``z``: the block's site values (labels int32[n], exchange sites); ``labels``: a compact
    copy (int8/16) for ``extra_fields``; ``stats``: the kernel's info plus
    ``exchange_accept_prob``; ``rng_key``."""

    z: dict
    labels: jax.Array
    stats: dict
    rng_key: jax.Array


def _is_concrete(tree) -> bool:
    return not any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(tree))


def _site_log_prob(site):
    lp = site["fn"].log_prob(site["value"])
    if site.get("mask") is not None:
        lp = jnp.where(site["mask"], lp, 0.0)
    if site.get("scale") is not None:
        lp = lp * site["scale"]
    return lp


class LabelFieldGibbs(MCMCKernel):
    """Block kernel: ``kernel`` on the label ``site`` of ``model`` (a numpyro program), given the
    other sites; optional exchange updates of ``exchange`` sites (module docstring).

    Args:
      model: the numpyro program; its ``site`` must be a ``LabelField``.
      kernel: a ``Kernel(init, step)`` on label models (``chromatic_gibbs(graph)``,
        ``swendsen_wang()``, ``compose(...)``); ``steps`` of it per MCMC step.
      exchange: continuous sites that set the field's parameters, updated by exchange moves.
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
    def _trace(self, values, model_args, model_kwargs):
        program = substitute(seed(conditioned(self._model), jax.random.key(0)), data=values)
        return trace(program).get_trace(*model_args, **(model_kwargs or {}))

    def _evidence(self, values, n, q, model_args, model_kwargs):
        """``U[i, c]``: the other sites' per-node log densities with ``y = c`` everywhere."""

        def per_class(c):
            tr = self._trace({**values, self.site: jnp.full((n,), c, jnp.int32)}, model_args,
                             model_kwargs)
            total = jnp.zeros((n,))
            for name, s in tr.items():
                if s["type"] == "sample" and name not in self.sites:
                    lp = _site_log_prob(s)
                    if jnp.shape(lp) == (n,):
                        total = total + lp
            return total

        return jax.vmap(per_class)(jnp.arange(q)).T

    def _conditional(self, values, model_args, model_kwargs):
        tr = self._trace(values, model_args, model_kwargs)
        field = tr[self.site]["fn"]
        model = field.model
        U = self._evidence(values, model.n_nodes, model.n_classes, model_args, model_kwargs)
        return with_evidence(model, U), tr

    # ------------------------------------------------------------------ checks
    def _check_once(self, values, siblings, model_args, model_kwargs):
        """Run the checks on concrete values: the chain's own, or (under ``jit``/``vmap``,
        where they are traced) those of a prototype trace evaluated at compile time. Skipped
        only when the program's arguments themselves are traced (``jit_model_args``)."""
        if _is_concrete((values, siblings)):
            return self._check(values, model_args, model_kwargs)
        if not _is_concrete(model_args):
            return None
        kwargs = {k: v for k, v in model_kwargs.items() if k != GIBBS_SITES_KWARG}
        with jax.ensure_compile_time_eval():
            tr = prototype_trace(conditioned(self._model), jax.random.key(0), model_args, kwargs)
            latent = {k: s["value"] for k, s in tr.items()
                      if s["type"] == "sample" and not s["is_observed"]}
            values = {k: latent[k] for k in self.sites}
            siblings = {k: v for k, v in latent.items() if k not in self.sites}
            self._check(values, model_args, {**kwargs, GIBBS_SITES_KWARG: siblings})
        return None

    def _check(self, values, model_args, model_kwargs):
        tr = self._trace(values, model_args, model_kwargs)
        if self.site not in tr or not isinstance(tr[self.site]["fn"], LabelField):
            raise ValueError(f"site: {self.site!r} must be a numpyro.sample site drawn from a "
                             "LabelField (e.g. PottsField.create(graph, q, ...))")
        n, q = tr[self.site]["fn"].model.n_nodes, tr[self.site]["fn"].model.n_classes
        self._check_separable(values, n, q, model_args, model_kwargs)
        self._check_normaliser(values, model_args, model_kwargs)

    def _check_separable(self, values, n, q, model_args, model_kwargs):
        y = jax.random.randint(jax.random.key(1), (n,), 0, q).astype(jnp.int32)
        base = self._trace({**values, self.site: y}, model_args, model_kwargs)
        per_class = [self._trace({**values, self.site: jnp.full((n,), c, jnp.int32)},
                                 model_args, model_kwargs) for c in range(q)]
        for name, s in base.items():
            if s["type"] != "sample" or name in self.sites:
                continue
            lp = _site_log_prob(s)
            by_class = [_site_log_prob(t[name]) for t in per_class]
            if jnp.shape(lp) == (n,):
                guess = jnp.stack(by_class, 1)[jnp.arange(n), y]
            elif jnp.shape(lp) == ():
                guess = by_class[0]
                if not all(np.allclose(b, guess) for b in by_class):
                    guess = None
            else:
                guess = None
            tol = 1e-9 if jnp.asarray(lp).dtype == jnp.float64 else 1e-4  # float32 sums
            if guess is None or not np.allclose(guess, lp, rtol=tol, atol=tol * (1 + n)):
                raise ValueError(
                    f"site {name!r} depends on the labels other than node by node (log density "
                    f"of shape {jnp.shape(lp)}); put it in a plate over the {n} nodes with node "
                    f"i reading labels[i] only, or make it independent of {self.site!r}")

    def _check_normaliser(self, values, model_args, model_kwargs):
        siblings = dict((model_kwargs or {}).get(GIBBS_SITES_KWARG, {}))
        kwargs = {k: v for k, v in (model_kwargs or {}).items() if k != GIBBS_SITES_KWARG}
        for name, value in siblings.items():
            if name in self.sites or not jnp.issubdtype(jnp.asarray(value).dtype, jnp.floating):
                continue

            def field_leaves(v, name=name):
                kw = {**kwargs, GIBBS_SITES_KWARG: {**siblings, name: v}}
                fn = self._trace(values, model_args, kw)[self.site]["fn"]
                return [x for x in jax.tree_util.tree_leaves(fn)
                        if jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating)]

            tangent = jax.random.normal(jax.random.key(2), jnp.shape(value))
            _, moved = jax.jvp(field_leaves, (jnp.asarray(value, tangent.dtype),), (tangent,))
            if any(bool(jnp.any(t != 0)) for t in moved):
                raise ValueError(
                    f"site {name!r} sets a parameter of the label field {self.site!r}, whose "
                    f"normaliser Z depends on it: NUTS on the unnormalised density would "
                    f"sample the wrong posterior. Pass exchange=({name!r},) to update it by "
                    "the exchange algorithm, or make it a constant of the program")

    # ------------------------------------------------------------------ MCMCKernel
    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        """Initial values from ``init_params`` (``Gibbs`` passes them) or the prototype."""
        model_kwargs = dict(model_kwargs or {})
        siblings = model_kwargs.get(GIBBS_SITES_KWARG, {})
        if not init_params:
            tr = self._trace({}, model_args, model_kwargs)
            latent = [k for k, s in tr.items() if s["type"] == "sample" and not s["is_observed"]
                      and k not in siblings]
            loose = sorted(set(latent) - set(self.sites))
            if loose:
                raise ValueError(f"sites {loose} are latent but no kernel samples them; use "
                                 "label_field_gibbs(program, kernel), which adds NUTS")
            init_params = {k: tr[k]["value"] for k in self.sites}
        values = {k: jnp.asarray(init_params[k]) for k in self.sites}
        values[self.site] = values[self.site].astype(jnp.int32)
        self._check_once(values, siblings, model_args, model_kwargs)
        rng_key, key = jax.random.split(rng_key)
        _, stats = jax.eval_shape(lambda: self._update(key, values, model_args, model_kwargs))
        stats = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), stats)
        q = self._trace(values, model_args, model_kwargs)[self.site]["fn"].model.n_classes
        compact = values[self.site].astype(storage_dtype(q))
        return LabelFieldState(values, compact, stats, rng_key)

    def _update(self, key, values, model_args, model_kwargs):
        key_labels, key_exchange = jax.random.split(key)
        model, _ = self._conditional(values, model_args, model_kwargs)
        state = self.kernel.init(model, key_labels, values[self.site])
        info = {}
        for t in range(self.steps):
            state, info = self.kernel.step(model, jax.random.fold_in(key_labels, t), state)
        values = {**values, self.site: state.labels.astype(jnp.int32)}
        stats = {k: jnp.asarray(v) for k, v in info_dict(info).items()}
        if self.exchange:
            values, accept = self._exchange(key_exchange, values, model_args, model_kwargs)
            stats["exchange_accept_prob"] = accept
        return values, stats

    def sample(self, state, model_args, model_kwargs):
        """One label update (``steps`` kernel steps), then one exchange move if asked."""
        rng_key, key = jax.random.split(state.rng_key)
        values, stats = self._update(key, state.z, model_args, model_kwargs)
        return LabelFieldState(values, values[self.site].astype(state.labels.dtype), stats,
                               rng_key)

    # ------------------------------------------------------------------ exchange
    def _exchange(self, key, values, model_args, model_kwargs):
        key_prop, key_aux, key_acc = jax.random.split(key, 3)
        tr = self._trace(values, model_args, model_kwargs)
        proposed, log_jac = dict(values), 0.0
        for k, name in zip(jax.random.split(key_prop, len(self.exchange)), self.exchange,
                           strict=True):
            transform = biject_to(tr[name]["fn"].support)
            u = transform.inv(values[name])
            u_new = u + self.exchange_scale * jax.random.normal(k, jnp.shape(u))
            proposed[name] = transform(u_new)
            log_jac = log_jac + (jnp.sum(transform.log_abs_det_jacobian(u_new, proposed[name]))
                                 - jnp.sum(transform.log_abs_det_jacobian(u, values[name])))
        program = conditioned(self._model)
        kwargs = model_kwargs or {}
        log_p, _ = log_density(program, model_args, kwargs, values)
        log_p_new, tr_new = log_density(program, model_args, kwargs, proposed)
        field, field_new = tr[self.site]["fn"].unclamped(), tr_new[self.site]["fn"].unclamped()
        aux = self.aux_kernel.init(field_new.model, key_aux, values[self.site])

        def body(t, s):
            return self.aux_kernel.step(field_new.model, jax.random.fold_in(key_aux, t), s)[0]

        w = jax.lax.fori_loop(0, self.aux_steps, body, aux).labels
        log_r = (log_p_new - log_p + log_jac + field_new.energy(w) - field.energy(w))
        log_r = jnp.where(jnp.isnan(log_r), -jnp.inf, log_r)
        accept = jnp.exp(jnp.minimum(log_r, 0.0))
        take = jax.random.uniform(key_acc) < accept
        out = {k: (jnp.where(take, proposed[k], values[k]) if k in self.exchange else v)
               for k, v in values.items()}
        return out, accept


class MixtureFieldGibbs(LabelFieldGibbs):
    """Block kernel on the two discrete sites of
    :func:`~graphssl.models.numpyro.programs.diffusion_mixture_program` (``labels`` y and
    ``centres`` beta), moved jointly by Walder's sampler as a ``Kernel``
    (:func:`graphssl.inference.diffusion_mixture.kernels.mixture_kernel`, default: the
    paper's iteration, blocked Gibbs sweep + component re-sampling + re-labelling). The
    sampler's model is the label site's ``DirichletDiffusionMixture`` with ``alpha`` read from
    the centres site (a NUTS site may set it: Eq. 6 is normalised). ``init`` checks that the
    program's log density and the sampler's ``log_joint`` differ by a constant."""

    def __init__(self, model, kernel=None, *, site: str = "labels", centres: str = "centres"):
        if kernel is None:
            from graphssl.inference.diffusion_mixture.kernels import mixture_kernel

            kernel = mixture_kernel((1, 1))
        super().__init__(model, kernel, site=site)
        self.centres = centres

    @property
    def per_node_sites(self) -> tuple[str, ...]:
        """Labels and centres."""
        return (self.site, self.centres)

    @property
    def sites(self) -> tuple[str, ...]:
        """Labels and centres."""
        return (self.site, self.centres)

    def _mixture(self, values, model_args, model_kwargs):
        tr = self._trace(values, model_args, model_kwargs)
        return tr[self.site]["fn"].model.replace(alpha=tr[self.centres]["fn"].alpha)

    def _check(self, values, model_args, model_kwargs):
        program = conditioned(self._model)
        gaps = []
        for seed_ in (3, 4):
            k1, k2 = jax.random.split(jax.random.key(seed_))
            model = self._mixture(values, model_args, model_kwargs)
            y = jnp.where(model.observed, model.labels,
                          jax.random.randint(k1, (model.n_nodes,), 0, model.n_classes))
            beta = jax.random.randint(k2, (model.n_nodes,), 0, model.n_nodes)
            lp, _ = log_density(program, model_args, model_kwargs or {},
                                {**values, self.site: y, self.centres: beta})
            gaps.append(float(lp - model.log_joint(y, beta)))
        if not np.isclose(gaps[0], gaps[1], rtol=1e-6, atol=1e-6 * (1 + abs(gaps[0]))):
            raise ValueError("model: the program's log density is not Walder's joint up to a "
                             "constant; build it with diffusion_mixture_program")
        self._check_normaliser(values, model_args, model_kwargs)

    def _update(self, key, values, model_args, model_kwargs):
        from graphssl.models.diffusion_mixture import sufficient_statistics

        model = self._mixture(values, model_args, model_kwargs)
        y, beta = values[self.site].astype(jnp.int32), values[self.centres].astype(jnp.int32)
        state = self.kernel.init(model, key, y)
        state = state._replace(beta=beta, stats=sufficient_statistics(model, y, beta))
        state, info = self.kernel.step(model, jax.random.fold_in(key, 1), state)
        stats = {k: jnp.asarray(v) for k, v in info_dict(info).items()}
        return {**values, self.site: state.labels, self.centres: state.beta}, stats


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
        new, _ = block._update(rng_key, values, model_args, kwargs)
        return {site: new[site]}

    return gibbs_fn
