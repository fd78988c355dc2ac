"""graphssl._exported: a stored compiled executable gives the jitted function's outputs
bit for bit, is read back by a new call (another process), is keyed by shapes, dtypes,
static arguments and source, and never fails a computation (unreadable file, cache off,
traced arguments)."""

from __future__ import annotations

import os
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from graphssl import _exported
from graphssl.inference.optimize.mean_field import MeanFieldOptions, solve_mean_field


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
    return sorted(p.name for p in folder.glob(f"*{_exported.SUFFIX}"))


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
    (path,) = folder.glob(f"*{_exported.SUFFIX}")
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
    monkeypatch.setattr(_exported, "exported_folder", lambda: None)  # cache off
    _exported.exported_call(_poly, x, y, power=2)
    assert _files(folder) == []


def test_the_source_digest_and_the_target_are_part_of_the_key(folder, monkeypatch):
    x, y = np.ones((2, 2)), np.ones(2)
    first = _exported._key(_poly, (x, y), {"power": 2})
    flags = os.environ.get("XLA_FLAGS", "")
    monkeypatch.setenv("XLA_FLAGS", flags + " --xla_cpu_enable_fast_math=true")
    assert _exported._key(_poly, (x, y), {"power": 2}) != first
    monkeypatch.setenv("XLA_FLAGS", flags)
    assert _exported._key(_poly, (x, y), {"power": 2}) == first
    features = _exported._cpu_features
    monkeypatch.setattr(_exported, "_cpu_features", lambda: "another instruction set")
    assert _exported._key(_poly, (x, y), {"power": 2}) != first
    monkeypatch.setattr(_exported, "_cpu_features", features)
    assert _exported._key(_poly, (x, y), {"power": 2}) == first
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
    # the compiled engine (engine="auto" solves a graph this small in NumPy)
    options = MeanFieldOptions(order=order, tol=1e-8, max_iter=500, engine="compiled")
    stored, info = solve_mean_field(unary, index, weight, clamped, np.arange(n) % q,
                                    options=options)
    assert len(_files(folder)) == 1
    monkeypatch.setattr(_exported, "exported_folder", lambda: None)
    plain, plain_info = solve_mean_field(unary, index, weight, clamped, np.arange(n) % q,
                                         options=options)
    np.testing.assert_array_equal(np.asarray(stored.fields), np.asarray(plain.fields))
    assert int(info.iterations) == int(plain_info.iterations)


_STORE_AND_SOLVE = """
import json, sys
import jax
import numpy as np
from graphssl import _exported
from graphssl.inference.optimize.mean_field import MeanFieldOptions, solve_mean_field

jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)  # every program
compiled = []
store = _exported._compile_and_store
_exported._compile_and_store = lambda *a: compiled.append(1) or store(*a)
rng = np.random.default_rng(0)
n, q, d = 30, 3, 4
solution, info = solve_mean_field(
    rng.normal(size=(n, q)), rng.integers(0, n, (n, d)).astype(np.int32),
    rng.random((n, d)) / d, np.arange(n) < 4, np.arange(n) % q,
    options=MeanFieldOptions(order="sequential", tol=1e-8, max_iter=300, engine="compiled"))
print(json.dumps({"compiled": len(compiled), "iterations": int(info.iterations),
                  "fields": np.asarray(solution.fields).tolist()}))
"""


def test_a_stored_executable_runs_in_a_new_process(tmp_path):
    """A process stores the executable, a new process (its own JAX, same cache folder)
    loads it and runs it, nothing compiled, same fields. Run 2 finds the program in JAX's
    persistent cache but not among the stored executables: an executable that cache serves
    serialises without its kernels (jax 0.12: "Function wrapped_reduce not found" in the
    next process, which then compiles again), so the store compiles past that cache."""
    import json
    import shutil
    import subprocess
    import sys

    env = {**os.environ, "GRAPHSSL_JAX_CACHE": str(tmp_path), "JAX_PLATFORMS": "cpu"}
    runs = []
    for run in range(3):  # 1: compiles into both caches; 2: stores again; 3: loads and runs
        proc = subprocess.run([sys.executable, "-c", _STORE_AND_SOLVE], capture_output=True,
                              text=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        if run == 0:
            shutil.rmtree(tmp_path / "exported")
    assert [r["compiled"] for r in runs] == [1, 1, 0]
    assert runs[1]["fields"] == runs[0]["fields"] == runs[2]["fields"]
    assert len(list((tmp_path / "exported").glob(f"*{_exported.SUFFIX}"))) == 1


def test_an_executable_that_fails_to_run_is_replaced(folder, monkeypatch):
    x, y = np.arange(6.0).reshape(2, 3), np.zeros(3)
    _exported.exported_call(_poly, x, y, power=2)
    (path,) = folder.glob(f"*{_exported.SUFFIX}")
    _exported._MEMO.clear()

    def broken(*args):
        raise jax.errors.JaxRuntimeError("NOT_FOUND: Function wrapped_reduce not found")

    monkeypatch.setattr(_exported, "_load", lambda path: broken)
    out = _exported.exported_call(_poly, x, y, power=2)
    np.testing.assert_array_equal(np.asarray(out[0]), np.sum(x**2, axis=0))
    assert path.exists()  # deleted, then written again by the fresh compilation
    assert _exported._MEMO and broken not in _exported._MEMO.values()
