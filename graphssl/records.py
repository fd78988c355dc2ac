"""What the comparison suite and ``graphssl run`` write and read back: files written
atomically, strict JSON, exact content fingerprints (the keys that decide whether a stored
result is reused) and model names that are safe file names. Re-exported by
:mod:`graphssl.suite`."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pathlib
import pickle
import re
import uuid

import numpy as np

__all__ = ["atomic_write", "strict_json", "read_run", "fingerprint", "check_model_names"]


def atomic_write(path, data: bytes | str) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder renamed over
    it (``os.replace``): readers see the old file or the new one, never a partial one."""
    path = pathlib.Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    payload = data.encode() if isinstance(data, str) else data
    try:
        with open(tmp, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def strict_json(value):
    """``value`` with NumPy and JAX scalars and arrays as Python numbers and lists, and NaN /
    inf as ``null``: JSON that strict parsers (a browser's ``JSON.parse``) read; Python's
    ``NaN`` token is not JSON. Every JSON file the package writes goes through it."""
    if isinstance(value, dict):
        return {str(k): strict_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict_json(v) for v in value]
    if not isinstance(value, str | bytes) and hasattr(value, "__array__"):
        value = np.asarray(value)
        return strict_json(value.tolist()) if value.ndim else strict_json(value.item())
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def read_run(path, key: str) -> tuple[dict | None, str | None]:
    """A stored run record, or ``(None, why it cannot be used)``.

    ``why`` is ``None`` when the file does not exist; otherwise it says what is wrong
    (not JSON, not a record, other settings) so that the caller can report it and refit.
    """
    path = pathlib.Path(path)
    if not path.exists():
        return None, None
    try:
        stored = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        return None, f"damaged ({type(err).__name__}: {err})"
    if not isinstance(stored, dict) or "model" not in stored:
        return None, "damaged (not a run record)"
    if stored.get("config_key") != key:
        return None, "from other settings (config, data, split or budget changed)"
    return stored, None


def fingerprint(*values) -> str:
    """SHA-256 (16 hex digits) of ``values``, exact: NumPy / JAX arrays by dtype, shape and
    bytes (never their abbreviated ``str``), floats by every bit (``float.hex``), dicts by
    their items whatever the key order, lists / tuples / sets, dataclasses (a
    :class:`graphssl.graph.Graph`) by their fields, scipy.sparse matrices by their COO
    arrays; any other object by its pickle (else its ``repr``). Equal inputs give equal
    keys in any process; ``1`` and ``1.0``, or a list and a tuple, give different ones."""
    digest = hashlib.sha256()
    for value in values:
        _digest(digest, value)
    return digest.hexdigest()[:16]


def _digest(digest, value) -> None:
    """Feed one value to ``digest`` as (type tag, length, payload) records (unambiguous)."""
    def put(tag: str, payload: bytes = b"") -> None:
        digest.update(f"{tag}:{len(payload)}:".encode() + payload)

    if isinstance(value, np.ndarray | np.generic) or (
            hasattr(value, "__array__") and not isinstance(value, str | bytes)):
        array = np.asarray(value)
        put("array", f"{array.dtype.str}{array.shape}".encode())
        if array.dtype == object:
            for item in array.ravel():
                _digest(digest, item)
        else:
            put("bytes", np.ascontiguousarray(array).tobytes())
    elif value is None or isinstance(value, bool | int | str):
        put(type(value).__name__, repr(value).encode())
    elif isinstance(value, float):
        put("float", value.hex().encode())
    elif isinstance(value, bytes):
        put("bytes", value)
    elif isinstance(value, dict):
        put("dict", str(len(value)).encode())
        for k, v in sorted(value.items(), key=lambda item: fingerprint(item[0])):
            _digest(digest, k)
            _digest(digest, v)
    elif isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=fingerprint) if isinstance(value, set | frozenset) else value
        put(type(value).__name__, str(len(items)).encode())
        for item in items:
            _digest(digest, item)
    else:
        _digest_object(digest, value, put)


def _digest_object(digest, value, put) -> None:
    """:func:`_digest` for a dataclass, a sparse matrix, a path or any other object."""
    import scipy.sparse as sp

    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        put("dataclass", kind.encode())
        for field in dataclasses.fields(value):
            _digest(digest, field.name)
            _digest(digest, getattr(value, field.name))
    elif sp.issparse(value):
        coo = value.tocoo()
        put("sparse", f"{kind}{coo.shape}".encode())
        for array in (coo.row, coo.col, coo.data):
            _digest(digest, array)
    elif isinstance(value, os.PathLike):
        put("path", os.fspath(value).encode())
    else:
        try:
            put("pickle", kind.encode() + pickle.dumps(value, protocol=5))
        except Exception:  # noqa: BLE001 - unpicklable: its text is the best we have
            put("repr", kind.encode() + repr(value).encode())


_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.=+-]{0,199}")


def check_model_names(names) -> None:
    """Refuse model names that cannot be file names (they name ``runs/<name>__split<i>.json``,
    ``arviz/...``, ``plots/<name>.png`` and ``plots/<name>_energy.png``): a name must be a
    string of letters, digits and ``_ . = + -``, not starting with ``.``, ``=``, ``+`` or
    ``-``, at most 200 characters, and no two names may write the same file, even on a
    case-insensitive file system. Raises ``ValueError`` naming the model and a usable name."""
    owners: dict[str, str] = {}
    for name in names:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            usable = re.sub(r"[^A-Za-z0-9_.=+-]", "_", str(name)).lstrip(".=+-")[:200] or "model"
            raise ValueError(
                f"models: the name {name!r} cannot be used: it names the result files, so it "
                "may hold only letters, digits and _ . = + - (not first: . = + -), at most "
                f"200 characters; rename it, e.g. {usable!r}")
        for stem in (name, f"{name}_energy"):
            other = owners.setdefault(stem.casefold(), name)
            if other != name:
                raise ValueError(
                    f"models: {other!r} and {name!r} would write the same file "
                    f"(plots/{stem}.png, names compared ignoring case); rename one of them")
