"""Test-suite setup: float64 for reference checks, shared data location."""

import os
from pathlib import Path

import jax
import pytest

from graphssl._memory_maps import release_executables_near_limit

# The import above has already configured JAX's persistent compilation cache as for a user
# (graphssl.config: on by default; no test reads anything it did not write in this run on a
# fresh machine such as CI's). This setting turns it off in the processes the tests start
# (notebook kernels, CLI and checkpoint subprocesses).
os.environ.setdefault("GRAPHSSL_JAX_CACHE", "0")
jax.config.update("jax_enable_x64", True)

_SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
if "GRAPHSSL_DATA" not in os.environ and _SHARED.is_dir():
    os.environ["GRAPHSSL_DATA"] = str(_SHARED)



@pytest.fixture(autouse=True, scope="module")
def _release_executables_near_map_limit():
    """Drop JAX's compiled executables after a test module once the process nears the limit
    on memory mappings (:mod:`graphssl._memory_maps`: about three per live executable;
    exhausting them segfaulted the next compilation). Module fixtures keep their compiled
    functions within a module, so the suite runs in any number of processes."""
    yield
    release_executables_near_limit()
