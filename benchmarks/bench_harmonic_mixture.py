"""Harmonic mixtures at scale (Zhu & Lafferty 2005, Sec. 3.2: an M x M solve instead of u x u).

A synthetic manifold (3-D Swiss roll, N points, class = which half of the roll, l labelled
points), a symmetrised kNN graph; times:

* HM: EM (k-means init + EM iterations, JAX), the backbone Laplacian of Eq. (6)
  (``R^T Delta R`` streamed over node batches), the M x M lambda solve (Eq. 5), and the
  prediction ``f_U = R lambda`` for all points;
* peer in the same run: GRF / harmonic function on the full graph
  (``graphssl.models.baselines.harmonic_function``, CG on the u x u system), at ``--grf-n``
  points if the full N is too slow (say so in the table).

Usage: ``python benchmarks/bench_harmonic_mixture.py [--n 1000000] [--m 500] [--device cpu|gpu]``.
Prints a table and writes ``benchmarks/results/harmonic_mixture_<device>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--m", type=int, default=500)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--labelled", type=int, default=20)
    p.add_argument("--em-iter", type=int, default=30)
    p.add_argument("--kmeans-iter", type=int, default=20)
    p.add_argument("--kmeans-sample", type=int, default=50_000)
    p.add_argument("--covariance", default="full", choices=["full", "diag", "spherical"])
    p.add_argument("--grf-n", type=int, nargs="*", default=[100_000, 1_000_000])
    p.add_argument("--grf-maxiter", type=int, default=5000)
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


def main():
    args = parse()
    os.environ.setdefault("JAX_PLATFORMS", "cuda" if args.device == "gpu" else "cpu")
    import jax

    if args.float64:
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpy as np

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from graphssl.graph import knn_graph, knn_search, sigma_kth_neighbor
    from graphssl.inference.em import EMOptions, _fit_em, init_gaussian_mixture
    from graphssl.inference.harmonic_mixture import (
        _compiled_backbone,
        median_threshold,
        solve_lambda,
        split_backbone,
    )
    from graphssl.models.baselines import harmonic_function
    from graphssl.models.harmonic_mixture import log_responsibilities

    dtype = np.float64 if args.float64 else np.float32
    rows, cpu_rows, record = [], [], {"args": vars(args), "device": str(jax.devices()[0]),
                        "platform": platform.platform(), "jax": jax.__version__}

    def timed(name, fn, sync=True):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        if sync:
            jax.block_until_ready(out)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        rows.append((name, dt))
        cpu_rows.append((name, dc))
        print(f"  {name:44s} {dt:9.2f} s wall {dc:9.2f} s cpu", flush=True)
        return out

    print(f"N = {args.n}, M = {args.m}, k = {args.k}, l = {args.labelled}, "
          f"device {jax.devices()[0]}", flush=True)
    X, y, labels = swiss_roll_3d(args.n, args.labelled)
    _, dist = knn_search(X[:20000], args.k)
    sigma = float(sigma_kth_neighbor(dist))
    graph = timed("graph: kNN + weights (scipy/KD-tree)",
                  lambda: knn_graph(X, args.k, symmetrize="max", sigma=sigma), sync=False)
    nbr, w = timed("graph: padded neighbour table", graph.padded_neighbors)
    record["graph"] = {"n_edges": graph.n_edges, "d_max": int(nbr.shape[1]), "sigma": sigma}

    Xj = jnp.asarray(X, dtype)
    observed = labels >= 0
    yj, oj = jnp.asarray(np.where(observed, labels, 0), jnp.int32), jnp.asarray(observed)
    opts = EMOptions(reg_covar=1e-4, batch_size=16384)
    key = jax.random.PRNGKey(0)
    mix0 = timed("HM: k-means init (incl. compile)", lambda: init_gaussian_mixture(
        Xj, yj, oj, args.m, 2, key, covariance_type=args.covariance, options=opts,
        kmeans_iter=args.kmeans_iter, kmeans_sample=args.kmeans_sample))
    # compile ahead of time (same shapes), then time the run alone
    em_exe = timed("HM: EM compile", lambda: _fit_em.lower(
        mix0, Xj, yj, oj, args.em_iter, 0.0, opts).compile(), sync=False)
    mix, info = timed(f"HM: EM {args.em_iter} iterations", lambda: em_exe(mix0, Xj, yj, oj, 0.0))
    record["em_iterations"] = int(info.iterations)
    lab_idx = jnp.asarray(np.flatnonzero(observed))
    run_bb = _compiled_backbone("mixture", None)
    wj = jnp.asarray(w, dtype)
    bb_exe = timed("HM: backbone compile", lambda: run_bb.lower(
        mix, Xj, lab_idx, nbr, wj).compile(), sync=False)
    Lt = timed("HM: backbone Laplacian R^T L R (Eq. 6)", lambda: bb_exe(mix, Xj, lab_idx, nbr, wj))
    Lt = np.asarray(Lt, np.float64)
    A, B = split_backbone(Lt, len(lab_idx))
    F = np.eye(2)[labels[observed]]
    lam, linfo = timed(f"HM: {args.m} x {args.m} lambda solve (Eq. 5)",
                       lambda: solve_lambda(A, B, F), sync=False)
    record["lambda_method"] = linfo.method

    @jax.jit
    def f_u(mix, X, lam1):
        return jnp.exp(log_responsibilities(mix, X)) @ lam1

    def predict():
        return jax.lax.map(lambda xb: f_u(mix, xb, jnp.asarray(lam[:, 1], dtype)),
                           Xj[: (args.n // 10000) * 10000].reshape(-1, 10000, 3))

    f = np.asarray(timed("HM: predict f = R lambda (all N)", predict)).reshape(-1)
    unl = ~observed[: f.size]
    acc_hm = float(np.mean(median_threshold(f[unl])[0] == y[: f.size][unl]))
    record["hm_accuracy"] = acc_hm
    em_total = sum(t for n_, t in rows if n_.startswith("HM: k-means") or
                   n_.startswith(f"HM: EM {args.em_iter}"))
    print(f"  HM accuracy on U (median rule): {acc_hm:.4f}", flush=True)

    for n_grf in args.grf_n:
        if n_grf > args.n:
            continue
        if n_grf == args.n:
            g, lab_g, y_g = graph, labels, y
        else:
            Xs, y_g, lab_g = swiss_roll_3d(n_grf, args.labelled, seed=1)
            g = knn_graph(Xs, args.k, symmetrize="max", sigma=sigma)
        scores, sinfo = timed(f"GRF full graph N={n_grf} (CG)", lambda g=g, lab_g=lab_g:
                              harmonic_function(g, lab_g, method="cg",
                                                maxiter=args.grf_maxiter, return_info=True),
                              sync=False)
        u = lab_g < 0
        acc = float(np.mean(median_threshold(scores[u])[0] == y_g[u]))
        record[f"grf_{n_grf}"] = {"accuracy": acc, "iterations": sinfo.iterations,
                                  "converged": sinfo.converged, "residual": sinfo.residual}
        print(f"  GRF N={n_grf}: accuracy {acc:.4f}, {sinfo.iterations} CG iterations, "
              f"converged {sinfo.converged}", flush=True)

    record["times_s"] = dict(rows)
    record["cpu_times_s"] = dict(cpu_rows)
    solve_t = dict(rows)[f"HM: {args.m} x {args.m} lambda solve (Eq. 5)"]
    bb_t = dict(rows)["HM: backbone Laplacian R^T L R (Eq. 6)"]
    record["summary"] = {"em_s": em_total, "backbone_s": bb_t, "solve_s": solve_t}
    print("\n| stage | wall s | process CPU s |\n|---|---|---|")
    for (name, t), (_, c) in zip(rows, cpu_rows, strict=True):
        print(f"| {name} | {t:.2f} | {c:.2f} |")
    for n_grf in args.grf_n:
        key_ = f"GRF full graph N={n_grf} (CG)"
        if key_ in dict(rows):
            hm = em_total + bb_t + solve_t
            c = dict(cpu_rows)
            hm_c = sum(c[k] for k in c if k.startswith(("HM: k-means", f"HM: EM {args.em_iter}",
                                                         "HM: backbone Lap", f"HM: {args.m} x")))
            print(f"| ratio GRF(N={n_grf}) / HM(init + EM + backbone + solve, N={args.n}) | "
                  f"{dict(rows)[key_] / hm:.2f} | {c[key_] / hm_c:.2f} |")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"harmonic_mixture_{args.device}.json"
    path.write_text(json.dumps(record, indent=2, default=float))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
