"""Test-suite setup: float64 for reference checks, shared data location."""

import atexit
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

# One compilation cache for the whole run, in a temporary folder: the first process to load
# this file (pytest itself) makes it, and the test workers, notebook kernels and CLI
# subprocesses inherit it through the environment, so a program compiled by one is read by
# the others (graphssl.config; stored jax.export programs, graphssl._exported, live there
# too). Nothing is read that this run did not write, and no user folder is touched. A
# GRAPHSSL_JAX_CACHE given by the caller is kept ("0": no cache).
if "GRAPHSSL_JAX_CACHE" not in os.environ:
    _suite_cache = tempfile.mkdtemp(prefix="graphssl-suite-jax-")
    os.environ["GRAPHSSL_JAX_CACHE"] = _suite_cache
    atexit.register(shutil.rmtree, _suite_cache, ignore_errors=True)
# The suite's problems are tiny: XLA's CPU back end compiles them without LLVM's expensive
# optimisations (compilation is most of the suite's time; results stay float64-exact in
# each test's own comparisons), and runs each operation on one thread (three test processes
# share two cores: 4 % less wall time on 8 of the heaviest files, 249.9 s against 264.4 s; no
# measurable change on the whole suite, which is CPU-bound).
# A caller's XLA_FLAGS are kept.
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0 "
                                   "--xla_llvm_disable_expensive_passes=true "
                                   "--xla_cpu_multi_thread_eigen=false "
                                   "intra_op_parallelism_threads=1")

import jax  # noqa: E402
import pytest  # noqa: E402

from graphssl._memory_maps import release_executables_near_limit  # noqa: E402

jax.config.update("jax_enable_x64", True)

_SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
if "GRAPHSSL_DATA" not in os.environ and _SHARED.is_dir():
    os.environ["GRAPHSSL_DATA"] = str(_SHARED)



_LOWERING_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"  # persistent-cache hits too
_lowered_while_listening: list[float] | None = None


# --compile-census DIR: one JSON line per test (its wall seconds and the seconds JAX spent
# tracing, lowering and compiling in this process while it ran), one file per test process;
# benchmarks/suite_census.py sums them by file. Where the suite's time goes.
_CENSUS_EVENTS = {"/jax/core/compile/jaxpr_trace_duration": "trace_s",
                  _LOWERING_EVENT: "lower_s",
                  "/jax/core/compile/backend_compile_duration": "compile_s"}
_census_seconds: dict[str, float] | None = None


def _on_compile_event(event, duration, **kwargs):
    """The one JAX listener of the run (JAX has no public removal): feeds
    ``lowered_programs`` and the census when either is listening."""
    if _lowered_while_listening is not None and event == _LOWERING_EVENT:
        _lowered_while_listening.append(duration)
    if _census_seconds is not None and event in _CENSUS_EVENTS:
        key = _CENSUS_EVENTS[event]
        _census_seconds[key] = _census_seconds.get(key, 0.0) + duration


jax.monitoring.register_event_duration_secs_listener(_on_compile_event)


def pytest_addoption(parser):
    parser.addoption("--compile-census", metavar="DIR", default=None,
                     help="write each test's wall seconds and JAX tracing / lowering / XLA "
                          "compilation seconds to DIR/tests-<pid>.jsonl "
                          "(benchmarks/suite_census.py DIR sums them by file)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    global _census_seconds
    folder = item.config.getoption("--compile-census")
    if not folder:
        yield
        return
    _census_seconds = {}
    start = time.perf_counter()
    try:
        yield
    finally:
        record = {"test": item.nodeid, "wall_s": time.perf_counter() - start, **_census_seconds}
        _census_seconds = None
        Path(folder).mkdir(parents=True, exist_ok=True)
        with open(Path(folder) / f"tests-{os.getpid()}.jsonl", "a") as fh:
            fh.write(json.dumps(record) + "\n")


@pytest.fixture(scope="session")
def lowered_programs():
    """``lowered_programs(fn) -> (fn(), number of programs JAX lowered while it ran)``: a
    compiled program, or one read from the persistent cache, is lowered first; a reused one
    is not. One listener serves the whole run (JAX has no public way to remove one)."""

    def count(fn):
        global _lowered_while_listening
        _lowered_while_listening = []
        try:
            out = jax.block_until_ready(fn())
            return out, len(_lowered_while_listening)
        finally:
            _lowered_while_listening = None

    return count


@pytest.fixture(autouse=True, scope="module")
def _release_executables_near_map_limit():
    """Drop JAX's compiled executables after a test module once the process nears the limit
    on memory mappings (:mod:`graphssl._memory_maps`: about three per live executable;
    exhausting them segfaulted the next compilation). Module fixtures keep their compiled
    functions within a module, so the suite runs in any number of processes."""
    yield
    release_executables_near_limit()
