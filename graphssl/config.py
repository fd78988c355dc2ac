"""Process-wide settings applied when :mod:`graphssl` is imported.

JAX persistent compilation cache (on by default)
------------------------------------------------
JAX writes the XLA programs graphssl compiles (the mean-field and Gibbs solvers, the
compiled kNN search on accelerators) to a cache folder and reads them back in later
processes, so a new Python process does not pay the compilation again. The environment
variable ``GRAPHSSL_JAX_CACHE`` switches it, read once at import:

* unset, empty, ``1`` / ``on`` / ``true`` / ``yes``: the user cache folder of the platform,
  ``platformdirs.user_cache_dir("graphssl")/jax/<host>`` (e.g. ``~/.cache/graphssl/jax/...``
  on Linux), where ``<host>`` names the jax / jaxlib versions, the machine and a hash of the
  CPU model and instruction-set flags (an XLA CPU program is machine code for the CPU that
  compiled it: a home folder shared by different machines must not hand one's code to the
  other);
* ``0`` / ``off`` / ``false`` / ``no``: no persistent cache (JAX's default);
* any other value: that folder (``~`` expanded).

Within a process, :func:`configure_compilation_cache` changes it (``"0"`` turns it off;
JAX reads the setting at its first compilation, so call it before any). A folder the caller
already gave JAX (``jax.config.update("jax_compilation_cache_dir", ...)`` or the
``JAX_COMPILATION_CACHE_DIR`` variable) is left as it is. Programs that compile in under
``min_compile_seconds`` (0.1 s; JAX's default is 1 s) are not written: reading a small
program back costs about what compiling it does. The folder grows with the number of
distinct programs (shapes); delete it at any time.

Safety. A fit never depends on the cache: a folder that cannot be created or written
leaves the cache off; JAX turns an entry it cannot read (say, a truncated write) into a
warning and a fresh compilation, and a failed write into a warning (a truncated entry fails
to decompress: zlib, or zstd where installed). JAX writes entries in place, without a lock,
so two processes compiling the same program at once may each compile it; a reader that
catches a half-written file recompiles. Measured (benchmarks/bench_cost.py
``--concurrency 4``): four processes fitting PottsClassifier (n = 10^3) at once on one empty
folder all finished, with the same labels and no cache warning (0.43-0.44 CPU s each), then
four more at once on the filled folder each read the solver back (0.17 CPU s each).
The test suite does not touch a user's folder: ``tests/conftest.py`` points every process
of a run (workers, notebook kernels, CLI subprocesses) at one temporary folder, removed at
the end.

A segmentation fault seen in ``get_executable_and_time`` during this project's test runs
(eight processes, one cache folder) made the cache opt-in for a while. Its cause is not the
cache: each live XLA CPU executable holds about three memory mappings, and a process that
reaches the kernel's ``vm.max_map_count`` (65,530 by default, about 21,000 executables)
crashes in LLVM's allocator whether it compiles a program or deserialises one from the
cache (reproduced by taking the mappings with ``mmap`` first: "LLVM compilation error:
Cannot allocate memory", then SIGSEGV at ``compilation_cache.py`` line 352, the
``deserialize_executable`` call; ``jax.clear_caches()`` releases the mappings, which
:mod:`graphssl._memory_maps` now does). Only a process that compiles tens of thousands of
programs, such as a whole test suite, gets there.

What the cache saves (benchmarks/bench_cost.py, a fresh process per fit, CPU s of ``fit``
on 2 cores, empty folder / filled folder / off): PottsClassifier 0.41 / 0.17 / 0.42 at
n = 10^3 and 0.65 / 0.44 / 0.64 at 10^4 (its one compiled program, the mean-field sweep:
0.25 s to compile, 0.01 s to read back; tracing and lowering it, 0.06-0.09 s, was paid
either way). The folder also holds ``exported/``: the mean-field solvers' compiled
executables (:mod:`graphssl._exported`), which a new process loads and runs with no tracing,
lowering or cache lookup (``bench_cost_exec.json``: 0.072 CPU s at 10^3 and 0.30 at 10^4,
where storing ``jax.export`` programs instead gave 0.11 / 0.35 and nothing stored 0.17 /
0.50). The mean-field sweeps take their neighbour table padded to a bucket of widths (a
power of two up to 16,384 nodes, a multiple of 8 above:
:func:`graphssl.graph.core.bucket_width`; the diffusion mixture's Laplacian table too), so
graphs of one size whose largest degree differs share one program: a second PottsClassifier
fit on new data of the same size (n = 10^3) in the same process took 0.57 CPU s with
multiples of 8 (widths 40 and 56: a new compilation) and 0.05 s with powers of two; a
second DiffusionMixtureGridClassifier fit (n = 30, widths 11 and 9) 7.5 s and 0.03 s.
The estimators compile little else: HarmonicFunctionClassifier and LGCClassifier nothing
below n = 30,000 on a CPU, where the kNN search runs on the host. Padding the number of
nodes to buckets would only help a process that meets several sizes (without the cache a
new process compiles anyway), so it is not done.

"""

from __future__ import annotations

import hashlib
import os
import pathlib
import platform

__all__ = ["CACHE_ENV", "compilation_cache_dir", "configure_compilation_cache"]

CACHE_ENV = "GRAPHSSL_JAX_CACHE"
_OFF = {"0", "off", "false", "no", "none", "disable", "disabled"}
_ON = {"", "1", "on", "true", "yes", "enable", "enabled"}
_MIN_COMPILE_SECONDS = 0.1


def compilation_cache_dir(setting: str | None = None) -> pathlib.Path | None:
    """The cache folder that ``setting`` (default: ``$GRAPHSSL_JAX_CACHE``, unset = on) asks
    for, or ``None`` when it turns the cache off. ``setting``: a folder (a relative one is
    taken from the working directory and made absolute), a switch (``"1"``, ``"on"``,
    ``"true"``, ... the default folder; ``"0"``, ``"off"``, ``"none"``, ... off), or a bool
    / ``0`` / ``1``. A folder that cannot be named (``~nosuchuser/...``) leaves the cache
    off with a warning: a fit never depends on the cache."""
    if setting is None:
        setting = os.environ.get(CACHE_ENV, "")
    if isinstance(setting, bool) or setting in (0, 1):
        setting = "1" if setting else "0"
    if not isinstance(setting, str | os.PathLike):
        raise ValueError(f"setting: a folder, 'on' / 'off' or a bool, got {setting!r}")
    setting = os.fspath(setting).strip()
    if setting.lower() in _OFF:
        return None
    if setting.lower() not in _ON:
        try:
            return pathlib.Path(setting).expanduser().absolute()
        except RuntimeError as err:  # "~nosuchuser": no home directory to expand
            from graphssl._warnings import warn_user

            warn_user(f"{CACHE_ENV} / setting {setting!r}: {err}; the compilation cache is "
                      "off (give an existing folder)")
            return None
    import platformdirs

    return pathlib.Path(platformdirs.user_cache_dir("graphssl")) / "jax" / _host_tag()


def _host_tag() -> str:
    """``jax<version>-jaxlib<version>-<machine>-<12 hex digits>``: the hash covers the CPU
    model and its instruction-set flags (``/proc/cpuinfo`` on Linux, else
    ``platform.processor()``)."""
    from importlib.metadata import PackageNotFoundError, version

    import jax

    try:
        jaxlib_version = version("jaxlib")
    except PackageNotFoundError:
        jaxlib_version = "unknown"

    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            wanted = ("model name", "flags", "Features", "CPU part")
            cpu = "\n".join(sorted({line.strip() for line in fh
                                    if line.split(":")[0].strip() in wanted}))
    except OSError:
        pass
    digest = hashlib.sha256(cpu.encode()).hexdigest()[:12]
    return f"jax{jax.__version__}-jaxlib{jaxlib_version}-{platform.machine()}-{digest}"


def configure_compilation_cache(
    setting: str | None = None, *, min_compile_seconds: float = _MIN_COMPILE_SECONDS
) -> pathlib.Path | None:
    """Point JAX's persistent compilation cache at :func:`compilation_cache_dir`.

    Returns the folder in use: ``None`` when the cache is off or its folder cannot be
    created or written (the cache is then left off: it never fails a fit), or the caller's
    own folder unchanged when JAX already had one and ``setting`` is None. Called once by
    ``import graphssl``; call it again before the first compilation to change the folder
    (``setting="0"`` turns it off).
    """
    import jax

    if not (isinstance(min_compile_seconds, int | float) and not isinstance(
            min_compile_seconds, bool) and 0 <= min_compile_seconds < float("inf")):
        raise ValueError(f"min_compile_seconds: a finite number >= 0, got "
                         f"{min_compile_seconds!r}")
    if setting is None and (
        jax.config.jax_compilation_cache_dir or os.environ.get("JAX_COMPILATION_CACHE_DIR")
    ):
        existing = jax.config.jax_compilation_cache_dir
        return pathlib.Path(existing) if existing else None
    folder = compilation_cache_dir(setting)
    if folder is not None and not _writable(folder):
        folder = None
    jax.config.update("jax_compilation_cache_dir", None if folder is None else str(folder))
    if folder is not None:
        jax.config.update("jax_persistent_cache_min_compile_time_secs",
                          float(min_compile_seconds))
    return folder


def _writable(folder: pathlib.Path) -> bool:
    """Create ``folder`` if needed; whether this process can write there."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:  # read-only home, a file in the way, no permission
        return False
    return folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)
