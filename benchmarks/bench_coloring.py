"""Graph colouring for chromatic sweeps: the back ends of ``graphssl.inference.coloring``
against the sweeps they enable.

    python benchmarks/bench_coloring.py              # N = 10^6 (kNN-like, k = 10)
    python benchmarks/bench_coloring.py --n 100000 --repeats 1

Graph: ``bench_samplers.knn_like_graph`` (node i draws k = 10 offsets +-U{1..50}; the union
of both directions; mean degree ~18). Times (median of ``--repeats``, wall and process CPU):

* ``igraph``: python-igraph's compiled greedy colouring (``COLORED_NEIGHBORS``), split into
  building the igraph graph from the edge list and the colouring itself;
* ``jones_plassmann``: the greedy rule in degree-then-random order, vectorised NumPy rounds;
* ``largest_first``: the old pure-Python greedy loop (Welsh–Powell order);
* one chromatic Gibbs sweep (bucketed layout, q = 10, Potts model, 1 % clamped), the time the
  colouring is paid against; the sweep is timed after a compile/warm-up call.

Writes benchmarks/results/bench_coloring_<device>.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import jax
import numpy as np
from bench_samplers import knn_like_graph, potts, raw_scan

from graphssl.inference import chromatic_gibbs
from graphssl.inference.coloring import csr_coloring, undirected_csr

RESULTS = Path(__file__).resolve().parent / "results"


def timed(fn, repeats: int):
    """``(result, median wall s, median CPU s)`` over ``repeats`` calls."""
    walls, cpus, out = [], [], None
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return out, statistics.median(walls), statistics.median(cpus)


def igraph_parts(indptr, nbrs):
    """The igraph back end in two timed parts: graph construction, colouring."""
    import igraph

    n = indptr.size - 1
    owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    upper = owner < nbrs
    edges = np.stack([owner[upper], nbrs[upper]], axis=1)
    t = time.perf_counter()
    g = igraph.Graph(n=n, edges=edges)
    t_build = time.perf_counter() - t
    t = time.perf_counter()
    colors = np.asarray(g.vertex_coloring_greedy(method="COLORED_NEIGHBORS"), np.int32)
    return colors, t_build, time.perf_counter() - t


def proper(colors, indptr, nbrs) -> bool:
    owner = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    return bool(np.all(colors[owner] != colors[nbrs]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10**6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sweeps", type=int, default=5)
    parser.add_argument("--skip-python", action="store_true",
                        help="skip the pure-Python largest_first loop")
    args = parser.parse_args()
    import igraph  # noqa: F401  (imported before timing: the import is not colouring time)

    graph = knn_like_graph(args.n)
    indptr, nbrs = undirected_csr(graph)
    rows = []
    for order in ("igraph", "jones_plassmann", "largest_first"):
        if order == "largest_first" and args.skip_python:
            continue
        colors, wall, cpu = timed(lambda o=order: csr_coloring(indptr, nbrs, o), args.repeats)
        row = {"method": order, "n": args.n, "wall_s": wall, "cpu_s": cpu,
               "n_colors": int(colors.max()) + 1, "proper": proper(colors, indptr, nbrs),
               "loadavg_1min": os.getloadavg()[0]}
        if order == "igraph":
            parts = [igraph_parts(indptr, nbrs)[1:] for _ in range(args.repeats)]
            row["igraph_build_s"] = statistics.median(p[0] for p in parts)
            row["igraph_color_s"] = statistics.median(p[1] for p in parts)
        rows.append(row)
        print(row, flush=True)
    model = potts(graph, 10, beta=1.0)
    colors = csr_coloring(indptr, nbrs, "jones_plassmann")
    kernel = chromatic_gibbs(graph, colors=colors, layout="bucketed")
    state = kernel.init(model, jax.random.key(0))
    run = raw_scan(kernel, args.sweeps)
    jax.block_until_ready(run(model, jax.random.key(1), state))  # compile
    _, wall, cpu = timed(lambda: jax.block_until_ready(run(model, jax.random.key(1), state)),
                         args.repeats)
    sweep = {"method": "chromatic_gibbs_sweep", "n": args.n, "q": 10,
             "wall_s": wall / args.sweeps, "cpu_s": cpu / args.sweeps,
             "loadavg_1min": os.getloadavg()[0]}
    rows.append(sweep)
    device = jax.devices()[0]
    results = {"device": f"{device.platform}:{device.device_kind}", "cpu_count": os.cpu_count(),
               "python": platform.python_version(), "jax": jax.__version__,
               "mean_degree": float(np.diff(indptr).mean()), "rows": rows}
    print(f"\nN = {args.n}, mean degree {results['mean_degree']:.1f}, {results['device']}")
    for row in rows:
        extra = ""
        if "igraph_build_s" in row:
            extra = (f"  (graph construction {row['igraph_build_s']:.2f} s + colouring "
                     f"{row['igraph_color_s']:.2f} s)")
        colours = f"{row['n_colors']:>3} colours" if "n_colors" in row else " " * 11
        print(f"{row['method']:>22}: {row['wall_s']:8.3f} s wall {row['cpu_s']:8.3f} s CPU "
              f"{colours} = {row['wall_s'] / sweep['wall_s']:6.1f} sweeps{extra}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"bench_coloring_{device.platform}.json"
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out.name}")


if __name__ == "__main__":
    main()
