"""Choosing (k, tau) for Walder's mixture with 100 labels: Parzen LOO vs the mixture's own LOO,
and averaging over the grid instead of choosing.

Walder (Sec. 5) picks (k, tau) for 100 labels by the leave-one-out error of the graph Parzen
window over ``k in {5, 10, 20}``, ``tau in {1, 2.5, 5, 10, 20}`` (our grid). Here, per split,
the mixture (gamma 0.8, alpha 0.5, eta known, one chain from the Parzen labels) runs at all 15
settings in one batched call (:func:`graphssl.inference.diffusion_mixture.selection.fit_grid`)
and is read five ways:

* ``parzen LOO``: the setting of the paper's criterion (ties: first grid point);
* ``mixture LOO``: the setting of smallest leave-one-out log loss of the mixture itself
  (conditional predictive ordinates, from states every ``--every`` iterations);
* ``k=10, tau=5``: the 10-label setting, fixed;
* ``uniform average``: the posterior class marginals averaged over the 15 settings;
* ``pseudo-BMA average``: weights proportional to ``prod_i CPO_i`` (pseudo-BMA);
* ``oracle``: the best setting by *test* accuracy (not a method: how much choosing can gain).

The peers of the issue run on the same splits in the same run (scikit-learn LabelSpreading /
LabelPropagation, GraphLearning Laplace / Poisson when installed: ``pip install -e .[peers]``).
Usage::

    GRAPHSSL_DATA=../shared/datasets python benchmarks/bench_diffusion_mixture_selection.py \
        [--datasets digit1,text] [--burn-in 100] [--every 25] [--checkpoints 8] [--splits 12]

Writes ``benchmarks/results/bench_diffusion_mixture_selection.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import time

import jax
import numpy as np
from _portable import portable
from bench_diffusion_mixture import RESULTS, accuracy, load, peers

from graphssl.inference.diffusion_mixture.selection import K_GRID, TAU_GRID, fit_grid

READINGS = ("parzen LOO", "mixture LOO", "k=10, tau=5", "uniform average",
            "pseudo-BMA average", "oracle")


def readings(fit, y, lab_idx) -> dict:
    """Test accuracy of each reading of one split's grid fit."""
    acc = [accuracy(p.argmax(1), y, lab_idx) for p in fit.class_probs]
    grid = [(s.k, s.tau) for s in fit.scores]
    parzen, mixture = fit.choose("parzen"), fit.choose("mixture")
    return {
        "parzen LOO": acc[parzen],
        "mixture LOO": acc[mixture],
        "k=10, tau=5": acc[grid.index((10, 5.0))],
        "uniform average": accuracy(fit.average("uniform").argmax(1), y, lab_idx),
        "pseudo-BMA average": accuracy(fit.average("loo").argmax(1), y, lab_idx),
        "oracle": max(acc),
        "chosen": {"parzen LOO": grid[parzen], "mixture LOO": grid[mixture]},
        "loo_weights_max": float(fit.weights("loo").max()),
        "per_setting": [dict(k=s.k, tau=s.tau, accuracy=a, **{
            f: getattr(s, f) for f in ("parzen_loo_error", "mixture_loo_log_loss",
                                        "mixture_loo_error")}) for s, a in zip(
            fit.scores, acc, strict=True)],
    }


def run_dataset(name, args):
    X, y, splits = load(name)
    eta = np.bincount(y) / y.size
    runs = []
    for s in range(args.splits):
        lab_idx = splits[100][s]
        labels = np.full(y.size, -1)
        labels[lab_idx] = y[lab_idx]
        t = time.perf_counter()
        fit = fit_grid(X, labels, class_prior=eta, alpha=0.5, gamma=args.gamma,
                       key=jax.random.PRNGKey(s), n_checkpoints=args.checkpoints,
                       every=args.every, burn_in=args.burn_in)
        run = dict(split=s, seconds=time.perf_counter() - t, **readings(fit, y, lab_idx))
        runs.append(run)
        print(f"  {name} split {s}: " + ", ".join(f"{r} {run[r]:.3f}" for r in READINGS)
              + f" ({run['seconds']:.0f} s)", flush=True)
    peer = peers(X, y, splits[100][: args.splits])
    return dict(dataset=name, runs=runs, peers=peer)


def table(records) -> str:
    head = ["set"] + list(READINGS) + ["best peer"]
    lines = [" | ".join(f"{h:>20}" for h in head)]
    for rec in records:
        row = [rec["dataset"]] + [f"{np.mean([r[k] for r in rec['runs']]):.4f}"
                                  for k in READINGS]
        best = max(rec["peers"].items(), key=lambda kv: np.mean(kv[1]), default=None)
        row.append(f"{best[0]} {np.mean(best[1]):.4f}" if best else "-")
        lines.append(" | ".join(f"{c:>20}" for c in row))
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--datasets", default="digit1,text")
    p.add_argument("--gamma", type=float, default=0.8)
    p.add_argument("--burn-in", type=int, default=100)
    p.add_argument("--every", type=int, default=25)
    p.add_argument("--checkpoints", type=int, default=8)
    p.add_argument("--splits", type=int, default=12)
    p.add_argument("--out", default=str(RESULTS / "bench_diffusion_mixture_selection.json"))
    args = p.parse_args()
    start = time.perf_counter()
    records = []
    for name in args.datasets.split(","):
        print(f"{name} ...", flush=True)
        records.append(run_dataset(name, args))
    text = table(records)
    print(text)
    out = dict(device=str(jax.devices()[0]), platform=platform.platform(),
               versions={"jax": jax.__version__, "numpy": np.__version__},
               settings=portable(vars(args)), k_grid=list(K_GRID), tau_grid=list(TAU_GRID),
               loadavg=os.getloadavg(), wall_seconds=time.perf_counter() - start,
               records=records, table=text)
    pathlib.Path(args.out).write_text(json.dumps(out, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
