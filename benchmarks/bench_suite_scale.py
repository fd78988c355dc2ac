"""The main job's stages end to end on a large synthetic manifold, each stage timed.

    python benchmarks/bench_suite_scale.py --n 100000            # CPU here
    python benchmarks/bench_suite_scale.py --n 1000000 --gpu     # on the lent GPU

Stages: data (a noisy 2-D manifold embedded in 10-D, 10 classes along the manifold), kNN graph
(k = 10), GRF (conjugate gradient), LGC, Potts naive mean field as the main job's ``potts_mf``
runs it (Bergamim & Breve's row-normalised W, Eq. 9, labels as unit fields, beta from Eq. 27
with gamma = 1, "nmfB"; ``PottsClassifier``'s order "auto": sequential sweep on a CPU, damped
parallel update on an accelerator), and the Potts posterior by Swendsen–Wang (4 chains, a few
hundred sweeps; ``--sweeps 0`` skips it). The load average and the peak resident memory are
recorded beside the stage times. Prints a table and writes
``benchmarks/results/bench_suite_scale_<device>_<n>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import resource
import time

import jax
import numpy as np


def synthetic_manifold(n: int, n_classes: int = 10, dim: int = 10, seed: int = 0):
    """Points on a swirl (2-D intrinsic), randomly rotated into ``dim`` dimensions."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(1.5 * np.pi, 4.5 * np.pi, n)
    h = rng.uniform(0, 10, n)
    plane = np.c_[t * np.cos(t), h, t * np.sin(t)] + rng.normal(0, 0.3, (n, 3))
    rotation, _ = np.linalg.qr(rng.normal(size=(dim, dim)))
    X = np.c_[plane, np.zeros((n, dim - 3))] @ rotation
    y = np.minimum((t - 1.5 * np.pi) / (3 * np.pi) * n_classes, n_classes - 1).astype(int)
    return X.astype(np.float32), y


LOADAVG: dict[str, tuple] = {}


def _timed(fn, stage=None):
    start = time.perf_counter()
    out = fn()
    jax.block_until_ready(out)
    if stage is not None:
        LOADAVG[stage] = os.getloadavg()
    return out, time.perf_counter() - start


def _peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--label-rate", type=float, default=0.01)
    parser.add_argument("--sweeps", type=int, default=200, help="0 skips Swendsen-Wang")
    parser.add_argument("--mf-max-iter", type=int, default=2000)
    parser.add_argument("--gpu", action="store_true", help="expect a GPU (fail if absent)")
    parser.add_argument("--knn-method", default="auto",
                        help="knn_search method (auto: nndescent above 5e4 points in 10-D; "
                             "gemm: blocked float32 products + top-k on the JAX device)")
    args = parser.parse_args(argv)
    if args.gpu and jax.default_backend() != "gpu":
        raise SystemExit("--gpu given but JAX sees no GPU")

    from graphssl import data
    from graphssl.graph import knn_graph, row_normalize
    from graphssl.inference.mcmc import swendsen_wang
    from graphssl.inference.mcmc.chains import sample_chains
    from graphssl.inference.optimize.baselines import harmonic_function, lgc
    from graphssl.inference.optimize.mean_field import (
        MeanFieldOptions,
        mean_field_labels,
        naive_mean_field,
    )
    from graphssl.metrics import accuracy
    from graphssl.models.potts import PottsModel
    from graphssl.models.potts_mode_probability import solve_beta

    stages = {}
    solver = None
    out = pathlib.Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    path = out / f"bench_suite_scale_{jax.default_backend()}_{args.n}.json"

    def partial(stage):  # a run cut short still leaves the stages it finished
        path.write_text(json.dumps({"n": args.n, "partial": True, "last_stage": stage,
                                    "stages_seconds": stages, "stages_loadavg": LOADAVG,
                                    "peak_rss_gib": _peak_rss_gib()}, indent=1))
    (X, y), stages["data"] = _timed(lambda: synthetic_manifold(args.n), "data")
    labelled = data.random_split(y, label_rate=args.label_rate, seed=0)
    y_masked = data.mask_labels(y, labelled)
    graph, stages["knn_graph"] = _timed(
        lambda: knn_graph(X, args.k, on_duplicates="ignore", method=args.knn_method),
        "knn_graph")
    partial("knn_graph")
    n_classes = int(y.max()) + 1
    results = {}
    # on an accelerator the CG runs there (method "jax_cg"); on a CPU, scipy's ("auto")
    solver = "auto" if jax.default_backend() == "cpu" else "jax_cg"
    f_grf, stages["grf"] = _timed(
        lambda: harmonic_function(graph, y_masked, n_classes=n_classes, method=solver), "grf")
    results["grf"] = accuracy(y, np.argmax(np.asarray(f_grf), 1), labelled)
    del f_grf
    partial("grf")
    f_lgc, stages["lgc"] = _timed(
        lambda: lgc(graph, y_masked, n_classes=n_classes, method=solver), "lgc")
    results["lgc"] = accuracy(y, np.argmax(np.asarray(f_lgc), 1), labelled)
    del f_lgc
    partial("lgc")
    beta = solve_beta("nmfB", float(np.mean(y_masked >= 0)), n_classes)
    model, stages["potts_model"] = _timed(
        lambda: PottsModel.from_labels(row_normalize(graph), y_masked, n_classes, beta=beta),
        "potts_model")
    # the main job's order="auto": Gauss-Seidel on a CPU, Gauss-Seidel by colour classes
    # ("chromatic") on an accelerator (at nmfB's beta the 0.5-damped Jacobi update kept a
    # period-2 cycle on this manifold: residual 19.5 after 2000 sweeps at n = 5000)
    cpu = jax.default_backend() == "cpu"
    options = MeanFieldOptions(order="sequential" if cpu else "chromatic", damping=0.5,
                               tol=1e-3, max_iter=args.mf_max_iter)
    (solution, info), stages["potts_mean_field"] = _timed(
        lambda: naive_mean_field(model, options=options), "potts_mean_field")
    modes = mean_field_labels(solution, model.unary_logits())
    results["potts_mf"] = accuracy(y, np.asarray(modes), labelled)
    del solution
    partial("potts_mean_field")
    if args.sweeps > 0:
        from graphssl.inference.mcmc.chains import label_marginals

        sampled = PottsModel.create(graph, n_classes, beta=5.0, labels=y_masked)
        samples, stages["potts_swendsen_wang"] = _timed(
            lambda: sample_chains(swendsen_wang(), sampled, jax.random.key(0), n_chains=4,
                                  n_samples=args.sweeps, burn_in=args.sweeps // 4),
            "potts_swendsen_wang")
        marginals = np.asarray(label_marginals(samples, n_classes))
        results["potts_sw"] = accuracy(y, np.argmax(marginals, 1), labelled)

    device = jax.devices()[0].device_kind
    print(f"n = {args.n}, k = {args.k}, edges = {graph.n_edges}, classes = {n_classes}, "
          f"labelled = {len(labelled)}, device = {device}")
    print(f"{'stage':<22}{'seconds':>10}")
    for stage, seconds in stages.items():
        print(f"{stage:<22}{seconds:>10.3f}")
    print("accuracy:", {k: round(v, 4) for k, v in results.items()},
          "| mean-field iterations:", int(info.iterations), "converged:", bool(info.converged),
          f"| peak RSS {_peak_rss_gib():.2f} GiB | load {os.getloadavg()}")
    record = {"n": args.n, "k": args.k, "n_edges": graph.n_edges, "device": device,
              "backend": jax.default_backend(), "jax": jax.__version__,
              "python": platform.python_version(), "cpu_count": os.cpu_count(),
              "stages_seconds": stages, "stages_loadavg": LOADAVG,
              "peak_rss_gib": _peak_rss_gib(), "accuracy": results,
              "mean_field": {"beta": beta, "preset": "nmfB", "iterations": int(info.iterations),
                             "converged": bool(info.converged),
                             "residual": float(info.residual), "options": options._asdict()},
              "sweeps": args.sweeps, "label_rate": args.label_rate, "cg_solver": solver,
              "knn_method": args.knn_method}
    path.write_text(json.dumps(record, indent=1))
    print("wrote", path)


if __name__ == "__main__":
    main()
