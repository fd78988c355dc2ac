"""graphssl._exported: a stored ``jax.export`` program gives the jitted function's outputs
bit for bit, is read back by a new call (another process), is keyed by shapes, dtypes,
static arguments and source, and never fails a computation (unreadable file, cache off,
traced arguments)."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from graphssl import _exported
from graphssl.inference.optimize.mean_field import MeanFieldOptions, solve_mean_field

pytest.importorskip("flatbuffers", reason="jax.export serialisation needs flatbuffers")


@partial(jax.jit, static_argnames=("power",))
def _poly(x, y, power):
    return jnp.sum(x**power, axis=0) + y, jnp.max(x)


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A fresh folder of stored programs, and no program memoised in this process."""
    monkeypatch.setattr(_exported, "exported_folder", lambda: tmp_path)
    monkeypatch.setattr(_exported, "_MEMO", {})
    return tmp_path


def _files(folder):
    return sorted(p.name for p in folder.glob("*.jaxexport"))


def test_stored_program_gives_the_jitted_outputs_and_is_read_back(folder):
    x, y = np.arange(12.0).reshape(4, 3), np.ones(3)
    want = _poly(x, y, power=3)
    got = _exported.exported_call(_poly, x, y, power=3)
    assert len(_files(folder)) == 1
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    _exported._MEMO.clear()  # as a new process: read from the file
    again = _exported.exported_call(_poly, x, y, power=3)
    np.testing.assert_array_equal(np.asarray(again[0]), np.asarray(want[0]))
    assert len(_files(folder)) == 1
    # new shape, dtype or static argument: a new program
    _exported.exported_call(_poly, x[:2], y, power=3)
    _exported.exported_call(_poly, x.astype(np.float32), y.astype(np.float32), power=3)
    out = _exported.exported_call(_poly, x, y, power=2)
    np.testing.assert_array_equal(np.asarray(out[0]), np.asarray(_poly(x, y, power=2)[0]))
    assert len(_files(folder)) == 4


def test_unreadable_file_is_replaced_and_off_or_traced_calls_jit(folder, monkeypatch):
    x, y = np.arange(6.0).reshape(2, 3), np.zeros(3)
    _exported.exported_call(_poly, x, y, power=2)
    (path,) = folder.glob("*.jaxexport")
    path.write_bytes(b"truncated")
    _exported._MEMO.clear()
    out = _exported.exported_call(_poly, x, y, power=2)
    np.testing.assert_array_equal(np.asarray(out[0]), np.sum(x**2, axis=0))
    assert path.stat().st_size > len(b"truncated")  # written again
    # inside jit the arguments are traced: the plain function is traced with them
    traced = jax.jit(lambda a: _exported.exported_call(_poly, a, y, power=2)[0])(x)
    np.testing.assert_array_equal(np.asarray(traced), np.sum(x**2, axis=0))
    _exported._MEMO.clear()
    path.unlink()
    monkeypatch.setattr(_exported, "_serialisable", lambda: False)  # no flatbuffers
    _exported.exported_call(_poly, x, y, power=2)
    assert _files(folder) == [] and _exported._MEMO == {}
    monkeypatch.undo()
    monkeypatch.setattr(_exported, "exported_folder", lambda: None)  # cache off
    _exported.exported_call(_poly, x, y, power=2)
    assert _files(folder) == []


def test_the_source_digest_is_part_of_the_key(folder, monkeypatch):
    x, y = np.ones((2, 2)), np.ones(2)
    first = _exported._key(_poly, (x, y), {"power": 2})
    monkeypatch.setattr(_exported, "_SOURCE_DIGESTS", {})
    monkeypatch.setattr(_exported.pathlib.Path, "read_bytes", lambda self: b"edited source")
    assert _exported._key(_poly, (x, y), {"power": 2}) != first


@pytest.mark.parametrize("order", ["sequential", "parallel"])
def test_mean_field_through_a_stored_program_equals_the_plain_solve(folder, monkeypatch, order):
    rng = np.random.default_rng(0)
    n, q, d = 40, 3, 4
    unary = rng.normal(size=(n, q))
    index = rng.integers(0, n, (n, d)).astype(np.int32)
    weight = rng.random((n, d)) / d
    clamped = np.zeros(n, bool)
    clamped[:5] = True
    options = MeanFieldOptions(order=order, tol=1e-8, max_iter=500)
    stored, info = solve_mean_field(unary, index, weight, clamped, np.arange(n) % q,
                                    options=options)
    assert len(_files(folder)) == 1
    monkeypatch.setattr(_exported, "exported_folder", lambda: None)
    plain, plain_info = solve_mean_field(unary, index, weight, clamped, np.arange(n) % q,
                                         options=options)
    np.testing.assert_array_equal(np.asarray(stored.fields), np.asarray(plain.fields))
    assert int(info.iterations) == int(plain_info.iterations)
