"""graphssl: graph-based semi-supervised classification written as probabilistic models.

Layers (imports flow one way): ``graph`` / ``data`` / ``metrics`` -> ``models`` (what is
believed) -> ``inference`` (how it is computed) -> ``diagnostics`` / ``estimators`` / ``cli``.

JAX's persistent compilation cache is on by default, in the user cache folder;
``GRAPHSSL_JAX_CACHE=0`` turns it off and a path moves it (:mod:`graphssl.config`).
"""

from graphssl.config import configure_compilation_cache

configure_compilation_cache()

from graphssl.graph import Graph  # noqa: E402

__version__ = "0.1.0"
__all__ = ["Graph", "__version__"]
