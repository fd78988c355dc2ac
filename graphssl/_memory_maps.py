"""Keep a long-lived process clear of the kernel's limit on memory mappings (Linux).

Every live XLA executable holds about three memory mappings, and JAX keeps every executable it
compiled. A process that fits many models of different shapes (a grid of runs, a notebook,
a test suite) reaches ``vm.max_map_count`` (65,530 by default, about 21,000 executables), and
the next compilation segfaults instead of raising. :func:`release_executables_near_limit`
drops JAX's compiled executables once the process holds half of the limit; the next call of
each function recompiles. Elsewhere than Linux it does nothing.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["memory_map_count", "memory_map_limit", "release_executables_near_limit"]


def memory_map_count() -> int:
    """Number of memory mappings this process holds; 0 where ``/proc`` is absent."""
    try:
        with open("/proc/self/maps", "rb") as maps:
            return sum(1 for _ in maps)
    except OSError:
        return 0


def memory_map_limit() -> int:
    """The kernel's ``vm.max_map_count``; 0 where it cannot be read."""
    try:
        return int(Path("/proc/sys/vm/max_map_count").read_text())
    except (OSError, ValueError):
        return 0


def release_executables_near_limit(fraction: float = 0.5) -> bool:
    """``jax.clear_caches()`` when the mappings exceed ``fraction`` of the limit; whether it did."""
    limit = memory_map_limit()
    if not limit or memory_map_count() <= fraction * limit:
        return False
    import jax

    jax.clear_caches()
    return True
