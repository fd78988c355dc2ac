"""Compiled solvers that a new process reads back instead of tracing them again.

JAX's persistent compilation cache (:mod:`graphssl.config`) stores the XLA executable, but a
new process still traces the Python function and lowers it to StableHLO before it can look
the executable up: for the mean-field sweep of a ``PottsClassifier`` fit at n = 10^3 that is
most of the fit (0.06-0.09 of 0.17 CPU s, 2-core CPU). :func:`exported_call` stores the
lowered program itself (``jax.export``, serialised) next to the compilation cache, one file
per (function, source digest, argument shapes and dtypes, static arguments, jax version,
backend); a later process deserialises it (about 2 ms) and calls it, and XLA's executable
comes from the compilation cache as before.

Correctness never depends on the files: the key holds a digest of the source of the module
that defines the function (any edit is a new key), a file that cannot be read or called is
deleted and the function traced as usual, a file is written atomically (a temporary file
then ``os.replace``), and the whole mechanism is off when the compilation cache is
(``GRAPHSSL_JAX_CACHE=0``), when JAX's serialisation support (the ``flatbuffers`` package)
is missing, or when an argument is traced (a call inside ``jit`` / ``vmap``).
Measured in ``benchmarks/bench_cost.py`` (issue 30: cost at the small end).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import inspect
import os
import pathlib
import tempfile

import jax
import numpy as np

__all__ = ["exported_call", "exported_folder"]

_MEMO: dict[str, object] = {}  # key -> jitted call of a deserialised program (this process)
_SOURCE_DIGESTS: dict[str, str] = {}


def exported_folder() -> pathlib.Path | None:
    """``<compilation cache>/exported``, or None when the compilation cache is off."""
    folder = jax.config.jax_compilation_cache_dir
    if not folder:
        return None
    return pathlib.Path(folder) / "exported"


def exported_call(jitted, *args, **static):
    """``jitted(*args, **static)``, through a stored ``jax.export`` program when possible.

    Args:
      jitted: a ``jax.jit`` function whose keyword arguments ``static`` are its static
        arguments (hashable Python values); ``args`` are arrays (NumPy or JAX).
    Returns what ``jitted`` returns (bit-identical: the same StableHLO, compiled by XLA).
    """
    folder = exported_folder()
    if (folder is None or not _serialisable()
            or any(isinstance(a, jax.core.Tracer) for a in args)):
        return jitted(*args, **static)
    key = _key(jitted, args, static)
    call = _MEMO.get(key)
    if call is None:
        call = _load(folder / f"{key}.jaxexport")
        if call is None:
            call = _export_and_store(jitted, args, static, folder / f"{key}.jaxexport")
        _MEMO[key] = call
    return call(*args)


def _key(jitted, args, static) -> str:
    """sha256 of the function's name and module source, the arguments' shapes, dtypes and
    weak types, the static arguments, jax's version and the default backend."""
    fn = getattr(jitted, "__wrapped__", jitted)
    parts = [fn.__module__, fn.__qualname__, _source_digest(fn), jax.__version__,
             jax.default_backend(), repr(sorted(static.items()))]
    for a in args:
        aval = jax.typeof(a) if isinstance(a, jax.Array) else None
        weak = bool(getattr(aval, "weak_type", False))
        arr = np.asarray(a) if aval is None else a
        parts.append(f"{tuple(arr.shape)}:{np.dtype(arr.dtype).str}:{weak}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]


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
    """The jitted call of the program stored at ``path``; None when absent or unreadable
    (an unreadable file is removed)."""
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    try:
        from jax import export

        return jax.jit(export.deserialize(bytearray(blob)).call)
    except Exception:  # a truncated or foreign file: trace as usual and replace it
        path.unlink(missing_ok=True)
        return None


@functools.cache
def _serialisable() -> bool:
    """Whether ``jax.export`` can serialise here (it needs the ``flatbuffers`` package)."""
    return importlib.util.find_spec("flatbuffers") is not None


def _export_and_store(jitted, args, static, path: pathlib.Path):
    """Export ``jitted`` at these arguments, write it atomically (not at all when the
    folder is unwritable), return its jitted call."""
    from jax import export

    exported = export.export(jitted)(*args, **static)  # for the default backend
    blob = exported.serialize()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as fh:
            fh.write(blob)
        os.replace(fh.name, path)
    except OSError:
        pass
    return jax.jit(exported.call)
