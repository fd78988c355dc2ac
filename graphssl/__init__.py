"""graphssl: graph-based semi-supervised classification written as probabilistic models.

Layers (imports flow one way): ``graph`` / ``data`` / ``metrics`` -> ``models`` (what is
believed) -> ``inference`` (how it is computed) -> ``diagnostics`` / ``estimators`` / ``cli``.

JAX's persistent compilation cache is opt-in: ``GRAPHSSL_JAX_CACHE=1`` (the user cache folder)
or a path turns it on at import; see :mod:`graphssl.config` for why it is off by default.
"""

from graphssl.config import configure_compilation_cache

configure_compilation_cache()

from graphssl.graph import Graph  # noqa: E402

__version__ = "0.1.0"
__all__ = ["Graph", "__version__"]
