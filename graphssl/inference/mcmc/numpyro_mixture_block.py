"""The discrete block of Walder's Dirichlet diffusion mixture as a numpyro program.

:func:`~graphssl.models.numpyro.programs.diffusion_mixture_program` has two discrete sites,
``labels`` (y) and ``centres`` (beta, the component centre of each vertex).
:class:`MixtureFieldGibbs` moves them jointly with Walder's sampler as a ``Kernel``
(:func:`graphssl.inference.diffusion_mixture.kernels.mixture_kernel`): the same moves that
``sample_chains`` runs on a ``DirichletDiffusionMixture``, here inside numpyro's ``Gibbs``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer.gibbs import conditioned
from numpyro.infer.util import log_density

from graphssl.inference.diffusion_mixture.kernels import mixture_kernel
from graphssl.inference.mcmc.kernels import info_dict
from graphssl.inference.mcmc.numpyro_block_checks import check_normaliser, run_compiled
from graphssl.inference.mcmc.numpyro_label_block import LabelFieldGibbs
from graphssl.models.diffusion_mixture import sufficient_statistics

__all__ = ["MixtureFieldGibbs"]


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
        super().__init__(model, mixture_kernel((1, 1)) if kernel is None else kernel,
                         site=site)
        self.centres = centres

    @property
    def per_node_sites(self) -> tuple[str, ...]:
        """Labels and centres."""
        return (self.site, self.centres)

    @property
    def sites(self) -> tuple[str, ...]:
        """Labels and centres."""
        return (self.site, self.centres)

    def mixture(self, values, model_args, model_kwargs):
        """The sampler's ``DirichletDiffusionMixture``: the label site's, ``alpha`` from the
        centres site."""
        tr = self.trace_program(values, model_args, model_kwargs)
        return tr[self.site]["fn"].model.replace(alpha=tr[self.centres]["fn"].alpha)

    def check(self, values, model_args, model_kwargs):
        """Program log density = Walder's ``log_joint`` + a constant (two random states);
        no sibling sets the class field's parameters."""
        program = conditioned(self.model)

        def gaps_at_random_states(values):
            gaps = []
            for seed_ in (3, 4):
                k1, k2 = jax.random.split(jax.random.key(seed_))
                model = self.mixture(values, model_args, model_kwargs)
                y = jnp.where(model.observed, model.labels,
                              jax.random.randint(k1, (model.n_nodes,), 0, model.n_classes))
                beta = jax.random.randint(k2, (model.n_nodes,), 0, model.n_nodes)
                lp, _ = log_density(program, model_args, model_kwargs or {},
                                    {**values, self.site: y, self.centres: beta})
                gaps.append(lp - model.log_joint(y, beta))
            return jnp.stack(gaps)

        gaps = np.asarray(run_compiled(gaps_at_random_states, values), np.float64)
        if not np.isclose(gaps[0], gaps[1], rtol=1e-6, atol=1e-6 * (1 + abs(gaps[0]))):
            raise ValueError("model: the program's log density is not Walder's joint up to a "
                             "constant; build it with diffusion_mixture_program")
        check_normaliser(self, values, model_args, model_kwargs)

    def update(self, key, values, model_args, model_kwargs):
        """One step of the mixture kernel from the current ``(labels, centres)``."""
        model = self.mixture(values, model_args, model_kwargs)
        y, beta = values[self.site].astype(jnp.int32), values[self.centres].astype(jnp.int32)
        state = self.kernel.init(model, key, y)
        state = state._replace(beta=beta, stats=sufficient_statistics(model, y, beta))
        state, info = self.kernel.step(model, jax.random.fold_in(key, 1), state)
        stats = {k: jnp.asarray(v) for k, v in info_dict(info).items()}
        return {**values, self.site: state.labels, self.centres: state.beta}, stats
