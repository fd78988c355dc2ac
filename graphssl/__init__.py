"""graphssl: graph-based semi-supervised classification written as probabilistic models.

Layers (imports flow one way): ``graph`` / ``data`` / ``metrics`` -> ``models`` (what is
believed) -> ``inference`` (how it is computed) -> ``diagnostics`` / ``estimators`` / ``cli``.

Importing graphssl turns on JAX's persistent compilation cache in the user cache folder
(``GRAPHSSL_JAX_CACHE=0`` switches it off, a path moves it); see :mod:`graphssl.config`.
"""

from graphssl.config import configure_compilation_cache

configure_compilation_cache()

from graphssl.graph import Graph  # noqa: E402

__version__ = "0.1.0"
__all__ = ["Graph", "__version__"]
