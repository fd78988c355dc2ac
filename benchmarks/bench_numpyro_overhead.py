"""Overhead of numpyro's MCMC driving a label kernel, against ``sample_chains`` (same run).

    python benchmarks/bench_numpyro_overhead.py            # N = 1e4, 4 chains
    python benchmarks/bench_numpyro_overhead.py --quick    # tiny smoke run

Drivers, for chromatic Gibbs (q = 10) and Swendsen–Wang (q = 2) on one kNN graph of random
2-D points (k = 10, Gaussian weights), a Potts model (zero field, 1 % of nodes clamped):

* ``sample_chains``: the library's driver (``chain_method="auto"``: chains one after
  another inside one compiled call on a single CPU);
* ``numpyro``: ``MCMC(NumpyroKernel(kernel), chain_method="vectorized")`` with the model
  passed at run time, as shipped (``prepare`` once in ``init``, chains vmapped);
* ``numpyro_seq``: the same with ``chain_map="sequential"`` (``lax.map`` over the chains
  inside every step);
* ``numpyro_noprep``: vmapped and without the kernel's ``prepare`` (the kernel re-gathers its
  tables every sweep: also the adapter before this benchmark).

numpyro 0.22 re-jits its collection loop on every ``MCMC.run`` (a fresh ``jit`` wrapper), so
the JAX persistent compilation cache (a temporary folder) is switched on and every driver runs
each size once untimed: the timed runs then pay tracing but not XLA compilation. Each driver
is timed at ``S`` and ``2 S`` steps and the steady-state cost per sweep is the slope; both
runs store every draw (thin 1, energy per draw). The ratio printed is numpyro /
sample_chains per sweep. Times are the minimum over repeats (the machine is shared); the
1-minute load average is recorded.
Writes ``benchmarks/results/bench_numpyro_overhead_<backend>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import jax
import numpy as np

from graphssl.graph import knn_graph
from graphssl.inference.mcmc.chains import sample_chains
from graphssl.inference.mcmc.gibbs import chromatic_gibbs
from graphssl.inference.mcmc.numpyro_adapter import NumpyroKernel
from graphssl.inference.mcmc.swendsen_wang import swendsen_wang
from graphssl.models.potts import PottsModel

RESULTS = Path(__file__).resolve().parent / "results"


def best_time(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return min(times)


def drivers(kernel, model, n_chains):
    """name -> function(steps) running that many retained steps and returning the labels."""

    def chains(steps):
        return sample_chains(kernel, model, jax.random.key(0), n_chains=n_chains,
                             n_samples=steps, burn_in=0).labels

    def numpyro(numpyro_kernel):
        from numpyro.infer import MCMC

        def go(steps):
            mcmc = MCMC(numpyro_kernel, num_warmup=0, num_samples=steps, num_chains=n_chains,
                        chain_method="vectorized", progress_bar=False)
            mcmc.run(jax.random.key(0), model)
            return mcmc.get_samples()["labels"]

        return go

    return {
        "sample_chains": chains,
        "numpyro": numpyro(NumpyroKernel(kernel)),
        "numpyro_seq": numpyro(NumpyroKernel(kernel, chain_map="sequential")),
        "numpyro_noprep": numpyro(NumpyroKernel(kernel._replace(prepare=None), chain_map="vmap")),
    }


def bench(name, kernel, model, n_chains, steps, repeats):
    row = {"kernel": name, "n": model.n_nodes, "q": model.n_classes, "n_chains": n_chains,
           "steps": steps}
    runs = drivers(kernel, model, n_chains)
    for driver, fn in runs.items():
        fn(steps), fn(2 * steps)  # untimed: fills the compilation caches for both sizes
        t1 = best_time(lambda f=fn: f(steps), repeats)
        t2 = best_time(lambda f=fn: f(2 * steps), repeats)
        row[f"{driver}_run_s"] = t1
        row[f"{driver}_sweep_ms"] = 1e3 * (t2 - t1) / steps
        print(f"  {name} {driver}: {steps} steps {t1:.2f} s, {2 * steps} steps {t2:.2f} s",
              flush=True)
    base = row["sample_chains_sweep_ms"]
    for driver in runs:
        if driver != "sample_chains":
            row[f"{driver}_ratio"] = row[f"{driver}_sweep_ms"] / base
    row["loadavg_1min"] = os.getloadavg()[0]
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny smoke sizes")
    parser.add_argument("--n", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    jax.config.update("jax_compilation_cache_dir", tempfile.mkdtemp(prefix="jax_cache_"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    n = args.n or (2000 if args.quick else 10000)
    steps = args.steps or (10 if args.quick else 150)
    rng = np.random.default_rng(0)
    graph = knn_graph(rng.random((n, 2)), 10)
    labels = np.full(n, -1)
    clamped = rng.choice(n, n // 100, replace=False)
    rows = []
    for name, kernel, q in (("chromatic_gibbs", chromatic_gibbs(graph), 10),
                            ("swendsen_wang", swendsen_wang(), 2)):
        labels[clamped] = rng.integers(0, q, clamped.size)
        model = PottsModel.create(graph, q, beta=1.0, labels=labels)
        rows.append(bench(name, kernel, model, 4, steps, args.repeats))
    device = jax.devices()[0].device_kind
    out = {"device": device, "backend": jax.default_backend(), "cpu_count": os.cpu_count(),
           "python": platform.python_version(), "jax": jax.__version__,
           "numpyro": __import__("numpyro").__version__, "rows": rows}
    RESULTS.mkdir(exist_ok=True)
    suffix = "quick" if args.quick else jax.default_backend()
    (RESULTS / f"bench_numpyro_overhead_{suffix}.json").write_text(json.dumps(out, indent=1))
    print(f"device {device}, {os.cpu_count()} cores; per-sweep ms (slope), ratio vs "
          "sample_chains")
    print(f"{'kernel':16} {'n':>7} {'q':>3} {'sample_chains':>13} {'numpyro':>14} "
          f"{'numpyro_seq':>14} {'numpyro_noprep':>15} {'load':>5}")
    for r in rows:
        cells = [f"{r[d + '_sweep_ms']:7.2f} {r[d + '_ratio']:5.2f}x"
                 for d in ("numpyro", "numpyro_seq", "numpyro_noprep")]
        print(f"{r['kernel']:16} {r['n']:>7} {r['q']:>3} {r['sample_chains_sweep_ms']:13.2f} "
              f"{cells[0]:>14} {cells[1]:>14} {cells[2]:>15} {r['loadavg_1min']:5.1f}")


if __name__ == "__main__":
    main()
