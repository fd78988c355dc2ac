"""Compiler options for the tests' own long-running programs.

``tests/conftest.py`` compiles everything with XLA's CPU back end at optimisation level 0
(most of the suite's programs run once on a tiny graph: compilation is their cost). The
exactness checks that push tens of thousands of exact draws through a kernel many times are
the other way round: there the unoptimised code costs more than its compilation saves
(a cluster-flip check: 9.1 s of running at level 0, 4.2 s at level 3). Their ``jax.jit``
takes ``compiler_options=OPTIMISED``, XLA's default level for that one program.
"""

OPTIMISED = {"xla_backend_optimization_level": 3, "xla_llvm_disable_expensive_passes": False}
