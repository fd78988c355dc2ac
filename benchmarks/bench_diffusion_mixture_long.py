"""Longer chains for the 100-label goal of Walder's mixture: posterior mean vs peers.

``bench_diffusion_mixture.py`` runs all 24 split-runs of a data set at a few hundred
iterations; the 10^5-iteration R-hat run (``bench_diffusion_mixture_rhat.py``, Digit1 split 0,
10 labels) showed the posterior mean still rising with the chain length (0.956 at 600
iterations, 0.979 at 10^5). This script measures the goal "posterior mean at or above the best
peer on Digit1 and Text" at a longer chain: the 12 splits with 100 labels only, gamma = 0.8,
(k, tau) by the leave-one-out Parzen grid of the main benchmark, Parzen-window start, one chain
per split, the 12 runs batched in one sampler call; the posterior mean (Rao-Blackwellised
class marginals over all iterations after burn-in), and the label frequencies of the first
half of the thinned draws (does it still move?).
Peers on the same splits in the same run: scikit-learn LabelSpreading / LabelPropagation,
GraphLearning laplace / poisson.

Usage::

    python benchmarks/bench_diffusion_mixture_long.py [--iterations 5000] [--burn-in 1000]
        [--datasets digit1,text]

Writes ``benchmarks/results/bench_diffusion_mixture_long.json`` after each data set.
"""

from __future__ import annotations

import argparse
import json
import os

import jax
import numpy as np
from _portable import portable
from bench_diffusion_mixture import (
    RESULTS,
    Diffusions,
    accuracy,
    load,
    loo_select,
    peers,
    split_run,
    timed_sampler,
)

from graphssl.inference.diffusion_mixture import sampler as dms

GAMMA = 0.8
LABELS = 100


def label_frequency(draws, C):
    """Per-node class frequencies ``float[m, C]`` of label draws ``int[chains, draws, m]``."""
    return (np.asarray(draws)[..., None] == np.arange(C)).mean(axis=(0, 1))


def run_dataset(name, args, key):
    X, y, splits = load(name)
    C = int(y.max()) + 1
    eta = np.bincount(y, minlength=C) / y.size
    diff = Diffusions(X)
    models, inits, meta = [], [], []
    for s, lab_idx in enumerate(splits[LABELS]):
        k, tau, loo = loo_select(diff, y, lab_idx, eta)
        model, parzen = split_run(diff, y, lab_idx, eta, k, tau, gamma=GAMMA)
        inits.append(parzen)
        models.append(model)
        meta.append(dict(split=s, k=k, tau=tau, loo_error=loo,
                         parzen=accuracy(parzen, y, lab_idx)))
    batch = dms.stack_models(models, width=96)
    static = dict(n_chains=1, n_iterations=args.iterations, burn_in=args.burn_in,
                  thin=args.thin, max_components=2, moves=(1, 1, 0), init_beta="self")
    init = np.stack(inits).astype(np.int32)
    load_before = os.getloadavg()
    samples, run_s, compile_s = timed_sampler(batch, key, static, init)
    post = dms.class_marginals(samples, len(models))  # Rao-Blackwellised, all iterations
    draws = np.asarray(samples.labels)  # [splits * chains, draws, m], split-major
    draws = draws.reshape((len(models), -1) + draws.shape[1:])
    half = draws.shape[2] // 2
    for r, info in enumerate(meta):
        lab_idx = splits[LABELS][info["split"]]
        info["mean"] = accuracy(post[r].argmax(1), y, lab_idx)
        info["mean_first_half"] = accuracy(label_frequency(draws[r, :, :half], C).argmax(1),
                                           y, lab_idx)
    return dict(dataset=name, labels=LABELS, gamma=GAMMA, runs=meta,
                iterations=args.iterations, burn_in=args.burn_in, thin=args.thin,
                compile_seconds=compile_s, run_seconds=run_s,
                iterations_per_second=(args.iterations + args.burn_in) / run_s,
                loadavg_before=load_before, loadavg_after=os.getloadavg(),
                peers=peers(X, y, splits[LABELS]))


def summary(rec):
    mean = lambda key: float(np.mean([r[key] for r in rec["runs"]]))  # noqa: E731
    peers = {m: float(np.mean(v)) for m, v in rec["peers"].items()}
    best = max(peers, key=peers.get)
    return dict(mixture_mean=mean("mean"), mixture_mean_first_half=mean("mean_first_half"),
                parzen=mean("parzen"), peers=peers, best_peer=best,
                at_or_above_best_peer=mean("mean") >= peers[best])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--datasets", default="digit1,text")
    p.add_argument("--iterations", type=int, default=5000)
    p.add_argument("--burn-in", type=int, default=1000)
    p.add_argument("--thin", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(RESULTS / "bench_diffusion_mixture_long.json"))
    args = p.parse_args()
    out = dict(device=str(jax.devices()[0]), settings=portable(vars(args)), records=[], summary={})
    key = jax.random.PRNGKey(args.seed)
    for name in args.datasets.split(","):
        key, sub = jax.random.split(key)
        rec = run_dataset(name, args, sub)
        out["records"].append(rec)
        out["summary"][name] = s = summary(rec)
        print(f"{name}, {LABELS} labels, gamma {GAMMA}: {rec['iterations']} iterations "
              f"({rec['iterations_per_second']:.1f} it/s for 12 runs): posterior mean "
              f"{s['mixture_mean']:.4f} (first half {s['mixture_mean_first_half']:.4f}), "
              f"Parzen {s['parzen']:.4f}; peers "
              + ", ".join(f"{m} {v:.4f}" for m, v in s["peers"].items()), flush=True)
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
