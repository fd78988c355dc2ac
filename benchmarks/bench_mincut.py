"""Graph mincut benchmarks (Blum & Chawla 2001).

1. ``speed``: one minimum cut per max-flow library, all in the same run (PyMaxflow BK float64,
   scipy Dinic int32, networkx preflow-push), at N = 10^4, 10^5, 10^6 nodes.
   **Canonical graph** (the one the goal refers to; ``--kinds regions_noisy``, the default):
   the k-regions data of Sec. 5.2 (8 unit squares in the (y, z) plane, labels alternating,
   ``graphssl.data.k_regions``) with the planes 4 mean in-plane spacings apart, a 10-NN graph
   (cKDTree), max-symmetrised, ``w = exp(-d / scale)`` with ``scale`` = the mean 10th-neighbour
   distance, N / 100 random labels of which 5 % are flipped. ``regions_touching`` (planes 0.5
   spacing apart) and ``gaussians`` (two overlapping 3-D Gaussians) are harder instances,
   run on request. networkx is skipped where its extrapolated time exceeds
   ``--networkx-limit`` seconds (default 120; the committed run used 900).
   Goal: the N = 10^6 cut (max-flow solve) under 30 s on CPU. Every row records the load
   average at its measurement (the machine is shared).
2. ``table1``: Table 1 of the paper on the shared UCI sets, ``--trials`` random L/U draws
   per set (``graphssl.reproductions.mincut_table1.table1_trial``), noisy "*" variants
   included, the paper's numbers beside ours and the standard error of our mean.
3. The gap reasons (``table1`` with ``--variant-trials``, default 5; ``mincut_gaps.py``): for
   every Table 1 cell more than 5 points from the paper, the protocol variants the paper
   leaves open (feature scaling, which class is ``v+``, delta_1/2 rounding, Mincut-3 ties and
   arc direction or no forced labelled neighbour, ID3 windowing, metric, the information-gain
   constant b, unknown values as wildcards, noise level, MONK-2's L, the delta_opt range),
   the spread of single draws
   (every row keeps its per-draw accuracies) and data checks (Musk at the class prior of
   Musk version 2, as a block of the file or whole molecules; Pima's zeros as missing;
   unknown votes / stalk-roots imputed; TAE targets and duplicates, leave-one-out 3-NN),
   each measured; the reasons table goes into ``mincut_table1.json``. Rows, variants or
   checks can be run apart (``--only`` / ``--variants-only`` / ``--checks-only``, written to
   ``mincut_table1_TAG.json``) and joined with ``merge-table1`` (the part with the most
   draws gives a row's main-table numbers).

    .venv/bin/python benchmarks/bench_mincut.py speed [--sizes 10000 100000 1000000]
    .venv/bin/python benchmarks/bench_mincut.py table1 [--trials 50] [--variant-trials 5]
        [--only ROW ... --tag TAG] [--variants-only NAME ... | --checks-only]
    .venv/bin/python benchmarks/bench_mincut.py merge-table1 results/mincut_table1_*.json

Each prints a table and writes JSON to ``benchmarks/results/``. Max-flow runs on the CPU
(no GPU max-flow library is used); on a GPU machine only the JAX parts would move.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
sys.path.insert(0, str(Path(__file__).resolve().parent))  # mincut_gaps beside this file


INSTANCES = {
    "regions_noisy": "8 k-regions planes 4 spacings apart, 5 % of the labels flipped",
    "regions_touching": "8 k-regions planes 0.5 spacing apart (classes touch)",
    "gaussians": "two unit Gaussians in 3-D, means 2 apart (classes overlap)",
}


def knn_problem(n: int, kind: str = "regions_noisy", *, k: int = 10, seed: int = 0):
    """One benchmark instance (see ``INSTANCES``): kNN graph (k = 10, max-symmetrised)
    with ``w = exp(-d / scale)``, scale = mean k-th neighbour distance, N / 100 labels."""
    from scipy.spatial import cKDTree

    from graphssl.data import k_regions
    from graphssl.models.mincut import exponential_knn_weights

    rng = np.random.default_rng(seed)
    spacing = 1.0 / np.sqrt(n / 8)  # mean in-plane spacing of the k-regions points
    if kind == "gaussians":
        y = rng.integers(0, 2, n)
        X = rng.normal(size=(n, 3))
        X[:, 0] += 2.0 * y
    else:
        gap = 4.0 * spacing if kind == "regions_noisy" else 0.5 * spacing
        data = k_regions(n, n_labeled=0, delta=gap, seed=seed)
        X, y = data.X, data.y
    t0 = time.perf_counter()
    dist, idx = cKDTree(X).query(X, k=k + 1, workers=-1)
    W = exponential_knn_weights(idx[:, 1:], dist[:, 1:], float(np.mean(dist[:, -1])))
    t_graph = time.perf_counter() - t0
    labels = -np.ones(n, dtype=np.int64)
    picked = rng.choice(n, max(n // 100, 2), replace=False)
    labels[picked] = y[picked]
    if kind == "regions_noisy":
        flip = picked[: max(len(picked) // 20, 1)]
        labels[flip] = 1 - labels[flip]
    return W, labels, y, t_graph


def run_speed(sizes, methods, kind, limits=None):
    """Time each method per size; a method whose extrapolated time at the next size (x20
    for 10x more nodes, as measured) exceeds its limit (networkx 120 s, others 600 s) is
    skipped there and the reason recorded."""
    from graphssl.inference.optimize.maxflow import minimum_cut
    from graphssl.models.mincut import cut_network

    limits = {"networkx": 120.0, **(limits or {})}
    rows = []
    estimate = dict.fromkeys(methods, 0.0)
    for n in sizes:
        W, labels, y, t_graph = knn_problem(n, kind)
        t0, c0 = time.perf_counter(), time.process_time()
        net = cut_network(W, labels)
        t_net, c_net = time.perf_counter() - t0, time.process_time() - c0
        reference = None
        for method in methods:
            row = {"n": n, "kind": kind, "edges": int(W.nnz // 2), "method": method,
                   "graph_s": t_graph, "network_s": t_net, "network_cpu_s": c_net,
                   "load_average_1_5_15": os.getloadavg()}
            limit = limits.get(method, 600.0)
            if estimate[method] > limit:
                row.update(skipped=f"extrapolated {estimate[method]:.0f} s > {limit:.0f} s")
                rows.append(row)
                print(_fmt(row), flush=True)
                continue
            result = minimum_cut(net, method)
            side = result.source_side
            acc = float(np.mean(np.where(labels >= 0, labels, side)[labels < 0] == y[labels < 0]))
            if reference is None:
                reference = result
            row.update(
                solve_s=result.info.seconds,
                solve_cpu_s=result.info.cpu_seconds,
                cut_value=result.cut_value,
                relative_gap=(result.cut_value - reference.cut_value)
                / max(reference.cut_value, 1e-300),
                same_labels=bool(np.array_equal(side, reference.source_side)),
                accuracy=acc,
                rounding_bound=result.info.rounding_bound,
            )
            estimate[method] = result.info.seconds * 20  # next size 10x; measured ~20x
            rows.append(row)
            print(_fmt(row), flush=True)
    for n in sizes:
        base = [r for r in rows if r["n"] == n and r["method"] == methods[0] and "solve_s" in r]
        for r in rows:
            if r["n"] == n and "solve_s" in r and base:
                r["ratio_vs_first"] = r["solve_s"] / base[0]["solve_s"]
    return rows


def _fmt(row):
    if "skipped" in row:
        return f"{row['kind']} N={row['n']:>8} {row['method']:>10}: skipped ({row['skipped']})"
    bound = row.get("rounding_bound")
    extra = f" rounding bound {bound:.3g}" if bound else ""
    return (
        f"{row['kind']} N={row['n']:>8} E={row['edges']:>9} {row['method']:>10}: "
        f"solve {row['solve_s']:7.2f} s (cpu {row['solve_cpu_s']:6.2f} s)"
        f" graph {row['graph_s']:.2f} s, network {row['network_s']:.2f} s"
        f" (cpu {row['network_cpu_s']:.2f} s) cut "
        f"{row['cut_value']:.6g} gap {row['relative_gap']:+.2e} same={row['same_labels']}"
        f" acc {row['accuracy']:.3f}{extra} load {row['load_average_1_5_15'][0]:.1f}"
    )


def run_table1(trials: int, seed: int = 0, variant_trials: int = 0, only=None, variants_only=None,
               with_checks=True):
    """Table 1 (means and standard errors in points, paper beside); with ``variant_trials``
    also the protocol variants (``variants_only``: these, ``[]``: none), the data checks
    (``with_checks``) and the gap-reason table (``mincut_gaps``)."""
    from mincut_gaps import data_checks, summarize_draws, trial_draws, variant_means

    from graphssl.data import data_dir_from_env
    from graphssl.reproductions.mincut_table1 import COLUMNS, TABLE1, table1_dataset

    data_dir = data_dir_from_env() or Path(__file__).resolve().parents[2] / "shared" / "datasets"
    rows, variants, checks = [], {}, {}
    for spec in TABLE1:
        if only and spec["name"] not in only:
            continue
        data = table1_dataset(spec["data"], data_dir)
        t0 = time.perf_counter()
        draws = trial_draws(data, spec, trials, seed)
        mean, se = summarize_draws(draws)
        rows.append({"name": spec["name"], "data": spec["data"], "L": spec["L"], "U": spec["U"],
                     "metric": spec["metric"], "noise": spec["noise"], "trials": trials,
                     "mean": mean, "se": se, "paper": spec["paper"],
                     "draws": {k: v.tolist() for k, v in draws.items()},
                     "seconds": time.perf_counter() - t0, "load_average_1_5_15": os.getloadavg()})
        cells = "  ".join(f"{c}={mean[c]:5.1f}({spec['paper'][c]:5.1f})" for c in COLUMNS)
        print(f"{spec['name']:>7} {spec['L']:>4}+{spec['U']:<5} {cells}", flush=True)
        if variant_trials:
            variants[spec["name"]] = variant_means(data, spec, variant_trials, seed, variants_only)
            checks[spec["name"]] = (data_checks(data, spec, variant_trials, seed)
                                    if with_checks else {})
            for name, m in {**variants[spec["name"]], **checks[spec["name"]]}.items():
                print(f"        {name:>26}: " + " ".join(f"{k}={v:5.1f}" for k, v in m.items()),
                      flush=True)
    return finish_table1(rows, variants, checks, variant_trials)


def finish_table1(rows, variants, checks, variant_trials):
    """The JSON body: rows, and with variants the gap-reason table (printed)."""
    from mincut_gaps import TOLERANCE, VARIANTS, cells_off_by_variant, gap_table

    from graphssl.reproductions.mincut_table1 import COLUMNS

    out = {"rows": rows, "columns": list(COLUMNS), "units": "accuracy, % (paper's units)"}
    if variant_trials:
        gaps = gap_table(rows, variants, checks)
        out.update(variant_trials=variant_trials, variants=variants, data_checks=checks,
                   variant_descriptions={k: v[2] for k, v in VARIANTS.items()},
                   variant_columns={k: list(v[3]) for k, v in VARIANTS.items()}, gaps=gaps,
                   cells_off=len(gaps), cells=len(rows) * len(COLUMNS), tolerance=TOLERANCE,
                   cells_off_by_variant=cells_off_by_variant(rows, variants))
        print("cells off if one variant replaced our protocol:", out["cells_off_by_variant"])
        print(f"\n{len(gaps)} of {len(rows) * len(COLUMNS)} cells more than {TOLERANCE} points off")
        for g in gaps:
            print(f"{g['row']:>6} {g['column']:>10} ours {g['ours']:5.1f} paper {g['paper']:5.1f}"
                  f" (se {g['se']:.1f}): {g['reason']}")
    return out


def merge_table1(paths):
    """Merge partial ``table1 --only`` runs (in TABLE1 order) into one result."""
    from graphssl.reproductions.mincut_table1 import TABLE1

    parts = [json.loads(Path(p).read_text()) for p in paths]
    order = {r["name"]: i for i, r in enumerate(TABLE1)}
    rows = {}
    for p in parts:  # the run with the most trials gives a row's main-table numbers
        for r in p["rows"]:
            if r["trials"] > rows.get(r["name"], {"trials": 0})["trials"]:
                rows[r["name"]] = r
    rows = sorted(rows.values(), key=lambda r: order[r["name"]])
    variants, checks = {}, {}
    for p in parts:  # variant runs add to each other
        for k, v in p.get("variants", {}).items():
            variants.setdefault(k, {}).update(v)
        for k, v in p.get("data_checks", {}).items():
            checks.setdefault(k, {}).update(v)
    out = finish_table1(rows, variants, checks, parts[0].get("variant_trials", 0))
    out["merged_from"] = [{"file": Path(p).name, "environment": q["environment"]}
                          for p, q in zip(paths, parts, strict=True)]
    return out


def environment():
    import maxflow
    import networkx
    import scipy

    return {
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average_1_5_15": os.getloadavg(),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "scipy": scipy.__version__,
        "networkx": networkx.__version__,
        "pymaxflow": maxflow.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    speed = sub.add_parser("speed")
    speed.add_argument("--sizes", type=int, nargs="+", default=[10**4, 10**5, 10**6])
    speed.add_argument("--methods", nargs="+", default=["pymaxflow", "scipy", "networkx"])
    speed.add_argument("--kinds", nargs="+", default=["regions_noisy"], choices=list(INSTANCES))
    speed.add_argument("--tag", default="", help="suffix of the JSON file name")
    speed.add_argument("--networkx-limit", type=float, default=120.0,
                       help="skip networkx where its extrapolated time exceeds this (s)")
    table = sub.add_parser("table1")
    table.add_argument("--trials", type=int, default=50)
    table.add_argument("--variant-trials", type=int, default=5,
                       help="trials per protocol variant for the gap reasons (0: skip)")
    table.add_argument("--only", nargs="+", help="Table 1 row names to run (default: all)")
    table.add_argument("--tag", default="part",
                       help="file suffix of a partial run (--only, --variants-only, "
                       "--checks-only)")
    table.add_argument("--variants-only", nargs="+", help="run only these variants (no checks)")
    table.add_argument("--checks-only", action="store_true",
                       help="run the data checks and no protocol variant")
    merge = sub.add_parser("merge-table1", help="merge --only runs into mincut_table1.json")
    merge.add_argument("paths", nargs="+")
    args = parser.parse_args(argv)
    RESULTS.mkdir(parents=True, exist_ok=True)
    if args.what == "speed":
        limits = {"networkx": args.networkx_limit}
        rows = [r for kind in args.kinds
                for r in run_speed(args.sizes, args.methods, kind, limits)]
        path = RESULTS / f"mincut_speed{'_' + args.tag if args.tag else ''}.json"
        out = {"rows": rows}
    elif args.what == "merge-table1":
        out = merge_table1(args.paths)
        path = RESULTS / "mincut_table1.json"
    else:
        variants_only = [] if args.checks_only else args.variants_only
        out = run_table1(args.trials, variant_trials=args.variant_trials, only=args.only,
                         variants_only=variants_only, with_checks=args.checks_only
                         or not args.variants_only)
        partial = args.only or args.variants_only or args.checks_only  # a part, to merge
        path = RESULTS / (f"mincut_table1_{args.tag}.json" if partial else "mincut_table1.json")
    path.write_text(json.dumps({"environment": environment(), **out}, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
