"""Test-suite setup: float64 for reference checks, shared data location."""

import os
from pathlib import Path

import jax
import pytest

# no test depends on JAX's persistent compilation cache (graphssl.config): it is off here
os.environ.setdefault("GRAPHSSL_JAX_CACHE", "0")
jax.config.update("jax_enable_x64", True)

_SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
if "GRAPHSSL_DATA" not in os.environ and _SHARED.is_dir():
    os.environ["GRAPHSSL_DATA"] = str(_SHARED)


def _memory_map_count() -> int:
    """Number of memory mappings of this process (Linux), 0 where /proc is absent."""
    try:
        with open("/proc/self/maps", "rb") as maps:
            return sum(1 for _ in maps)
    except OSError:
        return 0


def _memory_map_limit() -> int:
    try:
        return int(Path("/proc/sys/vm/max_map_count").read_text())
    except (OSError, ValueError):
        return 0


@pytest.fixture(autouse=True, scope="module")
def _release_executables_near_map_limit():
    """Drop JAX's compiled executables after a test module when mappings near the limit.

    Every live XLA executable holds about three memory mappings; a process that compiles the
    whole suite reaches ``vm.max_map_count`` (65,530 by default) and the next compilation
    segfaults. Module fixtures keep their compiled functions within a module; across modules
    the caches are cleared only past half of the limit, so the suite runs in any number of
    processes.
    """
    yield
    limit = _memory_map_limit()
    if limit and _memory_map_count() > limit // 2:
        jax.clear_caches()
