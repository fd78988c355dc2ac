"""Boltzmann-machine MRF (Zhu & Ghahramani 2002): learning speed.

1. One exact-enumeration gradient step on the 16-point double arcs (extended model, 2 noisy
   labels: 2 x 2^16 configurations). The paper: 6 s per hill-climbing step at 1 GHz. Peer in the
   same run: autodiff through the generic enumerator ``graphssl.inference.exact.enumeration``.
2. Swendsen-Wang-based learning of sigma (basic model, kNN pairs, exponential prior of Eq. 83)
   on two moons, n = 1000, 10 labels, to convergence: time per gradient step, iterations,
   accuracy of the posterior-mean labels (peer: scikit-learn LabelSpreading on the same split).

Usage: ``python benchmarks/bench_boltzmann.py [--n 1000] [--rate 20] [--device cpu|gpu]``.
Writes ``benchmarks/results/bench_boltzmann_<device>.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np


def _median_time(fn, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t)
    return statistics.median(times), times


def bench_enumeration(repeats: int) -> dict:
    from graphssl import data
    from graphssl.inference.boltzmann import learning as bl
    from graphssl.inference.exact.enumeration import exact_log_partition
    from graphssl.models.boltzmann import ExtendedParams, pair_geometry

    X = data.double_arcs().X
    labels = np.full(16, -1)
    labels[[0, 15]] = [0, 1]
    problem = bl.BoltzmannProblem(pair_geometry(X), labels, 2, "extended")
    theta = ExtendedParams(
        jnp.asarray(1.1), jnp.asarray([0.8, -1.9]), jnp.asarray([1.0, 1.0]), jnp.asarray(1.6)
    )
    oracle = bl.GradientOracle(problem)
    state = oracle.init()
    t = time.perf_counter()
    oracle(state, theta)
    first = time.perf_counter() - t
    ours, _ = _median_time(lambda: oracle(state, theta)[1].gradient, repeats)

    template = problem.template()

    def peer_grad(th):  # the generic enumerator reads the clamp mask concretely: no outer jit
        def loglik(th):
            c, u, off = bl.models(template, problem.geometry, th)
            return exact_log_partition(c) - exact_log_partition(u) + off

        return jax.value_and_grad(loglik)(th)

    t = time.perf_counter()
    jax.block_until_ready(peer_grad(theta))
    peer_first = time.perf_counter() - t
    peer, _ = _median_time(lambda: peer_grad(theta), repeats)
    g_ours = jax.flatten_util.ravel_pytree(oracle(state, theta)[1].gradient)[0]
    g_peer = jax.flatten_util.ravel_pytree(peer_grad(theta)[1])[0]
    return dict(
        n_points=16,
        configurations=2 * 2**16,
        ours_step_s=ours,
        ours_first_call_s=first,
        peer_step_s=peer,
        peer_first_call_s=peer_first,
        peer_over_ours=peer / ours,
        paper_step_s=6.0,
        max_abs_gradient_difference=float(jnp.max(jnp.abs(g_ours - g_peer))),
    )


def bench_swendsen_wang(
    n: int, rate: float, k: int, n_chains: int, n_samples: int, max_iter: int
) -> dict:
    from sklearn.semi_supervised import LabelSpreading

    from graphssl import data
    from graphssl.inference.boltzmann import learning as bl
    from graphssl.models.boltzmann import pair_geometry

    ds = data.two_moons(n, seed=0)
    rng = np.random.default_rng(0)
    idx = np.r_[
        rng.choice(np.flatnonzero(ds.y == 0), 5, replace=False),
        rng.choice(np.flatnonzero(ds.y == 1), 5, replace=False),
    ]
    labels = np.full(n, -1)
    labels[idx] = ds.y[idx]
    geometry = pair_geometry(ds.X, k=k)
    problem = bl.BoltzmannProblem(geometry, labels, 2, "basic")
    d = np.sqrt(np.asarray(geometry.sq_dist))
    prior = bl.ExponentialSigmaPrior(
        rate=rate, sigma_max=float(np.sqrt(((ds.X[:, None] - ds.X[None]) ** 2).sum(-1).max()))
    )
    chains = bl.ChainSettings(n_chains=n_chains, n_samples=n_samples, burn_in=100)
    oracle = bl.GradientOracle(problem, "swendsen_wang", prior, chains)
    start = bl.BasicParams(jnp.log(jnp.asarray(float(np.median(d)))))
    t = time.perf_counter()
    oracle(oracle.init(jax.random.key(1)), start)  # compile + burn-in
    warm = time.perf_counter() - t
    t = time.perf_counter()
    theta, info = bl.adaptive_hill_climb(
        oracle, start, key=jax.random.key(0), step=0.002, min_step=1e-5, max_iter=max_iter,
        xtol=1e-3
    )
    total = time.perf_counter() - t
    steps = info["n_evaluations"]
    post = bl.posterior(
        problem,
        theta,
        method="swendsen_wang",
        key=jax.random.key(1),
        chains=bl.ChainSettings(n_chains=4, n_samples=1000, burn_in=200),
    )
    unl = labels < 0
    acc = float(np.mean(post.posterior_mean_labels[unl] == ds.y[unl]))
    peer = LabelSpreading(kernel="knn", n_neighbors=k).fit(ds.X, labels)
    peer_acc = float(np.mean(peer.transduction_[unl] == ds.y[unl]))
    return dict(
        n_points=n,
        n_labels=10,
        k=k,
        n_edges=int(geometry.senders.shape[0]),
        prior_rate=rate,
        chains_per_phase=n_chains,
        draws_per_chain=n_samples,
        first_call_s=warm,
        gradient_steps=steps,
        time_per_gradient_step_s=total / max(steps, 1),
        total_learning_s=total,
        iterations=info["iterations"],
        converged=info["converged"],
        reason=info["reason"],
        sigma_learned=float(jnp.exp(theta.log_sigma)),
        sigma_start=float(np.median(d)),
        accuracy_unlabelled=acc,
        label_spreading_accuracy=peer_acc,
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--rate", type=float, default=20.0, help="lambda of the prior, Eq. 83")
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--max-iter", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    ap.add_argument("--x64", action="store_true", help="float64 (default float32)")
    args = ap.parse_args()
    if args.device == "cpu":
        jax.config.update("jax_platforms", "cpu")
    if args.x64:
        jax.config.update("jax_enable_x64", True)
    device = str(jax.devices()[0])
    enum = bench_enumeration(args.repeats)
    sw = bench_swendsen_wang(args.n, args.rate, args.k, args.chains, args.samples, args.max_iter)
    result = dict(
        device=device,
        platform=platform.platform(),
        jax=jax.__version__,
        x64=bool(args.x64),
        enumeration=enum,
        swendsen_wang=sw,
    )
    out = pathlib.Path(__file__).parent / "results" / f"bench_boltzmann_{args.device}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"device: {device}  jax {jax.__version__}  x64={args.x64}")
    print("| benchmark | ours | peer | ratio peer/ours | paper |")
    print("|---|---|---|---|---|")
    print(
        "| exact gradient step, 16-pt double arcs (2 x 2^16 configs) "
        f"| {enum['ours_step_s']:.3f} s | {enum['peer_step_s']:.3f} s (autodiff, generic "
        f"enumerator) | {enum['peer_over_ours']:.1f} | 6 s at 1 GHz |"
    )
    print(
        f"| SW learning, two moons n={sw['n_points']}, 10 labels: per gradient step "
        f"| {sw['time_per_gradient_step_s']:.3f} s | | | |"
    )
    print(
        f"| SW learning: steps / converged / sigma | {sw['gradient_steps']} / {sw['converged']} "
        f"({sw['reason']}) / {sw['sigma_learned']:.4f} | | | |"
    )
    print(
        f"| accuracy on unlabelled | {sw['accuracy_unlabelled']:.3f} "
        f"| {sw['label_spreading_accuracy']:.3f} (LabelSpreading knn) | | |"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
