"""Generic MCMC over node labels: kernels (``Kernel(init, step)``), composition and
Metropolis–Hastings (:mod:`.kernels`), sequential / chromatic Gibbs (:mod:`.gibbs`),
Swendsen–Wang (:mod:`.swendsen_wang`), the label-permutation move (:mod:`.moves`), the chain
driver (:mod:`.chains`) with its on-disk checkpoints (:mod:`.checkpoint`), the
permutation-invariant statistics and convergence rule (:mod:`.statistics`) and the numpyro
adapter (:mod:`.numpyro_adapter`). These know a model only through
:mod:`graphssl.models.protocol`."""
