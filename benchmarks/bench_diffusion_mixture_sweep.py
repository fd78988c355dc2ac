"""Sweep engines of Walder's sampler, timed apart: ``lax.scan`` over sites vs one fused Pallas
kernel program per chain (:mod:`graphssl.inference.diffusion_mixture.pallas`).

The batch is issue 6's: the 24 split-runs of one SSL-book set (12 splits x {10, 100} labels;
k = 10, tau = 5 for all here: the sweep's cost does not depend on them), vmapped together,
one chain each, float32. Rows: the Gibbs sweep alone per engine (and per warp count for the
fused kernel), and a whole iteration (sweep + one attempt of each MH move, as the paper's
iteration) per engine; each timed as the best of ``--repeats`` runs of ``--iterations``
iterations inside one jitted ``lax.scan`` (compile excluded). The projection is the time of
10^5 iterations of the whole batch (issue 6's goal: under 30 minutes on one H100).

Bytes: a fused sweep reads each run's two padded m x M float32 tables (diffusion and
Laplacian rows) once; at the device's bandwidth that is the floor printed beside each row.

    python benchmarks/bench_diffusion_mixture_sweep.py [--dataset digit1] [--iterations 50]
        [--engines scan,pallas] [--warps 4,8] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from bench_diffusion_mixture import Diffusions, load, split_run

from graphssl.inference.diffusion_mixture import gibbs as dmg
from graphssl.inference.diffusion_mixture import kernels as dmk
from graphssl.inference.diffusion_mixture import pallas as dmp
from graphssl.inference.diffusion_mixture import sampler as dms
from graphssl.inference.mcmc.kernels import prepared

RESULTS = pathlib.Path(__file__).resolve().parent / "results"


def batch_of_runs(name: str, n_runs: int):
    X, y, splits = load(name)
    eta = np.bincount(y) / y.size
    diff = Diffusions(X)
    models, inits = [], []
    for L in (10, 100):
        for lab_idx in splits[L]:
            model, parzen = split_run(diff, y, lab_idx, eta, 10, 5.0, gamma=0.8)
            models.append(model)
            inits.append(parzen)
    models, inits = models[:n_runs], inits[:n_runs]
    return dms.stack_models(models, width=96), np.stack(inits).astype(np.int32)


def timed(fn, args, repeats):
    compiled = jax.jit(fn).lower(*args).compile()
    jax.block_until_ready(compiled(*args))
    best = np.inf
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        best = min(best, time.perf_counter() - t)
    return best


def sweeps_fn(engine, n_iterations, whole_iteration, num_warps=None):
    kernel = dmk.mixture_kernel((1, 1, 0), engine=engine, init_beta="self")

    def one_run(model, key, y0):
        if whole_iteration:  # the paper's iteration as run by sample_chains
            step_model = prepared(kernel, model)
            chain = kernel.init(model, key, y0)

            def step(chain, key):
                chain, info = kernel.step(step_model, key, chain)
                return chain, info.n_components

            return jax.lax.scan(step, chain, jax.random.split(key, n_iterations))[1]
        state = dmg.init_state(model, key, y=y0, init_beta="self")
        tables = dmp.sweep_tables(model) if engine == "pallas" else None

        def body(state, key):
            if engine == "pallas":
                state, probs = dmp.fused_gibbs_sweep(model, key, state, tables,
                                                     num_warps=num_warps)
            else:
                state, probs = dmg.gibbs_sweep(model, key, state)
            return state, probs[0, 0]

        return jax.lax.scan(body, state, jax.random.split(key, n_iterations))[1]

    def run(batch, key, init):
        keys = jax.random.split(key, init.shape[0])
        return jax.vmap(one_run)(batch, keys, init)

    return run


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="digit1")
    p.add_argument("--runs", type=int, default=24)
    p.add_argument("--iterations", type=int, default=50)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--engines", default="scan,pallas")
    p.add_argument("--warps", default="", help="extra warp counts for the fused sweep")
    p.add_argument("--bandwidth", type=float, default=3.35e12, help="bytes/s for the floor")
    p.add_argument("--out", default=str(RESULTS / "bench_diffusion_mixture_sweep.json"))
    args = p.parse_args()
    batch, init = batch_of_runs(args.dataset, args.runs)
    n_runs, m = init.shape
    K, M = dmp.padded_shape(m, batch.n_classes)
    table_bytes = 2 * m * M * 4 * n_runs
    key = jax.random.PRNGKey(0)
    rows = []
    variants = []
    for engine in args.engines.split(","):
        variants.append((engine, "sweep", None))
        if engine == "pallas":
            variants += [(engine, "sweep", int(w)) for w in args.warps.split(",") if w]
        variants.append((engine, "iteration", None))
    print(f"{args.dataset}: {n_runs} runs x {m} nodes, {batch.n_classes} classes, "
          f"device {jax.devices()[0]}")
    print(f"{'engine':>8} {'what':>10} {'warps':>6} {'it/s':>10} {'us/site':>9} "
          f"{'1e5 it':>10}")
    for engine, what, warps in variants:
        fn = sweeps_fn(engine, args.iterations, what == "iteration", warps)
        seconds = timed(partial(fn), (batch, key, jnp.asarray(init)), args.repeats)
        rate = args.iterations / seconds
        row = dict(engine=engine, what=what, num_warps=warps, iterations_per_second=rate,
                   us_per_site=1e6 * seconds / (args.iterations * m),
                   projected_seconds_1e5=1e5 / rate,
                   table_floor_seconds_per_sweep=table_bytes / args.bandwidth)
        rows.append(row)
        print(f"{engine:>8} {what:>10} {str(warps or '-'):>6} {rate:10.2f} "
              f"{row['us_per_site']:9.2f} {row['projected_seconds_1e5'] / 60:8.1f} min",
              flush=True)
    out = dict(device=str(jax.devices()[0]), platform=platform.platform(),
               versions=dict(jax=jax.__version__), dataset=args.dataset, runs=n_runs,
               nodes=m, classes=batch.n_classes, iterations=args.iterations,
               repeats=args.repeats, rows=rows)
    pathlib.Path(args.out).write_text(json.dumps(out, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
