"""GRF from features in one XLA program (``harmonic_function_from_features``), stage by stage,
and LGC the same way (``lgc_from_features``), against scikit-learn LabelSpreading end to end
in the same run (issue 2's goal: 10x).

usps_full (9298 x 256), 2 % labels (every class present), ``--splits`` random splits, best of
``--repeats`` per split. Stages of ours: host checks + float32 copy, host -> device copy, the
kNN search alone on device-resident X, the whole program on device-resident X, and the
public call (everything, labels back on the host). Bytes: X in float32 is n d 4 bytes; the
n^2 d products are the arithmetic floor of an exact search.

    python benchmarks/bench_end_to_end.py [--dataset usps_full] [--splits 5] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from graphssl.data import load_dataset, random_splits
from graphssl.inference.optimize.baselines import end_to_end as e2e
from graphssl.inference.optimize.baselines.solvers import default_maxiter
from graphssl.neighbors import exact_knn_traced, query_blocks
from graphssl.validation import check_features

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
K = 10


def best_of(repeats, fn, *args):
    out, best = None, np.inf
    for _ in range(repeats):
        t = time.perf_counter()
        out = jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - t)
    return out, best


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="usps_full")
    p.add_argument("--splits", type=int, default=5)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--tag", default="")
    args = p.parse_args()
    from sklearn.semi_supervised import LabelSpreading

    ds = load_dataset(args.dataset)
    X, y = np.asarray(ds.X, np.float64), np.asarray(ds.y)
    n, d = X.shape
    C = int(y.max()) + 1
    splits = random_splits(y, label_rate=0.02, n_splits=args.splits, seed=0)
    n_blocks, rows = query_blocks(n)
    knn = jax.jit(exact_knn_traced, static_argnums=(1, 2, 3))
    rows_out = []
    for s, lab_idx in enumerate(splits):
        labels = -np.ones(n, int)
        labels[lab_idx] = y[lab_idx]
        mask = labels < 0

        def prep():
            return np.asarray(check_features(X), np.float32)

        X32, t_prep = best_of(args.repeats, prep)
        Xd, t_copy = best_of(args.repeats, jax.device_put, X32)
        _, t_knn = best_of(args.repeats + 1, knn, Xd, K, n_blocks, rows)
        lab_d = jnp.asarray(labels, jnp.int32)

        def program(Xd=Xd, lab_d=lab_d):
            return e2e._pipeline(Xd, lab_d, jnp.float32(0.0), jnp.float32(1e-3),
                                 default_maxiter(n), jnp.float32(0.0), k=K, n_classes=C,
                                 n_blocks=n_blocks, rows=rows, normalize_graph=True,
                                 model="grf")

        out, t_program = best_of(args.repeats + 1, program)
        def public_call(labels=labels):
            return e2e.harmonic_function_from_features(X, labels, k=K, n_classes=C, tol=1e-3)

        public, t_public = best_of(args.repeats + 1, public_call)

        def lgc_call(labels=labels):
            return e2e.lgc_from_features(X, labels, k=K, n_classes=C, tol=1e-3)

        lgc_out, t_lgc = best_of(args.repeats + 1, lgc_call)

        def spreading(labels=labels):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return LabelSpreading(kernel="knn", n_neighbors=K).fit(X, labels).transduction_

        pred_ls, t_ls = best_of(args.repeats, spreading)
        row = dict(split=s, prep=t_prep, host_to_device=t_copy, knn=t_knn, program=t_program,
                   public=t_public, cg_iterations=int(out[2][0]),
                   cg_seconds_per_iteration=(t_program - t_knn) / max(int(out[2][0]), 1),
                   accuracy=float(np.mean(public.labels[mask] == y[mask])),
                   lgc=t_lgc, lgc_accuracy=float(np.mean(lgc_out.labels[mask] == y[mask])),
                   label_spreading=t_ls,
                   label_spreading_accuracy=float(np.mean(pred_ls[mask] == y[mask])),
                   ratio=t_ls / t_public, ratio_lgc=t_ls / t_lgc)
        rows_out.append(row)
        print(" ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}"
                       for k, v in row.items()), flush=True)
    mean = {k: float(np.mean([r[k] for r in rows_out])) for k in rows_out[0] if k != "split"}
    mean["ratio_of_means"] = mean["label_spreading"] / mean["public"]
    print(f"\n{args.dataset}, {len(splits)} splits, device {jax.devices()[0]}:")
    for k, v in mean.items():
        print(f"  {k:28s} {v:.4f}")
    print(f"  floor: {2 * n * n * d / 1e9:.1f} GFLOP of products, X {n * d * 4 / 1e6:.1f} MB")
    out = dict(device=str(jax.devices()[0]), platform=platform.platform(),
               versions=dict(jax=jax.__version__), dataset=args.dataset, n=n, d=d, k=K,
               repeats=args.repeats, rows=rows_out, mean=mean)
    tag = f"_{args.tag}" if args.tag else ""
    path = RESULTS / f"bench_end_to_end_{args.dataset}{tag}.json"
    path.write_text(json.dumps(out, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
