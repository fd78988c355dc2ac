"""Overhead of numpyro's MCMC driving a label kernel, against ``sample_chains`` (CPU time).

    python benchmarks/bench_numpyro_overhead.py            # N = 1e4, 4 chains, 5 repeats
    python benchmarks/bench_numpyro_overhead.py --quick    # tiny smoke run
    python benchmarks/bench_numpyro_overhead.py --kernels swendsen_wang --repeats 7 \
        --drivers sample_chains_vmap,numpyro,numpyro_jit_args \
        --out bench_numpyro_overhead_cpu_sw_focus.json     # the Swendsen-Wang check

Kernels, on one kNN graph of random 2-D points (k = 10, Gaussian weights) with a Potts model
(zero field, 1 % of nodes clamped): chromatic Gibbs (q = 10), Swendsen–Wang (q = 2) and the
composed move ``compose(chromatic_gibbs, swendsen_wang)`` (q = 2). Drivers, 4 chains each:

* ``sample_chains``: the library's driver as shipped (``chain_method="auto"``: on one CPU
  device the chains run one after another inside one compiled call);
* ``sample_chains_vmap``: ``sample_chains(chain_method="vectorized")`` (chains vmapped);
* ``numpyro``: ``MCMC(NumpyroKernel(kernel), chain_method="vectorized")`` with the model
  passed at run time, as shipped (``prepare`` once in ``init``, chains vmapped);
* ``numpyro_seq``: the same with ``chain_map="sequential"`` (``lax.map`` over the chains
  inside every step);
* ``numpyro_jit_args`` (``--drivers``, not in the default set): ``numpyro`` with
  ``MCMC(jit_model_args=True)``, the model a traced argument of the compiled loop instead of
  a constant baked into it.

Ratios compare like with like: ``numpyro / sample_chains_vmap`` (both vmap the chains: the
adapter's own cost), ``numpyro_seq / sample_chains`` (both map the chains one after another)
and ``numpyro / sample_chains`` (the two defaults). Target: the like-with-like ratios <= 1.10.

Measurement, made for a shared, loaded machine: every driver is timed in **CPU seconds of this
process** (``time.process_time``: every thread of XLA's runtime counted; time spent waiting for
a core is not) at ``S`` and ``2 S`` retained steps, and its steady-state cost per sweep is the
slope ``(t(2S) - t(S)) / S`` (tracing, compilation and dispatch cancel). Repeats are
**interleaved**: each repeat runs every driver once, in a fresh random order, so a burst of
load hits all drivers alike; each ratio is formed within a repeat, and the table gives the
median over repeats with the interquartile range; a single run now and then costs seconds more
(on the loaded, memory-short machine of the recorded runs: a stall, not the driver), and the
median discards it (``run_s`` keeps every raw time). ``sample_chains`` stores labels,
energy and move statistics of every draw; numpyro collects the labels of every draw (its state
computes the energy at every step). numpyro 0.22 re-traces its collection loop on every
``MCMC.run`` (about 0.2-0.6 CPU s per run at N = 1e4, spread ~0.02 s: the slope removes it), so
the JAX persistent compilation cache (a temporary folder) is on and every driver runs each size
twice untimed first. ``S = 400`` keeps that spread under ~3 % of a slope. XLA runs
single-threaded (``--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1``;
``--threads=default`` keeps XLA's thread pool): on a loaded machine the pool's idle workers add
CPU time that has nothing to do with the driver and varies from run to run. The 1-minute load
average is recorded. On an accelerator (``--clock auto``) every time is elapsed time instead
(``time.perf_counter``, results ready): the host's CPU time does not count the device's work.
Keys ``sweep_ms`` / ``run_s`` hold the clock named in the row's ``clock``.
Writes ``benchmarks/results/bench_numpyro_overhead_<backend>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

SINGLE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
_ARGS = " ".join(sys.argv[1:]).replace("=", " ").split()
if "--threads default" not in " ".join(_ARGS):
    # single-threaded XLA, set before jax is imported (module docstring)
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {SINGLE_THREAD}".strip()

import jax  # noqa: E402
import numpy as np  # noqa: E402

from graphssl.graph import knn_graph  # noqa: E402
from graphssl.inference.mcmc.chains import sample_chains  # noqa: E402
from graphssl.inference.mcmc.gibbs import chromatic_gibbs  # noqa: E402
from graphssl.inference.mcmc.kernels import compose  # noqa: E402
from graphssl.inference.mcmc.numpyro_adapter import NumpyroKernel  # noqa: E402
from graphssl.inference.mcmc.swendsen_wang import swendsen_wang  # noqa: E402
from graphssl.models.potts import PottsModel  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_DRIVERS = ("sample_chains", "sample_chains_vmap", "numpyro", "numpyro_seq")
RATIOS = {  # name -> (numerator, denominator)
    "numpyro/sample_chains_vmap": ("numpyro", "sample_chains_vmap"),
    "numpyro_seq/sample_chains": ("numpyro_seq", "sample_chains"),
    "numpyro/sample_chains": ("numpyro", "sample_chains"),
    "numpyro_jit_args/sample_chains_vmap": ("numpyro_jit_args", "sample_chains_vmap"),
}


CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}


def seconds(fn, steps, clock="cpu") -> float:
    """Seconds of ``clock`` for ``fn(steps)``, results ready: ``"cpu"``, CPU seconds of this
    process (all threads); ``"wall"``, elapsed time (on a GPU the host's CPU time does not
    count the device's work)."""
    tick = CLOCKS[clock]
    start = tick()
    jax.block_until_ready(fn(steps))
    return tick() - start


def drivers(kernel, model, n_chains):
    """name -> function(steps) running that many retained steps and returning the labels."""

    def chains(chain_method):
        def go(steps):
            return sample_chains(kernel, model, jax.random.key(0), n_chains=n_chains,
                                 n_samples=steps, burn_in=0, chain_method=chain_method).labels

        return go

    def numpyro(numpyro_kernel, jit_model_args=False):
        from numpyro.infer import MCMC

        def go(steps):
            mcmc = MCMC(numpyro_kernel, num_warmup=0, num_samples=steps, num_chains=n_chains,
                        chain_method="vectorized", progress_bar=False,
                        jit_model_args=jit_model_args)
            mcmc.run(jax.random.key(0), model)
            return mcmc.get_samples()["labels"]

        return go

    return {
        "sample_chains": chains("auto"),
        "sample_chains_vmap": chains("vectorized"),
        "numpyro": numpyro(NumpyroKernel(kernel)),
        "numpyro_seq": numpyro(NumpyroKernel(kernel, chain_map="sequential")),
        "numpyro_jit_args": numpyro(NumpyroKernel(kernel), jit_model_args=True),
    }


def summary(values) -> dict:
    """Median and interquartile range of a list of numbers."""
    q25, q50, q75 = np.percentile(np.asarray(values, float), [25, 50, 75])
    return {"median": float(q50), "q25": float(q25), "q75": float(q75)}


def bench(name, kernel, model, n_chains, steps, repeats, rng, names=DEFAULT_DRIVERS,
          clock="cpu", warmup=2):
    runs = {d: fn for d, fn in drivers(kernel, model, n_chains).items() if d in names}
    for _ in range(warmup):  # untimed (compilation caches filled, allocations settled)
        for fn in runs.values():
            fn(steps), fn(2 * steps)
    sweep_ms = {d: [] for d in runs}
    run_s = {d: [] for d in runs}  # [repeat] -> (t(S), t(2S)), for the record
    for r in range(repeats):
        for driver in rng.permutation(list(runs)):
            sizes = rng.permutation([steps, 2 * steps])
            t = {int(s): seconds(runs[driver], int(s), clock) for s in sizes}
            sweep_ms[driver].append(1e3 * (t[2 * steps] - t[steps]) / steps)
            run_s[driver].append((t[steps], t[2 * steps]))
        print(f"  {name} repeat {r + 1}/{repeats}: "
              + ", ".join(f"{d} {v[-1]:.2f} ms" for d, v in sweep_ms.items()), flush=True)
    row = {"kernel": name, "n": model.n_nodes, "q": model.n_classes, "n_chains": n_chains,
           "steps": steps, "repeats": repeats, "clock": clock, "sweep_ms": sweep_ms,
           "run_s": run_s,
           "sweep_ms_summary": {d: summary(v) for d, v in sweep_ms.items()}}
    row["ratios"] = {
        ratio: summary(np.asarray(sweep_ms[a]) / np.asarray(sweep_ms[b]))
        for ratio, (a, b) in RATIOS.items() if a in runs and b in runs
    }
    row["loadavg_1min"] = os.getloadavg()[0]
    return row


def print_table(rows):
    print(f"{rows[0]['clock']} ms per sweep (median over repeats) and ratios (median [q25, q75] "
          "of the per-repeat ratios)")
    names = list(rows[0]["sweep_ms_summary"])
    print(f"{'kernel':16} {'n':>6} {'q':>3} " + " ".join(f"{d:>18}" for d in names)
          + " " + " ".join(f"{r:>28}" for r in rows[0]["ratios"]) + f" {'load':>5}")
    for row in rows:
        ms = " ".join(f"{row['sweep_ms_summary'][d]['median']:18.2f}" for d in names)
        ratios = " ".join(
            f"{s['median']:8.3f} [{s['q25']:.3f}, {s['q75']:.3f}]".rjust(28)
            for s in row["ratios"].values())
        print(f"{row['kernel']:16} {row['n']:>6} {row['q']:>3} {ms} {ratios} "
              f"{row['loadavg_1min']:5.1f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny smoke sizes")
    parser.add_argument("--n", type=int, default=None)
    parser.add_argument("--steps", default=None,
                        help="S, one number or one per kernel (comma-separated, in --kernels' "
                             "order): on a GPU a sweep takes ~0.1-1 ms and numpyro's per-run "
                             "re-trace jitters by tens of ms, so S must be thousands there")
    parser.add_argument("--warmup", type=int, default=2, help="untimed rounds first")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--kernels", default="chromatic_gibbs,swendsen_wang,composed",
                        help="comma-separated subset of the kernels")
    parser.add_argument("--threads", choices=("single", "default"), default="single",
                        help="XLA's CPU threads (read before jax is imported)")
    parser.add_argument("--drivers", default=",".join(DEFAULT_DRIVERS),
                        help="comma-separated drivers; also numpyro_jit_args (the model "
                             "as a traced argument, MCMC(jit_model_args=True))")
    parser.add_argument("--clock", choices=("auto", "cpu", "wall"), default="auto",
                        help="cpu: CPU seconds of this process; wall: elapsed; auto: cpu on a "
                             "CPU backend, wall on an accelerator")
    parser.add_argument("--out", default=None, help="results file name (default by backend)")
    args = parser.parse_args()
    clock = args.clock if args.clock != "auto" else (
        "cpu" if jax.default_backend() == "cpu" else "wall")
    jax.config.update("jax_compilation_cache_dir", tempfile.mkdtemp(prefix="jax_cache_"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    n = args.n or (2000 if args.quick else 10000)
    kernel_names = args.kernels.split(",")
    steps = [int(s) for s in (args.steps or ("100" if args.quick else "400")).split(",")]
    steps = dict(zip(kernel_names, steps * len(kernel_names) if len(steps) == 1 else steps,
                     strict=True))
    repeats = args.repeats or (3 if args.quick else 5)
    rng = np.random.default_rng(0)
    graph = knn_graph(rng.random((n, 2)), 10)
    clamped = rng.choice(n, n // 100, replace=False)
    kernels = {"chromatic_gibbs": (chromatic_gibbs(graph), 10),
               "swendsen_wang": (swendsen_wang(), 2),
               "composed": (compose(chromatic_gibbs(graph), swendsen_wang()), 2)}
    rows = []
    for name in kernel_names:
        kernel, q = kernels[name]
        labels = np.full(n, -1)
        labels[clamped] = np.random.default_rng(1).integers(0, q, clamped.size)
        model = PottsModel.create(graph, q, beta=1.0, labels=labels)
        rows.append(bench(name, kernel, model, 4, steps[name], repeats, rng,
                          tuple(args.drivers.split(",")), clock, args.warmup))
        # every MCMC.run leaves a new executable in JAX's caches (its loop is re-traced): drop
        # them between kernels (a whole run once ran out of memory on the shared machine)
        jax.clear_caches()
    device = jax.devices()[0].device_kind
    out = {"device": device, "backend": jax.default_backend(), "cpu_count": os.cpu_count(),
           "python": platform.python_version(), "jax": jax.__version__,
           "numpyro": __import__("numpyro").__version__,
           "clock": {"cpu": "process_time (CPU s)", "wall": "perf_counter (s)"}[clock],
           "xla_flags": os.environ.get("XLA_FLAGS", ""),
           "rows": rows}
    RESULTS.mkdir(exist_ok=True)
    suffix = "quick" if args.quick else jax.default_backend()
    name = args.out or f"bench_numpyro_overhead_{suffix}.json"
    (RESULTS / name).write_text(json.dumps(out, indent=1))
    print(f"device {device}, {os.cpu_count()} cores")
    print_table(rows)


if __name__ == "__main__":
    main()
