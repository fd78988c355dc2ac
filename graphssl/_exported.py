"""Compiled solvers that a new process loads back instead of tracing them again.

JAX's persistent compilation cache (:mod:`graphssl.config`) stores the XLA executable, but a
new process still traces the Python function and lowers it to StableHLO before it can look
the executable up: for the mean-field sweep of a ``PottsClassifier`` fit at n = 10^3 that
was most of the fit (0.06-0.09 of 0.17 CPU s, 2-core CPU). A stored ``jax.export`` program
saved the tracing but not the lowering (0.05 s left). :func:`exported_call` now stores the
compiled executable itself (``jax.experimental.serialize_executable``: XLA's serialised
executable and the argument / result tree structures, pickled) next to the compilation
cache, one file per (function, source digest, argument shapes, dtypes and weak types, static
arguments, jax and jaxlib versions, backend, device kind, the host CPU's feature flags,
``XLA_FLAGS``); a later process loads it and calls it with no tracing, lowering or cache
lookup.

Correctness never depends on the files: the key holds a digest of the source of the module that
defines the function (any edit is a new key) and everything the executable was built for (an
executable is never run on a CPU with other instruction-set extensions, or under other XLA flags), a
file that cannot be read or loaded, or whose executable fails on its first call, is deleted and the
function compiled as usual, a file is written atomically (a temporary file then ``os.replace``), and
the whole mechanism is off when the compilation cache is (``GRAPHSSL_JAX_CACHE=0``) or when an
argument is traced (a call inside ``jit`` / ``vmap``). The files are pickles: like the compilation
cache beside them, the folder must be one only its user can write.
Measured in ``benchmarks/bench_cost.py`` (issue 30: cost at the small end).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import pathlib
import pickle
import platform
import tempfile

import jax
import jax.lib
import numpy as np

__all__ = ["exported_call", "exported_folder"]

SUFFIX = ".jaxexec"
_MEMO: dict[str, object] = {}  # key -> loaded executable (this process)
_SOURCE_DIGESTS: dict[str, str] = {}


def exported_folder() -> pathlib.Path | None:
    """``<compilation cache>/exported``, or None when the compilation cache is off."""
    folder = jax.config.jax_compilation_cache_dir
    if not folder:
        return None
    return pathlib.Path(folder) / "exported"


def exported_call(jitted, *args, **static):
    """``jitted(*args, **static)``, through a stored compiled executable when possible.

    Args:
      jitted: a ``jax.jit`` function whose keyword arguments ``static`` are its static
        arguments (hashable Python values); ``args`` are arrays (NumPy or JAX).
    Returns what ``jitted`` returns (bit-identical: the executable that ``jitted`` compiles
    for these arguments).
    """
    folder = exported_folder()
    if folder is None or any(isinstance(a, jax.core.Tracer) for a in args):
        return jitted(*args, **static)
    key = _key(jitted, args, static)
    call = _MEMO.get(key)
    if call is not None:
        return call(*args)
    path = folder / f"{key}{SUFFIX}"
    loaded = _load(path)
    if loaded is not None:
        try:  # dispatch is asynchronous: a failure shows when the results are awaited
            out = jax.block_until_ready(loaded(*args))
        except jax.errors.JaxRuntimeError:  # loads but cannot run here: compile as usual
            path.unlink(missing_ok=True)
        else:
            _MEMO[key] = loaded
            return out
    call = _compile_and_store(jitted, args, static, path)
    _MEMO[key] = call
    return call(*args)


def _key(jitted, args, static) -> str:
    """sha256 of the function's name and module source, the arguments' shapes, dtypes and
    weak types, the static arguments and what the executable was compiled for."""
    fn = getattr(jitted, "__wrapped__", jitted)
    parts = [fn.__module__, fn.__qualname__, _source_digest(fn), *_target(),
             repr(sorted(static.items()))]
    for a in args:
        aval = jax.typeof(a) if isinstance(a, jax.Array) else None
        weak = bool(getattr(aval, "weak_type", False))
        arr = np.asarray(a) if aval is None else a
        parts.append(f"{tuple(arr.shape)}:{np.dtype(arr.dtype).str}:{weak}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]


def _target() -> tuple[str, ...]:
    """What an executable is compiled for: jax and jaxlib versions, backend, device kind,
    the host CPU's feature flags (XLA's CPU code uses the host's instruction-set
    extensions), ``XLA_FLAGS``, x64 mode."""
    device = jax.devices()[0]
    return (jax.__version__, jax.lib.__version__, device.platform, device.device_kind,
            _cpu_features(), os.environ.get("XLA_FLAGS", ""),
            str(jax.config.jax_enable_x64))


@functools.cache
def _cpu_features() -> str:
    """Digest of the host CPU's feature flags (``/proc/cpuinfo``; elsewhere the machine and
    processor names)."""
    try:
        with open("/proc/cpuinfo") as fh:
            flags = next((line for line in fh if line.startswith(("flags", "Features"))), "")
    except OSError:
        flags = ""
    text = flags or f"{platform.machine()}|{platform.processor()}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _source_digest(fn) -> str:
    """Digest of the source file that defines ``fn`` (read once per process)."""
    path = inspect.getsourcefile(fn) or fn.__module__
    digest = _SOURCE_DIGESTS.get(path)
    if digest is None:
        try:
            digest = hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()
        except OSError:
            digest = "unreadable"
        _SOURCE_DIGESTS[path] = digest
    return digest


def _load(path: pathlib.Path):
    """The executable stored at ``path``; None when absent or unreadable (an unreadable
    file is removed)."""
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    try:
        from jax.experimental import serialize_executable

        payload, in_tree, out_tree = pickle.loads(blob)
        return serialize_executable.deserialize_and_load(payload, in_tree, out_tree)
    except Exception:  # a truncated or foreign file: compile as usual and replace it
        path.unlink(missing_ok=True)
        return None


def _compile_and_store(jitted, args, static, path: pathlib.Path):
    """Compile ``jitted`` for these arguments, write the executable atomically (not at all
    when the folder is unwritable or the backend cannot serialise), return it.

    The compilation bypasses the persistent compilation cache: an XLA CPU executable read
    from that cache serialises without its kernels (loaded in another process it fails
    with "Function wrapped_reduce not found"; jax 0.12). Without the switch (a private
    JAX setting) nothing is stored and ``jitted`` runs as usual."""
    from jax.experimental import serialize_executable

    try:
        from jax._src.config import enable_compilation_cache
    except ImportError:
        return functools.partial(jitted, **static)
    with enable_compilation_cache(False):
        compiled = jitted.lower(*args, **static).compile()
    try:
        blob = pickle.dumps(serialize_executable.serialize(compiled))
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as fh:
            fh.write(blob)
        os.replace(fh.name, path)
    except Exception:  # an unwritable folder, a backend without serialisation
        pass
    return compiled
