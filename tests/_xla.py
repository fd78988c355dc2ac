"""Compiler options for the tests' own long-running programs.

``tests/conftest.py`` compiles everything with XLA's CPU back end at optimisation level 0
(most of the suite's programs run once on a tiny graph: compilation is their cost). The
exactness checks that push tens of thousands of exact draws through a kernel many times are
the other way round: there the unoptimised code costs more than its compilation saves
(a cluster-flip check: 9.1 s of running at level 0, 4.2 s at level 3). Their ``jax.jit``
takes ``compiler_options=OPTIMISED``: LLVM's level 2 for that one program. Level 2 against
XLA's default 3 (one process, no cache, 2 cores): the split-merge and cluster-flip checks 67 s
against 82 s, the whole of ``tests/test_diffusion_mixture.py`` 210.6 s against 224.4 s; level 1
ran no faster than 2, level 0 took 142 s for the same checks.
"""

OPTIMISED = {"xla_backend_optimization_level": 2, "xla_llvm_disable_expensive_passes": False}
