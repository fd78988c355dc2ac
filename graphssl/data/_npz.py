"""Reading ``.npz`` files defensively: the archive, a CSR matrix from its arrays, index arrays.

Shared by :func:`~graphssl.data.load_npz` and :func:`~graphssl.data.load_citation`. Every
problem is a ``ValueError`` naming the file (or argument) and the fix, so that
``load_dataset(source="auto")`` can fall back and the CLI can print one line; a corrupt CSR
matrix is refused before scipy reads outside its arrays.
"""

from __future__ import annotations

import pathlib
import zipfile
import zlib

import numpy as np
import scipy.sparse as sp

_READ_ERRORS = (OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error)


def _unreadable(path: pathlib.Path, error: Exception) -> ValueError:
    return ValueError(f"{path} is not a readable .npz archive ({type(error).__name__}: "
                      f"{error}); write it again with numpy.savez(path, X=..., y=...)")


def read_npz(path) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` archive at ``path`` (no pickles); a truncated, empty or
    non-``.npz`` file is a ``ValueError`` naming it."""
    path = pathlib.Path(path)
    try:
        loaded = np.load(path, allow_pickle=False)
    except _READ_ERRORS as error:
        raise _unreadable(path, error) from None
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise ValueError(f"{path} holds one .npy array, not a .npz archive of named arrays; "
                         "write it with numpy.savez(path, X=..., y=...)")
    try:
        with loaded:
            return {key: loaded[key] for key in loaded.files}
    except _READ_ERRORS as error:
        raise _unreadable(path, error) from None


def _is_int_array(values: np.ndarray) -> bool:
    return values.dtype.kind in "iu"


def csr_from_arrays(data, indices, indptr, shape, where: str) -> sp.csr_matrix:
    """A float64 CSR matrix from its four arrays, fully checked (column indices in
    ``0..shape[1]-1``, ``indptr`` non-decreasing and consistent with ``data``), so that no
    later ``toarray()`` reads or writes outside the matrix. ``where`` names the source."""
    shape, indices, indptr = np.asarray(shape), np.asarray(indices), np.asarray(indptr)
    if shape.shape != (2,) or not _is_int_array(shape) or shape.min() < 0:
        raise ValueError(f"{where}: 'shape' must hold two non-negative integers (rows, "
                         f"columns), got {shape.tolist()!r}")
    for name, values in (("indices", indices), ("indptr", indptr)):
        if values.ndim != 1 or not (_is_int_array(values) or values.size == 0):
            raise ValueError(f"{where}: {name!r} must be a 1-D integer array, got shape "
                             f"{values.shape} of dtype {values.dtype}")
    try:
        csr = sp.csr_matrix((np.asarray(data, dtype=np.float64), indices, indptr),
                            shape=(int(shape[0]), int(shape[1])))
        csr.check_format(full_check=True)
    except (ValueError, TypeError) as error:
        raise ValueError(f"{where}: the CSR arrays data/indices/indptr/shape do not form a "
                         f"valid {tuple(shape.tolist())} matrix ({error}); write them from a "
                         "scipy.sparse.csr_matrix (its .data, .indices, .indptr, .shape)"
                         ) from None
    return csr


def checked_csr(matrix: sp.csr_matrix, name: str) -> sp.csr_matrix:
    """``matrix`` after scipy's full format check (indices in range, ``indptr`` ordered);
    a ``ValueError`` naming ``name`` otherwise."""
    try:
        matrix.check_format(full_check=True)
    except (ValueError, TypeError) as error:
        raise ValueError(f"{name}: not a valid sparse matrix of shape {matrix.shape} ({error}); "
                         "rebuild it with scipy.sparse.csr_matrix") from None
    return matrix


def index_array(values, n: int, name: str) -> np.ndarray:
    """``values`` as ``int64`` indices in ``0..n-1`` (shape kept). Whole-valued floats are
    accepted (indices read back as floats); fractional, non-finite or out-of-range values and
    boolean masks are a ``ValueError`` naming ``name``, never truncated, wrapped or read as
    the indices 0 and 1."""
    values = np.asarray(values)
    if values.size == 0:
        return np.zeros(values.shape, dtype=np.int64)
    if values.dtype.kind == "b":
        raise ValueError(f"{name}: got a boolean array; give integer indices in 0..{n - 1} "
                         "(numpy.flatnonzero(mask) turns a mask into them)")
    if values.dtype.kind not in "iuf":
        raise ValueError(f"{name}: integer indices in 0..{n - 1}, got dtype {values.dtype}")
    if values.dtype.kind == "f":
        whole = np.isfinite(values) & (values == np.round(values))
        if not whole.all():
            raise ValueError(f"{name}: indices must be whole numbers, got "
                             f"{values[~whole].flat[0].item()!r}; a fractional index would be "
                             "truncated to another node")
    if values.min() < 0 or values.max() >= n:
        raise ValueError(f"{name}: node indices must lie in 0..{n - 1}; got "
                         f"{values.min()}..{values.max()}")
    return values.astype(np.int64)
