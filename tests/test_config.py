"""graphssl.config: the persistent compilation cache's switch, its folder, and that a cache
which cannot be used or read never fails a computation (the suite runs with it off)."""

from __future__ import annotations

import pathlib
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.compilation_cache import compilation_cache as jax_cache

from graphssl import config


@pytest.fixture
def restore_jax_cache():
    """Put JAX's cache settings back as the suite had them (off)."""
    before = (jax.config.jax_compilation_cache_dir,
              jax.config.jax_persistent_cache_min_compile_time_secs)
    yield
    jax.config.update("jax_compilation_cache_dir", before[0])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", before[1])
    jax_cache.reset_cache()


def test_setting_values(monkeypatch, tmp_path):
    assert config.compilation_cache_dir("0") is None
    assert config.compilation_cache_dir(" off ") is None
    assert config.compilation_cache_dir(str(tmp_path)) == tmp_path
    default = config.compilation_cache_dir(" on ")
    assert default.parts[-3:-1] == ("graphssl", "jax")
    # the folder names the versions and a hash of this CPU (machine code is per CPU)
    assert default.name.startswith(f"jax{jax.__version__}-jaxlib")
    monkeypatch.delenv(config.CACHE_ENV, raising=False)
    assert config.compilation_cache_dir() == default  # on unless switched off
    monkeypatch.setenv(config.CACHE_ENV, "no")
    assert config.compilation_cache_dir() is None


def test_configure_and_switch_off(tmp_path, restore_jax_cache):
    folder = config.configure_compilation_cache(str(tmp_path / "cache"))
    assert folder == tmp_path / "cache" and folder.is_dir()
    assert pathlib.Path(jax.config.jax_compilation_cache_dir) == folder
    assert config.configure_compilation_cache("0") is None
    assert jax.config.jax_compilation_cache_dir is None


def test_unusable_folder_leaves_the_cache_off(tmp_path, restore_jax_cache):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    assert config.configure_compilation_cache(str(blocker / "cache")) is None
    assert jax.config.jax_compilation_cache_dir is None


def test_unreadable_entry_is_recompiled(tmp_path, restore_jax_cache):
    """Every entry truncated (a half-written file of another process): JAX warns, compiles
    again and returns the right numbers."""
    jax_cache.reset_cache()
    config.configure_compilation_cache(str(tmp_path), min_compile_seconds=0.0)

    def program(x):
        return jnp.cumsum(jnp.sin(x) * 7.25) + 0.5

    x = np.linspace(0.0, 1.0, 37)
    expected = np.cumsum(np.sin(x) * 7.25) + 0.5
    np.testing.assert_allclose(jax.jit(program)(x), expected, rtol=1e-12)
    entries = [p for p in tmp_path.iterdir() if p.is_file()]
    assert entries, "nothing was written to the cache"
    for entry in entries:
        entry.write_bytes(entry.read_bytes()[:20])
    jax.clear_caches()  # the in-memory copy, so that the next call reads the folder
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = jax.jit(program)(x)
    np.testing.assert_allclose(again, expected, rtol=1e-12)
    assert any("persistent compilation cache" in str(w.message) for w in caught)


def test_cache_settings_that_are_not_folders(monkeypatch, tmp_path):
    """``~nosuchuser/...`` made ``import graphssl`` fail (RuntimeError from expanduser);
    ``0`` / ``False`` raised AttributeError; ``none`` / ``disable`` made folders of those
    names; a relative folder moved with the working directory."""
    import warnings

    from graphssl.config import compilation_cache_dir

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert compilation_cache_dir("~nosuchuser-graphssl/cache") is None
    assert any("compilation cache is off" in str(w.message) for w in caught)
    for off in (0, False, "none", "disable", " OFF "):
        assert compilation_cache_dir(off) is None
    monkeypatch.chdir(tmp_path)
    assert compilation_cache_dir("rel/cache") == tmp_path / "rel" / "cache"
    with pytest.raises(ValueError, match="setting: a folder"):
        compilation_cache_dir(2.5)
