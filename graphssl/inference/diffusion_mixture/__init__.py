"""Inference for Walder's Dirichlet mixture of graph diffusions (its own sub-package).

The blocked Gibbs sweep in ``lax.scan`` (:mod:`.gibbs`) and as a fused Pallas kernel
(:mod:`.pallas`); the Metropolis–Hastings moves (:mod:`.moves`: the paper's two;
:mod:`.split_merge`; :mod:`.cluster_moves`; shared proposal helpers in :mod:`.proposals`);
all of them as :class:`~graphssl.inference.mcmc.kernels.Kernel` s (:mod:`.kernels`) run by
the library's ``sample_chains`` (:mod:`.sampler`); (k, tau) selection (:mod:`.selection`).
Running until R-hat <= 1.01 is the generic :mod:`graphssl.inference.mcmc.convergence`."""
