"""Test-suite setup: float64 for reference checks, shared data location."""

import os
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

_SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
if "GRAPHSSL_DATA" not in os.environ and _SHARED.is_dir():
    os.environ["GRAPHSSL_DATA"] = str(_SHARED)
