"""The checks a program passes before a label block samples it (run once, in ``init``).

Two rules make the label block of :mod:`.numpyro_label_block` exact:

* **node by node** (:func:`check_separable`): every other site's log density depends on the
  labels node by node (in a plate over the nodes, site ``i`` reading ``y_i``), or not at all;
  only then is the evidence ``U[i, c]`` (the program run once per class) the conditional;
* **normalisers** (:func:`check_normaliser`): the field's density is known only up to
  ``Z(theta)`` (beta, the couplings, its unary field). A continuous site that enters
  ``theta`` and is sampled by NUTS from the program's density would target
  ``p(theta) exp(-E_theta(y))`` instead of ``p(theta) exp(-E_theta(y)) / Z(theta)``: wrong.
  Such a site (found by a forward-mode derivative of the field's leaves) is refused with a
  ``ValueError`` unless the block owns it as an exchange site (:mod:`.numpyro_exchange`).

The checks need concrete values: :func:`check_block_once` runs them on the chain's own
values, or, under ``jit``/``vmap`` where those are traced, on a prototype trace evaluated at
compile time; only when the program's arguments themselves are traced (numpyro's
``jit_model_args``) are they skipped.

Each check evaluates the user's program several times. It does so as one compiled program
(:func:`run_compiled`) and reads Python facts (site types, sizes) from an abstract trace
(:func:`static_facts`): evaluated op by op, every primitive was a small XLA compilation of its
own (the diffusion-mixture program's check: 9.4 s of a 27 s test, measured with cProfile on
2 CPU cores).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer.gibbs import GIBBS_SITES_KWARG, conditioned, prototype_trace

from graphssl.models.numpyro.fields import LabelField

__all__ = ["check_block_once", "check_kernel_fits", "check_label_block", "check_normaliser",
           "check_separable", "run_compiled", "site_log_prob", "static_facts"]


def _is_concrete(tree) -> bool:
    return not any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(tree))


def run_compiled(fn, *args):
    """``fn(*args)`` on concrete ``args`` as one compiled program, with concrete results even
    when called inside an outer ``jit`` / ``vmap`` trace (an executable called on concrete
    arrays runs; ``ensure_compile_time_eval`` would instead run every operation on the
    program's constants one by one while tracing). What ``fn`` closes over (the program's
    arguments) is a constant of the program, as in numpyro's own ``MCMC``."""
    return jax.jit(fn).lower(*args).compile()(*args)


def static_facts(fn, *args):
    """What ``fn(*args)`` returns, for an ``fn`` that returns Python facts (a site's type, a
    model's sizes) rather than arrays: read from one abstract trace, nothing compiled or run."""
    facts = []
    jax.eval_shape(lambda *a: facts.append(fn(*a)), *args)
    return facts[0]


def site_log_prob(site) -> jax.Array:
    """A trace site's log density with its ``mask`` and ``scale`` applied."""
    lp = site["fn"].log_prob(site["value"])
    if site.get("mask") is not None:
        lp = jnp.where(site["mask"], lp, 0.0)
    if site.get("scale") is not None:
        lp = lp * site["scale"]
    return lp


def check_block_once(block, values, siblings, model_args, model_kwargs) -> None:
    """``block.check`` on concrete values: the chain's own, or (under ``jit``/``vmap``) those
    of a prototype trace evaluated at compile time; skipped when ``model_args`` are traced."""
    if _is_concrete((values, siblings)):
        return block.check(values, model_args, model_kwargs)
    if not _is_concrete(model_args):
        return None
    kwargs = {k: v for k, v in model_kwargs.items() if k != GIBBS_SITES_KWARG}

    def prototype_latent():
        tr = prototype_trace(conditioned(block.model), jax.random.key(0), model_args, kwargs)
        return {k: s["value"] for k, s in tr.items()
                if s["type"] == "sample" and not s["is_observed"]}

    latent = run_compiled(prototype_latent)
    values = {k: latent[k] for k in block.sites}
    siblings = {k: v for k, v in latent.items() if k not in block.sites}
    block.check(values, model_args, {**kwargs, GIBBS_SITES_KWARG: siblings})
    return None


def check_label_block(block, values, model_args, model_kwargs) -> None:
    """The label site is a ``LabelField``; the other sites are node by node; no sibling
    sets the field's parameters."""

    def field_sizes(values):
        tr = block.trace_program(values, model_args, model_kwargs)
        if block.site not in tr or not isinstance(tr[block.site]["fn"], LabelField):
            return None
        return tr[block.site]["fn"].model.n_nodes, tr[block.site]["fn"].model.n_classes

    sizes = static_facts(field_sizes, values)
    if sizes is None:
        raise ValueError(f"site: {block.site!r} must be a numpyro.sample site drawn from a "
                         "LabelField (e.g. PottsField.create(graph, q, ...))")
    check_separable(block, values, *sizes, model_args, model_kwargs)
    check_normaliser(block, values, model_args, model_kwargs)
    check_kernel_fits(block, values, model_args, model_kwargs)


def check_kernel_fits(block, values, model_args, model_kwargs) -> None:
    """The block's kernel accepts the program's field (its own ``check``, as
    ``sample_chains`` runs it): a chromatic kernel coloured for another graph left the nodes
    past its colouring unsampled, silently."""
    kernel = getattr(block, "kernel", None)
    if kernel is None or getattr(kernel, "check", None) is None:
        return
    field = run_compiled(lambda v: block.conditional(v, model_args, model_kwargs)[0], values)
    with jax.ensure_compile_time_eval():  # inside numpyro's jit the check's jnp ops run now
        kernel.check(field)


def check_separable(block, values, n, q, model_args, model_kwargs) -> None:
    """Every other site's log density at random labels equals the per-class evidence read
    node by node (per-node sites) or is the same for every class (scalar sites)."""

    def site_densities(values):
        """Labels y and, per other site, its log density at y and at y = c for each c."""
        y = jax.random.randint(jax.random.key(1), (n,), 0, q).astype(jnp.int32)
        base = block.trace_program({**values, block.site: y}, model_args, model_kwargs)
        per_class = [block.trace_program({**values, block.site: jnp.full((n,), c, jnp.int32)},
                                         model_args, model_kwargs) for c in range(q)]
        return y, {name: (site_log_prob(s), jnp.stack([site_log_prob(t[name])
                                                       for t in per_class]))
                   for name, s in base.items()
                   if s["type"] == "sample" and name not in block.sites}

    y, densities = run_compiled(site_densities, values)
    y = np.asarray(y)
    for name, (lp, by_class) in densities.items():
        lp, by_class = np.asarray(lp), np.asarray(by_class)
        if lp.shape == (n,):
            guess = by_class[y, np.arange(n)]
        elif lp.shape == ():
            guess = by_class[0] if all(np.allclose(b, by_class[0]) for b in by_class) else None
        else:
            guess = None
        tol = 1e-9 if lp.dtype == np.float64 else 1e-4  # float32 sums
        if guess is None or not np.allclose(guess, lp, rtol=tol, atol=tol * (1 + n)):
            raise ValueError(
                f"site {name!r} depends on the labels other than node by node (log density "
                f"of shape {lp.shape}); put it in a plate over the {n} nodes with node "
                f"i reading labels[i] only, or make it independent of {block.site!r}")


def check_normaliser(block, values, model_args, model_kwargs) -> None:
    """No floating sibling site (one another block samples) moves the field's leaves."""
    siblings = dict((model_kwargs or {}).get(GIBBS_SITES_KWARG, {}))
    kwargs = {k: v for k, v in (model_kwargs or {}).items() if k != GIBBS_SITES_KWARG}
    floating = [name for name, value in siblings.items() if name not in block.sites
                and jnp.issubdtype(jnp.asarray(value).dtype, jnp.floating)]
    if not floating:
        return

    def moves_the_field(siblings):
        """Per floating sibling: does a random tangent of it move a leaf of the field?"""
        moved = {}
        for name in floating:
            def field_leaves(v, name=name):
                kw = {**kwargs, GIBBS_SITES_KWARG: {**siblings, name: v}}
                fn = block.trace_program(values, model_args, kw)[block.site]["fn"]
                return [x for x in jax.tree_util.tree_leaves(fn)
                        if jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating)]

            value = siblings[name]
            tangent = jax.random.normal(jax.random.key(2), jnp.shape(value))
            _, tangents = jax.jvp(field_leaves, (jnp.asarray(value, tangent.dtype),),
                                  (tangent,))
            moved[name] = jnp.any(jnp.stack([jnp.any(t != 0) for t in tangents])
                                  if tangents else False)
        return moved

    for name, moved in run_compiled(moves_the_field, siblings).items():
        if bool(moved):
            raise ValueError(
                f"site {name!r} sets a parameter of the label field {block.site!r}, whose "
                f"normaliser Z depends on it: NUTS on the unnormalised density would "
                f"sample the wrong posterior. Pass exchange=({name!r},) to update it by "
                "the exchange algorithm, or make it a constant of the program")
