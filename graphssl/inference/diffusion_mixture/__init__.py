"""Inference for Walder's Dirichlet mixture of graph diffusions (its own sub-package: the
blocked Gibbs sweep in ``lax.scan`` (:mod:`.gibbs`) and as a fused Pallas kernel
(:mod:`.pallas`), the component moves (:mod:`.moves`), the sampler (:mod:`.sampler`), running
until convergence (:mod:`.convergence`) and (k, tau) selection (:mod:`.selection`))."""
