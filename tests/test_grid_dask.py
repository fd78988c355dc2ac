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
from typing import NamedTuple

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

    The inner run takes 20-60 s. Twice in full-suite runs (four test processes on two cores)
    it did not finish: once its interpreter did not exit after the test had passed (a
    restarted Dask worker kept its event loop spinning after the cluster closed), once the
    test itself had not finished after 240 s (it passes alone in 20 s; 55 s is the longest
    seen in a passing full-suite run). A run still alive
    after ``LIMIT_S`` is killed with its process group (pytest's faulthandler has dumped every
    thread's stack to its stderr ``FAULTHANDLER_S`` in, shown in the failure message); it
    counts as passed if pytest had already reported the test passed, else it is run once more
    (a ``UserWarning`` says so) and that run decides."""
    first = _inner_run(tmp_path / "inner")
    if first.hung and "1 passed" not in first.stdout:
        import warnings

        warnings.warn(f"test_grid_dask: the inner run hung for {LIMIT_S} s; running it once "
                      f"more. Its stacks:\n{first.stderr[-3000:]}", UserWarning, stacklevel=1)
        second = _inner_run(tmp_path / "inner_again")
        assert second.passed, (second.stdout[-3000:] + second.stderr[-3000:]
                               + "\n--- first attempt ---\n" + first.stderr[-2000:])
        return
    assert first.passed, first.stdout[-4000:] + first.stderr[-3000:]


class _InnerRun(NamedTuple):
    stdout: str
    stderr: str
    hung: bool

    @property
    def passed(self) -> bool:
        return "1 passed" in self.stdout


def _inner_run(basetemp) -> _InnerRun:
    """The grid test in a new interpreter, killed with its process group after ``LIMIT_S``."""
    env = dict(os.environ, GRAPHSSL_DASK_GRID_INNER="1", PYTHONUNBUFFERED="1")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
               "-o", f"faulthandler_timeout={FAULTHANDLER_S}", __file__,
               "--basetemp", str(basetemp)]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=LIMIT_S)
        return _InnerRun(stdout, stderr, hung=False)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        return _InnerRun(stdout, stderr, hung=True)


LIMIT_S = 150
FAULTHANDLER_S = 120  # the inner pytest dumps its threads' stacks after this long


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
            # the grid's shared inputs survive the death of every worker holding them (data
            # given by client.scatter would be lost for good: the cells waiting for it fail)
            shared = suite._shared_future(client, np.arange(10.0))
            assert shared.result() is not None
            pids = client.run(os.getpid)
            for worker in client.who_has([shared])[shared.key]:
                os.kill(pids[worker], signal.SIGKILL)
            total = client.submit(lambda v: float(v.sum()), shared, pure=False)
            assert total.result(timeout=120) == 45.0
    finally:
        cluster.close(timeout=30)
