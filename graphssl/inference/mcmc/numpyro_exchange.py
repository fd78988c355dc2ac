"""The exchange move for sites that set a label field's parameters (and so its normaliser).

Murray, Ghahramani & MacKay (2006), "MCMC for doubly-intractable distributions". A site
``theta`` that enters the field's parameters (beta, couplings, its unary field) changes
``Z(theta)``, which is never computed. The move: a Gaussian random walk in the site's
unconstrained space proposes ``theta'``, an auxiliary labeling ``w ~ p(w | theta')`` of the
*unclamped* field is drawn, and ``theta'`` is accepted with probability

    min(1, [p~(theta', y, rest) / p~(theta, y, rest)] [exp(-E_theta(w)) / exp(-E_theta'(w))])

(``p~``: the program's unnormalised joint, Jacobians included), which is exact when ``w`` is
an exact draw: ``Z(theta)/Z(theta')`` cancels. Here ``w`` is ``aux_steps`` steps of
``aux_kernel`` (default Swendsen–Wang) started from the current labels: an approximate
exchange step whose bias vanishes as ``aux_steps`` grows (tests compare with enumeration of
the doubly-intractable posterior). Used by
:class:`~graphssl.inference.mcmc.numpyro_label_block.LabelFieldGibbs` for its ``exchange``
sites.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from numpyro.distributions.transforms import biject_to
from numpyro.infer.gibbs import conditioned
from numpyro.infer.util import log_density

__all__ = ["exchange_move"]


def _propose(block, key, values, tr):
    """Random-walk proposal of every exchange site and the log Jacobian of the move."""
    proposed, log_jac = dict(values), 0.0
    for k, name in zip(jax.random.split(key, len(block.exchange)), block.exchange, strict=True):
        transform = biject_to(tr[name]["fn"].support)
        u = transform.inv(values[name])
        u_new = u + block.exchange_scale * jax.random.normal(k, jnp.shape(u))
        proposed[name] = transform(u_new)
        log_jac = log_jac + (jnp.sum(transform.log_abs_det_jacobian(u_new, proposed[name]))
                             - jnp.sum(transform.log_abs_det_jacobian(u, values[name])))
    return proposed, log_jac


def exchange_move(block, key, values, model_args, model_kwargs):
    """One exchange update of ``block.exchange`` given the labels: ``(values, accept_prob)``.

    ``block``: a ``LabelFieldGibbs`` (its program, label ``site``, ``exchange`` sites,
    ``exchange_scale``, ``aux_kernel`` and ``aux_steps``)."""
    key_prop, key_aux, key_acc = jax.random.split(key, 3)
    tr = block.trace_program(values, model_args, model_kwargs)
    proposed, log_jac = _propose(block, key_prop, values, tr)
    program = conditioned(block.model)
    kwargs = model_kwargs or {}
    log_p, _ = log_density(program, model_args, kwargs, values)
    log_p_new, tr_new = log_density(program, model_args, kwargs, proposed)
    field, field_new = tr[block.site]["fn"].unclamped(), tr_new[block.site]["fn"].unclamped()
    aux = block.aux_kernel.init(field_new.model, key_aux, values[block.site])

    def body(t, s):
        return block.aux_kernel.step(field_new.model, jax.random.fold_in(key_aux, t), s)[0]

    w = jax.lax.fori_loop(0, block.aux_steps, body, aux).labels
    log_r = log_p_new - log_p + log_jac + field_new.energy(w) - field.energy(w)
    log_r = jnp.where(jnp.isnan(log_r), -jnp.inf, log_r)
    accept = jnp.exp(jnp.minimum(log_r, 0.0))
    take = jax.random.uniform(key_acc) < accept
    out = {k: (jnp.where(take, proposed[k], values[k]) if k in block.exchange else v)
           for k, v in values.items()}
    return out, accept
