"""Sampler throughput: chromatic Gibbs, Swendsen–Wang, many chains, numpyro adapter overhead.

    python benchmarks/bench_samplers.py            # CPU sizes (N = 1e5)
    python benchmarks/bench_samplers.py --gpu      # GPU sizes (Gibbs 1e7, SW 1e6, 64 x 1e5)
    python benchmarks/bench_samplers.py --quick    # tiny smoke run

Swendsen–Wang rows time ``swendsen_wang(graph)`` (bond pairs listed once on the host) and,
in the same run, ``swendsen_wang()`` (pairs read from the whole padded table, masked).

Graph: a random kNN-like graph: node i draws k neighbours j = i ± U{1..W} (mod N), so the
neighbourhoods are local in memory like a kNN graph of spatially sorted points; the union of
both directions is stored (mean degree ~ 2k - overlaps). Weights U(0.2, 1), one per pair
(a hash of the pair since 2026-11-23; before, a draw per pair after a sort: same law).
Potts model (graphssl.models.potts.PottsModel), zero field, 1 % of nodes clamped.
float32 (JAX default). Writes benchmarks/results/bench_samplers_<device>.json and prints
a table. Times are medians of repeats after a compile/warm-up call; every row records the
1-minute load average. Gibbs rows time the bucketed layout (the CPU default above 1024 nodes),
the padded layout (``chromatic_gibbs(..., layout="padded")``, the accelerator default) and the
stacked layout (the CPU default up to 1024 nodes) in the same run, with each layout's first call
(compilation + one run: what a small graph pays) and state bytes per update; e.g.
``--only gibbs --n 300 --tag gibbs_n300`` for the small graphs the stacked layout is for.
The PRNG is JAX's default threefry2x32 (``impl="rbg"``/``"unsafe_rbg"`` keys were not faster
for this kernel on CPU: 0.85-1.0x).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from graphssl.graph import Graph
from graphssl.inference import chromatic_gibbs, sample_chains, swendsen_wang
from graphssl.inference.coloring import greedy_coloring
from graphssl.inference.mcmc.kernels import merge_kernel, prepared, split_kernel
from graphssl.models.potts import PottsModel
from graphssl.models.protocol import bond_list

RESULTS = Path(__file__).resolve().parent / "results"


def _pair_uniform(lo, hi, n):
    """A deterministic U(0.2, 1) weight per undirected pair (splitmix64 hash of the pair):
    both directions of an edge get the same weight without a sort over the edges."""
    z = (np.minimum(lo, hi).astype(np.uint64) * np.uint64(n) + np.maximum(lo, hi).astype(
        np.uint64)) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return (0.2 + 0.8 * (z >> np.uint64(11)).astype(np.float64) / 2.0**53).astype(np.float32)


@functools.lru_cache(maxsize=2)
def knn_like_graph(n: int, k: int = 10, window: int = 50, seed: int = 0) -> Graph:
    """Node i draws k offsets +-U{1..window}; the union of both directions is kept, each edge
    once (a presence bitmap over (node, offset) instead of a sort: N = 10^7 in seconds).
    Cached: the Gibbs rows at q = 10 and q = 2 share one graph and one colouring."""
    rng = np.random.default_rng(seed)
    width = 2 * window + 1
    present = np.zeros((n, width), dtype=bool)
    chunk = 1 << 22
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        rows = np.repeat(np.arange(start, stop, dtype=np.int64), k)
        offsets = rng.integers(1, window + 1, size=rows.size) * rng.choice([-1, 1], rows.size)
        present[rows, window + offsets] = True
        present[(rows + offsets) % n, window - offsets] = True  # the reverse direction
    s, col = np.nonzero(present)
    del present
    r = (s + col - window) % n
    w = _pair_uniform(s, r, n)
    return Graph(jnp.asarray(s, jnp.int32), jnp.asarray(r, jnp.int32), jnp.asarray(w), n)


_COLORINGS: dict[int, tuple[np.ndarray, float]] = {}


def coloring_of(graph: Graph) -> tuple[np.ndarray, float]:
    """Greedy colouring of a cached benchmark graph and the seconds it took (computed once)."""
    if id(graph) not in _COLORINGS:
        t0 = time.perf_counter()
        colors = greedy_coloring(graph)
        _COLORINGS[id(graph)] = (colors, time.perf_counter() - t0)
    return _COLORINGS[id(graph)]


def potts(graph: Graph, q: int, beta: float, seed: int = 0) -> PottsModel:
    rng = np.random.default_rng(seed + 1)
    labels = np.full(graph.n_nodes, -1)
    clamped = rng.choice(graph.n_nodes, size=max(1, graph.n_nodes // 100), replace=False)
    labels[clamped] = rng.integers(0, q, clamped.size)
    return PottsModel.create(graph, q, beta=beta, labels=labels)


CPU_TIMES: list[float] = []
WARMUP: list[float] = []


def timeit(fn, repeats: int) -> float:
    """Median wall time after a warm-up call; the median process CPU time (all threads) goes
    to ``CPU_TIMES[-1]`` — steadier than wall time on a shared, oversubscribed machine."""
    t0 = time.perf_counter()
    jax.block_until_ready(fn())  # compile + warm up
    WARMUP.append(time.perf_counter() - t0)
    times, cpu = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    CPU_TIMES.append(statistics.median(cpu))
    return statistics.median(times)


def raw_scan(kernel, n_steps: int):
    """The bare loop: ``n_steps`` kernel steps in one jitted fori_loop, no storage. The
    kernel's tables are arguments of the compiled loop (``split_kernel``), not constants."""
    arrays, static = split_kernel(kernel)

    @jax.jit
    def run(arrays, model, key, state):
        kernel = merge_kernel(arrays, static)
        step_model = prepared(kernel, model)  # e.g. couplings gathered into bucket layout

        def body(t, s):
            return kernel.step(step_model, jax.random.fold_in(key, t), s)[0]

        return jax.lax.fori_loop(0, n_steps, body, state)

    return functools.partial(run, arrays)


def plain_jax_gibbs(model, classes, n_sweeps: int):
    """Peer: a hand-written chromatic Potts sweep outside the protocol (the "plain JAX probe"):
    neighbour-label gather, one-hot-compare sum per class, Gumbel-max draw."""
    idx, w, q = model.neighbor_index, model.neighbor_weight, model.n_classes
    classes = [jnp.asarray(c) for c in classes]

    @jax.jit
    def run(labels, key):
        def sweep(t, labels):
            for c, nodes in enumerate(classes):
                nl = labels[idx[nodes]]
                wn = w[nodes]
                m = jnp.stack([jnp.sum(jnp.where(nl == k, wn, 0.0), 1) for k in range(q)], 1)
                logits = model.beta * (model.field[nodes] + m)
                draw = jax.random.categorical(jax.random.fold_in(key, t * 64 + c), logits)
                new = jnp.where(model.observed[nodes], labels[nodes], draw.astype(labels.dtype))
                labels = labels.at[nodes].set(new, unique_indices=True)
            return labels

        return jax.lax.fori_loop(0, n_sweeps, sweep, labels)

    return run


def scipy_swendsen_wang(model, labels, n_sweeps: int, seed: int = 0):
    """Peer: the same Swendsen–Wang sweep on the host (numpy + scipy connected components)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components as cc

    rng = np.random.default_rng(seed)
    s, r, j = (np.asarray(a) for a in bond_list(model.pairwise_tables()))
    half = j > 0
    s, r, j = s[half], r[half], j[half]
    observed = np.asarray(model.observed)
    field = np.asarray(model.pairwise_tables().unary)
    n, q = model.n_nodes, model.n_classes
    labels = np.asarray(labels).copy()
    for _ in range(n_sweeps):
        bond = (labels[s] == labels[r]) & (rng.random(s.size) < -np.expm1(-j))
        _, comp = cc(coo_matrix((np.ones(bond.sum()), (s[bond], r[bond])), shape=(n, n)),
                     directed=False)
        n_comp = comp.max() + 1
        logits = np.zeros((n_comp, q))
        np.add.at(logits, comp, field)
        gumbel = rng.gumbel(size=logits.shape)
        new = (logits + gumbel).argmax(1)
        clamped = np.zeros(n_comp, bool)
        clamped[comp[observed]] = True
        labels = np.where(clamped[comp], labels, new[comp])
    return labels


def bench_gibbs(n, q, sweeps, repeats, n_buckets=6):
    """Chromatic Gibbs in its bucketed layout (default) and in the old padded layout (the
    same kernel with ``layout="padded"``), plus the plain-JAX peer, all in the same run."""
    from graphssl.inference.mcmc.gibbs import color_classes, degree_buckets

    t0 = time.perf_counter()
    graph = knn_like_graph(n)
    print(f"  graph N={n}: {time.perf_counter() - t0:.1f} s", flush=True)
    model = potts(graph, q, beta=1.0)
    colors, t_color = coloring_of(graph)
    print(f"  colouring: {t_color:.1f} s", flush=True)
    timed = {}
    first_call = {}
    for layout in ("bucketed", "padded", "stacked"):
        t0 = time.perf_counter()
        kernel = chromatic_gibbs(graph, colors=colors, layout=layout, n_buckets=n_buckets)
        state = kernel.init(model, jax.random.key(0))
        run = raw_scan(kernel, sweeps)
        t_build = time.perf_counter() - t0
        t = timeit(lambda r=run, st=state: r(model, jax.random.key(1), st), repeats)
        timed[layout] = (t, CPU_TIMES[-1], os.getloadavg()[0])
        first_call[layout] = WARMUP[-1]
        print(f"  {layout} q={q}: kernel {t_build:.1f} s, first call {WARMUP[-1]:.1f} s, "
              f"{n * sweeps / t:.3g} updates/s", flush=True)
    peer = plain_jax_gibbs(model, color_classes(colors), sweeps)
    t_peer = timeit(lambda: peer(state.labels, jax.random.key(1)), repeats)
    cpu_peer = CPU_TIMES[-1]
    t, cpu, load = timed["bucketed"]
    t_old, cpu_old, load_old = timed["padded"]
    degree = graph.n_edges / n
    d_max = int(model.neighbor_index.shape[1])
    plan = degree_buckets(graph, colors, n_buckets)
    slots = sum(nb.size for colour in plan for _, nb in colour) / n  # table entries per update
    wbytes = model.neighbor_weight.dtype.itemsize
    # padded: per slot the neighbour index (4 B), weight (wbytes) and neighbour label (int32,
    # mostly cache hits on a local graph, counted anyway); the field row (4 q B), observed
    # flag + own label read/write (~9 B). Bucketed: the same over the bucket's width, with
    # int8 labels during the sweep (1 B per neighbour label, ~3 B own label + flag).
    bytes_old = d_max * (4 + wbytes + 4) + 4 * q + 9
    bytes_new = round(slots * (4 + wbytes + 1) + 4 * q + 3)
    updates = n * sweeps
    return {
        "kind": "chromatic_gibbs", "layout": "bucketed", "n_buckets": n_buckets, "n": n,
        "q": q, "mean_degree": degree, "d_max": d_max, "mean_table_width": slots,
        "n_colors": int(colors.max()) + 1, "coloring_s": t_color, "sweeps": sweeps,
        "time_s": t, "site_updates_per_s": updates / t, "site_updates_per_ns": updates / t / 1e9,
        "bytes_per_update": bytes_new, "gb_per_s": updates * bytes_new / t / 1e9,
        "cpu_s": cpu, "site_updates_per_cpu_s": updates / cpu, "loadavg_1min": load,
        "padded_site_updates_per_s": updates / t_old,
        "padded_site_updates_per_cpu_s": updates / cpu_old,
        "padded_bytes_per_update": bytes_old, "padded_loadavg_1min": load_old,
        "first_call_s": first_call,
        "stacked_site_updates_per_s": updates / timed["stacked"][0],
        "stacked_site_updates_per_cpu_s": updates / timed["stacked"][1],
        "ratio_stacked_vs_bucketed": t / timed["stacked"][0],
        "ratio_vs_padded": t_old / t, "cpu_ratio_vs_padded": cpu_old / cpu,
        "peer_plain_jax_updates_per_s": updates / t_peer, "ratio_vs_plain_jax": t_peer / t,
        "cpu_ratio_vs_plain_jax": cpu_peer / cpu,
    }


def percolation_beta(graph: Graph) -> float:
    """Reference inverse temperature: bond percolation on a graph of mean degree d has
    p_c ~ 1/(d - 1) (Bethe estimate), so with all labels equal the SW bonds percolate once
    1 - exp(-beta w_mean) > 1/(d - 1). The table scans multiples of this beta; whether the
    state actually percolates (labels ordered) is read off the measured largest cluster."""
    d = graph.n_edges / graph.n_nodes
    w = float(np.mean(np.asarray(graph.weights)))
    return float(-np.log1p(-1.0 / (d - 1)) / w)


def bench_sw(n, q, sweeps, repeats):
    graph = knn_like_graph(n)
    beta_c = percolation_beta(graph)
    rows = []
    kernel = swendsen_wang(graph)  # pairs listed once on the host
    plain = swendsen_wang()  # every slot of the padded table, masked
    run, run_plain = raw_scan(kernel, sweeps), raw_scan(plain, sweeps)
    for factor in (0.5, 2.0, 8.0, 16.0, 32.0):
        model = potts(graph, q, beta=beta_c * factor)
        state = kernel.init(model, jax.random.key(0))
        # burn in so the state matches the temperature, then time and read the statistics
        state = raw_scan(kernel, 20)(model, jax.random.key(2), state)
        t_plain = timeit(lambda m=model, st=state: run_plain(m, jax.random.key(1), st), repeats)
        cpu_plain = CPU_TIMES[-1]
        t = timeit(lambda m=model, st=state: run(m, jax.random.key(1), st), repeats)
        cpu = CPU_TIMES[-1]
        _, info = jax.jit(kernel.step)(model, jax.random.key(3), state)
        n_peer = max(2, sweeps // 4)
        t0, c0 = time.perf_counter(), time.process_time()
        scipy_swendsen_wang(model, state.labels, n_peer)
        t_peer = (time.perf_counter() - t0) / n_peer
        cpu_peer = (time.process_time() - c0) / n_peer
        rows.append({
            "kind": "swendsen_wang", "n": n, "q": q, "beta": beta_c * factor,
            "beta_over_percolation": factor, "sweep_ms": 1e3 * t / sweeps,
            "component_rounds": int(info["component_rounds"]),
            "n_clusters": int(info["n_clusters"]), "max_cluster": int(info["max_cluster_size"]),
            "peer_scipy_sweep_ms": 1e3 * t_peer, "ratio_vs_scipy": t_peer / (t / sweeps),
            "cpu_sweep_ms": 1e3 * cpu / sweeps, "cpu_ratio_vs_scipy": cpu_peer / (cpu / sweeps),
            "no_graph_sweep_ms": 1e3 * t_plain / sweeps,
            "no_graph_cpu_sweep_ms": 1e3 * cpu_plain / sweeps,
            "loadavg_1min": os.getloadavg()[0],
        })
    return rows


def bench_chains(n, q, chain_counts, sweeps, repeats):
    """Throughput of ``sample_chains`` (chromatic Gibbs, thin 1: energy + storage every
    step) for several chain counts, vmapped ("vectorized") and one after another inside one
    compiled call ("sequential", the CPU default of ``chain_method="auto"``)."""
    graph = knn_like_graph(n)
    model = potts(graph, q, beta=1.0)
    kernel = chromatic_gibbs(graph, colors=coloring_of(graph)[0])
    rows = []
    for method in ("vectorized", "sequential"):
        for n_chains in chain_counts:
            def go(c=n_chains, m=method):
                return sample_chains(kernel, model, jax.random.key(0), n_chains=c,
                                     n_samples=sweeps, burn_in=0, chain_method=m).labels

            t = timeit(go, repeats)
            rows.append({"kind": "chains", "method": method, "n": n, "q": q,
                         "n_chains": n_chains, "time_s": t, "cpu_s": CPU_TIMES[-1],
                         "site_updates_per_s": n * sweeps * n_chains / t,
                         "site_updates_per_cpu_s": n * sweeps * n_chains / CPU_TIMES[-1],
                         "loadavg_1min": os.getloadavg()[0]})
    base = rows[0]["site_updates_per_s"] / rows[0]["n_chains"]
    base_cpu = rows[0]["site_updates_per_cpu_s"] / rows[0]["n_chains"]
    for row in rows:
        row["per_chain_vs_single"] = row["site_updates_per_s"] / row["n_chains"] / base
        row["per_chain_cpu_vs_single"] = row["site_updates_per_cpu_s"] / row["n_chains"] / base_cpu
    return rows


def bench_numpyro(n, q, sweeps, repeats, n_chains=4):
    """Per-sweep cost of the same SW kernel in: a bare vmapped fori_loop, sample_chains, and
    numpyro's MCMC (vectorized chains) through NumpyroKernel.

    numpyro 0.22's ``MCMC.run`` re-jits its collection loop on every call (``fori_collect``
    wraps the cached body in a fresh ``jit``, so the static-argument cache misses), so each run
    pays a compile. We therefore time every driver at ``sweeps`` and ``2 * sweeps`` and report
    the slope (seconds per extra sweep) as the steady-state cost, plus the total of one run.
    """
    from numpyro.infer import MCMC

    from graphssl.inference.mcmc.numpyro_adapter import NumpyroKernel

    graph = knn_like_graph(n)
    model = potts(graph, q, beta=1.0)
    kernel = swendsen_wang()
    keys = jax.random.split(jax.random.key(1), n_chains)
    states = jax.vmap(lambda k: kernel.init(model, k))(keys)
    row = {"kind": "numpyro_overhead", "n": n, "q": q, "n_chains": n_chains, "sweeps": sweeps}
    for steps in (sweeps, 2 * sweeps):
        raw = jax.jit(jax.vmap(lambda s, k, m=steps: raw_scan(kernel, m)(model, k, s)))
        row[f"raw_{steps}_s"] = timeit(lambda r=raw: r(states, keys), repeats)
        row[f"sample_chains_{steps}_s"] = timeit(
            lambda m=steps: sample_chains(kernel, model, jax.random.key(0), n_chains=n_chains,
                                          n_samples=m, burn_in=0).labels, repeats)
        mcmc = MCMC(NumpyroKernel(kernel, model), num_warmup=0, num_samples=steps,
                    num_chains=n_chains, chain_method="vectorized", progress_bar=False)

        def run_numpyro(mc=mcmc):
            mc.run(jax.random.key(0))
            return mc.get_samples()["labels"]

        row[f"numpyro_{steps}_s"] = timeit(run_numpyro, repeats)
    for name in ("raw", "sample_chains", "numpyro"):
        row[f"{name}_per_sweep_ms"] = 1e3 * (
            row[f"{name}_{2 * sweeps}_s"] - row[f"{name}_{sweeps}_s"]) / sweeps
    for name in ("sample_chains", "numpyro"):
        row[f"{name}_overhead"] = row[f"{name}_per_sweep_ms"] / row["raw_per_sweep_ms"] - 1
    row["loadavg_1min"] = os.getloadavg()[0]
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", action="store_true", help="GPU sizes")
    parser.add_argument("--quick", action="store_true", help="tiny smoke sizes")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", default="gibbs,sw,chains,numpyro")
    parser.add_argument("--n", type=int, default=None, help="override every N")
    parser.add_argument("--sweeps", type=int, default=None)
    parser.add_argument("--tag", default=None, help="suffix of the JSON file")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if args.quick:
        sizes = dict(gibbs=2000, sw=2000, chains=2000, chain_counts=(1, 4), numpyro=2000)
        sweeps = 5
    elif args.gpu:
        sizes = dict(gibbs=10**7, sw=10**6, chains=10**5, chain_counts=(1, 8, 64),
                     numpyro=10**5)
        sweeps = 20
    else:
        sizes = dict(gibbs=10**5, sw=10**5, chains=10**5, chain_counts=(1, 2, 4), numpyro=10**5)
        sweeps = 20
    if args.n:
        sizes.update(gibbs=args.n, sw=args.n, chains=args.n, numpyro=args.n)
    sweeps = args.sweeps or sweeps
    device = jax.devices()[0]
    results = {"device": f"{device.platform}:{device.device_kind}", "jax": jax.__version__,
               "cpu_count": os.cpu_count(), "python": platform.python_version(),
               "rows": []}
    rows = results["rows"]
    if "gibbs" in only:
        for q in (10, 2):
            rows.append(bench_gibbs(sizes["gibbs"], q, sweeps, args.repeats))
            print(rows[-1], flush=True)
    if "sw" in only:
        rows.extend(bench_sw(sizes["sw"], 10, sweeps, args.repeats))
        print(rows[-5:], flush=True)
    if "chains" in only:
        rows.extend(bench_chains(sizes["chains"], 10, sizes["chain_counts"], sweeps, args.repeats))
    if "numpyro" in only:
        rows.append(bench_numpyro(sizes["numpyro"], 10, sweeps * 5, args.repeats))
    print_table(results)
    RESULTS.mkdir(parents=True, exist_ok=True)
    tag = args.tag or ("quick" if args.quick else ("gpu" if args.gpu else device.platform))
    out = RESULTS / f"bench_samplers_{tag}.json"
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")


def print_table(results):
    print(f"\ndevice {results['device']}  jax {results['jax']}")
    for row in results["rows"]:
        kind = row["kind"]
        if kind == "chromatic_gibbs":
            print(f"Gibbs   N={row['n']:>9} q={row['q']:>2} deg={row['mean_degree']:.1f} "
                  f"colors={row['n_colors']:>2}  {row['site_updates_per_s']:.3g} updates/s "
                  f"({row['site_updates_per_ns']:.3g}/ns)  {row['bytes_per_update']} B/update "
                  f"-> {row['gb_per_s']:.3g} GB/s; x{row['ratio_vs_padded']:.2f} vs padded "
                  f"layout ({row['padded_bytes_per_update']} B/update), "
                  f"x{row['ratio_vs_plain_jax']:.2f} vs plain JAX peer; CPU time: "
                  f"{row['site_updates_per_cpu_s']:.3g} updates/cpu-s "
                  f"(x{row['cpu_ratio_vs_padded']:.2f} vs padded, "
                  f"x{row['cpu_ratio_vs_plain_jax']:.2f} vs peer); load {row['loadavg_1min']:.1f}")
            if "first_call_s" in row:
                first = row["first_call_s"]
                print(f"        stacked {row['stacked_site_updates_per_s']:.3g} updates/s "
                      f"(x{row['ratio_stacked_vs_bucketed']:.2f} the bucketed rate); first call "
                      f"(compile + run) bucketed {first['bucketed']:.2f} s, padded "
                      f"{first['padded']:.2f} s, stacked {first['stacked']:.2f} s")
        elif kind == "swendsen_wang":
            print(f"SW      N={row['n']:>9} q={row['q']:>2} "
                  f"beta/beta_p={row['beta_over_percolation']}"
                  f"  {row['sweep_ms']:.3g} ms/sweep  rounds={row['component_rounds']} "
                  f"clusters={row['n_clusters']} largest={row['max_cluster']}; "
                  f"scipy peer {row['peer_scipy_sweep_ms']:.3g} ms (x{row['ratio_vs_scipy']:.2f}); "
                  f"CPU {row['cpu_sweep_ms']:.3g} ms (x{row['cpu_ratio_vs_scipy']:.2f}); "
                  f"swendsen_wang() without graph {row.get('no_graph_sweep_ms', float('nan')):.3g}"
                  f" ms (CPU {row.get('no_graph_cpu_sweep_ms', float('nan')):.3g} ms)")
        elif kind == "chains":
            print(f"chains  N={row['n']:>9} {row['method']:>10} chains={row['n_chains']:>3}  "
                  f"{row['site_updates_per_s']:.3g} updates/s  per-chain vs single "
                  f"{row['per_chain_vs_single']:.2f}; {row['site_updates_per_cpu_s']:.3g} "
                  f"updates/cpu-s (x{row['per_chain_cpu_vs_single'] * row['n_chains']:.2f} "
                  f"of one chain's)")
        elif kind == "numpyro_overhead":
            s2 = 2 * row["sweeps"]
            print(f"numpyro N={row['n']:>9} chains={row['n_chains']} per sweep: raw "
                  f"{row['raw_per_sweep_ms']:.3g} ms, sample_chains "
                  f"{row['sample_chains_per_sweep_ms']:.3g} ms "
                  f"({100 * row['sample_chains_overhead']:+.0f}%), numpyro "
                  f"{row['numpyro_per_sweep_ms']:.3g} ms ({100 * row['numpyro_overhead']:+.0f}%);"
                  f" one {s2}-sweep run: raw {row[f'raw_{s2}_s']:.3g} s, numpyro "
                  f"{row[f'numpyro_{s2}_s']:.3g} s (incl. its re-jit)")


if __name__ == "__main__":
    main()
