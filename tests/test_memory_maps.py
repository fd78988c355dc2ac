"""The guard against exhausting the kernel's memory mappings (a compilation then segfaults)."""

import jax
import jax.numpy as jnp
import pytest

from graphssl import _memory_maps


@pytest.mark.skipif(not _memory_maps.memory_map_limit(), reason="no /proc/sys/vm/max_map_count")
def test_counts_read_from_proc():
    assert _memory_maps.memory_map_count() > 0
    assert _memory_maps.memory_map_limit() > _memory_maps.memory_map_count()


def test_release_only_past_the_fraction(monkeypatch):
    cleared = []
    monkeypatch.setattr(jax, "clear_caches", lambda: cleared.append(True))
    monkeypatch.setattr(_memory_maps, "memory_map_limit", lambda: 1000)
    monkeypatch.setattr(_memory_maps, "memory_map_count", lambda: 400)
    assert not _memory_maps.release_executables_near_limit()
    monkeypatch.setattr(_memory_maps, "memory_map_count", lambda: 600)
    assert _memory_maps.release_executables_near_limit()
    assert cleared == [True]


def test_released_executables_recompile_to_the_same_result():
    double = jax.jit(lambda x: 2 * x)
    before = double(jnp.arange(3))
    jax.clear_caches()
    assert (double(jnp.arange(3)) == before).all()
