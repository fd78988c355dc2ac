"""Where one damped parallel mean-field sweep spends its time at N = 10^6, q = 10 (CPU here).

    python benchmarks/bench_potts_sweep.py --n 1000000 [--graph-npz saved.npz]

On the paper's row-normalised kNN graph of ``bench_potts._blobs`` (k = floor(log2 N)) with
float32 arrays, best of ``--repeats`` in one process:

* ``gather``: the right-hand side of Eq. 16 alone (``mean_field_fields``);
* ``gather_rcm``: the same after the locality renumbering (``locality_order``);
* ``sweep_fused``: one damped sweep as a plain jitted function (no while loop) that closes
  over the (all-false) clamping arrays, so XLA folds them away;
* ``sweep_library``: one sweep of ``_solve_parallel`` (``tol`` huge, so it stops after one,
  inside its ``lax.while_loop``); ``_rcm``: on the renumbered graph.
Tried and dropped (no gain, same run): an ``optimization_barrier`` on the gathered fields
(6.53 vs 6.40 s for 5 sweeps); the loop driven from Python with one jitted sweep per step
taking the clamping arrays as arguments (2.17 s a sweep against 1.26 s in the while loop).

Every array is passed as an argument (closing over them lets XLA constant-fold the gathers).

``--graph-npz`` reuses ``index``/``weight`` arrays saved from ``P.padded_neighbors()`` (the
graph takes minutes to build here).
Writes ``benchmarks/results/bench_potts_sweep_<backend>_<n>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
from bench_potts import RESULTS, _blobs, paper_graph  # noqa: E402 (script dir)

from graphssl.inference.optimize import mean_field as mf
from graphssl.models.potts import default_k


def _best(fn, fn_args, repeats):
    jax.block_until_ready(fn(*fn_args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*fn_args))
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10**6)
    parser.add_argument("--graph-npz", default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--beta", type=float, default=31.05)  # nmfB at 2 %, q = 10
    args = parser.parse_args()
    if args.graph_npz:
        saved = np.load(args.graph_npz)
        index, weight, y = saved["index"], saved["weight"], saved["y"]
    else:
        X, y = _blobs(args.n)
        index, weight = (np.asarray(a) for a in paper_graph(X, default_k(args.n))[1]
                         .padded_neighbors())
    n, q = index.shape[0], 10
    rng = np.random.default_rng(0)
    labels = np.full(n, -1)
    split = rng.choice(n, n // 50, replace=False)
    labels[split] = y[split]
    unary = jnp.asarray(np.eye(q, dtype=np.float32)[np.maximum(labels, 0)]
                        * (labels >= 0)[:, None] * args.beta)
    idx, w = jnp.asarray(index), jnp.asarray(weight, jnp.float32) * args.beta
    clamped = jnp.zeros(n, bool)
    onehot = jnp.zeros((n, q), jnp.float32)
    fields = jnp.asarray(rng.normal(size=(n, q)).astype(np.float32))

    @jax.jit
    def sweep_fused(h, unary, idx, w):  # every array an argument: no constant folding
        phi = jnp.exp(mf._log_softmax_clamped(h, clamped, onehot))
        new = mf.mean_field_fields(phi, unary, idx, w)
        return h + 0.5 * (new - h), jnp.max(jnp.abs(new - h))

    def sweep_library(h, unary, idx, w):
        return mf._solve_parallel(unary, idx, w, clamped, onehot, h, jnp.float32(0.5),
                                  jnp.float32(1e30), 10)[0]

    gather = jax.jit(mf.mean_field_fields)
    perm = mf.locality_order(idx)
    rank = np.empty_like(perm)
    rank[perm] = np.arange(n, dtype=perm.dtype)
    moved = (jnp.asarray(rank[index[perm]], jnp.int32), unary[perm], w[perm])
    phi = jax.nn.softmax(fields, -1)
    cases = {"gather": (gather, (phi, unary, idx, w)),
             "gather_rcm": (gather, (phi[perm], moved[1], moved[0], moved[2])),
             "sweep_fused": (sweep_fused, (fields, unary, idx, w)),
             "sweep_library": (sweep_library, (fields, unary, idx, w)),
             "sweep_library_rcm": (sweep_library, (fields[perm], moved[1], moved[0], moved[2]))}
    rec = {"n": n, "q": q, "d": int(index.shape[1]), "dtype": "float32", "beta": args.beta,
           "backend": jax.default_backend(), "jax": jax.__version__, "repeats": args.repeats,
           "loadavg_before": os.getloadavg()}
    same = float(jnp.max(jnp.abs(sweep_fused(*cases["sweep_fused"][1])[0]
                                 - sweep_library(*cases["sweep_library"][1]))))
    rec["max_abs_difference_fused_vs_library"] = same
    for name, (fn, fn_args) in cases.items():
        rec[f"{name}_seconds"] = _best(fn, fn_args, args.repeats)
        rec[f"{name}_loadavg"] = os.getloadavg()
        print(f"{name:18s} {rec[f'{name}_seconds']:.3f} s  load {os.getloadavg()[0]:.1f}",
              flush=True)
    rec["ratio_sweep_fused_over_library"] = (rec["sweep_fused_seconds"]
                                             / rec["sweep_library_seconds"])
    rec["ratio_gather_over_gather_rcm"] = rec["gather_seconds"] / rec["gather_rcm_seconds"]
    rec["ratio_sweep_library_over_rcm"] = (rec["sweep_library_seconds"]
                                           / rec["sweep_library_rcm_seconds"])
    out = RESULTS / f"bench_potts_sweep_{rec['backend']}_{n}.json"
    out.write_text(json.dumps(rec, indent=1))
    print(json.dumps({k: v for k, v in rec.items() if "ratio" in k}), f"\nwrote {out}")


if __name__ == "__main__":
    main()
