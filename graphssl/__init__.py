"""graphssl: graph-based semi-supervised classification written as probabilistic models.

Layers (imports flow one way): ``graph`` / ``data`` / ``metrics`` -> ``models`` (what is
believed) -> ``inference`` (how it is computed) -> ``diagnostics`` / ``estimators`` / ``cli``.
"""

from graphssl.graph import Graph

__version__ = "0.1.0"
__all__ = ["Graph", "__version__"]
