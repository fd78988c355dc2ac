"""Process-wide settings applied when :mod:`graphssl` is imported.

JAX persistent compilation cache (opt-in)
-----------------------------------------
JAX can write every XLA program graphssl compiles (the kNN search, the solvers, the samplers)
to a cache folder and read it back in later processes, so a new Python process does not pay
the compilation again. graphssl leaves it OFF unless asked, because JAX reads a cached
executable back without verifying it: during this project's own test runs (eight processes
sharing one cache folder on a loaded machine) reading an entry back crashed the interpreter
with a segmentation fault inside ``jax._src.compilation_cache.get_executable_and_time``. A
library must never crash its caller's process, so the speed-up is a choice the user makes.

The environment variable ``GRAPHSSL_JAX_CACHE`` switches it, read once at import:

* unset, empty, ``0`` / ``off`` / ``false`` / ``no``: no persistent cache (JAX's default);
* ``1`` / ``on`` / ``true`` / ``yes``: the user cache folder of the platform
  (``platformdirs.user_cache_dir("graphssl")/jax``, e.g. ``~/.cache/graphssl/jax`` on Linux);
* any other value: that folder (``~`` expanded).

A folder the caller already gave JAX (``jax.config.update("jax_compilation_cache_dir",
...)`` or the ``JAX_COMPILATION_CACHE_DIR`` variable) is left as it is. Programs that compile
in under ``min_compile_seconds`` (0.1 s; JAX's default is 1 s) are not written: below that,
reading an entry back saves too little. Measured by benchmarks/bench_cost.py (a fresh
process per fit, CPU seconds of ``fit`` on 2 cores, cache warm / off): PottsClassifier
0.71 / 1.67 s at n = 10^3 and 0.70 / 2.01 s at n = 10^4; HarmonicFunctionClassifier
0.36 / 0.53 s at n = 10^4 (the compiled kNN search); no change where nothing compiles.
If a cached run ever crashes, delete the folder.
"""

from __future__ import annotations

import os
import pathlib

__all__ = ["CACHE_ENV", "compilation_cache_dir", "configure_compilation_cache"]

CACHE_ENV = "GRAPHSSL_JAX_CACHE"
_OFF = {"", "0", "off", "false", "no"}
_ON = {"1", "on", "true", "yes"}
_MIN_COMPILE_SECONDS = 0.1


def compilation_cache_dir(setting: str | None = None) -> pathlib.Path | None:
    """The cache folder that ``setting`` (default: ``$GRAPHSSL_JAX_CACHE``) asks for, or
    ``None`` when it leaves the cache off (the default)."""
    if setting is None:
        setting = os.environ.get(CACHE_ENV, "")
    setting = setting.strip()
    if setting.lower() in _OFF:
        return None
    if setting.lower() not in _ON:
        return pathlib.Path(setting).expanduser()
    import platformdirs

    return pathlib.Path(platformdirs.user_cache_dir("graphssl")) / "jax"


def configure_compilation_cache(
    setting: str | None = None, *, min_compile_seconds: float = _MIN_COMPILE_SECONDS
) -> pathlib.Path | None:
    """Point JAX's persistent compilation cache at :func:`compilation_cache_dir`.

    Returns the folder in use (``None``: cache off, or a folder set by the caller is kept and
    returned unchanged). Called once by ``import graphssl``; call it again to change the
    folder within a process (``setting="0"`` turns it off).
    """
    import jax

    if setting is None and (
        jax.config.jax_compilation_cache_dir or os.environ.get("JAX_COMPILATION_CACHE_DIR")
    ):
        existing = jax.config.jax_compilation_cache_dir
        return pathlib.Path(existing) if existing else None
    folder = compilation_cache_dir(setting)
    if folder is None:
        jax.config.update("jax_compilation_cache_dir", None)
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:  # read-only home, no permission: run without the cache
        return None
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_seconds))
    return folder
