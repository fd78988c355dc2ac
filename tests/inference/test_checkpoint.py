"""sample_chains checkpoints: a run killed (SIGKILL, Ctrl-C) and started again with the same
arguments continues from its last checkpoint and gives the draws of an uninterrupted run."""

import dataclasses
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import jax
import numpy as np
import pytest
import scipy.sparse

import graphssl.inference.mcmc.chains as chains
import graphssl.inference.mcmc.checkpoint as ckpt
from graphssl.graph import Graph
from graphssl.inference import sample_chains

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN = dict(n_chains=4, n_samples=40, burn_in=5, checkpoint_every=10)


def _meta(folder) -> dict:
    with np.load(os.path.join(folder, "state.npz")) as data:
        return json.loads(str(data["meta"]))


def _assert_same(a, b):
    for name in ("labels", "energy", "map_labels", "map_energy", "chain_map_labels",
                 "chain_map_energy"):
        np.testing.assert_array_equal(np.asarray(getattr(a, name)), np.asarray(getattr(b, name)))
    assert a.stats.keys() == b.stats.keys() and a.n_steps == b.n_steps
    for name in a.stats:
        np.testing.assert_array_equal(a.stats[name], b.stats[name])
    for x, y in zip(jax.tree_util.tree_leaves(a.final_state),
                    jax.tree_util.tree_leaves(b.final_state), strict=True):
        np.testing.assert_array_equal(x, y)


@pytest.fixture(scope="module")
def setup(kernels, models):
    kernel, model = kernels["chromatic"], models[(True, True)]
    run = dict(RUN)
    del run["checkpoint_every"]
    # same chunks as the checkpointed runs (one compile); chunking does not change the draws
    # (test_chains), and the SIGKILL test compares with an unchunked run too
    reference = sample_chains(kernel, model, jax.random.key(7), chunk_size=10, **run)
    return kernel, model, reference


def _interrupt_at(monkeypatch, call: int):
    """Make the ``call``-th compiled chunk raise KeyboardInterrupt (a Ctrl-C mid-run)."""
    original, count = chains._run_fn, {"n": 0}

    def run_fn(*args, **kwargs):
        run = original(*args, **kwargs)

        def wrapped(*a, **k):
            count["n"] += 1
            if count["n"] == call:
                raise KeyboardInterrupt
            return run(*a, **k)

        return wrapped

    monkeypatch.setattr(chains, "_run_fn", run_fn)
    return count


def test_ctrl_c_keeps_checkpoint_and_restart_equals_uninterrupted(setup, tmp_path,
                                                                  monkeypatch):
    kernel, model, reference = setup
    folder = tmp_path / "run"
    count = _interrupt_at(monkeypatch, 3)
    with pytest.raises(KeyboardInterrupt):
        sample_chains(kernel, model, jax.random.key(7), checkpoint=folder, **RUN)
    meta = _meta(folder)
    assert (meta["n_draws"], meta["n_chunks"], meta["n_steps"]) == (20, 2, 5 + 20)
    assert sorted(os.listdir(folder)) == ["draws-000000.npz", "draws-000001.npz", "state.npz"]
    monkeypatch.undo()
    count = _interrupt_at(monkeypatch, 0)  # count the chunks the restart computes
    restarted = sample_chains(kernel, model, jax.random.key(7), checkpoint=folder, **RUN)
    assert count["n"] == 2  # draws 20..40 only
    _assert_same(restarted, reference)
    # a finished run's folder gives its draws back without sampling
    again = sample_chains(kernel, model, jax.random.key(7), checkpoint=folder, **RUN)
    assert count["n"] == 2
    _assert_same(again, reference)
    # more draws continue it: the first 40 unchanged
    more = sample_chains(kernel, model, jax.random.key(7), checkpoint=folder,
                         **(RUN | {"n_samples": 50}))
    np.testing.assert_array_equal(more.labels[:, :40], reference.labels)
    assert more.labels.shape[1] == 50 and more.n_steps == 5 + 50


def test_interrupt_while_writing_leaves_previous_checkpoint(setup, tmp_path, monkeypatch):
    kernel, model, reference = setup
    folder = tmp_path / "run"
    original, calls = np.savez, {"n": 0}

    def savez(file, **arrays):
        calls["n"] += 1
        if calls["n"] == 4:  # chunk 0, state, chunk 1, then the second state write
            file.write(b"half a file")
            raise KeyboardInterrupt
        return original(file, **arrays)

    monkeypatch.setattr(ckpt.np, "savez", savez)
    with pytest.raises(KeyboardInterrupt):
        sample_chains(kernel, model, jax.random.key(7), checkpoint=folder, **RUN)
    monkeypatch.undo()
    assert _meta(folder)["n_draws"] == 10  # the first state, whole
    assert not [f for f in os.listdir(folder) if f.endswith(".tmp")]
    restarted = sample_chains(kernel, model, jax.random.key(7), checkpoint=folder, **RUN)
    _assert_same(restarted, reference)


def test_mismatched_or_bad_checkpoint_arguments(setup, tmp_path):
    kernel, model, _ = setup
    folder = tmp_path / "run"
    first = sample_chains(kernel, model, jax.random.key(7), checkpoint=folder,
                          **(RUN | {"n_samples": 10}))
    for change, field in (({"key": jax.random.key(8)}, "key"),
                          ({"model": dataclasses.replace(model, beta=2.0)}, "model.sha256"),
                          ({"thin": 2}, "thin"), ({"n_chains": 2}, "n_chains"),
                          ({"init_labels": np.zeros(8, int)}, "init_labels")):
        args = {"key": jax.random.key(7), "model": model} | change
        with pytest.raises(ValueError, match=f"different run .*{field}"):
            sample_chains(kernel, checkpoint=folder, **(RUN | {"n_samples": 10}) | args)
    with pytest.raises(ValueError, match="already holds 10 draws"):
        sample_chains(kernel, model, jax.random.key(7), checkpoint=folder,
                      **(RUN | {"n_samples": 5}))
    with pytest.raises(ValueError, match="not both"):
        sample_chains(kernel, model, None, n_samples=5, resume=first, checkpoint=folder)
    with pytest.raises(ValueError, match="checkpoint_every"):
        sample_chains(kernel, model, jax.random.key(7), checkpoint=tmp_path / "other",
                      **(RUN | {"checkpoint_every": 0}))
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="is a file"):
        sample_chains(kernel, model, jax.random.key(7), checkpoint=tmp_path / "file", **RUN)
    # damaged draws files: truncated (BadZipFile) or holding another run's chains
    draws = sorted(folder.glob("draws-*.npz"))
    whole = draws[0].read_bytes()
    draws[0].write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match=f"{draws[0].name} is not a readable .*BadZipFile"):
        sample_chains(kernel, model, jax.random.key(7), checkpoint=folder,
                      **(RUN | {"n_samples": 12}))
    with np.load(io.BytesIO(whole)) as data:
        arrays = {name: data[name] for name in data.files}
    one_chain = {"labels": arrays["labels"][:1], "energy": arrays["energy"][:1]}
    np.savez(draws[0], **(arrays | one_chain))
    with pytest.raises(ValueError, match="does not hold this run's draws"):
        sample_chains(kernel, model, jax.random.key(7), checkpoint=folder,
                      **(RUN | {"n_samples": 12}))
    # the same shapes, other draws (a file copied from another run): the digest tells
    np.savez(draws[0], **(arrays | {"labels": 1 - arrays["labels"]}))
    with pytest.raises(ValueError, match=f"{draws[0].name} is not the draws file this run"):
        sample_chains(kernel, model, jax.random.key(7), checkpoint=folder,
                      **(RUN | {"n_samples": 12}))
    draws[0].write_bytes(whole)  # the file it wrote: read again
    again = sample_chains(kernel, model, jax.random.key(7), checkpoint=folder,
                          **(RUN | {"n_samples": 10}))
    np.testing.assert_array_equal(again.labels, first.labels)
    state = (folder / "state.npz").read_bytes()
    (folder / "state.npz").write_bytes(state[:-20])  # truncated state: BadZipFile, named
    with pytest.raises(ValueError, match="state.npz is not a readable"):
        sample_chains(kernel, model, jax.random.key(7), checkpoint=folder, **RUN)
    (folder / "state.npz").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="not a readable"):
        sample_chains(kernel, model, jax.random.key(7), checkpoint=folder, **RUN)


SCRIPT = textwrap.dedent(
    """
    import sys, time
    import jax, numpy as np
    jax.config.update("jax_enable_x64", True)
    import graphssl.inference.mcmc.chains as chains
    import graphssl.inference.mcmc.checkpoint as ckpt
    from graphssl.inference import chromatic_gibbs, sample_chains
    from tests.inference.conftest import small_model

    folder, out, pause = sys.argv[1], sys.argv[2], float(sys.argv[3])
    model = small_model(n=8, q=3, field=True, clamped=False, seed=1)
    if not pause:  # the restart's kernel gets another per-process token: still the same run
        chromatic_gibbs(model.graph)
    kernel = chromatic_gibbs(model.graph)
    run = dict(n_chains=2, n_samples=24, burn_in=3, thin=2, checkpoint_every=3)
    if pause:  # slow the run down after each checkpoint, so that the test can kill it
        write = ckpt.save_state
        def slow(*a, **k):
            write(*a, **k)
            time.sleep(pause)
        ckpt.save_state = slow
    chunks = {"n": 0}
    original = chains._run_fn
    def counted(*a, **k):
        fn = original(*a, **k)
        def call(*b, **c):
            chunks["n"] += 1
            return fn(*b, **c)
        return call
    chains._run_fn = counted
    result = sample_chains(kernel, model, jax.random.key(11), checkpoint=folder, **run)
    computed = chunks["n"]
    chains._run_fn = original
    del run["checkpoint_every"]
    plain = sample_chains(kernel, model, jax.random.key(11), **run, chunk_size=3)
    arrays = {"chunks_computed": np.array(computed)}
    for name, s in (("result", result), ("plain", plain)):
        arrays |= {f"{name}/labels": s.labels, f"{name}/energy": s.energy,
                   f"{name}/map": s.map_labels, f"{name}/steps": np.array(s.n_steps),
                   f"{name}/state": s.final_state.labels}
        arrays |= {f"{name}/stats/{k}": v for k, v in s.stats.items()}
    np.savez(out, **arrays)
    """
)


def test_sigkill_and_restart_gives_the_uninterrupted_draws(tmp_path):
    """A sampling process killed with SIGKILL after its first checkpoints, started again with
    the same arguments, continues (computes only the missing chunks) and ends with draws
    bit-identical to an uninterrupted run (same process, same chunks, no checkpoint)."""
    folder, out = str(tmp_path / "run"), str(tmp_path / "out.npz")
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    command = [sys.executable, "-c", SCRIPT, folder, out]
    victim = subprocess.Popen(command + ["1.0"], cwd=ROOT, env=env)
    state = os.path.join(folder, "state.npz")
    deadline = time.monotonic() + 240
    while not os.path.exists(state) and victim.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # past the first checkpoint, well before the eighth
    victim.send_signal(signal.SIGKILL)
    assert victim.wait(timeout=60) == -signal.SIGKILL
    assert not os.path.exists(out)
    before = _meta(folder)
    assert 0 < before["n_draws"] < 24 and before["n_chunks"] == before["n_draws"] // 3
    subprocess.run(command + ["0"], cwd=ROOT, env=env, check=True, timeout=240)
    with np.load(out) as data:
        result = {k: data[k] for k in data.files}
    assert int(result["chunks_computed"]) == 8 - before["n_chunks"]
    assert result["result/labels"].shape == (2, 24, 8) and int(result["result/steps"]) == 51
    for other in ("plain",):
        for name in [k.split("/", 1)[1] for k in result if k.startswith("result/")]:
            np.testing.assert_array_equal(result[f"result/{name}"], result[f"{other}/{name}"],
                                          err_msg=f"{other}: {name}")


def test_kernel_fingerprint_sees_functions_closures_and_arrays(models):
    """Two chromatic Gibbs kernels built at different times on one graph describe the same
    kernel (their per-process token is left out); a different graph or a different
    Metropolis rule in a closure does not."""
    from graphssl.inference import chromatic_gibbs, compose, permutation_move, swendsen_wang

    describe = lambda k: ckpt._describe(tuple(k))  # noqa: E731
    graph = models[(True, True)].graph
    assert describe(chromatic_gibbs(graph)) == describe(chromatic_gibbs(graph))
    ring = np.arange(8)
    edges = np.concatenate([ring, (ring + 1) % 8]), np.concatenate([(ring + 1) % 8, ring])
    cycle = Graph.from_scipy(scipy.sparse.coo_matrix((np.ones(16), edges), (8, 8)).tocsr())
    assert describe(chromatic_gibbs(graph)) != describe(chromatic_gibbs(cycle))
    assert describe(compose(swendsen_wang(), permutation_move())) != describe(
        compose(swendsen_wang(), permutation_move(rule="barker")))


def test_fingerprint_reads_numpy_scalars_by_value():
    """A kernel bound to ``np.int64(1)`` sweeps was continued with ``np.int64(5)``: the
    description kept the scalar's type name only."""
    from graphssl.inference.mcmc.kernels import Kernel

    def multi(step, sweeps, model, key, state):
        return step(model, key, state)

    def kernel(sweeps):
        return Kernel(None, jax.tree_util.Partial(multi, None, sweeps), None, None)

    def describe(sweeps):
        return ckpt._describe(kernel(sweeps).step)

    assert describe(np.int64(1)) != describe(np.int64(5))
    assert describe(np.float32(0.5)) == describe(np.float32(0.5))
    assert describe(np.float64(np.nan)) == describe(np.float64(np.nan))


def test_unwritable_folder_is_named_before_sampling(setup, tmp_path, monkeypatch):
    """A read-only folder failed with a PermissionError on a temporary file's name, after
    the first chunk had been sampled."""
    kernel, model, _ = setup
    real = ckpt.Path.write_bytes

    def refuse(self, data):
        if self.name.startswith(".write-test"):
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, data)

    monkeypatch.setattr(ckpt.Path, "write_bytes", refuse)
    sampled = []
    monkeypatch.setattr(chains, "_run_fn", lambda *a, **k: sampled.append(1))
    with pytest.raises(ValueError, match="checkpoint: the folder .* cannot be written"):
        sample_chains(kernel, model, jax.random.key(7), checkpoint=tmp_path / "ro", **RUN)
    assert not sampled
