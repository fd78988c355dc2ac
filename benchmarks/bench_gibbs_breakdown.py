"""Where a chromatic Gibbs sweep spends its time on CPU (bucketed layout, N = 1e5).

    python benchmarks/bench_gibbs_breakdown.py [--n 100000] [--q 10,2]

Times cumulative variants of the sweep of ``graphssl.inference.mcmc.gibbs`` (same degree buckets,
same graph and model as ``bench_samplers.py``), each still reading and writing the labels so
that nothing is hoisted out of the sweep loop:

* ``scatter``: write a cheap function of each node's own label (the per-bucket write + loop);
* ``gather``: + gather the neighbour labels and couplings, one weighted sum per node;
* ``conditional``: + all ``q`` class sums (``bucket_logits``), draw = argmax (no randomness);
* ``sample_no_rng``: + inverse-CDF draw with a fixed ``u = 0.5`` (exp, cumulative sums);
* ``full``: + one threefry uniform per site (the library's kernel itself).

Differences between consecutive rows are the cost of each stage. Process CPU time (best of
``--repeats``) is reported beside wall time, with the load average. Writes
``benchmarks/results/bench_gibbs_breakdown_cpu.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import jax
import jax.numpy as jnp
from bench_samplers import knn_like_graph, potts, raw_scan

from graphssl.inference import chromatic_gibbs
from graphssl.inference.mcmc.gibbs import bucket_logits, degree_buckets, greedy_coloring

STAGES = ("scatter", "gather", "conditional", "sample_no_rng", "full")


def _draw(stage, key, lab, coupling, unary, rows, neighbours):
    rows_j = jnp.asarray(rows)
    q = unary.shape[1]
    if stage == "scatter":
        return (lab[rows_j] + 1) % q
    if stage == "gather":
        nl = lab[jnp.asarray(neighbours)]
        w = coupling[rows_j, : neighbours.shape[0]].T
        return (jnp.sum(jnp.where(nl == 0, w, 0.0), axis=0) > 1.0).astype(lab.dtype)
    logits = bucket_logits(lab, coupling, unary, rows, neighbours)
    if stage == "conditional":
        return jnp.argmax(logits, axis=0).astype(lab.dtype)
    e = jnp.exp(logits - jnp.max(logits, axis=0))
    cums = jnp.cumsum(e, axis=0) if q > 16 else jnp.stack(
        [sum(e[: c + 1]) for c in range(q)])
    u = 0.5 * cums[-1]
    return jnp.sum(cums[:-1] <= u, axis=0).astype(lab.dtype)


def stage_sweep(stage, plan):
    def step(model, key, labels):
        _, coupling, unary = model.pairwise_tables()
        lab = labels.astype(jnp.int8)
        for colour in plan:
            for rows, neighbours in colour:
                new = _draw(stage, key, lab, coupling, unary, rows, neighbours)
                new = jnp.where(model.observed[rows], lab[rows], new)
                lab = lab.at[jnp.asarray(rows)].set(new, indices_are_sorted=True,
                                                     unique_indices=True)
        return lab.astype(labels.dtype)

    @jax.jit
    def run(model, key, labels, n_sweeps):
        return jax.lax.fori_loop(0, n_sweeps, lambda t, s: step(model, key, s), labels)

    return run


def best_of(fn, repeats):
    jax.block_until_ready(fn())
    wall, cpu = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        jax.block_until_ready(fn())
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return min(wall), min(cpu)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--q", default="10,2")
    parser.add_argument("--sweeps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    graph = knn_like_graph(args.n)
    colors = greedy_coloring(graph)
    plan = degree_buckets(graph, colors)
    rows = []
    for q in (int(x) for x in args.q.split(",")):
        model = potts(graph, q, beta=1.0)
        kernel = chromatic_gibbs(graph, colors=colors)
        labels = kernel.init(model, jax.random.key(0)).labels
        updates = args.n * args.sweeps
        for stage in STAGES:
            if stage == "full":
                run = raw_scan(kernel, args.sweeps)
                state = kernel.init(model, jax.random.key(0))
                wall, cpu = best_of(
                    lambda r=run, s=state, m=model: r(m, jax.random.key(1), s), args.repeats)
            else:
                run = stage_sweep(stage, plan)
                wall, cpu = best_of(
                    lambda r=run, m=model, y=labels: r(m, jax.random.key(1), y, args.sweeps),
                    args.repeats)
            rows.append({"q": q, "stage": stage, "n": args.n, "sweeps": args.sweeps,
                         "wall_s": wall, "cpu_s": cpu, "ns_per_update_cpu": 1e9 * cpu / updates,
                         "site_updates_per_cpu_s": updates / cpu,
                         "loadavg_1min": os.getloadavg()[0]})
            prev = rows[-2]["ns_per_update_cpu"] if stage != "scatter" else 0.0
            print(f"q={q:>2} {stage:>14}: {rows[-1]['ns_per_update_cpu']:6.1f} ns/update CPU "
                  f"(stage +{rows[-1]['ns_per_update_cpu'] - prev:5.1f} ns)  "
                  f"load {rows[-1]['loadavg_1min']:.1f}", flush=True)
    device = jax.devices()[0]
    out = Path(__file__).resolve().parent / "results" / "bench_gibbs_breakdown_cpu.json"
    out.write_text(json.dumps({"device": f"{device.platform}:{device.device_kind}",
                               "jax": jax.__version__, "cpu_count": os.cpu_count(),
                               "rows": rows}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
