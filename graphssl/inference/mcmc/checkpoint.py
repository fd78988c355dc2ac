"""Checkpoints of :func:`~graphssl.inference.mcmc.chains.sample_chains`: chains that survive
the death of their process.

With ``sample_chains(..., checkpoint=folder, checkpoint_every=m)`` the draws are computed in
chunks of ``m`` draws and, after each chunk, the run's whole state goes to ``folder``. Started
again with the same arguments (a new process after ``SIGKILL``, a crash, a Ctrl-C), the run
loads the last checkpoint and continues: step ``t`` of chain ``c`` uses the key
``fold_in(chain_key[c], t)``, so the continued run gives the draws of an uninterrupted one
bit for bit (same device and chunking).

On-disk format (version 1), one folder per run; plain ``.npz`` files (``numpy.load`` reads
them, no pickle):

* ``draws-000000.npz``, ``draws-000001.npz``, ...: one per finished chunk, written before the
  state that counts it: ``labels`` (``int8/16/32[chains, draws, n]``), ``energy``
  (``[chains, draws]``) and ``stats/<name>`` (``[chains, draws]``) per move statistic: one
  per field of the kernel's info NamedTuple, under the field's name (``Samples.stats``'s
  keys, :func:`~graphssl.inference.mcmc.kernels.info_dict`); the info type itself is not
  stored, so a run read back gives the same ``stats`` dict as the run that wrote it.
* ``state.npz``: ``meta``, a JSON string: ``{"format": "graphssl.sample_chains",
  "version": 1, "fingerprint": {...}, "n_steps": steps done per chain (burn-in included),
  "n_draws": draws kept so far, "n_chunks": draws files that belong to the run,
  "chunk_digests": a SHA-256 of each draws file's arrays}``;
  ``chain_keys`` (raw key data, ``jax.random.key_data``, when the keys are typed) and
  ``carry/<i>`` for each leaf of the scan carry ``(kernel state, per-chain MAP energy,
  per-chain MAP labels)`` in ``jax.tree_util`` order.

Every file is written to a temporary name in the same folder, flushed to disk (``fsync``) and
moved over the old one with ``os.replace`` (atomic on POSIX and Windows): a process killed at
any instant leaves the previous checkpoint whole, and a ``KeyboardInterrupt`` leaves the last
one intact. Draws files beyond ``n_chunks`` (a chunk saved just before the kill) are ignored
and overwritten. A draws file whose arrays do not match its digest (copied from another run
of the same shapes, or damaged) is refused by name.

The ``fingerprint`` holds what must match for a continuation to be the same run: ``n_chains``,
``burn_in``, ``thin``, the label storage type, the model (type, leaf shapes and dtypes, and a
SHA-256 of its arrays), the kernel (the qualified names of its functions, their bound
arguments, captured closure values and arrays, as far as ``functools.partial`` /
``jax.tree_util.Partial`` and ``__closure__`` reach; state held in objects and process-local
tags such as chromatic Gibbs' ``token`` are not part of it), the energy function,
``batched_model``, the key and ``init_labels``. A mismatch raises a ``ValueError`` naming
the fields that differ. ``n_samples`` is not part of it: a later call with more samples
continues the run, and a call with as many returns the stored draws without sampling.

Why ``.npz`` and not orbax or netCDF: the state is a handful of host arrays per chunk, written
from one process; ``numpy`` alone reads and writes it atomically with the steps above, without
orbax's asynchronous, multi-host machinery (and its tensorstore dependency) or a netCDF
schema for a kernel state whose fields differ from kernel to kernel.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import zipfile
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

__all__ = ["FORMAT", "VERSION", "Checkpoint", "fingerprint", "chunk_size", "open_run", "save",
           "load", "save_chunk", "save_state", "restore", "is_key"]

FORMAT = "graphssl.sample_chains"
VERSION = 1
STATE = "state.npz"


class Checkpoint(NamedTuple):
    """What :func:`load` read: ``meta`` (the JSON dict), ``chain_keys`` and ``carry`` leaves
    as numpy arrays, and ``chunks``: one ``(labels, energy, stats)`` per finished chunk."""

    meta: dict
    chain_keys: np.ndarray
    carry: list
    chunks: list


def is_key(x) -> bool:
    """Whether ``x`` is a typed PRNG key array (``jax.random.key``)."""
    return jax.dtypes.issubdtype(getattr(x, "dtype", None), jax.dtypes.prng_key)


def _host(x) -> np.ndarray:
    return np.asarray(jax.random.key_data(x) if is_key(x) else x)


def _digest(x) -> str:
    arr = np.ascontiguousarray(_host(x))
    h = hashlib.sha256(f"{arr.dtype.str}{arr.shape}".encode())
    h.update(arr.view(np.uint8).reshape(-1) if arr.size else b"")
    return h.hexdigest()[:16]


# keyword arguments that differ between processes for the same kernel (chromatic Gibbs tags
# its prepared model with a per-process counter): left out of the kernel's description
_PROCESS_LOCAL = frozenset({"token"})


def _describe(obj, depth: int = 0, values: bool = True):
    """A JSON-able description of a kernel / energy function: qualified names of functions,
    bound arguments, digests of arrays (``values=False``: arrays and NumPy scalars by dtype
    and shape only, which is what a chain state's layout depends on)."""
    if depth > 12:
        return "..."
    if isinstance(obj, functools.partial):  # jax.tree_util.Partial is one
        return {"partial": _describe(obj.func, depth + 1, values),
                "args": [_describe(a, depth + 1, values) for a in obj.args],
                "keywords": {k: _describe(v, depth + 1, values)
                             for k, v in sorted(obj.keywords.items())
                             if k not in _PROCESS_LOCAL}}
    if isinstance(obj, np.generic) and not isinstance(obj, np.void):  # np.int64(5): by value
        if not values:
            return str(obj.dtype)
        return {str(obj.dtype): obj.item() if np.isfinite(obj) else str(obj)}
    if isinstance(obj, (jax.Array, np.ndarray)):
        return {"array": [list(np.shape(obj)), str(obj.dtype)] + ([_digest(obj)] if values
                                                                     else [])}
    if isinstance(obj, tuple | list):
        kind = type(obj).__qualname__
        return {kind: [_describe(x, depth + 1, values) for x in obj]}
    if isinstance(obj, dict):
        return {str(k): _describe(v, depth + 1, values) for k, v in sorted(obj.items(), key=str)}
    wrapped = getattr(obj, "fun", None)  # jax.tree_util.Partial's shim around a partial
    if callable(wrapped) and not isinstance(obj, functools.partial):
        return _describe(wrapped, depth + 1, values)
    if callable(obj):
        name = getattr(obj, "__qualname__", type(obj).__qualname__)
        name = f"{getattr(obj, '__module__', '?')}.{name}"
        cells = getattr(obj, "__closure__", None) or ()
        if not cells:
            return name
        captured = []
        for cell in cells:
            try:
                captured.append(_describe(cell.cell_contents, depth + 1, values))
            except ValueError:  # an empty cell
                captured.append(None)
        return {"function": name, "captured": captured}
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    return type(obj).__qualname__


def _model_description(model) -> dict:
    leaves, _ = jax.tree_util.tree_flatten(model)
    h = hashlib.sha256()
    shapes = []
    for leaf in leaves:
        shapes.append([list(np.shape(leaf)), str(getattr(leaf, "dtype", type(leaf).__name__))])
        h.update(_digest(leaf).encode())
    return {"type": f"{type(model).__module__}.{type(model).__qualname__}",
            "n_nodes": int(getattr(model, "n_nodes", -1)),
            "n_classes": int(getattr(model, "n_classes", -1)),
            "leaves": shapes, "sha256": h.hexdigest()[:16]}


def fingerprint(*, kernel, model, key, n_chains, burn_in, thin, dtype, init_labels, energy_fn,
                batched_model) -> dict:
    """The JSON-able record a checkpoint must match to be continued (see the module doc)."""
    return {
        "n_chains": int(n_chains), "burn_in": int(burn_in), "thin": int(thin),
        "label_dtype": np.dtype(dtype).name,
        "model": _model_description(model),
        "kernel": _describe(tuple(kernel)),
        "energy": _describe(energy_fn),
        "batched_model": bool(batched_model),
        "key": None if key is None else _digest(key),
        "init_labels": None if init_labels is None else _digest(np.asarray(init_labels)),
    }


def _differences(old, new, prefix="") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new)):
            out += _differences(old.get(k), new.get(k), f"{prefix}{k}.")
        return out
    return [prefix.rstrip(".")] if old != new else []


def _atomic_savez(path: Path, arrays: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:  # KeyboardInterrupt too: never leave a half-written file behind
        tmp.unlink(missing_ok=True)
        raise
    try:  # make the rename itself durable (POSIX; not available everywhere)
        fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _chunk_path(folder: Path, index: int) -> Path:
    return folder / f"draws-{index:06d}.npz"


def _chunk_digest(arrays: dict) -> str:
    """SHA-256 over a draws file's arrays (names, dtypes, shapes and bytes)."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        h.update(f"{name}:{_digest(arrays[name])};".encode())
    return h.hexdigest()[:16]


def save_chunk(folder, index: int, labels, energy, stats: dict) -> str:
    """Write the draws of chunk ``index`` (atomically); returns their digest."""
    folder = Path(folder)
    arrays = {"labels": _host(labels), "energy": _host(energy)}
    arrays |= {f"stats/{name}": _host(value) for name, value in stats.items()}
    _atomic_savez(_chunk_path(folder, index), arrays)
    return _chunk_digest(arrays)


def save_state(folder, *, fingerprint: dict, n_steps: int, n_draws: int, n_chunks: int,
               chain_keys, carry, chunk_digests=None) -> None:
    """Write ``state.npz`` (atomically): the point from which a run continues.
    ``chunk_digests``: one per draws file (None where unknown), checked by :func:`load`."""
    folder = Path(folder)
    meta = {"format": FORMAT, "version": VERSION, "fingerprint": fingerprint,
            "n_steps": int(n_steps), "n_draws": int(n_draws), "n_chunks": int(n_chunks)}
    if chunk_digests is not None:
        meta["chunk_digests"] = list(chunk_digests)
    arrays = {"meta": np.array(json.dumps(meta)), "chain_keys": _host(chain_keys)}
    leaves = jax.tree_util.tree_leaves(carry)
    arrays |= {f"carry/{i}": _host(leaf) for i, leaf in enumerate(leaves)}
    _atomic_savez(folder / STATE, arrays)


def load(folder, expected: dict) -> Checkpoint | None:
    """The checkpoint in ``folder`` (None when it holds none yet). Raises ``ValueError`` when
    it is not a version-1 ``sample_chains`` checkpoint, when its fingerprint differs from
    ``expected`` (naming the fields), or when a draws file is missing."""
    folder = Path(folder)
    path = folder / STATE
    if not path.exists():
        return None
    state = _read_npz(path)
    try:
        meta = json.loads(str(state["meta"]))
        chain_keys = state["chain_keys"]
        n_leaves = sum(name.startswith("carry/") for name in state)
        carry = [state[f"carry/{i}"] for i in range(n_leaves)]
    except (ValueError, KeyError) as err:
        raise ValueError(f"checkpoint: {path} is not a readable sample_chains checkpoint "
                         f"({type(err).__name__}: {err}); delete the folder or pass another "
                         "checkpoint path") from None
    if meta.get("format") != FORMAT or meta.get("version") != VERSION:
        raise ValueError(f"checkpoint: {path} has format {meta.get('format')!r} version "
                         f"{meta.get('version')!r}; expected {FORMAT!r} version {VERSION}")
    diff = _differences(meta["fingerprint"], json.loads(json.dumps(expected)))
    if diff:
        raise ValueError(
            f"checkpoint: {folder} was written by a different run (differs in: "
            f"{', '.join(diff)}); start it with the same arguments, or use a new checkpoint "
            "path (or delete this one) to start afresh")
    chunks = []
    for index in range(int(meta["n_chunks"])):
        chunk = _chunk_path(folder, index)
        if not chunk.exists():
            raise ValueError(f"checkpoint: {chunk} is missing; the checkpoint in {folder} is "
                             "incomplete: delete the folder to start afresh")
        data = _read_npz(chunk)
        stats = {name[len("stats/"):]: data[name] for name in data if name.startswith("stats/")}
        labels, energy = data.get("labels"), data.get("energy")
        if (labels is None or energy is None or labels.ndim != 3
                or labels.shape[0] != len(chain_keys) or energy.shape != labels.shape[:2]):
            raise ValueError(f"checkpoint: {chunk} does not hold this run's draws (expected "
                             f"labels [{len(chain_keys)} chains, draws, nodes]); delete the "
                             "folder to start afresh")
        digests = meta.get("chunk_digests") or []
        if index < len(digests) and digests[index] not in (None, _chunk_digest(data)):
            raise ValueError(f"checkpoint: {chunk} is not the draws file this run wrote (its "
                             f"content differs from the digest in {STATE}: replaced or "
                             "damaged); delete the folder to start afresh")
        chunks.append((labels, energy, stats))
    held = sum(labels.shape[1] for labels, _, _ in chunks)
    if held != int(meta["n_draws"]) or len({c[0].shape[2] for c in chunks}) > 1:
        raise ValueError(f"checkpoint: the draws files in {folder} hold {held} draws, its state "
                         f"says {meta['n_draws']}; delete the folder to start afresh")
    return Checkpoint(meta, chain_keys, carry, chunks)


def _read_npz(path: Path) -> dict:
    """Every array of an ``.npz`` file, or a ``ValueError`` naming the file when it is
    damaged (truncated: ``BadZipFile`` / ``EOFError``; unreadable: ``OSError``)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise ValueError(f"checkpoint: {path} is not a readable sample_chains checkpoint file "
                         f"({type(err).__name__}: {err}); delete the folder {path.parent} to "
                         "start afresh") from None


def restore(template, leaves, key_impl) -> Any:
    """The pytree of ``template`` (arrays or ``ShapeDtypeStruct``) with the stored ``leaves``
    (typed PRNG keys rewrapped with ``key_impl``); shapes and dtypes are checked."""
    flat, treedef = jax.tree_util.tree_flatten(template)
    if len(flat) != len(leaves):
        raise ValueError(f"checkpoint: the stored kernel state has {len(leaves)} arrays, this "
                         f"kernel's has {len(flat)}; use a new checkpoint path")
    out = []
    for want, got in zip(flat, leaves, strict=True):
        if is_key(want):
            value = jax.random.wrap_key_data(jax.numpy.asarray(got), impl=key_impl)
        else:
            value = jax.numpy.asarray(got, dtype=want.dtype)
        if value.shape != want.shape:
            raise ValueError(f"checkpoint: stored array of shape {value.shape} where the run "
                             f"has {want.shape}; use a new checkpoint path")
        out.append(value)
    return jax.tree_util.tree_unflatten(treedef, out)


def chunk_size(n_samples: int, chunk_size: int | None, every: int | None) -> int:
    """Draws per compiled chunk with checkpoints: ``every`` (default ``ceil(n_samples / 10)``),
    capped by ``chunk_size``. Derived from the run's whole ``n_samples`` so that a restarted
    run cuts its chunks where the first one did."""
    if every is None:
        every = max(1, -(-int(n_samples) // 10))
    if isinstance(every, bool) or int(every) != every or every < 1:
        raise ValueError(f"checkpoint_every must be an integer >= 1, got {every!r}")
    return int(every) if chunk_size is None else max(1, min(int(chunk_size), int(every)))


def open_run(folder, fingerprint: dict, initial, key, n_samples: int):
    """Where a run with checkpoint ``folder`` starts: None (no folder, or nothing stored yet:
    start afresh) or ``(chain_keys, carry, n_steps, n_draws, outputs)`` from the stored
    checkpoint, ``outputs`` = one ``(labels, energy, stats)`` per finished chunk. ``initial``
    (no arguments) gives the fresh ``(chain_keys, carry)``; only its shapes are used here."""
    if folder is None:
        return None
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"checkpoint: {folder} is a file; give a folder path")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"checkpoint: cannot create the folder {folder} ({err}); give a "
                         "writable path") from None
    loaded = load(folder, fingerprint)
    if loaded is None or int(loaded.meta["n_draws"]) < n_samples:
        _check_writable(folder)  # before the first chunk is computed, not after it
    if loaded is None:
        return None
    done = int(loaded.meta["n_draws"])
    if done > n_samples:
        raise ValueError(f"n_samples={n_samples}: the checkpoint in {folder} already holds "
                         f"{done} draws per chain; ask for at least that many")
    impl = jax.random.key_impl(key) if is_key(key) else None
    chain_keys, carry = restore(jax.eval_shape(initial), [loaded.chain_keys, *loaded.carry],
                                impl)
    jnp = jax.numpy
    outputs = [(jnp.asarray(labels), jnp.asarray(energy),
                {name: jnp.asarray(v) for name, v in stats.items()})
               for labels, energy, stats in loaded.chunks]
    return chain_keys, carry, int(loaded.meta["n_steps"]), done, outputs


def _check_writable(folder: Path) -> None:
    """A ``ValueError`` naming ``checkpoint`` when ``folder`` takes no new file (read-only,
    no permission): found after the first chunk's sampling, it cost that chunk."""
    probe = folder / f".write-test.{os.getpid()}.tmp"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise ValueError(f"checkpoint: the folder {folder} cannot be written ({err}); give a "
                         "writable path") from None


def save(folder, fingerprint: dict, outputs: list, out, *, n_steps: int, chain_keys,
         carry) -> None:
    """Checkpoint after a chunk: its draws ``out = (labels, energy, stats)`` (None after a
    burn-in-only run) as draws file ``len(outputs)``, then the state that counts it."""
    n_chunks = len(outputs)
    n_draws = sum(int(o[0].shape[1]) for o in outputs)
    digests = _stored_digests(Path(folder), n_chunks)
    if out is not None:
        digests.append(save_chunk(folder, n_chunks, *out))
        n_chunks, n_draws = n_chunks + 1, n_draws + int(out[0].shape[1])
    save_state(folder, fingerprint=fingerprint, n_steps=n_steps, n_draws=n_draws,
               n_chunks=n_chunks, chain_keys=chain_keys, carry=carry, chunk_digests=digests)


def _stored_digests(folder: Path, n_chunks: int) -> list:
    """The digests of the first ``n_chunks`` draws files from the state on disk (None for
    each one a checkpoint written before digests were kept does not name)."""
    stored = []
    if (folder / STATE).exists():
        with np.load(folder / STATE, allow_pickle=False) as data:  # reads "meta" alone
            stored = json.loads(str(data["meta"])).get("chunk_digests") or []
    return [stored[i] if i < len(stored) else None for i in range(n_chunks)]
