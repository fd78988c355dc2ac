"""The comparison grid on a real two-process Dask cluster: same records as the serial run,
and a worker killed (SIGKILL) mid-fit loses nothing and writes nothing twice.

The grid test runs in a Python process of its own (:func:`test_grid_in_its_own_process`):
the LocalCluster's scheduler and the client live in the calling process, and with their
threads left there a later XLA compilation in the same pytest process crashed the interpreter
(segmentation fault, seen in three full-suite runs; never with this file deselected)."""

import functools
import os
import signal
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

distributed = pytest.importorskip("dask.distributed")
cloudpickle = pytest.importorskip("cloudpickle")

from graphssl import suite  # noqa: E402
from graphssl.data import random_splits, two_moons  # noqa: E402
from graphssl.estimators.baselines import HarmonicFunctionClassifier, LGCClassifier  # noqa: E402
from graphssl.estimators.potts import PottsClassifier  # noqa: E402
from graphssl.graph import knn_graph  # noqa: E402

# the workers cannot import this test module: send its functions and classes by value
cloudpickle.register_pickle_by_value(sys.modules[__name__])


class _DiesOnce(HarmonicFunctionClassifier):
    """GRF whose first fit inside a Dask worker kills that worker process mid-fit."""

    def _label_distributions(self, graph, labels, n_classes):
        try:
            distributed.get_worker()
        except ValueError:  # not in a worker (the serial run): fit normally
            return super()._label_distributions(graph, labels, n_classes)
        try:
            with open(self.marker, "x") as fh:  # only the first attempt of the grid dies
                fh.write(str(os.getpid()))
        except FileExistsError:
            return super()._label_distributions(graph, labels, n_classes)
        os.kill(os.getpid(), signal.SIGKILL)


def _dies_once(marker):
    estimator = _DiesOnce()
    estimator.marker = str(marker)
    return estimator


def _potts_sw():
    return PottsClassifier(inference="swendsen_wang", beta="nmfB", n_chains=2, n_samples=40,
                           burn_in=10)


_TIMING = ("seconds", "resumed")


def _same(a: dict, b: dict) -> bool:
    strip = lambda r: {k: v for k, v in r.items() if k not in _TIMING}  # noqa: E731
    return strip(a) == strip(b)


_INNER = os.environ.get("GRAPHSSL_DASK_GRID_INNER") == "1"


@pytest.mark.skipif(_INNER, reason="this is the inner process")
def test_grid_in_its_own_process(tmp_path):
    """Run the grid test below in a fresh interpreter and require it to pass there.

    The inner run takes ~1-2 minutes. Once, after the test had passed, its interpreter did
    not exit: a restarted Dask worker kept its event loop spinning after the cluster closed
    and the exit waited on it (seen in one full-suite run). A run still alive after
    ``LIMIT_S`` is killed with its process group; it counts as passed only if pytest had
    already reported the test passed (the hang was in Dask's shutdown, after every check)."""
    env = dict(os.environ, GRAPHSSL_DASK_GRID_INNER="1", PYTHONUNBUFFERED="1")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
               __file__, "--basetemp", str(tmp_path / "inner")]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=LIMIT_S)
        returncode = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        returncode = 0 if "1 passed" in stdout else -1
    assert returncode == 0, stdout[-4000:] + stderr[-2000:]
    assert "1 passed" in stdout, stdout[-2000:]


LIMIT_S = 240


@pytest.mark.skipif(not _INNER, reason="runs in its own process (test_grid_in_its_own_process)")
def test_grid_on_two_process_cluster_matches_serial_and_survives_a_killed_worker(
        tmp_path, monkeypatch):
    data = two_moons(150, seed=3)
    X, y = np.asarray(data.X), np.asarray(data.y)
    graph = knn_graph(X, 8)
    splits = list(random_splits(y, 0.1, n_splits=2, seed=0))
    models = {"grf": HarmonicFunctionClassifier, "lgc": LGCClassifier, "potts_sw": _potts_sw,
              "dies": functools.partial(_dies_once, tmp_path / "killed")}
    budget = suite.ConvergenceBudget(max_doublings=1)
    serial = suite.compare_models(models, graph, y, splits, out_dir=tmp_path / "serial", X=X,
                                  progress=False, budget=budget, config={"grid": 1})

    writes = Counter()
    real_write = suite.atomic_write

    def counting(path, data):
        writes[os.path.relpath(path, tmp_path)] += 1
        real_write(path, data)

    monkeypatch.setattr(suite, "atomic_write", counting)
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
    try:
        with distributed.Client(cluster) as client:
            out = tmp_path / "dask"
            grid = suite.compare_models(models, graph, y, splits, out_dir=out, X=X,
                                        progress=False, budget=budget, config={"grid": 1},
                                        client=client)
            assert (tmp_path / "killed").is_file()  # a worker died mid-fit ...
            for name in models:  # ... and every record is there, equal to the serial one
                assert [r["split"] for r in grid[name]] == [0, 1]
                for a, b in zip(grid[name], serial[name], strict=True):
                    assert "error" not in a and _same(a, b), (name, a, b)
            assert grid["potts_sw"][0]["draws"] >= 40
            runs = [k for k in writes if k.startswith(f"dask{os.sep}runs")]
            assert len(runs) == len(models) * len(splits)
            assert all(count == 1 for count in writes.values())  # nothing written twice
            writes.clear()
            again = suite.compare_models(models, graph, y, splits, out_dir=out, X=X,
                                         progress=False, budget=budget, config={"grid": 1},
                                         client=client)
            assert not writes and all(r["resumed"] for runs in again.values() for r in runs)
    finally:
        cluster.close(timeout=30)
