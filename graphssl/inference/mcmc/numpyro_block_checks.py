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
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer.gibbs import GIBBS_SITES_KWARG, conditioned, prototype_trace

from graphssl.models.numpyro.fields import LabelField

__all__ = ["check_block_once", "check_label_block", "check_normaliser", "check_separable",
           "site_log_prob"]


def _is_concrete(tree) -> bool:
    return not any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(tree))


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
    with jax.ensure_compile_time_eval():
        tr = prototype_trace(conditioned(block.model), jax.random.key(0), model_args, kwargs)
        latent = {k: s["value"] for k, s in tr.items()
                  if s["type"] == "sample" and not s["is_observed"]}
        values = {k: latent[k] for k in block.sites}
        siblings = {k: v for k, v in latent.items() if k not in block.sites}
        block.check(values, model_args, {**kwargs, GIBBS_SITES_KWARG: siblings})
    return None


def check_label_block(block, values, model_args, model_kwargs) -> None:
    """The label site is a ``LabelField``; the other sites are node by node; no sibling
    sets the field's parameters."""
    tr = block.trace_program(values, model_args, model_kwargs)
    if block.site not in tr or not isinstance(tr[block.site]["fn"], LabelField):
        raise ValueError(f"site: {block.site!r} must be a numpyro.sample site drawn from a "
                         "LabelField (e.g. PottsField.create(graph, q, ...))")
    model = tr[block.site]["fn"].model
    check_separable(block, values, model.n_nodes, model.n_classes, model_args, model_kwargs)
    check_normaliser(block, values, model_args, model_kwargs)


def check_separable(block, values, n, q, model_args, model_kwargs) -> None:
    """Every other site's log density at random labels equals the per-class evidence read
    node by node (per-node sites) or is the same for every class (scalar sites)."""
    y = jax.random.randint(jax.random.key(1), (n,), 0, q).astype(jnp.int32)
    base = block.trace_program({**values, block.site: y}, model_args, model_kwargs)
    per_class = [block.trace_program({**values, block.site: jnp.full((n,), c, jnp.int32)},
                                     model_args, model_kwargs) for c in range(q)]
    for name, s in base.items():
        if s["type"] != "sample" or name in block.sites:
            continue
        lp = site_log_prob(s)
        by_class = [site_log_prob(t[name]) for t in per_class]
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
                f"i reading labels[i] only, or make it independent of {block.site!r}")


def check_normaliser(block, values, model_args, model_kwargs) -> None:
    """No floating sibling site (one another block samples) moves the field's leaves."""
    siblings = dict((model_kwargs or {}).get(GIBBS_SITES_KWARG, {}))
    kwargs = {k: v for k, v in (model_kwargs or {}).items() if k != GIBBS_SITES_KWARG}
    for name, value in siblings.items():
        if name in block.sites or not jnp.issubdtype(jnp.asarray(value).dtype, jnp.floating):
            continue

        def field_leaves(v, name=name):
            kw = {**kwargs, GIBBS_SITES_KWARG: {**siblings, name: v}}
            fn = block.trace_program(values, model_args, kw)[block.site]["fn"]
            return [x for x in jax.tree_util.tree_leaves(fn)
                    if jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating)]

        tangent = jax.random.normal(jax.random.key(2), jnp.shape(value))
        _, moved = jax.jvp(field_leaves, (jnp.asarray(value, tangent.dtype),), (tangent,))
        if any(bool(jnp.any(t != 0)) for t in moved):
            raise ValueError(
                f"site {name!r} sets a parameter of the label field {block.site!r}, whose "
                f"normaliser Z depends on it: NUTS on the unnormalised density would "
                f"sample the wrong posterior. Pass exchange=({name!r},) to update it by "
                "the exchange algorithm, or make it a constant of the program")
