"""Test-suite setup: float64 for reference checks, shared data location."""

import os
from pathlib import Path

import jax

# no test depends on JAX's persistent compilation cache (graphssl.config): it is off here
os.environ.setdefault("GRAPHSSL_JAX_CACHE", "0")
jax.config.update("jax_enable_x64", True)

_SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
if "GRAPHSSL_DATA" not in os.environ and _SHARED.is_dir():
    os.environ["GRAPHSSL_DATA"] = str(_SHARED)
