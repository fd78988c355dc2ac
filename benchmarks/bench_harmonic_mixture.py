"""Harmonic mixtures at scale (Zhu & Lafferty 2005, Sec. 3.2: an M x M solve instead of u x u).

A synthetic manifold (3-D Swiss roll, N points, class = which half of the roll, l labelled
points) and one symmetrised kNN graph shared by HM and the peer; stage times:

* data: generating the points; graph: kNN + Gaussian weights, padded neighbour table;
* HM EM: k-means initialisation (on a sample, then one assignment pass), the EM compile and
  the EM iterations (JAX, float32, streamed over row batches: memory O(batch * M));
* HM backbone (Eq. 6) with sparse top-k responsibilities: the k_R largest p(m | x_i) of
  each row in JAX, then ``P^T Delta P`` with scipy.sparse (O(N k_R d) work, O(N k_R)
  memory); optionally (``--dense-backbone``) the exact dense-R backbone in the same run;
* HM solve: the M x M lambda step (Eq. 5);
* peer in the same run: GRF / harmonic function on the full graph
  (``graphssl.inference.optimize.baselines.harmonic_function``, Jacobi-preconditioned CG).

Accuracy on the unlabelled points with the median rule (Sec. 4.1), for HM with full R
(``f = R lambda``), HM with the sparse R, and GRF. Every stage records wall and process-CPU
seconds, the 1-minute load average and the peak resident memory so far.

Usage: ``python benchmarks/bench_harmonic_mixture.py [--n 1000000] [--m 500] [--top-k 5]``.
Prints a table and writes ``benchmarks/results/harmonic_mixture_<device>[_n<N>].json``
(the suffix when N is not 10^6).
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


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--m", type=int, default=500)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--top-k", type=int, default=5, help="responsibilities kept per row (k_R)")
    p.add_argument("--labelled", type=int, default=20)
    p.add_argument("--em-iter", type=int, default=5)
    p.add_argument("--kmeans-iter", type=int, default=20)
    p.add_argument("--kmeans-sample", type=int, default=50_000)
    p.add_argument("--batch-size", type=int, default=16384, help="EM / top-k row batch")
    p.add_argument("--covariance", default="full", choices=["full", "diag", "spherical"])
    p.add_argument("--dense-backbone", action="store_true",
                   help="also form the exact dense-R backbone (slow at N = 10^6)")
    p.add_argument("--grf-maxiter", type=int, default=1000)
    p.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    p.add_argument("--float64", action="store_true")
    p.add_argument("--out", default=str(Path(__file__).parent / "results"))
    return p.parse_args()


def swiss_roll_3d(n, labelled, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    t = 1.5 * np.pi * (1 + 2 * rng.uniform(size=n))
    h = 21 * rng.uniform(size=n)
    X = np.column_stack([t * np.cos(t), h, t * np.sin(t)]) + 0.3 * rng.normal(size=(n, 3))
    X /= 10.0
    y = (t > np.median(t)).astype(int)
    labels = -np.ones(n, int)
    for c in (0, 1):
        idx = rng.choice(np.flatnonzero(y == c), labelled // 2, replace=False)
        labels[idx] = c
    return X, y, labels


class Stages:
    """Wall / CPU seconds, load average and peak RSS of each named stage."""

    def __init__(self):
        self.rows = []

    def __call__(self, name, fn, sync=True):
        import jax

        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        if sync:
            jax.block_until_ready(out)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
        load = os.getloadavg()[0]
        self.rows.append({"stage": name, "wall_s": dt, "cpu_s": dc, "load1": load,
                          "peak_rss_gib": rss})
        print(f"  {name:46s} {dt:8.2f} s wall {dc:8.2f} s cpu  load {load:5.2f}  "
              f"peak RSS {rss:5.2f} GiB", flush=True)
        return out

    def wall(self, prefix):
        return sum(r["wall_s"] for r in self.rows if r["stage"].startswith(prefix))

    def cpu(self, prefix):
        return sum(r["cpu_s"] for r in self.rows if r["stage"].startswith(prefix))


def main():
    args = parse()
    os.environ.setdefault("JAX_PLATFORMS", "cuda" if args.device == "gpu" else "cpu")
    import jax

    if args.float64:
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpy as np

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from _portable import portable

    from graphssl.graph import knn_graph, knn_search, sigma_kth_neighbor
    from graphssl.inference.harmonic_mixture.fit import (
        _compiled_backbone,
        median_threshold,
        solve_lambda,
        split_backbone,
    )
    from graphssl.inference.optimize.baselines import harmonic_function
    from graphssl.inference.optimize.em import EMOptions, _fit_em, init_gaussian_mixture
    from graphssl.models.harmonic_backbone import (
        neighbor_laplacian,
        sparse_backbone_laplacian,
        sparse_lift,
        top_k_responsibilities,
    )
    from graphssl.models.harmonic_mixture import log_responsibilities

    dtype = np.float64 if args.float64 else np.float32
    record = {"args": portable(vars(args)), "device": str(jax.devices()[0]),
              "cpu_count": os.cpu_count(),
              "platform": platform.platform(), "jax": jax.__version__,
              "load_at_start": os.getloadavg()}
    timed = Stages()
    print(f"N = {args.n}, M = {args.m}, k = {args.k}, k_R = {args.top_k}, l = {args.labelled}, "
          f"device {jax.devices()[0]}, load {os.getloadavg()}", flush=True)

    X, y, labels = timed("data: Swiss roll", lambda: swiss_roll_3d(args.n, args.labelled),
                         sync=False)
    _, dist = knn_search(X[:20000], args.k)
    sigma = float(sigma_kth_neighbor(dist))
    graph = timed("graph: kNN + weights (shared by HM and GRF)",
                  lambda: knn_graph(X, args.k, symmetrize="max", sigma=sigma), sync=False)
    nbr, w = timed("graph: padded neighbour table", graph.padded_neighbors)
    record["graph"] = {"n_edges": graph.n_edges, "d_max": int(nbr.shape[1]), "sigma": sigma}

    Xj = jnp.asarray(X, dtype)
    observed = labels >= 0
    unl = ~observed
    yj, oj = jnp.asarray(np.where(observed, labels, 0), jnp.int32), jnp.asarray(observed)
    opts = EMOptions(reg_covar=1e-4, batch_size=args.batch_size)
    key = jax.random.PRNGKey(0)
    mix0 = timed("HM EM: k-means init (incl. compile)", lambda: init_gaussian_mixture(
        Xj, yj, oj, args.m, 2, key, covariance_type=args.covariance, options=opts,
        kmeans_iter=args.kmeans_iter, kmeans_sample=args.kmeans_sample))
    em_exe = timed("HM EM: compile", lambda: _fit_em.lower(
        mix0, Xj, yj, oj, args.em_iter, 0.0, opts).compile(), sync=False)
    mix, info = timed(f"HM EM: {args.em_iter} iterations",
                      lambda: em_exe(mix0, Xj, yj, oj, 0.0))
    obj = np.asarray(info.objective, np.float64)
    record["em"] = {"iterations": int(info.iterations),
                    "objective": obj[np.isfinite(obj)].tolist(),
                    "s_per_iteration_wall": timed.wall("HM EM: " + str(args.em_iter))
                    / max(int(info.iterations), 1),
                    "s_per_iteration_cpu": timed.cpu("HM EM: " + str(args.em_iter))
                    / max(int(info.iterations), 1),
                    "peak_rss_gib_after_em": timed.rows[-1]["peak_rss_gib"]}

    lab_idx = np.flatnonzero(observed)
    index, weight, dropped = timed(
        f"HM backbone: top-{args.top_k} responsibilities (JAX)",
        lambda: top_k_responsibilities(mix, Xj, args.top_k, batch_size=args.batch_size))
    dropped = np.asarray(dropped, np.float64)[unl]
    record["top_k"] = {"k": args.top_k, "max_dropped": float(dropped.max()),
                       "mean_dropped": float(dropped.mean()),
                       "q999_dropped": float(np.quantile(dropped, 0.999))}
    Lt = timed("HM backbone: P^T Delta P (scipy.sparse)", lambda: sparse_backbone_laplacian(
        sparse_lift(index, weight, lab_idx, args.m), neighbor_laplacian(nbr, w)), sync=False)
    A, B = split_backbone(Lt, len(lab_idx))
    F = np.eye(2)[labels[observed]]
    lam, linfo = timed(f"HM solve: {args.m} x {args.m} lambda (Eq. 5)",
                       lambda: solve_lambda(A, B, F), sync=False)
    record["lambda_method"] = linfo.method

    if args.dense_backbone:
        run_bb = _compiled_backbone("mixture", None)
        wj = jnp.asarray(w, dtype)
        lj = jnp.asarray(lab_idx)
        exe = timed("dense backbone: compile", lambda: run_bb.lower(mix, Xj, lj, nbr, wj)
                    .compile(), sync=False)
        Ld = np.asarray(timed("dense backbone: R^T Delta R (dense R, JAX)",
                              lambda: exe(mix, Xj, lj, nbr, wj)), np.float64)
        lam_d, _ = solve_lambda(*split_backbone(Ld, len(lab_idx)), F)
        record["dense_vs_top_k"] = {
            "backbone_rel_max_diff": float(np.abs(Ld - Lt).max() / np.abs(Ld).max()),
            "lambda_max_diff": float(np.abs(lam_d - lam).max())}

    @jax.jit
    def f_full(X, lam1):
        return jnp.exp(log_responsibilities(mix, X)) @ lam1

    lam1 = jnp.asarray(lam[:, 1], dtype)

    def predict():
        nb = -(-args.n // args.batch_size)
        Xp = jnp.concatenate([Xj, jnp.zeros((nb * args.batch_size - args.n, 3), dtype)])
        return jax.lax.map(lambda xb: f_full(xb, lam1), Xp.reshape(nb, -1, 3)).reshape(-1)

    f = np.asarray(timed("HM predict: f = R lambda (full R, all N)", predict))[: args.n]
    f_sparse = (np.asarray(weight, np.float64) * lam[:, 1][np.asarray(index)]).sum(1)
    acc_hm = float(np.mean(median_threshold(f[unl])[0] == y[unl]))
    acc_hm_sparse = float(np.mean(median_threshold(f_sparse[unl])[0] == y[unl]))
    record["hm_accuracy"] = acc_hm
    record["hm_accuracy_sparse_R"] = acc_hm_sparse
    print(f"  HM accuracy on U (median rule): {acc_hm:.4f} (full R), {acc_hm_sparse:.4f} "
          f"(top-{args.top_k} R)", flush=True)

    # the GRF peer's CG runs where the HM runs: scipy on a CPU, JAX ("jax_cg") on a GPU
    grf_method = "jax_cg" if args.device == "gpu" else "cg"
    record["grf_method"] = grf_method
    scores, sinfo = timed(f"GRF solve: full graph N={args.n} (CG)", lambda: harmonic_function(
        graph, labels, method=grf_method, maxiter=args.grf_maxiter, return_info=True),
        sync=False)
    acc_grf = float(np.mean(median_threshold(scores[unl])[0] == y[unl]))
    record["grf"] = {"accuracy": acc_grf, "iterations": sinfo.iterations,
                     "converged": sinfo.converged, "residual": sinfo.residual}
    print(f"  GRF accuracy {acc_grf:.4f}, {sinfo.iterations} CG iterations, "
          f"converged {sinfo.converged}", flush=True)

    hm_stages = ("HM EM", "HM backbone", "HM solve")
    summary = {
        "data_s": timed.wall("data"), "graph_s": timed.wall("graph"),
        "em_s": timed.wall("HM EM"), "backbone_s": timed.wall("HM backbone"),
        "solve_s": timed.wall("HM solve"), "grf_solve_s": timed.wall("GRF"),
        "hm_total_s": sum(timed.wall(s) for s in hm_stages),
        "hm_total_cpu_s": sum(timed.cpu(s) for s in hm_stages),
        "grf_cpu_s": timed.cpu("GRF"),
        "peak_rss_gib": max(r["peak_rss_gib"] for r in timed.rows),
    }
    summary["ratio_grf_over_hm_wall"] = summary["grf_solve_s"] / summary["hm_total_s"]
    summary["ratio_grf_over_hm_cpu"] = summary["grf_cpu_s"] / summary["hm_total_cpu_s"]
    summary["ratio_grf_over_hm_wall_excl_compile"] = summary["grf_solve_s"] / (
        summary["hm_total_s"] - timed.wall("HM EM: compile"))
    record["stages"] = timed.rows
    record["summary"] = summary
    print("\n| stage | wall s | process CPU s | load 1 min | peak RSS GiB |\n|---|---|---|---|---|")
    for r in timed.rows:
        print(f"| {r['stage']} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | {r['load1']:.2f} | "
              f"{r['peak_rss_gib']:.2f} |")
    print(f"| HM total (EM + backbone + solve) | {summary['hm_total_s']:.2f} | "
          f"{summary['hm_total_cpu_s']:.2f} | | |")
    print(f"| ratio GRF / HM (same graph, same run) | {summary['ratio_grf_over_hm_wall']:.2f} | "
          f"{summary['ratio_grf_over_hm_cpu']:.2f} | | |")
    print(f"accuracy on U: HM {acc_hm:.4f} (top-k R: {acc_hm_sparse:.4f}), GRF {acc_grf:.4f}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    suffix = "" if args.n == 1_000_000 else f"_n{args.n}"
    path = out / f"harmonic_mixture_{args.device}{suffix}.json"
    path.write_text(json.dumps(record, indent=2, default=float))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
